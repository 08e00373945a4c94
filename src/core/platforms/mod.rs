//! The platforms, a closed set: one variant of [`Platform`] and one module each. A
//! platform knows which providerSpec kind it owns and which of its fields holds the boot
//! image, turns its part of the stream into its typed [`Target`] once per snapshot,
//! computes the edits that move a providerSpec to it, and reads the version of its images
//! (for the skew, the age and the stream choice): all of it behind [`Rules`]. Adding one
//! is a module implementing [`Rules`] and its line in the `platforms!` list below.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use super::arch::Arch;
use super::configmap::BootImages;
use super::facts::ClusterFacts;
use super::reason::Reason;
use super::skew::{self, Version};
use super::stream_doc::rhel_major_of_release;
use super::view::SpecFields;

pub mod artifact;
pub mod aws;
pub mod azure;
mod gcp;
pub mod nutanix;
pub mod openstack;
pub mod vsphere;

/// What the cluster side learned in the background for a platform's rule (EC2's answers
/// about AMIs): the request path only reads it.
#[derive(Debug, Clone, Default)]
pub struct Learned {
    pub aws: Option<Arc<aws::AwsLearned>>,
    /// The vSphere templates the importer found ready.
    pub vsphere: Option<Arc<vsphere::VSphereLearned>>,
    /// The Glance images the importer found usable.
    pub openstack: Option<Arc<openstack::OpenStackLearned>>,
    /// The Prism Central images the importer found usable.
    pub nutanix: Option<Arc<nutanix::NutanixLearned>>,
    /// Moves whenever anything here changes: part of the snapshot id.
    pub generation: u64,
}

impl Learned {
    /// These facts with EC2's answers replaced.
    pub fn with_aws(&self, aws: aws::AwsLearned) -> Learned {
        Learned {
            aws: Some(Arc::new(aws)),
            generation: self.generation + 1,
            ..self.clone()
        }
    }

    /// These facts with the vSphere importer's templates replaced.
    pub fn with_vsphere(&self, vsphere: vsphere::VSphereLearned) -> Learned {
        Learned {
            vsphere: Some(Arc::new(vsphere)),
            generation: self.generation + 1,
            ..self.clone()
        }
    }

    /// These facts with the OpenStack importer's images replaced.
    pub fn with_openstack(&self, openstack: openstack::OpenStackLearned) -> Learned {
        Learned {
            openstack: Some(Arc::new(openstack)),
            generation: self.generation + 1,
            ..self.clone()
        }
    }

