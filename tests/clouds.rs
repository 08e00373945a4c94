//! AWS, Azure and vSphere through the one decision: every case of the MCO's upstream tables
//! (`tests/fixtures/unit-cases-aws-marketplace.json`, `unit-cases-marketplace-pkg.json`,
//! `unit-cases-azure-reconcile.json`) replayed through `decide`, not through the helpers,
//! with the MCO's outcome; every patch applied with the apiserver's JSON Patch library
//! (evanphx), the result equal to the input but for the image and the annotation, and a
//! second pass giving no patch. EC2's answers are what the background learns: here they are
//! given to the snapshot directly (the EC2 side has its own tests against moto).

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;

use bootimage_webhook::core::decision::{
    self, ARCH_ANNOTATION, BOOT_IMAGE_ANNOTATION, Decision, Reason,
};
use bootimage_webhook::core::facts;
use bootimage_webhook::core::platforms::aws::{self, AwsLearned, Described, MarketImage};
use bootimage_webhook::core::platforms::vsphere::{self, VSphereLearned};
use bootimage_webhook::core::platforms::{Platform, Target};
use bootimage_webhook::core::snapshot::{Arch, BootImages, Enrollment, Learned, Snapshot};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::{Value, json};
use support::{
    ami_of, azure_ms, decide_update, evanphx, fixture, stream_ami, without_image_fields,
};

const REGION: &str = "us-east-1";
const CURRENT_AMI: &str = "ami-0000000000current";
const OCP_PRODUCT: &str = "59ead7de-2540-4653-a8b0-fa7926d5c845";

fn provider_spec(ms: &mut Value) -> &mut Value {
    &mut ms["spec"]["template"]["spec"]["providerSpec"]["value"]
}

fn aws_ms() -> Value {
    fixture("machineset-aws-build01-ci-tests-worker-us-east-1a.yaml")
}

/// A snapshot of `stream` (stamped, amd64 control plane) with what EC2 told us.
fn snapshot(stream: &Value, learned: Option<AwsLearned>) -> Snapshot {
    let data = BTreeMap::from([
        ("stream".to_owned(), stream.to_string()),
        ("releaseVersion".to_owned(), "4.21.0".to_owned()),
        ("MCOReleaseImageVersion".to_owned(), "4.21.0".to_owned()),
    ]);
    let base = Snapshot::offline(
        BootImages::from_data(&data).unwrap(),
        false,
        Some(Arch::Amd64),
        false,
    );
    let mut cluster = base.cluster.clone();
    if let Some(l) = learned {
        cluster.learned = Learned::default().with_aws(l);
    }
    Snapshot::new(base.boot_images.clone(), cluster)
}

/// The stream of the cluster's ConfigMap: the installer stream with the marketplace merged in.
fn assembled_stream() -> Value {
    let assembled = bootimage_webhook::core::snapshot::parse_document(&support::fixture_text(
        "configmap-coreos-bootimages.assembled.yaml",
    ))
    .unwrap();
    serde_json::from_str(assembled["data"]["stream"].as_str().unwrap()).unwrap()
}

fn real_stream() -> Value {
    fixture("stream-coreos-rhel-9.installer.json")
}

/// The real stream with `artifacts.aws.release` set for x86_64.
fn stream_with_release(release: &str) -> Value {
    let mut s = real_stream();
    s["architectures"]["x86_64"]["artifacts"]["aws"]["release"] = json!(release);
    s
}

/// Decide, and for a patch check it with evanphx and a second pass; the patched object.
fn decide(ms: &Value, snap: &Snapshot) -> (Decision, Value) {
    let d = decision::decide_object(ms, snap);
    if d.reason != Reason::Updated {
        assert!(d.patch.0.is_empty(), "{}: {:?}", d.reason, d.patch);
        return (d, ms.clone());
    }
    let patch = serde_json::to_value(&d.patch).unwrap();
    let out = evanphx::apply(ms, &patch).unwrap_or_else(|e| panic!("evanphx refused {patch}: {e}"));
    assert_eq!(
        without_image_fields(&out),
        without_image_fields(ms),
        "only the image and the annotation may change: {patch}"
    );
    assert_eq!(
        out["metadata"]["annotations"][BOOT_IMAGE_ANNOTATION],
        json!(d.target.as_deref().unwrap())
    );
    let again = decision::decide_object(&out, snap);
    assert_eq!(
        again.reason,
        Reason::UpToDate,
        "second pass: {}",
        again.message
    );
    (d, out)
}

