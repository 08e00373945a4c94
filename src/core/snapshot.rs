//! The in-memory picture of the cluster that every decision reads.
//!
//! A `Snapshot` is immutable; whoever learns something new (the offline loader, the
//! watchers) builds a whole new one and swaps it into a [`SharedSnapshot`]. The request
//! path only ever calls `load()`, which is lock-free.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::SystemTime;

use arc_swap::ArcSwap;
use kube::core::Selector;
use serde_json::Value;

pub use super::arch::Arch;
pub use super::platforms::Learned;
use super::platforms::aws::AwsLearned;
use super::platforms::vsphere::{VSphereInfra, VSphereLearned};
use super::platforms::{self, EntryError, Platform, Target};
pub use super::stream::StreamDoc;
use super::stream::StreamError;

/// ConfigMap keys, exactly as the MCO and the CVO write them.
pub const KEY_STREAM: &str = "stream";
/// Dual-stream releases: every stream's document, keyed by stream name (`rhel-9`, `rhel-10`).
pub const KEY_STREAMS: &str = "streams";
pub const KEY_RELEASE_VERSION: &str = "releaseVersion";
pub const KEY_MCO_RELEASE_IMAGE_VERSION: &str = "MCOReleaseImageVersion";

/// The default ConfigMap that `--dev` and `preview` use when no file is given. Written by
/// this project; the image names are the real RHCOS 9.8 (OCP 4.21) ones.
pub const EMBEDDED_CONFIGMAP: &str = include_str!("defaults/coreos-bootimages.yaml");

