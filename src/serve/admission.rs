//! AdmissionReview bytes in, AdmissionReview bytes out (behaviour §6). Transport-free, so the
//! server, the tests and the benchmark all drive the same function.

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::core::decision::{self, Decision, Reason};
use crate::core::snapshot::Snapshot;

const API_VERSION: &str = "admission.k8s.io/v1";
const KIND: &str = "AdmissionReview";
/// Kubernetes truncates warnings past 256 characters and asks for at most 120.
const MAX_WARNING: usize = 120;

/// Why a body is not an AdmissionReview we can answer. Each maps to HTTP 400.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    #[error("request body is not JSON: {0}")]
    NotJson(serde_json::Error),
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

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawReview {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    request: Option<RawRequest>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct Gvk {
    group: String,
    kind: String,
}

/// Only the fields we read; serde skips the rest (oldObject included) without building it.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawRequest {
    #[serde(default)]
    uid: String,
    #[serde(default)]
    kind: Gvk,
    #[serde(default)]
    sub_resource: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    operation: String,
    #[serde(default)]
    dry_run: Option<bool>,
    #[serde(default)]
    object: Option<Value>,
}

/// A request answered: the response body plus what the logs and metrics need.
#[derive(Debug)]
pub struct Reviewed {
    pub body: Vec<u8>,
    pub decision: Decision,
    pub uid: String,
    pub namespace: String,
    pub name: String,
    pub operation: String,
    pub dry_run: bool,
}

/// Answer one AdmissionReview. Never denies: a well-formed review always gets
/// `allowed: true`, with a patch when the boot image moves.
pub fn review(body: &[u8], snap: &Snapshot) -> Result<Reviewed, ReviewError> {
    let raw: RawReview = serde_json::from_slice(body).map_err(|e| match e.classify() {
        serde_json::error::Category::Data => ReviewError::NotReview(e),
        _ => ReviewError::NotJson(e),
    })?;
    if raw.api_version != API_VERSION || raw.kind != KIND {
        return Err(ReviewError::WrongVersion {
            api_version: raw.api_version,
            kind: raw.kind,
        });
    }
    let req = raw.request.ok_or(ReviewError::MissingRequest)?;
    if req.uid.is_empty() {
        return Err(ReviewError::MissingUid);
    }
    let decision = if req.kind.group != "machine.openshift.io" || req.kind.kind != "MachineSet" {
        Decision::not_applicable(format!(
            "not a MachineSet ({}/{})",
            req.kind.group, req.kind.kind
        ))
    } else if req.sub_resource.as_deref().is_some_and(|s| !s.is_empty()) {
        Decision::not_applicable("subresource requests are not mutated")
    } else if req.operation != "CREATE" && req.operation != "UPDATE" {
        Decision::not_applicable(format!("operation {} is not mutated", req.operation))
    } else if let Some(object) = &req.object {
        decision::decide(object, snap)
    } else {
        Decision::not_applicable("request has no object")
    };
    let name = req
        .name
        .filter(|n| !n.is_empty())
        .or_else(|| {
            // CREATE with generateName has no name yet.
            req.object
                .as_ref()
                .and_then(|o| {
                    o.pointer("/metadata/name")
                        .or(o.pointer("/metadata/generateName"))
                })
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .unwrap_or_default();
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

fn response_body(uid: &str, decision: &Decision) -> Vec<u8> {
    let mut response = Response {
        uid,
        allowed: true,
        status: Status {
            status: None,
            code: None,
            message: &decision.message,
            reason: None,
        },
        patch: None,
        patch_type: None,
        audit_annotations: BTreeMap::from([("reason", decision.reason.as_str())]),
        warnings: Vec::new(),
    };
    if decision.reason == Reason::Updated && !decision.patch.0.is_empty() {
        if let Some(target) = &decision.target {
            response.audit_annotations.insert("boot-image", target);
        }
        response.warnings.push(warning(decision));
        let ops = serde_json::to_vec(&decision.patch).unwrap_or_default();
        response.patch = Some(BASE64.encode(ops));
        response.patch_type = Some("JSONPatch");
    }
    encode(&ResponseReview {
        api_version: API_VERSION,
        kind: KIND,
        response,
    })
}

/// `boot image set to <name> (was <name>)`, cut to the length Kubernetes asks for.
fn warning(decision: &Decision) -> String {
    let short = |s: &str| s.rsplit('/').next().unwrap_or(s).to_owned();
    let target = decision.target.as_deref().map(short).unwrap_or_default();
    let mut w = format!("bootimage-webhook: boot image set to {target}");
    if let Some(current) = decision.current.as_deref().filter(|c| !c.is_empty()) {
        w.push_str(&format!(" (was {})", short(current)));
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
