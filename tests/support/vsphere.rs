//! The vSphere tests' world: the apiserver with a vSphere cluster of two failure domains
//! (one per vcsim datacenter), vcsim (`support::vcsim`), the OVA served over HTTPS on
//! loopback, and the test CA the webhook is given with `--vsphere-ca-file`, as an
//! administrator gives the cluster's. The stream's OVA is a tiny one made here
//! (`tests/fixtures/vsphere/rhcos-test.ovf` and a small disk).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use bootimage_webhook::serve::tls::DevCerts;
use serde_json::{Value, json};

use super::cluster::*;
use super::clusters::Profile;
use super::fixture;
use super::vcsim::VCenter;

/// The vSphere cluster on 4.22, as OpenShift leaves it (`tests/fixtures/clusters/vsphere-4.22`):
/// two failure domains, fd-a in DC0 and fd-b in DC1, as vcsim names its inventory.
pub const PROFILE: Profile = Profile {
    platform: "vsphere",
    release: "4.22",
};
/// The vCenter the profile names.
const PROFILE_VCENTER: &str = "vcenter.example.com";
pub const INFRA_ID: &str = "ci-vs-abc12";
/// The installer's MachineSets in fd-a, on [`INSTALLER_A`], and in fd-b, on [`INSTALLER_B`].
pub const INSTALLER_MS_A: &str = "ci-vs-abc12-worker-0";
pub const INSTALLER_MS_B: &str = "ci-vs-abc12-worker-1";
pub const RELEASE: &str = "9.8.20260428-0";
/// What the installer names each failure domain's template (region-zone).
pub const INSTALLER_A: &str = "ci-vs-abc12-rhcos-east-east-a";
pub const INSTALLER_B: &str = "ci-vs-abc12-rhcos-east-east-b";
pub const CUSTOM_TEMPLATE: &str = "my-golden-rhcos";
/// The failure domains' vCenter; its port is in `vcenters[].port`.
pub const SERVER: &str = "127.0.0.1";
/// The test OVA's disk.
pub const DISK_BYTES: u32 = 256 * 1024;
/// How long an import of the test OVA may take in these tests (it takes seconds).
pub const IMPORTED_WITHIN: Duration = Duration::from_secs(120);
// ------------------------------------------------------------------------------ the world

/// The apiserver with a vSphere cluster, vcsim, the OVA server and the test CA.
pub struct World {
    pub cluster: Cluster,
    pub tls: tempfile::TempDir,
    pub vcenter: Option<VCenter>,
    pub ova: OvaServer,
    pub cache: tempfile::TempDir,
}

impl World {
    pub fn start(ova: Ova) -> World {
        super::install_provider();
        // The profile's cluster, its vCenter the vcsim here.
        let cluster =
            Cluster::start_profile_with(PROFILE, &[(PROFILE_VCENTER, SERVER)]).with_shipped_touch();
        let tls = tempfile::tempdir().unwrap();
        let certs = DevCerts::generate(&["127.0.0.1".into()]).unwrap();
        certs.write(tls.path()).unwrap();
        std::fs::write(tls.path().join("vsphere-ca.pem"), &certs.ca_pem).unwrap();
        let server = OvaServer::start(
            &tls.path().join("tls.crt"),
            &tls.path().join("tls.key"),
            ova.bytes.clone(),
        );
        let mut world = World {
            cluster,
            tls,
            vcenter: None,
            ova: server,
            cache: tempfile::tempdir().unwrap(),
        };
        world.set_stream(&ova);
        let port = free_port();
        world.start_vcenter_on(port);
        world.point_at(port);
        super::rbac::importer_grants_to_the_webhook(&world.cluster.api, "vsphere-import");
        world
    }

    pub fn vcenter(&self) -> &VCenter {
        self.vcenter.as_ref().expect("vcsim runs")
    }

    /// vcsim on `port`, with the folder the installer makes in each datacenter and fd-c's
    /// resource pool.
    pub fn start_vcenter_on(&mut self, port: u16) {
        let vc = VCenter::start(self.tls.path(), &format!("127.0.0.1:{port}"));
        for dc in ["DC0", "DC1"] {
            vc.create_folder(&format!("/{dc}/vm"), INFRA_ID);
        }
        vc.create_resource_pool("/DC0/host/DC0_C0/Resources", POOL_C);
        vc.create_cluster_tag();
        self.vcenter = Some(vc);
    }

