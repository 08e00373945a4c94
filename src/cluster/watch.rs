//! The watchers (kube-runtime, with backoff) and the one task that rebuilds the snapshot
//! from what they hold and swaps it in atomically (behaviour §7). A malformed ConfigMap keeps
//! the last good boot images; readiness waits until every watcher has listed once.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Node, Secret};
use kube::api::Api;
use kube::core::{ApiResource, DynamicObject, PartialObjectMeta};
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, Lookup, Store};
use kube::runtime::watcher::{self, Event, watcher};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::{Notify, watch};

use crate::cluster::learned::LearnedCell;
use crate::cluster::{apis, stubs};
use crate::core::facts::{self, GateInputs};
use crate::core::published;
use crate::core::snapshot::{
    Arch, BootImages, ClusterFacts, Enrolled, Gate, Learned, Managed, SharedSnapshot, Snapshot,
    Stubs,
};
use crate::health::Health;
use crate::metrics::{Metrics, SharedMetrics};

pub const MASTER_POOL: &str = "master";
const CLUSTER: &str = "cluster";
/// The learner's first round, in [`Listed`].
const STUBS: &str = "user-data-stubs";
const VERSION: &str = "version";
const MASTER_LABELS: [&str; 2] = [
    "node-role.kubernetes.io/master",
    "node-role.kubernetes.io/control-plane",
];

#[derive(Debug, Clone)]
pub struct WatchSettings {
    pub configmap_namespace: String,
    pub configmap_name: String,
    pub machine_api_namespace: String,
    pub wait_for_upgrade_complete: bool,
    /// `--control-plane-machine-sets`.
    pub control_plane_machine_sets: bool,
    /// `--user-data-secrets`: the only Secrets read, each watched by name.
    pub user_data_secrets: Vec<String>,
    /// `--aws-marketplace`.
    pub aws_marketplace: bool,
    /// `--master-pool-gate`: the gate also opens on the master pool and its rendered
    /// MachineConfig (read), before the MCO stamps the ConfigMap.
    pub master_pool_gate: bool,
    /// `--imported-images-configmap`: the ConfigMap (namespace, name) the importer publishes
    /// what it proved into, read into the snapshot in place of importing here.
    pub imported_images: Option<(String, String)>,
}

fn by_name(name: &str) -> watcher::Config {
    watcher::Config::default().fields(&format!("metadata.name={name}"))
}

/// Which watchers have listed at least once.
#[derive(Default)]
struct Listed {
    pending: Mutex<BTreeMap<String, bool>>,
}

impl Listed {
    fn expect(&self, name: &str) {
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(name.to_owned(), false);
    }
    fn done(&self, name: &str) -> bool {
        let mut p = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        p.insert(name.to_owned(), true);
        p.values().all(|d| *d)
    }
}

struct Ctx {
    notify: Arc<Notify>,
    /// Also rung on every change after the first list (the toucher, for MachineSets).
    also: Option<Arc<Notify>>,
    sync: Arc<Listed>,
    health: Arc<Health>,
    metrics: SharedMetrics,
}

