//! Boot image skew: which RHCOS version and OpenShift release each boot image belongs to,
//! the oldest of them, and whether the MCO's skew check would refuse an upgrade
//! (openshift/machine-config-operator `pkg/operator/status.go`,
//! `checkBootImageSkewUpgradeableGuard`). Pure: the callers bring the objects.
//!
//! A version is read, never guessed, from, in this order: the current stream (which names
//! its own images' RHCOS release, and ships with the ConfigMap's release), the image name
//! (RHCOS writes its release into GCP image names and Azure marketplace versions), and
//! what EC2 said about an AMI (its name or marketplace description). An AMI id says
//! nothing by itself: unknown until one of those knows it.

use std::cmp::Ordering;
use std::fmt;
use std::sync::LazyLock;

use k8s_openapi::jiff::civil::Date;
use regex::Regex;
use serde::Serialize;
use serde_json::Value;

use super::age;
use super::platforms::aws::{AwsLearned, Described};
use super::snapshot::{BootImages, Learned};

/// `major.minor`, compared as numbers.
pub type Token = (u64, u64);

/// The MCO's floors (`pkg/controller/common/constants.go`): a recorded OpenShift version
/// below `OCPVersionBootImageSkewLimit`, or a recorded RHCOS version whose RHEL is below
/// `RHCOSVersionBootImageSkewLimit`, makes it set `Upgradeable=False`.
pub const OCP_FLOOR: &str = "4.13.0";
pub const RHEL_FLOOR: &str = "9.2";
const RHEL_FLOOR_TOKEN: Token = (9, 2);
const OCP_FLOOR_TOKEN: [u64; 3] = [4, 13, 0];

/// The RHEL each OpenShift release's RHCOS is built from, as openshift/os documents it
/// (`docs/faq.md`, "Q: What version of RHEL is in RHCOS?"; tests/fixtures holds a copy
/// that the tests compare with). RHCOS versions of the RHEL-aligned scheme (`9.6.…`)
/// name only their RHEL, so they belong to every release of that RHEL.
pub const RHEL_OF_OCP: &[(Token, Token)] = &[
    ((4, 6), (8, 2)),
    ((4, 7), (8, 4)),
    ((4, 8), (8, 4)),
    ((4, 9), (8, 4)),
    ((4, 10), (8, 4)),
    ((4, 11), (8, 6)),
    ((4, 12), (8, 6)),
    ((4, 13), (9, 2)),
    ((4, 14), (9, 2)),
    ((4, 15), (9, 2)),
    ((4, 16), (9, 4)),
    ((4, 17), (9, 4)),
    ((4, 18), (9, 4)),
    ((4, 19), (9, 6)),
    ((4, 20), (9, 6)),
    ((4, 21), (9, 6)),
    ((4, 22), (9, 8)),
    ((4, 22), (10, 2)),
    ((5, 0), (9, 8)),
    ((5, 0), (10, 2)),
];

/// The OpenShift release(s) an image belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Release {
    Exact(Token),
    /// Every release from the first to the last (by [`RHEL_OF_OCP`]).
    Between(Token, Token),
}

impl Release {
    fn first(self) -> Token {
        match self {
            Release::Exact(t) | Release::Between(t, _) => t,
        }
    }
}

impl fmt::Display for Release {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Release::Exact((a, b)) => write!(f, "{a}.{b}"),
            Release::Between((a, b), (c, d)) => write!(f, "{a}.{b}-{c}.{d}"),
        }
    }
}

/// Where a version was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Source {
    /// The current stream names this image.
    Stream,
    /// The image name (or marketplace version) carries it.
    Name,
    /// EC2's name or marketplace description of the AMI.
    Ec2,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Source::Stream => "the current stream",
            Source::Name => "its name",
            Source::Ec2 => "EC2",
        })
    }
}

