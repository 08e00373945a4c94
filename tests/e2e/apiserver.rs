//! The real kube-apiserver of `tests/support/apiserver.rs` does what the other tests rely
//! on: the OpenShift CRDs take a real MachineSet, MachineConfigPool status goes through
//! the /status subresource, service-account tokens authenticate and RBAC refuses what
//! they are not granted, and every write lands in the audit log.
//!
//! These tests fail (never skip) if the apiserver cannot be built or started; the
//! message names the step and the log.

use crate::support;

use serde_json::{Value, json};
use support::apiserver::ApiServer;

const NS: &str = "openshift-machine-api";
const MACHINESET_FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/machineset-gcp-build02-infra-a.yaml"
);

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The audit events of `verb` on `resource` named `name` (any subresource).
fn audited<'a>(events: &'a [Value], verb: &str, resource: &str, name: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| {
            e["verb"] == verb
                && e["objectRef"]["resource"] == resource
                && e["objectRef"]["name"] == name
        })
        .collect()
}

/// `value` without the object fields whose value is null, at any depth.
fn without_nulls(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), without_nulls(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_nulls).collect()),
        other => other.clone(),
    }
}

/// `KUBE_VERSION` (a minor, or its release) picks the Kubernetes of every test here and in
/// `tests/e2e/real_apiserver_*.rs`; unset, today's. It is the one that runs, with the CRDs of the
/// OpenShift release that runs it (`scripts/test-apiserver versions`).
#[test]
fn the_apiserver_is_the_kubernetes_kube_version_names_with_its_openshift_crds() {
    let _parallel = support::parallel();
    let api = ApiServer::start();
    let version: Value = serde_json::from_str(&api.kubectl_ok(["get", "--raw", "/version"]))
        .expect("/version is JSON");
    let release = api.env("KUBE_RELEASE");
    let minor = api.env("KUBE_VERSION");
    assert_eq!(version["gitVersion"], release, "{version}");
    assert_eq!(
        format!(
            "{}.{}",
            version["major"].as_str().unwrap(),
            version["minor"].as_str().unwrap()
        ),
        minor
    );
    if let Ok(wanted) = std::env::var("KUBE_VERSION")
        && !wanted.is_empty()
    {
        let wanted = wanted.trim_start_matches('v');
        assert!(
            wanted == minor || wanted == release.trim_start_matches('v'),
            "KUBE_VERSION={wanted} but {release} runs"
        );
    }

    // Each CRD file of the version's folder is installed as written: the served schema of
    // every version is the file's.
    let folder = std::path::PathBuf::from(api.env("CRDS"));
    let mut files = 0;
    for entry in std::fs::read_dir(&folder).expect("CRD folder").flatten() {
        let path = entry.path();
        if !path.to_string_lossy().ends_with(".crd.yaml") {
            continue;
        }
        files += 1;
        let text = std::fs::read_to_string(&path).unwrap();
        let file: Value = serde_saphyr::from_str(&text).expect("CRD is YAML");
        let name = file["metadata"]["name"].as_str().expect("CRD name");
        let served = api.get_json(["crd", name]);
        let schemas = |crd: &Value| -> Vec<(Value, Value)> {
            crd["spec"]["versions"]
                .as_array()
                .expect("versions")
                .iter()
                .map(|v| (v["name"].clone(), v["schema"]["openAPIV3Schema"].clone()))
                .collect()
        };
        assert_eq!(
            schemas(&served),
            schemas(&file),
            "{name}: the served schema is not {}",
            path.display()
        );
    }
    assert_eq!(files, 8, "{}", folder.display());
}

#[test]
fn a_real_machineset_applies_and_reads_back() {
    let _parallel = support::parallel();
    let api = ApiServer::start();
    let text = std::fs::read_to_string(MACHINESET_FIXTURE).expect("MachineSet fixture");
    let fixture: Value = serde_saphyr::from_str(&text).expect("MachineSet fixture is YAML");
    let name = fixture["metadata"]["name"].as_str().expect("fixture name");
    assert_eq!(fixture["metadata"]["namespace"], NS);

    let out = api.kubectl_ok(["apply", "-f", MACHINESET_FIXTURE]);
    assert!(out.contains(name), "{out}");

    let got = api.get_json(["machineset", name, "-n", NS]);
    assert_eq!(got["apiVersion"], "machine.openshift.io/v1beta1");
    assert_eq!(got["metadata"]["generation"], 1);
    // The providerSpec is an embedded object the CRD keeps as written (unknown fields
    // included): the part the webhook patches. `kubectl apply` drops null-valued fields
    // (`labels: null` on the disk, `creationTimestamp: null`) before it sends the object.
    let provider = "/spec/template/spec/providerSpec/value";
    assert_eq!(
        got.pointer(provider),
        without_nulls(&fixture).pointer(provider),
        "providerSpec changed on the way through kubectl apply and the apiserver"
    );
    // The apiserver itself keeps them: the same object POSTed as is comes back whole.
    let mut raw = fixture.clone();
    raw["metadata"]["name"] = json!(format!("{name}-raw"));
    let raw_file = api.dir().join("machineset-raw.json");
    std::fs::write(&raw_file, raw.to_string()).unwrap();
    let posted = api.kubectl_ok([
        "create",
        "--raw",
        &format!("/apis/machine.openshift.io/v1beta1/namespaces/{NS}/machinesets"),
        "-f",
        raw_file.to_str().unwrap(),
    ]);
    let posted: Value = serde_json::from_str(&posted).expect("POST answer is JSON");
    assert_eq!(posted.pointer(provider), fixture.pointer(provider));
    assert!(
        fixture
            .pointer(&format!("{provider}/disks/0/labels"))
            .unwrap()
            .is_null()
    );
    assert_eq!(got["spec"]["selector"], fixture["spec"]["selector"]);
    // The fixture has no replicas: the CRD's schema default fills them in.
    assert!(fixture["spec"].get("replicas").is_none());
    assert_eq!(got["spec"]["replicas"], 1);

    let events = api.audit_events();
    let created = audited(&events, "create", "machinesets", name);
    assert_eq!(created.len(), 1, "audit log {}", api.audit_log().display());
    let event = created[0];
    assert_eq!(event["level"], "Metadata");
    assert_eq!(event["stage"], "ResponseComplete");
    assert_eq!(event["user"]["username"], "test-admin");
    assert_eq!(event["objectRef"]["namespace"], NS);
    assert_eq!(event["responseStatus"]["code"], 201);
    assert!(
        event.get("requestObject").is_none(),
        "Metadata level has no bodies"
    );
}