/// An AWS MachineSet on `ami`, whose owner and name EC2 reports as given, with the
/// marketplace images EC2 lists for the OCP product.
fn aws_case(owner: &str, name: &str, market: Vec<MarketImage>) -> (Value, AwsLearned) {
    let mut ms = aws_ms();
    provider_spec(&mut ms)["ami"] = json!({"id": CURRENT_AMI});
    let mut learned = AwsLearned::default();
    learned.images.insert(
        (REGION.into(), CURRENT_AMI.into()),
        Described::Found {
            owner: owner.into(),
            name: name.into(),
        },
    );
    if let Some(product) = aws::product_id(name) {
        learned
            .marketplace
            .insert((REGION.into(), product.into()), market);
    }
    (ms, learned)
}

fn market_image(v: &Value) -> MarketImage {
    MarketImage {
        id: v["imageId"].as_str().unwrap().into(),
        description: v["description"].as_str().unwrap().into(),
        creation_date: v["creationDate"].as_str().unwrap().into(),
    }
}

/// One marketplace image at a version.
fn at_version(id: &str, full: &str, date: &str) -> MarketImage {
    MarketImage {
        id: id.into(),
        description: format!("RHEL CoreOS x {full} x86_64"),
        creation_date: date.into(),
    }
}

fn marketplace_name(product: &str) -> String {
    format!("RHEL-9.4-RHCOS-9.6_HVM_GA-20260210-x86_64-0-{product}")
}

#[test]
fn aws_standard_amis_move_to_the_stream_ami_of_their_region() {
    // An AMI of the stream is Red Hat's without asking EC2 (any arch, any region).
    let snap = snapshot(&real_stream(), None);
    let mut ms = aws_ms();
    provider_spec(&mut ms)["ami"] = json!({"id": stream_ami("eu-west-1")});
    let (d, out) = decide(&ms, &snap);
    assert_eq!(d.reason, Reason::Updated, "{}", d.message);
    assert_eq!(ami_of(&out), json!({"id": stream_ami(REGION)}));
    // The real build01 AMI is not in this stream: it waits for EC2, and says so.
    let (d, _) = decide(&aws_ms(), &snap);
    assert_eq!(d.reason, Reason::AMIUnclassified, "{}", d.message);
    // EC2 says Red Hat owns it: it moves, ARN and filters dropped, nothing else changed.
    let mut learned = AwsLearned::default();
    let real = ami_of(&aws_ms())["id"].as_str().unwrap().to_owned();
    learned.images.insert(
        (REGION.into(), real.clone()),
        Described::Found {
            owner: aws::RED_HAT_OWNER.into(),
            name: "rhcos-419-94-202504151514-0-x86_64".into(),
        },
    );
    let (d, out) = decide(&aws_ms(), &snapshot(&real_stream(), Some(learned)));
    assert_eq!(d.reason, Reason::Updated, "{}", d.message);
    assert_eq!(d.current.as_deref(), Some(real.as_str()));
    assert_eq!(ami_of(&out), json!({"id": stream_ami(REGION)}));
}

#[test]
fn aws_left_alone_byte_for_byte() {
    let snap = snapshot(&real_stream(), None);
    for (what, edit, reason) in [
        (
            "an ARN",
            json!({"arn": "arn:aws:ec2:us-east-1::image/ami-1"}),
            Reason::NoAMIID,
        ),
        (
            "filters",
            json!({"filters": [{"name": "name", "values": ["rhcos-*"]}]}),
            Reason::NoAMIID,
        ),
        ("an empty id", json!({"id": ""}), Reason::NoAMIID),
    ] {
        let mut ms = aws_ms();
        provider_spec(&mut ms)["ami"] = edit;
        let (d, out) = decide(&ms, &snap);
        assert_eq!(d.reason, reason, "{what}: {}", d.message);
        assert_eq!(out, ms);
    }
    // A custom AMI (owned by somebody else).
    let (ms, learned) = aws_case("123456789012", "my-golden-image", vec![]);
    let (d, _) = decide(&ms, &snapshot(&real_stream(), Some(learned)));
    assert_eq!(d.reason, Reason::CustomImage, "{}", d.message);
    // A region the stream has no AMI for.
    let mut ms = aws_ms();
    provider_spec(&mut ms)["ami"] = json!({"id": stream_ami(REGION)});
    provider_spec(&mut ms)["placement"]["region"] = json!("mars-north-1");
    let (d, _) = decide(&ms, &snap);
    assert_eq!(d.reason, Reason::RegionNotInStream, "{}", d.message);
    assert!(d.message.contains("mars-north-1"), "{}", d.message);
    // No credentials: said so, in words.
    let learned = AwsLearned {
        unavailable: Some("no AWS credentials".into()),
        ..Default::default()
    };
    let (d, _) = decide(&aws_ms(), &snapshot(&real_stream(), Some(learned)));
    assert_eq!(d.reason, Reason::AMIUnclassified);
    assert!(
        d.message.contains("would need EC2 to classify")
            && d.message.contains("no AWS credentials"),
        "{}",
        d.message
    );
}

