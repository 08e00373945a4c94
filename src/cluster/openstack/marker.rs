//! The marker every Glance image this project creates carries from its creation (image
//! properties, set in the create call itself: the cluster's infrastructure name, the
//! stream, the release, the SHA-256 of the uncompressed qcow2, and when its import gives
//! up, by Glance's clock), the image's name, and the rules that decide, from what Glance
//! says right before acting, whether an image may be used or deleted. A name alone never
//! decides.
//!
//! Glance takes any property outside its own schema as a string (its image schema's
//! `additionalProperties`), and filters lists by them; the `bootimage_webhook_` prefix is
//! none of Glance's reserved ones (`os_glance_*`) nor of Nova's (`hw_*`, `img_*`, `os_*`).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::jiff::{SignedDuration, Timestamp};

pub const INFRASTRUCTURE: &str = "bootimage_webhook_infrastructure_name";
pub const STREAM: &str = "bootimage_webhook_stream";
pub const RELEASE: &str = "bootimage_webhook_release";
pub const QCOW2_SHA256: &str = "bootimage_webhook_qcow2_sha256";
pub const IMPORT_DEADLINE: &str = "bootimage_webhook_import_deadline";

/// How long after an import's deadline, by Glance's clock, its image may still be written
/// (an upload already sent that Glance is still storing).
pub const GRACE: Duration = Duration::from_secs(300);

use crate::core::platforms::artifact::name_parts;
/// The image of `release` for the cluster `infra_id`: the decision's name for it.
pub use crate::core::platforms::openstack::{image_name, image_name_for};

/// What this project writes on an image it creates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Marker {
    pub infra_id: String,
    pub stream: String,
    pub release: String,
    /// Of the uncompressed qcow2 (what Glance holds).
    pub qcow2_sha256: String,
    /// By then (Glance's clock) the import has finished or given up.
    pub import_deadline: Option<Timestamp>,
}

impl Marker {
    /// The marker as image properties.
    pub fn pairs(&self) -> Vec<(&'static str, String)> {
        let mut pairs = vec![
            (INFRASTRUCTURE, self.infra_id.clone()),
            (STREAM, self.stream.clone()),
            (RELEASE, self.release.clone()),
            (QCOW2_SHA256, self.qcow2_sha256.clone()),
        ];
        if let Some(deadline) = self.import_deadline {
            pairs.push((IMPORT_DEADLINE, deadline.to_string()));
        }
        pairs
    }

    /// The marker in an image's properties; `None` without its identifying four.
    pub fn read(props: &BTreeMap<String, String>) -> Option<Marker> {
        let get = |k: &str| props.get(k).filter(|v| !v.is_empty()).cloned();
        Some(Marker {
            infra_id: get(INFRASTRUCTURE)?,
            stream: get(STREAM)?,
            release: get(RELEASE)?,
            qcow2_sha256: get(QCOW2_SHA256)?,
            import_deadline: props.get(IMPORT_DEADLINE).and_then(|d| d.parse().ok()),
        })
    }
}

/// What Glance says about an image, read right before acting on it.
#[derive(Debug, Clone)]
pub struct Seen {
    /// `None`: it is gone.
    pub name: Option<String>,
    pub status: String,
    pub marker: Option<Marker>,
    /// Owned by the credentials' project: only such an image may be ours.
    pub owned: bool,
    /// The project that owns it, as Glance says.
    pub owner: Option<String>,
    /// Glance's clock when it was read (its `Date`), if it said.
    pub now: Option<Timestamp>,
}

/// Why an image is left alone.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Keep {
    #[error("gone or renamed")]
    Gone,
    #[error("not marked as ours (no {INFRASTRUCTURE} and the rest)")]
    Unmarked,
    #[error("marked by infrastructure {0}, not this cluster")]
    OtherCluster(String),
    #[error(
        "marked as ours but owned by project {0}, not the credentials': a look-alike, not ours"
    )]
    NotOwned(String),
    #[error("marked for release {marked} and qcow2 {sha256}, not {wanted}")]
    OtherImage {
        marked: String,
        sha256: String,
        wanted: String,
    },
    #[error("{0}, not active")]
    NotActive(String),
    #[error("active")]
    Active,
    #[error("named by a MachineSet, ControlPlaneMachineSet or Machine")]
    Named,
    #[error(
        "made while the qcow2 was downloaded here (another replica's import?): looked at again on the next pass"
    )]
    Appeared,
    #[error(
        "still being imported, maybe by another replica (Glance's clock says {now}, it may run until {until})"
    )]
    MayRun { now: String, until: String },
}

