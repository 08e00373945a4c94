//! The shipped Deployment on a real node: the image of tests/e2e/image.rs, loaded into the
//! containerd of `scripts/test-cluster` (kube-apiserver, etcd, kube-controller-manager,
//! kube-scheduler, containerd, runc and a kubelet, in a network namespace of their own),
//! and `kubectl apply -k` of `manifests/overlays/cert-manager`, the overlay for a cluster
//! without OpenShift's service-ca.
//!
//! What the test changes, and nothing else:
//! - cert-manager is not here, so its Issuers and Certificates are left out and the Secret
//!   the serving Certificate would make (`bootimage-webhook-tls`: tls.crt, tls.key,
//!   ca.crt) is written by the test, with the CA in the webhook's caBundle, as cainjector
//!   would put it;
//! - the image is the one built here (`images:`), already on the node (IfNotPresent).
//!
//! To reach the webhook the apiserver calls its Service's endpoints
//! (`--enable-aggregator-routing`, as OpenShift's kube-apiserver does) at the pods'
//! addresses on the node's bridge, and the pods reach the apiserver at the `kubernetes`
//! Service's address, which the node's network namespace holds (there is no kube-proxy).
//! The Deployment keeps its pod network, Service, probes and security context; with the
//! host network its two replicas could not both bind their ports on one node.
//!
//! Everything is judged through the apiserver (pods, Lease, MachineSets, `kubectl logs`,
//! the audit log), and what the kubelet made of the security context on the machine itself
//! (/proc of the container's process). One test, in steps: the node takes a minute to
//! start and one runs per machine at a time.
//!
//! Needs root, podman, runc and the CNI plugins (scripts/install-test-deps).

use crate::support;

use std::collections::BTreeSet;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bootimage_webhook::serve::tls::DevCerts;
use serde_json::Value;
use support::CURRENT_X86;
use support::apiserver::{ApiServer, CLUSTER_SCRIPT};
use support::cluster::{self, LEASE, OLD, OWN_NS, SA_USER, machineset};
use support::image::{Image, Process, image_under_test};

const APP: &str = "app.kubernetes.io/name=bootimage-webhook";
const DEPLOYMENT: &str = "deployment/bootimage-webhook";
/// The image's user (the Deployment sets none: OpenShift assigns one).
const IMAGE_UID: u64 = 65532;

/// A line for the run's output and for scripts/test's summary.
fn report(line: String) {
    support::report::report("real-node", &line);
}

#[test]
fn the_shipped_deployment_runs_on_a_real_node() {
    let _alone = support::alone();
    let started = Instant::now();
    let api = ApiServer::start_node();
    report(format!(
        "scripts/test-cluster start: node Ready after {:.1} s",
        started.elapsed().as_secs_f64()
    ));
    let image = image_under_test();
    cluster_script(&api, &["load", &image.name]);
    cluster::seed(&api, true);
    let t = Instant::now();
    apply_shipped(&api, &image);
    rollout(&api);
    report(format!(
        "kubectl apply -k to both replicas Ready: {:.1} s",
        t.elapsed().as_secs_f64()
    ));

    let pods = ready_pods(&api);
    assert_eq!(pods.len(), 2, "two replicas: {pods:?}");
    for pod in &pods {
        runs_as_shipped(&api, pod);
    }
    webhook_patches_and_logs_it(&api, &pods);
    in_cluster_identity(&api, &pods);
    no_write_lost_while_pods_move(&api);
    pdb_holds_through_a_drain(&api);
    lease_moves_to_the_other_pod(&api);
    report(format!(
        "the whole test: {:.1} s",
        started.elapsed().as_secs_f64()
    ));
}

