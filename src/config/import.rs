//! The flags every importer shares, and those of `import`, the importers' own process.

use std::net::SocketAddr;
use std::time::Duration;

use clap::Args;

use super::parse::period;
use super::{NutanixArgs, OpenStackArgs, ReadArgs, VSphereArgs};
use crate::core::platforms::artifact::ArtifactMirror;

/// The importers: which run, and how (`import`; `serve` runs them in its own process).
#[derive(Debug, Args)]
pub struct ImporterArgs {
    /// Importers (vSphere, OpenStack, Nutanix): download the stream's artifacts from this
    /// HTTP(S) directory, each under its own file name (the last part of the stream's URL),
    /// instead of from the stream's host. The stream's checksums are checked all the same.
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_ARTIFACT_BASE_URL", value_parser = ArtifactMirror::parse)]
    pub artifact_base_url: Option<ArtifactMirror>,
    #[command(flatten)]
    pub vsphere: VSphereArgs,
    #[command(flatten)]
    pub openstack: OpenStackArgs,
    #[command(flatten)]
    pub nutanix: NutanixArgs,
}

/// `import`: the importers apart from the webhook, in the Deployment bootimage-importer.
#[derive(Debug, Args)]
pub struct ImportArgs {
    #[command(flatten)]
    pub read: ReadArgs,
    /// The Lease that elects the one replica that imports (in the pod's namespace).
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_IMPORTER_LEASE_NAME", default_value = crate::cluster::apis::IMPORTER_LEASE_NAME)]
    pub lease_name: String,
    /// The ConfigMap (in the pod's namespace) the images proved are published into, which
    /// the webhook reads and the admission policy takes as its parameter.
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_IMPORTED_IMAGES_CONFIGMAP", default_value = crate::cluster::apis::IMPORTED_IMAGES_CONFIGMAP)]
    pub imported_images_configmap: String,
    /// The pod's namespace (downward API) [default: the kubeconfig's namespace].
    #[arg(long, env = "POD_NAMESPACE")]
    pub pod_namespace: Option<String>,
    /// The Lease holder identity (downward API) [default: the host name].
    #[arg(long, env = "POD_NAME")]
    pub pod_name: Option<String>,
    /// A pass even without a change, to retire what is no longer named.
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_IMPORT_RESYNC", value_parser = period, default_value = "10m")]
    pub import_resync: Duration,
    /// Plain HTTP: /healthz, /readyz, /metrics.
    #[arg(
        long,
        env = "BOOTIMAGE_WEBHOOK_ADMIN_ADDRESS",
        default_value = "0.0.0.0:8080"
    )]
    pub admin_address: SocketAddr,
    #[command(flatten)]
    pub importers: ImporterArgs,
}
