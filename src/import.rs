//! `import`: the importers in a process of their own, the Deployment `bootimage-importer`
//! with its own ServiceAccount, which reads the cloud credentials and writes no
//! MachineSet. It follows the cluster as the webhook does (the watchers that make a
//! snapshot), holds a Lease of its own so that one replica imports, and publishes what
//! the importers proved into the ConfigMap the webhook decides from. The importers' frames
//! are started here for `serve` too, which can still run them in its own process.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::Context;
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

use crate::cluster::importer::{Frame, publish};
use crate::cluster::learned::LearnedCell;
use crate::cluster::lease::lead;
use crate::config::{ImportArgs, ImporterArgs};
use crate::core::platforms::Platform;
use crate::core::snapshot::{self, SharedSnapshot, Snapshot};
use crate::health::Health;
use crate::metrics::{Metrics, SharedMetrics};
use crate::serve::{accept, server};

/// What every importer's frame shares on this process.
pub struct Shared {
    /// Where the MachineSets are.
    pub namespace: String,
    pub snapshot: SharedSnapshot,
    pub learned: Arc<LearnedCell>,
    /// Rung when a MachineSet waits for an import.
    pub wanted: Arc<Notify>,
    pub resync: Duration,
    /// The Lease holder identity.
    pub identity: String,
}

/// The platforms whose importer the flags turn on.
pub fn serves(args: &ImporterArgs) -> Vec<Platform> {
    [
        (args.vsphere.vsphere_import, Platform::VSphere),
        (args.openstack.openstack_import, Platform::OpenStack),
        (args.nutanix.nutanix_import, Platform::Nutanix),
    ]
    .into_iter()
    .filter_map(|(on, p)| on.then_some(p))
    .collect()
}

/// The importers the flags turn on, each on its frame: every replica looks, the Lease
/// holder (`leader`; `None`: none here) imports.
pub fn start_importers(
    args: &ImporterArgs,
    shared: &Shared,
    client: &kube::Client,
    leader: Option<watch::Receiver<bool>>,
    (changes, stop): (watch::Receiver<String>, watch::Receiver<bool>),
) -> Vec<JoinHandle<()>> {
    let mirror = args.artifact_base_url.as_ref();
    let frame = |retention| Frame {
        namespace: shared.namespace.clone(),
        snapshot: shared.snapshot.clone(),
        learned: shared.learned.clone(),
        wanted: shared.wanted.clone(),
        resync: shared.resync,
        leader: leader.clone(),
        identity: shared.identity.clone(),
        retention,
    };
    let on = || (client.clone(), changes.clone(), stop.clone());
    let mut tasks = Vec::new();
    if args.vsphere.vsphere_import {
        let settings = args.vsphere.settings(mirror);
        let frame = frame(settings.retention);
        match crate::cluster::vsphere::Background::new(client.clone(), settings) {
            Ok(plugin) => {
                let (client, changes, stop) = on();
                tasks.push(tokio::spawn(frame.run(plugin, client, changes, stop)));
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot set up HTTPS for vCenter: vSphere templates are never imported");
            }
        }
    }
    if args.openstack.openstack_import {
        let frame = frame(args.openstack.openstack_image_retention);
        let settings = args.openstack.settings(mirror);
        let plugin = crate::cluster::openstack::Background::new(client.clone(), settings);
        let (client, changes, stop) = on();
        tasks.push(tokio::spawn(frame.run(plugin, client, changes, stop)));
    }
    if args.nutanix.nutanix_import {
        let frame = frame(args.nutanix.nutanix_image_retention);
        let settings = args.nutanix.settings(mirror);
        let plugin = crate::cluster::nutanix::Background::new(client.clone(), settings);
        let (client, changes, stop) = on();
        tasks.push(tokio::spawn(frame.run(plugin, client, changes, stop)));
    }
    tasks
}

