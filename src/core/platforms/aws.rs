//! AWS: `ami` becomes `{id: <target>}`, as the MCO does (`reconcileAWSProviderSpec`).
//!
//! Which AMIs may move depends on who owns the current one. The MCO asks EC2 on every
//! reconcile; the request path may not call a cloud, so: an AMI that appears anywhere in
//! the stream (any architecture, any region) is Red Hat's without asking, and any other is
//! classified in the background (`cluster::ec2`), whose answers reach this rule as
//! [`AwsLearned`]. Until then the MachineSet is left as it is (`AMIUnclassified`). Red Hat's
//! AMIs move to the stream's AMI for the region; AWS Marketplace (and ROSA) AMIs to the
//! newest marketplace AMI of the same product whose version is at most the stream's;
//! anybody else's are custom and never touched.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, LazyLock};

use regex::Regex;
use serde::Deserialize;
use serde_json::{Value, json};

use super::rules::{Context, Edit, EntryError, McoManages, Outcome, Reading, Rules};
use crate::core::arch::Arch;
use crate::core::learned::Learned;
pub use crate::core::learned::{AwsLearned, Described, MarketImage};
use crate::core::lenient::{Field, Object};
use crate::core::reason::Reason;
use crate::core::skew::version::{self as skew, Source, Version};
use crate::core::view::SpecFields;

/// AWS's [`Rules`].
pub struct Aws;

impl Rules for Aws {
    const NAME: &'static str = "AWS";
    /// What the MCO manages on AWS: MachineSets from 4.18 (4.17 with TechPreviewNoUpgrade;
    /// by default from 4.19), the ControlPlaneMachineSet from 4.22 (4.21 with
    /// TechPreviewNoUpgrade).
    const MCO_MANAGES: McoManages = McoManages::BOTH;
    const KIND: &'static str = "AWSMachineProviderConfig";
    const BOOT_FIELDS: &'static [&'static str] = &["ami"];
    type Target = AwsTarget;

    fn targets(
        architectures: &BTreeMap<Arch, &Value>,
    ) -> BTreeMap<Arch, Result<AwsTarget, EntryError>> {
        targets(architectures)
    }

    fn current_image(spec: &SpecFields<'_>) -> Option<String> {
        current_image(spec)
    }

    fn reconcile(spec: &SpecFields<'_>, target: &AwsTarget, ctx: &Context<'_>) -> Outcome {
        reconcile(spec, target, ctx)
    }

    /// `ami.id`.
    fn referenced_image(spec: &Value) -> Reading<String> {
        match spec.pointer("/ami/id").and_then(Value::as_str) {
            Some(ami) => Reading::Ours(Some(ami.to_owned())),
            None => Reading::Other,
        }
    }

    /// Every region's AMI.
    fn stream_releases(entry: &Value, out: &mut BTreeMap<String, String>) {
        let regions = entry
            .pointer("/images/aws/regions")
            .and_then(Value::as_object);
        for region in regions.into_iter().flat_map(|r| r.values()) {
            if let (Some(ami), Some(release)) =
                (region["image"].as_str(), region["release"].as_str())
            {
                out.insert(ami.to_owned(), release.to_owned());
            }
        }
    }

    fn share_stream_images(targets: &mut [&mut AwsTarget]) {
        share_amis(targets);
    }

    /// What EC2 told of an AMI (an AMI id says nothing by itself).
    fn version_learned(image: &str, learned: &Learned) -> Option<Version> {
        from_ec2(learned.aws.as_deref()?, image)
    }

    /// Of its version, else of the RHCOS major a marketplace AMI's name (as EC2 gave it)
    /// carries.
    fn rhel_major(image: &str, version: Option<&Version>, learned: &Learned) -> Option<u32> {
        if let Some(version) = version {
            return u32::try_from(version.rhel.0).ok();
        }
        let aws = learned.aws.as_deref()?;
        aws.images
            .iter()
            .find_map(|((_, id), described)| match described {
                Described::Found { name, .. } if id == image => rhcos_major_in_name(name),
                _ => None,
            })
    }
}
/// The owner of Red Hat's own RHCOS AMIs.
pub const RED_HAT_OWNER: &str = "531415883065";
/// The owner of AWS Marketplace AMIs, and its alias for `DescribeImages(Owners=...)`.
pub const MARKETPLACE_OWNER: &str = "679593333241";
pub const MARKETPLACE_OWNER_ALIAS: &str = "aws-marketplace";
/// The ROSA product among the marketplace ones.
pub const ROSA_PRODUCT: &str = "34850061-abaf-402d-92df-94325c9e947f";

