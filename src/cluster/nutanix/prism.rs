//! Prism Central's v3 API, the calls the importer makes: images listed (`filter`, every page
//! by `offset` and `length` up to `metadata.total_matches`), read, created (from a
//! `source_uri`, or empty for an upload), their data uploaded, deleted; tasks read;
//! categories looked up. Basic auth on every call, as the machine API's client sends it.

use std::collections::BTreeMap;

use base64::Engine;
use hyper::{Method, Request, StatusCode, header};
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use super::credentials::{self, BasicAuth};
use super::error::{NutanixError, said};
use super::marker::{Marker, Seen};
use crate::cluster::importer::https::{self, Answer, Body, Https, HttpsError, encode};

/// Entities a list asks for at once (v3 answers at most 500).
const PAGE: u64 = 100;
/// No list has more pages than this: a bound on a list whose count never ends.
const MAX_PAGES: u64 = 1000;

/// An image, as Prism Central describes it (its `status` where it has one, else its `spec`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    pub uuid: String,
    pub name: Option<String>,
    /// `status.state`: `PENDING`, `COMPLETE`, `ERROR`, ...
    pub state: String,
    pub description: Option<String>,
    pub categories: BTreeMap<String, String>,
    /// The algorithm (`SHA_256`, `SHA_1`) and value Prism Central reports, lowercase.
    pub checksum: Option<(String, String)>,
    pub size: Option<u64>,
    pub source_uri: Option<String>,
    /// `metadata.owner_reference.uuid`: the user who made it.
    pub owner: Option<String>,
    /// `status.execution_context.task_uuid`: one task or several.
    pub tasks: Vec<String>,
    /// `status.message_list`, for a failed image.
    pub messages: Vec<String>,
}

impl Image {
    pub fn from_json(v: &Value) -> Option<Image> {
        let meta = v.get("metadata")?;
        let status = v.get("status").filter(|s| s.is_object());
        let spec = v.get("spec").filter(|s| s.is_object());
        let text = |key: &str| {
            status
                .and_then(|s| s.get(key))
                .or_else(|| spec.and_then(|s| s.get(key)))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let resources = |key: &str| {
            status
                .and_then(|s| s.pointer(&format!("/resources/{key}")))
                .or_else(|| spec.and_then(|s| s.pointer(&format!("/resources/{key}"))))
        };
        // What Prism Central computed, never what a create asked for (`spec`).
        let checksum = status
            .and_then(|s| s.pointer("/resources/checksum"))
            .and_then(|c| {
                let algorithm = c.get("checksum_algorithm")?.as_str()?;
                let value = c.get("checksum_value")?.as_str()?;
                Some((algorithm.to_owned(), value.to_ascii_lowercase()))
            });
        let tasks = match status.and_then(|s| s.pointer("/execution_context/task_uuid")) {
            Some(Value::String(t)) => vec![t.clone()],
            Some(Value::Array(list)) => list
                .iter()
                .filter_map(|t| t.as_str().map(str::to_owned))
                .collect(),
            _ => Vec::new(),
        };
        let messages = status
            .and_then(|s| s.get("message_list"))
            .and_then(Value::as_array)
            .map(|l| {
                l.iter()
                    .filter_map(|m| m.get("message")?.as_str().map(str::to_owned))
                    .collect::<Vec<String>>()
            })
            .unwrap_or_default();
        let categories = meta
            .get("categories")
            .and_then(Value::as_object)
            .map(|c| {
                c.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                    .collect::<BTreeMap<String, String>>()
            })
            .unwrap_or_default();
        Some(Image {
            uuid: meta.get("uuid")?.as_str()?.to_owned(),
            name: text("name"),
            state: status
                .and_then(|s| s.get("state"))
                .and_then(Value::as_str)
                .unwrap_or("PENDING")
                .to_owned(),
            description: text("description"),
            categories,
            checksum,
            owner: meta
                .pointer("/owner_reference/uuid")
                .and_then(Value::as_str)
                .map(str::to_owned),
            size: resources("size_bytes").and_then(Value::as_u64),
            source_uri: resources("source_uri")
                .and_then(Value::as_str)
                .map(str::to_owned),
            tasks,
            messages,
        })
    }

    pub fn marker(&self) -> Option<Marker> {
        self.description.as_deref().and_then(Marker::read)
    }

    /// What the rules of [`marker`](super::marker) decide on, for the credentials' user
    /// `me`.
    pub fn seen(&self, now: Option<Timestamp>, me: &str) -> Seen {
        Seen {
            name: self.name.clone(),
            state: self.state.clone(),
            marker: self.marker(),
            owner: self.owner.clone(),
            me: Some(me.to_owned()),
            now,
        }
    }
}

/// A task, as Prism Central reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Task {
    /// `QUEUED`, `RUNNING`, `SUCCEEDED`, `FAILED`, `ABORTED`, `SUSPENDED`.
    pub status: String,
    pub detail: String,
}