#[derive(Debug, thiserror::Error)]
pub enum BootImagesError {
    #[error("ConfigMap document is neither YAML nor JSON: {0}")]
    Document(#[from] DocumentError),
    #[error("ConfigMap has no data.{0}")]
    MissingKey(&'static str),
    #[error("data.stream is not valid CoreOS stream JSON: {0}")]
    StreamJson(String),
    #[error("data.stream: {0}")]
    Stream(String),
    #[error("data.streams is not a JSON object of stream documents: {0}")]
    StreamsShape(#[source] serde_json::Error),
    #[error("data.streams.{name}: {source}")]
    StreamsEntry {
        name: String,
        #[source]
        source: StreamError,
    },
}

/// The parsed `coreos-bootimages` ConfigMap.
#[derive(Debug, Clone)]
pub struct BootImages {
    /// `stream` field of the default stream's JSON, e.g. `rhcos-4.21`.
    pub stream_name: String,
    pub release_version: String,
    pub mco_release_image_version: Option<String>,
    /// The architectures of the default stream.
    pub architectures: BTreeSet<Arch>,
    /// `data.stream`: the release's default stream.
    default: StreamDoc,
    /// `data.streams` by name; empty for a single-stream release (no `streams` key, or
    /// only the default stream in it).
    streams: BTreeMap<String, StreamDoc>,
    /// The entry of `streams` that `data.stream` is (the same document), if any.
    pub default_stream: Option<String>,
    /// Content digest of the streams and release version (part of the snapshot id).
    pub digest: String,
}

impl BootImages {
    /// From a ConfigMap's `data` map.
    pub fn from_data(data: &BTreeMap<String, String>) -> Result<Self, BootImagesError> {
        let stream_text = data
            .get(KEY_STREAM)
            .ok_or(BootImagesError::MissingKey(KEY_STREAM))?;
        let release_version = data
            .get(KEY_RELEASE_VERSION)
            .map(|s| s.trim())
            .filter(|s| !s.is_empty())
            .ok_or(BootImagesError::MissingKey(KEY_RELEASE_VERSION))?
            .to_owned();
        let stream: Value = serde_json::from_str(stream_text)
            .map_err(|e| BootImagesError::StreamJson(e.to_string()))?;
        let mut default =
            StreamDoc::from_value(&stream).map_err(|e| BootImagesError::Stream(e.to_string()))?;
        let streams_text = data.get(KEY_STREAMS).map(String::as_str).unwrap_or("");
        let (mut streams, default_stream) = read_streams(streams_text, &stream, &default)?;
        // Every stream's AMIs are Red Hat's, whichever stream a MachineSet follows.
        platforms::share_stream_images(
            std::iter::once(&mut default)
                .chain(streams.values_mut())
                .flat_map(StreamDoc::targets_mut),
        );
        let digest = digest(&[
            stream_text.as_bytes(),
            streams_text.as_bytes(),
            release_version.as_bytes(),
        ]);
        let optional = |k: &str| {
            data.get(k)
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
        };
        Ok(BootImages {
            stream_name: default.name.clone(),
            release_version,
            mco_release_image_version: optional(KEY_MCO_RELEASE_IMAGE_VERSION),
            architectures: default.architectures.clone(),
            default,
            streams,
            default_stream,
            digest,
        })
    }

    /// From a whole ConfigMap document, YAML or JSON (as `oc get -o yaml|json` prints it).
    pub fn from_document(text: &str) -> Result<Self, BootImagesError> {
        let doc: Value = parse_document(text).map_err(BootImagesError::Document)?;
        let data = doc
            .get("data")
            .and_then(Value::as_object)
            .ok_or(BootImagesError::MissingKey("data"))?;
        let data: BTreeMap<String, String> = data
            .iter()
            .filter_map(|(k, v)| match v {
                Value::String(s) => Some((k.clone(), s.clone())),
                // An unquoted `releaseVersion: 4.21` in a hand-written YAML file.
                Value::Number(_) | Value::Bool(_) => Some((k.clone(), v.to_string())),
                _ => None,
            })
            .collect();
        BootImages::from_data(&data)
    }

    /// The default stream's target for `arch` on `platform`.
    pub fn target(&self, arch: Arch, platform: Platform) -> Option<Result<&Target, &EntryError>> {
        self.default.target(arch, platform)
    }

    /// `data.stream`, the release's default stream.
    pub fn default_doc(&self) -> &StreamDoc {
        &self.default
    }

    /// `data.streams` (empty: a single-stream release, whose `streams` holds at most its
    /// default stream).
    pub fn streams(&self) -> &BTreeMap<String, StreamDoc> {
        &self.streams
    }

    /// Every stream document: the default, then each of `data.streams`.
    pub fn docs(&self) -> impl Iterator<Item = &StreamDoc> {
        std::iter::once(&self.default).chain(self.streams.values())
    }

    /// The RHCOS release of an image any stream names (a GCP image, an AWS AMI).
    pub fn rhcos_release_of(&self, image: &str) -> Option<&str> {
        self.docs().find_map(|d| d.rhcos_release_of(image))
    }

    /// The unusable parts of the streams, each as `<platform> <arch>: <why>`, for the logs.
    pub fn problems(&self) -> impl Iterator<Item = String> + '_ {
        let named = self
            .streams
            .iter()
            .flat_map(|(name, d)| d.problems().map(move |p| format!("streams.{name}: {p}")));
        self.default.problems().chain(named)
    }

    /// The MCO stamps `MCOReleaseImageVersion` once a master runs the new release.
    pub fn stamped(&self) -> bool {
        self.mco_release_image_version.as_deref() == Some(self.release_version.as_str())
    }
}

/// `data.streams` (empty or absent: none), and the name of the entry that is the default
/// stream: the same document, else the one entry of the same RHEL major.
fn read_streams(
    text: &str,
    stream: &Value,
    default: &StreamDoc,
) -> Result<(BTreeMap<String, StreamDoc>, Option<String>), BootImagesError> {
    if text.trim().is_empty() {
        return Ok((BTreeMap::new(), None));
    }
    let raw: BTreeMap<String, Value> =
        serde_json::from_str(text).map_err(BootImagesError::StreamsShape)?;
    let mut streams = BTreeMap::new();
    let mut same = None;
    for (name, value) in &raw {
        let doc = StreamDoc::from_value(value).map_err(|source| BootImagesError::StreamsEntry {
            name: name.clone(),
            source,
        })?;
        if value == stream {
            same.get_or_insert_with(|| name.clone());
        }
        streams.insert(name.clone(), doc);
    }
    let same_major = || {
        let mut of = streams
            .iter()
            .filter(|(_, d)| default.rhel_major.is_some() && d.rhel_major == default.rhel_major);
        match (of.next(), of.next()) {
            (Some((name, _)), None) => Some(name.clone()),
            _ => None,
        }
    };
    let default_stream = same.or_else(same_major);
    // A single-stream release lists its one stream here too: nothing to choose between.
    if streams.len() == 1 && default_stream.is_some() {
        streams.clear();
    }
    Ok((streams, default_stream))
}

/// A document that is neither JSON nor YAML (JSON when it starts with `{`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DocumentError {
    #[error("invalid JSON: {0}")]
    Json(String),
    #[error("invalid YAML: {0}")]
    Yaml(String),
}

/// YAML or JSON text to a JSON value (JSON is read as JSON first: exact and faster).
pub fn parse_document(text: &str) -> Result<Value, DocumentError> {
    match serde_json::from_str(text) {
        Ok(v) => Ok(v),
        Err(json_err) if text.trim_start().starts_with('{') => {
            Err(DocumentError::Json(json_err.to_string()))
        }
        Err(_) => {
            serde_saphyr::from_str::<Value>(text).map_err(|e| DocumentError::Yaml(e.to_string()))
        }
    }
}

/// Every document of a YAML stream (`---` separated), or the one JSON document.
pub fn parse_documents(text: &str) -> Result<Vec<Value>, DocumentError> {
    match serde_json::from_str(text) {
        Ok(v) => Ok(vec![v]),
        Err(json_err) if text.trim_start().starts_with('{') => {
            Err(DocumentError::Json(json_err.to_string()))
        }
        Err(_) => serde_saphyr::from_str_multiple::<Value, Vec<Value>>(text)
            .map_err(|e| DocumentError::Yaml(e.to_string())),
    }
}

/// Short hex SHA-256 over the parts, separated so that ("ab","c") != ("a","bc").
pub fn digest(parts: &[&[u8]]) -> String {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    for part in parts {
        ctx.update(&(part.len() as u64).to_be_bytes());
        ctx.update(part);
    }
    ctx.finish().as_ref()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Whether boot images may move now (behaviour §3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gate {
    pub open: bool,
    /// Why, in words for the logs and for `UpgradeInProgress` messages.
    pub reason: String,
}

impl Gate {
    pub fn open(reason: impl Into<String>) -> Self {
        Gate {
            open: true,
            reason: reason.into(),
        }
    }

    pub fn closed(reason: impl Into<String>) -> Self {
        Gate {
            open: false,
            reason: reason.into(),
        }
    }
}

/// Which MachineSets are managed, from MachineConfiguration `cluster`
/// `status.managedBootImagesStatus`, or `spec.managedBootImages` on releases without that
/// status (absent: all of them).
#[derive(Debug, Clone, Default)]
pub enum Enrollment {
    #[default]
    All,
    None,
    Partial(Selector),
}

/// What the decision needs to know about the cluster besides the ConfigMap.
#[derive(Debug, Clone)]
pub struct ClusterFacts {
    /// Infrastructure `status.platformStatus.type`. `None` offline: the providerSpec kind
    /// decides.
    pub platform: Option<String>,
    pub control_plane_arch: Option<Arch>,
    /// ClusterVersion `status.desired.architecture == Multi`.
    pub multi_arch: bool,
    pub gate: Gate,
    pub enrollment: Enrollment,
    /// `--control-plane-machine-sets`: ControlPlaneMachineSets are decided too (off: they
    /// are `NotApplicable`, as the MCO's feature gate leaves them).
    pub control_plane_machine_sets: bool,
    /// `--aws-marketplace`: AWS Marketplace AMIs move within their product (off: they are
    /// `MarketplaceNotEnabled`).
    pub aws_marketplace: bool,
    /// MachineConfiguration `cluster`'s selection for `controlplanemachinesets`.
    pub cpms_enrollment: Enrollment,
    /// The stub Ignition of the user-data Secrets the MachineSets name (rule 10).
    pub stubs: Stubs,
    /// Infrastructure `cluster`'s infrastructure id and vSphere failure domains.
    pub vsphere: Option<Arc<VSphereInfra>>,
    /// What the cluster side learned from clouds in the background.
    pub learned: Learned,
}

impl Default for ClusterFacts {
    fn default() -> Self {
        ClusterFacts {
            platform: None,
            control_plane_arch: Arch::host(),
            multi_arch: false,
            gate: Gate::closed("no master upgrade state known yet"),
            enrollment: Enrollment::All,
            control_plane_machine_sets: false,
            aws_marketplace: false,
            cpms_enrollment: Enrollment::All,
            stubs: Stubs::default(),
            vsphere: None,
            learned: Learned::default(),
        }
    }
}

/// What a user-data Secret holds, as far as rule 10 cares: only the stub's Ignition
/// version is kept, never the Secret's data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stub {
    /// `ignition.version` of its `userData`.
    Version(String),
    /// The Secret exists, and its `userData` is no Ignition config we can read (why).
    Unreadable(String),
    /// No such Secret in the MachineSet's namespace.
    Missing,
}

/// The stub Ignition of the user-data Secrets, by Secret name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stubs {
    /// Offline (`--dev`, `--configmap-file`, `preview`) no Secret can be read: rule 10
    /// does not check. Following a cluster, a Secret absent from `by_name` is not read yet.
    pub unchecked: bool,
    pub by_name: BTreeMap<String, Stub>,
    /// The Secrets this process may read (`--user-data-secrets`, the Role's
    /// `resourceNames`): a MachineSet naming another is left alone, online and offline.
    /// `None`: no limit.
    pub granted: Option<BTreeSet<String>>,
}

impl Stubs {
    /// Following a cluster, with these Secrets read.
    pub fn learned<'a>(stubs: impl IntoIterator<Item = (&'a str, Stub)>) -> Stubs {
        Stubs {
            unchecked: false,
            by_name: stubs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
            granted: None,
        }
    }

    /// These stubs, with only `names` readable.
    pub fn granting<'a>(self, names: impl IntoIterator<Item = &'a str>) -> Stubs {
        Stubs {
            granted: Some(names.into_iter().map(str::to_owned).collect()),
            ..self
        }
    }

    /// Whether `secret` may be read: within the grant, or no grant is known.
    pub fn grants(&self, secret: &str) -> bool {
        self.granted.as_ref().is_none_or(|g| g.contains(secret))
    }

    fn digest_words(&self) -> String {
        let granted = match &self.granted {
            Some(g) => g.iter().map(|n| format!("{n},")).collect(),
            None => "*".to_owned(),
        };
        if self.unchecked {
            return format!("unchecked granted={granted}");
        }
        let read: String = self
            .by_name
            .iter()
            .map(|(name, stub)| match stub {
                Stub::Version(v) => format!("{name}={v};"),
                Stub::Unreadable(why) => format!("{name}!{why};"),
                Stub::Missing => format!("{name}-;"),
            })
            .collect();
        format!("{read} granted={granted}")
    }
}

