//! One CoreOS stream document, read once when the snapshot is built: the ConfigMap's
//! `data.stream` (the release's default stream), or one entry of `data.streams` (every
//! stream of a dual-stream release, keyed by name: `rhel-9`, `rhel-10`).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::arch::Arch;
use super::platforms::{self, EntryError, Platform, Target};
use super::skew::version::rhel_major_of_release;

/// Why a stream document cannot be used at all.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    #[error("not valid CoreOS stream JSON: {0}")]
    Json(#[source] serde_json::Error),
    #[error("not a JSON object")]
    NotObject,
    #[error("no architectures object")]
    NoArchitectures,
    #[error("architectures.{0} is not an object")]
    Architecture(String),
}

/// A stream document, each platform's target per architecture typed once.
#[derive(Debug, Clone)]
pub struct StreamDoc {
    /// Its own `stream` field, e.g. `rhcos-4.21`.
    pub name: String,
    pub architectures: BTreeSet<Arch>,
    /// Absent: no image of that platform for that architecture; `Err`: its entry is
    /// unusable, and that platform alone skips.
    targets: BTreeMap<(Arch, Platform), Result<Target, EntryError>>,
    /// Every image the stream names (GCP images, AWS AMIs), with its RHCOS release.
    releases: BTreeMap<String, String>,
    /// The RHEL major its images are built from (`10` for `10.2.20260715-0`).
    pub rhel_major: Option<u32>,
}

impl StreamDoc {
    /// From the text of a stream document.
    pub fn parse(text: &str) -> Result<Self, StreamError> {
        let value: Value = serde_json::from_str(text).map_err(StreamError::Json)?;
        StreamDoc::from_value(&value)
    }

    /// From a stream document already read as JSON.
    pub fn from_value(stream: &Value) -> Result<Self, StreamError> {
        if !stream.is_object() {
            return Err(StreamError::NotObject);
        }
        let name = stream
            .get("stream")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let arches = stream
            .get("architectures")
            .and_then(Value::as_object)
            .ok_or(StreamError::NoArchitectures)?;
        let mut entries = BTreeMap::new();
        for (arch_name, entry) in arches {
            // Unknown architectures (riscv64 one day) are not ours to judge.
            let Some(arch) = Arch::from_rpm(arch_name) else {
                continue;
            };
            if !entry.is_object() {
                return Err(StreamError::Architecture(arch_name.clone()));
            }
            entries.insert(arch, entry);
        }
        let targets = Platform::ALL
            .into_iter()
            .flat_map(|p| {
                p.targets(&entries)
                    .into_iter()
                    .map(move |(arch, t)| ((arch, p), t))
            })
            .collect();
        Ok(StreamDoc {
            name,
            architectures: entries.keys().copied().collect(),
            targets,
            releases: stream_releases(&entries),
            rhel_major: entries.values().find_map(|e| first_release(e)),
        })
    }

    /// `platform`'s target for `arch`.
    pub fn target(&self, arch: Arch, platform: Platform) -> Option<Result<&Target, &EntryError>> {
        self.targets.get(&(arch, platform)).map(Result::as_ref)
    }

    /// The RHCOS release of an image this stream names (a GCP image, an AWS AMI).
    pub fn rhcos_release_of(&self, image: &str) -> Option<&str> {
        self.releases.get(image).map(String::as_str)
    }

    /// The unusable parts of the stream, each as `<platform> <arch>: <why>`.
    pub fn problems(&self) -> impl Iterator<Item = String> + '_ {
        self.targets.iter().filter_map(|((arch, platform), t)| {
            t.as_ref()
                .err()
                .map(|e| format!("{} {}: {e}", platform.name(), arch.rpm()))
        })
    }

    pub(crate) fn targets_mut(&mut self) -> impl Iterator<Item = &mut Target> {
        self.targets.values_mut().filter_map(|t| t.as_mut().ok())
    }
}

/// The RHEL major of the first release an architecture's artifacts or images carry.
fn first_release(entry: &Value) -> Option<u32> {
    ["artifacts", "images"]
        .into_iter()
        .filter_map(|k| entry.get(k).and_then(Value::as_object))
        .flat_map(|m| m.values())
        .filter_map(|v| v.get("release").and_then(Value::as_str))
        .find_map(rhel_major_of_release)
}

/// Every image the stream names, with its RHCOS release, as each platform reads its own
/// (GCP images, AWS AMIs), of every architecture.
fn stream_releases(architectures: &BTreeMap<Arch, &Value>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for entry in architectures.values() {
        platforms::stream_releases(entry, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rhel_majors_of_releases() {
        for (release, want) in [
            ("10.2.20260715-0", Some(10)),
            ("9.8.20260428-0", Some(9)),
            ("416.94.202405291527-0", Some(9)),
            ("410.84.202206080234-0", Some(8)),
            ("9.8", None),
            ("x.8.1", None),
            ("", None),
        ] {
            assert_eq!(rhel_major_of_release(release), want, "{release}");
        }
    }

    #[test]
    fn a_stream_knows_its_rhel() {
        let doc = StreamDoc::parse(
            r#"{"stream":"rhcos-4.22","architectures":{"x86_64":{"artifacts":{"gcp":{"release":"10.2.20260715-0"}},"images":{"gcp":{"release":"10.2.20260715-0","project":"rhcos-cloud","name":"rhcos-10-2-20260715-0-gcp-x86-64"}}}}}"#,
        )
        .unwrap();
        assert_eq!(doc.rhel_major, Some(10));
        assert_eq!(doc.name, "rhcos-4.22");
        assert_eq!(
            doc.rhcos_release_of(
                "projects/rhcos-cloud/global/images/rhcos-10-2-20260715-0-gcp-x86-64"
            ),
            Some("10.2.20260715-0")
        );
        for bad in ["[]", "3", "{}", r#"{"architectures":{"x86_64":[]}}"#, "{"] {
            assert!(StreamDoc::parse(bad).is_err(), "{bad}");
        }
    }
}
