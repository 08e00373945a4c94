//! User-data Secrets against a real kube-apiserver: every Secret a MachineSet names is read
//! in the background and checked, and a spec-2 stub is upgraded in place, with a backup, when
//! asked.
//!
//! The setup (tests/support/cluster.rs): a real kube-apiserver holding the project's own
//! manifests, the webhook registered with the shipped rules, selectors, CEL matchConditions,
//! timeout and failure policy, and the binary running as the manifests' ServiceAccount, so
//! the RBAC the apiserver enforces is the RBAC we ship. Every scenario is judged by what the
//! apiserver stored and by its audit log. Each test has its own apiserver; they run in
//! parallel.

use crate::support;

use std::time::Duration;

use base64::Engine;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};
use support::CURRENT_X86;
use support::cluster::*;

/// Rule 10 checks whatever Secret a MachineSet names, learned in the
/// background: a spec-2 stub keeps its image, a spec-3 one moves once read, and a Secret
/// made after its MachineSet is waited for, then the MachineSet moves.
#[test]
fn every_user_data_secret_a_machineset_names_is_checked() {
    let _parallel = support::parallel();
    let c = Cluster::start(true);
    // Each Secret granted as manifests/kustomization.yaml says (Role and flag).
    let grant = ["custom-spec2", "custom-spec3", "custom-late"];
    let flags = support::rbac::enable(&c.api, &[], &grant);
    c.create_all(&[
        &user_data_secret("custom-spec2", "2.2.0"),
        &user_data_secret("custom-spec3", "3.4.0"),
    ]);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let a = c.holder(&flags);
    for (name, secret) in [
        ("ms-spec2", "custom-spec2"),
        ("ms-spec3", "custom-spec3"),
        ("ms-late", "custom-late"),
    ] {
        c.create(&naming(name, secret));
    }
    each_create_was_decided_at_once_on_its_stub(&c);
    // Read in the background, then the toucher moves the spec-3 one.
    eventually(
        "ms-spec3 to move once its stub is read",
        Duration::from_secs(30),
        || a.served.log_text(),
        || (image(&c.get("ms-spec3")) == CURRENT_X86).then_some(()),
    );
    a.passes(2);
    assert_eq!(image(&c.get("ms-spec2")), OLD);
    assert_eq!(image(&c.get("ms-late")), OLD);
    status_tells_why_each_stayed_or_that_it_moved(&c, &flags);
    // An UPDATE of the spec-2 one is left as sent, and says why.
    c.kubectl(&[
        "label",
        "machineset",
        "ms-spec2",
        "-n",
        NS,
        "touched-by=test",
    ]);
    assert_eq!(image(&c.get("ms-spec2")), OLD);

    // The late Secret arrives: its MachineSet moves without any write of ours to it.
    c.create_all(&[&user_data_secret("custom-late", "3.5.0")]);
    eventually(
        "ms-late to move once its Secret exists",
        Duration::from_secs(30),
        || a.served.log_text(),
        || (image(&c.get("ms-late")) == CURRENT_X86).then_some(()),
    );
    // A stub upgraded in place (a new resourceVersion) is read again: the spec-2 one moves.
    c.kubectl(&["delete", "secret", "custom-spec2", "-n", NS]);
    c.create_all(&[&user_data_secret("custom-spec2", "3.2.0")]);
    eventually(
        "ms-spec2 to move once its stub is spec 3",
        Duration::from_secs(30),
        || a.served.log_text(),
        || (image(&c.get("ms-spec2")) == CURRENT_X86).then_some(()),
    );
    // What is logged of a Secret is its name, never its data.
    let user_data = base64::engine::general_purpose::STANDARD
        .encode(json!({"ignition": {"version": "3.5.0"}}).to_string());
    assert!(!a.served.log_text().contains(&user_data));
    c.assert_nothing_refused(&[&a]);
}

/// Granted Secrets are read before the replica is ready: each CREATE is decided at once on
/// what its stub says (or that it does not exist), not left to a later pass.
fn each_create_was_decided_at_once_on_its_stub(c: &Cluster) {
    let events = c.audit();
    for (name, answer) in [
        ("ms-spec2", answered("StubIgnitionSpec2", false)),
        ("ms-spec3", answered("Updated", true)),
        ("ms-late", answered("UserDataSecretMissing", false)),
    ] {
        assert_eq!(webhook_call(creation(&events, name)), answer, "{name}");
    }
}

