//! The whole system against a real kube-apiserver (tests/support/apiserver.rs): the
//! project's own manifests rendered with kustomize and applied, the webhook registered with
//! the shipped rules, selectors, CEL matchConditions, timeout and failure policy (only its
//! `clientConfig` points at the binary on loopback, with the test CA as `caBundle`), and the
//! binary running as the manifests' ServiceAccount, so the RBAC the apiserver enforces is
//! the RBAC we ship.
//!
//! Every scenario is judged by what the apiserver stored (read back with kubectl) and by its
//! audit log: who wrote what, which webhook it called and what that webhook said. Our own
//! process is asked nothing, except whether it is ready, which log line says a touch pass
//! ran (to wait for one instead of sleeping), and, while the apiserver is down, whether the
//! webhook still answers.
//!
//! Each test has its own apiserver; they run in parallel.

mod support;

use std::time::{Duration, Instant};

use base64::Engine;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};
use support::cluster::*;
use support::{CURRENT_X86, Https, admin_get, cpms_image, fixture, update_review_of};

// ------------------------------------------------------------------------------ tests

/// Scenario 1 and 5: `kubectl create` through the apiserver's admission chain with the
/// shipped selectors and CEL matchConditions, which the apiserver compiles (on create of the
/// configuration) and evaluates itself.
#[test]
fn kubectl_create_is_patched_through_the_shipped_webhook_and_its_cel_conditions() {
    let c = Cluster::start(true);
    let a = c.replica("replica-a", "0s");
    c.register_webhook(&a.url());
    c.webhook_serves(CURRENT_X86);

    // A stale GCP MachineSet: stored with the target image and the annotation, and kubectl
    // shows our warning.
    let sent = machineset("stale", OLD);
    let out = c.create(&sent);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "Warning: bootimage-webhook: boot image set to rhcos-9-8-20260428-0-gcp-x86-64"
        ),
        "kubectl printed: {stderr}"
    );
    let stored = c.get("stale");
    assert_eq!(image(&stored), CURRENT_X86);
    assert_eq!(annotation(&stored, BOOT_IMAGE), Some(CURRENT_X86));
    let mut expected = sent.clone();
    expected["spec"]["template"]["spec"]["providerSpec"]["value"]["disks"][0]["image"] =
        json!(CURRENT_X86);
    expected["metadata"]["annotations"] = json!({BOOT_IMAGE: CURRENT_X86});
    assert_eq!(
        as_written(&stored),
        as_written(&expected),
        "more changed than the image and the annotation"
    );

    // Server-side dry run: the patched object comes back, nothing is stored.
    let out = c.api.kubectl_stdin(
        ["create", "--dry-run=server", "-o", "json", "-f", "-"],
        &machineset("dry", OLD).to_string(),
    );
    let dry: Value = serde_json::from_str(&c.api.expect_ok(&["create", "--dry-run"], out)).unwrap();
    assert_eq!(image(&dry), CURRENT_X86);
    assert_eq!(annotation(&dry, BOOT_IMAGE), Some(CURRENT_X86));
    let out = c.api.kubectl(["get", "machineset", "dry", "-n", NS]);
    assert!(text(&out).contains("NotFound"), "{}", text(&out));

    // Left alone: stored exactly as sent. Who left it alone shows in the audit log: the
    // apiserver (objectSelector, matchConditions) or our webhook (with its reason).
    let with = |name: &str, image: &str, f: &dyn Fn(&mut Value)| {
        let mut ms = machineset(name, image);
        f(&mut ms);
        ms
    };
    let tmpl_label = |k: &'static str, v: &'static str| {
        move |ms: &mut Value| {
            ms["spec"]["template"]["metadata"]["labels"][k] = json!(v);
        }
    };
    let mut aws = fixture("machineset-aws-build01-ci-tests-worker-us-east-1a.yaml");
    aws["metadata"]["name"] = json!("aws-on-gcp");
    aws["metadata"]["namespace"] = json!(NS);
    let left_alone = [
        (
            with("opted-out", OLD, &|ms| {
                ms["metadata"]["labels"][OPT_OUT] = json!("false");
            }),
            Call::NotCalled,
        ),
        (
            with("owned", OLD, &|ms| {
                ms["metadata"]["ownerReferences"] = json!([{"apiVersion": "hive.openshift.io/v1",
                    "kind": "MachinePool", "name": "worker", "uid": "0b5f3c5e-1111-4222-8333-444455556666",
                    "controller": true}]);
            }),
            answered("OwnedByController", false),
        ),
        (
            with("custom", CUSTOM, &|_| {}),
            answered("CustomImage", false),
        ),
        (
            with(
                "windows",
                OLD,
                &tmpl_label("machine.openshift.io/os-id", "Windows"),
            ),
            Call::NotCalled,
        ),
        (
            with("other-stream", OLD, &|ms| {
                ms["metadata"]["labels"]["machineconfiguration.openshift.io/osstream"] =
                    json!("rhel-10");
            }),
            answered("UnsupportedOSStream", false),
        ),
        (
            with("openstack", OLD, &|ms| {
                ms["spec"]["template"]["spec"]["providerSpec"]["value"]["kind"] =
                    json!("OpenstackProviderSpec");
            }),
            Call::NotCalled,
        ),
        (aws, answered("UnsupportedPlatform", false)),
        (
            with("no-provider-value", OLD, &|ms| {
                ms["spec"]["template"]["spec"]["providerSpec"]
                    .as_object_mut()
                    .unwrap()
                    .remove("value");
            }),
            Call::NotCalled,
        ),
        (
            with("no-provider-spec", OLD, &|ms| {
                ms["spec"]["template"]["spec"]
                    .as_object_mut()
                    .unwrap()
                    .remove("providerSpec");
            }),
            Call::NotCalled,
        ),
    ];
    for (ms, _) in &left_alone {
        c.create(ms);
    }
    // Through the matchConditions, and patched: every has() guard holds on real objects.
    let patched = [
        with(
            "linux",
            OLD,
            &tmpl_label("machine.openshift.io/os-id", "Linux"),
        ),
        with("no-template-labels", OLD, &|ms| {
            ms["spec"]["template"]["metadata"]
                .as_object_mut()
                .unwrap()
                .remove("labels");
        }),
        with("no-template-metadata", OLD, &|ms| {
            ms["spec"]["template"]
                .as_object_mut()
                .unwrap()
                .remove("metadata");
        }),
    ];
    for ms in &patched {
        c.create(ms);
    }

    let events = c.audit();
    assert_eq!(
        webhook_call(creation(&events, "stale")),
        answered("Updated", true)
    );
    for (sent, call) in &left_alone {
        let name = sent["metadata"]["name"].as_str().unwrap();
        let stored = c.get(name);
        assert_eq!(
            as_written(&stored),
            as_written(sent),
            "{name} not stored as sent"
        );
        assert_eq!(annotation(&stored, BOOT_IMAGE), None, "{name}");
        assert_eq!(&webhook_call(creation(&events, name)), call, "{name}");
    }
    for sent in &patched {
        let name = sent["metadata"]["name"].as_str().unwrap();
        assert_eq!(image(&c.get(name)), CURRENT_X86, "{name}");
        assert_eq!(
            webhook_call(creation(&events, name)),
            answered("Updated", true),
            "{name}"
        );
    }
    // The apiserver left some out by matchConditions, and none of its evaluations failed
    // (an error would also mean "not called" under failurePolicy Ignore).
    let metrics = c.kubectl(&["get", "--raw", "/metrics"]);
    let series = |name: &str| -> f64 {
        metrics
            .lines()
            .filter(|l| l.starts_with(name) && l.contains(&format!("name=\"{WEBHOOK}\"")))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    assert_eq!(
        series("apiserver_admission_match_condition_exclusions_total"),
        4.0,
        "Windows, vSphere, no providerSpec value, no providerSpec"
    );
    assert_eq!(
        series("apiserver_admission_match_condition_evaluation_errors_total"),
        0.0
    );

    // RBAC: nothing of ours refused over the whole run; what we ship no grant for is.
    c.assert_nothing_refused(&[&a]);
    c.assert_refused(
        &["delete", "machineset", "stale", "-n", NS],
        "delete resource \"machinesets\"",
    );
    // Secrets are read in the MachineSets' namespace only.
    c.assert_refused(
        &[
            "get",
            "secret",
            "other",
            "-n",
            "openshift-machine-config-operator",
        ],
        "get resource \"secrets\"",
    );
}

