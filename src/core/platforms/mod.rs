//! Platforms behind one small interface. A platform knows which providerSpec kind it
//! owns, turns its part of the stream into typed targets once per snapshot, and computes
//! the edits that move a providerSpec to its target. Adding one is a new module plus its
//! line in [`ALL`].

use std::any::Any;
use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use super::arch::Arch;
use super::reason::Reason;
use super::view::SpecFields;

pub mod aws;
pub mod azure;
mod gcp;

/// Every supported platform, in the order they are tried.
pub static ALL: &[&dyn Platform] = &[&gcp::Gcp, &aws::Aws, &azure::Azure];

/// Typed data a platform made for itself (a target, or what it learned in the background);
/// it is the only one that reads it back, with `downcast_ref`.
pub type Typed = Arc<dyn Any + Send + Sync>;

/// A platform's boot image for one architecture.
pub type Target = Typed;

/// What a platform's rule gets besides the providerSpec.
pub struct Context<'s> {
    pub arch: Arch,
    /// Built by [`Platform::targets`] for this architecture.
    pub target: &'s (dyn Any + Send + Sync),
    /// What the cluster side learned for this platform in the background (e.g. EC2's
    /// answers about AMIs), if anything yet.
    pub learned: Option<&'s (dyn Any + Send + Sync)>,
}

pub trait Platform: Sync {
    /// Infrastructure `status.platformStatus.type`, e.g. `GCP`.
    fn name(&self) -> &'static str;

    /// The providerSpec `kind` this platform reads, e.g. `GCPMachineProviderSpec`.
    fn provider_spec_kind(&self) -> &'static str;

    /// Whether this platform manages boot images of that architecture at all.
    fn serves(&self, _arch: Arch) -> bool {
        true
    }

    /// This platform's targets from `architectures.<arch>` of the stream, checked and typed
    /// once when the snapshot is built. An architecture without an entry for this platform
    /// is left out; an unusable entry is an `Err` that makes this platform (alone) skip.
    fn targets(
        &self,
        architectures: &BTreeMap<Arch, &Value>,
    ) -> BTreeMap<Arch, Result<Target, String>>;

    /// Compare `providerSpec.value` with the target.
    fn reconcile(&self, spec: &SpecFields<'_>, ctx: &Context<'_>) -> Outcome;
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

pub fn by_kind(kind: &str) -> Option<&'static dyn Platform> {
    ALL.iter().copied().find(|p| p.provider_spec_kind() == kind)
}

pub fn by_name(name: &str) -> Option<&'static dyn Platform> {
    ALL.iter().copied().find(|p| p.name() == name)
}

/// The platforms of providerSpec kinds we know of but do not manage, for clear messages;
/// the served ones come from [`ALL`].
pub fn known_platform_of_kind(kind: &str) -> Option<&'static str> {
    by_kind(kind).map(|p| p.name()).or(match kind {
        "VSphereMachineProviderSpec" => Some("VSphere"),
        "OpenstackProviderSpec" => Some("OpenStack"),
        "IBMCloudMachineProviderSpec" => Some("IBMCloud"),
        "NutanixMachineProviderConfig" => Some("Nutanix"),
        _ => None,
    })
}

/// Targets for every architecture from a per-architecture reader: the common shape of
/// [`Platform::targets`] for platforms whose entries stand alone.
pub(crate) fn per_arch(
    architectures: &BTreeMap<Arch, &Value>,
    read: impl Fn(Arch, &Value) -> Result<Option<Target>, String>,
) -> BTreeMap<Arch, Result<Target, String>> {
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
        assert_eq!(by_kind("GCPMachineProviderSpec").unwrap().name(), "GCP");
        assert_eq!(
            by_name("GCP").unwrap().provider_spec_kind(),
            "GCPMachineProviderSpec"
        );
        assert_eq!(by_kind("AWSMachineProviderConfig").unwrap().name(), "AWS");
        assert!(by_kind("VSphereMachineProviderSpec").is_none());
        assert_eq!(
            known_platform_of_kind("VSphereMachineProviderSpec"),
            Some("VSphere")
        );
        assert_eq!(
            known_platform_of_kind("AWSMachineProviderConfig"),
            Some("AWS")
        );
    }
}
