//! The stream's OVA: downloaded once into the cache directory (an `emptyDir`), from the
//! stream's location or a mirror's, its size bounded and its SHA-256 checked against the
//! stream before it is kept; then read as the tar it is (the OVF descriptor, and where each
//! disk lies in the file).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use futures::StreamExt;
use http_body_util::{BodyExt, Empty, StreamBody};
use hyper::body::Frame;
use tokio::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};

use super::https::{Body, Https};
use crate::cluster::cause::{Cause, cause};
use crate::core::platforms::artifact::{ArtifactMirror, download_url};
use crate::core::platforms::vsphere::VSphereTarget;

#[derive(Debug, Clone, thiserror::Error)]
pub enum OvaError {
    #[error("downloading {url}: {cause}")]
    Download {
        url: String,
        #[source]
        cause: Cause,
    },
    #[error("the OVA at {url} is larger than {max} bytes (--vsphere-ova-max-bytes): not imported")]
    TooLarge { url: String, max: u64 },
    #[error("the OVA at {url} has SHA-256 {got}, the stream says {want}: not imported")]
    Checksum {
        url: String,
        want: String,
        got: String,
    },
    #[error(
        "downloading {url}: not done within {limit:?} (--vsphere-ova-download-timeout): given up, tried again later"
    )]
    Deadline {
        url: String,
        limit: std::time::Duration,
    },
    #[error("the OVA {path}: {cause}")]
    Read {
        path: String,
        #[source]
        cause: Cause,
    },
    #[error("the OVA cache {dir}: {cause}")]
    Cache {
        dir: String,
        #[source]
        cause: Cause,
    },
}

impl OvaError {
    /// The OVA itself is wrong (not the network): worth a Warning Event.
    pub fn is_bad_ova(&self) -> bool {
        matches!(
            self,
            OvaError::Checksum { .. } | OvaError::TooLarge { .. } | OvaError::Read { .. }
        )
    }
}

/// A download that sends nothing for this long is given up (and retried later).
const STALL: std::time::Duration = std::time::Duration::from_secs(60);

/// An OVA on disk: its OVF descriptor, and each file's place in it.
#[derive(Debug)]
pub struct Ova {
    pub path: PathBuf,
    pub descriptor: String,
    /// File name: (offset, size).
    pub files: BTreeMap<String, (u64, u64)>,
}

/// How much and how long a download may take.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_bytes: u64,
    pub deadline: std::time::Duration,
}

/// The cache's file for `target`: named by its URL and checksum together, so that a stream
/// naming another file under the same checksum never gets the one kept before.
pub fn cache_name(target: &VSphereTarget) -> String {
    let key = format!("{}\n{}", target.location, target.sha256);
    let digest = ring::digest::digest(&ring::digest::SHA256, key.as_bytes());
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("{hex}.ova")
}

/// The OVA of `target` in `dir`, downloaded (from `mirror` when given) unless it is
/// already there. The file is renamed into place only once the checksum matched, so a file
/// found there was checked; other OVAs there are removed (one release's is enough).
pub async fn fetch(
    http: &Https,
    dir: &Path,
    target: &VSphereTarget,
    mirror: Option<&ArtifactMirror>,
    limits: Limits,
) -> Result<PathBuf, OvaError> {
    let url = download_url(mirror, &target.location).map_err(|e| OvaError::Download {
        url: target.location.clone(),
        cause: cause(e),
    })?;
    // From here on the URL is the one fetched: the cache key and every message name it.
    let target = &VSphereTarget {
        location: url,
        ..target.clone()
    };
    let cache = |e: std::io::Error| OvaError::Cache {
        dir: dir.display().to_string(),
        cause: cause(e),
    };
    let path = dir.join(cache_name(target));
    if tokio::fs::try_exists(&path).await.map_err(cache)? {
        return Ok(path);
    }
    tokio::fs::create_dir_all(dir).await.map_err(cache)?;
    remove_others(dir, &path).await.map_err(cache)?;
    let part = path.with_extension("ova.part");
    tracing::info!(url = %target.location, "downloading the RHCOS OVA");
    let downloaded = download(http, &part, target, limits.max_bytes);
    let result = match tokio::time::timeout(limits.deadline, downloaded).await {
        Ok(result) => result,
        Err(_) => Err(OvaError::Deadline {
            url: target.location.clone(),
            limit: limits.deadline,
        }),
    };
    match result {
        Ok(()) => {
            tokio::fs::rename(&part, &path).await.map_err(cache)?;
            Ok(path)
        }
        Err(e) => {
            let _ = tokio::fs::remove_file(&part).await;
            Err(e)
        }
    }
}

async fn remove_others(dir: &Path, keep: &Path) -> std::io::Result<()> {
    let mut entries = tokio::fs::read_dir(dir).await?;
    while let Some(e) = entries.next_entry().await? {
        let name = e.file_name();
        let name = name.to_string_lossy();
        if e.path() != keep && (name.ends_with(".ova") || name.ends_with(".ova.part")) {
            tokio::fs::remove_file(e.path()).await?;
        }
    }
    Ok(())
}

