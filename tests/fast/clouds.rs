//! AWS, Azure and vSphere through the one decision: every case of the MCO's upstream tables
//! (`tests/fixtures/unit-cases-aws-marketplace.json`, `unit-cases-marketplace-pkg.json`,
//! `unit-cases-azure-reconcile.json`) replayed through `decide`, not through the helpers,
//! with the MCO's outcome; every patch applied by the JSON Patch oracle
//! (`tests/support/oracle.rs`), the result equal to the input but for the image and the annotation, and a
//! second pass giving no patch. EC2's answers are what the background learns: here they are
//! given to the snapshot directly (the EC2 side has its own tests against moto).

use crate::support;

use bootimage_webhook::core::decision::{ARCH_ANNOTATION, Reason};
use bootimage_webhook::core::platforms::aws::{self, AwsLearned, Described, MarketImage};
use serde_json::{Value, json};
use support::clouds::*;
use support::decision::applied;
use support::{ami_of, azure_ms, decide_update, fixture, stream_ami};

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
    let _parallel = support::parallel();
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
    let _parallel = support::parallel();
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
    let _parallel = support::parallel();
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
    let _parallel = support::parallel();
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
    let _parallel = support::parallel();
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

// The marketplace package's tables (`marketplace_test.go`), through decide.

/// TestExtractProductID: a marketplace AMI whose name has a product moves to that
/// product's image; one without is somebody else's.
#[test]
fn aws_upstream_marketplace_product_id() {
    let _parallel = support::parallel();
    let table = fixture("unit-cases-marketplace-pkg.json");
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
}

/// TestExtractVersionFromDescription: an image whose description has no version is
/// never chosen; one with a version is, when at most the stream's.
#[test]
fn aws_upstream_marketplace_version_from_description() {
    let _parallel = support::parallel();
    let table = fixture("unit-cases-marketplace-pkg.json");
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
}

/// TestCmpVersionToken / TestCmpRHCOSVersion: of two images, the higher version wins
/// (the newer one when equal), the stream's bound being the higher of the two.
#[test]
fn aws_upstream_marketplace_higher_version_wins() {
    let _parallel = support::parallel();
    let table = fixture("unit-cases-marketplace-pkg.json");
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
}

/// TestIsPreRHELAlignedToken: a product with only pre-4.19 images is said to be so.
#[test]
fn aws_upstream_marketplace_pre_rhel_aligned_token() {
    let _parallel = support::parallel();
    let table = fixture("unit-cases-marketplace-pkg.json");
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
    let _parallel = support::parallel();
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
    let _parallel = support::parallel();
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

/// A writer that keeps putting the old image back is re-mutated 3 times, then left alone,
/// on AWS and Azure as on GCP: the revert check finds the target in the stored object
/// whatever shape the platform's image has (an AMI id, a marketplace image object).
#[test]
fn reverts_are_counted_on_aws_and_azure_too() {
    let _parallel = support::parallel();
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
            stored = applied(&write, &d);
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