pub struct Prism {
    http: Https,
    /// `https://<address>:<port>/api/nutanix/v3`.
    base: String,
    authorization: String,
}

impl Prism {
    /// Prism Central at `endpoint` (`https://<address>:<port>`), as `auth`.
    pub fn new(http: Https, endpoint: &str, auth: &BasicAuth) -> Prism {
        let pair = format!("{}:{}", auth.username, auth.password);
        Prism {
            http,
            base: format!("{}/api/nutanix/v3", endpoint.trim_end_matches('/')),
            authorization: format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(pair)
            ),
        }
    }

    /// The HTTPS client, for a download that goes where Prism Central's calls go.
    pub(crate) fn http(&self) -> &Https {
        &self.http
    }

    /// A call; a read whose connection broke is sent once more (a kept-alive connection
    /// closed just as it was reused). A create is never sent twice: it could make a twin.
    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        resend: bool,
    ) -> Result<(Answer, String), NutanixError> {
        let url = format!("{}{path}", self.base);
        let mut resent = false;
        loop {
            let req = self
                .request(method.clone(), &url)
                .header(header::CONTENT_TYPE, "application/json")
                .body(body.map_or_else(https::empty, https::json))
                .map_err(|e| answer_error(&method, &url, &e.to_string()))?;
            match self.http.send(req).await {
                Err(HttpsError::Send { .. }) if resend && !resent => resent = true,
                Ok(answer) => return Ok((answer, url)),
                Err(e) => return Err(e.into()),
            }
        }
    }

    fn request(&self, method: Method, url: &str) -> hyper::http::request::Builder {
        Request::builder()
            .method(method)
            .uri(url)
            .header(header::AUTHORIZATION, &self.authorization)
            .header(header::ACCEPT, "application/json")
    }

    /// Every image the `filter` (FIQL, e.g. `name==x`) selects, and Prism Central's clock.
    pub async fn list(
        &self,
        filter: Option<&str>,
    ) -> Result<(Vec<Image>, Option<Timestamp>), NutanixError> {
        let (mut images, mut now, mut offset) = (Vec::new(), None, 0u64);
        let mut budget = https::ListBudget::default();
        for _ in 0..MAX_PAGES {
            let mut body = json!({"kind": "image", "offset": offset, "length": PAGE});
            if let Some(f) = filter {
                body["filter"] = json!(f);
            }
            let (answer, url) = self
                .call(Method::POST, "/images/list", Some(&body), true)
                .await?;
            budget.charge(&url, &answer)?;
            let page = expect(&answer, &url, "list images", &[StatusCode::OK])?;
            now = now.or_else(|| date(&answer));
            let entities = page.get("entities").and_then(Value::as_array);
            let found: Vec<Image> = entities
                .into_iter()
                .flatten()
                .filter_map(Image::from_json)
                .collect();
            let total = page
                .pointer("/metadata/total_matches")
                .and_then(Value::as_u64);
            let got = entities.map_or(0, Vec::len) as u64;
            images.extend(found);
            offset += got;
            if got == 0 || total.is_none_or(|t| offset >= t) {
                break;
            }
        }
        Ok((images, now))
    }

    /// The image `uuid` (`None`: Prism Central has no such image), and Prism Central's clock.
    pub async fn get(
        &self,
        uuid: &str,
    ) -> Result<(Option<Image>, Option<Timestamp>), NutanixError> {
        let path = format!("/images/{}", encode(uuid));
        let (answer, url) = self.call(Method::GET, &path, None, true).await?;
        if answer.status == StatusCode::NOT_FOUND {
            return Ok((None, date(&answer)));
        }
        let v = expect(
            &answer,
            &url,
            &format!("read image {uuid}"),
            &[StatusCode::OK],
        )?;
        let image = Image::from_json(&v)
            .ok_or_else(|| answer_error(&Method::GET, &url, "no metadata.uuid"))?;
        // Being deleted is as good as gone: nothing may use it or wait for it.
        let gone = ["DELETED", "DELETE_PENDING"];
        Ok((
            Some(image).filter(|i| !gone.contains(&i.state.as_str())),
            date(&answer),
        ))
    }

    /// An image made from `input` (an `image_intent_input`), and the task that makes it.
    pub async fn create(&self, input: &Value) -> Result<(Image, Option<String>), NutanixError> {
        let name = input
            .pointer("/spec/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let (answer, url) = self
            .call(Method::POST, "/images", Some(input), false)
            .await?;
        let what = format!("create image {name}");
        let v = expect(
            &answer,
            &url,
            &what,
            &[StatusCode::ACCEPTED, StatusCode::OK],
        )?;
        let image = Image::from_json(&v)
            .ok_or_else(|| answer_error(&Method::POST, &url, "no metadata.uuid"))?;
        let task = image.tasks.first().cloned();
        Ok((image, task))
    }

    /// Sends an empty image's data, streamed from `body` (`size` bytes), with its SHA-256
    /// for Prism Central to check.
    pub async fn upload(
        &self,
        uuid: &str,
        body: Body,
        size: u64,
        sha256: &str,
    ) -> Result<(), NutanixError> {
        let url = format!("{}/images/{}/file", self.base, encode(uuid));
        let req = self
            .request(Method::PUT, &url)
            .header(header::CONTENT_TYPE, "application/octet-stream")
            .header(header::CONTENT_LENGTH, size)
            .header("X-Nutanix-Checksum-Type", "SHA_256")
            .header("X-Nutanix-Checksum-Bytes", sha256)
            .body(body)
            .map_err(|e| answer_error(&Method::PUT, &url, &e.to_string()))?;
        let answer = self.http.send(req).await?;
        expect(
            &answer,
            &url,
            &format!("upload image {uuid}"),
            &[StatusCode::OK, StatusCode::ACCEPTED, StatusCode::NO_CONTENT],
        )
        .map(drop)
    }

    /// Deletes the image `uuid` (already gone is done); the task that deletes it.
    pub async fn delete(&self, uuid: &str) -> Result<Option<String>, NutanixError> {
        let path = format!("/images/{}", encode(uuid));
        let (answer, url) = self.call(Method::DELETE, &path, None, true).await?;
        if answer.status == StatusCode::NOT_FOUND {
            return Ok(None);
        }
        let v = expect(
            &answer,
            &url,
            &format!("delete image {uuid}"),
            &[StatusCode::ACCEPTED, StatusCode::OK],
        )?;
        Ok(v.pointer("/status/execution_context/task_uuid")
            .and_then(Value::as_str)
            .map(str::to_owned))
    }

    /// The task `uuid`.
    pub async fn task(&self, uuid: &str) -> Result<Task, NutanixError> {
        let path = format!("/tasks/{}", encode(uuid));
        let (answer, url) = self.call(Method::GET, &path, None, true).await?;
        let v = expect(
            &answer,
            &url,
            &format!("read task {uuid}"),
            &[StatusCode::OK],
        )?;
        let text = |k: &str| {
            v.get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let status = text("status");
        if status.is_empty() {
            return Err(answer_error(&Method::GET, &url, "no status"));
        }
        let detail = [text("error_detail"), text("progress_message")]
            .into_iter()
            .filter(|t| !t.is_empty())
            .collect::<Vec<_>>()
            .join("; ");
        Ok(Task { status, detail })
    }

    /// The credentials' user's uuid (`GET /users/me`): the owner of what it creates.
    pub async fn me(&self) -> Result<String, NutanixError> {
        let (answer, url) = self.call(Method::GET, "/users/me", None, true).await?;
        let v = expect(&answer, &url, "read the user", &[StatusCode::OK])?;
        v.pointer("/metadata/uuid")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| answer_error(&Method::GET, &url, "no metadata.uuid"))
    }

    /// Whether the category `key: value` exists (an image can carry only those that do).
    pub async fn category_exists(&self, key: &str, value: &str) -> Result<bool, NutanixError> {
        let path = format!("/categories/{}/{}", encode(key), encode(value));
        let (answer, url) = self.call(Method::GET, &path, None, true).await?;
        if answer.status == StatusCode::NOT_FOUND {
            return Ok(false);
        }
        expect(
            &answer,
            &url,
            &format!("read category {key}: {value}"),
            &[StatusCode::OK],
        )
        .map(|_| true)
    }
}

