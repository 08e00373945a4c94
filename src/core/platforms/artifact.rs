//! A stream artifact an importer brings into the cloud, for the platforms whose boot image
//! comes from an import, not from the stream: the stream has no image there, only a disk to
//! download (`artifacts.<platform>.formats.<format>.disk`). The platform's target is the
//! artifact; its rule names the image the import makes of it
//! (`<infra-id>-rhcos-<release>…`) and moves a MachineSet only once what the cluster side
//! learned says that image is ready. vSphere's OVA is one; OpenStack's `qcow2.gz` and
//! Nutanix's `qcow2` have the same shape.
//!
//! Where an importer downloads it is here too ([`download_url`]), so that every importer
//! fetches from a mirror (`--artifact-base-url`) by the same rule.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use super::rules::{EntryError, Outcome, Reading};
use crate::core::arch::Arch;
pub use crate::core::learned::Imported;
use crate::core::reason::Reason;
use crate::core::skew::version::{self as skew, Source, Version};

/// One architecture's artifact of a platform, in one format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Artifact {
    /// `artifacts.<platform>.release`, e.g. `9.8.20260428-0`: part of the imported name.
    pub release: String,
    /// `formats.<format>.disk.location`, where the importer downloads it.
    pub location: String,
    /// `formats.<format>.disk.sha256`, lowercase hex, checked before anything is imported.
    pub sha256: String,
    /// `formats.<format>.disk.uncompressed-sha256` of a compressed format (`qcow2.gz`):
    /// the disk as the cloud stores it, lowercase hex.
    pub uncompressed_sha256: Option<String>,
}

impl Artifact {
    /// `artifacts.<platform>` of one architecture's entry, in `format` (`ova`,
    /// `qcow2.gz`); `None` when the entry has none for that platform.
    pub fn read(entry: &Value, platform: &str, format: &str) -> Result<Option<Self>, EntryError> {
        let Some(artifact) = entry.get("artifacts").and_then(|a| a.get(platform)) else {
            return Ok(None);
        };
        let named = |path: &[&str]| format!("artifacts.{platform}.{}", path.join("."));
        let at = |path: &[&str]| path.iter().try_fold(artifact, |v, k| v.get(*k));
        let field = |path: &[&str], valid: fn(&str) -> bool, what: &'static str| {
            let value = at(path)
                .and_then(Value::as_str)
                .ok_or_else(|| EntryError::Missing(named(path)))?;
            match valid(value) {
                true => Ok(value),
                false => Err(EntryError::Invalid {
                    field: named(path),
                    value: value.to_owned(),
                    what,
                }),
            }
        };
        let release = field(&["release"], is_release, "RHCOS release")?;
        let disk = ["formats", format, "disk"];
        let location = field(&[&disk[..], &["location"]].concat(), is_url, "URL")?;
        let sha256 = field(&[&disk[..], &["sha256"]].concat(), is_sha256, "SHA-256")?;
        let uncompressed = [&disk[..], &["uncompressed-sha256"]].concat();
        let uncompressed_sha256 = match at(&uncompressed) {
            None => None,
            Some(_) => Some(field(&uncompressed, is_sha256, "SHA-256")?.to_ascii_lowercase()),
        };
        Ok(Some(Artifact {
            release: release.to_owned(),
            location: location.to_owned(),
            sha256: sha256.to_ascii_lowercase(),
            uncompressed_sha256,
        }))
    }
}

/// `--artifact-base-url`: the directory of an HTTP(S) server that holds the stream's
/// artifacts under their own file names, as Red Hat's disconnected installs have them
/// served. Only where a file is fetched from changes: the stream's checksums still decide.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactMirror {
    /// Always ends with `/`.
    base: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MirrorError {
    #[error("not an http:// or https:// URL: the importers download over HTTP(S) only")]
    NotHttp,
    #[error("no host in it")]
    NoHost,
    #[error(
        "a user or password in the URL is not supported: it would be logged with every download"
    )]
    UserInfo,
    #[error("it has a query or fragment: give the directory that holds the files")]
    QueryOrFragment,
    #[error("not a valid URL: {0}")]
    Invalid(String),
    #[error(
        "the stream's location {location} ends in no file name to fetch from the mirror {base}"
    )]
    NoFileName { location: String, base: String },
}

