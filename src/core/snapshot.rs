//! The in-memory picture of the cluster that every decision reads.
//!
//! A `Snapshot` is immutable; whoever learns something new (the offline loader, the
//! watchers) builds a whole new one and swaps it into a [`SharedSnapshot`]. The request
//! path only ever calls `load()`, which is lock-free. It holds the parsed ConfigMap
//! ([`configmap`](super::configmap)) and the cluster facts ([`facts`](super::facts)),
//! whose types are re-exported here for its readers.

use std::sync::Arc;
use std::time::SystemTime;

use arc_swap::ArcSwap;

pub use super::arch::Arch;
use super::configmap::digest;
pub use super::configmap::{
    BootImages, EMBEDDED_CONFIGMAP, KEY_MCO_RELEASE_IMAGE_VERSION, KEY_RELEASE_VERSION, KEY_STREAM,
    KEY_STREAMS,
};
pub use super::document::{parse_document, parse_documents};
pub use super::facts::{ClusterFacts, Enrolled, Enrollment, Gate, Managed, Stub, Stubs};
pub use super::learned::Learned;
use super::learned::{AwsLearned, Imported, VSphereLearned};

#[derive(Debug, Clone)]
pub struct Snapshot {
    /// Changes whenever something that can move a target or the gate changes.
    pub id: String,
    /// `None` until the ConfigMap has been read: every decision is then `NotReady`.
    pub boot_images: Option<Arc<BootImages>>,
    pub cluster: ClusterFacts,
    pub built_at: SystemTime,
}

impl Snapshot {
    pub fn new(boot_images: Option<Arc<BootImages>>, cluster: ClusterFacts) -> Self {
        let stream_digest = boot_images.as_ref().map_or("none", |b| b.digest.as_str());
        let platform = cluster.platform.as_deref().unwrap_or("");
        let arch = cluster.control_plane_arch.map_or("", Arch::k8s);
        let words = |e: &Enrollment| match e {
            Enrollment::All => "all".to_owned(),
            Enrollment::None => "none".to_owned(),
            Enrollment::Partial(s) => format!("partial:{s}"),
        };
        let enrollment = format!(
            "{}({});cpms={}:{}({});marketplace={}",
            words(&cluster.enrollment),
            cluster.enrollment_rule,
            cluster.control_plane_machine_sets,
            words(&cluster.cpms_enrollment),
            cluster.cpms_enrollment_rule,
            cluster.aws_marketplace
        );
        let stubs = cluster.stubs.digest_words();
        let vsphere = format!("{:?}", cluster.vsphere);
        // Everything a decision reads, so that a new id means "targets may have moved".
        let id = digest(&[
            stream_digest.as_bytes(),
            &[u8::from(cluster.gate.open), u8::from(cluster.multi_arch)],
            &cluster.learned.generation.to_be_bytes(),
            platform.as_bytes(),
            arch.as_bytes(),
            enrollment.as_bytes(),
            stubs.as_bytes(),
            vsphere.as_bytes(),
        ]);
        Snapshot {
            id,
            boot_images,
            cluster,
            built_at: SystemTime::now(),
        }
    }

    /// The snapshot before anything is known.
    pub fn empty() -> Self {
        Snapshot::new(None, ClusterFacts::default())
    }

    /// Offline mode (`--configmap-file`, `--dev`, `preview`): the gate is the ConfigMap's
    /// own stamp, unless the operator vouches for the masters.
    pub fn offline(
        boot_images: BootImages,
        assume_masters_updated: bool,
        control_plane_arch: Option<Arch>,
        multi_arch: bool,
    ) -> Self {
        let gate = if assume_masters_updated {
            Gate::open("--assume-masters-updated")
        } else if boot_images.stamped() {
            Gate::open(format!(
                "ConfigMap stamped {KEY_MCO_RELEASE_IMAGE_VERSION}={}",
                boot_images.release_version
            ))
        } else {
            Gate::closed(format!(
                "ConfigMap {KEY_MCO_RELEASE_IMAGE_VERSION}={} does not match {KEY_RELEASE_VERSION}={}: no master has completed the upgrade",
                boot_images
                    .mco_release_image_version
                    .as_deref()
                    .unwrap_or("<unset>"),
                boot_images.release_version
            ))
        };
        Snapshot::new(
            Some(Arc::new(boot_images)),
            ClusterFacts {
                platform: None,
                control_plane_arch,
                multi_arch,
                gate,
                enrollment: Enrollment::All,
                enrollment_rule: Enrolled::unread(Managed::MachineSets).rule,
                control_plane_machine_sets: true,
                aws_marketplace: false,
                cpms_enrollment: Enrollment::All,
                cpms_enrollment_rule: Enrolled::unread(Managed::ControlPlaneMachineSets).rule,
                stubs: Stubs {
                    unchecked: true,
                    ..Stubs::default()
                },
                infrastructure_name: None,
                vsphere: None,
                learned: Learned::default()
                    .with_aws(AwsLearned {
                        unavailable: Some("nothing asks EC2 offline".into()),
                        ..Default::default()
                    })
                    .with_vsphere(VSphereLearned {
                        unavailable: Some(
                            "nothing imports offline: this is the template the importer would make"
                                .into(),
                        ),
                        ..Default::default()
                    })
                    .with_openstack(Imported {
                        unavailable: Some(
                            "nothing imports offline: this is the image the importer would make"
                                .into(),
                        ),
                        ..Default::default()
                    })
                    .with_nutanix(Imported {
                        unavailable: Some(
                            "nothing imports offline: this is the image the importer would make"
                                .into(),
                        ),
                        ..Default::default()
                    }),
                machine_configuration: None,
            },
        )
    }
}

pub(crate) type SharedSnapshot = Arc<ArcSwap<Snapshot>>;

pub fn shared(snapshot: Snapshot) -> SharedSnapshot {
    Arc::new(ArcSwap::from_pointee(snapshot))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::configmap::tests::data;

    #[test]
    fn the_grant_is_part_of_the_snapshot() {
        let with = |stubs: Stubs| {
            let cluster = ClusterFacts {
                stubs,
                ..ClusterFacts::default()
            };
            Snapshot::new(None, cluster).id
        };
        let one = Stubs::default().granting(["worker-user-data"]);
        let two = Stubs::default().granting(["worker-user-data", "infra-user-data-managed"]);
        assert!(one.grants("worker-user-data") && !one.grants("infra-user-data-managed"));
        assert!(two.grants("infra-user-data-managed"));
        assert!(Stubs::default().grants("anything"));
        assert_ne!(with(one.clone()), with(two));
        assert_ne!(with(one), with(Stubs::default()));
    }

    #[test]
    fn offline_gate_follows_the_stamp() {
        let mut d = data(r#"{"architectures":{}}"#);
        let unstamped = BootImages::from_data(&d).unwrap();
        let s = Snapshot::offline(unstamped.clone(), false, None, false);
        assert!(!s.cluster.gate.open);
        assert!(s.cluster.gate.reason.contains("<unset>"));
        let s2 = Snapshot::offline(unstamped, true, None, false);
        assert!(s2.cluster.gate.open);
        assert_ne!(s.id, s2.id, "the gate is part of the snapshot id");
        d.insert(KEY_MCO_RELEASE_IMAGE_VERSION.into(), "4.21.0".into());
        let stamped = BootImages::from_data(&d).unwrap();
        assert!(
            Snapshot::offline(stamped, false, None, false)
                .cluster
                .gate
                .open
        );
    }
}
