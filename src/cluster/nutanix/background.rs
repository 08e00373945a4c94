//! Nutanix behind the shared pass of [`importer`](crate::cluster::importer): the stream's
//! qcow2s it wants under the cluster's names, and Prism Central's answers to the pass's
//! questions (look, import, list ours, retire), each through [`Importer`].

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::cluster::apis::{self, Call};
use crate::cluster::importer::adapter::{self, Adapter, Found, Ours, Want as Asked};
use crate::cluster::importer::{Background as Shared, provider_value};
use crate::cluster::learned::LearnedCell;
use crate::core::arch::Arch;
use crate::core::learned::Imported;
use crate::core::platforms::artifact::Artifact;
use crate::core::platforms::{Platform, Target};
use crate::core::snapshot::Snapshot;

use super::access::{self, Credentials};
use super::error::NutanixError;
use super::import::{Importer, Look, Settings, Want};
use super::marker::image_name;

/// Nutanix's importer on the frame.
pub type Background = Shared<Nutanix>;
/// An image the stream wants, of its qcow2.
pub type Wanted = adapter::Wanted<Source>;
/// What a pass works on.
pub type Work = adapter::Work<Source>;

/// The stream's qcow2 an image is made of, and the stream's name for the marker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    pub stream: String,
    pub artifact: Artifact,
}

/// Prism Central behind the shared pass.
pub struct Nutanix {
    settings: Settings,
    /// The artifact found bad (its checksum, its size) and why: not fetched again until the
    /// stream names another.
    bad: Option<(Artifact, NutanixError)>,
}

/// The stream's Nutanix qcow2s the cluster's machines may boot (the control plane's
/// architecture, or every one on a multi-arch cluster), by image name; `None` when this is
/// not a Nutanix cluster with an infrastructure id and a stream with a qcow2.
pub fn work(snap: &Snapshot) -> Option<Work> {
    if snap.cluster.platform.as_deref() != Some(Platform::Nutanix.name()) {
        return None;
    }
    let infra_id = snap.cluster.infrastructure_name.clone()?;
    let boot = snap.boot_images.as_ref()?;
    let arches: Vec<Arch> = match snap.cluster.multi_arch {
        true => boot.architectures.iter().copied().collect(),
        false => vec![snap.cluster.control_plane_arch.unwrap_or(Arch::Amd64)],
    };
    let mut by_name: BTreeMap<String, Vec<(Arch, String, Artifact)>> = BTreeMap::new();
    for doc in boot.docs() {
        for &arch in &arches {
            let Some(Ok(Target::Nutanix(a))) = doc.target(arch, Platform::Nutanix) else {
                continue;
            };
            let name = image_name(&infra_id, &a.release);
            let entry = (arch, doc.name.clone(), a.clone());
            by_name.entry(name).or_default().push(entry);
        }
    }
    let mut work = Work::new(infra_id);
    for (name, targets) in by_name {
        let (first_arch, stream, first) = &targets[0];
        match targets.iter().find(|(_, _, a)| a.sha256 != first.sha256) {
            Some((other_arch, _, _)) => {
                let why = format!(
                    "the stream's {first_arch} and {other_arch} qcow2s of RHCOS {} would both be the Prism Central image {name}, whose name has no architecture: neither is imported",
                    first.release
                );
                work.clashes.insert(name, why);
            }
            None => work.wanted.push(Wanted {
                name,
                target: Source {
                    stream: stream.clone(),
                    artifact: first.clone(),
                },
                arches: targets.iter().map(|(a, _, _)| *a).collect(),
                arch: None,
            }),
        }
    }
    (!work.wanted.is_empty() || !work.clashes.is_empty()).then_some(work)
}

/// Which of the stream's images are usable in Prism Central, looked at without changing
/// anything (`status`); `None` when this is not a Nutanix cluster with a qcow2 in its stream.
pub async fn look(client: &kube::Client, snap: &Snapshot) -> Option<Imported> {
    crate::cluster::importer::look::<Nutanix>(client, snap).await
}

/// The images an object names: its `image`'s name and uuid.
fn named(object: &Value) -> Vec<String> {
    let Some(value) = provider_value(object) else {
        return Vec::new();
    };
    [value.pointer("/image/name"), value.pointer("/image/uuid")]
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Whether only a person can unblock the import: a bad artifact, or a foreign image under
/// our name or one the machine API could take for it.
fn warns(e: &NutanixError) -> bool {
    e.is_bad_artifact()
        || matches!(
            e,
            NutanixError::NameTaken { .. }
                | NutanixError::NearName { .. }
                | NutanixError::LookAlike { .. }
        )
}

fn want<'a>(asked: &Asked<'a, Source>) -> Want<'a> {
    Want {
        infra_id: asked.infra_id,
        stream: &asked.wanted.target.stream,
        artifact: &asked.wanted.target.artifact,
        named: asked.named,
    }
}

