//! AWS's Query API over HTTPS, for the calls the project makes: EC2 `DescribeImages`, and
//! STS `AssumeRoleWithWebIdentity` and `AssumeRole` for the credentials of a role. Requests
//! are signed with AWS's own Signature Version 4 crate (aws-sigv4), sent with hyper through
//! the cluster-wide proxy and trusting the extra CA bundle ([`egress`]), and their XML
//! answers read with roxmltree.
//!
//! A client of our own rather than the AWS SDK: for these three calls the SDK's EC2 crate,
//! its configuration loader and its runtime were most of every build's time
//! (docs/testing.md, "What CI builds"). What the SDK's environment configures that matters
//! here is read the same way: `AWS_ENDPOINT_URL` and `AWS_ENDPOINT_URL_EC2` /
//! `AWS_ENDPOINT_URL_STS`, `AWS_USE_FIPS_ENDPOINT`, and the regions' partitions (China, the
//! isolated regions) for the default endpoints.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use backon::{BackoffBuilder, ExponentialBuilder};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, StatusCode, header};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use crate::cluster::cause::chain;
use crate::cluster::egress::{self, CaBundleError, ProxyConnector};

/// Each attempt's limit; a call makes at most [`ATTEMPTS`].
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(20);
const ATTEMPTS: u32 = 3;
/// The largest answer read (a page of images is a few hundred kilobytes).
const MAX_ANSWER: usize = 32 << 20;
const EC2_VERSION: &str = "2016-11-15";
const STS_VERSION: &str = "2011-06-15";

/// Keys to sign with; a role's come with a session token and an expiry.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub access_key_id: String,
    pub secret_access_key: String,
    pub session_token: Option<String>,
    pub expires: Option<SystemTime>,
}

/// Never the keys themselves.
impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("expires", &self.expires)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    Ec2,
    Sts,
}

impl Service {
    /// The name in endpoints, signatures and `AWS_ENDPOINT_URL_<NAME>`.
    fn name(self) -> &'static str {
        match self {
            Service::Ec2 => "ec2",
            Service::Sts => "sts",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    /// The service's own refusal: its error code and message.
    #[error("{code}: {message}")]
    Refused {
        status: u16,
        code: String,
        message: String,
    },
    /// Not reached, or no answer (naming the proxy it went through).
    #[error("{url}: {cause}{through}")]
    Unreached {
        url: String,
        cause: String,
        through: String,
    },
    #[error("{url}: an answer that is not AWS's XML (HTTP {status}): {text}")]
    Unreadable {
        url: String,
        status: u16,
        text: String,
    },
    #[error("signing the request: {0}")]
    Sign(String),
}

impl QueryError {
    /// The service's error code, if it answered with one.
    pub fn code(&self) -> Option<&str> {
        match self {
            QueryError::Refused { code, .. } => Some(code),
            _ => None,
        }
    }

