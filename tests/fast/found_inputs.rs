//! Inputs the property tests (tests/fast/properties.rs) once failed on, kept as fixed cases.

use crate::support;

use bootimage_webhook::core::view::MachineSetView;
use bootimage_webhook::serve::admission;
use serde_json::{Value, json};

/// A providerSpec value beyond f64 is JSON syntax that no f64 holds. The view refuses it
/// with an error that names it (the webhook's 400), and a review around it is refused the
/// same way, without a panic or a patch.
#[test]
fn a_number_beyond_f64_in_the_provider_spec_is_refused_by_name() {
    let _parallel = support::parallel();
    let mut ms = support::fixture("machineset-gcp-build02-infra-a.yaml");
    ms["spec"]["template"]["spec"]["providerSpec"] = json!({"value": 0});
    let text = serde_json::to_string(&ms)
        .unwrap()
        .replace(r#""value":0"#, r#""value":1e000000000000000309"#);
    assert!(serde_json::from_str::<serde::de::IgnoredAny>(&text).is_ok());
    assert!(serde_json::from_str::<Value>(&text).is_err());
    let e = MachineSetView::parse(text.as_bytes()).unwrap_err();
    assert!(e.to_string().starts_with("number out of range"), "{e}");
    let review = json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": {"group": "machine.openshift.io", "version": "v1beta1", "kind": "MachineSet"},
            "resource": {"group": "machine.openshift.io", "version": "v1beta1", "resource": "machinesets"},
            "namespace": "openshift-machine-api",
            "operation": "UPDATE",
            "userInfo": {"username": "admin"},
            "object": "OBJECT",
            "oldObject": null
        }
    })
    .to_string()
    .replace(r#""OBJECT""#, &text);
    let Err(refused) = admission::review(review.as_bytes(), &support::offline_snapshot()) else {
        panic!("the review was decided");
    };
    assert!(
        refused.to_string().contains("number out of range"),
        "{refused}"
    );
}