impl ArtifactMirror {
    /// The flag's value, read as a directory: `https://mirror.internal/rhcos` and
    /// `https://mirror.internal/rhcos/` are the same one.
    pub fn parse(url: &str) -> Result<ArtifactMirror, MirrorError> {
        let (scheme, rest) = url.split_once("://").ok_or(MirrorError::NotHttp)?;
        let scheme = scheme.to_ascii_lowercase();
        if scheme != "http" && scheme != "https" {
            return Err(MirrorError::NotHttp);
        }
        if rest.contains(['?', '#']) {
            return Err(MirrorError::QueryOrFragment);
        }
        let authority = rest.split('/').next().unwrap_or_default();
        if authority.contains('@') {
            return Err(MirrorError::UserInfo);
        }
        if authority.is_empty() || authority.starts_with(':') {
            return Err(MirrorError::NoHost);
        }
        let mut base = format!("{scheme}://{rest}");
        if !base.ends_with('/') {
            base.push('/');
        }
        // Refused now rather than by the first download: the same parser reads it then.
        base.parse::<hyper::Uri>()
            .map_err(|e| MirrorError::Invalid(e.to_string()))?;
        Ok(ArtifactMirror { base })
    }

    /// The directory, ending with `/`.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// The mirror's URL of the stream's `location`: the base followed by the location's
    /// file name (its last path segment). A query or fragment was for the stream's host.
    pub fn locate(&self, location: &str) -> Result<String, MirrorError> {
        let no_file = || MirrorError::NoFileName {
            location: location.to_owned(),
            base: self.base.clone(),
        };
        let before_query = location.split(['?', '#']).next().unwrap_or_default();
        let after_scheme = before_query
            .split_once("://")
            .map_or(before_query, |(_, rest)| rest);
        let (_, path) = after_scheme.split_once('/').ok_or_else(no_file)?;
        let file = path.rsplit('/').next().unwrap_or_default();
        if file.is_empty() || file == "." || file == ".." {
            return Err(no_file());
        }
        Ok(format!("{}{file}", self.base))
    }
}

impl std::fmt::Display for ArtifactMirror {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.base)
    }
}

/// Where an importer downloads the artifact the stream puts at `location`: from the
/// mirror when there is one, else from the stream's own location.
pub fn download_url(
    mirror: Option<&ArtifactMirror>,
    location: &str,
) -> Result<String, MirrorError> {
    match mirror {
        Some(mirror) => mirror.locate(location),
        None => Ok(location.to_owned()),
    }
}

fn is_url(s: &str) -> bool {
    s.starts_with("https://") || s.starts_with("http://")
}

fn is_sha256(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|c| c.is_ascii_hexdigit())
}

/// An RHCOS release as streams write it (`9.8.20260428-0`, `418.94.202511191518-0`).
fn is_release(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 40
        && s.as_bytes()[0].is_ascii_digit()
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'.' || c == b'-' || c == b'_')
}

impl Imported {
    /// Nothing while `wanted` is usable; else the skip of a MachineSet that waits for it,
    /// with the platform's `reason` and what is `not_yet` ("not active in Glance yet").
    pub(crate) fn waiting(
        learned: Option<&Imported>,
        reason: Reason,
        wanted: &str,
        release: &str,
        not_yet: &str,
    ) -> Option<Outcome> {
        if learned.is_some_and(|l| l.images.contains(wanted)) {
            return None;
        }
        let why = match learned {
            Some(l) => l
                .unavailable
                .as_deref()
                .map(|u| format!(" ({u})"))
                .unwrap_or_default(),
            None => " (no importer has reported here)".to_owned(),
        };
        Some(Outcome::Skip {
            reason,
            message: format!(
                "image {wanted} (RHCOS {release}) is {not_yet}{why}: the MachineSet moves once it is"
            ),
            current: None,
            target: Some(wanted.to_owned()),
        })
    }
}

