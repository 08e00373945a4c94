//! `bootimage-webhook skew keep`: flags to the keeper and its Lease, stopped by SIGTERM or
//! SIGINT (the Lease released on the way out).

use anyhow::Context;
use tokio::sync::watch;

use crate::cluster::lease::{LeaseCheck, lead};
use crate::cluster::skew_keeper::{Keeper, KeeperSettings};
use crate::config::SkewKeepArgs;
use crate::metrics::Metrics;

/// Runs the keeper until a signal.
pub async fn keep(args: SkewKeepArgs) -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let mut config = kube::Config::infer()
        .await
        .context("finding a kubeconfig (KUBECONFIG, ~/.kube/config, or in-cluster)")?;
    // The API server is in the cluster: never through the cluster-wide proxy.
    config.proxy_url = None;
    let client = kube::Client::try_from(config)?;
    let namespace = args
        .pod_namespace
        .clone()
        .unwrap_or_else(|| client.default_namespace().to_owned());
    let identity = args.pod_name.clone().unwrap_or_else(|| {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_owned())
            .unwrap_or_else(|_| format!("skew-record-keeper-{}", std::process::id()))
    });
    let take_over = args.take_over();
    tracing::info!(lease = %format_args!("{namespace}/{}", args.lease_name), %identity, interval = ?args.interval, ?take_over, "keeping the Manual skew record while holding the Lease");
    let (leader_tx, leader_rx) = watch::channel(false);
    let (stop_tx, stop_rx) = watch::channel(false);
    let keeper = Keeper::new(
        client.clone(),
        KeeperSettings {
            machine_api_namespace: args.machine_api_namespace.clone(),
            configmap_namespace: args.configmap_namespace.clone(),
            configmap_name: args.configmap_name.clone(),
            interval: args.interval,
            take_over,
        },
        LeaseCheck {
            api: kube::Api::namespaced(client.clone(), &namespace),
            name: args.lease_name.clone(),
            identity: identity.clone(),
        },
    );
    let leading = tokio::spawn(lead(
        client,
        args.lease_name.clone(),
        namespace,
        identity,
        leader_tx,
        Metrics::new(None),
        stop_rx.clone(),
    ));
    let keeping = tokio::spawn(keeper.run(leader_rx, stop_rx));
    let which = tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
    };
    tracing::info!("received {which}; releasing the Lease");
    let _ = stop_tx.send(true);
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), keeping).await;
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), leading).await;
    Ok(())
}
