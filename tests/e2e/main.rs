//! The end-to-end tier (docs/testing.md): the tests that need more than the Rust toolchain
//! (a real kube-apiserver, vcsim, moto, kubectl, podman, root), built with the cargo feature
//! `e2e` as one test binary with a module per concern.

// tests/support/mod.rs wraps the modules that one tier alone uses in these: this binary
// includes the end-to-end tier's and leaves out the fast tier's.
macro_rules! fast_only {
    ($($item:item)*) => {};
}
macro_rules! e2e_only {
    ($($item:item)*) => {$($item)*};
}

#[path = "../support/mod.rs"]
mod support;

mod apiserver;
mod aws_credentials;
mod azure_profiles;
mod cluster_profiles;
mod ec2;
mod image;
mod image_multiarch;
mod importer_adapters;
mod manifests;
mod manifests_rbac;
mod nutanix_bounds;
mod nutanix_import;
mod nutanix_prism;
mod openstack_glance;
mod openstack_import;
mod openstack_proof;
mod openstack_stopped;
mod permissions;
mod proxy;
mod real_apiserver_admission;
mod real_apiserver_cluster_api;
mod real_apiserver_hive;
mod real_apiserver_importer;
mod real_apiserver_skew;
mod real_apiserver_status;
mod real_apiserver_touch;
mod real_apiserver_user_data;
mod real_node;
mod real_streams;
mod skew_keeper;
mod touch_outage;
mod vsphere_import;
mod vsphere_ownership;
mod vsphere_retention;
