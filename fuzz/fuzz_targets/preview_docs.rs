//! `preview`'s document reader: YAML/JSON documents, Lists, MachineSets among others.
#![no_main]

#[path = "common.rs"]
mod common;

libfuzzer_sys::fuzz_target!(|data: &[u8]| common::preview_docs(data));
