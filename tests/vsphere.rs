//! vSphere end to end: the webhook and its importer against vcsim (govmomi's vCenter
//! simulator, `tests/go/vcsim`, built by `scripts/build-vcsim`) and a real kube-apiserver.
//! The cluster is a vSphere one with two failure domains, one per vcsim datacenter; the
//! stream's OVA is a tiny one made here (`tests/fixtures/vsphere/rhcos-test.ovf` and a small
//! disk), served over HTTPS on loopback. vcsim and the OVA server use a certificate of a
//! test CA that the webhook is given with `--vsphere-ca-file`, as an administrator gives the
//! cluster's.
//!
//! The replicas run the toucher at the shipped defaults. Every MachineSet write goes
//! through the apiserver, which applies the webhook's patches with its own JSON Patch
//! library.

mod support;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use bootimage_webhook::core::platforms::vsphere::template_name;
use bootimage_webhook::serve::tls::DevCerts;
use serde_json::{Value, json};
use support::cluster::*;
use support::fixture;

const INFRA_ID: &str = "ci-vs-abc12";
const RELEASE: &str = "9.8.20260428-0";
/// What the installer names each failure domain's template (region-zone).
const INSTALLER_A: &str = "ci-vs-abc12-rhcos-east-east-a";
const INSTALLER_B: &str = "ci-vs-abc12-rhcos-east-east-b";
const CUSTOM_TEMPLATE: &str = "my-golden-rhcos";
/// The failure domains' vCenter; its port is in `vcenters[].port`.
const SERVER: &str = "127.0.0.1";
/// The test OVA's disk.
const DISK_BYTES: u32 = 256 * 1024;
/// How long an import of the test OVA may take in these tests (it takes seconds).
const IMPORTED_WITHIN: Duration = Duration::from_secs(120);

// ------------------------------------------------------------------------------ tests

/// A stale MachineSet in each failure domain moves to the template imported there; a
/// MachineSet on a template that is neither the installer's nor ours stays.
#[test]
fn stale_machinesets_move_to_the_template_imported_in_their_failure_domain() {
    let world = World::start(Ova::good());
    let vc = world.vcenter();
    let c = &world.cluster;
    let a = world.holder();
    for (name, fd, template) in [
        ("ms-a", "fd-a", INSTALLER_A),
        ("ms-b", "fd-b", INSTALLER_B),
        ("ms-custom", "fd-a", CUSTOM_TEMPLATE),
    ] {
        c.create(&vsphere_machineset(name, fd, template));
    }
    for (name, fd) in [("ms-a", "fd-a"), ("ms-b", "fd-b")] {
        let wanted = template_name(INFRA_ID, RELEASE, fd);
        wait_template(c, name, &wanted, &a);
        let path = format!("/{}/vm/{INFRA_ID}/{wanted}", datacenter(fd));
        assert!(
            vc.is_template(&path),
            "{wanted} is not a template in vCenter"
        );
        // Tagged as the installer tags everything of the cluster.
        assert_eq!(vc.tags_of(&path), [INFRA_ID]);
    }
    let imports = a
        .served
        .log()
        .iter()
        .filter(|l| l.contains("imported the RHCOS OVA as a template"))
        .count();
    assert_eq!(
        imports,
        2,
        "one import per failure domain:\n{}",
        a.served.log_text()
    );
    // On a host of the failure domain's cluster that sees its datastore.
    let importing: Vec<String> = a
        .served
        .log()
        .into_iter()
        .filter(|l| l.contains("importing the RHCOS OVA"))
        .collect();
    assert!(
        importing.len() == 2 && importing.iter().all(|l| l.contains("host=\"host-")),
        "{importing:#?}"
    );
    // The disk went up whole (the bytes the NFC upload sent); the import's time is printed
    // for the README (`cargo test --test vsphere -- --nocapture`).
    for line in a
        .served
        .log()
        .iter()
        .filter(|l| l.contains("imported the RHCOS OVA"))
    {
        assert!(line.contains(&format!("bytes={DISK_BYTES}")), "{line}");
        eprintln!("{line}");
    }
    assert_eq!(template(&c.get("ms-custom")), CUSTOM_TEMPLATE);
    // The webhook said why it left the customer's template alone.
    assert_answered(c, "ms-custom", "CustomImage");
    // `status` looks in vCenter itself and agrees; a MachineSet written while the webhook
    // is not registered would move there.
    c.kubectl(&[
        "delete",
        "mutatingwebhookconfiguration",
        "bootimage-webhook",
    ]);
    c.create(&vsphere_machineset("ms-late", "fd-b", INSTALLER_B));
    assert_eq!(template(&c.get("ms-late")), INSTALLER_B);
    let rows = world.status();
    assert_eq!(rows["ms-late"]["reason"], "Updated", "{rows:#}");
    assert_eq!(rows["ms-a"]["reason"], "UpToDate", "{rows:#}");
    assert_eq!(rows["ms-b"]["reason"], "UpToDate", "{rows:#}");
    assert_eq!(rows["ms-custom"]["reason"], "CustomImage", "{rows:#}");
}

