//! Property tests (proptest): random MachineSets in the shape of the real CRD (the real
//! GCP, AWS and Azure fixtures with random labels, annotations whose keys hold `~` and
//! `/`, ownerReferences, unknown fields at every level, 0–5 disks with random `boot` and
//! `image`, random providerSpec kinds and values) against random snapshots (gate,
//! architectures, multi-arch, enrollment, platform, EC2's answers, stub Ignition):
//!
//! - the decision never panics, and the webhook (`admission::review` on the bytes of an
//!   AdmissionReview) decides exactly as `decide_object` does;
//! - a patch, applied by the `json-patch` crate, touches only the image path(s) and the
//!   boot-image annotation, sets them to the target, and deciding again gives no patch;
//!   in the end-to-end tier (`--features e2e`), a sample of the patches is also applied by
//!   the apiserver's own library (evanphx, `tests/support/evanphx.rs`) with the same result;
//! - the toucher's plan holds exactly the MachineSets the webhook would change.
//!
//! 10,000 cases per property by default; `PROPTEST_CASES=N` for more (or fewer).

use crate::support;

use std::sync::LazyLock;
#[cfg(feature = "e2e")]
use std::sync::atomic::{AtomicUsize, Ordering};

use bootimage_webhook::cluster::touch;
use bootimage_webhook::core::decision::{self, BOOT_IMAGE_ANNOTATION, Decision};
use bootimage_webhook::core::platforms::aws::{AwsLearned, Described};
use bootimage_webhook::core::reason::Reason;
use bootimage_webhook::core::snapshot::{Arch, Enrollment, Gate, Snapshot, Stub, Stubs};
use bootimage_webhook::core::view::{Annotations as Slot, MachineSetView, ProviderSpecValue};
use bootimage_webhook::serve::admission;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, TestCaseError};
use serde_json::{Value, json};

const PROVIDER: &str = "/spec/template/spec/providerSpec/value";
const FOREIGN_AMI: &str = "ami-0123456789abcdef0";
const OLD_GCP: &str = "projects/rhcos-cloud/global/images/rhcos-9-6-20250826-1-gcp-x86-64";

fn config() -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    // Failures are kept as regression cases (tests/fast/properties.proptest-regressions).
    let regressions = FileFailurePersistence::WithSource("proptest-regressions");
    Config {
        cases,
        // ChaCha unoptimised (the test profile) costs more than the decision itself.
        rng_algorithm: proptest::test_runner::RngAlgorithm::XorShift,
        failure_persistence: Some(Box::new(regressions)),
        ..Config::default()
    }
}

struct Bases {
    gcp: Value,
    aws: Value,
    azure: Value,
    snapshot: Snapshot,
    stream_amis: Vec<String>,
    review: Value,
}

static BASES: LazyLock<Bases> = LazyLock::new(|| {
    let stream = support::fixture("stream-coreos-rhel-9.installer.json");
    let stream_amis = ["x86_64", "aarch64"]
        .iter()
        .flat_map(|a| {
            ["us-east-1", "eu-west-1"].map(|r| {
                stream["architectures"][a]["images"]["aws"]["regions"][r]["image"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
        })
        .collect();
    Bases {
        gcp: support::fixture("machineset-gcp-build02-infra-a.yaml"),
        aws: support::fixture("machineset-aws-build01-ci-tests-worker-us-east-1a.yaml"),
        azure: support::fixture("machineset-azure.openshift-docs-sample.rendered.yaml"),
        snapshot: support::offline_snapshot(),
        stream_amis,
        review: support::fixture("admissionreview-v1-machineset-gcp-update.assembled.json"),
    }
});

// ---- JSON building blocks ----

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        // Dyadic fractions: exact in binary and in short decimal, so that a value read
        // back from Go's output compares equal (serde_json's default float parsing is not
        // correctly rounded for every long decimal).
        (any::<i32>(), 0..8u32).prop_map(|(m, e)| Value::from(f64::from(m) / f64::from(1u32 << e))),
        "[ -~]{0,12}".prop_map(Value::from),
        // Escapes and non-ASCII, which the borrowed view must unescape or copy.
        prop::sample::select(&["é/~", "\u{0}\"\\", "\u{1F600}", "a\nb", "\u{2028}"][..])
            .prop_map(Value::from),
    ]
}

fn any_json() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(key(), inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Keys as Kubernetes allows them, and the `~` and `/` JSON pointers must escape.
fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z][a-z0-9.-]{0,8}",
        "[a-z]{1,5}\\.[a-z]{1,5}/[a-z~0-9]{1,6}",
        Just("a~1b".to_owned()),
        Just("~0/~1".to_owned()),
        Just("x~".to_owned()),
    ]
}

