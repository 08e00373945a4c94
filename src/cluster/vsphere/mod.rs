//! vSphere, in the background (never on the request path): every replica looks in vCenter
//! for the versioned template of the stream's OVA in each failure domain and publishes the
//! ones that are ready ([`VSphereLearned`]); the Lease holder imports the missing ones a
//! waiting MachineSet needs, one failure domain at a time, and deletes templates of ours
//! that nothing has named for `--vsphere-template-retention`.
//!
//! An import: download the OVA once (checksum and size checked), `CreateImportSpec`,
//! `ImportVApp`, the NFC upload of its disks, `HttpNfcLeaseComplete`, `MarkAsTemplate`. A VM
//! of that name that is not a template is what an interrupted import left: it is deleted
//! first, and an import that fails deletes what it created.

mod https;
mod ova;
mod tags;
mod vim;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ObjectReference, Secret};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams};
use kube::core::DynamicObject;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use tokio::sync::{Notify, watch};

use crate::cluster::apis;
use crate::cluster::ec2::LearnedCell;
use crate::core::decision::decide_object;
use crate::core::platforms::Target;
use crate::core::platforms::vsphere::{
    self, FailureDomain, VSphereInfra, VSphereLearned, VSphereTarget,
};
use crate::core::reason::Reason;
use crate::core::snapshot::{Arch, SharedSnapshot, Snapshot};
use crate::health::until;

use https::Https;
pub use https::HttpsError;
use ova::OvaError;
use vim::{Moref, Vim, VimError};

/// How often a lease is told an upload goes on (vCenter's lease timeout is five minutes).
const LEASE_PROGRESS: Duration = Duration::from_secs(60);
/// The longest wait before vCenter is asked again after trouble.
const MAX_BACKOFF: Duration = Duration::from_secs(600);

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("no vSphere credentials for {server}: {why}")]
    Credentials { server: String, why: String },
    #[error("vCenter {server}: {error}")]
    Vim { server: String, error: VimError },
    #[error(transparent)]
    Ova(#[from] OvaError),
    #[error("failure domain {failure_domain}: {what} {path} not found in vCenter")]
    NotFound {
        failure_domain: String,
        what: &'static str,
        path: String,
    },
    #[error("failure domain {0} names no network")]
    NoNetwork(String),
    #[error(
        "failure domain {failure_domain}: vCenter does not say whether the VM {name} is a template (inaccessible, or not readable with these credentials)"
    )]
    Unreadable {
        failure_domain: String,
        name: String,
    },
    #[error(
        "failure domain {failure_domain}: a VM {name}, not a template, was made while this replica leads: another import may still be running; it is left alone"
    )]
    Busy {
        failure_domain: String,
        name: String,
    },
    #[error(transparent)]
    Tag(#[from] tags::TagError),
}

/// The importer's settings (`--vsphere-*`).
#[derive(Debug, Clone)]
pub struct Settings {
    /// The Secret of vCenter credentials, `<server>.username` and `<server>.password`.
    pub credentials_namespace: String,
    pub credentials_name: String,
    pub ca_file: Option<PathBuf>,
    pub cache_dir: PathBuf,
    pub max_ova_bytes: u64,
    pub retention: Duration,
}

/// How the vCenters are reached: HTTPS, and the credentials Secret read through the
/// Kubernetes API.
pub struct Access {
    client: kube::Client,
    namespace: String,
    name: String,
    https: Https,
}

impl Access {
    pub fn new(
        client: kube::Client,
        secret: (&str, &str),
        ca_file: Option<&std::path::Path>,
    ) -> Result<Access, HttpsError> {
        Ok(Access {
            client,
            namespace: secret.0.to_owned(),
            name: secret.1.to_owned(),
            https: Https::new(ca_file)?,
        })
    }

    async fn login(&self, fd: &FailureDomain) -> Result<Vim, ImportError> {
        let (user, password) = self.credentials(&fd.server).await?;
        Vim::login(&self.https, &address(fd), &user, &password)
            .await
            .map_err(|error| on(fd, error))
    }

