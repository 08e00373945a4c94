//! The HTTPS the importers of Glance and Prism Central share: hyper through rustls on
//! ring, as everywhere here. It trusts the system's roots, the trusted CA bundle
//! ([`egress`]) and a cloud's own CA bundles; it goes through the cluster-wide proxy where
//! the environment says so. Its one error type, [`HttpsError`], each cloud's error wraps.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full, combinators::UnsyncBoxBody};
use hyper::body::Incoming;
use hyper::{HeaderMap, Request, Response, StatusCode, header};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use crate::cluster::cause::{Cause, cause, chain};
use crate::cluster::egress::{self, Proxy, ProxyConnector};

pub type Body = UnsyncBoxBody<Bytes, std::io::Error>;

/// The largest answer read: a page of a list (Glance's default page of 25 images, Prism
/// Central's page of 100) is tens of kilobytes. An answer beyond it is one error, not the
/// pod (whose limit is 128 MiB): see also [`MAX_LIST`].
pub const MAX_ANSWER: usize = 4 << 20;

/// The most a list may read over all its pages in one pass, where every page of one list
/// is held at once.
pub const MAX_LIST: usize = 24 << 20;

/// `url` may be sent to: `https://` (plain `http://` only where the tests allowed it).
pub fn require_https(url: &str) -> Result<(), HttpsError> {
    match egress::https_or_allowed(url) {
        true => Ok(()),
        false => Err(HttpsError::PlainHttp {
            url: url.to_owned(),
        }),
    }
}

/// What goes wrong on the way to a cloud and back.
#[derive(Debug, Clone, thiserror::Error)]
pub enum HttpsError {
    #[error("the CA bundle {from}: {why}")]
    CaBundle { from: String, why: String },
    #[error(
        "{url}: plain http:// is refused: Keystone, Glance, Prism Central and the artifacts' mirror are reached over https:// only (the tests' own servers are the one exception, with --allow-plain-http-for-tests)"
    )]
    PlainHttp { url: String },
    #[error(
        "{url}: the answer is larger than {limit} bytes: not read (the pod's memory is bounded)"
    )]
    TooLarge { url: String, limit: usize },
    #[error("{url}{}: {}", proxy_note(.proxy), chain(&**.cause))]
    Send {
        url: String,
        proxy: Option<String>,
        #[source]
        cause: Cause,
    },
}

fn proxy_note(proxy: &Option<String>) -> String {
    proxy
        .as_ref()
        .map(|p| format!(" (through the proxy {p})"))
        .unwrap_or_default()
}

/// A whole answer: status, headers, text.
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub text: String,
}

#[derive(Clone)]
pub struct Https {
    client: Client<ProxyConnector, Body>,
    connector: ProxyConnector,
    /// `clouds.yaml` said `verify: false`: named when verification fails.
    verify_off: bool,
}

/// The root store: the system's, the trusted CA bundle's, and each of `bundles` (where it
/// came from, PEM); a bundle without a usable certificate is an error naming it.
pub fn roots(bundles: &[(String, Vec<u8>)]) -> Result<rustls::RootCertStore, HttpsError> {
    let mut roots = rustls::RootCertStore::empty();
    // Unreadable system certificates are skipped: the cloud's bundle may be all there is.
    roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
    let trusted = egress::extra_roots().map_err(|e| HttpsError::CaBundle {
        from: "--trusted-ca-bundle".into(),
        why: e.to_string(),
    })?;
    roots.add_parsable_certificates(trusted);
    for (from, pem) in bundles {
        let bad = |why: String| HttpsError::CaBundle {
            from: from.clone(),
            why,
        };
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(pem)
            .collect::<Result<_, _>>()
            .map_err(|e| bad(e.to_string()))?;
        let (added, _) = roots.add_parsable_certificates(certs);
        if added == 0 {
            return Err(bad("no usable CA certificate in it".into()));
        }
    }
    Ok(roots)
}

