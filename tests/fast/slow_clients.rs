//! Slow clients beyond the connection cap must not keep a well-behaved client out:
//! 2,000 connections (the cap is 1,024) that send one byte a second — 1,500 still in the
//! TLS handshake, 500 sending their request head — reconnecting a second after they are
//! closed, from [`PEERS`] addresses (each within the cap per address, so that together
//! they take every slot), while one client sends reviews from another, each on a new
//! connection, as the apiserver does after a connection drops. The design
//! (`serve::slots`): when every slot is taken, the connection that has waited longest for
//! a request gives way; the handshake and head timeouts bound the rest. The server runs
//! with the default timeouts (10 s handshake, 5 s head).

use crate::support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bootimage_webhook::serve::server::{ConnLimits, MAX_CONNECTIONS, MAX_CONNECTIONS_PER_PEER};
use support::{Https, ReviewStream, Tally, TestServer, fixture, peer, tcp_from};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const PRE_TLS: usize = 1500;
const IN_HEAD: usize = 500;
/// The attackers' addresses, 127.0.0.2 on.
const PEERS: usize = 8;
const _: () = assert!((PRE_TLS + IN_HEAD).div_ceil(PEERS) <= MAX_CONNECTIONS_PER_PEER);

/// Sends `bytes` one a second on connections made by `connect`, reconnecting when closed.
async fn drip<S, F, Fut>(
    connect: F,
    bytes: &'static [u8],
    stop: Arc<AtomicBool>,
    opened: Arc<AtomicUsize>,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = std::io::Result<S>>,
{
    while !stop.load(Ordering::Relaxed) {
        let Ok(mut s) = connect().await else {
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        };
        opened.fetch_add(1, Ordering::Relaxed);
        let mut buf = [0u8; 64];
        for b in bytes.iter().cycle() {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            if s.write_all(&[*b]).await.is_err() {
                break;
            }
            // A second, unless the server closes the connection first.
            let read = tokio::time::timeout(Duration::from_secs(1), s.read(&mut buf)).await;
            if let Ok(Ok(0) | Err(_)) = read {
                break;
            }
        }
        // Closed: back a second later (one action a second, as before).
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_beyond_the_cap_do_not_keep_a_good_client_out() {
    let _alone = support::alone();
    support::binary::raise_open_files(8192);
    let server = start_server_with_the_default_timeouts().await;
    let attackers = Attackers::start(&server);
    // Let them fill every slot.
    attackers.wait_until_all_connected().await;
    tokio::time::sleep(Duration::from_secs(2)).await;

    // The well-behaved client: a new connection per review, for 15 s (past both timeouts).
    let tally = a_good_client_for(&server, Duration::from_secs(15)).await;
    let reconnects = attackers.stop();

    eprintln!(
        "good client: {} served, {} failed; latency p50 {:?}, p99 {:?}, max {:?}; {} slow connections \
         (cap {MAX_CONNECTIONS}), {reconnects} reconnects after being closed",
        tally.ok,
        tally.failed,
        tally.percentile(0.5),
        tally.percentile(0.99),
        tally.percentile(1.0),
        PRE_TLS + IN_HEAD,
    );
    assert_eq!(tally.failed, 0, "{:?}", tally.failures);
    assert!(tally.ok >= 50, "only {} served", tally.ok);
    // Debug build, attackers and server in one process on a shared machine: a loose bound.
    let p99 = tally.percentile(0.99);
    assert!(p99 < Duration::from_secs(3), "p99 {p99:?}");
}

/// The server with its default timeouts spelled out, so that what this test proves does
/// not change quietly with the defaults.
async fn start_server_with_the_default_timeouts() -> TestServer {
    support::start_server_with(|s| {
        s.limits = ConnLimits {
            handshake_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(120),
        };
        s.body_timeout = Duration::from_secs(10);
    })
    .await
}

/// The slow clients: [`PRE_TLS`] dripping a ClientHello, [`IN_HEAD`] dripping a request
/// head over TLS, each reconnecting when closed.
struct Attackers {
    stop: Arc<AtomicBool>,
    /// Connections opened, reconnections included.
    opened: Arc<AtomicUsize>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Attackers {
    fn start(server: &TestServer) -> Attackers {
        let addr = server.addr();
        let stop = Arc::new(AtomicBool::new(false));
        let opened = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::new();
        // A ClientHello that never ends: the record header, then a byte a second.
        static HELLO: &[u8] = &[
            0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03,
        ];
        static HEAD: &[u8] = b"POST /mutate-machinesets HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n";
        let from = |i: usize| peer(1 + (i % PEERS) as u8);
        for i in 0..PRE_TLS {
            let (stop, opened, ip) = (stop.clone(), opened.clone(), from(i));
            tasks.push(tokio::spawn(drip(
                move || tcp_from(Some(ip), addr),
                HELLO,
                stop,
                opened,
            )));
        }
        for i in 0..IN_HEAD {
            let (stop, opened) = (stop.clone(), opened.clone());
            let client = server.client.from(from(PRE_TLS + i));
            tasks.push(tokio::spawn(drip(
                move || {
                    let client = client.clone();
                    async move { client.connect(addr).await }
                },
                HEAD,
                stop,
                opened,
            )));
        }
        Attackers {
            stop,
            opened,
            tasks,
        }
    }

    /// Every attacker has connected once, within 30 s.
    async fn wait_until_all_connected(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.opened.load(Ordering::Relaxed) < PRE_TLS + IN_HEAD {
            assert!(
                Instant::now() < deadline,
                "only {} attackers connected",
                self.opened.load(Ordering::Relaxed)
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Stop them all; how many times they came back after being closed.
    fn stop(self) -> usize {
        self.stop.store(true, Ordering::Relaxed);
        let reconnects = self.opened.load(Ordering::Relaxed) - PRE_TLS - IN_HEAD;
        for a in self.tasks {
            a.abort();
        }
        reconnects
    }
}

/// A client that sends the GCP update review every 20 ms, each on a new connection, for
/// `how_long`.
async fn a_good_client_for(server: &TestServer, how_long: Duration) -> Tally {
    let good = Https::new(&server.certs.ca_pem);
    let body = serde_json::to_vec(&fixture(
        "admissionreview-v1-machineset-gcp-update.assembled.json",
    ))
    .unwrap();
    let stream = ReviewStream::new(good, server.addr(), body)
        .fresh(1)
        .every(Duration::from_millis(20))
        .start();
    tokio::time::sleep(how_long).await;
    stream.stop().await
}