    /// Attaches the installer's cluster tag to the new template. Clusters the installer
    /// did not make have no such tag: the template is kept, untagged, with a warning.
    async fn tag(&self, fd: &FailureDomain, infra_id: &str, vm: &Moref) {
        let tagged = async {
            let (user, password) = self.credentials(&fd.server).await?;
            let tagging = tags::Tagging::login(&self.https, &address(fd), &user, &password).await?;
            let attached = tagging.attach_cluster_tag(infra_id, vm).await;
            tagging.logout().await;
            attached.map_err(ImportError::from)
        };
        if let Err(e) = tagged.await {
            tracing::warn!(error = %e, template = %vm.value, failure_domain = %fd.name, "the template is imported but not tagged: openshift-install destroy will not delete it");
        }
    }

    /// `<server>.username` and `<server>.password` of the credentials Secret, as the
    /// machine API reads them.
    async fn credentials(&self, server: &str) -> Result<(String, String), ImportError> {
        let secret = format!("Secret {}/{}", self.namespace, self.name);
        let missing = |why: String| ImportError::Credentials {
            server: server.to_owned(),
            why,
        };
        let api: Api<Secret> = Api::namespaced(self.client.clone(), &self.namespace);
        let found = api.get(&self.name).await;
        let data = found
            .map_err(|e| missing(format!("{secret}: {e}")))?
            .data
            .unwrap_or_default();
        let key = |suffix: &str| {
            let key = format!("{server}.{suffix}");
            data.get(&key)
                .map(|v| String::from_utf8_lossy(&v.0).into_owned())
                .ok_or_else(|| missing(format!("{secret} has no {key}")))
        };
        Ok((key("username")?, key("password")?))
    }
}

/// Which of the stream's templates are ready in vCenter, looked at without changing
/// anything (`status`); `None` when this is not a vSphere cluster with an OVA in its
/// stream.
pub async fn look(access: &Access, snap: &Snapshot) -> Option<VSphereLearned> {
    let (infra, targets) = on_vsphere(snap)?;
    let mut learned = VSphereLearned::default();
    for (target, fd) in each_template(&targets, &infra) {
        let name = vsphere::template_name(&infra.infra_id, &target.release, &fd.name);
        let ready = async {
            let vim = access.login(fd).await?;
            let place = Place::find(&vim, &infra, fd).await;
            let ready = match place {
                Ok(place) => is_ready(&vim, &place, fd, &name)
                    .await
                    .map(|f| matches!(f, Found::Template)),
                Err(e) => Err(e),
            };
            vim.logout().await;
            ready
        };
        match ready.await {
            Ok(true) => {
                learned.templates.insert((fd.name.clone(), name));
            }
            Ok(false) => {}
            Err(e) => {
                learned.unavailable.get_or_insert(e.to_string());
            }
        }
    }
    Some(learned)
}

/// What is at the template's place in vCenter.
enum Found {
    Template,
    Missing,
    /// A VM of that name that is not a template: an interrupted import's, or one running.
    NotTemplate(Moref),
}

async fn is_ready(
    vim: &Vim,
    place: &Place,
    fd: &FailureDomain,
    name: &str,
) -> Result<Found, ImportError> {
    let found = vim.find(&format!("{}/{name}", place.folder_path)).await;
    let Some(vm) = found.map_err(|e| on(fd, e))? else {
        return Ok(Found::Missing);
    };
    match vim.is_template(&vm).await.map_err(|e| on(fd, e))? {
        Some(true) => Ok(Found::Template),
        Some(false) => Ok(Found::NotTemplate(vm)),
        None => Err(ImportError::Unreadable {
            failure_domain: fd.name.clone(),
            name: name.to_owned(),
        }),
    }
}

pub struct Background {
    /// Where the MachineSets are.
    pub namespace: String,
    pub snapshot: SharedSnapshot,
    pub learned: Arc<LearnedCell>,
    /// Rung by the webhook when a MachineSet waits for a template.
    pub wanted: Arc<Notify>,
    pub resync: Duration,
    pub settings: Settings,
    /// Whether this replica holds the Lease (imports and deletes only then); `None` when
    /// nothing is elected (`--no-touch`).
    pub leader: Option<watch::Receiver<bool>>,
    /// The pod, for the Events' reporting instance.
    pub identity: String,
}

