//! The `coreos-bootimages` ConfigMap (YAML or JSON) and the stream JSON inside it.
#![no_main]

#[path = "common.rs"]
mod common;

libfuzzer_sys::fuzz_target!(|data: &[u8]| common::configmap(data));
