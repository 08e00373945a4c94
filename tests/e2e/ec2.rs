//! AMIs classified through EC2, end to end, against a real third-party EC2 emulator (moto
//! in server mode, from PyPI) and, for the server, a real kube-apiserver: a Red Hat-owned
//! AMI that is not in the stream moves to the stream's AMI, a marketplace AMI moves to the
//! product's newest image at or below the stream's version, a foreign AMI stays; without
//! credentials or with EC2 unreachable nothing moves, nothing is denied, one clear line is
//! logged, and once EC2 answers the MachineSets move. Without credentials of its own, with
//! --aws-machine-api-credentials, the server (as the webhook's ServiceAccount, with the
//! component's RBAC) asks EC2 with the machine API's Secret, static keys or STS web
//! identity (moto's STS), and `status` says which credentials it used.

use crate::support;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::apiserver::ApiServer;
use support::binary::{self, Served};
use support::cluster::{NS, load_profile, run_state};
use support::clusters::Profile;
use support::moto::Moto;
use support::{ami_of, evanphx, fixture, stream_ami};

const REGION: &str = "us-east-1";
const RED_HAT: &str = "ami-0redhat0000000001";
const MARKET_OLD: &str = "ami-0market0000000001";
const MARKET_NEW: &str = "ami-0market0000000002";
const MARKET_TOO_NEW: &str = "ami-0market0000000003";
const FOREIGN: &str = "ami-0foreign000000001";
const PRODUCT: &str = "59ead7de-2540-4653-a8b0-fa7926d5c845";

/// The AWS cluster on 4.22, as OpenShift leaves it (`tests/fixtures/clusters/aws-4.22`).
const PROFILE: Profile = Profile {
    platform: "aws",
    release: "4.22",
};

/// The AMI the installer's MachineSets were installed with: Red Hat's, older than the stream.
fn installer_ami() -> String {
    let ms = &PROFILE.machine_sets()[0];
    ami_of(ms)["id"].as_str().unwrap().to_owned()
}

/// The installer's MachineSets, by name.
fn installer_machine_sets() -> Vec<String> {
    PROFILE
        .machine_sets()
        .iter()
        .map(|ms| ms["metadata"]["name"].as_str().unwrap().to_owned())
        .collect()
}

/// What EC2 holds: Red Hat's (the installer's among them), the marketplace's (three versions
/// of one product) and a stranger's AMIs, in moto's AMI file format.
fn amis() -> Value {
    let market = |id: &str, version: &str, date: &str| {
        json!({
            "ami_id": id, "state": "available", "public": true,
            "owner_id": "679593333241",
            "name": format!("RHEL-9.4-RHCOS-{version}_HVM_GA-{date}-x86_64-0-{PRODUCT}"),
            "description": format!("RHEL CoreOS {version} {version}.{date}-0 x86_64"),
            "creation_date": format!("{}-{}-{}T00:00:00.000Z", &date[..4], &date[4..6], &date[6..]),
            "image_type": "machine", "architecture": "x86_64", "virtualization_type": "hvm",
            "root_device_type": "ebs", "root_device_name": "/dev/xvda", "hypervisor": "xen"
        })
    };
    json!([
        {
            "ami_id": installer_ami(), "state": "available", "public": true, "owner_id": "531415883065",
            "name": "rhcos-9.6.20250826-1-x86_64", "description": "OpenShift 4.20",
            "image_type": "machine", "architecture": "x86_64", "virtualization_type": "hvm",
            "root_device_type": "ebs", "root_device_name": "/dev/xvda", "hypervisor": "xen"
        },
        {
            "ami_id": RED_HAT, "state": "available", "public": true, "owner_id": "531415883065",
            "name": "rhcos-9.6.20250826-1-x86_64", "description": "OpenShift 4.20",
            "image_type": "machine", "architecture": "x86_64", "virtualization_type": "hvm",
            "root_device_type": "ebs", "root_device_name": "/dev/xvda", "hypervisor": "xen"
        },
        market(MARKET_OLD, "9.6", "20250826"),
        market(MARKET_NEW, "9.8", "20260428"),
        market(MARKET_TOO_NEW, "9.9", "20260901"),
        {
            "ami_id": FOREIGN, "state": "available", "public": true, "owner_id": "123456789012",
            "name": "my-golden-rhcos", "description": "ours",
            "image_type": "machine", "architecture": "x86_64", "virtualization_type": "hvm",
            "root_device_type": "ebs", "root_device_name": "/dev/xvda", "hypervisor": "xen"
        }
    ])
}

