//! The stream's qcow2 an importer uploads (OpenStack's
//! `artifacts.openstack.formats["qcow2.gz"].disk`, Nutanix's plain qcow2): downloaded once into the cache directory, from the stream's location or a mirror's,
//! its size bounded, the whole download bounded by a deadline, the SHA-256 of the `.gz`
//! checked as it arrives and that of the qcow2 (`uncompressed-sha256`) as it is inflated;
//! only then is the qcow2 kept, under a name made of the URL fetched and both checksums.
//! Then streamed to the cloud (Glance, Prism Central), hashed again on the way.
//!
//! Inflated with flate2 (rust-lang's own crate, on its pure-Rust backend): the download
//! is written whole first and inflated from the file on a blocking thread, so the network
//! side needs no async decoder (async-compression's wrappers add nothing here), and a
//! multi-member `.gz` reads as one stream, as gzip(1) reads it.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures::StreamExt;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::https::{self, Body, Https};
use crate::cluster::cause::{Cause, cause};
use crate::core::platforms::artifact::{ArtifactMirror, download_url};

/// The stream's qcow2.gz of one release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Qcow2Target {
    pub stream: String,
    pub release: String,
    pub location: String,
    /// Of the `.gz`.
    pub sha256: String,
    /// Of the qcow2 it holds.
    pub uncompressed_sha256: String,
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum ArtifactError {
    #[error("downloading {url}: {cause}")]
    Download {
        url: String,
        #[source]
        cause: Cause,
    },
    #[error("the qcow2 at {url} is larger than {max} bytes (compressed or not): not imported")]
    TooLarge { url: String, max: u64 },
    #[error("the {what} at {url} has SHA-256 {got}, the stream says {want}: not imported")]
    Checksum {
        url: String,
        what: &'static str,
        want: String,
        got: String,
    },
    #[error("the qcow2.gz at {url} is not gzip data: {cause}: not imported")]
    NotGzip {
        url: String,
        #[source]
        cause: Cause,
    },
    #[error("downloading {url}: not done within {limit:?}: given up, tried again later")]
    Deadline {
        url: String,
        limit: std::time::Duration,
    },
    #[error("the qcow2 cache {dir}: {cause}")]
    Cache {
        dir: String,
        #[source]
        cause: Cause,
    },
}

impl ArtifactError {
    /// The artifact itself is wrong (not the network, not the cache).
    pub fn is_bad(&self) -> bool {
        matches!(
            self,
            ArtifactError::Checksum { .. }
                | ArtifactError::TooLarge { .. }
                | ArtifactError::NotGzip { .. }
        )
    }
}

/// A download that sends nothing for this long is given up (and retried later).
const STALL: std::time::Duration = std::time::Duration::from_secs(60);

/// How much and how long a download may take.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// The `.gz`, and the qcow2 inflated from it, each.
    pub max_bytes: u64,
    pub deadline: std::time::Duration,
}