/// Unknown fields for one object (keys that no rule reads).
fn unknown() -> impl Strategy<Value = Vec<(String, Value)>> {
    prop::collection::vec((key().prop_map(|k| format!("zz-{k}")), any_json()), 0..3)
}

fn string_map(extra: Vec<(String, String)>) -> Value {
    Value::Object(
        extra
            .into_iter()
            .map(|(k, v)| (k, Value::String(v)))
            .collect(),
    )
}

fn merge(target: &mut Value, fields: Vec<(String, Value)>) {
    if let Some(o) = target.as_object_mut() {
        for (k, v) in fields {
            o.insert(k, v);
        }
    }
}

// ---- MachineSets ----

#[derive(Debug, Clone)]
enum Labels {
    Absent,
    Null,
    Map(Vec<(String, String)>),
}

fn labels() -> impl Strategy<Value = Labels> {
    let special = prop_oneof![
        6 => Just(None),
        1 => Just(Some(("bootimages.machineconfiguration.openshift.io/managed", "false"))),
        1 => Just(Some(("bootimages.machineconfiguration.openshift.io/managed", "true"))),
        1 => Just(Some(("machineconfiguration.openshift.io/osstream", "rhel-9"))),
        1 => Just(Some(("machineconfiguration.openshift.io/osstream", "rhel-10"))),
        4 => Just(Some(("role", "worker"))),
    ];
    prop_oneof![
        1 => Just(Labels::Absent),
        1 => Just(Labels::Null),
        8 => (prop::collection::vec((key(), "[a-z0-9]{0,6}"), 0..4), special).prop_map(|(mut l, s)| {
            if let Some((k, v)) = s {
                l.push((k.to_owned(), v.to_owned()));
            }
            Labels::Map(l)
        }),
    ]
}

#[derive(Debug, Clone)]
enum Annotations {
    Absent,
    Null,
    /// Not a map: the apiserver would refuse it, the decision must not fall over.
    Odd(Value),
    Map(Vec<(String, String)>),
}

fn annotations() -> impl Strategy<Value = Annotations> {
    let arch = prop_oneof![
        10 => Just(None),
        1 => Just(Some("kubernetes.io/arch=amd64")),
        1 => Just(Some("kubernetes.io/arch=arm64")),
        1 => Just(Some("a=b,kubernetes.io/arch=arm64,kubernetes.io/arch=amd64")),
        1 => Just(Some("kubernetes.io/arch=ppc64le")),
        1 => Just(Some("kubernetes.io/arch=sparc")),
        1 => Just(Some("")),
    ];
    let recorded = prop_oneof![
        3 => Just(None),
        1 => Just(Some(support::CURRENT_X86.to_owned())),
        1 => Just(Some(OLD_GCP.to_owned())),
    ];
    prop_oneof![
        1 => Just(Annotations::Absent),
        1 => Just(Annotations::Null),
        1 => prop_oneof![Just(json!("x")), Just(json!([1])), Just(json!(3))].prop_map(Annotations::Odd),
        8 => (prop::collection::vec((key(), "[ -~]{0,10}"), 0..4), arch, recorded).prop_map(|(mut a, arch, rec)| {
            if let Some(v) = arch {
                a.push((decision::ARCH_ANNOTATION.to_owned(), v.to_owned()));
            }
            if let Some(v) = rec {
                a.push((BOOT_IMAGE_ANNOTATION.to_owned(), v));
            }
            Annotations::Map(a)
        }),
    ]
}

