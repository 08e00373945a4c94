//! What a thief with the webhook's token would like to write, for tests/e2e/permissions.rs: each
//! platform's boot image field with the ConfigMap's target and values of the thief's
//! choosing, and the installer's spec-2 stub.

use serde_json::{Value, json};

use super::cluster::{OLD, PROVIDER, machineset};

pub const CONFIGMAP: &str = "the ConfigMap openshift-machine-config-operator/coreos-bootimages";

/// A MachineSet named `name` whose providerSpec value is `value` (any platform's).
pub fn with_provider_spec(name: &str, value: Value) -> Value {
    let mut ms = machineset(name, OLD);
    *ms.pointer_mut(PROVIDER).unwrap() = value;
    ms
}

/// A JSON patch that replaces `field` of the providerSpec value.
pub fn replace_field(field: &str, value: Value) -> Value {
    json!([{"op": "replace", "path": format!("{PROVIDER}/{field}"), "value": value}])
}

/// One platform's boot image field: its value in a new MachineSet, the ConfigMap's target
/// for it (tests/fixtures/configmap-coreos-bootimages.assembled.yaml, in `stream` and
/// `streams`, the installer's full-size document), and values a thief would like.
pub struct FieldCase {
    pub name: &'static str,
    pub value: Value,
    pub field: &'static str,
    pub target: Value,
    pub others: Vec<Value>,
}

pub fn platform_cases() -> Vec<FieldCase> {
    let azure = |sku: &str, version: &str, publisher: &str| {
        json!({"publisher": publisher, "offer": "aro4", "sku": sku, "version": version,
               "resourceID": "", "type": "MarketplaceNoPlan"})
    };
    vec![
        FieldCase {
            name: "ms-aws",
            value: json!({"kind": "AWSMachineProviderConfig", "ami": {"id": "ami-0123456789abcdef0"},
                          "placement": {"region": "us-east-1"}, "instanceType": "m6i.xlarge"}),
            field: "ami",
            target: json!({"id": "ami-0fbc8be8796dc1df5"}),
            others: vec![
                json!({"id": "ami-0badbadbadbadbad0"}),
                json!({"id": "ami-0fbc8be8796dc1df5", "arn": "arn:aws:ec2:us-east-1::image/ami-0badbadbadbadbad0"}),
                json!({"filters": [{"name": "name", "values": ["evil*"]}]}),
            ],
        },
        FieldCase {
            name: "ms-azure",
            value: json!({"kind": "AzureMachineProviderSpec", "vmSize": "Standard_D4s_v3",
                          "image": {"resourceID": "/resourceGroups/infra1-rg/providers/Microsoft.Compute/images/infra1",
                                    "publisher": "", "offer": "", "sku": "", "version": "", "type": ""}}),
            field: "image",
            target: azure("420-v2", "9.6.20251015", "azureopenshift"),
            others: vec![
                azure("420-v2", "9.6.20251016", "azureopenshift"),
                azure("420-v2", "9.6.20251015", "redhat"),
                json!({"resourceID": "/CommunityGalleries/evil/Images/x/Versions/1", "publisher": "",
                       "offer": "", "sku": "", "version": "", "type": ""}),
            ],
        },
        FieldCase {
            name: "ms-vsphere",
            value: json!({"kind": "VSphereMachineProviderSpec", "template": "infra1-rhcos-us-east-us-east-1a",
                          "workspace": {"server": "vcenter.example.com", "datacenter": "dc1"}}),
            field: "template",
            target: json!("infra1-rhcos-9.8.20260428-0-us-east-1a"),
            others: vec![
                json!("evil-template"),
                json!("infra1-rhcos-9.9.20990101-0-us-east-1a"),
                json!("/dc1/vm/infra1-rhcos-9.8.20260428-0-us-east-1a"),
            ],
        },
        FieldCase {
            name: "ms-openstack",
            value: json!({"kind": "OpenstackProviderSpec", "image": "infra1-rhcos",
                          "flavor": "m1.xlarge", "cloudName": "openstack"}),
            field: "image",
            target: json!("infra1-rhcos-9.8.20260428-0"),
            others: vec![
                json!("evil-image"),
                json!("infra1-rhcos-9.9.20990101-0"),
                json!("infra1-rhcos-9.8.20260428-0-evil"),
                json!("3f2c8a0e-6f0c-4b7e-9d55-5b1f4f0c2a11"),
            ],
        },
        FieldCase {
            name: "ms-openstack-arm64",
            value: json!({"kind": "OpenstackProviderSpec", "image": "infra1-rhcos",
                          "flavor": "m1.xlarge", "cloudName": "openstack"}),
            field: "image",
            // A multi-architecture cluster's name carries the architecture.
            target: json!("infra1-rhcos-9.8.20260428-0-arm64"),
            others: vec![
                json!("infra1-rhcos-9.8.20260428-0-arm64x"),
                json!("infra1-rhcos-9.8.20260428-0-aarch64"),
                json!("infra1-rhcos-9.9.20990101-0-arm64"),
            ],
        },
        FieldCase {
            name: "ms-openstack-volume",
            value: json!({"kind": "OpenstackProviderSpec", "flavor": "m1.xlarge",
                          "rootVolume": {"diskSize": 30, "sourceUUID": "infra1-rhcos",
                                         "volumeType": "tripleo"}}),
            field: "rootVolume",
            target: json!({"diskSize": 30, "sourceUUID": "infra1-rhcos-9.8.20260428-0",
                           "volumeType": "tripleo"}),
            others: vec![
                json!({"diskSize": 30, "sourceUUID": "evil-image", "volumeType": "tripleo"}),
                json!({"diskSize": 300, "sourceUUID": "infra1-rhcos-9.8.20260428-0",
                       "volumeType": "tripleo"}),
                json!({"diskSize": 30, "sourceUUID": "infra1-rhcos-9.8.20260428-0"}),
            ],
        },
        FieldCase {
            name: "ms-nutanix",
            value: json!({"kind": "NutanixMachineProviderConfig",
                          "image": {"type": "name", "name": "infra1-rhcos"},
                          "vcpuSockets": 4, "credentialsSecret": {"name": "nutanix-credentials"}}),
            field: "image",
            target: json!({"type": "name", "name": "infra1-rhcos-9.8.20260428-0"}),
            others: vec![
                json!({"type": "name", "name": "evil-image"}),
                json!({"type": "name", "name": "infra1-rhcos-9.9.20990101-0"}),
                json!({"type": "uuid", "uuid": "3f2c8a0e-6f0c-4b7e-9d55-5b1f4f0c2a11"}),
                json!({"type": "name", "name": "infra1-rhcos-9.8.20260428-0",
                       "uuid": "3f2c8a0e-6f0c-4b7e-9d55-5b1f4f0c2a11"}),
            ],
        },
    ]
}

/// The installer's spec-2 stub Ignition (4.5-era, its CA shortened).
pub const SPEC2: &str = r#"{"ignition":{"config":{"append":[{"source":"https://api-int.c1.example.com:22623/config/worker","verification":{}}]},"security":{"tls":{"certificateAuthorities":[{"source":"data:text/plain;charset=utf-8;base64,LS0tLS1CRUdJTg==","verification":{}}]}},"timeouts":{},"version":"2.2.0"},"networkd":{},"passwd":{},"storage":{},"systemd":{}}"#;

pub fn b64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}
