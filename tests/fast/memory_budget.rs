//! Hostile load cannot exhaust the pod: 300 clients send maximum-size (8 MiB) reviews back
//! to back, each on a connection of its own, from two addresses (each within the cap of
//! connections per address), to the real binary over real TLS, at the
//! shipped defaults (the body budget `--max-body-bytes-in-flight` included). The process's
//! peak RSS (`VmHWM` in /proc/<pid>/status) stays under the Deployment's 128 MiB memory
//! limit, the bodies over the budget (over each address's share: one maximum body) are
//! refused at once (503, `Retry-After`), those within it are answered, and an ordinary
//! review sent meanwhile from a third address is answered every time.

use crate::support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bootimage_webhook::serve::server::{MAX_BODY, MAX_CONNECTIONS_PER_PEER};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use serde_json::json;
use support::binary::proc_status;
use support::binary::{Served, serve_command};
use support::{Https, ReviewStream, fixture};

/// The Deployment's memory limit (manifests/base/deployment.yaml).
const MEMORY_LIMIT: u64 = 128 * 1024 * 1024;
const CLIENTS: usize = 300;
/// The clients' addresses, 127.0.0.2 on: each within the cap per address.
const PEERS: usize = 2;
const _: () = assert!(CLIENTS.div_ceil(PEERS) <= MAX_CONNECTIONS_PER_PEER);
const LOAD: Duration = Duration::from_secs(20);

/// An UPDATE review of a stale MachineSet, padded with a field no rule reads to exactly
/// the largest body the webhook takes.
fn maximum_review() -> Bytes {
    let mut review = fixture("admissionreview-v1-machineset-gcp-update.assembled.json");
    review["padding"] = json!("");
    let bare = serde_json::to_vec(&review).unwrap().len();
    review["padding"] = json!("x".repeat(MAX_BODY - bare));
    let body = serde_json::to_vec(&review).unwrap();
    assert_eq!(body.len(), MAX_BODY);
    Bytes::from(body)
}

/// The CPU time the process used, user and system (/proc/<pid>/stat, in clock ticks).
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after_name = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after_name.split(' ').collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    ticks as f64 / 100.0
}

#[derive(Default)]
struct Outcomes {
    answered: AtomicU64,
    refused: AtomicU64,
    /// The connection closed under the client while it was still sending: refused too,
    /// seen from a client that does not read before it has written.
    cut: AtomicU64,
    /// Admitted, but the body took longer than the body timeout to arrive (the machine's
    /// cores are shared with the flood): 408, as for any slow client.
    slow: AtomicU64,
    other: AtomicU64,
    /// The longest time to a refusal, in milliseconds.
    slowest_refusal_ms: AtomicU64,
}

impl Outcomes {
    fn describe(&self) -> String {
        let n = |v: &AtomicU64| v.load(Ordering::Relaxed);
        format!(
            "{} answered, {} refused with 503 (the slowest after {} ms), {} cut while sending, \
             {} too slow (408), {} other",
            n(&self.answered),
            n(&self.refused),
            n(&self.slowest_refusal_ms),
            n(&self.cut),
            n(&self.slow),
            n(&self.other),
        )
    }
}

