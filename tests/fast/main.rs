//! The fast tier (docs/testing.md): what plain `cargo test` runs with the Rust toolchain
//! alone, one test binary with a module per concern.

// tests/support/mod.rs wraps the modules that one tier alone uses in these: this binary
// includes the fast tier's and leaves out the end-to-end tier's.
macro_rules! fast_only {
    ($($item:item)*) => {$($item)*};
}
macro_rules! e2e_only {
    ($($item:item)*) => {};
}

#[path = "../support/mod.rs"]
mod support;

mod blocked_writes;
mod certs;
mod cli;
mod clouds;
mod clouds_nutanix;
mod clouds_openstack;
mod clouds_vsphere;
mod cluster_api;
mod cluster_profiles;
mod decision;
mod decision_cpms;
mod decision_reasons;
mod found_inputs;
mod fuzz_cases;
mod idle_eviction;
mod memory_budget;
mod plain_http;
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
