//! The answers to 43 reviews, byte for byte, against the answers recorded from the
//! hand-written response writer that serde's replaced (`tests/fixtures/responses.jsonl`,
//! one `[name, answer]` per line): every reason, each shape of the patch (annotations
//! present, absent, null, a revert count), and escapes and non-ASCII in every string the
//! answer echoes.

use crate::support;

use bootimage_webhook::core::snapshot::parse_documents;
use bootimage_webhook::serve::admission;
use serde_json::{Value, json};
use support::{fixture, fixture_text, offline_snapshot};

const DISK: &str = "/request/object/spec/template/spec/providerSpec/value/disks/0/image";
const TARGET: &str = "projects/rhcos-cloud/global/images/rhcos-9-8-20260428-0-gcp-x86-64";

/// A change made to the moving GCP review.
type Edit = Box<dyn Fn(&mut Value)>;

/// Sets the value at JSON pointer `p` (its parent exists).
fn set(p: &'static str, v: Value) -> Edit {
    let (parent, key) = p.rsplit_once('/').unwrap();
    Box::new(move |r: &mut Value| r.pointer_mut(parent).unwrap()[key] = v.clone())
}

fn meta(k: &'static str, v: Value) -> Edit {
    Box::new(move |r: &mut Value| r["request"]["object"]["metadata"][k] = v.clone())
}

fn annotate(k: &'static str, v: &'static str) -> Edit {
    Box::new(move |r: &mut Value| {
        r["request"]["object"]["metadata"]["annotations"] = json!({ k: v })
    })
}

fn label(k: &'static str, v: &'static str) -> Edit {
    Box::new(move |r: &mut Value| {
        r["request"]["object"]["spec"]["template"]["metadata"]["labels"] = json!({ k: v })
    })
}

/// A writer putting the image back for the `n`+1-th time (the old object on the target).
fn revert(n: u32) -> Edit {
    Box::new(move |r: &mut Value| {
        *r.pointer_mut("/request/oldObject/spec/template/spec/providerSpec/value/disks/0/image")
            .unwrap() = json!(TARGET);
        if n > 0 {
            r["request"]["object"]["metadata"]["annotations"] = json!({
                "bootimages.machineconfiguration.openshift.io/reverts": format!("{n} {TARGET}"),
                "bootimages.machineconfiguration.openshift.io/boot-image": TARGET,
            });
        }
    })
}

/// The review's own fields: operations, subresources, objects of the wrong shape or kind,
/// uids with escapes, dry run, names.
fn envelope_edits() -> Vec<(&'static str, Edit)> {
    vec![
        ("update", Box::new(|_: &mut Value| {})),
        ("already current", set(DISK, json!(TARGET))),
        ("create", set("/request/operation", json!("CREATE"))),
        ("delete", set("/request/operation", json!("DELETE"))),
        ("connect", set("/request/operation", json!("CONNECT"))),
        (
            "scale subresource",
            set("/request/subResource", json!("scale")),
        ),
        ("empty subresource", set("/request/subResource", json!(""))),
        ("object null", set("/request/object", Value::Null)),
        ("object a string", set("/request/object", json!("ms"))),
        ("object an array", set("/request/object", json!([1]))),
        (
            "not a machineset",
            set(
                "/request/kind",
                json!({"group": "", "version": "v1", "kind": "Pod"}),
            ),
        ),
        (
            "cpms kind",
            set("/request/kind/kind", json!("ControlPlaneMachineSet")),
        ),
        (
            "uid escapes",
            set("/request/uid", json!("u\"i\\d\n\u{e9}\u{1F600}\u{1}")),
        ),
        ("uid non-ascii", set("/request/uid", json!("ü-1111"))),
        ("dry run", set("/request/dryRun", json!(true))),
        (
            "no name",
            Box::new(|r: &mut Value| drop(r["request"].as_object_mut().unwrap().remove("name"))),
        ),
        (
            "generate name",
            Box::new(|r: &mut Value| {
                r["request"].as_object_mut().unwrap().remove("name");
                r["request"]["operation"] = json!("CREATE");
                let m = r["request"]["object"]["metadata"].as_object_mut().unwrap();
                m.remove("name");
                m.insert("generateName".into(), json!("infra-"));
            }),
        ),
    ]
}

