//! The flags of OpenStack's importer.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::parse::period;
use crate::core::platforms::artifact::ArtifactMirror;

/// OpenStack's importer (`manifests/components/openstack-import`).
#[derive(Debug, Args)]
pub struct OpenStackArgs {
    /// OpenStack: import the stream's qcow2 into Glance as an image of this cluster (the
    /// Lease holder; every replica looks for the images). Needs the machine API's
    /// `openstack-cloud-credentials` Secret.
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_OPENSTACK_IMPORT")]
    pub openstack_import: bool,
    /// Where the downloaded qcow2 is kept (an emptyDir).
    #[arg(
        long,
        env = "BOOTIMAGE_WEBHOOK_OPENSTACK_IMAGE_CACHE",
        default_value = "/var/cache/bootimage-webhook-openstack"
    )]
    pub openstack_image_cache: PathBuf,
    /// The largest qcow2.gz downloaded, and the largest qcow2 inflated from it, in bytes.
    #[arg(
        long,
        env = "BOOTIMAGE_WEBHOOK_OPENSTACK_IMAGE_MAX_BYTES",
        default_value = "4294967296"
    )]
    pub openstack_image_max_bytes: u64,
    /// The longest a qcow2.gz download may take, end to end (then it is given up and tried
    /// again later).
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_OPENSTACK_IMAGE_DOWNLOAD_TIMEOUT", value_parser = period, default_value = "1h")]
    pub openstack_image_download_timeout: Duration,
    /// The longest Glance may take to make an uploaded image active.
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_OPENSTACK_IMAGE_ACTIVE_TIMEOUT", value_parser = period, default_value = "10m")]
    pub openstack_image_active_timeout: Duration,
    /// OpenStack: an image this webhook imported that no MachineSet, ControlPlaneMachineSet
    /// or Machine has named for this long is deleted by the Lease holder.
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_OPENSTACK_IMAGE_RETENTION", value_parser = period, default_value = "7d")]
    pub openstack_image_retention: Duration,
}

impl OpenStackArgs {
    pub fn settings(&self, mirror: Option<&ArtifactMirror>) -> crate::cluster::openstack::Settings {
        crate::cluster::openstack::Settings {
            cache_dir: self.openstack_image_cache.clone(),
            max_bytes: self.openstack_image_max_bytes,
            download_timeout: self.openstack_image_download_timeout,
            active_timeout: self.openstack_image_active_timeout,
            artifact_mirror: mirror.cloned(),
        }
    }
}
