//! OpenStack behind the shared pass of [`importer`](crate::cluster::importer): the stream's
//! qcow2s it wants under the cluster's names, and Glance's answers to the pass's questions
//! (look and prove, import, list ours, clear, retire), each through [`Importer`].

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::cluster::apis::{self, Call};
use crate::cluster::importer::adapter::{self, Adapter, Found, Ours, Want as Asked};
use crate::cluster::importer::artifact::Qcow2Target;
use crate::cluster::importer::{Background as Shared, provider_value};
use crate::cluster::learned::LearnedCell;
use crate::core::arch::Arch;
use crate::core::learned::Imported;
use crate::core::platforms::{Platform, Target};
use crate::core::snapshot::Snapshot;

use super::access::{self, Credentials};
use super::error::OpenStackError;
use super::import::{Importer, Look, Settings, Want};
use super::marker::image_name_for;

/// OpenStack's importer on the frame.
pub type Background = Shared<OpenStack>;
/// An image the stream wants, of its qcow2.
pub type Wanted = adapter::Wanted<Qcow2Target>;
/// What a pass works on.
pub type Work = adapter::Work<Qcow2Target>;

/// Glance behind the shared pass.
pub struct OpenStack {
    settings: Settings,
}

/// The stream's qcow2s the cluster's machines may boot (the control plane's architecture,
/// or every one on a multi-arch cluster, each under a name with its architecture), by
/// image name; `None` when this is not an OpenStack cluster with an infrastructure id and
/// a stream with a qcow2.
pub fn work(snap: &Snapshot) -> Option<Work> {
    if snap.cluster.platform.as_deref() != Some(Platform::OpenStack.name()) {
        return None;
    }
    let infra_id = snap.cluster.infrastructure_name.clone()?;
    let boot = snap.boot_images.as_ref()?;
    let multi = snap.cluster.multi_arch;
    let arches: Vec<Arch> = match multi {
        true => boot.architectures.iter().copied().collect(),
        false => vec![snap.cluster.control_plane_arch.unwrap_or(Arch::Amd64)],
    };
    let mut by_name: BTreeMap<String, Wanted> = BTreeMap::new();
    for doc in boot.docs() {
        for &arch in &arches {
            let Some(Ok(Target::OpenStack(a))) = doc.target(arch, Platform::OpenStack) else {
                continue;
            };
            let Some(uncompressed_sha256) = a.uncompressed_sha256.clone() else {
                continue;
            };
            let target = Qcow2Target {
                stream: doc.name.clone(),
                release: a.release.clone(),
                location: a.location.clone(),
                sha256: a.sha256.clone(),
                uncompressed_sha256,
            };
            let tag = multi.then_some(arch);
            let name = image_name_for(&infra_id, &a.release, tag);
            let wanted = by_name.entry(name.clone()).or_insert_with(|| Wanted {
                name,
                target,
                arches: BTreeSet::new(),
                arch: tag,
            });
            wanted.arches.insert(arch);
        }
    }
    let mut work = Work::new(infra_id);
    work.wanted = by_name.into_values().collect();
    (!work.wanted.is_empty()).then_some(work)
}

/// Which of the stream's images are usable in Glance, looked at without changing anything
/// (`status`); `None` when this is not an OpenStack cluster with a qcow2 in its stream.
pub async fn look(client: &kube::Client, snap: &Snapshot) -> Option<Imported> {
    crate::cluster::importer::look::<OpenStack>(client, snap).await
}

/// The images an object names: its `image`, and its root volume's `sourceUUID`.
fn named(object: &Value) -> Vec<String> {
    let Some(value) = provider_value(object) else {
        return Vec::new();
    };
    [value.get("image"), value.pointer("/rootVolume/sourceUUID")]
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// What Glance holds, as the pass sees it.
fn found(look: &Look, name: &str, usable: bool) -> Found<OpenStackError> {
    match (usable, look.blocked(name)) {
        (true, _) => Found::Usable,
        (false, Some(e)) => Found::Blocked(e),
        (false, None) => Found::Absent,
    }
}

fn want<'a>(asked: &Asked<'a, Qcow2Target>) -> Want<'a> {
    Want {
        infra_id: asked.infra_id,
        target: &asked.wanted.target,
        named: asked.named,
        carried: BTreeMap::new(),
        arch: asked.wanted.arch,
    }
}

