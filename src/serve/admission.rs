//! AdmissionReview bytes in, AdmissionReview bytes out (behaviour §6). Transport-free, so the
//! server, the tests and the benchmark all drive the same function.

use std::borrow::Cow;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::value::RawValue;

use crate::core::decision::{self, Decision, Patch, Reason};
use crate::core::lenient::{Field, ObjectOnly, Text};
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
    NotJson(serde_json::Error),
    #[error("request body is not JSON: not UTF-8: {0}")]
    NotUtf8(std::str::Utf8Error),
    #[error("request body is not an AdmissionReview: {0}")]
    NotReview(serde_json::Error),
    #[error(
        "unsupported AdmissionReview {api_version:?}/{kind:?}: only {API_VERSION} {KIND} is served"
    )]
    WrongVersion { api_version: String, kind: String },
    #[error("AdmissionReview has no request")]
    MissingRequest,
    #[error("AdmissionReview request has no uid")]
    MissingUid,
}

/// Only the fields we read, borrowed from the body; the rest is skipped without being
/// built, and the object is read straight into its view. Each envelope field has one type:
/// absent reads as the default (or `None`), null as `None` where the API allows it, any
/// other type is an error.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawReview<'a> {
    #[serde(borrow, default)]
    api_version: Text<'a>,
    #[serde(borrow, default)]
    kind: Text<'a>,
    #[serde(borrow, default)]
    request: Option<ObjectOnly<RawRequest<'a>>>,
}

#[derive(Default, Deserialize)]
struct Gvk<'a> {
    #[serde(borrow, default)]
    group: Text<'a>,
    #[serde(borrow, default)]
    kind: Text<'a>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawRequest<'a> {
    #[serde(borrow, default)]
    uid: Text<'a>,
    #[serde(borrow, default)]
    kind: ObjectOnly<Gvk<'a>>,
    #[serde(borrow, default)]
    sub_resource: Option<Text<'a>>,
    #[serde(borrow, default)]
    name: Option<Text<'a>>,
    #[serde(borrow, default)]
    namespace: Option<Text<'a>>,
    #[serde(borrow, default)]
    operation: Text<'a>,
    #[serde(default)]
    dry_run: Option<bool>,
    #[serde(borrow, default)]
    object: Field<MachineSetView<'a>>,
    /// Kept as text: read only when an UPDATE would be patched (revert loops).
    #[serde(borrow, default)]
    old_object: Option<&'a RawValue>,
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
    // Checked once here: serde_json's slice reader would let invalid UTF-8 through in the
    // strings it skips.
    let body = std::str::from_utf8(body).map_err(ReviewError::NotUtf8)?;
    let ObjectOnly(raw) = serde_json::from_str::<ObjectOnly<RawReview<'a>>>(body).map_err(|e| {
        match e.classify() {
            serde_json::error::Category::Data => ReviewError::NotReview(e),
            _ => ReviewError::NotJson(e),
        }
    })?;
    let (api_version, kind) = (raw.api_version.0, raw.kind.0);
    if api_version != API_VERSION || kind != KIND {
        return Err(ReviewError::WrongVersion {
            api_version: api_version.into_owned(),
            kind: kind.into_owned(),
        });
    }
    let ObjectOnly(req) = raw.request.ok_or(ReviewError::MissingRequest)?;
    if req.uid.0.is_empty() {
        return Err(ReviewError::MissingUid);
    }
    let decision = decide(&req, snap);
    let name = match req.name {
        Some(Text(name)) if !name.is_empty() => name,
        // CREATE with generateName has no name yet.
        _ => req
            .object
            .get()
            .and_then(|o| o.name_or_generate_name())
            .map_or(Cow::Borrowed(""), |n| Cow::Owned(n.to_owned())),
    };
    let body = response_body(&req.uid.0, &decision);
    Ok(Reviewed {
        body,
        decision,
        uid: req.uid.0,
        namespace: req.namespace.map(|n| n.0).unwrap_or_default(),
        name,
        operation: req.operation.0,
        dry_run: req.dry_run.unwrap_or(false),
    })
}

/// What the request asks of us: only a CREATE or UPDATE of a MachineSet's own object is
/// decided; anything else is let through as it is.
fn decide(req: &RawRequest<'_>, snap: &Snapshot) -> Decision {
    let ObjectOnly(Gvk { group, kind }) = &req.kind;
    let operation = &*req.operation.0;
    if group.0 != "machine.openshift.io"
        || !matches!(&*kind.0, "MachineSet" | "ControlPlaneMachineSet")
    {
        Decision::not_applicable(format!("not a MachineSet ({}/{})", group.0, kind.0))
    } else if req.sub_resource.as_ref().is_some_and(|s| !s.0.is_empty()) {
        Decision::not_applicable("subresource requests are not mutated")
    } else if operation != "CREATE" && operation != "UPDATE" {
        Decision::not_applicable(format!("operation {operation} is not mutated"))
    } else {
        match &req.object {
            Field::Is(object) if operation == "UPDATE" => {
                decision::decide_update(object, req.old_object.map(RawValue::get), snap)
            }
            Field::Is(object) => decision::decide(object, snap),
            Field::Wrong(kind) => {
                Decision::not_applicable(format!("request object is {}", kind.article()))
            }
            Field::Absent | Field::Null => Decision::not_applicable("request has no object"),
        }
    }
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
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "base64_json"
    )]
    patch: Option<&'a Patch>,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch_type: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    audit_annotations: Option<AuditAnnotations<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    warnings: Option<[String; 1]>,
}

#[derive(Serialize)]
struct AuditAnnotations<'a> {
    #[serde(rename = "boot-image", skip_serializing_if = "Option::is_none")]
    boot_image: Option<&'a str>,
    reason: &'static str,
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

/// The patch as the API wants it: its JSON, base64-encoded.
fn base64_json<S: Serializer>(patch: &Option<&Patch>, s: S) -> Result<S::Ok, S::Error> {
    let json = serde_json::to_vec(patch).map_err(serde::ser::Error::custom)?;
    s.serialize_str(&BASE64.encode(json))
}

fn encode(review: &ResponseReview<'_>) -> Vec<u8> {
    // Plain structs of strings and numbers: serializing cannot fail.
    serde_json::to_vec(review).unwrap_or_default()
}

/// The answer to a review: allowed, with the patch when there is one (`Updated` moves the
/// image, `RevertLoop` only records the count). Public for the benchmark that weighs it
/// against kube-core's envelope.
pub fn response_body(uid: &str, decision: &Decision) -> Vec<u8> {
    let patched = !decision.patch.0.is_empty();
    let boot_image = decision
        .target
        .as_deref()
        .filter(|_| patched && decision.reason == Reason::Updated);
    encode(&ResponseReview {
        api_version: API_VERSION,
        kind: KIND,
        response: Response {
            uid,
            allowed: true,
            status: Status {
                status: None,
                code: None,
                message: &decision.message,
                reason: None,
            },
            patch: Some(&decision.patch).filter(|_| patched),
            patch_type: patched.then_some("JSONPatch"),
            audit_annotations: Some(AuditAnnotations {
                boot_image,
                reason: decision.reason.as_str(),
            }),
            warnings: patched.then(|| [warning(decision)]),
        },
    })
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
        503 => "ServiceUnavailable",
        _ => "BadRequest",
    }
}

/// The body for a review we could not read: an AdmissionReview that says why, in the
/// shape every Kubernetes client understands (no uid: there is none to echo).
pub(crate) fn error_body(code: u16, message: &str) -> Vec<u8> {
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
            audit_annotations: None,
            warnings: None,
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
