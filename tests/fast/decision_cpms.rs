//! The decision on a ControlPlaneMachineSet: its own providerSpec path, the control plane's
//! architecture, Windows read on the node metadata, and the flag and enrollment it needs.
//! Every patch is checked as in tests/support/decision.rs.

use crate::support;

use bootimage_webhook::core::decision::{self, BOOT_IMAGE_ANNOTATION, Reason};
use bootimage_webhook::core::snapshot::{Enrollment, Managed};
use serde_json::{Value, json};
use support::decision::*;
use support::{CURRENT_X86, cpms_image, fixture, offline_snapshot};

const CPMS_SPEC: &str =
    "/spec/template/machines_v1beta1_machine_openshift_io/spec/providerSpec/value";

/// The GCP ControlPlaneMachineSet of the enhancement (boots rhcos-9-6 on x86_64), with
/// its placeholder labels made real.
fn cpms() -> Value {
    let mut c = fixture("cpms-gcp-enhancement-excerpt.yaml");
    c["metadata"]["labels"] = json!({"machine.openshift.io/cluster-api-cluster": "build02-fmpjh"});
    c
}

/// Upstream TestSyncControlPlaneMachineSetOSStreamLabel, replayed from
/// the fixture: rhel-10 and custom streams skip; rhel-9 and no label go on.
#[test]
fn cpms_os_stream_upstream_table() {
    let _parallel = support::parallel();
    let table = fixture("unit-cases-boot-image-controller.json");
    let cases = table["TestSyncControlPlaneMachineSetOSStreamLabel"]["cases"]
        .as_array()
        .unwrap();
    assert_eq!(cases.len(), 4);
    let snap = offline_snapshot();
    for case in cases {
        let mut c = cpms();
        for (k, v) in case["labels"].as_object().unwrap() {
            c["metadata"]["labels"][k] = v.clone();
        }
        let d = decision::decide_object(&c, &snap);
        let skips = case["expectLog"]
            .as_str()
            .is_some_and(|l| l.contains("unsupported stream"));
        if skips {
            assert_eq!(d.reason, Reason::UnsupportedOSStream, "{}", case["name"]);
            let stream = c["metadata"]["labels"][decision::OS_STREAM_LABEL]
                .as_str()
                .unwrap();
            assert!(
                d.message.contains(&format!("unsupported stream: {stream}")),
                "{}: {}",
                case["name"],
                d.message
            );
        } else {
            // Processing goes on: here, to the patch.
            assert_eq!(d.reason, Reason::Updated, "{}: {}", case["name"], d.message);
        }
    }
}

#[test]
fn cpms_is_decided_on_its_own_providerspec_path_and_the_control_plane_arch() {
    let _parallel = support::parallel();
    let snap = offline_snapshot();
    let c = cpms();
    let d = decision::decide_object(&c, &snap);
    assert_eq!(d.reason, Reason::Updated, "{}", d.message);
    assert_eq!(d.patch.0[0].path, format!("{CPMS_SPEC}/disks/0/image"));
    let moved = applied(&c, &d);
    assert_eq!(cpms_image(&moved), CURRENT_X86);
    assert_eq!(
        moved["metadata"]["annotations"][BOOT_IMAGE_ANNOTATION],
        json!(CURRENT_X86)
    );
    // Idempotent, and nothing else changed.
    assert_eq!(
        decision::decide_object(&moved, &snap).reason,
        Reason::UpToDate
    );
    let mut back = moved.clone();
    back["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("annotations");
    set(
        &mut back,
        &format!("{CPMS_SPEC}/disks/0/image"),
        json!(cpms_image(&c)),
    );
    assert_eq!(back, c);
    // The arch is the control plane's: no annotation lookup, no multi-arch refusal.
    let mut annotated = cpms();
    annotate(
        &mut annotated,
        decision::ARCH_ANNOTATION,
        "kubernetes.io/arch=arm64",
    );
    let d = decision::decide_object(&annotated, &snap_with(|c| c.multi_arch = true));
    assert_eq!(d.reason, Reason::Updated, "{}", d.message);
    assert_eq!(d.target.as_deref(), Some(CURRENT_X86));
    let d = decision::decide_object(&c, &snap_with(|c| c.control_plane_arch = None));
    assert_eq!(d.reason, Reason::ArchitectureUnknown);
}

#[test]
fn cpms_windows_is_read_on_the_node_metadata() {
    let _parallel = support::parallel();
    let snap = offline_snapshot();
    let mut node = cpms();
    set(
        &mut node,
        "/spec/template/machines_v1beta1_machine_openshift_io/spec/metadata/labels",
        json!({(decision::OS_ID_LABEL): "Windows"}),
    );
    expect(&node, &snap, Reason::Windows);
    // The Machines' own labels are not where the MCO looks for a CPMS.
    let mut machine = cpms();
    machine["spec"]["template"]["machines_v1beta1_machine_openshift_io"]["metadata"]["labels"]
        [decision::OS_ID_LABEL] = json!("Windows");
    assert_eq!(
        decision::decide_object(&machine, &snap).reason,
        Reason::Updated
    );
}

#[test]
fn cpms_needs_the_flag_and_its_own_enrollment() {
    let _parallel = support::parallel();
    let c = cpms();
    let off = snap_with(|f| f.control_plane_machine_sets = false);
    let d = expect(&c, &off, Reason::NotApplicable);
    assert!(
        d.message.contains("--control-plane-machine-sets"),
        "{}",
        d.message
    );
    // MachineSets are not affected by the flag.
    expect(&gcp_ms(), &off, Reason::Updated);
    // The MachineConfiguration selection for controlplanemachinesets, not machinesets'.
    expect(
        &c,
        &snap_with(|f| f.cpms_enrollment = Enrollment::None),
        Reason::OptedOut,
    );
    assert_eq!(
        decision::decide_object(&c, &snap_with(|f| f.enrollment = Enrollment::None)).reason,
        Reason::Updated
    );
    let mut opted = cpms();
    label(&mut opted, decision::OPT_OUT_LABEL, "false");
    expect(&opted, &offline_snapshot(), Reason::OptedOut);
    // The MCO's own selection, read for that resource.
    let read = |mc: &Value| {
        bootimage_webhook::core::facts::enrollment(
            Some("GCP"),
            Some(mc),
            Managed::ControlPlaneMachineSets,
            None,
        )
        .map(|e| e.enrollment)
    };
    let mc = json!({"status": {"managedBootImagesStatus": {"machineManagers": [
        {"resource": "machinesets", "apiGroup": "machine.openshift.io", "selection": {"mode": "All"}},
        {"resource": "controlplanemachinesets", "apiGroup": "machine.openshift.io", "selection": {"mode": "None"}}]}}});
    assert!(matches!(read(&mc), Ok(Enrollment::None)));
    let mc = json!({"status": {"managedBootImagesStatus": {"machineManagers": [
        {"resource": "controlplanemachinesets", "apiGroup": "machine.openshift.io", "selection": {"mode": "All"}}]}}});
    assert!(matches!(read(&mc), Ok(Enrollment::All)));
}
