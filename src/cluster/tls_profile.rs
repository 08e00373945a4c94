//! Follows the cluster's TLS security profile (`apiservers.config.openshift.io/cluster`
//! `spec.tlsSecurityProfile`, behaviour §6) and has the webhook serve it from the next
//! handshake, without a restart. A profile rustls cannot serve keeps the last good
//! configuration and says why.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use futures::StreamExt;
use kube::Client;
use kube::api::Api;
use kube::core::DynamicObject;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event, watcher};
use tokio::sync::watch;

use crate::cluster::apis;
use crate::health::{Health, until};
use crate::serve::profile::Profile;
use crate::serve::tls::{Applied, Serving};

/// Apply one APIServer object (or its absence: the default), logging what changed and
/// what of a Custom list rustls cannot serve.
pub fn apply(serving: &Serving, object: Option<&serde_json::Value>) {
    let profile = match object.map(Profile::from_apiserver) {
        None => Profile::intermediate(),
        Some(Ok(p)) => p,
        Some(Err(e)) => {
            tracing::error!(error = %e, keeping = %serving.policy().summary(), "the cluster's TLS security profile cannot be served; keeping the last good configuration");
            return;
        }
    };
    match serving.apply(&profile) {
        Ok(Applied::Changed(p)) => {
            if !p.dropped_ciphers.is_empty() && profile.kind == "Custom" {
                tracing::warn!(dropped = ?p.dropped_ciphers, "cipher suites of the Custom TLS profile that rustls does not serve were left out");
            } else if !p.dropped_ciphers.is_empty() {
                tracing::debug!(profile = profile.kind, dropped = ?p.dropped_ciphers, "cipher suites of the profile that rustls does not serve");
            }
            if !p.dropped_groups.is_empty() {
                tracing::info!(dropped = ?p.dropped_groups, "TLS groups of the profile that rustls (ring) does not serve were left out");
            }
            if let Some(v) = &p.raised_from {
                tracing::info!(
                    min = %v,
                    "the profile allows {v}; rustls serves TLS 1.2 and up"
                );
            }
            tracing::info!(
                profile = profile.kind,
                "TLS configuration from the next handshake: {}",
                p.summary()
            );
        }
        Ok(Applied::Unchanged(p)) => {
            tracing::debug!(
                profile = profile.kind,
                "TLS profile unchanged: {}",
                p.summary()
            );
        }
        Err(e) => {
            tracing::error!(error = %e, keeping = %serving.policy().summary(), "the cluster's TLS security profile cannot be served; keeping the last good configuration");
        }
    }
}

/// Read the profile once (so that readiness waits for it), then watch it until `stop`.
pub async fn follow(
    client: Client,
    serving: Arc<Serving>,
    health: Arc<Health>,
    mut stop: watch::Receiver<bool>,
) {
    let api: Api<DynamicObject> = Api::all_with(client, &apis::APISERVER.api_resource());
    let name = apis::APISERVER.names[0];
    match api.get_opt(name).await {
        Ok(Some(o)) => apply(&serving, serde_json::to_value(&o).ok().as_ref()),
        Ok(None) => {
            tracing::info!(
                "no apiservers.config.openshift.io/{name}: serving the Intermediate TLS profile (or the flags)"
            );
        }
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the cluster's TLS security profile yet; serving the Intermediate profile (or the flags) until it can be read");
        }
    }
    health.tls_profile_pending.store(false, Ordering::Release);

    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut events = std::pin::pin!(watcher(api, config).default_backoff());
    let mut failing = false;
    // A relist without the object: it was deleted while the watch was down.
    let mut listed = false;
    loop {
        let ev = tokio::select! {
            ev = events.next() => ev,
            _ = until(&mut stop, true) => return,
        };
        let Some(ev) = ev else { return };
        match ev {
            Ok(Event::Apply(o) | Event::InitApply(o)) => {
                failing = false;
                listed = true;
                apply(&serving, serde_json::to_value(&o).ok().as_ref());
            }
            Ok(Event::Delete(_)) => apply(&serving, None),
            Ok(Event::Init) => {
                failing = false;
                listed = false;
            }
            Ok(Event::InitDone) if !listed => apply(&serving, None),
            Ok(Event::InitDone) => {}
            Err(e) if !failing => {
                failing = true;
                tracing::warn!(watcher = "apiservers", error = %e, "watch failed; retrying with backoff (the TLS configuration stays)");
            }
            Err(e) => tracing::debug!(watcher = "apiservers", error = %e, "watch still failing"),
        }
    }
}
