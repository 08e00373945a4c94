//! OpenStack on the importer frame: every replica looks in Glance for the image of each of
//! the stream's qcow2s and publishes the usable ones; the Lease holder imports what a
//! MachineSet waits for, and retires images of ours that nothing has named for the
//! retention.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use serde_json::Value;

use crate::cluster::apis::{self, Call};
use crate::cluster::importer::{
    Kit, Listed, Pass, Plugin, Waiting, Warning, provider_value, waiting_for,
};
use crate::cluster::learned::LearnedCell;
use crate::core::arch::Arch;
use crate::core::platforms::openstack::OpenStackLearned;
use crate::core::platforms::{Platform, Target};
use crate::core::reason::Reason;
use crate::core::snapshot::Snapshot;

use super::access::{self, Credentials};
use super::error::OpenStackError;
use super::import::{Importer, Settings, Want};
use super::marker::image_name_for;
use crate::cluster::importer::artifact::Qcow2Target;

/// The importer's state between passes.
pub struct Background {
    client: kube::Client,
    settings: Settings,
    /// The credentials last read, and the client made of them.
    connected: Option<(Credentials, Importer)>,
    /// The last pass had trouble: the credentials are read again (rotated, or fixed).
    reread: bool,
}

impl Background {
    pub fn new(client: kube::Client, settings: Settings) -> Background {
        Background {
            client,
            settings,
            connected: None,
            reread: false,
        }
    }
}

/// An image the stream wants: its name, its qcow2, the architectures it is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wanted {
    pub name: String,
    pub target: Qcow2Target,
    pub arches: BTreeSet<Arch>,
    /// The one architecture the name carries, on a multi-architecture cluster.
    pub arch: Option<Arch>,
}

/// What a pass works on.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Work {
    pub infra_id: String,
    pub wanted: Vec<Wanted>,
}

impl Work {
    /// An image of this name is current: never retired.
    fn current(&self, name: &str) -> bool {
        self.wanted.iter().any(|w| w.name == name)
    }
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
    let wanted: Vec<Wanted> = by_name.into_values().collect();
    (!wanted.is_empty()).then_some(Work { infra_id, wanted })
}

/// Which of the stream's images are usable in Glance, looked at without changing anything
/// (`status`); `None` when this is not an OpenStack cluster with a qcow2 in its stream.
pub async fn look(client: &kube::Client, snap: &Snapshot) -> Option<OpenStackLearned> {
    let work = work(snap)?;
    let mut learned = OpenStackLearned::default();
    let connected = access::read(client).await;
    let mut importer = match connected.and_then(|creds| access::connect(&creds)) {
        Ok(importer) => importer,
        Err(e) => {
            learned.unavailable = Some(e.to_string());
            return Some(learned);
        }
    };
    for wanted in &work.wanted {
        let want = Want {
            infra_id: &work.infra_id,
            target: &wanted.target,
            named: None,
            carried: BTreeMap::new(),
            arch: wanted.arch,
        };
        let why = match importer.look(&want).await {
            Ok(look) if look.usable_once_proven().is_some() => {
                learned.images.insert(wanted.name.clone());
                continue;
            }
            Ok(look) => match look.blocked(&wanted.name) {
                Some(e) => e,
                None => continue,
            },
            Err(e) => e,
        };
        learned.unavailable.get_or_insert(why.to_string());
    }
    Some(learned)
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

impl Plugin for Background {
    type Work = Work;
    type Learned = OpenStackLearned;
    /// The image's id.
    type Key = String;

    const TROUBLE: &'static str = "cannot import the OpenStack image; those MachineSets keep their image until it is imported";
    const AGAIN: &'static str = "Glance answers again: OpenStack images are checked and imported";
    const MACHINES: Call = apis::OPENSTACK_MACHINE;

    fn named(object: &Value) -> Vec<String> {
        named(object)
    }

    fn work(&self, snap: &Snapshot) -> Option<Work> {
        work(snap)
    }

    async fn pass(
        &mut self,
        kit: &mut Kit<String>,
        snap: &Snapshot,
        work: &Work,
        listed: Option<&Listed>,
    ) -> Pass<OpenStackLearned> {
        let mut learned = OpenStackLearned::default();
        let mut trouble = None;
        let Background {
            client,
            settings,
            connected,
            reread,
        } = self;
        match connect(client, connected, *reread).await {
            Err(e) => trouble = Some(e.to_string()),
            Ok(importer) => {
                for wanted in &work.wanted {
                    let at = At {
                        snap,
                        infra_id: &work.infra_id,
                        listed,
                    };
                    match image(importer, settings, kit, &at, wanted).await {
                        Ok(true) => {
                            learned.images.insert(wanted.name.clone());
                        }
                        Ok(false) => {}
                        Err(e) => {
                            trouble.get_or_insert(e.to_string());
                        }
                    }
                }
                if let Some(listed) = listed
                    && let Err(e) = retire(importer, kit, work, listed).await
                {
                    trouble.get_or_insert(e.to_string());
                }
            }
        }
        *reread = trouble.is_some();
        learned.unavailable = trouble.clone();
        Pass { learned, trouble }
    }

    fn publish(cell: &LearnedCell, learned: OpenStackLearned) {
        cell.publish_openstack(learned);
    }
}

/// The client of the credentials, read again when asked to (after trouble) and made anew
/// only when they changed: a client keeps what it learned (a bad artifact, its failed
/// imports) across passes.
async fn connect<'a>(
    client: &kube::Client,
    connected: &'a mut Option<(Credentials, Importer)>,
    reread: bool,
) -> Result<&'a mut Importer, OpenStackError> {
    if reread || connected.is_none() {
        let creds = access::read(client).await?;
        if connected.as_ref().is_none_or(|(had, _)| *had != creds) {
            let importer = access::connect(&creds)?;
            *connected = Some((creds, importer));
        }
    }
    match connected {
        Some((_, importer)) => Ok(importer),
        None => Err(OpenStackError::Credentials {
            secret: access::secret_name(),
            why: "not read".into(),
        }),
    }
}

