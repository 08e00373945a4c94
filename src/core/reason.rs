//! The stable reason codes (behaviour §4): one word per outcome, in logs, metrics,
//! admission warnings, Events and `preview`. Their names and their list live here only.

use std::fmt;

/// Stable reason codes (behaviour §4), used in logs, metrics, warnings and events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reason {
    NotApplicable,
    OptedOut,
    OwnedByController,
    UnsupportedOSStream,
    Windows,
    UpgradeInProgress,
    NotReady,
    InvalidArchitecture,
    ArchitectureUnknown,
    UnsupportedPlatform,
    NoImageInStream,
    CustomImage,
    /// No disk is marked `boot: true`: there is no boot image to move.
    NoBootDisk,
    StubIgnitionSpec2,
    Updated,
    UpToDate,
    /// The providerSpec is malformed where we must read it (disks not an array, image
    /// not a string, ...): left alone, and said so.
    InvalidProviderSpec,
}

impl Reason {
    pub const ALL: [Reason; 17] = [
        Reason::NotApplicable,
        Reason::OptedOut,
        Reason::OwnedByController,
        Reason::UnsupportedOSStream,
        Reason::Windows,
        Reason::UpgradeInProgress,
        Reason::NotReady,
        Reason::InvalidArchitecture,
        Reason::ArchitectureUnknown,
        Reason::UnsupportedPlatform,
        Reason::NoImageInStream,
        Reason::CustomImage,
        Reason::NoBootDisk,
        Reason::StubIgnitionSpec2,
        Reason::Updated,
        Reason::UpToDate,
        Reason::InvalidProviderSpec,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Reason::NotApplicable => "NotApplicable",
            Reason::OptedOut => "OptedOut",
            Reason::OwnedByController => "OwnedByController",
            Reason::UnsupportedOSStream => "UnsupportedOSStream",
            Reason::Windows => "Windows",
            Reason::UpgradeInProgress => "UpgradeInProgress",
            Reason::NotReady => "NotReady",
            Reason::InvalidArchitecture => "InvalidArchitecture",
            Reason::ArchitectureUnknown => "ArchitectureUnknown",
            Reason::UnsupportedPlatform => "UnsupportedPlatform",
            Reason::NoImageInStream => "NoImageInStream",
            Reason::CustomImage => "CustomImage",
            Reason::NoBootDisk => "NoBootDisk",
            Reason::StubIgnitionSpec2 => "StubIgnitionSpec2",
            Reason::Updated => "Updated",
            Reason::UpToDate => "UpToDate",
            Reason::InvalidProviderSpec => "InvalidProviderSpec",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for Reason {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}
