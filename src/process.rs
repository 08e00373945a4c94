//! What the long-running commands (`serve`, `import`) share: the signals that stop them,
//! and their Kubernetes client.

/// SIGTERM and SIGINT, registered once so that a second one is seen too.
pub(crate) struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl Signals {
    pub(crate) fn new() -> anyhow::Result<Self> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Signals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
        })
    }

    pub(crate) async fn next(&mut self) -> &'static str {
        tokio::select! {
            _ = self.term.recv() => "SIGTERM",
            _ = self.int.recv() => "SIGINT",
        }
    }
}

/// The Kubernetes API client, never through the cluster-wide proxy: the API server is in
/// the cluster (kube reads `HTTPS_PROXY` for a kubeconfig's cluster, and would fail on it).
pub(crate) async fn kube_client() -> anyhow::Result<kube::Client> {
    let mut config = kube::Config::infer().await?;
    config.proxy_url = None;
    Ok(kube::Client::try_from(config)?)
}
