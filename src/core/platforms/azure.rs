//! Azure: `image` becomes the stream's marketplace image of the same variant and Hyper-V
//! generation, replaced as a whole, as the MCO does (`reconcileAzureProviderSpec`): the
//! unpaid `azureopenshift` image, or the paid `redhat`/`redhat-limited` OCP/OPP/OKE ones.
//! An image uploaded at install time (`resourceID`) moves to the unpaid marketplace image.
//! No cloud call: everything comes from the stream.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;
use serde_json::{Value, json};

use super::rules::{Context, Edit, EntryError, McoManages, Outcome, Reading, Rules, per_arch};
use crate::core::age;
use crate::core::arch::Arch;
use crate::core::learned::Learned;
use crate::core::lenient::{Field, Object};
use crate::core::reason::Reason;
use crate::core::skew::version::{self as skew, Release, Version};
use crate::core::view::SpecFields;

/// Azure's [`Rules`].
pub struct Azure;

impl Rules for Azure {
    const NAME: &'static str = "Azure";
    /// What the MCO manages on Azure (not Azure Stack Hub): MachineSets from 4.21 (by
    /// default from 4.22), the ControlPlaneMachineSet from 4.22 (4.21 with
    /// TechPreviewNoUpgrade).
    const MCO_MANAGES: McoManages = McoManages::BOTH;
    const KIND: &'static str = "AzureMachineProviderSpec";
    const BOOT_FIELDS: &'static [&'static str] = &["image"];
    type Target = AzureTarget;

    fn targets(
        architectures: &BTreeMap<Arch, &Value>,
    ) -> BTreeMap<Arch, Result<AzureTarget, EntryError>> {
        per_arch(architectures, |_, entry| target(entry))
    }

    fn current_image(spec: &SpecFields<'_>) -> Option<String> {
        current_image(spec)
    }

    fn reconcile(spec: &SpecFields<'_>, target: &AzureTarget, ctx: &Context<'_>) -> Outcome {
        reconcile(spec, target, ctx)
    }

    /// The MCO leaves ppc64le and s390x machines on Azure alone.
    fn serves(arch: Arch) -> bool {
        matches!(arch, Arch::Amd64 | Arch::Arm64)
    }

    /// `image`'s `resourceID` (an install-time image), or its URN.
    fn referenced_image(spec: &Value) -> Reading<String> {
        let Some(image) = spec.get("image").filter(|i| i.is_object()) else {
            return Reading::Other;
        };
        Reading::Ours(Some(
            match image["resourceID"].as_str().filter(|r| !r.is_empty()) {
                Some(id) => id.to_owned(),
                None => {
                    let part = |k: &str| image[k].as_str().unwrap_or("");
                    format!(
                        "{}:{}:{}:{}",
                        part("publisher"),
                        part("offer"),
                        part("sku"),
                        part("version")
                    )
                }
            },
        ))
    }

    /// A marketplace URN `publisher:offer:sku:version` carries it in its version.
    fn version_in_name(image: &str) -> Reading<Version> {
        match image.split(':').collect::<Vec<_>>().as_slice() {
            [_, _, _, version] => Reading::Ours(from_marketplace_version(version)),
            _ => Reading::Other,
        }
    }

    /// Of a marketplace URN's version; an install-time `resourceID` tells nothing.
    fn rhel_major(image: &str, _: Option<&Version>, _: &Learned) -> Option<u32> {
        let parts: Vec<&str> = image.split(':').collect();
        match parts.as_slice() {
            [_, _, _, version] => rhel_major_of_version(version),
            _ => None,
        }
    }

    /// Azure Stack Hub is Azure to the Infrastructure type, but has no marketplace images:
    /// it is named apart so that no platform serves it (as the MCO excludes it).
    fn unserved_variant(infrastructure: &Value) -> Option<&'static str> {
        let cloud = infrastructure
            .pointer("/status/platformStatus/azure/cloudName")
            .and_then(Value::as_str);
        (cloud == Some(STACK_CLOUD)).then_some(STACK_CLOUD)
    }
}

/// Azure Stack Hub's `cloudName`.
const STACK_CLOUD: &str = "AzureStackCloud";

const NO_PLAN: &str = "MarketplaceNoPlan";
const WITH_PLAN: &str = "MarketplaceWithPlan";
/// The unpaid variant's key in the stream, and its publisher.
const UNPAID: &str = "no-purchase-plan";
const UNPAID_PUBLISHER: &str = "azureopenshift";