fn gcp_image() -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        2 => Just(None),
        3 => Just(Some(json!(OLD_GCP))),
        3 => Just(Some(json!(support::CURRENT_X86))),
        1 => Just(Some(json!(support::CURRENT_ARM))),
        1 => Just(Some(json!("projects/my-project/global/images/custom"))),
        1 => Just(Some(json!(""))),
        1 => Just(Some(json!("https://www.googleapis.com/compute/v1/projects/rhcos-cloud/global/images/x"))),
        1 => leaf().prop_map(Some),
    ]
}

fn disk() -> impl Strategy<Value = Value> {
    let boot = prop_oneof![
        3 => Just(Some(json!(true))),
        2 => Just(Some(json!(false))),
        1 => Just(None),
        1 => Just(Some(json!("true"))),
    ];
    (boot, gcp_image(), unknown()).prop_map(|(boot, image, extra)| {
        let mut d = json!({"autoDelete": true, "sizeGb": 128, "type": "pd-ssd"});
        if let Some(b) = boot {
            d["boot"] = b;
        }
        if let Some(i) = image {
            d["image"] = i;
        }
        merge(&mut d, extra);
        d
    })
}

fn gcp_spec() -> impl Strategy<Value = Value> {
    let disks = prop_oneof![
        8 => prop::collection::vec(disk(), 0..=5).prop_map(Value::Array),
        1 => Just(Value::Null),
        1 => leaf(),
    ];
    (disks, unknown()).prop_map(|(disks, extra)| {
        let mut s = BASES.gcp.pointer(PROVIDER).unwrap().clone();
        s["disks"] = disks;
        merge(&mut s, extra);
        s
    })
}

fn aws_spec() -> impl Strategy<Value = Value> {
    let ami = prop_oneof![
        3 => (0..4usize).prop_map(|i| json!({"id": BASES.stream_amis[i]})),
        2 => Just(json!({"id": FOREIGN_AMI})),
        1 => Just(json!({"arn": "arn:aws:ec2:us-east-1::image/ami-1"})),
        1 => Just(json!({"id": FOREIGN_AMI, "filters": [{"name": "x", "values": ["y"]}]})),
        1 => leaf(),
    ];
    let region = prop_oneof![
        Just(Some("us-east-1")),
        Just(Some("eu-west-1")),
        Just(Some("mars-north-1")),
        Just(None),
    ];
    (ami, region, unknown(), unknown()).prop_map(|(mut ami, region, extra, extra_ami)| {
        let mut s = BASES.aws.pointer(PROVIDER).unwrap().clone();
        merge(&mut ami, extra_ami);
        s["ami"] = ami;
        match region {
            Some(r) => s["placement"]["region"] = json!(r),
            None => {
                s["placement"].as_object_mut().map(|p| p.remove("region"));
            }
        }
        merge(&mut s, extra);
        s
    })
}

fn azure_spec() -> impl Strategy<Value = Value> {
    let image = prop_oneof![
        Just(
            json!({"offer": "", "publisher": "", "resourceID": "/resourceGroups/rg/providers/Microsoft.Compute/images/x", "sku": "", "version": ""})
        ),
        Just(
            json!({"offer": "", "publisher": "", "resourceID": "/resourceGroups/rg/providers/Microsoft.Compute/images/x-gen2", "sku": "", "version": ""})
        ),
        Just(
            json!({"publisher": "azureopenshift", "offer": "aro4", "sku": "aro_417", "version": "417.94.20240701", "type": "MarketplaceNoPlan", "resourceID": ""})
        ),
        Just(
            json!({"publisher": "azureopenshift", "offer": "aro4", "sku": "417-v2", "version": "417.94.20240701", "type": "MarketplaceNoPlan", "resourceID": ""})
        ),
        Just(
            json!({"publisher": "redhat", "offer": "rh-ocp-worker", "sku": "rh-ocp-worker", "version": "4.17.2024", "type": "MarketplaceWithPlan", "resourceID": ""})
        ),
        Just(
            json!({"publisher": "redhat-limited", "offer": "rh-opp-worker", "sku": "rh-opp-worker-gen1", "version": "4.17.2024", "type": "MarketplaceWithPlan", "resourceID": ""})
        ),
        Just(json!({"publisher": "me", "offer": "mine", "sku": "1", "version": "1"})),
        leaf(),
    ];
    let security = prop_oneof![
        4 => Just(None),
        1 => Just(Some(json!({"settings": {"securityType": "TrustedLaunch"}}))),
    ];
    (image, security, unknown(), unknown()).prop_map(|(mut image, security, extra, extra_image)| {
        let mut s = BASES.azure.pointer(PROVIDER).unwrap().clone();
        merge(&mut image, extra_image);
        s["image"] = image;
        if let Some(sec) = security {
            s["securityProfile"] = sec;
        }
        merge(&mut s, extra);
        s
    })
}

