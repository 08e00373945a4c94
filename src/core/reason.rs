//! The stable reason codes (behaviour §4): one word per outcome, in logs, metrics,
//! admission warnings, Events and `preview`. Their names and their list live here only; a
//! platform's own reasons are in the list too, each tagged with its platform.

use std::fmt;

/// One list makes the enum, [`Reason::ALL`], [`Reason::as_str`] (the variant's name is
/// the code) and [`Reason::platforms`] (`for <Platform> | <Platform>` after a name: only
/// those platforms' rules give it).
macro_rules! reasons {
    ($($(#[$doc:meta])* $name:ident $(for $($platform:ident)|+)?,)*) => {
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

            /// The platforms whose rules alone give this reason, by their variant's name in
            /// `Platform` (none: the decision's own, or any platform's). Names, so that the
            /// reasons stand below the platforms that give them.
            pub fn platforms(self) -> &'static [&'static str] {
                match self {
                    $(Reason::$name => {
                        let platforms: &'static [&'static str] = &[$($(stringify!($platform)),+)?];
                        platforms
                    })*
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
    RegionNotInStream for Aws,
    /// AWS: `ami.id` is not set (an ARN or filters select the AMI): left alone (OCPBUGS-57506).
    NoAMIID for Aws,
    /// AWS: an AMI that is not in the stream, whose owner EC2 has not told us yet (or cannot:
    /// no credentials, EC2 unreachable); moved once it is known.
    AMIUnclassified for Aws,
    /// AWS Marketplace: no image of the MachineSet's product at or below the stream's version.
    NoMarketplaceImage for Aws,
    /// AWS Marketplace: the AMI is a marketplace one, whose successor EC2 names, not the
    /// stream; the webhook writes such AMIs only with `--aws-marketplace` (the opt-in
    /// component aws-marketplace, whose admission policy lets it).
    MarketplaceNotEnabled for Aws,
    /// Azure: `securityProfile.settings.securityType` is set (Confidential VM, Trusted Launch).
    SecurityTypeUnsupported for Azure,
    CustomImage,
    /// vSphere: the MachineSet's workspace matches no failure domain of Infrastructure
    /// `cluster` (or it names none): no template can be chosen.
    NoFailureDomain for VSphere,
    /// vSphere: the stream's template is not imported in the MachineSet's failure domain yet;
    /// the MachineSet moves once the background importer has made it.
    TemplateNotImported for VSphere,
    /// OpenStack, Nutanix: the stream's image is not ready and alone under its name in
    /// Glance or Prism Central yet; the MachineSet moves once the background importer has
    /// made it.
    ImageNotImported for OpenStack | Nutanix,
    /// OpenStack, Nutanix: a ControlPlaneMachineSet, whose operator compares the
    /// providerSpec whole (a new image would replace every control-plane machine): left
    /// alone.
    ControlPlaneNotManaged for OpenStack | Nutanix,
    /// GCP: no disk is marked `boot: true`: there is no boot image to move.
    NoBootDisk for Gcp,
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
