//! A MachineSet as the rules read it: exactly the fields they look at, borrowed from the
//! bytes, everything else skipped without being built. The webhook reads it straight from
//! the AdmissionReview; the toucher, `preview` and `status` from their objects' JSON. A
//! platform reads its own fields of `providerSpec.value` through [`MachineSetView::provider_spec`]
//! and [`SpecFields`].

use std::borrow::Cow;

use serde::Deserialize;

use serde::de::MapAccess;
use serde_json::value::RawValue;

use super::lenient::{Field, Kind, Object, ObjectOnly, Shape, StrMap, Text};

type Str<'a> = Field<Cow<'a, str>>;

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct MachineSetView<'a> {
    #[serde(borrow)]
    api_version: Str<'a>,
    #[serde(borrow)]
    kind: Str<'a>,
    #[serde(borrow)]
    metadata: Field<Metadata<'a>>,
    #[serde(borrow)]
    spec: Field<Spec<'a>>,
    #[serde(borrow)]
    status: Field<Status<'a>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Status<'a> {
    /// MAPI -> CAPI migration: `MachineAPI`, `ClusterAPI` or `Migrating`.
    #[serde(borrow, rename = "authoritativeAPI")]
    authoritative_api: Str<'a>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct Metadata<'a> {
    #[serde(borrow)]
    name: Str<'a>,
    #[serde(borrow)]
    generate_name: Str<'a>,
    #[serde(borrow)]
    uid: Str<'a>,
    #[serde(borrow)]
    labels: Field<StrMap<'a>>,
    #[serde(borrow)]
    annotations: Field<StrMap<'a>>,
    #[serde(borrow)]
    owner_references: Field<Vec<Field<Owner<'a>>>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Owner<'a> {
    #[serde(borrow)]
    kind: Str<'a>,
    #[serde(borrow)]
    name: Str<'a>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Spec<'a> {
    #[serde(borrow)]
    template: Field<Template<'a>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Template<'a> {
    #[serde(borrow)]
    metadata: Field<TemplateMetadata<'a>>,
    #[serde(borrow)]
    spec: Field<TemplateSpec<'a>>,
    /// A ControlPlaneMachineSet's Machine template.
    #[serde(borrow)]
    machines_v1beta1_machine_openshift_io: Field<CpmsMachines<'a>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct CpmsMachines<'a> {
    #[serde(borrow)]
    spec: Field<CpmsMachineSpec<'a>>,
}

/// A Machine's spec: the node's metadata and the providerSpec.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct CpmsMachineSpec<'a> {
    #[serde(borrow)]
    metadata: Field<TemplateMetadata<'a>>,
    #[serde(borrow)]
    provider_spec: Field<ProviderSpec<'a>>,
}

/// Where a MachineSet's providerSpec value is, as a JSON pointer.
pub(crate) const MACHINESET_PROVIDER_SPEC: &str = "/spec/template/spec/providerSpec/value";
/// Where a ControlPlaneMachineSet's providerSpec value is, as a JSON pointer.
pub(crate) const CPMS_PROVIDER_SPEC: &str =
    "/spec/template/machines_v1beta1_machine_openshift_io/spec/providerSpec/value";
pub(crate) const CPMS_KIND: &str = "ControlPlaneMachineSet";

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct TemplateMetadata<'a> {
    #[serde(borrow)]
    labels: Field<StrMap<'a>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct TemplateSpec<'a> {
    #[serde(borrow)]
    provider_spec: Field<ProviderSpec<'a>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ProviderSpec<'a> {
    #[serde(borrow)]
    value: Field<SpecFields<'a>>,
}

crate::object_shape!(
    MachineSetView,
    Status,
    Metadata,
    Owner,
    Spec,
    Template,
    CpmsMachines,
    CpmsMachineSpec,
    TemplateMetadata,
    TemplateSpec,
    ProviderSpec,
);

/// `providerSpec.value`'s top-level fields, each kept as its JSON text: one pass finds
/// them, and a platform reads only the few it needs (`disks`, `ami`, `image`, ...) with a
/// reader of its own, so adding a platform touches nothing here.
#[derive(Debug, Default)]
pub struct SpecFields<'a>(Vec<(Cow<'a, str>, &'a RawValue)>);

impl<'de: 'a, 'a> Shape<'de> for SpecFields<'a> {
    const KIND: Kind = Kind::Object;

    fn from_map<A: MapAccess<'de>>(mut map: A) -> Result<Option<Self>, A::Error> {
        // A providerSpec has a dozen or two fields: one allocation, not five.
        let mut fields = Vec::with_capacity(24);
        while let Some((Text(key), value)) = map.next_entry()? {
            fields.push((key, value));
        }
        Ok(Some(SpecFields(fields)))
    }
}

impl<'a> SpecFields<'a> {
    /// The JSON text of a top-level field (the last, if repeated).
    pub fn raw(&self, key: &str) -> Option<&'a str> {
        self.0
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.get())
    }

    /// A field as a lenient [`Field`]: absent, null, of `T`'s shape, or another. A value
    /// `T` cannot read (a number beyond `f64`) is of another shape, never absent.
    pub fn read<T>(&self, key: &str) -> Field<T>
    where
        Field<T>: Deserialize<'a>,
    {
        match self.raw(key) {
            None => Field::Absent,
            Some(raw) => serde_json::from_str(raw).unwrap_or(Field::Wrong(Kind::of_json(raw))),
        }
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
        match self.read::<Object<SecretRef<'a>>>("userDataSecret") {
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
    Json(#[from] serde_json::Error),
}

impl<'a> MachineSetView<'a> {
    /// Read the fields the rules need from a MachineSet's JSON. Fails only on bytes that are
    /// not JSON, on JSON that is not an object, or on a key the rules read given twice.
    pub fn parse(json: &'a [u8]) -> Result<Self, ViewError> {
        // Checked once, as the review's body is: serde_json's slice reader would let
        // invalid UTF-8 through in the strings it skips.
        let text = std::str::from_utf8(json)?;
        let ObjectOnly(view) = serde_json::from_str(text)?;
        Ok(view)
    }

    pub(crate) fn api_version(&self) -> &str {
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
    pub(crate) fn name_or_generate_name(&self) -> Option<&str> {
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
    pub(crate) fn first_owner(&self) -> Option<(&str, &str)> {
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
    pub(crate) fn authoritative_api(&self) -> Option<&str> {
        self.status.get().and_then(|s| s.authoritative_api.as_str())
    }

    fn template(&self) -> Option<&Template<'a>> {
        self.spec.get().and_then(|s| s.template.get())
    }

    /// A label of `spec.template.metadata` (the Machines' own labels).
    pub(crate) fn template_label(&self, key: &str) -> Option<&str> {
        self.template()
            .and_then(|t| t.metadata.get())
            .and_then(|m| m.labels.get())
            .and_then(|l| l.get(key))
    }

    /// A ControlPlaneMachineSet (`kind`), whose Machine template is elsewhere.
    pub(crate) fn is_control_plane_machine_set(&self) -> bool {
        self.kind() == CPMS_KIND
    }

    /// The JSON pointer of the providerSpec value (which depends on the kind).
    pub(crate) fn provider_spec_pointer(&self) -> &'static str {
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
    pub(crate) fn os_id(&self, key: &str) -> Option<&str> {
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
            err.to_string().starts_with("duplicate field `kind`"),
            "{err}"
        );
        // Keys no rule reads may repeat, as JSON allows.
        assert!(MachineSetView::parse(br#"{"zz": 1, "zz": 2}"#).is_ok());
    }

    #[test]
    fn a_provider_spec_field_nothing_can_read_is_of_another_shape_not_absent() {
        let text = br#"{"spec": {"template": {"spec": {"providerSpec": {"value":
            {"disks": 1e400, "ami": "x"}}}}}}"#;
        let view = MachineSetView::parse(text).unwrap();
        let ProviderSpecValue::Object(spec) = view.provider_spec() else {
            panic!("providerSpec.value is an object");
        };
        assert!(matches!(
            spec.read::<Vec<Field<bool>>>("disks"),
            Field::Wrong(Kind::Number)
        ));
        assert!(matches!(
            spec.read::<StrMap<'_>>("ami"),
            Field::Wrong(Kind::String)
        ));
        assert!(matches!(spec.read::<Cow<'_, str>>("nope"), Field::Absent));
    }
}