impl Adapter for OpenStack {
    type Settings = Settings;
    type Target = Qcow2Target;
    type Credentials = Credentials;
    type Client = Importer;
    type Error = OpenStackError;

    const TROUBLE: &'static str = "cannot import the OpenStack image; those MachineSets keep their image until it is imported";
    const AGAIN: &'static str = "Glance answers again: OpenStack images are checked and imported";
    const MACHINES: Call = apis::OPENSTACK_MACHINE;

    fn new(settings: Settings) -> OpenStack {
        OpenStack { settings }
    }

    fn named(object: &Value) -> Vec<String> {
        named(object)
    }

    fn work(snap: &Snapshot) -> Option<Work> {
        work(snap)
    }

    fn publish(cell: &LearnedCell, learned: Imported) {
        cell.publish(|now| now.with_openstack(learned.clone()));
    }

    async fn read(kube: &kube::Client) -> Result<Credentials, OpenStackError> {
        access::read(kube).await
    }

    fn connect(creds: &Credentials) -> Result<Importer, OpenStackError> {
        access::connect(creds)
    }

    fn same(had: &Credentials, now: &Credentials) -> bool {
        had == now
    }

    async fn look(
        &mut self,
        client: &mut Importer,
        asked: &Asked<'_, Qcow2Target>,
    ) -> Result<Found<OpenStackError>, OpenStackError> {
        let look = client.look_proven(&self.settings, &want(asked)).await?;
        Ok(found(&look, &asked.wanted.name, look.usable().is_some()))
    }

    async fn glance(
        client: &mut Importer,
        asked: &Asked<'_, Qcow2Target>,
    ) -> Result<Found<OpenStackError>, OpenStackError> {
        let look = client.look(&want(asked)).await?;
        let usable = look.usable_once_proven().is_some();
        Ok(found(&look, &asked.wanted.name, usable))
    }

    async fn ensure(
        &mut self,
        client: &mut Importer,
        asked: &Asked<'_, Qcow2Target>,
        current: Option<&str>,
    ) -> Result<(), OpenStackError> {
        let mut want = want(asked);
        // How the cloud boots RHCOS, from the image the waiting MachineSets use now.
        if let Some(current) = current {
            want.carried = client.carried_from(current).await?;
        }
        client.ensure(&self.settings, &want).await.map(drop)
    }

    fn warns(e: &OpenStackError) -> bool {
        e.is_bad_artifact()
            || matches!(
                e,
                OpenStackError::NameTaken { .. } | OpenStackError::LookAlike { .. }
            )
    }

    async fn ours(client: &mut Importer, infra_id: &str) -> Result<Vec<Ours>, OpenStackError> {
        let images = client.ours(infra_id).await?;
        Ok(images
            .into_iter()
            .map(|i| Ours {
                complete: i.status == "active",
                // Glance keeps them, and one under a wanted name stops the move.
                stopped: matches!(i.status.as_str(), "queued" | "killed"),
                name: i.name.unwrap_or_default(),
                id: i.id,
            })
            .collect())
    }

    async fn clear(
        client: &mut Importer,
        id: &str,
        infra_id: &str,
        named: &BTreeSet<String>,
    ) -> Result<(), OpenStackError> {
        client.clear(id, infra_id, named).await
    }

    async fn retire(
        client: &mut Importer,
        id: &str,
        infra_id: &str,
        named: &BTreeSet<String>,
    ) -> Result<(), OpenStackError> {
        client.retire(id, infra_id, named).await
    }