/// The SDK's standard environment, pointed at `endpoint`, and marketplace AMIs moving (the
/// component aws-marketplace).
fn aws_env(cmd: &mut Command, endpoint: &str) {
    support::moto::aws_env(cmd, endpoint, REGION);
    cmd.env(MARKETPLACE, "true");
}

const MARKETPLACE: &str = "BOOTIMAGE_WEBHOOK_AWS_MARKETPLACE";

/// The real AWS MachineSet, named `name`, on `ami`.
fn machineset(name: &str, ami: &str) -> Value {
    let mut ms = fixture("machineset-aws-build01-ci-tests-worker-us-east-1a.yaml");
    ms["metadata"] = json!({"name": name, "namespace": "openshift-machine-api"});
    ms["spec"]["template"]["spec"]["providerSpec"]["value"]["ami"] = json!({"id": ami});
    ms
}

fn list_file(dir: &Path) -> PathBuf {
    let items: Vec<Value> = [
        ("redhat", RED_HAT),
        ("market", MARKET_OLD),
        ("foreign", FOREIGN),
    ]
    .into_iter()
    .map(|(n, a)| machineset(n, a))
    .collect();
    let path = dir.join("machinesets.json");
    std::fs::write(&path, json!({"kind": "List", "items": items}).to_string()).unwrap();
    path
}

fn preview(list: &Path, env: impl FnOnce(&mut Command)) -> (Vec<Value>, String) {
    let mut cmd = Command::new(binary::BIN);
    cmd.args([
        "preview",
        "--control-plane-arch",
        "amd64",
        "--machineset-file",
    ])
    .arg(list);
    env(&mut cmd);
    let out = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "preview failed: {err}");
    let lines = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (lines, err)
}

#[test]
fn preview_classifies_through_ec2_like_the_server() {
    let _parallel = support::parallel();
    let moto = Moto::start(0, &amis());
    let dir = tempfile::tempdir().unwrap();
    let list = list_file(dir.path());
    let (results, _) = preview(&list, |c| aws_env(c, &moto.url()));
    let by_name = |n: &str| {
        results
            .iter()
            .find(|r| r["machineSet"]["metadata"]["name"] == n)
            .unwrap()
    };
    let redhat = by_name("redhat");
    assert_eq!(redhat["reason"], "Updated", "{redhat}");
    assert_eq!(
        ami_of(&redhat["machineSet"]),
        json!({"id": stream_ami(REGION)})
    );
    let market = by_name("market");
    assert_eq!(market["reason"], "Updated", "{market}");
    assert_eq!(ami_of(&market["machineSet"]), json!({"id": MARKET_NEW}));
    let foreign = by_name("foreign");
    assert_eq!(foreign["reason"], "CustomImage", "{foreign}");
    assert_eq!(foreign["machineSet"], machineset("foreign", FOREIGN));
    // The patches are what the apiserver's own library applies.
    for r in [redhat, market] {
        let name = r["machineSet"]["metadata"]["name"].as_str().unwrap();
        let ami = if name == "redhat" {
            RED_HAT
        } else {
            MARKET_OLD
        };
        let applied = evanphx::apply(&machineset(name, ami), &r["patch"]).unwrap();
        assert_eq!(applied, r["machineSet"], "{name}");
    }
    // Without the component aws-marketplace the marketplace AMI stays, and says why.
    let (results, _) = preview(&list, |c| {
        aws_env(c, &moto.url());
        c.env_remove(MARKETPLACE);
    });
    let market = results
        .iter()
        .find(|r| r["machineSet"]["metadata"]["name"] == "market")
        .unwrap();
    assert_eq!(market["reason"], "MarketplaceNotEnabled", "{market}");
    assert!(
        market["message"]
            .as_str()
            .unwrap()
            .contains("aws-marketplace")
    );
    assert_eq!(market["machineSet"], machineset("market", MARKET_OLD));
}

