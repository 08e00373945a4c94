//! The cluster side against an emulated API server (tests/kmock/emulator.py, built on the
//! PyPI kmock): the real binary with a kubeconfig pointing at it, objects seeded from
//! tests/fixtures, and the emulator's state and request log read back. The emulator
//! calls our webhook on MachineSet writes, as the apiserver would (failurePolicy Ignore).
//! Limits: no real apiserver semantics (defaulting, 410 Gone, RV conflicts); see
//! tests/kmock/README.md.

mod support;

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use support::{CURRENT_X86, Https, admin_get, dev_certs, fixture};
use tokio::net::TcpStream;

const BIN: &str = env!("CARGO_BIN_EXE_bootimage-webhook");
const OLD: &str = "projects/rhcos-cloud/global/images/rhcos-9-6-20250826-1-gcp-x86-64";
const NEWER: &str = "projects/rhcos-cloud/global/images/rhcos-9-8-20261101-0-gcp-x86-64";

fn python() -> PathBuf {
    if let Ok(p) = std::env::var("KMOCK_PYTHON") {
        return p.into();
    }
    let home = std::env::var("HOME").unwrap_or_else(|_| "/tmp".into());
    let p = Path::new(&home).join(".cache/bootimage-webhook/venv/bin/python");
    assert!(
        p.exists(),
        "no kmock venv at {}: run scripts/install-test-deps",
        p.display()
    );
    p
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Plain HTTP to the emulator.
async fn call(addr: SocketAddr, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .unwrap();
    tokio::spawn(conn);
    let bytes = body
        .map(|b| serde_json::to_vec(b).unwrap())
        .unwrap_or_default();
    let req = hyper::Request::builder()
        .method(method)
        .uri(path)
        .header("host", "localhost")
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(bytes)))
        .unwrap();
    let res = send.send_request(req).await.unwrap();
    let status = res.status().as_u16();
    let body = res.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

struct Emulator {
    child: Child,
    addr: SocketAddr,
    args: Vec<String>,
}

impl Emulator {
    fn start(args: Vec<String>) -> Self {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kmock/emulator.py");
        let mut child = Command::new(python())
            .arg(&script)
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line
            .trim()
            .strip_prefix("READY http://")
            .unwrap_or_else(|| panic!("emulator said {line:?}"));
        Emulator {
            child,
            addr: url.parse().unwrap(),
            args,
        }
    }

    fn stop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.wait();
    }

    fn restart(&mut self) {
        self.stop();
        let args = self.args.clone();
        *self = Emulator::start(args);
    }

    async fn objects(&self) -> Vec<Value> {
        call(self.addr, "GET", "/_test/objects", None)
            .await
            .1
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    async fn object(&self, kind: &str, name: &str) -> Value {
        self.objects()
            .await
            .into_iter()
            .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no {kind} {name}"))
    }

    async fn put(&self, obj: &Value) {
        let (code, body) = call(self.addr, "POST", "/_test/objects", Some(obj)).await;
        assert_eq!(code, 200, "{body}");
    }

    async fn requests(&self) -> Vec<Value> {
        call(self.addr, "GET", "/_test/requests", None)
            .await
            .1
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// The touches so far: PATCH requests on MachineSets, by name.
    async fn touches(&self) -> Vec<String> {
        self.requests()
            .await
            .iter()
            .filter(|r| {
                r["method"] == "PATCH"
                    && r["path"]
                        .as_str()
                        .is_some_and(|p| p.contains("/machinesets/"))
            })
            .map(|r| {
                r["path"]
                    .as_str()
                    .unwrap()
                    .rsplit('/')
                    .next()
                    .unwrap()
                    .to_owned()
            })
            .collect()
    }

    async fn events(&self) -> Vec<Value> {
        self.objects()
            .await
            .into_iter()
            .filter(|o| o["kind"] == "Event")
            .collect()
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        self.stop();
    }
}

fn machineset(name: &str, image: &str) -> Value {
    let mut ms = fixture("machineset-gcp-build02-infra-a.yaml");
    ms["metadata"]["name"] = json!(name);
    ms["spec"]["template"]["spec"]["providerSpec"]["value"]["disks"][0]["image"] = json!(image);
    ms
}

fn pool(updated: i64) -> Value {
    json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
        "metadata": {"name": "master"},
        "spec": {"configuration": {"name": "rendered-master-new"}},
        "status": {
            "configuration": {"name": "rendered-master-old"},
            "updatedMachineCount": updated, "machineCount": 3,
            "conditions": [{"type": "Updating", "status": "True"}, {"type": "Updated", "status": "False"}]
        }
    })
}

