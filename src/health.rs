//! Process state that both sides share: what `/readyz` reports, a wake-up for the
//! background, and stop/leadership flags.

use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::{Notify, watch};

/// What `/readyz` reports.
#[derive(Debug, Default)]
pub struct Health {
    pub tls_loaded: AtomicBool,
    /// Offline: at start. With watchers: once every one of them has listed.
    pub synced: AtomicBool,
    pub shutting_down: AtomicBool,
    /// Following a cluster: until its TLS security profile has been read once.
    pub tls_profile_pending: AtomicBool,
    /// Rung by the webhook when a decision waits on something the background learns (an
    /// AMI EC2 has not classified yet), so that it need not wait for the next resync.
    pub wanted: Notify,
}

impl Health {
    pub fn ready(&self) -> Result<(), &'static str> {
        if self.shutting_down.load(Ordering::Acquire) {
            Err("shutting down")
        } else if !self.tls_loaded.load(Ordering::Acquire) {
            Err("serving certificate not loaded")
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
