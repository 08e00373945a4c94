//! Wiring: turn the flags into running servers, and stop them in the right order.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::{Context, bail};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::cluster::lease::{LeaseCheck, lead};
use crate::cluster::touch::{TouchSettings, Toucher};
use crate::config::ServeArgs;
use crate::core::snapshot::{self, SharedSnapshot, Snapshot};
use crate::health::Health;
use crate::metrics::{Metrics, SharedMetrics};
use crate::process::{Signals, kube_client};
use crate::serve::accept::{self, ConnLimits};
use crate::serve::budget::Budget;
use crate::serve::profile::{Overrides, Profile};
use crate::serve::server::{self, AppState, WEBHOOK_PATH};
use crate::serve::tls::{DevCerts, MinVersion, Reloader, Serving};

const DEV_CERTS_DIR: &str = "certs";

/// Everything `start` needs, resolved from the flags.
#[derive(Debug, Clone)]
pub struct Settings {
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
    pub bind_address: SocketAddr,
    pub admin_address: SocketAddr,
    /// `--tls-min-version`, above the cluster's TLS profile (default: the profile's, or
    /// Intermediate's 1.2 offline).
    pub tls_min_version: Option<MinVersion>,
    /// `--tls-cipher-suites`, above the profile's list.
    pub tls_cipher_suites: Option<Vec<String>>,
    pub cert_reload_interval: Duration,
    pub limits: ConnLimits,
    pub body_timeout: Duration,
    /// `--min-body-rate`, bytes a second.
    pub min_body_rate: u64,
    /// `--max-body-bytes-in-flight`.
    pub max_body_bytes_in_flight: usize,
    pub drain_timeout: Duration,
}

pub struct Running {
    pub webhook_addr: SocketAddr,
    pub admin_addr: SocketAddr,
    pub health: Arc<Health>,
    pub metrics: SharedMetrics,
    pub snapshot: SharedSnapshot,
    /// Rung by the webhook for the background (EC2) when a decision waits on it.
    pub wanted: Arc<tokio::sync::Notify>,
    /// Rung by the webhook when a MachineSet waits for an import (a vSphere template, an
    /// OpenStack or Nutanix image).
    pub wanted_import: Arc<tokio::sync::Notify>,
    /// The TLS configuration new handshakes take; the cluster's profile changes it.
    pub tls: Arc<Serving>,
    stop_webhook: watch::Sender<bool>,
    stop_admin: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
    webhook: JoinHandle<()>,
}

/// The TLS configuration of the webhook port: the flags over the intermediate profile
/// until the cluster's profile is read.
fn serving(settings: &Settings, reloader: &Reloader) -> anyhow::Result<Arc<Serving>> {
    let overrides = Overrides {
        min_version: settings.tls_min_version,
        cipher_suites: settings.tls_cipher_suites.clone(),
    };
    let serving = Serving::new(reloader.resolver(), overrides, &Profile::intermediate())
        .context("--tls-min-version / --tls-cipher-suites")?;
    let policy = serving.policy();
    if !policy.dropped_ciphers.is_empty() && settings.tls_cipher_suites.is_some() {
        tracing::warn!(dropped = ?policy.dropped_ciphers, "cipher suites of --tls-cipher-suites that rustls does not serve were left out");
    }
    tracing::info!("TLS configuration: {}", policy.summary());
    Ok(Arc::new(serving))
}

