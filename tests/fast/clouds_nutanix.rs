//! Nutanix through the one decision: the image a MachineSet boots from moves to the stream's
//! qcow2 imported into Prism Central, `<infra-id>-rhcos-<release>`, written as `{type: name,
//! name}`, once the importer reports it usable (behaviour §4, rule 9). The MachineSet is
//! examples/machineset-nutanix.yaml; the images usable in Prism Central are what the importer
//! learns, given to the snapshot here. Every patch is checked as in tests/support/clouds.rs.

use crate::support;

use bootimage_webhook::core::decision::Reason;
use bootimage_webhook::core::platforms::artifact::image_name;
use bootimage_webhook::core::platforms::nutanix::NutanixLearned;
use bootimage_webhook::core::snapshot::{Learned, Snapshot};
use serde_json::{Value, json};
use support::clouds::*;

const INFRA_ID: &str = "ntnx-x7k2p";

fn nutanix_ms() -> Value {
    support::example("machineset-nutanix.yaml")
}

fn release() -> String {
    real_stream()["architectures"]["x86_64"]["artifacts"]["nutanix"]["release"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn ours() -> String {
    image_name(INFRA_ID, &release())
}

/// The real stream, the example cluster's infrastructure id, and these images usable.
fn nutanix_snapshot(usable: &[&str]) -> Snapshot {
    learned_snapshot(NutanixLearned {
        images: usable.iter().map(|i| (*i).to_owned()).collect(),
        ..NutanixLearned::default()
    })
}

fn learned_snapshot(learned: NutanixLearned) -> Snapshot {
    let base = snapshot(&real_stream(), None);
    let mut cluster = base.cluster.clone();
    cluster.infrastructure_name = Some(INFRA_ID.to_owned());
    cluster.learned = Learned::default().with_nutanix(learned);
    Snapshot::new(base.boot_images.clone(), cluster)
}

/// The paths of the patch's operations below the providerSpec.
fn provider_spec_paths(d: &bootimage_webhook::core::decision::Decision) -> Vec<String> {
    serde_json::to_value(&d.patch)
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .map(|op| op["path"].as_str().unwrap().to_owned())
        .filter(|p| p.contains("providerSpec"))
        .collect()
}

#[test]
fn nutanix_the_installers_image_moves_to_the_imported_one() {
    let _parallel = support::parallel();
    let snap = nutanix_snapshot(&[&ours()]);
    let (d, mut out) = decide(&nutanix_ms(), &snap);
    assert_eq!(d.reason, Reason::Updated, "{}", d.message);
    assert_eq!(d.platform, Some("Nutanix"));
    assert_eq!(d.current.as_deref(), Some("ntnx-x7k2p-rhcos"));
    assert_eq!(
        provider_spec(&mut out)["image"],
        json!({"type": "name", "name": ours()})
    );
    assert_eq!(
        provider_spec_paths(&d),
        ["/spec/template/spec/providerSpec/value/image"]
    );
    assert_eq!(ours(), format!("ntnx-x7k2p-rhcos-{}", release()));
    let (again, _) = decide(&out, &snap);
    assert_eq!(again.reason, Reason::UpToDate, "{}", again.message);
}

#[test]
fn nutanix_a_uuid_left_beside_the_name_goes_with_the_move() {
    let _parallel = support::parallel();
    let snap = nutanix_snapshot(&[&ours()]);
    let mut ms = nutanix_ms();
    provider_spec(&mut ms)["image"]["uuid"] = json!("0e09cf83-ac68-4f28-af70-6df9a43df4f0");
    let (d, mut out) = decide(&ms, &snap);
    assert_eq!(d.reason, Reason::Updated, "{}", d.message);
    assert_eq!(
        provider_spec(&mut out)["image"],
        json!({"type": "name", "name": ours()})
    );
}

#[test]
fn nutanix_nothing_moves_until_the_image_is_usable() {
    let _parallel = support::parallel();
    for snap in [
        nutanix_snapshot(&[]),
        nutanix_snapshot(&["ntnx-x7k2p-rhcos-9.6.20250402-0"]),
    ] {
        let (d, _) = decide(&nutanix_ms(), &snap);
        assert_eq!(d.reason, Reason::ImageNotImported, "{}", d.message);
        assert_eq!(d.target.as_deref(), Some(ours().as_str()));
        assert_eq!(d.current.as_deref(), Some("ntnx-x7k2p-rhcos"));
        assert!(d.message.contains(&ours()), "{}", d.message);
        assert!(d.message.contains("Prism Central"), "{}", d.message);
    }
    // What the importer says is wrong is in the message.
    let snap = learned_snapshot(NutanixLearned {
        unavailable: Some("Prism Central answers 503".into()),
        ..NutanixLearned::default()
    });
    let (d, _) = decide(&nutanix_ms(), &snap);
    assert!(
        d.message.contains("Prism Central answers 503"),
        "{}",
        d.message
    );
    // OpenStack's images are not Nutanix's.
    let base = nutanix_snapshot(&[]);
    let mut cluster = base.cluster.clone();
    cluster.learned = cluster.learned.with_openstack(Default::default());
    let (d, _) = decide(
        &nutanix_ms(),
        &Snapshot::new(base.boot_images.clone(), cluster),
    );
    assert_eq!(d.reason, Reason::ImageNotImported, "{}", d.message);
}

#[test]
fn nutanix_a_customers_image_is_left_alone() {
    let _parallel = support::parallel();
    let snap = nutanix_snapshot(&[&ours()]);
    for image in [
        json!({"type": "name", "name": "rhcos-9.6-boot-image"}),
        json!({"type": "name", "name": "ntnx-x7k2p-rhcos-golden"}),
        json!({"type": "name", "name": "other-abcde-rhcos-9.8.20260428-0"}),
        json!({"type": "uuid", "uuid": "0e09cf83-ac68-4f28-af70-6df9a43df4f0"}),
    ] {
        let mut ms = nutanix_ms();
        provider_spec(&mut ms)["image"] = image.clone();
        let (d, _) = decide(&ms, &snap);
        assert_eq!(d.reason, Reason::CustomImage, "{image}: {}", d.message);
        assert!(d.current.is_some(), "{image}");
    }
}

#[test]
fn nutanix_malformed_fields_are_said_and_left_alone() {
    let _parallel = support::parallel();
    let snap = nutanix_snapshot(&[&ours()]);
    for (value, says) in [
        (json!("ntnx-x7k2p-rhcos"), "image is not an object"),
        (
            json!({"type": "name", "name": 7}),
            "image.name is not a string",
        ),
        (json!({"name": "ntnx-x7k2p-rhcos"}), "image.type is neither"),
        (
            json!({"type": "label", "name": "x"}),
            "image.type is neither",
        ),
    ] {
        let mut ms = nutanix_ms();
        provider_spec(&mut ms)["image"] = value;
        let (d, _) = decide(&ms, &snap);
        assert_eq!(d.reason, Reason::InvalidProviderSpec, "{}", d.message);
        assert!(d.message.contains(says), "{}", d.message);
    }
}

#[test]
fn nutanix_without_the_infrastructure_id_nothing_moves() {
    let _parallel = support::parallel();
    let snap = nutanix_snapshot(&[&ours()]);
    let mut cluster = snap.cluster.clone();
    cluster.infrastructure_name = None;
    let snap = Snapshot::new(snap.boot_images.clone(), cluster);
    let (d, _) = decide(&nutanix_ms(), &snap);
    assert_eq!(d.reason, Reason::NotReady, "{}", d.message);
    assert_eq!(d.current.as_deref(), Some("ntnx-x7k2p-rhcos"));
}

#[test]
fn nutanix_a_control_plane_machine_set_is_left_alone() {
    let _parallel = support::parallel();
    let snap = nutanix_snapshot(&[&ours()]);
    let spec = nutanix_ms()["spec"]["template"]["spec"].clone();
    let cpms = json!({
        "apiVersion": "machine.openshift.io/v1",
        "kind": "ControlPlaneMachineSet",
        "metadata": {"name": "cluster", "namespace": "openshift-machine-api"},
        "spec": {"replicas": 3, "state": "Active", "template": {
            "machineType": "machines_v1beta1_machine_openshift_io",
            "machines_v1beta1_machine_openshift_io": {"metadata": {}, "spec": spec}}}
    });
    let (d, _) = decide(&cpms, &snap);
    assert_eq!(d.reason, Reason::ControlPlaneNotManaged, "{}", d.message);
}