/// Drive one watcher into its store, waking the builder on every change. Errors are
/// counted, logged once per streak, and retried with kube-runtime's default backoff.
fn spawn_watch<K>(
    name: impl Into<String>,
    stream: impl Stream<Item = watcher::Result<Event<K>>> + Send + 'static,
    writer: reflector::store::Writer<K>,
    ctx: &Arc<Ctx>,
    absent_is_normal: bool,
) where
    K: Resource + Clone + Debug + Send + std::marker::Sync + 'static,
    <K as Resource>::DynamicType: Eq + Hash + Clone + Send + std::marker::Sync,
{
    let name: String = name.into();
    ctx.sync.expect(&name);
    let ctx = ctx.clone();
    tokio::spawn(async move {
        let mut events = std::pin::pin!(stream.default_backoff().reflect(writer));
        let mut failing = false;
        while let Some(ev) = events.next().await {
            match ev {
                Ok(Event::InitDone) => {
                    if failing {
                        tracing::info!(watcher = %name, "watch recovered");
                        failing = false;
                    }
                    if ctx.sync.done(&name) {
                        ctx.health.synced.store(true, Ordering::Release);
                    }
                    ctx.notify.notify_one();
                }
                Ok(Event::Apply(_) | Event::Delete(_)) => {
                    ctx.notify.notify_one();
                    if let Some(also) = &ctx.also {
                        also.notify_one();
                    }
                }
                Ok(Event::Init | Event::InitApply(_)) => {}
                Err(e) => {
                    let absent = matches!(&e, watcher::Error::InitialListFailed(kube::Error::Api(s)) if s.code == 404);
                    if absent && absent_is_normal {
                        // The resource does not exist on this cluster: that is an answer.
                        if !failing {
                            tracing::info!(
                                watcher = name,
                                "resource not served by this cluster; treated as absent"
                            );
                        }
                        failing = true;
                        if ctx.sync.done(&name) {
                            ctx.health.synced.store(true, Ordering::Release);
                        }
                        ctx.notify.notify_one();
                        continue;
                    }
                    ctx.metrics.watch.error(&name);
                    if failing {
                        tracing::debug!(watcher = %name, error = %e, "watch still failing");
                    } else {
                        tracing::warn!(watcher = %name, error = %e, "watch failed; retrying with backoff");
                        failing = true;
                    }
                }
            }
        }
    });
}

fn dynamic(
    ar: ApiResource,
) -> (
    Store<DynamicObject>,
    reflector::store::Writer<DynamicObject>,
) {
    let w = reflector::store::Writer::new(ar);
    (w.as_reader(), w)
}

fn dynamic_meta(
    ar: ApiResource,
) -> (
    Store<PartialObjectMeta<DynamicObject>>,
    reflector::store::Writer<PartialObjectMeta<DynamicObject>>,
) {
    let w = reflector::store::Writer::new(ar);
    (w.as_reader(), w)
}

fn typed<K>() -> (Store<K>, reflector::store::Writer<K>)
where
    K: Lookup<DynamicType = ()> + Clone + 'static,
{
    reflector::store()
}

/// What the builder reads.
pub struct Stores {
    configmap: Store<ConfigMap>,
    /// With `--master-pool-gate` only.
    master_pool: Option<MasterPool>,
    infrastructures: Store<DynamicObject>,
    clusterversions: Store<DynamicObject>,
    nodes: Vec<Store<PartialObjectMeta<Node>>>,
    machineconfigurations: Store<DynamicObject>,
    stubs: stubs::Learned,
    /// With `--imported-images-configmap` only.
    imported_images: Option<Store<ConfigMap>>,
}

fn named<K>(store: &Store<K>, name: &str) -> Option<Arc<K>>
where
    K: Lookup + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    store
        .state()
        .into_iter()
        .find(|o| o.name().as_deref() == Some(name))
}

/// The master pool and the rendered MachineConfigs' metadata (`--master-pool-gate`).
struct MasterPool {
    pools: Store<DynamicObject>,
    machineconfigs: Store<PartialObjectMeta<DynamicObject>>,
}

/// Keeps the last good boot images across a malformed ConfigMap, and reports each bad
/// version of it once.
#[derive(Default)]
pub struct Builder {
    last_good: Option<Arc<BootImages>>,
    reported: Option<String>,
    last_gate: Option<bool>,
    last_enrollment_error: Option<facts::EnrollmentError>,
    /// The last enrollment of (MachineSets, ControlPlaneMachineSets), kept while a newer
    /// spec waits for its status.
    last_selection: Option<(Enrolled, Enrolled)>,
    reported_stale: Option<facts::NotObserved>,
    /// The MachineSets' enrollment rule last logged.
    last_selection_rule: Option<Arc<str>>,
    /// The importer's ConfigMap: its resourceVersion last read, and how often it changed
    /// (part of what was learned's generation, so that the snapshot id moves with it).
    imported_version: Option<String>,
    imported_changes: u64,
}

