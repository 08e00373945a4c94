//! The touch planner on 5,000 MachineSets after one stream change: time for the whole
//! decision pass, and the number of writes it plans (which must equal the number of
//! MachineSets that need one).
//!
//!     cargo bench --bench touch_plan

use std::hint::black_box;
use std::path::Path;
use std::time::Instant;

use bootimage_webhook::cluster::touch;
use bootimage_webhook::core::decision::{ARCH_ANNOTATION, OPT_OUT_LABEL};
use bootimage_webhook::core::snapshot::{Arch, BootImages, Snapshot, parse_documents};
use serde_json::{Value, json};

const N: usize = 5_000;
const ROUNDS: usize = 21;

fn main() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let read = |n: &str| std::fs::read_to_string(fixtures.join(n)).unwrap();
    let snap = Snapshot::offline(
        BootImages::from_document(&read("configmap-coreos-bootimages.assembled.yaml")).unwrap(),
        false,
        Some(Arch::Amd64),
        false,
    );
    let base = parse_documents(&read("machineset-gcp-build02-infra-a.yaml"))
        .unwrap()
        .swap_remove(0);
    // A fleet after a stream change: most on the old image, some already current, some
    // that must be left alone.
    let mut expected = 0;
    let fleet: Vec<Value> = (0..N)
        .map(|i| {
            let mut ms = base.clone();
            ms["metadata"]["name"] = json!(format!("fleet-{i:05}"));
            ms["metadata"]["uid"] = json!(format!("uid-{i:05}"));
            let disk = &mut ms["spec"]["template"]["spec"]["providerSpec"]["value"]["disks"][0];
            match i % 20 {
                0..=11 => expected += 1,
                12 => {
                    ms["metadata"]["annotations"] =
                        json!({ARCH_ANNOTATION: "kubernetes.io/arch=arm64"});
                    expected += 1;
                }
                13..=15 => {
                    disk["image"] =
                        json!("projects/rhcos-cloud/global/images/rhcos-9-8-20260428-0-gcp-x86-64")
                }
                16 => disk["image"] = json!("projects/my-project/global/images/custom"),
                17 => ms["metadata"]["labels"][OPT_OUT_LABEL] = json!("false"),
                18 => {
                    ms["metadata"]["ownerReferences"] =
                        json!([{"kind": "MachinePool", "name": "p"}])
                }
                _ => {
                    ms["spec"]["template"]["metadata"]["labels"]["machine.openshift.io/os-id"] =
                        json!("Windows")
                }
            }
            ms
        })
        .collect();
    let planned = touch::plan(&fleet, &snap);
    assert_eq!(
        planned.len(),
        expected,
        "writes planned == MachineSets that need one"
    );
    let mut times = Vec::new();
    for _ in 0..ROUNDS {
        let t = Instant::now();
        black_box(touch::plan(black_box(&fleet), &snap));
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    println!(
        "touch plan over {N} MachineSets: median {:.2} ms (min {:.2}, max {:.2}; {ROUNDS} rounds); {} writes planned, {} needed",
        times[ROUNDS / 2],
        times[0],
        times[ROUNDS - 1],
        planned.len(),
        expected
    );
}
