//! AdmissionReview bytes in, AdmissionReview bytes out (behaviour §6). Transport-free, so the
//! server, the tests and the benchmark all drive the same function.

use std::borrow::Cow;
use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::Serialize;

use crate::core::decision::{self, Decision, Reason};
use crate::core::json::{self, Category, Reader};
use crate::core::lenient::{Field, Kind};
use crate::core::snapshot::Snapshot;
use crate::core::view::MachineSetView;

const API_VERSION: &str = "admission.k8s.io/v1";
const KIND: &str = "AdmissionReview";
/// Kubernetes truncates warnings past 256 characters and asks for at most 120.
const MAX_WARNING: usize = 120;

/// Why a body is not an AdmissionReview we can answer. Each maps to HTTP 400.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    #[error("request body is not JSON: {0}")]
    NotJson(json::Error),
    #[error("request body is not JSON: not UTF-8: {0}")]
    NotUtf8(std::str::Utf8Error),
    #[error("request body is not an AdmissionReview: {0}")]
    NotReview(json::Error),
    #[error(
        "unsupported AdmissionReview {api_version:?}/{kind:?}: only {API_VERSION} {KIND} is served"
    )]
    WrongVersion { api_version: String, kind: String },
    #[error("AdmissionReview has no request")]
    MissingRequest,
    #[error("AdmissionReview request has no uid")]
    MissingUid,
}

/// Only the fields we read, borrowed from the body; the rest (oldObject included) is
/// skipped without being built, and the object is read straight into its view.
struct RawReview<'a> {
    api_version: Cow<'a, str>,
    kind: Cow<'a, str>,
    request: Option<RawRequest<'a>>,
}

#[derive(Default)]
struct Gvk<'a> {
    group: Cow<'a, str>,
    kind: Cow<'a, str>,
}

struct RawRequest<'a> {
    uid: Cow<'a, str>,
    kind: Gvk<'a>,
    sub_resource: Option<Cow<'a, str>>,
    name: Option<Cow<'a, str>>,
    namespace: Option<Cow<'a, str>>,
    operation: Cow<'a, str>,
    dry_run: Option<bool>,
    object: Field<MachineSetView<'a>>,
    /// Kept as text: read only when an UPDATE would be patched (revert loops).
    old_object: Option<&'a str>,
}

/// The envelope's readers. Its fields have one type each: absent reads as the default
/// (or `None`), null as `None` where the API allows it, any other type is an error.
mod envelope {
    use super::*;

    type Result<T> = json::Result<T>;

    pub fn review<'a>(r: &mut Reader<'a>) -> Result<RawReview<'a>> {
        match r.kind()? {
            Some(Kind::Object) => {}
            other => {
                let found = other.map_or("null", Kind::article);
                return Err(r.data(format!("{found}, expected an AdmissionReview object")));
            }
        }
        let (mut api_version, mut kind, mut request) =
            (Field::Absent, Field::Absent, Field::Absent);
        r.object(|r, key| match key {
            "apiVersion" => r.string_into(&mut api_version),
            "kind" => r.string_into(&mut kind),
            "request" => r.field_into(&mut request, Kind::Object, self::request),
            _ => r.skip().map(drop),
        })?;
        Ok(RawReview {
            api_version: or_default(r, "apiVersion", api_version)?,
            kind: or_default(r, "kind", kind)?,
            request: or_none(r, "request", request)?,
        })
    }

    fn request<'a>(r: &mut Reader<'a>) -> Result<RawRequest<'a>> {
        let (mut uid, mut kind, mut sub_resource, mut name, mut namespace) = (
            Field::Absent,
            Field::Absent,
            Field::Absent,
            Field::Absent,
            Field::Absent,
        );
        let (mut operation, mut dry_run, mut object, mut old_object) =
            (Field::Absent, Field::Absent, Field::Absent, Field::Absent);
        r.object(|r, key| match key {
            "uid" => r.string_into(&mut uid),
            "kind" => r.field_into(&mut kind, Kind::Object, gvk),
            "subResource" => r.string_into(&mut sub_resource),
            "name" => r.string_into(&mut name),
            "namespace" => r.string_into(&mut namespace),
            "operation" => r.string_into(&mut operation),
            "dryRun" => r.field_into(&mut dry_run, Kind::Bool, Reader::bool),
            "object" => r.field_into(&mut object, Kind::Object, MachineSetView::read),
            // Any value but null: its text is kept.
            "oldObject" => {
                let any = r.kind()?.unwrap_or(Kind::Object);
                r.field_into(&mut old_object, any, Reader::skip)
            }
            _ => r.skip().map(drop),
        })?;
        Ok(RawRequest {
            uid: or_default(r, "uid", uid)?,
            kind: or_default(r, "kind", kind)?,
            sub_resource: or_none(r, "subResource", sub_resource)?,
            name: or_none(r, "name", name)?,
            namespace: or_none(r, "namespace", namespace)?,
            operation: or_default(r, "operation", operation)?,
            dry_run: or_none(r, "dryRun", dry_run)?,
            object,
            old_object: old_object.get().copied(),
        })
    }

    fn gvk<'a>(r: &mut Reader<'a>) -> Result<Gvk<'a>> {
        let (mut group, mut kind) = (Field::Absent, Field::Absent);
        r.object(|r, key| match key {
            "group" => r.string_into(&mut group),
            "kind" => r.string_into(&mut kind),
            _ => r.skip().map(drop),
        })?;
        Ok(Gvk {
            group: or_default(r, "group", group)?,
            kind: or_default(r, "kind", kind)?,
        })
    }

    /// A field that may be absent (the default) but not null nor of another type.
    fn or_default<T: Default>(r: &Reader<'_>, name: &str, field: Field<T>) -> Result<T> {
        match field {
            Field::Is(v) => Ok(v),
            Field::Absent => Ok(T::default()),
            Field::Null => Err(r.data(format!("{name} is null"))),
            Field::Wrong(kind) => Err(r.data(format!("{name} is {}", kind.article()))),
        }
    }

    /// A field that may be absent or null (none) but not of another type.
    fn or_none<T>(r: &Reader<'_>, name: &str, field: Field<T>) -> Result<Option<T>> {
        match field {
            Field::Is(v) => Ok(Some(v)),
            Field::Absent | Field::Null => Ok(None),
            Field::Wrong(kind) => Err(r.data(format!("{name} is {}", kind.article()))),
        }
    }
}

