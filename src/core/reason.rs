//! The stable reason codes (behaviour §4): one word per outcome, in logs, metrics,
//! admission warnings, Events and `preview`. Their names and their list live here only.

use std::fmt;

/// One list makes the enum, [`Reason::ALL`] and [`Reason::as_str`] (the variant's name is
/// the code).
macro_rules! reasons {
    ($($(#[$doc:meta])* $name:ident,)*) => {
        /// Stable reason codes (behaviour §4), used in logs, metrics, warnings and events.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Reason {
            $($(#[$doc])* $name,)*
        }

        impl Reason {
            pub const ALL: [Reason; [$(Reason::$name),*].len()] = [$(Reason::$name),*];

            pub fn as_str(self) -> &'static str {
                match self {
                    $(Reason::$name => stringify!($name),)*
                }
            }
        }
    };
}

reasons! {
    NotApplicable,
    OptedOut,
    OwnedByController,
    /// `status.authoritativeAPI` is `ClusterAPI` or `Migrating`: the Cluster API copy is (or
    /// is becoming) authoritative, and writing the Machine API copy would fight the migration.
    ClusterAPIAuthoritative,
    /// Hive made the MachineSet from a MachinePool (`hive.openshift.io/machine-pool`) and
    /// writes it back: its boot image is the MachinePool's, not ours to set.
    ManagedByHive,
    UnsupportedOSStream,
    Windows,
    UpgradeInProgress,
    NotReady,
    InvalidArchitecture,
    ArchitectureUnknown,
    UnsupportedPlatform,
    /// The platform does not manage boot images of this architecture (Azure: ppc64le, s390x).
    UnsupportedArchitecture,
    NoImageInStream,
    /// AWS: the stream has no AMI for the MachineSet's region.
    RegionNotInStream,
    /// AWS: `ami.id` is not set (an ARN or filters select the AMI): left alone (OCPBUGS-57506).
    NoAMIID,
    /// AWS: an AMI that is not in the stream, whose owner EC2 has not told us yet (or cannot:
    /// no credentials, EC2 unreachable); moved once it is known.
    AMIUnclassified,
    /// AWS Marketplace: no image of the MachineSet's product at or below the stream's version.
    NoMarketplaceImage,
    /// AWS Marketplace: the AMI is a marketplace one, whose successor EC2 names, not the
    /// stream; the webhook writes such AMIs only with `--aws-marketplace` (the opt-in
    /// component aws-marketplace, whose admission policy lets it).
    MarketplaceNotEnabled,
    /// Azure: `securityProfile.settings.securityType` is set (Confidential VM, Trusted Launch).
    SecurityTypeUnsupported,
    CustomImage,
    /// vSphere: the MachineSet's workspace matches no failure domain of Infrastructure
    /// `cluster` (or it names none): no template can be chosen.
    NoFailureDomain,
    /// vSphere: the stream's template is not imported in the MachineSet's failure domain yet;
    /// the MachineSet moves once the background importer has made it.
    TemplateNotImported,
    /// No disk is marked `boot: true`: there is no boot image to move.
    NoBootDisk,
    /// The user-data Secret's stub Ignition is not spec 3: new images cannot boot with it.
    StubIgnitionSpec2,
    /// The user-data Secret the MachineSet names has not been read yet; the MachineSet is
    /// touched once it has.
    StubIgnitionUnknown,
    /// The user-data Secret holds no Ignition config whose version can be read.
    StubIgnitionUnreadable,
    /// The user-data Secret the MachineSet names does not exist.
    UserDataSecretMissing,
    /// The user-data Secret the MachineSet names is outside the webhook's grant
    /// (`--user-data-secrets`, the Role's `resourceNames`): it is never read, so its stub
    /// cannot be checked, and the boot image stays.
    UserDataSecretNotGranted,
    /// Another writer put the old boot image back more than [`REVERT_LIMIT`] times after it was
    /// set to this target: its writes are left as sent until the target changes.
    ///
    /// [`REVERT_LIMIT`]: crate::core::decision::REVERT_LIMIT
    RevertLoop,
    Updated,
    UpToDate,
    /// The providerSpec is malformed where we must read it (disks not an array, image
    /// not a string, ...): left alone, and said so.
    InvalidProviderSpec,
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
