//! The touch (behaviour §7): on the Lease holder only, bring existing MachineSets through the
//! webhook when their target moves. A touch is a merge patch of one annotation; the write
//! passes the webhook, which injects the image. The returned object is checked; three
//! touches that do not move the image for the same target end in an Event, a metric and
//! silence (the hot-loop guard). At steady state nothing is written.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::jiff::Timestamp;
use k8s_openapi::jiff::civil::Date;
use k8s_openapi::jiff::tz::TimeZone;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::core::DynamicObject;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::cluster::apis;
use crate::cluster::lease::LeaseCheck;
use crate::cluster::stub_upgrade::{self, BACKUP_KEY, Outcome as StubOutcome, Upgrader};
use crate::cluster::watch::Watching;
use crate::core::age;
use crate::core::decision::{self, Reason, TOUCH_ANNOTATION};
use crate::core::skew;
use crate::core::snapshot::{SharedSnapshot, Snapshot};
use crate::core::stub::UPGRADED_VERSION;
use crate::core::view::CPMS_KIND;
use crate::health::{Health, until};
use crate::metrics::{SharedMetrics, TouchOutcome};

pub const FIELD_MANAGER: &str = "bootimage-webhook";
pub const MAX_ATTEMPTS: u32 = 3;
/// After a MachineSet change, let the rest of a burst of writes land before a pass.
const MACHINESET_SETTLE: Duration = Duration::from_secs(1);

/// A MachineSet the webhook would change now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned {
    /// `MachineSet`, or `ControlPlaneMachineSet`.
    pub kind: String,
    pub name: String,
    pub uid: String,
    pub current: String,
    pub target: String,
}

/// The same decision as the webhook, over a list: which MachineSets need a touch. Pure.
pub fn plan(machinesets: &[Value], snap: &Snapshot) -> Vec<Planned> {
    decided(machinesets, snap, Reason::Updated)
        .map(|(planned, _)| planned)
        .collect()
}

/// A MachineSet given up on for its target (`RevertLoop`), with the decision's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Looping {
    pub machineset: Planned,
    pub message: String,
}

/// The MachineSets that another writer keeps putting back (behaviour §4, rule 11). Pure.
pub fn revert_loops(machinesets: &[Value], snap: &Snapshot) -> Vec<Looping> {
    decided(machinesets, snap, Reason::RevertLoop)
        .map(|(machineset, message)| Looping {
            machineset,
            message,
        })
        .collect()
}

/// The MachineSets decided with `reason`, with the decision's message.
fn decided<'a>(
    machinesets: &'a [Value],
    snap: &'a Snapshot,
    reason: Reason,
) -> impl Iterator<Item = (Planned, String)> + 'a {
    machinesets.iter().filter_map(move |ms| {
        let d = decision::decide_object(ms, snap);
        (d.reason == reason).then(|| {
            let meta = |k: &str| {
                ms.pointer(&format!("/metadata/{k}"))
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned()
            };
            let planned = Planned {
                kind: ms["kind"].as_str().unwrap_or_default().to_owned(),
                name: meta("name"),
                uid: meta("uid"),
                current: d.current.unwrap_or_default(),
                target: d.target.unwrap_or_default(),
            };
            (planned, d.message)
        })
    })
}

/// What the Lease holder counts on each pass (behaviour §7): MachineSets by reason, the
/// oldest boot image an enrolled MachineSet names, and each MachineSet's image now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Census {
    pub by_reason: BTreeMap<Reason, i64>,
    /// (age in days, MachineSet name, image) of the oldest dated boot image.
    pub oldest: Option<(i64, String, String)>,
    /// uid -> (kind, name, the image it boots now, the target when it is on it).
    pub images: BTreeMap<String, (String, String, String, Option<String>)>,
    /// The version of the oldest boot image any MachineSet names, managed or not
    /// ([`skew::survey`]).
    pub oldest_release: Option<skew::Version>,
}

/// Reasons of MachineSets that are not ours to count in the boot image age: not enrolled,
/// not RHCOS (Windows, another stream, a custom image), or someone else's.
const NOT_AGED: [Reason; 7] = [
    Reason::NotApplicable,
    Reason::OptedOut,
    Reason::OwnedByController,
    Reason::ClusterAPIAuthoritative,
    Reason::UnsupportedOSStream,
    Reason::Windows,
    Reason::CustomImage,
];

