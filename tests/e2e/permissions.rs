//! The security review of the default install, on a real kube-apiserver
//! (tests/support/apiserver.rs, `KUBE_VERSION=1.30` for OpenShift 4.17's Kubernetes): the
//! shipped manifests applied as an administrator would (tests/support/cluster.rs), then
//! asked, as the webhook's ServiceAccount, what it may do (`kubectl auth can-i --as`), and
//! tried with its own token: a stolen token reads no Secret but the user-data ones by
//! name, no MachineConfig, writes no Secret and no ControlPlaneMachineSet, creates and
//! deletes no MachineSet, and the ValidatingAdmissionPolicy lets its writes move boot
//! images and nothing else, while administrators write as before. And a MachineSet naming
//! a Secret outside the grant is left alone, said so everywhere an administrator looks.
//! And the webhook checks the policy itself: without it, it stops touching and says so.

use crate::support;

use std::time::{Duration, Instant};

use bootimage_webhook::cluster::apis;
use bootimage_webhook::cluster::touch::wall;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use support::cluster::*;
use support::thief::*;
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
    let _parallel = support::parallel();
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
    let _parallel = support::parallel();
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
    let _parallel = support::parallel();
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
    let _parallel = support::parallel();
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

/// With the ServiceAccount's own token: each platform's boot image moves to the ConfigMap's
/// target, and to nothing else (on the world's full-size stream documents, which the policy
/// reads as its parameter).
#[test]
fn a_stolen_token_sets_boot_images_only_to_what_the_configmap_names() {
    let _parallel = support::parallel();
    let c = Cluster::start(true);
    let cases = platform_cases();
    for case in &cases {
        c.create(&with_provider_spec(case.name, case.value.clone()));
    }
    let ms = stolen(&c, &apis::MACHINESET);
    until_the_policy_holds(&ms, cases[0].name, "/metadata/labels");
    for case in &cases {
        for other in &case.others {
            let what = format!("{} {} = {other}", case.name, case.field);
            denied(
                json_patch(&ms, case.name, replace_field(case.field, other.clone())),
                CONFIGMAP,
                &what,
            );
        }
        json_patch(
            &ms,
            case.name,
            replace_field(case.field, case.target.clone()),
        )
        .unwrap_or_else(|e| panic!("{}: the ConfigMap's target: {e}", case.name));
        let stored = c.api.get_json(["machineset", case.name, "-n", NS]);
        assert_eq!(
            stored.pointer(&format!("{PROVIDER}/{}", case.field)),
            Some(&case.target)
        );
    }
}

/// GCP disks by position: only a boot disk's image moves, to the ConfigMap's image; the
/// disks keep their count, order and every other key.
#[test]
fn a_stolen_token_moves_only_the_boot_disks_image() {
    let _parallel = support::parallel();
    let c = Cluster::start(true);
    let mut gcp = machineset("ms-disks", OLD);
    let disks = gcp.pointer_mut(&format!("{PROVIDER}/disks")).unwrap();
    let boot = disks[0].clone();
    let data = json!({"autoDelete": true, "boot": false, "sizeGb": 100, "type": "pd-ssd"});
    let customer = json!({"autoDelete": true, "boot": false, "sizeGb": 200, "type": "pd-standard",
                          "image": "projects/customer/global/images/data"});
    *disks = json!([boot, data, customer]);
    c.create(&gcp);
    let ms = stolen(&c, &apis::MACHINESET);
    until_the_policy_holds(&ms, "ms-disks", "/metadata/labels");
    let disk = |i: usize| format!("{PROVIDER}/disks/{i}");
    let mut boot_copy = boot.clone();
    boot_copy["image"] = json!(CURRENT_X86);
    let attempts = [
        (
            json!([{"op": "replace", "path": format!("{}/image", disk(0)), "value": "projects/evil/global/images/x"}]),
            CONFIGMAP,
            "another image",
        ),
        (
            json!([{"op": "add", "path": format!("{}/image", disk(1)), "value": CURRENT_X86}]),
            CONFIGMAP,
            "an image on a blank data disk",
        ),
        (
            json!([{"op": "replace", "path": format!("{}/image", disk(2)), "value": CURRENT_X86}]),
            CONFIGMAP,
            "a data disk's image",
        ),
        (
            json!([{"op": "move", "from": disk(2), "path": disk(1)}]),
            "their order",
            "two disks swapped",
        ),
        (
            json!([{"op": "replace", "path": disk(2), "value": boot_copy}]),
            "their order",
            "a data disk turned into a copy of the boot disk",
        ),
        (
            json!([{"op": "remove", "path": disk(1)}]),
            "their order",
            "a disk removed",
        ),
    ];
    for (patch, says, what) in attempts {
        denied(json_patch(&ms, "ms-disks", patch), says, what);
    }
    json_patch(
        &ms,
        "ms-disks",
        json!([{"op": "replace", "path": format!("{}/image", disk(0)), "value": CURRENT_X86}]),
    )
    .expect("the boot disk to the ConfigMap's image");
    let stored = c.get("ms-disks");
    assert_eq!(image(&stored), CURRENT_X86);
    assert_eq!(stored.pointer(&disk(2)), Some(&customer));
}

