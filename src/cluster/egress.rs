//! What leaves the cluster (EC2 and STS, vCenter, the ESXi hosts' NFC upload, the OVA
//! download, OpenStack's Keystone and Glance, Nutanix's Prism Central, the qcow2
//! downloads): through the cluster-wide proxy when `HTTPS_PROXY` / `HTTP_PROXY` (or
//! `ALL_PROXY`) say so, straight to the hosts `NO_PROXY` names, and trusting the extra CA
//! bundle (`--trusted-ca-bundle`, the bundle OpenShift injects) beside the system's roots.
//!
//! The variables are read as curl reads them (hyper-util's matcher): `NO_PROXY` entries are comma-separated domains (`example.com` and
//! `.example.com` both match the domain and its subdomains), IP addresses, CIDRs (as
//! OpenShift's `noProxy` carries the cluster's networks) or `*`. The Kubernetes API
//! client never goes through the proxy.

use std::error::Error;
use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};

use hyper::Uri;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_rustls::{HttpsConnector, MaybeHttpsStream};
use hyper_util::client::legacy::connect::proxy::Tunnel;
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::client::proxy::matcher::{Intercept, Matcher};
use hyper_util::rt::TokioIo;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use tokio::net::TcpStream;
use tower::Service;

type BoxError = Box<dyn Error + Send + Sync>;

static TRUSTED_CA_BUNDLE: OnceLock<PathBuf> = OnceLock::new();

/// Makes every outbound client built from now on trust the bundle at `path` too. Set once,
/// at start, from the flag; the file is read each time a client is built, so that a bundle
/// injected after the start is found by the next client.
pub fn trust_ca_bundle(path: PathBuf) {
    let _ = TRUSTED_CA_BUNDLE.set(path);
}

#[derive(Debug, thiserror::Error)]
#[error("the trusted CA bundle {path}: {cause}")]
pub struct CaBundleError {
    path: String,
    #[source]
    cause: BoxError,
}

/// The certificates of the trusted CA bundle, none when no bundle was given.
pub(crate) fn extra_roots() -> Result<Vec<CertificateDer<'static>>, CaBundleError> {
    match TRUSTED_CA_BUNDLE.get() {
        Some(path) => bundle_roots(path),
        None => Ok(Vec::new()),
    }
}

/// The usable CA certificates of the PEM bundle at `path`. The bundle OpenShift injects
/// carries the whole system store besides the proxy's CA: a certificate that cannot be a
/// trust anchor is skipped, as the system store's are; a bundle with none is an error.
pub fn bundle_roots(path: &Path) -> Result<Vec<CertificateDer<'static>>, CaBundleError> {
    let error = |cause: BoxError| CaBundleError {
        path: path.display().to_string(),
        cause,
    };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
        .map_err(|e| error(e.into()))?
        .collect::<Result<_, _>>()
        .map_err(|e| error(e.into()))?;
    let mut store = rustls::RootCertStore::empty();
    let usable: Vec<_> = certs
        .into_iter()
        .filter(|cert| store.add(cert.clone()).is_ok())
        .collect();
    if usable.is_empty() {
        return Err(error("no usable CA certificate in it".into()));
    }
    Ok(usable)
}

/// The proxy rules of the environment. hyper-util's matcher reads them, except that its
/// `NO_PROXY=*` leaves IP addresses proxied: here `*` means every host, as in curl.
pub struct Proxy(Option<Matcher>);

impl Proxy {
    pub(crate) fn from_env() -> Proxy {
        let no_proxy = ["NO_PROXY", "no_proxy"]
            .iter()
            .find_map(|name| std::env::var(name).ok())
            .unwrap_or_default();
        Proxy::with(Matcher::from_env(), &no_proxy)
    }

    /// Given rules, as the variables would give them (empty: none).
    pub fn new(https_proxy: &str, http_proxy: &str, no_proxy: &str) -> Proxy {
        let matcher = Matcher::builder()
            .https(https_proxy.to_owned())
            .http(http_proxy.to_owned())
            .no(no_proxy.to_owned())
            .build();
        Proxy::with(matcher, no_proxy)
    }

    fn with(matcher: Matcher, no_proxy: &str) -> Proxy {
        let every_host = no_proxy.split(',').any(|rule| rule.trim() == "*");
        Proxy((!every_host).then_some(matcher))
    }

    /// The proxy a request to `uri` goes through, if any.
    pub(crate) fn intercept(&self, uri: &Uri) -> Option<Intercept> {
        self.0.as_ref()?.intercept(uri)
    }

