//! Shared test helpers, one module per concern, included once by each tier's test binary
//! (`tests/fast/main.rs`, `tests/e2e/main.rs`).
//!
//! Both tiers use:
//! - `alone`: the tests that need the machine to themselves, and the rest;
//! - `fixtures`: the repository's test data and what is derived from it;
//! - `clusters`: the cluster profiles, each platform's cluster on each release;
//! - `https`: the HTTPS client (test CA), dev certificates, the admin-port GET;
//! - `volume`: Secret volumes as the kubelet lays them out;
//! - `binary`: the real binary, spawned the one way every test spawns it;
//! - `machinesets`: each platform's MachineSet, the stream's AMI, the image a MachineSet
//!   names, the decision on an UPDATE;
//! - `evanphx`: the apiserver's own JSON Patch library, the end-to-end tier's oracle.
//!
//! The fast tier's alone:
//! - `servers`: the webhook served in-process on 127.0.0.1:0;
//! - `stream`: clients that keep sending reviews while something happens, and their tally;
//! - `oracle`: the JSON Patch library every patch is applied with, chosen by the tier;
//! - `decision`: the decision's checks (every patch applied by the oracle, a second pass);
//! - `clouds`: the AWS, Azure and vSphere snapshots and the same checks on their patches.
//!
//! The end-to-end tier's alone:
//! - `apiserver`: a real kube-apiserver and etcd (`scripts/test-apiserver`);
//! - `cluster`: that apiserver holding the shipped manifests, and replicas of the binary
//!   running as its ServiceAccount;
//! - `image`: the container image under test, built with podman;
//! - `report`: figures a passing test prints, kept for scripts/test to show;
//! - `render`: the shipped manifests rendered with kustomize, with opt-in components and
//!   more user-data Secrets granted as an administrator would;
//! - `rbac`: that RBAC applied over the shipped one on a test apiserver;
//! - `thief`: what a stolen token of the webhook's would like to write;
//! - `proxy`: a real forward proxy (tinyproxy) and what it forwarded;
//! - `moto`: moto's EC2 server;
//! - `vsphere`, `vcsim`: the vSphere tests' world (a vSphere cluster, vcsim, the OVA).
//! - `openstack`: the OpenStack tests' world (a real Keystone and Glance, a project per
//!   test, the qcow2.gz served over HTTP, forwarders for TLS and a slow upload).
//! - `prism_double`: a test double of Prism Central's v3 image API (no emulator exists).
//!
//! The most used items are re-exported here (`support::fixture`, `support::Https`, ...).

pub mod alone;
pub mod binary;
pub mod clusters;
pub mod evanphx;
pub mod fixtures;
pub mod https;
pub mod machinesets;
pub mod volume;

pub use alone::{alone, parallel};
pub use fixtures::*;
pub use https::*;
pub use machinesets::*;
pub use volume::*;

// Only the fast tier uses these: its main.rs's `fast_only!` keeps them, the end-to-end
// tier's leaves them out. The webhook served in-process, the clients that keep sending
// reviews, the decision's and the clouds' checks with their JSON Patch oracle.
fast_only! {
    pub mod clouds;
    pub mod decision;
    pub mod oracle;
    pub mod servers;
    pub mod stream;

    pub use servers::*;
    pub use stream::{ReviewStream, Tally};
}

// Only the end-to-end tier uses these, kept by its main.rs's `e2e_only!`: the real
// apiserver and what meets it, the image, moto, tinyproxy, vcsim.
e2e_only! {
    pub mod apiserver;
    pub mod cluster;
    pub mod image;
    pub mod moto;
    pub mod openstack;
    pub mod prism_double;
    pub mod proxy;
    pub mod rbac;
    pub mod render;
    pub mod report;
    pub mod thief;
    pub mod vcsim;
    pub mod vsphere;
}