#[test]
fn preview_without_credentials_or_ec2_says_so_and_changes_nothing() {
    let _parallel = support::parallel();
    let dir = tempfile::tempdir().unwrap();
    let list = list_file(dir.path());
    let (results, _) = preview(&list, |c| {
        for k in [
            "AWS_ACCESS_KEY_ID",
            "AWS_PROFILE",
            "AWS_WEB_IDENTITY_TOKEN_FILE",
            "AWS_SHARED_CREDENTIALS_FILE",
            "AWS_CONFIG_FILE",
        ] {
            c.env_remove(k);
        }
        c.env("HOME", dir.path());
    });
    for r in &results {
        assert_eq!(r["reason"], "AMIUnclassified", "{r}");
        assert!(
            r["message"]
                .as_str()
                .unwrap()
                .contains("would need EC2 to classify"),
            "{r}"
        );
        assert!(r["patch"].as_array().unwrap().is_empty());
    }
    // EC2 unreachable: the same, with EC2's error in words, on stderr too.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", dead.local_addr().unwrap());
    drop(dead);
    let (results, err) = preview(&list, |c| aws_env(c, &url));
    assert!(err.contains("EC2"), "{err}");
    for r in &results {
        assert_eq!(r["reason"], "AMIUnclassified", "{r}");
        assert!(r["patch"].as_array().unwrap().is_empty());
    }
}

/// The cluster the server follows: the AWS profile (its master pool done with its release,
/// an amd64 master), without the machine API's credentials Secret unless `credentials`.
fn aws_cluster(api: &ApiServer, credentials: bool) {
    load_profile(api, PROFILE);
    run_state(api, PROFILE);
    if !credentials {
        api.kubectl_ok(["delete", "secret", "aws-cloud-credentials", "-n", NS]);
    }
}

/// Our webhook registered at `webhook`.
fn register_webhook(api: &ApiServer, webhook: SocketAddr, ca_pem: &str) {
    let mwc = json!(
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
         "metadata": {"name": "bootimage-webhook"},
         "webhooks": [{
            "name": "machinesets.bootimage-webhook.openshift.io",
            "clientConfig": {"url": format!("https://{webhook}/mutate-machinesets"),
                             "caBundle": base64(ca_pem)},
            "rules": [{"apiGroups": ["machine.openshift.io"], "apiVersions": ["v1beta1"],
                       "operations": ["CREATE", "UPDATE"], "resources": ["machinesets"], "scope": "Namespaced"}],
            "admissionReviewVersions": ["v1"], "sideEffects": "None", "failurePolicy": "Ignore",
            "reinvocationPolicy": "IfNeeded", "timeoutSeconds": 5}]});
    let out = api.kubectl_stdin(["create", "-f", "-"], &mwc.to_string());
    api.expect_ok(&["create", "-f", "-"], out);
}

fn base64(s: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(s)
}

fn stored_ami(api: &ApiServer, name: &str) -> Value {
    ami_of(&api.get_json(["machineset", "-n", "openshift-machine-api", name]))
}