/// The answer's JSON when its status is one of `ok`; else what Prism Central said.
fn expect(
    answer: &Answer,
    url: &str,
    what: &str,
    ok: &[StatusCode],
) -> Result<Value, NutanixError> {
    if answer.status == StatusCode::UNAUTHORIZED {
        // Prism Central answers a 401 with a page, not v3's error body.
        let json = serde_json::from_str::<Value>(&answer.text).is_ok();
        return Err(NutanixError::Unauthorized {
            secret: format!(
                "Secret {}/{}",
                credentials::SECRET_NAMESPACE,
                credentials::SECRET_NAME
            ),
            url: url.to_owned(),
            said: if json {
                said(&answer.text)
            } else {
                String::new()
            },
        });
    }
    if !ok.contains(&answer.status) {
        return Err(NutanixError::Prism {
            what: what.to_owned(),
            url: url.to_owned(),
            status: answer.status.as_u16(),
            said: said(&answer.text),
        });
    }
    if answer.text.trim().is_empty() {
        return Ok(Value::Null);
    }
    serde_json::from_str(&answer.text).map_err(|e| NutanixError::Answer {
        what: what.to_owned(),
        url: url.to_owned(),
        why: format!("not JSON: {e}"),
    })
}

fn answer_error(method: &Method, url: &str, why: &str) -> NutanixError {
    NutanixError::Answer {
        what: method.to_string(),
        url: url.to_owned(),
        why: why.to_owned(),
    }
}

