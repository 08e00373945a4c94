//! The frame every background importer runs in (vSphere's templates, OpenStack's Glance
//! images, Nutanix's Prism Central images, and the next platform's): one platform plugs in a [`Plugin`] (what it imports
//! and how it looks, imports and retires), and the frame does the rest, the same for all.
//!
//! - the loop ([`Frame::run`]): a pass on every replica at each wake-up (a snapshot change,
//!   the webhook's `wanted` Notify, a change of leadership, the resync) until stopped; the
//!   learned facts published when they change; trouble logged once per kind and retried
//!   with backoff, during which wake-ups wait;
//! - what the Lease holder lists before a pass ([`Lister`]): MachineSets (and
//!   ControlPlaneMachineSets when managed), and what they and the Machines name, listed
//!   again right before anything is deleted;
//! - the objects waiting for a target ([`waiting_for`]);
//! - the retention clock per identity ([`Retention`]), which starts again when the Lease
//!   moves;
//! - Warning Events on waiting objects, once per object and trouble ([`Warnings`]).
//!
//! The files: `frame` (the loop and its trouble), `listing`, `retention`, `warnings`; and
//! what the importers of Glance and Prism Central share: `https` (the client and its one
//! error type) and `artifact` (the stream's qcow2, downloaded once, checked and cached).

pub mod adapter;
pub(crate) mod artifact;
mod frame;
pub(crate) mod https;
mod listing;
mod pass;
pub mod publish;
mod retention;
mod warnings;

use std::future::Future;

use serde_json::Value;

use crate::cluster::apis::Call;
use crate::cluster::learned::LearnedCell;
use crate::core::snapshot::Snapshot;

pub use adapter::Adapter;
pub use frame::Frame;
pub use https::{HttpsError, MAX_ANSWER, MAX_LIST};
pub use listing::{Listed, Lister, Waiting, provider_value, waiting_for};
pub use pass::{Background, look};
pub use retention::Retention;
pub use warnings::{Warning, Warnings};

/// One platform's importer, as the frame drives it.
pub trait Plugin: Send {
    /// What a pass works on, read from the snapshot (the cluster's facts, the stream's
    /// artifacts).
    type Work: Send + Sync;
    /// What a pass found, published into the snapshot.
    type Learned: Clone + PartialEq + Send + Sync;
    /// The identity the retention clock runs per.
    type Key: Ord + Clone + Send + Sync;

    /// The log line when trouble starts (the error beside it), and when it is over.
    const TROUBLE: &'static str;
    const AGAIN: &'static str;
    /// The Machines' list, granted by the platform's component: what Machines name is never
    /// deleted.
    const MACHINES: Call;

    /// The images a MachineSet, ControlPlaneMachineSet or Machine names (none when it is not
    /// of this platform).
    fn named(object: &Value) -> Vec<String>;

    /// The work of a pass; `None` when the cluster is not of this platform or the stream has
    /// nothing to import for it.
    fn work(&self, snap: &Snapshot) -> Option<Self::Work>;

    /// One pass: look on every replica; import and retire only with `listed`, which only
    /// the Lease holder has (and only when it could list).
    fn pass(
        &mut self,
        kit: &mut Kit<Self::Key>,
        snap: &Snapshot,
        work: &Self::Work,
        listed: Option<&Listed>,
    ) -> impl Future<Output = Pass<Self::Learned>> + Send;

    /// Puts what a pass learned into the snapshot.
    fn publish(cell: &LearnedCell, learned: Self::Learned);
}

/// What a pass found, and the first trouble it met (logged once, retried with backoff).
pub struct Pass<L> {
    pub learned: L,
    pub trouble: Option<String>,
}

/// What the frame lends a pass.
pub struct Kit<K> {
    pub lister: Lister,
    pub warnings: Warnings,
    pub retention: Retention<K>,
}
