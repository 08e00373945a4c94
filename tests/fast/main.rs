//! The fast tier (docs/testing.md): what plain `cargo test` runs with the Rust toolchain
//! alone, one test binary with a module per concern.

#[path = "../support/mod.rs"]
mod support;

mod certs;
mod cli;
mod clouds;
mod clouds_vsphere;
mod decision;
mod decision_cpms;
mod decision_reasons;
mod found_inputs;
mod fuzz_cases;
mod idle_eviction;
mod memory_budget;
mod properties;
mod real_cluster;
mod response_bytes;
mod shutdown;
mod slow_clients;
mod soak;
mod standalone;
mod starvation;
mod streams;
mod tls_profile;
mod webhook;
