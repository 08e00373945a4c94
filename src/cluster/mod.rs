//! The cluster side: watchers that keep the snapshot ([`watch`]), the Lease-elected
//! toucher ([`touch`]) and its Lease ([`lease`]), what is learned in the background (EC2:
//! [`ec2`]; the user-data Secrets' stub Ignition: [`stubs`], upgraded by
//! [`stub_upgrade`]; vSphere templates, OpenStack images and Nutanix images, imported by
//! the Lease holder: [`vsphere`], [`openstack`], [`nutanix`], all on the frame of
//! [`importer`]), the cluster's TLS security profile ([`tls_profile`]), the opt-in keeper
//! of the Manual skew record ([`skew_keeper`]), and the one list of API calls the code
//! makes ([`apis`]).

pub mod apis;
pub(crate) mod aws_credentials;
pub(crate) mod aws_profile;
pub(crate) mod aws_query;
pub(crate) mod cause;
pub mod cluster_api;
pub(crate) mod ec2;
pub mod egress;
pub mod importer;
pub(crate) mod learned;
pub(crate) mod lease;
pub mod nutanix;
pub mod openstack;
pub mod skew_keeper;
pub(crate) mod stub_upgrade;
pub(crate) mod stubs;
pub mod tls_profile;
pub mod touch;
pub mod vsphere;
pub(crate) mod watch;