/// What Prism Central holds, as the pass sees it.
async fn found(
    client: &Importer,
    asked: &Asked<'_, Source>,
) -> Result<Found<NutanixError>, NutanixError> {
    let look: Look = client.look(&want(asked)).await?;
    Ok(match (look.usable(), look.blocked(&asked.wanted.name)) {
        (Some(_), _) => Found::Usable,
        (None, Some(e)) => Found::Blocked(e),
        (None, None) => Found::Absent,
    })
}

impl Adapter for Nutanix {
    type Settings = Settings;
    type Target = Source;
    type Credentials = Credentials;
    type Client = Importer;
    type Error = NutanixError;

    const TROUBLE: &'static str =
        "cannot import the Nutanix image; those MachineSets keep their image until it is imported";
    const AGAIN: &'static str =
        "Prism Central answers again: Nutanix images are checked and imported";
    const MACHINES: Call = apis::NUTANIX_MACHINE;

    fn new(settings: Settings) -> Nutanix {
        Nutanix {
            settings,
            bad: None,
        }
    }

    fn named(object: &Value) -> Vec<String> {
        named(object)
    }

    fn work(snap: &Snapshot) -> Option<Work> {
        work(snap)
    }

    fn publish(cell: &LearnedCell, learned: Imported) {
        cell.publish(|now| now.with_nutanix(learned.clone()));
    }

    async fn read(kube: &kube::Client) -> Result<Credentials, NutanixError> {
        access::read(kube).await
    }

    fn connect(creds: &Credentials) -> Result<Importer, NutanixError> {
        access::connect(creds)
    }

    fn same(had: &Credentials, now: &Credentials) -> bool {
        had.endpoint == now.endpoint && had.auth == now.auth
    }

    async fn look(
        &mut self,
        client: &mut Importer,
        asked: &Asked<'_, Source>,
    ) -> Result<Found<NutanixError>, NutanixError> {
        found(client, asked).await
    }

    async fn glance(
        client: &mut Importer,
        asked: &Asked<'_, Source>,
    ) -> Result<Found<NutanixError>, NutanixError> {
        found(client, asked).await
    }

    async fn ensure(
        &mut self,
        client: &mut Importer,
        asked: &Asked<'_, Source>,
        _current: Option<&str>,
    ) -> Result<(), NutanixError> {
        let artifact = &asked.wanted.target.artifact;
        if let Some((bad, e)) = self.bad.as_ref().filter(|(a, _)| a == artifact) {
            tracing::debug!(image = %asked.wanted.name, url = %bad.location, "the stream's qcow2 was found bad: not fetched again");
            return Err(e.clone());
        }
        match client.ensure(&self.settings, &want(asked)).await {
            Ok(_) => Ok(()),
            Err(e) => {
                if e.is_bad_artifact() {
                    self.bad = Some((artifact.clone(), e.clone()));
                }
                Err(e)
            }
        }
    }

    fn warns(e: &NutanixError) -> bool {
        warns(e)
    }

    async fn ours(client: &mut Importer, infra_id: &str) -> Result<Vec<Ours>, NutanixError> {
        let images = client.ours(infra_id).await?;
        Ok(images
            .into_iter()
            .map(|i| Ours {
                complete: i.state == "COMPLETE",
                // Prism Central lists no image whose import failed: `ensure` clears them.
                stopped: false,
                name: i.name.unwrap_or_default(),
                id: i.uuid,
            })
            .collect())
    }

    async fn retire(
        client: &mut Importer,
        id: &str,
        infra_id: &str,
        named: &BTreeSet<String>,
    ) -> Result<(), NutanixError> {
        client.retire(id, infra_id, named).await
    }

