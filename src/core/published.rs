//! What the importer publishes of the images it proved, in the ConfigMap only it writes,
//! and what the webhook reads back from it: the one word between the two identities.
//!
//! One key per image, `<platform>.<name>` (`openstack.ci-abc12-rhcos-9.8.20260428-0`),
//! so that the admission policy can ask "is this boot value listed?" with CEL's `in` on
//! `params.data`, CEL having no JSON parser. Its value is JSON: the cloud's id of the image
//! where the importer has it, the digest of the disk it verified, the release, the stream
//! and the architecture it was imported from, and vSphere's failure domain. One key per
//! platform the importer serves, `status.<platform>`, says it reported at all, and why it
//! could not import (`unavailable`), and, for vSphere, the look-alikes it left alone.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::arch::Arch;
use super::learned::{Imported, Learned, VSphereLearned};
use super::platforms::artifact::Artifact;
use super::platforms::vsphere::TemplateName;
use super::platforms::{Platform, Target};
use super::snapshot::Snapshot;

/// The importer platforms, by the prefix of their keys.
pub const PLATFORMS: [(Platform, &str); 3] = [
    (Platform::VSphere, "vsphere"),
    (Platform::OpenStack, "openstack"),
    (Platform::Nutanix, "nutanix"),
];

/// One image (vSphere: template) the importer proved ready.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    /// The cloud's own id of the image, where the importer has it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// `sha256:<hex>` of the disk as the cloud holds it, which the importer checked
    /// against the stream (`None`: no stream artifact of ours carries this name now).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub architecture: Option<String>,
    /// vSphere: the failure domain the template is in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_domain: Option<String>,
}

/// What the importer says of a platform besides its images.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
    /// vSphere: inventory paths named like ours without this cluster's marker.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub unmarked: BTreeSet<String>,
}

/// Whether `key` is a ConfigMap key (`[-._a-zA-Z0-9]+`, at most 253 characters).
pub fn is_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= 253
        && key
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_'))
}

/// The ConfigMap's data for what the importer learned of the platforms it `serves`, with
/// each image's release, stream, architecture and digest found in the snapshot's streams.
/// A name that cannot be a key is left out, and returned.
pub fn render(
    learned: &Learned,
    serves: &[Platform],
    snap: &Snapshot,
) -> (BTreeMap<String, String>, Vec<String>) {
    let mut data = BTreeMap::new();
    let mut left_out = Vec::new();
    let infra_id = snap.cluster.infrastructure_name.as_deref().unwrap_or("");
    for (platform, prefix) in PLATFORMS {
        if !serves.contains(&platform) {
            continue;
        }
        let artifacts = artifacts(snap, platform);
        let (records, status) = match platform {
            Platform::VSphere => vsphere_records(learned.vsphere.as_deref(), infra_id, &artifacts),
            Platform::OpenStack => {
                imported_records(learned.openstack.as_deref(), infra_id, &artifacts)
            }
            _ => imported_records(learned.nutanix.as_deref(), infra_id, &artifacts),
        };
        for (name, record) in records {
            let key = format!("{prefix}.{name}");
            if !is_key(&key) {
                left_out.push(name);
                continue;
            }
            data.insert(key, json(&record));
        }
        data.insert(format!("status.{prefix}"), json(&status));
    }
    (data, left_out)
}

fn json(value: &impl Serialize) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

/// Every artifact of a platform in the snapshot's streams: (stream, architecture, it).
fn artifacts(snap: &Snapshot, platform: Platform) -> Vec<(String, Arch, Artifact)> {
    let Some(boot) = snap.boot_images.as_deref() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for doc in boot.docs() {
        for &arch in &doc.architectures {
            if let Some(Ok(Target::VSphere(a) | Target::OpenStack(a) | Target::Nutanix(a))) =
                doc.target(arch, platform)
            {
                out.push((doc.name.clone(), arch, a.clone()));
            }
        }
    }
    out
}

