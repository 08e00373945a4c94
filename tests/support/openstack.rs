//! The OpenStack tests' world: a real Keystone and Glance (`scripts/openstack-servers`),
//! a project of each test's own, the stream's qcow2.gz served over HTTP, and forwarders
//! that put TLS in front of Keystone or slow an upload to Glance down.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde_json::{Value, json};

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/openstack-servers")
}

/// KEY=VALUE lines (values shell-quoted when they need it).
fn key_values(out: &[u8]) -> BTreeMap<String, String> {
    String::from_utf8_lossy(out)
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.trim_matches('\'').to_owned()))
        .collect()
}

fn run(args: &[&str]) -> BTreeMap<String, String> {
    let out = Command::new(script())
        .args(args)
        .output()
        .expect("scripts/openstack-servers");
    assert!(
        out.status.success(),
        "openstack-servers {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    key_values(&out.stdout)
}

/// Keystone and Glance in a directory of their own, stopped when dropped (and by the
/// script's watchdog when the test process ends).
pub struct Servers {
    pub dir: tempfile::TempDir,
    pub env: BTreeMap<String, String>,
}

impl Servers {
    pub fn start() -> Servers {
        // Keystone and Glance here are plain http, as no cloud may be.
        bootimage_webhook::cluster::egress::allow_plain_http_for_tests();
        let dir = own_dir();
        let path = dir.path().join("s");
        let pid = std::process::id().to_string();
        let env = run(&["start", path.to_str().unwrap(), "--owner-pid", &pid]);
        Servers { dir, env }
    }

    /// One pair for the whole test binary, and the turn to use it: one test at a time, as
    /// Keystone on sqlite answers concurrent writers (a project made while a token is
    /// issued) with an error ("database is locked"). Each test has a project of its own.
    pub async fn shared() -> (&'static Servers, tokio::sync::MutexGuard<'static, ()>) {
        static SHARED: OnceLock<Servers> = OnceLock::new();
        static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
        let turn = TURN.lock().await;
        (SHARED.get_or_init(Servers::start), turn)
    }

    fn path(&self) -> String {
        self.dir.path().join("s").to_str().unwrap().to_owned()
    }

    /// A project and member user `name`, with its `clouds.yaml`.
    pub fn tenant(&self, name: &str) -> Tenant {
        let env = run(&["tenant", &self.path(), name]);
        let clouds_yaml = std::fs::read_to_string(&env["CLOUDS_YAML"]).unwrap();
        Tenant { env, clouds_yaml }
    }

    /// SIGKILL to Glance, at once.
    pub fn kill_glance(&self) {
        run(&["kill", &self.path(), "glance"]);
    }

    pub fn restart(&self) {
        run(&["restart", &self.path()]);
    }

    pub fn admin_token(&self) -> String {
        token(
            &self.env["OS_AUTH_URL"],
            &self.env["OS_ADMIN_USERNAME"],
            &self.env["OS_ADMIN_PASSWORD"],
            &self.env["OS_ADMIN_PROJECT_NAME"],
        )
    }

    /// A region `region` whose image endpoint is `url` (Keystone's admin API).
    pub fn image_endpoint_in(&self, region: &str, url: &str) {
        let (keystone, admin) = (&self.env["KEYSTONE_URL"], self.admin_token());
        call(
            "POST",
            &format!("{keystone}/v3/regions"),
            &admin,
            Some(json!({"region": {"id": region}})),
        );
        let services = call(
            "GET",
            &format!("{keystone}/v3/services?type=image"),
            &admin,
            None,
        );
        let service = services["services"][0]["id"].as_str().unwrap().to_owned();
        let endpoint = json!({"endpoint": {"service_id": service, "interface": "public", "region_id": region, "url": url}});
        call(
            "POST",
            &format!("{keystone}/v3/endpoints"),
            &admin,
            Some(endpoint),
        );
    }
}

impl Drop for Servers {
    fn drop(&mut self) {
        let _ = Command::new(script()).args(["stop", &self.path()]).output();
    }
}

pub struct Tenant {
    pub env: BTreeMap<String, String>,
    pub clouds_yaml: String,
}

impl Tenant {
    pub fn token(&self) -> String {
        let e = &self.env;
        token(
            &e["OS_AUTH_URL"],
            &e["OS_USERNAME"],
            &e["OS_PASSWORD"],
            &e["OS_PROJECT_NAME"],
        )
    }

    /// A Glance call of the test's own (curl), as this project's user.
    pub fn glance(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        call(
            method,
            &format!("{}{path}", self.env["GLANCE_URL"]),
            &self.token(),
            body,
        )
    }

    /// Uploads `data` to the image `id` (curl), as anyone of the project can.
    pub fn upload(&self, id: &str, data: &[u8]) {
        upload(&self.env["GLANCE_URL"], &self.token(), id, data);
    }

    /// The images of this project named `name`, as Glance lists them.
    pub fn images_named(&self, name: &str) -> Vec<Value> {
        let found = self.glance("GET", &format!("/v2/images?name={name}"), None);
        found["images"].as_array().cloned().unwrap_or_default()
    }
}

/// A directory for a test process's servers. The shared ones outlive the test (a static
/// is never dropped; the script's watchdog stops them), so the directories of processes
/// that are gone are removed first.
fn own_dir() -> tempfile::TempDir {
    let base = std::env::temp_dir().join("bootimage-webhook-openstack");
    std::fs::create_dir_all(&base).unwrap();
    for entry in std::fs::read_dir(&base).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let pid = name.split('-').next().unwrap_or_default();
        if !pid.is_empty() && !Path::new("/proc").join(pid).exists() {
            // Its watchdog may not have stopped them yet, and gives up once the directory
            // is gone: stopped here first.
            let servers = entry.path().join("s");
            let _ = Command::new(script()).arg("stop").arg(&servers).output();
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
    tempfile::Builder::new()
        .prefix(&format!("{}-", std::process::id()))
        .tempdir_in(&base)
        .unwrap()
}

/// A project-scoped token for a user of the Default domain (curl).
pub fn token(auth_url: &str, user: &str, password: &str, project: &str) -> String {
    let body = json!({"auth": {
        "identity": {"methods": ["password"], "password": {"user": {"name": user, "domain": {"name": "Default"}, "password": password}}},
        "scope": {"project": {"name": project, "domain": {"name": "Default"}}}
    }});
    let out = Command::new("curl")
        .args([
            "-sS",
            "-o",
            "/dev/null",
            "-D",
            "-",
            "-H",
            "Content-Type: application/json",
            "--data-binary",
        ])
        .arg(body.to_string())
        .arg(format!("{auth_url}/auth/tokens"))
        .output()
        .expect("curl");
    let headers = String::from_utf8_lossy(&out.stdout);
    headers
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("x-subject-token")
                .then(|| v.trim().to_owned())
        })
        .unwrap_or_else(|| panic!("no token: {headers}"))
}

