//! vSphere on the importer frame: every replica looks for the stream's templates and
//! publishes the ready ones; the Lease holder imports what a MachineSet waits for and
//! retires what nothing has named for the retention.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::Value;

use crate::cluster::apis::{self, Call};
use crate::cluster::importer::{Kit, Listed, Pass, Plugin, Warning, waiting_for};
use crate::cluster::learned::LearnedCell;
use crate::core::platforms::vsphere::{self, VSphereInfra, VSphereLearned, VSphereTarget};
use crate::core::reason::Reason;
use crate::core::snapshot::Snapshot;

use super::access::Access;
use super::error::ImportError;
use super::https::HttpsError;
use super::import;
use super::objects;
use super::place::{Found, Place, each_template, is_ready, not_ours, on_vsphere};
use super::retention;
use super::state::{Identity, Settings, State, Want};
use super::vim::Vim;

/// The importer's state between passes.
pub struct Background {
    settings: Settings,
    state: State,
}

impl Background {
    pub fn new(client: kube::Client, settings: Settings) -> Result<Background, HttpsError> {
        let secret = (
            settings.credentials_namespace.as_str(),
            settings.credentials_name.as_str(),
        );
        let access = Access::new(client, secret, settings.ca_file.as_deref())?;
        Ok(Background {
            state: State {
                access,
                unmarked_reported: BTreeSet::new(),
                failed_imports: BTreeSet::new(),
                bad_ova: None,
            },
            settings,
        })
    }
}

impl Plugin for Background {
    type Work = (Arc<VSphereInfra>, Vec<VSphereTarget>);
    type Learned = VSphereLearned;
    type Key = Identity;

    const TROUBLE: &'static str = "cannot import the vSphere template; those MachineSets keep their template until it is imported";
    const AGAIN: &'static str = "vCenter answers again: vSphere templates are checked and imported";
    const MACHINES: Call = apis::VSPHERE_MACHINE;

    /// The template (its last path element).
    fn named(object: &Value) -> Vec<String> {
        objects::template_of(object)
            .map(str::to_owned)
            .into_iter()
            .collect()
    }

    fn work(&self, snap: &Snapshot) -> Option<Self::Work> {
        on_vsphere(snap)
    }

    /// One look at every failure domain; the leader imports what a MachineSet waits for,
    /// then deletes what has been unused long enough.
    async fn pass(
        &mut self,
        kit: &mut Kit<Identity>,
        snap: &Snapshot,
        (infra, targets): &Self::Work,
        listed: Option<&Listed>,
    ) -> Pass<VSphereLearned> {
        let mut learned = VSphereLearned::default();
        let mut trouble: Option<ImportError> = None;
        for (target, fd) in each_template(targets, infra) {
            let name = vsphere::template_name(&infra.infra_id, &target.release, &fd.name);
            let waiting: Vec<Value> = listed
                .map(|l| waiting_for(&l.sets, snap, Reason::TemplateNotImported, &name))
                .unwrap_or_default()
                .into_iter()
                .map(|w| w.object)
                .collect();
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
                listed,
            };
            match self.failure_domain(kit, &want).await {
                Ok(true) => {
                    learned.templates.insert((fd.name.clone(), want.name));
                }
                Ok(false) => {}
                Err(e) => {
                    warn(kit, &want, &e).await;
                    trouble.get_or_insert(e);
                }
            }
        }
        let trouble = trouble.map(|e| e.to_string());
        learned.unavailable = trouble.clone();
        Pass { learned, trouble }
    }

    fn publish(cell: &LearnedCell, learned: VSphereLearned) {
        cell.publish(|now| now.with_vsphere(learned.clone()));
    }
}

impl Background {
    /// Whether the template is ready in the failure domain, importing it when this
    /// replica leads and a MachineSet waits for it.
    async fn failure_domain(
        &mut self,
        kit: &mut Kit<Identity>,
        want: &Want<'_>,
    ) -> Result<bool, ImportError> {
        let (fd, name) = (want.fd, want.name.as_str());
        let (settings, state) = (&self.settings, &mut self.state);
        let vim = state.access.login(fd).await?;
        let result = async {
            let place = Place::find(&vim, want.infra, fd).await?;
            let found = is_ready(&vim, &place, fd, name, &want.infra.infra_id, want.target).await?;
            let import = !want.waiting.is_empty() && want.listed.is_some();
            let ready = match found {
                Found::Template => true,
                Found::Missing if import => {
                    import::import(settings, state, &vim, &place, want).await?;
                    true
                }
                Found::Leftover(vm) if import => {
                    import::clear_leftover(state, &vim, want, &vm).await?;
                    import::import(settings, state, &vim, &place, want).await?;
                    true
                }
                Found::Foreign(why) if import => return Err(not_ours(fd, name, why)),
                Found::Missing | Found::Leftover(_) | Found::Foreign(_) => false,
            };
            if let Some(listed) = want.listed {
                retire(kit, state, &vim, &place, want, listed).await;
            }
            Ok(ready)
        }
        .await;
        vim.logout().await;
        result
    }
}

/// Deletes the templates of ours found due, each after the objects are listed again and
/// vCenter is asked again, right before.
async fn retire(
    kit: &mut Kit<Identity>,
    state: &mut State,
    vim: &Vim,
    place: &Place,
    want: &Want<'_>,
    listed: &Listed,
) {
    let due = retention::due(&mut kit.retention, state, vim, place, want, listed).await;
    if due.is_empty() {
        return;
    }
    let Some(now) = kit.lister.list().await else {
        return;
    };
    for d in &due {
        retention::delete(
            &mut kit.retention,
            vim,
            d,
            want.infra,
            want.targets,
            &now.named,
        )
        .await;
    }
}

/// A Warning Event on each object waiting for the template, once per trouble, when the
/// OVA itself is wrong (a bad checksum, too large, not an OVA) or a VM not ours is in the
/// way.
async fn warn(kit: &mut Kit<Identity>, want: &Want<'_>, e: &ImportError) {
    let blocked = matches!(e, ImportError::Ova(o) if o.is_bad_ova())
        || matches!(e, ImportError::NotOurs { .. });
    if !blocked {
        return;
    }
    let note = format!("template {} cannot be imported: {e}", want.name);
    let warning = Warning {
        reason: Reason::TemplateNotImported.as_str(),
        action: "ImportTemplate",
        note: &note,
    };
    kit.warnings.warn(&want.waiting, &warning).await;
}