fn provider_spec() -> impl Strategy<Value = (&'static str, Value)> {
    prop_oneof![
        4 => gcp_spec().prop_map(|s| ("gcp", s)),
        3 => aws_spec().prop_map(|s| ("aws", s)),
        3 => azure_spec().prop_map(|s| ("azure", s)),
        // Another kind, a kind that is not a string, a value that is not an object.
        1 => (prop_oneof![Just(json!("OpenstackProviderSpec")), Just(json!(7)), Just(Value::Null)], unknown())
            .prop_map(|(kind, extra)| {
                let mut s = json!({"apiVersion": "machine.openshift.io/v1beta1", "kind": kind});
                merge(&mut s, extra);
                ("gcp", s)
            }),
        1 => leaf().prop_map(|v| ("gcp", v)),
    ]
}

fn owner_references() -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        14 => Just(None),
        2 => Just(Some(json!([]))),
        1 => Just(Some(json!([{"apiVersion": "hive.openshift.io/v1", "kind": "MachinePool", "name": "w", "uid": "u"}]))),
        1 => leaf().prop_map(Some),
    ]
}

prop_compose! {
    fn machineset()(
        (base, spec) in provider_spec(),
        labels in labels(),
        annotations in annotations(),
        owners in owner_references(),
        windows in prop::bool::weighted(0.03),
        template_labels in prop::collection::vec((key(), "[a-z0-9]{0,6}"), 0..3),
        extra in (unknown(), unknown(), unknown(), unknown(), unknown(), unknown(), unknown()),
        name in "[a-z][a-z0-9-]{0,20}",
    ) -> Value {
        let b = &*BASES;
        let mut ms = match base {
            "aws" => b.aws.clone(),
            "azure" => b.azure.clone(),
            _ => b.gcp.clone(),
        };
        ms["metadata"]["name"] = json!(name);
        let meta = ms["metadata"].as_object_mut().unwrap();
        match labels {
            Labels::Absent => { meta.remove("labels"); }
            Labels::Null => { meta.insert("labels".into(), Value::Null); }
            Labels::Map(l) => { meta.insert("labels".into(), string_map(l)); }
        }
        match annotations {
            Annotations::Absent => { meta.remove("annotations"); }
            Annotations::Null => { meta.insert("annotations".into(), Value::Null); }
            Annotations::Odd(v) => { meta.insert("annotations".into(), v); }
            Annotations::Map(a) => { meta.insert("annotations".into(), string_map(a)); }
        }
        if let Some(o) = owners {
            meta.insert("ownerReferences".into(), o);
        }
        let mut tl = template_labels;
        if windows {
            tl.push((decision::OS_ID_LABEL.to_owned(), "Windows".to_owned()));
        }
        ms["spec"]["template"]["metadata"]["labels"] = string_map(tl);
        ms["spec"]["template"]["spec"]["providerSpec"]["value"] = spec;
        let (e0, e1, e2, e3, e4, e5, e6) = extra;
        merge(&mut ms, e0);
        merge(&mut ms["metadata"], e1);
        merge(&mut ms["spec"], e2);
        merge(&mut ms["spec"]["template"], e3);
        merge(&mut ms["spec"]["template"]["metadata"], e4);
        merge(&mut ms["spec"]["template"]["spec"], e5);
        merge(&mut ms["spec"]["template"]["spec"]["providerSpec"], e6);
        ms
    }
}

// ---- Snapshots ----

