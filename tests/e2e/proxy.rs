//! The cluster-wide proxy, end to end: a real proxy daemon (tinyproxy, a Debian package)
//! in front of a real EC2 emulator (moto in server mode) and of an OVA server (Python's,
//! over TLS from a test CA and plain): `preview` asks EC2 through the proxy (the proxy
//! logs the request; over HTTPS, the tunnel), the importer's connector downloads through a CONNECT tunnel or as a
//! whole URL, a `NO_PROXY` host bypasses it, and with the proxy down the error names it.

use crate::support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::binary;
use support::fixture;
use support::moto::Moto;
use support::proxy::{Reaped, Tinyproxy, free_port};

const REGION: &str = "us-east-1";
const RED_HAT: &str = "ami-0redhat0000000001";

/// What EC2 holds: one Red Hat AMI that is not in the stream.
fn amis() -> Value {
    json!([{
        "ami_id": RED_HAT, "state": "available", "public": true, "owner_id": "531415883065",
        "name": "rhcos-9.6.20250826-1-x86_64", "description": "OpenShift 4.20",
        "image_type": "machine", "architecture": "x86_64", "virtualization_type": "hvm",
        "root_device_type": "ebs", "root_device_name": "/dev/xvda", "hypervisor": "xen"
    }])
}

fn moto() -> Moto {
    Moto::start(0, &amis())
}

/// `preview` of one AWS MachineSet on the Red Hat AMI, with EC2 at `moto`, `env` and
/// `flags`.
fn preview(dir: &Path, moto: &Moto, env: &[(&str, &str)], flags: &[&str]) -> (Value, String) {
    let mut ms = fixture("machineset-aws-build01-ci-tests-worker-us-east-1a.yaml");
    ms["metadata"] = json!({"name": "redhat", "namespace": "openshift-machine-api"});
    ms["spec"]["template"]["spec"]["providerSpec"]["value"]["ami"] = json!({"id": RED_HAT});
    let file = dir.join("machineset.json");
    std::fs::write(&file, ms.to_string()).unwrap();
    let mut cmd = Command::new(binary::BIN);
    cmd.args(["preview", "--control-plane-arch", "amd64"])
        .args(flags)
        .arg("--machineset-file")
        .arg(&file);
    support::moto::aws_env(&mut cmd, &moto.url(), REGION);
    for var in ["HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY"] {
        cmd.env_remove(var).env_remove(var.to_lowercase());
    }
    cmd.envs(env.iter().copied());
    let out = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "preview failed: {err}");
    let result = serde_json::from_slice(&out.stdout).unwrap();
    (result, err)
}

#[test]
fn ec2_is_asked_through_the_proxy_unless_no_proxy_names_it() {
    let _parallel = support::parallel();
    let dir = tempfile::tempdir().unwrap();
    let moto = moto();
    let proxy = Tinyproxy::start(dir.path());

    let (result, err) = preview(dir.path(), &moto, &[("HTTP_PROXY", &proxy.url())], &[]);
    assert_eq!(result["reason"], "Updated", "{result} {err}");
    let through = proxy.requests_to(&moto.addr.to_string());
    assert!(through >= 1, "nothing reached the proxy: {}", proxy.log());

    // The lower-case variable, on a dead port, and NO_PROXY naming EC2's host: only a
    // call straight to EC2 can succeed.
    let dead = format!("http://127.0.0.1:{}", free_port());
    let (result, err) = preview(
        dir.path(),
        &moto,
        &[("http_proxy", &dead), ("NO_PROXY", ".svc,127.0.0.0/8")],
        &[],
    );
    assert_eq!(result["reason"], "Updated", "{result} {err}");
}

#[test]
fn with_the_proxy_down_the_error_names_it() {
    let _parallel = support::parallel();
    let dir = tempfile::tempdir().unwrap();
    let moto = moto();
    let down = format!("http://127.0.0.1:{}", free_port());
    let (result, err) = preview(dir.path(), &moto, &[("HTTP_PROXY", &down)], &[]);
    // Nothing moves, and the user is told which proxy did not answer.
    assert_ne!(result["reason"], "Updated", "{result}");
    let line = format!("through the proxy {down}");
    assert!(err.contains(&line), "{err}");
    assert!(result.to_string().contains(&line), "{result}");
}

