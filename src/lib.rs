//! bootimage-webhook: keeps OpenShift MachineSets booting from the current RHCOS image.
//!
//! Three parts and their wiring:
//! - [`core`]: the pure decision, platforms, snapshot and cluster facts (no I/O);
//! - [`serve`]: the webhook over HTTPS, reading only the snapshot;
//! - [`cluster`]: watchers feeding the snapshot, and the toucher;
//! - [`app`], [`config`], [`keep`], [`offline`], [`preview`], [`status`]: the commands that
//!   wire them.

pub mod app;
pub mod cluster;
pub mod config;
pub mod core;
pub(crate) mod health;
pub mod import;
pub mod keep;
pub mod logging;
pub(crate) mod metrics;
pub(crate) mod offline;
pub mod preview;
pub(crate) mod process;
pub mod serve;
pub mod status;

#[cfg(test)]
mod layout;