/// A marketplace image as the stream gives it, with what a patch to it writes made once,
/// when the snapshot is built, not on every request.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
struct Image {
    publisher: String,
    offer: String,
    sku: String,
    version: String,
    /// `publisher:offer:sku:version`, for logs and messages.
    #[serde(skip)]
    urn: String,
    /// The whole `image` a patch writes (`type` from the variant: paid or not).
    #[serde(skip)]
    patch: Value,
}

impl Image {
    fn prepare(&mut self, plan: &str) {
        self.urn = self.to_string();
        self.patch = json!({
            "publisher": self.publisher,
            "offer": self.offer,
            "sku": self.sku,
            "version": self.version,
            "resourceID": "",
            "type": plan,
        });
    }
}

impl fmt::Display for Image {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Azure's own URN spelling.
        write!(
            f,
            "{}:{}:{}:{}",
            self.publisher, self.offer, self.sku, self.version
        )
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Generations {
    hyper_v_gen1: Option<Image>,
    hyper_v_gen2: Option<Image>,
}

/// `rhel-coreos-extensions.marketplace.azure` of one architecture, by variant
/// (`no-purchase-plan`, `ocp`, `opp-emea`, ...).
#[derive(Debug, Clone)]
pub struct AzureTarget(BTreeMap<String, Generations>);

/// The image `type` of a variant: only the unpaid one has no purchase plan.
fn plan_of(variant: &str) -> &'static str {
    if variant == UNPAID {
        NO_PLAN
    } else {
        WITH_PLAN
    }
}

fn target(entry: &Value) -> Result<Option<AzureTarget>, EntryError> {
    let Some(azure) = entry.pointer("/rhel-coreos-extensions/marketplace/azure") else {
        return Ok(None);
    };
    let mut variants: BTreeMap<String, Generations> = serde_json::from_value(azure.clone())
        .map_err(|e| EntryError::Shape {
            field: "rhel-coreos-extensions.marketplace.azure",
            error: e.to_string(),
        })?;
    for (variant, generations) in &mut variants {
        let plan = plan_of(variant);
        for image in [&mut generations.hyper_v_gen1, &mut generations.hyper_v_gen2]
            .into_iter()
            .flatten()
        {
            image.prepare(plan);
        }
    }
    Ok(Some(AzureTarget(variants)))
}

/// The providerSpec fields this rule reads.
#[derive(Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct CurrentImage<'a> {
    #[serde(borrow)]
    publisher: Field<Cow<'a, str>>,
    #[serde(borrow)]
    offer: Field<Cow<'a, str>>,
    #[serde(borrow)]
    sku: Field<Cow<'a, str>>,
    #[serde(borrow)]
    version: Field<Cow<'a, str>>,
    #[serde(borrow, rename = "resourceID")]
    resource_id: Field<Cow<'a, str>>,
    #[serde(borrow, rename = "type")]
    kind: Field<Cow<'a, str>>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct SecurityProfile<'a> {
    #[serde(borrow)]
    settings: Field<Object<SecuritySettings<'a>>>,
}

#[derive(Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct SecuritySettings<'a> {
    #[serde(borrow)]
    security_type: Field<Cow<'a, str>>,
}

/// The variant's key in the stream, from the current image (MCO's marketplace variants).
fn variant(publisher: &str, offer: &str, legacy: bool) -> Option<&'static str> {
    if legacy || publisher == UNPAID_PUBLISHER {
        return Some(UNPAID);
    }
    let emea = match publisher {
        "redhat" => false,
        "redhat-limited" => true,
        _ => return None,
    };
    Some(match (offer, emea) {
        ("rh-ocp-worker", false) => "ocp",
        ("rh-opp-worker", false) => "opp",
        ("rh-oke-worker", false) => "oke",
        ("rh-ocp-worker", true) => "ocp-emea",
        ("rh-opp-worker", true) => "opp-emea",
        ("rh-oke-worker", true) => "oke-emea",
        _ => return None,
    })
}

/// Hyper-V generation 2? Read from the current image as the MCO does, except that a SKU
/// ending in its generation (the 5.0 form, `aro_5-0_x64_gen2`, `..._gen1`) says it: the
/// MCO's `v2` test reads `_gen2` as Gen1.
fn gen2(arch: Arch, legacy_resource: Option<&str>, kind: &str, sku: &str) -> bool {
    match (legacy_resource, sku_generation(sku)) {
        (Some(resource), _) => resource.contains("gen2"),
        (None, Some(generation)) => generation == 2 || arch == Arch::Arm64,
        (None, None) if kind == NO_PLAN => sku.contains("v2") || arch == Arch::Arm64,
        (None, None) => !sku.contains("gen1"),
    }
}

/// The generation a SKU ends with: `_gen2`, `-gen1` (none: the older forms).
fn sku_generation(sku: &str) -> Option<u8> {
    let (_, suffix) = sku.rsplit_once(['_', '-'])?;
    match suffix {
        "gen1" => Some(1),
        "gen2" => Some(2),
        _ => None,
    }
}