fn wait_until(what: &str, limit: Duration, mut ok: impl FnMut() -> bool, log: impl Fn() -> String) {
    let t = Instant::now();
    while !ok() {
        assert!(
            t.elapsed() < limit,
            "{what} not within {limit:?}. Log:\n{}",
            log()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The server, with EC2 unreachable at first: the AWS MachineSets are created as sent
/// (AMIUnclassified, never denied), one warning says why; EC2 comes up on that address and
/// the Lease holder's touches move them; the foreign one is never written by us.
#[test]
fn the_server_classifies_in_the_background_and_touches_once_ec2_answers() {
    let _parallel = support::parallel();
    support::install_provider();
    let api = ApiServer::start();
    let dir = tempfile::tempdir().unwrap();
    let certs = support::dev_certs();
    certs.write(dir.path()).unwrap();
    aws_cluster(&api, true);
    // EC2's address, with nothing listening yet.
    let port = support::proxy::free_port();
    let served = serve_touching(&api, dir.path(), &format!("http://127.0.0.1:{port}"));
    register_webhook(&api, served.webhook, &certs.ca_pem);
    let names = [
        ("redhat", RED_HAT),
        ("market", MARKET_OLD),
        ("foreign", FOREIGN),
    ];
    let installer = installer_ami();
    let installed: Vec<(String, &str)> = installer_machine_sets()
        .into_iter()
        .map(|n| (n, installer.as_str()))
        .collect();
    for (name, ami) in names {
        let out = api.kubectl_stdin(["create", "-f", "-"], &machineset(name, ami).to_string());
        api.expect_ok(&["create", "-f", "-"], out);
        assert_eq!(
            stored_ami(&api, name),
            json!({"id": ami}),
            "{name} stored as sent"
        );
    }
    let mut unmoved: Vec<(&str, &str)> = names.to_vec();
    unmoved.extend(installed.iter().map(|(n, a)| (n.as_str(), *a)));
    nothing_moves_and_one_warning_without_ec2(&api, &served, &unmoved);

    // EC2 comes up where the server looks for it: classification is retried.
    let _moto = Moto::start(port, &amis());
    let log = || served.log_text();
    wait_until(
        "the Red Hat AMI moved",
        Duration::from_secs(90),
        || stored_ami(&api, "redhat") == json!({"id": stream_ami(REGION)}),
        log,
    );
    wait_until(
        "the marketplace AMI moved",
        Duration::from_secs(60),
        || stored_ami(&api, "market") == json!({"id": MARKET_NEW}),
        log,
    );
    for (name, _) in &installed {
        wait_until(
            "the installer's MachineSet moved",
            Duration::from_secs(60),
            || stored_ami(&api, name) == json!({"id": stream_ami(REGION)}),
            log,
        );
    }
    assert_eq!(stored_ami(&api, "foreign"), json!({"id": FOREIGN}));
    // Nobody wrote the foreign MachineSet after its creation.
    let writes = api
        .audit_events()
        .into_iter()
        .filter(|e| e["objectRef"]["name"] == "foreign" && e["verb"] != "create")
        .count();
    assert_eq!(writes, 0);
}

/// The binary, its Lease held, touching after a short resync, with EC2 at `endpoint`.
fn serve_touching(api: &ApiServer, certs: &Path, endpoint: &str) -> Served {
    let mut cmd = binary::serve_command();
    cmd.args(["--touch-settle", "0s", "--touch-resync", "2s"])
        .args(["--touch-backoff", "200ms"])
        // An administrator's kubeconfig, which the admission policy does not bind.
        .arg("--no-admission-policy-check")
        .args(["--pod-name", "replica-0", "--pod-namespace", "default"])
        .arg("--tls-cert-file")
        .arg(certs.join("tls.crt"))
        .arg("--tls-private-key-file")
        .arg(certs.join("tls.key"))
        .env("KUBECONFIG", api.kubeconfig());
    aws_env(&mut cmd, endpoint);
    Served::spawn(cmd)
}

/// With EC2 away, the server warns once (not once a retry) and moves none of `names`.
fn nothing_moves_and_one_warning_without_ec2(
    api: &ApiServer,
    served: &Served,
    names: &[(&str, &str)],
) {
    let warning = "cannot classify AMIs through EC2";
    let warned = served.wait_for_line(Duration::from_secs(60), |l| l.contains(warning));
    assert!(warned.is_some(), "no warning. Log:\n{}", served.log_text());
    std::thread::sleep(Duration::from_secs(3));
    for (name, ami) in names {
        let stored = stored_ami(api, name);
        assert_eq!(stored, json!({"id": ami}), "{name} moved without EC2");
    }
    let warnings = served.log().iter().filter(|l| l.contains(warning)).count();
    assert_eq!(
        warnings,
        1,
        "one line, not one per retry. Log:\n{}",
        served.log_text()
    );
}

/// The environment of a pod without credentials of its own: no AWS variables, no `~/.aws`,
/// and `AWS_SHARED_CREDENTIALS_FILE` naming the optional mount of the CredentialsRequest's
/// Secret, which is not there. EC2 (`endpoint`) and the region are all the SDK is told.
fn no_own_credentials(cmd: &mut Command, endpoint: &str, home: &Path) {
    for k in [
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_ROLE_ARN",
        "AWS_CONFIG_FILE",
    ] {
        cmd.env_remove(k);
    }
    cmd.env(MARKETPLACE, "true");
    cmd.env("HOME", home)
        .env(
            "AWS_SHARED_CREDENTIALS_FILE",
            home.join("absent/credentials"),
        )
        .env("AWS_ENDPOINT_URL", endpoint)
        .env("AWS_REGION", REGION)
        .env("AWS_EC2_METADATA_DISABLED", "true");
}

const MACHINE_API_KEY_ID: &str = "AKIAMACHINEAPI000001";
const MACHINE_API_SECRET_KEY: &str = "machine-api-secret-key-never-logged";
const MACHINE_API_SOURCE: &str = "machine-api Secret openshift-machine-api/aws-cloud-credentials";

/// The machine API's Secret as the cloud-credential-operator writes it in mint mode (moto
/// takes any keys).
fn machine_api_secret() -> Value {
    let mut credentials = String::from("[default]\n");
    credentials.push_str(&format!("aws_access_key_id = {MACHINE_API_KEY_ID}\n"));
    credentials.push_str(&format!(
        "aws_secret_access_key = {MACHINE_API_SECRET_KEY}\n"
    ));
    json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "aws-cloud-credentials", "namespace": "openshift-machine-api"},
        "data": {
            "aws_access_key_id": base64(MACHINE_API_KEY_ID),
            "aws_secret_access_key": base64(MACHINE_API_SECRET_KEY),
            "credentials": base64(&credentials),
        }
    })
}