/// With the component aws-marketplace, an AMI outside the streams may replace only an AMI
/// that is itself outside them; without it, never.
#[test]
fn with_its_component_an_ami_beyond_the_streams_replaces_only_another() {
    let _parallel = support::parallel();
    let c = Cluster::start(true);
    let aws = |ami: &str| {
        json!({"kind": "AWSMachineProviderConfig", "ami": {"id": ami},
               "placement": {"region": "us-east-1"}})
    };
    let in_stream = "ami-0fbc8be8796dc1df5";
    c.create(&with_provider_spec(
        "ms-market",
        aws("ami-0aa0000000000001"),
    ));
    c.create(&with_provider_spec("ms-stream", aws(in_stream)));
    let ms = stolen(&c, &apis::MACHINESET);
    until_the_policy_holds(&ms, "ms-market", "/metadata/labels");
    let beyond = replace_field("ami", json!({"id": "ami-0aa0000000000002"}));
    denied(
        json_patch(&ms, "ms-market", beyond.clone()),
        CONFIGMAP,
        "no component",
    );
    support::rbac::enable_policies(&c.api, &["aws-marketplace"]);
    eventually(
        "the component's policy to let the marketplace AMI through",
        Duration::from_secs(60),
        String::new,
        || json_patch(&ms, "ms-market", beyond.clone()).ok(),
    );
    denied(
        json_patch(
            &ms,
            "ms-stream",
            replace_field("ami", json!({"id": "ami-0bad000000000001"})),
        ),
        CONFIGMAP,
        "an AMI of the streams replaced by another",
    );
}

/// The API server's answer to an update (PUT) of `object`, as the upgrader writes: `Ok`
/// when stored, else its message.
fn update(s: &Stolen, object: &Value) -> Result<(), String> {
    let name = object["metadata"]["name"].as_str().unwrap().to_owned();
    let object: DynamicObject = serde_json::from_value(object.clone()).unwrap();
    s.rt.block_on(s.api.replace(&name, &PostParams::default(), &object))
        .map(drop)
        .map_err(|e| e.to_string())
}

/// The user-data Secret as stored, with `userData` (and the backup, if given) as given.
fn with_stub(c: &Cluster, user_data: &[u8], backup: Option<&[u8]>) -> Value {
    let mut secret = c.api.get_json(["secret", "worker-user-data", "-n", NS]);
    secret["data"]["userData"] = json!(b64(user_data));
    if let Some(b) = backup {
        secret["data"]["userData-spec2-backup"] = json!(b64(b));
    }
    secret
}