/// vCenter down: nothing is denied, one log line says why, and once it is back the
/// template is imported and the MachineSet moves.
#[test]
fn vcenter_unreachable_then_back_denies_nothing_and_imports_after() {
    let mut world = World::start(Ova::good());
    let port = free_port();
    world.point_at(port);
    let c = &world.cluster;
    let a = world.holder();
    c.create(&vsphere_machineset("ms-a", "fd-a", INSTALLER_A));
    a.wait_line("cannot import the vSphere template");
    assert_eq!(template(&c.get("ms-a")), INSTALLER_A);
    assert_answered(c, "ms-a", "TemplateNotImported");
    let rows = world.status();
    let message = rows["ms-a"]["message"].as_str().unwrap_or_default();
    assert_eq!(rows["ms-a"]["reason"], "TemplateNotImported", "{rows:#}");
    assert!(message.contains("Connection refused"), "{message}");
    // Retries go on (backoff) without another line for the same trouble.
    std::thread::sleep(Duration::from_secs(20));
    let lines = a
        .served
        .log()
        .iter()
        .filter(|l| l.contains("cannot import the vSphere template"))
        .count();
    assert_eq!(lines, 1, "one line per trouble:\n{}", a.served.log_text());

    world.start_vcenter_on(port);
    let c = &world.cluster;
    // A write rings the importer instead of waiting for its backoff.
    c.kubectl(&["annotate", "machineset", "ms-a", "-n", NS, "poke=1"]);
    a.wait_line("vCenter answers again");
    wait_template(c, "ms-a", &template_name(INFRA_ID, RELEASE, "fd-a"), &a);
    c.assert_nothing_refused(&[&a]);
}

/// The stream's checksum does not match the OVA: nothing is imported, the MachineSet
/// keeps its template, a Warning Event on it says why, and so does the webhook.
#[test]
fn a_bad_checksum_imports_nothing_and_warns() {
    let world = World::start(Ova::bad_checksum());
    let vc = world.vcenter();
    let c = &world.cluster;
    let a = world.holder();
    c.create(&vsphere_machineset("ms-a", "fd-a", INSTALLER_A));
    let events = warned(c, &a, "ms-a", IMPORTED_WITHIN);
    let note = events[0]["note"].as_str().unwrap_or_default();
    assert_eq!(events[0]["type"], "Warning");
    assert!(
        note.contains("SHA-256") && note.contains("not imported"),
        "{note}"
    );
    let wanted = template_name(INFRA_ID, RELEASE, "fd-a");
    assert!(
        !vc.exists(&format!("/DC0/vm/{INFRA_ID}/{wanted}")),
        "nothing is imported"
    );
    assert_eq!(template(&c.get("ms-a")), INSTALLER_A);
    assert_answered(c, "ms-a", "TemplateNotImported");
    assert_eq!(world.status()["ms-a"]["reason"], "TemplateNotImported");
    // The log says why, once.
    let lines: Vec<String> = a
        .served
        .log()
        .into_iter()
        .filter(|l| l.contains("cannot import the vSphere template"))
        .collect();
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert!(lines[0].contains("SHA-256") && lines[0].contains(&"0".repeat(64)));
    assert!(
        !a.served
            .log()
            .iter()
            .any(|l| l.contains("imported the RHCOS OVA as a template"))
    );
}