impl Builder {
    pub fn build(
        &mut self,
        s: &Stores,
        settings: &WatchSettings,
        metrics: &Metrics,
        learned: Learned,
    ) -> Snapshot {
        if let Some(cm) = named(&s.configmap, &settings.configmap_name) {
            self.read_boot_images(&cm, settings, metrics);
        }
        let cv = named(&s.clusterversions, VERSION);
        let gate = self.gate(s, settings, cv.as_deref());
        let mcfg = named(&s.machineconfigurations, CLUSTER);
        let mcfg = mcfg.as_ref().map(|m| &m.data);
        let infra = named(&s.infrastructures, CLUSTER);
        let platform = infra.as_ref().and_then(|i| facts::platform(&i.data));
        let (enrollment, cpms_enrollment) = self.selection(platform.as_deref(), mcfg);
        let learned = match (&s.imported_images, &settings.imported_images) {
            (Some(store), Some((_, name))) => self.imported(named(store, name).as_deref(), learned),
            _ => learned,
        };
        Snapshot::new(
            self.last_good.clone(),
            ClusterFacts {
                platform,
                control_plane_arch: control_plane_arch(&s.nodes),
                multi_arch: cv.as_ref().is_some_and(|c| facts::multi_arch(&c.data)),
                gate,
                enrollment: enrollment.enrollment,
                enrollment_rule: enrollment.rule,
                control_plane_machine_sets: settings.control_plane_machine_sets,
                aws_marketplace: settings.aws_marketplace,
                cpms_enrollment: cpms_enrollment.enrollment,
                cpms_enrollment_rule: cpms_enrollment.rule,
                stubs: Stubs {
                    unchecked: false,
                    by_name: BTreeMap::clone(&s.stubs.load()),
                    granted: Some(settings.user_data_secrets.iter().cloned().collect()),
                },
                infrastructure_name: infra.as_ref().and_then(|i| {
                    let name = i.data.pointer("/status/infrastructureName")?.as_str()?;
                    (!name.is_empty()).then(|| name.to_owned())
                }),
                vsphere: infra
                    .as_ref()
                    .and_then(|i| crate::core::platforms::vsphere::infra(&i.data))
                    .map(Arc::new),
                learned,
                machine_configuration: mcfg.cloned().map(Arc::new),
            },
        )
    }

    /// What the importer published, over what this process learned itself.
    fn imported(&mut self, cm: Option<&ConfigMap>, learned: Learned) -> Learned {
        let version = cm.and_then(|c| c.metadata.resource_version.clone());
        if version != self.imported_version {
            self.imported_version = version;
            self.imported_changes += 1;
        }
        let data = cm.and_then(|c| c.data.clone()).unwrap_or_default();
        let mut read = published::read(&data, &learned);
        read.generation = learned.generation + self.imported_changes;
        read
    }

    /// A usable ConfigMap replaces the last good boot images; an unusable one is reported
    /// once per resourceVersion and changes nothing.
    fn read_boot_images(&mut self, cm: &ConfigMap, settings: &WatchSettings, metrics: &Metrics) {
        let data = cm.data.clone().unwrap_or_default();
        match BootImages::from_data(&data) {
            Ok(b) => {
                if self.reported.take().is_some() {
                    tracing::info!("coreos-bootimages is usable again");
                }
                let changed = self.last_good.as_ref().is_none_or(|g| g.digest != b.digest);
                if changed {
                    // A bad platform entry makes that platform alone skip: say so once.
                    for problem in b.problems() {
                        tracing::warn!(%problem, "coreos-bootimages: this platform's boot images stay where they are");
                    }
                }
                self.last_good = Some(Arc::new(b));
            }
            Err(e) => {
                let version = cm.metadata.resource_version.clone().unwrap_or_default();
                if self.reported.as_deref() == Some(&version) {
                    return;
                }
                metrics.watch.configmap_errors.inc();
                tracing::error!(
                    configmap = %format_args!("{}/{}", settings.configmap_namespace, settings.configmap_name),
                    resource_version = %version,
                    error = %e,
                    "{}",
                    if self.last_good.is_some() { "unusable ConfigMap; keeping the last good boot images" } else { "unusable ConfigMap; no boot images yet" }
                );
                self.reported = Some(version);
            }
        }
    }

