//! A MachineSet as the rules read it: exactly the fields they look at, borrowed from the
//! bytes, everything else skipped without being built. The webhook reads it straight from
//! the AdmissionReview; the toucher, `preview` and `status` from their objects' JSON. A
//! platform reads its own fields of `providerSpec.value` through [`MachineSetView::provider_spec`]
//! and [`SpecFields`].

use std::borrow::Cow;

use serde::Deserialize;

use super::json::{self, Reader};
use super::lenient::{Field, Kind, Object, StrMap};

type Str<'a> = Field<Cow<'a, str>>;

#[derive(Debug, Default)]
pub struct MachineSetView<'a> {
    api_version: Str<'a>,
    kind: Str<'a>,
    metadata: Field<Metadata<'a>>,
    spec: Field<Spec<'a>>,
    status: Field<Status<'a>>,
}

#[derive(Debug, Default)]
struct Status<'a> {
    /// MAPI -> CAPI migration: `MachineAPI`, `ClusterAPI` or `Migrating`.
    authoritative_api: Str<'a>,
}

#[derive(Debug, Default)]
struct Metadata<'a> {
    name: Str<'a>,
    generate_name: Str<'a>,
    uid: Str<'a>,
    labels: Field<StrMap<'a>>,
    annotations: Field<StrMap<'a>>,
    owner_references: Field<Vec<Field<Owner<'a>>>>,
}

#[derive(Debug, Default)]
struct Owner<'a> {
    kind: Str<'a>,
    name: Str<'a>,
}

#[derive(Debug, Default)]
struct Spec<'a> {
    template: Field<Template<'a>>,
}

#[derive(Debug, Default)]
struct Template<'a> {
    metadata: Field<TemplateMetadata<'a>>,
    spec: Field<TemplateSpec<'a>>,
    /// A ControlPlaneMachineSet's Machine template.
    machines_v1beta1_machine_openshift_io: Field<CpmsMachines<'a>>,
}

#[derive(Debug, Default)]
struct CpmsMachines<'a> {
    spec: Field<CpmsMachineSpec<'a>>,
}

/// A Machine's spec: the node's metadata and the providerSpec.
#[derive(Debug, Default)]
struct CpmsMachineSpec<'a> {
    metadata: Field<TemplateMetadata<'a>>,
    provider_spec: Field<ProviderSpec<'a>>,
}

/// Where a MachineSet's providerSpec value is, as a JSON pointer.
pub const MACHINESET_PROVIDER_SPEC: &str = "/spec/template/spec/providerSpec/value";
/// Where a ControlPlaneMachineSet's providerSpec value is, as a JSON pointer.
pub const CPMS_PROVIDER_SPEC: &str =
    "/spec/template/machines_v1beta1_machine_openshift_io/spec/providerSpec/value";
pub const CPMS_KIND: &str = "ControlPlaneMachineSet";

#[derive(Debug, Default)]
struct TemplateMetadata<'a> {
    labels: Field<StrMap<'a>>,
}

#[derive(Debug, Default)]
struct TemplateSpec<'a> {
    provider_spec: Field<ProviderSpec<'a>>,
}

#[derive(Debug, Default)]
struct ProviderSpec<'a> {
    value: Field<SpecFields<'a>>,
}

/// The readers of the structs above: each takes the keys the rules read and skips the
/// rest (a key read twice is an error, as serde's derive had it).
mod read {
    use super::*;

    type Result<T> = json::Result<T>;

    /// An object field read by `read`.
    fn object<'a, T>(
        r: &mut Reader<'a>,
        slot: &mut Field<T>,
        read: fn(&mut Reader<'a>) -> Result<T>,
    ) -> Result<()> {
        r.field_into(slot, Kind::Object, read)
    }

    fn skip(r: &mut Reader<'_>) -> Result<()> {
        r.skip().map(drop)
    }

