//! Clients: a real HTTPS client that verifies the webhook against a test CA, the dev
//! certificates that CA comes from, and a plain-HTTP GET for the admin port.

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Once};

use base64::Engine;
use bootimage_webhook::serve::tls::DevCerts;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::Value;
use tokio::net::{TcpSocket, TcpStream};
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

pub fn install_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// A test CA and a serving certificate for `localhost` and `127.0.0.1`.
pub fn dev_certs() -> DevCerts {
    DevCerts::generate(&["localhost".into(), "127.0.0.1".into()]).unwrap()
}

/// Plain HTTP GET on the admin port.
pub async fn admin_get(addr: SocketAddr, path: &str) -> (u16, String) {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .unwrap();
    tokio::spawn(conn);
    let req = hyper::Request::get(path)
        .header("host", "localhost")
        .body(Full::new(Bytes::new()))
        .unwrap();
    let res = send.send_request(req).await.unwrap();
    let status = res.status().as_u16();
    let body = res.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    #[allow(dead_code, reason = "only the fast tier uses it")]
    pub headers: hyper::HeaderMap,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "reply is not JSON ({e}): {}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    /// The decoded JSON Patch of an AdmissionReview response, if any.
    pub fn patch(&self) -> Option<Value> {
        let v = self.json();
        let b64 = v
            .pointer("/response/patch")?
            .as_str()
            .expect("patch is a base64 string");
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .expect("patch is base64");
        Some(serde_json::from_slice(&bytes).expect("patch is JSON"))
    }
}

/// A real HTTPS client that verifies the server against the test CA.
#[derive(Clone)]
pub struct Https {
    connector: TlsConnector,
    /// The address its connections come from (the kernel's choice when `None`).
    from: Option<IpAddr>,
}

/// A TCP connection to `addr` from `from` (any port): on loopback every 127.0.0.0/8
/// address is this machine, so that one test can be several peers.
pub async fn tcp_from(from: Option<IpAddr>, addr: SocketAddr) -> std::io::Result<TcpStream> {
    let Some(ip) = from else {
        return TcpStream::connect(addr).await;
    };
    let socket = match ip {
        IpAddr::V4(_) => TcpSocket::new_v4()?,
        IpAddr::V6(_) => TcpSocket::new_v6()?,
    };
    socket.bind(SocketAddr::new(ip, 0))?;
    socket.connect(addr).await
}

/// The `n`th loopback address after 127.0.0.1 (`peer(1)` is 127.0.0.2): another client
/// machine, as the server sees it.
#[allow(dead_code, reason = "only the fast tier uses it")]
pub fn peer(n: u8) -> IpAddr {
    IpAddr::from([127, 0, 0, 1 + n])
}

impl Https {
    pub fn new(ca_pem: &str) -> Self {
        Https::with_config(client_config(
            ca_pem,
            &[&rustls::version::TLS13, &rustls::version::TLS12],
        ))
    }

    pub fn with_config(config: rustls::ClientConfig) -> Self {
        Https {
            connector: TlsConnector::from(Arc::new(config)),
            from: None,
        }
    }

    /// The same client, its connections coming from `ip`.
    #[allow(dead_code, reason = "only the fast tier uses it")]
    pub fn from(&self, ip: IpAddr) -> Self {
        Https {
            connector: self.connector.clone(),
            from: Some(ip),
        }
    }

    pub async fn connect(&self, addr: SocketAddr) -> std::io::Result<TlsStream<TcpStream>> {
        let tcp = tcp_from(self.from, addr).await?;
        let name = ServerName::try_from("localhost").unwrap();
        self.connector.connect(name, tcp).await
    }

    /// A keep-alive connection for several requests.
    pub async fn conn(&self, addr: SocketAddr) -> std::io::Result<SendRequest<Full<Bytes>>> {
        handshake(self.connect(addr).await?).await
    }

    /// POST an AdmissionReview to the webhook path.
    pub async fn post_review(&self, addr: SocketAddr, review: &Value) -> Reply {
        let body = serde_json::to_vec(review).unwrap();
        self.post(addr, "/mutate-machinesets", Some("application/json"), body)
            .await
            .unwrap()
    }

    pub async fn post(
        &self,
        addr: SocketAddr,
        path: &str,
        content_type: Option<&str>,
        body: Vec<u8>,
    ) -> std::io::Result<Reply> {
        let mut send = self.conn(addr).await?;
        let req = request("POST", path, content_type, body);
        send_on(&mut send, req).await
    }
}

/// HTTP/1.1 on a TLS connection, driven by a task of its own.
pub async fn handshake(tls: TlsStream<TcpStream>) -> std::io::Result<SendRequest<Full<Bytes>>> {
    let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .map_err(std::io::Error::other)?;
    tokio::spawn(conn);
    Ok(send)
}

pub fn request(
    method: &str,
    path: &str,
    content_type: Option<&str>,
    body: Vec<u8>,
) -> hyper::Request<Full<Bytes>> {
    let mut b = hyper::Request::builder()
        .method(method)
        .uri(path)
        .header("host", "localhost");
    if let Some(ct) = content_type {
        b = b.header("content-type", ct);
    }
    b.body(Full::new(Bytes::from(body))).unwrap()
}

pub async fn send_on(
    send: &mut SendRequest<Full<Bytes>>,
    req: hyper::Request<Full<Bytes>>,
) -> std::io::Result<Reply> {
    send.ready().await.map_err(std::io::Error::other)?;
    let res = send
        .send_request(req)
        .await
        .map_err(std::io::Error::other)?;
    let status = res.status().as_u16();
    let headers = res.headers().clone();
    let body = res
        .into_body()
        .collect()
        .await
        .map_err(std::io::Error::other)?
        .to_bytes()
        .to_vec();
    Ok(Reply {
        status,
        headers,
        body,
    })
}

pub fn client_config(
    ca_pem: &str,
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> rustls::ClientConfig {
    install_provider();
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let mut config =
        rustls::ClientConfig::builder_with_provider(bootimage_webhook::serve::tls::provider())
            .with_protocol_versions(versions)
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    config
}

/// The leaf certificate the server presented on this connection.
#[allow(dead_code, reason = "only the fast tier uses it")]
pub fn peer_leaf(tls: &TlsStream<TcpStream>) -> Vec<u8> {
    tls.get_ref().1.peer_certificates().unwrap()[0]
        .as_ref()
        .to_vec()
}

/// DER of the first certificate in a PEM chain.
#[allow(dead_code, reason = "only the fast tier uses it")]
pub fn leaf_der(chain_pem: &str) -> Vec<u8> {
    CertificateDer::pem_slice_iter(chain_pem.as_bytes())
        .next()
        .unwrap()
        .unwrap()
        .as_ref()
        .to_vec()
}
