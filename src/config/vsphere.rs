//! The flags of vSphere's importer, and how vCenter is reached (the importer, `status`).

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::parse::period;
use crate::core::platforms::artifact::ArtifactMirror;

/// vSphere's importer (`manifests/components/vsphere-import`).
#[derive(Debug, Args)]
pub struct VSphereArgs {
    /// vSphere: import the stream's OVA as a template in each failure domain (the Lease
    /// holder; every replica looks for the templates). Needs the credentials Secret.
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_VSPHERE_IMPORT")]
    pub vsphere_import: bool,
    #[command(flatten)]
    pub access: VSphereAccessArgs,
    /// Where the downloaded OVA is kept (an emptyDir).
    #[arg(
        long,
        env = "BOOTIMAGE_WEBHOOK_VSPHERE_OVA_CACHE",
        default_value = "/var/cache/bootimage-webhook"
    )]
    pub vsphere_ova_cache: PathBuf,
    /// The largest OVA downloaded, in bytes.
    #[arg(
        long,
        env = "BOOTIMAGE_WEBHOOK_VSPHERE_OVA_MAX_BYTES",
        default_value = "4294967296"
    )]
    pub vsphere_ova_max_bytes: u64,
    /// The longest an OVA download may take, end to end (then it is given up and tried
    /// again later).
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_VSPHERE_OVA_DOWNLOAD_TIMEOUT", value_parser = period, default_value = "1h")]
    pub vsphere_ova_download_timeout: Duration,
    /// vSphere: a template this webhook imported that no MachineSet or
    /// ControlPlaneMachineSet has named for this long is deleted by the Lease holder.
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_VSPHERE_TEMPLATE_RETENTION", value_parser = period, default_value = "7d")]
    pub vsphere_template_retention: Duration,
}

/// How vCenter is reached (the importer, and `status`).
#[derive(Debug, Args)]
pub struct VSphereAccessArgs {
    /// The Secret of vCenter credentials (`<server>.username`, `<server>.password`), as
    /// namespace/name.
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_VSPHERE_CREDENTIALS_SECRET", value_parser = namespaced_name, default_value = "kube-system/vsphere-creds")]
    pub vsphere_credentials_secret: String,
    /// PEM bundle of CAs trusted for vCenter and the OVA download, beside the system's.
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_VSPHERE_CA_FILE")]
    pub vsphere_ca_file: Option<PathBuf>,
}

impl VSphereAccessArgs {
    /// The Secret's namespace and name.
    pub fn secret(&self) -> (&str, &str) {
        self.vsphere_credentials_secret
            .split_once('/')
            .unwrap_or_default()
    }
}

impl VSphereArgs {
    /// The importer's settings, downloading from `mirror` when given (`--artifact-base-url`).
    pub fn settings(&self, mirror: Option<&ArtifactMirror>) -> crate::cluster::vsphere::Settings {
        let (namespace, name) = self.access.secret();
        crate::cluster::vsphere::Settings {
            credentials_namespace: namespace.to_owned(),
            credentials_name: name.to_owned(),
            ca_file: self.access.vsphere_ca_file.clone(),
            cache_dir: self.vsphere_ova_cache.clone(),
            max_ova_bytes: self.vsphere_ova_max_bytes,
            download_timeout: self.vsphere_ova_download_timeout,
            retention: self.vsphere_template_retention,
            artifact_mirror: mirror.cloned(),
        }
    }
}

/// A `namespace/name` flag.
fn namespaced_name(s: &str) -> Result<String, String> {
    match s.split_once('/') {
        Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
            Ok(s.to_owned())
        }
        _ => Err(format!("{s:?} is not namespace/name")),
    }
}
