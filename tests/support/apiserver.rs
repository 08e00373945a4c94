//! A real kube-apiserver (with its etcd) for integration tests, started by
//! `scripts/test-apiserver` on loopback ports: RBAC, service-account tokens, the default
//! admission plugins, an audit log of every write, the OpenShift CRDs of
//! `tests/fixtures/crds` installed and Established, and the namespaces
//! `openshift-machine-api` and `openshift-machine-config-operator`.
//!
//! The Kubernetes is today's (1.37) unless `KUBE_VERSION` names another that
//! `scripts/test-apiserver versions` lists: `KUBE_VERSION=1.30 cargo test --features e2e
//! --test e2e -- real_apiserver_ apiserver::` runs those suites on OpenShift 4.17's
//! Kubernetes with OpenShift 4.17's CRDs (the script reads the variable;
//! `env("KUBE_RELEASE")` says which release runs).
//!
//! From an integration test:
//!
//! ```ignore
//! mod support;
//!
//! let api = support::apiserver::ApiServer::start();
//! api.kubectl_ok(["get", "crd"]);
//! ```
//!
//! Each [`ApiServer`] is its own control plane in a temporary directory under
//! `target/tmp`; dropping it stops both processes and removes the directory, except
//! when the test panicked: then the directory (logs, audit log, kubeconfig) is kept
//! and its path printed. If the test process is killed, a watchdog started with it
//! stops the servers within a second. The first start on a machine builds
//! kube-apiserver and etcd (~10 minutes on 2 cores; `scripts/test` does it before
//! `cargo test`); a build or start failure panics with the step and the log path.
//! A warm start takes about 5 seconds.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};

/// `scripts/test-apiserver`.
pub const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/test-apiserver");
/// `scripts/test-cluster`: the same control plane, with a node.
pub const CLUSTER_SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/test-cluster");

static TOKEN_KUBECONFIGS: AtomicU64 = AtomicU64::new(0);

/// A running kube-apiserver and etcd; stopped on drop.
pub struct ApiServer {
    /// `None` once the directory was kept or removed.
    tempdir: Option<tempfile::TempDir>,
    dir: PathBuf,
    /// `DIR/env` as written by `scripts/test-apiserver start`.
    env: HashMap<String, String>,
    running: bool,
    /// The script that started it, and stops it.
    script: &'static str,
}

impl ApiServer {
    /// Starts one (building the binaries first if this machine has none). Panics with
    /// the script's output, which names the failed step and its log, if it cannot.
    pub fn start() -> ApiServer {
        Self::start_with(SCRIPT, "apiserver-")
    }

    /// The same control plane with a node (`scripts/test-cluster`): kube-controller-manager,
    /// kube-scheduler, containerd and a kubelet, in a network namespace of their own; the
    /// kubeconfig reaches the apiserver through a port on 127.0.0.1. One runs per machine
    /// at a time (a second waits).
    pub fn start_node() -> ApiServer {
        Self::start_with(CLUSTER_SCRIPT, "cluster-")
    }

