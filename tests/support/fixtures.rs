//! The repository's test data (`tests/fixtures/`, provenance in its README) and what the
//! tests derive from it: MachineSets, reviews, the real stream's boot images.

use std::path::{Path, PathBuf};

use bootimage_webhook::core::snapshot::{self, Arch, BootImages, Snapshot};
use serde_json::Value;

/// `tests/fixtures/<name>` (provenance in `tests/fixtures/README.md`).
pub fn fixture_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

pub fn fixture_text(name: &str) -> String {
    let p = fixture_path(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("fixture {}: {e}", p.display()))
}

/// A fixture as JSON (YAML fixtures are converted; of a YAML stream, the first document).
pub fn fixture(name: &str) -> Value {
    snapshot::parse_documents(&fixture_text(name))
        .unwrap()
        .swap_remove(0)
}

/// The boot images of the real stream, as the assembled ConfigMap carries them.
#[allow(dead_code, reason = "only the fast tier uses it")]
pub fn boot_images() -> BootImages {
    BootImages::from_document(&fixture_text("configmap-coreos-bootimages.assembled.yaml")).unwrap()
}

#[allow(dead_code, reason = "only the fast tier uses it")]
pub fn offline_snapshot() -> Snapshot {
    Snapshot::offline(boot_images(), false, Some(Arch::Amd64), false)
}

pub const CURRENT_X86: &str = "projects/rhcos-cloud/global/images/rhcos-9-8-20260428-0-gcp-x86-64";
#[allow(dead_code, reason = "only the fast tier uses it")]
pub const CURRENT_ARM: &str = "projects/rhcos-cloud/global/images/rhcos-9-8-20260428-0-gcp-aarch64";

/// The UPDATE review fixture around `ms` (as object and oldObject).
pub fn update_review_of(ms: &Value) -> Value {
    let mut review = fixture("admissionreview-v1-machineset-gcp-update.assembled.json");
    review["request"]["object"] = ms.clone();
    review["request"]["oldObject"] = ms.clone();
    review["request"]["name"] = ms["metadata"]["name"].clone();
    review
}

/// The MachineSet inside an AdmissionReview fixture.
#[allow(dead_code, reason = "only the fast tier uses it")]
pub fn review_object(review: &Value) -> Value {
    review.pointer("/request/object").unwrap().clone()
}

/// `doc` with the boot-image annotation and every boot disk image removed, for "equal
/// except for the image(s) and the annotation" comparisons.
#[allow(dead_code, reason = "only the fast tier uses it")]
pub fn without_image_fields(doc: &Value) -> Value {
    let mut d = doc.clone();
    if let Some(ann) = d
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        ann.remove(bootimage_webhook::core::decision::BOOT_IMAGE_ANNOTATION);
    }
    let empty = |a: &Value| a.is_null() || a.as_object().is_some_and(|a| a.is_empty());
    if d.pointer("/metadata/annotations").is_some_and(empty) {
        d["metadata"].as_object_mut().unwrap().remove("annotations");
    }
    // AWS `ami`, Azure and OpenStack `image` and vSphere `template` are replaced as a
    // whole, and so is OpenStack's `rootVolume.sourceUUID`.
    if let Some(spec) = d
        .pointer_mut("/spec/template/spec/providerSpec/value")
        .and_then(Value::as_object_mut)
    {
        for key in ["ami", "image", "template"] {
            spec.remove(key);
        }
        if let Some(volume) = spec.get_mut("rootVolume").and_then(Value::as_object_mut) {
            volume.remove("sourceUUID");
        }
    }
    if let Some(disks) = d
        .pointer_mut("/spec/template/spec/providerSpec/value/disks")
        .and_then(Value::as_array_mut)
    {
        for disk in disks {
            if disk.get("boot") == Some(&Value::Bool(true))
                && let Some(o) = disk.as_object_mut()
            {
                o.remove("image");
            }
        }
    }
    d
}

/// `examples/<name>` as JSON (the first document of a YAML stream).
#[allow(dead_code, reason = "only the fast tier uses it")]
pub fn example(name: &str) -> Value {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(name);
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    snapshot::parse_documents(&text).unwrap().swap_remove(0)
}
