//! The full handler (AdmissionReview bytes in, response bytes out) against the floor of
//! serde_json parsing the same bytes to a `Value` and writing one back, measured side by
//! side in one run: rounds alternate between the two, and medians of the per-round means
//! are compared, so machine noise hits both alike.
//!
//!     cargo bench --bench handler
//!
//! Reviews: the shared UPDATE fixture (object + oldObject), and the same with the
//! managedFields a real apiserver adds (larger, so parsing dominates).

use std::hint::black_box;
use std::path::Path;
use std::time::Instant;

use bootimage_webhook::core::decision::Decision;
use bootimage_webhook::core::snapshot::{
    Arch, BootImages, Snapshot, parse_document, parse_documents,
};
use bootimage_webhook::serve::admission;
use kube::core::admission::AdmissionResponse;
use serde_json::{Value, json};

const ROUNDS: usize = 41;

fn fixture(rel: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn with_managed_fields(review: &Value) -> Value {
    let mut r = review.clone();
    let entry = json!({
        "manager": "machine-api-operator", "operation": "Update", "apiVersion": "machine.openshift.io/v1beta1",
        "time": "2026-11-30T09:12:44Z", "fieldsType": "FieldsV1",
        "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:machine.openshift.io/cluster-api-cluster": {}}},
                      "f:spec": {"f:replicas": {}, "f:selector": {}, "f:template": {"f:metadata": {"f:labels": {}},
                      "f:spec": {"f:lifecycleHooks": {}, "f:metadata": {}, "f:providerSpec": {"f:value": {}}, "f:taints": {}}}}}
    });
    for key in ["object", "oldObject"] {
        r["request"][key]["metadata"]["managedFields"] =
            json!([entry.clone(), entry.clone(), entry.clone()]);
    }
    r
}