/// The cache's name for `target`: its URL and both checksums together, so that a stream
/// naming another file under a checksum seen before never gets the file kept before.
pub fn cache_name(target: &Qcow2Target) -> String {
    let key = format!(
        "{}\n{}\n{}",
        target.location, target.sha256, target.uncompressed_sha256
    );
    format!(
        "{}.qcow2",
        hex(ring::digest::digest(&ring::digest::SHA256, key.as_bytes()).as_ref())
    )
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The qcow2 of `target` in `dir`, downloaded (from `mirror` when given) and inflated
/// unless it is already there. It is renamed into place only once both checksums matched,
/// so a file found there was checked; other qcow2 files there are removed (one release's
/// is enough).
pub async fn fetch(
    http: &Https,
    dir: &Path,
    target: &Qcow2Target,
    mirror: Option<&ArtifactMirror>,
    limits: Limits,
) -> Result<PathBuf, ArtifactError> {
    let url = download_url(mirror, &target.location).map_err(|e| ArtifactError::Download {
        url: target.location.clone(),
        cause: cause(e),
    })?;
    // From here on the URL is the one fetched: the cache key and every message name it.
    let target = &Qcow2Target {
        location: url,
        ..target.clone()
    };
    let cache = |e: std::io::Error| ArtifactError::Cache {
        dir: dir.display().to_string(),
        cause: cause(e),
    };
    let path = dir.join(cache_name(target));
    if tokio::fs::try_exists(&path).await.map_err(cache)? {
        return Ok(path);
    }
    tokio::fs::create_dir_all(dir).await.map_err(cache)?;
    remove_others(dir, &path).await.map_err(cache)?;
    let gz = path.with_extension("qcow2.gz.part");
    let part = path.with_extension("qcow2.part");
    tracing::info!(url = %target.location, "downloading the RHCOS qcow2.gz");
    let downloaded = download(http, &gz, target, limits.max_bytes);
    let result = match tokio::time::timeout(limits.deadline, downloaded).await {
        Ok(result) => result,
        Err(_) => Err(ArtifactError::Deadline {
            url: target.location.clone(),
            limit: limits.deadline,
        }),
    };
    let result = match result {
        Ok(()) => inflate_checked(&gz, &part, target, limits.max_bytes).await,
        Err(e) => Err(e),
    };
    let _ = tokio::fs::remove_file(&gz).await;
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
        let ours = name.ends_with(".qcow2")
            || name.ends_with(".qcow2.part")
            || name.ends_with(".qcow2.gz.part");
        if e.path() != keep && ours {
            tokio::fs::remove_file(e.path()).await?;
        }
    }
    Ok(())
}

/// The `.gz` into `part`, its size bounded and its SHA-256 checked as it arrives.
async fn download(
    http: &Https,
    part: &Path,
    target: &Qcow2Target,
    max: u64,
) -> Result<(), ArtifactError> {
    let url = &target.location;
    let failed = |cause: Cause| ArtifactError::Download {
        url: url.clone(),
        cause,
    };
    let req = hyper::Request::get(url)
        .body(https::empty())
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
            return Err(ArtifactError::TooLarge {
                url: url.clone(),
                max,
            });
        }
        digest.update(data);
        file.write_all(data).await.map_err(|e| failed(cause(e)))?;
    }
    file.sync_all().await.map_err(|e| failed(cause(e)))?;
    let got = hex(digest.finish().as_ref());
    if got != target.sha256 {
        return Err(ArtifactError::Checksum {
            url: url.clone(),
            // A plain qcow2 (Nutanix's, through fetch_plain) has this one checksum only.
            what: if url.ends_with(".gz") {
                "qcow2.gz"
            } else {
                "qcow2"
            },
            want: target.sha256.clone(),
            got,
        });
    }
    Ok(())
}

/// Inflates `gz` into `part` on a blocking thread, checking the qcow2's SHA-256.
async fn inflate_checked(
    gz: &Path,
    part: &Path,
    target: &Qcow2Target,
    max: u64,
) -> Result<(), ArtifactError> {
    let (gz, part, t) = (gz.to_owned(), part.to_owned(), target.clone());
    let url = target.location.clone();
    let inflated = tokio::task::spawn_blocking(move || inflate(&gz, &part, &t, max)).await;
    inflated.map_err(|e| ArtifactError::Download {
        url,
        cause: cause(e),
    })?
}

