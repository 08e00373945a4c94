//! A MachineSet Hive made, on a real kube-apiserver with the shipped manifests: moved as the
//! MCO moves it, and Hive writing the hub's providerSpec back (its MachinePool carrying
//! `hive.openshift.io/override-machinepool-platform: "true"`) caught by the revert-loop
//! guard, whose log line, Event and `status` row name Hive and that annotation.

use crate::support;

use std::time::Duration;

use bootimage_webhook::core::decision::{HIVE_MACHINE_POOL_LABEL, HIVE_OVERRIDE_ANNOTATION};
use serde_json::{Value, json};
use support::CURRENT_X86;
use support::cluster::*;

/// A spoke's MachineSet as Hive's MachinePool controller creates it: its two labels, no
/// owner reference (the hub's MachinePool is on another cluster).
fn hive_machineset(name: &str) -> Value {
    let mut ms = machineset(name, OLD);
    ms["metadata"]["labels"][HIVE_MACHINE_POOL_LABEL] = json!("worker");
    ms["metadata"]["labels"]["hive.openshift.io/managed"] = json!("true");
    ms
}

/// Hive's write-back: an UPDATE of the whole object, the stored one with the hub's
/// providerSpec (the install image) in it, as its controller sends it.
fn hive_writes_back(c: &Cluster, name: &str) {
    let mut stored = c.get(name);
    stored["spec"]["template"]["spec"]["providerSpec"]["value"]["disks"][0]["image"] = json!(OLD);
    let out = c
        .api
        .kubectl_stdin(["replace", "-f", "-"], &stored.to_string());
    assert!(out.status.success(), "replace: {}", text(&out));
}

#[test]
fn a_hive_machineset_moves_and_hives_write_back_is_caught_naming_hive() {
    let _parallel = support::parallel();
    let c = Cluster::start(true).with_shipped_touch();
    // Made by Hive before the webhook ran: the Lease holder's toucher moves it.
    c.create(&hive_machineset("ms-hive"));
    let a = c.holder(&[]);
    eventually(
        "ms-hive to move",
        Duration::from_secs(30),
        || a.served.log_text(),
        || (image(&c.get("ms-hive")) == CURRENT_X86).then_some(()),
    );

    let mut stored = Vec::new();
    for _ in 0..4 {
        hive_writes_back(&c, "ms-hive");
        stored.push(image(&c.get("ms-hive")).to_owned());
    }
    assert_eq!(stored, [CURRENT_X86, CURRENT_X86, CURRENT_X86, OLD]);
    eventually(
        "the BootImageRevertLoop Event",
        Duration::from_secs(15),
        || a.served.log_text(),
        || (!events_of(&c, "BootImageRevertLoop", "ms-hive").is_empty()).then_some(()),
    );
    let events = events_of(&c, "BootImageRevertLoop", "ms-hive");
    assert_eq!(events.len(), 1, "{events:?}");
    let note = events[0]["note"].as_str().unwrap_or_default();
    let given_up = status_json(&c);
    let row = status_row(&given_up, "ms-hive");
    assert_eq!(row["reason"], "RevertLoop", "{row:#}");
    let message = row["message"].as_str().unwrap_or_default();
    // The Lease holder logs the give-up once, at error level, in the decision's words.
    a.wait_line("reason=RevertLoop");
    let logged = a.lines("RevertLoop").join("\n");
    for told in [note, message, logged.as_str()] {
        for words in ["Hive", "MachinePool \"worker\"", HIVE_OVERRIDE_ANNOTATION] {
            assert!(told.contains(words), "{words}: {told}");
        }
    }
    c.assert_nothing_refused(&[&a]);
}
