//! OpenStack through the one decision: the image a MachineSet boots from moves to the
//! stream's qcow2 imported into Glance, `<infra-id>-rhcos-<release>`, once the importer
//! reports it usable (behaviour §4, rule 9). The MachineSet is examples/machineset-openstack.yaml;
//! the images usable in Glance are what the importer learns, given to the snapshot here.
//! Every patch is checked as in tests/support/clouds.rs.

use crate::support;

use bootimage_webhook::core::decision::Reason;
use bootimage_webhook::core::platforms::openstack::{self, OpenStackLearned};
use bootimage_webhook::core::snapshot::Arch;
use bootimage_webhook::core::snapshot::{Learned, Snapshot};
use serde_json::{Value, json};
use support::clouds::*;

const INFRA_ID: &str = "ostest-x7k2p";

fn openstack_ms() -> Value {
    support::example("machineset-openstack.yaml")
}

fn release() -> String {
    real_stream()["architectures"]["x86_64"]["artifacts"]["openstack"]["release"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn ours() -> String {
    openstack::image_name(INFRA_ID, &release())
}

/// The real stream, the example cluster's infrastructure id, and these images usable.
fn openstack_snapshot(usable: &[&str]) -> Snapshot {
    let base = snapshot(&real_stream(), None);
    let mut cluster = base.cluster.clone();
    cluster.infrastructure_name = Some(INFRA_ID.to_owned());
    cluster.learned = Learned::default().with_openstack(OpenStackLearned {
        images: usable.iter().map(|i| (*i).to_owned()).collect(),
        ..OpenStackLearned::default()
    });
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
fn openstack_the_installers_image_moves_to_the_imported_one() {
    let _parallel = support::parallel();
    let snap = openstack_snapshot(&[&ours()]);
    let (d, mut out) = decide(&openstack_ms(), &snap);
    assert_eq!(d.reason, Reason::Updated, "{}", d.message);
    assert_eq!(d.platform, Some("OpenStack"));
    assert_eq!(d.current.as_deref(), Some("ostest-x7k2p-rhcos"));
    assert_eq!(provider_spec(&mut out)["image"], json!(ours()));
    assert_eq!(
        provider_spec_paths(&d),
        ["/spec/template/spec/providerSpec/value/image"]
    );
    assert_eq!(ours(), format!("ostest-x7k2p-rhcos-{}", release()));
}

#[test]
fn openstack_nothing_moves_until_the_image_is_usable() {
    let _parallel = support::parallel();
    for snap in [
        openstack_snapshot(&[]),
        openstack_snapshot(&["ostest-x7k2p-rhcos-9.6.20250402-0"]),
    ] {
        let (d, _) = decide(&openstack_ms(), &snap);
        assert_eq!(d.reason, Reason::ImageNotImported, "{}", d.message);
        assert_eq!(d.target.as_deref(), Some(ours().as_str()));
        assert_eq!(d.current.as_deref(), Some("ostest-x7k2p-rhcos"));
        assert!(d.message.contains(&ours()), "{}", d.message);
    }
    // What the importer says is wrong is in the message.
    let mut snap = openstack_snapshot(&[]);
    let mut cluster = snap.cluster.clone();
    cluster.learned = Learned::default().with_openstack(OpenStackLearned {
        unavailable: Some("Glance answers 503".into()),
        ..OpenStackLearned::default()
    });
    snap = Snapshot::new(snap.boot_images.clone(), cluster);
    let (d, _) = decide(&openstack_ms(), &snap);
    assert!(d.message.contains("Glance answers 503"), "{}", d.message);
}

#[test]
fn openstack_a_root_volume_moves_its_source_and_a_matching_image() {
    let _parallel = support::parallel();
    let snap = openstack_snapshot(&[&ours()]);
    // As the installer writes it: no image, the name in rootVolume.sourceUUID.
    let mut ms = openstack_ms();
    let spec = provider_spec(&mut ms);
    spec.as_object_mut().unwrap().remove("image");
    spec["rootVolume"] = json!({"diskSize": 30, "sourceUUID": "ostest-x7k2p-rhcos",
        "volumeType": "tripleo", "availabilityZone": "nova"});
    let (d, mut out) = decide(&ms, &snap);
    assert_eq!(d.reason, Reason::Updated, "{}", d.message);
    assert_eq!(
        provider_spec(&mut out)["rootVolume"],
        json!({"diskSize": 30, "sourceUUID": ours(), "volumeType": "tripleo",
            "availabilityZone": "nova"})
    );
    // cluster-capi-operator drops sourceUUID when it converts the MachineSet to Cluster
    // API, and boots the volume from image: an absent or empty image gets it too.
    assert_eq!(provider_spec(&mut out)["image"], json!(ours()));
    assert_eq!(
        provider_spec_paths(&d),
        [
            "/spec/template/spec/providerSpec/value/rootVolume/sourceUUID",
            "/spec/template/spec/providerSpec/value/image"
        ]
    );
    provider_spec(&mut ms)["image"] = json!("");
    let (d, mut out) = decide(&ms, &snap);
    assert_eq!(d.reason, Reason::Updated, "{}", d.message);
    assert_eq!(provider_spec(&mut out)["image"], json!(ours()));
    // An image naming the same image as the volume moves with it; another is left alone.
    provider_spec(&mut ms)["image"] = json!("ostest-x7k2p-rhcos");
    let (_, mut out) = decide(&ms, &snap);
    assert_eq!(provider_spec(&mut out)["image"], json!(ours()));
    provider_spec(&mut ms)["image"] = json!("something-else");
    let (d, mut out) = decide(&ms, &snap);
    assert_eq!(d.reason, Reason::Updated, "{}", d.message);
    assert_eq!(provider_spec(&mut out)["image"], json!("something-else"));
    assert_eq!(
        provider_spec(&mut out)["rootVolume"]["sourceUUID"],
        json!(ours())
    );
}

#[test]
fn openstack_a_customers_image_is_left_alone() {
    let _parallel = support::parallel();
    let snap = openstack_snapshot(&[&ours()]);
    for image in [
        "rhcos-4.16",
        "ostest-x7k2p-rhcos-golden",
        "other-abcde-rhcos",
    ] {
        let mut ms = openstack_ms();
        provider_spec(&mut ms)["image"] = json!(image);
        let (d, _) = decide(&ms, &snap);
        assert_eq!(d.reason, Reason::CustomImage, "{image}: {}", d.message);
        assert_eq!(d.current.as_deref(), Some(image));
    }
}

#[test]
fn openstack_an_older_image_of_ours_moves_and_the_current_one_is_up_to_date() {
    let _parallel = support::parallel();
    let snap = openstack_snapshot(&[&ours()]);
    let mut ms = openstack_ms();
    provider_spec(&mut ms)["image"] = json!("ostest-x7k2p-rhcos-9.6.20250402-0");
    let (d, out) = decide(&ms, &snap);
    assert_eq!(d.reason, Reason::Updated, "{}", d.message);
    let (again, _) = decide(&out, &snap);
    assert_eq!(again.reason, Reason::UpToDate, "{}", again.message);
}

#[test]
fn openstack_malformed_fields_are_said_and_left_alone() {
    let _parallel = support::parallel();
    let snap = openstack_snapshot(&[&ours()]);
    for (field, value, says) in [
        (
            "image",
            json!(7),
            "providerSpec.value.image is not a string",
        ),
        ("rootVolume", json!("vol"), "rootVolume is not an object"),
        (
            "rootVolume",
            json!({"sourceUUID": ["x"]}),
            "rootVolume.sourceUUID is not a string",
        ),
    ] {
        let mut ms = openstack_ms();
        provider_spec(&mut ms)[field] = value;
        let (d, _) = decide(&ms, &snap);
        assert_eq!(d.reason, Reason::InvalidProviderSpec, "{}", d.message);
        assert!(d.message.contains(says), "{}", d.message);
    }
}

#[test]
fn openstack_without_the_infrastructure_id_nothing_moves() {
    let _parallel = support::parallel();
    let snap = openstack_snapshot(&[&ours()]);
    let mut cluster = snap.cluster.clone();
    cluster.infrastructure_name = None;
    let snap = Snapshot::new(snap.boot_images.clone(), cluster);
    let (d, _) = decide(&openstack_ms(), &snap);
    assert_eq!(d.reason, Reason::NotReady, "{}", d.message);
    assert_eq!(d.current.as_deref(), Some("ostest-x7k2p-rhcos"));
}

#[test]
fn openstack_a_control_plane_machine_set_is_left_alone() {
    let _parallel = support::parallel();
    let snap = openstack_snapshot(&[&ours()]);
    let spec = openstack_ms()["spec"]["template"]["spec"].clone();
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

#[test]
fn openstack_on_a_multi_arch_cluster_each_architecture_has_an_image_of_its_own() {
    let _parallel = support::parallel();
    let stream = real_stream();
    let arm = stream["architectures"]["aarch64"]["artifacts"]["openstack"]["release"]
        .as_str()
        .unwrap()
        .to_owned();
    let base = openstack_snapshot(&[]);
    let mut cluster = base.cluster.clone();
    cluster.multi_arch = true;
    let amd64 = openstack::image_name_for(INFRA_ID, &release(), Some(Arch::Amd64));
    let arm64 = openstack::image_name_for(INFRA_ID, &arm, Some(Arch::Arm64));
    assert_eq!(amd64, format!("{}-amd64", ours()));
    cluster.learned = Learned::default().with_openstack(OpenStackLearned {
        images: [amd64.clone(), arm64.clone()].into(),
        ..OpenStackLearned::default()
    });
    let snap = Snapshot::new(base.boot_images.clone(), cluster);
    for (arch, wanted) in [("amd64", amd64), ("arm64", arm64)] {
        let mut ms = openstack_ms();
        ms["metadata"]["annotations"] = json!({
            "capacity.cluster-autoscaler.kubernetes.io/labels": format!("kubernetes.io/arch={arch}")});
        let (d, mut out) = decide(&ms, &snap);
        assert_eq!(d.reason, Reason::Updated, "{arch}: {}", d.message);
        assert_eq!(provider_spec(&mut out)["image"], json!(wanted));
        // Moved once: its architecture's image is up to date.
        let (again, _) = decide(&out, &snap);
        assert_eq!(again.reason, Reason::UpToDate, "{}", again.message);
    }
}