impl Https {
    /// Through `proxy` ([`Proxy::from_env`] but in tests).
    pub fn new(
        roots: rustls::RootCertStore,
        verify_off: bool,
        proxy: Proxy,
    ) -> Result<Https, HttpsError> {
        let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| HttpsError::CaBundle {
            from: "rustls".into(),
            why: e.to_string(),
        })?
        .with_root_certificates(roots)
        .with_no_client_auth();
        let connector = ProxyConnector::with_proxy(tls, proxy);
        Ok(Https {
            client: Client::builder(TokioExecutor::new()).build(connector.clone()),
            connector,
            verify_off,
        })
    }

    /// Sends `req` and hands back the answer with its body unread.
    pub async fn start(&self, mut req: Request<Body>) -> Result<Response<Incoming>, HttpsError> {
        let url = req.uri().to_string();
        require_https(&url)?;
        let proxy = self.connector.intercept(req.uri());
        if let Some(auth) = proxy.as_ref().and_then(|p| p.basic_auth()) {
            // Plain HTTP goes to the proxy as is; HTTPS carries this in its CONNECT.
            if req.uri().scheme() != Some(&hyper::http::uri::Scheme::HTTPS) {
                req.headers_mut()
                    .insert(header::PROXY_AUTHORIZATION, auth.clone());
            }
        }
        let verify_off = self.verify_off;
        self.client.request(req).await.map_err(|e| {
            let mut c = cause(e);
            if verify_off && egress_tls_failed(&*c) {
                c = cause(format!(
                    "{}: clouds.yaml says verify: false, but certificates are always verified here (as the machine API does): put the cloud's CA in the Secret's cacert key or in ConfigMap openshift-config/cloud-provider-config key ca-bundle.pem",
                    chain(&*c)
                ));
            }
            HttpsError::Send {
                proxy: proxy.as_ref().map(egress::name),
                url,
                cause: c,
            }
        })
    }

    /// Sends `req` and reads the whole answer (bounded).
    pub async fn send(&self, req: Request<Body>) -> Result<Answer, HttpsError> {
        let url = req.uri().to_string();
        let resp = self.start(req).await?;
        let (parts, body) = resp.into_parts();
        let declared = parts
            .headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        if declared.is_some_and(|n| n > MAX_ANSWER as u64) {
            return Err(too_large(url));
        }
        let limited = http_body_util::Limited::new(body, MAX_ANSWER);
        let bytes = match limited.collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(e) if e.is::<http_body_util::LengthLimitError>() => return Err(too_large(url)),
            Err(e) => {
                return Err(HttpsError::Send {
                    url,
                    proxy: None,
                    cause: cause(format!("reading the answer: {e}")),
                });
            }
        };
        Ok(Answer {
            status: parts.status,
            headers: parts.headers,
            text: String::from_utf8_lossy(&bytes).into_owned(),
        })
    }
}

fn too_large(url: String) -> HttpsError {
    HttpsError::TooLarge {
        url,
        limit: MAX_ANSWER,
    }
}

/// What a list has read so far over its pages, against [`MAX_LIST`].
#[derive(Default)]
pub struct ListBudget(usize);

impl ListBudget {
    /// Counts an answer of the list at `url`; past the budget, the list stops with an error.
    pub fn charge(&mut self, url: &str, answer: &Answer) -> Result<(), HttpsError> {
        self.0 += answer.text.len();
        match self.0 > MAX_LIST {
            true => Err(HttpsError::TooLarge {
                url: url.to_owned(),
                limit: MAX_LIST,
            }),
            false => Ok(()),
        }
    }
}

/// Whether a failed request failed on the server's certificate.
fn egress_tls_failed(e: &(dyn std::error::Error + 'static)) -> bool {
    let text = chain(e).to_ascii_lowercase();
    text.contains("certificate") || text.contains("invalidcertificate")
}

pub fn empty() -> Body {
    Empty::new().map_err(|never| match never {}).boxed_unsync()
}

/// Percent-encoding of a query value or path segment (all but RFC 3986's unreserved).
pub fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

pub fn json(value: &serde_json::Value) -> Body {
    Full::new(Bytes::from(value.to_string()))
        .map_err(|never| match never {})
        .boxed_unsync()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_ca_bundle_is_trusted_or_named_when_it_holds_none() {
        let dev = crate::serve::tls::DevCerts::generate(&["127.0.0.1".into()]).unwrap();
        let system = roots(&[]).unwrap().len();
        let from = "Secret openshift-machine-api/openstack-cloud-credentials key cacert";
        let with = roots(&[(from.into(), dev.ca_pem.clone().into_bytes())]).unwrap();
        assert_eq!(with.len(), system + 1);
        let e = roots(&[(from.into(), b"not a certificate".to_vec())]).unwrap_err();
        assert!(e.to_string().contains(from), "{e}");
        assert!(e.to_string().contains("no usable CA certificate"), "{e}");
    }
}