/// `status`, run with the replica's flags, tells an administrator why each stub's
/// MachineSet keeps its old image, and that the one the toucher moved is up to date.
fn status_tells_why_each_stayed_or_that_it_moved(c: &Cluster, flags: &[&str]) {
    let report: Value = serde_json::from_str(&status_with(c, "json", flags)).unwrap();
    let row = |name: &str| status_row(&report, name);
    assert_eq!(row("ms-spec2")["reason"], "StubIgnitionSpec2", "{report:#}");
    assert_eq!(
        row("ms-late")["reason"],
        "UserDataSecretMissing",
        "{report:#}"
    );
    assert_eq!(row("ms-spec3")["reason"], "UpToDate", "{report:#}");
}

/// With `--upgrade-stub-ignition` (and its component's RBAC) the Lease
/// holder upgrades a spec-2 stub in place after backing it up byte for byte, and the
/// MachineSet then moves; a second pass writes nothing; a stub that cannot be translated,
/// or one that a MachineSet which would keep its old image also names, stays as it is with
/// a Warning Event. The stub upgraded is the workers' (the one the component may update); the
/// two left alone are granted for reading only.
#[test]
fn a_spec_2_stub_is_upgraded_with_a_backup_when_asked() {
    let _parallel = support::parallel();
    let c = Cluster::start(true).with_shipped_touch();
    let grant = ["files-user-data", "shared-user-data"];
    let flags = stub_upgrade_flags(&c, &grant);
    let with_files = r#"{"ignition":{"version":"2.2.0"},"storage":{"files":[{"filesystem":"root","path":"/etc/x","contents":{"source":"data:,x"}}]}}"#;
    let secret = |name: &str, user_data: &str| {
        json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
               "metadata": {"name": name, "namespace": NS},
               "data": {"userData": b64(user_data), "disableTemplating": b64("true")}})
    };
    c.kubectl(&["delete", "secret", "worker-user-data", "-n", NS]);
    c.create_all(&[
        &secret("worker-user-data", SPEC2),
        &secret("files-user-data", with_files),
        &secret("shared-user-data", SPEC2),
    ]);
    let mut opted = naming("ms-shared-opted-out", "shared-user-data");
    opted["metadata"]["labels"][OPT_OUT] = json!("false");
    for ms in [
        naming("ms-old", "worker-user-data"),
        naming("ms-files", "files-user-data"),
        naming("ms-shared", "shared-user-data"),
        opted,
    ] {
        c.create(&ms);
    }
    let a = c.holder(&flags.iter().map(String::as_str).collect::<Vec<_>>());
    eventually(
        "ms-old to move once its stub is upgraded",
        Duration::from_secs(30),
        || a.served.log_text(),
        || (image(&c.get("ms-old")) == CURRENT_X86).then_some(()),
    );
    the_stub_was_upgraded_after_a_byte_for_byte_backup(&c);
    let told = events_of(&c, "StubIgnitionUpgraded", "ms-old");
    assert_eq!(told.len(), 1, "{told:?}");

    // The untranslatable stub and the shared one stay, each told once; nothing more is
    // written on later passes.
    eventually(
        "the Warning Events of the stubs left alone",
        Duration::from_secs(15),
        || a.served.log_text(),
        || {
            (!events_of(&c, "StubIgnitionNotUpgraded", "ms-files").is_empty()
                && !events_of(&c, "StubIgnitionNotUpgraded", "ms-shared").is_empty())
            .then_some(())
        },
    );
    c.passes(&a, 2);
    let files = events_of(&c, "StubIgnitionNotUpgraded", "ms-files");
    assert_eq!(files.len(), 1, "{files:?}");
    assert_eq!(files[0]["type"], "Warning");
    assert!(
        files[0]["note"]
            .as_str()
            .unwrap()
            .contains("storage is not empty"),
        "{files:?}"
    );
    let shared = events_of(&c, "StubIgnitionNotUpgraded", "ms-shared");
    assert_eq!(shared.len(), 1, "{shared:?}");
    assert!(
        shared[0]["note"]
            .as_str()
            .unwrap()
            .contains("ms-shared-opted-out"),
        "{shared:?}"
    );
    for (name, user_data) in [("files-user-data", with_files), ("shared-user-data", SPEC2)] {
        let s = c.api.get_json(["secret", name, "-n", NS]);
        assert_eq!(s["data"]["userData"], json!(b64(user_data)), "{name}");
    }
    for name in ["ms-files", "ms-shared", "ms-shared-opted-out"] {
        assert_eq!(image(&c.get(name)), OLD, "{name}");
    }
    let secret_writes = our_secret_writes(&c);
    assert_eq!(secret_writes, ["update worker-user-data"]);
    c.assert_nothing_refused(&[&a]);
}

