//! What an RHCOS release says of itself: its RHEL, the OpenShift releases it belongs to,
//! when it was built. The platforms read their images' versions with it; the skew above
//! compares them.

use std::cmp::Ordering;
use std::fmt;
use std::sync::LazyLock;

use k8s_openapi::jiff::civil::Date;
use regex::Regex;
use serde::Serialize;

use crate::core::age;

/// `major.minor`, compared as numbers.
pub type Token = (u64, u64);

/// The MCO's floors (`pkg/controller/common/constants.go`): a recorded OpenShift version
/// below `OCPVersionBootImageSkewLimit`, or a recorded RHCOS version whose RHEL is below
/// `RHCOSVersionBootImageSkewLimit`, makes it set `Upgradeable=False`.
pub const OCP_FLOOR: &str = "4.13.0";
pub const RHEL_FLOOR: &str = "9.2";
pub(crate) const RHEL_FLOOR_TOKEN: Token = (9, 2);
pub(crate) const OCP_FLOOR_TOKEN: [u64; 3] = [4, 13, 0];

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
    pub(crate) fn first(self) -> Token {
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

pub(crate) fn token(major: &str, minor: &str) -> Option<Token> {
    Some((major.parse().ok()?, minor.parse().ok()?))
}

/// `digits` split after its first digit (`418` -> 4.18, `94` -> 9.4), as RHCOS's
/// pre-RHEL-aligned versions encode the OpenShift and RHEL releases.
pub(crate) fn split_first(digits: &str) -> Option<Token> {
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

/// The first RHCOS release written out in `text` (`9.6.20250701-0` of
/// `rhcos-9.6.20250701-0-x86_64`).
pub(crate) fn release_in_text(text: &str) -> Option<&str> {
    Some(RELEASE_IN_TEXT.captures(text)?.get(1)?.as_str())
}

/// The RHEL major of an RHCOS release: `10` of `10.2.20260715-0`, `9` of `9.8.…`, and of
/// the releases before RHEL-aligned versions, `9` of `416.94.202405291527-0`.
pub fn rhel_major_of_release(release: &str) -> Option<u32> {
    let mut parts = release.split('.');
    let (major, minor) = (parts.next()?, parts.next()?);
    parts.next()?;
    if !major.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if major.len() >= 3 {
        // `416.94`: OpenShift 4.16 on RHEL 9.4.
        return minor.get(..1)?.parse().ok();
    }
    major.parse().ok()
}
