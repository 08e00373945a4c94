//! Dual-stream releases (RHEL 9 and RHEL 10 in one release): which stream each MachineSet's
//! boot image comes from (behaviour §4, rules 4 and 8), on a 5.0-style ConfigMap built from
//! the installer's real RHEL 10 and RHEL 9 streams. Every patch is applied by the tier's
//! JSON Patch oracle (the apiserver's own library in the end-to-end tier).

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use bootimage_webhook::core::decision::{self, Decision, OS_STREAM_LABEL, Reason};
use bootimage_webhook::core::platforms::aws::{self, AwsLearned, Described};
use bootimage_webhook::core::platforms::vsphere::{self, VSphereLearned};
use bootimage_webhook::core::snapshot::{
    Arch, BootImages, KEY_RELEASE_VERSION, KEY_STREAM, KEY_STREAMS, Snapshot,
};
use bootimage_webhook::core::stream_choice;
use serde_json::{Value, json};
use support::{fixture, fixture_text, oracle};

const DUAL: &str = "configmap-coreos-bootimages.dual-stream.yaml";
const GCP_9: &str = "projects/rhcos-cloud/global/images/rhcos-9-8-20260428-0-gcp-x86-64";
const GCP_10: &str = "projects/rhcos-cloud/global/images/rhcos-10-2-20260715-0-gcp-x86-64";
const GCP_10_ARM: &str = "projects/rhcos-cloud/global/images/rhcos-10-2-20260715-0-gcp-aarch64";
const OLD_GCP_9: &str = "projects/rhcos-cloud/global/images/rhcos-9-6-20250826-1-gcp-x86-64";
/// The RHEL 10 stream's x86_64 AMI in us-east-1, and the RHEL 9 one.
const AMI_10: &str = "ami-026c3565b2e140a8f";
const AZURE_10: &str = "azureopenshift:aro4:aro_5-0_x64_gen2:10.2.20260423";

fn dual() -> BootImages {
    BootImages::from_document(&fixture_text(DUAL)).unwrap()
}

fn snap() -> Snapshot {
    Snapshot::offline(dual(), false, Some(Arch::Amd64), false)
}

/// The stream `status` and `preview` show for a MachineSet.
fn shown(ms: &Value, snap: &Snapshot) -> Option<String> {
    stream_choice::shown(ms, snap)
}

fn labelled(mut ms: Value, stream: Option<&str>) -> Value {
    if let Some(stream) = stream {
        let labels = ms["metadata"]
            .as_object_mut()
            .unwrap()
            .entry("labels")
            .or_insert(json!({}));
        labels[OS_STREAM_LABEL] = json!(stream);
    }
    ms
}

fn spec(ms: &mut Value) -> &mut Value {
    &mut ms["spec"]["template"]["spec"]["providerSpec"]["value"]
}

/// The real build02 GCP MachineSet, on `image`.
fn gcp(image: &str, stream: Option<&str>) -> Value {
    let mut ms = fixture("machineset-gcp-build02-infra-a.yaml");
    spec(&mut ms)["disks"][0]["image"] = json!(image);
    labelled(ms, stream)
}

/// The decision, its patch applied by the oracle, and a second pass that changes nothing.
fn moved(ms: &Value, snap: &Snapshot) -> (Decision, Value) {
    let d = decision::decide_object(ms, snap);
    assert_eq!(d.reason, Reason::Updated, "{}", d.message);
    let patch = serde_json::to_value(&d.patch).unwrap();
    let out = oracle::apply(ms, &patch).unwrap();
    let again = decision::decide_object(&out, snap);
    assert_eq!(again.reason, Reason::UpToDate, "{}", again.message);
    (d, out)
}

#[test]
fn the_dual_stream_configmap_names_its_streams() {
    let _parallel = support::parallel();
    let b = dual();
    let names: Vec<&str> = b.streams().keys().map(String::as_str).collect();
    assert_eq!(names, ["rhel-10", "rhel-9"]);
    assert_eq!(b.default_stream.as_deref(), Some("rhel-10"));
    assert_eq!(b.default_doc().rhel_major, Some(10));
    assert_eq!(b.streams()["rhel-9"].rhel_major, Some(9));
    assert_eq!(
        b.problems().count(),
        0,
        "{:?}",
        b.problems().collect::<Vec<_>>()
    );
    // Every stream's images are known, whichever is the default.
    assert_eq!(b.rhcos_release_of(GCP_9), Some("9.8.20260428-0"));
    assert_eq!(b.rhcos_release_of(AMI_10), Some("10.2.20260715-0"));
}

