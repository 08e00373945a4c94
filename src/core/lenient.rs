//! Reading JSON the way the rules need it: borrowing strings instead of copying them,
//! skipping everything no rule reads, and never failing on a value of an unexpected shape.
//! A field is [`Field::Absent`], [`Field::Null`], of the expected shape ([`Field::Is`]) or
//! of another one ([`Field::Wrong`]), so each rule can say what it found ("disks is not an
//! array") instead of the whole read failing. The view, the review envelope and the
//! platforms all read these with serde_json, through the impls here.
//!
//! Hand-written rather than `serde_with::DefaultOnError`: that one buffers every value
//! into serde's `Content` tree first, the very allocation this module exists to avoid.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::Deserialize;
use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// The JSON kind of a value, for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    String,
    Number,
    Bool,
    Object,
    Array,
}

impl Kind {
    /// The kind of a JSON text, by its first character.
    pub fn of_json(text: &str) -> Kind {
        match text.trim_start().as_bytes().first() {
            Some(b'"') => Kind::String,
            Some(b'{') => Kind::Object,
            Some(b'[') => Kind::Array,
            Some(b't' | b'f') => Kind::Bool,
            _ => Kind::Number,
        }
    }

    /// "a string", "an object", ...
    pub fn article(self) -> &'static str {
        match self {
            Kind::String => "a string",
            Kind::Number => "a number",
            Kind::Bool => "a boolean",
            Kind::Object => "an object",
            Kind::Array => "an array",
        }
    }
}

/// One JSON value as a rule sees it.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Field<T> {
    #[default]
    Absent,
    Null,
    Is(T),
    Wrong(Kind),
}

impl<T> Field<T> {
    pub fn get(&self) -> Option<&T> {
        match self {
            Field::Is(v) => Some(v),
            _ => None,
        }
    }

    pub fn is_absent_or_null(&self) -> bool {
        matches!(self, Field::Absent | Field::Null)
    }
}

impl<'a> Field<Cow<'a, str>> {
    pub fn as_str(&self) -> Option<&str> {
        self.get().map(|s| s.as_ref())
    }
}

/// A type that accepts exactly one JSON kind; any other kind is [`Field::Wrong`].
pub trait Shape<'de>: Sized {
    const KIND: Kind;

    fn from_str(_: Cow<'de, str>) -> Option<Self> {
        None
    }

    fn from_bool(_: bool) -> Option<Self> {
        None
    }

    fn from_map<A: MapAccess<'de>>(map: A) -> Result<Option<Self>, A::Error> {
        SkipVisitor.visit_map(map).map(|_| None)
    }

    fn from_seq<A: SeqAccess<'de>>(seq: A) -> Result<Option<Self>, A::Error> {
        SkipVisitor.visit_seq(seq).map(|_| None)
    }
}

/// Skips a value of the wrong shape, nesting by nesting, so that the parser's recursion
/// limit still refuses absurdly deep input (`IgnoredAny` would let it through).
struct Skip;

impl<'de> Deserialize<'de> for Skip {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(SkipVisitor)
    }
}

struct SkipVisitor;

impl<'de> Visitor<'de> for SkipVisitor {
    type Value = Skip;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Skip, E> {
        Ok(Skip)
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Skip, E> {
        Ok(Skip)
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Skip, E> {
        Ok(Skip)
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Skip, E> {
        Ok(Skip)
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Skip, E> {
        Ok(Skip)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Skip, E> {
        Ok(Skip)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Skip, A::Error> {
        while map.next_entry::<IgnoredAny, Skip>()?.is_some() {}
        Ok(Skip)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Skip, A::Error> {
        while seq.next_element::<Skip>()?.is_some() {}
        Ok(Skip)
    }
}

impl<'de: 'a, 'a> Shape<'de> for Cow<'a, str> {
    const KIND: Kind = Kind::String;

    fn from_str(s: Cow<'de, str>) -> Option<Self> {
        Some(s)
    }
}

impl<'de> Shape<'de> for bool {
    const KIND: Kind = Kind::Bool;

    fn from_bool(b: bool) -> Option<Self> {
        Some(b)
    }
}

impl<'de, T: Shape<'de>> Shape<'de> for Vec<Field<T>> {
    const KIND: Kind = Kind::Array;

    fn from_seq<A: SeqAccess<'de>>(seq: A) -> Result<Option<Self>, A::Error> {
        Vec::deserialize(SeqAccessDeserializer::new(seq)).map(Some)
    }
}

/// Implements [`Shape`] (an object) for a struct with a derived, `#[serde(default)]`
/// reader, so that `Field<S>` reads it.
#[macro_export]
macro_rules! object_shape {
    ($($ty:ident),* $(,)?) => {$(
        impl<'de: 'a, 'a> $crate::core::lenient::Shape<'de> for $ty<'a> {
            const KIND: $crate::core::lenient::Kind = $crate::core::lenient::Kind::Object;

            fn from_map<A: serde::de::MapAccess<'de>>(map: A) -> Result<Option<Self>, A::Error> {
                serde::Deserialize::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(Some)
            }
        }
    )*};
}

/// An object whose fields are read by `T`'s own (derived, `#[serde(default)]`) reader.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Object<T>(pub T);

impl<'de, T: Deserialize<'de>> Shape<'de> for Object<T> {
    const KIND: Kind = Kind::Object;

    fn from_map<A: MapAccess<'de>>(map: A) -> Result<Option<Self>, A::Error> {
        T::deserialize(MapAccessDeserializer::new(map)).map(|v| Some(Object(v)))
    }
}

