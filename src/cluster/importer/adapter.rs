//! What one cloud gives the shared pass ([`Adapter`]): its credentials and client, and
//! what it holds of the wanted image: looked for (listed and proved), made when missing
//! (created or uploaded, then waited for), its images of ours listed, and each deleted
//! once it is read back right before. The pass itself is written once, in `pass`.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;

use serde_json::Value;

use crate::cluster::apis::Call;
use crate::cluster::learned::LearnedCell;
use crate::core::arch::Arch;
use crate::core::learned::Imported;
use crate::core::snapshot::Snapshot;

/// An image the stream wants: its name, what it is made of, the architectures it is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wanted<T> {
    pub name: String,
    pub target: T,
    pub arches: BTreeSet<Arch>,
    /// The one architecture the name carries, on a multi-architecture cluster.
    pub arch: Option<Arch>,
}

/// What a pass works on: the cluster's infrastructure id and the images the stream wants.
#[derive(Debug, PartialEq, Eq)]
pub struct Work<T> {
    pub infra_id: String,
    pub wanted: Vec<Wanted<T>>,
    /// Names two architectures' different images would share: neither is imported, and
    /// why is said.
    pub clashes: BTreeMap<String, String>,
}

impl<T> Work<T> {
    pub fn new(infra_id: String) -> Work<T> {
        Work {
            infra_id,
            wanted: Vec::new(),
            clashes: BTreeMap::new(),
        }
    }

    /// An image of this name is current: never retired.
    pub fn current(&self, name: &str) -> bool {
        self.clashes.contains_key(name) || self.wanted.iter().any(|w| w.name == name)
    }
}

/// One wanted image, as the pass asks the cloud about it.
#[derive(Debug, Clone, Copy)]
pub struct Want<'a, T> {
    pub infra_id: &'a str,
    pub wanted: &'a Wanted<T>,
    /// The images MachineSets, ControlPlaneMachineSets and Machines name (by name or
    /// id), as listed right now; `None` when they could not be listed (nothing is deleted).
    pub named: Option<&'a BTreeSet<String>>,
}

/// What the cloud holds under the wanted name.
#[derive(Debug)]
pub enum Found<E> {
    /// Ours, proved to hold the stream's data, alone under its name: MachineSets may move.
    Usable,
    /// Only a person can clear the name (a look-alike with our marker, an image not ours):
    /// said with each image's id.
    Blocked(E),
    /// Neither: missing, or an import under way.
    Absent,
}

/// An image of ours (marked by this cluster, owned by the credentials), listed for
/// retention.
#[derive(Debug, Clone)]
pub struct Ours {
    pub id: String,
    pub name: String,
    /// Complete (`active`, `COMPLETE`): retired once unused for the retention.
    pub complete: bool,
    /// Its data never came (a cut import): cleared once its import provably stopped.
    pub stopped: bool,
}

/// One cloud behind the shared pass.
pub trait Adapter: Send + 'static {
    type Settings: Send;
    /// What an image is made of (the stream's qcow2 and its stream).
    type Target: std::fmt::Debug + Send + Sync;
    type Credentials: Send + Sync;
    /// The cloud's client: it keeps what it learned (its failed imports) across passes.
    type Client: Send;
    type Error: std::error::Error + Clone + Send + Sync + 'static;

    /// The log line when trouble starts (the error beside it), and when it is over.
    const TROUBLE: &'static str;
    const AGAIN: &'static str;
    /// The Machines' list, granted by the platform's component.
    const MACHINES: Call;

    fn new(settings: Self::Settings) -> Self;
    /// The images a MachineSet, ControlPlaneMachineSet or Machine names.
    fn named(object: &Value) -> Vec<String>;
    /// The work of a pass; `None` when the cluster is not of this cloud or the stream
    /// has nothing to import for it.
    fn work(snap: &Snapshot) -> Option<Work<Self::Target>>;
    fn publish(cell: &LearnedCell, learned: Imported);

    /// The credentials, through the Kubernetes API.
    fn read(
        kube: &kube::Client,
    ) -> impl Future<Output = Result<Self::Credentials, Self::Error>> + Send;
    fn connect(creds: &Self::Credentials) -> Result<Self::Client, Self::Error>;
    /// The same credentials: the client is kept.
    fn same(had: &Self::Credentials, now: &Self::Credentials) -> bool;

    /// What the cloud holds under the wanted name, each image of ours proved (which may
    /// download the stream's data here).
    fn look(
        &mut self,
        client: &mut Self::Client,
        want: &Want<'_, Self::Target>,
    ) -> impl Future<Output = Result<Found<Self::Error>, Self::Error>> + Send;
    /// The same, read-only and without a download (`status`): an image that only a
    /// download could prove counts as usable.
    fn glance(
        client: &mut Self::Client,
        want: &Want<'_, Self::Target>,
    ) -> impl Future<Output = Result<Found<Self::Error>, Self::Error>> + Send;
    /// The wanted image, made when missing (created or uploaded, waited for, read back),
    /// alone under its name; `current` is what the waiting MachineSets use now.
    fn ensure(
        &mut self,
        client: &mut Self::Client,
        want: &Want<'_, Self::Target>,
        current: Option<&str>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send;
    /// Only a person can unblock the import: a Warning Event on the waiting objects.
    fn warns(e: &Self::Error) -> bool;

    /// Every image of ours, whatever its name.
    fn ours(
        client: &mut Self::Client,
        infra_id: &str,
    ) -> impl Future<Output = Result<Vec<Ours>, Self::Error>> + Send;
    /// Deletes a stopped image of ours once read back as such and named by nothing (a
    /// cloud that lists none has nothing to do).
    fn clear(
        client: &mut Self::Client,
        id: &str,
        infra_id: &str,
        named: &BTreeSet<String>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send {
        let _ = (client, id, infra_id, named);
        async { Ok(()) }
    }
    /// Deletes a complete image of ours once read back as ours, of its release's name and
    /// named by nothing.
    fn retire(
        client: &mut Self::Client,
        id: &str,
        infra_id: &str,
        named: &BTreeSet<String>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send;
    /// The image read back is ours but may not go now (named, not complete, changed).
    fn kept(e: &Self::Error) -> bool;
}