prop_compose! {
    fn snapshot()(
        ready in prop::bool::weighted(0.97),
        gate in prop::bool::weighted(0.9),
        arch in prop_oneof![8 => Just(Some(Arch::Amd64)), 1 => Just(Some(Arch::Arm64)), 1 => Just(Some(Arch::Ppc64le)), 1 => Just(None)],
        multi in prop::bool::weighted(0.1),
        enrollment in 0..12u8,
        platform in prop_oneof![8 => Just(None), 1 => Just(Some("GCP")), 1 => Just(Some("AWS")), 1 => Just(Some("Azure")), 1 => Just(Some("VSphere"))],
        ec2 in 0..4u8,
        stub in prop_oneof![4 => Just(None), 1 => Just(Some("2.2.0")), 1 => Just(Some("3.4.0"))],
    ) -> Snapshot {
        let base = &BASES.snapshot;
        let mut c = base.cluster.clone();
        c.gate = if gate { Gate::open("property") } else { Gate::closed("property") };
        c.control_plane_arch = arch;
        c.multi_arch = multi;
        c.platform = platform.map(str::to_owned);
        c.enrollment = match enrollment {
            0 => Enrollment::None,
            1 => {
                let ls: LabelSelector = serde_json::from_value(json!({"matchLabels": {"role": "worker"}})).unwrap();
                Enrollment::Partial(ls.try_into().unwrap())
            }
            _ => Enrollment::All,
        };
        let owner = match ec2 {
            0 => None,
            1 => Some("531415883065"),
            2 => Some("679593333241"),
            _ => Some("123456789012"),
        };
        if let Some(owner) = owner {
            let mut learned = AwsLearned::default();
            for region in ["us-east-1", "eu-west-1", "mars-north-1"] {
                learned.images.insert(
                    (region.to_owned(), FOREIGN_AMI.to_owned()),
                    Described::Found { owner: owner.to_owned(), name: "rhcos-417.94.202410090854-0-x86_64-hvm".to_owned() },
                );
            }
            c.learned = c.learned.with_aws(learned);
        }
        if let Some(v) = stub {
            c.stubs = Stubs::learned([("worker-user-data", Stub::Version(v.into()))]);
        }
        Snapshot::new(if ready { base.boot_images.clone() } else { None }, c)
    }
}

// ---- Checks ----

fn escaped(key: &str) -> String {
    let mut s = String::new();
    decision::escape_token(&mut s, key);
    s
}

/// Removes `pointer` from `doc`, if it is there.
fn remove(doc: &mut Value, pointer: &str) {
    let Some((parent, last)) = pointer.rsplit_once('/') else {
        return;
    };
    let last = last.replace("~1", "/").replace("~0", "~");
    match doc.pointer_mut(parent) {
        Some(Value::Object(o)) => {
            o.remove(&last);
        }
        Some(Value::Array(a)) => {
            if let Ok(i) = last.parse::<usize>()
                && i < a.len()
            {
                // Keep indices stable: a placeholder, on both sides.
                a[i] = Value::String("<erased>".into());
            }
        }
        _ => {}
    }
}

/// `doc` without what the patch may change: the image paths it names, and the
/// boot-image annotation (an emptied or null annotations map counts as none).
fn outside_the_patch(doc: &Value, image_paths: &[&str]) -> Value {
    let mut d = doc.clone();
    for p in image_paths {
        remove(&mut d, p);
    }
    if let Some(Value::Object(a)) = d.pointer_mut("/metadata/annotations") {
        a.remove(BOOT_IMAGE_ANNOTATION);
    }
    let gone = matches!(d.pointer("/metadata/annotations"), Some(Value::Null))
        || matches!(d.pointer("/metadata/annotations"), Some(Value::Object(a)) if a.is_empty());
    if gone && let Some(m) = d.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("annotations");
    }
    d
}

fn is_image_path(path: &str) -> bool {
    let Some(rest) = path.strip_prefix(PROVIDER) else {
        return false;
    };
    if rest == "/ami" || rest == "/image" {
        return true;
    }
    let mut parts = rest.split('/').skip(1);
    matches!(
        (parts.next(), parts.next(), parts.next(), parts.next()),
        (Some("disks"), Some(i), Some("image"), None) if i.parse::<usize>().is_ok()
    )
}