    pub fn machine_set<'a>(r: &mut Reader<'a>) -> Result<MachineSetView<'a>> {
        let mut v = MachineSetView::default();
        r.object(|r, key| match key {
            "apiVersion" => r.string_into(&mut v.api_version),
            "kind" => r.string_into(&mut v.kind),
            "metadata" => object(r, &mut v.metadata, metadata),
            "spec" => object(r, &mut v.spec, spec),
            "status" => object(r, &mut v.status, status),
            _ => skip(r),
        })?;
        Ok(v)
    }

    fn status<'a>(r: &mut Reader<'a>) -> Result<Status<'a>> {
        let mut s = Status::default();
        r.object(|r, key| match key {
            "authoritativeAPI" => r.string_into(&mut s.authoritative_api),
            _ => skip(r),
        })?;
        Ok(s)
    }

    fn metadata<'a>(r: &mut Reader<'a>) -> Result<Metadata<'a>> {
        let mut m = Metadata::default();
        r.object(|r, key| match key {
            "name" => r.string_into(&mut m.name),
            "generateName" => r.string_into(&mut m.generate_name),
            "uid" => r.string_into(&mut m.uid),
            "labels" => object(r, &mut m.labels, str_map),
            "annotations" => object(r, &mut m.annotations, str_map),
            "ownerReferences" => r.field_into(&mut m.owner_references, Kind::Array, owners),
            _ => skip(r),
        })?;
        Ok(m)
    }

    /// Labels or annotations: every entry kept, in order, whatever its value.
    fn str_map<'a>(r: &mut Reader<'a>) -> Result<StrMap<'a>> {
        let mut entries = Vec::with_capacity(8);
        r.entries(|r, key| {
            entries.push((key, r.field(Kind::String, Reader::string)?));
            Ok(())
        })?;
        Ok(StrMap(entries))
    }

    fn owners<'a>(r: &mut Reader<'a>) -> Result<Vec<Field<Owner<'a>>>> {
        let mut owners = Vec::new();
        r.array(|r| {
            owners.push(r.field(Kind::Object, owner)?);
            Ok(())
        })?;
        Ok(owners)
    }

    fn owner<'a>(r: &mut Reader<'a>) -> Result<Owner<'a>> {
        let mut o = Owner::default();
        r.object(|r, key| match key {
            "kind" => r.string_into(&mut o.kind),
            "name" => r.string_into(&mut o.name),
            _ => skip(r),
        })?;
        Ok(o)
    }

    fn spec<'a>(r: &mut Reader<'a>) -> Result<Spec<'a>> {
        let mut s = Spec::default();
        r.object(|r, key| match key {
            "template" => object(r, &mut s.template, template),
            _ => skip(r),
        })?;
        Ok(s)
    }

    fn template<'a>(r: &mut Reader<'a>) -> Result<Template<'a>> {
        let mut t = Template::default();
        r.object(|r, key| match key {
            "metadata" => object(r, &mut t.metadata, template_metadata),
            "spec" => object(r, &mut t.spec, template_spec),
            "machines_v1beta1_machine_openshift_io" => object(
                r,
                &mut t.machines_v1beta1_machine_openshift_io,
                cpms_machines,
            ),
            _ => skip(r),
        })?;
        Ok(t)
    }

    fn template_metadata<'a>(r: &mut Reader<'a>) -> Result<TemplateMetadata<'a>> {
        let mut m = TemplateMetadata::default();
        r.object(|r, key| match key {
            "labels" => object(r, &mut m.labels, str_map),
            _ => skip(r),
        })?;
        Ok(m)
    }

    fn template_spec<'a>(r: &mut Reader<'a>) -> Result<TemplateSpec<'a>> {
        let mut s = TemplateSpec::default();
        r.object(|r, key| match key {
            "providerSpec" => object(r, &mut s.provider_spec, provider_spec),
            _ => skip(r),
        })?;
        Ok(s)
    }

    fn cpms_machines<'a>(r: &mut Reader<'a>) -> Result<CpmsMachines<'a>> {
        let mut m = CpmsMachines::default();
        r.object(|r, key| match key {
            "spec" => object(r, &mut m.spec, cpms_machine_spec),
            _ => skip(r),
        })?;
        Ok(m)
    }

    fn cpms_machine_spec<'a>(r: &mut Reader<'a>) -> Result<CpmsMachineSpec<'a>> {
        let mut s = CpmsMachineSpec::default();
        r.object(|r, key| match key {
            "metadata" => object(r, &mut s.metadata, template_metadata),
            "providerSpec" => object(r, &mut s.provider_spec, provider_spec),
            _ => skip(r),
        })?;
        Ok(s)
    }

    fn provider_spec<'a>(r: &mut Reader<'a>) -> Result<ProviderSpec<'a>> {
        let mut p = ProviderSpec::default();
        r.object(|r, key| match key {
            "value" => object(r, &mut p.value, spec_fields),
            _ => skip(r),
        })?;
        Ok(p)
    }

    fn spec_fields<'a>(r: &mut Reader<'a>) -> Result<SpecFields<'a>> {
        // A providerSpec has a dozen or two fields: one allocation, not five.
        let mut fields = Vec::with_capacity(24);
        r.entries(|r, key| {
            fields.push((key, r.skip()?));
            Ok(())
        })?;
        Ok(SpecFields(fields))
    }
}

/// `providerSpec.value`'s top-level fields, each kept as its JSON text: one pass finds
/// them, and a platform reads only the few it needs (`disks`, `ami`, `image`, ...) with a
/// reader of its own, so adding a platform touches nothing here.
#[derive(Debug, Default)]
pub struct SpecFields<'a>(Vec<(Cow<'a, str>, &'a str)>);