/// What the Lease holder lists each pass.
#[derive(Default)]
struct Listed {
    /// MachineSets and ControlPlaneMachineSets, which may wait for a template.
    sets: Vec<serde_json::Value>,
    /// The template (last path element) of each of those and of each Machine.
    named: BTreeSet<String>,
}

/// What a pass found.
struct Pass {
    ready: BTreeSet<(String, String)>,
    /// The first trouble met, for `TemplateNotImported` messages.
    trouble: Option<ImportError>,
}

struct State {
    access: Access,
    /// (server, template) of ours seen unused, since when.
    unused_since: BTreeMap<(String, String), Instant>,
    /// Events already sent, so a repeated failure is one Event, not one per pass.
    warned: BTreeSet<String>,
    recorder: Recorder,
    /// The trouble last logged: one line per kind of trouble, not one per retry.
    reported: Option<String>,
    backoff: Duration,
    published: Option<VSphereLearned>,
    /// No pass before this (trouble's backoff), whatever wakes the loop.
    next_try: Option<tokio::time::Instant>,
    /// Since when this replica holds the Lease (wall clock, as vCenter's dates).
    leading_since: Option<Timestamp>,
    /// VMs of our failed imports that could not be deleted then.
    failed_imports: BTreeSet<String>,
    /// The OVA (location and checksum) found bad, and why: not downloaded again until the
    /// stream names another.
    bad_ova: Option<(String, OvaError)>,
}

/// One failure domain's template, as a pass sees it.
struct Want<'a> {
    infra: &'a VSphereInfra,
    fd: &'a FailureDomain,
    target: &'a VSphereTarget,
    /// Every stream's OVA: their templates are all current.
    targets: &'a [VSphereTarget],
    name: String,
    /// The objects whose decision waits for it.
    waiting: Vec<serde_json::Value>,
    /// The MachineSets, ControlPlaneMachineSets and Machines, when this replica leads and
    /// could list them (it then imports and deletes).
    listed: Option<&'a Listed>,
}

impl Background {
    pub async fn run(
        self,
        client: kube::Client,
        mut changes: watch::Receiver<String>,
        mut stop: watch::Receiver<bool>,
    ) {
        let s = &self.settings;
        let secret = (
            s.credentials_namespace.as_str(),
            s.credentials_name.as_str(),
        );
        let access = match Access::new(client.clone(), secret, s.ca_file.as_deref()) {
            Ok(a) => a,
            Err(e) => {
                tracing::error!(error = %e, "cannot set up HTTPS for vCenter: vSphere templates are never imported");
                return;
            }
        };
        let reporter = Reporter {
            controller: "bootimage-webhook".into(),
            instance: Some(self.identity.clone()),
        };
        let mut state = State {
            access,
            unused_since: BTreeMap::new(),
            warned: BTreeSet::new(),
            recorder: Recorder::new(client, reporter),
            reported: None,
            backoff: Duration::from_secs(5),
            published: None,
            next_try: None,
            leading_since: None,
            failed_imports: BTreeSet::new(),
            bad_ova: None,
        };
        let mut leader = self.leader.clone();
        loop {
            let snap = self.snapshot.load_full();
            let leading = leader.as_ref().is_some_and(|l| *l.borrow());
            match (leading, state.leading_since) {
                (true, None) => state.leading_since = Some(Timestamp::now()),
                (false, Some(_)) => state.leading_since = None,
                _ => {}
            }
            let now = tokio::time::Instant::now();
            let mut wait = self.resync;
            match (on_vsphere(&snap), state.next_try) {
                // In trouble: wake-ups wait for the backoff.
                (Some(_), Some(t)) if now < t => wait = t - now,
                (Some((infra, targets)), _) => {
                    let pass = self
                        .pass(&mut state, &snap, &infra, &targets, leading)
                        .await;
                    state.next_try = None;
                    if let Some(retry) = self.report(&mut state, pass) {
                        wait = retry;
                        state.next_try = Some(tokio::time::Instant::now() + retry);
                    }
                }
                (None, _) => {}
            }
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                r = changes.changed() => if r.is_err() { return },
                _ = self.wanted.notified() => {}
                _ = leader_changed(&mut leader) => {}
                _ = until(&mut stop, true) => return,
            }
        }
    }

    /// Logs a new trouble once, publishes what changed; the wait before a retry when
    /// there was trouble.
    fn report(&self, state: &mut State, pass: Pass) -> Option<Duration> {
        let learned = VSphereLearned {
            templates: pass.ready,
            unavailable: pass.trouble.as_ref().map(ToString::to_string),
        };
        if state.published.as_ref() != Some(&learned) {
            self.learned.publish_vsphere(learned.clone());
            state.published = Some(learned);
        }
        let Some(why) = pass.trouble else {
            if state.reported.take().is_some() {
                tracing::info!("vCenter answers again: vSphere templates are checked and imported");
            }
            state.backoff = Duration::from_secs(5);
            return None;
        };
        let why = why.to_string();
        let retry = state.backoff;
        if state.reported.as_deref() != Some(&why) {
            tracing::warn!(error = %why, retry_in = ?retry, "cannot import the vSphere template; those MachineSets keep their template until it is imported");
            state.reported = Some(why);
        }
        state.backoff = (retry * 2).min(MAX_BACKOFF);
        Some(retry)
    }
}