    fn kept(e: &OpenStackError) -> bool {
        matches!(e, OpenStackError::Busy { .. })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::cluster::importer::waiting_for;
    use crate::core::configmap::{BootImages, EMBEDDED_CONFIGMAP};
    use crate::core::platforms::openstack::OpenStackLearned;
    use crate::core::reason::Reason;

    const INFRA: &str = "ostest-x7k2p";
    const RELEASE: &str = "9.8.20260428-0";

    fn snapshot(platform: &str, multi_arch: bool) -> Snapshot {
        let boot = BootImages::from_document(EMBEDDED_CONFIGMAP).unwrap();
        let mut snap = Snapshot::offline(boot, true, Some(Arch::Amd64), multi_arch);
        snap.cluster.platform = Some(platform.into());
        snap.cluster.infrastructure_name = Some(INFRA.into());
        snap
    }

    fn machineset(name: &str, image: &str) -> Value {
        json!({"apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet",
            "metadata": {"name": name, "namespace": "openshift-machine-api"},
            "spec": {"template": {"spec": {"providerSpec": {"value": {
                "apiVersion": "machine.openshift.io/v1alpha1", "kind": "OpenstackProviderSpec",
                "image": image, "userDataSecret": {"name": "worker-user-data"}}}}}}})
    }

    #[test]
    fn the_control_planes_qcow2_is_wanted_under_the_clusters_name() {
        let work = work(&snapshot("OpenStack", false)).unwrap();
        assert_eq!(work.infra_id, INFRA);
        let [wanted] = &work.wanted[..] else {
            panic!("{work:?}")
        };
        assert_eq!(wanted.name, format!("{INFRA}-rhcos-{RELEASE}"));
        assert_eq!(wanted.arches, [Arch::Amd64].into());
        assert_eq!(wanted.target.stream, "rhcos-4.21");
        assert_eq!(wanted.target.release, RELEASE);
        assert!(
            wanted
                .target
                .location
                .ends_with("openstack.x86_64.qcow2.gz")
        );
        assert_eq!(wanted.target.uncompressed_sha256.len(), 64);
        assert!(work.current(&wanted.name));
        assert!(!work.current(&format!("{INFRA}-rhcos-9.6.20250101-0")));
        // Not OpenStack, or no infrastructure id yet: nothing to do.
        assert_eq!(super::work(&snapshot("VSphere", false)), None);
        let mut unnamed = snapshot("OpenStack", false);
        unnamed.cluster.infrastructure_name = None;
        assert_eq!(super::work(&unnamed), None);
    }

    #[test]
    fn on_a_multi_arch_cluster_each_architecture_is_an_image_of_its_own() {
        let work = work(&snapshot("OpenStack", true)).unwrap();
        let names: Vec<&str> = work.wanted.iter().map(|w| w.name.as_str()).collect();
        assert_eq!(
            names,
            ["amd64", "arm64", "ppc64le", "s390x"].map(|a| format!("{INFRA}-rhcos-{RELEASE}-{a}"))
        );
        for w in &work.wanted {
            let arch = w.arch.unwrap();
            assert_eq!(w.arches, [arch].into());
            assert!(w.target.location.contains(arch.rpm()), "{w:?}");
        }
    }

    #[test]
    fn every_object_names_its_image_and_its_volumes_source() {
        let ms = machineset("a", "img-a");
        let machine = json!({"spec": {"providerSpec": {"value": {
            "image": "", "rootVolume": {"sourceUUID": "img-b"}}}}});
        let cpms = json!({"spec": {"template": {"machines_v1beta1_machine_openshift_io":
            {"spec": {"providerSpec": {"value": {"image": "img-c", "rootVolume": {"sourceUUID": "img-d"}}}}}}}});
        assert_eq!(named(&ms), ["img-a"]);
        assert_eq!(named(&machine), ["img-b"]);
        assert_eq!(named(&cpms), ["img-c", "img-d"]);
        assert!(named(&json!({"spec": {}})).is_empty());
    }

    #[test]
    fn machinesets_wait_for_the_image_until_it_is_usable() {
        let mut snap = snapshot("OpenStack", false);
        let name = format!("{INFRA}-rhcos-{RELEASE}");
        let installer = format!("{INFRA}-rhcos");
        let sets = [
            machineset("a", &installer),
            machineset("custom", "my-golden-rhcos"),
        ];
        let waiting = waiting_for(&sets, &snap, Reason::ImageNotImported, &name);
        let [w] = &waiting[..] else {
            panic!("{waiting:?}")
        };
        assert_eq!(w.object["metadata"]["name"], "a");
        assert_eq!(w.decision.current.as_deref(), Some(installer.as_str()));
        assert_eq!(w.decision.arch, Some(Arch::Amd64));
        assert!(waiting_for(&sets, &snap, Reason::ImageNotImported, "other").is_empty());
        // Usable: the decision moves it, nothing waits.
        snap.cluster.learned = snap.cluster.learned.with_openstack(OpenStackLearned {
            images: [name.clone()].into(),
            unavailable: None,
        });
        assert!(waiting_for(&sets, &snap, Reason::ImageNotImported, &name).is_empty());
    }
}
