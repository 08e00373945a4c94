//! Admission through a real kube-apiserver: what `kubectl create` stores through the shipped
//! webhook and its CEL conditions, the cluster's TLS profile served, the ControlPlaneMachineSet
//! opt-in, and enrollment as the release's MachineConfiguration carries it.
//!
//! The setup (tests/support/cluster.rs): a real kube-apiserver holding the project's own
//! manifests, the webhook registered with the shipped rules, selectors, CEL matchConditions,
//! timeout and failure policy, and the binary running as the manifests' ServiceAccount, so
//! the RBAC the apiserver enforces is the RBAC we ship. Every scenario is judged by what the
//! apiserver stored and by its audit log. Each test has its own apiserver; they run in
//! parallel.

use crate::support;

use std::time::Duration;

use serde_json::{Value, json};
use support::cluster::*;
use support::{CURRENT_X86, Https, cpms_image, fixture};

/// `kubectl create` through the apiserver's admission chain with the
/// shipped selectors and CEL matchConditions, which the apiserver compiles (on create of the
/// configuration) and evaluates itself.
#[test]
fn kubectl_create_is_patched_through_the_shipped_webhook_and_its_cel_conditions() {
    let _parallel = support::parallel();
    let c = Cluster::start(true);
    let a = c.replica("replica-a", "0s");
    c.register_webhook(&a.url());
    c.webhook_serves(CURRENT_X86);
    a_stale_machineset_is_stored_on_the_target_with_a_warning(&c);
    a_server_side_dry_run_is_patched_and_nothing_stored(&c);

    // Left alone: stored exactly as sent. Who left it alone shows in the audit log: the
    // apiserver (objectSelector, matchConditions) or our webhook (with its reason).
    let left_alone = left_alone_and_by_whom();
    for (ms, _) in &left_alone {
        c.create(ms);
    }
    // Through the matchConditions, and patched: every has() guard holds on real objects.
    let patched = patched_through_the_match_conditions();
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
    the_match_conditions_left_out_four_and_never_failed(&c);

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

/// A stale GCP MachineSet: stored with the target image and the annotation, and kubectl
/// shows our warning.
fn a_stale_machineset_is_stored_on_the_target_with_a_warning(c: &Cluster) {
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
}

/// Server-side dry run: the patched object comes back, nothing is stored.
fn a_server_side_dry_run_is_patched_and_nothing_stored(c: &Cluster) {
    let out = c.api.kubectl_stdin(
        ["create", "--dry-run=server", "-o", "json", "-f", "-"],
        &machineset("dry", OLD).to_string(),
    );
    let dry: Value = serde_json::from_str(&c.api.expect_ok(&["create", "--dry-run"], out)).unwrap();
    assert_eq!(image(&dry), CURRENT_X86);
    assert_eq!(annotation(&dry, BOOT_IMAGE), Some(CURRENT_X86));
    let out = c.api.kubectl(["get", "machineset", "dry", "-n", NS]);
    assert!(text(&out).contains("NotFound"), "{}", text(&out));
}

/// The MachineSet fixture named `name` on `image`, as `f` changes it.
fn with(name: &str, image: &str, f: &dyn Fn(&mut Value)) -> Value {
    let mut ms = machineset(name, image);
    f(&mut ms);
    ms
}

/// Sets a label of the Machines' template.
fn tmpl_label(k: &'static str, v: &'static str) -> impl Fn(&mut Value) {
    move |ms: &mut Value| {
        ms["spec"]["template"]["metadata"]["labels"][k] = json!(v);
    }
}

/// MachineSets the webhook leaves alone, and how: not called (the apiserver's objectSelector
/// or matchConditions left it out) or the reason it answered.
fn left_alone_and_by_whom() -> Vec<(Value, Call)> {
    let mut aws = fixture("machineset-aws-build01-ci-tests-worker-us-east-1a.yaml");
    aws["metadata"]["name"] = json!("aws-on-gcp");
    aws["metadata"]["namespace"] = json!(NS);
    vec![
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
            with("ibmcloud", OLD, &|ms| {
                ms["spec"]["template"]["spec"]["providerSpec"]["value"]["kind"] =
                    json!("IBMCloudMachineProviderSpec");
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
    ]
}

/// MachineSets that pass every has() guard of the matchConditions, each in its own way.
fn patched_through_the_match_conditions() -> Vec<Value> {
    vec![
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
    ]
}

/// The apiserver left some out by matchConditions, and none of its evaluations failed
/// (an error would also mean "not called" under failurePolicy Ignore).
fn the_match_conditions_left_out_four_and_never_failed(c: &Cluster) {
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
        "Windows, IBM Cloud, no providerSpec value, no providerSpec"
    );
    assert_eq!(
        series("apiserver_admission_match_condition_evaluation_errors_total"),
        0.0
    );
}

/// The cluster's TLS security profile (APIServer `cluster`), read as the ServiceAccount
/// (the RBAC we ship), served from the first handshake after readiness, and followed
/// without a restart; a Custom profile that leaves nothing to serve keeps the last one.
#[test]
fn the_cluster_tls_profile_is_served_and_followed_without_a_restart() {
    let _parallel = support::parallel();
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

/// With --control-plane-machine-sets the Lease holder touches the
/// ControlPlaneMachineSet and the webhook moves its boot image (through the shipped rule,
/// CEL conditions and RBAC); `status` shows it only with the flag.
#[test]
fn the_control_plane_machine_set_is_managed_when_asked() {
    let _parallel = support::parallel();
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
    the_last_touch_was_moved_by_our_webhook_and_none_came_after(&c);
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

    status_shows_the_control_plane_machine_set_only_with_the_flag(&c);
    c.assert_nothing_refused(&[&a]);
}

/// The Lease holder touches at once, and the apiserver loads a new webhook configuration a
/// moment after it is created: touches it admitted before that pass unchanged and are
/// retried. Then one touch that our webhook moves, then silence.
fn the_last_touch_was_moved_by_our_webhook_and_none_came_after(c: &Cluster) {
    let events = c.audit();
    let patches: Vec<&Value> = events
        .iter()
        .filter(|e| {
            is_ours(e)
                && e["verb"] == "patch"
                && e["stage"] == "ResponseComplete"
                && e["objectRef"]["resource"] == "controlplanemachinesets"
                // Not the dry runs that probe the admission policy.
                && !is_dry_run(e)
        })
        .collect();
    let (moved, before) = patches.split_last().expect("a touch");
    assert_eq!(webhook_call(moved), answered("Updated", true));
    for p in before {
        assert_eq!(
            webhook_call(p),
            Call::NotCalled,
            "touched again after the move"
        );
    }
}

/// `status` lists the ControlPlaneMachineSet only when asked to: a user who did not opt in
/// is not shown a row the replicas leave alone.
fn status_shows_the_control_plane_machine_set_only_with_the_flag(c: &Cluster) {
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
}

/// Enrollment follows what the release's MachineConfiguration carries: the MCO's
/// `status.managedBootImagesStatus` where the release has one (4.19 and later), else the
/// administrator's `spec.managedBootImages`, which the MCO of 4.17 and 4.18 follows itself
/// (their apiserver drops the status the cluster's seed writes).
#[test]
fn enrollment_follows_the_status_or_on_releases_without_one_the_spec() {
    let _parallel = support::parallel();
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
    let in_schema = c.machine_configuration_status_has("managedBootImagesStatus");
    assert_eq!(has_status, in_schema, "{mc:#}");

    let report = status_json(&c);
    let row = status_row(&report, "ms-enrolled");
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