/// One architecture's AMIs, and every AMI of the stream.
#[derive(Debug, Clone)]
pub struct AwsTarget {
    /// Region -> AMI.
    regions: BTreeMap<String, String>,
    /// `artifacts.aws.release`, e.g. `9.8.20260428-0`: the marketplace version bound.
    release: Option<String>,
    /// Every AMI of the stream, all architectures and regions: these are Red Hat's.
    in_stream: Arc<BTreeSet<String>>,
}

/// What the background must ask EC2 so that the rule can decide.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Query {
    /// Who owns this AMI in this region?
    Describe { region: String, ami: String },
    /// The marketplace images of this product in this region.
    Marketplace { region: String, product: String },
}

/// Who an AMI belongs to, by its owner (MCO `detectAMIKind`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    Standard,
    /// An AWS Marketplace product (ROSA is one of them).
    Marketplace {
        product: String,
    },
    Unknown,
}

pub(crate) fn detect_kind(owner: &str, name: &str) -> Kind {
    match owner {
        RED_HAT_OWNER => Kind::Standard,
        MARKETPLACE_OWNER => product_id(name).map_or(Kind::Unknown, |p| Kind::Marketplace {
            product: p.to_owned(),
        }),
        _ => Kind::Unknown,
    }
}

static UUID: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new("^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
        .expect("a constant pattern")
});

/// A marketplace product id: the last five `-` segments of the AMI name, if a UUID.
pub fn product_id(name: &str) -> Option<&str> {
    let start = name.rmatch_indices('-').nth(4).map(|(i, _)| i + 1)?;
    Some(&name[start..]).filter(|p| UUID.is_match(p))
}

/// `major.minor`, compared as numbers.
pub(crate) type Token = (u64, u64);

fn token(s: &str) -> Option<Token> {
    let (major, minor) = s.split_once('.')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

/// The first two `.` segments of a release (`9.6.20260210-0` -> `9.6`).
pub(crate) fn version_token(release: &str) -> Result<Token, EntryError> {
    let mut parts = release.split('.');
    match (parts.next(), parts.next()) {
        (Some(major), Some(minor)) => token(&format!("{major}.{minor}"))
            .ok_or_else(|| EntryError::Release(release.to_owned())),
        _ => Err(EntryError::ReleaseParts(release.to_owned())),
    }
}

static DESCRIPTION_VERSION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(\d+\.\d+)\.(?:[0-9]{8}|[0-9]{12})-\d+").expect("a constant pattern")
});

/// The RHCOS version in a marketplace image description: (full version, token).
pub(crate) fn description_version(description: &str) -> Option<(&str, Token)> {
    let caps = DESCRIPTION_VERSION.captures(description)?;
    Some((caps.get(0)?.as_str(), token(caps.get(1)?.as_str())?))
}

/// Tokens of 100 and more are the pre-RHEL-aligned scheme (`418.94`).
pub(crate) fn is_pre_rhel_aligned(token: Token) -> bool {
    token.0 > 100
}

/// The marketplace image for `target`: the highest version at most `target`, ties going to
/// the newest `CreationDate` (MCO `findMarketplaceAMI`).
pub(crate) fn find_marketplace_ami(
    images: &[MarketImage],
    target: Token,
) -> Option<(&MarketImage, &str)> {
    images
        .iter()
        .filter_map(|i| description_version(&i.description).map(|(full, t)| (i, full, t)))
        .filter(|(_, _, t)| t.cmp(&target) != Ordering::Greater)
        .max_by(|a, b| {
            a.2.cmp(&b.2)
                .then_with(|| a.0.creation_date.cmp(&b.0.creation_date))
        })
        .map(|(i, full, _)| (i, full))
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct AmiRef<'a> {
    #[serde(borrow)]
    id: Field<Cow<'a, str>>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct Placement<'a> {
    #[serde(borrow)]
    region: Field<Cow<'a, str>>,
}

/// The MachineSet's AMI and region, or why it has none to move.
fn ami_and_region<'a>(spec: &SpecFields<'a>) -> Result<(Cow<'a, str>, Cow<'a, str>), Outcome> {
    let ami = match spec.read::<Object<AmiRef<'a>>>("ami") {
        Field::Is(Object(r)) => match r.id {
            Field::Is(id) if !id.is_empty() => id,
            Field::Wrong(_) => {
                return Err(Outcome::skip(
                    Reason::InvalidProviderSpec,
                    "providerSpec.value.ami.id is not a string",
                ));
            }
            _ => {
                return Err(Outcome::skip(
                    Reason::NoAMIID,
                    "providerSpec.value.ami has no id (an ARN or filters choose the AMI): leaving it alone",
                ));
            }
        },
        Field::Wrong(_) => {
            return Err(Outcome::skip(
                Reason::InvalidProviderSpec,
                "providerSpec.value.ami is not an object",
            ));
        }
        Field::Absent | Field::Null => {
            return Err(Outcome::skip(
                Reason::NoAMIID,
                "providerSpec.value.ami is not set: leaving it alone",
            ));
        }
    };
    let region = match spec.read::<Object<Placement<'a>>>("placement") {
        Field::Is(Object(p)) => p.region,
        _ => Field::Absent,
    };
    match region {
        Field::Is(region) if !region.is_empty() => Ok((ami, region)),
        _ => Err(Outcome::Skip {
            reason: Reason::RegionNotInStream,
            message: "providerSpec.value.placement.region is not set: no region to take an AMI for"
                .into(),
            current: Some(ami.into_owned()),
            target: None,
        }),
    }
}