/// Scenario 2 and 3: the gate on real MachineConfigPool / MachineConfig objects, the
/// toucher on the Lease holder counted in the audit log, stream changes in the ConfigMap.
#[test]
fn the_gate_opens_on_a_finished_master_and_the_lease_holder_touches_exactly_what_needs_it() {
    let c = Cluster::start(false);
    let a = c.holder(&[]);

    // The master pool is updating and no master has finished: writes pass unchanged,
    // and our webhook says why.
    let mut opted = machineset("ms-opted-out", OLD);
    opted["metadata"]["labels"][OPT_OUT] = json!("false");
    let world = [
        machineset("ms-stale", OLD),
        machineset("ms-current", CURRENT_X86),
        machineset("ms-custom", CUSTOM),
        opted,
    ];
    for ms in &world {
        c.create(ms);
    }
    let events = c.audit();
    for ms in &world {
        let name = ms["metadata"]["name"].as_str().unwrap();
        assert_eq!(as_written(&c.get(name)), as_written(ms), "{name}");
    }
    assert_eq!(
        webhook_call(creation(&events, "ms-stale")),
        answered("UpgradeInProgress", false)
    );
    // Nothing is touched while the gate is closed, pass after pass.
    a.passes(2);
    assert_eq!(touches(&c.audit(), None), Vec::<String>::new());

    // One master finishes: the Lease holder touches exactly the one that needs it, the
    // webhook moves its image, and a later resync writes nothing.
    c.master_finished();
    eventually(
        "ms-stale to move",
        Duration::from_secs(30),
        || a.served.log_text(),
        || (image(&c.get("ms-stale")) == CURRENT_X86).then_some(()),
    );
    a.passes(2);
    let events = c.audit();
    assert_eq!(touches(&events, None), ["ms-stale"]);
    assert_eq!(touches(&events, Some(&a.jti)), ["ms-stale"]);
    let stale = c.get("ms-stale");
    assert_eq!(annotation(&stale, BOOT_IMAGE), Some(CURRENT_X86));
    assert!(annotation(&stale, TOUCH).is_some(), "{stale}");
    for (name, want) in [
        ("ms-current", CURRENT_X86),
        ("ms-custom", CUSTOM),
        ("ms-opted-out", OLD),
    ] {
        assert_eq!(image(&c.get(name)), want, "{name}");
    }

    // A new stream: one touch per MachineSet that now needs it, then silence; new writes
    // get the new image too.
    let mark = c.audit().len();
    c.set_stream(&stream_with_gcp_image(NEWER_NAME));
    eventually(
        "ms-stale and ms-current to move to the new stream",
        Duration::from_secs(30),
        || a.served.log_text(),
        || {
            (image(&c.get("ms-stale")) == NEWER && image(&c.get("ms-current")) == NEWER)
                .then_some(())
        },
    );
    a.passes(2);
    assert_eq!(
        sorted(touches(&c.audit()[mark..], None)),
        ["ms-current", "ms-stale"]
    );
    c.create(&machineset("ms-new", OLD));
    assert_eq!(image(&c.get("ms-new")), NEWER);
    for (name, want) in [("ms-custom", CUSTOM), ("ms-opted-out", OLD)] {
        assert_eq!(image(&c.get(name)), want, "{name}");
    }

    // A malformed stream: the last good one goes on being served, and nothing is touched.
    let mark = c.audit().len();
    c.set_stream("{ not json");
    a.wait_line("unusable ConfigMap");
    c.create(&machineset("ms-after-bad-stream", OLD));
    assert_eq!(image(&c.get("ms-after-bad-stream")), NEWER);
    a.passes(2);
    assert_eq!(touches(&c.audit()[mark..], None), Vec::<String>::new());

    c.assert_nothing_refused(&[&a]);
}

/// Issue 19, item 1: rule 10 checks whatever Secret a MachineSet names, learned in the
/// background: a spec-2 stub keeps its image, a spec-3 one moves once read, and a Secret
/// made after its MachineSet is waited for, then the MachineSet moves.
#[test]
fn every_user_data_secret_a_machineset_names_is_checked() {
    let c = Cluster::start(true);
    // Each Secret granted as manifests/kustomization.yaml says (Role and flag).
    let grant = ["custom-spec2", "custom-spec3", "custom-late"];
    let flags = support::rbac::enable(&c.api, &[], &grant);
    c.create_all(&[
        &user_data_secret("custom-spec2", "2.2.0"),
        &user_data_secret("custom-spec3", "3.4.0"),
    ]);
    let a = c.holder(&flags.iter().map(String::as_str).collect::<Vec<_>>());
    let naming = |name: &str, secret: &str| {
        let mut m = machineset(name, OLD);
        m.pointer_mut(PROVIDER).unwrap()["userDataSecret"] = json!({"name": secret});
        m
    };
    for (name, secret) in [
        ("ms-spec2", "custom-spec2"),
        ("ms-spec3", "custom-spec3"),
        ("ms-late", "custom-late"),
    ] {
        c.create(&naming(name, secret));
    }
    // Granted Secrets are read before the replica is ready: each CREATE is decided at
    // once on what its stub says (or that it does not exist).
    let events = c.audit();
    for (name, answer) in [
        ("ms-spec2", answered("StubIgnitionSpec2", false)),
        ("ms-spec3", answered("Updated", true)),
        ("ms-late", answered("UserDataSecretMissing", false)),
    ] {
        assert_eq!(webhook_call(creation(&events, name)), answer, "{name}");
    }
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
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let report: Value = serde_json::from_str(&status_with(&c, "json", &flags)).unwrap();
    let row = |name: &str| {
        report["machineSets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .unwrap_or_else(|| panic!("no row for {name}: {report:#}"))
            .clone()
    };
    assert_eq!(row("ms-spec2")["reason"], "StubIgnitionSpec2", "{report:#}");
    assert_eq!(
        row("ms-late")["reason"],
        "UserDataSecretMissing",
        "{report:#}"
    );
    assert_eq!(row("ms-spec3")["reason"], "UpToDate", "{report:#}");
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

/// Issue 19, item 2: with `--upgrade-stub-ignition` (and its component's RBAC) the Lease
/// holder upgrades a spec-2 stub in place after backing it up byte for byte, and the
/// MachineSet then moves; a second pass writes nothing; a stub that cannot be translated,
/// or one that a MachineSet which would keep its old image also names, stays as it is with
/// a Warning Event.
#[test]
fn a_spec_2_stub_is_upgraded_with_a_backup_when_asked() {
    let c = Cluster::start(true).with_shipped_touch();
    let grant = ["old-user-data", "files-user-data", "shared-user-data"];
    let mut flags = support::rbac::enable(&c.api, &["upgrade-stub-ignition"], &grant);
    flags.push("--upgrade-stub-ignition".into());
    // A 4.5-era installer stub (its CA shortened), as stored: the exact bytes matter.
    let spec2 = r#"{"ignition":{"config":{"append":[{"source":"https://api-int.build02.example:22623/config/worker","verification":{}}]},"security":{"tls":{"certificateAuthorities":[{"source":"data:text/plain;charset=utf-8;base64,LS0tLS1CRUdJTg==","verification":{}}]}},"timeouts":{},"version":"2.2.0"},"networkd":{},"passwd":{},"storage":{},"systemd":{}}"#;
    let with_files = r#"{"ignition":{"version":"2.2.0"},"storage":{"files":[{"filesystem":"root","path":"/etc/x","contents":{"source":"data:,x"}}]}}"#;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let secret = |name: &str, user_data: &str| {
        json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
               "metadata": {"name": name, "namespace": NS},
               "data": {"userData": b64(user_data), "disableTemplating": b64("true")}})
    };
    c.create_all(&[
        &secret("old-user-data", spec2),
        &secret("files-user-data", with_files),
        &secret("shared-user-data", spec2),
    ]);
    let naming = |name: &str, secret: &str| {
        let mut m = machineset(name, OLD);
        m.pointer_mut(PROVIDER).unwrap()["userDataSecret"] = json!({"name": secret});
        m
    };
    let mut opted = naming("ms-shared-opted-out", "shared-user-data");
    opted["metadata"]["labels"][OPT_OUT] = json!("false");
    for ms in [
        naming("ms-old", "old-user-data"),
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
    let stored = c.api.get_json(["secret", "old-user-data", "-n", NS]);
    let upgraded: Value = serde_json::from_slice(
        &base64::engine::general_purpose::STANDARD
            .decode(stored["data"]["userData"].as_str().unwrap())
            .unwrap(),
    )
    .unwrap();
    assert_eq!(upgraded["ignition"]["version"], "3.5.0");
    let original: Value = serde_json::from_str(spec2).unwrap();
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
        json!(b64(spec2)),
        "byte for byte"
    );
    assert_eq!(stored["type"], "Opaque");
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
    for (name, user_data) in [("files-user-data", with_files), ("shared-user-data", spec2)] {
        let s = c.api.get_json(["secret", name, "-n", NS]);
        assert_eq!(s["data"]["userData"], json!(b64(user_data)), "{name}");
    }
    for name in ["ms-files", "ms-shared", "ms-shared-opted-out"] {
        assert_eq!(image(&c.get(name)), OLD, "{name}");
    }
    let secret_writes: Vec<String> = c
        .audit()
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
        .collect();
    assert_eq!(secret_writes, ["update old-user-data"]);
    c.assert_nothing_refused(&[&a]);
}