#[test]
fn gcp_machinesets_follow_their_label_or_their_image_and_never_cross_rhel_majors() {
    let _parallel = support::parallel();
    let snap = snap();
    for (image, label, want, stream) in [
        (OLD_GCP_9, Some("rhel-10"), GCP_10, "rhel-10 (label)"),
        (OLD_GCP_9, Some("rhel-9"), GCP_9, "rhel-9 (label)"),
        (GCP_10, Some("rhel-9"), GCP_9, "rhel-9 (label)"),
        // Unlabelled: the stream of the RHEL its image is built from.
        (OLD_GCP_9, None, GCP_9, "rhel-9 (image)"),
        (
            "projects/rhcos-cloud/global/images/rhcos-416-94-202405291527-0-gcp-x86-64",
            None,
            GCP_9,
            "rhel-9 (image)",
        ),
        (
            "projects/rhcos-cloud/global/images/rhcos-10-1-20260301-0-gcp-x86-64",
            None,
            GCP_10,
            "rhel-10 (image)",
        ),
        // Nothing to tell the RHEL by: the ConfigMap's default.
        ("", None, GCP_10, "rhel-10 (default)"),
    ] {
        let ms = gcp(image, label);
        let (d, out) = moved(&ms, &snap);
        assert_eq!(d.target.as_deref(), Some(want), "{image} {label:?}");
        assert_eq!(
            shown(&ms, &snap).as_deref(),
            Some(stream),
            "{image} {label:?}"
        );
        assert_eq!(spec(&mut out.clone())["disks"][0]["image"], json!(want));
    }
    for (image, label, stream) in [
        (GCP_9, None, "rhel-9 (image)"),
        (GCP_10, None, "rhel-10 (image)"),
        (GCP_10, Some("rhel-10"), "rhel-10 (label)"),
    ] {
        let ms = gcp(image, label);
        let d = decision::decide_object(&ms, &snap);
        assert_eq!(
            d.reason,
            Reason::UpToDate,
            "{image} {label:?}: {}",
            d.message
        );
        assert_eq!(shown(&ms, &snap).as_deref(), Some(stream));
    }
}

#[test]
fn a_stream_the_configmap_does_not_carry_is_left_alone_with_the_streams_it_does() {
    let _parallel = support::parallel();
    let d = decision::decide_object(&gcp(OLD_GCP_9, Some("rhel-11")), &snap());
    assert_eq!(d.reason, Reason::UnsupportedOSStream);
    assert!(d.patch.0.is_empty());
    for words in [
        "unsupported stream: rhel-11",
        "\"rhel-10\" (RHEL 10)",
        "\"rhel-9\" (RHEL 9)",
    ] {
        assert!(d.message.contains(words), "{words}: {}", d.message);
    }
    // An image of a RHEL no stream carries (RHEL 8): left alone, never moved to RHEL 9.
    let d = decision::decide_object(
        &gcp(
            "projects/rhcos-cloud/global/images/rhcos-412-86-202301311551-0-gcp-x86-64",
            None,
        ),
        &snap(),
    );
    assert_eq!(d.reason, Reason::UnsupportedOSStream, "{}", d.message);
    assert!(d.message.contains("RHEL 8"), "{}", d.message);
}

#[test]
fn arm64_machinesets_take_their_streams_arm64_image() {
    let _parallel = support::parallel();
    let mut ms = gcp(OLD_GCP_9, Some("rhel-10"));
    ms["metadata"]["annotations"] = json!({
        "capacity.cluster-autoscaler.kubernetes.io/labels": "kubernetes.io/arch=arm64"
    });
    let (d, _) = moved(&ms, &snap());
    assert_eq!(d.target.as_deref(), Some(GCP_10_ARM));
}