/// EC2 over HTTPS, as it is reached in a real cluster: through a CONNECT tunnel the proxy
/// logs, the endpoint's certificate checked against `--trusted-ca-bundle` (a TLS-inspecting
/// proxy's CA reaches the webhook the same way). Without the bundle the same call fails
/// on the certificate and nothing moves. The EC2 client's connector is the importers' (below),
/// with EC2's own signing and answers on top.
#[test]
fn ec2_over_https_goes_through_a_tunnel_trusting_the_bundle() {
    let _parallel = support::parallel();
    support::https::install_provider();
    let dir = tempfile::tempdir().unwrap();
    let certs = dir.path().join("certs");
    std::fs::create_dir(&certs).unwrap();
    support::https::dev_certs().write(&certs).unwrap();
    let moto = Moto::start_tls(&amis(), &certs);
    let proxy = Tinyproxy::start(dir.path());
    let bundle = certs.join("ca.crt");
    let url = proxy.url();
    let env = [("HTTPS_PROXY", url.as_str())];

    let trusting = ["--trusted-ca-bundle", bundle.to_str().unwrap()];
    let (result, err) = preview(dir.path(), &moto, &env, &trusting);
    assert_eq!(result["reason"], "Updated", "{result} {err}");
    let tunnel = format!("localhost:{}", moto.addr.port());
    assert!(proxy.tunnels_to(&tunnel) >= 1, "{}", proxy.log());

    let (result, err) = preview(dir.path(), &moto, &env, &[]);
    assert_ne!(result["reason"], "Updated", "{result} {err}");
    assert!(result.to_string().contains("certificate"), "{result}");
}

/// Python's HTTP server on `dir`, over TLS with `certs` when given.
fn file_server(dir: &Path, certs: Option<&Path>) -> (Reaped, u16) {
    let port = free_port();
    let script = match certs {
        Some(c) => format!(
            "import http.server, ssl\n\
             s = http.server.ThreadingHTTPServer(('127.0.0.1', {port}), http.server.SimpleHTTPRequestHandler)\n\
             c = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)\n\
             c.load_cert_chain('{0}/tls.crt', '{0}/tls.key')\n\
             s.socket = c.wrap_socket(s.socket, server_side=True)\n\
             s.serve_forever()\n",
            c.display()
        ),
        None => format!(
            "import http.server\n\
             http.server.ThreadingHTTPServer(('127.0.0.1', {port}), http.server.SimpleHTTPRequestHandler).serve_forever()\n"
        ),
    };
    let child = Command::new("python3")
        .args(["-c", &script])
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "the file server did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    (Reaped(child), port)
}

/// The importer's connector (vCenter, the OVA download): HTTPS through a CONNECT tunnel,
/// the target's certificate checked against the trusted CA bundle; plain HTTP as a whole
/// URL to the proxy; a NO_PROXY host straight.
#[tokio::test(flavor = "multi_thread")]
async fn the_ova_is_downloaded_through_the_proxy() {
    let _parallel = support::parallel();
    use bootimage_webhook::cluster::egress::{Proxy, ProxyConnector, bundle_roots};
    use http_body_util::{BodyExt, Empty};
    use hyper::body::Bytes;
    use hyper_util::client::legacy::Client;
    use hyper_util::rt::TokioExecutor;

    support::https::install_provider();
    let dir = tempfile::tempdir().unwrap();
    let certs = dir.path().join("certs");
    std::fs::create_dir(&certs).unwrap();
    support::https::dev_certs().write(&certs).unwrap();
    let served = dir.path().join("served");
    std::fs::create_dir(&served).unwrap();
    std::fs::write(served.join("rhcos.ova"), "an OVA").unwrap();
    let (_tls_server, tls_port) = file_server(&served, Some(&certs));
    let (_plain_server, plain_port) = file_server(&served, None);
    let proxy = Tinyproxy::start(dir.path());

    let mut roots = rustls::RootCertStore::empty();
    roots.add_parsable_certificates(bundle_roots(&certs.join("ca.crt")).unwrap());
    let tls = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let get = |through: Proxy, url: String| {
        let connector = ProxyConnector::with_proxy(tls.clone(), through);
        let client = Client::builder(TokioExecutor::new()).build::<_, Empty<Bytes>>(connector);
        async move {
            let resp = client.get(url.parse().unwrap()).await.unwrap();
            assert_eq!(resp.status(), 200);
            resp.into_body().collect().await.unwrap().to_bytes()
        }
    };
    let proxied = || Proxy::new(&proxy.url(), &proxy.url(), "");
    let tunnels = |p: &Tinyproxy| p.tunnels_to(&format!("localhost:{tls_port}"));

    let https = format!("https://localhost:{tls_port}/rhcos.ova");
    assert_eq!(get(proxied(), https.clone()).await, "an OVA");
    assert!(tunnels(&proxy) >= 1, "{}", proxy.log());
    let plain = format!("127.0.0.1:{plain_port}");
    let got = get(proxied(), format!("http://{plain}/rhcos.ova")).await;
    assert_eq!(got, "an OVA");
    let whole_urls = proxy
        .log()
        .lines()
        .filter(|l| l.contains(&format!("GET http://{plain}/rhcos.ova ")))
        .count();
    assert!(whole_urls >= 1, "{}", proxy.log());

    // NO_PROXY naming the host, the proxy a dead port: only a direct call can succeed.
    let dead = format!("http://127.0.0.1:{}", free_port());
    let bypass = Proxy::new(&dead, &dead, "localhost");
    assert_eq!(get(bypass, https).await, "an OVA");
}