/// The image a MachineSet naming `current` in `field` moves to, `<infra-id>-rhcos-<release>`,
/// or what stops it: no infrastructure id yet (`NotReady`), already there (`UpToDate`), or a
/// name that is the customer's (`CustomImage`).
pub(crate) fn move_to(
    current: &str,
    field: &str,
    release: &str,
    infra_id: Option<&str>,
) -> Result<String, Outcome> {
    let Some(infra_id) = infra_id else {
        return Err(Outcome::skip(
            Reason::NotReady,
            "Infrastructure cluster names no infrastructure id yet: the image's name is not known",
        )
        .with_current(current));
    };
    let wanted = image_name(infra_id, release);
    if current == wanted {
        return Err(Outcome::UpToDate {
            current: current.to_owned(),
            target: wanted,
        });
    }
    if !may_move_from(current, infra_id) {
        return Err(Outcome::Skip {
            reason: Reason::CustomImage,
            message: format!(
                "{field} {current:?} is neither the installer's image nor one this webhook imports: the customer's, leaving the MachineSet alone"
            ),
            current: Some(current.to_owned()),
            target: Some(wanted),
        });
    }
    Ok(wanted)
}

/// Whether a MachineSet may be moved away from an image name: empty, the installer's
/// (`<infra-id>-rhcos`, when it made the image itself), or one of ours of any release. Any
/// other is the customer's (OpenStack's `clusterOSImage` or Nutanix's
/// `preloadedOSImageName` naming an image of theirs, an image made by Red Hat's manual
/// procedure).
fn may_move_from(name: &str, infra_id: &str) -> bool {
    name.is_empty()
        || name == format!("{infra_id}-rhcos")
        || name_parts(name).is_some_and(|(prefix, _, _)| prefix == infra_id)
}

/// The name the OpenStack and Nutanix importers give the image of a release:
/// `<infra-id>-rhcos-<release>`.
pub fn image_name(infra_id: &str, release: &str) -> String {
    format!("{infra_id}-rhcos-{release}")
}

/// The name of a release's image for one architecture where a cluster boots several
/// (OpenStack's multi-architecture clusters): `<infra-id>-rhcos-<release>-<arch>`, the
/// architecture in Kubernetes' spelling; else [`image_name`].
pub fn image_name_for(infra_id: &str, release: &str, arch: Option<Arch>) -> String {
    match arch {
        Some(arch) => format!("{infra_id}-rhcos-{release}-{}", arch.k8s()),
        None => image_name(infra_id, release),
    }
}

/// The infrastructure id, release and architecture (where it has one) of a name of that
/// form.
pub fn name_parts(name: &str) -> Option<(&str, &str, Option<Arch>)> {
    let (prefix, rest) = name.rsplit_once("-rhcos-")?;
    if prefix.is_empty() {
        return None;
    }
    let with_arch = rest.rsplit_once('-').and_then(|(release, arch)| {
        let arch = Arch::from_k8s(arch)?;
        is_rhcos_release(release).then_some((prefix, release, Some(arch)))
    });
    with_arch.or_else(|| is_rhcos_release(rest).then_some((prefix, rest, None)))
}

/// The version a name of that form carries (`Other`: not of that form).
pub(crate) fn version_in_name(image: &str) -> Reading<Version> {
    match release_in_name(image) {
        Some(release) => Reading::Ours(skew::from_release(release, Source::Name)),
        None => Reading::Other,
    }
}

/// The RHCOS release of a name of that form, for any infrastructure id.
pub(crate) fn release_in_name(name: &str) -> Option<&str> {
    name_parts(name).map(|(_, release, _)| release)
}

