//! The real binary, SIGTERM in the middle of a stream of requests: readiness fails first,
//! requests keep being answered while endpoints drop the pod, in-flight ones finish, and
//! the process exits 0.

use crate::support;

use std::time::{Duration, Instant};

use support::binary::{Served, serve_command};
use support::{Https, ReviewStream, admin_get, dev_certs, fixture, fixture_path};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_during_a_stream_of_requests_fails_none() {
    let _alone = support::alone();
    support::install_provider();
    let dir = tempfile::tempdir().unwrap();
    let certs = dev_certs();
    certs.write(dir.path()).unwrap();
    let mut served = serve_with_delays(dir.path());
    let (webhook, admin) = (served.webhook, served.admin);

    let client = Https::new(&certs.ca_pem);
    let body = serde_json::to_vec(&fixture(
        "admissionreview-v1-machineset-gcp-update.assembled.json",
    ))
    .unwrap();
    // Stopped once /readyz fails and the endpoints controller would have removed us.
    let stream = ReviewStream::new(client.clone(), webhook, body.clone())
        .keep_alive(4)
        .start();
    // One slow upload that is in flight across SIGTERM and the start of the drain.
    let slow = tokio::spawn(slow_upload(client.clone(), webhook, body.clone()));

    tokio::time::sleep(Duration::from_millis(600)).await;
    let before = stream.ok();
    assert!(before > 0, "requests flow before SIGTERM");
    served.signal("TERM");
    let signalled = Instant::now();
    let unready_after = unready_after(admin, signalled).await;
    // Endpoints take a moment to follow; the pod keeps answering meanwhile.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let during_delay = stream.ok();
    let tally = stream.stop().await;
    let slow_reply = slow.await.unwrap();
    let (exit, served) = tokio::task::spawn_blocking(move || {
        let exit = served.wait_exit(Duration::from_secs(20));
        (exit, served)
    })
    .await
    .unwrap();
    let stopped_after = signalled.elapsed();
    let rest = served.log();

    assert_eq!(
        tally.failed, 0,
        "failed after {} ok: {:?}",
        tally.ok, tally.failures
    );
    assert!(
        slow_reply.starts_with("HTTP/1.1 200"),
        "in-flight upload finished: {slow_reply}"
    );
    assert!(slow_reply.contains(r#""allowed":true"#));
    assert!(exit.success(), "exit status {exit:?}");
    assert!(unready_after < Duration::from_millis(900));
    assert!(
        stopped_after >= Duration::from_secs(1),
        "served through the shutdown delay"
    );
    assert!(stopped_after < Duration::from_secs(8), "{stopped_after:?}");
    assert!(
        rest.iter().any(|l| l.contains("received SIGTERM")),
        "{rest:?}"
    );
    assert!(
        rest.last().is_some_and(|l| l.contains("stopped")),
        "{rest:?}"
    );
    // Answered during the delay, and told to close so clients move to another replica.
    assert!(during_delay > before, "served during the shutdown delay");
    assert!(tally.closes > 0);
}

/// The binary with a one-second shutdown delay and a ten-second drain, serving the
/// certificate in `dir`, bodies held to no real minimum rate.
fn serve_with_delays(dir: &std::path::Path) -> Served {
    let mut cmd = serve_command();
    cmd.args(["--shutdown-delay", "1s", "--drain-timeout", "10s"])
        // The slow upload is far slower than a body must be by default.
        .args(["--min-body-rate", "1"])
        .arg("--tls-cert-file")
        .arg(dir.join("tls.crt"))
        .arg("--tls-private-key-file")
        .arg(dir.join("tls.key"))
        .arg("--configmap-file")
        .arg(fixture_path("configmap-coreos-bootimages.assembled.yaml"));
    Served::spawn(cmd)
}

/// A review uploaded in twenty chunks a tenth of a second apart; its whole answer.
async fn slow_upload(client: Https, webhook: std::net::SocketAddr, body: Vec<u8>) -> String {
    let mut tls = client.connect(webhook).await.unwrap();
    let head = format!(
        "POST /mutate-machinesets HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    tls.write_all(head.as_bytes()).await.unwrap();
    for chunk in body.chunks(body.len() / 20 + 1) {
        tls.write_all(chunk).await.unwrap();
        tls.flush().await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut out = Vec::new();
    tls.read_to_end(&mut out).await.unwrap();
    String::from_utf8_lossy(&out).into_owned()
}

/// How long after `signalled` `/readyz` failed; it must fail promptly.
async fn unready_after(admin: std::net::SocketAddr, signalled: Instant) -> Duration {
    loop {
        let (code, _) = admin_get(admin, "/readyz").await;
        if code == 503 {
            return signalled.elapsed();
        }
        assert!(
            signalled.elapsed() < Duration::from_millis(900),
            "readiness still passing"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
