//! Keystone v3: a token (`POST /v3/auth/tokens`, its value in `X-Subject-Token`) with the
//! catalog's image endpoint for the cloud's region and interface. A token is used until
//! shortly before it expires, by its own lifetime (`expires_at` less `issued_at`, both
//! Keystone's clock) counted from when it arrived, so that a skewed pod clock never keeps
//! an expired token nor throws away a fresh one.

use std::time::{Duration, Instant};

use hyper::{Method, Request, StatusCode, header};
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use super::clouds::{Auth, Cloud, Named};
use super::error::{OpenStackError, said};
use crate::cluster::importer::https::{self, Https};

/// A token is renewed this long before it expires (at most; a quarter of a short one's
/// lifetime).
const RENEW_BEFORE: Duration = Duration::from_secs(300);

#[derive(Clone)]
pub struct Token {
    pub value: String,
    /// The image endpoint, without its version (`https://glance.example:9292`).
    pub glance: String,
    /// The project the token is scoped to: the owner of the images made with it.
    pub project_id: Option<String>,
    renew_at: Instant,
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Token")
            .field("glance", &self.glance)
            .finish_non_exhaustive()
    }
}

pub struct Keystone {
    pub http: Https,
    pub cloud: Cloud,
    token: Option<Token>,
    /// Tokens issued so far (for the log and the tests).
    issued: u64,
}

impl Keystone {
    pub fn new(http: Https, cloud: Cloud) -> Keystone {
        Keystone {
            http,
            cloud,
            token: None,
            issued: 0,
        }
    }

    /// How many tokens Keystone has issued to this client.
    pub fn issued(&self) -> u64 {
        self.issued
    }

    /// The token, a new one when there is none or it is due for renewal.
    pub async fn token(&mut self) -> Result<Token, OpenStackError> {
        if let Some(token) = &self.token
            && Instant::now() < token.renew_at
        {
            return Ok(token.clone());
        }
        let token = self.issue().await?;
        self.issued += 1;
        self.token = Some(token.clone());
        Ok(token)
    }

    /// Forgets the token (Glance refused it): the next call asks for another.
    pub fn forget(&mut self) {
        self.token = None;
    }

    async fn issue(&self) -> Result<Token, OpenStackError> {
        let url = tokens_url(&self.cloud.auth_url);
        let req = Request::builder()
            .method(Method::POST)
            .uri(&url)
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::ACCEPT, "application/json")
            .body(https::json(&request(&self.cloud.auth)))
            .map_err(|e| bad_url(&url, e))?;
        let arrived = Instant::now();
        let answer = self.http.send(req).await?;
        if answer.status != StatusCode::CREATED && answer.status != StatusCode::OK {
            return Err(OpenStackError::Keystone {
                url,
                status: answer.status.as_u16(),
                said: said(&answer.text),
            });
        }
        let value = answer
            .headers
            .get("x-subject-token")
            .and_then(|v| v.to_str().ok())
            .filter(|v| !v.is_empty())
            .ok_or_else(|| keystone_said(&url, "no X-Subject-Token header"))?
            .to_owned();
        let body: Value = serde_json::from_str(&answer.text)
            .map_err(|e| keystone_said(&url, &format!("not JSON: {e}")))?;
        let token = body.get("token").unwrap_or(&Value::Null);
        let catalog = token.get("catalog").unwrap_or(&Value::Null);
        let glance = image_endpoint(
            catalog,
            self.cloud.region.as_deref(),
            self.cloud.interface.as_str(),
        )?;
        let project_id = token.pointer("/project/id").and_then(Value::as_str);
        Ok(Token {
            value,
            glance: unversioned(&glance),
            project_id: project_id.map(str::to_owned),
            renew_at: arrived + renew_after(token),
        })
    }
}

fn bad_url(url: &str, e: impl std::fmt::Display) -> OpenStackError {
    OpenStackError::Keystone {
        url: url.to_owned(),
        status: 0,
        said: format!("not a URL a request can go to: {e}"),
    }
}

fn keystone_said(url: &str, what: &str) -> OpenStackError {
    OpenStackError::Keystone {
        url: url.to_owned(),
        status: 201,
        said: format!("the answer is not a Keystone token: {what}"),
    }
}

/// `auth_url` names Keystone with or without its version.
pub fn tokens_url(auth_url: &str) -> String {
    let base = auth_url.trim_end_matches('/');
    match base.ends_with("/v3") {
        true => format!("{base}/auth/tokens"),
        false => format!("{base}/v3/auth/tokens"),
    }
}