fn check_patch(ms: &Value, d: &Decision, snap: &Snapshot) -> Result<(), TestCaseError> {
    if d.reason != Reason::Updated {
        prop_assert!(d.patch.0.is_empty(), "{} with a patch", d.reason);
        return Ok(());
    }
    let target = d.target.clone().expect("Updated names its target");
    let annotation_path = format!("/metadata/annotations/{}", escaped(BOOT_IMAGE_ANNOTATION));
    let mut image_paths = Vec::new();
    for op in &d.patch.0 {
        if op.path == "/metadata/annotations" {
            prop_assert_eq!(&op.value, &json!({BOOT_IMAGE_ANNOTATION: target}));
        } else if op.path == annotation_path {
            prop_assert_eq!(&op.value, &json!(target));
        } else {
            prop_assert!(is_image_path(&op.path), "patch touches {}", op.path);
            image_paths.push(op.path.as_str());
        }
    }
    prop_assert!(!image_paths.is_empty(), "Updated without an image op");

    let patch = d.patch.to_json_patch().unwrap();
    let mut out = ms.clone();
    json_patch::patch(&mut out, &patch)
        .map_err(|e| TestCaseError::fail(format!("json-patch refused {:?}: {e}", d.patch)))?;
    prop_assert_eq!(
        outside_the_patch(&out, &image_paths),
        outside_the_patch(ms, &image_paths),
        "the patch changed more than the image(s) and the annotation"
    );
    for p in &image_paths {
        let v = out.pointer(p).unwrap();
        let named = match v {
            Value::String(s) => s.clone(),
            Value::Object(o) if o.contains_key("id") => o["id"].as_str().unwrap_or("").to_owned(),
            Value::Object(_) => d.target.clone().unwrap(), // Azure: the image object
            other => return Err(TestCaseError::fail(format!("image {p} = {other}"))),
        };
        prop_assert_eq!(&named, &target, "image at {}", p);
    }
    if let Some(Value::Object(a)) = out.pointer("/metadata/annotations") {
        prop_assert_eq!(a.get(BOOT_IMAGE_ANNOTATION), Some(&json!(target)));
    }

    let again = decision::decide_object(&out, snap);
    prop_assert_eq!(
        again.reason,
        Reason::UpToDate,
        "second pass: {}",
        again.message
    );
    prop_assert!(again.patch.0.is_empty());

    #[cfg(feature = "e2e")]
    agrees_with_the_apiserver(ms, d, &out)?;
    Ok(())
}

#[cfg(feature = "e2e")]
static EVANPHX_SAMPLED: AtomicUsize = AtomicUsize::new(0);
/// One patch in this many goes through the apiserver's library too.
#[cfg(feature = "e2e")]
const EVANPHX_EVERY: usize = 20;

/// The end-to-end tier only (the library is Go, built on first use): a sample of the
/// patches applied by the apiserver's own library gives what the `json-patch` crate gave.
#[cfg(feature = "e2e")]
fn agrees_with_the_apiserver(ms: &Value, d: &Decision, out: &Value) -> Result<(), TestCaseError> {
    if EVANPHX_SAMPLED
        .fetch_add(1, Ordering::Relaxed)
        .is_multiple_of(EVANPHX_EVERY)
    {
        let go = support::evanphx::apply(ms, &serde_json::to_value(&d.patch).unwrap())
            .map_err(|e| TestCaseError::fail(format!("evanphx refused {:?}: {e}", d.patch)))?;
        prop_assert_eq!(&go, out, "evanphx and json-patch disagree");
    }
    Ok(())
}

fn review_of(ms: &Value) -> Vec<u8> {
    let mut review = BASES.review.clone();
    review["request"]["object"] = ms.clone();
    review["request"]["oldObject"] = ms.clone();
    serde_json::to_vec(&review).unwrap()
}

