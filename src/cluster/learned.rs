//! What the background learns, in one cell: EC2's answers and each importer's images,
//! published here and read by the task that rebuilds the snapshot.

use arc_swap::ArcSwap;
use tokio::sync::Notify;

use crate::core::learned::{AwsLearned, Learned};

/// What the background learned, shared with the snapshot builder, which rebuilds when
/// told.
#[derive(Default)]
pub struct LearnedCell {
    pub facts: ArcSwap<Learned>,
    pub changed: Notify,
}

impl LearnedCell {
    /// Each importer publishes its own part (so a new one needs nothing here); `rcu`
    /// keeps two publishing at once from losing one's.
    pub fn publish(&self, with: impl Fn(&Learned) -> Learned) {
        self.facts.rcu(|now| with(now));
        self.changed.notify_one();
    }

    pub fn publish_aws(&self, aws: AwsLearned) {
        self.publish(|now| now.with_aws(aws.clone()));
    }
}
