//! The world the tests build on the apiserver: MachineSets and what is read off them, the
//! cluster's seeded objects (ConfigMap, pools, Infrastructure, ClusterVersion,
//! MachineConfiguration, Secrets), and the ControlPlaneMachineSet.

use std::path::Path;

use base64::Engine;
use serde_json::{Value, json};

use super::super::apiserver::ApiServer;
use super::super::fixture;
use super::{NS, PROVIDER};

/// The MachineSet fixture (GCP, build02) named `name`, its boot disk on `image`.
pub fn machineset(name: &str, image: &str) -> Value {
    let mut ms = fixture("machineset-gcp-build02-infra-a.yaml");
    ms["metadata"]["name"] = json!(name);
    ms["spec"]["template"]["spec"]["providerSpec"]["value"]["disks"][0]["image"] = json!(image);
    ms
}

pub fn image(ms: &Value) -> &str {
    ms.pointer(&format!("{PROVIDER}/disks/0/image"))
        .and_then(Value::as_str)
        .unwrap_or("")
}

pub fn annotation<'a>(ms: &'a Value, key: &str) -> Option<&'a str> {
    ms["metadata"]["annotations"][key].as_str()
}

/// What a MachineSet's owner wrote: the template (providerSpec included), labels,
/// annotations and owners. The apiserver adds uid, resourceVersion, defaults (replicas).
pub fn as_written(ms: &Value) -> Value {
    json!({
        "labels": ms["metadata"]["labels"],
        "annotations": ms["metadata"].get("annotations").cloned().unwrap_or(json!({})),
        "ownerReferences": ms["metadata"]["ownerReferences"],
        "selector": ms["spec"]["selector"],
        "template": ms["spec"]["template"],
    })
}

/// The stream of the fixture ConfigMap with the x86_64 GCP image renamed.
pub fn stream_with_gcp_image(name: &str) -> String {
    let cm = fixture("configmap-coreos-bootimages.assembled.yaml");
    let mut stream: Value = serde_json::from_str(cm["data"]["stream"].as_str().unwrap()).unwrap();
    stream["architectures"]["x86_64"]["images"]["gcp"]["name"] = json!(name);
    serde_json::to_string(&stream).unwrap()
}

/// A user-data Secret holding a stub Ignition of `version`.
pub fn user_data_secret(name: &str, version: &str) -> Value {
    let stub = json!({"ignition": {"version": version}}).to_string();
    json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
           "metadata": {"name": name, "namespace": NS},
           "data": {"userData": base64::engine::general_purpose::STANDARD.encode(stub)}})
}

/// The enhancement's GCP ControlPlaneMachineSet, its placeholders filled in, on `image`.
pub fn control_plane_machine_set(image: &str) -> Value {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/cpms-gcp-enhancement-excerpt.yaml"),
    )
    .unwrap()
    .replace("<cluster-name>", "build02-fmpjh");
    let mut c = bootimage_webhook::core::snapshot::parse_document(&text).unwrap();
    let meta = c["metadata"].as_object_mut().unwrap();
    for k in [
        "creationTimestamp",
        "resourceVersion",
        "uid",
        "generation",
        "finalizers",
    ] {
        meta.remove(k);
    }
    c["spec"]["template"]["machines_v1beta1_machine_openshift_io"]["spec"]["providerSpec"]["value"]
        ["disks"][0]["image"] = json!(image);
    c
}

pub fn create_all(api: &ApiServer, items: &[&Value]) {
    let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
    let out = api.kubectl_stdin(["create", "-f", "-"], &list.to_string());
    api.expect_ok(&["create", "-f", "-"], out);
}

/// `kubectl patch KIND NAME --subresource=status`: the status as a whole.
pub fn set_status(api: &ApiServer, kind: &str, name: &str, status: Value) {
    let patch = json!([{"op": "add", "path": "/status", "value": status}]);
    api.kubectl_ok([
        "patch",
        kind,
        name,
        "--subresource=status",
        "--type=json",
        "-p",
        &patch.to_string(),
    ]);
}