/// The cluster's vSphere facts and each stream's OVA (one per release: a dual-stream
/// release has a template per stream), when this is a vSphere cluster whose streams have
/// one (vSphere is amd64 only).
fn on_vsphere(snap: &Snapshot) -> Option<(Arc<VSphereInfra>, Vec<VSphereTarget>)> {
    if snap.cluster.platform.as_deref() != Some(vsphere::NAME) {
        return None;
    }
    let infra = snap.cluster.vsphere.clone()?;
    let arch = snap.cluster.control_plane_arch.unwrap_or(Arch::Amd64);
    let boot_images = snap.boot_images.as_ref()?;
    let mut targets: Vec<VSphereTarget> = Vec::new();
    for doc in boot_images.docs() {
        if let Some(Ok(Target::VSphere(t))) =
            doc.target(arch, crate::core::platforms::Platform::VSphere)
            && !targets.iter().any(|have| have.release == t.release)
        {
            targets.push(t.clone());
        }
    }
    (!targets.is_empty()).then_some((infra, targets))
}

/// Each stream's template in each failure domain.
fn each_template<'a>(
    targets: &'a [VSphereTarget],
    infra: &'a VSphereInfra,
) -> Vec<(&'a VSphereTarget, &'a FailureDomain)> {
    let mut out = Vec::with_capacity(targets.len() * infra.failure_domains.len());
    for target in targets {
        out.extend(infra.failure_domains.iter().map(|fd| (target, fd)));
    }
    out
}

/// Resolves when leadership changes; never when nothing is elected.
async fn leader_changed(leader: &mut Option<watch::Receiver<bool>>) {
    if let Some(l) = leader
        && l.changed().await.is_ok()
    {
        return;
    }
    std::future::pending().await
}

impl Background {
    /// One look at every failure domain; the leader imports what a MachineSet waits for,
    /// then deletes what has been unused long enough.
    async fn pass(
        &self,
        state: &mut State,
        snap: &Snapshot,
        infra: &VSphereInfra,
        targets: &[VSphereTarget],
        leading: bool,
    ) -> Pass {
        let mut pass = Pass {
            ready: BTreeSet::new(),
            trouble: None,
        };
        let listed = match leading {
            true => self.list(&state.access.client).await,
            false => None,
        };
        for (target, fd) in each_template(targets, infra) {
            let name = vsphere::template_name(&infra.infra_id, &target.release, &fd.name);
            let want = Want {
                waiting: listed
                    .as_ref()
                    .map(|l| waiting_for(&l.sets, snap, &name))
                    .unwrap_or_default(),
                infra,
                fd,
                target,
                targets,
                name,
                listed: listed.as_ref(),
            };
            match self.failure_domain(state, &want).await {
                Ok(true) => {
                    pass.ready.insert((fd.name.clone(), want.name));
                }
                Ok(false) => {}
                Err(e) => {
                    warn(state, &want, &e).await;
                    pass.trouble.get_or_insert(e);
                }
            }
        }
        pass
    }

