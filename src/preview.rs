//! `preview`: the webhook's decision, offline, as one JSON object on stdout.

use std::path::Path;

use serde_json::{Value, json};

use crate::decision::{self, Decision};
use crate::snapshot::{self, Arch, BootImages, Snapshot};

#[derive(Debug, thiserror::Error)]
pub enum PreviewError {
    #[error("reading {path}: {cause}")]
    Read { path: String, cause: std::io::Error },
    #[error("{path}: {message}")]
    Parse { path: String, message: String },
    #[error("{path} is not a JSON/YAML object")]
    NotObject { path: String },
    #[error("{0}")]
    BootImages(#[from] snapshot::BootImagesError),
    #[error("unknown architecture {0:?} (use amd64, arm64, ppc64le or s390x)")]
    Arch(String),
    #[error("the patch does not apply to the MachineSet (a bug): {0}")]
    Apply(String),
}

/// The offline inputs shared by `preview` and `serve --configmap-file`.
pub struct Offline<'a> {
    pub configmap_file: Option<&'a Path>,
    pub assume_masters_updated: bool,
    pub control_plane_arch: Option<&'a str>,
    pub multi_arch: bool,
}

impl Offline<'_> {
    pub fn snapshot(&self) -> Result<Snapshot, PreviewError> {
        let boot_images = match self.configmap_file {
            Some(path) => {
                BootImages::from_document(&read(path)?).map_err(|e| PreviewError::Parse {
                    path: path.display().to_string(),
                    message: e.to_string(),
                })?
            }
            None => BootImages::from_document(snapshot::EMBEDDED_CONFIGMAP)?,
        };
        let arch = match self.control_plane_arch {
            Some(a) => Some(Arch::parse(a).ok_or_else(|| PreviewError::Arch(a.to_owned()))?),
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

fn read(path: &Path) -> Result<String, PreviewError> {
    std::fs::read_to_string(path).map_err(|cause| PreviewError::Read {
        path: path.display().to_string(),
        cause,
    })
}

/// The MachineSet from a file, YAML or JSON. A YAML stream may carry other objects beside
/// it (a MachineAutoscaler, say): the one MachineSet is taken.
pub fn read_object(path: &Path) -> Result<Value, PreviewError> {
    let text = read(path)?;
    let parse_error = |message: String| PreviewError::Parse {
        path: path.display().to_string(),
        message,
    };
    let mut docs = snapshot::parse_documents(&text).map_err(parse_error)?;
    docs.retain(|d| !d.is_null());
    let machinesets: Vec<usize> = (0..docs.len())
        .filter(|&i| docs[i].get("kind").and_then(Value::as_str) == Some("MachineSet"))
        .collect();
    let value = match machinesets.as_slice() {
        [i] => docs.swap_remove(*i),
        [] if docs.len() == 1 => docs.swap_remove(0),
        [] => {
            return Err(parse_error(format!(
                "no MachineSet among its {} documents",
                docs.len()
            )));
        }
        many => {
            return Err(parse_error(format!(
                "holds {} MachineSets; give one",
                many.len()
            )));
        }
    };
    if !value.is_object() {
        return Err(PreviewError::NotObject {
            path: path.display().to_string(),
        });
    }
    Ok(value)
}

/// `{"reason", "message", "patch", "machineSet"}`: the MachineSet after the patch.
pub fn render(mut machineset: Value, decision: &Decision) -> Result<Value, PreviewError> {
    json_patch::patch(&mut machineset, &decision.patch.0)
        .map_err(|e| PreviewError::Apply(e.to_string()))?;
    Ok(json!({
        "reason": decision.reason,
        "message": decision.message,
        "patch": decision.patch,
        "machineSet": machineset,
    }))
}

pub fn run(machineset_file: &Path, offline: &Offline<'_>) -> Result<Value, PreviewError> {
    let snap = offline.snapshot()?;
    let ms = read_object(machineset_file)?;
    let d = decision::decide(&ms, &snap);
    render(ms, &d)
}
