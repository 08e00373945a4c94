//! What every platform implements and speaks in: the [`Rules`] trait, the [`Context`] a
//! rule reads, the [`Outcome`] it gives. Below the platforms' modules and the list that
//! dispatches to them, so that each platform names this and nothing above it.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::core::arch::Arch;
use crate::core::learned::{Learned, VSphereInfra};
use crate::core::reason::Reason;
use crate::core::skew::version::Version;
use crate::core::view::SpecFields;

/// Everything one platform knows, written once in its module and called through
/// [`Platform`] by the decision, the stream documents and their choice, the skew, the
/// cluster facts and the plain reading of `status` and the toucher. A platform is a unit
/// type implementing this and one line in the list below; what has a default it need not
/// write. Its own reason codes are tagged with it in [`Reason`]'s list.
///
/// A platform whose boot image an importer makes (vSphere) has the stream's
/// [`Artifact`](artifact::Artifact) as its target; its rule names the image the import
/// makes of it and moves a MachineSet once what was learned says that image is ready.
pub trait Rules {
    /// Infrastructure `status.platformStatus.type`, e.g. `GCP`.
    const NAME: &'static str;
    /// The providerSpec `kind` this platform reads, e.g. `GCPMachineProviderSpec`.
    const KIND: &'static str;
    /// The keys of `providerSpec.value` that hold the boot image (OpenStack: `image`, and
    /// `rootVolume` for its `sourceUUID`). Every edit of the rule is below one of them
    /// (checked in debug builds), and the admission policy lets the webhook's
    /// ServiceAccount change those keys alone (its `bootFields`, held to this by a test).
    const BOOT_FIELDS: &'static [&'static str];
    /// What the MCO itself manages here, in the releases and with the feature gates where
    /// it does (none: it never manages this platform's boot images).
    const MCO_MANAGES: McoManages = McoManages::NOTHING;
    /// The boot image for one architecture, as this platform reads the stream.
    type Target: std::fmt::Debug + Clone + Send + Sync + 'static;

    /// Its targets from `architectures.<arch>` of a stream, checked and typed once when the
    /// snapshot is built. An architecture without an entry for it is left out; an unusable
    /// entry is an `Err` that makes this platform (alone) skip.
    fn targets(
        architectures: &BTreeMap<Arch, &Value>,
    ) -> BTreeMap<Arch, Result<Self::Target, EntryError>>;

    /// The boot image a providerSpec of this platform names now, as its rule reads it
    /// (`None`: none, or unreadable: the rule itself says why).
    fn current_image(spec: &SpecFields<'_>) -> Option<String>;

    /// Compare `providerSpec.value` with the target: the edits to make, up to date, or why
    /// not (a skip with its reason).
    fn reconcile(spec: &SpecFields<'_>, target: &Self::Target, ctx: &Context<'_>) -> Outcome;

    /// Whether it manages boot images of that architecture at all.
    fn serves(_arch: Arch) -> bool {
        true
    }

    /// The boot image a providerSpec names, read plainly, for rows whose decision stopped
    /// before the rule read it (opted out, owned, Windows, ...).
    fn referenced_image(_spec: &Value) -> Reading<String> {
        Reading::Other
    }

    /// The images one architecture's entry of a stream names, each with its RHCOS release
    /// (how the skew and the stream choice know an image the stream carries).
    fn stream_releases(_entry: &Value, _out: &mut BTreeMap<String, String>) {}

    /// Called with its targets of every stream document of a ConfigMap, once they are all
    /// read: what one stream says may hold for all (AWS: any stream's AMI is Red Hat's).
    fn share_stream_images(_targets: &mut [&mut Self::Target]) {}

    /// The version an image name of this platform's form carries.
    fn version_in_name(_image: &str) -> Reading<Version> {
        Reading::Other
    }

    /// The version what the cluster side learned says an image has (EC2, of an AMI).
    fn version_learned(_image: &str, _learned: &Learned) -> Option<Version> {
        None
    }

    /// The RHEL major of an image no stream names, given its `version` where one is known;
    /// by default, that version's.
    fn rhel_major(_image: &str, version: Option<&Version>, _learned: &Learned) -> Option<u32> {
        version.and_then(|v| u32::try_from(v.rhel.0).ok())
    }

    /// The name Infrastructure's platform is given when it is a variant of this one that
    /// is not served as it (Azure Stack Hub): no platform then serves the cluster.
    fn unserved_variant(_infrastructure: &Value) -> Option<&'static str> {
        None
    }
}

