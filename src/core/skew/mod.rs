//! Boot image skew: which RHCOS version and OpenShift release each boot image belongs to,
//! the oldest of them, and whether the MCO's skew check would refuse an upgrade
//! (openshift/machine-config-operator `pkg/operator/status.go`,
//! `checkBootImageSkewUpgradeableGuard`). Pure: the callers bring the objects.
//!
//! A version is read, never guessed, from, in this order: the current stream (which names
//! its own images' RHCOS release, and ships with the ConfigMap's release), the image name
//! (RHCOS writes its release into GCP image names and Azure marketplace versions, and the
//! importers into the vSphere, OpenStack and Nutanix names they make: each platform reads
//! its own form), and what the cluster side learned (EC2, of an AMI: its
//! name or marketplace description). An AMI id says nothing by itself: unknown until one
//! of those knows it.

use std::cmp::Ordering;
use std::fmt;
use std::sync::LazyLock;

use regex::Regex;
use serde::Serialize;
use serde_json::Value;

use super::configmap::BootImages;
use super::platforms::{self, Learned};

pub mod record;
pub mod version;

pub use version::*;

/// A version an image name carries, as the platform whose form it has reads it (a GCP
/// image `rhcos-9-8-20260428-0-gcp-x86-64`, an Azure marketplace URN
/// `publisher:offer:sku:version`), else an RHCOS release written out in its last part
/// (`rhcos-9.6.…-0-…`).
pub fn from_name(image: &str) -> Option<Version> {
    if let Some(read) = platforms::version_in_name(image) {
        return read;
    }
    let last = image.rsplit('/').next().unwrap_or(image);
    from_release(release_in_text(last)?, Source::Name)
}

/// Everything known of `image`'s version, or `None`.
pub fn version_of(image: &str, boot: Option<&BootImages>, learned: &Learned) -> Option<Version> {
    if let Some(boot) = boot
        && let Some(rhcos) = boot.rhcos_release_of(image)
        && let Some(mut v) = from_release(rhcos, Source::Stream)
    {
        // The stream ships with the ConfigMap's release: its images are that release's.
        let mut current = boot.release_version.split('.');
        if let (Some(a), Some(b)) = (current.next(), current.next())
            && let Some(t) = token(a, b)
        {
            v.release = Some(Release::Exact(t));
        }
        return Some(v);
    }
    if let Some(v) = from_name(image) {
        return Some(v);
    }
    platforms::version_learned(image, learned)
}

/// The oldest boot image and the MachineSets whose image has no known version.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Survey {
    /// (MachineSet, image, its version).
    pub oldest: Option<(String, String, Version)>,
    /// MachineSets (as given) whose boot image version is unknown, or that name none.
    pub unknown: Vec<String>,
    /// How many MachineSets were surveyed.
    pub count: usize,
}

/// The oldest of `images` (MachineSet, its boot image if any), by [`Version::older`];
/// ties go to the first.
pub fn survey<'a>(
    images: impl IntoIterator<Item = (String, Option<&'a str>)>,
    boot: Option<&BootImages>,
    learned: &Learned,
) -> Survey {
    let mut s = Survey::default();
    for (who, image) in images {
        s.count += 1;
        let Some((image, v)) = image.and_then(|i| Some((i, version_of(i, boot, learned)?))) else {
            s.unknown.push(who);
            continue;
        };
        if s.oldest
            .as_ref()
            .is_none_or(|(_, _, o)| v.older(o) == Ordering::Less)
        {
            s.oldest = Some((who, image.to_owned(), v));
        }
    }
    s
}

/// What the MCO's skew check says of an upgrade now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Upgrade {
    /// `Upgradeable=False`, reason `ClusterBootImageSkewError`.
    Refused,
    /// Enforced, and the recorded version is at or above the floor (or the MCO has not
    /// evaluated it yet: it then does not refuse).
    Allowed,
    /// Mode `None`: the MCO does not look at boot images.
    NotEnforced,
    /// No MachineConfiguration `cluster` to read.
    Unknown,
}

impl fmt::Display for Upgrade {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Upgrade::Refused => "would be refused",
            Upgrade::Allowed => "would not be refused",
            Upgrade::NotEnforced => "not enforced",
            Upgrade::Unknown => "unknown",
        })
    }
}

/// MachineConfiguration `cluster`'s skew enforcement, judged as the MCO judges it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Enforcement {
    /// `status.bootImageSkewEnforcementStatus.mode` (`Automatic`, `Manual`, `None`).
    pub mode: Option<String>,
    /// The version the MCO compares: `automatic` or `manual`, by mode.
    pub recorded_ocp_version: Option<String>,
    pub recorded_rhcos_version: Option<String>,
    pub upgrade: Upgrade,
    /// Why, in the MCO's words when it refuses.
    pub message: String,
}

fn condition<'a>(mc: &'a Value, kind: &str) -> Option<&'a Value> {
    mc.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
}