#[test]
fn machineconfigpool_status_is_written_through_the_status_subresource() {
    let _parallel = support::parallel();
    let api = ApiServer::start();
    let pool = json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfigPool",
        "metadata": {"name": "master", "labels": {"pools.operator.machineconfiguration.openshift.io/master": ""}},
        "spec": {
            "machineConfigSelector": {"matchLabels": {"machineconfiguration.openshift.io/role": "master"}},
            "nodeSelector": {"matchLabels": {"node-role.kubernetes.io/master": ""}}
        },
        // Dropped: on a resource with a status subresource, the main endpoint ignores status.
        "status": {"machineCount": 99}
    });
    let out = api.kubectl_stdin(["create", "-f", "-"], &pool.to_string());
    api.expect_ok(&["create", "-f", "-"], out);
    let created = api.get_json(["machineconfigpool", "master"]);
    assert!(
        created
            .get("status")
            .is_none_or(|s| s.get("machineCount").is_none()),
        "status written through the main endpoint: {created}"
    );

    let status = json!({"status": {
        "observedGeneration": 1,
        "configuration": {"name": "rendered-master-0123456789abcdef0123456789abcdef"},
        "machineCount": 3,
        "updatedMachineCount": 3,
        "readyMachineCount": 3,
        "unavailableMachineCount": 0,
        "degradedMachineCount": 0,
        "conditions": [
            {"type": "Updated", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z", "reason": "", "message": "All nodes are updated with MachineConfig rendered-master-0123456789abcdef0123456789abcdef"},
            {"type": "Updating", "status": "False", "lastTransitionTime": "2026-01-01T00:00:00Z", "reason": "", "message": ""}
        ]
    }});
    api.kubectl_ok([
        "patch",
        "machineconfigpool",
        "master",
        "--subresource=status",
        "--type=merge",
        "-p",
        &status.to_string(),
    ]);
    // A spec change sent to /status is ignored.
    api.kubectl_ok([
        "patch",
        "machineconfigpool",
        "master",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"spec":{"paused":true}}"#,
    ]);

    let got = api.get_json(["machineconfigpool", "master"]);
    assert_eq!(got["status"], status["status"]);
    assert_eq!(
        got["spec"].get("paused").cloned().unwrap_or(json!(false)),
        false
    );
    assert_eq!(
        got["metadata"]["generation"], 1,
        "a status write bumped the generation"
    );

    let events = api.audit_events();
    let patches = audited(&events, "patch", "machineconfigpools", "master");
    assert_eq!(patches.len(), 2, "audit log {}", api.audit_log().display());
    assert!(
        patches
            .iter()
            .all(|e| e["objectRef"]["subresource"] == "status")
    );
}

#[test]
fn a_service_account_token_authenticates_and_rbac_refuses_what_it_was_not_granted() {
    let _parallel = support::parallel();
    let api = ApiServer::start();
    api.kubectl_ok(["create", "serviceaccount", "reader", "-n", NS]);
    let token = api.kubectl_ok(["create", "token", "reader", "-n", NS, "--duration=10m"]);
    let token = token.trim();
    assert_eq!(token.split('.').count(), 3, "not a JWT: {token}");

    let who = api.kubectl_as(token, ["auth", "whoami", "-o", "json"]);
    let who: Value = serde_json::from_slice(&who.stdout).unwrap_or_else(|e| {
        panic!("auth whoami ({e}): {}", stderr(&who));
    });
    assert_eq!(
        who["status"]["userInfo"]["username"],
        format!("system:serviceaccount:{NS}:reader")
    );

    // Authenticated, not authorized: 403 Forbidden, not 401.
    let out = api.kubectl_as(token, ["get", "machinesets", "-n", NS]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("(Forbidden)"), "{err}");
    assert!(
        err.contains(&format!(
            "User \"system:serviceaccount:{NS}:reader\" cannot list resource \"machinesets\""
        )),
        "{err}"
    );

    // Granted, the same token lists them.
    api.kubectl_ok([
        "create",
        "role",
        "machineset-reader",
        "-n",
        NS,
        "--verb=get,list",
        "--resource=machinesets.machine.openshift.io",
    ]);
    api.kubectl_ok([
        "create",
        "rolebinding",
        "reader",
        "-n",
        NS,
        "--role=machineset-reader",
        &format!("--serviceaccount={NS}:reader"),
    ]);
    let out = api.kubectl_as(token, ["get", "machinesets", "-n", NS]);
    assert!(out.status.success(), "{}", stderr(&out));
    // Still nothing outside the grant.
    let out = api.kubectl_as(token, ["get", "machinesets", "-n", "default"]);
    assert!(stderr(&out).contains("(Forbidden)"), "{}", stderr(&out));
}
