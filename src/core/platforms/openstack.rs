//! OpenStack: the image a MachineSet boots from becomes the stream's qcow2 imported into
//! Glance as `<infra-id>-rhcos-<release>` (behaviour §4, rule 9; docs/openstack.md).
//!
//! OpenShift has no boot image management here: Red Hat's procedure is to upload the qcow2
//! by hand and edit every MachineSet. The machine API resolves the image by name, and a
//! name that lists no image or several breaks every new Machine, so a MachineSet moves only
//! once the background importer (`cluster::openstack`) reports the image `active` and alone
//! under its name ([`OpenStackLearned`]); until then it is `ImageNotImported`.
//!
//! The field the machine API boots from is `rootVolume.sourceUUID` when `rootVolume` is
//! set (a server booted from a Cinder volume; `image` is then ignored), else `image`; both
//! hold an image name. ControlPlaneMachineSets are left alone: their operator compares an
//! OpenStack providerSpec whole, so a new image would replace every control-plane machine.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::artifact::{self, Artifact, Imported, move_to};
pub use super::artifact::{image_name, image_name_for};
use super::rules::{Context, Edit, EntryError, Outcome, Reading, Rules, per_arch};
use crate::core::arch::Arch;
use crate::core::lenient::{Field, Object};
use crate::core::reason::Reason;
use crate::core::skew::version::Version;
use crate::core::view::SpecFields;

/// OpenStack's [`Rules`].
pub struct OpenStack;

impl Rules for OpenStack {
    const NAME: &'static str = "OpenStack";
    const KIND: &'static str = "OpenstackProviderSpec";
    const BOOT_FIELDS: &'static [&'static str] = &["image", "rootVolume"];
    type Target = OpenStackTarget;

    fn targets(
        architectures: &BTreeMap<Arch, &Value>,
    ) -> BTreeMap<Arch, Result<OpenStackTarget, EntryError>> {
        per_arch(architectures, |_, entry| {
            let artifact = Artifact::read(entry, "openstack", "qcow2.gz")?;
            match artifact {
                Some(a) if a.uncompressed_sha256.is_none() => Err(EntryError::Missing(
                    "artifacts.openstack.formats.qcow2.gz.disk.uncompressed-sha256".into(),
                )),
                a => Ok(a),
            }
        })
    }

    /// `rootVolume.sourceUUID` when `rootVolume` is set, else `image`.
    fn current_image(spec: &SpecFields<'_>) -> Option<String> {
        let boot = BootField::of(spec).ok()?;
        boot.current(spec).ok().map(Cow::into_owned)
    }

    fn reconcile(spec: &SpecFields<'_>, target: &OpenStackTarget, ctx: &Context<'_>) -> Outcome {
        reconcile(spec, target, ctx)
    }

    fn referenced_image(spec: &Value) -> Reading<String> {
        if spec.get("kind").and_then(Value::as_str) != Some(Self::KIND) {
            return Reading::Other;
        }
        let image = match spec.get("rootVolume") {
            Some(v) if v.is_object() => v.get("sourceUUID"),
            _ => spec.get("image"),
        };
        Reading::Ours(image.and_then(Value::as_str).map(str::to_owned))
    }

    /// The release in a name of ours, `<infra-id>-rhcos-<release>`.
    fn version_in_name(image: &str) -> Reading<Version> {
        artifact::version_in_name(image)
    }
}

/// The stream's qcow2.gz for one architecture (`artifacts.openstack`, format `qcow2.gz`,
/// with both checksums): its release is part of the image's name.
pub(crate) type OpenStackTarget = Artifact;

/// What the importer found in Glance: the names of images of ours that are `active` and
/// alone under their name, which a MachineSet may be given. A customer's own image
/// (`clusterOSImage` naming an image of theirs) is never moved away from.
pub type OpenStackLearned = Imported;

/// The field that boots the machine, as the machine API reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BootField {
    Image,
    RootVolume,
}

/// `providerSpec.value.rootVolume`, as far as the rule reads it.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct RootVolume<'a> {
    #[serde(borrow, rename = "sourceUUID")]
    source_uuid: Field<Cow<'a, str>>,
}