/// The Lease holder identity: the pod's name, else the host's.
pub fn identity(pod_name: Option<&str>) -> String {
    pod_name.map(str::to_owned).unwrap_or_else(|| {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_owned())
            .unwrap_or_else(|_| format!("bootimage-webhook-{}", std::process::id()))
    })
}

/// `bootimage-webhook import`.
pub async fn import(args: ImportArgs) -> anyhow::Result<()> {
    let mut signals = crate::process::Signals::new()?;
    let serves = serves(&args.importers);
    if serves.is_empty() {
        anyhow::bail!(
            "no importer is on: set --vsphere-import, --openstack-import or --nutanix-import"
        );
    }
    let client = crate::process::kube_client()
        .await
        .context("building the Kubernetes client (in-cluster service account or KUBECONFIG)")?;
    let snapshot = snapshot::shared(Snapshot::empty());
    let health = Arc::new(Health::default());
    let metrics = Metrics::new(Some(snapshot.clone()));
    let (stop_tx, stop) = watch::channel(false);
    let mut tasks = vec![admin(&args, &metrics, &health, stop.clone()).await?];
    let learned = Arc::new(LearnedCell::default());
    let watching = crate::cluster::watch::start(
        client.clone(),
        args.read.import_watch_settings(),
        snapshot.clone(),
        health.clone(),
        metrics.clone(),
        learned.clone(),
    );
    let namespace = args
        .pod_namespace
        .clone()
        .unwrap_or_else(|| client.default_namespace().to_owned());
    let shared = Shared {
        namespace: args.read.machine_api_namespace.clone(),
        snapshot: snapshot.clone(),
        learned,
        wanted: watching.machinesets_changed.clone(),
        resync: args.import_resync,
        identity: identity(args.pod_name.as_deref()),
    };
    tracing::info!(lease = %format_args!("{namespace}/{}", args.lease_name), identity = %shared.identity, ?serves, "importing while holding the Lease; publishing into ConfigMap {namespace}/{}", args.imported_images_configmap);
    let (leader_tx, leader) = watch::channel(false);
    tasks.push(tokio::spawn(lead(
        client.clone(),
        args.lease_name.clone(),
        namespace.clone(),
        shared.identity.clone(),
        leader_tx,
        metrics.clone(),
        stop.clone(),
    )));
    let on = (watching.ids.clone(), stop.clone());
    tasks.extend(start_importers(
        &args.importers,
        &shared,
        &client,
        Some(leader.clone()),
        on,
    ));
    tasks.push(tokio::spawn(
        publish::Publisher {
            api: kube::Api::namespaced(client, &namespace),
            name: args.imported_images_configmap.clone(),
            serves,
            snapshot,
        }
        .run(watching.ids.clone(), leader, stop),
    ));
    let which = signals.next().await;
    tracing::info!("received {which}; stopping (the Lease is released)");
    health.shutting_down.store(true, Ordering::Release);
    let _ = stop_tx.send(true);
    for task in tasks {
        let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
    }
    Ok(())
}

/// `/healthz`, `/readyz` and `/metrics` on the admin port, as `serve` has them.
async fn admin(
    args: &ImportArgs,
    metrics: &SharedMetrics,
    health: &Arc<Health>,
    stop: watch::Receiver<bool>,
) -> anyhow::Result<JoinHandle<()>> {
    let listener = accept::bind(args.admin_address).await?;
    tracing::info!(address = %listener.local_addr()?, "serving /healthz, /readyz, /metrics");
    let limits = accept::ConnLimits {
        handshake_timeout: Duration::from_secs(5),
        header_read_timeout: Duration::from_secs(5),
        idle_timeout: Duration::from_secs(120),
    };
    Ok(tokio::spawn(accept::serve(
        accept::Listening {
            listener,
            transport: accept::Transport::Plain,
            router: server::admin_router(metrics.clone(), health.clone()),
            budget: None,
        },
        limits,
        stop,
        Duration::from_secs(2),
    )))
}
