//! Transient faults never strand a MachineSet: the real kube-apiserver
//! (tests/support/apiserver.rs) stopped for 30 s in the middle of a touch pass, at the
//! shipped defaults (`--touch-resync 10m`, `--touch-settle 5s`, `--touch-backoff 2s`,
//! `--touch-rate 10`). Once it is back, every MachineSet moves to the new target, well
//! before the resync and with no restart of the webhook, and none is given up on.

use crate::support;

use std::time::{Duration, Instant};

use serde_json::Value;
use support::CURRENT_X86;
use support::cluster::*;

/// Enough MachineSets that the pass (10 writes a second) is still under way when the
/// apiserver stops.
const MACHINESETS: usize = 60;
const OUTAGE: Duration = Duration::from_secs(30);

fn moved_lines(r: &Replica) -> usize {
    r.served
        .log()
        .iter()
        .filter(|l| l.contains("touched: boot image moved"))
        .count()
}

#[test]
fn a_30_second_apiserver_outage_mid_touch_strands_no_machineset() {
    let _parallel = support::parallel();
    let mut c = Cluster::start(true).with_shipped_touch();
    let mut a = c.holder(&[]);
    c.webhook_serves(CURRENT_X86);
    let names: Vec<String> = (0..MACHINESETS).map(|i| format!("ms-{i:02}")).collect();
    let fleet: Vec<Value> = names.iter().map(|n| machineset(n, OLD)).collect();
    c.create_all(&fleet.iter().collect::<Vec<_>>());
    let pid = a.served.pid();

    // A new release: the pass starts after the settle; the apiserver stops once a few
    // MachineSets have moved.
    c.set_stream(&stream_with_gcp_image(NEWER_NAME));
    eventually(
        "the touch pass to move its first MachineSets",
        Duration::from_secs(60),
        || a.served.log_text(),
        || (moved_lines(&a) >= 3).then_some(()),
    );
    c.stop_apiserver();
    let stopped = Instant::now();
    let before = moved_lines(&a);
    std::thread::sleep(OUTAGE);
    c.restart_apiserver();
    let back = Instant::now();
    assert!(
        before < MACHINESETS,
        "the pass ended before the apiserver stopped ({before} moved)"
    );

    let stale = || -> Vec<String> {
        let list = c.api.get_json(["machinesets", "-n", NS]);
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|ms| image(ms) != NEWER)
            .map(|ms| ms["metadata"]["name"].as_str().unwrap_or("").to_owned())
            .collect()
    };
    eventually(
        "every MachineSet to move after the outage",
        Duration::from_secs(150),
        || format!("still stale: {:?}\n{}", stale(), a.served.log_text()),
        || stale().is_empty().then_some(()),
    );
    let caught_up = back.elapsed();
    eprintln!(
        "{MACHINESETS} MachineSets, {before} moved before the apiserver stopped for {:?}; \
         the rest moved within {caught_up:?} of its return",
        back - stopped,
    );

    assert!(
        !a.served.exited(),
        "the webhook exited:\n{}",
        a.served.log_text()
    );
    assert_eq!(a.served.pid(), pid);
    let log = a.served.log_text();
    assert!(
        log.contains("touch pass stopped; trying again after a backoff"),
        "the pass never met the outage:\n{log}"
    );
    assert_eq!(
        metric(&a, "bootimage_webhook_touch_given_up_total"),
        Some(0),
        "a MachineSet was given up on"
    );
    for name in &names {
        assert!(
            events_of(&c, "BootImageNotMoved", name).is_empty(),
            "{name} has a BootImageNotMoved Event"
        );
    }
    c.assert_nothing_refused(&[&a]);
}
