//! What the decision knows of the cluster besides the ConfigMap: the gate, enrollment,
//! platform and architecture, the user-data Secrets' stubs, and what was learned in the
//! background. The types live here; [`read`] makes them from live objects.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use kube::core::Selector;
use serde_json::Value;

use super::arch::Arch;
use super::learned::{Learned, VSphereInfra};

mod enrollment;
mod read;

pub use enrollment::{Enrolled, EnrollmentError, Managed, enrollment};
pub(crate) use enrollment::{NotObserved, mco_may_manage, observed};
pub(crate) use read::{GateInputs, RELEASE_IMAGE_VERSION_ANNOTATION};
pub use read::{control_plane_arch, gate, multi_arch, platform, stub};

/// Whether boot images may move now (behaviour §3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gate {
    pub open: bool,
    /// Why, in words for the logs and for `UpgradeInProgress` messages.
    pub reason: String,
}

impl Gate {
    pub fn open(reason: impl Into<String>) -> Self {
        Gate {
            open: true,
            reason: reason.into(),
        }
    }

    pub fn closed(reason: impl Into<String>) -> Self {
        Gate {
            open: false,
            reason: reason.into(),
        }
    }
}

/// Which MachineSets are managed: where the MCO manages the platform's boot images,
/// MachineConfiguration `cluster`'s `status.managedBootImagesStatus` (or
/// `spec.managedBootImages` on releases without that status); elsewhere all of them
/// ([`enrollment`]).
#[derive(Debug, Clone, Default)]
pub enum Enrollment {
    #[default]
    All,
    None,
    Partial(Selector),
}

/// What the decision needs to know about the cluster besides the ConfigMap.
#[derive(Debug, Clone)]
pub struct ClusterFacts {
    /// Infrastructure `status.platformStatus.type`. `None` offline: the providerSpec kind
    /// decides.
    pub platform: Option<String>,
    pub control_plane_arch: Option<Arch>,
    /// ClusterVersion `status.desired.architecture == Multi`.
    pub multi_arch: bool,
    pub gate: Gate,
    pub enrollment: Enrollment,
    /// Which rule gave `enrollment`, in words ([`Enrolled::rule`]).
    pub enrollment_rule: Arc<str>,
    /// `--control-plane-machine-sets`: ControlPlaneMachineSets are decided too (off: they
    /// are `NotApplicable`, as the MCO's feature gate leaves them).
    pub control_plane_machine_sets: bool,
    /// `--aws-marketplace`: AWS Marketplace AMIs move within their product (off: they are
    /// `MarketplaceNotEnabled`).
    pub aws_marketplace: bool,
    /// MachineConfiguration `cluster`'s selection for `controlplanemachinesets`.
    pub cpms_enrollment: Enrollment,
    /// Which rule gave `cpms_enrollment`.
    pub cpms_enrollment_rule: Arc<str>,
    /// The stub Ignition of the user-data Secrets the MachineSets name (rule 10).
    pub stubs: Stubs,
    /// Infrastructure `status.infrastructureName`, the prefix of the images an importer
    /// names (`None`: not read yet, or offline without an Infrastructure document).
    pub infrastructure_name: Option<String>,
    /// Infrastructure `cluster`'s infrastructure id and vSphere failure domains.
    pub vsphere: Option<Arc<VSphereInfra>>,
    /// What the cluster side learned from clouds in the background.
    pub learned: Learned,
    /// MachineConfiguration `cluster` as last read (`None`: absent, or offline): the Lease
    /// holder says when its Manual skew record is due.
    pub machine_configuration: Option<Arc<Value>>,
}

impl ClusterFacts {
    /// Which rule enrolls `kind`, in words.
    pub fn enrollment_rule(&self, kind: Managed) -> &str {
        match kind {
            Managed::MachineSets => &self.enrollment_rule,
            Managed::ControlPlaneMachineSets => &self.cpms_enrollment_rule,
        }
    }
}

impl Default for ClusterFacts {
    fn default() -> Self {
        ClusterFacts {
            platform: None,
            control_plane_arch: Arch::host(),
            multi_arch: false,
            gate: Gate::closed("no master upgrade state known yet"),
            enrollment: Enrollment::All,
            enrollment_rule: Enrolled::unread(Managed::MachineSets).rule,
            control_plane_machine_sets: false,
            aws_marketplace: false,
            cpms_enrollment: Enrollment::All,
            cpms_enrollment_rule: Enrolled::unread(Managed::ControlPlaneMachineSets).rule,
            stubs: Stubs::default(),
            infrastructure_name: None,
            vsphere: None,
            learned: Learned::default(),
            machine_configuration: None,
        }
    }
}

/// What a user-data Secret holds, as far as rule 10 cares: only the stub's Ignition
/// version is kept, never the Secret's data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stub {
    /// `ignition.version` of its `userData`.
    Version(String),
    /// The Secret exists, and its `userData` is no Ignition config we can read (why).
    Unreadable(String),
    /// No such Secret in the MachineSet's namespace.
    Missing,
}

/// The stub Ignition of the user-data Secrets, by Secret name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stubs {
    /// Offline (`--dev`, `--configmap-file`, `preview`) no Secret can be read: rule 10
    /// does not check. Following a cluster, a Secret absent from `by_name` is not read yet.
    pub unchecked: bool,
    pub by_name: BTreeMap<String, Stub>,
    /// The Secrets this process may read (`--user-data-secrets`, the Role's
    /// `resourceNames`): a MachineSet naming another is left alone, online and offline.
    /// `None`: no limit.
    pub granted: Option<BTreeSet<String>>,
}

impl Stubs {
    /// Following a cluster, with these Secrets read.
    pub fn learned<'a>(stubs: impl IntoIterator<Item = (&'a str, Stub)>) -> Stubs {
        Stubs {
            unchecked: false,
            by_name: stubs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
            granted: None,
        }
    }

    /// These stubs, with only `names` readable.
    pub fn granting<'a>(self, names: impl IntoIterator<Item = &'a str>) -> Stubs {
        Stubs {
            granted: Some(names.into_iter().map(str::to_owned).collect()),
            ..self
        }
    }

    /// Whether `secret` may be read: within the grant, or no grant is known.
    pub fn grants(&self, secret: &str) -> bool {
        self.granted.as_ref().is_none_or(|g| g.contains(secret))
    }

    pub(crate) fn digest_words(&self) -> String {
        let granted = match &self.granted {
            Some(g) => g.iter().map(|n| format!("{n},")).collect(),
            None => "*".to_owned(),
        };
        if self.unchecked {
            return format!("unchecked granted={granted}");
        }
        let read: String = self
            .by_name
            .iter()
            .map(|(name, stub)| match stub {
                Stub::Version(v) => format!("{name}={v};"),
                Stub::Unreadable(why) => format!("{name}!{why};"),
                Stub::Missing => format!("{name}-;"),
            })
            .collect();
        format!("{read} granted={granted}")
    }
}