    /// The MachineSets and ControlPlaneMachineSets, and every template they and the
    /// Machines name; `None` when they cannot be listed (then nothing is imported or
    /// deleted this pass).
    async fn list(&self, client: &kube::Client) -> Option<Listed> {
        let mut listed = Listed::default();
        for call in [
            apis::MACHINESET,
            apis::CONTROLPLANEMACHINESET,
            apis::VSPHERE_MACHINE,
        ] {
            let api: Api<DynamicObject> =
                Api::namespaced_with(client.clone(), &self.namespace, &call.api_resource());
            let items = match api.list(&ListParams::default()).await {
                Ok(list) => list.items,
                Err(kube::Error::Api(s)) if s.code == 404 && call.kind != apis::MACHINESET.kind => {
                    Vec::new()
                }
                Err(e) => {
                    tracing::warn!(error = %e, kind = call.kind, "cannot list them to find which vSphere templates are needed");
                    return None;
                }
            };
            for o in items.iter().filter_map(|o| serde_json::to_value(o).ok()) {
                listed.named.extend(template_of(&o).map(str::to_owned));
                if call.kind != apis::VSPHERE_MACHINE.kind {
                    listed.sets.push(o);
                }
            }
        }
        Some(listed)
    }

    /// Whether the template is ready in the failure domain, importing it when this
    /// replica leads and a MachineSet waits for it.
    async fn failure_domain(
        &self,
        state: &mut State,
        want: &Want<'_>,
    ) -> Result<bool, ImportError> {
        let (fd, name) = (want.fd, want.name.as_str());
        let vim = state.access.login(fd).await?;
        let result = async {
            let place = Place::find(&vim, want.infra, fd).await?;
            let found = is_ready(&vim, &place, fd, name).await?;
            let import = !want.waiting.is_empty() && want.listed.is_some();
            let ready = match found {
                Found::Template => true,
                Found::Missing if import => {
                    self.import(state, &vim, &place, want).await?;
                    true
                }
                Found::NotTemplate(vm) if import => {
                    leftover(state, &vim, fd, name, &vm).await?;
                    self.import(state, &vim, &place, want).await?;
                    true
                }
                Found::Missing | Found::NotTemplate(_) => false,
            };
            if let Some(listed) = want.listed {
                self.retire(state, &vim, &place, want, listed).await;
            }
            Ok(ready)
        }
        .await;
        vim.logout().await;
        result
    }

    /// The import itself; what it created is deleted when it fails.
    async fn import(
        &self,
        state: &mut State,
        vim: &Vim,
        place: &Place,
        want: &Want<'_>,
    ) -> Result<(), ImportError> {
        let (fd, name, target) = (want.fd, want.name.as_str(), want.target);
        let started = Instant::now();
        tracing::info!(template = name, failure_domain = %fd.name, url = %target.location, host = place.host.as_ref().map(|h| h.value.as_str()), "importing the RHCOS OVA");
        let s = &self.settings;
        let key = format!("{} {}", target.location, target.sha256);
        if let Some((bad, why)) = &state.bad_ova
            && *bad == key
        {
            return Err(why.clone().into());
        }
        let fetched = ova::fetch(&state.access.https, &s.cache_dir, target, s.max_ova_bytes).await;
        let path = match fetched {
            Err(e) if e.is_bad_ova() => {
                state.bad_ova = Some((key, e.clone()));
                return Err(e.into());
            }
            other => other?,
        };
        let ova = tokio::task::spawn_blocking(move || ova::open(&path))
            .await
            .map_err(|e| OvaError::Read {
                path: String::new(),
                why: e.to_string(),
            })??;
        let networks: Vec<(String, Moref)> = ova::networks(&ova.descriptor)
            .into_iter()
            .map(|n| (n, place.network.clone()))
            .collect();
        let spec = vim
            .create_import_spec(
                &ova.descriptor,
                name,
                &place.pool,
                &place.datastore,
                &networks,
            )
            .await
            .map_err(|e| on(fd, e))?;
        check_files(&spec, &ova)?;
        let lease = vim
            .import_vapp(&place.pool, &spec, &place.folder, place.host.as_ref())
            .await
            .map_err(|e| on(fd, e))?;
        let mut created = None;
        let mut uploaded = 0;
        let result = async {
            let info = vim.lease_ready(&lease).await.map_err(|e| on(fd, e))?;
            created = Some(info.entity.clone());
            uploaded = upload_all(vim, &lease, &info, &spec, &ova).await?;
            vim.lease_complete(&lease).await.map_err(|e| on(fd, e))?;
            let marked = vim.mark_as_template(&info.entity).await;
            marked.map_err(|e| on(fd, e))
        }
        .await;
        if let (Ok(()), Some(vm)) = (&result, &created) {
            state.access.tag(fd, &want.infra.infra_id, vm).await;
        }
        if let Err(e) = result {
            let _ = vim.lease_abort(&lease).await;
            if let Some(vm) = created {
                match vim.destroy(&vm).await {
                    Ok(()) => {
                        tracing::info!(template = name, failure_domain = %fd.name, "deleted the VM of a failed import")
                    }
                    Err(d) => {
                        tracing::warn!(template = name, error = %d, "cannot delete the VM of a failed import; the next import deletes it");
                        state.failed_imports.insert(vm.value.clone());
                    }
                }
            }
            return Err(e);
        }
        tracing::info!(template = name, failure_domain = %fd.name, seconds = started.elapsed().as_secs_f64(), bytes = uploaded, "imported the RHCOS OVA as a template");
        Ok(())
    }

