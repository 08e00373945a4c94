//! The soak (not run by `cargo test`: `#[ignore]`; `scripts/soak` runs it with the release
//! build): the real binary, offline on the embedded ConfigMap, under a steady load of
//! reviews for minutes, its certificate rotated by the kubelet's `..data` symlink swap every
//! minute, while idle keep-alive connections are held open. It reports requests sent and
//! failed, the latency, the idle connections opened, and the server's RSS at the start and the end.
//!
//! Knobs (environment): SOAK_SECONDS (600), SOAK_RPS (1000), SOAK_IDLE (1000 idle
//! connections), SOAK_ROTATE_SECONDS (60).

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::client::conn::http1::SendRequest;
use support::binary::{Served, serve_command};
use support::{Https, SecretVolume, fixture, request, send_on};

fn knob(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn rss_kb(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap_or(0)
}

/// POST the review on a connection, if there is one.
async fn review_on(
    conn: Option<&mut SendRequest<Full<Bytes>>>,
    body: &[u8],
) -> std::io::Result<support::Reply> {
    let Some(conn) = conn else {
        return Err(std::io::Error::other("could not connect"));
    };
    let req = request(
        "POST",
        "/mutate-machinesets",
        Some("application/json"),
        body.to_vec(),
    );
    send_on(conn, req).await
}

/// Keep-alive connections carrying the load, and workers that open a new connection per
/// request (a handshake under each rotation).
const KEEP_ALIVE: usize = 16;
const FRESH: usize = 4;

#[tokio::test(flavor = "multi_thread")]
#[ignore = "a 10-minute soak: scripts/soak"]
async fn soak() {
    let seconds = knob("SOAK_SECONDS", 600);
    let rps = knob("SOAK_RPS", 1000);
    let idle = knob("SOAK_IDLE", 1000) as usize;
    let rotate = Duration::from_secs(knob("SOAK_ROTATE_SECONDS", 60));
    assert!(
        idle + KEEP_ALIVE + FRESH <= bootimage_webhook::serve::server::MAX_CONNECTIONS,
        "SOAK_IDLE is above the connection cap"
    );

    support::install_provider();
    let dir = tempfile::tempdir().unwrap();
    // Every certificate of the run up front, so that the client trusts each CA (a rotation
    // here is a new CA too, the harder case).
    let rotations = (seconds / rotate.as_secs().max(1)) as usize + 1;
    let certs: Vec<_> = (0..=rotations).map(|_| support::dev_certs()).collect();
    let mut volume = SecretVolume::new(dir.path(), &certs[0]);
    let all_cas: String = certs.iter().map(|c| c.ca_pem.as_str()).collect();
    let mut config = support::client_config(
        &all_cas,
        &[&rustls::version::TLS13, &rustls::version::TLS12],
    );
    config.resumption = rustls::client::Resumption::disabled();
    let client = Https::with_config(config);

    let mut cmd = serve_command();
    cmd.arg("--tls-cert-file")
        .arg(volume.cert())
        .arg("--tls-private-key-file")
        .arg(volume.key())
        .args(["--assume-masters-updated", "--control-plane-arch", "amd64"])
        .args(["--configmap-file"])
        .arg(support::fixture_path(
            "configmap-coreos-bootimages.assembled.yaml",
        ))
        .env(
            "RUST_LOG",
            "warn,bootimage_webhook::app=info,bootimage_webhook::serve::tls=info",
        );
    let served = Served::spawn(cmd);
    let addr = served.webhook;
    let pid = served.pid();

    let body = serde_json::to_vec(&fixture(
        "admissionreview-v1-machineset-gcp-update.assembled.json",
    ))
    .unwrap();
    // The idle connections, as the apiserver's pool keeps them: a review when opened, then
    // one a minute (below the server's 120 s idle timeout), idle in between. Each is opened
    // again if the server closes it, and every open is counted: held throughout, that is
    // SOAK_IDLE opens in all.
    let stop = Arc::new(AtomicBool::new(false));
    let idle_opened = Arc::new(AtomicU64::new(0));
    let idle_failed = Arc::new(AtomicU64::new(0));
    let mut idle_tasks = Vec::with_capacity(idle);
    let spread = Duration::from_secs(60).min(Duration::from_secs(seconds) / 4);
    for i in 0..idle {
        let (client, stop, opened, failed, body) = (
            client.clone(),
            stop.clone(),
            idle_opened.clone(),
            idle_failed.clone(),
            body.clone(),
        );
        idle_tasks.push(tokio::spawn(async move {
            // Opened over the first minute (a quarter of a shorter run), not all at once.
            tokio::time::sleep(spread * i as u32 / idle as u32).await;
            let mut conn = None;
            while !stop.load(Ordering::Relaxed) {
                if conn.as_ref().is_none_or(|c: &SendRequest<_>| c.is_closed()) {
                    conn = client.conn(addr).await.ok();
                    opened.fetch_add(1, Ordering::Relaxed);
                }
                if !review_on(conn.as_mut(), &body)
                    .await
                    .is_ok_and(|r| r.status == 200)
                {
                    failed.fetch_add(1, Ordering::Relaxed);
                    conn = None;
                }
                let minute = Instant::now() + Duration::from_secs(60);
                while !stop.load(Ordering::Relaxed) && Instant::now() < minute {
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss_start = rss_kb(pid);

    let sent = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let latencies = Arc::new(std::sync::Mutex::new(Vec::<u32>::new()));
    let errors = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let workers = KEEP_ALIVE + FRESH;
    let period = Duration::from_secs_f64(workers as f64 / rps as f64);
    let mut tasks = Vec::new();
    for w in 0..workers {
        let (client, stop, sent, failed, latencies, errors, body) = (
            client.clone(),
            stop.clone(),
            sent.clone(),
            failed.clone(),
            latencies.clone(),
            errors.clone(),
            body.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let fresh = w >= KEEP_ALIVE;
            let mut conn = None;
            let mut tick = tokio::time::interval(period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut mine = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                tick.tick().await;
                let t = Instant::now();
                if fresh || conn.is_none() {
                    conn = client.conn(addr).await.ok();
                }
                let result = review_on(conn.as_mut(), &body).await;
                sent.fetch_add(1, Ordering::Relaxed);
                match result {
                    Ok(r) if r.status == 200 => mine.push(t.elapsed().as_micros() as u32),
                    other => {
                        failed.fetch_add(1, Ordering::Relaxed);
                        conn = None;
                        let mut e = errors.lock().unwrap();
                        if e.len() < 20 {
                            e.push(format!("{:?}", other.map(|r| r.status)));
                        }
                    }
                }
            }
            latencies.lock().unwrap().extend(mine);
        }));
    }

    let start = Instant::now();
    let mut next_rotation = start + rotate;
    let mut rotated = 0;
    let mut last_report = start;
    while start.elapsed() < Duration::from_secs(seconds) {
        tokio::time::sleep(Duration::from_millis(500)).await;
        if Instant::now() >= next_rotation && rotated + 1 < certs.len() {
            rotated += 1;
            let c = &certs[rotated];
            volume.update(c.chain_pem.as_bytes(), c.key_pem.as_bytes());
            next_rotation += rotate;
        }
        if last_report.elapsed() >= Duration::from_secs(60) {
            last_report = Instant::now();
            eprintln!(
                "soak: {:>4} s, {} sent, {} failed, server RSS {} kB",
                start.elapsed().as_secs(),
                sent.load(Ordering::Relaxed),
                failed.load(Ordering::Relaxed),
                rss_kb(pid)
            );
        }
    }
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.unwrap();
    }
    let elapsed = start.elapsed();
    let rss_end = rss_kb(pid);

    for t in idle_tasks {
        t.await.unwrap();
    }
    let idle_opened = idle_opened.load(Ordering::Relaxed);
    let idle_failed = idle_failed.load(Ordering::Relaxed);
    // The last rotation may still be within one reload interval (10 s).
    let deadline = Instant::now() + Duration::from_secs(15);
    while Instant::now() < deadline
        && served
            .log()
            .iter()
            .filter(|l| l.contains("loaded the new serving certificate"))
            .count()
            < rotated
    {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let reloads = served
        .log()
        .iter()
        .filter(|l| l.contains("loaded the new serving certificate"))
        .count();

    let mut l = latencies.lock().unwrap().clone();
    l.sort_unstable();
    let pct = |p: f64| {
        l.get(((l.len() as f64 * p) as usize).min(l.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0)
    };
    let sent = sent.load(Ordering::Relaxed);
    let failed = failed.load(Ordering::Relaxed);
    eprintln!(
        "soak: {sent} reviews in {:.0} s ({:.0}/s), {failed} failed; latency p50 {} µs, p99 {} µs, \
         max {} µs; {rotated} rotations, {reloads} reloads logged; {idle} idle \
         connections held ({idle_opened} opened in all, {idle_failed} of their reviews failed); server RSS {rss_start} kB after warm-up, {rss_end} kB at the end",
        elapsed.as_secs_f64(),
        sent as f64 / elapsed.as_secs_f64(),
        pct(0.5),
        pct(0.99),
        l.last().copied().unwrap_or(0),
    );
    assert_eq!(failed, 0, "failures: {:?}", errors.lock().unwrap());
    assert_eq!(idle_failed, 0, "reviews on the idle connections failed");
    assert_eq!(reloads, rotated, "every rotation loaded");
}
