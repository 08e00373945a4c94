//! The pass every cloud behind an [`Adapter`] runs, written once: every replica looks for
//! the image of each of the stream's qcow2s and publishes the usable ones; the Lease holder
//! imports what a MachineSet waits for, and retires images of ours that nothing has named
//! for the retention, each read back right before it is deleted.

use std::time::Instant;

use serde_json::Value;

use crate::cluster::apis::Call;
use crate::cluster::learned::LearnedCell;
use crate::core::learned::Imported;
use crate::core::reason::Reason;
use crate::core::snapshot::Snapshot;

use super::adapter::{Adapter, Found, Want, Wanted, Work};
use super::{Kit, Listed, Pass, Plugin, Waiting, Warning, waiting_for};

/// A cloud's importer between passes.
pub struct Background<A: Adapter> {
    kube: kube::Client,
    adapter: A,
    /// The credentials last read, and the client made of them.
    connected: Option<(A::Credentials, A::Client)>,
    /// The last pass had trouble: the credentials are read again (rotated, or fixed).
    reread: bool,
}

impl<A: Adapter> Background<A> {
    pub fn new(kube: kube::Client, settings: A::Settings) -> Background<A> {
        Background {
            kube,
            adapter: A::new(settings),
            connected: None,
            reread: false,
        }
    }
}

impl<A: Adapter> Plugin for Background<A> {
    type Work = Work<A::Target>;
    type Learned = Imported;
    /// The image's id.
    type Key = String;

    const TROUBLE: &'static str = A::TROUBLE;
    const AGAIN: &'static str = A::AGAIN;
    const MACHINES: Call = A::MACHINES;

    fn named(object: &Value) -> Vec<String> {
        A::named(object)
    }

    fn work(&self, snap: &Snapshot) -> Option<Work<A::Target>> {
        A::work(snap)
    }

    async fn pass(
        &mut self,
        kit: &mut Kit<String>,
        snap: &Snapshot,
        work: &Work<A::Target>,
        listed: Option<&Listed>,
    ) -> Pass<Imported> {
        let mut learned = Imported::default();
        let mut trouble = work.clashes.values().next().cloned();
        let Background {
            kube,
            adapter,
            connected,
            reread,
        } = self;
        match connect::<A>(kube, connected, *reread).await {
            Err(e) => trouble = Some(e.to_string()),
            Ok(client) => {
                let at = At {
                    snap,
                    infra_id: &work.infra_id,
                    listed,
                };
                for wanted in &work.wanted {
                    match image(adapter, client, kit, &at, wanted).await {
                        Ok(true) => {
                            learned.images.insert(wanted.name.clone());
                        }
                        Ok(false) => {}
                        Err(e) => {
                            trouble.get_or_insert(e.to_string());
                        }
                    }
                }
                if let Some(listed) = listed
                    && let Err(e) = retire::<A>(client, kit, work, listed).await
                {
                    trouble.get_or_insert(e.to_string());
                }
            }
        }
        *reread = trouble.is_some();
        learned.unavailable = trouble.clone();
        Pass { learned, trouble }
    }

    fn publish(cell: &LearnedCell, learned: Imported) {
        A::publish(cell, learned);
    }
}

/// The client of the credentials, read again when asked to (after trouble) and made anew
/// only when they changed; the one it had stays when they cannot be read.
async fn connect<'a, A: Adapter>(
    kube: &kube::Client,
    connected: &'a mut Option<(A::Credentials, A::Client)>,
    reread: bool,
) -> Result<&'a mut A::Client, A::Error> {
    let next = match connected.take() {
        Some(kept) if !reread => kept,
        old => match A::read(kube).await {
            Err(e) => {
                *connected = old;
                return Err(e);
            }
            Ok(creds) => match old {
                Some((had, client)) if A::same(&had, &creds) => (had, client),
                old => match A::connect(&creds) {
                    Ok(client) => (creds, client),
                    Err(e) => {
                        *connected = old;
                        return Err(e);
                    }
                },
            },
        },
    };
    Ok(&mut connected.insert(next).1)
}

/// Where a pass is.
struct At<'a> {
    snap: &'a Snapshot,
    infra_id: &'a str,
    /// What the Lease holder listed (it imports only then).
    listed: Option<&'a Listed>,
}