/// `TestDetectAMIKind`: by owner; through decide, a standard AMI moves to the stream's,
/// a marketplace or ROSA one to its product's image, an unknown one is left alone.
#[test]
fn aws_upstream_detect_ami_kind() {
    let table = fixture("unit-cases-aws-marketplace.json");
    for case in table["TestDetectAMIKind"]["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let owner = case["ownerID"].as_str().unwrap();
        let ami_name = case["amiName"].as_str().unwrap();
        let market = vec![at_version(
            "ami-market",
            "9.8.20260428-0",
            "2026-04-28T00:00:00.000Z",
        )];
        let (ms, learned) = aws_case(owner, ami_name, market);
        let (d, out) = decide(&ms, &snapshot(&real_stream(), Some(learned)));
        match case["expectedKind"].as_str().unwrap() {
            "Standard" => {
                assert_eq!(d.reason, Reason::Updated, "{name}: {}", d.message);
                assert_eq!(ami_of(&out), json!({"id": stream_ami(REGION)}), "{name}");
            }
            "Marketplace" | "ROSA" => {
                assert_eq!(d.reason, Reason::Updated, "{name}: {}", d.message);
                assert_eq!(ami_of(&out), json!({"id": "ami-market"}), "{name}");
                assert_eq!(
                    aws::product_id(ami_name),
                    case["expectedProduct"].as_str(),
                    "{name}"
                );
            }
            "Unknown" => assert_eq!(d.reason, Reason::CustomImage, "{name}: {}", d.message),
            other => panic!("{name}: unknown kind {other}"),
        }
    }
}

/// `TestFindMarketplaceAMI`: the highest version at most the stream's, ties by newest.
#[test]
fn aws_upstream_find_marketplace_ami() {
    let table = fixture("unit-cases-aws-marketplace.json");
    for case in table["TestFindMarketplaceAMI"]["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let images = case["images"]
            .as_array()
            .unwrap()
            .iter()
            .map(market_image)
            .collect();
        let token = case["versionToken"].as_str().unwrap();
        let (ms, learned) = aws_case(
            aws::MARKETPLACE_OWNER,
            &marketplace_name(OCP_PRODUCT),
            images,
        );
        let snap = snapshot(
            &stream_with_release(&format!("{token}.20260601-0")),
            Some(learned),
        );
        let (d, out) = decide(&ms, &snap);
        match case["wantAMI"].as_str().unwrap() {
            "" => {
                assert_eq!(
                    d.reason,
                    Reason::NoMarketplaceImage,
                    "{name}: {}",
                    d.message
                );
                if name.contains("pre-RHEL-aligned") {
                    assert!(d.message.contains("pre-4.19"), "{name}: {}", d.message);
                }
            }
            want => {
                assert_eq!(d.reason, Reason::Updated, "{name}: {}", d.message);
                assert_eq!(ami_of(&out), json!({"id": want}), "{name}");
            }
        }
    }
}

/// `TestMarketplaceVersionToken`: the stream's release gives the bound; a release without
/// major.minor leaves the MachineSet alone.
#[test]
fn aws_upstream_marketplace_version_token() {
    let table = fixture("unit-cases-aws-marketplace.json");
    for case in table["TestMarketplaceVersionToken"]["cases"]
        .as_array()
        .unwrap()
    {
        let name = case["name"].as_str().unwrap();
        let release = case["releaseString"].as_str().unwrap();
        let market = vec![
            at_version("ami-9-6", "9.6.20260210-0", "2026-02-10T00:00:00.000Z"),
            at_version("ami-9-10", "9.10.20260210-0", "2026-02-10T00:00:00.000Z"),
        ];
        let (ms, learned) = aws_case(
            aws::MARKETPLACE_OWNER,
            &marketplace_name(OCP_PRODUCT),
            market,
        );
        let (d, out) = decide(&ms, &snapshot(&stream_with_release(release), Some(learned)));
        if case["expectError"] == json!(true) {
            assert_eq!(d.reason, Reason::NoImageInStream, "{name}: {}", d.message);
        } else {
            let want = match case["expected"].as_str().unwrap() {
                "9.6" => "ami-9-6",
                "9.10" => "ami-9-10",
                other => panic!("{name}: {other}"),
            };
            assert_eq!(d.reason, Reason::Updated, "{name}: {}", d.message);
            assert_eq!(ami_of(&out), json!({"id": want}), "{name}");
        }
    }
}