/// `ami.id`.
fn current_image(spec: &SpecFields<'_>) -> Option<String> {
    match spec.read::<Object<AmiRef<'_>>>("ami") {
        Field::Is(Object(r)) => r.id.as_str().map(str::to_owned),
        _ => None,
    }
}

fn targets(
    architectures: &BTreeMap<Arch, &Value>,
) -> BTreeMap<Arch, Result<AwsTarget, EntryError>> {
    #[derive(Deserialize)]
    struct RegionImage {
        image: String,
    }
    // Per architecture: region -> AMI, and the release.
    type Read = Result<(BTreeMap<String, String>, Option<String>), EntryError>;
    let mut read: BTreeMap<Arch, Read> = BTreeMap::new();
    for (&arch, entry) in architectures {
        let Some(regions) = entry.pointer("/images/aws/regions") else {
            continue;
        };
        let parsed = serde_json::from_value::<BTreeMap<String, RegionImage>>(regions.clone())
            .map_err(|e| EntryError::Shape {
                field: "images.aws.regions",
                error: e.to_string(),
            })
            .map(|r| {
                let regions = r.into_iter().map(|(k, v)| (k, v.image)).collect();
                let release = entry
                    .pointer("/artifacts/aws/release")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                (regions, release)
            });
        read.insert(arch, parsed);
    }
    let in_stream: Arc<BTreeSet<String>> = Arc::new(
        read.values()
            .flatten()
            .flat_map(|(regions, _)| regions.values().cloned())
            .collect(),
    );
    read.into_iter()
        .map(|(arch, r)| {
            let target = r.map(|(regions, release)| AwsTarget {
                regions,
                release,
                in_stream: in_stream.clone(),
            });
            (arch, target)
        })
        .collect()
}

/// Every target knows the AMIs of all of them.
fn share_amis(targets: &mut [&mut AwsTarget]) {
    let all: BTreeSet<String> = targets
        .iter()
        .flat_map(|t| t.in_stream.iter().cloned())
        .collect();
    let all = Arc::new(all);
    for t in targets.iter_mut() {
        t.in_stream = all.clone();
    }
}