/// Where a pass is.
struct At<'a> {
    snap: &'a Snapshot,
    infra_id: &'a str,
    /// What the Lease holder listed (it imports only then).
    listed: Option<&'a Listed>,
}

/// Whether the wanted image is usable, importing it when this replica leads and a
/// MachineSet waits for it.
async fn image(
    importer: &mut Importer,
    settings: &Settings,
    kit: &mut Kit<String>,
    at: &At<'_>,
    wanted: &Wanted,
) -> Result<bool, OpenStackError> {
    let mut want = Want {
        infra_id: at.infra_id,
        target: &wanted.target,
        named: at.listed.map(|l| &l.named),
        carried: BTreeMap::new(),
        arch: wanted.arch,
    };
    let look = importer.look_proven(settings, &want).await?;
    if look.usable().is_some() {
        return Ok(true);
    }
    let waiting: Vec<Waiting> = at
        .listed
        .map(|l| waiting_for(&l.sets, at.snap, Reason::ImageNotImported, &wanted.name))
        .unwrap_or_default()
        .into_iter()
        .filter(|w| w.decision.arch.is_none_or(|a| wanted.arches.contains(&a)))
        .collect();
    if let Some(e) = look.blocked(&wanted.name) {
        warn(kit, &waiting, &wanted.name, &e).await;
        return Err(e);
    }
    if waiting.is_empty() {
        return Ok(false);
    }
    // How the cloud boots RHCOS, from the image the waiting MachineSets use now.
    let current = waiting
        .iter()
        .find_map(|w| w.decision.current.as_deref().filter(|c| !c.is_empty()));
    if let Some(current) = current {
        want.carried = importer.carried_from(current).await?;
    }
    match importer.ensure(settings, &want).await {
        Ok(_) => Ok(true),
        Err(e) => {
            if e.is_bad_artifact()
                || matches!(
                    e,
                    OpenStackError::NameTaken { .. } | OpenStackError::LookAlike { .. }
                )
            {
                warn(kit, &waiting, &wanted.name, &e).await;
            }
            Err(e)
        }
    }
}

/// A Warning Event on each waiting object, when only a person can unblock the import.
async fn warn(kit: &mut Kit<String>, waiting: &[Waiting], name: &str, e: &OpenStackError) {
    let note = format!("image {name} cannot be imported: {e}");
    let warning = Warning {
        reason: Reason::ImageNotImported.as_str(),
        action: "ImportImage",
        note: &note,
    };
    let objects: Vec<&Value> = waiting.iter().map(|w| &w.object).collect();
    kit.warnings.warn(objects, &warning).await;
}

/// Deletes the active images of ours that nothing has named for the retention, each once
/// the objects are listed again and Glance is asked again, right before.
async fn retire(
    importer: &mut Importer,
    kit: &mut Kit<String>,
    work: &Work,
    listed: &Listed,
) -> Result<(), OpenStackError> {
    let ours = importer.ours(&work.infra_id).await?;
    clear_stopped(importer, work, &ours, listed).await;
    let active: Vec<_> = ours.iter().filter(|i| i.status == "active").collect();
    kit.retention
        .keep_only(|id| active.iter().any(|i| &i.id == id));
    let now = Instant::now();
    let mut due = Vec::new();
    for image in active {
        let name = image.name.as_deref().unwrap_or_default();
        let used =
            listed.named.contains(&image.id) || listed.named.contains(name) || work.current(name);
        if kit.retention.due(&image.id, used, now) {
            due.push((image.id.clone(), name.to_owned()));
        }
    }
    if due.is_empty() {
        return Ok(());
    }
    let Some(again) = kit.lister.list().await else {
        return Ok(());
    };
    for (id, name) in due {
        match importer.retire(&id, &work.infra_id, &again.named).await {
            Ok(()) => {
                tracing::info!(image = %name, id, "deleted an image of ours that nothing has named for the retention");
                kit.retention.forget(&id);
            }
            Err(e @ OpenStackError::Busy { .. }) => {
                tracing::info!(image = %name, id, reason = %e, "an image of ours due for deletion is kept");
                kit.retention.forget(&id);
            }
            Err(e) => {
                tracing::warn!(image = %name, id, error = %e, "cannot delete an unused image of ours");
            }
        }
    }
    Ok(())
}

/// Deletes the images of ours whose data never came (`queued`, `killed`), of any release,
/// once their import provably stopped and nothing names them: Glance keeps them, and one
/// under a wanted name stops the move.
async fn clear_stopped(
    importer: &mut Importer,
    work: &Work,
    ours: &[super::glance::Image],
    listed: &Listed,
) {
    let stopped = ours
        .iter()
        .filter(|i| matches!(i.status.as_str(), "queued" | "killed"));
    for image in stopped {
        let name = image.name.as_deref().unwrap_or_default();
        match importer
            .clear(&image.id, &work.infra_id, &listed.named)
            .await
        {
            Ok(()) => {}
            Err(e @ OpenStackError::Busy { .. }) => {
                tracing::debug!(image = %name, id = %image.id, reason = %e, "an unfinished image of ours is kept");
            }
            Err(e) => {
                tracing::warn!(image = %name, id = %image.id, error = %e, "cannot delete an unfinished image of ours");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::core::configmap::{BootImages, EMBEDDED_CONFIGMAP};

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