    fn start_with(script: &'static str, prefix: &str) -> ApiServer {
        let base = option_env!("CARGO_TARGET_TMPDIR")
            .map(PathBuf::from)
            .unwrap_or_else(std::env::temp_dir);
        fs::create_dir_all(&base).unwrap_or_else(|e| panic!("create {}: {e}", base.display()));
        let tempdir = tempfile::Builder::new()
            .prefix(prefix)
            .tempdir_in(&base)
            .unwrap_or_else(|e| panic!("temporary directory in {}: {e}", base.display()));
        let dir = tempdir.path().to_path_buf();
        let output = Command::new(script)
            .arg("start")
            .arg(&dir)
            .arg("--owner-pid")
            .arg(std::process::id().to_string())
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("cannot run {script}: {e}"));
        if !output.status.success() {
            let dir = tempdir.keep();
            panic!(
                "`{script} start {dir}` failed ({status}); the logs are {dir}/*.log \
                 (kept):\n{out}{err}",
                dir = dir.display(),
                status = output.status,
                out = String::from_utf8_lossy(&output.stdout),
                err = String::from_utf8_lossy(&output.stderr),
            );
        }
        let env = read_env(&dir.join("env"));
        ApiServer {
            tempdir: Some(tempdir),
            dir,
            env,
            running: true,
            script,
        }
    }

    /// The directory with the kubeconfig, logs, audit log, certificates and etcd data.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A value of `DIR/env` (`APISERVER_URL`, `APISERVER_PORT`, `ETCD_URL`, `CA_CERT`, ...).
    pub fn env(&self, key: &str) -> &str {
        self.env
            .get(key)
            .unwrap_or_else(|| panic!("{}/env has no {key}", self.dir.display()))
    }

    /// Cluster-admin kubeconfig (client certificate, O=system:masters).
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.join("kubeconfig")
    }

    /// `https://127.0.0.1:<port>`.
    pub fn url(&self) -> &str {
        self.env("APISERVER_URL")
    }

    /// The CA that signed the serving certificate.
    pub fn ca_cert(&self) -> PathBuf {
        PathBuf::from(self.env("CA_CERT"))
    }

    /// The audit log: every write (create, update, patch, delete) at Metadata level.
    pub fn audit_log(&self) -> PathBuf {
        self.dir.join("audit.log")
    }

    /// The audit events written so far, parsed.
    pub fn audit_events(&self) -> Vec<serde_json::Value> {
        let path = self.audit_log();
        let text =
            fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                serde_json::from_str(l)
                    .unwrap_or_else(|e| panic!("{}: bad audit line ({e}): {l}", path.display()))
            })
            .collect()
    }

    /// The kube-apiserver log.
    pub fn log(&self) -> PathBuf {
        self.dir.join("kube-apiserver.log")
    }

    /// Runs kubectl as cluster-admin; returns its output whatever its status.
    pub fn kubectl<I, S>(&self, args: I) -> Output
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.kubectl_with(&self.kubeconfig(), args, None)
    }

    /// Like [`kubectl`](Self::kubectl) with `input` on its standard input (`-f -`).
    pub fn kubectl_stdin<I, S>(&self, args: I, input: &str) -> Output
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.kubectl_with(&self.kubeconfig(), args, Some(input))
    }

    /// Runs kubectl as cluster-admin and returns its stdout; panics if it fails.
    pub fn kubectl_ok<I, S>(&self, args: I) -> String
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let args: Vec<_> = args.into_iter().map(|a| a.as_ref().to_owned()).collect();
        let out = self.kubectl(&args);
        self.expect_ok(&args, out)
    }

    /// A kubeconfig that authenticates with `token` only (a service account's, from
    /// `kubectl create token`), with `namespace` as its context's namespace if given.
    pub fn token_kubeconfig(&self, token: &str, namespace: Option<&str>) -> PathBuf {
        let n = TOKEN_KUBECONFIGS.fetch_add(1, Ordering::Relaxed);
        let path = self.dir.join(format!("kubeconfig-token-{n}"));
        let namespace = namespace.map_or(String::new(), |ns| format!(", namespace: \"{ns}\""));
        let config = format!(
            "apiVersion: v1\nkind: Config\n\
             clusters: [{{name: c, cluster: {{server: \"{url}\", certificate-authority: \"{ca}\"}}}}]\n\
             users: [{{name: u, user: {{token: \"{token}\"}}}}]\n\
             contexts: [{{name: c, context: {{cluster: c, user: u{namespace}}}}}]\n\
             current-context: c\n",
            url = self.url(),
            ca = self.ca_cert().display(),
        );
        fs::write(&path, config).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        path
    }

    /// Runs kubectl with a bearer token (and nothing else to authenticate with).
    pub fn kubectl_as<I, S>(&self, token: &str, args: I) -> Output
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let path = self.token_kubeconfig(token, None);
        self.kubectl_with(&path, args, None)
    }

    fn kubectl_with<I, S>(&self, kubeconfig: &Path, args: I, input: Option<&str>) -> Output
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let kubectl = self.env("KUBECTL");
        let mut cmd = Command::new(kubectl);
        cmd.arg("--kubeconfig")
            .arg(kubeconfig)
            .arg("--cache-dir")
            .arg(self.dir.join("kubectl-cache"))
            .arg("--request-timeout=60s")
            .args(args)
            .stdin(if input.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {kubectl}: {e}"));
        if let Some(input) = input {
            let mut stdin = child.stdin.take().expect("kubectl stdin");
            stdin
                .write_all(input.as_bytes())
                .unwrap_or_else(|e| panic!("write to kubectl: {e}"));
        }
        child
            .wait_with_output()
            .unwrap_or_else(|e| panic!("wait for {kubectl}: {e}"))
    }

    /// stdout of a successful kubectl run; otherwise a panic with its stderr and the log.
    pub fn expect_ok(&self, args: &[impl AsRef<OsStr>], out: Output) -> String {
        let shown: Vec<_> = args.iter().map(|a| a.as_ref().to_string_lossy()).collect();
        assert!(
            out.status.success(),
            "`kubectl {}` failed ({}):\n{}{}\n(apiserver log: {})",
            shown.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            self.log().display()
        );
        String::from_utf8(out.stdout).expect("kubectl printed UTF-8")
    }

    /// `kubectl get ... -o json`, parsed.
    pub fn get_json<I, S>(&self, args: I) -> serde_json::Value
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut args: Vec<_> = args.into_iter().map(|a| a.as_ref().to_owned()).collect();
        args.insert(0, "get".into());
        args.extend(["-o".into(), "json".into()]);
        let text = self.kubectl_ok(&args);
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("kubectl printed bad JSON ({e})"))
    }

    /// Stops kube-apiserver and etcd (idempotent). The directory stays until drop.
    pub fn stop(&mut self) {
        if !self.running {
            return;
        }
        self.running = false;
        let output = Command::new(self.script)
            .arg("stop")
            .arg(&self.dir)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", self.script));
        if !output.status.success() && !std::thread::panicking() {
            panic!(
                "`{} stop {}` failed ({}):\n{}{}",
                self.script,
                self.dir.display(),
                output.status,
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        }
    }
}

