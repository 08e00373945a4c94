//! GCP: the boot disk's `image` becomes `projects/<project>/global/images/<name>`, exactly
//! the MCO's spelling (any other spelling makes the two controllers fight).

use serde_json::Value;

use super::{Edit, Outcome, Platform, is_resource_name};
use crate::core::arch::Arch;
use crate::core::reason::Reason;

/// Images the MCO (and so we) may replace: stock RHCOS images. The prefix test has no
/// trailing slash, as upstream.
const RHCOS_PREFIX: &str = "projects/rhcos-cloud/global/images";

pub struct Gcp;

fn stream_image(arch_entry: &Value) -> Result<Option<(&str, &str)>, String> {
    let Some(gcp) = arch_entry.pointer("/images/gcp") else {
        return Ok(None);
    };
    let field = |k: &str| {
        gcp.get(k)
            .and_then(Value::as_str)
            .ok_or_else(|| format!("images.gcp.{k} is missing or not a string"))
    };
    let (project, name) = (field("project")?, field("name")?);
    for (k, v) in [("project", project), ("name", name)] {
        if !is_resource_name(v) {
            return Err(format!(
                "images.gcp.{k} {v:?} is not a valid GCP resource name"
            ));
        }
    }
    Ok(Some((project, name)))
}

impl Platform for Gcp {
    fn name(&self) -> &'static str {
        "GCP"
    }

    fn provider_spec_kind(&self) -> &'static str {
        "GCPMachineProviderSpec"
    }

    fn validate_stream(&self, arch_entry: &Value) -> Result<(), String> {
        stream_image(arch_entry).map(|_| ())
    }

    fn reconcile(&self, spec: &Value, arch: Arch, arch_entry: &Value) -> Outcome {
        let skip = |reason, message: String| Outcome::Skip {
            reason,
            message,
            current: None,
            target: None,
        };
        let target = match stream_image(arch_entry) {
            Ok(Some((project, name))) => format!("projects/{project}/global/images/{name}"),
            Ok(None) => {
                return skip(
                    Reason::NoImageInStream,
                    format!("the stream has no GCP image for {arch}"),
                );
            }
            Err(e) => return skip(Reason::NoImageInStream, format!("stream for {arch}: {e}")),
        };
        let disks = match spec.get("disks") {
            None | Some(Value::Null) => &[][..],
            Some(Value::Array(d)) => d.as_slice(),
            Some(_) => {
                return skip(
                    Reason::InvalidProviderSpec,
                    "providerSpec.value.disks is not an array".into(),
                );
            }
        };
        let mut edits = Vec::new();
        let mut current = None;
        let mut boot_disks = 0;
        for (i, disk) in disks.iter().enumerate() {
            let Some(disk) = disk.as_object() else {
                return skip(
                    Reason::InvalidProviderSpec,
                    format!("providerSpec.value.disks[{i}] is not an object"),
                );
            };
            // Only disks marked boot: a missing `boot` is false, as in the Go type.
            match disk.get("boot") {
                Some(Value::Bool(true)) => {}
                None | Some(Value::Bool(false)) | Some(Value::Null) => continue,
                Some(_) => {
                    return skip(
                        Reason::InvalidProviderSpec,
                        format!("providerSpec.value.disks[{i}].boot is not a boolean"),
                    );
                }
            }
            boot_disks += 1;
            let (image, exists) = match disk.get("image") {
                None => ("", false),
                Some(Value::Null) => ("", true),
                Some(Value::String(s)) => (s.as_str(), true),
                Some(_) => {
                    return skip(
                        Reason::InvalidProviderSpec,
                        format!("providerSpec.value.disks[{i}].image is not a string"),
                    );
                }
            };
            current.get_or_insert_with(|| image.to_owned());
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
                    target: Some(target),
                };
            }
            edits.push(Edit {
                path: vec!["disks".into(), i.to_string(), "image".into()],
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
                target: Some(target),
            };
        }
        let current = current.unwrap_or_default();
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
}