    /// Infrastructure `cluster`'s vCenter at 127.0.0.1:`port` (`vcenters[].port`), with a
    /// third failure domain beside the profile's two (fd-c, in DC0 beside fd-a, its
    /// resource pool named with markup), and the credentials Secret for it (vcsim takes any
    /// user and password).
    pub fn point_at(&mut self, port: u16) {
        if self.vcenter.as_ref().is_some_and(|v| v.port != port) {
            self.vcenter = None;
        }
        let server = SERVER;
        let c = &self.cluster;
        let fd = |name: &str, zone: &str| {
            let dc = datacenter(name);
            json!({"name": name, "region": "east", "zone": zone, "server": server,
                   "topology": {"datacenter": dc, "computeCluster": format!("/{dc}/host/{dc}_C0"),
                                "datastore": format!("/{dc}/datastore/LocalDS_0"),
                                "networks": ["VM Network"],
                                "resourcePool": pool(name),
                                "folder": format!("/{dc}/vm/{INFRA_ID}")}})
        };
        let spec = json!({"spec": {"platformSpec": {"type": "VSphere", "vsphere": {
            "vcenters": [{"server": server, "port": port, "datacenters": ["DC0", "DC1"]}],
            "failureDomains": [fd("fd-a", "east-a"), fd("fd-b", "east-b"), fd("fd-c", "east-c")]}}}});
        c.kubectl(&[
            "patch",
            "infrastructure",
            "cluster",
            "--type=merge",
            "-p",
            &spec.to_string(),
        ]);
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let secret = json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": "vsphere-creds", "namespace": "kube-system"},
            "data": {format!("{server}.username"): b64("user"), format!("{server}.password"): b64("pass")}});
        let out = c
            .api
            .kubectl_stdin(["apply", "-f", "-"], &secret.to_string());
        assert!(out.status.success(), "{}", text(&out));
    }

    /// The install-config (ConfigMap `kube-system/cluster-config-v1`) with
    /// `platform.vsphere.diskType`.
    pub fn install_config_disk_type(&self, disk_type: &str) {
        let install_config =
            format!("apiVersion: v1\nplatform:\n  vsphere:\n    diskType: {disk_type}\n");
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cluster-config-v1", "namespace": "kube-system"},
            "data": {"install-config": install_config}});
        let out = self
            .cluster
            .api
            .kubectl_stdin(["apply", "-f", "-"], &cm.to_string());
        assert!(out.status.success(), "{}", text(&out));
    }

    /// The stream with the test OVA as its x86_64 `vmware` artifact.
    pub fn set_stream(&self, ova: &Ova) {
        self.set_stream_release(ova, RELEASE);
    }

    /// The same, with the OVA as RHCOS `release`.
    pub fn set_stream_release(&self, ova: &Ova, release: &str) {
        let url = format!(
            "https://{}/rhcos-{RELEASE}-vmware.x86_64.ova",
            self.ova.addr
        );
        self.set_stream_at(release, &url, &ova.stream_sha256);
    }

    /// The stream naming RHCOS `release`'s OVA at `url` with checksum `sha256`.
    pub fn set_stream_at(&self, release: &str, url: &str, sha256: &str) {
        let configmap = fixture("configmap-coreos-bootimages.assembled.yaml");
        let mut stream: Value =
            serde_json::from_str(configmap["data"]["stream"].as_str().unwrap()).unwrap();
        let vmware = &mut stream["architectures"]["x86_64"]["artifacts"]["vmware"];
        assert_eq!(vmware["release"], RELEASE);
        vmware["release"] = json!(release);
        vmware["formats"]["ova"]["disk"] = json!({"location": url, "sha256": sha256});
        self.cluster.set_stream(&stream.to_string());
    }

    /// `status -o json` as an administrator runs it, given the vCenter CA: its rows by name.
    pub fn status(&self) -> Value {
        let out = Command::new(super::binary::BIN)
            .args(["status", "-o", "json", "--vsphere-ca-file"])
            .arg(self.tls.path().join("vsphere-ca.pem"))
            .env("KUBECONFIG", self.cluster.api.kubeconfig())
            .output()
            .expect("running status");
        assert!(out.status.success(), "status: {}", text(&out));
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        let rows = report["machineSets"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        rows.into_iter()
            .map(|r| (r["name"].as_str().unwrap_or_default().to_owned(), r))
            .collect::<serde_json::Map<_, _>>()
            .into()
    }

    /// `replica-a` with the importer on, registered, holding the Lease.
    pub fn holder(&self) -> Replica {
        self.holder_with(&[])
    }

    pub fn holder_with(&self, flags: &[&str]) -> Replica {
        self.holder_in(flags, &[])
    }

    /// [`World::holder_with`] with more environment variables (e.g. the proxy's).
    pub fn holder_in(&self, flags: &[&str], env: &[(&str, &str)]) -> Replica {
        let ca = self.tls.path().join("vsphere-ca.pem");
        let cache = self.cache.path().to_str().unwrap().to_owned();
        let mut all = vec![
            "--vsphere-import",
            "--vsphere-ca-file",
            ca.to_str().unwrap(),
            "--vsphere-ova-cache",
            &cache,
        ];
        all.extend_from_slice(flags);
        self.cluster.holder_in(&all, env)
    }
}