/// Red Hat's AMIs move to the stream's for the region, marketplace ones within their
/// product; whose an AMI is comes from the stream, or from EC2 (`ctx.learned`).
fn reconcile(spec: &SpecFields<'_>, target: &AwsTarget, ctx: &Context<'_>) -> Outcome {
    let learned = ctx.learned.aws.as_deref();
    let (ami, region) = match ami_and_region(spec) {
        Ok(v) => v,
        Err(skip) => return skip,
    };
    let chosen = match classify(&ami, &region, target, learned) {
        Ok(Kind::Standard) => match target.regions.get(region.as_ref()) {
            Some(t) => t.clone(),
            None => {
                return Outcome::Skip {
                    reason: Reason::RegionNotInStream,
                    message: format!(
                        "the stream has no AWS image for region {region} ({})",
                        ctx.arch
                    ),
                    current: Some(ami.into_owned()),
                    target: None,
                };
            }
        },
        Ok(Kind::Marketplace { product }) if !ctx.aws_marketplace => {
            return Outcome::Skip {
                reason: Reason::MarketplaceNotEnabled,
                message: format!(
                    "AMI {ami} in {region} is an AWS Marketplace image (product {product}), whose successor EC2 names, not the stream: moving it needs the kustomize component aws-marketplace (--aws-marketplace)"
                ),
                current: Some(ami.into_owned()),
                target: None,
            };
        }
        Ok(Kind::Marketplace { product }) => {
            match marketplace_target(&product, &region, target, learned, ctx.arch) {
                Ok(t) => t,
                Err(skip) => return skip.with_current(&ami),
            }
        }
        Ok(Kind::Unknown) => {
            return Outcome::Skip {
                reason: Reason::CustomImage,
                message: format!(
                    "AMI {ami} in {region} is neither Red Hat's nor an AWS Marketplace RHCOS image: leaving the MachineSet alone"
                ),
                current: Some(ami.into_owned()),
                target: None,
            };
        }
        Err(skip) => return skip.with_current(&ami),
    };
    if chosen == ami {
        return Outcome::UpToDate {
            current: ami.into_owned(),
            target: chosen,
        };
    }
    Outcome::Changes {
        edits: vec![Edit {
            pointer: "/ami".into(),
            exists: true,
            value: json!({ "id": chosen }),
        }],
        current: ami.into_owned(),
        target: chosen,
    }
}

/// Who owns the AMI: the stream says so for Red Hat's, EC2 (through `learned`) for others.
fn classify(
    ami: &str,
    region: &str,
    target: &AwsTarget,
    learned: Option<&AwsLearned>,
) -> Result<Kind, Outcome> {
    if target.in_stream.contains(ami) {
        return Ok(Kind::Standard);
    }
    if let Some(product) = learned.and_then(|l| l.listed_product(region, ami)) {
        return Ok(Kind::Marketplace {
            product: product.to_owned(),
        });
    }
    let key = (region.to_owned(), ami.to_owned());
    match learned.and_then(|l| l.images.get(&key)) {
        Some(Described::Found { owner, name }) => Ok(detect_kind(owner, name)),
        Some(Described::NotFound) => Err(Outcome::skip(
            Reason::CustomImage,
            format!("EC2 knows no AMI {ami} in {region}: leaving the MachineSet alone"),
        )),
        None => Err(Outcome::skip(
            Reason::AMIUnclassified,
            match learned.and_then(|l| l.unavailable.as_deref()) {
                Some(why) => format!(
                    "AMI {ami} in {region} is not in the stream; would need EC2 to classify it: {why}"
                ),
                None => format!(
                    "AMI {ami} in {region} is not in the stream; waiting for EC2 to say who owns it"
                ),
            },
        )),
    }
}

fn marketplace_target(
    product: &str,
    region: &str,
    target: &AwsTarget,
    learned: Option<&AwsLearned>,
    arch: Arch,
) -> Result<String, Outcome> {
    let release = target.release.as_deref().ok_or_else(|| {
        Outcome::skip(
            Reason::NoImageInStream,
            format!("the stream has no artifacts.aws.release for {arch}: no marketplace version to look for"),
        )
    })?;
    let bound = version_token(release)
        .map_err(|e| Outcome::skip(Reason::NoImageInStream, format!("stream: {e}")))?;
    let key = (region.to_owned(), product.to_owned());
    let Some(images) = learned.and_then(|l| l.marketplace.get(&key)) else {
        return Err(Outcome::skip(
            Reason::AMIUnclassified,
            format!(
                "AWS Marketplace product {product}: waiting for EC2's list of its images in {region}"
            ),
        ));
    };
    match find_marketplace_ami(images, bound) {
        Some((image, _)) => Ok(image.id.clone()),
        None => {
            let old_only = !images.is_empty()
                && images.iter().all(|i| {
                    description_version(&i.description).is_some_and(|(_, t)| is_pre_rhel_aligned(t))
                });
            Err(Outcome::skip(
                Reason::NoMarketplaceImage,
                if old_only {
                    format!(
                        "AWS Marketplace product {product} has only pre-4.19 images in {region}: none at or below {}.{}",
                        bound.0, bound.1
                    )
                } else {
                    format!(
                        "no AWS Marketplace image of product {product} at or below version {}.{} in {region}; will look again",
                        bound.0, bound.1
                    )
                },
            ))
        }
    }
}