/// Counts `machinesets` under `snap` as of `today`. Pure.
pub fn census(machinesets: &[Value], snap: &Snapshot, today: Date) -> Census {
    let mut c = Census::default();
    let mut all = Vec::new();
    for ms in machinesets {
        let d = decision::decide_object(ms, snap);
        *c.by_reason.entry(d.reason).or_default() += 1;
        let name = ms
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let uid = ms
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let image = d.current.clone().or_else(|| age::referenced_image(ms));
        all.push((name.clone(), image.clone()));
        if let Some(image) = &image {
            let on_target = (d.reason == Reason::UpToDate)
                .then(|| d.target.clone())
                .flatten();
            let kind = ms["kind"].as_str().unwrap_or_default().to_owned();
            c.images
                .insert(uid, (kind, name.clone(), image.clone(), on_target));
            let days = (!NOT_AGED.contains(&d.reason))
                .then(|| age::age_days(image, today))
                .flatten();
            if let Some(days) = days
                && c.oldest.as_ref().is_none_or(|(o, _, _)| days > *o)
            {
                c.oldest = Some((days, name, image.clone()));
            }
        }
    }
    let survey = skew::survey(
        all.iter().map(|(n, i)| (n.clone(), i.as_deref())),
        snap.boot_images.as_deref(),
        &snap.cluster.learned,
    );
    c.oldest_release = survey.oldest.map(|(_, _, v)| v);
    c
}

#[derive(Debug, Clone)]
pub struct TouchSettings {
    pub namespace: String,
    /// Periodic pass even without a change (a fail-open webhook leaves MachineSets behind).
    pub resync: Duration,
    /// Writes per second, retries included.
    pub rate: f64,
    /// Wait after a snapshot change before a pass, so other replicas see it too.
    pub settle: Duration,
    /// First retry delay; doubles per attempt.
    pub backoff: Duration,
    /// `--control-plane-machine-sets`: the ControlPlaneMachineSet is listed and touched too.
    pub control_plane_machine_sets: bool,
    /// `--upgrade-stub-ignition`: spec-2 stubs in the way are upgraded first.
    pub upgrade_stub_ignition: bool,
}

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PassStats {
    pub listed: usize,
    pub planned: usize,
    pub moved: usize,
    pub given_up: usize,
    pub writes: usize,
}

pub struct Toucher {
    api: Api<DynamicObject>,
    /// ControlPlaneMachineSets, with `--control-plane-machine-sets`.
    cpms_api: Option<Api<DynamicObject>>,
    lease: Option<LeaseCheck>,
    /// Last time the API server confirmed the Lease, valid until then.
    lease_valid_until: Option<Timestamp>,
    health: Arc<Health>,
    snapshot: SharedSnapshot,
    settings: TouchSettings,
    metrics: SharedMetrics,
    recorder: Recorder,
    /// For Events that must each be their own object: the shared [`Recorder`] folds a
    /// second Event of the same reason on the same object within minutes into a series
    /// of the first (keeping the first note), which would hide a second target's move.
    client: kube::Client,
    reporter: Reporter,
    /// (MachineSet uid, target) pairs given up on; a new target tries again.
    given_up: HashSet<(String, String)>,
    /// (MachineSet uid, target) revert loops already reported by an Event.
    loops_reported: HashSet<(String, String)>,
    /// Each MachineSet's image at the last pass (uid -> image), to see moves made by the
    /// webhook on other writers' writes.
    last_images: BTreeMap<String, String>,
    /// (MachineSet uid, target) moves already reported by a `BootImageUpdated` Event.
    moves_reported: HashSet<(String, String)>,
    /// (MachineSet uid, message) grants already asked for by a `UserDataSecretNotGranted`
    /// Event.
    grants_reported: HashSet<(String, String)>,
    /// With `--upgrade-stub-ignition`.
    stubs: Option<Upgrader>,
}

/// How one MachineSet's touches ended.
enum Touched {
    Done,
    GaveUp,
    /// The Lease was lost or the snapshot changed: the pass stops.
    Interrupted,
}

enum Attempt {
    Moved,
    NotMoved,
    /// Someone changed the MachineSet so that it no longer needs us.
    Changed(Reason),
}

