//! The Lease holder's toucher against a real kube-apiserver: the gate opening, moves told by
//! Events and gauges, a writer that keeps reverting, the webhook or the apiserver going away
//! and coming back, a second replica taking over the Lease.
//!
//! The setup (tests/support/cluster.rs): a real kube-apiserver holding the project's own
//! manifests, the webhook registered with the shipped rules, selectors, CEL matchConditions,
//! timeout and failure policy, and the binary running as the manifests' ServiceAccount, so
//! the RBAC the apiserver enforces is the RBAC we ship. Every scenario is judged by what the
//! apiserver stored and by its audit log. Each test has its own apiserver; they run in
//! parallel.

use crate::support;

use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};
use support::cluster::*;
use support::clusters::Profile;
use support::{CURRENT_X86, Https, admin_get, update_review_of};

/// The GCP cluster as OpenShift leaves it on the release the apiserver runs
/// (`tests/fixtures/clusters/gcp-<release>`).
fn profile() -> Profile {
    Profile::on_running_release("gcp")
}

/// The installer's MachineSets of the profile, sorted, and `more`.
fn installers_and(more: &[&str]) -> Vec<String> {
    let mut names: Vec<String> = profile()
        .machine_sets()
        .iter()
        .map(|ms| ms["metadata"]["name"].as_str().unwrap().to_owned())
        .chain(more.iter().map(|m| m.to_string()))
        .collect();
    names.sort();
    names
}

/// The gate on real MachineConfigPool / MachineConfig objects, the toucher on the Lease
/// holder counted in the audit log, stream changes in the ConfigMap, on the GCP profile's
/// cluster caught mid-upgrade: its installer's MachineSets, on the boot image they were
/// installed with, move with the stale one made here.
#[test]
fn the_gate_opens_on_a_finished_master_and_the_lease_holder_touches_exactly_what_needs_it() {
    let _parallel = support::parallel();
    let c = Cluster::start_profile(profile());
    c.upgrade_in_progress("4.21.0");
    let a = c.holder(&[]);
    writes_pass_unchanged_and_nothing_is_touched_while_the_gate_is_closed(&c, &a);

    // One master finishes: the Lease holder touches exactly the one that needs it, the
    // webhook moves its image, and a later resync writes nothing.
    c.master_finished();
    let moved = installers_and(&["ms-stale"]);
    eventually(
        "ms-stale and the installer's MachineSets to move",
        Duration::from_secs(30),
        || a.served.log_text(),
        || {
            moved
                .iter()
                .all(|m| image(&c.get(m)) == CURRENT_X86)
                .then_some(())
        },
    );
    a.passes(2);
    let events = c.audit();
    assert_eq!(sorted(touches(&events, None)), moved);
    assert_eq!(sorted(touches(&events, Some(&a.jti))), moved);
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

    a_new_stream_touches_once_each_machineset_that_now_needs_it(&c, &a);
    a_malformed_stream_keeps_the_last_good_one_and_touches_nothing(&c, &a);

    c.assert_nothing_refused(&[&a]);
}

/// The master pool is updating and no master has finished: writes pass unchanged, our
/// webhook says why, and nothing is touched, pass after pass: like the MCO, we move boot
/// images only once a master has completed the release.
fn writes_pass_unchanged_and_nothing_is_touched_while_the_gate_is_closed(c: &Cluster, a: &Replica) {
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
    a.passes(2);
    assert_eq!(touches(&c.audit(), None), Vec::<String>::new());
}

/// A new stream: one touch per MachineSet that now needs it, then silence; new writes get
/// the new image too, and the custom and opted-out ones keep theirs.
fn a_new_stream_touches_once_each_machineset_that_now_needs_it(c: &Cluster, a: &Replica) {
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
        installers_and(&["ms-current", "ms-stale"])
    );
    c.create(&machineset("ms-new", OLD));
    assert_eq!(image(&c.get("ms-new")), NEWER);
    for (name, want) in [("ms-custom", CUSTOM), ("ms-opted-out", OLD)] {
        assert_eq!(image(&c.get(name)), want, "{name}");
    }
}

/// A malformed stream: the last good one goes on being served, and nothing is touched, so
/// a bad edit of the ConfigMap cannot take the fleet's boot images anywhere.
fn a_malformed_stream_keeps_the_last_good_one_and_touches_nothing(c: &Cluster, a: &Replica) {
    let mark = c.audit().len();
    c.set_stream("{ not json");
    a.wait_line("unusable ConfigMap");
    c.create(&machineset("ms-after-bad-stream", OLD));
    assert_eq!(image(&c.get("ms-after-bad-stream")), NEWER);
    a.passes(2);
    assert_eq!(touches(&c.audit()[mark..], None), Vec::<String>::new());
}

