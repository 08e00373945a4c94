//! What the background learns, in one cell: EC2's answers and each importer's images,
//! published here and read by the task that rebuilds the snapshot.

use arc_swap::ArcSwap;
use tokio::sync::Notify;

use crate::core::learned::{AwsLearned, Imported, Learned, VSphereLearned};

/// What the background learned, shared with the snapshot builder, which rebuilds when
/// told.
#[derive(Default)]
pub struct LearnedCell {
    pub facts: ArcSwap<Learned>,
    pub changed: Notify,
}

impl LearnedCell {
    /// Each importer publishes its own part; `rcu` keeps two publishing at once from
    /// losing one's.
    fn publish(&self, with: impl Fn(&Learned) -> Learned) {
        self.facts.rcu(|now| with(now));
        self.changed.notify_one();
    }

    pub fn publish_aws(&self, aws: AwsLearned) {
        self.publish(|now| now.with_aws(aws.clone()));
    }

    pub fn publish_vsphere(&self, vsphere: VSphereLearned) {
        self.publish(|now| now.with_vsphere(vsphere.clone()));
    }

    pub fn publish_openstack(&self, openstack: Imported) {
        self.publish(|now| now.with_openstack(openstack.clone()));
    }

    pub fn publish_nutanix(&self, nutanix: Imported) {
        self.publish(|now| now.with_nutanix(nutanix.clone()));
    }
}