/// Load the certificate, bind both ports and serve. `synced` says whether the snapshot is
/// already complete (offline) or the watchers will say so later.
pub async fn start(
    settings: Settings,
    snapshot: SharedSnapshot,
    synced: bool,
) -> anyhow::Result<Running> {
    let reloader = Reloader::load(settings.cert_file.clone(), settings.key_file.clone())
        .context("loading the serving certificate")?;
    let serving = serving(&settings, &reloader)?;
    let health = Arc::new(Health::default());
    health.synced.store(synced, Ordering::Release);
    let metrics = Metrics::new(Some(snapshot.clone()));
    let first = snapshot.load();
    metrics
        .snapshot
        .in_use(None, &first.id, first.cluster.gate.open);

    let webhook_listener = accept::bind(settings.bind_address).await?;
    let admin_listener = accept::bind(settings.admin_address).await?;
    let webhook_addr = webhook_listener.local_addr()?;
    let admin_addr = admin_listener.local_addr()?;

    let (stop_webhook, stop_webhook_rx) = watch::channel(false);
    let (stop_admin, stop_admin_rx) = watch::channel(false);
    let refusals: Arc<server::RefusalLog> = Arc::default();
    let wanted = Arc::new(tokio::sync::Notify::new());
    let wanted_import = Arc::new(tokio::sync::Notify::new());
    // Request bodies and blocked response writes, on the webhook's port.
    let budget = Budget::new(
        settings.max_body_bytes_in_flight,
        server::MAX_BODY,
        metrics.requests.body_bytes.clone(),
    );
    let state = AppState {
        snapshot: snapshot.clone(),
        metrics: metrics.clone(),
        health: health.clone(),
        wanted: wanted.clone(),
        wanted_import: wanted_import.clone(),
        body_timeout: settings.body_timeout,
        min_body_rate: settings.min_body_rate,
        refusals: refusals.clone(),
        budget: budget.clone(),
    };
    let webhook = tokio::spawn(accept::serve(
        accept::Listening {
            listener: webhook_listener,
            transport: accept::Transport::Tls(serving.clone(), refusals),
            router: server::webhook_router(state),
            budget: Some(budget),
        },
        settings.limits,
        stop_webhook_rx.clone(),
        settings.drain_timeout,
    ));
    let tasks = vec![
        tokio::spawn(accept::serve(
            accept::Listening {
                listener: admin_listener,
                transport: accept::Transport::Plain,
                router: server::admin_router(metrics.clone(), health.clone()),
                budget: None,
            },
            settings.limits,
            stop_admin_rx,
            Duration::from_secs(2),
        )),
        tokio::spawn(reloader.run(
            settings.cert_reload_interval,
            metrics.clone(),
            stop_webhook_rx,
        )),
    ];
    tracing::info!(address = %webhook_addr, path = WEBHOOK_PATH, "serving the webhook on https://{webhook_addr}{WEBHOOK_PATH}");
    tracing::info!(address = %admin_addr, "serving /healthz, /readyz, /metrics on http://{admin_addr}");
    Ok(Running {
        webhook_addr,
        admin_addr,
        health,
        metrics,
        snapshot,
        wanted,
        wanted_import,
        tls: serving,
        stop_webhook,
        stop_admin,
        tasks,
        webhook,
    })
}

impl Running {
    /// Readiness fails at once; requests are still served for `delay` (with
    /// `Connection: close`) while endpoints drop us; then in-flight requests finish and
    /// everything stops.
    pub async fn shutdown(self, delay: Duration) {
        self.health.shutting_down.store(true, Ordering::Release);
        tracing::info!(?delay, "shutting down: readiness now fails");
        tokio::time::sleep(delay).await;
        let _ = self.stop_webhook.send(true);
        let _ = self.webhook.await;
        let _ = self.stop_admin.send(true);
        for t in self.tasks {
            let _ = t.await;
        }
        tracing::info!("stopped");
    }
}

/// Use the dev certificates in `dir`, making them first if missing.
fn dev_certs(dir: &Path) -> anyhow::Result<(PathBuf, PathBuf)> {
    let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
    if !(cert.exists() && key.exists()) {
        DevCerts::generate(&["localhost".into(), "127.0.0.1".into(), "::1".into()])?.write(dir)?;
        tracing::info!(dir = %dir.display(), "wrote a dev CA and serving certificate");
    }
    Ok((cert, key))
}

fn resolve(args: &ServeArgs) -> anyhow::Result<Settings> {
    let (cert_file, key_file) = match (&args.tls_cert_file, &args.tls_private_key_file) {
        (Some(c), Some(k)) => (c.clone(), k.clone()),
        (None, None) if args.dev => dev_certs(Path::new(DEV_CERTS_DIR))?,
        _ => bail!("give both --tls-cert-file and --tls-private-key-file (or --dev)"),
    };
    let host = if args.dev {
        [127, 0, 0, 1]
    } else {
        [0, 0, 0, 0]
    };
    Ok(Settings {
        cert_file,
        key_file,
        bind_address: args.bind_address.unwrap_or((host, 9443).into()),
        admin_address: args.admin_address.unwrap_or((host, 8080).into()),
        tls_min_version: args.tls_min_version,
        tls_cipher_suites: args.tls_cipher_suites.clone(),
        cert_reload_interval: args.cert_reload_interval,
        limits: ConnLimits {
            handshake_timeout: args.body_timeout,
            header_read_timeout: args.header_read_timeout,
            idle_timeout: args.idle_timeout,
        },
        body_timeout: args.body_timeout,
        min_body_rate: args.min_body_rate,
        max_body_bytes_in_flight: args.max_body_bytes_in_flight,
        drain_timeout: args.drain_timeout,
    })
}