/// `scripts/test-cluster COMMAND DIR ARGS...`.
fn cluster_script(api: &ApiServer, args: &[&str]) {
    let out = Command::new(CLUSTER_SCRIPT)
        .arg(args[0])
        .arg(api.dir())
        .args(&args[1..])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "scripts/test-cluster {args:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `scripts/test-cluster try`: `kubectl apply -k` of the cert-manager overlay with the image,
/// and a Secret of the test's certificates in place of cert-manager.
fn apply_shipped(api: &ApiServer, image: &Image) {
    let certs = DevCerts::generate(&[
        "bootimage-webhook.bootimage-webhook.svc".into(),
        "bootimage-webhook.bootimage-webhook.svc.cluster.local".into(),
    ])
    .unwrap();
    let dir = api.dir().join("webhook-certs");
    certs.write(&dir).unwrap();
    cluster_script(api, &["try", &image.name, dir.to_str().unwrap()]);
    let overlay = api.dir().join("overlay");
    let rendered = api.kubectl_ok(["kustomize", overlay.to_str().unwrap()]);
    assert!(!rendered.contains("cert-manager.io/v1"), "{rendered}");
}

/// Waits for the Deployment's rollout: every replica updated, available and Ready.
fn rollout(api: &ApiServer) {
    api.kubectl_ok([
        "rollout",
        "status",
        DEPLOYMENT,
        "-n",
        OWN_NS,
        "--timeout=300s",
    ]);
}

/// The Deployment's pods that run and are Ready (not terminating).
fn ready_pods(api: &ApiServer) -> Vec<Value> {
    let list = api.get_json(["pods", "-n", OWN_NS, "-l", APP]);
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .filter(|p| {
            p["status"]["conditions"].as_array().is_some_and(|c| {
                c.iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            })
        })
        .cloned()
        .collect()
}

fn pod_name(pod: &Value) -> String {
    pod["metadata"]["name"].as_str().unwrap().to_owned()
}

/// The pod template of `manifests/base/deployment.yaml`, as shipped.
fn shipped_pod() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests/base/deployment.yaml");
    let text = std::fs::read_to_string(path).unwrap();
    let docs = bootimage_webhook::core::snapshot::parse_documents(&text).unwrap();
    docs[0]["spec"]["template"]["spec"].clone()
}

/// The pod has the shipped security context, probes, arguments and mounts, and its
/// container runs as the image's user, as the kubelet reports it and as the machine sees
/// its process: no capabilities, no privilege escalation, the runtime's seccomp profile, a
/// read-only root.
fn runs_as_shipped(api: &ApiServer, pod: &Value) {
    let name = pod_name(pod);
    let shipped = shipped_pod();
    let spec = &pod["spec"];
    let (ours, theirs) = (&spec["securityContext"], &shipped["securityContext"]);
    assert!(
        contains(ours, theirs),
        "{name}: pod securityContext {ours}, shipped {theirs}"
    );
    for key in [
        "securityContext",
        "readinessProbe",
        "livenessProbe",
        "args",
        "ports",
    ] {
        let (ours, theirs) = (&spec["containers"][0][key], &shipped["containers"][0][key]);
        // The apiserver fills in defaults (the probes' successThreshold, the ports'
        // protocol): every shipped field is there, with its value.
        assert!(
            contains(ours, theirs),
            "{name}: {key} is {ours}, shipped {theirs}"
        );
    }
    let status = &pod["status"]["containerStatuses"][0];
    assert_eq!(
        status["user"]["linux"]["uid"], IMAGE_UID,
        "{name}: {status}"
    );
    let id = status["containerID"].as_str().unwrap();
    let id = id.strip_prefix("containerd://").unwrap();
    let pid = task_pid(api, id);
    let process = Process::of(pid);
    assert_eq!(process.status("Uid"), ["65532"; 4], "{name}");
    assert_eq!(process.status("CapEff"), ["0000000000000000"], "{name}");
    assert_eq!(process.status("CapBnd"), ["0000000000000000"], "{name}");
    assert_eq!(process.status("NoNewPrivs"), ["1"], "{name}");
    let seccomp = process.status("Seccomp");
    assert_eq!(seccomp, ["2"], "{name}: filtered by the runtime's profile");
    assert!(
        process.root_read_only(),
        "{name}: / is {:?}",
        process.mount("/")
    );
}

/// True if `big` has every field of `small`, with the same value (arrays: element-wise).
fn contains(big: &Value, small: &Value) -> bool {
    match (big, small) {
        (Value::Object(b), Value::Object(s)) => s
            .iter()
            .all(|(k, v)| b.get(k).is_some_and(|bv| contains(bv, v))),
        (Value::Array(b), Value::Array(s)) => {
            b.len() == s.len() && b.iter().zip(s).all(|(b, s)| contains(b, s))
        }
        _ => big == small,
    }
}

