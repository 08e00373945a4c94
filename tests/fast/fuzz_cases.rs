//! The fuzz targets' bodies (`fuzz/fuzz_targets/common.rs`) on the seed corpus
//! (`fuzz/corpus/<target>/`) and on every input the fuzzer once failed on
//! (`fuzz/regressions/<target>/`), under `cargo test`: a finding stays fixed without
//! cargo-fuzz.

#[path = "../../fuzz/fuzz_targets/common.rs"]
mod common;

use std::path::Path;

use crate::support;

fn inputs(target: &str) -> Vec<(String, Vec<u8>)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut out = Vec::new();
    for dir in ["corpus", "regressions"] {
        let Ok(entries) = std::fs::read_dir(root.join(dir).join(target)) else {
            continue;
        };
        for e in entries {
            let path = e.unwrap().path();
            out.push((path.display().to_string(), std::fs::read(&path).unwrap()));
        }
    }
    out.sort();
    out
}

fn run(target: &str, body: fn(&[u8]), at_least: usize) {
    let cases = inputs(target);
    assert!(cases.len() >= at_least, "{target}: {} inputs", cases.len());
    for (name, data) in cases {
        let result = std::panic::catch_unwind(|| body(&data));
        assert!(result.is_ok(), "{target}: {name} fails");
    }
}

#[test]
fn review_corpus_and_regressions() {
    let _parallel = support::parallel();
    run("review", common::review, 5);
}

#[test]
fn configmap_corpus_and_regressions() {
    let _parallel = support::parallel();
    run("configmap", common::configmap, 3);
}

#[test]
fn preview_docs_corpus_and_regressions() {
    let _parallel = support::parallel();
    run("preview_docs", common::preview_docs, 3);
}
