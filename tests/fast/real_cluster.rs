//! Against a real OpenShift cluster, read-only. Ignored unless asked for:
//!
//!     KUBECONFIG=~/.kube/config cargo test --test fast -- real_cluster:: --ignored
//!
//! It runs the binary with `--no-touch` (no Lease, no writes), waits until every watcher
//! has listed, then sends every MachineSet of the cluster through the webhook as an
//! UPDATE and checks the answer and that any patch applies with evanphx/json-patch.

use crate::support;

use std::time::{Duration, Instant};

use bootimage_webhook::cluster::apis;
use kube::api::{Api, ListParams};
use kube::core::DynamicObject;
use support::binary::{Served, serve_command};
use support::{Https, admin_get, dev_certs, evanphx};

#[tokio::test]
#[ignore = "needs a real cluster: set KUBECONFIG and pass --ignored"]
async fn every_machineset_of_a_real_cluster_goes_through_the_webhook() {
    let _parallel = support::parallel();
    assert!(std::env::var_os("KUBECONFIG").is_some(), "set KUBECONFIG");
    support::install_provider();
    let dir = tempfile::tempdir().unwrap();
    let certs = dev_certs();
    certs.write(dir.path()).unwrap();
    let mut cmd = serve_command();
    cmd.arg("--no-touch")
        .arg("--tls-cert-file")
        .arg(dir.path().join("tls.crt"))
        .arg("--tls-private-key-file")
        .arg(dir.path().join("tls.key"));
    let mut server = Served::spawn(cmd);
    let (webhook, admin) = (server.webhook, server.admin);
    let started = Instant::now();
    while admin_get(admin, "/readyz").await.0 != 200 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "not ready within a minute:\n{}",
            server.log_text()
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
    server.signal("TERM");
    assert!(server.wait_exit(Duration::from_secs(30)).success());
}