/// Statuses of an image whose data is still coming or never came.
const UNFINISHED: &[&str] = &["queued", "saving", "uploading", "importing", "killed"];

impl Seen {
    /// Still called `name`, and marked by this cluster.
    fn ours(&self, name: &str, infra_id: &str) -> Result<&Marker, Keep> {
        if self.name.as_deref() != Some(name) {
            return Err(Keep::Gone);
        }
        let marker = self.marker.as_ref().ok_or(Keep::Unmarked)?;
        if marker.infra_id != infra_id {
            return Err(Keep::OtherCluster(marker.infra_id.clone()));
        }
        // Anyone may copy properties onto an image of theirs: the owner is Glance's.
        match self.owned {
            true => Ok(marker),
            false => Err(Keep::NotOwned(self.owner.clone().unwrap_or_default())),
        }
    }

    /// An image MachineSets may move to: ours, active, of the stream's qcow2 of `release`.
    pub fn usable(
        &self,
        name: &str,
        infra_id: &str,
        release: &str,
        sha256: &str,
    ) -> Result<(), Keep> {
        let marker = self.ours(name, infra_id)?;
        if marker.release != release || marker.qcow2_sha256 != sha256 {
            return Err(Keep::OtherImage {
                marked: marker.release.clone(),
                sha256: marker.qcow2_sha256.clone(),
                wanted: format!("{release} and qcow2 {sha256}"),
            });
        }
        match self.status.as_str() {
            "active" => Ok(()),
            other => Err(Keep::NotActive(other.to_owned())),
        }
    }

    /// What an import of ours left (not active) may be deleted: still called `name`,
    /// marked by this cluster, named by nothing, and its import provably stopped: one of
    /// this replica's that failed (`failed_here`), one Glance gave up (`killed`), or
    /// Glance's clock is past its deadline and the grace after it.
    pub fn clearable(
        &self,
        name: &str,
        infra_id: &str,
        named: bool,
        failed_here: bool,
    ) -> Result<(), Keep> {
        if !UNFINISHED.contains(&self.status.as_str()) {
            return Err(match self.status.as_str() {
                "active" => Keep::Active,
                other => Keep::NotActive(other.to_owned()),
            });
        }
        let marker = self.ours(name, infra_id)?;
        if named {
            return Err(Keep::Named);
        }
        if failed_here || self.status == "killed" {
            return Ok(());
        }
        let grace = SignedDuration::try_from(GRACE).unwrap_or(SignedDuration::MAX);
        // No readable deadline or clock: no proof that it stopped.
        let until = marker
            .import_deadline
            .and_then(|d| d.checked_add(grace).ok())
            .unwrap_or(Timestamp::MAX);
        match self.now {
            Some(now) if now > until => Ok(()),
            now => Err(Keep::MayRun {
                now: now.map_or("nothing".into(), |n| n.to_string()),
                until: until.to_string(),
            }),
        }
    }

    /// An active image of ours, unused for the retention, may be deleted: still called
    /// `name`, which is the name of the release its marker says (with an architecture
    /// or without), marked by this cluster, and named by nothing.
    pub fn retirable(&self, name: &str, infra_id: &str, named: bool) -> Result<(), Keep> {
        let marker = self.ours(name, infra_id)?;
        if name_parts(name).is_none_or(|(i, r, _)| i != infra_id || r != marker.release) {
            return Err(Keep::OtherImage {
                marked: marker.release.clone(),
                sha256: marker.qcow2_sha256.clone(),
                wanted: format!("the release its name says ({name})"),
            });
        }
        if self.status != "active" {
            return Err(Keep::NotActive(self.status.clone()));
        }
        match named {
            true => Err(Keep::Named),
            false => Ok(()),
        }
    }
}