/// How long after it arrived the token is renewed: its lifetime by Keystone's clock, less
/// the margin. A token without readable times is used for one margin.
fn renew_after(token: &Value) -> Duration {
    let time = |k: &str| {
        token
            .get(k)
            .and_then(Value::as_str)
            .and_then(|t| t.parse::<Timestamp>().ok())
    };
    let lifetime = match (time("issued_at"), time("expires_at")) {
        (Some(issued), Some(expires)) => {
            Duration::try_from(expires.duration_since(issued)).unwrap_or(Duration::ZERO)
        }
        _ => return RENEW_BEFORE,
    };
    lifetime.saturating_sub(RENEW_BEFORE.min(lifetime / 4))
}

/// The Keystone v3 request for `auth`: a password scoped to its project (unscoped without
/// one: Keystone then scopes it to the user's default project), or an application
/// credential (scoped by itself).
pub fn request(auth: &Auth) -> Value {
    let identity = match auth {
        Auth::Password { user, password, .. } => {
            let mut u = named(user);
            u["password"] = json!(password);
            json!({"methods": ["password"], "password": {"user": u}})
        }
        Auth::ApplicationCredential {
            id,
            name,
            user,
            secret,
        } => {
            let mut c = json!({"secret": secret});
            match (id, name, user) {
                (Some(id), _, _) => c["id"] = json!(id),
                (None, Some(name), Some(user)) => {
                    c["name"] = json!(name);
                    c["user"] = named(user);
                }
                _ => {}
            }
            json!({"methods": ["application_credential"], "application_credential": c})
        }
    };
    let mut auth_body = json!({"identity": identity});
    if let Auth::Password {
        project: Some(project),
        ..
    } = auth
    {
        auth_body["scope"] = json!({"project": named(project)});
    }
    json!({"auth": auth_body})
}

/// `{"id"}`, or `{"name", "domain": {"id"|"name"}}`.
fn named(n: &Named) -> Value {
    if let Some(id) = &n.id {
        return json!({"id": id});
    }
    let mut v = json!({"name": n.name});
    if let Some(id) = &n.domain_id {
        v["domain"] = json!({"id": id});
    } else if let Some(name) = &n.domain_name {
        v["domain"] = json!({"name": name});
    }
    v
}

/// The catalog's `image` endpoint for `interface`, in `region` when given (by `region_id`
/// or the older `region`). Without a region, the endpoints found must agree.
pub fn image_endpoint(
    catalog: &Value,
    region: Option<&str>,
    interface: &'static str,
) -> Result<String, OpenStackError> {
    let endpoints: Vec<&Value> = catalog
        .as_array()
        .into_iter()
        .flatten()
        .filter(|s| s.get("type").and_then(Value::as_str) == Some("image"))
        .filter_map(|s| s.get("endpoints").and_then(Value::as_array))
        .flatten()
        .collect();
    let field = |e: &Value, k: &str| e.get(k).and_then(Value::as_str).map(str::to_owned);
    let in_region = |e: &Value| {
        region.is_none_or(|r| {
            field(e, "region_id").as_deref() == Some(r) || field(e, "region").as_deref() == Some(r)
        })
    };
    let mut urls: Vec<String> = endpoints
        .iter()
        .filter(|e| field(e, "interface").as_deref() == Some(interface) && in_region(e))
        .filter_map(|e| field(e, "url"))
        .collect();
    urls.dedup();
    if urls.len() == 1 {
        return Ok(urls.remove(0));
    }
    let found = endpoints
        .iter()
        .map(|e| {
            format!(
                "{} {} {}",
                field(e, "region_id")
                    .or_else(|| field(e, "region"))
                    .unwrap_or_default(),
                field(e, "interface").unwrap_or_default(),
                field(e, "url").unwrap_or_default()
            )
        })
        .collect();
    Err(OpenStackError::NoEndpoint {
        region: region.map(str::to_owned),
        interface,
        found,
    })
}