#[test]
fn a_configmap_without_streams_behaves_as_before() {
    let _parallel = support::parallel();
    let mut data = BTreeMap::new();
    let doc = support::fixture_text("stream-coreos-rhel-9.installer.json");
    data.insert(KEY_STREAM.to_owned(), doc);
    data.insert(KEY_RELEASE_VERSION.to_owned(), "4.21.0".to_owned());
    let single = BootImages::from_data(&data).unwrap();
    assert!(single.streams().is_empty());
    let snap = Snapshot::offline(single, true, Some(Arch::Amd64), false);
    behaves_as_one_rhel_9_stream(&snap);
}

/// A `rhel-10` label is left alone with a reason, and an unlabelled MachineSet, even on a
/// RHEL 10 image, gets the one stream, as the MCO does.
fn behaves_as_one_rhel_9_stream(snap: &Snapshot) {
    let d = decision::decide_object(&gcp(OLD_GCP_9, Some("rhel-10")), snap);
    assert_eq!(d.reason, Reason::UnsupportedOSStream);
    assert!(
        d.message.contains("unsupported stream: rhel-10")
            && d.message.contains("only rhel-9 is updated"),
        "{}",
        d.message
    );
    let (d, _) = moved(&gcp(GCP_10, None), snap);
    assert_eq!(d.target.as_deref(), Some(GCP_9));
    assert_eq!(shown(&gcp(GCP_10, None), snap), None);
}

