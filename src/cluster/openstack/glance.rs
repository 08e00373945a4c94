//! Glance's image API v2: list (filtered by properties, every page through `next`), read,
//! create (properties and all, in one call), upload the data (`PUT .../file`, streamed),
//! delete. Every call carries Keystone's token; a token Glance refuses is renewed once.

use std::collections::BTreeMap;

use hyper::{Method, Request, StatusCode, header};
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use super::error::{OpenStackError, said};
use super::keystone::Keystone;
use super::marker::{Marker, Seen};
use crate::cluster::importer::https::{self, Answer, Body, HttpsError, encode};

/// No list has more pages than this: a bound on a list whose next links never end.
const MAX_PAGES: usize = 1000;

/// An image, as Glance describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    pub id: String,
    pub name: Option<String>,
    pub status: String,
    /// Every property whose value is a string (ours among them).
    pub props: BTreeMap<String, String>,
    pub size: Option<u64>,
}

impl Image {
    pub fn from_json(v: &Value) -> Option<Image> {
        let obj = v.as_object()?;
        let props = obj
            .iter()
            .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_owned())))
            .collect();
        Some(Image {
            id: obj.get("id")?.as_str()?.to_owned(),
            name: obj.get("name").and_then(Value::as_str).map(str::to_owned),
            status: obj.get("status")?.as_str()?.to_owned(),
            props,
            size: obj.get("size").and_then(Value::as_u64),
        })
    }

    pub fn marker(&self) -> Option<Marker> {
        Marker::read(&self.props)
    }

    /// What the rules of [`marker`](super::marker) decide on. An image another project
    /// owns (a public or shared one) is never ours, whatever its properties.
    pub fn seen(&self, now: Option<Timestamp>, project: Option<&str>) -> Seen {
        Seen {
            name: self.name.clone(),
            status: self.status.clone(),
            marker: self.marker(),
            owned: self.owned_by(project),
            owner: self.prop("owner").map(str::to_owned),
            now,
        }
    }

    /// Owned by `project` (the credentials' project).
    pub fn owned_by(&self, project: Option<&str>) -> bool {
        project.is_some_and(|p| self.prop("owner") == Some(p))
    }

    pub fn prop(&self, key: &str) -> Option<&str> {
        self.props.get(key).map(String::as_str)
    }
}

pub struct Glance {
    pub keystone: Keystone,
}

impl Glance {
    pub fn new(keystone: Keystone) -> Glance {
        Glance { keystone }
    }