    /// The upgrade gate (behaviour §4), logged when it opens or closes.
    fn gate(&mut self, s: &Stores, settings: &WatchSettings, cv: Option<&DynamicObject>) -> Gate {
        let pool = s
            .master_pool
            .as_ref()
            .and_then(|m| named(&m.pools, MASTER_POOL));
        let target = pool
            .as_ref()
            .and_then(|p| p.data.pointer("/spec/configuration/name"))
            .and_then(Value::as_str);
        let rendered = s
            .master_pool
            .as_ref()
            .zip(target)
            .and_then(|(m, t)| named(&m.machineconfigs, t));
        let rendered_release = rendered.as_ref().map(|mc| {
            mc.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(facts::RELEASE_IMAGE_VERSION_ANNOTATION))
                .map(String::as_str)
        });
        let last_good = self.last_good.as_deref();
        let gate = facts::gate(GateInputs {
            pool_rule: s.master_pool.is_some(),
            master_pool: pool.as_ref().map(|p| &p.data),
            rendered_release,
            release_version: last_good.map(|b| b.release_version.as_str()),
            stamp: last_good.and_then(|b| b.mco_release_image_version.as_deref()),
            cluster_version: cv.map(|c| &c.data),
            wait_for_upgrade_complete: settings.wait_for_upgrade_complete,
        });
        if self.last_gate != Some(gate.open) {
            if gate.open {
                tracing::info!(reason = %gate.reason, "gate open: boot images may move");
            } else {
                tracing::info!(reason = %gate.reason, "gate closed: boot images stay");
            }
            self.last_gate = Some(gate.open);
        }
        gate
    }

    /// The enrollment of MachineSets and ControlPlaneMachineSets and their rules
    /// ([`facts::enrollment`]): where the MCO's selection speaks, the one its status gives
    /// once it answers its spec, as the MCO waits for it (until then the last one; none
    /// before any). A stale status and an unusable selection are logged once.
    fn selection(&mut self, platform: Option<&str>, mcfg: Option<&Value>) -> (Enrolled, Enrolled) {
        let waits = facts::mco_may_manage(platform, Managed::MachineSets)
            || facts::mco_may_manage(platform, Managed::ControlPlaneMachineSets);
        match mcfg.filter(|_| waits).map(facts::observed) {
            Some(Err(stale)) if self.reported_stale.as_ref() != Some(&stale) => {
                tracing::info!(reason = %stale, "MachineConfiguration cluster: waiting for the MCO to answer its spec; keeping the last boot image selection");
                self.reported_stale = Some(stale);
            }
            Some(Err(_)) => {}
            _ => self.reported_stale = None,
        }
        let last = self.last_selection.take();
        let machine_sets = match facts::enrollment(
            platform,
            mcfg,
            Managed::MachineSets,
            last.as_ref().map(|l| &l.0),
        ) {
            Ok(e) => {
                self.last_enrollment_error = None;
                e
            }
            Err(e) => {
                if self.last_enrollment_error.as_ref() != Some(&e) {
                    tracing::error!(error = %e, "MachineConfiguration cluster: unusable boot image selection; managing no MachineSet");
                    self.last_enrollment_error = Some(e.clone());
                }
                Enrolled::unusable(&e)
            }
        };
        let control_plane = facts::enrollment(
            platform,
            mcfg,
            Managed::ControlPlaneMachineSets,
            last.as_ref().map(|l| &l.1),
        )
        .unwrap_or_else(|e| {
            tracing::debug!(error = %e, "MachineConfiguration cluster: unusable ControlPlaneMachineSet selection; managing none");
            Enrolled::unusable(&e)
        });
        if self.last_selection_rule.as_deref() != Some(&*machine_sets.rule) {
            tracing::info!(rule = %machine_sets.rule, "MachineSet enrollment");
            self.last_selection_rule = Some(machine_sets.rule.clone());
        }
        self.last_selection = Some((machine_sets.clone(), control_plane.clone()));
        (machine_sets, control_plane)
    }
}