/// `status -o json` against `api`, with `flags`, in the environment of `env`.
fn status_json(api: &ApiServer, flags: &[&str], env: impl FnOnce(&mut Command)) -> Value {
    serde_json::from_str(&status(api, "json", flags, env)).unwrap()
}

/// `status -o <output>` against `api`: its standard output.
fn status(api: &ApiServer, output: &str, flags: &[&str], env: impl FnOnce(&mut Command)) -> String {
    let mut cmd = Command::new(binary::BIN);
    cmd.args(["status", "-o", output])
        .args(flags)
        .env("KUBECONFIG", api.kubeconfig());
    env(&mut cmd);
    let out = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "status failed: {err}");
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains(MACHINE_API_SECRET_KEY)
            && !err.contains(MACHINE_API_SECRET_KEY),
        "status showed the secret key"
    );
    String::from_utf8(out.stdout).unwrap()
}

fn row<'a>(status: &'a Value, name: &str) -> &'a Value {
    status["machineSets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == name)
        .unwrap_or_else(|| panic!("no row {name}: {status}"))
}

/// The webhook's ServiceAccount with the base RBAC as shipped, and a token for it.
fn service_account(api: &ApiServer) -> String {
    api.kubectl_ok(["create", "namespace", OWN_NS]);
    api.kubectl_ok([
        "create",
        "serviceaccount",
        "bootimage-webhook",
        "-n",
        OWN_NS,
    ]);
    apply_rbac(api, "manifests/base/rbac.yaml");
    api.kubectl_ok([
        "create",
        "token",
        "bootimage-webhook",
        "-n",
        OWN_NS,
        "--duration",
        "1h",
    ])
    .trim()
    .to_owned()
}

fn apply_rbac(api: &ApiServer, file: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
    api.kubectl_ok(["apply".as_ref(), "-f".as_ref(), path.as_os_str()]);
}

const OWN_NS: &str = "bootimage-webhook";
const SA_USER: &str = "system:serviceaccount:bootimage-webhook:bootimage-webhook";

/// `serve --aws-machine-api-credentials` as the webhook's ServiceAccount (the RBAC of the
/// build with the component aws-machine-api-credentials, which grants the get of that one
/// Secret), without credentials of its own,
/// EC2 on moto, on an AWS cluster with our webhook registered.
struct NoOwnCredentials {
    api: ApiServer,
    moto: Moto,
    served: Served,
    dir: tempfile::TempDir,
}

impl NoOwnCredentials {
    fn start() -> NoOwnCredentials {
        support::install_provider();
        let api = ApiServer::start();
        let token = service_account(&api);
        support::rbac::enable(&api, &["aws-machine-api-credentials"], &[]);
        let moto = Moto::start(0, &amis());
        // The machine API's Secret is what these tests create: the profile's is left out.
        aws_cluster(&api, false);
        let dir = tempfile::tempdir().unwrap();
        let certs = support::dev_certs();
        certs.write(dir.path()).unwrap();
        let mut cmd = binary::serve_command();
        cmd.args(["--touch-settle", "0s", "--touch-resync", "2s"])
            // This world has the RBAC but not the admission policy.
            .arg("--no-admission-policy-check")
            .args(["--pod-name", "replica-0", "--pod-namespace", OWN_NS])
            .arg("--aws-machine-api-credentials")
            .env(MARKETPLACE, "true")
            .arg("--tls-cert-file")
            .arg(dir.path().join("tls.crt"))
            .arg("--tls-private-key-file")
            .arg(dir.path().join("tls.key"))
            .env("KUBECONFIG", api.token_kubeconfig(&token, Some(OWN_NS)));
        no_own_credentials(&mut cmd, &moto.url(), dir.path());
        let served = Served::spawn(cmd);
        register_webhook(&api, served.webhook, &certs.ca_pem);
        NoOwnCredentials {
            api,
            moto,
            served,
            dir,
        }
    }

