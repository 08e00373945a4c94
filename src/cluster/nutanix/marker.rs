//! The marker every Prism Central image this project creates carries from its creation, in
//! its description (set in the create call itself: the cluster's infrastructure id, the
//! stream, the release, the qcow2's SHA-256, and when its import gives up, by Prism
//! Central's clock), and the rules that decide, from what Prism Central says right before
//! acting, whether an image may be used or deleted. A name alone never decides.
//!
//! The description, not a category: v3 refuses a category that does not exist, and making
//! one needs rights over categories that the machine API's credentials may not have. The
//! installer's category (`kubernetes-io-cluster-<infra-id>: owned`) is set beside it where it
//! exists, for `openshift-install destroy`, but never read as ours: the installer's own
//! image carries it too.

use std::time::Duration;

use k8s_openapi::jiff::{SignedDuration, Timestamp};

pub use crate::core::platforms::artifact::image_name;

/// What starts the marker's words in a description.
pub const TAG: &str = "bootimage-webhook:";

/// How long after an import's deadline, by Prism Central's clock, its image may still be
/// written (a task Prism Central is still finishing).
pub const GRACE: Duration = Duration::from_secs(300);

/// What this project writes on an image it creates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Marker {
    pub infra_id: String,
    pub stream: String,
    pub release: String,
    /// Of the qcow2, as the stream gives it.
    pub sha256: String,
    /// By then (Prism Central's clock) the import has finished or given up.
    pub import_deadline: Option<Timestamp>,
}

impl Marker {
    /// The image's description: a sentence for people, then the marker's words.
    pub fn description(&self) -> String {
        let mut words = format!(
            "RHCOS {} for OpenShift cluster {}, imported by bootimage-webhook. {TAG} infrastructure={} stream={} release={} sha256={}",
            self.release, self.infra_id, self.infra_id, self.stream, self.release, self.sha256
        );
        if let Some(deadline) = self.import_deadline {
            words.push_str(&format!(" deadline={deadline}"));
        }
        words
    }

    /// The marker in a description; `None` without its identifying four.
    pub fn read(description: &str) -> Option<Marker> {
        let (_, words) = description.split_once(TAG)?;
        let get = |key: &str| {
            words
                .split_whitespace()
                .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
                .filter(|v| !v.is_empty())
                .map(str::to_owned)
        };
        Some(Marker {
            infra_id: get("infrastructure")?,
            stream: get("stream")?,
            release: get("release")?,
            sha256: get("sha256")?,
            import_deadline: get("deadline").and_then(|d| d.parse().ok()),
        })
    }
}

/// What Prism Central says about an image, read right before acting on it.
#[derive(Debug, Clone)]
pub struct Seen {
    /// `None`: it is gone.
    pub name: Option<String>,
    /// `status.state`: `PENDING`, `COMPLETE`, `ERROR`, ...
    pub state: String,
    pub marker: Option<Marker>,
    /// Prism Central's clock when it was read (its `Date`), if it said.
    pub now: Option<Timestamp>,
}