fn configmap() -> Value {
    fixture("configmap-coreos-bootimages.assembled.yaml")
}

fn configmap_with_stream(edit: impl FnOnce(&mut Value)) -> Value {
    let mut cm = configmap();
    let mut stream: Value = serde_json::from_str(cm["data"]["stream"].as_str().unwrap()).unwrap();
    edit(&mut stream);
    cm["data"]["stream"] = json!(serde_json::to_string(&stream).unwrap());
    cm
}

fn seed() -> Vec<Value> {
    let mut opted = machineset("ms-opted-out", OLD);
    opted["metadata"]["labels"]["bootimages.machineconfiguration.openshift.io/managed"] =
        json!("false");
    let user_data =
        base64::engine::general_purpose::STANDARD.encode(br#"{"ignition":{"version":"3.2.0"}}"#);
    vec![
        configmap(),
        pool(0),
        json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
               "metadata": {"name": "rendered-master-new",
                            "annotations": {"machineconfiguration.openshift.io/release-image-version": "4.21.0"}},
               "spec": {"config": {"ignition": {"version": "3.5.0"}}}}),
        json!({"apiVersion": "config.openshift.io/v1", "kind": "Infrastructure", "metadata": {"name": "cluster"},
               "status": {"platform": "GCP", "platformStatus": {"type": "GCP"}}}),
        json!({"apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion", "metadata": {"name": "version"},
               "status": {"desired": {"version": "4.21.0", "architecture": "amd64"},
                          "history": [{"state": "Partial", "version": "4.21.0"}, {"state": "Completed", "version": "4.20.9"}]}}),
        json!({"apiVersion": "v1", "kind": "Node",
               "metadata": {"name": "master-0", "labels": {"node-role.kubernetes.io/master": "", "kubernetes.io/arch": "amd64"}}}),
        json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
               "metadata": {"name": "worker-user-data", "namespace": "openshift-machine-api"},
               "data": {"userData": user_data}}),
        machineset("ms-stale", OLD),
        machineset("ms-current", CURRENT_X86),
        machineset("ms-custom", "projects/my-project/global/images/custom"),
        opted,
    ]
}

struct World {
    emulator: Emulator,
    server: Child,
    webhook: SocketAddr,
    admin: SocketAddr,
    client: Https,
    _dir: tempfile::TempDir,
}

impl World {
    /// The emulator, then the binary pointed at it. `webhook` decides whether the emulator
    /// calls our webhook on MachineSet writes.
    async fn start(webhook: bool) -> World {
        World::start_with(webhook, "0s").await
    }