/// The marketplace package's tables (`marketplace_test.go`), through decide.
#[test]
fn aws_upstream_marketplace_package() {
    let table = fixture("unit-cases-marketplace-pkg.json");
    // TestExtractProductID: a marketplace AMI whose name has a product moves to that
    // product's image; one without is somebody else's.
    for case in table["TestExtractProductID"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let ami_name = case["amiName"].as_str().unwrap();
        let market = vec![at_version(
            "ami-market",
            "9.8.20260428-0",
            "2026-04-28T00:00:00.000Z",
        )];
        let (ms, learned) = aws_case(aws::MARKETPLACE_OWNER, ami_name, market);
        let (d, _) = decide(&ms, &snapshot(&real_stream(), Some(learned)));
        assert_eq!(
            aws::product_id(ami_name).unwrap_or(""),
            case["expected"],
            "{name}"
        );
        let want = if case["expected"] == "" {
            Reason::CustomImage
        } else {
            Reason::Updated
        };
        assert_eq!(d.reason, want, "{name}: {}", d.message);
    }
    // TestExtractVersionFromDescription: an image whose description has no version is
    // never chosen; one with a version is, when at most the stream's.
    for case in table["TestExtractVersionFromDescription"]
        .as_array()
        .unwrap()
    {
        let name = case["name"].as_str().unwrap();
        let image = MarketImage {
            id: "ami-described".into(),
            description: case["description"].as_str().unwrap().into(),
            creation_date: "2026-01-01T00:00:00.000Z".into(),
        };
        let (ms, learned) = aws_case(
            aws::MARKETPLACE_OWNER,
            &marketplace_name(OCP_PRODUCT),
            vec![image],
        );
        let release = if case["ok"] == json!(true) {
            case["fullVersion"].as_str().unwrap().to_owned()
        } else {
            "9.8.20260428-0".to_owned()
        };
        let (d, _) = decide(
            &ms,
            &snapshot(&stream_with_release(&release), Some(learned)),
        );
        let want = if case["ok"] == json!(true) {
            Reason::Updated
        } else {
            Reason::NoMarketplaceImage
        };
        assert_eq!(d.reason, want, "{name}: {}", d.message);
    }
    // TestCmpVersionToken / TestCmpRHCOSVersion: of two images, the higher version wins
    // (the newer one when equal), the stream's bound being the higher of the two.
    for (key, a_key, b_key) in [
        ("TestCmpVersionToken", "a", "b"),
        ("TestCmpRHCOSVersion", "a", "b"),
    ] {
        for case in table[key].as_array().unwrap() {
            let name = case["name"].as_str().unwrap();
            let full = |k: &str| {
                let v = case[k].as_str().unwrap();
                if v.matches('.').count() == 1 {
                    format!("{v}.20260101-0")
                } else {
                    v.to_owned()
                }
            };
            let (a, b) = (full(a_key), full(b_key));
            let images = vec![
                at_version("ami-a", &a, "2026-01-01T00:00:00.000Z"),
                at_version("ami-b", &b, "2026-02-01T00:00:00.000Z"),
            ];
            let bound = if case["sign"].as_i64().unwrap() >= 0 {
                &a
            } else {
                &b
            };
            let (ms, learned) = aws_case(
                aws::MARKETPLACE_OWNER,
                &marketplace_name(OCP_PRODUCT),
                images,
            );
            let (d, out) = decide(&ms, &snapshot(&stream_with_release(bound), Some(learned)));
            let want = match case["sign"].as_i64().unwrap() {
                1 => "ami-a",
                -1 => "ami-b",
                // Equal versions: the newer image (b).
                _ => "ami-b",
            };
            assert_eq!(d.reason, Reason::Updated, "{key} {name}: {}", d.message);
            assert_eq!(ami_of(&out), json!({"id": want}), "{key} {name}");
        }
    }
    // TestIsPreRHELAlignedToken: a product with only pre-4.19 images is said to be so.
    for case in table["TestIsPreRHELAlignedToken"].as_array().unwrap() {
        let token = case["token"].as_str().unwrap();
        let images = vec![at_version(
            "ami-t",
            &format!("{token}.20260101-0"),
            "2026-01-01T00:00:00.000Z",
        )];
        let (ms, learned) = aws_case(
            aws::MARKETPLACE_OWNER,
            &marketplace_name(OCP_PRODUCT),
            images,
        );
        let (d, _) = decide(
            &ms,
            &snapshot(&stream_with_release("9.8.20260428-0"), Some(learned)),
        );
        let pre = case["expected"] == json!(true);
        assert_eq!(
            d.message.contains("pre-4.19"),
            pre,
            "{token}: {}",
            d.message
        );
        if pre {
            assert_eq!(d.reason, Reason::NoMarketplaceImage, "{token}");
        }
    }
}

