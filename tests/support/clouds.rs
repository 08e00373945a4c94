//! The clouds' decisions shared by tests/fast/clouds*.rs: a snapshot with what EC2 or vCenter
//! told us, the streams, and `decide`, which checks a patch with the JSON Patch oracle and a second pass.

use std::collections::BTreeMap;

use bootimage_webhook::core::decision::{self, BOOT_IMAGE_ANNOTATION, Decision, Reason};
use bootimage_webhook::core::platforms::aws::AwsLearned;
use bootimage_webhook::core::snapshot::{Arch, BootImages, Learned, Snapshot};
use serde_json::{Value, json};

use super::{fixture, oracle, without_image_fields};

pub const REGION: &str = "us-east-1";
pub const CURRENT_AMI: &str = "ami-0000000000current";
pub const OCP_PRODUCT: &str = "59ead7de-2540-4653-a8b0-fa7926d5c845";

pub fn provider_spec(ms: &mut Value) -> &mut Value {
    &mut ms["spec"]["template"]["spec"]["providerSpec"]["value"]
}

pub fn aws_ms() -> Value {
    fixture("machineset-aws-build01-ci-tests-worker-us-east-1a.yaml")
}

/// A snapshot of `stream` (stamped, amd64 control plane) with what EC2 told us, moving
/// marketplace AMIs as the MCO does (`--aws-marketplace`).
pub fn snapshot(stream: &Value, learned: Option<AwsLearned>) -> Snapshot {
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
    cluster.aws_marketplace = true;
    if let Some(l) = learned {
        cluster.learned = Learned::default().with_aws(l);
    }
    Snapshot::new(base.boot_images.clone(), cluster)
}

/// The stream of the cluster's ConfigMap: the installer stream with the marketplace merged in.
pub fn assembled_stream() -> Value {
    let assembled = bootimage_webhook::core::snapshot::parse_document(&super::fixture_text(
        "configmap-coreos-bootimages.assembled.yaml",
    ))
    .unwrap();
    serde_json::from_str(assembled["data"]["stream"].as_str().unwrap()).unwrap()
}

pub fn real_stream() -> Value {
    fixture("stream-coreos-rhel-9.installer.json")
}

/// The real stream with `artifacts.aws.release` set for x86_64.
pub fn stream_with_release(release: &str) -> Value {
    let mut s = real_stream();
    s["architectures"]["x86_64"]["artifacts"]["aws"]["release"] = json!(release);
    s
}

/// Decide, and for a patch check it with the oracle and a second pass; the patched object.
pub fn decide(ms: &Value, snap: &Snapshot) -> (Decision, Value) {
    let d = decision::decide_object(ms, snap);
    if d.reason != Reason::Updated {
        assert!(d.patch.0.is_empty(), "{}: {:?}", d.reason, d.patch);
        return (d, ms.clone());
    }
    let patch = serde_json::to_value(&d.patch).unwrap();
    let out = oracle::apply(ms, &patch)
        .unwrap_or_else(|e| panic!("{} refused {patch}: {e}", oracle::NAME));
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