/// What is known of one boot image's version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    /// The RHCOS release as RHCOS writes it (`9.8.20260428-0`, `418.94.202410090804-0`;
    /// an Azure marketplace version such as `9.6.20250826`); `None` when only the
    /// OpenShift release is known (a Red Hat marketplace offer's `4.18.…`).
    pub rhcos: Option<String>,
    /// The RHEL it is built from: what the MCO compares with its floor.
    pub rhel: Token,
    pub release: Option<Release>,
    pub built: Option<Date>,
    pub source: Source,
}

impl Version {
    /// Older first: lower RHEL, then lower (first) release, then earlier build; unknown
    /// parts last.
    pub fn older(&self, other: &Version) -> Ordering {
        let release = |v: &Version| v.release.map(Release::first).unwrap_or((u64::MAX, 0));
        let built = |v: &Version| v.built.unwrap_or(Date::MAX);
        self.rhel
            .cmp(&other.rhel)
            .then_with(|| release(self).cmp(&release(other)))
            .then_with(|| built(self).cmp(&built(other)))
    }

    /// Below the MCO's floor, were this version the one it recorded.
    pub fn below_floor(&self) -> bool {
        self.rhel < RHEL_FLOOR_TOKEN
    }
}

fn token(major: &str, minor: &str) -> Option<Token> {
    Some((major.parse().ok()?, minor.parse().ok()?))
}

/// `digits` split after its first digit (`418` -> 4.18, `94` -> 9.4), as RHCOS's
/// pre-RHEL-aligned versions encode the OpenShift and RHEL releases.
fn split_first(digits: &str) -> Option<Token> {
    if digits.len() < 2 || !digits.is_ascii() {
        return None;
    }
    token(&digits[..1], &digits[1..])
}

/// The releases whose RHCOS is built from `rhel`.
pub fn releases_of_rhel(rhel: Token) -> Option<Release> {
    let mut of = RHEL_OF_OCP
        .iter()
        .filter(|(_, r)| *r == rhel)
        .map(|(o, _)| *o);
    let first = of.next()?;
    let last = of.next_back().unwrap_or(first);
    Some(if first == last {
        Release::Exact(first)
    } else {
        Release::Between(first, last)
    })
}

/// The RHEL of an OpenShift release's RHCOS, when that release has one RHEL.
pub fn rhel_of_release(release: Token) -> Option<Token> {
    let mut of = RHEL_OF_OCP.iter().filter(|(o, _)| *o == release);
    match (of.next(), of.next()) {
        (Some((_, rhel)), None) => Some(*rhel),
        _ => None,
    }
}

static RELEASE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^([0-9]+)\.([0-9]+)\.([0-9]{8}|[0-9]{12})-([0-9]+)$").expect("a constant pattern")
});

static RELEASE_IN_TEXT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?:^|[^0-9.])([0-9]+\.[0-9]+\.(?:[0-9]{8}|[0-9]{12})-[0-9]+)(?:$|[^0-9])")
        .expect("a constant pattern")
});

/// An RHCOS release in the format the MCO's API accepts (`[major].[minor].[YYYYMMDD]-[n]`,
/// or the pre-RHEL-aligned `[ocp].[rhel].[YYYYMMDDhhmm]-[n]`).
pub fn from_release(release: &str, source: Source) -> Option<Version> {
    let caps = RELEASE.captures(release)?;
    let (major, minor, stamp) = (&caps[1], &caps[2], &caps[3]);
    let (rhel, ocp) = if stamp.len() == 8 {
        let rhel = token(major, minor)?;
        (rhel, releases_of_rhel(rhel))
    } else {
        (
            split_first(minor)?,
            Some(Release::Exact(split_first(major)?)),
        )
    };
    Some(Version {
        rhcos: Some(release.to_owned()),
        rhel,
        release: ocp,
        built: age::build_date(release),
        source,
    })
}