    /// Deletes the templates of ours in the folder that no MachineSet or
    /// ControlPlaneMachineSet names and that have been unused for the retention.
    async fn retire(
        &self,
        state: &mut State,
        vim: &Vim,
        place: &Place,
        want: &Want<'_>,
        listed: &Listed,
    ) {
        let fd = want.fd;
        let mut named = listed.named.clone();
        // Every failure domain's current template stays, wherever the folders are shared.
        for target in want.targets {
            named.extend(
                want.infra.failure_domains.iter().map(|f| {
                    vsphere::template_name(&want.infra.infra_id, &target.release, &f.name)
                }),
            );
        }
        let Ok(vms) = vim.folder_vms(&place.folder).await else {
            return;
        };
        for (vm, name) in vms {
            let key = (fd.server.clone(), name.clone());
            if named.contains(&name) || !vsphere::is_imported_name(&name, &want.infra.infra_id, fd)
            {
                state.unused_since.remove(&key);
                continue;
            }
            let since = *state
                .unused_since
                .entry(key.clone())
                .or_insert_with(Instant::now);
            if since.elapsed() < self.settings.retention {
                continue;
            }
            // Only a template, and only one vCenter says is one.
            if !matches!(vim.is_template(&vm).await, Ok(Some(true))) {
                continue;
            }
            match vim.destroy(&vm).await {
                Ok(()) => {
                    tracing::info!(template = %name, failure_domain = %fd.name, "deleted a template of ours that nothing has named for the retention");
                    state.unused_since.remove(&key);
                }
                Err(e) => {
                    tracing::warn!(template = %name, error = %e, "cannot delete an unused template of ours")
                }
            }
        }
    }
}

/// A Warning Event on each object waiting for the template, once per trouble, when the
/// OVA itself is wrong (a bad checksum, too large, not an OVA).
async fn warn(state: &mut State, want: &Want<'_>, e: &ImportError) {
    if !matches!(e, ImportError::Ova(o) if o.is_bad_ova()) {
        return;
    }
    let note = format!("template {} cannot be imported: {e}", want.name);
    for ms in &want.waiting {
        let field = |p: &str| {
            ms.pointer(p)
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned)
        };
        let reference = ObjectReference {
            api_version: field("/apiVersion"),
            kind: field("/kind"),
            name: field("/metadata/name"),
            namespace: field("/metadata/namespace"),
            uid: field("/metadata/uid"),
            ..Default::default()
        };
        let key = format!("{:?}/{:?}: {note}", reference.kind, reference.name);
        if !state.warned.insert(key) {
            continue;
        }
        let event = Event {
            type_: EventType::Warning,
            reason: "TemplateNotImported".into(),
            note: Some(note.chars().take(1000).collect()),
            action: "ImportTemplate".into(),
            secondary: None,
        };
        if let Err(err) = state.recorder.publish(&event, &reference).await {
            tracing::warn!(error = %err, "cannot record the Event");
        }
    }
}

