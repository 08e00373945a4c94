//! The cluster side: watchers that keep the snapshot ([`watch`]), the Lease-elected
//! toucher ([`touch`]), and the one list of API calls the code makes ([`apis`]).

pub mod apis;
pub mod touch;
pub mod watch;