    /// A call with the token (renewed once when Glance refuses it); the answer and the URL.
    /// A read or a delete whose connection broke is sent once more: a kept-alive connection
    /// that the server or a proxy closed just as it was reused breaks so, before anything was
    /// done. A create is never sent twice (it could make a twin).
    async fn call(
        &mut self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(Answer, String), OpenStackError> {
        let (mut renewed, mut resent) = (false, false);
        let idempotent = method == Method::GET || method == Method::DELETE;
        loop {
            let token = self.keystone.token().await?;
            let url = format!("{}{path}", token.glance);
            let mut req = Request::builder()
                .method(method.clone())
                .uri(&url)
                .header("x-auth-token", &token.value)
                .header(header::ACCEPT, "application/json");
            if body.is_some() {
                req = req.header(header::CONTENT_TYPE, "application/json");
            }
            let req = req
                .body(body.map_or_else(https::empty, https::json))
                .map_err(|e| answer_error(&method, &url, &e.to_string()))?;
            let answer = match self.keystone.http.send(req).await {
                Err(HttpsError::Send { .. }) if idempotent && !resent => {
                    resent = true;
                    continue;
                }
                sent => sent?,
            };
            if answer.status == StatusCode::UNAUTHORIZED && !renewed {
                self.keystone.forget();
                renewed = true;
                continue;
            }
            return Ok((answer, url));
        }
    }

    /// Every image with these property values (Glance's filters: `name`, `status` or any
    /// property), and Glance's clock when it answered.
    pub async fn list(
        &mut self,
        filters: &[(&str, &str)],
    ) -> Result<(Vec<Image>, Option<Timestamp>), OpenStackError> {
        let query: Vec<String> = filters
            .iter()
            .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
            .collect();
        let mut path = format!("/v2/images?{}", query.join("&"));
        let mut images = Vec::new();
        let mut now = None;
        let mut budget = https::ListBudget::default();
        for _ in 0..MAX_PAGES {
            let (answer, url) = self.call(Method::GET, &path, None).await?;
            budget.charge(&url, &answer)?;
            let page = expect(&answer, &url, "list images", &[StatusCode::OK])?;
            now = now.or_else(|| date(&answer));
            let found = page
                .get("images")
                .and_then(Value::as_array)
                .ok_or_else(|| answer_error(&Method::GET, &url, "no images array"))?;
            images.extend(found.iter().filter_map(Image::from_json));
            match next(&page, &path) {
                Some(n) => path = n,
                None => return Ok((images, now)),
            }
        }
        Ok((images, now))
    }

    /// The image `id` (`None`: Glance has no such image, or it is deleted), and Glance's
    /// clock when it answered.
    pub async fn get(
        &mut self,
        id: &str,
    ) -> Result<(Option<Image>, Option<Timestamp>), OpenStackError> {
        let path = format!("/v2/images/{}", encode(id));
        let (answer, url) = self.call(Method::GET, &path, None).await?;
        if answer.status == StatusCode::NOT_FOUND {
            return Ok((None, date(&answer)));
        }
        let v = expect(
            &answer,
            &url,
            &format!("read image {id}"),
            &[StatusCode::OK],
        )?;
        let image = Image::from_json(&v)
            .ok_or_else(|| answer_error(&Method::GET, &url, "no id or status"))?;
        let image = (image.status != "deleted").then_some(image);
        Ok((image, date(&answer)))
    }

    /// The project the token is scoped to (the owner of what is created with it).
    pub async fn project(&mut self) -> Result<Option<String>, OpenStackError> {
        Ok(self.keystone.token().await?.project_id)
    }

    /// A private qcow2 image `name` with `props` and `tags` set from its creation.
    pub async fn create(
        &mut self,
        name: &str,
        props: &BTreeMap<String, String>,
        tags: &[String],
    ) -> Result<Image, OpenStackError> {
        let mut body = json!({
            "name": name,
            "disk_format": "qcow2",
            "container_format": "bare",
            "visibility": "private",
            "tags": tags,
        });
        for (k, v) in props {
            body[k.as_str()] = json!(v);
        }
        let (answer, url) = self.call(Method::POST, "/v2/images", Some(&body)).await?;
        let what = format!("create image {name}");
        let v = expect(&answer, &url, &what, &[StatusCode::CREATED, StatusCode::OK])?;
        Image::from_json(&v).ok_or_else(|| answer_error(&Method::POST, &url, "no id or status"))
    }

    /// Sends the image's data, streamed from `body` (`size` bytes).
    pub async fn upload(
        &mut self,
        image: &Image,
        body: Body,
        size: u64,
    ) -> Result<(), OpenStackError> {
        let token = self.keystone.token().await?;
        let url = format!("{}/v2/images/{}/file", token.glance, encode(&image.id));
        let req = Request::builder()
            .method(Method::PUT)
            .uri(&url)
            .header("x-auth-token", &token.value)
            .header(header::CONTENT_TYPE, "application/octet-stream")
            .header(header::CONTENT_LENGTH, size)
            .body(body)
            .map_err(|e| answer_error(&Method::PUT, &url, &e.to_string()))?;
        let what = format!(
            "upload image {} ({})",
            image.name.as_deref().unwrap_or(""),
            image.id
        );
        let answer = match self.keystone.http.send(req).await {
            Ok(answer) => answer,
            Err(e @ HttpsError::Send { .. }) => {
                return Err(OpenStackError::Interrupted {
                    what,
                    sent: Box::new(OpenStackError::Https(e)),
                });
            }
            Err(e) => return Err(e.into()),
        };
        expect(
            &answer,
            &url,
            &what,
            &[StatusCode::NO_CONTENT, StatusCode::OK],
        )
        .map(drop)
    }

    /// Deletes the image `id` (already gone is done).
    pub async fn delete(&mut self, id: &str) -> Result<(), OpenStackError> {
        let path = format!("/v2/images/{}", encode(id));
        let (answer, url) = self.call(Method::DELETE, &path, None).await?;
        let ok = [
            StatusCode::NO_CONTENT,
            StatusCode::OK,
            StatusCode::NOT_FOUND,
        ];
        expect(&answer, &url, &format!("delete image {id}"), &ok).map(drop)
    }
}

/// The answer's JSON when its status is one of `ok`; else what Glance said.
fn expect(
    answer: &Answer,
    url: &str,
    what: &str,
    ok: &[StatusCode],
) -> Result<Value, OpenStackError> {
    if !ok.contains(&answer.status) {
        return Err(OpenStackError::Glance {
            what: what.to_owned(),
            url: url.to_owned(),
            status: answer.status.as_u16(),
            said: said(&answer.text),
        });
    }
    if answer.text.trim().is_empty() {
        return Ok(Value::Null);
    }
    serde_json::from_str(&answer.text).map_err(|e| OpenStackError::Answer {
        what: what.to_owned(),
        url: url.to_owned(),
        why: format!("not JSON: {e}"),
    })
}

fn answer_error(method: &Method, url: &str, why: &str) -> OpenStackError {
    OpenStackError::Answer {
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

/// The next page's path (Glance gives it from `/v2`, relative to the endpoint), unless it
/// is none or the page just read.
pub fn next(page: &Value, current: &str) -> Option<String> {
    let next = page.get("next")?.as_str()?;
    (next.starts_with("/v2/") && next != current).then(|| next.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_are_followed_through_next_and_never_in_a_loop() {
        let first = "/v2/images?bootimage_webhook_infrastructure_name=infra1&limit=1";
        let page = json!({"images": [], "next": format!("{first}&marker=5fc4"), "first": first});
        assert_eq!(
            next(&page, first).as_deref(),
            Some(&*format!("{first}&marker=5fc4"))
        );
        assert_eq!(next(&json!({"images": [], "first": first}), first), None);
        // The same page again, or somewhere that is not the image list: stop.
        assert_eq!(next(&json!({"next": first}), first), None);
        assert_eq!(
            next(&json!({"next": "https://elsewhere/v2/images"}), first),
            None
        );
        assert_eq!(next(&json!({"next": 3}), first), None);
    }

    #[test]
    fn an_image_reads_with_its_string_properties() {
        let v = json!({
            "id": "1b0d", "name": "n", "status": "active", "size": 196616,
            "bootimage_webhook_release": "9.8.1", "tags": [], "min_ram": 0, "os_hidden": false
        });
        let image = Image::from_json(&v).unwrap();
        assert_eq!(image.size, Some(196616));
        assert_eq!(image.prop("bootimage_webhook_release"), Some("9.8.1"));
        assert_eq!(image.prop("min_ram"), None);
        assert_eq!(image.marker(), None);
        assert_eq!(Image::from_json(&json!({"name": "no id"})), None);
        assert_eq!(Image::from_json(&json!([1])), None);
    }

    #[test]
    fn an_image_of_another_project_is_never_ours_whatever_it_says() {
        let mut v = json!({"id": "1b0d", "name": "n", "status": "active", "owner": "p1"});
        let marker = Marker {
            infra_id: "ci-os-abc12".into(),
            stream: "rhel-9".into(),
            release: "9.8.1".into(),
            qcow2_sha256: "ab".repeat(32),
            import_deadline: None,
        };
        for (k, val) in marker.pairs() {
            v[k] = json!(val);
        }
        let image = Image::from_json(&v).unwrap();
        let name = "n";
        let ours = image.seen(None, Some("p1"));
        assert_eq!(ours.marker, Some(marker));
        assert_eq!(
            ours.retirable(name, "ci-os-abc12", false),
            Err(super::super::marker::Keep::OtherImage {
                marked: "9.8.1".into(),
                sha256: "ab".repeat(32),
                wanted: "the release its name says (n)".into()
            })
        );
        // A public image of another project with our properties: a look-alike, not ours.
        for project in [Some("p2"), None] {
            assert_eq!(
                image
                    .seen(None, project)
                    .retirable(name, "ci-os-abc12", false),
                Err(super::super::marker::Keep::NotOwned("p1".into()))
            );
        }
    }

    #[test]
    fn query_values_are_encoded() {
        assert_eq!(
            encode("ci-abc12-rhcos-9.8.20260428-0"),
            "ci-abc12-rhcos-9.8.20260428-0"
        );
        assert_eq!(encode("a b&c=d/é"), "a%20b%26c%3Dd%2F%C3%A9");
    }
}