    /// Whether nothing ever goes through a proxy.
    pub fn is_none(&self) -> bool {
        self.0.is_none()
    }
}

/// The proxy a request to `uri` goes through, as `scheme://host:port` (credentials left
/// out), for messages: `None` when it goes straight.
pub(crate) fn proxy_for(uri: &Uri) -> Option<String> {
    Proxy::from_env().intercept(uri).as_ref().map(name)
}

/// A proxy as `scheme://host:port` (the matcher has taken its credentials out).
pub fn name(proxy: &Intercept) -> String {
    let uri = proxy.uri();
    format!(
        "{}://{}",
        uri.scheme_str().unwrap_or("http"),
        uri.authority().map_or("", |a| a.as_str())
    )
}

/// " through the proxy <url>" when `uri` goes through one, else nothing: for error messages.
pub fn through(uri: &Uri) -> String {
    proxy_for(uri)
        .map(|p| format!(" through the proxy {p}"))
        .unwrap_or_default()
}

/// A hyper connector that goes through the proxy the environment names: a CONNECT tunnel
/// for HTTPS (the target's TLS inside it, with the same roots), the request in absolute
/// form for plain HTTP, straight for `NO_PROXY` hosts. An `https://` proxy is reached
/// over TLS with the same roots too.
///
/// Hand-written around hyper-util's own `Tunnel` and matcher: no maintained crate offers
/// this connector for hyper 1 and hyper-rustls on ring.
#[derive(Clone)]
pub struct ProxyConnector {
    direct: HttpsConnector<HttpConnector>,
    tls: Arc<rustls::ClientConfig>,
    proxy: Arc<Proxy>,
}

impl ProxyConnector {
    pub fn new(tls: rustls::ClientConfig) -> ProxyConnector {
        ProxyConnector::with_proxy(tls, Proxy::from_env())
    }

    pub fn with_proxy(tls: rustls::ClientConfig, proxy: Proxy) -> ProxyConnector {
        let tls = Arc::new(tls);
        let direct = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config((*tls).clone())
            .https_or_http()
            .enable_http1()
            .build();
        ProxyConnector {
            direct,
            tls,
            proxy: Arc::new(proxy),
        }
    }

    /// The proxy a request to `uri` goes through, if any.
    pub(crate) fn intercept(&self, uri: &Uri) -> Option<Intercept> {
        self.proxy.intercept(uri)
    }
}

type Direct = MaybeHttpsStream<TokioIo<TcpStream>>;

/// A connection made by [`ProxyConnector`].
pub enum Stream {
    Direct(Direct),
    /// To the proxy, which is sent whole URLs.
    Proxied(Direct),
    /// TLS to the target inside a CONNECT tunnel.
    Tunneled(Box<MaybeHttpsStream<Direct>>),
}

impl Service<Uri> for ProxyConnector {
    type Response = Stream;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Stream, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.direct.poll_ready(cx)
    }

    fn call(&mut self, dst: Uri) -> Self::Future {
        let Some(via) = self.proxy.intercept(&dst) else {
            let direct = self.direct.call(dst);
            return Box::pin(async move { Ok(Stream::Direct(direct.await?)) });
        };
        if dst.scheme() == Some(&hyper::http::uri::Scheme::HTTPS) {
            let mut tunnel = Tunnel::new(via.uri().clone(), self.direct.clone());
            if let Some(auth) = via.basic_auth() {
                tunnel = tunnel.with_auth(auth.clone());
            }
            let mut tls = HttpsConnector::from((tunnel, self.tls.clone()));
            Box::pin(async move { Ok(Stream::Tunneled(Box::new(tls.call(dst).await?))) })
        } else {
            let proxied = self.direct.call(via.uri().clone());
            Box::pin(async move { Ok(Stream::Proxied(proxied.await?)) })
        }
    }
}

impl Connection for Stream {
    fn connected(&self) -> Connected {
        match self {
            Stream::Direct(s) => s.connected(),
            Stream::Proxied(s) => s.connected().proxy(true),
            Stream::Tunneled(s) => s.connected(),
        }
    }
}

macro_rules! each {
    ($self:ident, $s:ident => $e:expr) => {
        match $self.get_mut() {
            Stream::Direct($s) | Stream::Proxied($s) => $e,
            Stream::Tunneled($s) => $e,
        }
    };
}

impl Read for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        each!(self, s => Pin::new(s).poll_read(cx, buf))
    }
}