    /// Worth another attempt: no answer, the service's own trouble, or throttling.
    fn transient(&self) -> bool {
        match self {
            QueryError::Unreached { .. } => true,
            QueryError::Refused { status, code, .. } => {
                *status >= 500
                    || code.contains("Throttl")
                    || code == "RequestLimitExceeded"
                    || code == "IDPCommunicationError"
            }
            QueryError::Unreadable { status, .. } => *status >= 500,
            QueryError::Sign(_) => false,
        }
    }
}

/// Where `service` is asked in `region`: the environment's endpoint when it names one
/// (`AWS_ENDPOINT_URL_EC2`, then `AWS_ENDPOINT_URL`), else AWS's for the region's
/// partition. STS without a region is its global endpoint.
pub fn endpoint(service: Service, region: Option<&str>) -> String {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    let ignored = env("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS").is_some_and(|v| v == "true");
    let specific = format!("AWS_ENDPOINT_URL_{}", service.name().to_uppercase());
    if !ignored && let Some(url) = env(&specific).or_else(|| env("AWS_ENDPOINT_URL")) {
        return url.trim().trim_end_matches('/').to_owned();
    }
    let fips = env("AWS_USE_FIPS_ENDPOINT").is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let name = match fips {
        true => format!("{}-fips", service.name()),
        false => service.name().to_owned(),
    };
    match region {
        Some(region) => format!("https://{name}.{region}.{}", dns_suffix(region)),
        None => format!("https://{name}.amazonaws.com"),
    }
}

/// The DNS suffix of a region's partition.
fn dns_suffix(region: &str) -> &'static str {
    [
        ("cn-", "amazonaws.com.cn"),
        ("us-isob-", "sc2s.sgov.gov"),
        ("us-isof-", "csp.hci.ic.gov"),
        ("us-iso-", "c2s.ic.gov"),
        ("eu-isoe-", "cloud.adc-e.uk"),
    ]
    .into_iter()
    .find(|(prefix, _)| region.starts_with(prefix))
    .map_or("amazonaws.com", |(_, suffix)| suffix)
}

/// An image as `DescribeImages` lists it: the fields the AWS rule reads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Image {
    pub id: String,
    pub owner: String,
    pub name: String,
    pub description: String,
    pub creation_date: String,
}

/// The HTTPS client for AWS's APIs.
pub struct AwsHttps {
    client: Client<ProxyConnector, Full<Bytes>>,
    connector: ProxyConnector,
}

impl AwsHttps {
    /// Trusting the system's roots and the extra CA bundle; through the proxy the
    /// environment names.
    pub fn new() -> Result<AwsHttps, CaBundleError> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
        roots.add_parsable_certificates(egress::extra_roots()?);
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("ring supports the default protocol versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        let connector = ProxyConnector::new(tls);
        Ok(AwsHttps {
            client: Client::builder(TokioExecutor::new()).build(connector.clone()),
            connector,
        })
    }

    /// One page of `DescribeImages` in `region` with `params` (`ImageId.1`, `Owner.1`,
    /// `Filter.1.Name`, ...): the images, and the token of the next page.
    pub async fn describe_images(
        &self,
        region: &str,
        credentials: &Credentials,
        params: &[(&str, &str)],
    ) -> Result<(Vec<Image>, Option<String>), QueryError> {
        let mut form = vec![("Action", "DescribeImages"), ("Version", EC2_VERSION)];
        form.extend_from_slice(params);
        let url = endpoint(Service::Ec2, Some(region));
        let (status, text) = self
            .call(&url, Service::Ec2, region, &form, Some(credentials))
            .await?;
        parse_images(&text).ok_or_else(|| unreadable(&url, status, &text))
    }

    /// A web identity's credentials for `role_arn` (STS `AssumeRoleWithWebIdentity`, which
    /// is not signed: the token is the proof).
    pub async fn assume_role_with_web_identity(
        &self,
        region: Option<&str>,
        role_arn: &str,
        session_name: &str,
        token: &str,
    ) -> Result<Credentials, QueryError> {
        let form = [
            ("Action", "AssumeRoleWithWebIdentity"),
            ("Version", STS_VERSION),
            ("RoleArn", role_arn),
            ("RoleSessionName", session_name),
            ("WebIdentityToken", token),
        ];
        self.sts(region, &form, None).await
    }

    /// `role_arn`'s credentials, asked with `source`'s (STS `AssumeRole`).
    pub async fn assume_role(
        &self,
        region: Option<&str>,
        source: &Credentials,
        role_arn: &str,
        session_name: &str,
        external_id: Option<&str>,
    ) -> Result<Credentials, QueryError> {
        let mut form = vec![
            ("Action", "AssumeRole"),
            ("Version", STS_VERSION),
            ("RoleArn", role_arn),
            ("RoleSessionName", session_name),
        ];
        if let Some(id) = external_id {
            form.push(("ExternalId", id));
        }
        self.sts(region, &form, Some(source)).await
    }