/// Why an image is left alone.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Keep {
    #[error("gone or renamed")]
    Gone,
    #[error("not marked as ours (no {TAG} words in its description)")]
    Unmarked,
    #[error("marked by infrastructure {0}, not this cluster")]
    OtherCluster(String),
    #[error("marked for release {marked} and qcow2 {sha256}, not {wanted}")]
    OtherImage {
        marked: String,
        sha256: String,
        wanted: String,
    },
    #[error("{0}, not complete")]
    NotComplete(String),
    #[error("complete")]
    Complete,
    #[error("named by a MachineSet, ControlPlaneMachineSet or Machine")]
    Named,
    #[error(
        "made while this import was starting (another replica's?): looked at again on the next pass"
    )]
    Appeared,
    #[error(
        "still being imported, maybe by another replica (Prism Central's clock says {now}, it may run until {until})"
    )]
    MayRun { now: String, until: String },
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

    /// An image MachineSets may move to: ours, complete, of the stream's qcow2 of `release`.
    pub fn usable(
        &self,
        name: &str,
        infra_id: &str,
        release: &str,
        sha256: &str,
    ) -> Result<(), Keep> {
        let marker = self.ours(name, infra_id)?;
        if marker.release != release || marker.sha256 != sha256 {
            return Err(Keep::OtherImage {
                marked: marker.release.clone(),
                sha256: marker.sha256.clone(),
                wanted: format!("{release} and qcow2 {sha256}"),
            });
        }
        match self.state.as_str() {
            "COMPLETE" => Ok(()),
            other => Err(Keep::NotComplete(other.to_owned())),
        }
    }

    /// What an import of ours left (not complete) may be deleted: still called `name`,
    /// marked by this cluster, named by nothing, and its import provably stopped: one of
    /// this replica's that failed (`failed_here`), one Prism Central gave up (`ERROR`), or
    /// Prism Central's clock is past its deadline and the grace after it.
    pub fn clearable(
        &self,
        name: &str,
        infra_id: &str,
        named: bool,
        failed_here: bool,
    ) -> Result<(), Keep> {
        if self.state == "COMPLETE" {
            return Err(Keep::Complete);
        }
        let marker = self.ours(name, infra_id)?;
        if named {
            return Err(Keep::Named);
        }
        if failed_here || self.state == "ERROR" {
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

    /// A complete image of ours, unused for the retention, may be deleted: still called
    /// `name`, which is the name of the release its marker says, marked by this cluster,
    /// and named by nothing.
    pub fn retirable(&self, name: &str, infra_id: &str, named: bool) -> Result<(), Keep> {
        let marker = self.ours(name, infra_id)?;
        if image_name(infra_id, &marker.release) != name {
            return Err(Keep::OtherImage {
                marked: marker.release.clone(),
                sha256: marker.sha256.clone(),
                wanted: format!("the release its name says ({name})"),
            });
        }
        if self.state != "COMPLETE" {
            return Err(Keep::NotComplete(self.state.clone()));
        }
        match named {
            true => Err(Keep::Named),
            false => Ok(()),
        }
    }
}

/// How long an import may take end to end (Prism Central fetching the qcow2 at a mebibyte
/// a second and storing it), after which it gives up.
pub fn import_budget(bytes: Option<u64>) -> Duration {
    Duration::from_secs(600 + (bytes.unwrap_or(4 << 30) >> 20))
}

#[cfg(test)]
mod tests {
    use super::*;

    const INFRA: &str = "ntnx-abc12";
    const RELEASE: &str = "9.8.20260428-0";

    fn marker(deadline: Option<&str>) -> Marker {
        Marker {
            infra_id: INFRA.into(),
            stream: "rhel-9".into(),
            release: RELEASE.into(),
            sha256: "ab".repeat(32),
            import_deadline: deadline.map(|d| d.parse().unwrap()),
        }
    }

    fn seen(state: &str, marker: Option<Marker>, now: Option<&str>) -> Seen {
        Seen {
            name: Some(image_name(INFRA, RELEASE)),
            state: state.into(),
            marker,
            now: now.map(|n| n.parse().unwrap()),
        }
    }

    #[test]
    fn the_marker_reads_back_from_the_description() {
        let m = marker(Some("2026-05-01T10:00:00Z"));
        let text = m.description();
        assert!(
            text.starts_with("RHCOS 9.8.20260428-0 for OpenShift cluster ntnx-abc12"),
            "{text}"
        );
        assert_eq!(Marker::read(&text), Some(m.clone()));
        assert_eq!(Marker::read("Created By OpenShift Installer"), None);
        let partial = text.replace(" stream=rhel-9", "");
        assert_eq!(Marker::read(&partial), None);
        let no_deadline = marker(None);
        assert_eq!(Marker::read(&no_deadline.description()), Some(no_deadline));
    }

    #[test]
    fn only_a_complete_image_of_ours_from_the_streams_qcow2_is_used() {
        let sha = "ab".repeat(32);
        let name = image_name(INFRA, RELEASE);
        let ok = seen("COMPLETE", Some(marker(None)), None);
        assert_eq!(ok.usable(&name, INFRA, RELEASE, &sha), Ok(()));
        assert!(matches!(
            ok.usable(&name, INFRA, RELEASE, &"cd".repeat(32)),
            Err(Keep::OtherImage { .. })
        ));
        assert_eq!(
            seen("COMPLETE", None, None).usable(&name, INFRA, RELEASE, &sha),
            Err(Keep::Unmarked)
        );
        assert_eq!(
            seen("PENDING", Some(marker(None)), None).usable(&name, INFRA, RELEASE, &sha),
            Err(Keep::NotComplete("PENDING".into()))
        );
        let other = Marker {
            infra_id: "other".into(),
            ..marker(None)
        };
        assert_eq!(
            seen("COMPLETE", Some(other), None).usable(&name, INFRA, RELEASE, &sha),
            Err(Keep::OtherCluster("other".into()))
        );
    }

    #[test]
    fn a_leftover_is_cleared_only_once_prism_central_says_its_import_stopped() {
        let name = image_name(INFRA, RELEASE);
        let m = Some(marker(Some("2026-05-01T10:00:00Z")));
        let early = Some("2026-05-01T10:04:59Z");
        assert!(matches!(
            seen("PENDING", m.clone(), early).clearable(&name, INFRA, false, false),
            Err(Keep::MayRun { .. })
        ));
        let late = Some("2026-05-01T10:05:01Z");
        assert_eq!(
            seen("PENDING", m.clone(), late).clearable(&name, INFRA, false, false),
            Ok(())
        );
        assert_eq!(
            seen("ERROR", m.clone(), early).clearable(&name, INFRA, false, false),
            Ok(())
        );
        assert_eq!(
            seen("PENDING", m.clone(), early).clearable(&name, INFRA, false, true),
            Ok(())
        );
        assert_eq!(
            seen("PENDING", None, late).clearable(&name, INFRA, false, true),
            Err(Keep::Unmarked)
        );
        assert_eq!(
            seen("COMPLETE", m.clone(), late).clearable(&name, INFRA, false, true),
            Err(Keep::Complete)
        );
        assert_eq!(
            seen("ERROR", m, late).clearable(&name, INFRA, true, true),
            Err(Keep::Named)
        );
    }

    #[test]
    fn only_complete_unnamed_images_of_ours_under_their_releases_name_retire() {
        let name = image_name(INFRA, RELEASE);
        let ok = seen("COMPLETE", Some(marker(None)), None);
        assert_eq!(ok.retirable(&name, INFRA, false), Ok(()));
        assert_eq!(ok.retirable(&name, INFRA, true), Err(Keep::Named));
        assert_eq!(
            seen("COMPLETE", None, None).retirable(&name, INFRA, false),
            Err(Keep::Unmarked)
        );
        let other = Marker {
            release: "9.8.20260601-0".into(),
            ..marker(None)
        };
        assert!(matches!(
            seen("COMPLETE", Some(other), None).retirable(&name, INFRA, false),
            Err(Keep::OtherImage { .. })
        ));
        let gone = Seen { name: None, ..ok };
        assert_eq!(gone.retirable(&name, INFRA, false), Err(Keep::Gone));
    }
}