/// A Normal Event when a MachineSet's boot image moved, once per target,
/// whether the toucher moved it or the webhook did on someone else's write; the gauges of
/// MachineSets by reason and of the oldest boot image's age.
#[test]
fn moves_are_told_by_one_event_per_target_and_the_gauges_count_machinesets() {
    let _parallel = support::parallel();
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
    the_gauges_count_machinesets_and_the_oldest_boot_image(&a);
    a_move_on_someone_elses_write_is_told_too(&c, &a);

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
    assert_eq!(gauge(&a, "UpToDate"), Some(2));
    assert_eq!(
        metric(&a, "bootimage_webhook_boot_image_updated_events_total"),
        Some(4)
    );
    c.assert_nothing_refused(&[&a]);
}

/// Someone else writes ms-custom back onto a stock image: the webhook moves it on that
/// write, and the next pass tells it, so a move is told whoever's write carried it.
fn a_move_on_someone_elses_write_is_told_too(c: &Cluster, a: &Replica) {
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
        || (!events_of(c, "BootImageUpdated", "ms-custom").is_empty()).then_some(()),
    );
    let told = events_of(c, "BootImageUpdated", "ms-custom");
    assert_eq!(
        told[0]["note"],
        format!("boot image moved from {CUSTOM} to {CURRENT_X86}")
    );
}

/// Another writer (GitOps, an ACM policy) puts the old image back 5 times:
/// the webhook re-mutates exactly 3 of those writes, then leaves them as sent; the toucher
/// does not touch the MachineSet, and the Lease holder records one Warning Event. A
/// MachineSet nobody reverts is untouched by all this.
#[test]
fn a_writer_that_keeps_reverting_the_image_wins_after_three_reverts() {
    let _parallel = support::parallel();
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
    // The decision lines tell the story in the MCO's words.
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
    let answers = webhook_answers_to_patches_of(&c.audit()[mark..], "ms-gitops");
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
    one_warning_names_the_field_and_the_fix(&c, "ms-gitops");
    assert!(events_of(&c, "BootImageRevertLoop", "ms-calm").is_empty());
    assert_eq!(image(&c.get("ms-calm")), CURRENT_X86);
    let metrics = block_on(admin_get(a.served.admin, "/metrics")).1;
    assert!(
        metrics.contains("bootimage_webhook_revert_loops_total 1"),
        "{metrics}"
    );
    c.assert_nothing_refused(&[&a]);
}

/// One BootImageRevertLoop Warning for `name`, naming the field, Argo CD's
/// `ignoreDifferences` and the opt-out label.
fn one_warning_names_the_field_and_the_fix(c: &Cluster, name: &str) {
    let events = events_of(c, "BootImageRevertLoop", name);
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
}