/// A map of strings (labels, annotations), in document order; values of other shapes are
/// kept as such, so that a lookup can tell "absent" from "not a string".
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StrMap<'a>(pub Vec<(Cow<'a, str>, Field<Cow<'a, str>>)>);

impl<'a> StrMap<'a> {
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .rev() // the last of duplicate keys wins, as everywhere in JSON
            .find(|(k, _)| k == key)
            .and_then(|(_, v)| v.as_str())
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.0.iter().any(|(k, _)| k == key)
    }

    /// The string entries, as a selector matches them.
    pub fn strings(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0
            .iter()
            .filter_map(|(k, v)| v.as_str().map(|v| (k.as_ref(), v)))
    }
}

impl<'de: 'a, 'a> Shape<'de> for StrMap<'a> {
    const KIND: Kind = Kind::Object;

    fn from_map<A: MapAccess<'de>>(mut map: A) -> Result<Option<Self>, A::Error> {
        let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(8));
        while let Some((Text(key), value)) = map.next_entry()? {
            entries.push((key, value));
        }
        Ok(Some(StrMap(entries)))
    }
}

/// A string that must be one (any other type is an error), borrowed from the input
/// unless it has escapes; serde's own `Cow<str>` always copies.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Text<'a>(pub Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_str(TextVisitor(PhantomData))
    }
}

struct TextVisitor<'a>(PhantomData<&'a ()>);

impl<'de: 'a, 'a> Visitor<'de> for TextVisitor<'a> {
    type Value = Text<'a>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Text<'a>, E> {
        Ok(Text(Cow::Borrowed(v)))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Text<'a>, E> {
        Ok(Text(Cow::Owned(v.to_owned())))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Text<'a>, E> {
        Ok(Text(Cow::Owned(v)))
    }
}

/// A `T` read only from a JSON object: serde's derived readers also take an array of the
/// fields in order, which no AdmissionReview is.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ObjectOnly<T>(pub T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for ObjectOnly<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(ObjectVisitor(PhantomData))
    }
}

struct ObjectVisitor<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for ObjectVisitor<T> {
    type Value = ObjectOnly<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        T::deserialize(MapAccessDeserializer::new(map)).map(ObjectOnly)
    }
}

impl<'de, T: Shape<'de>> Deserialize<'de> for Field<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(FieldVisitor(PhantomData))
    }
}

struct FieldVisitor<T>(PhantomData<T>);

impl<T> FieldVisitor<T> {
    fn or_wrong(v: Option<T>, kind: Kind) -> Field<T> {
        v.map_or(Field::Wrong(kind), Field::Is)
    }
}

impl<'de, T: Shape<'de>> Visitor<'de> for FieldVisitor<T> {
    type Value = Field<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "any JSON value ({} expected)", T::KIND.article())
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Self::or_wrong(T::from_str(Cow::Borrowed(v)), Kind::String))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        // An escaped string cannot be borrowed from the input.
        Ok(Self::or_wrong(
            T::from_str(Cow::Owned(v.to_owned())),
            Kind::String,
        ))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Self::or_wrong(T::from_str(Cow::Owned(v)), Kind::String))
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        Ok(Self::or_wrong(T::from_bool(v), Kind::Bool))
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(Field::Wrong(Kind::Number))
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(Field::Wrong(Kind::Number))
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Field::Wrong(Kind::Number))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Field::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Field::Null)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        Ok(Self::or_wrong(T::from_map(map)?, Kind::Object))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        Ok(Self::or_wrong(T::from_seq(seq)?, Kind::Array))
    }
}

/// The strings of a JSON array (other items and a non-array: none): lists read leniently
/// from cluster objects (networks, cipher names, ids).
pub fn strings(value: Option<&serde_json::Value>) -> Vec<String> {
    value
        .and_then(serde_json::Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(serde_json::Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Default, PartialEq, Deserialize)]
    #[serde(default)]
    struct Disk<'a> {
        #[serde(borrow)]
        image: Field<Cow<'a, str>>,
        boot: Field<bool>,
    }

    #[derive(Debug, Default, Deserialize)]
    #[serde(default)]
    struct Doc<'a> {
        #[serde(borrow)]
        disks: Field<Vec<Field<Object<Disk<'a>>>>>,
    }

    fn doc(text: &str) -> Doc<'_> {
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn every_shape_is_read_without_failing() {
        assert_eq!(doc("{}").disks, Field::Absent);
        assert_eq!(doc(r#"{"disks": null}"#).disks, Field::Null);
        assert_eq!(doc(r#"{"disks": 7}"#).disks, Field::Wrong(Kind::Number));
        assert_eq!(
            doc(r#"{"disks": {"a": [1]}}"#).disks,
            Field::Wrong(Kind::Object)
        );
        let d = doc(
            r#"{"disks": [{"image": "x", "boot": true, "more": {"x": [1, {}]}}, "pd", {"image": 4}]}"#,
        );
        let disks = d.disks.get().unwrap();
        let first = &disks[0].get().unwrap().0;
        assert_eq!(first.image.as_str(), Some("x"));
        assert_eq!(first.boot, Field::Is(true));
        assert_eq!(disks[1], Field::Wrong(Kind::String));
        assert_eq!(disks[2].get().unwrap().0.image, Field::Wrong(Kind::Number));
    }

    #[test]
    fn broken_json_is_still_an_error() {
        assert!(serde_json::from_str::<Doc<'_>>(r#"{"disks": [1,"#).is_err());
    }
}