/// With the component upgrade-stub-ignition, the ServiceAccount's own token may replace the
/// installer's spec-2 stub by exactly the spec-3 stub the webhook writes, the old one kept
/// beside it; any other Ignition, a lost backup or another key is denied by the policy.
#[test]
fn with_its_component_a_stolen_token_writes_only_a_faithful_stub_upgrade() {
    let _parallel = support::parallel();
    use bootimage_webhook::core::stub;
    let c = Cluster::start(true);
    c.kubectl(&["delete", "secret", "worker-user-data", "-n", NS]);
    c.create_all(&[
        &json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": "worker-user-data", "namespace": NS, "labels": {"role": "worker"}},
        "data": {"userData": b64(SPEC2.as_bytes()), "disableTemplating": b64(b"true")}}),
    ]);
    support::rbac::enable(&c.api, &["upgrade-stub-ignition"], &[]);
    let secrets = stolen(&c, &apis::USER_DATA_SECRET_WRITE);
    const SECRET_POLICY: &str = "ValidatingAdmissionPolicy 'bootimage-webhook-stub-upgrades-only'";
    let mut n = 0;
    eventually(
        "the policy to hold the Secret writes",
        Duration::from_secs(60),
        String::new,
        || {
            n += 1;
            let mut probe = c.api.get_json(["secret", "worker-user-data", "-n", NS]);
            probe["metadata"]["labels"]["policy-probe"] = json!(n.to_string());
            update(&secrets, &probe)
                .err()
                .filter(|e| e.contains(SECRET_POLICY))
        },
    );
    let faithful = stub::upgrade_installer_stub(SPEC2.as_bytes()).unwrap();
    let text = String::from_utf8(faithful.clone()).unwrap();
    let compact = text.replace(r#""merge": ["#, r#""merge":["#);
    let other_source = text.replace("api-int.c1", "evil");
    let with_files = text.replace(
        r#""version":"3.5.0"}"#,
        r#""version":"3.5.0"},"storage":{"files":[{"path":"/root/.ssh/authorized_keys","contents":{"source":"data:,x"}}]}"#,
    );
    let old = SPEC2.as_bytes();
    let mut other_key = with_stub(&c, &faithful, Some(old));
    other_key["data"]["disableTemplating"] = json!(b64(b"false"));
    let attempts: [(Value, &str); 6] = [
        (
            with_stub(&c, with_files.as_bytes(), Some(old)),
            "files added",
        ),
        (
            with_stub(&c, other_source.as_bytes(), Some(old)),
            "another config source",
        ),
        (
            with_stub(&c, compact.as_bytes(), Some(old)),
            "the same stub written otherwise",
        ),
        (with_stub(&c, &faithful, None), "no backup"),
        (
            with_stub(&c, &faithful, Some(b"{}")),
            "a backup that is not the old stub",
        ),
        (other_key, "another key"),
    ];
    for (secret, what) in attempts {
        let e = update(&secrets, &secret).expect_err(what);
        assert!(e.contains(SECRET_POLICY), "{what}: {e}");
    }
    update(&secrets, &with_stub(&c, &faithful, Some(old))).expect("the faithful upgrade");
    let stored = c.api.get_json(["secret", "worker-user-data", "-n", NS]);
    assert_eq!(stored["data"]["userData"], b64(&faithful));
    assert_eq!(stored["data"]["userData-spec2-backup"], b64(old));
}

/// The shipped `--touch-resync`: a policy that stops holding is found within it.
const SHIPPED_RESYNC: Duration = Duration::from_secs(600);