/// Where a failure domain's templates go, found in vCenter.
struct Place {
    folder_path: String,
    folder: Moref,
    pool: Moref,
    datastore: Moref,
    network: Moref,
    /// A connected host of the compute cluster that sees the datastore (as the MCO picks
    /// one: a cluster without DRS needs it); `None` leaves the choice to vCenter.
    host: Option<Moref>,
}

impl Place {
    async fn find(
        vim: &Vim,
        infra: &VSphereInfra,
        fd: &FailureDomain,
    ) -> Result<Place, ImportError> {
        let dc = fd.datacenter.trim_matches('/');
        let folder_path = match fd.folder.trim_end_matches('/') {
            "" => format!("/{dc}/vm/{}", infra.infra_id),
            f => f.to_owned(),
        };
        let pool_path = match fd.resource_pool.as_str() {
            "" => format!("{}/Resources", fd.compute_cluster.trim_end_matches('/')),
            p => p.to_owned(),
        };
        let network = fd
            .networks
            .first()
            .ok_or_else(|| ImportError::NoNetwork(fd.name.clone()))?;
        let network_path = match network.starts_with('/') {
            true => network.clone(),
            false => format!("/{dc}/network/{network}"),
        };
        let lookup = |what: &'static str, path: String| async move {
            match vim.find(&path).await {
                Ok(Some(m)) => Ok(m),
                Ok(None) => Err(ImportError::NotFound {
                    failure_domain: fd.name.clone(),
                    what,
                    path,
                }),
                Err(e) => Err(on(fd, e)),
            }
        };
        let datastore = lookup("datastore", fd.datastore.clone()).await?;
        let host = match vim.find(&fd.compute_cluster).await {
            Ok(Some(cluster)) => host_seeing(vim, &cluster, &datastore)
                .await
                .map_err(|e| on(fd, e))?,
            Ok(None) | Err(_) => None,
        };
        Ok(Place {
            host,
            folder: lookup("folder", folder_path.clone()).await?,
            pool: lookup("resource pool", pool_path).await?,
            datastore,
            network: lookup("network", network_path).await?,
            folder_path,
        })
    }
}

/// Every file the import spec names is in the OVA, and there is at least one: a template
/// without its disk must never be made.
fn check_files(spec: &vim::ImportSpec, ova: &ova::Ova) -> Result<(), OvaError> {
    let bad = |why: String| OvaError::Read {
        path: ova.path.display().to_string(),
        why,
    };
    if spec.files.is_empty() {
        return Err(bad(
            "vCenter's import spec names no file to upload from it".into()
        ));
    }
    match spec.files.iter().find(|f| !ova.files.contains_key(&f.path)) {
        Some(f) => Err(bad(format!(
            "its descriptor names {}, which is not in it",
            f.path
        ))),
        None => Ok(()),
    }
}

/// Deletes the VM of the template's name that is not a template when this replica may: it
/// was made before this replica began to lead (an interrupted import of an earlier
/// holder), or by an import of ours whose cleanup failed. Otherwise another import may
/// still be writing it: nothing is deleted, and the pass reports it.
async fn leftover(
    state: &mut State,
    vim: &Vim,
    fd: &FailureDomain,
    name: &str,
    vm: &Moref,
) -> Result<(), ImportError> {
    let created = vim.created(vm).await.map_err(|e| on(fd, e))?;
    let before_us = matches!((created, state.leading_since), (Some(c), Some(l)) if c < l);
    if !before_us && !state.failed_imports.contains(&vm.value) {
        return Err(ImportError::Busy {
            failure_domain: fd.name.clone(),
            name: name.to_owned(),
        });
    }
    tracing::info!(template = name, failure_domain = %fd.name, "deleting a VM an interrupted import left");
    vim.destroy(vm).await.map_err(|e| on(fd, e))?;
    state.failed_imports.remove(&vm.value);
    Ok(())
}