/// Uploads `data` to the image `id` of the Glance at `glance` (curl), with `token`.
pub fn upload(glance: &str, token: &str, id: &str, data: &[u8]) {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), data).unwrap();
    let out = Command::new("curl")
        .args(["-sS", "-f", "-X", "PUT", "-H", &format!("X-Auth-Token: {token}")])
        .args(["-H", "Content-Type: application/octet-stream", "--data-binary"])
        .arg(format!("@{}", file.path().display()))
        .arg(format!("{glance}/v2/images/{id}/file"))
        .output()
        .expect("curl");
    assert!(out.status.success(), "upload: {}", String::from_utf8_lossy(&out.stderr));
}

/// A JSON call with a token (curl); the answer's JSON, `null` when it has none.
pub fn call(method: &str, url: &str, token: &str, body: Option<Value>) -> Value {
    let mut cmd = Command::new("curl");
    cmd.args(["-sS", "-X", method, "-H", &format!("X-Auth-Token: {token}")]);
    if let Some(body) = body {
        cmd.args([
            "-H",
            "Content-Type: application/json",
            "--data-binary",
            &body.to_string(),
        ]);
    }
    let out = cmd.arg(url).output().expect("curl");
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

/// A real small qcow2 (`mib` MiB of data from `seed`) and its gzip, with their digests.
pub struct Qcow2 {
    pub qcow2: Vec<u8>,
    pub gz: Vec<u8>,
    pub sha256: String,
    pub gz_sha256: String,
    pub sha512: String,
}

impl Qcow2 {
    pub fn make(dir: &Path, mib: u32, seed: u32) -> Qcow2 {
        let path = dir.join(format!("rhcos-{seed}.qcow2"));
        let mib = mib.to_string();
        let seed_s = seed.to_string();
        let out = run(&[
            "qcow2",
            path.to_str().unwrap(),
            "--data-mib",
            &mib,
            "--seed",
            &seed_s,
            "--gzip",
        ]);
        Qcow2 {
            qcow2: std::fs::read(&out["QCOW2"]).unwrap(),
            gz: std::fs::read(&out["GZ"]).unwrap(),
            sha256: out["QCOW2_SHA256"].clone(),
            gz_sha256: out["GZ_SHA256"].clone(),
            sha512: out["QCOW2_SHA512"].clone(),
        }
    }
}

/// Files served over plain HTTP on loopback (the stream's mirror), counting requests.
pub struct Files {
    pub addr: std::net::SocketAddr,
    pub hits: Arc<AtomicUsize>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Drop for Files {
    fn drop(&mut self) {
        // Dropped from async tests too, where a runtime may not block.
        if let Some(r) = self.runtime.take() {
            r.shutdown_background();
        }
    }
}

impl Files {
    pub fn serve(files: BTreeMap<String, Vec<u8>>) -> Files {
        // Served over plain http, as no mirror may be.
        bootimage_webhook::cluster::egress::allow_plain_http_for_tests();
        let (runtime, listener) = background_runtime();
        let addr = listener.local_addr().unwrap();
        let hits = Arc::new(AtomicUsize::new(0));
        let (files, counted) = (Arc::new(files), hits.clone());
        runtime.spawn(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            while let Ok((tcp, _)) = listener.accept().await {
                let (files, counted) = (files.clone(), counted.clone());
                tokio::spawn(async move {
                    let serve = hyper::service::service_fn(
                        move |req: hyper::Request<hyper::body::Incoming>| {
                            counted.fetch_add(1, Ordering::SeqCst);
                            let found = files.get(req.uri().path()).cloned();
                            async move {
                                let mut resp = hyper::Response::new(http_body_util::Full::new(
                                    bytes::Bytes::from(found.clone().unwrap_or_default()),
                                ));
                                if found.is_none() {
                                    *resp.status_mut() = hyper::StatusCode::NOT_FOUND;
                                }
                                Ok::<_, std::convert::Infallible>(resp)
                            }
                        },
                    );
                    let io = hyper_util::rt::TokioIo::new(tcp);
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(io, serve)
                        .await;
                });
            }
        });
        Files {
            addr,
            hits,
            runtime: Some(runtime),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

/// A runtime of its own (the tests' may be gone or busy) and a loopback listener for it.
fn background_runtime() -> (tokio::runtime::Runtime, std::net::TcpListener) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    (runtime, listener)
}

/// A TCP forwarder on loopback to `port`: with `tls` (chain and key, PEM) it ends TLS
/// first; with `pace`, what the client sends goes on a chunk at a time, `pace` apart.
pub struct Forwarder {
    pub port: u16,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        if let Some(r) = self.runtime.take() {
            r.shutdown_background();
        }
    }
}

impl Forwarder {
    pub fn start(port: u16, tls: Option<(&str, &str)>, pace: Option<Duration>) -> Forwarder {
        let (runtime, listener) = background_runtime();
        let local = listener.local_addr().unwrap().port();
        let acceptor = tls.map(|(chain, key)| {
            let served =
                bootimage_webhook::serve::tls::certified_key(chain.as_bytes(), key.as_bytes())
                    .unwrap();
            let config = rustls::ServerConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(rustls::sign::SingleCertAndKey::from(served)));
            tokio_rustls::TlsAcceptor::from(Arc::new(config))
        });
        runtime.spawn(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            while let Ok((tcp, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let Ok(upstream) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await
                    else {
                        return;
                    };
                    match acceptor {
                        Some(a) => {
                            if let Ok(tls) = a.accept(tcp).await {
                                pipe(tls, upstream, pace).await;
                            }
                        }
                        None => pipe(tcp, upstream, pace).await,
                    }
                });
            }
        });
        Forwarder {
            port: local,
            runtime: Some(runtime),
        }
    }
}

async fn pipe<C>(client: C, upstream: tokio::net::TcpStream, pace: Option<Duration>)
where
    C: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (mut cr, mut cw) = tokio::io::split(client);
    let (mut ur, mut uw) = upstream.into_split();
    let up = async move {
        let mut buf = vec![0u8; 64 << 10];
        loop {
            let n = match cr.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if uw.write_all(&buf[..n]).await.is_err() {
                break;
            }
            if let Some(pace) = pace {
                tokio::time::sleep(pace).await;
            }
        }
        let _ = uw.shutdown().await;
    };
    let down = async move {
        let _ = tokio::io::copy(&mut ur, &mut cw).await;
        let _ = cw.shutdown().await;
    };
    tokio::join!(up, down);
}