/// The failure domains: fd-a in DC0, fd-b in DC1, and fd-c in DC0 beside fd-a, sharing its
/// folder and datastore (a resource pool of its own).
pub fn datacenter(fd: &str) -> &'static str {
    if fd == "fd-b" { "DC1" } else { "DC0" }
}

/// fd-c's resource pool: a name with markup, both quotes and non-ASCII, which reaches
/// vCenter only if our requests escape it.
pub const POOL_C: &str = r#"pool <c> & "ç's""#;

/// The failure domain's resource pool.
pub fn pool(fd: &str) -> String {
    let dc = datacenter(fd);
    match fd {
        "fd-c" => format!("/{dc}/host/{dc}_C0/Resources/{POOL_C}"),
        _ => format!("/{dc}/host/{dc}_C0/Resources"),
    }
}

/// The folder the installer made in the failure domain's datacenter.
pub fn folder(fd: &str) -> String {
    format!("/{}/vm/{INFRA_ID}", datacenter(fd))
}

/// A worker MachineSet of the failure domain `fd` (its workspace), on `template`.
pub fn vsphere_machineset(name: &str, fd: &str, template: &str) -> Value {
    let dc = datacenter(fd);
    json!({
        "apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"replicas": 0,
            "selector": {"matchLabels": {"machine.openshift.io/cluster-api-machineset": name}},
            "template": {
                "metadata": {"labels": {"machine.openshift.io/cluster-api-machineset": name}},
                "spec": {"providerSpec": {"value": {
                    "apiVersion": "machine.openshift.io/v1beta1", "kind": "VSphereMachineProviderSpec",
                    "credentialsSecret": {"name": "vsphere-cloud-credentials"},
                    "diskGiB": 120, "memoryMiB": 16384, "numCPUs": 4, "numCoresPerSocket": 4,
                    "network": {"devices": [{"networkName": "VM Network"}]},
                    "template": template,
                    "userDataSecret": {"name": "worker-user-data"},
                    "workspace": {"datacenter": dc, "datastore": format!("/{dc}/datastore/LocalDS_0"),
                        "folder": format!("/{dc}/vm/{INFRA_ID}"), "resourcePool": pool(fd),
                        "server": SERVER}}}}}}
    })
}