impl<'a> SpecFields<'a> {
    /// The JSON text of a top-level field (the last, if repeated).
    pub fn raw(&self, key: &str) -> Option<&'a str> {
        self.0.iter().rev().find(|(k, _)| k == key).map(|(_, v)| *v)
    }

    /// A field read as `T` (lenient types: see [`super::lenient`]); absent reads as
    /// `T::default()`.
    pub fn read<T: Deserialize<'a> + Default>(&self, key: &str) -> T {
        self.raw(key)
            .and_then(|raw| serde_json::from_str(raw).ok())
            .unwrap_or_default()
    }

    /// `kind`, e.g. `GCPMachineProviderSpec`.
    pub fn kind(&self) -> Field<Cow<'a, str>> {
        self.read("kind")
    }

    /// `userDataSecret.name`: the Secret holding the stub Ignition.
    pub fn user_data_secret(&self) -> Option<Cow<'a, str>> {
        #[derive(Default, Deserialize)]
        #[serde(default)]
        struct SecretRef<'a> {
            #[serde(borrow)]
            name: Field<Cow<'a, str>>,
        }
        match self.read::<Field<Object<SecretRef<'a>>>>("userDataSecret") {
            Field::Is(Object(r)) => match r.name {
                Field::Is(name) => Some(name),
                _ => None,
            },
            _ => None,
        }
    }
}

/// `spec.template.spec.providerSpec.value`, as the rules first see it.
#[derive(Debug, Clone, Copy)]
pub enum ProviderSpecValue<'v, 'a> {
    /// Absent or null, at any level on the way.
    None,
    /// Not an object: there is nothing a platform could read.
    NotObject(Kind),
    Object(&'v SpecFields<'a>),
}

/// Where the boot-image annotation goes, as the patch must address it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Annotations {
    /// A map; whether it has the key already.
    Map { has_key: bool },
    /// `annotations: null`: replaced by a map.
    Null,
    /// No `annotations` in an object `metadata`: added.
    Absent,
    /// No `metadata` object, or annotations that are not a map: the apiserver would have
    /// refused such an object; nothing is written.
    Unwritable,
}

static EMPTY: StrMap<'static> = StrMap(Vec::new());