fn inflate(gz: &Path, part: &Path, target: &Qcow2Target, max: u64) -> Result<(), ArtifactError> {
    let url = &target.location;
    let io = |e: std::io::Error| ArtifactError::Download {
        url: url.clone(),
        cause: cause(e),
    };
    let mut reader = flate2::read::MultiGzDecoder::new(std::fs::File::open(gz).map_err(io)?);
    let mut out = std::io::BufWriter::new(std::fs::File::create(part).map_err(io)?);
    let mut digest = ring::digest::Context::new(&ring::digest::SHA256);
    let mut buf = vec![0u8; 256 << 10];
    let mut size: u64 = 0;
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                return Err(ArtifactError::NotGzip {
                    url: url.clone(),
                    cause: cause(e),
                });
            }
        };
        size += n as u64;
        if size > max {
            return Err(ArtifactError::TooLarge {
                url: url.clone(),
                max,
            });
        }
        digest.update(&buf[..n]);
        out.write_all(&buf[..n]).map_err(io)?;
    }
    out.into_inner()
        .map_err(|e| io(e.into_error()))?
        .sync_all()
        .map_err(io)?;
    let got = hex(digest.finish().as_ref());
    if got != target.uncompressed_sha256 {
        return Err(ArtifactError::Checksum {
            url: url.clone(),
            what: "uncompressed qcow2",
            want: target.uncompressed_sha256.clone(),
            got,
        });
    }
    Ok(())
}

/// A qcow2 the stream gives uncompressed (Nutanix's) in `dir`, downloaded unless it is
/// already there: its size bounded, the whole download bounded by a deadline, its SHA-256
/// checked as it arrives; kept under a name made of the URL and the checksum, as
/// [`fetch`] keeps its qcow2.
pub async fn fetch_plain(
    http: &Https,
    dir: &Path,
    url: &str,
    sha256: &str,
    limits: Limits,
) -> Result<PathBuf, ArtifactError> {
    let target = Qcow2Target {
        stream: String::new(),
        release: String::new(),
        location: url.to_owned(),
        sha256: sha256.to_owned(),
        uncompressed_sha256: sha256.to_owned(),
    };
    let cache = |e: std::io::Error| ArtifactError::Cache {
        dir: dir.display().to_string(),
        cause: cause(e),
    };
    let path = dir.join(cache_name(&target));
    if tokio::fs::try_exists(&path).await.map_err(cache)? {
        return Ok(path);
    }
    tokio::fs::create_dir_all(dir).await.map_err(cache)?;
    remove_others(dir, &path).await.map_err(cache)?;
    let part = path.with_extension("qcow2.part");
    let downloaded = download(http, &part, &target, limits.max_bytes);
    let result = tokio::time::timeout(limits.deadline, downloaded)
        .await
        .unwrap_or_else(|_| {
            Err(ArtifactError::Deadline {
                url: url.to_owned(),
                limit: limits.deadline,
            })
        });
    if let Err(e) = result {
        let _ = tokio::fs::remove_file(&part).await;
        return Err(e);
    }
    tokio::fs::rename(&part, &path).await.map_err(cache)?;
    Ok(path)
}

/// The SHA-256 and SHA-512 of what a [`body`] sent, once it is sent.
pub struct Sent {
    sha256: ring::digest::Context,
    sha512: ring::digest::Context,
    pub bytes: u64,
}

impl Sent {
    /// Hex SHA-256 and SHA-512 (what Glance reports as `os_hash_value` by default).
    pub fn digests(&self) -> (String, String) {
        (
            hex(self.sha256.clone().finish().as_ref()),
            hex(self.sha512.clone().finish().as_ref()),
        )
    }
}

/// The size, SHA-256 and SHA-512 of the file at `path`, read through once.
pub async fn digests(path: &Path) -> std::io::Result<(u64, (String, String))> {
    let (mut body, _, sent) = body(path).await?;
    while let Some(frame) = body.frame().await {
        frame?;
    }
    let sent = sent
        .lock()
        .map_err(|_| std::io::Error::other("the tally is lost"))?;
    Ok((sent.bytes, sent.digests()))
}

