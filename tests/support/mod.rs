//! Shared test helpers: fixtures, a real HTTPS client, servers on 127.0.0.1:0 with a test
//! CA, and Secret volumes laid out the way the kubelet lays them out.

#![allow(dead_code)]

pub mod binary;
pub mod evanphx;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Once};
use std::time::Duration;

use base64::Engine;
use bootimage_webhook::app::{self, Running, Settings};
use bootimage_webhook::core::snapshot::{self, Arch, BootImages, Snapshot};
use bootimage_webhook::serve::server::ConnLimits;
use bootimage_webhook::serve::tls::{DevCerts, MinVersion};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::Value;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

pub fn install_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// `tests/fixtures/<name>` (provenance in `tests/fixtures/README.md`).
pub fn fixture_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

pub fn fixture_text(name: &str) -> String {
    let p = fixture_path(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("fixture {}: {e}", p.display()))
}

/// A fixture as JSON (YAML fixtures are converted; of a YAML stream, the first document).
pub fn fixture(name: &str) -> Value {
    snapshot::parse_documents(&fixture_text(name))
        .unwrap()
        .swap_remove(0)
}

/// The boot images of the real stream, as the assembled ConfigMap carries them.
pub fn boot_images() -> BootImages {
    BootImages::from_document(&fixture_text("configmap-coreos-bootimages.assembled.yaml")).unwrap()
}

pub fn offline_snapshot() -> Snapshot {
    Snapshot::offline(boot_images(), false, Some(Arch::Amd64), false)
}

pub const CURRENT_X86: &str = "projects/rhcos-cloud/global/images/rhcos-9-8-20260428-0-gcp-x86-64";
pub const CURRENT_ARM: &str = "projects/rhcos-cloud/global/images/rhcos-9-8-20260428-0-gcp-aarch64";

/// A Secret volume as the kubelet writes it: `..<ts>/` holds the files, `..data` points
/// at it, and `tls.crt`/`tls.key` point through `..data`. Updates swap `..data`.
pub struct SecretVolume {
    pub dir: PathBuf,
    generation: u32,
}

impl SecretVolume {
    pub fn new(dir: &Path, certs: &DevCerts) -> Self {
        let mut v = SecretVolume {
            dir: dir.to_owned(),
            generation: 0,
        };
        v.update(certs.chain_pem.as_bytes(), certs.key_pem.as_bytes());
        for name in ["tls.crt", "tls.key"] {
            std::os::unix::fs::symlink(format!("..data/{name}"), dir.join(name)).unwrap();
        }
        v
    }

    /// Write a new timestamped directory and atomically repoint `..data` at it.
    pub fn update(&mut self, cert: &[u8], key: &[u8]) {
        self.generation += 1;
        let ts = format!(
            "..2026_12_02_00_00_{:02}.{}",
            self.generation,
            std::process::id()
        );
        let data = self.dir.join(&ts);
        std::fs::create_dir_all(&data).unwrap();
        std::fs::write(data.join("tls.crt"), cert).unwrap();
        std::fs::write(data.join("tls.key"), key).unwrap();
        let tmp = self.dir.join("..data_tmp");
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink(&ts, &tmp).unwrap();
        std::fs::rename(&tmp, self.dir.join("..data")).unwrap();
    }

    pub fn cert(&self) -> PathBuf {
        self.dir.join("tls.crt")
    }

    pub fn key(&self) -> PathBuf {
        self.dir.join("tls.key")
    }
}

pub fn dev_certs() -> DevCerts {
    DevCerts::generate(&["localhost".into(), "127.0.0.1".into()]).unwrap()
}

pub struct TestServer {
    pub running: Running,
    pub certs: DevCerts,
    pub volume: SecretVolume,
    pub client: Https,
    _dir: tempfile::TempDir,
}

pub fn settings(volume: &SecretVolume) -> Settings {
    Settings {
        cert_file: volume.cert(),
        key_file: volume.key(),
        bind_address: "127.0.0.1:0".parse().unwrap(),
        admin_address: "127.0.0.1:0".parse().unwrap(),
        tls_min_version: MinVersion::Tls12,
        cert_reload_interval: Duration::from_millis(200),
        limits: ConnLimits {
            handshake_timeout: Duration::from_secs(2),
            header_read_timeout: Duration::from_millis(800),
        },
        body_timeout: Duration::from_secs(2),
        drain_timeout: Duration::from_secs(5),
    }
}

