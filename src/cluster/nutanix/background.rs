//! Nutanix on the importer frame: every replica looks in Prism Central for the image of
//! each of the stream's qcow2s and publishes the usable ones; the Lease holder imports what
//! a MachineSet waits for, and retires images of ours that nothing has named for the
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
use crate::core::platforms::artifact::Artifact;
use crate::core::platforms::nutanix::NutanixLearned;
use crate::core::platforms::{Platform, Target};
use crate::core::reason::Reason;
use crate::core::snapshot::Snapshot;

use super::access::{self, Credentials};
use super::error::NutanixError;
use super::import::{Importer, Settings, Want};
use super::marker::image_name;

/// The importer's state between passes.
pub struct Background {
    client: kube::Client,
    settings: Settings,
    /// The credentials last read, and the client made of them.
    connected: Option<(Credentials, Importer)>,
    /// The last pass had trouble: the credentials are read again (rotated, or fixed).
    reread: bool,
    /// The artifact found bad (its checksum, its size) and why: not fetched again until the
    /// stream names another.
    bad: Option<(Artifact, NutanixError)>,
}

impl Background {
    pub fn new(client: kube::Client, settings: Settings) -> Background {
        Background {
            client,
            settings,
            connected: None,
            reread: false,
            bad: None,
        }
    }
}

/// An image the stream wants: its name, its qcow2 and stream, the architectures it is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wanted {
    pub name: String,
    /// The stream document's name, for the marker.
    pub stream: String,
    pub artifact: Artifact,
    pub arches: BTreeSet<Arch>,
}

/// What a pass works on.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Work {
    pub infra_id: String,
    pub wanted: Vec<Wanted>,
    /// Names two architectures' different qcow2s would share (the name has no
    /// architecture): neither is imported, and why is said.
    pub clashes: BTreeMap<String, String>,
}

impl Work {
    /// An image of this name is current: never retired.
    fn current(&self, name: &str) -> bool {
        self.clashes.contains_key(name) || self.wanted.iter().any(|w| w.name == name)
    }
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
    let mut work = Work {
        infra_id,
        ..Work::default()
    };
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
                stream: stream.clone(),
                artifact: first.clone(),
                arches: targets.iter().map(|(a, _, _)| *a).collect(),
            }),
        }
    }
    (!work.wanted.is_empty() || !work.clashes.is_empty()).then_some(work)
}