/// The file at `path` as a request body, streamed from disk and hashed on the way.
pub async fn body(path: &Path) -> std::io::Result<(Body, u64, Arc<Mutex<Sent>>)> {
    let file = tokio::fs::File::open(path).await?;
    let size = file.metadata().await?.len();
    let sent = Arc::new(Mutex::new(Sent {
        sha256: ring::digest::Context::new(&ring::digest::SHA256),
        sha512: ring::digest::Context::new(&ring::digest::SHA512),
        bytes: 0,
    }));
    let tally = sent.clone();
    let stream = futures::stream::unfold((file, tally), |(mut file, tally)| async move {
        let mut buf = vec![0u8; 256 << 10];
        match file.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                if let Ok(mut s) = tally.lock() {
                    s.sha256.update(&buf);
                    s.sha512.update(&buf);
                    s.bytes += n as u64;
                }
                Some((Ok(Frame::data(Bytes::from(buf))), (file, tally)))
            }
            Err(e) => Some((Err(e), (file, tally))),
        }
    });
    Ok((
        BodyExt::boxed_unsync(StreamBody::new(stream.boxed())),
        size,
        sent,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(location: &str, sha256: &str, uncompressed: &str) -> Qcow2Target {
        Qcow2Target {
            stream: "rhel-9".into(),
            release: "9.8.20260428-0".into(),
            location: location.into(),
            sha256: sha256.into(),
            uncompressed_sha256: uncompressed.into(),
        }
    }

    #[test]
    fn the_cache_is_keyed_by_url_and_both_checksums() {
        let (a, b) = ("a".repeat(64), "b".repeat(64));
        let url = "https://mirror/rhcos-9.8.20260428-0-openstack.x86_64.qcow2.gz";
        let kept = cache_name(&target(url, &a, &b));
        assert_eq!(kept, cache_name(&target(url, &a, &b)));
        assert_ne!(
            kept,
            cache_name(&target("https://mirror/other.qcow2.gz", &a, &b))
        );
        assert_ne!(kept, cache_name(&target(url, &b, &b)));
        assert_ne!(kept, cache_name(&target(url, &a, &a)));
        assert!(kept.ends_with(".qcow2"));
    }

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn sha(data: &[u8]) -> String {
        hex(ring::digest::digest(&ring::digest::SHA256, data).as_ref())
    }

    #[test]
    fn inflating_checks_the_uncompressed_checksum_and_bounds_the_size() {
        let dir = tempfile::tempdir().unwrap();
        let data = b"QFI\xfb not really a qcow2, but inflated all the same".repeat(100);
        // Two members, as gzip(1) may write them: read as one.
        let mut gz = gzip(&data[..1000]);
        gz.extend(gzip(&data[1000..]));
        let (gz_path, out) = (dir.path().join("a.gz"), dir.path().join("a"));
        std::fs::write(&gz_path, &gz).unwrap();
        let good = target("https://m/a.gz", &sha(&gz), &sha(&data));
        inflate(&gz_path, &out, &good, 1 << 20).unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), data);
        let wrong = target("https://m/a.gz", &sha(&gz), &"0".repeat(64));
        let e = inflate(&gz_path, &out, &wrong, 1 << 20).unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("https://m/a.gz")
                && text.contains(&sha(&data))
                && text.contains(&"0".repeat(64)),
            "{text}"
        );
        assert!(e.is_bad());
        assert!(matches!(
            inflate(&gz_path, &out, &good, 100),
            Err(ArtifactError::TooLarge { .. })
        ));
        std::fs::write(&gz_path, b"plain text").unwrap();
        assert!(matches!(
            inflate(&gz_path, &out, &good, 1 << 20),
            Err(ArtifactError::NotGzip { .. })
        ));
    }

    #[tokio::test]
    async fn a_body_hashes_what_it_sends() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("q");
        let data = vec![7u8; (256 << 10) + 5];
        std::fs::write(&path, &data).unwrap();
        let (body, size, sent) = body(&path).await.unwrap();
        assert_eq!(size, data.len() as u64);
        let collected = body.collect().await.unwrap().to_bytes();
        assert_eq!(collected.len(), data.len());
        let sent = sent.lock().unwrap();
        assert_eq!(sent.bytes, size);
        assert_eq!(sent.digests().0, sha(&data));
    }
}
