//! The importer's loop: every replica looks for the stream's templates and publishes the
//! ready ones; the Lease holder imports what a MachineSet waits for and retires what
//! nothing has named for the retention.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Api, ListParams};
use kube::core::DynamicObject;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use tokio::sync::{Notify, watch};

use crate::cluster::apis;
use crate::cluster::ec2::LearnedCell;
use crate::core::decision::decide_object;
use crate::core::platforms::vsphere::{self, VSphereInfra, VSphereLearned, VSphereTarget};
use crate::core::reason::Reason;
use crate::core::snapshot::{SharedSnapshot, Snapshot};
use crate::health::until;

use super::access::Access;
use super::error::ImportError;
use super::import;
use super::objects;
use super::place::{Found, Place, each_template, is_ready, not_ours, on_vsphere};
use super::retention;
use super::state::{Listed, Pass, Settings, State, Want};
use super::vim::Vim;

/// The longest wait before vCenter is asked again after trouble.
const MAX_BACKOFF: Duration = Duration::from_secs(600);

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
            unmarked_reported: BTreeSet::new(),
            warned: BTreeSet::new(),
            recorder: Recorder::new(client, reporter),
            reported: None,
            backoff: Duration::from_secs(5),
            published: None,
            next_try: None,
            failed_imports: BTreeSet::new(),
            bad_ova: None,
        };
        let mut leader = self.leader.clone();
        loop {
            let snap = self.snapshot.load_full();
            let leading = leader.as_ref().is_some_and(|l| *l.borrow());
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
            ..VSphereLearned::default()
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
            let waiting = listed
                .as_ref()
                .map(|l| waiting_for(&l.sets, snap, &name))
                .unwrap_or_default();
            let mut tag_ids: Vec<String> = waiting.iter().flat_map(objects::tag_ids_of).collect();
            tag_ids.sort();
            tag_ids.dedup();
            let want = Want {
                waiting,
                tag_ids,
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
        // ControlPlaneMachineSets only with --control-plane-machine-sets (and its grant).
        let cpms = self.snapshot.load().cluster.control_plane_machine_sets;
        let cpms = cpms.then_some(apis::CONTROLPLANEMACHINESET);
        let calls = [Some(apis::MACHINESET), cpms, Some(apis::VSPHERE_MACHINE)];
        for call in calls.into_iter().flatten() {
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
                listed
                    .named
                    .extend(objects::template_of(&o).map(str::to_owned));
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
            let found = is_ready(&vim, &place, fd, name, &want.infra.infra_id, want.target).await?;
            let import = !want.waiting.is_empty() && want.listed.is_some();
            let ready = match found {
                Found::Template => true,
                Found::Missing if import => {
                    import::import(&self.settings, state, &vim, &place, want).await?;
                    true
                }
                Found::Leftover(vm) if import => {
                    import::clear_leftover(state, &vim, want, &vm).await?;
                    import::import(&self.settings, state, &vim, &place, want).await?;
                    true
                }
                Found::Foreign(why) if import => return Err(not_ours(fd, name, why)),
                Found::Missing | Found::Leftover(_) | Found::Foreign(_) => false,
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

    /// Deletes the templates of ours found due, each after the objects are listed again
    /// and vCenter is asked again, right before.
    async fn retire(
        &self,
        state: &mut State,
        vim: &Vim,
        place: &Place,
        want: &Want<'_>,
        listed: &Listed,
    ) {
        let due = retention::due(self.settings.retention, state, vim, place, want, listed).await;
        if due.is_empty() {
            return;
        }
        let Some(now) = self.list(&state.access.client).await else {
            return;
        };
        for d in &due {
            retention::delete(state, vim, d, want.infra, want.targets, &now.named).await;
        }
    }
}

/// A Warning Event on each object waiting for the template, once per trouble, when the
/// OVA itself is wrong (a bad checksum, too large, not an OVA).
async fn warn(state: &mut State, want: &Want<'_>, e: &ImportError) {
    let blocked = matches!(e, ImportError::Ova(o) if o.is_bad_ova())
        || matches!(e, ImportError::NotOurs { .. });
    if !blocked {
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