/// `TestReconcileAzureProviderSpec`: all 19 cases, through decide.
#[test]
fn azure_upstream_reconcile() {
    let table = fixture("unit-cases-azure-reconcile.json");
    let cases = table["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 19);
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let stream = case.get("streamOverride").unwrap_or(&table["stream"]);
        let snap = snapshot(stream, None);
        let mut ms = azure_ms();
        provider_spec(&mut ms)["image"] = case["currentImage"].clone();
        match case.get("securityProfile") {
            Some(p) => provider_spec(&mut ms)["securityProfile"] = p.clone(),
            None => {
                provider_spec(&mut ms)
                    .as_object_mut()
                    .unwrap()
                    .remove("securityProfile");
            }
        }
        let arch = match case["arch"].as_str().unwrap() {
            "x86_64" => "amd64",
            "aarch64" => "arm64",
            other => other,
        };
        ms["metadata"]["annotations"] =
            json!({ ARCH_ANNOTATION: format!("kubernetes.io/arch={arch}") });
        let (d, out) = decide(&ms, &snap);
        if case["expectSkip"] == json!(true) {
            assert!(d.patch.0.is_empty(), "{name}");
            assert_ne!(
                d.reason,
                Reason::UpToDate,
                "{name}: a skip says why: {}",
                d.message
            );
            continue;
        }
        if case["expectPatch"] == json!(true) {
            assert_eq!(d.reason, Reason::Updated, "{name}: {}", d.message);
            assert_eq!(
                out["spec"]["template"]["spec"]["providerSpec"]["value"]["image"],
                case["expectedImage"],
                "{name}"
            );
        } else {
            assert_eq!(d.reason, Reason::UpToDate, "{name}: {}", d.message);
        }
    }
}

#[test]
fn azure_real_sample_and_what_is_left_alone() {
    let snap = snapshot(&fixture("stream-coreos-rhel-9.installer.json"), None);
    // The plain installer stream has no marketplace: nothing to move to.
    let (d, _) = decide(&azure_ms(), &snap);
    assert_eq!(d.reason, Reason::NoImageInStream, "{}", d.message);
    // With the marketplace merged in (as the cluster's ConfigMap has it), the docs
    // sample's image uploaded at install time moves to the unpaid marketplace image.
    let stream = assembled_stream();
    let snap = snapshot(&stream, None);
    let (d, out) = decide(&azure_ms(), &snap);
    assert_eq!(d.reason, Reason::Updated, "{}", d.message);
    let image = &out["spec"]["template"]["spec"]["providerSpec"]["value"]["image"];
    assert_eq!(image["publisher"], "azureopenshift");
    assert_eq!(image["resourceID"], "");
    assert_eq!(image["type"], "MarketplaceNoPlan");
    // A Confidential VM and an unknown publisher are left byte-for-byte alone.
    for (what, edit, reason) in [
        (
            "Confidential VM",
            json!({"securityProfile": {"settings": {"securityType": "ConfidentialVM"}}}),
            Reason::SecurityTypeUnsupported,
        ),
        (
            "unknown publisher",
            json!({"image": {"publisher": "someone", "offer": "golden", "sku": "1", "version": "1"}}),
            Reason::CustomImage,
        ),
    ] {
        let mut ms = azure_ms();
        for (k, v) in edit.as_object().unwrap() {
            provider_spec(&mut ms)[k] = v.clone();
        }
        let (d, out) = decide(&ms, &snap);
        assert_eq!(d.reason, reason, "{what}: {}", d.message);
        assert_eq!(out, ms, "{what}");
    }
}

fn patched(ms: &Value, d: &Decision) -> Value {
    let mut out = ms.clone();
    json_patch::patch(&mut out, &d.patch.to_json_patch().unwrap()).unwrap();
    out
}