/// On SIGTERM the kubelet gives the grace period; on Ctrl-C a person waits.
const DEFAULT_SHUTDOWN_DELAY: Duration = Duration::from_secs(5);

/// The cluster side: watchers feeding the snapshot, what every replica follows in the
/// background, the importers the flags turn on, and the toucher on the Lease holder.
async fn start_cluster_side(
    args: &crate::config::ClusterArgs,
    running: &Running,
    stop: watch::Receiver<bool>,
) -> anyhow::Result<Vec<JoinHandle<()>>> {
    let client = kube_client()
        .await
        .context("building the Kubernetes client (in-cluster service account or KUBECONFIG)")?;
    let learned = Arc::new(crate::cluster::learned::LearnedCell::default());
    let mut settings = args.read.watch_settings();
    settings.imported_images = args.imported_images_configmap.clone().map(|name| {
        let namespace = args.pod_namespace.clone();
        (
            namespace.unwrap_or_else(|| client.default_namespace().to_owned()),
            name,
        )
    });
    let watching = crate::cluster::watch::start(
        client.clone(),
        settings,
        running.snapshot.clone(),
        running.health.clone(),
        running.metrics.clone(),
        learned.clone(),
    );
    let mut tasks = start_following(args, running, &client, learned.clone(), &watching, &stop);
    let (leader_tx, leader_rx) = watch::channel(false);
    let leader = (!args.no_touch).then(|| leader_rx.clone());
    let on = (watching.ids.clone(), stop.clone());
    tasks.extend(start_importers(
        args, running, &client, &learned, leader, on,
    ));
    if args.no_touch {
        tracing::info!("watching the cluster; not touching MachineSets (--no-touch)");
        return Ok(tasks);
    }
    tasks.extend(start_touching(
        args,
        running,
        client,
        watching,
        (leader_tx, leader_rx),
        stop,
    ));
    Ok(tasks)
}

/// What every replica follows, each for its own snapshot: the cluster's TLS profile (which
/// readiness waits for) and EC2's answers.
fn start_following(
    args: &crate::config::ClusterArgs,
    running: &Running,
    client: &kube::Client,
    learned: Arc<crate::cluster::learned::LearnedCell>,
    watching: &crate::cluster::watch::Watching,
    stop: &watch::Receiver<bool>,
) -> Vec<JoinHandle<()>> {
    running
        .health
        .tls_profile_pending
        .store(true, Ordering::Release);
    let profile = tokio::spawn(crate::cluster::tls_profile::follow(
        client.clone(),
        running.tls.clone(),
        running.health.clone(),
        stop.clone(),
    ));
    let ec2 = tokio::spawn(
        crate::cluster::ec2::Background {
            client: client.clone(),
            namespace: args.read.machine_api_namespace.clone(),
            snapshot: running.snapshot.clone(),
            learned,
            wanted: running.wanted.clone(),
            resync: args.touch_resync,
            machine_api: args.read.machine_api_secret(client),
        }
        .run(watching.ids.clone(), stop.clone()),
    );
    vec![ec2, profile]
}

/// The importers the flags turn on in this process (development, tests; the manifests run
/// them apart, as `import`), each on its frame: every replica looks, the Lease holder
/// (`leader`; `None`: none here) imports.
fn start_importers(
    args: &crate::config::ClusterArgs,
    running: &Running,
    client: &kube::Client,
    learned: &Arc<crate::cluster::learned::LearnedCell>,
    leader: Option<watch::Receiver<bool>>,
    on: (watch::Receiver<String>, watch::Receiver<bool>),
) -> Vec<JoinHandle<()>> {
    let shared = crate::import::Shared {
        namespace: args.read.machine_api_namespace.clone(),
        snapshot: running.snapshot.clone(),
        learned: learned.clone(),
        wanted: running.wanted_import.clone(),
        resync: args.touch_resync,
        identity: identity(args),
    };
    crate::import::start_importers(&args.importers, &shared, client, leader, on)
}

/// The Lease holder identity: the pod's name, else the host's.
fn identity(args: &crate::config::ClusterArgs) -> String {
    crate::import::identity(args.pod_name.as_deref())
}

