//! The security review of the default install, on a real kube-apiserver
//! (tests/support/apiserver.rs, `KUBE_VERSION=1.30` for OpenShift 4.17's Kubernetes): the
//! shipped manifests applied as an administrator would (tests/support/cluster.rs), then
//! asked, as the webhook's ServiceAccount, what it may do (`kubectl auth can-i --as`), and
//! tried with its own token: a stolen token reads no Secret but the user-data ones by
//! name, no MachineConfig, writes no Secret and no ControlPlaneMachineSet, creates and
//! deletes no MachineSet, and the ValidatingAdmissionPolicy lets its writes move boot
//! images and nothing else, while administrators write as before. And a MachineSet naming
//! a Secret outside the grant is left alone, said so everywhere an administrator looks.

mod support;

use std::time::Duration;

use bootimage_webhook::cluster::apis;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};
use support::cluster::*;
use support::{CURRENT_X86, cpms_image};

/// `kubectl auth can-i VERB RESOURCE[/NAME] [--subresource SUB] -n NS --as <the
/// ServiceAccount>`; `RESOURCE#SUB` names a subresource.
fn can(c: &Cluster, verb: &str, resource: &str, namespace: &str) -> bool {
    let (resource, sub) = resource.split_once('#').unwrap_or((resource, ""));
    let mut args = vec!["auth", "can-i", verb, resource, "--as", SA_USER];
    if !sub.is_empty() {
        args.extend(["--subresource", sub]);
    }
    if namespace.is_empty() {
        args.push("--all-namespaces");
    } else {
        args.extend(["-n", namespace]);
    }
    let out = c.api.kubectl(&args);
    match out.status.code() {
        Some(0) => true,
        Some(1) => false,
        _ => panic!("kubectl {args:?}: {}", text(&out)),
    }
}

