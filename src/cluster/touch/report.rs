//! What the Lease holder tells on each pass (behaviour §7): Events on MachineSets (moved,
//! reverted by another writer, a stub upgraded), the census into the metrics.

use std::collections::HashSet;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::jiff::Timestamp;
use k8s_openapi::jiff::tz::TimeZone;
use kube::runtime::events::{Event, EventType, Recorder};
use serde_json::Value;

use super::{MAX_ATTEMPTS, Planned, Toucher, census, revert_loops};
use crate::cluster::stub_upgrade::{self, BACKUP_KEY, Outcome as StubOutcome, Upgrader};
use crate::core::decision::{self, Reason};
use crate::core::snapshot::Snapshot;
use crate::core::stub::UPGRADED_VERSION;
use crate::core::view::CPMS_KIND;

impl Toucher {
    /// One Warning Event per MachineSet (and Secret) whose user-data Secret is outside the
    /// grant: the decision's message names the Secret and the grant to add.
    pub(super) async fn report_not_granted(&mut self, objects: &[Value], snap: &Snapshot) {
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

    /// One Warning Event and one count per MachineSet and target that another writer keeps
    /// putting back; the writes are its (the webhook leaves them as sent, and [`plan`]
    /// does not touch them).
    pub(super) async fn report_revert_loops(&mut self, objects: &[Value], snap: &Snapshot) {
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

    /// The census into the metrics, and a `BootImageUpdated` Event for every MachineSet now
    /// on its target whose image the last pass saw elsewhere (the webhook moved it on
    /// someone else's write).
    pub(super) async fn count(&mut self, objects: &[Value], snap: &Snapshot) {
        let today = Timestamp::now().to_zoned(TimeZone::UTC).date();
        let c = census(objects, snap, today);
        self.metrics.touch.census(
            Some(&c.by_reason),
            c.oldest.as_ref().map_or(0, |o| o.0),
            c.oldest_release.as_ref().map(Into::into),
        );
        self.metrics
            .touch
            .skew_record_due
            .set(i64::from(c.skew_record_due));
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
    pub(super) async fn upgrade_stubs(
        &mut self,
        upgrader: &mut Upgrader,
        objects: &[Value],
        snap: &Snapshot,
    ) {
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
    pub(super) async fn report_move(&mut self, p: &Planned) {
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
    pub(super) async fn own_event(
        &self,
        event: &Event,
        on: &ObjectReference,
    ) -> Result<(), kube::Error> {
        Recorder::new(self.client.clone(), self.reporter.clone())
            .publish(event, on)
            .await
    }

    pub(super) fn reference(&self, p: &Planned) -> ObjectReference {
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

    pub(super) async fn give_up(&mut self, p: &Planned) {
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
