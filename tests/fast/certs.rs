//! Serving certificates: every key format the service-ca and cert-manager write, and
//! rotation the way the kubelet updates a Secret volume (the `..data` symlink swap) while
//! a client keeps sending.

use crate::support;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bootimage_webhook::serve::tls;
use support::{Https, ReviewStream, admin_get, fixture, start_server};

fn data(name: &str) -> Vec<u8> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data")
            .join(name),
    )
    .unwrap()
}

#[tokio::test]
async fn pkcs1_rsa_and_sec1_ec_keys_serve_full_chains() {
    let _parallel = support::parallel();
    for (crt, key) in [
        ("rsa-pkcs1.crt", "rsa-pkcs1.key"),
        ("ec-sec1.crt", "ec-sec1.key"),
    ] {
        let mut server = start_server().await;
        server.volume.update(&data(crt), &data(key));
        let ca = String::from_utf8(data("ca.crt")).unwrap();
        let client = Https::new(&ca);
        let deadline = Instant::now() + Duration::from_secs(3);
        loop {
            if let Ok(tls) = client.connect(server.addr()).await {
                assert_eq!(
                    tls.get_ref().1.peer_certificates().unwrap().len(),
                    2,
                    "{crt}: chain served"
                );
                break;
            }
            assert!(Instant::now() < deadline, "{crt} never served");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let pair = tls::certified_key(&data(crt), &data(key)).unwrap();
        assert_eq!(pair.cert.len(), 2);
    }
}

#[tokio::test]
async fn rotation_by_symlink_swap_while_a_client_keeps_sending() {
    let _parallel = support::parallel();
    let mut server = start_server().await;
    let old_leaf = support::leaf_der(&server.certs.chain_pem);
    let new = support::dev_certs();
    let new_leaf = support::leaf_der(&new.chain_pem);
    // During a CA rotation the caBundle carries both CAs. No session resumption: a resumed
    // session shows the certificate of the session it resumes, not the one served now.
    let mut config = support::client_config(
        &format!("{}{}", server.certs.ca_pem, new.ca_pem),
        &[&rustls::version::TLS13, &rustls::version::TLS12],
    );
    config.resumption = rustls::client::Resumption::disabled();
    let client = Https::with_config(config);
    let body = serde_json::to_vec(&fixture(
        "admissionreview-v1-machineset-gcp-update.assembled.json",
    ))
    .unwrap();

    // The leaf each new connection was shown, and when.
    let seen = Arc::new(Mutex::new(Vec::<(Instant, Vec<u8>)>::new()));
    let record = seen.clone();
    // Two clients with a new connection per request, one on a single keep-alive connection.
    let stream = ReviewStream::new(client, server.addr(), body)
        .fresh(2)
        .keep_alive(1)
        .on_connect(move |tls| {
            let leaf = support::peer_leaf(tls);
            record.lock().unwrap().push((Instant::now(), leaf));
        })
        .start();

    tokio::time::sleep(Duration::from_millis(500)).await;
    let volume = &mut server.volume;
    let swapped = Instant::now();
    volume.update(new.chain_pem.as_bytes(), new.key_pem.as_bytes());
    tokio::time::sleep(Duration::from_millis(1000)).await;

    // A bad pair (key of another certificate) and then junk: the last good pair stays.
    let stranger = support::dev_certs();
    volume.update(new.chain_pem.as_bytes(), stranger.key_pem.as_bytes());
    tokio::time::sleep(Duration::from_millis(700)).await;
    volume.update(b"not a certificate", b"not a key");
    tokio::time::sleep(Duration::from_millis(700)).await;
    let tally = stream.stop().await;

    assert_eq!(
        tally.failed, 0,
        "of {} requests: {:?}",
        tally.sent, tally.failures
    );
    assert!(tally.sent > 50, "the clients kept sending");
    let seen = std::mem::take(&mut *seen.lock().unwrap());
    assert_new_connections_moved_to_the_new_leaf(&seen, swapped, &old_leaf, &new_leaf);
    let (_, metrics) = admin_get(server.running.admin_addr, "/metrics").await;
    assert_one_reload_and_two_errors_counted(&metrics);
}

/// Connections opened after the swap see the new leaf within a poll interval (with slack
/// for a loaded machine); the old leaf was served before; no bad pair replaced the new one.
fn assert_new_connections_moved_to_the_new_leaf(
    seen: &[(Instant, Vec<u8>)],
    swapped: Instant,
    old_leaf: &[u8],
    new_leaf: &[u8],
) {
    let first_new = seen
        .iter()
        .find(|(_, leaf)| *leaf == new_leaf)
        .map(|(t, _)| t.duration_since(swapped))
        .expect("new connections see the new certificate");
    // One poll interval is 200ms here; allow scheduling slack on a loaded machine.
    assert!(
        first_new <= Duration::from_millis(200 + 300),
        "took {first_new:?}"
    );
    assert!(
        seen.iter().any(|(_, l)| *l == old_leaf),
        "the old one was served before"
    );
    let after = seen
        .iter()
        .filter(|(t, _)| t.duration_since(swapped) > Duration::from_millis(600));
    assert!(after.clone().count() > 0);
    assert!(
        after.into_iter().all(|(_, l)| *l == new_leaf),
        "bad pairs never replace the good one"
    );
}

/// The good pair is counted as one reload; each bad pair once, not once per poll.
fn assert_one_reload_and_two_errors_counted(metrics: &str) {
    assert!(
        metrics.contains("bootimage_webhook_certificate_reloads_total 1\n"),
        "{metrics}"
    );
    let errors: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("bootimage_webhook_certificate_reload_errors_total "))
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(
        errors, 2,
        "each bad pair is counted once, not once per poll"
    );
}