/// What the background must ask EC2 before the rule can decide a MachineSet with this
/// providerSpec (`stream`: this platform's targets, any architecture): nothing for stream
/// AMIs, AMIs already known, or providerSpecs with no AMI to move; a marketplace product's
/// images only when `marketplace` moves are on.
pub(crate) fn queries<'t>(
    spec: &SpecFields<'_>,
    stream: impl IntoIterator<Item = &'t AwsTarget>,
    learned: Option<&AwsLearned>,
    marketplace: bool,
) -> Vec<Query> {
    if spec.kind().as_str() != Some(Aws::KIND) {
        return Vec::new();
    }
    let Ok((ami, region)) = ami_and_region(spec) else {
        return Vec::new();
    };
    let in_stream = stream
        .into_iter()
        .any(|t| t.in_stream.contains(ami.as_ref()));
    if in_stream || learned.is_some_and(|l| l.listed_product(&region, &ami).is_some()) {
        return Vec::new();
    }
    let key = (region.into_owned(), ami.into_owned());
    match learned.and_then(|l| l.images.get(&key)) {
        None => vec![Query::Describe {
            region: key.0,
            ami: key.1,
        }],
        Some(Described::Found { owner, name }) => match detect_kind(owner, name) {
            Kind::Marketplace { .. } if !marketplace => Vec::new(),
            Kind::Marketplace { product } => {
                let key = (key.0, product);
                if learned.is_some_and(|l| l.marketplace.contains_key(&key)) {
                    Vec::new()
                } else {
                    vec![Query::Marketplace {
                        region: key.0,
                        product: key.1,
                    }]
                }
            }
            _ => Vec::new(),
        },
        Some(Described::NotFound) => Vec::new(),
    }
}

/// The RHCOS release EC2 told for an AMI: in its name (Red Hat's AMIs), or the
/// description of a marketplace image with that id.
fn from_ec2(aws: &AwsLearned, ami: &str) -> Option<Version> {
    let named = aws
        .images
        .iter()
        .filter(|((_, id), _)| id == ami)
        .find_map(|(_, d)| match d {
            Described::Found { name, .. } => skew::release_in_text(name).map(str::to_owned),
            Described::NotFound => None,
        });
    let described = || {
        aws.marketplace
            .values()
            .flatten()
            .filter(|i| i.id == ami)
            .find_map(|i| skew::release_in_text(&i.description).map(str::to_owned))
    };
    skew::from_release(&named.or_else(described)?, Source::Ec2)
}

/// The RHCOS major a marketplace AMI's name carries: `9` of
/// `RHEL-9.4-RHCOS-9.6_HVM_GA-20260210-x86_64-0-<product>`.
fn rhcos_major_in_name(name: &str) -> Option<u32> {
    let at = name.to_ascii_lowercase().find("rhcos-")? + "rhcos-".len();
    let digits: String = name[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    let rest = &name[at + digits.len()..];
    rest.starts_with('.').then(|| digits.parse().ok()).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rhcos_majors_in_marketplace_ami_names() {
        for (name, want) in [
            (
                "RHEL-9.4-RHCOS-9.6_HVM_GA-20260210-x86_64-0-59ead7de-2540-4653-a8b0-fa7926d5c845",
                Some(9),
            ),
            ("rhcos-10.2.20260715-0-x86_64-hvm", Some(10)),
            ("RHCOS-x", None),
            ("rhcos-", None),
            ("ubuntu-24.04", None),
        ] {
            assert_eq!(rhcos_major_in_name(name), want, "{name}");
        }
    }

    #[test]
    fn product_ids() {
        assert_eq!(
            product_id(
                "RHEL-9.4-RHCOS-9.6_HVM_GA-20260210-x86_64-0-59ead7de-2540-4653-a8b0-fa7926d5c845"
            ),
            Some("59ead7de-2540-4653-a8b0-fa7926d5c845")
        );
        assert_eq!(product_id("some-image-without-a-uuid"), None);
        assert_eq!(product_id("short"), None);
        assert_eq!(product_id(""), None);
    }

    #[test]
    fn tokens() {
        assert_eq!(version_token("9.10.20260210-0"), Ok((9, 10)));
        assert!(version_token("9").is_err());
        assert!(version_token("").is_err());
        assert_eq!(
            description_version("rhcos-9.6.20250701-0-x86_64"),
            Some(("9.6.20250701-0", (9, 6)))
        );
        assert!(is_pre_rhel_aligned((418, 94)));
        assert!(!is_pre_rhel_aligned((100, 0)));
    }
}