#[derive(Debug, Clone)]
pub struct Snapshot {
    /// Changes whenever something that can move a target or the gate changes.
    pub id: String,
    /// `None` until the ConfigMap has been read: every decision is then `NotReady`.
    pub boot_images: Option<Arc<BootImages>>,
    pub cluster: ClusterFacts,
    pub built_at: SystemTime,
}

impl Snapshot {
    pub fn new(boot_images: Option<Arc<BootImages>>, cluster: ClusterFacts) -> Self {
        let stream_digest = boot_images.as_ref().map_or("none", |b| b.digest.as_str());
        let platform = cluster.platform.as_deref().unwrap_or("");
        let arch = cluster.control_plane_arch.map_or("", Arch::k8s);
        let words = |e: &Enrollment| match e {
            Enrollment::All => "all".to_owned(),
            Enrollment::None => "none".to_owned(),
            Enrollment::Partial(s) => format!("partial:{s}"),
        };
        let enrollment = format!(
            "{};cpms={}:{};marketplace={}",
            words(&cluster.enrollment),
            cluster.control_plane_machine_sets,
            words(&cluster.cpms_enrollment),
            cluster.aws_marketplace
        );
        let stubs = cluster.stubs.digest_words();
        let vsphere = format!("{:?}", cluster.vsphere);
        // Everything a decision reads, so that a new id means "targets may have moved".
        let id = digest(&[
            stream_digest.as_bytes(),
            &[u8::from(cluster.gate.open), u8::from(cluster.multi_arch)],
            &cluster.learned.generation.to_be_bytes(),
            platform.as_bytes(),
            arch.as_bytes(),
            enrollment.as_bytes(),
            stubs.as_bytes(),
            vsphere.as_bytes(),
        ]);
        Snapshot {
            id,
            boot_images,
            cluster,
            built_at: SystemTime::now(),
        }
    }

