//! The bodies of the fuzz targets, shared with `tests/fast/fuzz_cases.rs`, which runs the seed
//! corpus and every regression case (`fuzz/regressions/<target>/`) under `cargo test`.
//! Each asserts what must hold for any input, beyond "no panic".

#![allow(dead_code)]

use std::sync::LazyLock;

use bootimage_webhook::core::decision;
use bootimage_webhook::core::reason::Reason;
use bootimage_webhook::core::snapshot::{self, Arch, BootImages, Snapshot};
use bootimage_webhook::preview;
use bootimage_webhook::serve::admission;
use serde_json::Value;

/// The embedded ConfigMap, gate open, x86_64: the decision goes as far as it can.
static SNAPSHOT: LazyLock<Snapshot> = LazyLock::new(|| {
    let b = BootImages::from_document(snapshot::EMBEDDED_CONFIGMAP).expect("embedded ConfigMap");
    Snapshot::offline(b, true, Some(Arch::Amd64), false)
});

/// Any bytes: an answer or an error, never a panic. An answer is JSON; a patch applies
/// to the request's object, and the webhook on the patched object patches nothing. What
/// is answered is JSON serde_json accepts.
pub fn review(data: &[u8]) {
    let snap = &*SNAPSHOT;
    let Ok(reviewed) = admission::review(data, snap) else {
        return;
    };
    let text = std::str::from_utf8(data).expect("an answered review is UTF-8");
    if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(text) {
        panic!("answered what serde_json refuses: {e}");
    }
    let body: Value = serde_json::from_slice(&reviewed.body).expect("the answer is JSON");
    assert_eq!(
        body["response"]["allowed"],
        Value::Bool(true),
        "never denies"
    );
    if reviewed.decision.reason != Reason::Updated {
        assert!(reviewed.decision.patch.0.is_empty());
        return;
    }
    // JSON's grammar allows a lone surrogate escape (`"\uD9DD"`, RFC 8259 §8.2); the
    // review skips strings it does not read without decoding them, as Go's encoding/json
    // (the apiserver) accepts them, but serde_json's Value refuses them. Found by this
    // target: fuzz/regressions/review/lone-surrogate-in-a-string-the-webhook-does-not-read.json.
    let Ok(request) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let mut object = request["request"]["object"].clone();
    let patch = reviewed
        .decision
        .patch
        .to_json_patch()
        .expect("our patch is a JSON Patch");
    json_patch::patch(&mut object, &patch).expect("the patch applies to the request's object");
    let again = decision::decide_object(&object, snap);
    assert!(
        again.patch.0.is_empty(),
        "not idempotent: {:?} then {:?}",
        reviewed.decision.patch,
        again.patch
    );
}

/// A ConfigMap document, or (first byte `{` after a `\x00` marker) a bare stream under a
/// fixed release: parsed, or refused with an error.
pub fn configmap(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Some(stream) = text.strip_prefix('\u{0}') {
        let data = [
            ("releaseVersion".to_owned(), "4.21.0".to_owned()),
            ("stream".to_owned(), stream.to_owned()),
        ]
        .into_iter()
        .collect();
        if let Ok(b) = BootImages::from_data(&data) {
            let _ = b.problems().count();
            let snap = Snapshot::offline(b, true, Some(Arch::Amd64), false);
            let _ = snap.id.len();
        }
        return;
    }
    if let Ok(b) = BootImages::from_document(text) {
        let _ = b.problems().count();
        for arch in Arch::ALL {
            for platform in bootimage_webhook::core::platforms::Platform::ALL {
                let _ = b.target(arch, platform);
            }
        }
    }
}

/// `preview`'s reader: documents to MachineSets, each decided and rendered.
pub fn preview_docs(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(docs) = snapshot::parse_documents(text) else {
        return;
    };
    let Ok((machinesets, _notes)) = preview::machinesets(docs) else {
        return;
    };
    for ms in machinesets {
        let d = decision::decide_object(&ms, &SNAPSHOT);
        let _ = preview::render(ms, &d);
    }
}