/// A new release: its template is imported and the MachineSet moves on; the previous
/// release's template, now named by nothing, is deleted once unused for the retention
/// (here a second, instead of a week), and the new one stays.
#[test]
fn an_unused_template_of_ours_is_deleted_after_the_retention() {
    let world = World::start(Ova::good());
    let vc = world.vcenter();
    let c = &world.cluster;
    // The installer's template and a customer's VM share the folder: never ours to delete.
    let folder = format!("/DC0/vm/{INFRA_ID}");
    let pool = "/DC0/host/DC0_C0/Resources";
    vc.create_vm(&folder, pool, INSTALLER_A);
    vc.mark_as_template(&format!("{folder}/{INSTALLER_A}"));
    vc.create_vm(&folder, pool, CUSTOM_TEMPLATE);
    let a = world.holder_with(&["--vsphere-template-retention", "1s"]);
    c.create(&vsphere_machineset("ms-a", "fd-a", INSTALLER_A));
    let old = template_name(INFRA_ID, RELEASE, "fd-a");
    wait_template(c, "ms-a", &old, &a);

    let newer = "9.8.20260601-0";
    world.set_stream_release(&Ova::good(), newer);
    let new = template_name(INFRA_ID, newer, "fd-a");
    wait_template(c, "ms-a", &new, &a);
    a.wait_line("deleted a template of ours that nothing has named");
    assert!(!vc.exists(&format!("{folder}/{old}")), "{old} is deleted");
    assert!(vc.is_template(&format!("{folder}/{new}")), "{new} stays");
    assert!(
        vc.is_template(&format!("{folder}/{INSTALLER_A}")),
        "the installer's stays"
    );
    assert!(
        vc.exists(&format!("{folder}/{CUSTOM_TEMPLATE}")),
        "the customer's stays"
    );
}

/// What an interrupted import leaves (a VM of the template's name, not a template, made
/// before this replica held the Lease) is deleted before the import; an OVA that lacks the
/// disk its descriptor names makes nothing in vCenter, and says why on the MachineSet.
#[test]
fn half_imported_templates_are_cleaned_up() {
    let world = World::start(Ova::without_disk());
    let vc = world.vcenter();
    let c = &world.cluster;
    let folder = format!("/DC0/vm/{INFRA_ID}");
    let wanted = template_name(INFRA_ID, RELEASE, "fd-a");
    let path = format!("{folder}/{wanted}");
    vc.create_vm(&folder, "/DC0/host/DC0_C0/Resources", &wanted);
    assert!(vc.exists(&path) && !vc.is_template(&path));
    let a = world.holder();
    c.create(&vsphere_machineset("ms-a", "fd-a", INSTALLER_A));
    a.wait_line("deleting a VM an interrupted import left");
    let events = warned(c, &a, "ms-a", Duration::from_secs(30));
    let note = events[0]["note"].as_str().unwrap_or_default();
    assert!(note.contains("disk.vmdk, which is not in it"), "{note}");
    assert!(!vc.exists(&path), "an import without its disk left a VM");
    assert_eq!(template(&c.get("ms-a")), INSTALLER_A);
}

// ------------------------------------------------------------------------------ the world

/// The apiserver with a vSphere cluster, vcsim, the OVA server and the test CA.
struct World {
    cluster: Cluster,
    tls: tempfile::TempDir,
    vcenter: Option<VCenter>,
    _ova: OvaServer,
    cache: tempfile::TempDir,
}