/// The endpoint without a trailing version (`/v2`, `/v2.0`, `/v2/`): the calls name theirs.
pub fn unversioned(url: &str) -> String {
    let base = url.trim_end_matches('/');
    match base.rsplit_once('/') {
        Some((head, last))
            if last.starts_with('v')
                && last.len() > 1
                && last[1..].chars().all(|c| c.is_ascii_digit() || c == '.') =>
        {
            head.to_owned()
        }
        _ => base.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::openstack::clouds::parse;

    fn catalog() -> Value {
        let ep = |region: &str, interface: &str, url: &str| json!({"region_id": region, "region": region, "interface": interface, "url": url});
        json!([
            {"type": "identity", "endpoints": [ep("RegionOne", "public", "https://keystone:5000")]},
            {"type": "image", "endpoints": [
                ep("RegionOne", "public", "https://glance.one:9292"),
                ep("RegionOne", "internal", "http://glance.one.internal:9292/v2/"),
                ep("RegionTwo", "public", "https://glance.two:9292"),
            ]}
        ])
    }

    #[test]
    fn the_image_endpoint_is_the_regions_and_interfaces() {
        let c = catalog();
        assert_eq!(
            image_endpoint(&c, Some("RegionOne"), "public").unwrap(),
            "https://glance.one:9292"
        );
        assert_eq!(
            image_endpoint(&c, Some("RegionTwo"), "public").unwrap(),
            "https://glance.two:9292"
        );
        assert_eq!(
            unversioned(&image_endpoint(&c, Some("RegionOne"), "internal").unwrap()),
            "http://glance.one.internal:9292"
        );
        // Two regions and none chosen: not a guess.
        let e = image_endpoint(&c, None, "public").unwrap_err().to_string();
        assert!(e.contains("glance.two") && e.contains("glance.one"), "{e}");
        let e = image_endpoint(&c, Some("RegionThree"), "admin")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("no admin image endpoint in region RegionThree"),
            "{e}"
        );
        let e = image_endpoint(&json!({}), None, "public")
            .unwrap_err()
            .to_string();
        assert!(e.contains("it has: none"), "{e}");
    }

    #[test]
    fn urls_are_made_with_or_without_versions() {
        assert_eq!(
            tokens_url("https://k:5000/v3/"),
            "https://k:5000/v3/auth/tokens"
        );
        assert_eq!(
            tokens_url("https://k:5000"),
            "https://k:5000/v3/auth/tokens"
        );
        assert_eq!(
            tokens_url("https://k/identity"),
            "https://k/identity/v3/auth/tokens"
        );
        assert_eq!(unversioned("https://g:9292/v2.0"), "https://g:9292");
        assert_eq!(unversioned("https://g/image"), "https://g/image");
        assert_eq!(unversioned("https://g/image/v2"), "https://g/image");
        assert_eq!(unversioned("https://g/v"), "https://g/v");
    }

    #[test]
    fn a_token_is_kept_for_its_lifetime_less_a_margin() {
        let t = |issued: &str, expires: &str| {
            renew_after(&json!({"issued_at": issued, "expires_at": expires}))
        };
        // Keystone's default lifetime: renewed the margin before it ends.
        assert_eq!(
            t("2026-12-06T22:57:37.000000Z", "2026-12-06T23:57:37.000000Z"),
            Duration::from_secs(3300)
        );
        // A short token keeps most of its life.
        assert_eq!(
            t("2026-12-06T22:57:37Z", "2026-12-06T22:59:37Z"),
            Duration::from_secs(90)
        );
        // Unreadable, or expired before issued: not kept long.
        assert_eq!(renew_after(&json!({})), RENEW_BEFORE);
        assert_eq!(
            t("2026-12-06T22:59:37Z", "2026-12-06T22:57:37Z"),
            Duration::ZERO
        );
    }

    #[test]
    fn the_requests_are_keystones() {
        let yaml = "clouds: {openstack: {auth: {auth_url: x, username: u, password: p, user_domain_name: D, project_name: pr, project_domain_id: pd}}}";
        let body = request(&parse(yaml, "openstack").unwrap().auth);
        assert_eq!(
            body,
            json!({"auth": {
                "identity": {"methods": ["password"], "password": {"user": {"name": "u", "domain": {"name": "D"}, "password": "p"}}},
                "scope": {"project": {"name": "pr", "domain": {"id": "pd"}}}
            }})
        );
        let yaml = "clouds: {openstack: {auth_type: v3applicationcredential, auth: {auth_url: x, application_credential_name: n, username: u, user_domain_id: d, application_credential_secret: s}}}";
        let body = request(&parse(yaml, "openstack").unwrap().auth);
        assert_eq!(
            body,
            json!({"auth": {"identity": {"methods": ["application_credential"], "application_credential": {
                "secret": "s", "name": "n", "user": {"name": "u", "domain": {"id": "d"}}
            }}}})
        );
    }
}
