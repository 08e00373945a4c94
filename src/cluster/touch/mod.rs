//! The touch (behaviour §7): on the Lease holder only, bring existing MachineSets through the
//! webhook when their target moves. A touch is a merge patch of one annotation; the write
//! passes the webhook, which injects the image. The returned object is checked; three
//! touches that do not move the image for the same target end in an Event, a metric and
//! silence (the hot-loop guard). A pass stopped by a fault of the moment is tried again
//! with backoff ([`retry`]). At steady state nothing is written. Nothing is written either
//! while the admission policy that limits these writes is not proven in force ([`wall`]).

mod plan;
mod report;
mod retry;
pub mod wall;

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::core::DynamicObject;
use kube::runtime::events::{Recorder, Reporter};
use serde_json::{Value, json};
use tokio::sync::watch;

use plan::census;
pub use plan::{Looping, Planned, plan, revert_loops};
use retry::{Backoff, Fault, within};
use wall::Wall;

use crate::cluster::apis;
use crate::cluster::lease::LeaseCheck;
use crate::cluster::stub_upgrade::Upgrader;
use crate::cluster::watch::Watching;
use crate::core::decision::{self, Reason, TOUCH_ANNOTATION};
use crate::core::snapshot::{SharedSnapshot, Snapshot};
use crate::core::view::CPMS_KIND;
use crate::health::{Health, until};
use crate::metrics::{SharedMetrics, TouchOutcome};

pub(crate) const FIELD_MANAGER: &str = "bootimage-webhook";
pub(crate) const MAX_ATTEMPTS: u32 = 3;
/// After a MachineSet change, let the rest of a burst of writes land before a pass.
const MACHINESET_SETTLE: Duration = Duration::from_secs(1);

#[derive(Debug, Clone)]
pub(crate) struct TouchSettings {
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
    /// Prove the admission policy holds before writing (off: `--no-admission-policy-check`).
    pub admission_policy_check: bool,
}

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct PassStats {
    pub listed: usize,
    pub planned: usize,
    pub moved: usize,
    pub given_up: usize,
    pub writes: usize,
}