impl Write for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        each!(self, s => Pin::new(s).poll_write(cx, buf))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        each!(self, s => Pin::new(s).poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        each!(self, s => Pin::new(s).poll_shutdown(cx))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matcher(no_proxy: &str) -> Proxy {
        let matcher = Matcher::builder()
            .https("http://user:secret@proxy.example:3128")
            .http("http://proxy.example:3128")
            .no(no_proxy)
            .build();
        Proxy::with(matcher, no_proxy)
    }

    fn via(m: &Proxy, url: &str) -> Option<String> {
        m.intercept(&url.parse().unwrap()).as_ref().map(name)
    }

    const PROXY: Option<&str> = Some("http://proxy.example:3128");

    #[test]
    fn the_proxy_is_named_without_its_credentials() {
        let m = matcher("");
        assert_eq!(
            via(&m, "https://ec2.us-east-1.amazonaws.com/").as_deref(),
            PROXY
        );
        assert_eq!(via(&m, "http://mirror.example/rhcos.ova").as_deref(), PROXY);
    }

    #[test]
    fn a_domain_matches_itself_and_its_subdomains_only() {
        for rule in ["example.com", ".example.com"] {
            let m = matcher(rule);
            assert_eq!(via(&m, "https://example.com/"), None, "{rule}");
            assert_eq!(via(&m, "https://vcenter.example.com/sdk"), None, "{rule}");
            assert_eq!(via(&m, "https://a.b.EXAMPLE.com/"), None, "{rule}");
            assert_eq!(
                via(&m, "https://notexample.com/").as_deref(),
                PROXY,
                "{rule}"
            );
            assert_eq!(
                via(&m, "https://example.com.evil/").as_deref(),
                PROXY,
                "{rule}"
            );
        }
    }

    /// `noProxy` as OpenShift's `Proxy` status carries it: its own domains, the service
    /// and machine networks, the metadata address, localhost.
    #[test]
    fn openshift_no_proxy_leaves_the_cluster_s_networks_direct() {
        let m = matcher(
            ".cluster.local,.svc,10.0.0.0/16,10.128.0.0/14,127.0.0.1,169.254.169.254,\
             172.30.0.0/16,api-int.ocp.example.com,localhost, fd00::/8",
        );
        for direct in [
            "https://172.30.0.1/api",
            "https://10.0.12.7:443/",
            "https://kubernetes.default.svc/",
            "https://a.b.svc.cluster.local/",
            "http://169.254.169.254/latest/meta-data",
            "http://127.0.0.1:8080/",
            "https://localhost/",
            "https://[fd00::1]/",
            "https://api-int.ocp.example.com:6443/",
        ] {
            assert_eq!(via(&m, direct), None, "{direct}");
        }
        for proxied in [
            "https://ec2.us-east-1.amazonaws.com/",
            "https://172.31.0.1/",
            "https://10.1.0.1/",
            "https://api.ocp.example.com/",
            "https://[fe80::1]/",
        ] {
            assert_eq!(via(&m, proxied).as_deref(), PROXY, "{proxied}");
        }
    }

    #[test]
    fn a_star_leaves_everything_direct() {
        for rule in ["*", "example.com, *"] {
            let m = matcher(rule);
            assert_eq!(via(&m, "https://ec2.us-east-1.amazonaws.com/"), None);
            assert_eq!(via(&m, "http://10.0.0.1/"), None);
            assert_eq!(via(&m, "https://[fd00::1]/"), None);
        }
    }

    #[test]
    fn without_a_proxy_everything_goes_direct() {
        let m = Proxy::with(Matcher::builder().build(), "");
        assert_eq!(via(&m, "https://ec2.us-east-1.amazonaws.com/"), None);
    }

    #[test]
    fn a_bundle_without_a_usable_certificate_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "").unwrap();
        let e = bundle_roots(&empty).unwrap_err().to_string();
        assert!(e.contains("empty.pem") && e.contains("no usable"), "{e}");
        let missing = dir.path().join("missing.pem");
        let e = bundle_roots(&missing).unwrap_err().to_string();
        assert!(e.contains("missing.pem"), "{e}");
    }

    #[test]
    fn a_bundle_keeps_its_ca_certificates() {
        let dir = tempfile::tempdir().unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let ca = ca_params().self_signed(&key).unwrap();
        let path = dir.path().join("bundle.pem");
        std::fs::write(&path, format!("junk before\n{}", ca.pem())).unwrap();
        assert_eq!(bundle_roots(&path).unwrap().len(), 1);
    }

    fn ca_params() -> rcgen::CertificateParams {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
    }
}
