//! Shared test helpers, one module per concern:
//!
//! - `alone`: the tests that need the machine to themselves, and the rest;
//! - `fixtures`: the repository's test data and what is derived from it;
//! - `https`: the HTTPS client (test CA), dev certificates, the admin-port GET;
//! - `servers`: the webhook served in-process on 127.0.0.1:0;
//! - `stream`: clients that keep sending reviews while something happens, and their tally;
//! - `volume`: Secret volumes as the kubelet lays them out;
//! - `binary`: the real binary, spawned the one way every test spawns it;
//! - `apiserver`: a real kube-apiserver and etcd (`scripts/test-apiserver`);
//! - `cluster`: that apiserver holding the shipped manifests, and replicas of the binary
//!   running as its ServiceAccount;
//! - `machinesets`: each platform's MachineSet, the stream's AMI, the image a MachineSet
//!   names, the decision on an UPDATE;
//! - `image`: the container image under test, built with podman;
//! - `report`: figures a passing test prints, kept for scripts/test to show;
//! - `evanphx`: the apiserver's own JSON Patch library, the end-to-end tier's oracle;
//! - `oracle`: the JSON Patch library every patch is applied with, chosen by the tier;
//! - `decision`: the decision's checks (every patch applied by the oracle, a second pass);
//! - `clouds`: the AWS, Azure and vSphere snapshots and the same checks on their patches.
//! - `render`: the shipped manifests rendered with kustomize, with opt-in components and
//!   more user-data Secrets granted as an administrator would;
//! - `rbac`: that RBAC applied over the shipped one on a test apiserver;
//! - `proxy`: a real forward proxy (tinyproxy) and what it forwarded;
//! - `vsphere`, `vcsim`: the vSphere tests' world (a vSphere cluster, vcsim, the OVA).
//!
//! The most used items are re-exported here (`support::fixture`, `support::Https`, ...).

#![allow(dead_code, unused_imports)]

pub mod alone;
pub mod apiserver;
pub mod binary;
pub mod clouds;
pub mod cluster;
pub mod decision;
pub mod evanphx;
pub mod fixtures;
pub mod https;
pub mod image;
pub mod machinesets;
pub mod moto;
pub mod oracle;
pub mod proxy;
pub mod rbac;
pub mod render;
pub mod report;
pub mod servers;
pub mod stream;
pub mod thief;
pub mod vcsim;
pub mod volume;
pub mod vsphere;

pub use alone::{alone, parallel};
pub use fixtures::*;
pub use https::*;
pub use machinesets::*;
pub use servers::*;
pub use stream::{ReviewStream, Tally};
pub use volume::*;