pub(crate) struct Toucher {
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
    /// Whether the admission policy holds, as this Lease term's probes proved it.
    wall: Wall,
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

/// Why a pass stopped before its end; it is tried again after a backoff.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PassError {
    #[error("checking the Lease: {0}")]
    Lease(#[source] Fault),
    #[error("the Lease is not ours on the API server")]
    LeaseNotOurs,
    #[error("listing MachineSets: {0}")]
    List(#[source] Fault),
    #[error("touching {name}: {source}")]
    Touch {
        name: String,
        #[source]
        source: Fault,
    },
    #[error(
        "the ValidatingAdmissionPolicy {} does not hold this ServiceAccount's writes: not touching",
        apis::ADMISSION_POLICY
    )]
    PolicyNotEnforced,
    #[error(
        "whether the ValidatingAdmissionPolicy {} holds is not known yet: not touching",
        apis::ADMISSION_POLICY
    )]
    PolicyUnproven,
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
            wall: Wall::default(),
        }
    }

    /// Run while `leader` says so; a pass per snapshot change and per resync, and after a
    /// pass stopped by a fault, another after a backoff.
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
            self.wall = Wall::new_term();
            let mut resync = tokio::time::interval(self.settings.resync);
            resync.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            resync.tick().await;
            let mut backoff = Backoff::new(self.settings.backoff, self.settings.resync);
            let mut retry: Option<tokio::time::Instant> = None;
            loop {
                let settle = tokio::select! {
                    r = changes.changed() => { if r.is_err() { return } self.settings.settle }
                    // A new MachineSet, a revert, a write the webhook missed: now, not at
                    // the resync.
                    _ = machinesets_changed.notified() => MACHINESET_SETTLE,
                    _ = resync.tick() => { self.wall.due = true; Duration::ZERO }
                    _ = sleep_until(retry) => Duration::ZERO,
                    _ = until(&mut leader, false) => break,
                    _ = until(&mut stop, true) => return,
                };
                tokio::select! {
                    _ = tokio::time::sleep(settle) => {}
                    _ = until(&mut leader, false) => break,
                    _ = until(&mut stop, true) => return,
                }
                retry = None;
                match self.pass(&leader).await {
                    Ok(stats) => {
                        backoff.reset();
                        if stats.planned > 0 {
                            tracing::info!(?stats, "touch pass done");
                        } else {
                            tracing::debug!(?stats, "touch pass: nothing to do");
                        }
                    }
                    Err(e) => {
                        let wait = backoff.next_delay();
                        retry = Some(tokio::time::Instant::now() + wait);
                        if matches!(e, PassError::PolicyNotEnforced | PassError::PolicyUnproven) {
                            // The wall's probe said why, once, with its condition.
                            tracing::debug!(error = %e, retry_in = ?wait, "touch pass stopped; probing again after a backoff");
                        } else {
                            tracing::warn!(error = %e, retry_in = ?wait, "touch pass stopped; trying again after a backoff");
                        }
                    }
                }
            }
            self.metrics.touch.census(None, 0, None);
            self.metrics.touch.skew_record_due.set(0);
            self.metrics.touch.admission_policy_enforced.set(-1);
            tracing::warn!("lost the touch Lease: touching stopped");
        }
    }

    /// Whether we may write now: leadership as the Lease manager reports it (`false`: not
    /// the leader), and the Lease as the API server has it (re-read when the last
    /// confirmation has run out; an error when it is not ours there, or cannot be read).
    async fn may_write(&mut self, leader: &watch::Receiver<bool>) -> Result<bool, PassError> {
        if !*leader.borrow() {
            return Ok(false);
        }
        let Some(lease) = &self.lease else {
            return Ok(true);
        };
        if self.lease_valid_until.is_none_or(|t| t <= Timestamp::now()) {
            self.lease_valid_until = within(lease.held_until()).await.map_err(PassError::Lease)?;
            if self.lease_valid_until.is_none() {
                tracing::warn!(lease = %lease.name, "the Lease is not ours on the API server: not touching");
                return Err(PassError::LeaseNotOurs);
            }
        }
        Ok(true)
    }

    /// One pass: list, plan, touch what needs it. Stops at once when the Lease is lost, and
    /// when the snapshot changes (a new pass follows with the new targets).
    pub async fn pass(&mut self, leader: &watch::Receiver<bool>) -> Result<PassStats, PassError> {
        if !self.health.synced.load(Ordering::Acquire) {
            tracing::debug!("watchers not synced yet: not touching");
            return Ok(PassStats::default());
        }
        if !self.may_write(leader).await? {
            return Ok(PassStats::default());
        }
        let objects = self.list().await.map_err(PassError::List)?;
        let snap = self.snapshot.load_full();
        let planned = plan(&objects, &snap);
        // Forget give-ups for targets that no longer apply, so A -> B -> A tries A again.
        let wanted: HashSet<(String, String)> = planned
            .iter()
            .map(|p| (p.uid.clone(), p.target.clone()))
            .collect();
        self.given_up.retain(|k| wanted.contains(k));
        let work = planned
            .iter()
            .any(|p| !self.given_up.contains(&(p.uid.clone(), p.target.clone())))
            || (self.stubs.is_some()
                && !crate::cluster::stub_upgrade::candidates(&objects, &snap).is_empty());
        let wall = self.wall_holds(&objects, work).await;
        // What the pass tells, it tells whether it may write or not.
        self.report_revert_loops(&objects, &snap).await;
        self.report_not_granted(&objects, &snap).await;
        self.count(&objects, &snap).await;
        wall?;
        if let Some(mut upgrader) = self.stubs.take() {
            self.upgrade_stubs(&mut upgrader, &objects, &snap).await;
            self.stubs = Some(upgrader);
        }
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
    async fn list(&self) -> Result<Vec<Value>, Fault> {
        let mut items = within(self.api.list(&ListParams::default())).await?.items;
        if let Some(cpms) = &self.cpms_api {
            match within(cpms.list(&ListParams::default())).await {
                Ok(list) => items.extend(list.items),
                // No such resource on this cluster: nothing to manage there.
                Err(e) if e.code() == Some(404) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(items
            .iter()
            .filter_map(|o| serde_json::to_value(o).ok())
            .collect())
    }

    /// Touch one MachineSet, up to [`MAX_ATTEMPTS`] times with backoff, at the pass's rate.
    /// A transient fault stops the pass (it is tried again); a refusal leaves this
    /// MachineSet to the next pass.
    async fn touch(
        &mut self,
        p: &Planned,
        snap: &Snapshot,
        leader: &watch::Receiver<bool>,
        tick: &mut tokio::time::Interval,
        stats: &mut PassStats,
    ) -> Result<Touched, PassError> {
        for attempt in 1..=MAX_ATTEMPTS {
            tick.tick().await;
            if self.snapshot.load().id != snap.id || !self.may_write(leader).await? {
                return Ok(Touched::Interrupted);
            }
            stats.writes += 1;
            if self.attempt(p, snap, attempt, stats).await? {
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

    /// One write, counted and logged: whether the MachineSet is done with (for this pass),
    /// or the transient fault that stops the pass.
    async fn attempt(
        &mut self,
        p: &Planned,
        snap: &Snapshot,
        attempt: u32,
        stats: &mut PassStats,
    ) -> Result<bool, PassError> {
        let (outcome, done) = match self.touch_once(p, snap, attempt).await {
            Ok(Attempt::Moved) => {
                self.report_move(p).await;
                tracing::info!(machineset = %p.name, target = %p.target, attempt, "touched: boot image moved");
                stats.moved += 1;
                (TouchOutcome::Moved, Ok(true))
            }
            Ok(Attempt::Changed(reason)) => {
                tracing::info!(machineset = %p.name, %reason, "touched: no longer needs the new image");
                (TouchOutcome::Changed, Ok(true))
            }
            Ok(Attempt::NotMoved) => {
                tracing::warn!(machineset = %p.name, target = %p.target, attempt, "touched, but the boot image did not move");
                (TouchOutcome::NotMoved, Ok(false))
            }
            Err(e) if e.code() == Some(404) => {
                tracing::info!(machineset = %p.name, "gone before its touch");
                (TouchOutcome::Changed, Ok(true))
            }
            Err(e) if wall::refused_for_value(&e) => {
                self.report_stale_parameter(p).await;
                (TouchOutcome::Error, Ok(true))
            }
            Err(e) if e.is_transient() => {
                let name = p.name.clone();
                (
                    TouchOutcome::Error,
                    Err(PassError::Touch { name, source: e }),
                )
            }
            Err(e) => {
                tracing::warn!(machineset = %p.name, attempt, error = %e, "touch refused; trying again at the next pass");
                (TouchOutcome::Error, Ok(true))
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
    ) -> Result<Attempt, Fault> {
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
        let returned = within(api.patch(&p.name, &params, &Patch::Merge(&patch))).await?;
        let returned = serde_json::to_value(&returned).unwrap_or_default();
        let d = decision::decide_object(&returned, snap);
        Ok(match d.reason {
            Reason::UpToDate => Attempt::Moved,
            Reason::Updated => Attempt::NotMoved,
            other => Attempt::Changed(other),
        })
    }
}

/// Until `at`, or never.
async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
