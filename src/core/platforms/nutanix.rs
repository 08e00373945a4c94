//! Nutanix: the image a MachineSet boots from becomes the stream's qcow2 imported into
//! Prism Central as `<infra-id>-rhcos-<release>` (behaviour §4, rule 9; docs/nutanix.md).
//!
//! OpenShift has no boot image management here: Red Hat's procedure is to create the image in
//! Prism Central from the stream's URL by hand and edit every MachineSet. The machine API's
//! Nutanix provider resolves `image` by name (`type: name`) and refuses a name that lists no
//! image or several, so a MachineSet moves only once the background importer
//! (`cluster::nutanix`) reports the image complete and alone under its name
//! ([`NutanixLearned`]); until then it is `ImageNotImported`.
//!
//! `image` is `{type: name|uuid, name, uuid}`. The move writes the whole object as
//! `{type: name, name: <ours>}`: a `uuid` left beside it would win in older providers. An
//! image chosen by uuid is the customer's. ControlPlaneMachineSets are left alone: their
//! operator compares a Nutanix providerSpec whole, so a new image would replace every
//! control-plane machine.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Value, json};

use super::artifact::{self, Artifact, Imported, move_to};
use super::rules::{Context, Edit, EntryError, Outcome, Reading, Rules, per_arch};
use crate::core::arch::Arch;
use crate::core::lenient::{Field, Object};
use crate::core::reason::Reason;
use crate::core::skew::version::Version;
use crate::core::view::SpecFields;

/// Nutanix's [`Rules`].
pub struct Nutanix;

impl Rules for Nutanix {
    const NAME: &'static str = "Nutanix";
    const KIND: &'static str = "NutanixMachineProviderConfig";
    const BOOT_FIELDS: &'static [&'static str] = &["image"];
    type Target = NutanixTarget;

    fn targets(
        architectures: &BTreeMap<Arch, &Value>,
    ) -> BTreeMap<Arch, Result<NutanixTarget, EntryError>> {
        per_arch(architectures, |_, entry| {
            Artifact::read(entry, "nutanix", "qcow2")
        })
    }

    /// `image.name` of an image chosen by name.
    fn current_image(spec: &SpecFields<'_>) -> Option<String> {
        match Current::read(spec).ok()? {
            Current::Name(name, _) => Some(name.into_owned()),
            Current::Uuid(_) => None,
        }
    }

    fn reconcile(spec: &SpecFields<'_>, target: &NutanixTarget, ctx: &Context<'_>) -> Outcome {
        reconcile(spec, target, ctx)
    }

    fn referenced_image(spec: &Value) -> Reading<String> {
        if spec.get("kind").and_then(Value::as_str) != Some(Self::KIND) {
            return Reading::Other;
        }
        let image = spec.get("image");
        let by = match image.and_then(|i| i.get("type")).and_then(Value::as_str) {
            Some("uuid") => "uuid",
            _ => "name",
        };
        let value = image.and_then(|i| i.get(by)).and_then(Value::as_str);
        Reading::Ours(value.map(str::to_owned))
    }

    /// The release in a name of ours, `<infra-id>-rhcos-<release>`.
    fn version_in_name(image: &str) -> Reading<Version> {
        artifact::version_in_name(image)
    }
}

/// The stream's qcow2 for one architecture (`artifacts.nutanix`, format `qcow2`): its
/// release is part of the image's name, its SHA-256 what Prism Central must report.
pub(crate) type NutanixTarget = Artifact;

/// What the importer found in Prism Central: the names of images of ours that are
/// complete and alone under their name, which a MachineSet may be given. A preloaded image
/// (`preloadedOSImageName`) or one made by Red Hat's manual procedure is never moved away
/// from.
pub type NutanixLearned = Imported;

/// `providerSpec.value.image`, as far as the rule reads it.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ImageId<'a> {
    #[serde(borrow, rename = "type")]
    kind: Field<Cow<'a, str>>,
    #[serde(borrow)]
    name: Field<Cow<'a, str>>,
    #[serde(borrow)]
    uuid: Field<Cow<'a, str>>,
}

