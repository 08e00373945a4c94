//! The platforms, a closed set: one variant of [`Platform`] and one module each. A
//! platform knows which providerSpec kind it owns, turns its part of the stream into its
//! typed [`Target`] once per snapshot, and computes the edits that move a providerSpec to
//! it. Adding one is a module, a variant here, and its arms in the matches below.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use super::arch::Arch;
use super::reason::Reason;
use super::view::SpecFields;

pub mod aws;
pub mod azure;
mod gcp;
pub mod vsphere;

/// What the cluster side learned in the background for a platform's rule (EC2's answers
/// about AMIs): the request path only reads it.
#[derive(Debug, Clone, Default)]
pub struct Learned {
    pub aws: Option<Arc<aws::AwsLearned>>,
    /// The vSphere templates the importer found ready.
    pub vsphere: Option<Arc<vsphere::VSphereLearned>>,
    /// Moves whenever anything here changes: part of the snapshot id.
    pub generation: u64,
}

impl Learned {
    /// These facts with EC2's answers replaced.
    pub fn with_aws(&self, aws: aws::AwsLearned) -> Learned {
        Learned {
            aws: Some(Arc::new(aws)),
            vsphere: self.vsphere.clone(),
            generation: self.generation + 1,
        }
    }

    /// These facts with the importer's templates replaced.
    pub fn with_vsphere(&self, vsphere: vsphere::VSphereLearned) -> Learned {
        Learned {
            aws: self.aws.clone(),
            vsphere: Some(Arc::new(vsphere)),
            generation: self.generation + 1,
        }
    }
}

/// The platforms served, in the order they are tried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Platform {
    Gcp,
    Aws,
    Azure,
    VSphere,
}

/// A platform's boot image for one architecture, as its module reads the stream.
#[derive(Debug, Clone)]
pub enum Target {
    Gcp(gcp::GcpTarget),
    Aws(aws::AwsTarget),
    Azure(azure::AzureTarget),
    VSphere(vsphere::VSphereTarget),
}

/// What a platform's rule gets besides the providerSpec and its target.
pub struct Context<'s> {
    pub arch: Arch,
    /// What the cluster side learned in the background (e.g. EC2's answers about AMIs).
    pub learned: &'s Learned,
    /// Infrastructure `cluster`'s vSphere failure domains and infrastructure id.
    pub vsphere: Option<&'s vsphere::VSphereInfra>,
    /// `--aws-marketplace`: marketplace AMIs may move within their product.
    pub aws_marketplace: bool,
}

impl Platform {
    pub const ALL: [Platform; 4] = [
        Platform::Gcp,
        Platform::Aws,
        Platform::Azure,
        Platform::VSphere,
    ];

    /// Infrastructure `status.platformStatus.type`, e.g. `GCP`.
    pub fn name(self) -> &'static str {
        match self {
            Platform::Gcp => gcp::NAME,
            Platform::Aws => aws::NAME,
            Platform::Azure => azure::NAME,
            Platform::VSphere => vsphere::NAME,
        }
    }

    /// The providerSpec `kind` this platform reads, e.g. `GCPMachineProviderSpec`.
    pub fn provider_spec_kind(self) -> &'static str {
        match self {
            Platform::Gcp => gcp::KIND,
            Platform::Aws => aws::KIND,
            Platform::Azure => azure::KIND,
            Platform::VSphere => vsphere::KIND,
        }
    }

    /// Whether this platform manages boot images of that architecture at all.
    pub fn serves(self, arch: Arch) -> bool {
        match self {
            Platform::Azure => azure::serves(arch),
            Platform::Gcp | Platform::Aws | Platform::VSphere => true,
        }
    }

    /// This platform's targets from `architectures.<arch>` of the stream, checked and typed
    /// once when the snapshot is built. An architecture without an entry for this platform
    /// is left out; an unusable entry is an `Err` that makes this platform (alone) skip.
    pub fn targets(
        self,
        architectures: &BTreeMap<Arch, &Value>,
    ) -> BTreeMap<Arch, Result<Target, EntryError>> {
        fn typed<T>(
            targets: BTreeMap<Arch, Result<T, EntryError>>,
            variant: fn(T) -> Target,
        ) -> BTreeMap<Arch, Result<Target, EntryError>> {
            targets
                .into_iter()
                .map(|(arch, t)| (arch, t.map(variant)))
                .collect()
        }
        match self {
            Platform::Gcp => typed(gcp::targets(architectures), Target::Gcp),
            Platform::Aws => typed(aws::targets(architectures), Target::Aws),
            Platform::Azure => typed(azure::targets(architectures), Target::Azure),
            Platform::VSphere => typed(vsphere::targets(architectures), Target::VSphere),
        }
    }

    /// The boot image a providerSpec of this platform names now, as its rule reads it
    /// (`None`: none, or unreadable: the rule itself says why).
    pub fn current_image(self, spec: &SpecFields<'_>) -> Option<String> {
        let image = match self {
            Platform::Gcp => gcp::current_image(spec),
            Platform::Aws => aws::current_image(spec),
            Platform::Azure => azure::current_image(spec),
            Platform::VSphere => spec
                .read::<std::borrow::Cow<'_, str>>("template")
                .as_str()
                .map(str::to_owned),
        };
        image.filter(|i| !i.is_empty())
    }

    pub fn by_kind(kind: &str) -> Option<Platform> {
        Platform::ALL
            .into_iter()
            .find(|p| p.provider_spec_kind() == kind)
    }

    pub fn by_name(name: &str) -> Option<Platform> {
        Platform::ALL.into_iter().find(|p| p.name() == name)
    }
}