/// The build with components/upgrade-stub-ignition, and `grant` read too: its RBAC
/// applied, and the flags a replica of it gets.
fn stub_upgrade_flags(c: &Cluster, grant: &[&str]) -> Vec<String> {
    let mut flags = support::rbac::enable(&c.api, &["upgrade-stub-ignition"], grant);
    flags.push("--upgrade-stub-ignition".into());
    flags
}

/// A 4.5-era installer stub (its CA shortened), as stored: the exact bytes matter.
const SPEC2: &str = r#"{"ignition":{"config":{"append":[{"source":"https://api-int.build02.example:22623/config/worker","verification":{}}]},"security":{"tls":{"certificateAuthorities":[{"source":"data:text/plain;charset=utf-8;base64,LS0tLS1CRUdJTg==","verification":{}}]}},"timeouts":{},"version":"2.2.0"},"networkd":{},"passwd":{},"storage":{},"systemd":{}}"#;

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// `worker-user-data` holds a spec-3 translation of [`SPEC2`] with the MCO's annotations, its
/// other keys as they were, and its data key `userData-spec2-backup` the old bytes.
fn the_stub_was_upgraded_after_a_byte_for_byte_backup(c: &Cluster) {
    let stored = c.api.get_json(["secret", "worker-user-data", "-n", NS]);
    let upgraded: Value = serde_json::from_slice(
        &base64::engine::general_purpose::STANDARD
            .decode(stored["data"]["userData"].as_str().unwrap())
            .unwrap(),
    )
    .unwrap();
    assert_eq!(upgraded["ignition"]["version"], "3.5.0");
    let original: Value = serde_json::from_str(SPEC2).unwrap();
    assert_eq!(
        upgraded["ignition"]["config"]["merge"],
        original["ignition"]["config"]["append"]
    );
    assert_eq!(
        upgraded["ignition"]["security"],
        original["ignition"]["security"]
    );
    assert_eq!(
        annotation(
            &stored,
            "machineconfiguration.openshift.io/stub-ignition-upgraded-to"
        ),
        Some("3.5.0")
    );
    assert!(
        annotation(
            &stored,
            "machineconfiguration.openshift.io/stub-ignition-upgraded-at"
        )
        .is_some_and(|t| t.parse::<Timestamp>().is_ok()),
        "{stored:#}"
    );
    // Other keys of the Secret are left as they were; the original is kept beside it.
    assert_eq!(stored["data"]["disableTemplating"], json!(b64("true")));
    assert_eq!(
        stored["data"]["userData-spec2-backup"],
        json!(b64(SPEC2)),
        "byte for byte"
    );
    assert_eq!(stored["type"], "Opaque");
}

/// Our ServiceAccount's writes to Secrets, as "<verb> <name>", in order.
fn our_secret_writes(c: &Cluster) -> Vec<String> {
    c.audit()
        .iter()
        .filter(|e| {
            is_ours(e)
                && e["stage"] == "ResponseComplete"
                && e["objectRef"]["resource"] == "secrets"
                && ["create", "update", "patch", "delete"]
                    .contains(&e["verb"].as_str().unwrap_or(""))
        })
        .map(|e| {
            format!(
                "{} {}",
                e["verb"].as_str().unwrap(),
                e["objectRef"]["name"].as_str().unwrap_or("")
            )
        })
        .collect()
}

/// A MachineSet on the old image whose providerSpec names the user-data Secret `secret`.
fn naming(name: &str, secret: &str) -> Value {
    let mut m = machineset(name, OLD);
    m.pointer_mut(PROVIDER).unwrap()["userDataSecret"] = json!({"name": secret});
    m
}
