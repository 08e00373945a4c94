//! The skew record keeper (`bootimage-webhook skew keep`, the opt-in component
//! `manifests/components/skew-record-keeper`) on a real kube-apiserver with OpenShift 4.22's
//! MachineConfiguration CRD, the component's objects applied as rendered and the keeper
//! running with its own ServiceAccount's token: it records the oldest boot image in use
//! once the MachineSets move, holds its own Lease, leaves another field manager's record
//! and mode None alone unless told to take them over, and its admission policy refuses
//! every other field. The webhook's Lease holder says when the record is due. The webhook's own ServiceAccount still cannot write
//! MachineConfiguration.

use crate::support;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bootimage_webhook::cluster::apis;
use serde_json::{Value, json};
use support::CURRENT_X86;
use support::cluster::*;
use support::render::render_with_component;

const KEEPER_NS: &str = apis::KEEPER_NAMESPACE;
/// The keeper's field manager (`core::skew::record::KEEPER_FIELD_MANAGER`).
const KEEPER_FIELD_MANAGER: &str = "bootimage-webhook-skew-record-keeper";
const POLICY_DENIED: &str = "ValidatingAdmissionPolicy 'bootimage-webhook-skew-record-only'";

/// A running `skew keep`, killed on drop; its log kept.
struct Keeper {
    child: Child,
    log: Arc<Mutex<Vec<String>>>,
}

impl Keeper {
    fn start(c: &Cluster, extra: &[&str]) -> Keeper {
        let token = c.kubectl(&[
            "create",
            "token",
            apis::KEEPER_SERVICE_ACCOUNT,
            "-n",
            KEEPER_NS,
            "--duration=1h",
        ]);
        let kubeconfig = c.api.token_kubeconfig(token.trim(), Some(KEEPER_NS));
        let mut child = Command::new(support::binary::BIN)
            .args(["skew", "keep", "--interval", "1s"])
            .args(extra)
            .env("KUBECONFIG", kubeconfig)
            .env("POD_NAME", "keeper-0")
            .env("POD_NAMESPACE", KEEPER_NS)
            .env("RUST_LOG", "info")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawning skew keep");
        let stdout = child.stdout.take().unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let lines = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                lines.lock().unwrap().push(line);
            }
        });
        Keeper { child, log }
    }

    fn text(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    /// Waits for a line with `what`.
    fn said(&self, what: &str) -> String {
        eventually(
            &format!("the keeper to say {what:?}"),
            Duration::from_secs(30),
            || self.text(),
            || {
                let log = self.log.lock().unwrap();
                log.iter().find(|l| l.contains(what)).cloned()
            },
        )
    }
}