/// A version an image name carries: a GCP image `rhcos-9-8-20260428-0-gcp-x86-64`
/// (`rhcos-418-94-202410090804-0-…` before RHEL-aligned versions), an Azure marketplace
/// URN `publisher:offer:sku:version`, or an RHCOS release written out (`rhcos-9.6.…-0-…`).
pub fn from_name(image: &str) -> Option<Version> {
    let last = image.rsplit('/').next().unwrap_or(image);
    if let Some(rest) = last.strip_prefix("rhcos-") {
        let parts: Vec<&str> = rest.splitn(5, '-').collect();
        if let [a, b, stamp, n, ..] = parts.as_slice()
            && let Some(v) = from_release(&format!("{a}.{b}.{stamp}-{n}"), Source::Name)
        {
            return Some(v);
        }
    }
    if let [_, _, _, version] = image.split(':').collect::<Vec<_>>().as_slice() {
        return from_marketplace_version(version);
    }
    let found = RELEASE_IN_TEXT.captures(last)?;
    from_release(&found[1], Source::Name)
}

/// An Azure marketplace image version: an RHCOS release without its build number
/// (`9.6.20250826`, `418.94.20250122`), or a Red Hat offer's OpenShift version
/// (`4.18.2025031114`).
fn from_marketplace_version(version: &str) -> Option<Version> {
    let mut parts = version.split('.');
    let (major, minor, stamp) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || stamp.is_empty() || !stamp.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let built = age::build_date(version);
    let (rhcos, rhel, release) = match (major, stamp.len()) {
        ("4", _) => {
            let release = token(major, minor)?;
            (
                None,
                rhel_of_release(release)?,
                Some(Release::Exact(release)),
            )
        }
        (m, 8) if m.len() >= 2 && major.starts_with('4') && built.is_some() => (
            Some(version.to_owned()),
            split_first(minor)?,
            Some(Release::Exact(split_first(major)?)),
        ),
        (_, 8) if built.is_some() => {
            let rhel = token(major, minor)?;
            (Some(version.to_owned()), rhel, releases_of_rhel(rhel))
        }
        _ => return None,
    };
    Some(Version {
        rhcos,
        rhel,
        release,
        built,
        source: Source::Name,
    })
}