    fn kept(e: &NutanixError) -> bool {
        matches!(e, NutanixError::Busy { .. })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::cluster::importer::waiting_for;
    use crate::core::configmap::{BootImages, EMBEDDED_CONFIGMAP};
    use crate::core::platforms::nutanix::NutanixLearned;
    use crate::core::reason::Reason;

    const INFRA: &str = "ntnx-x7k2p";
    const RELEASE: &str = "9.8.20260428-0";

    fn snapshot(platform: &str, multi_arch: bool) -> Snapshot {
        let boot = BootImages::from_document(EMBEDDED_CONFIGMAP).unwrap();
        let mut snap = Snapshot::offline(boot, true, Some(Arch::Amd64), multi_arch);
        snap.cluster.platform = Some(platform.into());
        snap.cluster.infrastructure_name = Some(INFRA.into());
        snap
    }

    fn machineset(name: &str, image: Value) -> Value {
        json!({"apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet",
            "metadata": {"name": name, "namespace": "openshift-machine-api"},
            "spec": {"template": {"spec": {"providerSpec": {"value": {
                "apiVersion": "machine.openshift.io/v1", "kind": "NutanixMachineProviderConfig",
                "image": image, "userDataSecret": {"name": "worker-user-data"}}}}}}})
    }

    #[test]
    fn the_control_planes_qcow2_is_wanted_under_the_clusters_name() {
        let work = work(&snapshot("Nutanix", false)).unwrap();
        assert_eq!(work.infra_id, INFRA);
        assert!(work.clashes.is_empty());
        let [wanted] = &work.wanted[..] else {
            panic!("{work:?}")
        };
        assert_eq!(wanted.name, format!("{INFRA}-rhcos-{RELEASE}"));
        assert_eq!(wanted.arches, [Arch::Amd64].into());
        assert_eq!(wanted.target.stream, "rhcos-4.21");
        assert_eq!(wanted.target.artifact.release, RELEASE);
        assert!(
            wanted
                .target
                .artifact
                .location
                .ends_with("nutanix.x86_64.qcow2")
        );
        assert_eq!(wanted.target.artifact.sha256.len(), 64);
        assert!(work.current(&wanted.name));
        assert!(!work.current(&format!("{INFRA}-rhcos-9.6.20250101-0")));
        // The stream has a Nutanix qcow2 for x86_64 only: a multi-arch cluster wants it alone.
        let multi = super::work(&snapshot("Nutanix", true)).unwrap();
        assert_eq!(multi.wanted, work.wanted);
        // Not Nutanix, or no infrastructure id yet: nothing to do.
        assert_eq!(super::work(&snapshot("OpenStack", false)), None);
        let mut unnamed = snapshot("Nutanix", false);
        unnamed.cluster.infrastructure_name = None;
        assert_eq!(super::work(&unnamed), None);
    }

    #[test]
    fn every_object_names_its_image_by_name_and_uuid() {
        let ms = machineset("a", json!({"type": "name", "name": "img-a"}));
        let machine = json!({"spec": {"providerSpec": {"value": {
            "image": {"type": "uuid", "uuid": "1b0d", "name": ""}}}}});
        let cpms = json!({"spec": {"template": {"machines_v1beta1_machine_openshift_io":
            {"spec": {"providerSpec": {"value": {"image": {"type": "name", "name": "img-c", "uuid": "2c1e"}}}}}}}});
        assert_eq!(named(&ms), ["img-a"]);
        assert_eq!(named(&machine), ["1b0d"]);
        assert_eq!(named(&cpms), ["img-c", "2c1e"]);
        assert!(named(&json!({"spec": {}})).is_empty());
    }

    #[test]
    fn machinesets_wait_for_the_image_until_it_is_usable() {
        let mut snap = snapshot("Nutanix", false);
        let name = format!("{INFRA}-rhcos-{RELEASE}");
        let installer = format!("{INFRA}-rhcos");
        let sets = [
            machineset("a", json!({"type": "name", "name": installer})),
            machineset("custom", json!({"type": "name", "name": "my-golden-rhcos"})),
            machineset("by-uuid", json!({"type": "uuid", "uuid": "1b0d"})),
        ];
        let waiting = waiting_for(&sets, &snap, Reason::ImageNotImported, &name);
        let [w] = &waiting[..] else {
            panic!("{waiting:?}")
        };
        assert_eq!(w.object["metadata"]["name"], "a");
        assert_eq!(w.decision.current.as_deref(), Some(installer.as_str()));
        assert_eq!(w.decision.arch, Some(Arch::Amd64));
        // Usable: the decision moves it, nothing waits.
        snap.cluster.learned = snap.cluster.learned.with_nutanix(NutanixLearned {
            images: [name.clone()].into(),
            unavailable: None,
        });
        assert!(waiting_for(&sets, &snap, Reason::ImageNotImported, &name).is_empty());
    }

    #[test]
    fn only_what_a_person_must_fix_is_a_warning_event() {
        let taken = NutanixError::NameTaken {
            name: "n".into(),
            uuids: vec!["1b0d".into()],
        };
        let mismatch = NutanixError::Mismatch {
            name: "n".into(),
            uuid: "1b0d".into(),
            what: "SHA-256",
            prism: "aa".into(),
            stream: "bb".into(),
        };
        let down = NutanixError::Endpoint { why: "down".into() };
        assert!(warns(&taken) && warns(&mismatch));
        assert!(!warns(&down));
    }
}