/// A request answered: the response body plus what the logs and metrics need (borrowed
/// from the request body where they can be).
#[derive(Debug)]
pub struct Reviewed<'a> {
    pub body: Vec<u8>,
    pub decision: Decision,
    pub uid: Cow<'a, str>,
    pub namespace: Cow<'a, str>,
    pub name: Cow<'a, str>,
    pub operation: Cow<'a, str>,
    pub dry_run: bool,
}

/// Answer one AdmissionReview. Never denies: a well-formed review always gets
/// `allowed: true`, with a patch when the boot image moves.
pub fn review<'a>(body: &'a [u8], snap: &Snapshot) -> Result<Reviewed<'a>, ReviewError> {
    // Checked once here, so that the parser need not check each string it borrows.
    let body = std::str::from_utf8(body).map_err(ReviewError::NotUtf8)?;
    let raw = Reader::document(body, envelope::review).map_err(|e| match e.category {
        Category::Data => ReviewError::NotReview(e),
        Category::Syntax => ReviewError::NotJson(e),
    })?;
    if raw.api_version != API_VERSION || raw.kind != KIND {
        return Err(ReviewError::WrongVersion {
            api_version: raw.api_version.into_owned(),
            kind: raw.kind.into_owned(),
        });
    }
    let req = raw.request.ok_or(ReviewError::MissingRequest)?;
    if req.uid.is_empty() {
        return Err(ReviewError::MissingUid);
    }
    let decision = if req.kind.group != "machine.openshift.io"
        || !matches!(&*req.kind.kind, "MachineSet" | "ControlPlaneMachineSet")
    {
        Decision::not_applicable(format!(
            "not a MachineSet ({}/{})",
            req.kind.group, req.kind.kind
        ))
    } else if req.sub_resource.as_deref().is_some_and(|s| !s.is_empty()) {
        Decision::not_applicable("subresource requests are not mutated")
    } else if req.operation != "CREATE" && req.operation != "UPDATE" {
        Decision::not_applicable(format!("operation {} is not mutated", req.operation))
    } else {
        match &req.object {
            Field::Is(object) if req.operation == "UPDATE" => {
                decision::decide_update(object, req.old_object, snap)
            }
            Field::Is(object) => decision::decide(object, snap),
            Field::Wrong(kind) => {
                Decision::not_applicable(format!("request object is {}", kind.article()))
            }
            Field::Absent | Field::Null => Decision::not_applicable("request has no object"),
        }
    };
    let name = match req.name {
        Some(name) if !name.is_empty() => name,
        // CREATE with generateName has no name yet.
        _ => req
            .object
            .get()
            .and_then(|o| o.name_or_generate_name())
            .map_or(Cow::Borrowed(""), |n| Cow::Owned(n.to_owned())),
    };
    let body = response_body(&req.uid, &decision);
    Ok(Reviewed {
        body,
        decision,
        uid: req.uid,
        namespace: req.namespace.unwrap_or_default(),
        name,
        operation: req.operation,
        dry_run: req.dry_run.unwrap_or(false),
    })
}

/// The response envelope. Our own, not kube-core's `AdmissionResponse`: that one writes
/// `patch` as an array of numbers, while the API documents (and behaviour §6 requires) base64.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ResponseReview<'a> {
    api_version: &'static str,
    kind: &'static str,
    response: Response<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Response<'a> {
    uid: &'a str,
    allowed: bool,
    status: Status<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch_type: Option<&'static str>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    audit_annotations: BTreeMap<&'static str, &'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    warnings: Vec<String>,
}

