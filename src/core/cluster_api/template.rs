//! Cluster API infrastructure templates as the decision reads and clones them: which kinds
//! are served, where each keeps its boot image, the machine API providerSpec field that
//! holds the same image, and the clone named by the hash of its content.

use ring::digest::{SHA256, digest};
use serde_json::{Map, Value};

/// The marker label on every template clone this project made; retention deletes only
/// templates that carry it.
pub const CLONE_LABEL: &str = "bootimages.machineconfiguration.openshift.io/template-clone";
/// On a clone: the template it was cloned from.
pub const SOURCE_ANNOTATION: &str = "bootimages.machineconfiguration.openshift.io/source-template";
/// The group of every infrastructure template kind served.
pub const INFRASTRUCTURE_GROUP: &str = "infrastructure.cluster.x-k8s.io";
/// The longest clone name: a DNS label, as Cluster API's own generated names are.
const NAME_MAX: usize = 63;
/// Hex digits of the content hash in a clone's name.
const HASH_DIGITS: usize = 10;

/// A template kind served: the platform whose stream rules decide it (by its Infrastructure
/// name), and where its boot image lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TemplateKind {
    pub kind: &'static str,
    /// `Platform::name` of the machine API platform that decides it.
    pub platform: &'static str,
    /// The image, under the template's `spec.template.spec` (a JSON pointer).
    pub image: &'static str,
    /// The providerSpec field of the machine API twin that holds the same image, and the
    /// pointer under `spec.template.spec` each providerSpec edit maps to.
    pub provider_image: &'static str,
    pub edits: &'static [(&'static str, &'static str)],
    /// The objects on the way to the image (under `spec.template.spec`) and the only fields
    /// each may hold: a template that sets another selects its image some other way (an id,
    /// tags, an EKS lookup) and is left alone.
    pub holders: &'static [(&'static str, &'static [&'static str])],
    /// Whether the image depends on the cluster's region, which a template does not name.
    pub regional: bool,
}

/// The kinds served. CAPA's `ami.id` is the AWS providerSpec's `ami.id` (the machine API rule
/// writes `ami` whole as `{id}`); CAPO's `image.filter.name` is the OpenStack providerSpec's
/// `image`, the Glance name cluster-capi-operator converts it to.
pub const KINDS: &[TemplateKind] = &[
    TemplateKind {
        kind: "AWSMachineTemplate",
        platform: "AWS",
        image: "/ami/id",
        provider_image: "/ami/id",
        edits: &[("/ami", "/ami"), ("/ami/id", "/ami/id")],
        holders: &[("/ami", &["id"])],
        regional: true,
    },
    TemplateKind {
        kind: "OpenStackMachineTemplate",
        platform: "OpenStack",
        image: "/image/filter/name",
        provider_image: "/image",
        edits: &[("/image", "/image/filter/name")],
        holders: &[("/image", &["filter"]), ("/image/filter", &["name"])],
        regional: false,
    },
];

impl TemplateKind {
    pub fn by_kind(kind: &str) -> Option<TemplateKind> {
        KINDS.iter().copied().find(|k| k.kind == kind)
    }

    /// The template's boot image, or why it has none this rule may move.
    pub fn image<'t>(&self, template: &'t Value) -> Result<Option<&'t str>, String> {
        let spec = template.pointer("/spec/template/spec");
        for (holder, allowed) in self.holders {
            let Some(Value::Object(fields)) = spec.and_then(|s| s.pointer(holder)) else {
                continue;
            };
            if let Some(other) = fields.keys().find(|k| !allowed.contains(&k.as_str())) {
                return Err(format!(
                    "spec.template.spec{} sets {other}: the image is selected another way",
                    holder.replace('/', ".")
                ));
            }
        }
        match spec.and_then(|s| s.pointer(self.image)) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(format!(
                "spec.template.spec{} is not a string",
                self.image.replace('/', ".")
            )),
        }
    }

    /// Where a providerSpec edit (relative to `providerSpec.value`) lands in the template
    /// (relative to `spec.template.spec`).
    pub fn template_pointer(&self, provider_pointer: &str) -> Option<&'static str> {
        self.edits
            .iter()
            .find(|(p, _)| *p == provider_pointer)
            .map(|(_, t)| *t)
    }
}

/// A template clone: the object to create and its name.
#[derive(Debug, Clone, PartialEq)]
pub struct Clone {
    pub name: String,
    pub object: Value,
}

