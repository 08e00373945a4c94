//! The cluster side: watchers that keep the snapshot ([`watch`]), the Lease-elected
//! toucher ([`touch`]), EC2 asked in the background ([`ec2`]), the user-data Secrets' stub
//! Ignition read in the background ([`stubs`]), the cluster's TLS security
//! profile ([`tls_profile`]), and the one list of API calls the code makes ([`apis`]).

pub mod apis;
pub mod aws_credentials;
pub mod ec2;
pub mod stub_upgrade;
pub mod stubs;
pub mod tls_profile;
pub mod touch;
pub mod watch;