async fn download(
    http: &Https,
    part: &Path,
    target: &VSphereTarget,
    max: u64,
) -> Result<(), OvaError> {
    let url = &target.location;
    let failed = |cause: Cause| OvaError::Download {
        url: url.clone(),
        cause,
    };
    let req = hyper::Request::get(url)
        .body(Empty::new().map_err(|never| match never {}).boxed_unsync())
        .map_err(|e| failed(cause(e)))?;
    let resp = tokio::time::timeout(STALL, http.start(req))
        .await
        .map_err(|_| failed(cause(format!("no answer within {STALL:?}"))))?
        .map_err(|e| failed(cause(e)))?;
    if !resp.status().is_success() {
        return Err(failed(cause(format!("HTTP {}", resp.status()))));
    }
    let mut file = tokio::fs::File::create(part)
        .await
        .map_err(|e| failed(cause(e)))?;
    let mut digest = ring::digest::Context::new(&ring::digest::SHA256);
    let mut size: u64 = 0;
    let mut body = resp.into_body();
    loop {
        let next = tokio::time::timeout(STALL, body.frame()).await;
        let Some(frame) = next.map_err(|_| failed(cause(format!("no data for {STALL:?}"))))? else {
            break;
        };
        let frame = frame.map_err(|e| failed(cause(e)))?;
        let Some(data) = frame.data_ref() else {
            continue;
        };
        size += data.len() as u64;
        if size > max {
            return Err(OvaError::TooLarge {
                url: url.clone(),
                max,
            });
        }
        digest.update(data);
        file.write_all(data).await.map_err(|e| failed(cause(e)))?;
    }
    file.sync_all().await.map_err(|e| failed(cause(e)))?;
    let got: String = digest
        .finish()
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    if got != target.sha256 {
        return Err(OvaError::Checksum {
            url: url.clone(),
            want: target.sha256.clone(),
            got,
        });
    }
    Ok(())
}

/// Reads the OVA's table of contents (blocking: run it off the runtime's threads).
pub fn open(path: &Path) -> Result<Ova, OvaError> {
    let read = |cause: Cause| OvaError::Read {
        path: path.display().to_string(),
        cause,
    };
    let file = std::fs::File::open(path).map_err(|e| read(cause(e)))?;
    let mut archive = tar::Archive::new(file);
    let mut descriptor = None;
    let mut files = BTreeMap::new();
    for entry in archive.entries().map_err(|e| read(cause(e)))? {
        let mut entry = entry.map_err(|e| read(cause(e)))?;
        let name = entry
            .path()
            .map_err(|e| read(cause(e)))?
            .to_string_lossy()
            .into_owned();
        let (offset, size) = (entry.raw_file_position(), entry.size());
        if name.ends_with(".ovf") && descriptor.is_none() {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut entry, &mut text)
                .map_err(|e| read(cause(format!("{name}: {e}"))))?;
            descriptor = Some(text);
        }
        files.insert(name, (offset, size));
    }
    let descriptor = descriptor.ok_or_else(|| read(cause("no .ovf descriptor in it")))?;
    Ok(Ova {
        path: path.to_owned(),
        descriptor,
        files,
    })
}

/// The networks the OVF descriptor names (`NetworkSection/Network/@ovf:name`).
pub fn networks(descriptor: &str) -> Vec<String> {
    let Ok(doc) = roxmltree::Document::parse(descriptor) else {
        return Vec::new();
    };
    doc.descendants()
        .filter(|n| n.tag_name().name() == "Network")
        .filter(|n| {
            n.parent()
                .is_some_and(|p| p.tag_name().name() == "NetworkSection")
        })
        .filter_map(|n| {
            n.attributes()
                .find(|a| a.name() == "name")
                .map(|a| a.value().to_owned())
        })
        .collect()
}

/// A file of the OVA as a request body, streamed from disk.
pub async fn body(ova: &Ova, offset: u64, size: u64) -> std::io::Result<Body> {
    let mut file = tokio::fs::File::open(&ova.path).await?;
    file.seek(std::io::SeekFrom::Start(offset)).await?;
    let reader = file.take(size);
    let stream = futures::stream::unfold(reader, |mut reader| async move {
        let mut buf = vec![0u8; 256 << 10];
        match reader.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok(Frame::data(Bytes::from(buf))), reader))
            }
            Err(e) => Some((Err(e), reader)),
        }
    });
    Ok(BodyExt::boxed_unsync(StreamBody::new(stream.boxed())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_is_keyed_by_url_and_checksum_together() {
        let target = |location: &str, sha256: &str| VSphereTarget {
            release: "9.8.20260428-0".into(),
            location: location.into(),
            sha256: sha256.into(),
            uncompressed_sha256: None,
        };
        let (a, b) = ("a".repeat(64), "b".repeat(64));
        let old = cache_name(&target("https://mirror/rhcos-9.8.20260428-0.ova", &a));
        assert_eq!(
            old,
            cache_name(&target("https://mirror/rhcos-9.8.20260428-0.ova", &a))
        );
        // Another file under the checksum of the one kept: not the one kept.
        assert_ne!(
            old,
            cache_name(&target("https://mirror/rhcos-9.8.20260601-0.ova", &a))
        );
        assert_ne!(
            old,
            cache_name(&target("https://mirror/rhcos-9.8.20260428-0.ova", &b))
        );
        assert!(old.ends_with(".ova"));
    }
}
