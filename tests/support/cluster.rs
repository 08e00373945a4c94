//! The whole system against a real kube-apiserver, for the tests that meet it whole
//! (`tests/e2e/real_apiserver_*.rs`): a [`Cluster`] is an apiserver holding the project's own
//! manifests (rendered with kustomize) and an OpenShift-like world; a [`Replica`] is one
//! `bootimage-webhook serve` running as the manifests' ServiceAccount with its own token.
//! The helpers read what the apiserver stored and its audit log.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use base64::Engine;
use bootimage_webhook::serve::tls::DevCerts;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use super::apiserver::ApiServer;
use super::clusters::Profile;
use super::binary::{Served, serve_command_on};
use super::{admin_get, dev_certs};

mod audit;
mod profile;
mod world;

pub use audit::*;
pub use profile::*;
pub use world::*;

pub const NS: &str = "openshift-machine-api";
pub const OWN_NS: &str = "bootimage-webhook";
pub const SA: &str = "bootimage-webhook";
pub const SA_USER: &str = "system:serviceaccount:bootimage-webhook:bootimage-webhook";
pub const LEASE: &str = "bootimage-webhook";
pub const WEBHOOK: &str = "bootimage.machineset.bootimages.machineconfiguration.openshift.io";
pub const BOOT_IMAGE: &str = "bootimages.machineconfiguration.openshift.io/boot-image";
pub const TOUCH: &str = "bootimages.machineconfiguration.openshift.io/touch";
pub const OPT_OUT: &str = "bootimages.machineconfiguration.openshift.io/managed";
pub const OLD: &str = "projects/rhcos-cloud/global/images/rhcos-9-6-20250826-1-gcp-x86-64";
pub const CUSTOM: &str = "projects/my-project/global/images/custom";
pub const NEWER_NAME: &str = "rhcos-9-8-20261101-0-gcp-x86-64";
pub const NEWER: &str = "projects/rhcos-cloud/global/images/rhcos-9-8-20261101-0-gcp-x86-64";
pub const NEWEST_NAME: &str = "rhcos-9-8-20261201-0-gcp-x86-64";
pub const NEWEST: &str = "projects/rhcos-cloud/global/images/rhcos-9-8-20261201-0-gcp-x86-64";
pub const PROVIDER: &str = "/spec/template/spec/providerSpec/value";
/// The toucher's periodic pass in these tests (`--touch-resync`).
pub const RESYNC: &str = "2s";
/// kube-lease-manager's Lease duration (30 s) and grace period (5 s).
pub const LEASE_DURATION: Duration = Duration::from_secs(35);

// ------------------------------------------------------------------------------ helpers