/// A record of what a stream says of the artifact an image was made of.
fn record(stream: &str, arch: Arch, artifact: &Artifact) -> Record {
    let disk = artifact
        .uncompressed_sha256
        .as_deref()
        .unwrap_or(&artifact.sha256);
    Record {
        digest: Some(format!("sha256:{disk}")),
        release: Some(artifact.release.clone()),
        stream: Some(stream.to_owned()),
        architecture: Some(arch.rpm().to_owned()),
        ..Record::default()
    }
}

fn imported_records(
    imported: Option<&Imported>,
    infra_id: &str,
    artifacts: &[(String, Arch, Artifact)],
) -> (Vec<(String, Record)>, Status) {
    let Some(imported) = imported else {
        return (Vec::new(), Status::default());
    };
    let records = imported
        .images
        .iter()
        .map(|name| {
            let found = artifacts.iter().find(|(_, _, a)| {
                super::platforms::artifact::image_name(infra_id, &a.release) == *name
            });
            let record = found.map_or_else(Record::default, |(s, arch, a)| record(s, *arch, a));
            (name.clone(), record)
        })
        .collect();
    let status = Status {
        unavailable: imported.unavailable.clone(),
        unmarked: BTreeSet::new(),
    };
    (records, status)
}

fn vsphere_records(
    learned: Option<&VSphereLearned>,
    infra_id: &str,
    artifacts: &[(String, Arch, Artifact)],
) -> (Vec<(String, Record)>, Status) {
    let Some(learned) = learned else {
        return (Vec::new(), Status::default());
    };
    let records = learned
        .templates
        .iter()
        .map(|(fd, name)| {
            let found = artifacts.iter().find(|(_, _, a)| {
                let made = TemplateName {
                    infra_id,
                    release: &a.release,
                    failure_domain: fd,
                };
                made.format() == *name
            });
            let mut record = found.map_or_else(Record::default, |(s, arch, a)| record(s, *arch, a));
            record.failure_domain = Some(fd.clone());
            (name.clone(), record)
        })
        .collect();
    let status = Status {
        unavailable: learned.unavailable.clone(),
        unmarked: learned.unmarked.clone(),
    };
    (records, status)
}