/// Why bytes do not read as a MachineSet view.
#[derive(Debug, thiserror::Error)]
pub enum ViewError {
    #[error("not UTF-8: {0}")]
    NotUtf8(#[from] std::str::Utf8Error),
    #[error(transparent)]
    Json(#[from] json::Error),
}

impl<'a> MachineSetView<'a> {
    /// Read the fields the rules need from a MachineSet's JSON. Fails only on bytes that are
    /// not JSON, on JSON that is not an object, or on a key the rules read given twice.
    pub fn parse(json: &'a [u8]) -> Result<Self, ViewError> {
        // Checked once, so that the reader need not check each string it borrows.
        let text = std::str::from_utf8(json)?;
        Ok(Reader::document(text, Self::read)?)
    }

    /// Read from the object at the reader's position (the webhook's `request.object`).
    pub fn read(r: &mut Reader<'a>) -> json::Result<Self> {
        read::machine_set(r)
    }

    pub fn api_version(&self) -> &str {
        self.api_version.as_str().unwrap_or("")
    }

    pub fn kind(&self) -> &str {
        self.kind.as_str().unwrap_or("")
    }

    fn metadata(&self) -> Option<&Metadata<'a>> {
        self.metadata.get()
    }

    pub fn name(&self) -> Option<&str> {
        self.metadata().and_then(|m| m.name.as_str())
    }

    /// `metadata.name`, or `generateName` for a CREATE that has no name yet.
    pub fn name_or_generate_name(&self) -> Option<&str> {
        self.metadata()
            .and_then(|m| m.name.as_str().or(m.generate_name.as_str()))
    }

    pub fn uid(&self) -> Option<&str> {
        self.metadata().and_then(|m| m.uid.as_str())
    }

    /// `metadata.labels`; entries whose value is not a string read as absent.
    pub fn labels(&self) -> &StrMap<'a> {
        self.metadata()
            .and_then(|m| m.labels.get())
            .unwrap_or(&EMPTY)
    }

    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.metadata()
            .and_then(|m| m.annotations.get())
            .and_then(|a| a.get(key))
    }

    /// How a patch can set the annotation `key`.
    pub fn annotations_for(&self, key: &str) -> Annotations {
        match self.metadata().map(|m| &m.annotations) {
            Some(Field::Is(map)) => Annotations::Map {
                has_key: map.contains_key(key),
            },
            Some(Field::Null) => Annotations::Null,
            Some(Field::Absent) => Annotations::Absent,
            _ => Annotations::Unwritable,
        }
    }

    /// The first owner reference's kind and name (`?` where missing), if there is any.
    pub fn first_owner(&self) -> Option<(&str, &str)> {
        let owners = self.metadata()?.owner_references.get()?;
        let first = owners.first()?;
        Some(first.get().map_or(("?", "?"), |o| {
            (
                o.kind.as_str().unwrap_or("?"),
                o.name.as_str().unwrap_or("?"),
            )
        }))
    }

    /// `status.authoritativeAPI` (MAPI -> CAPI migration), when it is a string.
    pub fn authoritative_api(&self) -> Option<&str> {
        self.status.get().and_then(|s| s.authoritative_api.as_str())
    }

    fn template(&self) -> Option<&Template<'a>> {
        self.spec.get().and_then(|s| s.template.get())
    }

    /// A label of `spec.template.metadata` (the Machines' own labels).
    pub fn template_label(&self, key: &str) -> Option<&str> {
        self.template()
            .and_then(|t| t.metadata.get())
            .and_then(|m| m.labels.get())
            .and_then(|l| l.get(key))
    }

    /// A ControlPlaneMachineSet (`kind`), whose Machine template is elsewhere.
    pub fn is_control_plane_machine_set(&self) -> bool {
        self.kind() == CPMS_KIND
    }

    /// The JSON pointer of the providerSpec value (which depends on the kind).
    pub fn provider_spec_pointer(&self) -> &'static str {
        if self.is_control_plane_machine_set() {
            CPMS_PROVIDER_SPEC
        } else {
            MACHINESET_PROVIDER_SPEC
        }
    }

    fn cpms_machine_spec(&self) -> Option<&CpmsMachineSpec<'a>> {
        self.template()
            .and_then(|t| t.machines_v1beta1_machine_openshift_io.get())
            .and_then(|m| m.spec.get())
    }

    /// The `machine.openshift.io/os-id` label where the kind keeps it: a MachineSet's
    /// Machine template labels, a ControlPlaneMachineSet's node metadata (as the MCO reads
    /// them).
    pub fn os_id(&self, key: &str) -> Option<&str> {
        if self.is_control_plane_machine_set() {
            self.cpms_machine_spec()
                .and_then(|s| s.metadata.get())
                .and_then(|m| m.labels.get())
                .and_then(|l| l.get(key))
        } else {
            self.template_label(key)
        }
    }

    /// `userDataSecret.name` of the providerSpec value, wherever the kind keeps it.
    pub fn user_data_secret(&self) -> Option<Cow<'a, str>> {
        match self.provider_spec() {
            ProviderSpecValue::Object(spec) => spec.user_data_secret(),
            _ => None,
        }
    }

    pub fn provider_spec(&self) -> ProviderSpecValue<'_, 'a> {
        let value = if self.is_control_plane_machine_set() {
            self.cpms_machine_spec()
                .and_then(|s| s.provider_spec.get())
                .map(|p| &p.value)
        } else {
            self.template()
                .and_then(|t| t.spec.get())
                .and_then(|s| s.provider_spec.get())
                .map(|p| &p.value)
        };
        match value {
            None | Some(Field::Absent | Field::Null) => ProviderSpecValue::None,
            Some(Field::Wrong(kind)) => ProviderSpecValue::NotObject(*kind),
            Some(Field::Is(fields)) => ProviderSpecValue::Object(fields),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_borrowed_unless_escaped_and_keep_every_entry() {
        let text =
            br#"{"metadata": {"labels": {"a": "plain", "b": "tab\there", "c": 3, "a~/b": "x"}}}"#;
        let view = MachineSetView::parse(text).unwrap();
        let labels = view.labels();
        assert_eq!(labels.get("a"), Some("plain"));
        assert!(matches!(labels.0[0].1, Field::Is(Cow::Borrowed(_))));
        assert_eq!(labels.get("b"), Some("tab\there"));
        assert!(matches!(labels.0[1].1, Field::Is(Cow::Owned(_))));
        assert_eq!(labels.get("c"), None);
        assert!(labels.contains_key("c"));
        assert_eq!(labels.get("a~/b"), Some("x"));
        assert_eq!(labels.strings().count(), 3);
    }

    #[test]
    fn a_key_the_rules_read_given_twice_is_refused() {
        let err = MachineSetView::parse(br#"{"kind": "MachineSet", "kind": "X"}"#).unwrap_err();
        assert!(
            err.to_string().starts_with("duplicate field \"kind\""),
            "{err}"
        );
        // Keys no rule reads may repeat, as JSON allows.
        assert!(MachineSetView::parse(br#"{"zz": 1, "zz": 2}"#).is_ok());
    }
}