/// What the MCO's own boot image controller manages on a platform in some release, with
/// its feature gates (`CheckBootImagePlatform`). Where it manages nothing, MachineConfiguration
/// `cluster`'s selection is not a word on this webhook: installing it is the opt-in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct McoManages {
    pub machine_sets: bool,
    pub control_plane_machine_sets: bool,
}

impl McoManages {
    pub const NOTHING: McoManages = McoManages {
        machine_sets: false,
        control_plane_machine_sets: false,
    };
    pub const BOTH: McoManages = McoManages {
        machine_sets: true,
        control_plane_machine_sets: true,
    };
}

/// What a platform makes of a value that may be of its form (an image name, a providerSpec
/// read plainly): another platform's, or its own with what it says (`None`: nothing).
#[derive(Debug, Clone, PartialEq)]
pub enum Reading<T> {
    Other,
    Ours(Option<T>),
}

/// What a platform's rule gets besides the providerSpec and its target.
pub struct Context<'s> {
    pub arch: Arch,
    /// The object is a ControlPlaneMachineSet.
    pub control_plane: bool,
    /// `--aws-marketplace`: AWS Marketplace AMIs move within their product.
    pub aws_marketplace: bool,
    /// Infrastructure `status.infrastructureName`, the prefix of the images an importer
    /// names (`None`: not read yet).
    pub infrastructure_name: Option<&'s str>,
    /// The cluster runs machines of more than one architecture.
    pub multi_arch: bool,
    /// Infrastructure's vSphere failure domains.
    pub vsphere: Option<&'s VSphereInfra>,
    /// What was learned in the background (EC2's answers, the importers' images).
    pub learned: &'s Learned,
}

/// One change inside `providerSpec.value`.
#[derive(Debug, Clone, PartialEq)]
pub struct Edit {
    /// JSON pointer below `providerSpec.value`, escaped (e.g. `/disks/0/image`).
    pub pointer: String,
    /// Whether the key exists today (`replace`) or not (`add`).
    pub exists: bool,
    pub value: Value,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Edits to make; `current` and `target` are for logs and messages.
    Changes {
        edits: Vec<Edit>,
        current: String,
        target: String,
    },
    UpToDate {
        current: String,
        target: String,
    },
    Skip {
        reason: Reason,
        message: String,
        current: Option<String>,
        target: Option<String>,
    },
}

impl Outcome {
    /// Whether every edit is of one of `fields` or below it (what the admission policy
    /// allows).
    pub(crate) fn edits_below(&self, fields: &[&str]) -> bool {
        let Outcome::Changes { edits, .. } = self else {
            return true;
        };
        edits.iter().all(|e| {
            fields.iter().any(|field| {
                let rest = e
                    .pointer
                    .strip_prefix('/')
                    .and_then(|p| p.strip_prefix(field));
                matches!(rest, Some(r) if r.is_empty() || r.starts_with('/'))
            })
        })
    }

    /// Name the current image in a skip that did not.
    pub(crate) fn with_current(mut self, image: &str) -> Outcome {
        if let Outcome::Skip { current, .. } = &mut self {
            current.get_or_insert_with(|| image.to_owned());
        }
        self
    }

    pub fn skip(reason: Reason, message: impl Into<String>) -> Self {
        Outcome::Skip {
            reason,
            message: message.into(),
            current: None,
            target: None,
        }
    }
}

/// Why a platform's entry in the stream cannot be used: that platform alone skips.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EntryError {
    #[error("{0} is missing or not a string")]
    Missing(String),
    #[error("{field} {value:?} is not a valid {what}")]
    Invalid {
        field: String,
        value: String,
        what: &'static str,
    },
    /// A part of the entry that does not have the stream's shape.
    #[error("{field}: {error}")]
    Shape { field: &'static str, error: String },
    #[error("release {0:?} does not start with major.minor")]
    Release(String),
    #[error("release {0:?} has fewer than two '.'-separated parts")]
    ReleaseParts(String),
}

/// Targets for every architecture from a per-architecture reader: the common shape of
/// [`Platform::targets`] for platforms whose entries stand alone.
pub(crate) fn per_arch<T>(
    architectures: &BTreeMap<Arch, &Value>,
    read: impl Fn(Arch, &Value) -> Result<Option<T>, EntryError>,
) -> BTreeMap<Arch, Result<T, EntryError>> {
    architectures
        .iter()
        .filter_map(|(&arch, entry)| read(arch, entry).transpose().map(|t| (arch, t)))
        .collect()
}

/// A lowercase cloud resource name (RFC 1035 label): `[a-z]([-a-z0-9]{0,61}[a-z0-9])?`.
/// GCP projects and image names both follow it; anything else in a stream is corrupt.
pub(crate) fn is_resource_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_lowercase()
        && b[b.len() - 1] != b'-'
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
}
