//! What `/readyz` reports, which both sides set, and a helper to wait on a flag.

use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::watch;

/// What `/readyz` reports.
#[derive(Debug, Default)]
pub struct Health {
    /// Offline: at start. With watchers: once every one of them has listed.
    pub synced: AtomicBool,
    pub shutting_down: AtomicBool,
    /// Following a cluster: until its TLS security profile has been read once.
    pub tls_profile_pending: AtomicBool,
}

impl Health {
    pub fn ready(&self) -> Result<(), &'static str> {
        if self.shutting_down.load(Ordering::Acquire) {
            Err("shutting down")
        } else if !self.synced.load(Ordering::Acquire) {
            Err("caches not synced yet")
        } else if self.tls_profile_pending.load(Ordering::Acquire) {
            Err("the cluster's TLS security profile not read yet")
        } else {
            Ok(())
        }
    }
}

/// Wait until the flag is `want`; `false` if its sender is gone. (Returns no `Ref`, so
/// it can stand in a `select!` whose arms await.)
pub async fn until(flag: &mut watch::Receiver<bool>, want: bool) -> bool {
    flag.wait_for(|v| *v == want).await.is_ok()
}