impl World {
    fn start(ova: Ova) -> World {
        support::install_provider();
        let cluster = Cluster::start(true).with_shipped_touch();
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
            _ova: server,
            cache: tempfile::tempdir().unwrap(),
        };
        world.set_stream(&ova);
        let port = free_port();
        world.start_vcenter_on(port);
        world.point_at(port);
        world.cluster.kubectl(&[
            "apply",
            "-f",
            &manifest("components/vsphere-import/rbac.yaml"),
        ]);
        world
    }

    fn vcenter(&self) -> &VCenter {
        self.vcenter.as_ref().expect("vcsim runs")
    }

    /// vcsim on `port`, with the folder the installer makes in each datacenter.
    fn start_vcenter_on(&mut self, port: u16) {
        let vc = VCenter::start(self.tls.path(), &format!("127.0.0.1:{port}"));
        for dc in ["DC0", "DC1"] {
            vc.create_folder(&format!("/{dc}/vm"), INFRA_ID);
        }
        vc.create_cluster_tag();
        self.vcenter = Some(vc);
    }

    /// Infrastructure `cluster` as a vSphere one with two failure domains on the vCenter
    /// at 127.0.0.1:`port` (`vcenters[].port`), and the credentials Secret for it (vcsim
    /// takes any user and password).
    fn point_at(&mut self, port: u16) {
        if self.vcenter.as_ref().is_some_and(|v| v.port != port) {
            self.vcenter = None;
        }
        let server = SERVER;
        let c = &self.cluster;
        let fd = |name: &str, zone: &str, dc: &str| {
            json!({"name": name, "region": "east", "zone": zone, "server": server,
                   "topology": {"datacenter": dc, "computeCluster": format!("/{dc}/host/{dc}_C0"),
                                "datastore": format!("/{dc}/datastore/LocalDS_0"),
                                "networks": ["VM Network"],
                                "resourcePool": format!("/{dc}/host/{dc}_C0/Resources"),
                                "folder": format!("/{dc}/vm/{INFRA_ID}")}})
        };
        let spec = json!({"spec": {"platformSpec": {"type": "VSphere", "vsphere": {
            "vcenters": [{"server": server, "port": port, "datacenters": ["DC0", "DC1"]}],
            "failureDomains": [fd("fd-a", "east-a", "DC0"), fd("fd-b", "east-b", "DC1")]}}}});
        c.kubectl(&[
            "patch",
            "infrastructure",
            "cluster",
            "--type=merge",
            "-p",
            &spec.to_string(),
        ]);
        c.set_status(
            "infrastructure",
            "cluster",
            json!({"platform": "VSphere", "infrastructureName": INFRA_ID,
                   "platformStatus": {"type": "VSphere", "vsphere": {}},
                   "controlPlaneTopology": "HighlyAvailable", "infrastructureTopology": "HighlyAvailable",
                   "apiServerURL": "https://api.vs.example:6443",
                   "apiServerInternalURI": "https://api-int.vs.example:6443",
                   "etcdDiscoveryDomain": ""}),
        );
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let secret = json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": "vsphere-creds", "namespace": "kube-system"},
            "data": {format!("{server}.username"): b64("user"), format!("{server}.password"): b64("pass")}});
        let out = c
            .api
            .kubectl_stdin(["apply", "-f", "-"], &secret.to_string());
        assert!(out.status.success(), "{}", text(&out));
    }

    /// The stream with the test OVA as its x86_64 `vmware` artifact.
    fn set_stream(&self, ova: &Ova) {
        self.set_stream_release(ova, RELEASE);
    }

    /// The same, with the OVA as RHCOS `release`.
    fn set_stream_release(&self, ova: &Ova, release: &str) {
        let configmap = fixture("configmap-coreos-bootimages.assembled.yaml");
        let mut stream: Value =
            serde_json::from_str(configmap["data"]["stream"].as_str().unwrap()).unwrap();
        let vmware = &mut stream["architectures"]["x86_64"]["artifacts"]["vmware"];
        assert_eq!(vmware["release"], RELEASE);
        vmware["release"] = json!(release);
        vmware["formats"]["ova"]["disk"] = json!({
            "location": format!("https://{}/rhcos-{RELEASE}-vmware.x86_64.ova", self._ova.addr),
            "sha256": ova.stream_sha256,
        });
        self.cluster.set_stream(&stream.to_string());
    }

    /// `status -o json` as an administrator runs it, given the vCenter CA: its rows by name.
    fn status(&self) -> Value {
        let out = Command::new(support::binary::BIN)
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
    fn holder(&self) -> Replica {
        self.holder_with(&[])
    }

    fn holder_with(&self, flags: &[&str]) -> Replica {
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
        self.cluster.holder(&all)
    }
}