pub fn template(ms: &Value) -> &str {
    ms.pointer(&format!("{PROVIDER}/template"))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The apiserver called the webhook on the creation of `name`, and it answered `reason`
/// without a patch (from the audit log).
pub fn assert_answered(c: &Cluster, name: &str, reason: &str) {
    eventually(
        &format!("the audit of {name}'s creation"),
        Duration::from_secs(10),
        String::new,
        || {
            let events = c.audit();
            let found = events.iter().any(|e| {
                e["verb"] == "create"
                    && e["stage"] == "ResponseComplete"
                    && e["objectRef"]["name"] == name
            });
            found.then(|| {
                assert_eq!(
                    webhook_call(creation(&events, name)),
                    answered(reason, false)
                )
            })
        },
    );
}

/// The `TemplateNotImported` Events on `name`, once there is one (within `within`).
pub fn warned(c: &Cluster, r: &Replica, name: &str, within: Duration) -> Vec<Value> {
    eventually(
        &format!("a Warning Event on {name}"),
        within,
        || r.served.log_text(),
        || {
            let e = events_of(c, "TemplateNotImported", name);
            (!e.is_empty()).then_some(e)
        },
    )
}

pub fn wait_template(c: &Cluster, name: &str, wanted: &str, r: &Replica) {
    eventually(
        &format!("{name} to move to {wanted}"),
        IMPORTED_WITHIN,
        || r.served.log_text(),
        || (template(&c.get(name)) == wanted).then_some(()),
    );
}

/// A free port that `vcenters[].port` accepts (at most 32767, below the ephemeral range),
/// never one already handed to another test of this process (they run in parallel).
pub fn free_port() -> u16 {
    static HANDED: Mutex<Vec<u16>> = Mutex::new(Vec::new());
    let mut handed = HANDED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let seed = std::process::id() as u64 * 7919
        + std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos() as u64;
    (0..2000u64)
        .map(|i| 20000 + ((seed + i * 131) % 12000) as u16)
        .find(|p| !handed.contains(p) && std::net::TcpListener::bind(("127.0.0.1", *p)).is_ok())
        .inspect(|p| handed.push(*p))
        .expect("a free port between 20000 and 32000")
}

// ------------------------------------------------------------------------------ the OVA

pub struct Ova {
    pub bytes: Arc<Vec<u8>>,
    /// What the stream says its SHA-256 is.
    pub stream_sha256: String,
}

impl Ova {
    /// The descriptor, then a small disk, as a tar (an OVA).
    pub fn good() -> Ova {
        let disk: Vec<u8> = (0..DISK_BYTES).map(|i| (i % 251) as u8).collect();
        Ova::of(&[("rhcos.ovf", &descriptor()), ("disk.vmdk", &disk)])
    }

    /// Another build of it: the same descriptor, other disk bytes (another checksum).
    pub fn rebuilt(build: u32) -> Ova {
        let disk: Vec<u8> = (0..DISK_BYTES).map(|i| ((i + build) % 251) as u8).collect();
        Ova::of(&[("rhcos.ovf", &descriptor()), ("disk.vmdk", &disk)])
    }

    /// The descriptor alone: it names a disk the OVA does not hold.
    pub fn without_disk() -> Ova {
        Ova::of(&[("rhcos.ovf", &descriptor())])
    }

    /// These files as a tar, with its true checksum in the stream.
    pub fn of(files: &[(&str, &Vec<u8>)]) -> Ova {
        let mut tar = tar::Builder::new(Vec::new());
        for (name, data) in files {
            let mut header = tar::Header::new_ustar();
            header.set_size(data.len() as u64);
            header.set_mode(0o644);
            header.set_cksum();
            tar.append_data(&mut header, name, data.as_slice()).unwrap();
        }
        let bytes = tar.into_inner().unwrap();
        let digest = ring::digest::digest(&ring::digest::SHA256, &bytes);
        Ova {
            stream_sha256: digest.as_ref().iter().map(|b| format!("{b:02x}")).collect(),
            bytes: Arc::new(bytes),
        }
    }

    pub fn bad_checksum() -> Ova {
        Ova {
            stream_sha256: "0".repeat(64),
            ..Ova::good()
        }
    }
}

pub fn descriptor() -> Vec<u8> {
    std::fs::read(fixture_path("vsphere/rhcos-test.ovf")).unwrap()
}

pub fn fixture_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// Serves OVAs over HTTPS (hyper): the one given for its path, else the first one given.
pub struct OvaServer {
    pub addr: SocketAddr,
    files: Arc<Mutex<BTreeMap<String, Arc<Vec<u8>>>>>,
    _runtime: tokio::runtime::Runtime,
}

impl OvaServer {
    pub fn start(cert: &Path, key: &Path, ova: Arc<Vec<u8>>) -> OvaServer {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let chain = std::fs::read(cert).unwrap();
        let key = std::fs::read(key).unwrap();
        let served = bootimage_webhook::serve::tls::certified_key(&chain, &key).unwrap();
        let config = rustls::ServerConfig::builder()
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(rustls::sign::SingleCertAndKey::from(served)));
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let files = Arc::new(Mutex::new(BTreeMap::from([(String::new(), ova)])));
        let shared = files.clone();
        runtime.spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (acceptor, files) = (acceptor.clone(), shared.clone());
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let serve = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                        let files = files.lock().unwrap();
                        let ova = files.get(req.uri().path()).unwrap_or(&files[""]).clone();
                        let body = http_body_util::Full::new(bytes::Bytes::from(ova.to_vec()));
                        async move { Ok::<_, std::convert::Infallible>(hyper::Response::new(body)) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(tls), serve)
                        .await;
                });
            }
        });
        OvaServer {
            addr,
            files,
            _runtime: runtime,
        }
    }

    /// Serves `ova` at `path` (from now on); its URL.
    pub fn serve(&self, path: &str, ova: &Ova) -> String {
        self.files
            .lock()
            .unwrap()
            .insert(path.to_owned(), ova.bytes.clone());
        format!("https://{}{path}", self.addr)
    }
}
