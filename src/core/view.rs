//! A MachineSet as the rules read it: exactly the fields they look at, borrowed from the
//! bytes, everything else skipped without being built. The webhook reads it straight from
//! the AdmissionReview; the toucher, `preview` and `status` from their objects' JSON. A
//! platform reads its own fields of `providerSpec.value` through [`MachineSetView::provider_spec`]
//! and [`SpecFields`].

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

use serde::de::MapAccess;

use super::lenient::{Field, Kind, Object, Shape, StrMap};

type Str<'a> = Field<Cow<'a, str>>;

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct MachineSetView<'a> {
    #[serde(borrow)]
    api_version: Str<'a>,
    #[serde(borrow)]
    kind: Str<'a>,
    #[serde(borrow)]
    metadata: Field<Object<Metadata<'a>>>,
    #[serde(borrow)]
    spec: Field<Object<Spec<'a>>>,
    #[serde(borrow)]
    status: Field<Object<Status<'a>>>,
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
    owner_references: Field<Vec<Field<Object<Owner<'a>>>>>,
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
    template: Field<Object<Template<'a>>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Template<'a> {
    #[serde(borrow)]
    metadata: Field<Object<TemplateMetadata<'a>>>,
    #[serde(borrow)]
    spec: Field<Object<TemplateSpec<'a>>>,
}

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
    provider_spec: Field<Object<ProviderSpec<'a>>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ProviderSpec<'a> {
    #[serde(borrow)]
    value: Field<SpecFields<'a>>,
}

/// `providerSpec.value`'s top-level fields, each kept raw: one pass finds them, and a
/// platform reads only the few it needs (`disks`, `ami`, `image`, ...) with a reader of
/// its own, so adding a platform touches nothing here.
#[derive(Debug, Default)]
pub struct SpecFields<'a>(Vec<(Cow<'a, str>, &'a RawValue)>);

impl<'a> SpecFields<'a> {
    /// The raw JSON of a top-level field (the last, if repeated).
    pub fn raw(&self, key: &str) -> Option<&'a RawValue> {
        self.0.iter().rev().find(|(k, _)| k == key).map(|(_, v)| *v)
    }

    /// A field read as `T` (lenient types: see [`super::lenient`]); absent reads as
    /// `T::default()`, and only bytes that are not JSON fail.
    pub fn read<T: Deserialize<'a> + Default>(&self, key: &str) -> T {
        self.raw(key)
            .and_then(|raw| serde_json::from_str(raw.get()).ok())
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

impl<'de: 'a, 'a> Shape<'de> for SpecFields<'a> {
    const KIND: Kind = Kind::Object;

    fn from_map<A: MapAccess<'de>>(mut map: A) -> Result<Option<Self>, A::Error> {
        // A providerSpec has a dozen or two fields: one allocation, not five.
        let mut fields = Vec::with_capacity(24);
        while let Some(key) = map.next_key::<Field<Cow<'a, str>>>()? {
            let value = map.next_value::<&'a RawValue>()?;
            if let Field::Is(key) = key {
                fields.push((key, value));
            }
        }
        Ok(Some(SpecFields(fields)))
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

impl<'a> MachineSetView<'a> {
    /// Read the fields the rules need from a MachineSet's JSON. Fails only on bytes that are
    /// not JSON (or repeat a key the rules read); any shape of valid JSON reads.
    pub fn parse(json: &'a [u8]) -> Result<Self, serde_json::Error> {
        // Checked once, so that the parser need not check each string it borrows.
        let text = std::str::from_utf8(json).map_err(serde::de::Error::custom)?;
        serde_json::from_str(text)
    }

    pub fn api_version(&self) -> &str {
        self.api_version.as_str().unwrap_or("")
    }

    pub fn kind(&self) -> &str {
        self.kind.as_str().unwrap_or("")
    }

    fn metadata(&self) -> Option<&Metadata<'a>> {
        self.metadata.get().map(|o| &o.0)
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
                o.0.kind.as_str().unwrap_or("?"),
                o.0.name.as_str().unwrap_or("?"),
            )
        }))
    }

    /// `status.authoritativeAPI` (MAPI -> CAPI migration), when it is a string.
    pub fn authoritative_api(&self) -> Option<&str> {
        self.status
            .get()
            .and_then(|s| s.0.authoritative_api.as_str())
    }

    fn template(&self) -> Option<&Template<'a>> {
        self.spec
            .get()
            .and_then(|s| s.0.template.get())
            .map(|t| &t.0)
    }

    /// A label of `spec.template.metadata` (the Machines' own labels).
    pub fn template_label(&self, key: &str) -> Option<&str> {
        self.template()
            .and_then(|t| t.metadata.get())
            .and_then(|m| m.0.labels.get())
            .and_then(|l| l.get(key))
    }

    pub fn provider_spec(&self) -> ProviderSpecValue<'_, 'a> {
        let value = self
            .template()
            .and_then(|t| t.spec.get())
            .and_then(|s| s.0.provider_spec.get())
            .map(|p| &p.0.value);
        match value {
            None | Some(Field::Absent | Field::Null) => ProviderSpecValue::None,
            Some(Field::Wrong(kind)) => ProviderSpecValue::NotObject(*kind),
            Some(Field::Is(fields)) => ProviderSpecValue::Object(fields),
        }
    }
}