fn manifest(path: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("manifests")
        .join(path)
        .display()
        .to_string()
}

fn datacenter(fd: &str) -> &'static str {
    if fd == "fd-a" { "DC0" } else { "DC1" }
}

/// A worker MachineSet of the failure domain `fd` (its workspace), on `template`.
fn vsphere_machineset(name: &str, fd: &str, template: &str) -> Value {
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
                        "folder": format!("/{dc}/vm/{INFRA_ID}"), "resourcePool": format!("/{dc}/host/{dc}_C0/Resources"),
                        "server": SERVER}}}}}}
    })
}

fn template(ms: &Value) -> &str {
    ms.pointer(&format!("{PROVIDER}/template"))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The apiserver called the webhook on the creation of `name`, and it answered `reason`
/// without a patch (from the audit log).
fn assert_answered(c: &Cluster, name: &str, reason: &str) {
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
fn warned(c: &Cluster, r: &Replica, name: &str, within: Duration) -> Vec<Value> {
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

fn wait_template(c: &Cluster, name: &str, wanted: &str, r: &Replica) {
    eventually(
        &format!("{name} to move to {wanted}"),
        IMPORTED_WITHIN,
        || r.served.log_text(),
        || (template(&c.get(name)) == wanted).then_some(()),
    );
}

/// A free port that `vcenters[].port` accepts (at most 32767, below the ephemeral range).
fn free_port() -> u16 {
    let seed = std::process::id() as u64 * 7919
        + std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos() as u64;
    (0..2000u64)
        .map(|i| 20000 + ((seed + i * 131) % 12000) as u16)
        .find(|p| std::net::TcpListener::bind(("127.0.0.1", *p)).is_ok())
        .expect("a free port between 20000 and 32000")
}

// ------------------------------------------------------------------------------ vcsim

/// vcsim, stopped when dropped (it exits when its standard input closes).
struct VCenter {
    child: Child,
    _stdin: ChildStdin,
    port: u16,
    url: String,
}

impl VCenter {
    fn start(tls: &Path, listen: &str) -> VCenter {
        let out = Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/build-vcsim"))
            .output()
            .expect("scripts/build-vcsim");
        assert!(out.status.success(), "build-vcsim: {}", text(&out));
        let binary = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
        let mut child = Command::new(binary)
            .args(["-listen", listen])
            .arg("-tls-cert-file")
            .arg(tls.join("tls.crt"))
            .arg("-tls-key-file")
            .arg(tls.join("tls.key"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("vcsim");
        let stdin = child.stdin.take().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let about: Value =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("vcsim said {line:?}: {e}"));
        VCenter {
            child,
            _stdin: stdin,
            port: about["host"]
                .as_str()
                .unwrap()
                .rsplit(':')
                .next()
                .unwrap()
                .parse()
                .unwrap(),
            url: about["url"].as_str().unwrap().to_owned(),
        }
    }

    /// A SOAP call of our own (curl, with the session cookie in a jar): whether the
    /// inventory path exists.
    fn soap(&self, jar: &Path, body: &str) -> String {
        let envelope = format!(
            r#"<?xml version="1.0"?><soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/"><soapenv:Body>{body}</soapenv:Body></soapenv:Envelope>"#
        );
        let out = Command::new("curl")
            .args(["-sS", "-k", "-b"])
            .arg(jar)
            .arg("-c")
            .arg(jar)
            .args([
                "-H",
                "Content-Type: text/xml",
                "--data-binary",
                &envelope,
                &self.url,
            ])
            .output()
            .expect("curl");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn session(&self) -> tempfile::NamedTempFile {
        let jar = tempfile::NamedTempFile::new().unwrap();
        self.soap(
            jar.path(),
            r#"<Login xmlns="urn:vim25"><_this type="SessionManager">SessionManager</_this><userName>user</userName><password>pass</password></Login>"#,
        );
        jar
    }

    /// The VM at `path`.
    fn find(&self, jar: &Path, path: &str) -> Option<String> {
        self.find_kind(jar, path, "VirtualMachine")
    }

    /// `FindByInventoryPath`: the reference of the `kind` object at `path`.
    fn find_kind(&self, jar: &Path, path: &str, kind: &str) -> Option<String> {
        let answer = self.soap(
            jar,
            &format!(
                r#"<FindByInventoryPath xmlns="urn:vim25"><_this type="SearchIndex">SearchIndex</_this><inventoryPath>{path}</inventoryPath></FindByInventoryPath>"#
            ),
        );
        let open = format!(r#"<returnval type="{kind}">"#);
        let start = answer.find(&open)? + open.len();
        let end = answer[start..].find('<')? + start;
        Some(answer[start..end].to_owned())
    }

    /// `CreateFolder` in the folder at `parent`, as the installer makes its folder.
    fn create_folder(&self, parent: &str, name: &str) {
        let jar = self.session();
        let folder = self.find_kind(jar.path(), parent, "Folder").expect(parent);
        let made = self.soap(
            jar.path(),
            &format!(
                r#"<CreateFolder xmlns="urn:vim25"><_this type="Folder">{folder}</_this><name>{name}</name></CreateFolder>"#
            ),
        );
        assert!(made.contains("<returnval"), "CreateFolder: {made}");
    }

    /// A vAPI (REST) call of our own, with a new session: the answer's `value`.
    fn rest(&self, method: &str, path: &str, body: Value) -> Value {
        let base = self.url.replace("/sdk", "/rest/com/vmware/cis");
        let curl = |args: &[&str]| {
            let out = Command::new("curl")
                .args(["-sS", "-k", "-H", "Content-Type: application/json"])
                .args(args)
                .output()
                .expect("curl");
            serde_json::from_slice::<Value>(&out.stdout).unwrap_or(Value::Null)["value"].clone()
        };
        let session = curl(&["-X", "POST", "-u", "user:pass", &format!("{base}/session")]);
        let header = format!("vmware-api-session-id: {}", session.as_str().unwrap());
        curl(&[
            "-X",
            method,
            "-H",
            &header,
            "--data-binary",
            &body.to_string(),
            &format!("{base}{path}"),
        ])
    }

    /// The installer's cluster tag: `<infra-id>` in category `openshift-<infra-id>`.
    fn create_cluster_tag(&self) {
        let category = self.rest(
            "POST",
            "/tagging/category",
            json!({"create_spec": {"name": format!("openshift-{INFRA_ID}"), "description": "",
                   "cardinality": "SINGLE", "associable_types": []}}),
        );
        let tag = self.rest(
            "POST",
            "/tagging/tag",
            json!({"create_spec": {"name": INFRA_ID, "description": "", "category_id": category}}),
        );
        assert!(tag.is_string(), "the tag was not made: {tag}");
    }

    /// The names of the tags attached to the VM at `path`.
    fn tags_of(&self, path: &str) -> Vec<String> {
        let vm = self.find(self.session().path(), path).expect(path);
        let ids = self.rest(
            "POST",
            "/tagging/tag-association?~action=list-attached-tags",
            json!({"object_id": {"id": vm, "type": "VirtualMachine"}}),
        );
        ids.as_array()
            .into_iter()
            .flatten()
            .map(|id| {
                let tag = self.rest(
                    "GET",
                    &format!("/tagging/tag/id:{}", id.as_str().unwrap()),
                    Value::Null,
                );
                tag["name"].as_str().unwrap_or_default().to_owned()
            })
            .collect()
    }

    /// A plain VM (not a template) named `name` in the folder at `folder`, in the pool at
    /// `pool`: what an import stopped before `MarkAsTemplate` leaves.
    fn create_vm(&self, folder_path: &str, pool: &str, name: &str) {
        let jar = self.session();
        let moref = |path: &str, kind: &str| self.find_kind(jar.path(), path, kind).expect(path);
        let (folder, pool) = (moref(folder_path, "Folder"), moref(pool, "ResourcePool"));
        let made = self.soap(
            jar.path(),
            &format!(
                r#"<CreateVM_Task xmlns="urn:vim25"><_this type="Folder">{folder}</_this><config><name>{name}</name><guestId>otherGuest</guestId><files><vmPathName>[LocalDS_0]</vmPathName></files><numCPUs>1</numCPUs><memoryMB>32</memoryMB></config><pool type="ResourcePool">{pool}</pool></CreateVM_Task>"#
            ),
        );
        assert!(made.contains("<returnval"), "CreateVM_Task: {made}");
        let path = format!("{folder_path}/{name}");
        eventually(
            "the VM to exist",
            Duration::from_secs(10),
            String::new,
            || self.find(jar.path(), &path).map(drop),
        );
    }

    fn mark_as_template(&self, path: &str) {
        let jar = self.session();
        let vm = self.find(jar.path(), path).expect(path);
        let answer = self.soap(
            jar.path(),
            &format!(
                r#"<MarkAsTemplate xmlns="urn:vim25"><_this type="VirtualMachine">{vm}</_this></MarkAsTemplate>"#
            ),
        );
        assert!(answer.contains("MarkAsTemplateResponse"), "{answer}");
    }

    fn exists(&self, path: &str) -> bool {
        self.find(self.session().path(), path).is_some()
    }

    fn is_template(&self, path: &str) -> bool {
        let jar = self.session();
        let Some(vm) = self.find(jar.path(), path) else {
            return false;
        };
        let answer = self.soap(
            jar.path(),
            &format!(
                r#"<RetrievePropertiesEx xmlns="urn:vim25"><_this type="PropertyCollector">propertyCollector</_this><specSet><propSet><type>VirtualMachine</type><pathSet>config.template</pathSet></propSet><objectSet><obj type="VirtualMachine">{vm}</obj></objectSet></specSet><options></options></RetrievePropertiesEx>"#
            ),
        );
        let doc = roxmltree::Document::parse(&answer).expect("an XML answer");
        doc.descendants()
            .find(|n| n.tag_name().name() == "val")
            .and_then(|v| v.text())
            == Some("true")
    }
}

impl Drop for VCenter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ------------------------------------------------------------------------------ the OVA

struct Ova {
    bytes: Arc<Vec<u8>>,
    /// What the stream says its SHA-256 is.
    stream_sha256: String,
}

impl Ova {
    /// The descriptor, then a small disk, as a tar (an OVA).
    fn good() -> Ova {
        let disk: Vec<u8> = (0..DISK_BYTES).map(|i| (i % 251) as u8).collect();
        Ova::of(&[("rhcos.ovf", &descriptor()), ("disk.vmdk", &disk)])
    }

    /// The descriptor alone: it names a disk the OVA does not hold.
    fn without_disk() -> Ova {
        Ova::of(&[("rhcos.ovf", &descriptor())])
    }

    /// These files as a tar, with its true checksum in the stream.
    fn of(files: &[(&str, &Vec<u8>)]) -> Ova {
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

    fn bad_checksum() -> Ova {
        Ova {
            stream_sha256: "0".repeat(64),
            ..Ova::good()
        }
    }
}

fn descriptor() -> Vec<u8> {
    std::fs::read(fixture_path("vsphere/rhcos-test.ovf")).unwrap()
}

fn fixture_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// Serves the OVA over HTTPS (hyper) at any path, on a runtime of its own.
struct OvaServer {
    addr: SocketAddr,
    _runtime: tokio::runtime::Runtime,
}

impl OvaServer {
    fn start(cert: &Path, key: &Path, ova: Arc<Vec<u8>>) -> OvaServer {
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
        runtime.spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (acceptor, ova) = (acceptor.clone(), ova.clone());
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let serve = hyper::service::service_fn(move |_req| {
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
            _runtime: runtime,
        }
    }
}