/// The properties of an image in use that a new image of RHCOS carries over: those that
/// tell Nova how to boot it (`hw_*`, `img_*`, `os_*`, `trait:*`, `architecture`,
/// `hypervisor_type`, `vm_mode`), as the install-config's `clusterOSImageProperties` set
/// them. Never what describes the old data (`img_signature*`, a client's
/// `owner_specified.*` digests, Glance's `os_hash_*`), Glance's own (`os_glance*`,
/// `os_hidden`), a snapshot's, nor a marker of ours.
pub fn carried(props: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    const KEYS: &[&str] = &["architecture", "hypervisor_type", "vm_mode"];
    const PREFIXES: &[&str] = &["hw_", "img_", "os_", "trait:"];
    const NEVER: &[&str] = &[
        "img_signature",
        "os_glance",
        "os_hash",
        "os_hidden",
        "bootimage_webhook_",
    ];
    props
        .iter()
        .filter(|(k, _)| KEYS.contains(&k.as_str()) || PREFIXES.iter().any(|p| k.starts_with(p)))
        .filter(|(k, _)| !NEVER.iter().any(|p| k.starts_with(p)))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// How long an import of `bytes` may take end to end (the image made, its upload at a
/// mebibyte a second, Glance storing it), after which it gives up.
pub fn import_budget(bytes: u64) -> Duration {
    Duration::from_secs(600 + (bytes >> 20))
}

#[cfg(test)]
mod tests {
    use super::*;

    const INFRA: &str = "ci-os-abc12";
    const RELEASE_A: &str = "9.8.20260428-0";

    fn marker(deadline: Option<&str>) -> Marker {
        Marker {
            infra_id: INFRA.into(),
            stream: "rhel-9".into(),
            release: RELEASE_A.into(),
            qcow2_sha256: "ab".repeat(32),
            import_deadline: deadline.map(|d| d.parse().unwrap()),
        }
    }

    fn seen(status: &str, marker: Option<Marker>, now: Option<&str>) -> Seen {
        Seen {
            name: Some(image_name(INFRA, RELEASE_A)),
            status: status.into(),
            marker,
            owned: true,
            owner: Some("p1".into()),
            now: now.map(|n| n.parse().unwrap()),
        }
    }

    fn name() -> String {
        image_name(INFRA, RELEASE_A)
    }

    #[test]
    fn the_marker_reads_back_from_the_properties() {
        let m = marker(Some("2026-05-01T10:00:00Z"));
        let props: BTreeMap<String, String> = m
            .pairs()
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
        assert_eq!(Marker::read(&props), Some(m));
        for key in [INFRASTRUCTURE, STREAM, RELEASE, QCOW2_SHA256] {
            let mut partial = props.clone();
            partial.insert(key.into(), String::new());
            assert_eq!(Marker::read(&partial), None, "{key}");
        }
        assert_eq!(
            image_name("ci-os-abc12", "9.8.20260428-0"),
            "ci-os-abc12-rhcos-9.8.20260428-0"
        );
    }

    #[test]
    fn only_an_active_image_of_ours_from_the_streams_qcow2_is_used() {
        let sha = "ab".repeat(32);
        let ok = seen("active", Some(marker(None)), None);
        assert_eq!(ok.usable(&name(), INFRA, RELEASE_A, &sha), Ok(()));
        assert!(matches!(
            ok.usable(&name(), INFRA, RELEASE_A, &"cd".repeat(32)),
            Err(Keep::OtherImage { .. })
        ));
        assert_eq!(
            seen("active", None, None).usable(&name(), INFRA, RELEASE_A, &sha),
            Err(Keep::Unmarked)
        );
        assert_eq!(
            seen("saving", Some(marker(None)), None).usable(&name(), INFRA, RELEASE_A, &sha),
            Err(Keep::NotActive("saving".into()))
        );
        let other = Marker {
            infra_id: "other".into(),
            ..marker(None)
        };
        assert_eq!(
            seen("active", Some(other), None).usable(&name(), INFRA, RELEASE_A, &sha),
            Err(Keep::OtherCluster("other".into()))
        );
    }

    #[test]
    fn a_leftover_is_cleared_only_once_glance_says_its_import_stopped() {
        let m = Some(marker(Some("2026-05-01T10:00:00Z")));
        for now in ["2026-05-01T09:00:00Z", "2026-05-01T10:04:59Z"] {
            assert!(
                matches!(
                    seen("saving", m.clone(), Some(now)).clearable(&name(), INFRA, false, false),
                    Err(Keep::MayRun { .. })
                ),
                "{now}"
            );
        }
        let late = Some("2026-05-01T10:05:01Z");
        assert_eq!(
            seen("saving", m.clone(), late).clearable(&name(), INFRA, false, false),
            Ok(())
        );
        // This replica's own failure, or Glance gave it up: at once.
        let early = Some("2026-05-01T09:00:00Z");
        assert_eq!(
            seen("queued", m.clone(), early).clearable(&name(), INFRA, false, true),
            Ok(())
        );
        assert_eq!(
            seen("killed", m.clone(), early).clearable(&name(), INFRA, false, false),
            Ok(())
        );
        // Never unmarked, active, named, or without Glance's clock or a deadline.
        assert_eq!(
            seen("saving", None, late).clearable(&name(), INFRA, false, true),
            Err(Keep::Unmarked)
        );
        assert_eq!(
            seen("active", m.clone(), late).clearable(&name(), INFRA, false, true),
            Err(Keep::Active)
        );
        assert_eq!(
            seen("saving", m.clone(), late).clearable(&name(), INFRA, true, true),
            Err(Keep::Named)
        );
        assert!(
            seen("saving", m.clone(), None)
                .clearable(&name(), INFRA, false, false)
                .is_err()
        );
        assert!(
            seen("saving", Some(marker(None)), late)
                .clearable(&name(), INFRA, false, false)
                .is_err()
        );
        let renamed = Seen {
            name: Some("x".into()),
            ..seen("saving", m, late)
        };
        assert_eq!(
            renamed.clearable(&name(), INFRA, false, true),
            Err(Keep::Gone)
        );
    }

    #[test]
    fn only_how_to_boot_is_carried_over_from_the_image_in_use() {
        let props: BTreeMap<String, String> = [
            ("hw_disk_bus", "scsi"),
            ("hw_scsi_model", "virtio-scsi"),
            ("hw_qemu_guest_agent", "yes"),
            ("img_config_drive", "mandatory"),
            ("os_require_quiesce", "yes"),
            ("trait:CUSTOM_RHCOS", "required"),
            ("architecture", "x86_64"),
            ("img_signature", "sig"),
            ("img_signature_hash_method", "SHA-256"),
            ("owner_specified.openstack.sha256", "old"),
            ("os_hash_value", "old"),
            ("os_glance_importing_to_stores", ""),
            ("os_hidden", "False"),
            ("bootimage_webhook_release", "9.8.1"),
            ("image_location", "snapshot"),
            ("instance_uuid", "1234"),
            ("name", "ci-os-abc12-rhcos"),
            ("owner", "p1"),
            ("status", "active"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let kept: Vec<String> = carried(&props).into_keys().collect();
        assert_eq!(
            kept,
            [
                "architecture",
                "hw_disk_bus",
                "hw_qemu_guest_agent",
                "hw_scsi_model",
                "img_config_drive",
                "os_require_quiesce",
                "trait:CUSTOM_RHCOS",
            ]
        );
    }

    #[test]
    fn only_active_unnamed_images_of_ours_under_their_releases_name_retire() {
        let ok = seen("active", Some(marker(None)), None);
        assert_eq!(ok.retirable(&name(), INFRA, false), Ok(()));
        assert_eq!(ok.retirable(&name(), INFRA, true), Err(Keep::Named));
        assert_eq!(
            seen("active", None, None).retirable(&name(), INFRA, false),
            Err(Keep::Unmarked)
        );
        // Marked for another release than its name says: not what we made under it.
        let other = Marker {
            release: "9.8.20260601-0".into(),
            ..marker(None)
        };
        assert!(matches!(
            seen("active", Some(other), None).retirable(&name(), INFRA, false),
            Err(Keep::OtherImage { .. })
        ));
        assert_eq!(
            seen("deactivated", Some(marker(None)), None).retirable(&name(), INFRA, false),
            Err(Keep::NotActive("deactivated".into()))
        );
        let gone = Seen { name: None, ..ok };
        assert_eq!(gone.retirable(&name(), INFRA, false), Err(Keep::Gone));
    }
}
