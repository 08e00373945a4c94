//! What goes wrong, at the module's boundary: each error names what a person needs to act
//! on (the Secret, Infrastructure, the URL, the image, what Prism Central said).

use super::marker::Keep;
pub use crate::cluster::cause::cause;
use crate::cluster::importer::artifact::ArtifactError;
use crate::cluster::importer::https::HttpsError;

#[derive(Debug, Clone, thiserror::Error)]
pub enum NutanixError {
    #[error("the Nutanix credentials ({secret}): {why}")]
    Credentials { secret: String, why: String },
    #[error(
        "Prism Central's endpoint (Infrastructure cluster spec.platformSpec.nutanix.prismCentral): {why}"
    )]
    Endpoint { why: String },
    /// The way there and back: plain http refused, an answer too large, a send that failed.
    #[error(transparent)]
    Https(#[from] HttpsError),
    #[error("Prism Central {what} ({url}): HTTP {status}: {said}")]
    Prism {
        what: String,
        url: String,
        status: u16,
        said: String,
    },
    #[error("Prism Central {what} ({url}): the answer is not what Prism Central answers: {why}")]
    Answer {
        what: String,
        url: String,
        why: String,
    },
    #[error("Prism Central task {task} ({what}) ended {status}: {detail}")]
    Task {
        what: String,
        task: String,
        status: String,
        detail: String,
    },
    #[error("Prism Central task {task} ({what}): not done within {limit:?}")]
    TaskTimeout {
        what: String,
        task: String,
        limit: std::time::Duration,
    },
    #[error(
        "the Prism Central image name {name} is taken by {}, not marked as ours (bootimage-webhook in its description): left alone, and nothing is imported under that name (the machine API needs image names to be unique): remove or rename {}",
        .uuids.join(", "), if .uuids.len() == 1 { "it" } else { "them" }
    )]
    NameTaken { name: String, uuids: Vec<String> },
    #[error(
        "Prism Central image {name} is also held by {}, which carry our marker but were not made by the credentials' user: look-alikes, left alone, and nothing is imported or moved to under that name: remove or rename them",
        .images.join(", ")
    )]
    LookAlike { name: String, images: Vec<String> },
    #[error(
        "Prism Central holds {} under a name the machine API could take for {name} (the same name in another case, or one its name== filter selects): left alone, and nothing is imported or moved to (the machine API needs the name to select one image): rename {}",
        .images.join(", "), if .images.len() == 1 { "it" } else { "them" }
    )]
    NearName { name: String, images: Vec<String> },
    #[error(
        "Prism Central refused the credentials of {secret} ({url}): HTTP 401{}",
        if .said.is_empty() { String::new() } else { format!(": {}", .said) }
    )]
    Unauthorized {
        secret: String,
        url: String,
        said: String,
    },
    #[error("Prism Central image {name} ({uuid}) of ours is {why}: it is left alone")]
    Busy {
        name: String,
        uuid: String,
        why: Keep,
    },
    #[error(
        "Prism Central image {name} ({uuid}) holds other data than the stream's ({what}: Prism Central says {prism}, the stream says {stream}): not used"
    )]
    Mismatch {
        name: String,
        uuid: String,
        what: &'static str,
        prism: String,
        stream: String,
    },
    #[error(transparent)]
    Artifact(#[from] ArtifactError),
    #[error("Prism Central image {name} ({uuid}) is {state} after its import{}: not used", if .said.is_empty() { String::new() } else { format!(" ({})", .said) })]
    Failed {
        name: String,
        uuid: String,
        state: String,
        said: String,
    },
}

impl NutanixError {
    /// The stream's qcow2 itself is wrong (its checksum, its size), downloaded here or as
    /// Prism Central reports it: only a person can unblock the import.
    pub fn is_bad_artifact(&self) -> bool {
        match self {
            NutanixError::Artifact(a) => a.is_bad(),
            NutanixError::Mismatch { .. } => true,
            _ => false,
        }
    }
}

/// What Prism Central said in an error answer: the messages of v3's `message_list` (with
/// their reasons), else its `message`, else the text, shortened.
pub fn said(body: &str) -> String {
    let json: Option<serde_json::Value> = serde_json::from_str(body).ok();
    let messages: Vec<String> = json
        .as_ref()
        .and_then(|v| v.get("message_list"))
        .and_then(|l| l.as_array())
        .map(|list| {
            list.iter()
                .filter_map(|m| {
                    let text = m.get("message")?.as_str()?;
                    Some(match m.get("reason").and_then(|r| r.as_str()) {
                        Some(reason) => format!("{reason}: {text}"),
                        None => text.to_owned(),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    let text = match (
        messages.is_empty(),
        json.as_ref().and_then(|v| v.get("message")),
    ) {
        (false, _) => messages.join("; "),
        (true, Some(m)) => m.as_str().map_or_else(|| m.to_string(), str::to_owned),
        (true, None) => body.to_owned(),
    };
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match text.char_indices().nth(400) {
        Some((at, _)) => format!("{}...", &text[..at]),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_prism_central_said_is_read_from_its_answers() {
        assert_eq!(
            said(
                r#"{"api_version": "3.1", "code": 404, "kind": "image", "state": "ERROR", "message_list": [{"message": "Image 1b0d not found", "reason": "ENTITY_NOT_FOUND"}]}"#
            ),
            "ENTITY_NOT_FOUND: Image 1b0d not found"
        );
        assert_eq!(said(r#"{"message": "Unauthorized"}"#), "Unauthorized");
        assert_eq!(said("plain\n text"), "plain text");
        assert!(said(&"x".repeat(1000)).ends_with("..."));
    }

    #[test]
    fn a_name_taken_by_an_image_not_ours_names_it_and_the_way_out() {
        let e = NutanixError::NameTaken {
            name: "ci-abc12-rhcos-9.8.20260428-0".into(),
            uuids: vec!["1b0d".into()],
        };
        let text = e.to_string();
        assert!(text.contains("taken by 1b0d, not marked as ours"), "{text}");
        assert!(text.contains("remove or rename it"), "{text}");
    }
}
