//! A client that sends requests and never reads the answers cannot hold a connection and
//! its buffers outside the budget. In process, over real TLS, at the shipped timeouts: a
//! client from 127.0.0.4 pipelines requests until the server, its response writes blocked,
//! stops reading them. While it is blocked, its connection is charged to the body budget
//! (`request_body_bytes_in_flight`); after the header timeout the connection is closed and
//! the charge given back; reviews from another address are answered throughout.

use crate::support;

use std::time::{Duration, Instant};

use bootimage_webhook::serve::server::{ConnLimits, WRITE_BUFFERS};
use support::{TestServer, fixture, peer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const HEADER_TIMEOUT: Duration = Duration::from_secs(5);

async fn held(server: &TestServer) -> u64 {
    let (_, metrics) = server.admin_get("/metrics").await;
    metrics
        .lines()
        .find_map(|l| l.strip_prefix("bootimage_webhook_request_body_bytes_in_flight "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no body bytes gauge:\n{metrics}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_does_not_read_is_charged_then_cut() {
    let _alone = support::alone();
    let server = support::start_server_with(|s| {
        s.limits = ConnLimits {
            handshake_timeout: Duration::from_secs(10),
            header_read_timeout: HEADER_TIMEOUT,
            idle_timeout: Duration::from_secs(120),
        };
        s.body_timeout = Duration::from_secs(10);
    })
    .await;
    let tls = server.client.from(peer(3)).connect(server.addr()).await;
    let (mut reader, mut writer) = tokio::io::split(tls.unwrap());
    // Pipelined 404s, as long as the server reads them: until its own writes are blocked.
    let asks = b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n".repeat(256);
    let asking = tokio::spawn(async move { while writer.write_all(&asks).await.is_ok() {} });
    let started = Instant::now();
    while held(&server).await != WRITE_BUFFERS as u64 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the blocked connection is never charged"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let blocked = Instant::now();
    let review = serde_json::to_vec(&fixture(
        "admissionreview-v1-machineset-gcp-update.assembled.json",
    ))
    .unwrap();
    assert_eq!(server.post_review(&review).await.status, 200);
    // Given back once the write clock has run out.
    while held(&server).await != 0 {
        assert!(
            blocked.elapsed() < HEADER_TIMEOUT + Duration::from_secs(3),
            "still charged after {:?}",
            blocked.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let cut = blocked.elapsed();
    assert!(
        cut >= HEADER_TIMEOUT - Duration::from_secs(1),
        "cut after {cut:?}"
    );
    // What was sent before the cut, then the end.
    let mut buf = vec![0u8; 1 << 16];
    let drained = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match reader.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
    });
    assert!(drained.await.is_ok(), "the connection was closed");
    asking.abort();
    eprintln!("blocked after {:?}, cut {cut:?} later", blocked - started);
}