/// Scenario 4, the webhook's side: stopped (SIGTERM: readiness first, the Lease released),
/// writes fail open; back, the toucher repairs; unreachable while the toucher runs, three
/// touches and an Event; two replicas, one touches, the other takes over when it dies.
#[test]
fn the_webhook_away_and_back_and_a_second_replica_taking_over_the_lease() {
    let c = Cluster::start(true).with_shipped_touch();
    let a = c.replica("replica-a", "1s");
    c.register_webhook(&a.url());
    c.webhook_serves(CURRENT_X86);
    c.wait_holder("replica-a", Duration::from_secs(30));

    // SIGTERM: readiness fails at once while the webhook still serves, the process exits
    // 0, and the Lease is released on the apiserver.
    a.served.signal("TERM");
    let signalled = Instant::now();
    while block_on(admin_get(a.served.admin, "/readyz")).0 != 503 {
        assert!(
            signalled.elapsed() < Duration::from_millis(900),
            "readiness still passing"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut a = a;
    assert!(a.served.wait_exit(Duration::from_secs(15)).success());
    assert_eq!(c.lease_holder(), None, "the Lease is released on SIGTERM");

    // Webhook down: the create still succeeds (failurePolicy Ignore), unpatched.
    c.create(&machineset("ms-down", OLD));
    assert_eq!(image(&c.get("ms-down")), OLD);
    assert_eq!(
        webhook_call(creation(&c.audit(), "ms-down")),
        Call::FailedOpen
    );

    // Back on the same address: the toucher brings it to the target, with one touch.
    let mark = c.audit().len();
    let a2 = c.replica_on("replica-a", "0s", &a.served.webhook.to_string());
    eventually(
        "ms-down to move",
        Duration::from_secs(30),
        || a2.served.log_text(),
        || (image(&c.get("ms-down")) == CURRENT_X86).then_some(()),
    );
    c.passes(&a2, 2);
    assert_eq!(touches(&c.audit()[mark..], Some(&a2.jti)), ["ms-down"]);
    assert_eq!(touches(&c.audit()[mark..], None), ["ms-down"]);

    // Unreachable while the toucher runs (the apiserver is pointed at the plain-HTTP admin
    // port: its TLS handshake fails and it fails open): three touches, then an Event, then
    // silence.
    let mark = c.audit().len();
    c.point_webhook(&format!("https://{}/mutate-machinesets", a2.served.admin));
    c.create(&machineset("ms-lost", OLD));
    assert_eq!(
        webhook_call(creation(&c.audit(), "ms-lost")),
        Call::FailedOpen
    );
    let events = eventually(
        "a BootImageNotMoved Event on ms-lost",
        Duration::from_secs(30),
        || a2.served.log_text(),
        || Some(events_of(&c, "BootImageNotMoved", "ms-lost")).filter(|e| !e.is_empty()),
    );
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["type"], "Warning");
    assert_eq!(events[0]["reportingController"], "bootimage-webhook");
    assert_eq!(events[0]["reportingInstance"], "replica-a");
    c.passes(&a2, 2);
    assert_eq!(
        touches(&c.audit()[mark..], None),
        ["ms-lost", "ms-lost", "ms-lost"]
    );
    assert_eq!(image(&c.get("ms-lost")), OLD);

    // Two replicas: the second follows, and the apiserver calls its webhook, so the webhook
    // stays up when the first goes.
    let b = c.replica("replica-b", "0s");
    c.point_webhook(&b.url());
    c.webhook_serves(CURRENT_X86);
    assert_eq!(c.lease_holder().as_deref(), Some("replica-a"));
    let mark = c.audit().len();
    // A new stream: both MachineSets move, then two touch passes; the audit log after.
    let both_move = |holder: &Replica, name: &str, to: &str| {
        c.set_stream(&stream_with_gcp_image(name));
        eventually(
            &format!("both to move to {name}"),
            Duration::from_secs(30),
            || holder.served.log_text(),
            || (image(&c.get("ms-down")) == to && image(&c.get("ms-lost")) == to).then_some(()),
        );
        c.passes(holder, 2);
        c.audit()
    };
    let events = both_move(&a2, NEWER_NAME, NEWER);
    assert_eq!(
        sorted(touches(&events[mark..], Some(&a2.jti))),
        ["ms-down", "ms-lost"]
    );
    assert_eq!(touches(&events[mark..], Some(&b.jti)), Vec::<String>::new());
    assert_eq!(touches(&events[mark..], None).len(), 2);

    // The holder dies without releasing the Lease: the other takes over within the Lease
    // duration, and touches nothing that was touched already.
    let mark = c.audit().len();
    a2.served.signal("KILL");
    let killed = Instant::now();
    c.wait_holder("replica-b", LEASE_DURATION + Duration::from_secs(15));
    let took = killed.elapsed();
    assert!(took <= LEASE_DURATION, "took over after {took:?}");
    b.wait_line("holding the touch Lease");
    c.passes(&b, 2);
    assert_eq!(touches(&c.audit()[mark..], None), Vec::<String>::new());

    // The next change is the new holder's, one touch each.
    let events = both_move(&b, NEWEST_NAME, NEWEST);
    assert_eq!(
        sorted(touches(&events[mark..], Some(&b.jti))),
        ["ms-down", "ms-lost"]
    );
    assert_eq!(touches(&events[mark..], None).len(), 2);

    c.assert_nothing_refused(&[&a, &a2, &b]);
}

/// Scenario 4, the apiserver's side: stopped and restarted on the same ports mid-run, the
/// webhook answers throughout and the watchers recover; then the Lease deleted under the
/// holder: no touch until the Lease is back.
#[test]
fn the_apiserver_restarting_mid_run_and_the_lease_deleted() {
    let mut c = Cluster::start(true);
    let a = c.replica("replica-a", "0s");
    c.register_webhook(&a.url());
    c.webhook_serves(CURRENT_X86);
    c.wait_holder("replica-a", Duration::from_secs(30));
    c.create(&machineset("ms-before", CURRENT_X86));
    assert_eq!(image(&c.get("ms-before")), CURRENT_X86);

    c.stop_apiserver();
    // The webhook answers from its snapshot throughout.
    let https = Https::new(&c.certs.ca_pem);
    let review = update_review_of(&machineset("probe", OLD));
    let answer = || {
        let reply = block_on(https.post_review(a.served.webhook, &review));
        assert_eq!(reply.status, 200);
        reply.json()["response"]["auditAnnotations"]["boot-image"].clone()
    };
    assert_eq!(answer(), CURRENT_X86);
    a.wait_line("watch failed");
    for _ in 0..5 {
        assert_eq!(answer(), CURRENT_X86);
        std::thread::sleep(Duration::from_millis(200));
    }
    c.restart_apiserver();
    assert_eq!(answer(), CURRENT_X86);

    // The watchers recover and follow the next change; so do the toucher and the webhook.
    c.set_stream(&stream_with_gcp_image(NEWER_NAME));
    eventually(
        "ms-before to move to the new stream",
        Duration::from_secs(90),
        || a.served.log_text(),
        || (image(&c.get("ms-before")) == NEWER).then_some(()),
    );
    c.create(&machineset("ms-after", OLD));
    assert_eq!(image(&c.get("ms-after")), NEWER);
    assert_eq!(answer(), NEWER);

    // The Lease deleted under the holder: no touch while it is gone; the replica sets it up
    // again and the next change is followed.
    c.wait_holder("replica-a", Duration::from_secs(60));
    let mark = c.audit().len();
    c.kubectl(&["delete", "lease", LEASE, "-n", OWN_NS]);
    // Whichever sees it first: the toucher's own check, or the Lease keeper.
    a.wait_new_line_any(&[
        "the Lease is not ours on the API server",
        "the Lease was deleted; setting it up again",
    ]);
    c.set_stream(&stream_with_gcp_image(NEWEST_NAME));
    eventually(
        "ms-before and ms-after to move to the newest stream",
        Duration::from_secs(90),
        || a.served.log_text(),
        || {
            (image(&c.get("ms-before")) == NEWEST && image(&c.get("ms-after")) == NEWEST)
                .then_some(())
        },
    );
    a.passes(1);
    let events = c.audit();
    let events = &events[mark..];
    let recreated = events
        .iter()
        .position(|e| {
            is_ours(e)
                && e["verb"] == "create"
                && e["objectRef"]["resource"] == "leases"
                && e["responseStatus"]["code"] == 201
        })
        .expect("the replica created the Lease again");
    assert_eq!(touches(&events[..recreated], None), Vec::<String>::new());
    assert_eq!(
        sorted(touches(&events[recreated..], None)),
        ["ms-after", "ms-before"]
    );

    c.assert_nothing_refused(&[&a]);
}

/// The cluster's TLS security profile (APIServer `cluster`), read as the ServiceAccount
/// (the RBAC we ship), served from the first handshake after readiness, and followed
/// without a restart; a Custom profile that leaves nothing to serve keeps the last one.
#[test]
fn the_cluster_tls_profile_is_served_and_followed_without_a_restart() {
    let c = Cluster::start(true);
    let apiserver = |profile: Value| {
        json!({"apiVersion": "config.openshift.io/v1", "kind": "APIServer",
               "metadata": {"name": "cluster"}, "spec": {"tlsSecurityProfile": profile}})
    };
    c.create_all(&[&apiserver(json!({"type": "Modern", "modern": {}}))]);
    let r = c.replica("tls-0", "0s");
    let pid = r.served.pid();
    let client = |versions: &[&'static rustls::SupportedProtocolVersion]| {
        Https::with_config(support::client_config(&c.certs.ca_pem, versions))
    };
    let (only12, only13) = (
        client(&[&rustls::version::TLS12]),
        client(&[&rustls::version::TLS13]),
    );
    let handshake = |client: &Https| block_on(client.connect(r.served.webhook)).map(|_| ());

    // Readiness waited for the profile: Modern from the first handshake.
    let refused = handshake(&only12).unwrap_err();
    assert!(refused.to_string().contains("ProtocolVersion"), "{refused}");
    handshake(&only13).unwrap();

    // Intermediate: TLS 1.2 served from a next handshake, by the same process.
    c.kubectl(&[
        "patch",
        "apiserver",
        "cluster",
        "--type=merge",
        "-p",
        r#"{"spec":{"tlsSecurityProfile":{"type":"Intermediate","intermediate":{},"modern":null}}}"#,
    ]);
    eventually(
        "TLS 1.2 served under Intermediate",
        Duration::from_secs(30),
        || r.served.log_text(),
        || handshake(&only12).ok(),
    );

    // Custom naming only suites rustls does not have: an error, and Intermediate stays.
    c.kubectl(&[
        "patch",
        "apiserver",
        "cluster",
        "--type=merge",
        "-p",
        r#"{"spec":{"tlsSecurityProfile":{"type":"Custom","custom":{"ciphers":["DES-CBC3-SHA","RC4-MD5"],"minTLSVersion":"VersionTLS12"},"intermediate":null}}}"#,
    ]);
    r.wait_line("keeping the last good configuration");
    handshake(&only12).unwrap();
    handshake(&only13).unwrap();
    assert_eq!(r.served.pid(), pid);
    let log = r.served.log_text();
    assert!(log.contains("RC4-MD5"), "the error names the list:\n{log}");
}

/// Issue 12, item 4: another writer (GitOps, an ACM policy) puts the old image back 5 times:
/// the webhook re-mutates exactly 3 of those writes, then leaves them as sent; the toucher
/// does not touch the MachineSet, and the Lease holder records one Warning Event. A
/// MachineSet nobody reverts is untouched by all this.
#[test]
fn a_writer_that_keeps_reverting_the_image_wins_after_three_reverts() {
    let c = Cluster::start(true).with_shipped_touch();
    let a = c.replica("replica-a", "0s");
    c.register_webhook(&a.url());
    c.webhook_serves(CURRENT_X86);
    c.wait_holder("replica-a", Duration::from_secs(30));
    c.create(&machineset("ms-gitops", OLD));
    c.create(&machineset("ms-calm", OLD));
    assert_eq!(image(&c.get("ms-gitops")), CURRENT_X86);
    let mark = c.audit().len();
    let revert =
        json!([{"op": "replace", "path": format!("{PROVIDER}/disks/0/image"), "value": OLD}]);
    let mut stored = Vec::new();
    for _ in 0..5 {
        c.kubectl(&[
            "patch",
            "machineset",
            "ms-gitops",
            "-n",
            NS,
            "--type=json",
            "-p",
            &revert.to_string(),
        ]);
        stored.push(image(&c.get("ms-gitops")).to_owned());
    }
    assert_eq!(
        stored,
        [CURRENT_X86, CURRENT_X86, CURRENT_X86, OLD, OLD],
        "exactly 3 re-mutations, then the writes stand"
    );
    // The decision lines tell the story in the MCO's words (issue 12, item 6).
    let story = format!(
        "Reconciling machineset ms-gitops on GCP, with arch x86_64; New target boot image: {CURRENT_X86}; Current image: {OLD}; Patching machineset ms-gitops"
    );
    let patching = a.served.log().iter().filter(|l| l.contains(&story)).count();
    assert_eq!(
        patching,
        4,
        "the create and 3 reverts:\n{}",
        a.served.log_text()
    );
    let ms = c.get("ms-gitops");
    assert_eq!(
        annotation(&ms, "bootimages.machineconfiguration.openshift.io/reverts"),
        Some(format!("4 {CURRENT_X86}").as_str())
    );
    // The webhook's answers to the 5 writes, as the apiserver audited them.
    let answers: Vec<Call> = c.audit()[mark..]
        .iter()
        .filter(|e| {
            e["verb"] == "patch"
                && e["objectRef"]["name"] == "ms-gitops"
                && e["stage"] == "ResponseComplete"
                && !is_ours(e)
        })
        .map(webhook_call)
        .collect();
    assert_eq!(
        answers,
        [
            answered("Updated", true),
            answered("Updated", true),
            answered("Updated", true),
            answered("RevertLoop", true),
            answered("RevertLoop", false),
        ]
    );
    // Within seconds at the shipped defaults (the fourth revert wakes the toucher), one
    // Event naming the field and the fix; passes go by without a touch.
    eventually(
        "the BootImageRevertLoop Event",
        Duration::from_secs(15),
        || a.served.log_text(),
        || (!events_of(&c, "BootImageRevertLoop", "ms-gitops").is_empty()).then_some(()),
    );
    c.passes(&a, 3);
    assert_eq!(image(&c.get("ms-gitops")), OLD);
    assert_eq!(touches(&c.audit()[mark..], None), Vec::<String>::new());
    let events = events_of(&c, "BootImageRevertLoop", "ms-gitops");
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["type"], "Warning");
    let note = events[0]["note"].as_str().unwrap_or_default();
    for words in [
        "spec.template.spec.providerSpec.value.disks[0].image",
        "ignoreDifferences",
        OPT_OUT,
    ] {
        assert!(note.contains(words), "{words}: {note}");
    }
    assert!(events_of(&c, "BootImageRevertLoop", "ms-calm").is_empty());
    assert_eq!(image(&c.get("ms-calm")), CURRENT_X86);
    let metrics = block_on(admin_get(a.served.admin, "/metrics")).1;
    assert!(
        metrics.contains("bootimage_webhook_revert_loops_total 1"),
        "{metrics}"
    );
    c.assert_nothing_refused(&[&a]);
}