/// Which of the stream's images are usable in Prism Central, looked at without changing
/// anything (`status`); `None` when this is not a Nutanix cluster with a qcow2 in its stream.
pub async fn look(client: &kube::Client, snap: &Snapshot) -> Option<NutanixLearned> {
    let work = work(snap)?;
    let mut learned = NutanixLearned {
        unavailable: work.clashes.values().next().cloned(),
        ..NutanixLearned::default()
    };
    let connected = access::read(client).await;
    let importer = match connected.and_then(|creds| access::connect(&creds)) {
        Ok(importer) => importer,
        Err(e) => {
            learned.unavailable = Some(e.to_string());
            return Some(learned);
        }
    };
    for wanted in &work.wanted {
        let want = Want {
            infra_id: &work.infra_id,
            stream: &wanted.stream,
            artifact: &wanted.artifact,
            named: None,
        };
        let why = match importer.look(&want).await {
            Ok(look) if look.usable().is_some() => {
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

impl Plugin for Background {
    type Work = Work;
    type Learned = NutanixLearned;
    /// The image's uuid.
    type Key = String;

    const TROUBLE: &'static str =
        "cannot import the Nutanix image; those MachineSets keep their image until it is imported";
    const AGAIN: &'static str =
        "Prism Central answers again: Nutanix images are checked and imported";
    const MACHINES: Call = apis::NUTANIX_MACHINE;

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
    ) -> Pass<NutanixLearned> {
        let mut learned = NutanixLearned::default();
        let mut trouble = work.clashes.values().next().cloned();
        let Background {
            client,
            settings,
            connected,
            reread,
            bad,
        } = self;
        match connect(client, connected, *reread).await {
            Err(e) => trouble = Some(e.to_string()),
            Ok(importer) => {
                let at = At {
                    snap,
                    infra_id: &work.infra_id,
                    listed,
                };
                for wanted in &work.wanted {
                    match image(importer, settings, kit, &at, wanted, bad).await {
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

    fn publish(cell: &LearnedCell, learned: NutanixLearned) {
        cell.publish_nutanix(learned);
    }
}

/// The client of the credentials, read again when asked to (after trouble) and made anew
/// only when they changed: a client keeps what it learned (its failed imports) across
/// passes.
async fn connect<'a>(
    client: &kube::Client,
    connected: &'a mut Option<(Credentials, Importer)>,
    reread: bool,
) -> Result<&'a mut Importer, NutanixError> {
    if reread || connected.is_none() {
        let creds = access::read(client).await?;
        let same = |had: &Credentials| had.endpoint == creds.endpoint && had.auth == creds.auth;
        if connected.as_ref().is_none_or(|(had, _)| !same(had)) {
            let importer = access::connect(&creds)?;
            *connected = Some((creds, importer));
        }
    }
    match connected {
        Some((_, importer)) => Ok(importer),
        None => Err(NutanixError::Credentials {
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
    bad: &mut Option<(Artifact, NutanixError)>,
) -> Result<bool, NutanixError> {
    let want = Want {
        infra_id: at.infra_id,
        stream: &wanted.stream,
        artifact: &wanted.artifact,
        named: at.listed.map(|l| &l.named),
    };
    let look = importer.look(&want).await?;
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
    if let Some((artifact, e)) = bad.as_ref().filter(|(a, _)| *a == wanted.artifact) {
        tracing::debug!(image = %wanted.name, url = %artifact.location, "the stream's qcow2 was found bad: not fetched again");
        warn(kit, &waiting, &wanted.name, e).await;
        return Err(e.clone());
    }
    match importer.ensure(settings, &want).await {
        Ok(_) => Ok(true),
        Err(e) => {
            if e.is_bad_artifact() {
                *bad = Some((wanted.artifact.clone(), e.clone()));
            }
            if warns(&e) {
                warn(kit, &waiting, &wanted.name, &e).await;
            }
            Err(e)
        }
    }
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

/// A Warning Event on each waiting object, when only a person can unblock the import.
async fn warn(kit: &mut Kit<String>, waiting: &[Waiting], name: &str, e: &NutanixError) {
    let note = format!("image {name} cannot be imported: {e}");
    let warning = Warning {
        reason: Reason::ImageNotImported.as_str(),
        action: "ImportImage",
        note: &note,
    };
    let objects: Vec<&Value> = waiting.iter().map(|w| &w.object).collect();
    kit.warnings.warn(objects, &warning).await;
}

/// Deletes the complete images of ours that nothing has named for the retention, each
/// once the objects are listed again and Prism Central is asked again, right before.
async fn retire(
    importer: &mut Importer,
    kit: &mut Kit<String>,
    work: &Work,
    listed: &Listed,
) -> Result<(), NutanixError> {
    let ours = importer.ours(&work.infra_id).await?;
    let complete: Vec<_> = ours.iter().filter(|i| i.state == "COMPLETE").collect();
    kit.retention
        .keep_only(|uuid| complete.iter().any(|i| &i.uuid == uuid));
    let now = Instant::now();
    let mut due = Vec::new();
    for image in complete {
        let name = image.name.as_deref().unwrap_or_default();
        let used =
            listed.named.contains(&image.uuid) || listed.named.contains(name) || work.current(name);
        if kit.retention.due(&image.uuid, used, now) {
            due.push((image.uuid.clone(), name.to_owned()));
        }
    }
    if due.is_empty() {
        return Ok(());
    }
    let Some(again) = kit.lister.list().await else {
        return Ok(());
    };
    for (uuid, name) in due {
        match importer.retire(&uuid, &work.infra_id, &again.named).await {
            Ok(()) => {
                tracing::info!(image = %name, uuid, "deleted an image of ours that nothing has named for the retention");
                kit.retention.forget(&uuid);
            }
            Err(e @ NutanixError::Busy { .. }) => {
                tracing::info!(image = %name, uuid, reason = %e, "an image of ours due for deletion is kept");
                kit.retention.forget(&uuid);
            }
            Err(e) => {
                tracing::warn!(image = %name, uuid, error = %e, "cannot delete an unused image of ours");
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::core::configmap::{BootImages, EMBEDDED_CONFIGMAP};

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
        assert_eq!(wanted.stream, "rhcos-4.21");
        assert_eq!(wanted.artifact.release, RELEASE);
        assert!(wanted.artifact.location.ends_with("nutanix.x86_64.qcow2"));
        assert_eq!(wanted.artifact.sha256.len(), 64);
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
