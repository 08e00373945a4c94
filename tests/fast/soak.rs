//! The soak (not run by `cargo test`: `#[ignore]`; `scripts/soak` runs it with the release
//! build): the real binary, offline on the embedded ConfigMap, under a steady load of
//! reviews for minutes, its certificate rotated by the kubelet's `..data` symlink swap every
//! minute, while idle keep-alive connections are held open. It reports requests sent and
//! failed, the latency, the idle connections opened, and the server's RSS at the start and the end.
//!
//! Knobs (environment): SOAK_SECONDS (600), SOAK_RPS (1000), SOAK_IDLE (1000 idle
//! connections), SOAK_ROTATE_SECONDS (60).

use crate::support;

use std::time::{Duration, Instant};

use bootimage_webhook::serve::server::{MAX_CONNECTIONS, MAX_CONNECTIONS_PER_PEER};
use bootimage_webhook::serve::tls::DevCerts;
use support::binary::{Served, raise_open_files, serve_command};
use support::stream::Stream;
use support::{Https, ReviewStream, SecretVolume, fixture};

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

/// Keep-alive connections carrying the load, and workers that open a new connection per
/// request (a handshake under each rotation).
const KEEP_ALIVE: usize = 16;
const FRESH: usize = 4;

#[tokio::test(flavor = "multi_thread")]
#[ignore = "a 10-minute soak: scripts/soak"]
async fn soak() {
    let _alone = support::alone();
    let seconds = knob("SOAK_SECONDS", 600);
    let rps = knob("SOAK_RPS", 1000);
    let idle = knob("SOAK_IDLE", 1000) as usize;
    let rotate = Duration::from_secs(knob("SOAK_ROTATE_SECONDS", 60));
    assert!(
        idle + KEEP_ALIVE + FRESH <= MAX_CONNECTIONS,
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

    raise_open_files(8192);
    let served = serve_from(&volume);
    let addr = served.webhook;
    let pid = served.pid();

    let body = serde_json::to_vec(&fixture(
        "admissionreview-v1-machineset-gcp-update.assembled.json",
    ))
    .unwrap();
    let idle_streams = idle_connections(&client, addr, &body, idle, seconds);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss_start = rss_kb(pid);

    let workers = KEEP_ALIVE + FRESH;
    let period = Duration::from_secs_f64(workers as f64 / rps as f64);
    let load = ReviewStream::new(client, addr, body)
        .keep_alive(KEEP_ALIVE)
        .fresh(FRESH)
        .every(period)
        .start();

    let start = Instant::now();
    let rotated = rotate_while_loaded(seconds, rotate, &certs, &mut volume, &load, pid).await;
    let tally = load.stop().await;
    let elapsed = start.elapsed();
    let rss_end = rss_kb(pid);

    let (mut idle_opened, mut idle_failed) = (0, 0);
    for stream in idle_streams {
        let idle_tally = stream.stop().await;
        idle_opened += idle_tally.opened;
        idle_failed += idle_tally.failed;
    }
    let reloads = reloads_logged(&served, rotated).await;

    let (sent, failed) = (tally.sent, tally.failed);
    eprintln!(
        "soak: {sent} reviews in {:.0} s ({:.0}/s), {failed} failed; latency p50 {} µs, p99 {} µs, \
         max {} µs; {rotated} rotations, {reloads} reloads logged; {idle} idle \
         connections held ({idle_opened} opened in all, {idle_failed} of their reviews failed); server RSS {rss_start} kB after warm-up, {rss_end} kB at the end",
        elapsed.as_secs_f64(),
        sent as f64 / elapsed.as_secs_f64(),
        tally.percentile(0.5).as_micros(),
        tally.percentile(0.99).as_micros(),
        tally.percentile(1.0).as_micros(),
    );
    assert_eq!(failed, 0, "failures: {:?}", tally.failures);
    assert_eq!(idle_failed, 0, "reviews on the idle connections failed");
    assert_eq!(reloads, rotated, "every rotation loaded");
}

/// The idle connections, as the apiserver's pool keeps them: a review when opened, then
/// one a minute (below the server's 120 s idle timeout), idle in between. Each is opened
/// again if the server closes it, and every open is counted: held throughout, that is
/// `idle` opens in all. From addresses of their own, at most the cap per address from each,
/// as the load comes from 127.0.0.1.
fn idle_connections(
    client: &Https,
    addr: std::net::SocketAddr,
    body: &[u8],
    idle: usize,
    seconds: u64,
) -> Vec<Stream> {
    let spread = Duration::from_secs(60).min(Duration::from_secs(seconds) / 4);
    (0..idle)
        .step_by(MAX_CONNECTIONS_PER_PEER)
        .enumerate()
        .map(|(i, first)| {
            let n = (idle - first).min(MAX_CONNECTIONS_PER_PEER);
            ReviewStream::new(client.from(support::peer(1 + i as u8)), addr, body.to_vec())
                .keep_alive(n)
                .every(Duration::from_secs(60))
                .spread_starts_over(spread)
                .start()
        })
        .collect()
}

/// The binary, offline on the fixture ConfigMap, serving the certificate of `volume`.
fn serve_from(volume: &SecretVolume) -> Served {
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
    Served::spawn(cmd)
}

/// For `seconds`, swaps the next of `certs` into `volume` every `rotate` and reports the
/// load each minute; returns how many rotations it made.
async fn rotate_while_loaded(
    seconds: u64,
    rotate: Duration,
    certs: &[DevCerts],
    volume: &mut SecretVolume,
    load: &Stream,
    pid: u32,
) -> usize {
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
                load.sent(),
                load.failed(),
                rss_kb(pid)
            );
        }
    }
    rotated
}

/// The certificate reloads the server logged, once `rotated` are or a reload interval
/// has passed after the last rotation.
async fn reloads_logged(served: &Served, rotated: usize) -> usize {
    let count = || {
        served
            .log()
            .iter()
            .filter(|l| l.contains("loaded the new serving certificate"))
            .count()
    };
    let deadline = Instant::now() + Duration::from_secs(15);
    while Instant::now() < deadline && count() < rotated {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    count()
}