/// Issue 12, item 5: `status` on a cluster with one MachineSet of each reason this
/// apiserver can hold (no webhook registered, so they stay as written), with the gate
/// closed and then open; read-only.
#[test]
fn status_shows_every_machineset_with_its_reason_and_the_gate() {
    let c = Cluster::start(false);
    let spec = |m: &mut Value, path: &str, v: Value| {
        let (parent, key) = path.rsplit_once('/').unwrap();
        m.pointer_mut(&format!("{PROVIDER}{parent}")).unwrap()[key] = v;
    };
    let with = |name: &str, f: &dyn Fn(&mut Value)| {
        let mut m = machineset(name, OLD);
        f(&mut m);
        m
    };
    let ann = |m: &mut Value, k: &str, v: &str| {
        m["metadata"]
            .as_object_mut()
            .unwrap()
            .entry("annotations")
            .or_insert(json!({}))[k] = json!(v);
    };
    let user_data =
        base64::engine::general_purpose::STANDARD.encode(br#"{"ignition":{"version":"2.2.0"}}"#);
    c.create_all(&[
        &json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": "worker-user-data-managed", "namespace": NS},
        "data": {"userData": user_data}}),
    ]);
    let world = [
        (machineset("ms-stale", OLD), "Updated"),
        (machineset("ms-not-moved", OLD), "Updated"),
        (machineset("ms-current", CURRENT_X86), "UpToDate"),
        (machineset("ms-custom", CUSTOM), "CustomImage"),
        (
            with("ms-opted-out", &|m| {
                m["metadata"]["labels"][OPT_OUT] = json!("false")
            }),
            "OptedOut",
        ),
        (
            with("ms-owned", &|m| {
                m["metadata"]["ownerReferences"] = json!([{"apiVersion": "hive.openshift.io/v1",
                    "kind": "MachinePool", "name": "worker", "uid": "6f1e2d3c-0000-4000-8000-00000000000a"}])
            }),
            "OwnedByController",
        ),
        (
            with("ms-rhel-10", &|m| {
                m["metadata"]["labels"]["machineconfiguration.openshift.io/osstream"] =
                    json!("rhel-10")
            }),
            "UnsupportedOSStream",
        ),
        (
            with("ms-windows", &|m| {
                m["spec"]["template"]["metadata"]["labels"]["machine.openshift.io/os-id"] =
                    json!("Windows")
            }),
            "Windows",
        ),
        (
            with("ms-bad-arch", &|m| {
                ann(
                    m,
                    "capacity.cluster-autoscaler.kubernetes.io/labels",
                    "kubernetes.io/arch=sparc",
                )
            }),
            "InvalidArchitecture",
        ),
        (
            with("ms-s390x", &|m| {
                ann(
                    m,
                    "capacity.cluster-autoscaler.kubernetes.io/labels",
                    "kubernetes.io/arch=s390x",
                )
            }),
            "NoImageInStream",
        ),
        (
            with("ms-openstack", &|m| {
                spec(m, "/kind", json!("OpenstackProviderSpec"))
            }),
            "UnsupportedPlatform",
        ),
        (
            with("ms-no-boot-disk", &|m| {
                spec(m, "/disks/0/boot", json!(false))
            }),
            "NoBootDisk",
        ),
        (
            with("ms-bad-disks", &|m| spec(m, "/disks", json!(7))),
            "InvalidProviderSpec",
        ),
        (
            with("ms-stub-2", &|m| {
                spec(
                    m,
                    "/userDataSecret",
                    json!({"name": "worker-user-data-managed"}),
                )
            }),
            "StubIgnitionSpec2",
        ),
        (
            with("ms-reverted", &|m| {
                ann(
                    m,
                    "bootimages.machineconfiguration.openshift.io/reverts",
                    &format!("4 {CURRENT_X86}"),
                )
            }),
            "RevertLoop",
        ),
    ];
    for (ms, _) in &world {
        c.create(ms);
    }
    // The toucher gave up on ms-not-moved for the current target (its Event says so).
    let uid = c.get("ms-not-moved")["metadata"]["uid"].clone();
    c.create_all(&[&json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": "ms-not-moved.1", "namespace": NS},
        "eventTime": "2026-12-01T00:00:00.000000Z", "type": "Warning", "reason": "BootImageNotMoved",
        "action": "Touch", "reportingController": "bootimage-webhook", "reportingInstance": "replica-a",
        "regarding": {"apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet",
                      "name": "ms-not-moved", "namespace": NS, "uid": uid},
        "note": format!("3 touches did not move the boot image from {OLD} to {CURRENT_X86}: is the webhook reachable, or is another controller reverting it? Not touching again until the target changes.")})]);
    // A write by our toucher's field manager: status shows when.
    c.kubectl(&[
        "annotate",
        "machineset",
        "ms-current",
        "-n",
        NS,
        "--field-manager=bootimage-webhook",
        &format!("{TOUCH}=t"),
    ]);

    // The gate closed: every MachineSet past the gate waits, and status says why.
    let closed: Value = serde_json::from_str(&status(&c, "json")).unwrap();
    assert_eq!(closed["gate"]["open"], false, "{closed:#}");
    let why = closed["gate"]["reason"].as_str().unwrap();
    assert!(
        why.contains("MCOReleaseImageVersion=4.20.9, not 4.21.0")
            && why.contains("once a master has completed"),
        "{why}"
    );
    let reason_of = |report: &Value, name: &str| -> String {
        report["machineSets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .unwrap_or_else(|| panic!("no row for {name}: {report:#}"))["reason"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(reason_of(&closed, "ms-stale"), "UpgradeInProgress");
    assert_eq!(reason_of(&closed, "ms-owned"), "OwnedByController");

    // A master finishes: the gate opens, and each MachineSet shows its own reason.
    c.master_finished();
    let open: Value = eventually(
        "status to see the gate open",
        Duration::from_secs(30),
        String::new,
        || {
            let v: Value = serde_json::from_str(&status(&c, "json")).unwrap();
            (v["gate"]["open"] == true).then_some(v)
        },
    );
    assert!(
        open["gate"]["reason"]
            .as_str()
            .unwrap()
            .contains("ConfigMap stamped MCOReleaseImageVersion=4.21.0"),
        "{open:#}"
    );
    assert_eq!(open["release"], "4.21.0");
    assert_eq!(
        open["machineSets"].as_array().unwrap().len(),
        world.len(),
        "{open:#}"
    );
    for (ms, want) in &world {
        let name = ms["metadata"]["name"].as_str().unwrap();
        assert_eq!(reason_of(&open, name), *want, "{name}: {open:#}");
    }
    let row = |name: &str| {
        open["machineSets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .unwrap()
            .clone()
    };
    let stale = row("ms-stale");
    assert_eq!(stale["namespace"], NS);
    assert_eq!(stale["platform"], "GCP");
    assert_eq!(stale["arch"], "x86_64");
    assert_eq!(stale["current"], OLD);
    assert_eq!(stale["target"], CURRENT_X86);
    assert_eq!(stale["givenUp"], false);
    assert_eq!(stale["lastTouch"], Value::Null);
    assert!(row("ms-current")["lastTouch"].is_string(), "{open:#}");
    assert_eq!(row("ms-reverted")["givenUp"], true);
    assert_eq!(row("ms-not-moved")["givenUp"], true);
    // Rows decided before any platform rule still show the image they name.
    assert_eq!(row("ms-opted-out")["current"], OLD);
    assert_eq!(row("ms-opted-out")["target"], Value::Null);

    // The table an administrator reads.
    let table = status(&c, "table");
    let lines: Vec<&str> = table.lines().collect();
    assert!(
        lines[0].starts_with("Gate: open (release 4.21.0: "),
        "{table}"
    );
    let header = lines
        .iter()
        .position(|l| l.starts_with("NAMESPACE/NAME"))
        .expect("a header");
    for col in [
        "PLATFORM",
        "ARCH",
        "CURRENT",
        "TARGET",
        "REASON",
        "LAST TOUCH",
        "GIVEN UP",
    ] {
        assert!(lines[header].contains(col), "{table}");
    }
    assert_eq!(lines.len(), header + 1 + world.len(), "{table}");
    let stale_line = lines
        .iter()
        .find(|l| l.starts_with(&format!("{NS}/ms-stale ")))
        .expect("a row for ms-stale");
    let cells: Vec<&str> = stale_line.split_whitespace().collect();
    assert_eq!(
        cells,
        [
            &format!("{NS}/ms-stale"),
            "GCP",
            "x86_64",
            "rhcos-9-6-20250826-1-gcp-x86-64",
            CURRENT_X86.rsplit('/').next().unwrap(),
            "Updated",
            "-",
            "no"
        ]
    );
    let wide = status(&c, "wide");
    assert!(
        wide.contains(CURRENT_X86) && wide.contains("MESSAGE"),
        "{wide}"
    );

    // Read-only: as the webhook's own ServiceAccount (whose every request the audit log
    // records), status only reads; it needs no more than the webhook's watchers and list.
    let kubeconfig = c.api.token_kubeconfig(&c.token(), Some(OWN_NS));
    let mark = c.audit().len();
    let out = std::process::Command::new(support::binary::BIN)
        .args(["status", "-o", "json"])
        .env("KUBECONFIG", &kubeconfig)
        .output()
        .expect("running status");
    assert!(out.status.success(), "status: {}", text(&out));
    let as_sa: Value = serde_json::from_slice(&out.stdout).unwrap();
    // The same decisions (the webhook's ServiceAccount may not list Events, so the
    // toucher's give-ups are not shown).
    let reasons = |v: &Value| -> Vec<Value> {
        v["machineSets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| json!([r["name"], r["reason"], r["current"], r["target"]]))
            .collect()
    };
    assert_eq!(reasons(&as_sa), reasons(&open));
    let ours: Vec<String> = c.audit()[mark..]
        .iter()
        .filter(|e| is_ours(e) && e["stage"] == "ResponseComplete")
        .map(|e| {
            format!(
                "{} {}",
                e["verb"].as_str().unwrap_or(""),
                e["objectRef"]["resource"].as_str().unwrap_or("")
            )
        })
        .collect();
    assert!(ours.iter().any(|r| r == "list machinesets"), "{ours:?}");
    let writes: Vec<&String> = ours
        .iter()
        .filter(|r| !(r.starts_with("get ") || r.starts_with("list ") || r.starts_with("watch ")))
        .collect();
    assert_eq!(writes, Vec::<&String>::new());
}

/// Issue 19, item 3: `status` tells where the cluster stands against the MCO's boot image
/// skew check: the oldest boot image of all MachineSets (managed or not), its RHCOS version
/// and OpenShift release, and, for each skew enforcement mode of MachineConfiguration
/// `cluster` (and without one), whether the MCO would refuse an upgrade.
#[test]
fn status_shows_the_boot_image_skew_for_each_enforcement_mode() {
    let c = Cluster::start(true);
    // A real older image (the rhcos-4.16 stream's), on a MachineSet this webhook does not
    // manage: the oldest all the same.
    const LEGACY: &str =
        "projects/rhcos-cloud/global/images/rhcos-416-94-202405291527-0-gcp-x86-64";
    let mut old = machineset("ms-old", LEGACY);
    old["metadata"]["labels"][OPT_OUT] = json!("false");
    for ms in [
        old,
        machineset("ms-9-6", OLD),
        machineset("ms-current", CURRENT_X86),
        machineset("ms-custom", CUSTOM),
    ] {
        c.create(&ms);
    }
    let managed = json!({"machineManagers": [
        {"resource": "machinesets", "apiGroup": "machine.openshift.io", "selection": {"mode": "All"}}]});
    let t = "2026-12-01T00:00:00Z";
    let conditions = |degraded: &str| {
        json!([
            {"type": "BootImageUpdateProgressing", "status": "False", "lastTransitionTime": t,
             "reason": "MachineSetUpdated", "message": "Reconciled 4 of 4 MAPI MachineSets"},
            {"type": "BootImageUpdateDegraded", "status": degraded, "lastTransitionTime": t,
             "reason": "MachineSetUpdated", "message": "1 Degraded MAPI MachineSets"}])
    };
    let manual_ocp =
        json!({"mode": "Manual", "manual": {"mode": "OCPVersion", "ocpVersion": "4.12.0"}});
    let manual_rhcos = json!({"mode": "Manual",
        "manual": {"mode": "RHCOSVersion", "rhcosVersion": "416.94.202405291527-0"}});
    let automatic = json!({"mode": "Automatic", "automatic": {"ocpVersion": "4.21.0"}});
    // (enforcement status, conditions, mode, upgrade, what the skew line says of it)
    let cases = [
        (
            manual_ocp,
            json!([]),
            "Manual",
            "Refused",
            "MCO skew enforcement Manual (recorded OCP 4.12.0): an upgrade would be refused (Upgrades have been disabled because the cluster is using OCP boot image version 4.12.0, which is below the minimum required version 4.13.0)",
        ),
        (
            manual_rhcos,
            json!([]),
            "Manual",
            "Allowed",
            "MCO skew enforcement Manual (recorded RHCOS 416.94.202405291527-0): an upgrade would not be refused (recorded RHCOS version 416.94.202405291527-0 (RHEL 9.4) is at or above the floor RHEL 9.2)",
        ),
        (
            automatic.clone(),
            conditions("False"),
            "Automatic",
            "Allowed",
            "MCO skew enforcement Automatic (recorded OCP 4.21.0): an upgrade would not be refused (recorded OCP version 4.21.0 is at or above the floor 4.13.0)",
        ),
        (
            automatic,
            conditions("True"),
            "Automatic",
            "Refused",
            "an upgrade would be refused (Upgrades have been disabled due to boot image update failures: boot image controller is degraded: 1 Degraded MAPI MachineSets)",
        ),
        (
            json!({"mode": "None"}),
            json!([]),
            "None",
            "NotEnforced",
            "MCO skew enforcement None: not enforced: the MCO does not check boot images, and never refuses an upgrade for them",
        ),
    ];
    let oldest_line = "Skew: oldest boot image rhcos-416-94-202405291527-0-gcp-x86-64 (openshift-machine-api/ms-old): RHCOS 416.94.202405291527-0, RHEL 9.4, OpenShift 4.16 (from its name); 1 of 4 MachineSets with a boot image of unknown version; ";
    let skew_line = |table: &str| -> String {
        table
            .lines()
            .find(|l| l.starts_with("Skew: "))
            .unwrap_or_else(|| panic!("no skew line:\n{table}"))
            .to_owned()
    };
    // OpenShift brought skew enforcement in 4.22: an older release's MachineConfiguration
    // has no status.bootImageSkewEnforcementStatus, and its apiserver drops what is written
    // there (KUBE_VERSION=1.30, OpenShift 4.17's CRDs).
    let crd = c
        .api
        .get_json(["crd", "machineconfigurations.operator.openshift.io"]);
    let has_enforcement = crd["spec"]["versions"].as_array().unwrap().iter().any(|v| {
        v.pointer(
            "/schema/openAPIV3Schema/properties/status/properties/bootImageSkewEnforcementStatus",
        )
        .is_some()
    });
    for (enforcement, conditions, mode, upgrade, says) in cases {
        c.set_status(
            "machineconfiguration",
            "cluster",
            json!({"managedBootImagesStatus": managed,
                   "bootImageSkewEnforcementStatus": enforcement, "conditions": conditions}),
        );
        let mc = c.api.get_json(["machineconfiguration", "cluster"]);
        assert_eq!(
            mc.pointer("/status/bootImageSkewEnforcementStatus")
                .is_some(),
            has_enforcement,
            "{mc:#}"
        );
        let report: Value = serde_json::from_str(&status(&c, "json")).unwrap();
        let skew = &report["skew"];
        let (mode, upgrade, says) = if has_enforcement {
            (json!(mode), upgrade, says)
        } else {
            // What such a cluster is: no mode, and the MCO never refuses for boot images.
            (
                Value::Null,
                "Allowed",
                "the MCO has recorded no skew enforcement mode: OpenShift before 4.22 has none",
            )
        };
        assert_eq!(
            skew["oldest"],
            json!({"namespace": NS, "name": "ms-old", "image": LEGACY,
                   "rhcosVersion": "416.94.202405291527-0", "rhelVersion": "9.4",
                   "ocpRelease": "4.16", "source": "name", "belowFloor": false}),
            "{report:#}"
        );
        assert_eq!(skew["unknown"], json!([format!("{NS}/ms-custom")]));
        assert_eq!(skew["machineSets"], 4);
        assert_eq!(
            skew["floor"],
            json!({"ocpVersion": "4.13.0", "rhelVersion": "9.2"})
        );
        assert_eq!(skew["enforcement"]["mode"], mode, "{report:#}");
        assert_eq!(skew["enforcement"]["upgrade"], upgrade, "{report:#}");
        let table = status(&c, "table");
        println!("--- status, enforcement {mode} ({upgrade}):\n{table}");
        let line = skew_line(&table);
        assert!(line.starts_with(oldest_line), "{line}");
        assert!(line.contains(says), "{line}\nshould say: {says}");
    }

    // The current image is the stream's: its release is the ConfigMap's.
    let report: Value = serde_json::from_str(&status(&c, "json")).unwrap();
    assert_eq!(report["skew"]["oldest"]["name"], "ms-old");
    c.kubectl(&["delete", "machineset", "ms-old", "-n", NS]);
    c.kubectl(&["delete", "machineset", "ms-9-6", "-n", NS]);
    let report: Value = serde_json::from_str(&status(&c, "json")).unwrap();
    assert_eq!(
        report["skew"]["oldest"],
        json!({"namespace": NS, "name": "ms-current", "image": CURRENT_X86,
               "rhcosVersion": "9.8.20260428-0", "rhelVersion": "9.8",
               "ocpRelease": "4.21", "source": "stream", "belowFloor": false}),
        "{report:#}"
    );

    // No MachineConfiguration: whether an upgrade would be refused is unknown.
    c.kubectl(&["delete", "machineconfiguration", "cluster"]);
    let report: Value = serde_json::from_str(&status(&c, "json")).unwrap();
    assert_eq!(
        report["skew"]["enforcement"]["upgrade"], "Unknown",
        "{report:#}"
    );
    assert_eq!(report["skew"]["enforcement"]["mode"], Value::Null);
    let table = status(&c, "table");
    println!("--- status, no MachineConfiguration:\n{table}");
    assert!(
        skew_line(&table).ends_with(
            "MCO skew enforcement <unknown>: whether an upgrade would be refused is unknown (MachineConfiguration cluster not found: the MCO's skew enforcement cannot be read)"
        ),
        "{table}"
    );
}

/// Issue 12, item 5: a Normal Event when a MachineSet's boot image moved, once per target,
/// whether the toucher moved it or the webhook did on someone else's write; the gauges of
/// MachineSets by reason and of the oldest boot image's age.
#[test]
fn moves_are_told_by_one_event_per_target_and_the_gauges_count_machinesets() {
    let c = Cluster::start(true).with_shipped_touch();
    let mut opted = machineset("ms-opted-out", OLD);
    opted["metadata"]["labels"][OPT_OUT] = json!("false");
    // Written before the webhook is registered: they stay as written.
    for ms in [
        machineset("ms-stale", OLD),
        machineset("ms-custom", CUSTOM),
        opted,
    ] {
        c.create(&ms);
    }
    let a = c.holder(&[]);
    eventually(
        "ms-stale to move",
        Duration::from_secs(30),
        || a.served.log_text(),
        || (image(&c.get("ms-stale")) == CURRENT_X86).then_some(()),
    );
    c.passes(&a, 2);
    let moved = events_of(&c, "BootImageUpdated", "ms-stale");
    assert_eq!(moved.len(), 1, "{moved:?}");
    assert_eq!(moved[0]["type"], "Normal");
    assert_eq!(
        moved[0]["note"],
        format!("boot image moved from {OLD} to {CURRENT_X86}")
    );
    for name in ["ms-custom", "ms-opted-out"] {
        assert!(events_of(&c, "BootImageUpdated", name).is_empty(), "{name}");
    }
    let gauge = |reason: &str| {
        metric(
            &a,
            &format!("bootimage_webhook_machinesets{{reason=\"{reason}\"}}"),
        )
    };
    assert_eq!(gauge("UpToDate"), Some(1));
    assert_eq!(gauge("CustomImage"), Some(1));
    assert_eq!(gauge("OptedOut"), Some(1));
    assert_eq!(gauge("Updated"), Some(0));
    // The oldest enrolled image is ms-stale's, now the current one (built 2026-04-28); the
    // older image of the opted-out one and the custom image do not count.
    let today = Timestamp::now()
        .to_zoned(k8s_openapi::jiff::tz::TimeZone::UTC)
        .date();
    let built = k8s_openapi::jiff::civil::date(2026, 4, 28);
    let days = i64::from((today - built).get_days());
    assert_eq!(
        metric(&a, "bootimage_webhook_oldest_boot_image_age_days"),
        Some(days)
    );
    // The oldest boot image's release counts every MachineSet, managed or not: the
    // opted-out one's (RHCOS 9.6, which OpenShift 4.19 to 4.21 ship).
    assert_eq!(
        metric(
            &a,
            r#"bootimage_webhook_oldest_boot_image_info{rhcos_version="9.6.20250826-1",rhel_version="9.6",ocp_release="4.19-4.21"}"#
        ),
        Some(1)
    );

    // Someone else writes ms-custom back onto a stock image: the webhook moves it on that
    // write, and the next pass tells it.
    c.kubectl(&[
        "patch",
        "machineset",
        "ms-custom",
        "-n",
        NS,
        "--type=json",
        "-p",
        &json!([{"op": "replace", "path": format!("{PROVIDER}/disks/0/image"), "value": OLD}])
            .to_string(),
    ]);
    assert_eq!(image(&c.get("ms-custom")), CURRENT_X86);
    eventually(
        "the BootImageUpdated Event on ms-custom",
        Duration::from_secs(30),
        || a.served.log_text(),
        || (!events_of(&c, "BootImageUpdated", "ms-custom").is_empty()).then_some(()),
    );
    let told = events_of(&c, "BootImageUpdated", "ms-custom");
    assert_eq!(
        told[0]["note"],
        format!("boot image moved from {CUSTOM} to {CURRENT_X86}")
    );

    // A new target: one more Event each, and no more after.
    c.set_stream(&stream_with_gcp_image(NEWER_NAME));
    eventually(
        "both to move to the new stream",
        Duration::from_secs(30),
        || a.served.log_text(),
        || {
            (image(&c.get("ms-stale")) == NEWER && image(&c.get("ms-custom")) == NEWER)
                .then_some(())
        },
    );
    c.passes(&a, 3);
    for name in ["ms-stale", "ms-custom"] {
        let notes: Vec<Value> = events_of(&c, "BootImageUpdated", name)
            .iter()
            .map(|e| e["note"].clone())
            .collect();
        assert_eq!(notes.len(), 2, "{name}: {notes:?}");
        assert!(
            notes.contains(&json!(format!(
                "boot image moved from {CURRENT_X86} to {NEWER}"
            ))),
            "{name}: {notes:?}"
        );
    }
    assert_eq!(gauge("UpToDate"), Some(2));
    assert_eq!(
        metric(&a, "bootimage_webhook_boot_image_updated_events_total"),
        Some(4)
    );
    c.assert_nothing_refused(&[&a]);
}

/// Issue 12, item 7: with --control-plane-machine-sets the Lease holder touches the
/// ControlPlaneMachineSet and the webhook moves its boot image (through the shipped rule,
/// CEL conditions and RBAC); `status` shows it only with the flag.
#[test]
fn the_control_plane_machine_set_is_managed_when_asked() {
    let c = Cluster::start(true);
    // The MCO's selection names controlplanemachinesets too (without it they are opted
    // out, as in the MCO).
    c.set_status(
        "machineconfiguration",
        "cluster",
        json!({"managedBootImagesStatus": {"machineManagers": [
            {"resource": "machinesets", "apiGroup": "machine.openshift.io", "selection": {"mode": "All"}},
            {"resource": "controlplanemachinesets", "apiGroup": "machine.openshift.io", "selection": {"mode": "All"}}]}}),
    );
    // Written before the webhook is registered: it stays as written.
    c.create(&control_plane_machine_set(OLD));
    let get = || {
        c.api
            .get_json(["controlplanemachineset", "cluster", "-n", NS])
    };
    assert_eq!(cpms_image(&get()), OLD);
    support::rbac::enable(&c.api, &["control-plane-machine-sets"], &[]);
    let a = c.holder(&["--control-plane-machine-sets"]);
    eventually(
        "the ControlPlaneMachineSet to move",
        Duration::from_secs(30),
        || a.served.log_text(),
        || (cpms_image(&get()) == CURRENT_X86).then_some(()),
    );
    a.passes(2);
    let events = c.audit();
    let patches: Vec<&Value> = events
        .iter()
        .filter(|e| {
            is_ours(e)
                && e["verb"] == "patch"
                && e["stage"] == "ResponseComplete"
                && e["objectRef"]["resource"] == "controlplanemachinesets"
        })
        .collect();
    // The Lease holder touches at once, and the apiserver loads a new webhook
    // configuration a moment after it is created: touches it admitted before that pass
    // unchanged and are retried. Then one touch that our webhook moves, then silence.
    let (moved, before) = patches.split_last().expect("a touch");
    assert_eq!(webhook_call(moved), answered("Updated", true));
    for p in before {
        assert_eq!(
            webhook_call(p),
            Call::NotCalled,
            "touched again after the move"
        );
    }
    let cpms = get();
    assert_eq!(annotation(&cpms, BOOT_IMAGE), Some(CURRENT_X86));
    // Nothing else of the template changed: no rollout to trigger but the image itself.
    let mut back = cpms.clone();
    back["spec"]["template"]["machines_v1beta1_machine_openshift_io"]["spec"]["providerSpec"]["value"]
        ["disks"][0]["image"] = json!(OLD);
    assert_eq!(back["spec"], control_plane_machine_set(OLD)["spec"]);
    let moved = events_of(&c, "BootImageUpdated", "cluster");
    assert_eq!(moved.len(), 1, "{moved:?}");
    assert_eq!(moved[0]["regarding"]["kind"], "ControlPlaneMachineSet");

    // status: the row with the flag, none without.
    let run = |extra: &[&str]| -> Value {
        let out = std::process::Command::new(support::binary::BIN)
            .args(["status", "-o", "json"])
            .args(extra)
            .env("KUBECONFIG", c.api.kubeconfig())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let with = run(&["--control-plane-machine-sets"]);
    let rows = with["machineSets"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{with:#}");
    assert_eq!(rows[0]["kind"], "ControlPlaneMachineSet");
    assert_eq!(rows[0]["reason"], "UpToDate");
    assert_eq!(rows[0]["arch"], "x86_64");
    let without = run(&[]);
    assert_eq!(without["machineSets"], json!([]), "{without:#}");
    c.assert_nothing_refused(&[&a]);
}

/// Issue 12, item 1: the gate remembers a finished upgrade through the MCO's stamp, seen
/// by `status` on real MachineConfigPool, MachineConfig and ConfigMap objects.
#[test]
fn the_gate_remembers_a_finished_upgrade_through_the_stamp() {
    let c = Cluster::start(false);
    // The pool rule is the opt-in component's (it reads MachineConfigs).
    let gate = || -> (bool, String) {
        let v: Value =
            serde_json::from_str(&status_with(&c, "json", &["--master-pool-gate"])).unwrap();
        (
            v["gate"]["open"] == true,
            v["gate"]["reason"].as_str().unwrap_or("").to_owned(),
        )
    };
    let configmap = |data: Value| {
        c.kubectl(&[
            "patch",
            "configmap",
            "coreos-bootimages",
            "-n",
            "openshift-machine-config-operator",
            "--type=merge",
            "-p",
            &json!({ "data": data }).to_string(),
        ]);
    };
    let t = "2026-11-02T00:00:00Z";
    let pool_status = |updating: &str, updated: &str, count: u32| {
        c.set_status(
            "machineconfigpool",
            "master",
            json!({"observedGeneration": 2, "configuration": {"name": "rendered-master-new"},
                   "machineCount": 3, "updatedMachineCount": count, "readyMachineCount": 3,
                   "unavailableMachineCount": 0, "degradedMachineCount": 0,
                   "conditions": [
                       {"type": "Updating", "status": updating, "lastTransitionTime": t, "reason": "", "message": ""},
                       {"type": "Updated", "status": updated, "lastTransitionTime": t, "reason": "", "message": ""}]}),
        );
    };

    // Unstamped, nobody finished: closed.
    let (open, why) = gate();
    assert!(!open, "{why}");
    // A master finishes the upgrade: the pool rule opens it.
    c.set_master_updated(1);
    let (open, why) = gate();
    assert!(
        open && why.contains("1 master(s) run rendered-master-new"),
        "{why}"
    );

    // A routine master MachineConfig rollout after the upgrade (same release, nobody on
    // the new config yet). Without the stamp the pool rule alone closes the gate again...
    c.create_all(&[&json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
        "metadata": {"name": "rendered-master-newer",
                     "annotations": {"machineconfiguration.openshift.io/release-image-version": "4.21.0"}},
        "spec": {"config": {"ignition": {"version": "3.5.0"}}}})]);
    c.kubectl(&[
        "patch",
        "machineconfigpool",
        "master",
        "--type=merge",
        "-p",
        r#"{"spec":{"configuration":{"name":"rendered-master-newer"}}}"#,
    ]);
    pool_status("True", "False", 0);
    let (open, why) = gate();
    assert!(!open && why.contains("no master has completed"), "{why}");
    // ... but the MCO has stamped the finished release: the gate stays open.
    configmap(json!({"MCOReleaseImageVersion": "4.21.0"}));
    let (open, why) = gate();
    assert!(
        open && why.contains("MCOReleaseImageVersion=4.21.0"),
        "{why}"
    );
    // A paused (or degraded) pool after the stamp: still open.
    pool_status("False", "False", 0);
    let (open, why) = gate();
    assert!(open, "{why}");

    // A new release in the ConfigMap closes it until the stamp moves (or a master
    // finishes: the pool targets a config of the old release here).
    configmap(json!({"releaseVersion": "4.22.0"}));
    let (open, why) = gate();
    assert!(
        !open && why.contains("MCOReleaseImageVersion=4.21.0, not 4.22.0"),
        "{why}"
    );
    configmap(json!({"MCOReleaseImageVersion": "4.22.0"}));
    let (open, why) = gate();
    assert!(open && why.contains("4.22.0"), "{why}");
}

/// Enrollment follows what the release's MachineConfiguration carries: the MCO's
/// `status.managedBootImagesStatus` where the release has one (4.19 and later), else the
/// administrator's `spec.managedBootImages`, which the MCO of 4.17 and 4.18 follows itself
/// (their apiserver drops the status the cluster's seed writes).
#[test]
fn enrollment_follows_the_status_or_on_releases_without_one_the_spec() {
    let c = Cluster::start(true);
    c.create(&machineset("ms-enrolled", OLD));
    // The administrator limits boot image updates to MachineSets labelled for them (mode
    // Partial: 4.17's spec has All and Partial only), which this one is not.
    c.kubectl(&[
        "patch",
        "machineconfiguration",
        "cluster",
        "--type=merge",
        "-p",
        &json!({"spec": {"managedBootImages": {"machineManagers": [
            {"resource": "machinesets", "apiGroup": "machine.openshift.io", "selection": {"mode": "Partial",
             "partial": {"machineResourceSelector": {"matchLabels": {"boot-images": "managed"}}}}}]}}})
        .to_string(),
    ]);
    let mc = c.api.get_json(["machineconfiguration", "cluster"]);
    let has_status = mc.pointer("/status/managedBootImagesStatus").is_some();
    // The status stuck exactly where the release's CRD has the field.
    let crd = c
        .api
        .get_json(["crd", "machineconfigurations.operator.openshift.io"]);
    let in_schema = crd["spec"]["versions"].as_array().unwrap().iter().any(|v| {
        v.pointer("/schema/openAPIV3Schema/properties/status/properties/managedBootImagesStatus")
            .is_some()
    });
    assert_eq!(has_status, in_schema, "{mc:#}");

    let report: Value = serde_json::from_str(&status(&c, "json")).unwrap();
    let row = report["machineSets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "ms-enrolled")
        .unwrap_or_else(|| panic!("no row for ms-enrolled: {report:#}"))
        .clone();
    if has_status {
        // The MCO's status (All, as seeded) decides, not the spec it has yet to mirror.
        assert_eq!(row["reason"], "Updated", "{row:#}");
    } else {
        assert_eq!(row["reason"], "OptedOut", "{row:#}");
        assert!(
            row["message"]
                .as_str()
                .unwrap()
                .contains("not selected by the MachineConfiguration Partial selector"),
            "the spec's selector is the reason: {row:#}"
        );
    }
}