/// The MachineSet's metadata and labels: annotations of every shape, opt-out,
/// architecture, OS, stream, ownership, the authoritative API.
fn metadata_edits() -> Vec<(&'static str, Edit)> {
    vec![
        ("annotations null", meta("annotations", Value::Null)),
        ("annotations empty", meta("annotations", json!({}))),
        ("annotations a string", meta("annotations", json!("x"))),
        (
            "boot-image annotation",
            annotate(
                "bootimages.machineconfiguration.openshift.io/boot-image",
                "old",
            ),
        ),
        (
            "opt out",
            Box::new(|r: &mut Value| {
                r["request"]["object"]["metadata"]["labels"]["bootimages.machineconfiguration.openshift.io/managed"] =
                    json!("false")
            }),
        ),
        (
            "arch arm64",
            annotate(
                "capacity.cluster-autoscaler.kubernetes.io/labels",
                "kubernetes.io/arch=arm64",
            ),
        ),
        (
            "arch sparc",
            annotate(
                "capacity.cluster-autoscaler.kubernetes.io/labels",
                "kubernetes.io/arch=sparc",
            ),
        ),
        ("windows", label("machine.openshift.io/os-id", "Windows")),
        (
            "rhel-10 stream",
            label("machineconfiguration.openshift.io/osstream", "rhel-10"),
        ),
        (
            "owned",
            meta(
                "ownerReferences",
                json!([{"kind": "MachineDeployment", "name": "d\u{e9}"}]),
            ),
        ),
        (
            "cluster api authoritative",
            set(
                "/request/object/status",
                json!({"authoritativeAPI": "ClusterAPI"}),
            ),
        ),
    ]
}

/// The providerSpec: shapes, images, the revert count, the old object.
fn provider_spec_edits() -> Vec<(&'static str, Edit)> {
    vec![
        (
            "provider spec not an object",
            set(
                "/request/object/spec/template/spec/providerSpec/value",
                json!([1]),
            ),
        ),
        (
            "disks not an array",
            set(
                "/request/object/spec/template/spec/providerSpec/value/disks",
                json!("pd"),
            ),
        ),
        ("image a number", set(DISK, json!(7))),
        (
            "image with escapes",
            set(DISK, json!("projects/x/global/images/a\"b\\c\u{e9}")),
        ),
        (
            "image unknown",
            set(DISK, json!("projects/other/global/images/custom-image")),
        ),
        ("image empty", set(DISK, json!(""))),
        ("revert 1", revert(0)),
        ("revert 2", revert(1)),
        ("revert 3", revert(2)),
        ("revert 4", revert(3)),
        ("revert 5", revert(4)),
        ("old object null", set("/request/oldObject", Value::Null)),
    ]
}

/// Reviews whose answers must stay byte for byte: every reason the webhook writes, the
/// patch's shapes (annotations present, absent, null; revert counts), escapes and
/// non-ASCII in every string the response echoes.
fn response_cases(update: &Value, aws: &Value, azure: &Value) -> Vec<(String, Vec<u8>)> {
    let edits = [envelope_edits(), metadata_edits(), provider_spec_edits()];
    let mut out: Vec<(String, Vec<u8>)> = edits
        .into_iter()
        .flatten()
        .map(|(name, edit)| {
            let mut r = update.clone();
            edit(&mut r);
            (name.to_owned(), serde_json::to_vec(&r).unwrap())
        })
        .collect();
    for (name, ms) in [("aws", aws), ("azure", azure)] {
        let mut r = update.clone();
        r["request"]["object"] = ms.clone();
        r["request"]["oldObject"] = ms.clone();
        out.push((name.to_owned(), serde_json::to_vec(&r).unwrap()));
    }
    out.push((
        "pretty".to_owned(),
        serde_json::to_vec_pretty(update).unwrap(),
    ));
    out
}

#[test]
fn answers_are_byte_for_byte_those_recorded() {
    let _parallel = support::parallel();
    let snap = offline_snapshot();
    let update = fixture("admissionreview-v1-machineset-gcp-update.assembled.json");
    let stream = fixture("stream-coreos-rhel-9.installer.json");
    let mut aws = parse_documents(&fixture_text(
        "machineset-aws-build01-ci-tests-worker-us-east-1a.yaml",
    ))
    .unwrap()
    .swap_remove(0);
    aws["spec"]["template"]["spec"]["providerSpec"]["value"]["ami"]["id"] =
        stream["architectures"]["x86_64"]["images"]["aws"]["regions"]["eu-west-1"]["image"].clone();
    let azure = fixture("machineset-azure.openshift-docs-sample.rendered.yaml");
    let recorded = fixture_text("responses.jsonl");
    let recorded: Vec<(String, String)> = recorded
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let cases = response_cases(&update, &aws, &azure);
    assert_eq!(cases.len(), recorded.len());
    for ((name, body), (recorded_name, answer)) in cases.into_iter().zip(recorded) {
        assert_eq!(name, recorded_name);
        let ours = admission::review(&body, &snap).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(String::from_utf8(ours.body).unwrap(), answer, "{name}");
    }
}
