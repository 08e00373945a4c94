//! The importer's HTTPS client: hyper's, through rustls on ring like everything else here.
//! It trusts the system's roots, the trusted CA bundle ([`egress`]) and, when given, a PEM
//! bundle of the cluster's own (`--vsphere-ca-file`: vCenters often have a private CA);
//! it goes through the cluster-wide proxy where the environment says so.

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, combinators::UnsyncBoxBody};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode, header};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use crate::cluster::cause::{Cause, cause, chain};
use crate::cluster::egress::{self, CaBundleError, ProxyConnector};

pub type Body = UnsyncBoxBody<Bytes, std::io::Error>;

/// The largest SOAP answer read (property answers are a few kilobytes).
const MAX_ANSWER: usize = 16 << 20;

#[derive(Debug, thiserror::Error)]
pub enum HttpsError {
    #[error("the CA bundle {path}: {cause}")]
    Roots {
        path: String,
        #[source]
        cause: Cause,
    },
    #[error(transparent)]
    TrustedRoots(#[from] CaBundleError),
    #[error("{url}{}: {}", .proxy.as_ref().map(|p| format!(" (through the proxy {p})")).unwrap_or_default(), chain(&**.cause))]
    Send {
        url: String,
        /// The proxy the request went through.
        proxy: Option<String>,
        #[source]
        cause: Cause,
    },
    #[error("{url}: reading the answer: {cause}")]
    Read {
        url: String,
        #[source]
        cause: Cause,
    },
}

#[derive(Clone)]
pub struct Https {
    client: Client<ProxyConnector, Body>,
    connector: ProxyConnector,
}

impl Https {
    pub fn new(ca_file: Option<&Path>) -> Result<Https, HttpsError> {
        let mut roots = rustls::RootCertStore::empty();
        // Unreadable system certificates are skipped: the CA file may be all there is.
        let system = rustls_native_certs::load_native_certs();
        roots.add_parsable_certificates(system.certs);
        roots.add_parsable_certificates(egress::extra_roots()?);
        if let Some(path) = ca_file {
            let roots_error = |cause: Cause| HttpsError::Roots {
                path: path.display().to_string(),
                cause,
            };
            let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
                .map_err(|e| roots_error(cause(e)))?
                .collect::<Result<_, _>>()
                .map_err(|e| roots_error(cause(e)))?;
            if certs.is_empty() {
                return Err(roots_error(cause("no certificate in it")));
            }
            for cert in certs {
                roots.add(cert).map_err(|e| roots_error(cause(e)))?;
            }
        }
        let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| HttpsError::Roots {
            path: String::new(),
            cause: cause(e),
        })?
        .with_root_certificates(roots)
        .with_no_client_auth();
        let connector = ProxyConnector::new(tls);
        Ok(Https {
            client: Client::builder(TokioExecutor::new()).build(connector.clone()),
            connector,
        })
    }

    /// Sends `req`; its answer's status and text (bounded). When `cookie` is given, the
    /// first `Set-Cookie` pair goes there.
    pub async fn send(
        &self,
        req: Request<Body>,
        cookie: Option<&mut Option<String>>,
    ) -> Result<(StatusCode, String), HttpsError> {
        let url = req.uri().to_string();
        let resp = self.start(req).await?;
        if let Some(cookie) = cookie {
            *cookie = resp
                .headers()
                .get(header::SET_COOKIE)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.split(';').next())
                .map(str::to_owned);
        }
        let status = resp.status();
        let limited = http_body_util::Limited::new(resp.into_body(), MAX_ANSWER);
        let bytes = limited
            .collect()
            .await
            .map_err(|e| HttpsError::Read {
                url: url.clone(),
                cause: cause(e),
            })?
            .to_bytes();
        Ok((status, String::from_utf8_lossy(&bytes).into_owned()))
    }

    /// Sends `req` and hands back the answer with its body unread.
    pub async fn start(&self, mut req: Request<Body>) -> Result<Response<Incoming>, HttpsError> {
        let url = req.uri().to_string();
        let proxy = self.connector.intercept(req.uri());
        if let Some(auth) = proxy.as_ref().and_then(|p| p.basic_auth()) {
            // Plain HTTP goes to the proxy as is; HTTPS carries this in its CONNECT.
            if req.uri().scheme() != Some(&hyper::http::uri::Scheme::HTTPS) {
                req.headers_mut()
                    .insert(header::PROXY_AUTHORIZATION, auth.clone());
            }
        }
        self.client
            .request(req)
            .await
            .map_err(|e| HttpsError::Send {
                proxy: proxy.as_ref().map(egress::name),
                url,
                cause: cause(e),
            })
    }
}