/// `metav1.Status`; with `allowed: true` the apiserver ignores it, people reading the
/// response do not.
#[derive(Serialize)]
struct Status<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    code: Option<u16>,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'static str>,
}

fn encode(review: &ResponseReview<'_>) -> Vec<u8> {
    // Plain structs of strings and numbers: serializing cannot fail.
    serde_json::to_vec(review).unwrap_or_default()
}

/// The answer to a review, written straight into one buffer: it is the same small
/// envelope every time, and this is the request path (serde's structs here cost three
/// times as much, in growing buffers and escaping base64 that never needs it).
fn response_body(uid: &str, decision: &Decision) -> Vec<u8> {
    // A patch moves the image (`Updated`), or only records a revert loop (`RevertLoop`).
    let updated = !decision.patch.0.is_empty();
    let mut out = Vec::with_capacity(if updated { 1536 } else { 384 });
    out.extend_from_slice(
        br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"#,
    );
    json_string(&mut out, uid);
    out.extend_from_slice(br#","allowed":true,"status":{"message":"#);
    json_string(&mut out, &decision.message);
    out.push(b'}');
    if updated {
        let mut ops = Vec::with_capacity(512);
        decision.patch.write_json(&mut ops);
        out.extend_from_slice(br#","patch":""#);
        let start = out.len();
        out.resize(start + base64::encoded_len(ops.len(), true).unwrap_or(0), 0);
        let _ = BASE64.encode_slice(&ops, &mut out[start..]);
        out.extend_from_slice(br#"","patchType":"JSONPatch","auditAnnotations":{"#);
        if let Some(target) = decision
            .target
            .as_ref()
            .filter(|_| decision.reason == Reason::Updated)
        {
            out.extend_from_slice(br#""boot-image":"#);
            json_string(&mut out, target);
            out.push(b',');
        }
        out.extend_from_slice(br#""reason":""#);
        out.extend_from_slice(decision.reason.as_str().as_bytes());
        out.extend_from_slice(br#""},"warnings":["#);
        json_string(&mut out, &warning(decision));
        out.push(b']');
    } else {
        // Reason names are ASCII words: nothing to escape.
        out.extend_from_slice(br#","auditAnnotations":{"reason":""#);
        out.extend_from_slice(decision.reason.as_str().as_bytes());
        out.extend_from_slice(br#""}"#);
    }
    out.extend_from_slice(b"}}");
    out
}

/// A JSON string, quoted and escaped.
fn json_string(out: &mut Vec<u8>, s: &str) {
    // Writing a str into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

/// `boot image set to <name> (was <name>)`, cut to the length Kubernetes asks for.
fn warning(decision: &Decision) -> String {
    fn short(s: &str) -> &str {
        s.rsplit('/').next().unwrap_or(s)
    }
    if decision.reason == Reason::RevertLoop {
        return truncate(
            "bootimage-webhook: boot image left as written: it was put back too often (RevertLoop, see the MachineSet's Events)".to_owned(),
            MAX_WARNING,
        );
    }
    let mut w = String::with_capacity(MAX_WARNING + 16);
    w.push_str("bootimage-webhook: boot image set to ");
    w.push_str(decision.target.as_deref().map(short).unwrap_or_default());
    if let Some(current) = decision.current.as_deref().filter(|c| !c.is_empty()) {
        w.push_str(" (was ");
        w.push_str(short(current));
        w.push(')');
    }
    truncate(w, MAX_WARNING)
}

fn truncate(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut cut = max - 3;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push_str("...");
    }
    s
}

/// `metav1.StatusReason` for the codes we answer with.
fn status_reason(code: u16) -> &'static str {
    match code {
        404 => "NotFound",
        405 => "MethodNotAllowed",
        408 => "Timeout",
        413 => "RequestEntityTooLarge",
        415 => "UnsupportedMediaType",
        _ => "BadRequest",
    }
}

/// The body for a review we could not read: an AdmissionReview that says why, in the
/// shape every Kubernetes client understands (no uid: there is none to echo).
pub fn error_body(code: u16, message: &str) -> Vec<u8> {
    encode(&ResponseReview {
        api_version: API_VERSION,
        kind: KIND,
        response: Response {
            uid: "",
            allowed: false,
            status: Status {
                status: Some("Failure"),
                code: Some(code),
                message,
                reason: Some(status_reason(code)),
            },
            patch: None,
            patch_type: None,
            audit_annotations: BTreeMap::new(),
            warnings: Vec::new(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_respects_char_boundaries() {
        let s = truncate("é".repeat(100), 120);
        assert!(s.len() <= 120 && s.ends_with("..."));
        assert_eq!(truncate("short".into(), 120), "short");
    }
}
