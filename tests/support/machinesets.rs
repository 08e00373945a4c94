//! MachineSets as the tests build and read them: the fixtures of each platform, the
//! stream's boot image for one, the image a MachineSet or ControlPlaneMachineSet names, and
//! the decision on an UPDATE as the webhook asks for it.

use bootimage_webhook::core::decision::{self, Decision};
use bootimage_webhook::core::snapshot::Snapshot;
use bootimage_webhook::core::view::MachineSetView;
use serde_json::Value;

use super::fixtures::fixture;

/// The real Azure docs sample, with its legacy uploaded image.
#[allow(dead_code, reason = "only the fast tier uses it")]
pub fn azure_ms() -> Value {
    fixture("machineset-azure.openshift-docs-sample.rendered.yaml")
}

/// The real stream's x86_64 AMI for `region`.
pub fn stream_ami(region: &str) -> String {
    fixture("stream-coreos-rhel-9.installer.json")["architectures"]["x86_64"]["images"]["aws"]
        ["regions"][region]["image"]
        .as_str()
        .unwrap_or_else(|| panic!("the stream has no x86_64 AMI for {region}"))
        .to_owned()
}

/// An AWS MachineSet's `ami` (null if it has none).
pub fn ami_of(ms: &Value) -> Value {
    ms["spec"]["template"]["spec"]["providerSpec"]["value"]["ami"].clone()
}

/// The boot image a GCP ControlPlaneMachineSet names ("" if none).
pub fn cpms_image(c: &Value) -> String {
    c.pointer("/spec/template/machines_v1beta1_machine_openshift_io/spec/providerSpec/value/disks/0/image")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned()
}

/// `decide_update` as the webhook calls it: the new object as a view, the stored one as text
/// (what the apiserver sends as `oldObject`: compact, as Go writes it).
#[allow(dead_code, reason = "only the fast tier uses it")]
pub fn decide_update(new: &Value, old: &Value, snap: &Snapshot) -> Decision {
    let bytes = serde_json::to_vec(new).unwrap();
    let view = MachineSetView::parse(&bytes).unwrap();
    decision::decide_update(&view, Some(&old.to_string()), snap)
}