/// The RHCOS release EC2 told for an AMI: in its name (Red Hat's AMIs), or the
/// description of a marketplace image with that id.
fn from_ec2(aws: &AwsLearned, ami: &str) -> Option<Version> {
    let named = aws
        .images
        .iter()
        .filter(|((_, id), _)| id == ami)
        .find_map(|(_, d)| match d {
            Described::Found { name, .. } => {
                RELEASE_IN_TEXT.captures(name).map(|c| c[1].to_owned())
            }
            Described::NotFound => None,
        });
    let described = || {
        aws.marketplace
            .values()
            .flatten()
            .filter(|i| i.id == ami)
            .find_map(|i| {
                RELEASE_IN_TEXT
                    .captures(&i.description)
                    .map(|c| c[1].to_owned())
            })
    };
    from_release(&named.or_else(described)?, Source::Ec2)
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
    let aws = learned.aws.as_deref()?;
    from_ec2(aws, image)
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
mod tests {

    use serde_json::json;

    use super::*;
    use crate::core::platforms::aws::MarketImage;
    use crate::core::snapshot::EMBEDDED_CONFIGMAP;

    const FAQ: &str = include_str!("../../tests/fixtures/openshift-os-faq-rhel-of-ocp.excerpt.md");

    fn parse_token(s: &str) -> Token {
        let (a, b) = s.split_once('.').unwrap();
        token(a, b).unwrap()
    }

    #[test]
    fn the_table_is_the_one_openshift_os_documents() {
        let mut documented = Vec::new();
        for line in FAQ.lines() {
            let Some((ocp, rhel)) = line.split_once(" | ") else {
                continue;
            };
            if !ocp.starts_with(|c: char| c.is_ascii_digit()) {
                continue;
            }
            for r in rhel.split(" and ") {
                let r = r.trim().trim_end_matches(" EUS");
                documented.push((parse_token(ocp), parse_token(r)));
            }
        }
        assert!(documented.len() > 10, "{FAQ}");
        assert_eq!(RHEL_OF_OCP, documented.as_slice());
    }

    fn v(image: &str) -> Option<(Option<String>, Token, Option<String>)> {
        from_name(image).map(|v| (v.rhcos, v.rhel, v.release.map(|r| r.to_string())))
    }

    #[test]
    fn versions_from_image_names() {
        let some = |r: Option<&str>, rhel: Token, ocp: Option<&str>| {
            Some((r.map(str::to_owned), rhel, ocp.map(str::to_owned)))
        };
        for (image, want) in [
            (
                "projects/rhcos-cloud/global/images/rhcos-9-8-20260428-0-gcp-x86-64",
                some(Some("9.8.20260428-0"), (9, 8), Some("4.22-5.0")),
            ),
            (
                "rhcos-9-6-20250826-1-gcp-x86-64",
                some(Some("9.6.20250826-1"), (9, 6), Some("4.19-4.21")),
            ),
            (
                "projects/rhcos-cloud/global/images/rhcos-416-94-202405291527-0-gcp-x86-64",
                some(Some("416.94.202405291527-0"), (9, 4), Some("4.16")),
            ),
            (
                "rhcos-412-86-202301311551-0-gcp-x86-64",
                some(Some("412.86.202301311551-0"), (8, 6), Some("4.12")),
            ),
            (
                "rhcos-410-84-202210040010-0-gcp-x86-64",
                some(Some("410.84.202210040010-0"), (8, 4), Some("4.10")),
            ),
            (
                "azureopenshift:aro4:aro_420:9.6.20251015",
                some(Some("9.6.20251015"), (9, 6), Some("4.19-4.21")),
            ),
            (
                "azureopenshift:aro4:aro_418:418.94.20250122",
                some(Some("418.94.20250122"), (9, 4), Some("4.18")),
            ),
            (
                "redhat:rh-ocp-worker:rh-ocp-worker:4.18.2025031114",
                some(None, (9, 4), Some("4.18")),
            ),
            // RHEL 10.1 shipped in no OpenShift release: its RHEL is known, its release not.
            (
                "rhcos-10-1-20251005-0-gcp-x86-64",
                some(Some("10.1.20251005-0"), (10, 1), None),
            ),
            (
                "rhcos-9.6.20250701-0-x86_64",
                some(Some("9.6.20250701-0"), (9, 6), Some("4.19-4.21")),
            ),
            ("ami-06f85a7940faa3217", None),
            ("projects/my-project/global/images/custom", None),
            ("rhcos-9-6-latest-gcp-x86-64", None),
            (
                "rhcos-9-6-20251399-1-gcp-x86-64",
                some(Some("9.6.20251399-1"), (9, 6), Some("4.19-4.21")),
            ),
            ("redhat:rh-ocp-worker:rh-ocp-worker:latest", None),
            ("redhat:rh-ocp-worker:rh-ocp-worker:4.3.2020010100", None),
            (
                "/subscriptions/x/resourceGroups/rg/providers/Microsoft.Compute/galleries/g/images/i/versions/latest",
                None,
            ),
            ("rhcos-", None),
            ("rhcos-é-ü-20250101-0-gcp", None),
            ("rhcos-9-\u{1F600}-20250101-0", None),
            ("a:b:c:ü.é.20250101", None),
            ("a:b:c:4é.1.20250101", None),
            ("a:b:c:4.18.", None),
            ("", None),
            (":::", None),
            ("rhcos-99999999999999999999-1-20250101-0", None),
        ] {
            assert_eq!(v(image), want, "{image}");
        }
        // A version is a version even with an impossible date; it then has no build date.
        assert_eq!(
            from_name("rhcos-9-6-20251399-1-gcp-x86-64").unwrap().built,
            None
        );
    }

    fn boot() -> BootImages {
        BootImages::from_document(EMBEDDED_CONFIGMAP).unwrap()
    }

    #[test]
    fn the_stream_knows_its_own_images_and_their_release() {
        let boot = boot();
        let learned = Learned::default();
        // An AMI says nothing by itself, but this one is the stream's (us-east-1, x86_64).
        let ami = "ami-0fbc8be8796dc1df5";
        assert_eq!(from_name(ami), None);
        let v = version_of(ami, Some(&boot), &learned).unwrap();
        assert_eq!(v.source, Source::Stream);
        assert_eq!(v.rhcos.as_deref(), Some("9.8.20260428-0"));
        assert_eq!(v.release, Some(Release::Exact((4, 21))));
        let gcp = "projects/rhcos-cloud/global/images/rhcos-9-8-20260428-0-gcp-x86-64";
        assert_eq!(
            version_of(gcp, Some(&boot), &learned).unwrap().source,
            Source::Stream
        );
        // Not in the stream: read from the name, the release from the table.
        let old = version_of("rhcos-9-6-20250826-1-gcp-x86-64", Some(&boot), &learned).unwrap();
        assert_eq!(
            (old.source, old.release),
            (Source::Name, releases_of_rhel((9, 6)))
        );
        assert_eq!(
            version_of("ami-00000000000000000", Some(&boot), &learned),
            None
        );
        assert_eq!(version_of(ami, None, &learned), None);
    }

    #[test]
    fn ec2_tells_what_an_ami_is() {
        let mut aws = AwsLearned::default();
        aws.images.insert(
            ("us-east-1".into(), "ami-0aaaaaaaaaaaaaaaa".into()),
            Described::Found {
                owner: "531415883065".into(),
                name: "rhcos-9.6.20250701-0-x86_64".into(),
            },
        );
        aws.images.insert(
            ("us-east-1".into(), "ami-0bbbbbbbbbbbbbbbb".into()),
            Described::NotFound,
        );
        aws.marketplace.insert(
            ("us-east-1".into(), "prod".into()),
            vec![MarketImage {
                id: "ami-0cccccccccccccccc".into(),
                description: "OpenShift rhcos-418.94.202502251502-0".into(),
                creation_date: "2025-03-01T00:00:00.000Z".into(),
            }],
        );
        let learned = Learned::default().with_aws(aws);
        let of = |ami: &str| version_of(ami, None, &learned).map(|v| (v.source, v.rhcos.unwrap()));
        assert_eq!(
            of("ami-0aaaaaaaaaaaaaaaa"),
            Some((Source::Ec2, "9.6.20250701-0".into()))
        );
        assert_eq!(
            of("ami-0cccccccccccccccc"),
            Some((Source::Ec2, "418.94.202502251502-0".into()))
        );
        assert_eq!(of("ami-0bbbbbbbbbbbbbbbb"), None);
        assert_eq!(of("ami-0dddddddddddddddd"), None);
    }

    #[test]
    fn the_oldest_is_the_lowest_rhel_then_release_then_build() {
        let boot = boot();
        let learned = Learned::default();
        let s = survey(
            [
                ("a".to_owned(), Some("rhcos-9-6-20250826-1-gcp-x86-64")),
                (
                    "b".to_owned(),
                    Some("rhcos-416-94-202405291527-0-gcp-x86-64"),
                ),
                (
                    "c".to_owned(),
                    Some("rhcos-418-94-202401010000-0-gcp-x86-64"),
                ),
                ("d".to_owned(), Some("ami-00000000000000000")),
                ("e".to_owned(), None),
                (
                    "f".to_owned(),
                    Some("rhcos-417-94-202412010000-0-gcp-x86-64"),
                ),
            ],
            Some(&boot),
            &learned,
        );
        let (who, image, v) = s.oldest.unwrap();
        // 4.16 before 4.17 and 4.18 (all RHEL 9.4), though 4.18's build is the earliest.
        assert_eq!(
            (who.as_str(), image.as_str()),
            ("b", "rhcos-416-94-202405291527-0-gcp-x86-64")
        );
        assert_eq!(v.release, Some(Release::Exact((4, 16))));
        assert_eq!(s.unknown, ["d", "e"]);
        assert_eq!(s.count, 6);
        assert!(!v.below_floor());
        let s = survey(
            [(
                "x".to_owned(),
                Some("rhcos-412-86-202301311551-0-gcp-x86-64"),
            )],
            None,
            &learned,
        );
        assert!(s.oldest.unwrap().2.below_floor());
        assert_eq!(survey([], None, &learned), Survey::default());
    }

    fn mc(status: Value) -> Value {
        json!({"apiVersion": "operator.openshift.io/v1", "kind": "MachineConfiguration",
               "metadata": {"name": "cluster"}, "spec": {}, "status": status})
    }

    fn done() -> Value {
        json!([{"type": "BootImageUpdateProgressing", "status": "False", "reason": "x", "message": ""},
               {"type": "BootImageUpdateDegraded", "status": "False", "reason": "x", "message": ""}])
    }

    fn judge(status: Value) -> (Upgrade, String) {
        let e = enforcement(Some(&mc(status)));
        (e.upgrade, e.message)
    }

    fn manual(field: &str, v: &str) -> Value {
        let mode = if field == "ocpVersion" {
            "OCPVersion"
        } else {
            "RHCOSVersion"
        };
        json!({"bootImageSkewEnforcementStatus": {"mode": "Manual", "manual": {"mode": mode, field: v}}})
    }

    fn automatic(v: Value, conditions: Value) -> Value {
        json!({"bootImageSkewEnforcementStatus": {"mode": "Automatic", "automatic": v}, "conditions": conditions})
    }

    /// Cases and messages of the MCO's own `TestCheckBootImageSkewUpgradeableGuard`.
    #[test]
    fn the_mcos_verdict_in_manual_mode() {
        for (status, want, message) in [
            (
                manual("ocpVersion", "4.12.0"),
                Upgrade::Refused,
                "Upgrades have been disabled because the cluster is using OCP boot image version 4.12.0, which is below the minimum required version 4.13.0",
            ),
            (
                manual("ocpVersion", "4.10.0"),
                Upgrade::Refused,
                "Upgrades have been disabled because the cluster is using OCP boot image version 4.10.0, which is below the minimum required version 4.13.0",
            ),
            (
                manual("ocpVersion", "4.13.0"),
                Upgrade::Allowed,
                "recorded OCP version 4.13.0",
            ),
            (
                manual("rhcosVersion", "9.0.20251023-0"),
                Upgrade::Refused,
                "Upgrades have been disabled because the cluster is using RHCOS boot image version 9.0.20251023-0(RHEL version: 9.0), which is below the minimum required RHEL version 9.2",
            ),
            (
                manual("rhcosVersion", "411.86.202308081056-0"),
                Upgrade::Refused,
                "Upgrades have been disabled because the cluster is using RHCOS boot image version 411.86.202308081056-0(RHEL version: 8.6), which is below the minimum required RHEL version 9.2",
            ),
            (
                manual("rhcosVersion", "9.1.20251023-0"),
                Upgrade::Refused,
                "(RHEL version: 9.1)",
            ),
            (
                manual("rhcosVersion", "9.2.20251023-0"),
                Upgrade::Allowed,
                "recorded RHCOS version 9.2.20251023-0",
            ),
            (
                manual("rhcosVersion", "413.92.202305021736-0"),
                Upgrade::Allowed,
                "recorded RHCOS version",
            ),
        ] {
            let (upgrade, text) = judge(status.clone());
            assert_eq!(upgrade, want, "{status}: {text}");
            assert!(
                text.starts_with(message) || text.contains(message),
                "{status}: {text}"
            );
        }
    }

    #[test]
    fn the_mcos_verdict_in_automatic_mode() {
        assert_eq!(
            judge(automatic(json!({"ocpVersion": "4.12.0"}), done())).0,
            Upgrade::Refused
        );
        assert_eq!(
            judge(automatic(json!({"ocpVersion": "4.21.0"}), done())).0,
            Upgrade::Allowed
        );
        // The OCP version wins over the RHCOS version when both are recorded.
        let both = json!({"ocpVersion": "4.21.0", "rhcosVersion": "411.86.202308081056-0"});
        assert_eq!(judge(automatic(both, done())).0, Upgrade::Allowed);
        // Not evaluated while the boot image controller has not finished a pass.
        let (u, m) = judge(automatic(json!({"ocpVersion": "4.12.0"}), json!([])));
        assert_eq!(u, Upgrade::Allowed);
        assert!(m.contains("has not finished a pass"), "{m}");
        let progressing = json!([{"type": "BootImageUpdateProgressing", "status": "True"}]);
        assert_eq!(
            judge(automatic(json!({"ocpVersion": "4.12.0"}), progressing)).0,
            Upgrade::Allowed
        );
        // Degraded refuses whatever is recorded.
        let degraded = json!([{"type": "BootImageUpdateProgressing", "status": "False"},
                              {"type": "BootImageUpdateDegraded", "status": "True", "message": "1 Degraded MAPI MachineSets"}]);
        let (u, m) = judge(automatic(json!({"ocpVersion": "4.21.0"}), degraded));
        assert_eq!(u, Upgrade::Refused);
        assert_eq!(
            m,
            "Upgrades have been disabled due to boot image update failures: boot image controller is degraded: 1 Degraded MAPI MachineSets"
        );
    }

    #[test]
    fn no_verdict_without_a_mode_or_a_readable_version() {
        // None: not enforced; no mode yet: the MCO does not refuse; absent: unknown.
        let none = enforcement(Some(&mc(
            json!({"bootImageSkewEnforcementStatus": {"mode": "None"}}),
        )));
        assert_eq!(
            (none.mode.as_deref(), none.upgrade),
            (Some("None"), Upgrade::NotEnforced)
        );
        assert_eq!(judge(json!({})).0, Upgrade::Allowed);
        assert_eq!(enforcement(None).upgrade, Upgrade::Unknown);
        // Unreadable recorded versions do not refuse (the MCO logs them and goes on).
        let (u, m) = judge(manual("ocpVersion", "four"));
        assert_eq!(
            (u, m.as_str()),
            (
                Upgrade::Allowed,
                "recorded OCP version four is not readable: the MCO does not refuse"
            )
        );
        let (u, m) = judge(manual("rhcosVersion", "9.1"));
        assert_eq!(
            (u, m.as_str()),
            (
                Upgrade::Allowed,
                "recorded RHCOS version 9.1 is not readable: the MCO does not refuse"
            )
        );
        let (_, m) = judge(manual("rhcosVersion", "413.92.202305021736-0"));
        assert_eq!(
            m,
            "recorded RHCOS version 413.92.202305021736-0 (RHEL 9.2) is at or above the floor RHEL 9.2"
        );
    }

    #[test]
    fn generic_versions_as_kubernetes_reads_them() {
        assert_eq!(generic("4.12.0"), Some(vec![4, 12, 0]));
        assert_eq!(generic("v4.13"), Some(vec![4, 13, 0]));
        assert_eq!(generic("4.13.0-rc.1"), Some(vec![4, 13, 0]));
        assert_eq!(generic("4.13.0.1"), Some(vec![4, 13, 0, 1]));
        assert_eq!(generic("4"), None);
        assert_eq!(generic(""), None);
        assert_eq!(generic("99999999999999999999999.1"), None);
        assert_eq!(rhel_of_rhcos("48.84.202208021106-0"), Some((8, 4)));
        assert_eq!(rhel_of_rhcos("9.6.20251023-0"), Some((9, 6)));
        assert_eq!(rhel_of_rhcos("9.6.2025102-0"), None);
        assert_eq!(rhel_of_rhcos("4.8.202208021106-0"), None);
    }
}