/// `source` with its `spec.template.spec` fields set (pointers under it, values), named
/// `<base>-<hash of the new spec>`, carrying the marker label and the source's name. Every
/// other field of the spec is the source's; of its metadata only labels, annotations and
/// owner references are kept (a new object has no uid, version or status).
pub fn clone_of(source: &Value, base: &str, sets: &[(&str, Value)]) -> Clone {
    let mut spec = source.get("spec").cloned().unwrap_or(Value::Null);
    for (pointer, value) in sets {
        set_pointer(
            &mut spec,
            &format!("/template/spec{pointer}"),
            value.clone(),
        );
    }
    let name = clone_name(base, &spec);
    let meta = source.get("metadata");
    let mut labels = meta
        .and_then(|m| m.get("labels"))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    labels.insert(CLONE_LABEL.into(), Value::String("true".into()));
    let mut annotations = meta
        .and_then(|m| m.get("annotations"))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let source_name = meta.and_then(|m| m.get("name")).cloned();
    annotations.insert(
        SOURCE_ANNOTATION.into(),
        source_name.unwrap_or(Value::String(String::new())),
    );
    let mut metadata = Map::new();
    metadata.insert("name".into(), Value::String(name.clone()));
    for key in ["namespace", "ownerReferences"] {
        if let Some(v) = meta.and_then(|m| m.get(key)) {
            metadata.insert(key.into(), v.clone());
        }
    }
    metadata.insert("labels".into(), Value::Object(labels));
    metadata.insert("annotations".into(), Value::Object(annotations));
    let mut object = Map::new();
    for key in ["apiVersion", "kind"] {
        if let Some(v) = source.get(key) {
            object.insert(key.into(), v.clone());
        }
    }
    object.insert("metadata".into(), Value::Object(metadata));
    object.insert("spec".into(), spec);
    Clone {
        name,
        object: Value::Object(object),
    }
}

/// Whether `there`, the template of the clone's name, is that clone: ours (the marker) and
/// with its spec.
pub fn is_clone(there: &Value, clone: &Clone) -> bool {
    is_marked(there) && there.get("spec") == clone.object.get("spec")
}

/// Whether a template carries the marker of the clones this project made.
pub fn is_marked(template: &Value) -> bool {
    template
        .pointer("/metadata/labels")
        .and_then(|l| l.get(CLONE_LABEL))
        .and_then(Value::as_str)
        == Some("true")
}

/// `<base>-<hash>`: the first hex digits of SHA-256 over the spec with its keys sorted, so
/// that the same content always has the same name, whatever order it was written in.
pub fn clone_name(base: &str, spec: &Value) -> String {
    let mut canonical = Vec::new();
    write_sorted(spec, &mut canonical);
    let hash: String = digest(&SHA256, &canonical)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<String>()[..HASH_DIGITS]
        .to_owned();
    let keep = NAME_MAX - HASH_DIGITS - 1;
    let base = base.get(..keep.min(base.len())).unwrap_or(base);
    format!("{}-{hash}", base.trim_end_matches(['-', '.']))
}

fn write_sorted(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push(b'{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.extend(Value::String(k.clone()).to_string().into_bytes());
                out.push(b':');
                write_sorted(&map[k], out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_sorted(v, out);
            }
            out.push(b']');
        }
        other => out.extend(other.to_string().into_bytes()),
    }
}

/// Sets `pointer` in `value`, making the objects on the way.
pub(crate) fn set_pointer(value: &mut Value, pointer: &str, new: Value) {
    let mut cur = value;
    let tokens: Vec<String> = pointer
        .split('/')
        .skip(1)
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect();
    for (i, token) in tokens.iter().enumerate() {
        if !cur.is_object() {
            *cur = Value::Object(Map::new());
        }
        let Value::Object(map) = cur else { return };
        if i + 1 == tokens.len() {
            map.insert(token.clone(), new);
            return;
        }
        cur = map.entry(token.clone()).or_insert(Value::Null);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_name_is_the_content_whatever_the_key_order() {
        let a = json!({"template": {"spec": {"ami": {"id": "ami-1"}, "instanceType": "m6i"}}});
        let b = json!({"template": {"spec": {"instanceType": "m6i", "ami": {"id": "ami-1"}}}});
        let c = json!({"template": {"spec": {"instanceType": "m6i", "ami": {"id": "ami-2"}}}});
        assert_eq!(clone_name("ms", &a), clone_name("ms", &b));
        assert_ne!(clone_name("ms", &a), clone_name("ms", &c));
        let long = clone_name(&"x".repeat(300), &a);
        assert_eq!(long.len(), NAME_MAX, "{long}");
    }

    #[test]
    fn an_image_chosen_another_way_is_refused() {
        let kind = TemplateKind::by_kind("OpenStackMachineTemplate").unwrap();
        let by_name =
            json!({"spec": {"template": {"spec": {"image": {"filter": {"name": "rhcos"}}}}}});
        assert_eq!(kind.image(&by_name), Ok(Some("rhcos")));
        let tagged = json!({"spec": {"template": {"spec": {"image": {"filter": {"name": "rhcos", "tags": ["a"]}}}}}});
        assert!(kind.image(&tagged).unwrap_err().contains("tags"));
        let by_id = json!({"spec": {"template": {"spec": {"image": {"id": "0c1"}}}}});
        assert!(kind.image(&by_id).unwrap_err().contains("sets id"));
        let none = json!({"spec": {"template": {"spec": {}}}});
        assert_eq!(kind.image(&none), Ok(None));
    }
}