/// The Lease election and the toucher, which writes only while holding the Lease.
fn start_touching(
    args: &crate::config::ClusterArgs,
    running: &Running,
    client: kube::Client,
    watching: crate::cluster::watch::Watching,
    (leader_tx, leader_rx): (watch::Sender<bool>, watch::Receiver<bool>),
    stop: watch::Receiver<bool>,
) -> Vec<JoinHandle<()>> {
    let namespace = args
        .pod_namespace
        .clone()
        .unwrap_or_else(|| client.default_namespace().to_owned());
    let identity = identity(args);
    tracing::info!(lease = %format_args!("{namespace}/{}", args.lease_name), %identity, "watching the cluster; touching MachineSets while holding the Lease");
    if args.no_admission_policy_check {
        tracing::warn!(
            "--no-admission-policy-check: touching without proving that the admission policy limits these writes"
        );
    }
    let toucher = Toucher::new(
        client.clone(),
        running.snapshot.clone(),
        TouchSettings {
            namespace: args.read.machine_api_namespace.clone(),
            resync: args.touch_resync,
            rate: args.touch_rate,
            settle: args.touch_settle,
            backoff: args.touch_backoff,
            control_plane_machine_sets: args.read.control_plane_machine_sets,
            upgrade_stub_ignition: args.upgrade_stub_ignition,
            admission_policy_check: !args.no_admission_policy_check,
        },
        running.metrics.clone(),
        identity.clone(),
        Some(LeaseCheck {
            api: kube::Api::namespaced(client.clone(), &namespace),
            name: args.lease_name.clone(),
            identity: identity.clone(),
        }),
        running.health.clone(),
    );
    vec![
        tokio::spawn(lead(
            client,
            args.lease_name.clone(),
            namespace,
            identity,
            leader_tx,
            running.metrics.clone(),
            stop.clone(),
        )),
        tokio::spawn(toucher.run(leader_rx, watching, stop)),
    ]
}

/// `bootimage-webhook serve`.
pub async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    // Before anything is announced: a Ctrl-C right after "serving" must be ours to handle.
    let mut signals = Signals::new()?;
    let settings = resolve(&args)?;
    let offline = args.offline.configmap_file.is_some() || args.dev;
    let snap = if offline {
        let snap = args.offline.offline(&args.cluster.read.grant).snapshot()?;
        let gate = snap.cluster.gate.clone();
        tracing::info!(
            stream = snap.boot_images.as_ref().map(|b| b.stream_name.as_str()),
            release = snap.boot_images.as_ref().map(|b| b.release_version.as_str()),
            snapshot = %snap.id,
            gate_open = gate.open,
            "offline snapshot loaded from {}; gate {}: {}",
            args.offline.configmap_file.as_deref().map_or("the embedded default ConfigMap".into(), |p| p.display().to_string()),
            if gate.open { "open" } else { "closed" },
            gate.reason
        );
        snap
    } else {
        Snapshot::empty()
    };
    let running = start(settings.clone(), snapshot::shared(snap), offline).await?;
    let (stop_tx, stop_rx) = watch::channel(false);
    let background = if offline {
        Vec::new()
    } else {
        start_cluster_side(&args.cluster, &running, stop_rx).await?
    };
    if args.dev {
        println!(
            "\nbootimage-webhook is up. Try it:\n  curl -sS --cacert {dir}/ca.crt -H 'Content-Type: application/json' \\\n    --data @examples/review-gcp-update.json https://{addr}{WEBHOOK_PATH}\n",
            dir = settings
                .cert_file
                .parent()
                .map_or(".".into(), |p| p.display().to_string()),
            addr = running.webhook_addr,
        );
    }
    let which = signals.next().await;
    tracing::info!("received {which}; a second signal exits at once");
    // Readiness fails at once; touching stops (and the Lease is released) while the
    // webhook keeps serving through the delay; then it drains.
    running.health.shutting_down.store(true, Ordering::Release);
    let _ = stop_tx.send(true);
    let release = async {
        for task in background {
            let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
        }
    };
    let delay = args.shutdown_delay.unwrap_or(if args.dev {
        Duration::ZERO
    } else {
        DEFAULT_SHUTDOWN_DELAY
    });
    tokio::select! {
        _ = async { tokio::join!(release, running.shutdown(delay)) } => Ok(()),
        again = signals.next() => {
            tracing::warn!("received {again} while shutting down: exiting now, without draining");
            bail!("stopped by a second {again} before in-flight requests drained")
        }
    }
}
