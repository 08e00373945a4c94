//! Against a real OpenShift cluster, read-only. Ignored unless asked for:
//!
//!     KUBECONFIG=~/.kube/config cargo test --test real_cluster -- --ignored
//!
//! It runs the binary with `--no-touch` (no Lease, no writes), waits until every watcher
//! has listed, then sends every MachineSet of the cluster through the webhook as an
//! UPDATE and checks the answer and that any patch applies with evanphx/json-patch.

mod support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bootimage_webhook::cluster::apis;
use kube::api::{Api, ListParams};
use kube::core::DynamicObject;
use support::{Https, admin_get, dev_certs, evanphx};

#[tokio::test]
#[ignore = "needs a real cluster: set KUBECONFIG and pass --ignored"]
async fn every_machineset_of_a_real_cluster_goes_through_the_webhook() {
    assert!(std::env::var_os("KUBECONFIG").is_some(), "set KUBECONFIG");
    support::install_provider();
    let dir = tempfile::tempdir().unwrap();
    let certs = dev_certs();
    certs.write(dir.path()).unwrap();
    let port = |_| {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
    };
    let (webhook, admin) = (port(()), port(()));
    let mut server = Command::new(env!("CARGO_BIN_EXE_bootimage-webhook"))
        .args([
            "serve",
            "--no-touch",
            "--bind-address",
            &webhook.to_string(),
            "--admin-address",
            &admin.to_string(),
        ])
        .arg("--tls-cert-file")
        .arg(dir.path().join("tls.crt"))
        .arg("--tls-private-key-file")
        .arg(dir.path().join("tls.key"))
        .stdout(Stdio::inherit())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while admin_get_ok(admin).await != Some(200) {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "not ready within a minute"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let client = kube::Client::try_default().await.unwrap();
    let api: Api<DynamicObject> = Api::namespaced_with(
        client,
        apis::MACHINE_API_NAMESPACE,
        &apis::MACHINESET.api_resource(),
    );
    let https = Https::new(&certs.ca_pem);
    for ms in api.list(&ListParams::default()).await.unwrap() {
        let object = serde_json::to_value(&ms).unwrap();
        let reply = https
            .post_review(webhook, &support::update_review_of(&object))
            .await;
        assert_eq!(reply.status, 200);
        let v = reply.json();
        println!(
            "{}: {}",
            object["metadata"]["name"], v["response"]["status"]["message"]
        );
        if let Some(patch) = reply.patch() {
            evanphx::apply(&object, &patch).unwrap();
        }
    }
    let _ = Command::new("kill")
        .args(["-TERM", &server.id().to_string()])
        .status();
    assert!(server.wait().unwrap().success());
}

async fn admin_get_ok(addr: std::net::SocketAddr) -> Option<u16> {
    tokio::net::TcpStream::connect(addr).await.ok()?;
    Some(admin_get(addr, "/readyz").await.0)
}