fn control_plane_arch(nodes: &[Store<PartialObjectMeta<Node>>]) -> Option<Arch> {
    let arches: Vec<Option<String>> = nodes
        .iter()
        .flat_map(|n| n.state())
        .map(|n| {
            n.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("kubernetes.io/arch"))
                .cloned()
        })
        .collect();
    facts::control_plane_arch(arches.iter().map(Option::as_deref))
}

fn watch_dynamic(
    client: &Client,
    ar: ApiResource,
    config: watcher::Config,
) -> impl Stream<Item = watcher::Result<Event<DynamicObject>>> + Send + 'static {
    watcher(Api::<DynamicObject>::all_with(client.clone(), &ar), config)
}

fn watch_typed<K>(
    api: Api<K>,
    config: watcher::Config,
) -> impl Stream<Item = watcher::Result<Event<K>>> + Send + 'static
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    watcher(api, config)
}

/// The user-data Secrets' learner ([`stubs::Learner`]), fed by a metadata watch of each
/// granted Secret, and the watch of the MachineSets (and ControlPlaneMachineSets) that
/// wakes the toucher. Readiness waits for the learner's first round.
fn start_stubs(
    client: &Client,
    settings: &WatchSettings,
    ctx: &Arc<Ctx>,
    machinesets_changed: &Arc<Notify>,
) -> stubs::Learned {
    let wake = Arc::new(Notify::new());
    let own = |also: Option<&Arc<Notify>>| {
        Arc::new(Ctx {
            notify: wake.clone(),
            also: also.cloned(),
            sync: ctx.sync.clone(),
            health: ctx.health.clone(),
            metrics: ctx.metrics.clone(),
        })
    };
    let ns = &settings.machine_api_namespace;
    // One watch per granted name (the Role grants no other): Api<PartialObjectMeta<_>>
    // asks for metadata only, so the Secrets' data never comes with it.
    let mut secrets = Vec::new();
    for name in &settings.user_data_secrets {
        let (store, w) = typed::<PartialObjectMeta<Secret>>();
        let meta = Api::<PartialObjectMeta<Secret>>::namespaced(client.clone(), ns);
        spawn_watch(
            format!("secret-{name}"),
            watch_typed(meta, by_name(name)),
            w,
            &own(None),
            false,
        );
        secrets.push(store);
    }
    // (watcher name, what, whether the resource may be absent from the cluster)
    let mut kinds = vec![("machinesets", apis::MACHINESET, false)];
    if settings.control_plane_machine_sets {
        kinds.push((
            "controlplanemachinesets",
            apis::CONTROLPLANEMACHINESET,
            true,
        ));
    }
    for (name, call, absent_is_normal) in kinds {
        let ar = call.api_resource();
        let (_, w) = dynamic(ar.clone());
        let api = Api::namespaced_with(client.clone(), ns, &ar);
        spawn_watch(
            name,
            watcher(api, watcher::Config::default()),
            w,
            &own(Some(machinesets_changed)),
            absent_is_normal,
        );
    }
    let learned = stubs::Learned::default();
    let learner = stubs::Learner {
        api: Api::namespaced(client.clone(), ns),
        secrets,
        granted: settings.user_data_secrets.clone(),
        out: learned.clone(),
        wake,
        changed: ctx.notify.clone(),
    };
    let ctx = ctx.clone();
    ctx.sync.expect(STUBS);
    tokio::spawn(learner.run(move || {
        if ctx.sync.done(STUBS) {
            ctx.health.synced.store(true, Ordering::Release);
        }
        ctx.notify.notify_one();
    }));
    learned
}

/// What the watchers tell the rest of the cluster side.
pub struct Watching {
    /// Snapshot ids: a new one whenever something a decision reads has changed.
    pub ids: watch::Receiver<String>,
    /// Rung whenever a MachineSet (or ControlPlaneMachineSet) is added, changed or deleted.
    pub machinesets_changed: Arc<Notify>,
}