#[test]
fn the_service_account_reads_no_secret_by_kind_and_writes_only_the_touch() {
    let c = Cluster::start(true);
    let cloud_credentials = [
        "secrets/aws-cloud-credentials",
        "secrets/azure-cloud-credentials",
        "secrets/gcp-cloud-credentials",
        "secrets/vsphere-cloud-credentials",
    ];
    let mut denied: Vec<(&str, &str, &str)> = vec![
        ("list", "secrets", NS),
        ("watch", "secrets", NS),
        ("list", "secrets", ""),
        ("watch", "secrets", ""),
        ("get", "secrets", NS),
        ("get", "secrets/pull-secret", "openshift-config"),
        ("get", "secrets/vsphere-creds", "kube-system"),
        ("create", "secrets", NS),
        ("update", "secrets/worker-user-data", NS),
        ("patch", "secrets/worker-user-data", NS),
        ("delete", "secrets/worker-user-data", NS),
        (
            "get",
            "machineconfigs.machineconfiguration.openshift.io",
            "",
        ),
        (
            "list",
            "machineconfigs.machineconfiguration.openshift.io",
            "",
        ),
        (
            "watch",
            "machineconfigs.machineconfiguration.openshift.io",
            "",
        ),
        ("list", "controlplanemachinesets.machine.openshift.io", NS),
        ("patch", "controlplanemachinesets.machine.openshift.io", NS),
        ("update", "controlplanemachinesets.machine.openshift.io", NS),
        ("create", "machinesets.machine.openshift.io", NS),
        ("delete", "machinesets.machine.openshift.io", NS),
        ("deletecollection", "machinesets.machine.openshift.io", NS),
        ("update", "machinesets.machine.openshift.io", NS),
        ("patch", "machinesets.machine.openshift.io#scale", NS),
        ("update", "machinesets.machine.openshift.io#scale", NS),
        ("patch", "machinesets.machine.openshift.io#status", NS),
        ("create", "machines.machine.openshift.io", NS),
    ];
    denied.extend(cloud_credentials.map(|s| ("get", s, NS)));
    let allowed = [
        ("get", "secrets/worker-user-data", NS),
        ("get", "secrets/master-user-data", NS),
        ("get", "secrets/worker-user-data-managed", NS),
        ("watch", "secrets/master-user-data-managed", NS),
        ("list", "machinesets.machine.openshift.io", NS),
        ("patch", "machinesets.machine.openshift.io", NS),
    ];
    let wrong: Vec<String> = denied
        .iter()
        .map(|&(v, r, ns)| (v, r, ns, false))
        .chain(allowed.iter().map(|&(v, r, ns)| (v, r, ns, true)))
        .filter(|&(v, r, ns, want)| can(&c, v, r, ns) != want)
        .map(|(v, r, ns, want)| format!("{v} {r} in {ns:?}: want {want}"))
        .collect();
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// A client of the API server with the ServiceAccount's own token, as a thief has it.
struct Stolen {
    rt: tokio::runtime::Runtime,
    api: Api<DynamicObject>,
}

fn stolen(c: &Cluster, resource: &apis::Call) -> Stolen {
    let path = c.api.token_kubeconfig(&c.token(), Some(NS));
    let kubeconfig = kube::config::Kubeconfig::read_from(path).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let api = rt.block_on(async {
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .unwrap();
        let client = kube::Client::try_from(config).unwrap();
        Api::namespaced_with(client, NS, &resource.api_resource())
    });
    Stolen { rt, api }
}

/// The API server's answer to a JSON patch: `Ok` when stored, else its message.
fn json_patch(s: &Stolen, name: &str, patch: Value) -> Result<(), String> {
    let patch: json_patch::Patch = serde_json::from_value(patch).unwrap();
    s.rt.block_on(
        s.api
            .patch(name, &PatchParams::default(), &Patch::<()>::Json(patch)),
    )
    .map(drop)
    .map_err(|e| e.to_string())
}

const POLICY: &str = "ValidatingAdmissionPolicy 'bootimage-webhook-boot-images-only'";

/// The API server enforces a new ValidatingAdmissionPolicy once its informer has it and its
/// binding, a moment after they are created (longer on a busy machine): a label write (at
/// `labels`) by the ServiceAccount is stored until then, and denied by the policy after.
fn until_the_policy_holds(s: &Stolen, name: &str, labels: &str) {
    let mut n = 0;
    eventually(
        "the ValidatingAdmissionPolicy to hold the ServiceAccount's writes",
        Duration::from_secs(60),
        String::new,
        || {
            n += 1;
            let probe = json!([{"op": "add", "path": format!("{labels}/policy-probe"), "value": n.to_string()}]);
            json_patch(s, name, probe)
                .err()
                .filter(|e| e.contains(POLICY))
                .map(drop)
        },
    );
}

fn denied(result: Result<(), String>, says: &str, what: &str) {
    let e = result.expect_err(what);
    assert!(e.contains(POLICY) && e.contains(says), "{what}: {e}");
}

#[test]
fn the_service_account_may_move_boot_images_and_nothing_else() {
    let c = Cluster::start(true);
    c.create(&machineset("ms-a", OLD));
    let ms = stolen(&c, &apis::MACHINESET);
    until_the_policy_holds(&ms, "ms-a", "/metadata/labels");
    let p = |patch: Value| json_patch(&ms, "ms-a", patch);
    let replace = |path: &str, value: Value| json!([{"op": "replace", "path": format!("{PROVIDER}{path}"), "value": value}]);
    let providerspec = "the boot image fields of the providerSpec";
    denied(
        p(json!([{"op": "replace", "path": "/spec/replicas", "value": 40}])),
        "replicas",
        "scaling",
    );
    denied(
        p(replace("/userDataSecret/name", json!("attacker-user-data"))),
        providerspec,
        "the userDataSecret",
    );
    denied(
        p(replace("/machineType", json!("a2-megagpu-16g"))),
        providerspec,
        "the machine type",
    );
    denied(
        p(json!([{"op": "add", "path": "/spec/template/metadata/labels/stolen", "value": "yes"}])),
        "template metadata",
        "a template label",
    );
    denied(
        p(json!([{"op": "add", "path": "/metadata/labels/stolen", "value": "yes"}])),
        "labels",
        "a label",
    );
    denied(
        p(json!([{"op": "add", "path": "/metadata/annotations", "value": {"stolen": "yes"}}])),
        "its own annotations",
        "another annotation",
    );
    denied(
        p(replace("/disks/0/sizeGb", json!(4096))),
        "the image of a GCP disk",
        "a disk's size",
    );
    let unchanged = c.get("ms-a");
    assert_eq!(unchanged["spec"]["replicas"], 1, "{unchanged}");
    assert_eq!(image(&unchanged), OLD);

    // What the touch and the webhook's mutation of it write: the image and the
    // annotations the webhook owns.
    let mut owned = serde_json::Map::new();
    owned.insert(TOUCH.into(), json!("t-1"));
    owned.insert(BOOT_IMAGE.into(), json!(CURRENT_X86));
    owned.insert(
        "bootimages.machineconfiguration.openshift.io/reverts".into(),
        json!(format!("1 {CURRENT_X86}")),
    );
    p(json!([
        {"op": "replace", "path": format!("{PROVIDER}/disks/0/image"), "value": CURRENT_X86},
        {"op": "add", "path": "/metadata/annotations", "value": owned}
    ]))
    .expect("moving the boot image");
    assert_eq!(image(&c.get("ms-a")), CURRENT_X86);

    // Administrators (and every other writer) are not held by the policy.
    c.kubectl(&["scale", "machineset", "ms-a", "-n", NS, "--replicas=3"]);
    c.kubectl(&["label", "machineset", "ms-a", "-n", NS, "team=infra"]);
    assert_eq!(c.get("ms-a")["spec"]["replicas"], 3);
}

/// With the component that enables them, the same holds for the ControlPlaneMachineSet.
#[test]
fn with_its_component_the_control_plane_machine_set_moves_its_boot_image_only() {
    let c = Cluster::start(true);
    c.create(&control_plane_machine_set(OLD));
    let cpms = stolen(&c, &apis::CONTROLPLANEMACHINESET);
    let machine = "/spec/template/machines_v1beta1_machine_openshift_io/spec/providerSpec/value";
    let image_patch = json!([{"op": "replace", "path": format!("{machine}/disks/0/image"), "value": CURRENT_X86}]);
    let e = json_patch(&cpms, "cluster", image_patch.clone()).expect_err("no grant yet");
    assert!(e.contains("forbidden"), "{e}");
    support::rbac::enable(&c.api, &["control-plane-machine-sets"], &[]);
    until_the_policy_holds(
        &cpms,
        "cluster",
        "/spec/template/machines_v1beta1_machine_openshift_io/metadata/labels",
    );
    denied(
        json_patch(
            &cpms,
            "cluster",
            json!([{"op": "add", "path": "/spec/template/machines_v1beta1_machine_openshift_io/metadata/labels/stolen", "value": "yes"}]),
        ),
        "template metadata",
        "a CPMS machine label",
    );
    denied(
        json_patch(
            &cpms,
            "cluster",
            json!([{"op": "replace", "path": format!("{machine}/machineType"), "value": "a2-megagpu-16g"}]),
        ),
        "the boot image fields of the providerSpec",
        "CPMS machine type",
    );
    json_patch(&cpms, "cluster", image_patch).expect("moving the CPMS boot image");
    let get = c
        .api
        .get_json(["controlplanemachineset", "cluster", "-n", NS]);
    assert_eq!(cpms_image(&get), CURRENT_X86);
}

/// A MachineSet naming a Secret outside the grant is left alone, with its own reason that
/// names the Secret and the grant: in the webhook's answer and decision line, `status`,
/// an Event and `preview`. The Secret is never asked for.
#[test]
fn a_secret_outside_the_grant_is_named_and_never_read() {
    let c = Cluster::start(true);
    c.create_all(&[&user_data_secret("infra-user-data-managed", "3.5.0")]);
    let a = c.holder(&[]);
    let mut ms = machineset("ms-infra", OLD);
    ms.pointer_mut(PROVIDER).unwrap()["userDataSecret"] =
        json!({"name": "infra-user-data-managed"});
    c.create(&ms);
    assert_eq!(image(&c.get("ms-infra")), OLD);
    assert_eq!(
        webhook_call(creation(&c.audit(), "ms-infra")),
        answered("UserDataSecretNotGranted", false)
    );
    let grant = "grant it by adding infra-user-data-managed to the resourceNames of Role bootimage-webhook-user-data-secrets";
    a.wait_line("UserDataSecretNotGranted");
    let line = a
        .served
        .log()
        .into_iter()
        .find(|l| l.contains("ms-infra") && l.contains("UserDataSecretNotGranted"))
        .expect("a decision line");
    assert!(line.contains("infra-user-data-managed"), "{line}");
    let events = eventually(
        "the Warning Event",
        Duration::from_secs(30),
        || a.served.log_text(),
        || {
            let e = events_of(&c, "UserDataSecretNotGranted", "ms-infra");
            (!e.is_empty()).then_some(e)
        },
    );
    assert_eq!(events[0]["type"], "Warning");
    assert!(
        events[0]["note"].as_str().unwrap().contains(grant),
        "{events:?}"
    );
    let report: Value = serde_json::from_str(&status(&c, "json")).unwrap();
    let row = report["machineSets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "ms-infra")
        .unwrap()
        .clone();
    assert_eq!(row["reason"], "UserDataSecretNotGranted", "{row}");
    let file = c.certs_dir.path().join("ms-infra.json");
    std::fs::write(&file, ms.to_string()).unwrap();
    let out = std::process::Command::new(support::binary::BIN)
        .args(["preview", "--assume-masters-updated", "--machineset-file"])
        .arg(&file)
        .output()
        .unwrap();
    let preview = String::from_utf8_lossy(&out.stdout);
    assert!(
        preview.contains("UserDataSecretNotGranted") && preview.contains(grant),
        "{preview}"
    );
    // The webhook never asked for the Secret (it could not have had it).
    let asked: Vec<Value> = c
        .audit()
        .into_iter()
        .filter(|e| is_ours(e) && e["objectRef"]["name"] == "infra-user-data-managed")
        .collect();
    assert!(asked.is_empty(), "{asked:?}");
    c.assert_nothing_refused(&[&a]);
}
