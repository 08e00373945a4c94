//! bootimage-webhook: keeps OpenShift MachineSets booting from the current RHCOS image.
//!
//! `decision` is the pure core; `admission` turns review bytes into response bytes;
//! `server` and `tls` carry it over HTTPS; `snapshot` is what every decision reads.

pub mod admission;
pub mod apis;
pub mod app;
pub mod cluster;
pub mod config;
pub mod decision;
pub mod logging;
pub mod metrics;
pub mod platforms;
pub mod preview;
pub mod server;
pub mod snapshot;
pub mod tls;
pub mod touch;
pub mod watch;