/// A dynamic watcher of one named cluster-scoped object.
fn watch_one(
    client: &Client,
    ctx: &Arc<Ctx>,
    watcher_name: &str,
    call: apis::Call,
    object: &str,
    absent_is_normal: bool,
) -> Store<DynamicObject> {
    let ar = call.api_resource();
    let (store, w) = dynamic(ar.clone());
    let stream = watch_dynamic(client, ar, by_name(object));
    spawn_watch(watcher_name, stream, w, ctx, absent_is_normal);
    store
}

/// `--master-pool-gate`: the master pool, and the metadata of the MachineConfigs (RBAC
/// cannot narrow to the rendered one, nor to metadata: the opt-in component's grant
/// allows reading whole MachineConfigs).
fn watch_master_pool(client: &Client, ctx: &Arc<Ctx>) -> MasterPool {
    // Metadata only: rendered MachineConfigs are large.
    let ar = apis::MACHINECONFIG.api_resource();
    let (machineconfigs, w) = dynamic_meta(ar.clone());
    let api = Api::<PartialObjectMeta<DynamicObject>>::all_with(client.clone(), &ar);
    spawn_watch(
        "machineconfigs",
        watch_typed(api, watcher::Config::default()),
        w,
        ctx,
        false,
    );
    let pools = watch_one(
        client,
        ctx,
        "machineconfigpool",
        apis::MACHINECONFIGPOOL,
        MASTER_POOL,
        false,
    );
    MasterPool {
        pools,
        machineconfigs,
    }
}

/// Start every watcher and the builder.
pub fn start(
    client: Client,
    settings: WatchSettings,
    snapshot: SharedSnapshot,
    health: Arc<Health>,
    metrics: SharedMetrics,
    learned: Arc<LearnedCell>,
) -> Watching {
    let ctx = Arc::new(Ctx {
        notify: Arc::new(Notify::new()),
        also: None,
        sync: Arc::new(Listed::default()),
        health,
        metrics,
    });
    let (configmap, w) = typed::<ConfigMap>();
    let api = Api::<ConfigMap>::namespaced(client.clone(), &settings.configmap_namespace);
    let stream = watch_typed(api, by_name(&settings.configmap_name));
    spawn_watch("configmap", stream, w, &ctx, false);

    let master_pool = settings
        .master_pool_gate
        .then(|| watch_master_pool(&client, &ctx));

    let mut nodes = Vec::new();
    for (label, name) in MASTER_LABELS
        .into_iter()
        .zip(["nodes-master", "nodes-control-plane"])
    {
        let (store, w) = typed::<PartialObjectMeta<Node>>();
        let api = Api::<PartialObjectMeta<Node>>::all(client.clone());
        let stream = watch_typed(api, watcher::Config::default().labels(label));
        spawn_watch(name, stream, w, &ctx, false);
        nodes.push(store);
    }

    let one = |name, call, object, absent_is_normal| {
        watch_one(&client, &ctx, name, call, object, absent_is_normal)
    };
    let infrastructures = one("infrastructure", apis::INFRASTRUCTURE, CLUSTER, false);
    let clusterversions = one("clusterversion", apis::CLUSTERVERSION, VERSION, false);
    let mcfgs = one(
        "machineconfiguration",
        apis::MACHINECONFIGURATION,
        CLUSTER,
        true,
    );
    let imported_images = settings.imported_images.as_ref().map(|(ns, name)| {
        let (store, w) = typed::<ConfigMap>();
        let api = Api::<ConfigMap>::namespaced(client.clone(), ns);
        spawn_watch(
            "imported-images",
            watch_typed(api, by_name(name)),
            w,
            &ctx,
            false,
        );
        store
    });
    let machinesets_changed = Arc::new(Notify::new());
    let stores = Stores {
        configmap,
        master_pool,
        infrastructures,
        clusterversions,
        nodes,
        machineconfigurations: mcfgs,
        stubs: start_stubs(&client, &settings, &ctx, &machinesets_changed),
        imported_images,
    };
    let (ids_tx, ids) = watch::channel(snapshot.load().id.clone());
    tokio::spawn(rebuild(ctx, stores, settings, snapshot, learned, ids_tx));
    Watching {
        ids,
        machinesets_changed,
    }
}