    fn create(&self, object: &Value) {
        let out = self
            .api
            .kubectl_stdin(["create", "-f", "-"], &object.to_string());
        self.api.expect_ok(&["create", "-f", "-"], out);
    }

    /// A write to a MachineSet whose AMI is unclassified asks the background to try now
    /// instead of after its backoff.
    fn nudge(&self, name: &str, n: u32) {
        self.api.kubectl_ok([
            "annotate",
            "machineset",
            "-n",
            "openshift-machine-api",
            name,
            "--overwrite",
            &format!("test/nudge={n}"),
        ]);
    }

    /// The EC2 warning that contains `what`.
    fn warning(&self, what: &str) -> String {
        let warned = self.served.wait_for_line(Duration::from_secs(60), |l| {
            l.contains("cannot classify AMIs through EC2") && l.contains(what)
        });
        warned.unwrap_or_else(|| panic!("no warning with {what:?}. Log:\n{}", self.log()))
    }

    fn log(&self) -> String {
        self.served.log_text()
    }

    /// The one line naming the credentials in use.
    fn credentials_line(&self) -> String {
        let said: Vec<String> = self
            .served
            .log()
            .into_iter()
            .filter(|l| l.contains("asking EC2 with these credentials"))
            .collect();
        assert_eq!(said.len(), 1, "one line. Log:\n{}", self.log());
        said[0].clone()
    }
}

/// The webhook read the machine API's Secret only by name with a `get`, answered with
/// each of `codes`; the only other Secret requests not by name are the list and watch of
/// the stub learner's metadata-only watch.
fn secret_read_by_name_only(api: &ApiServer, codes: &[i64]) {
    let events = api.audit_events();
    let ours =
        |e: &&Value| e["objectRef"]["resource"] == "secrets" && e["user"]["username"] == SA_USER;
    let reads: Vec<(String, i64)> = events
        .iter()
        .filter(ours)
        .filter(|e| e["objectRef"]["name"] == "aws-cloud-credentials")
        .map(|e| {
            let verb = e["verb"].as_str().unwrap_or_default().to_owned();
            (
                verb,
                e["responseStatus"]["code"].as_i64().unwrap_or_default(),
            )
        })
        .collect();
    assert!(reads.iter().all(|(v, _)| v == "get"), "{reads:?}");
    for code in codes {
        assert!(reads.iter().any(|(_, c)| c == code), "no {code}: {reads:?}");
    }
    let unnamed: Vec<&str> = events
        .iter()
        .filter(ours)
        .filter(|e| e["objectRef"]["name"].is_null())
        .filter(|e| e["verb"] != "list" && e["verb"] != "watch")
        .filter_map(|e| e["requestURI"].as_str())
        .filter(|u| !u.contains("fieldSelector=metadata.name"))
        .collect();
    assert!(unnamed.is_empty(), "{unnamed:?}");
}

