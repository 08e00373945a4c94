//! The marker every VM this project imports carries from its creation (`extraConfig` keys:
//! the cluster's infrastructure name, the release, the OVA's checksum, and when its import
//! gives up), and the rules that decide, from what vCenter says right before acting,
//! whether a VM may be used or deleted. A name alone never decides.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::jiff::{SignedDuration, Timestamp};

pub const INFRASTRUCTURE: &str = "bootimage_webhook.infrastructure_name";
pub const RELEASE: &str = "bootimage_webhook.release";
pub const OVA_SHA256: &str = "bootimage_webhook.ova_sha256";
pub const IMPORT_DEADLINE: &str = "bootimage_webhook.import_deadline";

/// How long vCenter keeps an NFC lease nobody reports progress on.
pub const LEASE_TIMEOUT: Duration = Duration::from_secs(300);

/// What this project writes on a VM it imports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Marker {
    pub infra_id: String,
    pub release: String,
    pub ova_sha256: String,
    /// By then (vCenter's clock) the import has finished or given up and aborted its lease.
    pub import_deadline: Option<Timestamp>,
}

impl Marker {
    /// The marker as `extraConfig` keys and values.
    pub fn pairs(&self) -> Vec<(String, String)> {
        let mut pairs = vec![
            (INFRASTRUCTURE.to_owned(), self.infra_id.clone()),
            (RELEASE.to_owned(), self.release.clone()),
            (OVA_SHA256.to_owned(), self.ova_sha256.clone()),
        ];
        if let Some(deadline) = self.import_deadline {
            pairs.push((IMPORT_DEADLINE.to_owned(), deadline.to_string()));
        }
        pairs
    }

    /// The marker in a VM's `extraConfig`; `None` without its three identifying keys.
    pub fn read(extra: &BTreeMap<String, String>) -> Option<Marker> {
        let get = |k: &str| extra.get(k).filter(|v| !v.is_empty()).cloned();
        Some(Marker {
            infra_id: get(INFRASTRUCTURE)?,
            release: get(RELEASE)?,
            ova_sha256: get(OVA_SHA256)?,
            import_deadline: extra.get(IMPORT_DEADLINE).and_then(|d| d.parse().ok()),
        })
    }
}

/// What vCenter says about a VM, read right before acting on it.
#[derive(Debug, Clone)]
pub struct Seen {
    /// Its name now (`None`: it is gone).
    pub name: Option<String>,
    /// `config.template` (`None`: vCenter does not say).
    pub template: Option<bool>,
    pub marker: Option<Marker>,
    /// vCenter's clock when it was read.
    pub now: Timestamp,
}

/// Why a VM is left alone.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Keep {
    #[error("it is gone or renamed")]
    Gone,
    #[error("vCenter does not say whether it is a template")]
    Unreadable,
    #[error("it carries no marker of this project (extraConfig {INFRASTRUCTURE})")]
    Unmarked,
    #[error("its marker names infrastructure {0}, not this cluster's")]
    OtherCluster(String),
    #[error("its marker names release {marked} and OVA {sha256}, not {wanted}")]
    OtherImage {
        marked: String,
        sha256: String,
        wanted: String,
    },
    #[error("it is not a template")]
    NotTemplate,
    #[error("it is a template")]
    Template,
    #[error("a MachineSet, ControlPlaneMachineSet or Machine names it")]
    Named,
    #[error(
        "its import may still be running (vCenter's clock says {now}, it may run until {until})"
    )]
    MayRun { now: Timestamp, until: Timestamp },
}

impl Seen {
    /// Still called `name`, and marked by this cluster.
    fn ours(&self, name: &str, infra_id: &str) -> Result<&Marker, Keep> {
        if self.name.as_deref() != Some(name) {
            return Err(Keep::Gone);
        }
        let marker = self.marker.as_ref().ok_or(Keep::Unmarked)?;
        match marker.infra_id == infra_id {
            true => Ok(marker),
            false => Err(Keep::OtherCluster(marker.infra_id.clone())),
        }
    }

