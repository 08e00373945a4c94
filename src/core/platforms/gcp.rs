//! GCP: the boot disk's `image` becomes `projects/<project>/global/images/<name>`, exactly
//! the MCO's spelling (any other spelling makes the two controllers fight).

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::rules::{
    Context, Edit, EntryError, McoManages, Outcome, Reading, Rules, is_resource_name, per_arch,
};
use crate::core::arch::Arch;
use crate::core::lenient::{Field, Object};
use crate::core::reason::Reason;
use crate::core::skew::version::{self as skew, Source, Version};
use crate::core::view::SpecFields;

/// Images the MCO (and so we) may replace: stock RHCOS images. The prefix test has no
/// trailing slash, as upstream.
const RHCOS_PREFIX: &str = "projects/rhcos-cloud/global/images";

/// GCP's [`Rules`].
pub struct Gcp;

impl Rules for Gcp {
    const NAME: &'static str = "GCP";
    /// What the MCO manages on GCP: MachineSets from 4.17 (by default from 4.19), the
    /// ControlPlaneMachineSet from 4.22 (4.21 with TechPreviewNoUpgrade).
    const MCO_MANAGES: McoManages = McoManages::BOTH;
    const KIND: &'static str = "GCPMachineProviderSpec";
    const BOOT_FIELDS: &'static [&'static str] = &["disks"];
    type Target = GcpTarget;

    fn targets(
        architectures: &BTreeMap<Arch, &Value>,
    ) -> BTreeMap<Arch, Result<GcpTarget, EntryError>> {
        per_arch(architectures, |_, entry| target(entry))
    }

    fn current_image(spec: &SpecFields<'_>) -> Option<String> {
        current_image(spec)
    }

    fn reconcile(spec: &SpecFields<'_>, target: &GcpTarget, _: &Context<'_>) -> Outcome {
        reconcile(spec, target)
    }

    /// The `image` of the first boot disk.
    fn referenced_image(spec: &Value) -> Reading<String> {
        let Some(disks) = spec.get("disks").and_then(Value::as_array) else {
            return Reading::Other;
        };
        let image = disks
            .iter()
            .find(|d| d["boot"] == true)
            .and_then(|d| d["image"].as_str())
            .map(str::to_owned);
        Reading::Ours(image)
    }

    /// The stream's image, by name and as `projects/<project>/global/images/<name>`.
    fn stream_releases(entry: &Value, out: &mut BTreeMap<String, String>) {
        let gcp = entry.pointer("/images/gcp");
        if let Some(gcp) = gcp
            && let (Some(name), Some(release)) = (gcp["name"].as_str(), gcp["release"].as_str())
        {
            out.insert(name.to_owned(), release.to_owned());
            if let Some(project) = gcp["project"].as_str() {
                out.insert(
                    format!("projects/{project}/global/images/{name}"),
                    release.to_owned(),
                );
            }
        }
    }

    /// RHCOS writes its release into GCP image names: `rhcos-9-8-20260428-0-gcp-x86-64`
    /// (`rhcos-418-94-202410090804-0-…` before RHEL-aligned versions).
    fn version_in_name(image: &str) -> Reading<Version> {
        let last = image.rsplit('/').next().unwrap_or(image);
        let Some(rest) = last.strip_prefix("rhcos-") else {
            return Reading::Other;
        };
        let parts: Vec<&str> = rest.splitn(5, '-').collect();
        match parts.as_slice() {
            [a, b, stamp, n, ..] => {
                match skew::from_release(&format!("{a}.{b}.{stamp}-{n}"), Source::Name) {
                    Some(v) => Reading::Ours(Some(v)),
                    None => Reading::Other,
                }
            }
            _ => Reading::Other,
        }
    }
}

/// `projects/<project>/global/images/<name>`.
#[derive(Debug, Clone)]
pub struct GcpTarget(String);

#[derive(Default, Deserialize)]
#[serde(default)]
struct Disk<'a> {
    boot: Field<bool>,
    #[serde(borrow)]
    image: Field<Cow<'a, str>>,
}

type Disks<'a> = Vec<Field<Object<Disk<'a>>>>;