proptest! {
    #![proptest_config(config())]

    /// Never panics; the webhook decides as `decide_object` does; a patch changes only
    /// the image(s) and the annotation, and a second decision on its result is UpToDate.
    #[test]
    fn a_patch_changes_only_the_image_and_the_annotation_and_is_idempotent(
        ms in machineset(),
        snap in snapshot(),
    ) {
        let _parallel = support::parallel();
        let d = decision::decide_object(&ms, &snap);
        prop_assert!(!d.message.is_empty());
        check_patch(&ms, &d, &snap)?;
    }

    /// The webhook (an AdmissionReview's bytes) and the toucher's plan agree with the
    /// decision for every object.
    #[test]
    fn the_webhook_and_the_toucher_plan_agree(
        ms in machineset(),
        snap in snapshot(),
    ) {
        let _parallel = support::parallel();
        let bytes = review_of(&ms);
        let reviewed = admission::review(&bytes, &snap)
            .map_err(|e| TestCaseError::fail(format!("review refused: {e}")))?;
        let d = decision::decide_object(&ms, &snap);
        prop_assert_eq!(&reviewed.decision, &d);
        let body: Value = serde_json::from_slice(&reviewed.body).unwrap();
        prop_assert_eq!(&body["response"]["allowed"], &json!(true));
        prop_assert_eq!(body["response"]["patch"].is_string(), d.reason == Reason::Updated);

        let plan = touch::plan(std::slice::from_ref(&ms), &snap);
        if d.reason == Reason::Updated {
            prop_assert_eq!(plan.len(), 1);
            prop_assert_eq!(Some(&plan[0].current), d.current.as_ref());
            prop_assert_eq!(Some(&plan[0].target), d.target.as_ref());
            prop_assert_eq!(&plan[0].name, ms["metadata"]["name"].as_str().unwrap());
        } else {
            prop_assert!(plan.is_empty(), "planned a {} MachineSet", d.reason);
        }
    }

    /// Any JSON at all where the MachineSet goes: decided without a panic, never patched
    /// unless it is a MachineSet.
    #[test]
    fn any_json_object_is_decided_without_a_panic(v in any_json(), snap in snapshot()) {
        let _parallel = support::parallel();
        let d = decision::decide_object(&v, &snap);
        prop_assert!(d.patch.0.is_empty() || v["kind"] == json!("MachineSet"));
        let _ = admission::review(&review_of(&v), &snap);
    }
}