    async fn start_with(webhook: bool, shutdown_delay: &str) -> World {
        support::install_provider();
        let dir = tempfile::tempdir().unwrap();
        let certs = dev_certs();
        certs.write(dir.path()).unwrap();
        let seed_path = dir.path().join("seed.json");
        std::fs::write(&seed_path, serde_json::to_vec(&seed()).unwrap()).unwrap();
        let webhook_port = free_port();
        let mut args = vec![
            "--port".to_owned(),
            free_port().to_string(),
            "--seed".into(),
            seed_path.display().to_string(),
            "--state-file".into(),
            dir.path().join("state.json").display().to_string(),
        ];
        if webhook {
            args.extend([
                "--webhook-url".into(),
                format!("https://127.0.0.1:{webhook_port}/mutate-machinesets"),
                "--webhook-ca".into(),
                dir.path().join("ca.crt").display().to_string(),
            ]);
        }
        let emulator = Emulator::start(args);
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: kmock\n  cluster:\n    server: http://{}\ncontexts:\n- name: kmock\n  context:\n    cluster: kmock\n    user: test\n    namespace: bootimage-webhook\ncurrent-context: kmock\nusers:\n- name: test\n  user: {{}}\n",
                emulator.addr
            ),
        )
        .unwrap();
        let admin_port = free_port();
        let server = Command::new(BIN)
            .args([
                "serve",
                "--bind-address",
                &format!("127.0.0.1:{webhook_port}"),
                "--admin-address",
                &format!("127.0.0.1:{admin_port}"),
            ])
            .args([
                "--touch-settle",
                "0s",
                "--touch-backoff",
                "200ms",
                "--touch-resync",
                "2s",
                "--shutdown-delay",
                shutdown_delay,
            ])
            .args([
                "--pod-name",
                "replica-0",
                "--pod-namespace",
                "bootimage-webhook",
            ])
            .arg("--tls-cert-file")
            .arg(dir.path().join("tls.crt"))
            .arg("--tls-private-key-file")
            .arg(dir.path().join("tls.key"))
            .env("KUBECONFIG", &kubeconfig)
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let world = World {
            emulator,
            server,
            webhook: format!("127.0.0.1:{webhook_port}").parse().unwrap(),
            admin: format!("127.0.0.1:{admin_port}").parse().unwrap(),
            client: Https::new(&certs.ca_pem),
            _dir: dir,
        };
        world.wait_ready().await;
        world
    }

    async fn wait_ready(&self) {
        let t = Instant::now();
        loop {
            if let Ok(Ok(tcp)) =
                tokio::time::timeout(Duration::from_secs(1), TcpStream::connect(self.admin)).await
            {
                drop(tcp);
                if admin_get(self.admin, "/readyz").await.0 == 200 {
                    return;
                }
            }
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "never ready: {:?}",
                self.metric_lines("watch").await
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn metrics(&self) -> String {
        admin_get(self.admin, "/metrics").await.1
    }

    async fn metric_lines(&self, needle: &str) -> Vec<String> {
        self.metrics()
            .await
            .lines()
            .filter(|l| l.contains(needle) && !l.starts_with('#'))
            .map(str::to_owned)
            .collect()
    }

    async fn metric(&self, name: &str) -> f64 {
        self.metrics()
            .await
            .lines()
            .find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix(' ')))
            .map(|v| v.trim().parse().unwrap())
            .unwrap_or(0.0)
    }

    /// The webhook's answer for an UPDATE of `ms` right now.
    async fn review(&self, ms: &Value) -> Value {
        let reply = self
            .client
            .post_review(self.webhook, &support::update_review_of(ms))
            .await;
        assert_eq!(reply.status, 200);
        let mut v = reply.json()["response"].clone();
        v["decodedPatch"] = reply.patch().unwrap_or(Value::Null);
        v
    }

    async fn wait_for(&self, what: &str, mut f: impl AsyncFnMut() -> bool) {
        let t = Instant::now();
        while !f().await {
            assert!(
                t.elapsed() < Duration::from_secs(45),
                "timed out waiting for {what}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for World {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.server.id().to_string()])
            .stderr(Stdio::null())
            .status();
        let _ = self.server.wait();
    }
}

fn image(ms: &Value) -> String {
    ms["spec"]["template"]["spec"]["providerSpec"]["value"]["disks"][0]["image"]
        .as_str()
        .unwrap_or("")
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gate_then_exactly_one_touch_per_machineset_that_needs_one() {
    let w = World::start(true).await;
    // The master pool has not finished: the gate stays closed, nothing is touched.
    assert_eq!(w.metric("bootimage_webhook_gate_open").await, 0.0);
    let answer = w.review(&machineset("probe", OLD)).await;
    assert_eq!(
        answer["auditAnnotations"]["reason"], "UpgradeInProgress",
        "{answer}"
    );
    assert!(
        answer["status"]["message"]
            .as_str()
            .unwrap()
            .contains("no master has completed"),
        "{answer}"
    );
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(
        w.emulator.touches().await.is_empty(),
        "no touch while the gate is closed"
    );

    // One master finishes: the exact behaviour §3 rule opens it.
    w.emulator.put(&pool(1)).await;
    w.wait_for("the gate to open", async || {
        w.metric("bootimage_webhook_gate_open").await == 1.0
    })
    .await;
    w.wait_for("the stale MachineSet to move", async || {
        image(&w.emulator.object("MachineSet", "ms-stale").await) == CURRENT_X86
    })
    .await;
    // Exactly one touch, for the one that needed it; the webhook moved it.
    tokio::time::sleep(Duration::from_millis(2500)).await; // a resync passes
    assert_eq!(w.emulator.touches().await, ["ms-stale"]);
    let stale = w.emulator.object("MachineSet", "ms-stale").await;
    assert_eq!(
        stale["metadata"]["annotations"]["bootimages.machineconfiguration.openshift.io/boot-image"],
        CURRENT_X86
    );
    assert!(
        stale["metadata"]["annotations"]["bootimages.machineconfiguration.openshift.io/touch"]
            .is_string()
    );
    for (name, want) in [
        ("ms-current", CURRENT_X86),
        ("ms-custom", "projects/my-project/global/images/custom"),
        ("ms-opted-out", OLD),
    ] {
        assert_eq!(
            image(&w.emulator.object("MachineSet", name).await),
            want,
            "{name} untouched"
        );
    }
    assert_eq!(
        w.metric_lines(r#"touches_total{outcome="moved"}"#)
            .await
            .len(),
        1
    );
    assert_eq!(w.metric("bootimage_webhook_leader").await, 1.0);

    // A new stream: one touch for each MachineSet that now needs one, and then silence.
    call(w.emulator.addr, "DELETE", "/_test/requests", None).await;
    w.emulator
        .put(&configmap_with_stream(|s| {
            s["architectures"]["x86_64"]["images"]["gcp"]["name"] =
                json!("rhcos-9-8-20261101-0-gcp-x86-64")
        }))
        .await;
    w.wait_for("both to move to the newer image", async || {
        image(&w.emulator.object("MachineSet", "ms-stale").await) == NEWER
            && image(&w.emulator.object("MachineSet", "ms-current").await) == NEWER
    })
    .await;
    // The webhook follows the ConfigMap too.
    assert_eq!(
        w.review(&machineset("probe", OLD)).await["auditAnnotations"]["boot-image"],
        NEWER
    );
    tokio::time::sleep(Duration::from_millis(4500)).await; // two resyncs
    let mut touched = w.emulator.touches().await;
    touched.sort();
    assert_eq!(
        touched,
        ["ms-current", "ms-stale"],
        "one touch each, none on resync"
    );

    // A malformed stream: the last good snapshot stays, and it shows.
    let mut bad = configmap();
    bad["data"]["stream"] = json!("{ not json");
    w.emulator.put(&bad).await;
    w.wait_for("the ConfigMap error to be counted", async || {
        w.metric("bootimage_webhook_configmap_errors_total").await == 1.0
    })
    .await;
    assert_eq!(
        w.review(&machineset("probe", OLD)).await["auditAnnotations"]["boot-image"],
        NEWER
    );
    assert_eq!(admin_get(w.admin, "/readyz").await.0, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn touches_that_do_not_move_the_image_stop_after_three_with_an_event() {
    // No webhook in the emulator's admission chain: nothing moves the image.
    let w = World::start(false).await;
    w.emulator.put(&pool(1)).await;
    w.wait_for("three attempts and an Event", async || {
        !w.emulator.events().await.is_empty()
    })
    .await;
    let events = w.emulator.events().await;
    let e = &events[0];
    assert_eq!(e["reason"], "BootImageNotMoved", "{e}");
    assert_eq!(e["regarding"]["name"], "ms-stale", "{e}");
    assert_eq!(e["type"], "Warning");
    assert_eq!(
        w.emulator.touches().await,
        ["ms-stale", "ms-stale", "ms-stale"]
    );
    tokio::time::sleep(Duration::from_millis(4500)).await; // two more resyncs: no more writes
    assert_eq!(w.emulator.touches().await.len(), 3);
    assert_eq!(
        w.metric("bootimage_webhook_touch_given_up_total").await,
        1.0
    );
    assert_eq!(
        image(&w.emulator.object("MachineSet", "ms-stale").await),
        OLD
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_server_going_away_and_coming_back() {
    let mut w = World::start(true).await;
    w.emulator.put(&pool(1)).await;
    w.wait_for("the gate to open", async || {
        w.metric("bootimage_webhook_gate_open").await == 1.0
    })
    .await;
    w.emulator.stop();
    // The webhook keeps answering from its snapshot throughout.
    for _ in 0..10 {
        let answer = w.review(&machineset("probe", OLD)).await;
        assert_eq!(answer["auditAnnotations"]["boot-image"], CURRENT_X86);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    w.wait_for("watch errors to show", async || {
        !w.metric_lines("watch_errors_total").await.is_empty()
    })
    .await;
    w.emulator.restart();
    w.emulator
        .put(&configmap_with_stream(|s| {
            s["architectures"]["x86_64"]["images"]["gcp"]["name"] =
                json!("rhcos-9-8-20261101-0-gcp-x86-64")
        }))
        .await;
    w.wait_for("the watchers to recover and follow", async || {
        w.review(&machineset("probe", OLD)).await["auditAnnotations"]["boot-image"] == NEWER
    })
    .await;
    assert_eq!(admin_get(w.admin, "/readyz").await.0, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_touch_without_the_lease_on_the_api_server() {
    let w = World::start(true).await;
    w.wait_for("the Lease to be held", async || {
        w.metric("bootimage_webhook_leader").await == 1.0
    })
    .await;
    // The Lease vanishes: kube-lease-manager keeps saying "leader", the API says otherwise.
    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                       "metadata": {"name": "bootimage-webhook", "namespace": "bootimage-webhook"}});
    let (code, body) = call(w.emulator.addr, "DELETE", "/_test/objects", Some(&lease)).await;
    assert_eq!(code, 200, "{body}");
    // Past the toucher's one-second trust in its last confirmation of the Lease.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    w.emulator.put(&pool(1)).await;
    w.wait_for("the gate to open", async || {
        w.metric("bootimage_webhook_gate_open").await == 1.0
    })
    .await;
    tokio::time::sleep(Duration::from_millis(4500)).await; // two resyncs
    assert!(
        w.emulator.touches().await.is_empty(),
        "touched without holding the Lease"
    );
    assert_eq!(
        image(&w.emulator.object("MachineSet", "ms-stale").await),
        OLD
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_in_cluster_mode_fails_readiness_first_and_releases_the_lease() {
    // A second of shutdown delay: readiness must fail while the pod still serves.
    let mut w = World::start_with(true, "1s").await;
    w.wait_for("the Lease to be held", async || {
        w.metric("bootimage_webhook_leader").await == 1.0
    })
    .await;
    let _ = Command::new("kill")
        .args(["-TERM", &w.server.id().to_string()])
        .status();
    let signalled = Instant::now();
    while admin_get(w.admin, "/readyz").await.0 != 503 {
        assert!(
            signalled.elapsed() < Duration::from_millis(500),
            "readiness still passing"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Blocking is fine here: two worker threads, and the other serves the admin calls.
    assert!(w.server.wait().unwrap().success());
    assert!(
        signalled.elapsed() < Duration::from_secs(10),
        "{:?}",
        signalled.elapsed()
    );
    let lease = w.emulator.object("Lease", "bootimage-webhook").await;
    assert!(
        lease["spec"]["holderIdentity"]
            .as_str()
            .is_none_or(|h| h != "replica-0"),
        "the Lease is released on shutdown: {lease}"
    );
}
