//! The snapshot without a cluster (`serve --configmap-file`, `serve --dev`, `preview`):
//! a ConfigMap file or the embedded one, and the operator's word for the rest.

use std::path::Path;

use crate::core::snapshot::{self, Arch, BootImages, Snapshot};

#[derive(Debug, thiserror::Error)]
pub enum OfflineError {
    #[error("reading {path}: {cause}")]
    Read { path: String, cause: std::io::Error },
    #[error("{path}: {message}")]
    Parse { path: String, message: String },
    #[error("{0}")]
    BootImages(#[from] snapshot::BootImagesError),
    #[error("unknown architecture {0:?} (use amd64, arm64, ppc64le or s390x)")]
    Arch(String),
}

/// The offline inputs shared by `preview` and `serve --configmap-file`.
pub struct Offline<'a> {
    pub configmap_file: Option<&'a Path>,
    pub assume_masters_updated: bool,
    pub control_plane_arch: Option<&'a str>,
    pub multi_arch: bool,
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
            None => BootImages::from_document(snapshot::EMBEDDED_CONFIGMAP)?,
        };
        let arch = match self.control_plane_arch {
            Some(a) => Some(Arch::parse(a).ok_or_else(|| OfflineError::Arch(a.to_owned()))?),
            None => Arch::host(),
        };
        Ok(Snapshot::offline(
            boot_images,
            self.assume_masters_updated,
            arch,
            self.multi_arch,
        ))
    }
}