/// The server's clock, from its `Date` header.
fn date(answer: &Answer) -> Option<Timestamp> {
    let text = answer.headers.get(header::DATE)?.to_str().ok()?;
    k8s_openapi::jiff::fmt::rfc2822::parse(text)
        .ok()
        .map(|z| z.timestamp())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_image_reads_from_its_status_then_its_spec() {
        let v = json!({
            "api_version": "3.1",
            "metadata": {"kind": "image", "uuid": "1b0d", "categories": {"kubernetes-io-cluster-a": "owned"}},
            "spec": {"name": "a-rhcos", "description": "d", "resources": {"image_type": "DISK_IMAGE"}},
            "status": {"name": "a-rhcos", "state": "COMPLETE", "resources": {
                "size_bytes": 196616, "checksum": {"checksum_algorithm": "SHA_256", "checksum_value": "AB"}},
                "execution_context": {"task_uuid": ["t1", "t2"]}}
        });
        let image = Image::from_json(&v).unwrap();
        assert_eq!(image.owner, None);
        assert_eq!(image.state, "COMPLETE");
        assert_eq!(image.description.as_deref(), Some("d"));
        assert_eq!(image.checksum, Some(("SHA_256".into(), "ab".into())));
        assert_eq!(image.size, Some(196616));
        assert_eq!(image.tasks, ["t1", "t2"]);
        assert_eq!(image.categories["kubernetes-io-cluster-a"], "owned");
        let created = json!({"metadata": {"uuid": "2c"}, "spec": {"name": "n", "resources": {}},
            "status": {"state": "PENDING", "execution_context": {"task_uuid": "t3"}}});
        let created = Image::from_json(&created).unwrap();
        assert_eq!(
            (created.name.as_deref(), created.tasks.as_slice()),
            (Some("n"), &["t3".to_owned()][..])
        );
        assert_eq!(Image::from_json(&json!({"spec": {}})), None);
        // A checksum a create asked for is no proof: only Prism Central's own counts.
        let asked = json!({"metadata": {"uuid": "3d", "owner_reference": {"kind": "user", "uuid": "u1"}},
            "spec": {"name": "n", "resources": {"checksum": {"checksum_algorithm": "SHA_256", "checksum_value": "ab"}}},
            "status": {"state": "COMPLETE", "resources": {}}});
        let asked = Image::from_json(&asked).unwrap();
        assert_eq!((asked.checksum, asked.owner.as_deref()), (None, Some("u1")));
    }
}
