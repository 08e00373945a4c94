//! Platforms behind one small interface. A platform knows which providerSpec kind it
//! owns, turns its part of the stream into a typed target once per snapshot, and computes
//! the edits that move a providerSpec to that target. Adding one is a new module plus its
//! line in [`ALL`].

use std::any::Any;
use std::sync::Arc;

use serde_json::Value;

use super::reason::Reason;
use super::view::SpecFields;

mod gcp;

/// Every supported platform, in the order they are tried.
pub static ALL: &[&dyn Platform] = &[&gcp::Gcp];

/// A platform's boot image for one architecture, typed by the platform itself (it is the
/// only one that reads it back, with `downcast_ref`).
pub type Target = Arc<dyn Any + Send + Sync>;

pub trait Platform: Sync {
    /// Infrastructure `status.platformStatus.type`, e.g. `GCP`.
    fn name(&self) -> &'static str;

    /// The providerSpec `kind` this platform reads, e.g. `GCPMachineProviderSpec`.
    fn provider_spec_kind(&self) -> &'static str;

    /// This platform's part of `architectures.<arch>` of the stream, checked and typed once
    /// when the snapshot is built: `Ok(None)` when the stream has none for it.
    fn target(&self, arch_entry: &Value) -> Result<Option<Target>, String>;

    /// Compare `providerSpec.value` with the target built by [`Platform::target`].
    fn reconcile(&self, spec: &SpecFields<'_>, target: &(dyn Any + Send + Sync)) -> Outcome;
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

/// The providerSpec kinds we know of but do not manage, for clear messages.
pub fn known_platform_of_kind(kind: &str) -> Option<&'static str> {
    match kind {
        "GCPMachineProviderSpec" => Some("GCP"),
        "AWSMachineProviderConfig" => Some("AWS"),
        "AzureMachineProviderSpec" => Some("Azure"),
        "VSphereMachineProviderSpec" => Some("VSphere"),
        "OpenstackProviderSpec" => Some("OpenStack"),
        _ => None,
    }
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
        assert!(by_kind("AWSMachineProviderConfig").is_none());
        assert_eq!(
            known_platform_of_kind("AWSMachineProviderConfig"),
            Some("AWS")
        );
    }
}
