//! Clients that keep sending real HTTPS reviews while something happens to the server (a
//! SIGTERM, a certificate rotation, a TLS profile change, slow clients, a soak), and the
//! count of what they saw.
//!
//! ```ignore
//! let stream = ReviewStream::new(client, addr, body).fresh(2).keep_alive(1).start();
//! // ... what happens ...
//! let tally = stream.stop().await;
//! assert_eq!(tally.failed, 0, "{:?}", tally.failures);
//! ```

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::client::conn::http1::SendRequest;
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_rustls::client::TlsStream;

use super::https::{Https, Reply, request, send_on};

/// How many failure messages a tally keeps (it counts them all).
const KEPT_FAILURES: usize = 20;

type OnConnect = Arc<dyn Fn(&TlsStream<TcpStream>) + Send + Sync>;

/// What the clients send, how many there are, and at what pace. `start` sets them going.
pub struct ReviewStream {
    https: Https,
    addr: SocketAddr,
    body: Vec<u8>,
    fresh: usize,
    keep_alive: usize,
    every: Duration,
    spread: Duration,
    on_connect: Option<OnConnect>,
}

impl ReviewStream {
    /// No clients yet: add them with `fresh` and `keep_alive`.
    pub fn new(https: Https, addr: SocketAddr, body: Vec<u8>) -> Self {
        ReviewStream {
            https,
            addr,
            body,
            fresh: 0,
            keep_alive: 0,
            every: Duration::ZERO,
            spread: Duration::ZERO,
            on_connect: None,
        }
    }

    /// Clients that open a new connection (a new handshake) for each review.
    pub fn fresh(mut self, n: usize) -> Self {
        self.fresh = n;
        self
    }

    /// Clients that keep one connection, and open another only when the server closes it
    /// (as the apiserver's pool does, `Connection: close` included).
    pub fn keep_alive(mut self, n: usize) -> Self {
        self.keep_alive = n;
        self
    }

    /// Each client starts a review at most once per `period` (back to back by default).
    pub fn every(mut self, period: Duration) -> Self {
        self.every = period;
        self
    }

    /// The clients start one after another over `spread`, not all at once.
    pub fn spread_starts_over(mut self, spread: Duration) -> Self {
        self.spread = spread;
        self
    }

    /// Called with each connection the clients open, after its handshake.
    pub fn on_connect(mut self, f: impl Fn(&TlsStream<TcpStream>) + Send + Sync + 'static) -> Self {
        self.on_connect = Some(Arc::new(f));
        self
    }

    pub fn start(self) -> Stream {
        let (stop, stopped) = watch::channel(false);
        let total = self.fresh + self.keep_alive;
        let fresh = self.fresh;
        let spread = self.spread;
        let counts = Arc::new(Counts::default());
        let client = Arc::new(Client {
            stream: self,
            counts: counts.clone(),
        });
        let tasks = (0..total)
            .map(|i| {
                let delay = spread * i as u32 / total as u32;
                let (client, stopped) = (client.clone(), stopped.clone());
                tokio::spawn(async move { client.run(i < fresh, delay, stopped).await })
            })
            .collect();
        Stream {
            stop,
            counts,
            tasks,
        }
    }
}

/// The clients, running.
pub struct Stream {
    stop: watch::Sender<bool>,
    counts: Arc<Counts>,
    tasks: Vec<JoinHandle<Vec<Duration>>>,
}

impl Stream {
    /// Reviews answered 200 so far.
    pub fn ok(&self) -> u64 {
        self.counts.ok.load(Ordering::Relaxed)
    }

    /// Reviews sent so far.
    pub fn sent(&self) -> u64 {
        self.counts.sent.load(Ordering::Relaxed)
    }

    /// Reviews failed so far.
    pub fn failed(&self) -> u64 {
        self.counts.failed.load(Ordering::Relaxed)
    }

    /// Stops the clients (each finishes the review it is in) and counts.
    pub async fn stop(self) -> Tally {
        self.stop.send_replace(true);
        let mut latencies = Vec::new();
        for task in self.tasks {
            latencies.extend(task.await.expect("a client of the stream panicked"));
        }
        latencies.sort_unstable();
        let c = &self.counts;
        Tally {
            sent: c.sent.load(Ordering::Relaxed),
            ok: c.ok.load(Ordering::Relaxed),
            failed: c.failed.load(Ordering::Relaxed),
            failures: c.failures.lock().unwrap().clone(),
            closes: c.closes.load(Ordering::Relaxed),
            opened: c.opened.load(Ordering::Relaxed),
            latencies,
        }
    }
}