#[test]
fn malformed_streams_are_an_error() {
    let _parallel = support::parallel();
    let base = |streams: &str| {
        BTreeMap::from([
            (KEY_STREAM.to_owned(), r#"{"architectures":{}}"#.to_owned()),
            (KEY_RELEASE_VERSION.to_owned(), "5.0.0".to_owned()),
            (KEY_STREAMS.to_owned(), streams.to_owned()),
        ])
    };
    for (bad, words) in [
        ("not json", "data.streams is not a JSON object"),
        ("[]", "data.streams is not a JSON object"),
        (r#"{"rhel-10": 3}"#, "data.streams.rhel-10"),
        (r#"{"rhel-10": {}}"#, "data.streams.rhel-10"),
        (
            r#"{"rhel-10": {"architectures": {"x86_64": []}}}"#,
            "data.streams.rhel-10",
        ),
    ] {
        let err = BootImages::from_data(&base(bad)).unwrap_err();
        let mut text = err.to_string();
        let mut source = std::error::Error::source(&err);
        while let Some(s) = source {
            text.push_str(": ");
            text.push_str(&s.to_string());
            source = s.source();
        }
        assert!(text.contains(words), "{bad}: {text}");
    }
    // Empty is none.
    assert!(
        BootImages::from_data(&base(""))
            .unwrap()
            .streams()
            .is_empty()
    );
}

#[test]
fn aws_amis_of_any_stream_are_red_hats_and_keep_their_rhel() {
    let _parallel = support::parallel();
    let snap = snap();
    let mut ms = fixture("machineset-aws-build01-ci-tests-worker-us-east-1a.yaml");
    let ami_9 = support::stream_ami("us-east-1");
    spec(&mut ms)["ami"] = json!({"id": ami_9});
    // Unlabelled on the RHEL 9 stream's AMI: found in that stream's region table.
    let d = decision::decide_object(&ms, &snap);
    assert_eq!(d.reason, Reason::UpToDate, "{}", d.message);
    assert_eq!(shown(&ms, &snap).as_deref(), Some("rhel-9 (image)"));
    // Labelled rhel-10: the RHEL 10 AMI (the RHEL 9 AMI is known as Red Hat's).
    let (d, out) = moved(&labelled(ms.clone(), Some("rhel-10")), &snap);
    assert_eq!(d.target.as_deref(), Some(AMI_10));
    assert_eq!(
        out["spec"]["template"]["spec"]["providerSpec"]["value"]["ami"],
        json!({"id": AMI_10})
    );
    // An older RHEL 9 AMI EC2 names: RHEL 9, never the default RHEL 10.
    let old = "ami-0123456789abcdef0";
    spec(&mut ms)["ami"] = json!({"id": old});
    let mut learned = AwsLearned::default();
    learned.images.insert(
        ("us-east-1".into(), old.into()),
        Described::Found {
            owner: aws::RED_HAT_OWNER.into(),
            name: "rhcos-9.6.20250701-0-x86_64-hvm".into(),
        },
    );
    let mut cluster = snap.cluster.clone();
    cluster.learned = cluster.learned.with_aws(learned);
    let asked = Snapshot::new(snap.boot_images.clone(), cluster);
    let (d, _) = moved(&ms, &asked);
    assert_eq!(d.target.as_deref(), Some(ami_9.as_str()));
    assert_eq!(shown(&ms, &asked).as_deref(), Some("rhel-9 (image)"));
}

fn azure(image: Value, stream: Option<&str>) -> Value {
    let mut ms = support::azure_ms();
    spec(&mut ms)["image"] = image;
    labelled(ms, stream)
}

fn urn(sku: &str, version: &str) -> Value {
    json!({"publisher": "azureopenshift", "offer": "aro4", "sku": sku, "version": version,
           "resourceID": "", "type": "MarketplaceNoPlan"})
}

#[test]
fn azure_images_follow_their_stream_and_keep_their_generation() {
    let _parallel = support::parallel();
    let snap = snap();
    // A 5.0 `_gen2` SKU stays Gen2, and on RHEL 10 by its version.
    let gen2 = azure(urn("aro_5-0_x64_gen2", "10.2.20260423"), None);
    let d = decision::decide_object(&gen2, &snap);
    assert_eq!(d.reason, Reason::UpToDate, "{}", d.message);
    assert_eq!(d.target.as_deref(), Some(AZURE_10));
    assert_eq!(shown(&gen2, &snap).as_deref(), Some("rhel-10 (image)"));
    // Unlabelled RHEL 9 images stay on RHEL 9, in their generation.
    let (d, _) = moved(&azure(urn("aro_418", "418.94.20250122"), None), &snap);
    assert_eq!(
        d.target.as_deref(),
        Some("azureopenshift:aro4:aro_420:9.6.20251015")
    );
    let (d, _) = moved(&azure(urn("419-v2", "9.6.20250701"), None), &snap);
    assert_eq!(
        d.target.as_deref(),
        Some("azureopenshift:aro4:420-v2:9.6.20251015")
    );
    // Labelled rhel-10: the Gen2 image moves; RHEL 10 publishes no Gen1 image.
    let (d, _) = moved(
        &azure(urn("420-v2", "9.6.20251015"), Some("rhel-10")),
        &snap,
    );
    assert_eq!(d.target.as_deref(), Some(AZURE_10));
    let d = decision::decide_object(
        &azure(urn("aro_420", "9.6.20251015"), Some("rhel-10")),
        &snap,
    );
    assert_eq!(d.reason, Reason::NoImageInStream, "{}", d.message);
    // An install-time image tells no RHEL: the default stream, Gen2 by its resourceID.
    let legacy = json!({"publisher": "", "offer": "", "sku": "", "version": "", "type": "",
        "resourceID": "/resourceGroups/x-rg/providers/Microsoft.Compute/galleries/gallery_x/images/x-gen2/versions/latest"});
    let legacy = azure(legacy, None);
    let (d, _) = moved(&legacy, &snap);
    assert_eq!(d.target.as_deref(), Some(AZURE_10));
    assert_eq!(shown(&legacy, &snap).as_deref(), Some("rhel-10 (default)"));
}

#[test]
fn control_plane_machine_sets_follow_their_label() {
    let _parallel = support::parallel();
    let mut c = fixture("cpms-gcp-enhancement-excerpt.yaml");
    c["metadata"]["labels"] = json!({
        "machine.openshift.io/cluster-api-cluster": "build02-fmpjh",
        OS_STREAM_LABEL: "rhel-10",
    });
    let (d, out) = moved(&c, &snap());
    assert_eq!(d.target.as_deref(), Some(GCP_10));
    assert_eq!(support::cpms_image(&out), GCP_10);
    c["metadata"]["labels"][OS_STREAM_LABEL] = json!("rhel-9");
    let (d, _) = moved(&c, &snap());
    assert_eq!(d.target.as_deref(), Some(GCP_9));
    // Unlabelled, on its RHEL 9 image: RHEL 9.
    c["metadata"]["labels"]
        .as_object_mut()
        .unwrap()
        .remove(OS_STREAM_LABEL);
    let (d, _) = moved(&c, &snap());
    assert_eq!(d.target.as_deref(), Some(GCP_9));
}

#[test]
fn vsphere_templates_are_one_per_stream_and_release() {
    let _parallel = support::parallel();
    let ms = support::example("machineset-vsphere.yaml");
    let infra = vsphere::infra(&support::example("infrastructure-vsphere.yaml")).unwrap();
    let name = |release: &str| vsphere::template_name(&infra.infra_id, release, "us-east-1a");
    let (t9, t10) = (name("9.8.20260428-0"), name("10.2.20260715-0"));
    let base = snap();
    let mut cluster = base.cluster.clone();
    cluster.vsphere = Some(Arc::new(infra.clone()));
    cluster.learned = cluster.learned.with_vsphere(VSphereLearned {
        templates: BTreeSet::from([
            ("us-east-1a".to_owned(), t9.clone()),
            ("us-east-1a".to_owned(), t10.clone()),
        ]),
        ..VSphereLearned::default()
    });
    let snap = Snapshot::new(base.boot_images.clone(), cluster);
    let (d, _) = moved(&labelled(ms.clone(), Some("rhel-9")), &snap);
    assert_eq!(d.target.as_deref(), Some(t9.as_str()));
    let (d, _) = moved(&labelled(ms.clone(), Some("rhel-10")), &snap);
    assert_eq!(d.target.as_deref(), Some(t10.as_str()));
    // On a template of ours, its release tells its RHEL.
    let mut on_9 = ms.clone();
    spec(&mut on_9)["template"] = json!(name("9.6.20250701-0"));
    let mut learned = (*snap.cluster.learned.vsphere.clone().unwrap()).clone();
    learned
        .templates
        .insert(("us-east-1a".to_owned(), name("9.6.20250701-0")));
    let mut cluster = snap.cluster.clone();
    cluster.learned = cluster.learned.with_vsphere(learned);
    let snap = Snapshot::new(snap.boot_images.clone(), cluster);
    let (d, _) = moved(&on_9, &snap);
    assert_eq!(d.target.as_deref(), Some(t9.as_str()));
    assert_eq!(shown(&on_9, &snap).as_deref(), Some("rhel-9 (image)"));
}

/// `preview` through the binary, offline, on the dual-stream ConfigMap and on the embedded
/// 4.21 one: the same MachineSets, each as its stream says.
#[test]
fn preview_decides_each_machineset_by_its_stream_offline() {
    let _parallel = support::parallel();
    let dir = tempfile::tempdir().unwrap();
    let items = vec![
        named(gcp(OLD_GCP_9, Some("rhel-10")), "rhel-10-labelled"),
        named(gcp(OLD_GCP_9, Some("rhel-9")), "rhel-9-labelled"),
        named(gcp(OLD_GCP_9, None), "unlabelled-rhel-9"),
        named(gcp(OLD_GCP_9, Some("rhel-11")), "rhel-11-labelled"),
        named(
            azure(urn("aro_5-0_x64_gen2", "10.2.20260423"), Some("rhel-10")),
            "azure-gen2",
        ),
    ];
    let file = dir.path().join("machinesets.json");
    let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
    std::fs::write(&file, list.to_string()).unwrap();
    let cm = support::fixture_path(DUAL);
    let dual = preview(&file, Some(&cm));
    let got: Vec<(&str, String, Option<&str>)> = dual
        .iter()
        .map(|v| {
            (
                v["reason"].as_str().unwrap(),
                image(v),
                v["stream"].as_str(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("Updated", GCP_10.to_owned(), Some("rhel-10 (label)")),
            ("Updated", GCP_9.to_owned(), Some("rhel-9 (label)")),
            ("Updated", GCP_9.to_owned(), Some("rhel-9 (image)")),
            (
                "UnsupportedOSStream",
                OLD_GCP_9.to_owned(),
                Some("rhel-11 (label)")
            ),
            (
                "UpToDate",
                "aro_5-0_x64_gen2:10.2.20260423".to_owned(),
                Some("rhel-10 (label)")
            ),
        ]
    );
    let unsupported = dual[3]["message"].as_str().unwrap();
    assert!(
        unsupported.contains("rhel-11")
            && unsupported.contains("\"rhel-10\"")
            && unsupported.contains("\"rhel-9\""),
        "{unsupported}"
    );
    // The embedded 4.21 ConfigMap (no `streams`): as before, rhel-9 only.
    let single = preview(&file, None);
    let got: Vec<(&str, Option<&str>)> = single
        .iter()
        .map(|v| (v["reason"].as_str().unwrap(), v["stream"].as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("UnsupportedOSStream", None),
            ("Updated", None),
            ("Updated", None),
            ("UnsupportedOSStream", None),
            ("UnsupportedOSStream", None),
        ]
    );
    assert_eq!(image(&single[2]), GCP_9);
}

/// `preview` of the MachineSets in `file`, offline, on `configmap` (else the embedded one):
/// its lines, parsed.
fn preview(file: &std::path::Path, configmap: Option<&std::path::Path>) -> Vec<Value> {
    let mut cmd = std::process::Command::new(support::binary::BIN);
    cmd.args(["preview", "--machineset-file"])
        .arg(file)
        .args(["--control-plane-arch", "amd64"]);
    if let Some(cm) = configmap {
        cmd.arg("--configmap-file").arg(cm);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The image a previewed MachineSet names: GCP's disk image, Azure's `sku:version`.
fn image(v: &Value) -> String {
    let spec = &v["machineSet"]["spec"]["template"]["spec"]["providerSpec"]["value"];
    match spec["image"].as_object() {
        Some(i) => format!(
            "{}:{}",
            i["sku"].as_str().unwrap(),
            i["version"].as_str().unwrap()
        ),
        None => spec["disks"][0]["image"].as_str().unwrap().to_owned(),
    }
}

fn named(mut ms: Value, name: &str) -> Value {
    ms["metadata"]["name"] = json!(name);
    ms
}

/// A single-stream release writes its one stream in `streams` too (4.21): as before.
#[test]
fn streams_holding_only_the_default_stream_is_a_single_stream_release() {
    let _parallel = support::parallel();
    let b = support::boot_images();
    assert!(b.streams().is_empty());
    assert_eq!(b.default_stream.as_deref(), Some("rhel-9"));
    let snap = Snapshot::offline(b, true, Some(Arch::Amd64), false);
    behaves_as_one_rhel_9_stream(&snap);
}

/// An unlabelled AWS Marketplace AMI stays within its RHEL: its name says RHCOS 9, so the
/// RHEL 9 stream's version bounds the product's image, not the default RHEL 10 one.
#[test]
fn a_marketplace_ami_stays_on_its_rhel() {
    let _parallel = support::parallel();
    let snap = snap();
    let product = "59ead7de-2540-4653-a8b0-fa7926d5c845";
    let (old, nine, ten) = (
        "ami-0aaaaaaaaaaaaaaa1",
        "ami-0aaaaaaaaaaaaaa98",
        "ami-0aaaaaaaaaaaaa102",
    );
    let mut ms = fixture("machineset-aws-build01-ci-tests-worker-us-east-1a.yaml");
    spec(&mut ms)["ami"] = json!({"id": old});
    let mut learned = AwsLearned::default();
    learned.images.insert(
        ("us-east-1".into(), old.into()),
        Described::Found {
            owner: aws::MARKETPLACE_OWNER.into(),
            name: format!("RHEL-9.4-RHCOS-9.6_HVM_GA-20260210-x86_64-0-{product}"),
        },
    );
    let image = |id: &str, version: &str, date: &str| aws::MarketImage {
        id: id.into(),
        description: format!("OpenShift {version} x86_64"),
        creation_date: date.into(),
    };
    learned.marketplace.insert(
        ("us-east-1".into(), product.into()),
        vec![
            image(nine, "rhcos-9.8.20260428-0", "2026-05-01T00:00:00.000Z"),
            image(ten, "rhcos-10.2.20260715-0", "2026-07-20T00:00:00.000Z"),
        ],
    );
    let mut cluster = snap.cluster.clone();
    cluster.learned = cluster.learned.with_aws(learned);
    cluster.aws_marketplace = true;
    let asked = Snapshot::new(snap.boot_images.clone(), cluster);
    let (d, _) = moved(&ms, &asked);
    assert_eq!(d.target.as_deref(), Some(nine));
    assert_eq!(shown(&ms, &asked).as_deref(), Some("rhel-9 (image)"));
    let (d, _) = moved(&labelled(ms, Some("rhel-10")), &asked);
    assert_eq!(d.target.as_deref(), Some(ten));
}