impl Drop for Keeper {
    /// SIGTERM, as the kubelet stops it: the Lease is released, and the next keeper takes
    /// it at once.
    fn drop(&mut self) {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        for _ in 0..100 {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The component's objects but its Deployment (the test runs the keeper itself), applied
/// as an administrator would; then MachineConfiguration `cluster` as OpenShift 4.22 keeps it
/// where the MCO does not manage boot images: no spec of skew enforcement, Manual from the
/// install release in status.
fn the_keepers_world(c: &Cluster) {
    let mut objects: Vec<Value> = render_with_component("skew-record-keeper")
        .into_iter()
        .filter(|d| {
            d["metadata"]["name"]
                .as_str()
                .is_some_and(|n| n.contains("skew-record"))
                && d["kind"] != "Deployment"
        })
        .collect();
    objects.sort_by_key(|d| d["kind"] != "Namespace");
    let kinds: Vec<&str> = objects.iter().filter_map(|d| d["kind"].as_str()).collect();
    for kind in [
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "Role",
        "NetworkPolicy",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    ] {
        assert!(
            kinds.contains(&kind),
            "the component has no {kind}: {kinds:?}"
        );
    }
    c.create_all(&objects.iter().collect::<Vec<_>>());
    c.machine_configuration_the_mco_leaves_alone();
    c.set_status(
        "machineconfiguration",
        "cluster",
        json!({"managedBootImagesStatus": {}, "observedGeneration": 1,
               "bootImageSkewEnforcementStatus": {"mode": "Manual",
                   "manual": {"mode": "OCPVersion", "ocpVersion": "4.19.0"}}}),
    );
}

fn machine_configuration(c: &Cluster) -> Value {
    c.api
        .get_json(["machineconfiguration", "cluster", "--show-managed-fields"])
}

fn enforcement(c: &Cluster) -> Value {
    machine_configuration(c)["spec"]["bootImageSkewEnforcement"].clone()
}

/// A merge patch of MachineConfiguration `cluster` with the keeper's token: its output.
fn as_keeper(c: &Cluster, token: &str, patch: &Value) -> (bool, String) {
    let patch = patch.to_string();
    let out = c.api.kubectl_as(
        token,
        [
            "patch",
            "machineconfiguration",
            "cluster",
            "--type=merge",
            "-p",
            patch.as_str(),
        ],
    );
    (out.status.success(), text(&out))
}

#[test]
fn the_keeper_records_the_oldest_boot_image_once_the_machinesets_move() {
    let _parallel = support::parallel();
    let c = Cluster::start(true);
    the_keepers_world(&c);
    c.create(&machineset("ms-a", CURRENT_X86));
    c.create(&machineset("ms-b", OLD));
    let keeper = Keeper::start(&c, &[]);
    // The MCO's own record (4.19.0) is ms-b's release: nothing to record.
    keeper.said("is the oldest boot image in use: nothing to record");
    assert_eq!(enforcement(&c), Value::Null);
    let lease = c
        .api
        .get_json(["lease", apis::KEEPER_LEASE_NAME, "-n", KEEPER_NS]);
    assert_eq!(lease["spec"]["holderIdentity"], "keeper-0", "{lease:#}");

    drop(keeper);

    // The webhook moves ms-b: the oldest in use is now the current image. Its Lease
    // holder says the record is due, until the keeper records it.
    let a = c.holder(&[]);
    eventually(
        "ms-b to move",
        Duration::from_secs(30),
        || a.served.log_text(),
        || (image(&c.get("ms-b")) == CURRENT_X86).then_some(()),
    );
    let due = |want: i64| {
        eventually(
            &format!("bootimage_webhook_skew_record_due {want}"),
            Duration::from_secs(30),
            || a.served.log_text(),
            || (metric(&a, "bootimage_webhook_skew_record_due") == Some(want)).then_some(()),
        )
    };
    due(1);
    let keeper = Keeper::start(&c, &[]);
    let line = keeper.said("recorded spec.bootImageSkewEnforcement");
    assert!(
        line.contains("9.8.20260428-0") && line.contains("4.19.0"),
        "{line}"
    );
    let want = json!({"mode": "Manual", "manual": {"mode": "RHCOSVersion", "rhcosVersion": "9.8.20260428-0"}});
    assert_eq!(enforcement(&c), want);
    let managers: Vec<Value> = machine_configuration(&c)["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| {
            f.pointer("/fieldsV1/f:spec/f:bootImageSkewEnforcement")
                .is_some()
        })
        .map(|f| f["manager"].clone())
        .collect();
    assert_eq!(managers, [json!(KEEPER_FIELD_MANAGER)]);
    // Passes go by; nothing more is written.
    let generation = machine_configuration(&c)["metadata"]["generation"].clone();
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        machine_configuration(&c)["metadata"]["generation"],
        generation
    );
    assert_eq!(
        keeper
            .text()
            .matches("recorded spec.bootImageSkewEnforcement")
            .count(),
        1,
        "{}",
        keeper.text()
    );
    due(0);
    drop(keeper);
    anothers_record_and_none_are_left_unless_taken_over(&c);
    c.assert_nothing_refused(&[&a]);
}

/// An administrator's record (another field manager) stays; `--take-over=others` keeps
/// it; mode None stays, and the policy refuses turning it back on.
fn anothers_record_and_none_are_left_unless_taken_over(c: &Cluster) {
    let by_hand = json!({"spec": {"bootImageSkewEnforcement": {"mode": "Manual",
        "manual": {"mode": "RHCOSVersion", "rhcosVersion": "9.6.20250826-1"}}}});
    c.kubectl(&[
        "patch",
        "machineconfiguration",
        "cluster",
        "--type=merge",
        "--field-manager=admin-by-hand",
        "-p",
        &by_hand.to_string(),
    ]);
    let keeper = Keeper::start(c, &[]);
    keeper.said("written by field manager \"admin-by-hand\"");
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(enforcement(c), by_hand["spec"]["bootImageSkewEnforcement"]);
    drop(keeper);

    let keeper = Keeper::start(c, &["--take-over", "others"]);
    keeper.said("recorded spec.bootImageSkewEnforcement");
    assert_eq!(enforcement(c)["manual"]["rhcosVersion"], "9.8.20260428-0");
    drop(keeper);

    let off = json!({"spec": {"bootImageSkewEnforcement": {"mode": "None", "manual": null}}});
    c.kubectl(&[
        "patch",
        "machineconfiguration",
        "cluster",
        "--type=merge",
        "-p",
        &off.to_string(),
    ]);
    let keeper = Keeper::start(c, &[]);
    keeper.said("skew enforcement is turned off (mode None, spec)");
    assert_eq!(enforcement(c), json!({"mode": "None"}));
}

/// With the keeper's own token: every field but the record is refused by the policy, and
/// so is a record where the mode is not Manual; the webhook's ServiceAccount may not write
/// MachineConfiguration at all.
#[test]
fn the_policy_lets_the_keeper_change_the_manual_record_and_nothing_else() {
    let _parallel = support::parallel();
    let c = Cluster::start(true);
    the_keepers_world(&c);
    let token = c
        .kubectl(&[
            "create",
            "token",
            apis::KEEPER_SERVICE_ACCOUNT,
            "-n",
            KEEPER_NS,
        ])
        .trim()
        .to_owned();
    let record = json!({"spec": {"bootImageSkewEnforcement": {"mode": "Manual",
        "manual": {"mode": "RHCOSVersion", "rhcosVersion": "9.8.20260428-0"}}}});
    // The policy is loaded a moment after it is created: until a refusal comes back, it
    // is not in force yet.
    eventually(
        "the policy to refuse another field",
        Duration::from_secs(60),
        String::new,
        || {
            let (ok, out) = as_keeper(&c, &token, &json!({"spec": {"logLevel": "Debug"}}));
            (!ok && out.contains(POLICY_DENIED)).then_some(())
        },
    );
    for (patch, words) in [
        (
            json!({"spec": {"logLevel": "Debug"}}),
            "no other setting of the MCO",
        ),
        (
            json!({"spec": {"managedBootImages": {"machineManagers": [{"resource": "machinesets",
                "apiGroup": "machine.openshift.io", "selection": {"mode": "None"}}]}}}),
            "no other setting of the MCO",
        ),
        (
            json!({"metadata": {"labels": {"x": "y"}}}),
            "labels, annotations",
        ),
        (
            json!({"spec": {"bootImageSkewEnforcement": {"mode": "None"}}}),
            "never None",
        ),
    ] {
        let (ok, out) = as_keeper(&c, &token, &patch);
        assert!(!ok, "{patch} was allowed: {out}");
        assert!(
            out.contains(POLICY_DENIED) && out.contains(words),
            "{patch}: {out}"
        );
    }
    assert_eq!(enforcement(&c), Value::Null);
    // The record itself passes, in Manual mode.
    let (ok, out) = as_keeper(&c, &token, &record);
    assert!(ok, "{out}");
    // Mode None (the administrator's): the keeper may not turn it back on.
    let off = json!({"spec": {"bootImageSkewEnforcement": {"mode": "None", "manual": null}}});
    c.kubectl(&[
        "patch",
        "machineconfiguration",
        "cluster",
        "--type=merge",
        "-p",
        &off.to_string(),
    ]);
    let (ok, out) = as_keeper(&c, &token, &record);
    assert!(!ok && out.contains("already Manual; it is None"), "{out}");
    // No other object, no status, no create: RBAC.
    let out = c.api.kubectl_as(
        &token,
        [
            "patch",
            "machineconfiguration",
            "cluster",
            "--subresource=status",
            "--type=merge",
            "-p",
            "{\"status\":{}}",
        ],
    );
    assert!(
        !out.status.success() && text(&out).contains("(Forbidden)"),
        "{}",
        text(&out)
    );
    // The webhook's ServiceAccount: no write of MachineConfiguration.
    for verb in ["patch", "update", "create", "delete"] {
        let out = c.api.kubectl([
            "auth",
            "can-i",
            verb,
            "machineconfigurations.operator.openshift.io",
            "--as",
            SA_USER,
        ]);
        assert_eq!(out.status.code(), Some(1), "{verb}: {}", text(&out));
    }
    // Its token cannot even read the object by name (kubectl patch reads it first).
    let record = record.to_string();
    c.assert_refused(
        &[
            "patch",
            "machineconfiguration",
            "cluster",
            "--type=merge",
            "-p",
            &record,
        ],
        "get resource \"machineconfigurations\"",
    );
}