/// What the clients saw.
#[derive(Debug)]
pub struct Tally {
    pub sent: u64,
    /// Answered 200.
    pub ok: u64,
    /// Anything else: another status, a refused connection, a broken one.
    pub failed: u64,
    /// The first failures, as text.
    pub failures: Vec<String>,
    /// Replies that asked the client to close the connection.
    pub closes: u64,
    /// Connections opened (tried), handshakes included.
    pub opened: u64,
    /// Of each review answered 200, connecting included; sorted.
    pub latencies: Vec<Duration>,
}

impl Tally {
    /// The latency at `p` (0 to 1) of the reviews answered 200; zero if none was.
    pub fn percentile(&self, p: f64) -> Duration {
        let last = self.latencies.len().saturating_sub(1);
        let at = ((self.latencies.len() as f64 * p) as usize).min(last);
        self.latencies.get(at).copied().unwrap_or_default()
    }
}

#[derive(Default)]
struct Counts {
    sent: AtomicU64,
    ok: AtomicU64,
    failed: AtomicU64,
    closes: AtomicU64,
    opened: AtomicU64,
    failures: std::sync::Mutex<Vec<String>>,
}

impl Counts {
    fn fail(&self, why: String) {
        self.failed.fetch_add(1, Ordering::Relaxed);
        let mut kept = self.failures.lock().unwrap();
        if kept.len() < KEPT_FAILURES {
            kept.push(why);
        }
    }
}

struct Client {
    stream: ReviewStream,
    counts: Arc<Counts>,
}

impl Client {
    /// One client: reviews until stopped, at its pace; the latencies of those answered 200.
    async fn run(
        &self,
        fresh: bool,
        delay: Duration,
        mut stopped: watch::Receiver<bool>,
    ) -> Vec<Duration> {
        let mut latencies = Vec::new();
        let mut conn = None;
        let mut next = Instant::now() + delay;
        while wait_until(&mut stopped, next).await {
            let started = Instant::now();
            next = started + self.stream.every;
            let result = self.review(&mut conn, fresh).await;
            self.counts.sent.fetch_add(1, Ordering::Relaxed);
            match result {
                Ok(r) if r.status == 200 => {
                    self.counts.ok.fetch_add(1, Ordering::Relaxed);
                    latencies.push(started.elapsed());
                    if r.headers.get("connection").is_some_and(|v| v == "close") {
                        self.counts.closes.fetch_add(1, Ordering::Relaxed);
                        conn = None;
                    }
                }
                Ok(r) => {
                    self.counts.fail(format!("status {}", r.status));
                    conn = None;
                }
                Err(e) => {
                    self.counts.fail(e.to_string());
                    conn = None;
                }
            }
        }
        latencies
    }

    async fn review(
        &self,
        conn: &mut Option<SendRequest<Full<Bytes>>>,
        fresh: bool,
    ) -> std::io::Result<Reply> {
        if fresh || conn.as_ref().is_none_or(|c| c.is_closed()) {
            *conn = Some(self.connect().await?);
        }
        let body = self.stream.body.clone();
        let req = request(
            "POST",
            "/mutate-machinesets",
            Some("application/json"),
            body,
        );
        send_on(conn.as_mut().expect("connected above"), req).await
    }

    async fn connect(&self) -> std::io::Result<SendRequest<Full<Bytes>>> {
        self.counts.opened.fetch_add(1, Ordering::Relaxed);
        let tls = self.stream.https.connect(self.stream.addr).await?;
        if let Some(f) = &self.stream.on_connect {
            f(&tls);
        }
        super::https::handshake(tls).await
    }
}

/// Waits until `at`; false if the stream is stopped first (or was already).
async fn wait_until(stopped: &mut watch::Receiver<bool>, at: Instant) -> bool {
    if *stopped.borrow() {
        return false;
    }
    tokio::select! {
        _ = tokio::time::sleep_until(at) => true,
        _ = stopped.wait_for(|s| *s) => false,
    }
}