/// The cluster's objects the webhook reads: the boot images ConfigMap, the master pool (its
/// one master done when `master_done`), the rendered MachineConfig of 4.21.0,
/// Infrastructure (GCP), ClusterVersion, MachineConfiguration (All), a master Node, the
/// workers' and the masters' user-data Secrets (spec-3 stubs).
pub fn seed(api: &ApiServer, master_done: bool) {
    let user_data =
        base64::engine::general_purpose::STANDARD.encode(br#"{"ignition":{"version":"3.2.0"}}"#);
    // The MCO stamps the ConfigMap once a master has finished; until then it holds
    // the previous release's stamp.
    let mut configmap = fixture("configmap-coreos-bootimages.assembled.yaml");
    if !master_done {
        configmap["data"]["MCOReleaseImageVersion"] = json!("4.20.9");
    }
    let world = [
        configmap,
        json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
               "metadata": {"name": "master"},
               "spec": {"configuration": {"name": "rendered-master-new"},
                        "machineConfigSelector": {"matchLabels": {"machineconfiguration.openshift.io/role": "master"}},
                        "nodeSelector": {"matchLabels": {"node-role.kubernetes.io/master": ""}}}}),
        json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
               "metadata": {"name": "rendered-master-new",
                            "annotations": {"machineconfiguration.openshift.io/release-image-version": "4.21.0"}},
               "spec": {"config": {"ignition": {"version": "3.5.0"}}}}),
        json!({"apiVersion": "config.openshift.io/v1", "kind": "Infrastructure",
               "metadata": {"name": "cluster"}, "spec": {"platformSpec": {"type": "GCP"}}}),
        json!({"apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion",
               "metadata": {"name": "version"},
               "spec": {"clusterID": "6f1e2d3c-0000-4000-8000-000000000001"}}),
        json!({"apiVersion": "operator.openshift.io/v1", "kind": "MachineConfiguration",
               "metadata": {"name": "cluster"},
               "spec": {"managedBootImages": {"machineManagers": [
                   {"resource": "machinesets", "apiGroup": "machine.openshift.io", "selection": {"mode": "All"}}]}}}),
        json!({"apiVersion": "v1", "kind": "Node",
               "metadata": {"name": "master-0",
                            "labels": {"node-role.kubernetes.io/master": "", "kubernetes.io/arch": "amd64"}}}),
        json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
               "metadata": {"name": "worker-user-data", "namespace": NS},
               "data": {"userData": user_data}}),
        json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
               "metadata": {"name": "master-user-data", "namespace": NS},
               "data": {"userData": user_data}}),
    ];
    create_all(api, &world.iter().collect::<Vec<_>>());
    set_master_updated(api, if master_done { 1 } else { 0 });
    set_status(
        api,
        "infrastructure",
        "cluster",
        json!({"platform": "GCP", "infrastructureName": "build02-fmpjh",
               "platformStatus": {"type": "GCP", "gcp": {"projectID": "openshift-ci-build-farm", "region": "us-central1"}},
               "controlPlaneTopology": "HighlyAvailable", "infrastructureTopology": "HighlyAvailable",
               "apiServerURL": "https://api.build02.example:6443",
               "apiServerInternalURI": "https://api-int.build02.example:6443",
               "etcdDiscoveryDomain": ""}),
    );
    let release = |v: &str| format!("quay.io/openshift-release-dev/ocp-release:{v}-x86_64");
    set_status(
        api,
        "clusterversion",
        "version",
        json!({"observedGeneration": 1, "versionHash": "x", "availableUpdates": null,
               "desired": {"version": "4.21.0", "image": release("4.21.0")},
               "history": [
                   {"state": "Partial", "version": "4.21.0", "image": release("4.21.0"),
                    "startedTime": "2026-11-01T00:00:00Z", "completionTime": null, "verified": false},
                   {"state": "Completed", "version": "4.20.9", "image": release("4.20.9"),
                    "startedTime": "2026-10-01T00:00:00Z", "completionTime": "2026-10-01T01:00:00Z", "verified": false}]}),
    );
    set_status(
        api,
        "machineconfiguration",
        "cluster",
        json!({"managedBootImagesStatus": {"machineManagers": [
            {"resource": "machinesets", "apiGroup": "machine.openshift.io", "selection": {"mode": "All"}}]}}),
    );
}

/// The master pool updates to rendered-master-new; `updated` masters run it.
pub fn set_master_updated(api: &ApiServer, updated: u32) {
    let t = "2026-11-01T00:00:00Z";
    set_status(
        api,
        "machineconfigpool",
        "master",
        json!({"observedGeneration": 1, "configuration": {"name": "rendered-master-old"},
               "machineCount": 3, "updatedMachineCount": updated, "readyMachineCount": 3,
               "unavailableMachineCount": 0, "degradedMachineCount": 0,
               "conditions": [
                   {"type": "Updating", "status": "True", "lastTransitionTime": t, "reason": "", "message": ""},
                   {"type": "Updated", "status": "False", "lastTransitionTime": t, "reason": "", "message": ""}]}),
    );
}

/// OpenShift 4.22's MachineConfiguration CRD.
pub const MACHINE_CONFIGURATION_CRD_4_22: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/crds/openshift-4.22/0000_80_machine-config_01_machineconfigurations-Default.crd.yaml"
);

/// MachineConfiguration `cluster` as OpenShift 4.22 keeps it on a platform whose boot
/// images the MCO does not manage (OpenStack, Nutanix): its spec names none (the MCO's
/// `managed-bootimages-platform-check` policy refuses `spec.managedBootImages` there), and
/// its operator, which copies the old status and fills `managedBootImagesStatus` only where
/// it manages boot images, leaves `{"managedBootImagesStatus": {}, "observedGeneration": 1}`.
pub fn machine_configuration_the_mco_leaves_alone(api: &ApiServer) {
    api.kubectl_ok([
        "apply",
        "--server-side",
        "--force-conflicts",
        "-f",
        MACHINE_CONFIGURATION_CRD_4_22,
    ]);
    api.kubectl_ok([
        "wait",
        "--for=condition=Established",
        "crd/machineconfigurations.operator.openshift.io",
    ]);
    api.kubectl_ok(["delete", "machineconfiguration", "cluster"]);
    let mc = json!({"apiVersion": "operator.openshift.io/v1", "kind": "MachineConfiguration",
                    "metadata": {"name": "cluster"}, "spec": {"managementState": "Managed"}});
    create_all(api, &[&mc]);
    set_status(
        api,
        "machineconfiguration",
        "cluster",
        json!({"managedBootImagesStatus": {}, "observedGeneration": 1}),
    );
    let stored = api.get_json(["machineconfiguration", "cluster"]);
    assert_eq!(stored["metadata"]["generation"], 1, "{stored:#}");
    assert_eq!(
        stored["status"],
        json!({"managedBootImagesStatus": {}, "observedGeneration": 1}),
        "{stored:#}"
    );
}