/// The builder's loop: rebuild on every change, swap the snapshot in, publish its id.
async fn rebuild(
    ctx: Arc<Ctx>,
    stores: Stores,
    settings: WatchSettings,
    snapshot: SharedSnapshot,
    learned: Arc<LearnedCell>,
    ids: watch::Sender<String>,
) {
    let mut builder = Builder::default();
    loop {
        tokio::select! {
            _ = ctx.notify.notified() => {}
            _ = learned.changed.notified() => {}
        }
        // Let a burst of events (a re-list) land before rebuilding.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let facts = Learned::clone(&learned.facts.load());
        let next = builder.build(&stores, &settings, &ctx.metrics, facts);
        let previous = snapshot.load().id.clone();
        ctx.metrics
            .snapshot
            .in_use(Some(&previous), &next.id, next.cluster.gate.open);
        if next.id != previous {
            log_new(&next);
        }
        let id = next.id.clone();
        snapshot.store(Arc::new(next));
        ids.send_if_modified(|cur| {
            let changed = *cur != id;
            *cur = id;
            changed
        });
    }
}

fn log_new(next: &Snapshot) {
    tracing::info!(
        snapshot = %next.id,
        stream = next.boot_images.as_ref().map(|b| b.stream_name.as_str()),
        release = next.boot_images.as_ref().map(|b| b.release_version.as_str()),
        platform = next.cluster.platform.as_deref(),
        control_plane_arch = next.cluster.control_plane_arch.map(Arch::rpm),
        multi_arch = next.cluster.multi_arch,
        gate_open = next.cluster.gate.open,
        "new snapshot"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A MachineConfiguration at `generation` whose status, observed at `observed`, selects
    /// MachineSets in `mode`.
    fn mc(generation: i64, observed: i64, mode: &str) -> Value {
        serde_json::json!({
            "metadata": {"name": "cluster", "generation": generation},
            "status": {"observedGeneration": observed, "managedBootImagesStatus": {"machineManagers": [
                {"resource": "machinesets", "apiGroup": "machine.openshift.io", "selection": {"mode": mode}}]}}
        })
    }

    fn words(s: &(Enrolled, Enrolled)) -> String {
        format!("{:?}", s.0.enrollment)
    }

    /// As the MCO: a selection is followed once the status answers the spec; a newer spec
    /// waiting for its status keeps the last one, and nothing is selected before any. On a
    /// platform the MCO does not manage, neither the selection nor its wait counts.
    #[test]
    fn the_selection_follows_only_a_status_that_answers_its_spec() {
        let mut b = Builder::default();
        let gcp = Some("GCP");
        assert_eq!(words(&b.selection(gcp, Some(&mc(2, 1, "All")))), "None");
        assert_eq!(words(&b.selection(gcp, Some(&mc(2, 2, "All")))), "All");
        assert_eq!(words(&b.selection(gcp, Some(&mc(3, 2, "None")))), "All");
        assert_eq!(words(&b.selection(gcp, Some(&mc(3, 3, "None")))), "None");
        assert_eq!(words(&b.selection(gcp, None)), "All");
        let mut b = Builder::default();
        let nutanix = Some("Nutanix");
        assert_eq!(words(&b.selection(nutanix, Some(&mc(2, 1, "All")))), "All");
        assert_eq!(words(&b.selection(nutanix, Some(&mc(3, 3, "None")))), "All");
        let (ms, _) = b.selection(nutanix, Some(&mc(3, 3, "None")));
        assert_eq!(
            &*ms.rule,
            "the MCO does not manage boot images on Nutanix; installing bootimage-webhook is the opt-in"
        );
    }
}
