//! A stream artifact an importer brings into the cloud, for the platforms whose boot image
//! comes from an import, not from the stream: the stream has no image there, only a disk to
//! download (`artifacts.<platform>.formats.<format>.disk`). The platform's target is the
//! artifact; its rule names the image the import makes of it
//! (`<infra-id>-rhcos-<release>…`) and moves a MachineSet only once what the cluster side
//! learned says that image is ready. vSphere's OVA is one; OpenStack's `qcow2.gz` and
//! Nutanix's `qcow2` have the same shape.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use super::{EntryError, Outcome, Reading};
use crate::core::reason::Reason;
use crate::core::skew::{self, Source, Version};

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

/// What an importer found in its cloud (Glance, Prism Central): the names of images of
/// ours that are ready and alone under their name, which a MachineSet may be given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Imported {
    pub images: BTreeSet<String>,
    /// Why nothing can be imported now (no credentials, the cloud unreachable, a bad
    /// checksum), for the messages of the MachineSets that wait.
    pub unavailable: Option<String>,
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
        || release_in_name(name).is_some_and(|r| name == image_name(infra_id, r))
}

/// The name the OpenStack and Nutanix importers give the image of a release:
/// `<infra-id>-rhcos-<release>`.
pub fn image_name(infra_id: &str, release: &str) -> String {
    format!("{infra_id}-rhcos-{release}")
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
    let (prefix, release) = name.rsplit_once("-rhcos-")?;
    (!prefix.is_empty() && is_rhcos_release(release)).then_some(release)
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