fn target(arch_entry: &Value) -> Result<Option<GcpTarget>, EntryError> {
    let Some(gcp) = arch_entry.pointer("/images/gcp") else {
        return Ok(None);
    };
    let field = |k: &str| {
        let v = gcp
            .get(k)
            .and_then(Value::as_str)
            .ok_or_else(|| EntryError::Missing(format!("images.gcp.{k}")))?;
        if is_resource_name(v) {
            Ok(v)
        } else {
            Err(EntryError::Invalid {
                field: format!("images.gcp.{k}"),
                value: v.to_owned(),
                what: "GCP resource name",
            })
        }
    };
    let (project, name) = (field("project")?, field("name")?);
    Ok(Some(GcpTarget(format!(
        "projects/{project}/global/images/{name}"
    ))))
}

/// A boot disk's image, and whether the key is there (`None`: not a boot disk; a missing
/// `boot` is false, as in the Go type); `Err`: the disk cannot be read.
fn boot_image<'d>(
    i: usize,
    disk: &'d Field<Object<Disk<'_>>>,
) -> Result<Option<(&'d str, bool)>, Outcome> {
    let invalid = |what: &str| {
        Err(Outcome::skip(
            Reason::InvalidProviderSpec,
            format!("providerSpec.value.disks[{i}]{what}"),
        ))
    };
    let Field::Is(Object(disk)) = disk else {
        return invalid(" is not an object");
    };
    match disk.boot {
        Field::Is(true) => {}
        Field::Absent | Field::Is(false) | Field::Null => return Ok(None),
        Field::Wrong(_) => return invalid(".boot is not a boolean"),
    }
    match &disk.image {
        Field::Absent => Ok(Some(("", false))),
        Field::Null => Ok(Some(("", true))),
        Field::Is(s) => Ok(Some((s.as_ref(), true))),
        Field::Wrong(_) => invalid(".image is not a string"),
    }
}

/// The image of the first boot disk that names one.
fn current_image(spec: &SpecFields<'_>) -> Option<String> {
    let Field::Is(disks) = spec.read::<Disks<'_>>("disks") else {
        return None;
    };
    disks
        .iter()
        .enumerate()
        .find_map(|(i, d)| match boot_image(i, d) {
            Ok(Some((image, _))) if !image.is_empty() => Some(image.to_owned()),
            _ => None,
        })
}

/// The boot disks' images move to `target`; a custom image anywhere leaves the whole
/// MachineSet alone (behaviour §4.9).
fn reconcile(spec: &SpecFields<'_>, GcpTarget(target): &GcpTarget) -> Outcome {
    let disks = match spec.read::<Disks<'_>>("disks") {
        Field::Absent | Field::Null => Vec::new(),
        Field::Is(d) => d,
        Field::Wrong(_) => {
            return Outcome::skip(
                Reason::InvalidProviderSpec,
                "providerSpec.value.disks is not an array",
            );
        }
    };
    let mut edits = Vec::new();
    let mut current = None;
    let mut boot_disks = 0;
    for (i, disk) in disks.iter().enumerate() {
        let (image, exists) = match boot_image(i, disk) {
            Ok(Some(found)) => found,
            Ok(None) => continue,
            Err(invalid) => return invalid,
        };
        boot_disks += 1;
        current.get_or_insert(image);
        if image == target {
            continue;
        }
        // An empty image would be defaulted to a stale one by machine-api: give it ours.
        if !image.is_empty() && !image.starts_with(RHCOS_PREFIX) {
            return Outcome::Skip {
                reason: Reason::CustomImage,
                message: format!(
                    "boot disk {i} uses {image}, not a stock RHCOS image ({RHCOS_PREFIX}/...): leaving the MachineSet alone"
                ),
                current: Some(image.to_owned()),
                target: Some(target.clone()),
            };
        }
        edits.push(Edit {
            pointer: format!("/disks/{i}/image"),
            exists,
            value: Value::String(target.clone()),
        });
    }
    if boot_disks == 0 {
        return Outcome::Skip {
            reason: Reason::NoBootDisk,
            message: "no disk in providerSpec.value.disks has boot: true: no boot image to set"
                .into(),
            current: None,
            target: Some(target.clone()),
        };
    }
    let current = current.unwrap_or_default().to_owned();
    let target = target.clone();
    if edits.is_empty() {
        Outcome::UpToDate { current, target }
    } else {
        Outcome::Changes {
            edits,
            current,
            target,
        }
    }
}
