//! The Lease that elects the one replica that touches MachineSets: held with
//! kube-lease-manager ([`lead`]), and checked on the API server before writes
//! ([`LeaseCheck`]).

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use tokio::sync::watch;

use crate::health::until;
use crate::metrics::SharedMetrics;

/// How often `lead` checks that the Lease still exists.
const LEASE_EXISTS_CHECK: Duration = Duration::from_secs(5);

/// Elect the toucher: hold the Lease with kube-lease-manager, publish leadership on
/// `leader` (false at once when it is lost), release it on stop.
pub async fn lead(
    client: kube::Client,
    lease: String,
    namespace: String,
    identity: String,
    leader: watch::Sender<bool>,
    metrics: SharedMetrics,
    mut stop: watch::Receiver<bool>,
) {
    let mut backoff = Duration::from_secs(1);
    loop {
        let built = kube_lease_manager::LeaseManagerBuilder::new(client.clone(), &lease)
            .with_namespace(&namespace)
            .with_identity(&identity)
            .build()
            .await;
        let manager = match built {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!(lease = %format_args!("{namespace}/{lease}"), error = %e, "cannot set up the Lease; retrying");
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => {}
                    _ = until(&mut stop, true) => return,
                }
                backoff = (backoff * 2).min(Duration::from_secs(30));
                continue;
            }
        };
        backoff = Duration::from_secs(1);
        let (mut held, task) = manager.watch().await;
        // kube-lease-manager never recreates a Lease deleted under it: it logs errors
        // forever and nobody leads again. Building a manager creates the Lease, so when it
        // is gone, start over.
        let leases: Api<Lease> = Api::namespaced(client.clone(), &namespace);
        let mut exists = tokio::time::interval(LEASE_EXISTS_CHECK);
        exists.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        exists.tick().await;
        loop {
            let now = *held.borrow_and_update();
            leader.send_replace(now);
            metrics.touch.leader.set(i64::from(now));
            tokio::select! {
                changed = held.changed() => if changed.is_err() { break },
                _ = exists.tick() => {
                    if let Ok(None) = leases.get_opt(&lease).await {
                        tracing::warn!(lease = %format_args!("{namespace}/{lease}"), "the Lease was deleted; setting it up again");
                        break;
                    }
                }
                _ = until(&mut stop, true) => {
                    leader.send_replace(false);
                    metrics.touch.leader.set(0);
                    // Dropping the receiver makes the manager release the Lease.
                    drop(held);
                    let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
                    return;
                }
            }
        }
        leader.send_replace(false);
        metrics.touch.leader.set(0);
        // The old manager ends (releasing what it holds) before a new one starts.
        drop(held);
        let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
        tracing::warn!("the Lease manager stopped; starting it again");
    }
}

/// The Lease as the API server has it. kube-lease-manager can go on reporting leadership
/// after the Lease is gone (it never recreates it), so each pass checks for itself.
pub struct LeaseCheck {
    pub api: Api<Lease>,
    pub name: String,
    pub identity: String,
}

impl LeaseCheck {
    /// Until when the API server says the Lease is ours (`None`: it is not).
    pub async fn held_until(&self) -> Result<Option<Timestamp>, kube::Error> {
        let Some(spec) = self.api.get_opt(&self.name).await?.and_then(|l| l.spec) else {
            return Ok(None);
        };
        if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return Ok(None);
        }
        let (Some(renewed), Some(secs)) = (spec.renew_time, spec.lease_duration_seconds) else {
            return Ok(None);
        };
        let duration = std::time::Duration::from_secs(u64::try_from(secs).unwrap_or(0));
        // A renewTime near the end of time must not panic us.
        let expires = renewed
            .0
            .checked_add(duration)
            .ok()
            .filter(|t| *t > Timestamp::now());
        // Trust a confirmation for a second at most: cheap, and a Lease taken away (or
        // deleted) stops the writes within that second.
        let recheck = Timestamp::now()
            .checked_add(std::time::Duration::from_secs(1))
            .ok();
        Ok(expires.map(|e| recheck.map_or(e, |r| e.min(r))))
    }
}