/// The image a MachineSet names now.
enum Current<'s> {
    /// By name (empty when absent), and whether `image` exists at all.
    Name(Cow<'s, str>, bool),
    Uuid(Cow<'s, str>),
}

impl<'s> Current<'s> {
    fn read(spec: &'s SpecFields<'_>) -> Result<Current<'s>, Outcome> {
        let invalid = |what: &str| {
            Outcome::skip(
                Reason::InvalidProviderSpec,
                format!("providerSpec.value.image{what}"),
            )
        };
        let id = match spec.read::<Object<ImageId<'s>>>("image") {
            Field::Is(Object(id)) => id,
            Field::Absent => return Ok(Current::Name(Cow::Borrowed(""), false)),
            Field::Null => return Ok(Current::Name(Cow::Borrowed(""), true)),
            Field::Wrong(_) => return Err(invalid(" is not an object")),
        };
        let text = |field: Field<Cow<'s, str>>, path: &str| match field {
            Field::Is(v) => Ok(v),
            Field::Absent | Field::Null => Ok(Cow::Borrowed("")),
            Field::Wrong(_) => Err(invalid(&format!(".{path} is not a string"))),
        };
        match id.kind.as_str() {
            Some("name") => Ok(Current::Name(text(id.name, "name")?, true)),
            Some("uuid") => Ok(Current::Uuid(text(id.uuid, "uuid")?)),
            _ => Err(invalid(".type is neither name nor uuid")),
        }
    }
}

/// The MachineSet's boot image moves to the stream's image in Prism Central once the
/// importer reports it usable.
fn reconcile(spec: &SpecFields<'_>, target: &NutanixTarget, ctx: &Context<'_>) -> Outcome {
    if ctx.control_plane {
        return Outcome::skip(
            Reason::ControlPlaneNotManaged,
            "a Nutanix ControlPlaneMachineSet is left alone: its operator compares the providerSpec whole, so a new image would replace every control-plane machine (Red Hat's procedure does not update it either)",
        );
    }
    let (current, exists) = match Current::read(spec) {
        Ok(Current::Name(name, exists)) => (name, exists),
        Ok(Current::Uuid(uuid)) => {
            return Outcome::Skip {
                reason: Reason::CustomImage,
                message: format!(
                    "image is chosen by uuid {uuid:?}: the customer's choice, leaving the MachineSet alone"
                ),
                current: Some(uuid.into_owned()),
                target: None,
            };
        }
        Err(skip) => return skip,
    };
    let infra_id = ctx.infrastructure_name;
    let wanted = match move_to(&current, "image.name", &target.release, infra_id) {
        Ok(wanted) => wanted,
        Err(stop) => return stop,
    };
    if let Some(skip) = not_imported(&wanted, target, ctx) {
        return skip.with_current(&current);
    }
    Outcome::Changes {
        edits: vec![Edit {
            pointer: "/image".into(),
            exists,
            value: json!({"type": "name", "name": wanted}),
        }],
        current: current.into_owned(),
        target: wanted,
    }
}

/// `ImageNotImported` until the importer reports the image usable.
fn not_imported(wanted: &str, target: &NutanixTarget, ctx: &Context<'_>) -> Option<Outcome> {
    let learned = ctx.learned.nutanix.as_deref();
    let not_yet = "not complete in Prism Central yet";
    Imported::waiting(
        learned,
        Reason::ImageNotImported,
        wanted,
        &target.release,
        not_yet,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_image_is_read_by_name_or_uuid() {
        let spec = |image: Value| json!({"kind": Nutanix::KIND, "image": image});
        assert_eq!(
            Nutanix::referenced_image(&spec(json!({"type": "name", "name": "a-rhcos"}))),
            Reading::Ours(Some("a-rhcos".into()))
        );
        assert_eq!(
            Nutanix::referenced_image(&spec(json!({"type": "uuid", "uuid": "1b0d"}))),
            Reading::Ours(Some("1b0d".into()))
        );
        assert_eq!(
            Nutanix::referenced_image(&json!({"kind": "OpenstackProviderSpec"})),
            Reading::Other
        );
    }
}