/// Whether the wanted image is usable, importing it when this replica leads and a
/// MachineSet waits for it.
async fn image<A: Adapter>(
    adapter: &mut A,
    client: &mut A::Client,
    kit: &mut Kit<String>,
    at: &At<'_>,
    wanted: &Wanted<A::Target>,
) -> Result<bool, A::Error> {
    let want = Want {
        infra_id: at.infra_id,
        wanted,
        named: at.listed.map(|l| &l.named),
    };
    let found = adapter.look(client, &want).await?;
    let waiting: Vec<Waiting> = at
        .listed
        .map(|l| waiting_for(&l.sets, at.snap, Reason::ImageNotImported, &wanted.name))
        .unwrap_or_default()
        .into_iter()
        .filter(|w| w.decision.arch.is_none_or(|a| wanted.arches.contains(&a)))
        .collect();
    match found {
        Found::Usable => return Ok(true),
        Found::Blocked(e) => {
            warn(kit, &waiting, &wanted.name, &e).await;
            return Err(e);
        }
        Found::Absent if waiting.is_empty() => return Ok(false),
        Found::Absent => {}
    }
    // How the cloud boots RHCOS may come from the image the waiting MachineSets use now.
    let current = waiting
        .iter()
        .find_map(|w| w.decision.current.as_deref().filter(|c| !c.is_empty()));
    match adapter.ensure(client, &want, current).await {
        Ok(()) => Ok(true),
        Err(e) => {
            if A::warns(&e) {
                warn(kit, &waiting, &wanted.name, &e).await;
            }
            Err(e)
        }
    }
}

/// A Warning Event on each waiting object, when only a person can unblock the import.
async fn warn(
    kit: &mut Kit<String>,
    waiting: &[Waiting],
    name: &str,
    e: &(dyn std::error::Error + Sync),
) {
    let note = format!("image {name} cannot be imported: {e}");
    let warning = Warning {
        reason: Reason::ImageNotImported.as_str(),
        action: "ImportImage",
        note: &note,
    };
    let objects: Vec<&Value> = waiting.iter().map(|w| &w.object).collect();
    kit.warnings.warn(objects, &warning).await;
}

/// Deletes the complete images of ours that nothing has named for the retention, each
/// once the objects are listed again and the cloud is asked again, right before; and
/// those whose data never came, once their import provably stopped.
async fn retire<A: Adapter>(
    client: &mut A::Client,
    kit: &mut Kit<String>,
    work: &Work<A::Target>,
    listed: &Listed,
) -> Result<(), A::Error> {
    let ours = A::ours(client, &work.infra_id).await?;
    for image in ours.iter().filter(|i| i.stopped) {
        let (name, id) = (&image.name, &image.id);
        match A::clear(client, id, &work.infra_id, &listed.named).await {
            Ok(()) => {}
            Err(e) if A::kept(&e) => {
                tracing::debug!(image = %name, id, reason = %e, "an unfinished image of ours is kept");
            }
            Err(e) => {
                tracing::warn!(image = %name, id, error = %e, "cannot delete an unfinished image of ours");
            }
        }
    }
    let complete: Vec<_> = ours.iter().filter(|i| i.complete).collect();
    kit.retention
        .keep_only(|id| complete.iter().any(|i| &i.id == id));
    let now = Instant::now();
    let mut due = Vec::new();
    for image in complete {
        let name = &image.name;
        let used =
            listed.named.contains(&image.id) || listed.named.contains(name) || work.current(name);
        if kit.retention.due(&image.id, used, now) {
            due.push((image.id.clone(), name.clone()));
        }
    }
    if due.is_empty() {
        return Ok(());
    }
    let Some(again) = kit.lister.list().await else {
        return Ok(());
    };
    for (id, name) in due {
        match A::retire(client, &id, &work.infra_id, &again.named).await {
            Ok(()) => {
                tracing::info!(image = %name, id, "deleted an image of ours that nothing has named for the retention");
                kit.retention.forget(&id);
            }
            Err(e) if A::kept(&e) => {
                tracing::info!(image = %name, id, reason = %e, "an image of ours due for deletion is kept");
                kit.retention.forget(&id);
            }
            Err(e) => {
                tracing::warn!(image = %name, id, error = %e, "cannot delete an unused image of ours");
            }
        }
    }
    Ok(())
}

/// Which of the stream's images are usable, looked at without changing anything
/// (`status`); `None` when the cluster is not of this cloud or its stream has nothing for it.
pub async fn look<A: Adapter>(kube: &kube::Client, snap: &Snapshot) -> Option<Imported> {
    let work = A::work(snap)?;
    let mut learned = Imported {
        unavailable: work.clashes.values().next().cloned(),
        ..Imported::default()
    };
    let connected = A::read(kube).await;
    let mut client = match connected.and_then(|creds| A::connect(&creds)) {
        Ok(client) => client,
        Err(e) => {
            learned.unavailable = Some(e.to_string());
            return Some(learned);
        }
    };
    for wanted in &work.wanted {
        let want = Want {
            infra_id: &work.infra_id,
            wanted,
            named: None,
        };
        let why = match A::glance(&mut client, &want).await {
            Ok(Found::Usable) => {
                learned.images.insert(wanted.name.clone());
                continue;
            }
            Ok(Found::Absent) => continue,
            Ok(Found::Blocked(e)) | Err(e) => e,
        };
        learned.unavailable.get_or_insert(why.to_string());
    }
    Some(learned)
}
