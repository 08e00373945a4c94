//! What goes wrong, at the module's boundary: each error names what a person needs to act
//! on (the Secret, the URL, the image, what Keystone or Glance said).

use super::marker::Keep;
pub use crate::cluster::cause::cause;
use crate::cluster::importer::artifact::ArtifactError;
use crate::cluster::importer::https::HttpsError;

#[derive(Debug, Clone, thiserror::Error)]
pub enum OpenStackError {
    #[error("the OpenStack credentials ({secret}): {why}")]
    Credentials { secret: String, why: String },
    #[error("the OpenStack CA bundle {from}: {why}")]
    CaBundle { from: String, why: String },
    /// The way there and back: plain http refused, an answer too large, a send that failed.
    #[error(transparent)]
    Https(#[from] HttpsError),
    #[error("Keystone {url}: HTTP {status}: {said}")]
    Keystone {
        url: String,
        status: u16,
        said: String,
    },
    #[error(
        "the Keystone catalog has no {interface} image endpoint{} (it has: {})",
        .region.as_ref().map(|r| format!(" in region {r}")).unwrap_or_default(),
        if .found.is_empty() { "none".to_owned() } else { .found.join(", ") }
    )]
    NoEndpoint {
        region: Option<String>,
        interface: &'static str,
        found: Vec<String>,
    },
    #[error("Glance {what} ({url}): HTTP {status}: {said}")]
    Glance {
        what: String,
        url: String,
        status: u16,
        said: String,
    },
    #[error(
        "Glance {what}: cut short ({sent}): the image is deleted once Glance says that upload stopped, and imported again"
    )]
    Interrupted {
        what: String,
        sent: Box<OpenStackError>,
    },
    #[error("Glance {what} ({url}): the answer is not what Glance answers: {why}")]
    Answer {
        what: String,
        url: String,
        why: String,
    },
    #[error(transparent)]
    Artifact(#[from] ArtifactError),
    #[error(
        "the Glance image name {name} is taken by {}, not marked as ours (bootimage_webhook_* properties): left alone, and nothing is imported under that name (the machine API needs image names to be unique): remove or rename {}",
        .ids.join(", "), if .ids.len() == 1 { "it" } else { "them" }
    )]
    NameTaken { name: String, ids: Vec<String> },
    #[error(
        "the Glance image name {name} is also held by {}, which carry our marker but are not ours (another project's, or data other than the stream's by Glance's own hash): look-alikes, left alone, and nothing is imported or moved to under that name: remove or rename them",
        .images.join(", ")
    )]
    LookAlike { name: String, images: Vec<String> },
    #[error("Glance image {name} ({id}) of ours is {why}: it is left alone")]
    Busy { name: String, id: String, why: Keep },
    #[error("Glance image {name} ({id}) went {status} after its upload: not used")]
    Failed {
        name: String,
        id: String,
        status: String,
    },
    #[error(
        "Glance image {name} ({id}) holds other data than was sent ({what}: Glance says {glance}, we sent {sent}): deleted"
    )]
    Mismatch {
        name: String,
        id: String,
        what: &'static str,
        glance: String,
        sent: String,
    },
    #[error(
        "Glance image {name} ({id}): not active within {limit:?} of its upload (status {status})"
    )]
    NotActive {
        name: String,
        id: String,
        status: String,
        limit: std::time::Duration,
    },
}

impl OpenStackError {
    /// The stream's artifact itself is wrong (not the network): worth a Warning Event,
    /// and not downloaded again until the stream names another.
    pub fn is_bad_artifact(&self) -> bool {
        matches!(self, OpenStackError::Artifact(a) if a.is_bad())
    }
}

/// What Glance or Keystone said in an error answer: the message of its JSON (`{"error":
/// {"message"}}` or Glance's `{"message"}`), else the text, shortened.
pub fn said(body: &str) -> String {
    let json: Option<serde_json::Value> = serde_json::from_str(body).ok();
    let message = json.as_ref().and_then(|v| {
        v.pointer("/error/message")
            .or_else(|| v.get("message"))
            .or_else(|| v.get("title"))
            .and_then(|m| m.as_str())
    });
    let text = match message {
        Some(m) => m.to_owned(),
        None => strip_tags(body),
    };
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match text.char_indices().nth(400) {
        Some((at, _)) => format!("{}...", &text[..at]),
        None => text,
    }
}

/// Glance's error pages are HTML (webob's): the words, without the markup.
fn strip_tags(body: &str) -> String {
    let mut out = String::with_capacity(body.len());
    let mut in_tag = false;
    for c in body.chars() {
        match c {
            '<' => in_tag = true,
            '>' => {
                in_tag = false;
                out.push(' ');
            }
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_the_services_said_is_read_from_their_answers() {
        assert_eq!(
            said(
                r#"{"error": {"code": 401, "message": "The request you have made requires authentication.", "title": "Unauthorized"}}"#
            ),
            "The request you have made requires authentication."
        );
        assert_eq!(
            said(
                "<html>\n <head><title>409 Conflict</title></head>\n <body>\n  <h1>409 Conflict</h1>\n  Image status transition from saving to saving is not allowed<br /><br />\n </body>\n</html>"
            ),
            "409 Conflict 409 Conflict Image status transition from saving to saving is not allowed"
        );
        assert!(said(&"x".repeat(1000)).ends_with("..."));
        assert_eq!(said(""), "");
    }

    #[test]
    fn a_name_taken_by_an_image_not_ours_names_it_and_the_way_out() {
        let e = OpenStackError::NameTaken {
            name: "ci-abc12-rhcos-9.8.20260428-0".into(),
            ids: vec!["1b0d".into()],
        };
        let text = e.to_string();
        assert!(text.contains("taken by 1b0d, not marked as ours"), "{text}");
        assert!(text.contains("remove or rename it"), "{text}");
    }
}