/// Confidential and trusted-launch machines (any `securityType`) are not managed.
fn security_type(spec: &SpecFields<'_>) -> Option<Outcome> {
    let security = spec.read::<Object<SecurityProfile<'_>>>("securityProfile");
    if let Field::Is(Object(profile)) = &security
        && let Field::Is(Object(settings)) = &profile.settings
        && let Some(kind) = settings.security_type.as_str().filter(|t| !t.is_empty())
    {
        return Some(Outcome::skip(
            Reason::SecurityTypeUnsupported,
            format!(
                "securityProfile.settings.securityType is {kind}: boot images of such machines are not managed on Azure"
            ),
        ));
    }
    None
}

/// `image`'s publisher, offer, sku, version, resourceID and type (absent or null: empty).
fn image_fields<'s>(spec: &'s SpecFields<'_>) -> Result<[Cow<'s, str>; 6], Outcome> {
    let image = match spec.read::<Object<CurrentImage<'s>>>("image") {
        Field::Is(Object(image)) => image,
        Field::Absent | Field::Null => CurrentImage::default(),
        Field::Wrong(_) => {
            return Err(Outcome::skip(
                Reason::InvalidProviderSpec,
                "providerSpec.value.image is not an object",
            ));
        }
    };
    let fields = [
        ("publisher", image.publisher),
        ("offer", image.offer),
        ("sku", image.sku),
        ("version", image.version),
        ("resourceID", image.resource_id),
        ("type", image.kind),
    ];
    let mut out: [Cow<'s, str>; 6] = Default::default();
    for (slot, (name, field)) in out.iter_mut().zip(fields) {
        *slot = match field {
            Field::Is(s) => s,
            Field::Absent | Field::Null => Cow::Borrowed(""),
            Field::Wrong(_) => {
                return Err(Outcome::skip(
                    Reason::InvalidProviderSpec,
                    format!("providerSpec.value.image.{name} is not a string"),
                ));
            }
        };
    }
    Ok(out)
}

/// `image.resourceID` when set (an install-time image), else the image's URN.
fn current_image(spec: &SpecFields<'_>) -> Option<String> {
    let [publisher, offer, sku, version, resource_id, _] = image_fields(spec).ok()?;
    if !resource_id.is_empty() {
        return Some(resource_id.into_owned());
    }
    Some(format!("{publisher}:{offer}:{sku}:{version}")).filter(|urn| urn != ":::")
}

/// The RHEL major of a marketplace image version, as the installer tells them apart when
/// it fills the stream: `9.…` and `10.…` say it; an OpenShift-style one is from before
/// RHEL 10: a paid offer's `4.18.…` is RHEL 9, an ARO `418.94.…` names its RHEL (`94`).
fn rhel_major_of_version(version: &str) -> Option<u32> {
    let mut parts = version.split('.');
    let major = parts.next()?;
    let number: u32 = major.parse().ok()?;
    if major.len() >= 3 {
        return parts.next()?.get(..1)?.parse().ok();
    }
    Some(if number >= 9 { number } else { 9 })
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
            let release = skew::token(major, minor)?;
            (
                None,
                skew::rhel_of_release(release)?,
                Some(Release::Exact(release)),
            )
        }
        (m, 8) if m.len() >= 2 && major.starts_with('4') && built.is_some() => (
            Some(version.to_owned()),
            skew::split_first(minor)?,
            Some(Release::Exact(skew::split_first(major)?)),
        ),
        (_, 8) if built.is_some() => {
            let rhel = skew::token(major, minor)?;
            (Some(version.to_owned()), rhel, skew::releases_of_rhel(rhel))
        }
        _ => return None,
    };
    Some(Version {
        rhcos,
        rhel,
        release,
        built,
        source: skew::Source::Name,
    })
}