/// The webhook away: stopped (SIGTERM: readiness first, the Lease released),
/// writes fail open; back, the toucher repairs; unreachable while the toucher runs, three
/// touches and an Event; two replicas, one touches, the other takes over when it dies.
#[test]
fn the_webhook_away_and_back_and_a_second_replica_taking_over_the_lease() {
    let _parallel = support::parallel();
    let c = Cluster::start(true).with_shipped_touch();
    let mut a = c.replica("replica-a", "1s");
    c.register_webhook(&a.url());
    c.webhook_serves(CURRENT_X86);
    c.wait_holder("replica-a", Duration::from_secs(30));

    // SIGTERM: readiness fails at once while the webhook still serves, the process exits
    // 0, and the Lease is released on the apiserver.
    stopped_by_sigterm(&c, &mut a);

    // Webhook down: the create still succeeds (failurePolicy Ignore), unpatched.
    c.create(&machineset("ms-down", OLD));
    assert_eq!(image(&c.get("ms-down")), OLD);
    assert_eq!(
        webhook_call(creation(&c.audit(), "ms-down")),
        Call::FailedOpen
    );

    let a2 = back_on_the_same_address_the_toucher_repairs_what_was_missed(&c, &a);

    // Unreachable while the toucher runs: three touches, then an Event, then silence.
    a_webhook_unreachable_is_touched_three_times_and_told(&c, &a2);

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

/// The apiserver away: stopped and restarted on the same ports mid-run, the
/// webhook answers throughout and the watchers recover; then the Lease deleted under the
/// holder: no touch until the Lease is back.
#[test]
fn the_apiserver_restarting_mid_run_and_the_lease_deleted() {
    let _parallel = support::parallel();
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

/// The Lease holder's gauges after the first pass: MachineSets by reason, the oldest
/// enrolled boot image's age and the oldest boot image's release.
fn the_gauges_count_machinesets_and_the_oldest_boot_image(a: &Replica) {
    assert_eq!(gauge(a, "UpToDate"), Some(1));
    assert_eq!(gauge(a, "CustomImage"), Some(1));
    assert_eq!(gauge(a, "OptedOut"), Some(1));
    assert_eq!(gauge(a, "Updated"), Some(0));
    // The oldest enrolled image is ms-stale's, now the current one (built 2026-04-28); the
    // older image of the opted-out one and the custom image do not count.
    let today = Timestamp::now()
        .to_zoned(k8s_openapi::jiff::tz::TimeZone::UTC)
        .date();
    let built = k8s_openapi::jiff::civil::date(2026, 4, 28);
    let days = i64::from((today - built).get_days());
    assert_eq!(
        metric(a, "bootimage_webhook_oldest_boot_image_age_days"),
        Some(days)
    );
    // The oldest boot image's release counts every MachineSet, managed or not: the
    // opted-out one's (RHCOS 9.6, which OpenShift 4.19 to 4.21 ship).
    assert_eq!(
        metric(
            a,
            r#"bootimage_webhook_oldest_boot_image_info{rhcos_version="9.6.20250826-1",rhel_version="9.6",ocp_release="4.19-4.21"}"#
        ),
        Some(1)
    );
}

/// The machine-set gauge of `reason` on `a`'s `/metrics`.
fn gauge(a: &Replica, reason: &str) -> Option<i64> {
    metric(
        a,
        &format!("bootimage_webhook_machinesets{{reason=\"{reason}\"}}"),
    )
}

/// How our webhook answered the patches others made to MachineSet `name` in `events`.
fn webhook_answers_to_patches_of(events: &[Value], name: &str) -> Vec<Call> {
    events
        .iter()
        .filter(|e| {
            e["verb"] == "patch"
                && e["objectRef"]["name"] == name
                && e["stage"] == "ResponseComplete"
                && !is_ours(e)
        })
        .map(webhook_call)
        .collect()
}

/// SIGTERM: readiness fails at once while the webhook still serves, the process exits
/// 0, and the Lease is released on the apiserver.
fn stopped_by_sigterm(c: &Cluster, a: &mut Replica) {
    a.served.signal("TERM");
    let signalled = Instant::now();
    while block_on(admin_get(a.served.admin, "/readyz")).0 != 503 {
        assert!(
            signalled.elapsed() < Duration::from_millis(900),
            "readiness still passing"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(a.served.wait_exit(Duration::from_secs(15)).success());
    assert_eq!(c.lease_holder(), None, "the Lease is released on SIGTERM");
}

/// Back on the same address as `a`: the toucher brings what was written while the webhook
/// was away to the target, with one touch. Returns the new replica.
fn back_on_the_same_address_the_toucher_repairs_what_was_missed(
    c: &Cluster,
    a: &Replica,
) -> Replica {
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
    a2
}

/// The apiserver pointed at `a`'s plain-HTTP admin port (its TLS handshake fails, and it
/// fails open): a new MachineSet is touched three times, then a Warning Event, then silence.
fn a_webhook_unreachable_is_touched_three_times_and_told(c: &Cluster, a: &Replica) {
    let mark = c.audit().len();
    c.point_webhook(&format!("https://{}/mutate-machinesets", a.served.admin));
    c.create(&machineset("ms-lost", OLD));
    assert_eq!(
        webhook_call(creation(&c.audit(), "ms-lost")),
        Call::FailedOpen
    );
    let events = eventually(
        "a BootImageNotMoved Event on ms-lost",
        Duration::from_secs(30),
        || a.served.log_text(),
        || Some(events_of(c, "BootImageNotMoved", "ms-lost")).filter(|e| !e.is_empty()),
    );
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["type"], "Warning");
    assert_eq!(events[0]["reportingController"], "bootimage-webhook");
    assert_eq!(events[0]["reportingInstance"], "replica-a");
    c.passes(a, 2);
    assert_eq!(
        touches(&c.audit()[mark..], None),
        ["ms-lost", "ms-lost", "ms-lost"]
    );
    assert_eq!(image(&c.get("ms-lost")), OLD);
}