/// A server with a fresh test CA and the real stream, gate open.
pub async fn start_server() -> TestServer {
    start_server_with(|_| {}).await
}

pub async fn start_server_with(tweak: impl FnOnce(&mut Settings)) -> TestServer {
    install_provider();
    let dir = tempfile::tempdir().unwrap();
    let certs = dev_certs();
    let volume = SecretVolume::new(dir.path(), &certs);
    let mut s = settings(&volume);
    tweak(&mut s);
    let running = app::start(s, snapshot::shared(offline_snapshot()), true)
        .await
        .unwrap();
    let client = Https::new(&certs.ca_pem);
    TestServer {
        running,
        certs,
        volume,
        client,
        _dir: dir,
    }
}

impl TestServer {
    pub fn addr(&self) -> SocketAddr {
        self.running.webhook_addr
    }

    pub async fn post_review(&self, body: &[u8]) -> Reply {
        self.client
            .post(
                self.addr(),
                "/mutate-machinesets",
                Some("application/json"),
                body.to_vec(),
            )
            .await
            .unwrap()
    }

    pub async fn admin_get(&self, path: &str) -> (u16, String) {
        admin_get(self.running.admin_addr, path).await
    }
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
        }
    }

    pub async fn connect(&self, addr: SocketAddr) -> std::io::Result<TlsStream<TcpStream>> {
        let tcp = TcpStream::connect(addr).await?;
        let name = ServerName::try_from("localhost").unwrap();
        self.connector.connect(name, tcp).await
    }

    /// A keep-alive connection for several requests.
    pub async fn conn(&self, addr: SocketAddr) -> std::io::Result<SendRequest<Full<Bytes>>> {
        let tls = self.connect(addr).await?;
        let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .map_err(std::io::Error::other)?;
        tokio::spawn(conn);
        Ok(send)
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
pub fn peer_leaf(tls: &TlsStream<TcpStream>) -> Vec<u8> {
    tls.get_ref().1.peer_certificates().unwrap()[0]
        .as_ref()
        .to_vec()
}

/// DER of the first certificate in a PEM chain.
pub fn leaf_der(chain_pem: &str) -> Vec<u8> {
    CertificateDer::pem_slice_iter(chain_pem.as_bytes())
        .next()
        .unwrap()
        .unwrap()
        .as_ref()
        .to_vec()
}

/// The UPDATE review fixture around `ms` (as object and oldObject).
pub fn update_review_of(ms: &Value) -> Value {
    let mut review = fixture("admissionreview-v1-machineset-gcp-update.assembled.json");
    review["request"]["object"] = ms.clone();
    review["request"]["oldObject"] = ms.clone();
    review["request"]["name"] = ms["metadata"]["name"].clone();
    review
}

/// The MachineSet inside an AdmissionReview fixture.
pub fn review_object(review: &Value) -> Value {
    review.pointer("/request/object").unwrap().clone()
}

/// `doc` with the boot-image annotation and every boot disk image removed, for "equal
/// except for the image(s) and the annotation" comparisons.
pub fn without_image_fields(doc: &Value) -> Value {
    let mut d = doc.clone();
    if let Some(ann) = d
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        ann.remove(bootimage_webhook::core::decision::BOOT_IMAGE_ANNOTATION);
    }
    let empty = |a: &Value| a.is_null() || a.as_object().is_some_and(|a| a.is_empty());
    if d.pointer("/metadata/annotations").is_some_and(empty) {
        d["metadata"].as_object_mut().unwrap().remove("annotations");
    }
    // AWS `ami` and Azure `image` are replaced as a whole.
    if let Some(spec) = d
        .pointer_mut("/spec/template/spec/providerSpec/value")
        .and_then(Value::as_object_mut)
    {
        for key in ["ami", "image"] {
            spec.remove(key);
        }
    }
    if let Some(disks) = d
        .pointer_mut("/spec/template/spec/providerSpec/value/disks")
        .and_then(Value::as_array_mut)
    {
        for disk in disks {
            if disk.get("boot") == Some(&Value::Bool(true))
                && let Some(o) = disk.as_object_mut()
            {
                o.remove("image");
            }
        }
    }
    d
}
