//! What the cluster side tells the platforms' rules besides the stream: what it learned
//! in the background (EC2's answers, the images each importer found ready) and the
//! vSphere failure domains of Infrastructure. Plain data, below the rules that read it, so
//! that the snapshot, the facts and the rules all name it without naming each other.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// What the cluster side learned in the background for the platforms' rules (EC2's
/// answers about AMIs, the images the importers found ready): the request path only reads
/// it.
#[derive(Debug, Clone, Default)]
pub struct Learned {
    pub aws: Option<Arc<AwsLearned>>,
    /// The vSphere templates the importer found ready.
    pub vsphere: Option<Arc<VSphereLearned>>,
    /// The Glance images the importer found usable.
    pub openstack: Option<Arc<Imported>>,
    /// The Prism Central images the importer found usable.
    pub nutanix: Option<Arc<Imported>>,
    /// Moves whenever anything here changes: part of the snapshot id.
    pub generation: u64,
}

impl Learned {
    /// These facts with EC2's answers replaced.
    pub fn with_aws(&self, aws: AwsLearned) -> Learned {
        Learned {
            aws: Some(Arc::new(aws)),
            generation: self.generation + 1,
            ..self.clone()
        }
    }

    /// These facts with the vSphere importer's templates replaced.
    pub fn with_vsphere(&self, vsphere: VSphereLearned) -> Learned {
        Learned {
            vsphere: Some(Arc::new(vsphere)),
            generation: self.generation + 1,
            ..self.clone()
        }
    }

    /// These facts with the OpenStack importer's images replaced.
    pub fn with_openstack(&self, openstack: Imported) -> Learned {
        Learned {
            openstack: Some(Arc::new(openstack)),
            generation: self.generation + 1,
            ..self.clone()
        }
    }

    /// These facts with the Nutanix importer's images replaced.
    pub fn with_nutanix(&self, nutanix: Imported) -> Learned {
        Learned {
            nutanix: Some(Arc::new(nutanix)),
            generation: self.generation + 1,
            ..self.clone()
        }
    }
}

/// What EC2 said, learned in the background and read here.
#[derive(Debug, Clone, Default)]
pub struct AwsLearned {
    /// `DescribeImages(ImageIds=[ami])` in a region, by (region, AMI).
    pub images: BTreeMap<(String, String), Described>,
    /// `DescribeImages(Owners=[aws-marketplace], name=*<product>*)`, by (region, product).
    pub marketplace: BTreeMap<(String, String), Vec<MarketImage>>,
    /// Why EC2 cannot be asked now (no credentials, unreachable), for messages.
    pub unavailable: Option<String>,
}

impl AwsLearned {
    /// The product whose marketplace images, as EC2 listed them, include this AMI: an AMI
    /// we moved a MachineSet to is known without asking again.
    pub(crate) fn listed_product(&self, region: &str, ami: &str) -> Option<&str> {
        self.marketplace
            .iter()
            .find(|((r, _), images)| r == region && images.iter().any(|i| i.id == ami))
            .map(|((_, product), _)| product.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Described {
    Found {
        owner: String,
        name: String,
    },
    /// EC2 knows no such AMI in that region.
    NotFound,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarketImage {
    pub id: String,
    pub description: String,
    /// ISO 8601, as EC2 gives it: compares as a string.
    pub creation_date: String,
}

/// A failure domain of Infrastructure `cluster`'s `spec.platformSpec.vsphere`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FailureDomain {
    pub name: String,
    pub region: String,
    pub zone: String,
    pub server: String,
    /// The port of `server`'s entry in `vcenters` (absent: HTTPS's own).
    pub port: Option<u16>,
    pub datacenter: String,
    pub datastore: String,
    pub compute_cluster: String,
    pub resource_pool: String,
    pub folder: String,
    pub networks: Vec<String>,
    /// `zoneAffinity.hostGroup.vmGroup`, empty when none.
    pub vm_group: String,
}

/// What the vSphere rule needs from Infrastructure `cluster`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VSphereInfra {
    /// `status.infrastructureName`: the prefix of every template name.
    pub infra_id: String,
    pub failure_domains: Vec<FailureDomain>,
}

/// What the importer found ready in vCenter: (failure domain, template name) pairs of
/// templates it imported (or found imported) and marked as templates.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VSphereLearned {
    pub templates: BTreeSet<(String, String)>,
    /// Why nothing can be imported now (no credentials, vCenter unreachable, a bad
    /// checksum), for `TemplateNotImported` messages.
    pub unavailable: Option<String>,
    /// Inventory paths of VMs in the failure domains' folders named like ours but carrying
    /// no marker of this cluster (found by `status`): never deleted or used.
    pub unmarked: BTreeSet<String>,
}

impl VSphereLearned {
    pub(crate) fn is_ready(&self, failure_domain: &str, template: &str) -> bool {
        self.templates
            .contains(&(failure_domain.to_owned(), template.to_owned()))
    }

    pub(crate) fn imported_by_us(&self, template: &str) -> bool {
        self.templates.iter().any(|(_, name)| name == template)
    }
}

/// What an importer found in its cloud (Glance, Prism Central): the names of images of
/// ours that are ready and alone under their name, which a MachineSet may be given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Imported {
    pub images: BTreeSet<String>,
    /// Why nothing can be imported now (no credentials, the cloud unreachable, a bad
    /// checksum), for the messages of the MachineSets that wait.
    pub unavailable: Option<String>,
}
