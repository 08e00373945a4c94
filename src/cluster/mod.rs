//! The cluster side: watchers that keep the snapshot ([`watch`]), the Lease-elected
//! toucher ([`touch`]), EC2 asked in the background ([`ec2`]), and the one list of API
//! calls the code makes ([`apis`]).

pub mod apis;
pub mod ec2;
pub mod touch;
pub mod watch;
