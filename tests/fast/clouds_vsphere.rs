//! vSphere through the one decision: the template moves to the versioned template of the
//! stream's OVA in the MachineSet's failure domain, once the importer has made it (behaviour
//! §4.9). The failure domains are those of examples/infrastructure-vsphere.yaml; the
//! templates ready in vCenter are what the importer learns, given to the snapshot here.
//! Every patch is checked as in tests/support/clouds.rs.

use crate::support;

use std::collections::BTreeMap;
use std::sync::Arc;

use bootimage_webhook::core::decision::{self, ARCH_ANNOTATION, Reason};
use bootimage_webhook::core::platforms::vsphere::{self, VSphereLearned};
use bootimage_webhook::core::platforms::{Platform, Target};
use bootimage_webhook::core::snapshot::{Arch, BootImages, Enrollment, Learned, Snapshot};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::{Value, json};
use support::clouds::*;
use support::fixture;

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
        vsphere::infra(&support::example("infrastructure-vsphere.yaml")).map(Arc::new);
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
    let _parallel = support::parallel();
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
    let _parallel = support::parallel();
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
    let _parallel = support::parallel();
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
    let _parallel = support::parallel();
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
    let _parallel = support::parallel();
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
    let _parallel = support::parallel();
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
    let _parallel = support::parallel();
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
    let _parallel = support::parallel();
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
    let _parallel = support::parallel();
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