    async fn sts(
        &self,
        region: Option<&str>,
        form: &[(&str, &str)],
        credentials: Option<&Credentials>,
    ) -> Result<Credentials, QueryError> {
        let url = endpoint(Service::Sts, region);
        // The global endpoint signs for us-east-1.
        let signing_region = region.unwrap_or("us-east-1");
        let (status, text) = self
            .call(&url, Service::Sts, signing_region, form, credentials)
            .await?;
        parse_sts_credentials(&text).ok_or_else(|| unreadable(&url, status, &text))
    }

    /// A POST of `form` to `url`, signed for `service` in `region` when `credentials` are
    /// given, tried again on transient trouble: the answer's status and text.
    async fn call(
        &self,
        url: &str,
        service: Service,
        region: &str,
        form: &[(&str, &str)],
        credentials: Option<&Credentials>,
    ) -> Result<(StatusCode, String), QueryError> {
        let body = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(form)
            .finish();
        // Jittered and growing, as AWS's standard retry: up to 1 s, then up to 2 s.
        let mut delays = ExponentialBuilder::default()
            .with_min_delay(Duration::from_millis(500))
            .with_jitter()
            .with_max_times(ATTEMPTS as usize - 1)
            .build();
        loop {
            let req = request(url, service, region, &body, credentials)?;
            let result = match tokio::time::timeout(ATTEMPT_TIMEOUT, self.send(req)).await {
                Ok(result) => result,
                Err(_) => Err(self.unreached(url, format!("no answer in {ATTEMPT_TIMEOUT:?}"))),
            };
            match result {
                Err(e) if e.transient() => match delays.next() {
                    Some(delay) => tokio::time::sleep(delay).await,
                    None => return Err(e),
                },
                other => return other,
            }
        }
    }

    async fn send(
        &self,
        mut req: Request<Full<Bytes>>,
    ) -> Result<(StatusCode, String), QueryError> {
        let url = req.uri().to_string();
        let proxy = self.connector.intercept(req.uri());
        if let Some(auth) = proxy.as_ref().and_then(|p| p.basic_auth()) {
            // Plain HTTP goes to the proxy as is; HTTPS carries this in its CONNECT.
            if req.uri().scheme() != Some(&hyper::http::uri::Scheme::HTTPS) {
                req.headers_mut()
                    .insert(header::PROXY_AUTHORIZATION, auth.clone());
            }
        }
        let resp = self
            .client
            .request(req)
            .await
            .map_err(|e| self.unreached(&url, chain(&e)))?;
        let status = resp.status();
        let limited = http_body_util::Limited::new(resp.into_body(), MAX_ANSWER);
        let bytes = limited
            .collect()
            .await
            .map_err(|e| self.unreached(&url, format!("reading the answer: {}", chain(&*e))))?
            .to_bytes();
        let text = String::from_utf8_lossy(&bytes).into_owned();
        if status.is_success() {
            return Ok((status, text));
        }
        Err(match parse_error(&text) {
            Some((code, message)) => QueryError::Refused {
                status: status.as_u16(),
                code,
                message,
            },
            None => unreadable(&url, status, &text),
        })
    }

    fn unreached(&self, url: &str, cause: String) -> QueryError {
        let through = url.parse().map(|u| egress::through(&u)).unwrap_or_default();
        QueryError::Unreached {
            url: url.to_owned(),
            cause,
            through,
        }
    }
}