impl BootField {
    /// `rootVolume` set (an object): the volume's source; absent or null: `image`.
    fn of(spec: &SpecFields<'_>) -> Result<BootField, Outcome> {
        match spec.read::<Object<RootVolume<'_>>>("rootVolume") {
            Field::Is(_) => Ok(BootField::RootVolume),
            Field::Absent | Field::Null => Ok(BootField::Image),
            Field::Wrong(_) => Err(Outcome::skip(
                Reason::InvalidProviderSpec,
                "providerSpec.value.rootVolume is not an object",
            )),
        }
    }

    fn pointer(self) -> &'static str {
        match self {
            BootField::Image => "/image",
            BootField::RootVolume => "/rootVolume/sourceUUID",
        }
    }

    fn path(self) -> &'static str {
        match self {
            BootField::Image => "image",
            BootField::RootVolume => "rootVolume.sourceUUID",
        }
    }

    /// The image name the field holds (absent or null: empty), and whether it exists.
    fn read<'s>(self, spec: &'s SpecFields<'_>) -> Result<(Cow<'s, str>, bool), Outcome> {
        let field = match self {
            BootField::Image => spec.read::<Cow<'_, str>>("image"),
            BootField::RootVolume => match spec.read::<Object<RootVolume<'_>>>("rootVolume") {
                Field::Is(Object(v)) => v.source_uuid,
                _ => Field::Absent,
            },
        };
        match field {
            Field::Is(name) => Ok((name, true)),
            Field::Absent => Ok((Cow::Borrowed(""), false)),
            Field::Null => Ok((Cow::Borrowed(""), true)),
            Field::Wrong(_) => Err(Outcome::skip(
                Reason::InvalidProviderSpec,
                format!("providerSpec.value.{} is not a string", self.path()),
            )),
        }
    }

    fn current<'s>(self, spec: &'s SpecFields<'_>) -> Result<Cow<'s, str>, Outcome> {
        self.read(spec).map(|(name, _)| name)
    }
}

/// The MachineSet's boot image moves to the stream's image in Glance once the importer
/// reports it usable.
fn reconcile(spec: &SpecFields<'_>, target: &OpenStackTarget, ctx: &Context<'_>) -> Outcome {
    if ctx.control_plane {
        return Outcome::skip(
            Reason::ControlPlaneNotManaged,
            "an OpenStack ControlPlaneMachineSet is left alone: its operator compares the providerSpec whole, so a new image would replace every control-plane machine (Red Hat's procedure does not update it either)",
        );
    }
    let boot = match BootField::of(spec) {
        Ok(b) => b,
        Err(skip) => return skip,
    };
    let (current, exists) = match boot.read(spec) {
        Ok(c) => c,
        Err(skip) => return skip,
    };
    let infra_id = ctx.infrastructure_name;
    // On a multi-architecture cluster each architecture's qcow2 is an image of its own.
    let tag = match ctx.multi_arch {
        true => format!("{}-{}", target.release, ctx.arch.k8s()),
        false => target.release.clone(),
    };
    let wanted = match move_to(&current, boot.path(), &tag, infra_id) {
        Ok(wanted) => wanted,
        Err(stop) => return stop,
    };
    if let Some(skip) = not_imported(&wanted, target, ctx) {
        return skip.with_current(&current);
    }
    let mut edits = vec![Edit {
        pointer: boot.pointer().into(),
        exists,
        value: Value::String(wanted.clone()),
    }];
    edits.extend(image_beside_root_volume(spec, boot, &current, &wanted));
    Outcome::Changes {
        edits,
        current: current.into_owned(),
        target: wanted,
    }
}

/// `ImageNotImported` until the importer reports the image usable.
fn not_imported(wanted: &str, target: &OpenStackTarget, ctx: &Context<'_>) -> Option<Outcome> {
    let learned = ctx.learned.openstack.as_deref();
    let not_yet = "not active in Glance yet";
    Imported::waiting(
        learned,
        Reason::ImageNotImported,
        wanted,
        &target.release,
        not_yet,
    )
}

/// A root-volume MachineSet whose `image` names the same image as its volume keeps the
/// two the same, and one whose `image` is empty or absent gets it too: the machine API
/// does not read it there, but cluster-capi-operator drops `sourceUUID` when it converts
/// the MachineSet to Cluster API and boots the volume from `image`. An `image` that says
/// something else is left as it is.
fn image_beside_root_volume(
    spec: &SpecFields<'_>,
    boot: BootField,
    current: &str,
    wanted: &str,
) -> Option<Edit> {
    if boot != BootField::RootVolume {
        return None;
    }
    let (image, exists) = BootField::Image.read(spec).ok()?;
    (image.is_empty() || (!current.is_empty() && image == current)).then(|| Edit {
        pointer: BootField::Image.pointer().into(),
        exists,
        value: Value::String(wanted.to_owned()),
    })
}