/// Polls `f` until it gives a value; panics with `what` (and `context()`) after `wait`.
pub fn eventually<T>(
    what: &str,
    wait: Duration,
    context: impl Fn() -> String,
    mut f: impl FnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + wait;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {wait:?} waiting for {what}\n{}",
            context()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

pub fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A claim of a JWT's payload (no verification: the apiserver did that).
pub fn jwt_claim(token: &str, claim: &str) -> String {
    let payload = token.split('.').nth(1).expect("a JWT");
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .expect("JWT payload is base64url");
    let v: Value = serde_json::from_slice(&bytes).expect("JWT payload is JSON");
    v[claim].as_str().expect("claim").to_owned()
}

// ------------------------------------------------------------------------------ the cluster

/// A real apiserver holding the project's manifests and an OpenShift-like world.
pub struct Cluster {
    pub api: ApiServer,
    /// `kubectl kustomize manifests/`, as shipped.
    pub rendered: Vec<Value>,
    pub certs: DevCerts,
    pub certs_dir: tempfile::TempDir,
    /// From each apiserver stop to its restart's /readyz: the restarted apiserver serves
    /// before its RBAC caches have synced and refuses (403) what comes in meanwhile.
    pub outages: Vec<(Timestamp, Timestamp)>,
    /// Replicas run the toucher at the shipped defaults (resync, settle, backoff), as users
    /// meet it, instead of this file's quick ones.
    pub shipped_touch: bool,
}

/// One `bootimage-webhook serve` as the ServiceAccount, with its own token.
pub struct Replica {
    pub pod: String,
    pub served: Served,
    /// The `jti` of its token: its requests in the audit log carry it.
    pub jti: String,
}

impl Replica {
    pub fn url(&self) -> String {
        format!("https://{}/mutate-machinesets", self.served.webhook)
    }

    /// Waits for `n` touch passes that start after this call (each logs "touch pass").
    pub fn passes(&self, n: usize) {
        self.served.drain();
        for i in 0..n {
            self.served
                .wait_for_line(Duration::from_secs(30), |l| l.contains("touch pass"))
                .unwrap_or_else(|| {
                    panic!(
                        "{}: touch pass {} of {n} never came:\n{}",
                        self.pod,
                        i + 1,
                        self.served.log_text()
                    )
                });
        }
    }

    /// Waits for a line with any of `what`, logged after this call.
    pub fn wait_new_line_any(&self, what: &[&str]) {
        self.served.drain();
        self.served
            .wait_for_line(Duration::from_secs(60), |l| {
                what.iter().any(|w| l.contains(w))
            })
            .unwrap_or_else(|| {
                panic!(
                    "{}: never logged any of {what:?}:\n{}",
                    self.pod,
                    self.served.log_text()
                )
            });
    }

    /// The lines it logged that contain `what`.
    pub fn lines(&self, what: &str) -> Vec<String> {
        let mut all = self.served.log();
        all.retain(|l| l.contains(what));
        all
    }

    /// Waits for a line with `what`, logged at any time.
    pub fn wait_line(&self, what: &str) {
        if self.served.log().iter().any(|l| l.contains(what)) {
            return;
        }
        self.served
            .wait_for_line(Duration::from_secs(60), |l| l.contains(what))
            .unwrap_or_else(|| {
                panic!(
                    "{}: never logged {what:?}:\n{}",
                    self.pod,
                    self.served.log_text()
                )
            });
    }
}

impl Cluster {
    /// An apiserver with everything from the manifests that it can hold, except the
    /// webhook configuration (registered once a replica runs), and the cluster's objects:
    /// the boot images ConfigMap, the master pool (its one master done when
    /// `master_done`), the rendered MachineConfig of 4.21.0, Infrastructure (GCP),
    /// ClusterVersion, MachineConfiguration (All), a master Node, the workers' and the
    /// masters' user-data Secrets (spec-3 stubs).
    pub fn start(master_done: bool) -> Cluster {
        Self::start_then(|api| seed(api, master_done))
    }

    /// An apiserver with the manifests as [`Cluster::start`] has them, and the cluster of
    /// `profile` (`tests/fixtures/clusters/`) as OpenShift leaves it, its master pool done
    /// with the profile's release.
    pub fn start_profile(profile: Profile) -> Cluster {
        Self::start_profile_with(profile, &[])
    }

    /// [`Cluster::start_profile`] with the profile's text changed first
    /// ([`load_profile_with`]: a test's own servers' addresses).
    pub fn start_profile_with(profile: Profile, replace: &[(&str, &str)]) -> Cluster {
        Self::start_then(|api| {
            load_profile_with(api, profile, replace);
            run_state(api, profile);
        })
    }

    fn start_then(world: impl FnOnce(&ApiServer)) -> Cluster {
        let api = ApiServer::start();
        let render = api.expect_ok(
            &["kustomize"],
            std::process::Command::new(api.env("KUBECTL"))
                .arg("kustomize")
                .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests"))
                .output()
                .expect("kubectl kustomize"),
        );
        let rendered: Vec<Value> = bootimage_webhook::core::snapshot::parse_documents(&render)
            .unwrap()
            .into_iter()
            .filter(|d| !d.is_null())
            .collect();
        // The monitoring objects need the Prometheus Operator's CRDs and the
        // CredentialsRequest the cloud-credential-operator's, which this apiserver does not
        // have; everything else goes on it.
        let (absent, held): (Vec<&Value>, Vec<&Value>) = rendered.iter().partition(|d| {
            d["apiVersion"].as_str().is_some_and(|v| {
                v.starts_with("monitoring.coreos.com/")
                    || v.starts_with("cloudcredential.openshift.io/")
            })
        });
        let skipped: BTreeSet<&str> = absent.iter().filter_map(|d| d["kind"].as_str()).collect();
        assert_eq!(
            skipped,
            BTreeSet::from(["CredentialsRequest", "PrometheusRule", "ServiceMonitor"])
        );
        let kinds: BTreeSet<_> = held
            .iter()
            .map(|d| d["kind"].as_str().unwrap().to_owned())
            .collect();
        for kind in [
            "Namespace",
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
            "Service",
            "NetworkPolicy",
            "PodDisruptionBudget",
            "Deployment",
            "MutatingWebhookConfiguration",
        ] {
            assert!(kinds.contains(kind), "the render has no {kind}");
        }
        let items: Vec<Value> = held
            .into_iter()
            .filter(|d| d["kind"] != "MutatingWebhookConfiguration")
            .cloned()
            .collect();
        let c = Cluster {
            api,
            rendered,
            certs: dev_certs(),
            certs_dir: tempfile::tempdir().unwrap(),
            outages: Vec::new(),
            shipped_touch: false,
        };
        c.certs.write(c.certs_dir.path()).unwrap();
        c.create_all(&items.iter().collect::<Vec<_>>());
        world(&c.api);
        c
    }

    pub fn with_shipped_touch(mut self) -> Self {
        self.shipped_touch = true;
        self
    }

    /// Waits for `n` touch passes of `r` that start after this call. At the shipped
    /// defaults passes come on changes only (the resync is minutes away): each is then
    /// provoked by a write to `ms-nudge`, a MachineSet without a providerSpec value, which
    /// the webhook is not called for and no rule moves.
    pub fn passes(&self, r: &Replica, n: usize) {
        if !self.shipped_touch {
            return r.passes(n);
        }
        for _ in 0..n {
            r.served.drain();
            self.nudge();
            r.served
                .wait_for_line(Duration::from_secs(30), |l| l.contains("touch pass"))
                .unwrap_or_else(|| {
                    panic!(
                        "{}: no touch pass after a nudge:\n{}",
                        r.pod,
                        r.served.log_text()
                    )
                });
        }
    }

    /// A write to `ms-nudge` (made here the first time), which brings a touch pass once
    /// the replica watches.
    pub fn nudge(&self) {
        if self
            .api
            .kubectl(["get", "machineset", "ms-nudge", "-n", NS])
            .status
            .code()
            != Some(0)
        {
            let mut nudge = machineset("ms-nudge", OLD);
            nudge["spec"]["template"]["spec"]["providerSpec"] = json!({});
            self.create(&nudge);
        }
        let stamp = format!("nudge={}", Timestamp::now().as_nanosecond());
        self.kubectl(&[
            "annotate",
            "--overwrite",
            "machineset",
            "ms-nudge",
            "-n",
            NS,
            &stamp,
        ]);
    }

    pub fn stop_apiserver(&mut self) {
        self.outages.push((Timestamp::now(), Timestamp::MAX));
        self.api.stop();
    }

    /// Restarted on the same ports; returns once its /readyz is ok.
    pub fn restart_apiserver(&mut self) {
        self.api.restart();
        self.outages.last_mut().expect("stopped first").1 = Timestamp::now();
    }

    pub fn in_outage(&self, when: Option<Timestamp>) -> bool {
        when.is_some_and(|t| self.outages.iter().any(|(from, to)| *from <= t && t <= *to))
    }

    pub fn kubectl(&self, args: &[&str]) -> String {
        self.api.kubectl_ok(args)
    }

    pub fn create_all(&self, items: &[&Value]) {
        create_all(&self.api, items);
    }

    /// `kubectl patch KIND NAME --subresource=status`: the status as a whole.
    pub fn set_status(&self, kind: &str, name: &str, status: Value) {
        set_status(&self.api, kind, name, status);
    }

    /// MachineConfiguration `cluster` as OpenShift 4.22 keeps it where the MCO does not
    /// manage boot images ([`machine_configuration_the_mco_leaves_alone`]).
    pub fn machine_configuration_the_mco_leaves_alone(&self) {
        machine_configuration_the_mco_leaves_alone(&self.api);
    }

    /// The master pool updates to rendered-master-new; `updated` masters run it.
    pub fn set_master_updated(&self, updated: u32) {
        set_master_updated(&self.api, updated);
    }

    /// A master finishes the release: the pool says so, and the MCO stamps the
    /// ConfigMap (what the default install's gate reads).
    pub fn master_finished(&self) {
        self.set_master_updated(1);
        let cm = self.api.get_json([
            "configmap",
            "coreos-bootimages",
            "-n",
            "openshift-machine-config-operator",
        ]);
        let release = cm["data"]["releaseVersion"].clone();
        self.patch_configmap_data(json!({ "MCOReleaseImageVersion": release }));
    }

    /// The release upgrading and no master done with it yet: the master pool updating, and
    /// the ConfigMap still stamped with the release before (`previous`).
    pub fn upgrade_in_progress(&self, previous: &str) {
        self.set_master_updated(0);
        self.patch_configmap_data(json!({ "MCOReleaseImageVersion": previous }));
    }

    /// `data.stream` of coreos-bootimages, as the MCO would write it.
    pub fn set_stream(&self, stream: &str) {
        self.patch_configmap_data(json!({ "stream": stream }));
    }

    /// Merges `data` into coreos-bootimages' data, as the installer or the MCO writes it
    /// (through a file: a stream document is larger than a command line may be).
    pub fn patch_configmap_data(&self, data: Value) {
        let file = self.certs_dir.path().join("configmap-patch.json");
        std::fs::write(&file, json!({ "data": data }).to_string()).unwrap();
        self.kubectl(&[
            "patch",
            "configmap",
            "coreos-bootimages",
            "-n",
            "openshift-machine-config-operator",
            "--type=merge",
            "--patch-file",
            file.to_str().unwrap(),
        ]);
    }

    pub fn token(&self) -> String {
        self.kubectl(&["create", "token", SA, "-n", OWN_NS, "--duration=2h"])
            .trim()
            .to_owned()
    }

    /// A replica as the Deployment runs it (POD_NAME and POD_NAMESPACE from the downward
    /// API), authenticated only by a fresh token of the ServiceAccount, the webhook on
    /// 127.0.0.1:0.
    pub fn replica(&self, pod: &str, shutdown_delay: &str) -> Replica {
        self.replica_on(pod, shutdown_delay, "127.0.0.1:0")
    }

    pub fn replica_on(&self, pod: &str, shutdown_delay: &str, bind: &str) -> Replica {
        self.replica_with(pod, shutdown_delay, bind, &[])
    }

    /// The one replica most tests need: `replica-a` with `flags`, registered as the
    /// webhook, once it holds the Lease.
    pub fn holder(&self, flags: &[&str]) -> Replica {
        self.holder_in(flags, &[])
    }

    /// [`Cluster::holder`] with more environment variables.
    ///
    /// The apiserver loads a new webhook configuration a moment after it is created (longer
    /// on a busy machine), and the holder touches at once: a touch admitted before that
    /// passes unmutated, and after three such the MachineSet is left until its target
    /// changes. So the webhook is registered at a port nobody listens on yet, the apiserver
    /// is seen calling it there, and only then does the replica start on that port.
    pub fn holder_in(&self, flags: &[&str], env: &[(&str, &str)]) -> Replica {
        let bind = format!("127.0.0.1:{}", super::proxy::free_port());
        self.register_webhook(&format!("https://{bind}/mutate-machinesets"));
        self.until_the_webhook_is_called();
        let a = self.replica_in("replica-a", "0s", &bind, flags, env);
        self.wait_holder("replica-a", Duration::from_secs(30));
        a
    }

    /// Waits until a server-side dry run of a MachineSet fails open on the registered
    /// webhook: the apiserver has loaded its configuration.
    fn until_the_webhook_is_called(&self) {
        const PROBE: &str = "webhook-loaded-probe";
        let probe = machineset(PROBE, OLD).to_string();
        eventually(
            "the apiserver to call the registered webhook",
            Duration::from_secs(60),
            String::new,
            || {
                let out = self
                    .api
                    .kubectl_stdin(["create", "--dry-run=server", "-f", "-"], &probe);
                out.status.success().then_some(())?;
                let events = self.audit();
                let last = events.iter().rev().find(|e| {
                    e["verb"] == "create"
                        && e["stage"] == "ResponseComplete"
                        && e["objectRef"]["name"] == PROBE
                })?;
                (webhook_call(last) == Call::FailedOpen).then_some(())
            },
        );
    }

    /// [`Cluster::replica_on`] with more flags.
    pub fn replica_with(
        &self,
        pod: &str,
        shutdown_delay: &str,
        bind: &str,
        extra: &[&str],
    ) -> Replica {
        self.replica_in(pod, shutdown_delay, bind, extra, &[])
    }

    /// [`Cluster::replica_with`] with more environment variables (e.g. the proxy's).
    pub fn replica_in(
        &self,
        pod: &str,
        shutdown_delay: &str,
        bind: &str,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Replica {
        let token = self.token();
        let jti = jwt_claim(&token, "jti");
        let kubeconfig = self.api.token_kubeconfig(&token, Some(OWN_NS));
        let dir = self.certs_dir.path();
        let mut cmd = serve_command_on(bind);
        cmd.arg("--tls-cert-file")
            .arg(dir.join("tls.crt"))
            .arg("--tls-private-key-file")
            .arg(dir.join("tls.key"))
            .args(["--shutdown-delay", shutdown_delay])
            .args(extra);
        if !self.shipped_touch {
            cmd.args(["--touch-settle", "0s", "--touch-backoff", "200ms"])
                .args(["--touch-resync", RESYNC]);
        }
        cmd.env("KUBECONFIG", kubeconfig)
            .env("POD_NAME", pod)
            .env("POD_NAMESPACE", OWN_NS)
            .env("RUST_LOG", "info,bootimage_webhook::cluster::touch=debug")
            .envs(env.iter().copied());
        let served = Served::spawn(cmd);
        let r = Replica {
            pod: pod.into(),
            served,
            jti,
        };
        eventually(
            &format!("{pod} to be ready"),
            Duration::from_secs(60),
            || r.served.log_text(),
            || (block_on(admin_get(r.served.admin, "/readyz")).0 == 200).then_some(()),
        );
        r
    }

    pub fn shipped_webhook(&self) -> Value {
        self.rendered
            .iter()
            .find(|d| d["kind"] == "MutatingWebhookConfiguration")
            .expect("the render has the webhook configuration")
            .clone()
    }

    /// The shipped MutatingWebhookConfiguration, its clientConfig pointed at `url` with the
    /// test CA; then the stored one is compared with the render.
    pub fn register_webhook(&self, url: &str) {
        let mut mwc = self.shipped_webhook();
        mwc["webhooks"][0]["clientConfig"] =
            json!({"url": url, "caBundle": self.certs.ca_bundle()});
        self.create_all(&[&mwc]);
        let stored = self
            .api
            .get_json(["mutatingwebhookconfiguration", "bootimage-webhook"]);
        let shipped = self.shipped_webhook();
        let (stored, shipped) = (&stored["webhooks"], &shipped["webhooks"]);
        assert_eq!(stored.as_array().map(Vec::len), Some(1));
        let fields = |hook: &Value| {
            let mut h = hook.clone();
            h.as_object_mut().unwrap().remove("clientConfig");
            h
        };
        assert_eq!(
            fields(&stored[0]),
            fields(&shipped[0]),
            "the stored webhook differs from the render in more than clientConfig"
        );
        assert_eq!(stored[0]["clientConfig"]["url"], url);
    }

    /// Points the webhook at another URL (the one change allowed).
    pub fn point_webhook(&self, url: &str) {
        let patch =
            json!([{"op": "replace", "path": "/webhooks/0/clientConfig/url", "value": url}]);
        self.kubectl(&[
            "patch",
            "mutatingwebhookconfiguration",
            "bootimage-webhook",
            "--type=json",
            "-p",
            &patch.to_string(),
        ]);
    }

    /// Waits until the apiserver calls the webhook at its new address: a server-side dry
    /// run of a stale MachineSet comes back with `want`.
    pub fn webhook_serves(&self, want: &str) {
        let probe = machineset("probe", OLD).to_string();
        eventually(
            "the apiserver to call the webhook",
            Duration::from_secs(30),
            String::new,
            || {
                let out = self.api.kubectl_stdin(
                    ["create", "--dry-run=server", "-o", "json", "-f", "-"],
                    &probe,
                );
                let v: Value = serde_json::from_slice(&out.stdout).ok()?;
                (image(&v) == want).then_some(())
            },
        );
    }

    pub fn create(&self, ms: &Value) -> Output {
        let out = self
            .api
            .kubectl_stdin(["create", "-f", "-"], &ms.to_string());
        assert!(out.status.success(), "create: {}", text(&out));
        out
    }

    pub fn get(&self, name: &str) -> Value {
        self.api.get_json(["machineset", name, "-n", NS])
    }

    pub fn audit(&self) -> Vec<Value> {
        self.api.audit_events()
    }

    /// The Lease's holder, as the apiserver has it.
    pub fn lease_holder(&self) -> Option<String> {
        let out = self
            .api
            .kubectl(["get", "lease", LEASE, "-n", OWN_NS, "-o", "json"]);
        let v: Value = serde_json::from_slice(&out.stdout).ok()?;
        v["spec"]["holderIdentity"]
            .as_str()
            .filter(|h| !h.is_empty())
            .map(str::to_owned)
    }

    pub fn wait_holder(&self, pod: &str, wait: Duration) {
        eventually(
            &format!("{pod} to hold the Lease"),
            wait,
            || format!("holder: {:?}", self.lease_holder()),
            || (self.lease_holder().as_deref() == Some(pod)).then_some(()),
        );
    }

    /// RBAC over the whole run: the apiserver refused none of our ServiceAccount's requests,
    /// and no replica logged a refusal.
    pub fn assert_nothing_refused(&self, replicas: &[&Replica]) {
        let events = self.audit();
        let ours: Vec<&Value> = events.iter().filter(|e| is_ours(e)).collect();
        assert!(
            ours.len() > 20,
            "the audit log should show our requests, read and write: {}",
            ours.len()
        );
        let verbs: BTreeSet<&str> = ours.iter().filter_map(|e| e["verb"].as_str()).collect();
        for verb in ["list", "watch", "get"] {
            assert!(verbs.contains(verb), "no {verb} of ours audited: {verbs:?}");
        }
        let received = |e: &Value| {
            e["requestReceivedTimestamp"]
                .as_str()
                .and_then(|t| t.parse::<Timestamp>().ok())
        };
        let refused: Vec<_> = ours
            .iter()
            .filter(|e| e["responseStatus"]["code"] == 403 && !self.in_outage(received(e)))
            .map(|e| {
                format!(
                    "{} {} {}",
                    e["verb"], e["objectRef"]["resource"], e["objectRef"]["name"]
                )
            })
            .collect();
        assert!(refused.is_empty(), "the apiserver refused: {refused:?}");
        for r in replicas {
            let refusals: Vec<String> = r
                .served
                .log()
                .into_iter()
                .filter(|l| {
                    (l.contains("code: 403") || l.contains("Forbidden") || l.contains("forbidden"))
                        && !self.in_outage(l.split(' ').next().and_then(|t| t.parse().ok()))
                })
                .collect();
            assert!(
                refusals.is_empty(),
                "{} logged a refusal:\n{}",
                r.pod,
                refusals.join("\n")
            );
        }
    }

    /// Whether this release's MachineConfiguration CRD has `status.<field>` (an older
    /// release's apiserver drops what is written to a field its schema lacks).
    pub fn machine_configuration_status_has(&self, field: &str) -> bool {
        let crd = self
            .api
            .get_json(["crd", "machineconfigurations.operator.openshift.io"]);
        let pointer = format!("/schema/openAPIV3Schema/properties/status/properties/{field}");
        crd["spec"]["versions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v.pointer(&pointer).is_some())
    }

    /// A call we ship no grant for, with our ServiceAccount's token: refused.
    pub fn assert_refused(&self, args: &[&str], what: &str) {
        let out = self.api.kubectl_as(&self.token(), args);
        let t = text(&out);
        assert!(!out.status.success(), "{args:?} was allowed: {t}");
        assert!(t.contains("(Forbidden)"), "{t}");
        assert!(
            t.contains(&format!("User \"{SA_USER}\" cannot {what}")),
            "{t}"
        );
    }
}

/// `bootimage-webhook status -o <output>` with the cluster-admin kubeconfig, as an
/// administrator runs it: its stdout, after a successful exit.
pub fn status(c: &Cluster, output: &str) -> String {
    status_with(c, output, &[])
}

/// [`status`] with more flags.
pub fn status_with(c: &Cluster, output: &str, flags: &[&str]) -> String {
    let out = std::process::Command::new(super::binary::BIN)
        .args(["status", "-o", output])
        .args(flags)
        .env("KUBECONFIG", c.api.kubeconfig())
        .output()
        .expect("running status");
    assert!(out.status.success(), "status: {}", text(&out));
    String::from_utf8(out.stdout).unwrap()
}

/// `status -o json`, parsed.
pub fn status_json(c: &Cluster) -> Value {
    serde_json::from_str(&status(c, "json")).unwrap()
}

/// The row of MachineSet `name` in a `status -o json` report.
pub fn status_row<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["machineSets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == name)
        .unwrap_or_else(|| panic!("no row for {name}: {report:#}"))
}

/// The value of the metric line starting with `name` (labels included) on `/metrics`.
pub fn metric(r: &Replica, name: &str) -> Option<i64> {
    let text = block_on(admin_get(r.served.admin, "/metrics")).1;
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}
