//! What the importer keeps between passes (beside what the frame keeps), and what one pass
//! works on.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use crate::cluster::importer::Listed;
use crate::core::platforms::artifact::ArtifactMirror;
use crate::core::platforms::vsphere::{FailureDomain, VSphereInfra, VSphereTarget};

use super::access::Access;
use super::ova::OvaError;

/// The importer's settings (`--vsphere-*`).
#[derive(Debug, Clone)]
pub struct Settings {
    /// The Secret of vCenter credentials, `<server>.username` and `<server>.password`.
    pub credentials_namespace: String,
    pub credentials_name: String,
    pub ca_file: Option<PathBuf>,
    pub cache_dir: PathBuf,
    pub max_ova_bytes: u64,
    /// The longest an OVA download may take, end to end.
    pub download_timeout: Duration,
    pub retention: Duration,
    /// Where the OVA is downloaded from instead of the stream's host (`--artifact-base-url`).
    pub artifact_mirror: Option<ArtifactMirror>,
}

/// A template's identity: the same VM whichever failure domain's pass finds it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Identity {
    pub server: String,
    pub datacenter: String,
    pub folder: String,
    pub name: String,
}

impl Identity {
    pub fn new(fd: &FailureDomain, folder: &str, name: &str) -> Identity {
        Identity {
            server: fd.server.clone(),
            datacenter: fd.datacenter.trim_matches('/').to_owned(),
            folder: folder.trim_end_matches('/').to_owned(),
            name: name.to_owned(),
        }
    }
}

pub struct State {
    pub access: Access,
    /// Templates named like ours but not marked as ours, already logged.
    pub unmarked_reported: BTreeSet<Identity>,
    /// VMs of our failed imports that could not be deleted then.
    pub failed_imports: BTreeSet<String>,
    /// The OVA (location and checksum) found bad, and why: not downloaded again until the
    /// stream names another.
    pub bad_ova: Option<(String, OvaError)>,
}

/// One failure domain's template, as a pass sees it.
pub struct Want<'a> {
    pub infra: &'a VSphereInfra,
    pub fd: &'a FailureDomain,
    pub target: &'a VSphereTarget,
    /// Every stream's OVA: their templates are all current.
    pub targets: &'a [VSphereTarget],
    pub name: String,
    /// The objects whose decision waits for it.
    pub waiting: Vec<serde_json::Value>,
    /// The `tagIDs` of those: the new template gets them too.
    pub tag_ids: Vec<String>,
    /// The MachineSets, ControlPlaneMachineSets and Machines, when this replica leads and
    /// could list them (it then imports and deletes).
    pub listed: Option<&'a Listed>,
}