impl Toucher {
    pub fn new(
        client: kube::Client,
        snapshot: SharedSnapshot,
        settings: TouchSettings,
        metrics: SharedMetrics,
        instance: String,
        lease: Option<LeaseCheck>,
        health: Arc<Health>,
    ) -> Self {
        let api = Api::namespaced_with(
            client.clone(),
            &settings.namespace,
            &apis::MACHINESET.api_resource(),
        );
        let cpms_api = settings.control_plane_machine_sets.then(|| {
            Api::namespaced_with(
                client.clone(),
                &settings.namespace,
                &apis::CONTROLPLANEMACHINESET.api_resource(),
            )
        });
        let stubs = settings
            .upgrade_stub_ignition
            .then(|| Upgrader::new(Api::namespaced(client.clone(), &settings.namespace)));
        let reporter = Reporter {
            controller: FIELD_MANAGER.into(),
            instance: Some(instance),
        };
        let recorder = Recorder::new(client.clone(), reporter.clone());
        Toucher {
            api,
            cpms_api,
            lease,
            lease_valid_until: None,
            health,
            snapshot,
            settings,
            metrics,
            recorder,
            client,
            reporter,
            given_up: HashSet::new(),
            loops_reported: HashSet::new(),
            last_images: BTreeMap::new(),
            moves_reported: HashSet::new(),
            grants_reported: HashSet::new(),
            stubs,
        }
    }

    /// Run while `leader` says so; a pass per snapshot change and per resync.
    pub async fn run(
        mut self,
        mut leader: watch::Receiver<bool>,
        watching: Watching,
        mut stop: watch::Receiver<bool>,
    ) {
        let Watching {
            ids: mut changes,
            machinesets_changed,
        } = watching;
        loop {
            // Followers serve the webhook and wait.
            tokio::select! {
                ok = until(&mut leader, true) => if !ok { return },
                _ = until(&mut stop, true) => return,
            }
            tracing::info!(
                "holding the touch Lease: touching MachineSets that need the new boot image"
            );
            changes.mark_changed();
            let mut resync = tokio::time::interval(self.settings.resync);
            resync.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            resync.tick().await;
            loop {
                let settle = tokio::select! {
                    r = changes.changed() => { if r.is_err() { return } self.settings.settle }
                    // A new MachineSet, a revert, a write the webhook missed: now, not at
                    // the resync.
                    _ = machinesets_changed.notified() => MACHINESET_SETTLE,
                    _ = resync.tick() => Duration::ZERO,
                    _ = until(&mut leader, false) => break,
                    _ = until(&mut stop, true) => return,
                };
                tokio::select! {
                    _ = tokio::time::sleep(settle) => {}
                    _ = until(&mut leader, false) => break,
                    _ = until(&mut stop, true) => return,
                }
                match self.pass(&leader).await {
                    Ok(stats) if stats.planned > 0 => tracing::info!(?stats, "touch pass done"),
                    Ok(stats) => tracing::debug!(?stats, "touch pass: nothing to do"),
                    Err(e) => {
                        tracing::warn!(error = %e, "touch pass failed; retrying at the next change or resync")
                    }
                }
            }
            self.metrics.touch.census(None, 0, None);
            tracing::warn!("lost the touch Lease: touching stopped");
        }
    }

    /// Whether we may write now: leadership as the Lease manager reports it, and the Lease
    /// as the API server has it (re-read when the last confirmation has run out).
    async fn may_write(&mut self, leader: &watch::Receiver<bool>) -> Result<bool, kube::Error> {
        if !*leader.borrow() {
            return Ok(false);
        }
        let Some(lease) = &self.lease else {
            return Ok(true);
        };
        if self.lease_valid_until.is_none_or(|t| t <= Timestamp::now()) {
            self.lease_valid_until = lease.held_until().await?;
            if self.lease_valid_until.is_none() {
                tracing::warn!(lease = %lease.name, "the Lease is not ours on the API server: not touching");
            }
        }
        Ok(self.lease_valid_until.is_some())
    }

