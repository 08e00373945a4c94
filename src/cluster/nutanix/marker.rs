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
    /// `metadata.owner_reference.uuid`: the user who made it.
    pub owner: Option<String>,
    /// The credentials' user (`users/me`): only its images may be ours.
    pub me: Option<String>,
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
    #[error(
        "marked as ours but made by user {0}, not the credentials' user: a look-alike, not ours"
    )]
    NotOwned(String),
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
        if marker.infra_id != infra_id {
            return Err(Keep::OtherCluster(marker.infra_id.clone()));
        }
        // Anyone may copy a description: only who made it proves it ours.
        match (&self.owner, &self.me) {
            (Some(owner), Some(me)) if owner == me => Ok(marker),
            (owner, _) => Err(Keep::NotOwned(
                owner.clone().unwrap_or_else(|| "unknown".into()),
            )),
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

/// The uuid an import of `sha256` under `name` creates its image with (`metadata.uuid`,
/// which v3 lets the client choose): an RFC 4122 name-based (version 5) uuid of what is
/// imported, so that every replica's create of the same image is the same create, and a
/// second one is refused instead of making a twin. `from_url` tells the two ways apart
/// (from the URL, or empty then uploaded), which follow each other.
pub fn import_uuid(infra_id: &str, name: &str, sha256: &str, from_url: bool) -> String {
    // This project's namespace, itself a version 4 uuid made once.
    const NAMESPACE: [u8; 16] = [
        0x5b, 0x0e, 0x3c, 0x6e, 0x2f, 0x41, 0x4d, 0x1a, 0x9c, 0x47, 0x8e, 0x06, 0xd2, 0x71, 0xa4,
        0x3b,
    ];
    let how = if from_url { "url" } else { "upload" };
    let what = format!("{infra_id}/{name}/{sha256}/{how}");
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY);
    ctx.update(&NAMESPACE);
    ctx.update(what.as_bytes());
    let digest = ctx.finish();
    let mut b = [0u8; 16];
    b.copy_from_slice(&digest.as_ref()[..16]);
    b[6] = (b[6] & 0x0f) | 0x50;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// Whether the machine API could take an image called `other` for one called `name`:
/// the same name ignoring case (the cluster-api provider compares names with Go's
/// `EqualFold`), or a name `name==<name>` selects when Prism Central reads it as a
/// regular expression (the machine API's filter; a dot then matches any character, and
/// the match may be anywhere in the name).
pub fn answers_to(name: &str, other: &str) -> bool {
    let escaped: Vec<String> = name.split('.').map(regex::escape).collect();
    let loose = escaped.join(".");
    let folded = regex::Regex::new(&format!("(?i)^{}$", regex::escape(name)));
    let filter = regex::Regex::new(&loose);
    folded.is_ok_and(|r| r.is_match(other)) || filter.is_ok_and(|r| r.is_match(other))
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
            owner: Some("u1".into()),
            me: Some("u1".into()),
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
        // Our marker copied by another user: a look-alike, whatever else it says.
        let copied = Seen {
            owner: Some("u2".into()),
            ..ok.clone()
        };
        assert_eq!(
            copied.usable(&name, INFRA, RELEASE, &sha),
            Err(Keep::NotOwned("u2".into()))
        );
        assert_eq!(
            copied.retirable(&name, INFRA, false),
            Err(Keep::NotOwned("u2".into()))
        );
        let unknown = Seen {
            owner: None,
            state: "ERROR".into(),
            ..ok
        };
        assert_eq!(
            unknown.clearable(&name, INFRA, false, true),
            Err(Keep::NotOwned("unknown".into()))
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
    fn an_imports_uuid_is_the_same_on_every_replica_and_apart_for_everything_else() {
        let sha = "ab".repeat(32);
        let name = image_name(INFRA, RELEASE);
        let url = import_uuid(INFRA, &name, &sha, true);
        assert_eq!(url, import_uuid(INFRA, &name, &sha, true));
        assert_eq!(url.len(), 36);
        // Version 5, RFC 4122's variant.
        assert_eq!(&url[14..15], "5");
        assert!("89ab".contains(&url[19..20]), "{url}");
        let others = [
            import_uuid(INFRA, &name, &sha, false),
            import_uuid(INFRA, &name, &"cd".repeat(32), true),
            import_uuid("other", &name, &sha, true),
            import_uuid(INFRA, &image_name(INFRA, "9.8.20260601-0"), &sha, true),
        ];
        assert!(others.iter().all(|o| *o != url), "{others:?}");
    }

    #[test]
    fn a_name_answers_to_itself_in_any_case_and_to_what_the_filter_selects() {
        let name = image_name(INFRA, RELEASE);
        assert!(answers_to(&name, &name));
        assert!(answers_to(&name, &name.to_uppercase()));
        // Unicode's simple folding, as Go's EqualFold: the Kelvin sign is a k.
        assert!(answers_to(&name, &name.replace('k', "\u{212a}")));
        // A dot of the name is any character to the filter, anywhere in a longer name.
        assert!(answers_to(&name, &name.replace("9.8", "9x8")));
        assert!(answers_to(&name, &format!("old-{name}-copy")));
        assert!(!answers_to(&name, &image_name(INFRA, "9.8.20260601-0")));
        assert!(!answers_to(&name, &format!("{INFRA}-rhcos")));
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