    /// A template MachineSets may move to: ours, made from the stream's OVA of `release`.
    pub fn usable(
        &self,
        name: &str,
        infra_id: &str,
        release: &str,
        sha256: &str,
    ) -> Result<(), Keep> {
        let marker = self.ours(name, infra_id)?;
        if self.template != Some(true) {
            return Err(self
                .template
                .map_or(Keep::Unreadable, |_| Keep::NotTemplate));
        }
        if marker.release != release || marker.ova_sha256 != sha256 {
            return Err(Keep::OtherImage {
                marked: marker.release.clone(),
                sha256: marker.ova_sha256.clone(),
                wanted: format!("{release} and OVA {sha256}"),
            });
        }
        Ok(())
    }

    /// A template of ours, unused for the retention, may be deleted: still called `name`,
    /// still a template, marked by this cluster for the release its name says, and named by
    /// nothing.
    pub fn retirable(
        &self,
        name: &str,
        infra_id: &str,
        release: &str,
        named: bool,
    ) -> Result<(), Keep> {
        if self.template != Some(true) {
            return Err(self
                .template
                .map_or(Keep::Unreadable, |_| Keep::NotTemplate));
        }
        let marker = self.ours(name, infra_id)?;
        if marker.release != release {
            return Err(Keep::OtherImage {
                marked: marker.release.clone(),
                sha256: marker.ova_sha256.clone(),
                wanted: release.to_owned(),
            });
        }
        match named {
            true => Err(Keep::Named),
            false => Ok(()),
        }
    }

    /// What an import of ours left (a VM that is not a template) may be deleted: still
    /// called `name`, not a template, marked by this cluster, named by nothing, and its
    /// import provably stopped: one of this replica's that failed (`failed_here`), or
    /// vCenter's clock is past the import's deadline and a lease's timeout after it.
    pub fn clearable(
        &self,
        name: &str,
        infra_id: &str,
        named: bool,
        failed_here: bool,
    ) -> Result<(), Keep> {
        match self.template {
            None => return Err(Keep::Unreadable),
            Some(true) => return Err(Keep::Template),
            Some(false) => {}
        }
        let marker = self.ours(name, infra_id)?;
        if named {
            return Err(Keep::Named);
        }
        if failed_here {
            return Ok(());
        }
        let lease = SignedDuration::try_from(LEASE_TIMEOUT).unwrap_or(SignedDuration::MAX);
        // No readable deadline: no proof that it stopped.
        let until = marker
            .import_deadline
            .and_then(|d| d.checked_add(lease).ok())
            .unwrap_or(Timestamp::MAX);
        match self.now > until {
            true => Ok(()),
            false => Err(Keep::MayRun {
                now: self.now,
                until,
            }),
        }
    }
}