    /// The snapshot before anything is known.
    pub fn empty() -> Self {
        Snapshot::new(None, ClusterFacts::default())
    }

    /// Offline mode (`--configmap-file`, `--dev`, `preview`): the gate is the ConfigMap's
    /// own stamp, unless the operator vouches for the masters.
    pub fn offline(
        boot_images: BootImages,
        assume_masters_updated: bool,
        control_plane_arch: Option<Arch>,
        multi_arch: bool,
    ) -> Self {
        let gate = if assume_masters_updated {
            Gate::open("--assume-masters-updated")
        } else if boot_images.stamped() {
            Gate::open(format!(
                "ConfigMap stamped {KEY_MCO_RELEASE_IMAGE_VERSION}={}",
                boot_images.release_version
            ))
        } else {
            Gate::closed(format!(
                "ConfigMap {KEY_MCO_RELEASE_IMAGE_VERSION}={} does not match {KEY_RELEASE_VERSION}={}: no master has completed the upgrade",
                boot_images
                    .mco_release_image_version
                    .as_deref()
                    .unwrap_or("<unset>"),
                boot_images.release_version
            ))
        };
        Snapshot::new(
            Some(Arc::new(boot_images)),
            ClusterFacts {
                platform: None,
                control_plane_arch,
                multi_arch,
                gate,
                enrollment: Enrollment::All,
                control_plane_machine_sets: true,
                aws_marketplace: false,
                cpms_enrollment: Enrollment::All,
                stubs: Stubs {
                    unchecked: true,
                    ..Stubs::default()
                },
                vsphere: None,
                learned: Learned::default()
                    .with_aws(AwsLearned {
                        unavailable: Some("nothing asks EC2 offline".into()),
                        ..Default::default()
                    })
                    .with_vsphere(VSphereLearned {
                        unavailable: Some(
                            "nothing imports offline: this is the template the importer would make"
                                .into(),
                        ),
                        ..Default::default()
                    }),
            },
        )
    }
}

