//! `admission::review` on raw request bytes, as the webhook receives them.
#![no_main]

#[path = "common.rs"]
mod common;

libfuzzer_sys::fuzz_target!(|data: &[u8]| common::review(data));