/// The image of the same variant and Hyper-V generation from the stream.
fn reconcile(
    spec: &SpecFields<'_>,
    AzureTarget(variants): &AzureTarget,
    ctx: &Context<'_>,
) -> Outcome {
    if let Some(skip) = security_type(spec) {
        return skip;
    }
    let fields = match image_fields(spec) {
        Ok(fields) => fields,
        Err(invalid) => return invalid,
    };
    let [publisher, offer, sku, version, resource_id, kind] = fields.each_ref().map(|f| f.as_ref());
    let legacy = (!resource_id.is_empty()).then_some(resource_id);
    let current = match legacy {
        Some(resource) => resource.to_owned(),
        None => format!("{publisher}:{offer}:{sku}:{version}"),
    };
    let Some(variant) = variant(publisher, offer, legacy.is_some()) else {
        return Outcome::Skip {
            reason: Reason::CustomImage,
            message: format!(
                "image {current} is not an RHCOS marketplace image this project knows (publisher {publisher:?}, offer {offer:?}): leaving the MachineSet alone"
            ),
            current: Some(current),
            target: None,
        };
    };
    let second = gen2(ctx.arch, legacy, kind, sku);
    let generation = if second {
        "Hyper-V Gen2"
    } else {
        "Hyper-V Gen1"
    };
    let chosen = variants.get(variant).and_then(|g| {
        if second {
            g.hyper_v_gen2.as_ref()
        } else {
            g.hyper_v_gen1.as_ref()
        }
    });
    let Some(chosen) = chosen else {
        return Outcome::skip(
            Reason::NoImageInStream,
            format!(
                "the stream has no Azure {variant} {generation} image for {}",
                ctx.arch
            ),
        );
    };
    let plan = plan_of(variant);
    let target = chosen.urn.clone();
    let unchanged = [publisher, offer, sku, version, resource_id, kind]
        == [
            chosen.publisher.as_str(),
            &chosen.offer,
            &chosen.sku,
            &chosen.version,
            "",
            plan,
        ];
    if unchanged {
        return Outcome::UpToDate { current, target };
    }
    Outcome::Changes {
        edits: vec![Edit {
            pointer: "/image".into(),
            exists: spec.raw("image").is_some(),
            value: chosen.patch.clone(),
        }],
        current,
        target,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variants_as_the_mco_names_them() {
        assert_eq!(variant("azureopenshift", "aro4", false), Some(UNPAID));
        assert_eq!(variant("", "", true), Some(UNPAID));
        assert_eq!(variant("redhat", "rh-opp-worker", false), Some("opp"));
        assert_eq!(
            variant("redhat-limited", "rh-oke-worker", false),
            Some("oke-emea")
        );
        assert_eq!(variant("redhat", "rh-rhel-worker", false), None);
        assert_eq!(variant("someone", "rh-ocp-worker", false), None);
    }

    #[test]
    fn hyper_v_generation() {
        assert!(gen2(Arch::Amd64, Some("x-gen2-y"), "", ""));
        assert!(!gen2(Arch::Amd64, Some("x-gen1"), "", "v2"));
        assert!(gen2(Arch::Amd64, None, NO_PLAN, "419-v2"));
        assert!(gen2(Arch::Arm64, None, NO_PLAN, "aro_418"));
        assert!(!gen2(Arch::Amd64, None, NO_PLAN, "aro_418"));
        assert!(gen2(Arch::Amd64, None, WITH_PLAN, "rh-ocp-worker"));
        assert!(!gen2(Arch::Amd64, None, WITH_PLAN, "rh-ocp-worker-gen1"));
    }

    #[test]
    fn five_oh_skus_end_with_their_generation() {
        // The 5.0 SKUs the installer publishes in the RHEL 10 marketplace stream.
        assert!(gen2(Arch::Amd64, None, NO_PLAN, "aro_5-0_x64_gen2"));
        assert!(gen2(Arch::Arm64, None, NO_PLAN, "aro_5-0_arm_gen2"));
        assert!(!gen2(Arch::Amd64, None, NO_PLAN, "aro_5-0_x64_gen1"));
        assert!(gen2(Arch::Amd64, None, "", "aro_5-0_x64_gen2"));
        assert!(!gen2(Arch::Amd64, None, "", "aro_5-0_x64_gen1"));
        // Older forms read as before.
        assert!(gen2(Arch::Amd64, None, NO_PLAN, "aro_422-v2"));
        assert!(!gen2(Arch::Amd64, None, NO_PLAN, "aro_422"));
        assert!(gen2(Arch::Arm64, None, NO_PLAN, "aro_422-arm"));
        assert_eq!(sku_generation("aro_5-0_x64_gen2"), Some(2));
        assert_eq!(sku_generation("rh-ocp-worker-gen1"), Some(1));
        assert_eq!(sku_generation("419-v2"), None);
        assert_eq!(sku_generation("gen2"), None);
    }

    #[test]
    fn rhel_of_marketplace_versions() {
        assert_eq!(rhel_major_of_version("10.2.20260423"), Some(10));
        assert_eq!(rhel_major_of_version("9.6.2026030314"), Some(9));
        assert_eq!(rhel_major_of_version("4.18.2026012111"), Some(9));
        assert_eq!(rhel_major_of_version("418.94.20250122"), Some(9));
        assert_eq!(rhel_major_of_version("410.84.20220608"), Some(8));
        assert_eq!(rhel_major_of_version("latest"), None);
    }
}