/// Sends each file of the import spec to its lease device, telling the lease it is in use
/// while a long upload goes on.
async fn upload_all(
    vim: &Vim,
    lease: &Moref,
    info: &vim::LeaseInfo,
    spec: &vim::ImportSpec,
    ova: &ova::Ova,
) -> Result<u64, ImportError> {
    let unreadable = |why: String| OvaError::Read {
        path: ova.path.display().to_string(),
        why,
    };
    let total: u64 = spec
        .files
        .iter()
        .filter_map(|f| ova.files.get(&f.path))
        .map(|f| f.1)
        .sum();
    let mut sent: u64 = 0;
    for item in &spec.files {
        let device = info.devices.iter().find(|(key, _)| *key == item.device_id);
        let Some((_, url)) = device else {
            return Err(ImportError::Vim {
                server: vim.server().to_owned(),
                error: VimError::Answer {
                    method: "HttpNfcLease".into(),
                    why: format!(
                        "no device for {} ({}) among {:?}",
                        item.path,
                        item.device_id,
                        info.devices.iter().map(|d| &d.0).collect::<Vec<_>>()
                    ),
                },
            });
        };
        let (offset, size) = ova.files.get(&item.path).copied().ok_or_else(|| {
            unreadable(format!(
                "its descriptor names {}, which is not in it",
                item.path
            ))
        })?;
        let body = ova::body(ova, offset, size)
            .await
            .map_err(|e| unreadable(e.to_string()))?;
        let upload = vim.upload(url, item, body, size);
        tokio::pin!(upload);
        let mut progress = tokio::time::interval(LEASE_PROGRESS);
        progress.tick().await;
        let done = loop {
            tokio::select! {
                done = &mut upload => break done,
                _ = progress.tick() => {
                    let percent = (sent * 100 / total.max(1)).min(99) as u8;
                    let _ = vim.lease_progress(lease, percent).await;
                }
            }
        };
        done.map_err(|error| ImportError::Vim {
            server: vim.server().to_owned(),
            error,
        })?;
        sent += size;
    }
    Ok(sent)
}

/// The first connected host of `cluster` that mounts `datastore`.
async fn host_seeing(
    vim: &Vim,
    cluster: &Moref,
    datastore: &Moref,
) -> Result<Option<Moref>, VimError> {
    for host in vim.morefs(cluster, "host").await? {
        let connected = vim
            .property(&host, "runtime.connectionState", |v| {
                v.and_then(|v| v.text()) == Some("connected")
            })
            .await?;
        let maintenance = vim
            .property(&host, "runtime.inMaintenanceMode", |v| {
                v.and_then(|v| v.text()) == Some("true")
            })
            .await?;
        if connected && !maintenance && vim.morefs(&host, "datastore").await?.contains(datastore) {
            return Ok(Some(host));
        }
    }
    Ok(None)
}

fn on(fd: &FailureDomain, error: VimError) -> ImportError {
    ImportError::Vim {
        server: address(fd),
        error,
    }
}

/// `host[:port]` of the failure domain's vCenter (`vcenters[].port` when not 443).
fn address(fd: &FailureDomain) -> String {
    let host = match fd.server.contains(':') {
        true => format!("[{}]", fd.server),
        false => fd.server.clone(),
    };
    match fd.port {
        Some(port) if port != 443 => format!("{host}:{port}"),
        _ => host,
    }
}

/// The objects whose decision waits for the template `name`.
fn waiting_for(all: &[serde_json::Value], snap: &Snapshot, name: &str) -> Vec<serde_json::Value> {
    all.iter()
        .filter(|ms| {
            let d = decide_object(ms, snap);
            d.reason == Reason::TemplateNotImported && d.target.as_deref() == Some(name)
        })
        .cloned()
        .collect()
}

/// The template a vSphere MachineSet, ControlPlaneMachineSet or Machine names (its last
/// path element).
fn template_of(obj: &serde_json::Value) -> Option<&str> {
    let value = obj
        .pointer("/spec/template/spec/providerSpec/value")
        .or_else(|| obj.pointer("/spec/providerSpec/value"))
        .or_else(|| {
            obj.pointer(
                "/spec/template/machines_v1beta1_machine_openshift_io/spec/providerSpec/value",
            )
        })?;
    let template = value.get("template")?.as_str()?;
    Some(template.rsplit('/').next().unwrap_or(template))
}