/// A POST of the form `body` to `url`, signed when `credentials` are given.
fn request(
    url: &str,
    service: Service,
    region: &str,
    body: &str,
    credentials: Option<&Credentials>,
) -> Result<Request<Full<Bytes>>, QueryError> {
    let uri: hyper::Uri = url
        .parse()
        .map_err(|e| QueryError::Sign(format!("the endpoint {url}: {e}")))?;
    let host = match (uri.host(), uri.port()) {
        (Some(host), Some(port)) => format!("{host}:{port}"),
        (Some(host), None) => host.to_owned(),
        _ => {
            return Err(QueryError::Sign(format!(
                "the endpoint {url} names no host"
            )));
        }
    };
    let content_type = "application/x-www-form-urlencoded; charset=utf-8";
    let mut req = Request::post(uri)
        .header(header::HOST, &host)
        .header(header::CONTENT_TYPE, content_type)
        .body(Full::new(Bytes::from(body.to_owned())))
        .map_err(|e| QueryError::Sign(e.to_string()))?;
    if let Some(credentials) = credentials {
        sign(
            &mut req,
            body.as_bytes(),
            service.name(),
            region,
            credentials,
            SystemTime::now(),
        )?;
    }
    Ok(req)
}

/// Signature Version 4 (aws-sigv4) of `req`, whose body is `body`, at `time`: the headers
/// are added to it.
fn sign(
    req: &mut Request<Full<Bytes>>,
    body: &[u8],
    service: &str,
    region: &str,
    credentials: &Credentials,
    time: SystemTime,
) -> Result<(), QueryError> {
    use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
    use aws_sigv4::sign::v4;
    let identity = aws_credential_types::Credentials::new(
        &credentials.access_key_id,
        &credentials.secret_access_key,
        credentials.session_token.clone(),
        credentials.expires,
        "bootimage-webhook",
    )
    .into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(service)
        .time(time)
        .settings(SigningSettings::default())
        .build()
        .map_err(|e| QueryError::Sign(e.to_string()))?
        .into();
    let url = req.uri().to_string();
    let headers = req
        .headers()
        .iter()
        .filter_map(|(k, v)| Some((k.as_str(), v.to_str().ok()?)));
    let signable = SignableRequest::new("POST", &url, headers, SignableBody::Bytes(body))
        .map_err(|e| QueryError::Sign(e.to_string()))?;
    let (instructions, _) = sign(signable, &params)
        .map_err(|e| QueryError::Sign(e.to_string()))?
        .into_parts();
    instructions.apply_to_request_http1x(req);
    Ok(())
}

fn unreadable(url: &str, status: StatusCode, text: &str) -> QueryError {
    let text: String = text.trim().chars().take(200).collect();
    QueryError::Unreadable {
        url: url.to_owned(),
        status: status.as_u16(),
        text,
    }
}

/// The children of `node` by local name (the answers carry a default namespace).
fn child<'a, 'i>(node: roxmltree::Node<'a, 'i>, name: &str) -> Option<roxmltree::Node<'a, 'i>> {
    node.children()
        .find(|c| c.is_element() && c.tag_name().name() == name)
}

fn text_of(node: roxmltree::Node<'_, '_>, name: &str) -> String {
    child(node, name)
        .and_then(|c| c.text())
        .unwrap_or_default()
        .to_owned()
}

/// `DescribeImagesResponse`: its `imagesSet`'s items (each image's own fields only: block
/// devices and tags are `item`s too, one level down) and `nextToken`.
pub fn parse_images(xml: &str) -> Option<(Vec<Image>, Option<String>)> {
    let doc = roxmltree::Document::parse(xml).ok()?;
    let root = doc.root_element();
    if root.tag_name().name() != "DescribeImagesResponse" {
        return None;
    }
    let images = child(root, "imagesSet")
        .map(|set| {
            set.children()
                .filter(|c| c.is_element() && c.tag_name().name() == "item")
                .map(|item| Image {
                    id: text_of(item, "imageId"),
                    owner: text_of(item, "imageOwnerId"),
                    name: text_of(item, "name"),
                    description: text_of(item, "description"),
                    creation_date: text_of(item, "creationDate"),
                })
                .collect()
        })
        .unwrap_or_default();
    let next = Some(text_of(root, "nextToken")).filter(|t| !t.is_empty());
    Some((images, next))
}