/// A writer that keeps putting the old image back is re-mutated 3 times, then left alone,
/// on AWS and Azure as on GCP: the revert check finds the target in the stored object
/// whatever shape the platform's image has (an AMI id, a marketplace image object).
#[test]
fn reverts_are_counted_on_aws_and_azure_too() {
    let stream = assembled_stream();
    let snap = snapshot(&stream, None);
    let mut aws = aws_ms();
    provider_spec(&mut aws)["ami"] = json!({"id": stream_ami("eu-west-1")});
    for (cloud, created) in [("AWS", aws), ("Azure", azure_ms())] {
        let (d, mut stored) = decide(&created, &snap);
        assert_eq!(d.reason, Reason::Updated, "{cloud}: {}", d.message);
        // A stale UPDATE of a stale object is no revert.
        let d = decide_update(&created, &created, &snap);
        assert_eq!(d.reason, Reason::Updated, "{cloud}");
        assert!(!d.message.contains("revert"), "{cloud}: {}", d.message);
        let mut reasons = Vec::new();
        for _ in 0..5 {
            let mut write = stored.clone();
            *provider_spec(&mut write) = provider_spec(&mut created.clone()).clone();
            let d = decide_update(&write, &stored, &snap);
            reasons.push(d.reason);
            stored = patched(&write, &d);
        }
        use Reason::{RevertLoop, Updated};
        assert_eq!(
            reasons,
            [Updated, Updated, Updated, RevertLoop, RevertLoop],
            "{cloud}"
        );
        assert_eq!(
            provider_spec(&mut stored.clone()),
            provider_spec(&mut created.clone()),
            "{cloud}: the writes stand"
        );
    }
}

// vSphere: the template moves to the versioned template of the stream's OVA in the
// MachineSet's failure domain, once the importer has made it (behaviour §4.9). The
// failure domains are those of examples/infrastructure-vsphere.yaml; the templates ready in
// vCenter are what the importer learns, given to the snapshot here.

const INFRA_ID: &str = "ci-ln-x7k2b";
const EAST: &str = "us-east-1a";
const WEST: &str = "us-west-1a";

fn vsphere_ms() -> Value {
    support::example("machineset-vsphere.yaml")
}