/// `base` with what the ConfigMap's `data` says of each importer platform that reported
/// (a `status.<platform>` key): the webhook decides from this alone, never from the cloud.
pub fn read(data: &BTreeMap<String, String>, base: &Learned) -> Learned {
    let mut learned = base.clone();
    for (platform, prefix) in PLATFORMS {
        let Some(status) = data.get(&format!("status.{prefix}")) else {
            continue;
        };
        let status: Status = serde_json::from_str(status).unwrap_or_else(|e| Status {
            unavailable: Some(format!("the importer's status is not readable: {e}")),
            ..Status::default()
        });
        let own = format!("{prefix}.");
        let records = data.iter().filter_map(|(k, v)| {
            let name = k.strip_prefix(&own)?;
            let record: Record = serde_json::from_str(v).unwrap_or_default();
            Some((name.to_owned(), record))
        });
        match platform {
            Platform::VSphere => {
                learned.vsphere = Some(std::sync::Arc::new(VSphereLearned {
                    templates: records
                        .filter_map(|(name, r)| Some((r.failure_domain?, name)))
                        .collect(),
                    unavailable: status.unavailable,
                    unmarked: status.unmarked,
                }));
            }
            _ => {
                let imported = Some(std::sync::Arc::new(Imported {
                    images: records.map(|(name, _)| name).collect(),
                    unavailable: status.unavailable,
                }));
                if platform == Platform::OpenStack {
                    learned.openstack = imported;
                } else {
                    learned.nutanix = imported;
                }
            }
        }
    }
    learned
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::core::configmap::{BootImages, EMBEDDED_CONFIGMAP};
    use crate::core::snapshot::ClusterFacts;

    fn snapshot() -> Snapshot {
        let boot = BootImages::from_document(EMBEDDED_CONFIGMAP).unwrap();
        Snapshot::new(
            Some(Arc::new(boot)),
            ClusterFacts {
                infrastructure_name: Some("ci-abc12".into()),
                ..ClusterFacts::default()
            },
        )
    }

    fn release(snap: &Snapshot, platform: Platform) -> String {
        artifacts(snap, platform)
            .first()
            .map(|(_, _, a)| a.release.clone())
            .expect("the embedded stream has this platform's artifact")
    }

    #[test]
    fn what_the_importer_proved_reads_back_as_it_was_learned() {
        let snap = snapshot();
        let ours = format!("ci-abc12-rhcos-{}", release(&snap, Platform::OpenStack));
        let learned = Learned::default()
            .with_openstack(Imported {
                images: BTreeSet::from([ours.clone(), "ci-abc12-rhcos-custom".into()]),
                unavailable: Some("Glance said no".into()),
            })
            .with_vsphere(VSphereLearned {
                templates: BTreeSet::from([("fd-a".into(), "ci-abc12-rhcos-x-fd-a".into())]),
                unavailable: None,
                unmarked: BTreeSet::from(["/DC0/vm/look-alike".into()]),
            });
        let serves = [Platform::VSphere, Platform::OpenStack, Platform::Nutanix];
        let (data, left_out) = render(&learned, &serves, &snap);
        assert!(left_out.is_empty(), "{left_out:?}");
        let record: Record = serde_json::from_str(&data[&format!("openstack.{ours}")]).unwrap();
        assert_eq!(
            record.release.as_deref(),
            Some(release(&snap, Platform::OpenStack).as_str())
        );
        assert!(
            record.digest.as_deref().is_some_and(|d| d.len() == 71),
            "{record:?}"
        );
        assert_eq!(record.architecture.as_deref(), Some("x86_64"));
        assert!(record.stream.is_some());
        // A name no stream artifact makes is published without what the stream says.
        let custom: Record =
            serde_json::from_str(&data["openstack.ci-abc12-rhcos-custom"]).unwrap();
        assert_eq!(custom, Record::default());
        // Nutanix is served but learned nothing yet: it reported, with no image.
        assert_eq!(data["status.nutanix"], "{}");

        let read = read(&data, &Learned::default());
        assert_eq!(read.openstack.as_deref(), learned.openstack.as_deref());
        assert_eq!(read.vsphere.as_deref(), learned.vsphere.as_deref());
        assert_eq!(read.nutanix.as_deref(), Some(&Imported::default()));
    }

    #[test]
    fn a_platform_the_importer_does_not_serve_is_neither_published_nor_read() {
        let snap = snapshot();
        let learned = Learned::default().with_nutanix(Imported::default());
        let (data, _) = render(&learned, &[Platform::OpenStack], &snap);
        assert!(data.keys().all(|k| k.ends_with("openstack")), "{data:?}");
        let base = Learned::default().with_nutanix(Imported {
            images: BTreeSet::from(["kept".into()]),
            unavailable: None,
        });
        let read = read(&BTreeMap::new(), &base);
        assert_eq!(read.nutanix, base.nutanix);
        assert!(read.openstack.is_none());
    }

    #[test]
    fn a_name_that_cannot_be_a_key_is_left_out_and_told() {
        assert!(is_key("openstack.ci-abc12-rhcos-9.8.20260428-0"));
        for bad in ["", "vsphere.a b", "openstack.a/b", "nutanix.é"] {
            assert!(!is_key(bad), "{bad}");
        }
        let learned = Learned::default().with_openstack(Imported {
            images: BTreeSet::from(["a b".into()]),
            unavailable: None,
        });
        let (data, left_out) = render(&learned, &[Platform::OpenStack], &snapshot());
        assert_eq!(left_out, vec!["a b".to_owned()]);
        assert_eq!(data.len(), 1, "{data:?}");
    }
}
