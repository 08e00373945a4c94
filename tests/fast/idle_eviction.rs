//! When every slot is taken, the connection that has waited longest for a request gives
//! way to a new one, and a connection with a request in flight never does, however long
//! it has been open. In process, over real TLS: one connection sends a review and then half
//! of a second one (the oldest connection, its request in flight), one sends a request and
//! sits idle (the oldest idle one), and [`MAX_CONNECTIONS`] less two more do the same from
//! other addresses (each within the cap per address), so that every slot is taken. A review
//! from yet another address is then answered: the oldest idle connection was closed for
//! it, the one in flight finishes its review, and the other idle ones are still open.

use crate::support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bootimage_webhook::serve::server::{MAX_CONNECTIONS, MAX_CONNECTIONS_PER_PEER};
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::client::conn::http1::SendRequest;
use support::{Https, TestServer, fixture, peer, request, send_on};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

/// A keep-alive connection from `client`, answered 404 once and idle since.
async fn idle_connection(client: Https, addr: SocketAddr) -> SendRequest<Full<Bytes>> {
    let mut send = client.conn(addr).await.unwrap();
    let reply = send_on(&mut send, request("GET", "/", None, Vec::new()))
        .await
        .unwrap();
    assert_eq!(reply.status, 404);
    send
}

/// `n` idle connections, from addresses `peer(first)` on, at most the cap from each.
async fn idle_connections(
    server: &TestServer,
    first: u8,
    n: usize,
) -> Vec<SendRequest<Full<Bytes>>> {
    let mut all = Vec::with_capacity(n);
    // In batches, so that each is opened (and goes idle) before the next batch.
    for batch in (0..n).collect::<Vec<_>>().chunks(64) {
        let opened = batch.iter().map(|i| {
            let from = peer(first + (i / MAX_CONNECTIONS_PER_PEER) as u8);
            tokio::spawn(idle_connection(server.client.from(from), server.addr()))
        });
        for conn in futures::future::join_all(opened).await {
            all.push(conn.unwrap());
        }
    }
    all
}

/// One response read by hand: its head and body as text.
async fn response(tls: &mut TlsStream<TcpStream>) -> String {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&got);
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length: "))
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(0);
            if body.len() >= length {
                return text.into_owned();
            }
        }
        let n = tokio::time::timeout(Duration::from_secs(10), tls.read(&mut buf))
            .await
            .expect("a response within 10 s")
            .unwrap();
        assert!(n > 0, "closed: {}", String::from_utf8_lossy(&got));
        got.extend(&buf[..n]);
    }
}

fn post_head(body_len: usize) -> String {
    format!(
        "POST /mutate-machinesets HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {body_len}\r\n\r\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_longest_idle_connection_gives_way_and_one_in_flight_stays() {
    let _alone = support::alone();
    support::binary::raise_open_files(8192);
    let server = support::start_server_with(|s| {
        // Nothing times out on its own while the slots fill up: only giving way closes.
        s.limits.handshake_timeout = Duration::from_secs(60);
        s.limits.header_read_timeout = Duration::from_secs(60);
        s.limits.idle_timeout = Duration::from_secs(120);
        s.body_timeout = Duration::from_secs(120);
        s.min_body_rate = 1;
    })
    .await;
    let addr = server.addr();
    let review = serde_json::to_vec(&fixture(
        "admissionreview-v1-machineset-gcp-update.assembled.json",
    ))
    .unwrap();

    // The oldest: a review answered, then the head and half the body of the next.
    let mut in_flight = server.client.from(peer(1)).connect(addr).await.unwrap();
    in_flight
        .write_all(&[post_head(review.len()).as_bytes(), &review].concat())
        .await
        .unwrap();
    assert!(response(&mut in_flight).await.starts_with("HTTP/1.1 200"));
    let (first_half, second_half) = review.split_at(review.len() / 2);
    in_flight
        .write_all(&[post_head(review.len()).as_bytes(), first_half].concat())
        .await
        .unwrap();
    // Then the oldest idle one, and every other slot idle too.
    let mut oldest_idle = idle_connection(server.client.from(peer(2)), addr).await;
    let others = idle_connections(&server, 3, MAX_CONNECTIONS - 2).await;

    // A review from another address: a slot is made for it.
    let started = Instant::now();
    let reply = server.post_review(&review).await;
    assert_eq!(
        reply.status,
        200,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    eprintln!(
        "a review with every slot taken answered in {:?}",
        started.elapsed()
    );
    let closed = tokio::time::timeout(Duration::from_secs(5), oldest_idle.ready()).await;
    assert!(
        matches!(closed, Ok(Err(_))),
        "the oldest idle connection was closed for it"
    );
    // The request in flight goes on, and is answered.
    in_flight.write_all(second_half).await.unwrap();
    let answer = response(&mut in_flight).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    // The other idle connections are open, and serve.
    let open = others.iter().filter(|c| !c.is_closed()).count();
    assert_eq!(
        open,
        MAX_CONNECTIONS - 2,
        "only the oldest idle one gave way"
    );
    let mut next_oldest = others.into_iter().next().unwrap();
    let again = send_on(&mut next_oldest, request("GET", "/", None, Vec::new())).await;
    assert_eq!(again.unwrap().status, 404);
}

/// An address at its cap is not locked out while one of its own connections is idle: a
/// new connection from it (a probe, an apiserver behind the same address as a hog) takes
/// the place of its connection idle the longest; the others, and other addresses', stay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_address_at_its_cap_gets_in_in_place_of_its_own_idle_connection() {
    let _alone = support::alone();
    support::binary::raise_open_files(8192);
    let server = support::start_server_with(|s| {
        s.limits.handshake_timeout = Duration::from_secs(10);
        s.limits.header_read_timeout = Duration::from_secs(5);
        s.limits.idle_timeout = Duration::from_secs(120);
        s.body_timeout = Duration::from_secs(10);
    })
    .await;
    let review = serde_json::to_vec(&fixture(
        "admissionreview-v1-machineset-gcp-update.assembled.json",
    ))
    .unwrap();
    let own = idle_connections(&server, 5, MAX_CONNECTIONS_PER_PEER).await;
    let other = idle_connection(server.client.from(peer(4)), server.addr()).await;
    let reply = server
        .client
        .from(peer(5))
        .post(
            server.addr(),
            "/mutate-machinesets",
            Some("application/json"),
            review,
        )
        .await
        .expect("not refused at the cap");
    assert_eq!(reply.status, 200);
    // One of its own (the first of the first batch to go idle) gave way, and only one.
    let started = Instant::now();
    let closed = || own.iter().filter(|c| c.is_closed()).count();
    while closed() == 0 && started.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(closed(), 1, "its idle one gave way, and only that one");
    assert!(!other.is_closed());
}