fn vsphere_release() -> String {
    real_stream()["architectures"]["x86_64"]["artifacts"]["vmware"]["release"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn versioned(fd: &str) -> String {
    vsphere::template_name(INFRA_ID, &vsphere_release(), fd)
}

/// The real stream, with the example Infrastructure and these templates ready.
fn vsphere_snapshot(ready: &[(&str, &str)]) -> Snapshot {
    let base = snapshot(&real_stream(), None);
    let mut cluster = base.cluster.clone();
    cluster.vsphere =
        facts::vsphere(&support::example("infrastructure-vsphere.yaml")).map(Arc::new);
    cluster.learned = Learned::default().with_vsphere(VSphereLearned {
        templates: ready
            .iter()
            .map(|(fd, t)| ((*fd).to_owned(), (*t).to_owned()))
            .collect(),
        ..VSphereLearned::default()
    });
    Snapshot::new(base.boot_images.clone(), cluster)
}

fn both_ready() -> Snapshot {
    let (east, west) = (versioned(EAST), versioned(WEST));
    vsphere_snapshot(&[(EAST, &east), (WEST, &west)])
}

fn with_template(template: &str) -> Value {
    let mut ms = vsphere_ms();
    provider_spec(&mut ms)["template"] = json!(template);
    ms
}

/// The example MachineSet placed in the west failure domain.
fn west_ms() -> Value {
    let mut ms = vsphere_ms();
    let ws = &mut provider_spec(&mut ms)["workspace"];
    ws["datacenter"] = json!("dc-west");
    ws["datastore"] = json!("/dc-west/datastore/vsanDatastore");
    ws["folder"] = json!("/dc-west/vm/ci-ln-x7k2b");
    ws["resourcePool"] = json!("/dc-west/host/cluster-west/Resources/");
    provider_spec(&mut ms)["template"] = json!("ci-ln-x7k2b-rhcos-us-west-1a");
    ms
}

#[test]
fn vsphere_the_installer_template_moves_to_the_imported_one_in_each_failure_domain() {
    let snap = both_ready();
    for (ms, fd) in [(vsphere_ms(), EAST), (west_ms(), WEST)] {
        let (d, out) = decide(&ms, &snap);
        assert_eq!(d.reason, Reason::Updated, "{}", d.message);
        assert_eq!(d.platform, Some("VSphere"));
        assert_eq!(
            provider_spec(&mut out.clone())["template"],
            json!(versioned(fd))
        );
        // The patch names `template` alone below the providerSpec.
        let paths: Vec<String> = serde_json::to_value(&d.patch)
            .unwrap()
            .as_array()
            .unwrap()
            .iter()
            .map(|op| op["path"].as_str().unwrap().to_owned())
            .filter(|p| p.contains("providerSpec"))
            .collect();
        assert_eq!(paths, ["/spec/template/spec/providerSpec/value/template"]);
    }
    assert_eq!(
        versioned(EAST),
        format!("ci-ln-x7k2b-rhcos-{}-us-east-1a", vsphere_release())
    );
}

#[test]
fn vsphere_nothing_moves_until_the_template_is_imported_in_that_failure_domain() {
    // Imported in the west only: the east MachineSet waits, and says for what.
    let west = versioned(WEST);
    let snap = vsphere_snapshot(&[(WEST, &west)]);
    let (d, _) = decide(&vsphere_ms(), &snap);
    assert_eq!(d.reason, Reason::TemplateNotImported, "{}", d.message);
    assert_eq!(d.target.as_deref(), Some(versioned(EAST).as_str()));
    assert!(
        d.message.contains(&versioned(EAST)) && d.message.contains(EAST),
        "{}",
        d.message
    );
    assert_eq!(decide(&west_ms(), &snap).0.reason, Reason::Updated);
    // Offline (preview) nothing imports: the template that would be needed is named.
    let mut offline = snapshot(&real_stream(), None).cluster.clone();
    offline.vsphere = both_ready().cluster.vsphere.clone();
    let offline = Snapshot::new(snapshot(&real_stream(), None).boot_images.clone(), offline);
    let (d, _) = decide(&vsphere_ms(), &offline);
    assert_eq!(d.reason, Reason::TemplateNotImported);
    assert!(
        d.message.contains("nothing imports offline"),
        "{}",
        d.message
    );
}

#[test]
fn vsphere_our_names_move_and_the_customers_stay() {
    let snap = both_ready();
    let east_old = vsphere::template_name(INFRA_ID, "9.6.20250826-1", EAST);
    for ours in [
        "ci-ln-x7k2b-rhcos-us-east-us-east-1a",
        "ci-ln-x7k2b-rhcos-us-east-1a",
        "ci-ln-x7k2b-rhcos",
        east_old.as_str(),
        "/dc-east/vm/ci-ln-x7k2b/ci-ln-x7k2b-rhcos-us-east-1a",
        "",
    ] {
        let (d, _) = decide(&with_template(ours), &snap);
        assert_eq!(d.reason, Reason::Updated, "{ours:?}: {}", d.message);
    }
    for (theirs, why) in [
        ("rhcos-golden-image", "neither the installer's"),
        ("ci-ln-x7k2b-rhcos-us-west-1a", "neither the installer's"),
        ("other-cluster-rhcos-us-east-1a", "neither the installer's"),
        (
            "/dc-east/vm/customer/ci-ln-x7k2b-rhcos-us-east-1a",
            "outside the workspace folder",
        ),
    ] {
        let (d, _) = decide(&with_template(theirs), &snap);
        assert_eq!(d.reason, Reason::CustomImage, "{theirs:?}: {}", d.message);
        assert!(d.message.contains(why), "{}", d.message);
    }
    // Already on the target: nothing to do.
    let (d, _) = decide(&with_template(&versioned(EAST)), &snap);
    assert_eq!(d.reason, Reason::UpToDate);
}

#[test]
fn vsphere_long_names_are_shortened_the_same_way_every_time() {
    let long_fd = "a-failure-domain-name-long-enough-to-push-the-template-past-eighty";
    let name = vsphere::template_name(INFRA_ID, &vsphere_release(), long_fd);
    assert_eq!(name.chars().count(), vsphere::MAX_NAME_CHARS);
    assert_eq!(
        name,
        vsphere::template_name(INFRA_ID, &vsphere_release(), long_fd)
    );
    assert_ne!(
        name,
        vsphere::template_name(INFRA_ID, &vsphere_release(), &format!("{long_fd}b"))
    );
    assert_ne!(
        name,
        vsphere::template_name(INFRA_ID, "9.6.20250826-1", long_fd)
    );
}

#[test]
fn vsphere_a_workspace_outside_every_failure_domain_moves_nothing() {
    // The MCO's own case (TestCreateNewVMTemplate_NoMatchingFailureDomain).
    let table = fixture("unit-cases-vsphere-helpers.json");
    let case = &table["TestCreateNewVMTemplate_NoMatchingFailureDomain"];
    let mut ms = vsphere_ms();
    provider_spec(&mut ms)["workspace"] = case["providerSpec"]["workspace"].clone();
    let (d, _) = decide(&ms, &both_ready());
    assert_eq!(d.reason, Reason::NoFailureDomain);
    for words in case["errorContains"].as_array().unwrap() {
        assert!(d.message.contains(words.as_str().unwrap()), "{}", d.message);
    }
    // Each field of the match counts.
    for (field, value) in [
        ("server", "vcenter2.example.com"),
        ("datacenter", "dc-west"),
        ("datastore", "/dc-east/datastore/other"),
        (
            "resourcePool",
            "/dc-east/host/cluster-east/Resources/pool-a",
        ),
        ("vmGroup", "group-a"),
    ] {
        let mut ms = vsphere_ms();
        provider_spec(&mut ms)["workspace"][field] = json!(value);
        assert_eq!(
            decide(&ms, &both_ready()).0.reason,
            Reason::NoFailureDomain,
            "{field}"
        );
    }
    // No Infrastructure known: no failure domain either.
    let (d, _) = decide(&vsphere_ms(), &snapshot(&real_stream(), None));
    assert_eq!(d.reason, Reason::NoFailureDomain);
}

#[test]
fn vsphere_opt_out_and_enrollment_per_machineset() {
    let snap = both_ready();
    let mut ms = vsphere_ms();
    ms["metadata"]["labels"][decision::OPT_OUT_LABEL] = json!("false");
    assert_eq!(decide(&ms, &snap).0.reason, Reason::OptedOut);
    let mut cluster = snap.cluster.clone();
    let selector: LabelSelector =
        serde_json::from_value(json!({"matchLabels": {"tier": "gold"}})).unwrap();
    cluster.enrollment = Enrollment::Partial(selector.try_into().unwrap());
    let partial = Snapshot::new(snap.boot_images.clone(), cluster);
    assert_eq!(decide(&vsphere_ms(), &partial).0.reason, Reason::OptedOut);
    let mut gold = vsphere_ms();
    gold["metadata"]["labels"]["tier"] = json!("gold");
    assert_eq!(decide(&gold, &partial).0.reason, Reason::Updated);
}

#[test]
fn vsphere_malformed_fields_are_reasons_not_panics() {
    let snap = both_ready();
    for (field, value) in [
        ("template", json!(7)),
        ("workspace", json!("dc")),
        ("workspace", json!({"server": 1})),
    ] {
        let mut ms = vsphere_ms();
        provider_spec(&mut ms)[field] = value;
        assert_eq!(
            decide(&ms, &snap).0.reason,
            Reason::InvalidProviderSpec,
            "{field}"
        );
    }
}

#[test]
fn vsphere_folder_rule_replays_upstream_is_in_folder() {
    let table = fixture("unit-cases-vsphere-helpers.json");
    for case in table["TestIsInFolder"].as_array().unwrap() {
        assert_eq!(
            vsphere::is_in_folder(
                case["vmInventoryPath"].as_str().unwrap(),
                case["folder"].as_str()
            ),
            case["want"].as_bool().unwrap(),
            "{}",
            case["name"]
        );
    }
}

#[test]
fn vsphere_target_is_the_streams_ova() {
    let b = support::boot_images();
    let Some(Ok(Target::VSphere(t))) = b.target(Arch::Amd64, Platform::VSphere) else {
        panic!("no vSphere target in the real stream");
    };
    let ova = &real_stream()["architectures"]["x86_64"]["artifacts"]["vmware"];
    assert_eq!(t.release, ova["release"].as_str().unwrap());
    assert_eq!(
        t.location,
        ova["formats"]["ova"]["disk"]["location"].as_str().unwrap()
    );
    assert_eq!(
        t.sha256,
        ova["formats"]["ova"]["disk"]["sha256"].as_str().unwrap()
    );
    // arm64 has no OVA in the stream: NoImageInStream.
    assert!(b.target(Arch::Arm64, Platform::VSphere).is_none());
    let mut arm = vsphere_ms();
    arm["metadata"]["annotations"] = json!({ARCH_ANNOTATION: "kubernetes.io/arch=arm64"});
    assert_eq!(
        decide(&arm, &both_ready()).0.reason,
        Reason::NoImageInStream
    );
    // A bad checksum in the stream makes vSphere alone skip.
    let mut bad = real_stream();
    bad["architectures"]["x86_64"]["artifacts"]["vmware"]["formats"]["ova"]["disk"]["sha256"] =
        json!("nope");
    let data = BTreeMap::from([
        ("stream".to_owned(), bad.to_string()),
        ("releaseVersion".to_owned(), "4.21.0".to_owned()),
    ]);
    let b = BootImages::from_data(&data).unwrap();
    assert!(matches!(
        b.target(Arch::Amd64, Platform::VSphere),
        Some(Err(_))
    ));
    assert!(matches!(b.target(Arch::Amd64, Platform::Gcp), Some(Ok(_))));
}