/// The pid on this machine of the container `id` (ctr tasks ls).
fn task_pid(api: &ApiServer, id: &str) -> u32 {
    let ctr: Vec<&str> = api.env("CTR").split_whitespace().collect();
    let out = Command::new(ctr[0])
        .args(&ctr[1..])
        .args(["tasks", "ls"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| {
            let mut f = l.split_whitespace();
            (f.next() == Some(id)).then(|| f.next().unwrap().parse().unwrap())
        })
        .unwrap_or_else(|| panic!("container {id} not in `ctr tasks ls`:\n{text}"))
}

/// `kubectl create` of a MachineSet on an old image; returns the object as stored.
fn create_machineset(api: &ApiServer, name: &str) -> Result<Value, String> {
    let out = api.kubectl_stdin(
        ["create", "-f", "-", "-o", "json"],
        &machineset(name, OLD).to_string(),
    );
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    Ok(serde_json::from_slice(&out.stdout).unwrap())
}

/// A MachineSet created with kubectl is stored on the stream's image, and `kubectl logs`
/// tells it in the README's words.
fn webhook_patches_and_logs_it(api: &ApiServer, pods: &[Value]) {
    let stored = create_machineset(api, "ms-node").unwrap();
    assert_eq!(cluster::image(&stored), CURRENT_X86, "{stored}");
    let names: Vec<String> = pods.iter().map(pod_name).collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let logs = api.kubectl_ok(["logs", "-n", OWN_NS, "-l", APP, "--prefix", "--tail=-1"]);
        let line = logs.lines().find(|l| {
            l.contains(
                "Reconciling machineset ms-node on GCP, with arch x86_64; New target boot image: ",
            ) && l.contains(&format!(
                "Current image: {OLD}; Patching machineset ms-node"
            ))
        });
        if let Some(line) = line {
            assert!(
                names
                    .iter()
                    .any(|n| line.starts_with(&format!("[pod/{n}/"))),
                "{line}"
            );
            assert!(line.contains("reason=Updated"), "{line}");
            return;
        }
        assert!(
            Instant::now() < deadline,
            "kubectl logs never showed ms-node's decision:\n{logs}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The replicas call the apiserver as the ServiceAccount, with the token the kubelet
/// projected into each pod (bound to it), from the pod's own address.
fn in_cluster_identity(api: &ApiServer, pods: &[Value]) {
    for pod in pods {
        let name = pod_name(pod);
        let ip = pod["status"]["podIP"].as_str().unwrap();
        let calls = api
            .audit_events()
            .into_iter()
            .filter(|e| e["user"]["username"] == SA_USER)
            .filter(|e| e["user"]["extra"]["authentication.kubernetes.io/pod-name"][0] == name)
            .count();
        assert!(calls > 0, "no request of {name} with its pod-bound token");
        let from_ip = api
            .audit_events()
            .into_iter()
            .filter(|e| e["user"]["extra"]["authentication.kubernetes.io/pod-name"][0] == name)
            .all(|e| e["sourceIPs"][0] == ip);
        assert!(from_ip, "{name}'s requests come from {ip}");
    }
}

/// kubectl keeps creating MachineSets while the Deployment restarts and a pod is deleted:
/// every create succeeds and every MachineSet is stored patched.
fn no_write_lost_while_pods_move(api: &ApiServer) {
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = ["a", "b"]
        .iter()
        .map(|w| kubectl_writer(api, &format!("ms-roll-{w}"), stop.clone()))
        .collect();
    let t = Instant::now();
    api.kubectl_ok(["rollout", "restart", DEPLOYMENT, "-n", OWN_NS]);
    rollout(api);
    report(format!(
        "kubectl rollout restart to both new replicas Ready: {:.1} s",
        t.elapsed().as_secs_f64()
    ));
    let victim = pod_name(&ready_pods(api)[0]);
    api.kubectl_ok(["delete", "pod", &victim, "-n", OWN_NS, "--wait=false"]);
    wait_for(api, "two Ready replicas after a pod was deleted", |api| {
        let pods = ready_pods(api);
        pods.len() == 2 && pods.iter().all(|p| pod_name(p) != victim)
    });
    // Until the deleted pod's grace period is over.
    std::thread::sleep(Duration::from_secs(10));
    stop.store(true, Ordering::Relaxed);
    let results: Vec<_> = writers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();
    let lost: Vec<_> = results
        .iter()
        .filter(|(_, stored, _)| stored.as_deref() != Some(CURRENT_X86))
        .collect();
    report(format!(
        "{} MachineSets created with kubectl through a rollout restart and a pod deletion, \
         {} failed or stored unpatched",
        results.len(),
        lost.len()
    ));
    assert!(
        results.len() >= 20,
        "too few writes to tell: {}",
        results.len()
    );
    assert!(
        lost.is_empty(),
        "writes failed or stored unpatched: {lost:?}"
    );
}

/// A thread that runs `kubectl create` of MachineSets `PREFIX-N` one after the other until
/// `stop`; returns each one's name, the image it was stored on (None: the create failed)
/// and kubectl's stderr.
fn kubectl_writer(
    api: &ApiServer,
    prefix: &str,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Vec<(String, Option<String>, String)>> {
    let kubeconfig = api.kubeconfig();
    let kubectl = api.env("KUBECTL").to_owned();
    let prefix = prefix.to_owned();
    std::thread::spawn(move || {
        let mut results = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            let name = format!("{prefix}-{}", results.len());
            let mut child = Command::new(&kubectl)
                .arg("--kubeconfig")
                .arg(&kubeconfig)
                .args(["create", "-f", "-", "-o", "json"])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            let manifest = machineset(&name, OLD).to_string();
            child
                .stdin
                .take()
                .unwrap()
                .write_all(manifest.as_bytes())
                .unwrap();
            let out = child.wait_with_output().unwrap();
            let stored = serde_json::from_slice::<Value>(&out.stdout)
                .ok()
                .map(|v| cluster::image(&v).to_owned());
            results.push((
                name,
                stored,
                String::from_utf8_lossy(&out.stderr).into_owned(),
            ));
        }
        results
    })
}

/// `kubectl drain` of the node: the PDB lets one pod go and keeps the other, which serves.
fn pdb_holds_through_a_drain(api: &ApiServer) {
    let node = api.env("NODE_NAME").to_owned();
    let before: BTreeSet<String> = ready_pods(api).iter().map(pod_name).collect();
    let out = api.kubectl([
        "drain",
        &node,
        "--ignore-daemonsets",
        "--delete-emptydir-data",
        "--timeout=30s",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "the drain evicted both pods:\n{stderr}"
    );
    assert!(stderr.contains("disruption budget"), "{stderr}");
    let after: BTreeSet<String> = ready_pods(api).iter().map(pod_name).collect();
    assert_eq!(after.len(), 1, "one replica stays: {after:?}");
    assert!(after.is_subset(&before), "{after:?} of {before:?}");
    let stored = create_machineset(api, "ms-drain").unwrap();
    assert_eq!(
        cluster::image(&stored),
        CURRENT_X86,
        "served during the drain"
    );
    api.kubectl_ok(["uncordon", &node]);
    rollout(api);
    assert_eq!(ready_pods(api).len(), 2);
}

/// The Lease holder's pod is deleted; the other pod takes the Lease.
fn lease_moves_to_the_other_pod(api: &ApiServer) {
    let holder = |api: &ApiServer| {
        api.get_json(["lease", LEASE, "-n", OWN_NS])["spec"]["holderIdentity"]
            .as_str()
            .map(str::to_owned)
    };
    wait_for(api, "a Lease holder", |api| holder(api).is_some());
    let from = holder(api).unwrap();
    let pods: Vec<String> = ready_pods(api).iter().map(pod_name).collect();
    assert!(
        pods.contains(&from),
        "{from} holds the Lease but is not among {pods:?}"
    );
    let t = Instant::now();
    api.kubectl_ok(["delete", "pod", &from, "-n", OWN_NS, "--wait=false"]);
    // The other replica, or the deleted one's replacement: whichever asks first after the
    // holder released the Lease on SIGTERM.
    wait_for(api, "the Lease to move to another pod", |api| {
        holder(api).is_some_and(|h| h != from)
    });
    let to = holder(api).unwrap();
    let took = t.elapsed().as_secs_f64();
    let live: Vec<String> = ready_pods(api).iter().map(pod_name).collect();
    let pods_now = api.get_json(["pods", "-n", OWN_NS, "-l", APP]);
    let known = pods_now["items"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| pod_name(p) == to);
    assert!(
        known,
        "{to} holds the Lease but is no pod of the Deployment"
    );
    let was = if pods.contains(&to) {
        "the other replica"
    } else {
        "the replacement"
    };
    report(format!(
        "the Lease moved from {from} to {to} ({was}) {took:.1} s after its holder was deleted; \
         Ready now: {live:?}"
    ));
    let ms = create_machineset(api, "ms-after-lease").unwrap();
    assert_eq!(cluster::image(&ms), CURRENT_X86);
}

fn wait_for(api: &ApiServer, what: &str, done: impl Fn(&ApiServer) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(180);
    while !done(api) {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(500));
    }
}