    /// One pass: list, plan, touch what needs it. Stops at once when the Lease is lost, and
    /// when the snapshot changes (a new pass follows with the new targets).
    pub async fn pass(&mut self, leader: &watch::Receiver<bool>) -> Result<PassStats, kube::Error> {
        if !self.health.synced.load(Ordering::Acquire) {
            tracing::debug!("watchers not synced yet: not touching");
            return Ok(PassStats::default());
        }
        if !self.may_write(leader).await? {
            return Ok(PassStats::default());
        }
        let objects = self.list().await?;
        let snap = self.snapshot.load_full();
        if let Some(mut upgrader) = self.stubs.take() {
            self.upgrade_stubs(&mut upgrader, &objects, &snap).await;
            self.stubs = Some(upgrader);
        }
        let planned = plan(&objects, &snap);
        // Forget give-ups for targets that no longer apply, so A -> B -> A tries A again.
        let wanted: HashSet<(String, String)> = planned
            .iter()
            .map(|p| (p.uid.clone(), p.target.clone()))
            .collect();
        self.given_up.retain(|k| wanted.contains(k));
        self.report_revert_loops(&objects, &snap).await;
        self.report_not_granted(&objects, &snap).await;
        self.count(&objects, &snap).await;
        let mut stats = PassStats {
            listed: objects.len(),
            planned: planned.len(),
            ..Default::default()
        };
        let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / self.settings.rate));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        for p in planned {
            if self.given_up.contains(&(p.uid.clone(), p.target.clone())) {
                continue;
            }
            match self.touch(&p, &snap, leader, &mut tick, &mut stats).await? {
                Touched::Done => {}
                Touched::GaveUp => {
                    stats.given_up += 1;
                    self.give_up(&p).await;
                }
                Touched::Interrupted => return Ok(stats),
            }
        }
        Ok(stats)
    }

    /// The MachineSets and (with `--control-plane-machine-sets`) ControlPlaneMachineSets.
    async fn list(&self) -> Result<Vec<Value>, kube::Error> {
        let mut items = self.api.list(&ListParams::default()).await?.items;
        if let Some(cpms) = &self.cpms_api {
            match cpms.list(&ListParams::default()).await {
                Ok(list) => items.extend(list.items),
                // No such resource on this cluster: nothing to manage there.
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(items
            .iter()
            .filter_map(|o| serde_json::to_value(o).ok())
            .collect())
    }

    /// Touch one MachineSet, up to [`MAX_ATTEMPTS`] times with backoff, at the pass's rate.
    async fn touch(
        &mut self,
        p: &Planned,
        snap: &Snapshot,
        leader: &watch::Receiver<bool>,
        tick: &mut tokio::time::Interval,
        stats: &mut PassStats,
    ) -> Result<Touched, kube::Error> {
        for attempt in 1..=MAX_ATTEMPTS {
            tick.tick().await;
            if self.snapshot.load().id != snap.id || !self.may_write(leader).await? {
                return Ok(Touched::Interrupted);
            }
            stats.writes += 1;
            if self.attempt(p, snap, attempt, stats).await {
                return Ok(Touched::Done);
            }
            if attempt < MAX_ATTEMPTS {
                let wait = self.settings.backoff * 2u32.pow(attempt - 1);
                let mut l = leader.clone();
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = until(&mut l, false) => return Ok(Touched::Interrupted),
                }
            }
        }
        Ok(Touched::GaveUp)
    }

    /// One write, counted and logged: whether the MachineSet is done with.
    async fn attempt(
        &mut self,
        p: &Planned,
        snap: &Snapshot,
        attempt: u32,
        stats: &mut PassStats,
    ) -> bool {
        let (outcome, done) = match self.touch_once(p, snap, attempt).await {
            Ok(Attempt::Moved) => {
                self.report_move(p).await;
                tracing::info!(machineset = %p.name, target = %p.target, attempt, "touched: boot image moved");
                stats.moved += 1;
                (TouchOutcome::Moved, true)
            }
            Ok(Attempt::Changed(reason)) => {
                tracing::info!(machineset = %p.name, %reason, "touched: no longer needs the new image");
                (TouchOutcome::Changed, true)
            }
            Ok(Attempt::NotMoved) => {
                tracing::warn!(machineset = %p.name, target = %p.target, attempt, "touched, but the boot image did not move");
                (TouchOutcome::NotMoved, false)
            }
            Err(kube::Error::Api(s)) if s.code == 404 => {
                tracing::info!(machineset = %p.name, "gone before its touch");
                (TouchOutcome::Changed, true)
            }
            Err(e) => {
                tracing::warn!(machineset = %p.name, attempt, error = %e, "touch failed");
                (TouchOutcome::Error, false)
            }
        };
        self.metrics.touch.touched(outcome);
        done
    }

    async fn touch_once(
        &self,
        p: &Planned,
        snap: &Snapshot,
        attempt: u32,
    ) -> Result<Attempt, kube::Error> {
        // A new value each attempt, so that every attempt is a real write through admission.
        let patch = json!({"metadata": {"annotations": {TOUCH_ANNOTATION: format!("{}-{attempt}", snap.id)}}});
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PatchParams::default()
        };
        let api = match &self.cpms_api {
            Some(cpms) if p.kind == CPMS_KIND => cpms,
            _ => &self.api,
        };
        let returned = api.patch(&p.name, &params, &Patch::Merge(&patch)).await?;
        let returned = serde_json::to_value(&returned).unwrap_or_default();
        let d = decision::decide_object(&returned, snap);
        Ok(match d.reason {
            Reason::UpToDate => Attempt::Moved,
            Reason::Updated => Attempt::NotMoved,
            other => Attempt::Changed(other),
        })
    }

    /// One Warning Event and one count per MachineSet and target that another writer keeps
    /// putting back; the writes are its (the webhook leaves them as sent, and [`plan`]
    /// does not touch them).
    async fn report_revert_loops(&mut self, objects: &[Value], snap: &Snapshot) {
        let loops = revert_loops(objects, snap);
        let now: HashSet<(String, String)> = loops
            .iter()
            .map(|l| (l.machineset.uid.clone(), l.machineset.target.clone()))
            .collect();
        self.loops_reported.retain(|k| now.contains(k));
        for l in loops {
            let p = &l.machineset;
            if !self
                .loops_reported
                .insert((p.uid.clone(), p.target.clone()))
            {
                continue;
            }
            self.metrics.touch.revert_loops.inc();
            tracing::error!(machineset = %p.name, reason = %Reason::RevertLoop, current = %p.current, target = %p.target, "{}", l.message);
            let event = Event {
                type_: EventType::Warning,
                reason: "BootImageRevertLoop".into(),
                note: Some(l.message.clone()),
                action: "Update".into(),
                secondary: None,
            };
            if let Err(e) = self.own_event(&event, &self.reference(p)).await {
                tracing::warn!(machineset = %p.name, error = %e, "could not record the Event");
            }
        }
    }

    /// One Warning Event per MachineSet (and Secret) whose user-data Secret is outside the
    /// grant: the decision's message names the Secret and the grant to add.
    async fn report_not_granted(&mut self, objects: &[Value], snap: &Snapshot) {
        let mut now = HashSet::new();
        for ms in objects {
            let d = decision::decide_object(ms, snap);
            if d.reason != Reason::UserDataSecretNotGranted {
                continue;
            }
            let meta = |k: &str| ms["metadata"][k].as_str().unwrap_or_default().to_owned();
            let key = (meta("uid"), d.message.clone());
            now.insert(key.clone());
            if self.grants_reported.contains(&key) {
                continue;
            }
            let p = Planned {
                kind: ms["kind"].as_str().unwrap_or("MachineSet").to_owned(),
                name: meta("name"),
                uid: meta("uid"),
                current: String::new(),
                target: String::new(),
            };
            tracing::warn!(machineset = %p.name, reason = %d.reason, "{}", d.message);
            let event = Event {
                type_: EventType::Warning,
                reason: Reason::UserDataSecretNotGranted.to_string(),
                note: Some(d.message.clone()),
                action: "Update".into(),
                secondary: None,
            };
            match self.own_event(&event, &self.reference(&p)).await {
                Ok(()) => {
                    self.grants_reported.insert(key);
                }
                Err(e) => {
                    tracing::warn!(machineset = %p.name, error = %e, "could not record the Event")
                }
            }
        }
        self.grants_reported.retain(|k| now.contains(k));
    }

    /// The census into the metrics, and a `BootImageUpdated` Event for every MachineSet now
    /// on its target whose image the last pass saw elsewhere (the webhook moved it on
    /// someone else's write).
    async fn count(&mut self, objects: &[Value], snap: &Snapshot) {
        let today = Timestamp::now().to_zoned(TimeZone::UTC).date();
        let c = census(objects, snap, today);
        self.metrics.touch.census(
            Some(&c.by_reason),
            c.oldest.as_ref().map_or(0, |o| o.0),
            c.oldest_release.as_ref().map(Into::into),
        );
        if let Some((days, name, image)) = &c.oldest {
            tracing::debug!(machineset = %name, %image, days, "the oldest boot image an enrolled MachineSet names");
        }
        let previous = std::mem::take(&mut self.last_images);
        for (uid, (kind, name, image, on_target)) in &c.images {
            if let (Some(target), Some(before)) = (on_target, previous.get(uid))
                && before != image
            {
                let p = Planned {
                    kind: kind.clone(),
                    name: name.clone(),
                    uid: uid.clone(),
                    current: before.clone(),
                    target: target.clone(),
                };
                self.report_move(&p).await;
            }
            self.last_images.insert(uid.clone(), image.clone());
        }
        self.moves_reported
            .retain(|(uid, _)| c.images.contains_key(uid));
    }

    /// `--upgrade-stub-ignition`: each spec-2 stub in the way, upgraded (or why not), told
    /// on the MachineSets that wait for it.
    async fn upgrade_stubs(&mut self, upgrader: &mut Upgrader, objects: &[Value], snap: &Snapshot) {
        for c in stub_upgrade::candidates(objects, snap) {
            let secret = &c.secret;
            let (type_, reason, note) = match upgrader.upgrade(&c).await {
                None => continue,
                Some(StubOutcome::Upgraded) => {
                    tracing::info!(%secret, backup = BACKUP_KEY, "ignition stub upgrade to {UPGRADED_VERSION} successful");
                    let note = format!(
                        "stub Ignition of user-data Secret {secret} upgraded to spec {UPGRADED_VERSION}; the original is kept in its data key {BACKUP_KEY}"
                    );
                    (EventType::Normal, "StubIgnitionUpgraded", note)
                }
                Some(StubOutcome::Refused(why)) => {
                    tracing::warn!(%secret, %why, "spec-2 stub Ignition not upgraded: the MachineSets naming it keep their boot images");
                    let note = format!(
                        "stub Ignition of user-data Secret {secret} not upgraded to spec 3: {why}"
                    );
                    (EventType::Warning, "StubIgnitionNotUpgraded", note)
                }
                Some(StubOutcome::Failed(why)) => {
                    tracing::warn!(%secret, error = %why, "upgrading a spec-2 stub Ignition failed; trying again at the next pass");
                    continue;
                }
            };
            let event = Event {
                type_,
                reason: reason.into(),
                note: Some(note),
                action: "UpgradeStub".into(),
                secondary: None,
            };
            for (kind, name, uid) in &c.waiting {
                let p = Planned {
                    kind: kind.clone(),
                    name: name.clone(),
                    uid: uid.clone(),
                    current: String::new(),
                    target: String::new(),
                };
                if let Err(e) = self.own_event(&event, &self.reference(&p)).await {
                    tracing::warn!(machineset = %name, error = %e, "could not record the Event");
                }
            }
        }
    }

    /// One Normal Event per MachineSet and target: its boot image moved.
    async fn report_move(&mut self, p: &Planned) {
        if !self
            .moves_reported
            .insert((p.uid.clone(), p.target.clone()))
        {
            return;
        }
        self.metrics.touch.updated_events.inc();
        let (name, from, to) = (&p.name, &p.current, &p.target);
        let from = if from.is_empty() { "<empty>" } else { from };
        let event = Event {
            type_: EventType::Normal,
            reason: "BootImageUpdated".into(),
            note: Some(format!("boot image moved from {from} to {to}")),
            action: "Update".into(),
            secondary: None,
        };
        if let Err(e) = self.own_event(&event, &self.reference(p)).await {
            tracing::warn!(machineset = %name, error = %e, "could not record the Event");
        }
    }

    /// `event` as a new Event object (see [`Toucher::client`]).
    async fn own_event(&self, event: &Event, on: &ObjectReference) -> Result<(), kube::Error> {
        Recorder::new(self.client.clone(), self.reporter.clone())
            .publish(event, on)
            .await
    }

    fn reference(&self, p: &Planned) -> ObjectReference {
        let cpms = p.kind == CPMS_KIND;
        ObjectReference {
            api_version: Some(
                if cpms {
                    "machine.openshift.io/v1"
                } else {
                    "machine.openshift.io/v1beta1"
                }
                .into(),
            ),
            kind: Some(if cpms { CPMS_KIND } else { "MachineSet" }.into()),
            name: Some(p.name.clone()),
            namespace: Some(self.settings.namespace.clone()),
            uid: Some(p.uid.clone()).filter(|u| !u.is_empty()),
            ..Default::default()
        }
    }

    async fn give_up(&mut self, p: &Planned) {
        self.given_up.insert((p.uid.clone(), p.target.clone()));
        self.metrics.touch.given_up.inc();
        let note = format!(
            "{MAX_ATTEMPTS} touches did not move the boot image from {} to {}: is the webhook reachable, or is another controller reverting it? Not touching again until the target changes.",
            p.current, p.target
        );
        tracing::error!(machineset = %p.name, "{note}");
        let reference = self.reference(p);
        let event = Event {
            type_: EventType::Warning,
            reason: "BootImageNotMoved".into(),
            note: Some(note),
            action: "Touch".into(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&event, &reference).await {
            tracing::warn!(machineset = %p.name, error = %e, "could not record the Event");
        }
    }
}