/// How long an import of `files` files, `bytes` in all, may take end to end (the lease
/// becoming ready, each upload, completing, marking a template); then it aborts itself.
pub fn import_budget(files: usize, bytes: u64) -> Duration {
    let per_file = Duration::from_secs(600);
    Duration::from_secs(300 + 300 + (bytes >> 20))
        + per_file * u32::try_from(files).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    const INFRA: &str = "ci-vs-abc12";
    const NAME: &str = "ci-vs-abc12-rhcos-9.8.20260428-0-fd-a";

    fn marker(deadline: Option<&str>) -> Marker {
        Marker {
            infra_id: INFRA.into(),
            release: "9.8.20260428-0".into(),
            ova_sha256: "ab".repeat(32),
            import_deadline: deadline.map(|d| d.parse().unwrap()),
        }
    }

    fn seen(template: Option<bool>, marker: Option<Marker>, now: &str) -> Seen {
        Seen {
            name: Some(NAME.into()),
            template,
            marker,
            now: now.parse().unwrap(),
        }
    }

    #[test]
    fn the_marker_reads_back_from_extra_config() {
        let m = marker(Some("2026-05-01T10:00:00Z"));
        let extra: BTreeMap<String, String> = m.pairs().into_iter().collect();
        assert_eq!(Marker::read(&extra), Some(m));
        let mut partial = extra.clone();
        partial.remove(OVA_SHA256);
        assert_eq!(Marker::read(&partial), None);
        assert_eq!(Marker::read(&BTreeMap::new()), None);
    }

    #[test]
    fn only_marked_unnamed_templates_of_this_cluster_retire() {
        let now = "2026-05-01T10:00:00Z";
        let release = "9.8.20260428-0";
        assert_eq!(
            seen(Some(true), Some(marker(None)), now).retirable(NAME, INFRA, release, false),
            Ok(())
        );
        let not = |s: Seen, named: bool| s.retirable(NAME, INFRA, release, named).unwrap_err();
        assert_eq!(not(seen(Some(true), None, now), false), Keep::Unmarked);
        assert_eq!(
            not(seen(Some(true), Some(marker(None)), now), true),
            Keep::Named
        );
        assert_eq!(
            not(seen(Some(false), Some(marker(None)), now), false),
            Keep::NotTemplate
        );
        assert_eq!(
            not(seen(None, Some(marker(None)), now), false),
            Keep::Unreadable
        );
        let other = Marker {
            infra_id: "other".into(),
            ..marker(None)
        };
        assert_eq!(
            not(seen(Some(true), Some(other), now), false),
            Keep::OtherCluster("other".into())
        );
        let renamed = Seen {
            name: Some("x".into()),
            ..seen(Some(true), Some(marker(None)), now)
        };
        assert_eq!(not(renamed, false), Keep::Gone);
        let gone = Seen {
            name: None,
            ..seen(Some(true), Some(marker(None)), now)
        };
        assert_eq!(not(gone, false), Keep::Gone);
        // A marker for another release than its name says: not what we made under it.
        assert!(matches!(
            seen(Some(true), Some(marker(None)), now).retirable(
                NAME,
                INFRA,
                "9.8.20260601-0",
                false
            ),
            Err(Keep::OtherImage { .. })
        ));
    }

    #[test]
    fn an_import_is_cleared_only_once_vcenter_says_it_stopped() {
        let deadline = "2026-05-01T10:00:00Z";
        let m = Some(marker(Some(deadline)));
        // Before the deadline and a lease timeout after it, by vCenter's clock: it may run.
        for now in ["2026-05-01T09:00:00Z", "2026-05-01T10:04:59Z"] {
            assert!(
                matches!(
                    seen(Some(false), m.clone(), now).clearable(NAME, INFRA, false, false),
                    Err(Keep::MayRun { .. })
                ),
                "{now}"
            );
        }
        assert_eq!(
            seen(Some(false), m.clone(), "2026-05-01T10:05:01Z")
                .clearable(NAME, INFRA, false, false),
            Ok(())
        );
        // One of this replica's own imports that failed: at once.
        assert_eq!(
            seen(Some(false), m.clone(), "2026-05-01T09:00:00Z")
                .clearable(NAME, INFRA, false, true),
            Ok(())
        );
        // Never without the marker, a readable deadline, or while anything names it.
        let late = "2027-01-01T00:00:00Z";
        assert_eq!(
            seen(Some(false), None, late).clearable(NAME, INFRA, false, true),
            Err(Keep::Unmarked)
        );
        assert!(matches!(
            seen(Some(false), Some(marker(None)), late).clearable(NAME, INFRA, false, false),
            Err(Keep::MayRun { .. })
        ));
        assert_eq!(
            seen(Some(false), m.clone(), late).clearable(NAME, INFRA, true, false),
            Err(Keep::Named)
        );
        assert_eq!(
            seen(Some(true), m.clone(), late).clearable(NAME, INFRA, false, true),
            Err(Keep::Template)
        );
        assert_eq!(
            seen(None, m, late).clearable(NAME, INFRA, false, true),
            Err(Keep::Unreadable)
        );
    }

    #[test]
    fn only_a_template_from_the_streams_ova_is_used() {
        let now = "2026-05-01T10:00:00Z";
        let s = seen(Some(true), Some(marker(None)), now);
        let sha = "ab".repeat(32);
        assert_eq!(s.usable(NAME, INFRA, "9.8.20260428-0", &sha), Ok(()));
        assert!(matches!(
            s.usable(NAME, INFRA, "9.8.20260428-0", &"cd".repeat(32)),
            Err(Keep::OtherImage { .. })
        ));
        assert_eq!(
            seen(Some(true), None, now).usable(NAME, INFRA, "9.8.20260428-0", &sha),
            Err(Keep::Unmarked)
        );
        assert_eq!(
            seen(Some(false), Some(marker(None)), now).usable(NAME, INFRA, "9.8.20260428-0", &sha),
            Err(Keep::NotTemplate)
        );
    }

    #[test]
    fn the_budget_covers_every_step() {
        // A 1.1 GiB RHCOS OVA's one disk: the lease, one upload's allowance, its bytes at a
        // mebibyte a second, completing and marking.
        assert_eq!(
            import_budget(1, 1100 << 20),
            Duration::from_secs(300 + 300 + 1100 + 600)
        );
    }
}