impl ApiServer {
    /// Starts kube-apiserver and etcd again after [`stop`](Self::stop): the same ports,
    /// data, certificates and token signing key (`scripts/test-apiserver restart`), so
    /// clients reconnect to the same URL with the same credentials.
    pub fn restart(&mut self) {
        assert_eq!(self.script, SCRIPT, "only a control plane alone restarts");
        let output = Command::new(SCRIPT)
            .arg("restart")
            .arg(&self.dir)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("cannot run {SCRIPT}: {e}"));
        assert!(
            output.status.success(),
            "`scripts/test-apiserver restart {}` failed ({}):\n{}{}",
            self.dir.display(),
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        self.running = true;
        self.env = read_env(&self.dir.join("env"));
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        self.stop();
        // Unless the test failed, the TempDir removes itself when dropped here.
        if let Some(tempdir) = self.tempdir.take()
            && std::thread::panicking()
        {
            let dir = tempdir.keep();
            eprintln!(
                "apiserver: kept {} (kube-apiserver.log, etcd.log, audit.log, kubeconfig)",
                dir.display()
            );
        }
    }
}

/// Parses `KEY=VALUE` lines whose values are plain or single-quoted (Python's shlex.quote).
fn read_env(path: &Path) -> HashMap<String, String> {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    text.lines()
        .filter_map(|line| line.split_once('='))
        .map(|(k, v)| {
            let v = match v.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')) {
                Some(quoted) => quoted.replace("'\"'\"'", "'"),
                None => v.to_string(),
            };
            (k.to_string(), v)
        })
        .collect()
}
