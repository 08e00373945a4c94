//! A dual-stream release on a real kube-apiserver (tests/support/cluster.rs): the shipped
//! manifests, the binary as their ServiceAccount, and the 5.0-style ConfigMap (default
//! RHEL 10, `streams` with `rhel-9` and `rhel-10`) replacing a 4.21 one under running
//! MachineSets. Judged by what the apiserver stored.

use crate::support;

use std::time::Duration;

use serde_json::{Value, json};
use support::cluster::*;
use support::{CURRENT_X86, fixture};

const LABEL: &str = "machineconfiguration.openshift.io/osstream";
const OLD_9: &str = "projects/rhcos-cloud/global/images/rhcos-9-6-20250826-1-gcp-x86-64";
const RHEL_10: &str = "projects/rhcos-cloud/global/images/rhcos-10-2-20260715-0-gcp-x86-64";

fn labelled(name: &str, image: &str, stream: Option<&str>) -> Value {
    let mut ms = machineset(name, image);
    if let Some(stream) = stream {
        ms["metadata"]["labels"][LABEL] = json!(stream);
    }
    ms
}

/// The dual-stream ConfigMap's data, written over the seeded one as the CVO would on an
/// upgrade to it.
fn upgrade_to_dual_stream(c: &Cluster) {
    let dual = fixture("configmap-coreos-bootimages.dual-stream.yaml");
    c.patch_configmap_data(dual["data"].clone());
}

#[test]
fn each_machineset_follows_its_stream_and_none_crosses_rhel_majors_unasked() {
    let _parallel = support::parallel();
    let c = Cluster::start(true);
    let a = c.holder(&[]);

    // 4.21, one stream: rhel-10 is not served, the others move to RHEL 9.8.
    let world = [
        labelled("ms-rhel-10", OLD_9, Some("rhel-10")),
        labelled("ms-rhel-9", OLD_9, Some("rhel-9")),
        labelled("ms-unlabelled", OLD_9, None),
        labelled("ms-rhel-11", OLD_9, Some("rhel-11")),
    ];
    for ms in &world {
        c.create(ms);
    }
    for (name, want) in [
        ("ms-rhel-10", OLD_9),
        ("ms-rhel-9", CURRENT_X86),
        ("ms-unlabelled", CURRENT_X86),
        ("ms-rhel-11", OLD_9),
    ] {
        assert_eq!(image(&c.get(name)), want, "{name} on 4.21");
    }

    // The 5.0 ConfigMap: the toucher moves the rhel-10 MachineSet to RHEL 10; the RHEL 9
    // ones (labelled or not) stay on RHEL 9 although the default is RHEL 10.
    upgrade_to_dual_stream(&c);
    eventually(
        "ms-rhel-10 to move to RHEL 10",
        Duration::from_secs(30),
        || a.served.log_text(),
        || (image(&c.get("ms-rhel-10")) == RHEL_10).then_some(()),
    );
    a.passes(2);
    for (name, want) in [
        ("ms-rhel-10", RHEL_10),
        ("ms-rhel-9", CURRENT_X86),
        ("ms-unlabelled", CURRENT_X86),
        ("ms-rhel-11", OLD_9),
    ] {
        assert_eq!(image(&c.get(name)), want, "{name} on 5.0");
    }
    // New writes: each by its stream.
    for (ms, want) in [
        (labelled("ms-new-rhel-10", OLD_9, Some("rhel-10")), RHEL_10),
        (
            labelled("ms-new-rhel-9", RHEL_10, Some("rhel-9")),
            CURRENT_X86,
        ),
        (labelled("ms-new-unlabelled", OLD_9, None), CURRENT_X86),
        (labelled("ms-new-unlabelled-10", RHEL_10, None), RHEL_10),
    ] {
        c.create(&ms);
        let name = ms["metadata"]["name"].as_str().unwrap();
        assert_eq!(image(&c.get(name)), want, "{name}");
    }

    // `status` names each MachineSet's stream, and the stream nobody carries.
    let table = status(&c, "wide");
    for words in [
        "streams rhel-10 (default), rhel-9",
        "STREAM",
        "rhel-10 (label)",
        "rhel-9 (image)",
        "unsupported stream: rhel-11",
    ] {
        assert!(table.contains(words), "{words}:\n{table}");
    }

    // Malformed `streams`: the last good snapshot goes on being served.
    c.patch_configmap_data(json!({"streams": "{ not json"}));
    a.wait_line("unusable ConfigMap");
    c.create(&labelled("ms-after-bad-streams", OLD_9, Some("rhel-10")));
    assert_eq!(image(&c.get("ms-after-bad-streams")), RHEL_10);

    c.assert_nothing_refused(&[&a]);
}