/// One client: a maximum-size review on a new connection, again and again until `stop`.
async fn flood(
    https: Https,
    addr: std::net::SocketAddr,
    body: Bytes,
    stop: Arc<AtomicBool>,
    o: Arc<Outcomes>,
) {
    while !stop.load(Ordering::Relaxed) {
        let Ok(mut send) = https.conn(addr).await else {
            o.cut.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        };
        let started = Instant::now();
        let req = hyper::Request::post("/mutate-machinesets")
            .header("host", "localhost")
            .header("content-type", "application/json")
            .body(Full::new(body.clone()))
            .unwrap();
        let res = match send.send_request(req).await {
            Ok(res) => res,
            Err(_) => {
                // Refused, as a client that writes before it reads sees it: back in a second.
                o.cut.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let status = res.status().as_u16();
        let retry_after = res.headers().contains_key("retry-after");
        let _ = res.into_body().collect().await;
        match status {
            200 => o.answered.fetch_add(1, Ordering::Relaxed),
            503 if retry_after => {
                let ms = started.elapsed().as_millis() as u64;
                o.slowest_refusal_ms.fetch_max(ms, Ordering::Relaxed);
                // Back after the second it was told to wait.
                tokio::time::sleep(Duration::from_secs(1)).await;
                o.refused.fetch_add(1, Ordering::Relaxed)
            }
            408 => o.slow.fetch_add(1, Ordering::Relaxed),
            _ => o.other.fetch_add(1, Ordering::Relaxed),
        };
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_maximum_bodies_stay_under_the_memory_limit() {
    let _alone = support::alone();
    support::install_provider();
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = serve_command();
    cmd.arg("--dev").current_dir(dir.path());
    let served = Served::spawn(cmd);
    let pid = served.pid();
    let ca = std::fs::read_to_string(dir.path().join("certs/ca.crt")).unwrap();
    let https = Https::new(&ca);
    let idle = proc_status(pid, "VmRSS");

    let flood = Flood::start(&https, served.webhook);
    // Let the flood build up before the ordinary review comes.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let review = serde_json::to_vec(&fixture(
        "admissionreview-v1-machineset-gcp-update.assembled.json",
    ))
    .unwrap();
    let ordinary = ReviewStream::new(https.clone(), served.webhook, review)
        .fresh(1)
        .every(Duration::from_millis(200))
        .start();
    let rss_max = highest_rss_for(pid, LOAD).await;
    let tally = ordinary.stop().await;
    let peak = proc_status(pid, "VmHWM");
    let cpu = cpu_seconds(pid);
    let o = flood.stop();
    let metrics = support::admin_get(served.admin, "/metrics").await.1;

    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    eprintln!(
        "{CLIENTS} clients of {MAX_BODY}-byte reviews for {LOAD:?}: {}; RSS idle {:.1} MiB, \
         highest sampled {:.1} MiB, peak (VmHWM) {:.1} MiB of a {:.0} MiB limit; ordinary \
         reviews: {} answered, {} failed, p50 {:?}, max {:?}; the server used {cpu:.1} s of CPU",
        o.describe(),
        mib(idle),
        mib(rss_max),
        mib(peak),
        mib(MEMORY_LIMIT),
        tally.ok,
        tally.failed,
        tally.percentile(0.5),
        tally.percentile(1.0),
    );
    assert!(
        peak < MEMORY_LIMIT,
        "peak RSS {:.1} MiB is over the limit",
        mib(peak)
    );
    assert_eq!(
        tally.failed, 0,
        "ordinary reviews failed: {:?}",
        tally.failures
    );
    assert!(
        tally.ok >= 20,
        "only {} ordinary reviews answered",
        tally.ok
    );
    let count = |n: &AtomicU64| n.load(Ordering::Relaxed);
    assert!(
        count(&o.answered) > 0,
        "no maximum-size review was answered"
    );
    assert!(
        count(&o.refused) > 0,
        "nothing was refused: the flood never reached the budget"
    );
    assert_eq!(count(&o.other), 0, "{}", served.log_text());
    assert_refusals_are_counted(&metrics);
}

/// CLIENTS clients sending maximum-size reviews, on a runtime of their own so that their
/// encryption work does not hold up the ordinary client's tasks (the machine's cores are
/// shared all the same).
struct Flood {
    runtime: tokio::runtime::Runtime,
    stop: Arc<AtomicBool>,
    outcomes: Arc<Outcomes>,
}

impl Flood {
    fn start(https: &Https, addr: std::net::SocketAddr) -> Flood {
        let body = maximum_review();
        let stop = Arc::new(AtomicBool::new(false));
        let outcomes = Arc::new(Outcomes::default());
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        for i in 0..CLIENTS {
            let (stop, outcomes) = (stop.clone(), outcomes.clone());
            let https = https.from(support::peer(1 + (i % PEERS) as u8));
            runtime.spawn(flood(https, addr, body.clone(), stop, outcomes));
        }
        Flood {
            runtime,
            stop,
            outcomes,
        }
    }

    fn stop(self) -> Arc<Outcomes> {
        self.stop.store(true, Ordering::Relaxed);
        self.runtime.shutdown_background();
        self.outcomes
    }
}

/// The highest RSS of `pid` sampled over `load`.
async fn highest_rss_for(pid: u32, load: Duration) -> u64 {
    let mut rss_max = 0;
    let until = Instant::now() + load;
    while Instant::now() < until {
        rss_max = rss_max.max(proc_status(pid, "VmRSS"));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    rss_max
}

/// The refusals are counted in the requests metric, and the bytes in flight exported.
fn assert_refusals_are_counted(metrics: &str) {
    let overloaded = metrics
        .lines()
        .find_map(|l| {
            l.strip_prefix(r#"bootimage_webhook_requests_total{reason="Overloaded",code="503"} "#)
        })
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0);
    assert!(overloaded > 0, "no refusal counted:\n{metrics}");
    assert!(
        metrics.contains("bootimage_webhook_request_body_bytes_in_flight"),
        "{metrics}"
    );
}