/// The wall checks itself: with the shipped manifests the Lease holder's probe (a dry-run
/// change of spec.replicas, as itself) is denied by the policy and touching goes on; with
/// the binding deleted, within one resync at the shipped defaults the probe is admitted
/// and the Lease holder stops touching, says why in its log, an Event, its gauge and
/// `status`; with the binding back, touching resumes.
#[test]
fn without_its_admission_policy_the_webhook_stops_touching_and_says_why() {
    let _parallel = support::parallel();
    let mut c = Cluster::start(true).with_shipped_touch();
    c.create(&machineset("ms-a", OLD));
    let ms = stolen(&c, &apis::MACHINESET);
    eventually(
        "the policy to deny the ServiceAccount's dry-run scaling",
        Duration::from_secs(60),
        String::new,
        || dry_run_scale(&ms, "ms-a").filter(|e| e.contains(POLICY)),
    );
    let a = c.holder(&[]);
    the_wall_holds_and_touching_goes_on(&c, &a);

    let binding = c
        .rendered
        .iter()
        .find(|d| {
            d["kind"] == "ValidatingAdmissionPolicyBinding"
                && d["metadata"]["name"] == apis::ADMISSION_POLICY
        })
        .expect("the render has the binding")
        .clone();
    c.kubectl(&[
        "delete",
        "validatingadmissionpolicybinding",
        apis::ADMISSION_POLICY,
    ]);
    eventually(
        "the Lease holder to find the policy not enforced",
        SHIPPED_RESYNC + Duration::from_secs(30),
        || a.served.log_text(),
        || (policy_gauge(&a) == Some(0)).then_some(()),
    );
    the_hole_is_told_and_nothing_is_touched(&c, &a);

    c.create_all(&[&binding]);
    a.wait_line(wall::ENFORCED);
    the_stale_copy_is_told_until_a_restart(&mut c, &a);
    assert_eq!(policy_gauge(&a), Some(1));
    let resumed = events_of(&c, wall::ENFORCED, "ms-a");
    assert_eq!(resumed.first().map(|e| &e["type"]), Some(&json!("Normal")));
    assert!(!status(&c, "table").contains("NOT in force"));
    c.assert_nothing_refused(&[&a]);
}

/// The binding is back, but the API server froze its copy of the ConfigMap when the binding
/// went (kubernetes/kubernetes#130887, on every Kubernetes tested here): the touch to the new
/// stream is refused on its value, and told as such, until the kube-apiserver restarts.
fn the_stale_copy_is_told_until_a_restart(c: &mut Cluster, a: &Replica) {
    let events = eventually(
        "the refusal on a stale ConfigMap to be told",
        Duration::from_secs(180),
        || a.served.log_text(),
        || {
            let e = events_of(c, wall::PARAMETER_STALE, "ms-a");
            if e.is_empty() {
                c.passes(a, 1);
            }
            (!e.is_empty()).then_some(e)
        },
    );
    assert_eq!(events[0]["type"], "Warning");
    let note = events[0]["note"].as_str().unwrap_or_default();
    assert!(
        note.contains(NEWER) && note.contains("restart the kube-apiserver"),
        "{note}"
    );
    assert_eq!(image(&c.get("ms-a")), CURRENT_X86);
    assert_eq!(
        a.lines(wall::PARAMETER_STALE).len(),
        1,
        "told once, not at each pass"
    );

    c.stop_apiserver();
    c.restart_apiserver();
    // The replica's watches come back after their backoff; until then a nudge brings no
    // pass, so nudge again now and then.
    let mut nudged = Instant::now() - Duration::from_secs(60);
    eventually(
        "touching to resume after the restart: ms-a moves to the new stream",
        Duration::from_secs(180),
        || a.served.log_text(),
        || {
            if image(&c.get("ms-a")) == NEWER {
                return Some(());
            }
            if nudged.elapsed() > Duration::from_secs(15) {
                c.nudge();
                nudged = Instant::now();
            }
            None
        },
    );
}

/// A server-side dry run of a change of `name`'s replicas: `None` if it would be stored,
/// else the API server's refusal.
fn dry_run_scale(s: &Stolen, name: &str) -> Option<String> {
    let params = PatchParams {
        dry_run: true,
        ..PatchParams::default()
    };
    let patch = json!({"spec": {"replicas": 7}});
    s.rt.block_on(s.api.patch(name, &params, &Patch::Merge(&patch)))
        .err()
        .map(|e| e.to_string())
}

