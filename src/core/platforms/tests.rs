//! The platforms' lookups.

use super::*;

#[test]
fn resource_names() {
    for ok in ["rhcos-cloud", "rhcos-9-8-20260428-0-gcp-x86-64", "a"] {
        assert!(is_resource_name(ok), "{ok}");
    }
    for bad in [
        "",
        "Rhcos",
        "9abc",
        "abc-",
        "a/b",
        "a_b",
        "a.b",
        &"a".repeat(64),
    ] {
        assert!(!is_resource_name(bad), "{bad}");
    }
}

#[test]
fn lookup() {
    assert_eq!(
        Platform::by_kind("GCPMachineProviderSpec").unwrap().name(),
        "GCP"
    );
    assert_eq!(
        Platform::by_name("GCP").unwrap().provider_spec_kind(),
        "GCPMachineProviderSpec"
    );
    assert_eq!(
        Platform::by_kind("AWSMachineProviderConfig")
            .unwrap()
            .name(),
        "AWS"
    );
    assert_eq!(
        Platform::by_kind("VSphereMachineProviderSpec")
            .unwrap()
            .name(),
        "VSphere"
    );
    assert!(Platform::by_kind("OpenstackProviderSpec").is_none());
    assert_eq!(
        known_platform_of_kind("OpenstackProviderSpec"),
        Some("OpenStack")
    );
    assert_eq!(
        known_platform_of_kind("AWSMachineProviderConfig"),
        Some("AWS")
    );
}