/// With --aws-machine-api-credentials and no credentials of its own, running as the
/// webhook's ServiceAccount: without the machine API's Secret, nothing moves and one
/// warning says why; once it exists the server
/// reads the Secret's static keys (a `get` by name, nothing else), says so in one line
/// without the keys, and the MachineSet moves through the registered webhook. `status`
/// asks EC2 the same way and says with which credentials; without the flag it does not.
#[test]
fn without_credentials_of_its_own_the_server_asks_ec2_with_the_machine_api_secret() {
    let _parallel = support::parallel();
    let t = NoOwnCredentials::start();
    let api = &t.api;
    t.create(&machineset("redhat", RED_HAT));
    t.create(&machineset("foreign", FOREIGN));

    // The Secret is absent: nothing is asked, nothing moves, and the warning says so.
    let absent = t.warning("does not exist");
    assert!(
        absent.contains("openshift-machine-api/aws-cloud-credentials"),
        "{absent}"
    );
    assert_eq!(stored_ami(api, "redhat"), json!({"id": RED_HAT}));

    // The machine API's Secret appears: read at the next pass, EC2 answers, it moves.
    t.create(&machine_api_secret());
    t.nudge("foreign", 2);
    wait_until(
        "the Red Hat AMI moved",
        Duration::from_secs(60),
        || stored_ami(api, "redhat") == json!({"id": stream_ami(REGION)}),
        || t.log(),
    );
    assert_eq!(stored_ami(api, "foreign"), json!({"id": FOREIGN}));
    let said = t.credentials_line();
    assert!(said.contains(MACHINE_API_SOURCE), "{said}");
    let text = t.log();
    assert!(
        !text.contains(MACHINE_API_SECRET_KEY) && !text.contains(MACHINE_API_KEY_ID),
        "the keys were logged:\n{text}"
    );
    secret_read_by_name_only(api, &[404, 200]);

    // status, without credentials of its own either: with the flag it asks EC2 with the
    // machine API's Secret (the foreign AMI is classified: CustomImage) and says so...
    let home = tempfile::tempdir().unwrap();
    let env = |c: &mut Command| no_own_credentials(c, &t.moto.url(), home.path());
    let with = status_json(api, &["--aws-machine-api-credentials"], env);
    assert_eq!(with["ec2"]["credentials"], MACHINE_API_SOURCE, "{with}");
    assert_eq!(with["ec2"]["error"], Value::Null, "{with}");
    assert_eq!(row(&with, "foreign")["reason"], "CustomImage", "{with}");
    assert_eq!(row(&with, "redhat")["reason"], "UpToDate", "{with}");
    let table = status(api, "table", &["--aws-machine-api-credentials"], env);
    let line = format!("EC2: asked with {MACHINE_API_SOURCE}\n");
    assert!(table.contains(&line), "{table}");
    // ... and without the flag it does not ask: AMIUnclassified, as before.
    let without = status_json(api, &[], env);
    assert_eq!(without["ec2"]["credentials"], Value::Null, "{without}");
    let why = without["ec2"]["error"].as_str().unwrap_or_default();
    assert!(why.contains("--aws-machine-api-credentials"), "{without}");
    assert_eq!(
        row(&without, "foreign")["reason"],
        "AMIUnclassified",
        "{without}"
    );
}

/// The machine API's Secret in its STS form: only a `credentials` file with a role and a
/// web identity token file (the pod's projected token). While the token file is missing,
/// no credentials (one warning); once it exists, STS (moto's) gives credentials for the
/// role, and the marketplace AMI moves to the product's image.
#[test]
fn the_machine_api_secret_in_its_sts_form_goes_through_web_identity() {
    let _parallel = support::parallel();
    let t = NoOwnCredentials::start();
    let api = &t.api;
    let token = t.dir.path().join("token");
    let file = format!(
        "[default]\nrole_arn = arn:aws:iam::123456789012:role/machine-api\nweb_identity_token_file = {}\n",
        token.display()
    );
    t.create(&json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "aws-cloud-credentials", "namespace": "openshift-machine-api"},
        "data": {"credentials": base64(&file)}
    }));
    t.create(&machineset("market", MARKET_OLD));
    // The token file is missing: the web identity provider cannot read it.
    let warned =
        t.warning("with the machine-api Secret openshift-machine-api/aws-cloud-credentials");
    assert!(warned.contains("No such file"), "{warned}");
    assert_eq!(stored_ami(api, "market"), json!({"id": MARKET_OLD}));

    std::fs::write(
        &token,
        "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJib290aW1hZ2Utd2ViaG9vayJ9.c2ln",
    )
    .unwrap();
    t.nudge("market", 1);
    wait_until(
        "the marketplace AMI moved",
        Duration::from_secs(60),
        || stored_ami(api, "market") == json!({"id": MARKET_NEW}),
        || t.log(),
    );
    let said = t.credentials_line();
    assert!(said.contains(MACHINE_API_SOURCE), "{said}");
    secret_read_by_name_only(api, &[200]);
}
