//! The `coreos-bootimages` ConfigMap the CVO writes, parsed once per change: its keys,
//! its stream documents (`data.stream`, `data.streams`) and the embedded default of
//! `serve --dev` and `preview`.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::arch::Arch;
use super::document::{DocumentError, parse_document};
use super::platforms::{self, EntryError, Platform, Target};
use super::stream_doc::{StreamDoc, StreamError};

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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A ConfigMap's data with `stream` and a 4.21.0 stamp (the snapshot's tests use it too).
    pub(crate) fn data(stream: &str) -> BTreeMap<String, String> {
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