fn policy_gauge(a: &Replica) -> Option<i64> {
    metric(a, "bootimage_webhook_admission_policy_enforced")
}

/// The first pass probes, is denied, and touches ms-a as before; the probe stored nothing.
fn the_wall_holds_and_touching_goes_on(c: &Cluster, a: &Replica) {
    eventually(
        "ms-a to move",
        Duration::from_secs(60),
        || a.served.log_text(),
        || (image(&c.get("ms-a")) == CURRENT_X86).then_some(()),
    );
    assert_eq!(policy_gauge(a), Some(1));
    let events = c.audit();
    let probes: Vec<&Value> = events
        .iter()
        .filter(|e| {
            // The replica's own (the test's probes above came before the policy held).
            is_ours(e) && with_token(e, &a.jti) && is_dry_run(e) && e["stage"] == "ResponseComplete"
        })
        .collect();
    assert!(!probes.is_empty(), "no dry-run probe audited");
    // Denied: 422 by the policy's rules, or 403 while the API server has not read the
    // policy's parameter yet (the binding's parameterNotFoundAction: Deny).
    for p in &probes {
        assert_eq!(p["verb"], "patch", "{p}");
        let code = &p["responseStatus"]["code"];
        assert!(code == 422 || code == 403, "{p}");
    }
    // More than one if the first came before the apiserver called the new webhook.
    let touched = touches(&events, Some(&a.jti));
    assert!(
        !touched.is_empty() && touched.iter().all(|n| n == "ms-a"),
        "{touched:?}"
    );
    assert_eq!(c.get("ms-a")["spec"]["replicas"], 1);
    assert!(
        a.lines(wall::NOT_ENFORCED).is_empty(),
        "{}",
        a.served.log_text()
    );
    assert!(status(c, "table").contains("Admission policy: in force"));
}

/// The hole is told in the log, an Event, `status`; a new stream then moves nothing.
fn the_hole_is_told_and_nothing_is_touched(c: &Cluster, a: &Replica) {
    let said = a.lines(wall::NOT_ENFORCED);
    assert!(
        said.iter().any(|l| l.contains("re-apply the manifests")),
        "{said:?}"
    );
    let events = eventually(
        "the Warning Event",
        Duration::from_secs(30),
        || a.served.log_text(),
        || {
            let e = events_of(c, wall::NOT_ENFORCED, "ms-a");
            (!e.is_empty()).then_some(e)
        },
    );
    assert_eq!(events[0]["type"], "Warning");
    let table = status(c, "table");
    assert!(
        table.contains("Admission policy: NOT in force (ValidatingAdmissionPolicyBinding bootimage-webhook-boot-images-only not found): touching is stopped"),
        "{table}"
    );
    let report = status_json(c);
    assert_eq!(report["admissionPolicy"]["present"], false, "{report}");
    assert_eq!(report["admissionPolicy"]["toucherFoundEnforced"], false);

    let mark = c.audit().len();
    c.set_stream(&stream_with_gcp_image(NEWER_NAME));
    // The pass the new stream brings (after the shipped settle) and the retries probe,
    // are admitted, and stop there.
    std::thread::sleep(Duration::from_secs(20));
    assert_eq!(image(&c.get("ms-a")), CURRENT_X86);
    let events = c.audit();
    assert_eq!(touches(&events[mark..], None), Vec::<String>::new());
    assert!(
        events[mark..].iter().any(|e| is_ours(e)
            && is_dry_run(e)
            && e["stage"] == "ResponseComplete"
            && e["responseStatus"]["code"] == 200),
        "no admitted probe after the new stream"
    );
    assert_eq!(policy_gauge(a), Some(0));
}