/// Mean nanoseconds per call over `iters` calls.
fn round(iters: u32, mut f: impl FnMut() -> usize) -> f64 {
    let start = Instant::now();
    let mut sink = 0;
    for _ in 0..iters {
        sink ^= f();
    }
    black_box(sink);
    start.elapsed().as_nanos() as f64 / f64::from(iters)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn compare(name: &str, body: &[u8], snap: &Snapshot) {
    let handler = || {
        admission::review(black_box(body), snap)
            .map(|r| r.body.len())
            .unwrap_or(0)
    };
    let floor = || {
        let v: Value = serde_json::from_slice(black_box(body)).unwrap();
        serde_json::to_vec(&v).unwrap().len()
    };
    // Size a round to ~20ms and warm up both.
    let probe = round(200, handler).max(round(200, floor));
    let iters = ((20e6 / probe) as u32).max(50);
    let (mut h, mut f) = (Vec::new(), Vec::new());
    for i in 0..ROUNDS {
        // Alternate which goes first, so neither always runs on a warmer cache.
        if i % 2 == 0 {
            h.push(round(iters, handler));
            f.push(round(iters, floor));
        } else {
            f.push(round(iters, floor));
            h.push(round(iters, handler));
        }
    }
    let ratios: Vec<f64> = h.iter().zip(&f).map(|(a, b)| a / b).collect();
    let (mh, mf) = (median(h), median(f));
    println!(
        "{name:<28} {:>7} B  handler {:>8.1} us  floor {:>8.1} us  ratio {:.2} (median of per-round ratios {:.2}; {ROUNDS} rounds x {iters})",
        body.len(),
        mh / 1e3,
        mf / 1e3,
        mh / mf,
        median(ratios),
    );
}

fn main() {
    let boot_images =
        BootImages::from_document(&fixture("configmap-coreos-bootimages.assembled.yaml")).unwrap();
    let snap = Snapshot::offline(boot_images, false, Some(Arch::Amd64), false);
    let update = parse_document(&fixture(
        "admissionreview-v1-machineset-gcp-update.assembled.json",
    ))
    .unwrap();
    // The handler patches this one; check so the benchmark measures the real path.
    let update_bytes = serde_json::to_vec(&update).unwrap();
    let first = admission::review(&update_bytes, &snap).unwrap();
    assert_eq!(first.decision.reason.as_str(), "Updated");
    println!("bootimage-webhook handler vs serde_json floor (parse to Value + write back)");
    compare(
        "UPDATE review",
        &serde_json::to_vec(&update).unwrap(),
        &snap,
    );
    compare(
        "UPDATE + managedFields",
        &serde_json::to_vec(&with_managed_fields(&update)).unwrap(),
        &snap,
    );
    let mut current = update.clone();
    current["request"]["object"]["spec"]["template"]["spec"]["providerSpec"]["value"]["disks"][0]
        ["image"] = json!("projects/rhcos-cloud/global/images/rhcos-9-8-20260428-0-gcp-x86-64");
    compare(
        "UPDATE, already current",
        &serde_json::to_vec(&current).unwrap(),
        &snap,
    );

    // The same UPDATE on the other clouds, against the GCP one: an AWS MachineSet on a
    // stream AMI of another region, the Azure docs sample on its install-time image.
    println!("\nthe handler per platform, against the GCP review (same run)");
    let gcp = serde_json::to_vec(&update).unwrap();
    let stream = parse_document(&fixture("stream-coreos-rhel-9.installer.json")).unwrap();
    // The fixture holds the MachineSet and its MachineAutoscaler: take the MachineSet.
    let mut aws = parse_documents(&fixture(
        "machineset-aws-build01-ci-tests-worker-us-east-1a.yaml",
    ))
    .unwrap()
    .swap_remove(0);
    aws["spec"]["template"]["spec"]["providerSpec"]["value"]["ami"]["id"] =
        stream["architectures"]["x86_64"]["images"]["aws"]["regions"]["eu-west-1"]["image"].clone();
    let azure = parse_document(&fixture(
        "machineset-azure.openshift-docs-sample.rendered.yaml",
    ))
    .unwrap();
    for (name, ms) in [("AWS UPDATE review", aws), ("Azure UPDATE review", azure)] {
        let mut review = update.clone();
        review["request"]["object"] = ms.clone();
        review["request"]["oldObject"] = ms;
        let body = serde_json::to_vec(&review).unwrap();
        let reviewed = admission::review(&body, &snap).unwrap();
        assert_eq!(
            reviewed.decision.reason.as_str(),
            "Updated",
            "{name}: {}",
            reviewed.decision.message
        );
        against_gcp(name, &body, &gcp, &snap);
    }
    envelopes(&first.decision);
}

/// Our response envelope against kube-core's `AdmissionResponse` for the same moving
/// decision: time to write it and its size. kube-core writes `patch` as an array of numbers
/// (its field is a `Vec<u8>`), where the API's `[]byte` is a base64 string.
fn envelopes(decision: &Decision) {
    let uid = "705ab4f5-6393-11e8-b7cc-42010a800002";
    let ours = || admission::response_body(black_box(uid), decision).len();
    let patch: json_patch::Patch =
        serde_json::from_value(serde_json::to_value(&decision.patch).unwrap()).unwrap();
    let kube = || {
        let mut r = AdmissionResponse::invalid("");
        r.uid = black_box(uid).to_owned();
        r.allowed = true;
        r.result.message = decision.message.clone();
        r.audit_annotations
            .insert("reason".into(), decision.reason.as_str().into());
        r.audit_annotations
            .insert("boot-image".into(), decision.target.clone().unwrap());
        r.warnings = Some(vec![String::from("bootimage-webhook: boot image set to x")]);
        let r = r.with_patch(patch.clone()).unwrap();
        serde_json::to_vec(&r.into_review()).unwrap().len()
    };
    let iters = ((20e6 / round(200, ours).max(round(200, kube))) as u32).max(50);
    let (mut o, mut k) = (Vec::new(), Vec::new());
    for i in 0..ROUNDS {
        if i % 2 == 0 {
            o.push(round(iters, ours));
            k.push(round(iters, kube));
        } else {
            k.push(round(iters, kube));
            o.push(round(iters, ours));
        }
    }
    let (mo, mk) = (median(o), median(k));
    println!(
        "\nthe response envelope of the moving decision\nours {:>5} B {:>6.2} us   kube-core AdmissionResponse {:>5} B {:>6.2} us   time ratio {:.2}",
        ours(),
        mo / 1e3,
        kube(),
        mk / 1e3,
        mo / mk,
    );
}

/// The handler on `body` against the handler on the GCP review, interleaved rounds.
fn against_gcp(name: &str, body: &[u8], gcp: &[u8], snap: &Snapshot) {
    let run = |b: &[u8]| {
        admission::review(black_box(b), snap)
            .map(|r| r.body.len())
            .unwrap_or(0)
    };
    let iters = ((20e6 / round(200, || run(gcp)).max(1.0)) as u32).max(50);
    let (mut this, mut base) = (Vec::new(), Vec::new());
    for i in 0..ROUNDS {
        if i % 2 == 0 {
            this.push(round(iters, || run(body)));
            base.push(round(iters, || run(gcp)));
        } else {
            base.push(round(iters, || run(gcp)));
            this.push(round(iters, || run(body)));
        }
    }
    let ratios: Vec<f64> = this.iter().zip(&base).map(|(a, b)| a / b).collect();
    println!(
        "{name:<28} {:>7} B  handler {:>8.1} us  GCP ({} B) {:>8.1} us  ratio {:.2} (median of per-round ratios)",
        body.len(),
        median(this) / 1e3,
        gcp.len(),
        median(base) / 1e3,
        median(ratios),
    );
}