    /// These facts with the Nutanix importer's images replaced.
    pub fn with_nutanix(&self, nutanix: nutanix::NutanixLearned) -> Learned {
        Learned {
            nutanix: Some(Arc::new(nutanix)),
            generation: self.generation + 1,
            ..self.clone()
        }
    }
}

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

    /// The RHEL major of an image no stream names; by default, that of its version.
    fn rhel_major(image: &str, boot: &BootImages, learned: &Learned) -> Option<u32> {
        rhel_major_of_version(image, boot, learned)
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

/// [`Rules::rhel_major`]'s default: the RHEL of the image's version, where it is known.
pub(crate) fn rhel_major_of_version(
    image: &str,
    boot: &BootImages,
    learned: &Learned,
) -> Option<u32> {
    let version = skew::version_of(image, Some(boot), learned)?;
    u32::try_from(version.rhel.0).ok()
}

/// The list of platforms: one variant of [`Platform`] and of [`Target`] each, and the
/// dispatch of [`Rules`] to its module.
macro_rules! platforms {
    ($($variant:ident($module:ident::$rules:ident),)*) => {
        /// The platforms served, in the order they are tried.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Platform {
            $($variant,)*
        }

        /// A platform's boot image for one architecture, as its module reads the stream.
        #[derive(Debug, Clone)]
        pub enum Target {
            $($variant(<$module::$rules as Rules>::Target),)*
        }

        impl Platform {
            pub const ALL: [Platform; [$(Platform::$variant),*].len()] =
                [$(Platform::$variant),*];

            /// Infrastructure `status.platformStatus.type`, e.g. `GCP`.
            pub fn name(self) -> &'static str {
                match self { $(Platform::$variant => <$module::$rules>::NAME,)* }
            }

            /// [`Rules::MCO_MANAGES`].
            pub fn mco_manages(self) -> McoManages {
                match self { $(Platform::$variant => <$module::$rules>::MCO_MANAGES,)* }
            }

            /// The providerSpec `kind` this platform reads, e.g. `GCPMachineProviderSpec`.
            pub(crate) fn provider_spec_kind(self) -> &'static str {
                match self { $(Platform::$variant => <$module::$rules>::KIND,)* }
            }

            /// [`Rules::BOOT_FIELDS`].
            pub(crate) fn boot_fields(self) -> &'static [&'static str] {
                match self { $(Platform::$variant => <$module::$rules>::BOOT_FIELDS,)* }
            }

            /// Whether this platform manages boot images of that architecture at all.
            pub fn serves(self, arch: Arch) -> bool {
                match self { $(Platform::$variant => <$module::$rules>::serves(arch),)* }
            }

            /// [`Rules::targets`], as [`Target`]s.
            pub fn targets(
                self,
                architectures: &BTreeMap<Arch, &Value>,
            ) -> BTreeMap<Arch, Result<Target, EntryError>> {
                match self {
                    $(Platform::$variant => <$module::$rules>::targets(architectures)
                        .into_iter()
                        .map(|(arch, t)| (arch, t.map(Target::$variant)))
                        .collect(),)*
                }
            }

            fn current_image_of(self, spec: &SpecFields<'_>) -> Option<String> {
                match self { $(Platform::$variant => <$module::$rules>::current_image(spec),)* }
            }

            fn referenced_image_of(self, spec: &Value) -> Reading<String> {
                match self { $(Platform::$variant => <$module::$rules>::referenced_image(spec),)* }
            }

            fn stream_releases_of(self, entry: &Value, out: &mut BTreeMap<String, String>) {
                match self { $(Platform::$variant => <$module::$rules>::stream_releases(entry, out),)* }
            }

            fn version_in_name_of(self, image: &str) -> Reading<Version> {
                match self { $(Platform::$variant => <$module::$rules>::version_in_name(image),)* }
            }

            fn version_learned_of(self, image: &str, learned: &Learned) -> Option<Version> {
                match self {
                    $(Platform::$variant => <$module::$rules>::version_learned(image, learned),)*
                }
            }

            fn rhel_major_of(self, image: &str, boot: &BootImages, learned: &Learned) -> Option<u32> {
                match self { $(Platform::$variant => <$module::$rules>::rhel_major(image, boot, learned),)* }
            }

            fn unserved_variant_of(self, infrastructure: &Value) -> Option<&'static str> {
                match self {
                    $(Platform::$variant => <$module::$rules>::unserved_variant(infrastructure),)*
                }
            }
        }

        impl Target {
            /// Compare `providerSpec.value` with this target, by the rule of its platform.
            pub fn reconcile(&self, spec: &SpecFields<'_>, ctx: &Context<'_>) -> Outcome {
                let (platform, outcome) = match self {
                    $(Target::$variant(t) => {
                        (Platform::$variant, <$module::$rules>::reconcile(spec, t, ctx))
                    })*
                };
                debug_assert!(
                    outcome.edits_below(platform.boot_fields()),
                    "{platform:?} edits outside its boot fields: {outcome:?}"
                );
                outcome
            }
        }

        /// [`Rules::share_stream_images`] of each platform, on the targets of every stream.
        pub(crate) fn share_stream_images<'t>(targets: impl Iterator<Item = &'t mut Target>) {
            let mut targets: Vec<&'t mut Target> = targets.collect();
            $(
                let mut own: Vec<&mut <$module::$rules as Rules>::Target> = targets
                    .iter_mut()
                    .filter_map(|t| match &mut **t {
                        Target::$variant(t) => Some(t),
                        _ => None,
                    })
                    .collect();
                <$module::$rules>::share_stream_images(&mut own);
            )*
        }

        /// Each platform's module, as written: the tests hold its reasons to it.
        #[cfg(test)]
        const SOURCES: [(Platform, &str); Platform::ALL.len()] =
            [$((Platform::$variant, include_str!(concat!(stringify!($module), ".rs"))),)*];
    };
}

