//! The snapshot without a cluster (`serve --configmap-file`, `serve --dev`, `preview`):
//! a ConfigMap file or the embedded one, and the operator's word for the rest.

use std::path::Path;
use std::sync::Arc;

use crate::core::platforms::vsphere::VSphereInfra;
use crate::core::snapshot::{Arch, BootImages, Snapshot};

#[derive(Debug, thiserror::Error)]
pub enum OfflineError {
    #[error("reading {path}: {cause}")]
    Read { path: String, cause: std::io::Error },
    #[error("{path}: {message}")]
    Parse { path: String, message: String },
    #[error("{0}")]
    BootImages(#[from] crate::core::configmap::BootImagesError),
    #[error("{path}: {message}")]
    Infrastructure { path: String, message: String },
    #[error("unknown architecture {0:?} (use amd64, arm64, ppc64le or s390x)")]
    Arch(String),
}

/// The offline inputs shared by `preview` and `serve --configmap-file`.
pub struct Offline<'a> {
    pub configmap_file: Option<&'a Path>,
    pub assume_masters_updated: bool,
    pub control_plane_arch: Option<&'a str>,
    pub multi_arch: bool,
    /// Infrastructure `cluster` (`oc get infrastructure cluster -o yaml`): its vSphere
    /// failure domains, which a vSphere MachineSet's template depends on.
    pub infrastructure_file: Option<&'a Path>,
    /// `--user-data-secrets`: a MachineSet naming another Secret is shown as it would be
    /// on the cluster, left alone.
    pub user_data_secrets: &'a [String],
    /// `--aws-marketplace`.
    pub aws_marketplace: bool,
}

impl Offline<'_> {
    pub fn snapshot(&self) -> Result<Snapshot, OfflineError> {
        let boot_images = match self.configmap_file {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|cause| OfflineError::Read {
                    path: path.display().to_string(),
                    cause,
                })?;
                BootImages::from_document(&text).map_err(|e| OfflineError::Parse {
                    path: path.display().to_string(),
                    message: e.to_string(),
                })?
            }
            None => BootImages::from_document(crate::core::configmap::EMBEDDED_CONFIGMAP)?,
        };
        let arch = match self.control_plane_arch {
            Some(a) => Some(Arch::parse(a).ok_or_else(|| OfflineError::Arch(a.to_owned()))?),
            None => Arch::host(),
        };
        let snap = Snapshot::offline(
            boot_images,
            self.assume_masters_updated,
            arch,
            self.multi_arch,
        );
        let mut cluster = snap.cluster.clone();
        cluster.stubs = cluster
            .stubs
            .granting(self.user_data_secrets.iter().map(String::as_str));
        cluster.aws_marketplace = self.aws_marketplace;
        if let Some(path) = self.infrastructure_file {
            let vsphere = read_infrastructure(path)?;
            cluster.infrastructure_name = Some(vsphere.infra_id.clone());
            cluster.vsphere = Some(Arc::new(vsphere));
        }
        Ok(Snapshot::new(snap.boot_images, cluster))
    }
}

/// The infrastructure id and vSphere facts of an Infrastructure document.
fn read_infrastructure(path: &Path) -> Result<VSphereInfra, OfflineError> {
    let error = |message: String| OfflineError::Infrastructure {
        path: path.display().to_string(),
        message,
    };
    let text = std::fs::read_to_string(path).map_err(|cause| OfflineError::Read {
        path: path.display().to_string(),
        cause,
    })?;
    let doc = crate::core::document::parse_document(&text).map_err(|e| error(e.to_string()))?;
    crate::core::platforms::vsphere::infra(&doc)
        .ok_or_else(|| error("no status.infrastructureName".into()))
}