/// JSON text, compact or pretty, with up to three bytes inserted, replaced or removed
/// (bytes that matter to a JSON reader, and some that do not).
fn json_text(value: impl Strategy<Value = Value>) -> impl Strategy<Value = String> {
    let edit = (
        any::<prop::sample::Index>(),
        0..3u8,
        prop::sample::select(
            &[
                b'"', b'\\', b'{', b'}', b'[', b']', b',', b':', b' ', b'\n', b'0', b'-', b'.',
                b'e', b'u', b'n', b't', 0x01, b'x',
            ][..],
        ),
    );
    (value, any::<bool>(), prop::collection::vec(edit, 0..3)).prop_map(|(v, pretty, edits)| {
        let text = if pretty {
            serde_json::to_string_pretty(&v)
        } else {
            serde_json::to_string(&v)
        };
        let mut bytes = text.unwrap().into_bytes();
        for (at, op, byte) in edits {
            let i = at.index(bytes.len() + 1);
            match op {
                0 => bytes.insert(i, byte),
                1 if i < bytes.len() => bytes[i] = byte,
                _ if i < bytes.len() => drop(bytes.remove(i)),
                _ => {}
            }
        }
        // Edits are ASCII at any index of ASCII-or-UTF-8 text; a cut code point is dropped.
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

proptest! {
    #![proptest_config(config())]

    /// The view, which reads some of the text and skips the rest, accepts what serde_json
    /// accepts (nesting is shallow here: the depth limit is serde_json's own).
    #[test]
    fn the_view_accepts_what_serde_json_accepts(
        text in prop_oneof![json_text(any_json()), json_text(machineset())],
    ) {
        let _parallel = support::parallel();
        let serde = serde_json::from_str::<serde::de::IgnoredAny>(&text)
            .map(|_| text.trim_start().starts_with('{'));
        // It refuses only what is not JSON, not an object, or a key it reads given twice.
        match (MachineSetView::parse(text.as_bytes()), serde) {
            (Ok(_), Ok(object)) => prop_assert!(object),
            // A number beyond f64 is JSON syntax (RFC 8259 leaves the range to the reader,
            // and IgnoredAny checks syntax only): the view, which holds numbers, refuses it
            // by name (tests/fast/found_inputs.rs keeps the case).
            (Err(e), Ok(object)) => prop_assert!(
                !object
                    || e.to_string().starts_with("duplicate field")
                    || e.to_string().starts_with("number out of range"),
                "{}",
                e
            ),
            (Ok(_), Err(e)) => prop_assert!(false, "the view read what serde_json refuses: {}", e),
            (Err(_), Err(_)) => {}
        }
    }

    /// The view reads what serde_json reads at the same places.
    #[test]
    fn the_view_reads_the_fields_as_serde_json_does(ms in machineset()) {
        let _parallel = support::parallel();
        let bytes = serde_json::to_vec_pretty(&ms).unwrap();
        let view = MachineSetView::parse(&bytes)
            .map_err(|e| TestCaseError::fail(format!("view refused: {e}")))?;
        let at = |p: &str| ms.pointer(p).and_then(Value::as_str);
        prop_assert_eq!(view.kind(), at("/kind").unwrap_or(""));
        prop_assert_eq!(view.name(), at("/metadata/name"));
        let labels: Vec<(&str, &str)> = view.labels().strings().collect();
        let expected: Vec<(&str, &str)> = ms["metadata"]["labels"].as_object().map_or(vec![], |m| {
            m.iter().filter_map(|(k, v)| v.as_str().map(|v| (k.as_str(), v))).collect()
        });
        prop_assert_eq!(labels, expected);
        let annotations = &ms["metadata"]["annotations"];
        for key in [BOOT_IMAGE_ANNOTATION, "a~1b", "x~"] {
            prop_assert_eq!(view.annotation(key), annotations[key].as_str());
            let expected = match (ms["metadata"].get("annotations"), annotations) {
                (_, Value::Object(m)) => Slot::Map { has_key: m.contains_key(key) },
                (Some(_), Value::Null) => Slot::Null,
                (None, _) => Slot::Absent,
                _ => Slot::Unwritable,
            };
            prop_assert_eq!(view.annotations_for(key), expected);
        }
        let value = ms.pointer(PROVIDER);
        match (view.provider_spec(), value) {
            (ProviderSpecValue::Object(fields), Some(Value::Object(expected))) => {
                for (key, v) in expected {
                    let raw = fields.raw(key).map(|t| serde_json::from_str::<Value>(t).unwrap());
                    prop_assert_eq!(raw.as_ref(), Some(v), "providerSpec.value.{}", key);
                }
            }
            (ProviderSpecValue::None, None | Some(Value::Null)) => {}
            (ProviderSpecValue::NotObject(_), Some(v)) => prop_assert!(!v.is_object() && !v.is_null()),
            (got, expected) => prop_assert!(false, "view {:?}, JSON {:?}", got, expected),
        }
    }
}

/// How many generated cases reach each reason: the generators must reach the patching
/// paths of every platform, not only the skips.
#[test]
fn the_generators_reach_every_platform_and_most_reasons() {
    let _parallel = support::parallel();
    use proptest::strategy::ValueTree;
    use std::collections::BTreeMap;
    let mut runner = proptest::test_runner::TestRunner::new_with_rng(
        config(),
        proptest::test_runner::TestRng::deterministic_rng(
            proptest::test_runner::RngAlgorithm::XorShift,
        ),
    );
    let (machinesets, snapshots) = (machineset(), snapshot());
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut updated: BTreeMap<&'static str, usize> = BTreeMap::new();
    for _ in 0..3000 {
        let ms = machinesets.new_tree(&mut runner).unwrap().current();
        let snap = snapshots.new_tree(&mut runner).unwrap().current();
        let d = decision::decide_object(&ms, &snap);
        *seen.entry(d.reason.to_string()).or_default() += 1;
        if d.reason == Reason::Updated {
            *updated.entry(d.platform.unwrap_or("?")).or_default() += 1;
        }
    }
    eprintln!("reasons: {seen:?}\nupdated by platform: {updated:?}");
    for p in ["GCP", "AWS", "Azure"] {
        assert!(
            updated.get(p).copied().unwrap_or(0) >= 30,
            "{p}: {updated:?}"
        );
    }
    assert!(seen.len() >= 15, "{seen:?}");
}