/// The `Credentials` of an `AssumeRole*Result`.
pub fn parse_sts_credentials(xml: &str) -> Option<Credentials> {
    let doc = roxmltree::Document::parse(xml).ok()?;
    let creds = doc
        .descendants()
        .find(|n| n.is_element() && n.tag_name().name() == "Credentials")?;
    let field = |name| Some(text_of(creds, name)).filter(|v| !v.is_empty());
    Some(Credentials {
        access_key_id: field("AccessKeyId")?,
        secret_access_key: field("SecretAccessKey")?,
        session_token: field("SessionToken"),
        expires: field("Expiration").and_then(|e| humantime::parse_rfc3339_weak(&e).ok()),
    })
}

/// An error answer's code and message: EC2's `Response/Errors/Error`, STS's
/// `ErrorResponse/Error`.
pub fn parse_error(xml: &str) -> Option<(String, String)> {
    let doc = roxmltree::Document::parse(xml).ok()?;
    let error = doc
        .descendants()
        .find(|n| n.is_element() && n.tag_name().name() == "Error")?;
    let code = text_of(error, "Code");
    (!code.is_empty()).then(|| (code, text_of(error, "Message")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An answer as EC2 gives it (from its API reference), with an image's nested items.
    const IMAGES: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<DescribeImagesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">
  <requestId>59dbff89-35bd-4eac-99ed-be587EXAMPLE</requestId>
  <imagesSet>
    <item>
      <imageId>ami-1a2b3c4d</imageId>
      <imageLocation>amazon/getting-started</imageLocation>
      <imageState>available</imageState>
      <imageOwnerId>123456789012</imageOwnerId>
      <creationDate>2024-01-02T03:04:05.000Z</creationDate>
      <isPublic>true</isPublic>
      <name>rhcos-9.6</name>
      <description>RHEL CoreOS &amp; more</description>
      <blockDeviceMapping>
        <item><deviceName>/dev/xvda</deviceName><ebs><snapshotId>snap-1</snapshotId></ebs></item>
      </blockDeviceMapping>
      <tagSet><item><key>name</key><value>not-the-name</value></item></tagSet>
    </item>
    <item><imageId>ami-2</imageId><imageOwnerId>679593333241</imageOwnerId></item>
  </imagesSet>
  <nextToken>page-2</nextToken>
</DescribeImagesResponse>"#;

    #[test]
    fn images_are_read_with_their_own_fields_only() {
        let (images, next) = parse_images(IMAGES).unwrap();
        assert_eq!(
            images,
            vec![
                Image {
                    id: "ami-1a2b3c4d".into(),
                    owner: "123456789012".into(),
                    name: "rhcos-9.6".into(),
                    description: "RHEL CoreOS & more".into(),
                    creation_date: "2024-01-02T03:04:05.000Z".into(),
                },
                Image {
                    id: "ami-2".into(),
                    owner: "679593333241".into(),
                    ..Image::default()
                },
            ]
        );
        assert_eq!(next.as_deref(), Some("page-2"));
        let empty = r#"<DescribeImagesResponse xmlns="x"><imagesSet/><nextToken/></DescribeImagesResponse>"#;
        assert_eq!(parse_images(empty), Some((vec![], None)));
        assert_eq!(parse_images("<html>proxy error</html>"), None);
        assert_eq!(parse_images("not xml"), None);
    }

    #[test]
    fn errors_of_ec2_and_of_sts_give_their_code_and_message() {
        let ec2 = "<Response><Errors><Error><Code>InvalidAMIID.NotFound</Code><Message>The image id '[ami-1]' does not exist</Message></Error></Errors><RequestID>r</RequestID></Response>";
        assert_eq!(
            parse_error(ec2),
            Some((
                "InvalidAMIID.NotFound".into(),
                "The image id '[ami-1]' does not exist".into()
            ))
        );
        let sts = r#"<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error><Type>Sender</Type><Code>InvalidIdentityToken</Code><Message>No OpenIDConnect provider found</Message></Error><RequestId>r</RequestId></ErrorResponse>"#;
        assert_eq!(
            parse_error(sts).map(|(c, _)| c).as_deref(),
            Some("InvalidIdentityToken")
        );
        assert_eq!(
            parse_error("<Error><Message>no code</Message></Error>"),
            None
        );
        assert_eq!(parse_error("Bad Gateway"), None);
    }

    #[test]
    fn sts_credentials_come_with_their_expiry() {
        let xml = r#"<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleWithWebIdentityResult>
    <AssumedRoleUser><Arn>arn:aws:sts::1:assumed-role/r/s</Arn></AssumedRoleUser>
    <Credentials>
      <SessionToken>token</SessionToken>
      <SecretAccessKey>secret</SecretAccessKey>
      <Expiration>2024-11-09T13:34:41Z</Expiration>
      <AccessKeyId>ASIAEXAMPLE</AccessKeyId>
    </Credentials>
  </AssumeRoleWithWebIdentityResult>
</AssumeRoleWithWebIdentityResponse>"#;
        let c = parse_sts_credentials(xml).unwrap();
        assert_eq!(c.access_key_id, "ASIAEXAMPLE");
        assert_eq!(c.secret_access_key, "secret");
        assert_eq!(c.session_token.as_deref(), Some("token"));
        let at = c
            .expires
            .unwrap()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap();
        assert_eq!(at.as_secs(), 1_731_159_281);
        assert!(!format!("{c:?}").contains("ASIAEXAMPLE"));
        let keyless = "<X><Credentials><AccessKeyId>a</AccessKeyId></Credentials></X>";
        assert_eq!(parse_sts_credentials(keyless), None);
    }

    #[test]
    fn each_partition_has_its_endpoints() {
        // The test process's environment names no endpoint (the tests never set one).
        assert_eq!(
            endpoint(Service::Ec2, Some("us-east-1")),
            "https://ec2.us-east-1.amazonaws.com"
        );
        assert_eq!(
            endpoint(Service::Sts, Some("cn-north-1")),
            "https://sts.cn-north-1.amazonaws.com.cn"
        );
        assert_eq!(
            endpoint(Service::Ec2, Some("us-isob-east-1")),
            "https://ec2.us-isob-east-1.sc2s.sgov.gov"
        );
        assert_eq!(
            endpoint(Service::Ec2, Some("us-iso-east-1")),
            "https://ec2.us-iso-east-1.c2s.ic.gov"
        );
        assert_eq!(endpoint(Service::Sts, None), "https://sts.amazonaws.com");
    }

    /// AWS's own test vector (aws-sig-v4-test-suite, `post-x-www-form-urlencoded`): the
    /// request signed as [`request`] signs ours gets the suite's Authorization header.
    #[test]
    fn the_signature_is_the_one_aws_s_test_suite_gives() {
        let body = b"Param1=value1";
        let mut req = Request::post("https://example.amazonaws.com/")
            .header("content-type", "application/x-www-form-urlencoded")
            .header("host", "example.amazonaws.com")
            .body(Full::new(Bytes::from_static(body)))
            .unwrap();
        let credentials = Credentials {
            access_key_id: "AKIDEXAMPLE".into(),
            secret_access_key: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".into(),
            session_token: None,
            expires: None,
        };
        // 20150830T123600Z
        let time = SystemTime::UNIX_EPOCH + Duration::from_secs(1_440_938_160);
        sign(&mut req, body, "service", "us-east-1", &credentials, time).unwrap();
        assert_eq!(
            req.headers()["authorization"],
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, \
             SignedHeaders=content-type;host;x-amz-date, \
             Signature=ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a"
        );
        assert_eq!(req.headers()["x-amz-date"], "20150830T123600Z");
    }
}