pub type SharedSnapshot = Arc<ArcSwap<Snapshot>>;

pub fn shared(snapshot: Snapshot) -> SharedSnapshot {
    Arc::new(ArcSwap::from_pointee(snapshot))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(stream: &str) -> BTreeMap<String, String> {
        BTreeMap::from([
            (KEY_STREAM.to_owned(), stream.to_owned()),
            (KEY_RELEASE_VERSION.to_owned(), "4.21.0".to_owned()),
        ])
    }

    #[test]
    fn embedded_default_parses_and_is_stamped() {
        let b = BootImages::from_document(EMBEDDED_CONFIGMAP).unwrap();
        assert_eq!(b.stream_name, "rhcos-4.21");
        assert!(b.stamped());
        assert!(b.architectures.contains(&Arch::Amd64));
        assert!(b.architectures.contains(&Arch::Arm64));
        assert!(matches!(b.target(Arch::Amd64, Platform::Gcp), Some(Ok(_))));
        assert!(matches!(b.target(Arch::Amd64, Platform::Aws), Some(Ok(_))));
        assert!(matches!(
            b.target(Arch::Amd64, Platform::Azure),
            Some(Ok(_))
        ));
        assert!(b.target(Arch::Ppc64le, Platform::Azure).is_none());
        assert_eq!(b.problems().count(), 0);
    }

    #[test]
    fn malformed_streams_are_errors_not_panics() {
        for bad in [
            "not json",
            "[]",
            "{}",
            r#"{"architectures": []}"#,
            r#"{"architectures": {"x86_64": 3}}"#,
        ] {
            assert!(BootImages::from_data(&data(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_bad_platform_entry_makes_that_platform_alone_skip() {
        for bad in [
            r#"{"project": "Rhcos Cloud", "name": "x"}"#,
            r#"{"project": "rhcos-cloud", "name": "../../etc"}"#,
            r#"{"project": "rhcos-cloud"}"#,
            r#""projects/x""#,
        ] {
            let stream = format!(
                r#"{{"architectures": {{"x86_64": {{"images": {{"gcp": {bad}, "aws": {{"regions": {{"us-east-1": {{"image": "ami-0123456789abcdef0"}}}}}}}}}}}}}}"#
            );
            let b = BootImages::from_data(&data(&stream)).unwrap();
            assert!(
                matches!(b.target(Arch::Amd64, Platform::Gcp), Some(Err(_))),
                "{bad}"
            );
            assert!(
                matches!(b.target(Arch::Amd64, Platform::Aws), Some(Ok(_))),
                "{bad}"
            );
            let problems: Vec<String> = b.problems().collect();
            assert!(
                problems.len() == 1 && problems[0].starts_with("GCP x86_64: images.gcp"),
                "{problems:?}"
            );
        }
    }

    #[test]
    fn missing_keys_are_named() {
        let err = BootImages::from_data(&BTreeMap::new()).unwrap_err();
        assert!(err.to_string().contains("data.stream"), "{err}");
        let only_stream = BTreeMap::from([(KEY_STREAM.to_owned(), "{}".to_owned())]);
        let err = BootImages::from_data(&only_stream).unwrap_err();
        assert!(err.to_string().contains("releaseVersion"), "{err}");
    }

    #[test]
    fn unknown_architectures_are_ignored() {
        let b = BootImages::from_data(&data(
            r#"{"stream":"s","architectures":{"riscv64":{"images":{}},"x86_64":{"images":{}}}}"#,
        ))
        .unwrap();
        assert_eq!(b.architectures.iter().collect::<Vec<_>>(), [&Arch::Amd64]);
    }

    #[test]
    fn digest_changes_with_content() {
        let a = BootImages::from_data(&data(r#"{"architectures":{}}"#)).unwrap();
        let mut d = data(r#"{"architectures":{}}"#);
        d.insert(KEY_RELEASE_VERSION.into(), "4.22.0".into());
        let b = BootImages::from_data(&d).unwrap();
        assert_ne!(a.digest, b.digest);
        assert_eq!(a.digest.len(), 16);
    }

    /// A new grant is a new snapshot (the toucher passes again), and only names in it are
    /// granted; no grant known grants all.
    #[test]
    fn the_grant_is_part_of_the_snapshot() {
        let with = |stubs: Stubs| {
            let cluster = ClusterFacts {
                stubs,
                ..ClusterFacts::default()
            };
            Snapshot::new(None, cluster).id
        };
        let one = Stubs::default().granting(["worker-user-data"]);
        let two = Stubs::default().granting(["worker-user-data", "infra-user-data-managed"]);
        assert!(one.grants("worker-user-data") && !one.grants("infra-user-data-managed"));
        assert!(two.grants("infra-user-data-managed"));
        assert!(Stubs::default().grants("anything"));
        assert_ne!(with(one.clone()), with(two));
        assert_ne!(with(one), with(Stubs::default()));
    }

    #[test]
    fn offline_gate_follows_the_stamp() {
        let mut d = data(r#"{"architectures":{}}"#);
        let unstamped = BootImages::from_data(&d).unwrap();
        let s = Snapshot::offline(unstamped.clone(), false, None, false);
        assert!(!s.cluster.gate.open);
        assert!(s.cluster.gate.reason.contains("<unset>"));
        let s2 = Snapshot::offline(unstamped, true, None, false);
        assert!(s2.cluster.gate.open);
        assert_ne!(s.id, s2.id, "the gate is part of the snapshot id");
        d.insert(KEY_MCO_RELEASE_IMAGE_VERSION.into(), "4.21.0".into());
        let stamped = BootImages::from_data(&d).unwrap();
        assert!(
            Snapshot::offline(stamped, false, None, false)
                .cluster
                .gate
                .open
        );
    }

    #[test]
    fn documents_in_yaml_and_json() {
        let yaml = "data:\n  releaseVersion: 4.21.0\n  stream: '{\"architectures\":{}}'\n";
        assert!(BootImages::from_document(yaml).is_ok());
        let json = r#"{"data":{"releaseVersion":"4.21.0","stream":"{\"architectures\":{}}"}}"#;
        assert!(BootImages::from_document(json).is_ok());
        assert!(BootImages::from_document("{ nope").is_err());
        assert!(BootImages::from_document("kind: ConfigMap\n").is_err());
    }
}