platforms! {
    Gcp(gcp::Gcp),
    Aws(aws::Aws),
    Azure(azure::Azure),
    VSphere(vsphere::VSphere),
    OpenStack(openstack::OpenStack),
    Nutanix(nutanix::Nutanix),
}

/// What a platform's rule gets besides the providerSpec and its target.
pub struct Context<'s> {
    pub arch: Arch,
    /// The object is a ControlPlaneMachineSet.
    pub control_plane: bool,
    /// What the decision knows of the cluster: Infrastructure's facts, flags such as
    /// `--aws-marketplace`, what was learned in the background (EC2's answers about AMIs).
    pub cluster: &'s ClusterFacts,
}

impl Platform {
    /// The boot image a providerSpec of this platform names now, as its rule reads it
    /// (`None`: none, or unreadable: the rule itself says why).
    pub(crate) fn current_image(self, spec: &SpecFields<'_>) -> Option<String> {
        self.current_image_of(spec).filter(|i| !i.is_empty())
    }

    pub(crate) fn by_kind(kind: &str) -> Option<Platform> {
        Platform::ALL
            .into_iter()
            .find(|p| p.provider_spec_kind() == kind)
    }

    pub fn by_name(name: &str) -> Option<Platform> {
        Platform::ALL.into_iter().find(|p| p.name() == name)
    }

    /// The RHEL major an image of this platform is built from, where it can be told: a
    /// stream names it, or the platform reads it (its name, what was learned).
    pub fn rhel_major(self, image: &str, boot: &BootImages, learned: &Learned) -> Option<u32> {
        if let Some(release) = boot.rhcos_release_of(image) {
            return rhel_major_of_release(release);
        }
        self.rhel_major_of(image, boot, learned)
    }

    /// Infrastructure's platform type as the decision matches it: the type, or the name of
    /// a variant of it that no platform serves (Azure Stack Hub).
    pub fn infrastructure_name(kind: &str, infrastructure: &Value) -> String {
        let variant = Platform::by_name(kind).and_then(|p| p.unserved_variant_of(infrastructure));
        variant.unwrap_or(kind).to_owned()
    }
}

/// The boot image a providerSpec names, read plainly, for rows whose decision stopped
/// before its platform's rule read it: the first platform whose form it has says.
pub(crate) fn referenced_image(ms: &Value) -> Option<String> {
    let spec = ms.pointer("/spec/template/spec/providerSpec/value")?;
    first_reading(|p| p.referenced_image_of(spec)).flatten()
}

/// The version an image's name carries, as the first platform whose form it has reads it
/// (`None`: no platform's form).
pub(crate) fn version_in_name(image: &str) -> Option<Option<Version>> {
    first_reading(|p| p.version_in_name_of(image))
}

/// The version what the cluster side learned says an image has, from any platform.
pub(crate) fn version_learned(image: &str, learned: &Learned) -> Option<Version> {
    Platform::ALL
        .into_iter()
        .find_map(|p| p.version_learned_of(image, learned))
}

/// Every image one architecture's entry of a stream names, with its RHCOS release.
pub(crate) fn stream_releases(entry: &Value, out: &mut BTreeMap<String, String>) {
    for p in Platform::ALL {
        p.stream_releases_of(entry, out);
    }
}

/// What the first platform, in [`Platform::ALL`]'s order, that takes a value as its own
/// reads in it.
fn first_reading<T>(read: impl Fn(Platform) -> Reading<T>) -> Option<Option<T>> {
    Platform::ALL.into_iter().find_map(|p| match read(p) {
        Reading::Ours(v) => Some(v),
        Reading::Other => None,
    })
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
    fn edits_below(&self, fields: &[&str]) -> bool {
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

/// The platforms of providerSpec kinds we know of but do not manage, for clear messages;
/// the served ones come from [`Platform::ALL`].
pub(crate) fn known_platform_of_kind(kind: &str) -> Option<&'static str> {
    Platform::by_kind(kind).map(Platform::name).or(match kind {
        "IBMCloudMachineProviderSpec" => Some("IBMCloud"),
        _ => None,
    })
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

#[cfg(test)]
mod tests;