/// An RHCOS release exactly as RHCOS writes them: `9.8.20260428-0` (RHEL version and
/// build date) or `418.94.202511191518-0` (OpenShift and RHEL versions, build time). An
/// imported name is read back as ours only with such a release in it.
pub(crate) fn is_rhcos_release(s: &str) -> bool {
    static RELEASE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^[0-9]{1,4}\.[0-9]{1,3}\.[0-9]{8}(?:[0-9]{4})?-[0-9]{1,3}$")
            .expect("a valid pattern")
    });
    RELEASE.is_match(s)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn releases() {
        for ok in [
            "9.8.20260428-0",
            "418.94.202511191518-0",
            "416.94.202405291527-0",
            "10.1.20251120-12",
        ] {
            assert!(is_release(ok) && is_rhcos_release(ok), "{ok}");
        }
        for bad in ["", "us-east", "9 8", "9/8"] {
            assert!(!is_release(bad), "{bad}");
        }
        for loose in [
            "4.16-golden",
            "9.8",
            "9.8.2026-0",
            "9.8.20260428",
            "9.8.20260428-0a",
        ] {
            assert!(!is_rhcos_release(loose), "{loose}");
        }
    }

    const QCOW2: &str = "https://rhcos.mirror.openshift.com/art/storage/prod/streams/rhel-9.8/builds/9.8.20260428-0/x86_64/rhcos-9.8.20260428-0-openstack.x86_64.qcow2.gz";

    #[test]
    fn the_mirror_serves_each_file_under_its_own_name() {
        let file = "rhcos-9.8.20260428-0-openstack.x86_64.qcow2.gz";
        for (base, dir) in [
            (
                "https://mirror.internal/rhcos/",
                "https://mirror.internal/rhcos/",
            ),
            (
                "https://mirror.internal/rhcos",
                "https://mirror.internal/rhcos/",
            ),
            ("https://mirror.internal", "https://mirror.internal/"),
            ("http://10.0.0.5:8080/a/b/", "http://10.0.0.5:8080/a/b/"),
            (
                "http://[fd00::5]:8080/rhcos",
                "http://[fd00::5]:8080/rhcos/",
            ),
            (
                "HTTPS://Mirror.internal/RHCOS",
                "https://Mirror.internal/RHCOS/",
            ),
        ] {
            let mirror = ArtifactMirror::parse(base).unwrap();
            assert_eq!(mirror.base(), dir, "{base}");
            assert_eq!(mirror.to_string(), dir);
            assert_eq!(
                download_url(Some(&mirror), QCOW2).unwrap(),
                format!("{dir}{file}")
            );
        }
        assert_eq!(download_url(None, QCOW2).unwrap(), QCOW2);
        let mirror = ArtifactMirror::parse("https://m/rhcos/").unwrap();
        // A query was for the stream's host.
        assert_eq!(
            mirror.locate("https://h/x/disk.ova?token=1#f").unwrap(),
            "https://m/rhcos/disk.ova"
        );
        for nameless in ["https://h/x/", "https://h", "https://h/x/..", "https://h/."] {
            assert_eq!(
                mirror.locate(nameless).unwrap_err().to_string(),
                format!(
                    "the stream's location {nameless} ends in no file name to fetch from the mirror https://m/rhcos/"
                )
            );
        }
    }

    /// The rule keeps only file names: it holds because RHCOS names every artifact of a
    /// stream apart (release, platform, architecture, format in each name).
    #[test]
    fn no_two_artifacts_of_the_stream_share_a_file_name() {
        let mirror = ArtifactMirror::parse("https://mirror.internal/rhcos").unwrap();
        let text = crate::core::configmap::EMBEDDED_CONFIGMAP;
        let locations: Vec<&str> = text
            .split("\"location\": \"")
            .skip(1)
            .filter_map(|rest| rest.split('"').next())
            .collect();
        assert!(locations.len() > 40, "{}", locations.len());
        assert!(locations.contains(&QCOW2));
        let mirrored: std::collections::BTreeSet<String> = locations
            .iter()
            .map(|l| mirror.locate(l).unwrap())
            .collect();
        assert_eq!(mirrored.len(), locations.len());
    }

    #[test]
    fn a_base_url_the_importers_cannot_use_is_refused() {
        for (url, why) in [
            ("ftp://mirror.internal/rhcos/", MirrorError::NotHttp),
            ("file:///srv/rhcos/", MirrorError::NotHttp),
            ("mirror.internal/rhcos/", MirrorError::NotHttp),
            ("", MirrorError::NotHttp),
            ("https://", MirrorError::NoHost),
            ("https:///rhcos/", MirrorError::NoHost),
            ("http://:8080/rhcos/", MirrorError::NoHost),
            (
                "https://admin:secret@mirror.internal/",
                MirrorError::UserInfo,
            ),
            (
                "https://mirror.internal/get?file=",
                MirrorError::QueryOrFragment,
            ),
            (
                "https://mirror.internal/rhcos/#x",
                MirrorError::QueryOrFragment,
            ),
        ] {
            assert_eq!(ArtifactMirror::parse(url), Err(why), "{url}");
        }
        for bad in ["https://mirror internal/", "https://mirror.internal/a b/"] {
            assert!(
                matches!(ArtifactMirror::parse(bad), Err(MirrorError::Invalid(_))),
                "{bad}"
            );
        }
        assert_eq!(
            MirrorError::NotHttp.to_string(),
            "not an http:// or https:// URL: the importers download over HTTP(S) only"
        );
    }

    #[test]
    fn names_of_ours_and_the_installers_may_move() {
        let infra = "ostest-x7k2p";
        for ok in [
            "",
            "ostest-x7k2p-rhcos",
            "ostest-x7k2p-rhcos-9.6.20250402-0",
            "ostest-x7k2p-rhcos-418.94.202410090804-0",
        ] {
            assert!(may_move_from(ok, infra), "{ok}");
        }
        for customer in [
            "rhcos",
            "rhcos-4.16",
            "rhcos-9.6-boot-image",
            "my-golden-rhcos",
            "ostest-x7k2p-rhcos-golden",
            "ostest-x7k2p-rhcos-9.6",
            "other-abcde-rhcos-9.6.20250402-0",
            "ostest-x7k2p-rhcos-9.6.20250402-0-copy",
        ] {
            assert!(!may_move_from(customer, infra), "{customer}");
        }
    }

    #[test]
    fn a_name_of_ours_carries_its_release() {
        assert_eq!(
            release_in_name("ostest-x7k2p-rhcos-9.8.20260428-0"),
            Some("9.8.20260428-0")
        );
        assert_eq!(release_in_name("ostest-x7k2p-rhcos"), None);
        assert_eq!(
            name_parts("ostest-x7k2p-rhcos-9.8.20260428-0-arm64"),
            Some(("ostest-x7k2p", "9.8.20260428-0", Some(Arch::Arm64)))
        );
        assert_eq!(
            image_name_for("ostest-x7k2p", "9.8.20260428-0", Some(Arch::Amd64)),
            "ostest-x7k2p-rhcos-9.8.20260428-0-amd64"
        );
        assert_eq!(
            release_in_name("ostest-x7k2p-rhcos-9.8.20260428-0-x86_64"),
            None
        );
        assert!(may_move_from(
            "ostest-x7k2p-rhcos-9.6.20250402-0-arm64",
            "ostest-x7k2p"
        ));
        assert_eq!(release_in_name("-rhcos-9.8.20260428-0"), None);
        assert_eq!(release_in_name("rhcos-9-8-20260428-0-gcp-x86-64"), None);
    }

    #[test]
    fn a_compressed_format_has_both_checksums() {
        let (a, b) = ("A".repeat(64), "b".repeat(64));
        let entry = json!({"artifacts": {"openstack": {"release": "9.8.20260428-0", "formats": {
            "qcow2.gz": {"disk": {"location": "https://example.com/x.qcow2.gz",
                "sha256": a, "uncompressed-sha256": b}}}}}});
        let read = Artifact::read(&entry, "openstack", "qcow2.gz")
            .unwrap()
            .unwrap();
        assert_eq!(read.sha256, "a".repeat(64));
        assert_eq!(read.uncompressed_sha256, Some(b));
        assert_eq!(Artifact::read(&entry, "vmware", "ova"), Ok(None));
        let mut bad = entry.clone();
        bad["artifacts"]["openstack"]["formats"]["qcow2.gz"]["disk"]["uncompressed-sha256"] =
            json!("x");
        assert_eq!(
            Artifact::read(&bad, "openstack", "qcow2.gz")
                .unwrap_err()
                .to_string(),
            "artifacts.openstack.formats.qcow2.gz.disk.uncompressed-sha256 \"x\" is not a valid SHA-256"
        );
    }
}
