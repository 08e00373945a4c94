//! The decision's checks shared by tests/fast/decision*.rs: the fixtures they start from, small
//! edits of a MachineSet, and every patch applied by the JSON Patch oracle (`oracle.rs`: the
//! apiserver's library in the end-to-end tier), the result equal to the input but for the boot image(s) and the annotation,
//! and a second pass giving no patch.

use bootimage_webhook::core::decision::{self, BOOT_IMAGE_ANNOTATION, Decision, Reason};
use bootimage_webhook::core::snapshot::{ClusterFacts, Snapshot};
use serde_json::{Value, json};

use super::{fixture, offline_snapshot, oracle, without_image_fields};

pub const OLD_X86: &str = "projects/rhcos-cloud/global/images/rhcos-9-6-20250826-1-gcp-x86-64";

/// The real build02 GCP MachineSet (boots rhcos-9-6 on x86_64).
pub fn gcp_ms() -> Value {
    fixture("machineset-gcp-build02-infra-a.yaml")
}

pub fn snap_with(f: impl FnOnce(&mut ClusterFacts)) -> Snapshot {
    let base = offline_snapshot();
    let mut cluster = base.cluster.clone();
    f(&mut cluster);
    Snapshot::new(base.boot_images.clone(), cluster)
}

pub fn set(ms: &mut Value, pointer: &str, value: Value) {
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    let mut cur = &mut *ms;
    for tok in parent.split('/').skip(1) {
        let tok = tok.replace("~1", "/").replace("~0", "~");
        cur = if cur.is_array() {
            &mut cur[tok.parse::<usize>().unwrap()]
        } else {
            cur.as_object_mut().unwrap().entry(tok).or_insert(json!({}))
        };
    }
    let key = key.replace("~1", "/").replace("~0", "~");
    if let Some(a) = cur.as_array_mut() {
        a[key.parse::<usize>().unwrap()] = value;
    } else {
        cur.as_object_mut().unwrap().insert(key, value);
    }
}

pub fn label(ms: &mut Value, key: &str, value: &str) {
    let labels = ms["metadata"]
        .as_object_mut()
        .unwrap()
        .entry("labels")
        .or_insert(json!({}));
    labels[key] = json!(value);
}

pub fn annotate(ms: &mut Value, key: &str, value: &str) {
    let ann = ms["metadata"]
        .as_object_mut()
        .unwrap()
        .entry("annotations")
        .or_insert(json!({}));
    ann[key] = json!(value);
}

/// The boot image(s) as the decision names them: GCP boot disks, the AWS AMI id, the
/// Azure marketplace image as a URN.
pub fn boot_images(ms: &Value) -> Vec<String> {
    let spec = &ms["spec"]["template"]["spec"]["providerSpec"]["value"];
    if let Some(ami) = spec["ami"]["id"].as_str() {
        return vec![ami.to_owned()];
    }
    if spec["image"].is_object() {
        let i = &spec["image"];
        let f = |k: &str| i[k].as_str().unwrap_or("").to_owned();
        return vec![format!(
            "{}:{}:{}:{}",
            f("publisher"),
            f("offer"),
            f("sku"),
            f("version")
        )];
    }
    ms.pointer("/spec/template/spec/providerSpec/value/disks")
        .and_then(Value::as_array)
        .map(|d| {
            d.iter()
                .filter(|d| d["boot"] == json!(true))
                .map(|d| d["image"].as_str().unwrap_or("").to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Apply the decision's patch with the oracle, check what changed and that a second pass is
/// a no-op. Returns the patched MachineSet.
pub fn apply_checked(ms: &Value, d: &Decision, snap: &Snapshot) -> Value {
    assert_eq!(d.reason, Reason::Updated, "{}", d.message);
    let patch = serde_json::to_value(&d.patch).unwrap();
    let out = oracle::apply(ms, &patch)
        .unwrap_or_else(|e| panic!("{} refused {patch}: {e}", oracle::NAME));
    let target = d.target.as_deref().unwrap();
    assert_eq!(
        without_image_fields(&out),
        without_image_fields(ms),
        "only the boot image(s) and the annotation may change; patch {patch}"
    );
    assert!(
        boot_images(&out).iter().all(|i| i == target),
        "{:?}",
        boot_images(&out)
    );
    assert_eq!(
        out["metadata"]["annotations"][BOOT_IMAGE_ANNOTATION],
        json!(target)
    );
    let again = decision::decide_object(&out, snap);
    assert_eq!(
        again.reason,
        Reason::UpToDate,
        "second pass: {}",
        again.message
    );
    assert!(
        again.patch.0.is_empty(),
        "second pass patched: {:?}",
        again.patch
    );
    out
}

pub fn expect(ms: &Value, snap: &Snapshot, reason: Reason) -> Decision {
    let d = decision::decide_object(ms, snap);
    assert_eq!(d.reason, reason, "message: {}", d.message);
    if reason != Reason::Updated {
        assert!(
            d.patch.0.is_empty(),
            "{reason} must not patch: {:?}",
            d.patch
        );
    } else {
        apply_checked(ms, &d, snap);
    }
    assert!(!d.message.is_empty());
    d
}

/// Applies a decision's patch as the apiserver would.
pub fn applied(ms: &Value, d: &Decision) -> Value {
    let mut out = ms.clone();
    json_patch::patch(&mut out, &d.patch.to_json_patch().unwrap()).unwrap();
    out
}
