//! The platforms, a closed set: one variant of [`Platform`] and one module each. A
//! platform knows which providerSpec kind it owns and which of its fields holds the boot
//! image, turns its part of the stream into its typed [`Target`] once per snapshot,
//! computes the edits that move a providerSpec to it, and reads the version of its images
//! (for the skew, the age and the stream choice): all of it behind [`Rules`]. Adding one
//! is a module implementing [`Rules`] and its line in the `platforms!` list below.

use std::collections::BTreeMap;

use serde_json::Value;

use super::arch::Arch;
pub use super::learned::Learned;
use super::skew::version::Version;
use super::view::SpecFields;

pub mod artifact;
pub mod aws;
pub mod azure;
mod gcp;
pub mod nutanix;
pub mod openstack;
mod rules;
pub mod vsphere;

pub use rules::{Context, Edit, EntryError, McoManages, Outcome, Reading, Rules};

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

            /// [`Rules::rhel_major`].
            pub(crate) fn rhel_major_of(
                self,
                image: &str,
                version: Option<&Version>,
                learned: &Learned,
            ) -> Option<u32> {
                match self {
                    $(Platform::$variant => <$module::$rules>::rhel_major(image, version, learned),)*
                }
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

/// The platforms of providerSpec kinds we know of but do not manage, for clear messages;
/// the served ones come from [`Platform::ALL`].
pub(crate) fn known_platform_of_kind(kind: &str) -> Option<&'static str> {
    Platform::by_kind(kind).map(Platform::name).or(match kind {
        "IBMCloudMachineProviderSpec" => Some("IBMCloud"),
        _ => None,
    })
}

#[cfg(test)]
mod tests;
