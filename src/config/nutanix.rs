//! The flags of Nutanix's importer.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::parse::period;
use crate::core::platforms::artifact::ArtifactMirror;

/// Nutanix's importer (`manifests/components/nutanix-import`).
#[derive(Debug, Args)]
pub struct NutanixArgs {
    /// Nutanix: import the stream's qcow2 into Prism Central as an image of this cluster (the
    /// Lease holder; every replica looks). Needs the machine API's `nutanix-credentials`.
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_NUTANIX_IMPORT")]
    pub nutanix_import: bool,
    /// Where the qcow2 is kept when it is uploaded from here (an emptyDir).
    #[arg(
        long,
        env = "BOOTIMAGE_WEBHOOK_NUTANIX_IMAGE_CACHE",
        default_value = "/var/cache/bootimage-webhook-nutanix"
    )]
    pub nutanix_image_cache: PathBuf,
    /// The largest qcow2 downloaded here, in bytes.
    #[arg(
        long,
        env = "BOOTIMAGE_WEBHOOK_NUTANIX_IMAGE_MAX_BYTES",
        default_value = "17179869184"
    )]
    pub nutanix_image_max_bytes: u64,
    /// The longest a qcow2 download here may take, end to end.
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_NUTANIX_IMAGE_DOWNLOAD_TIMEOUT", value_parser = period, default_value = "2h")]
    pub nutanix_image_download_timeout: Duration,
    /// Nutanix: an image this webhook imported that no MachineSet, ControlPlaneMachineSet
    /// or Machine has named for this long is deleted by the Lease holder.
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_NUTANIX_IMAGE_RETENTION", value_parser = period, default_value = "7d")]
    pub nutanix_image_retention: Duration,
}

impl NutanixArgs {
    pub fn settings(&self, mirror: Option<&ArtifactMirror>) -> crate::cluster::nutanix::Settings {
        crate::cluster::nutanix::Settings {
            cache_dir: Some(self.nutanix_image_cache.clone()),
            max_bytes: self.nutanix_image_max_bytes,
            download_timeout: self.nutanix_image_download_timeout,
            artifact_mirror: mirror.cloned(),
            ..Default::default()
        }
    }
}