/// `checkBootImageSkewUpgradeableGuard` on `machine_configuration` (`None`: absent).
pub fn enforcement(machine_configuration: Option<&Value>) -> Enforcement {
    let Some(mc) = machine_configuration else {
        return judged(
            None,
            None,
            None,
            Upgrade::Unknown,
            "MachineConfiguration cluster not found: the MCO's skew enforcement cannot be read"
                .into(),
        );
    };
    let status = mc.pointer("/status/bootImageSkewEnforcementStatus");
    let mode = status.and_then(|s| s["mode"].as_str()).map(str::to_owned);
    let recorded = |key: &str, field: &str| {
        status
            .and_then(|s| s.pointer(&format!("/{key}/{field}")))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    let (key, enforced) = match mode.as_deref() {
        Some("Automatic") => ("automatic", true),
        Some("Manual") => ("manual", true),
        Some("None") => ("", false),
        _ => {
            let message = "the MCO has recorded no skew enforcement mode: OpenShift before 4.22 has none, and a newer MCO does not refuse until it has recorded one";
            return judged(mode, None, None, Upgrade::Allowed, message.into());
        }
    };
    let (ocp, rhcos) = (recorded(key, "ocpVersion"), recorded(key, "rhcosVersion"));
    if !enforced {
        let message = "not enforced: the MCO does not check boot images, and never refuses an upgrade for them";
        return judged(mode, ocp, rhcos, Upgrade::NotEnforced, message.into());
    }
    if key == "automatic" {
        if let Some(degraded) =
            condition(mc, "BootImageUpdateDegraded").filter(|c| c["status"] == "True")
        {
            let message = format!(
                "Upgrades have been disabled due to boot image update failures: boot image controller is degraded: {}",
                degraded["message"].as_str().unwrap_or_default()
            );
            return judged(mode, ocp, rhcos, Upgrade::Refused, message);
        }
        let progressing = condition(mc, "BootImageUpdateProgressing");
        if progressing.is_none_or(|c| c["status"] == "True") {
            let message = "the MCO's boot image controller has not finished a pass: the MCO does not check yet";
            return judged(mode, ocp, rhcos, Upgrade::Allowed, message.into());
        }
    }
    let (upgrade, message) = match check(ocp.as_deref(), rhcos.as_deref()) {
        Some(why) => (
            Upgrade::Refused,
            format!("Upgrades have been disabled because {why}"),
        ),
        None => (
            Upgrade::Allowed,
            not_refused(ocp.as_deref(), rhcos.as_deref()),
        ),
    };
    judged(mode, ocp, rhcos, upgrade, message)
}

/// Why [`check`] did not refuse these recorded versions.
fn not_refused(ocp: Option<&str>, rhcos: Option<&str>) -> String {
    match (ocp, rhcos) {
        (Some(v), _) if generic(v).is_none() => {
            format!("recorded OCP version {v} is not readable: the MCO does not refuse")
        }
        (Some(v), _) => format!("recorded OCP version {v} is at or above the floor {OCP_FLOOR}"),
        (None, Some(v)) => match rhel_of_rhcos(v) {
            Some((a, b)) => format!(
                "recorded RHCOS version {v} (RHEL {a}.{b}) is at or above the floor RHEL {RHEL_FLOOR}"
            ),
            None => format!("recorded RHCOS version {v} is not readable: the MCO does not refuse"),
        },
        (None, None) => "no version recorded: the MCO does not refuse".to_owned(),
    }
}

fn judged(
    mode: Option<String>,
    ocp: Option<String>,
    rhcos: Option<String>,
    upgrade: Upgrade,
    message: String,
) -> Enforcement {
    Enforcement {
        mode,
        recorded_ocp_version: ocp,
        recorded_rhcos_version: rhcos,
        upgrade,
        message,
    }
}

/// `checkBootImageSkew`: the OpenShift version when recorded, else the RHCOS version;
/// `Some(why)` when below the floor. Unreadable versions do not refuse (the MCO logs them).
pub fn check(ocp: Option<&str>, rhcos: Option<&str>) -> Option<String> {
    if let Some(v) = ocp {
        return (generic(v)? < OCP_FLOOR_TOKEN.to_vec()).then(|| {
            format!("the cluster is using OCP boot image version {v}, which is below the minimum required version {OCP_FLOOR}")
        });
    }
    let v = rhcos?;
    let rhel = rhel_of_rhcos(v)?;
    (rhel < RHEL_FLOOR_TOKEN).then(|| {
        format!(
            "the cluster is using RHCOS boot image version {v}(RHEL version: {}.{}), which is below the minimum required RHEL version {RHEL_FLOOR}",
            rhel.0, rhel.1
        )
    })
}

/// `checkRHCOSVersionSkew`'s reading of an RHCOS version: `major.minor` of a dated
/// (`YYYYMMDD`) one, the RHEL digits of the minor of a pre-RHEL-aligned one.
pub fn rhel_of_rhcos(version: &str) -> Option<Token> {
    let parts: Vec<&str> = version.split('.').collect();
    let [major, minor, stamp, ..] = parts.as_slice() else {
        return None;
    };
    let stamp = stamp.split('-').next().unwrap_or(stamp);
    match stamp.len() {
        8 => token(major, minor),
        12 => split_first(minor),
        _ => None,
    }
}

static GENERIC: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\s*v?([0-9]+(?:\.[0-9]+)*)").expect("a constant pattern"));

/// Kubernetes' `version.ParseGeneric`: at least two leading dotted numbers (an optional
/// `v` first), padded to three; anything after them is ignored.
fn generic(v: &str) -> Option<Vec<u64>> {
    let numeric = GENERIC.captures(v)?;
    let mut parts: Vec<u64> = numeric[1]
        .split('.')
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    if parts.len() < 2 {
        return None;
    }
    parts.resize(parts.len().max(3), 0);
    Some(parts)
}

#[cfg(test)]
mod tests;