impl Target {
    /// Compare `providerSpec.value` with this target, by the rule of its platform.
    pub fn reconcile(&self, spec: &SpecFields<'_>, ctx: &Context<'_>) -> Outcome {
        match self {
            Target::Gcp(t) => gcp::reconcile(spec, t),
            Target::Aws(t) => aws::reconcile(spec, t, ctx),
            Target::Azure(t) => azure::reconcile(spec, t, ctx),
            Target::VSphere(t) => vsphere::reconcile(spec, t, ctx),
        }
    }
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
    /// Name the current image in a skip that did not.
    pub fn with_current(mut self, image: &str) -> Outcome {
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
pub fn known_platform_of_kind(kind: &str) -> Option<&'static str> {
    Platform::by_kind(kind).map(Platform::name).or(match kind {
        "OpenstackProviderSpec" => Some("OpenStack"),
        "IBMCloudMachineProviderSpec" => Some("IBMCloud"),
        "NutanixMachineProviderConfig" => Some("Nutanix"),
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

/// Makes every stream's targets know the images of all of them: an AMI of any stream is
/// Red Hat's, whichever stream a MachineSet follows.
pub(crate) fn share_stream_images<'t>(targets: impl Iterator<Item = &'t mut Target>) {
    aws::share_amis(targets.filter_map(|t| match t {
        Target::Aws(t) => Some(t),
        _ => None,
    }));
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
mod tests {
    use super::*;

    #[test]
    fn resource_names() {
        for ok in ["rhcos-cloud", "rhcos-9-8-20260428-0-gcp-x86-64", "a"] {
            assert!(is_resource_name(ok), "{ok}");
        }
        for bad in [
            "",
            "Rhcos",
            "9abc",
            "abc-",
            "a/b",
            "a_b",
            "a.b",
            &"a".repeat(64),
        ] {
            assert!(!is_resource_name(bad), "{bad}");
        }
    }

    #[test]
    fn lookup() {
        assert_eq!(
            Platform::by_kind("GCPMachineProviderSpec").unwrap().name(),
            "GCP"
        );
        assert_eq!(
            Platform::by_name("GCP").unwrap().provider_spec_kind(),
            "GCPMachineProviderSpec"
        );
        assert_eq!(
            Platform::by_kind("AWSMachineProviderConfig")
                .unwrap()
                .name(),
            "AWS"
        );
        assert_eq!(
            Platform::by_kind("VSphereMachineProviderSpec")
                .unwrap()
                .name(),
            "VSphere"
        );
        assert!(Platform::by_kind("OpenstackProviderSpec").is_none());
        assert_eq!(
            known_platform_of_kind("OpenstackProviderSpec"),
            Some("OpenStack")
        );
        assert_eq!(
            known_platform_of_kind("AWSMachineProviderConfig"),
            Some("AWS")
        );
    }
}
