//! The tag the installer attaches to everything of a cluster: tag `<infra-id>` in category
//! `openshift-<infra-id>`, through vCenter's tagging REST API (vAPI), which the SOAP API
//! does not cover.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request, header};
use serde_json::{Value, json};

use super::https::{Https, HttpsError};
use super::vim::Moref;

const CALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

#[derive(Debug, thiserror::Error)]
pub enum TagError {
    #[error(transparent)]
    Http(#[from] HttpsError),
    #[error("tagging {what}: HTTP {status}: {body}")]
    Status {
        what: String,
        status: u16,
        body: String,
    },
    #[error("no tag {tag} in category {category} (the installer makes them)")]
    Missing { category: String, tag: String },
}

/// A vAPI session with a vCenter.
pub struct Tagging<'h> {
    https: &'h Https,
    base: String,
    session: String,
}

impl<'h> Tagging<'h> {
    pub async fn login(
        https: &'h Https,
        server: &str,
        user: &str,
        password: &str,
    ) -> Result<Tagging<'h>, TagError> {
        use base64::Engine;
        let mut t = Tagging {
            https,
            base: format!("https://{server}/rest/com/vmware/cis"),
            session: String::new(),
        };
        let basic = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        let value = t
            .call(
                Method::POST,
                "/session",
                None,
                Some(format!("Basic {basic}")),
            )
            .await?;
        t.session = value.as_str().unwrap_or_default().to_owned();
        Ok(t)
    }

    /// Attaches the cluster's tag (`<infra-id>` in `openshift-<infra-id>`) to `vm`.
    pub async fn attach_cluster_tag(&self, infra_id: &str, vm: &Moref) -> Result<(), TagError> {
        let category_name = format!("openshift-{infra_id}");
        let missing = || TagError::Missing {
            category: category_name.clone(),
            tag: infra_id.to_owned(),
        };
        let mut category = None;
        for id in ids(&self
            .call(Method::GET, "/tagging/category", None, None)
            .await?)
        {
            let path = format!("/tagging/category/id:{id}");
            if self.call(Method::GET, &path, None, None).await?["name"] == category_name.as_str() {
                category = Some(id);
                break;
            }
        }
        let category = category.ok_or_else(missing)?;
        let list = format!("/tagging/tag/id:{category}?~action=list-tags-for-category");
        let mut tag = None;
        for id in ids(&self.call(Method::POST, &list, None, None).await?) {
            let path = format!("/tagging/tag/id:{id}");
            if self.call(Method::GET, &path, None, None).await?["name"] == infra_id {
                tag = Some(id);
                break;
            }
        }
        let tag = tag.ok_or_else(missing)?;
        self.attach(&tag, vm).await
    }

    /// Attaches the tag of that id to `vm`.
    pub async fn attach(&self, tag: &str, vm: &Moref) -> Result<(), TagError> {
        let object = json!({"object_id": {"id": vm.value, "type": vm.kind}});
        let attach = format!("/tagging/tag-association/id:{tag}?~action=attach");
        self.call(Method::POST, &attach, Some(object), None).await?;
        Ok(())
    }

    pub async fn logout(&self) {
        let _ = self.call(Method::DELETE, "/session", None, None).await;
    }

    /// One call; the answer's `value`.
    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
        authorization: Option<String>,
    ) -> Result<Value, TagError> {
        let mut req = Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base))
            .header(header::CONTENT_TYPE, "application/json");
        if let Some(auth) = authorization {
            req = req.header(header::AUTHORIZATION, auth);
        } else {
            req = req.header("vmware-api-session-id", &self.session);
        }
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let req = req
            .body(
                Full::new(Bytes::from(body))
                    .map_err(|never| match never {})
                    .boxed_unsync(),
            )
            .map_err(|e| TagError::Status {
                what: path.to_owned(),
                status: 0,
                body: e.to_string(),
            })?;
        let sent = tokio::time::timeout(CALL_TIMEOUT, self.https.send(req, None)).await;
        let (status, text) = sent.map_err(|_| TagError::Status {
            what: path.to_owned(),
            status: 0,
            body: format!("no answer within {CALL_TIMEOUT:?}"),
        })??;
        if !status.is_success() {
            return Err(TagError::Status {
                what: path.to_owned(),
                status: status.as_u16(),
                body: text.chars().take(300).collect(),
            });
        }
        let answer: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        Ok(answer.get("value").cloned().unwrap_or(Value::Null))
    }
}

fn ids(list: &Value) -> Vec<String> {
    crate::core::lenient::strings(Some(list))
}
