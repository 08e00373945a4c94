//! The cluster's TLS security profile, served: each profile's versions and suites seen by
//! real TLS clients, a profile change while clients keep sending, and a Custom profile that
//! leaves nothing to serve (the last good configuration stays). The profile comes in
//! through `Running::tls`, as `cluster::tls_profile` feeds it from the APIServer object
//! (that path, against a real apiserver, is in `tests/e2e/real_apiserver_admission.rs`).

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use bootimage_webhook::cluster::tls_profile;
use bootimage_webhook::serve::profile::{Profile, ProfileError};
use bootimage_webhook::serve::tls::{ApplyError, MinVersion};
use rustls::crypto::ring::cipher_suite as cs;
use rustls::{CipherSuite, ProtocolVersion, SupportedCipherSuite};
use serde_json::json;
use support::{Https, ReviewStream, TestServer, fixture, start_server};

fn only12(server: &TestServer) -> Https {
    Https::with_config(support::client_config(
        &server.certs.ca_pem,
        &[&rustls::version::TLS12],
    ))
}

fn only13(server: &TestServer) -> Https {
    Https::with_config(support::client_config(
        &server.certs.ca_pem,
        &[&rustls::version::TLS13],
    ))
}

/// A TLS 1.2 client offering these suites only.
fn tls12_with(server: &TestServer, suites: &[SupportedCipherSuite]) -> Https {
    support::install_provider();
    let provider = rustls::crypto::CryptoProvider {
        cipher_suites: suites.to_vec(),
        ..rustls::crypto::ring::default_provider()
    };
    let mut roots = rustls::RootCertStore::empty();
    use rustls::pki_types::pem::PemObject;
    for c in rustls::pki_types::CertificateDer::pem_slice_iter(server.certs.ca_pem.as_bytes()) {
        roots.add(c.unwrap()).unwrap();
    }
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(&[&rustls::version::TLS12])
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Https::with_config(config)
}

fn custom(ciphers: &[&str], min: &str) -> Profile {
    Profile::from_apiserver(&json!({"spec": {"tlsSecurityProfile": {
        "type": "Custom", "custom": {"ciphers": ciphers, "minTLSVersion": min}}}}))
    .unwrap()
}

async fn served(client: &Https, server: &TestServer) -> (ProtocolVersion, CipherSuite) {
    let tls = client
        .connect(server.addr())
        .await
        .expect("handshake refused");
    let conn = tls.get_ref().1;
    (
        conn.protocol_version().unwrap(),
        conn.negotiated_cipher_suite().unwrap().suite(),
    )
}

async fn a_review_is_answered(client: &Https, server: &TestServer) {
    let review = fixture("admissionreview-v1-machineset-gcp-update.assembled.json");
    let body = serde_json::to_vec(&review).unwrap();
    let reply = client
        .post(
            server.addr(),
            "/mutate-machinesets",
            Some("application/json"),
            body,
        )
        .await
        .unwrap();
    assert_eq!(reply.status, 200);
    assert!(reply.patch().is_some());
}

#[tokio::test]
async fn intermediate_serves_a_tls12_client() {
    let _parallel = support::parallel();
    let server = start_server().await;
    // The default, and the profile read from an APIServer without one.
    tls_profile::apply(&server.running.tls, Some(&json!({"spec": {}})));
    assert_eq!(server.running.tls.policy().source, "Intermediate");
    let (v, _) = served(&only12(&server), &server).await;
    assert_eq!(v, ProtocolVersion::TLSv1_2);
    a_review_is_answered(&only12(&server), &server).await;
    let (v, _) = served(&server.client, &server).await;
    assert_eq!(v, ProtocolVersion::TLSv1_3);
}

#[tokio::test]
async fn modern_refuses_tls12() {
    let _parallel = support::parallel();
    let server = start_server().await;
    tls_profile::apply(
        &server.running.tls,
        Some(&json!({"spec": {"tlsSecurityProfile": {"type": "Modern", "modern": {}}}})),
    );
    let policy = server.running.tls.policy();
    assert_eq!(
        (policy.source.as_str(), policy.min),
        ("Modern", MinVersion::Tls13)
    );
    let err = only12(&server).connect(server.addr()).await.unwrap_err();
    assert!(err.to_string().contains("ProtocolVersion"), "{err}");
    let (v, _) = served(&only13(&server), &server).await;
    assert_eq!(v, ProtocolVersion::TLSv1_3);
    a_review_is_answered(&only13(&server), &server).await;
}

#[tokio::test]
async fn old_is_served_from_tls12_with_what_rustls_has() {
    let _parallel = support::parallel();
    let server = start_server().await;
    tls_profile::apply(
        &server.running.tls,
        Some(&json!({"spec": {"tlsSecurityProfile": {"type": "Old", "old": {}}}})),
    );
    let policy = server.running.tls.policy();
    assert_eq!(policy.raised_from.as_deref(), Some("VersionTLS10"));
    assert!(policy.dropped_ciphers.contains(&"DES-CBC3-SHA".to_owned()));
    let (v, _) = served(&only12(&server), &server).await;
    assert_eq!(v, ProtocolVersion::TLSv1_2);
}

#[tokio::test]
async fn custom_serves_only_its_tls12_suites() {
    let _parallel = support::parallel();
    let server = start_server().await;
    // The dev certificate is ECDSA: ECDHE-ECDSA suites are the ones it can serve.
    tls_profile::apply(
        &server.running.tls,
        Some(
            &json!({"spec": {"tlsSecurityProfile": {"type": "Custom", "custom": {
            "ciphers": ["ECDHE-ECDSA-CHACHA20-POLY1305", "AES128-SHA", "NOT-A-SUITE"],
            "minTLSVersion": "VersionTLS12"}}}}),
        ),
    );
    let policy = server.running.tls.policy();
    assert_eq!(policy.dropped_ciphers, ["AES128-SHA", "NOT-A-SUITE"]);
    let chacha = tls12_with(
        &server,
        &[cs::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256],
    );
    assert_eq!(
        served(&chacha, &server).await,
        (
            ProtocolVersion::TLSv1_2,
            CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256
        )
    );
    let aes = tls12_with(&server, &[cs::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256]);
    assert!(
        aes.connect(server.addr()).await.is_err(),
        "a suite the Custom list leaves out is refused"
    );
    // TLS 1.3 is not configurable: served whatever the list.
    let (v, _) = served(&only13(&server), &server).await;
    assert_eq!(v, ProtocolVersion::TLSv1_3);
}

#[tokio::test]
async fn a_custom_profile_of_unknown_suites_keeps_the_last_good_configuration() {
    let _parallel = support::parallel();
    let server = start_server().await;
    let tls = &server.running.tls;
    let err = tls
        .apply(&custom(&["AES128-SHA", "RC4-MD5"], "VersionTLS12"))
        .unwrap_err();
    assert!(
        matches!(
            &err,
            ApplyError::Profile(ProfileError::NoUsableCipher { named }) if named.len() == 2
        ),
        "{err}"
    );
    assert!(
        err.to_string().contains("RC4-MD5"),
        "the error names the list: {err}"
    );
    // Also through the cluster side's path (which logs it), and from a Modern start.
    tls_profile::apply(
        tls,
        Some(&json!({"spec": {"tlsSecurityProfile": {"type": "Modern", "modern": {}}}})),
    );
    tls_profile::apply(
        tls,
        Some(
            &json!({"spec": {"tlsSecurityProfile": {"type": "Custom", "custom": {
            "ciphers": ["RC4-MD5"], "minTLSVersion": "VersionTLS12"}}}}),
        ),
    );
    assert_eq!(tls.policy().source, "Modern", "the last good one stays");
    assert!(only12(&server).connect(server.addr()).await.is_err());
    served(&only13(&server), &server).await;
}

#[tokio::test]
async fn a_profile_change_while_clients_keep_sending_fails_no_request() {
    let _parallel = support::parallel();
    let server = start_server().await;
    let body = serde_json::to_vec(&fixture(
        "admissionreview-v1-machineset-gcp-update.assembled.json",
    ))
    .unwrap();
    // Two clients with a new connection (a new handshake) per request, one on a keep-alive
    // connection; all offer TLS 1.3 and 1.2, as the apiserver does.
    let stream = ReviewStream::new(server.client.clone(), server.addr(), body)
        .fresh(2)
        .keep_alive(1)
        .start();
    let profiles = [
        Profile::modern(),
        Profile::intermediate(),
        custom(&["ECDHE-ECDSA-AES256-GCM-SHA384"], "VersionTLS12"),
        Profile::old(),
        custom(&["TLS_AES_128_GCM_SHA256"], "VersionTLS13"),
    ];
    let mut changes = 0;
    for round in 0..40 {
        let p = &profiles[round % profiles.len()];
        server.running.tls.apply(p).unwrap();
        changes += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let tally = stream.stop().await;
    let sent = tally.sent;
    eprintln!(
        "{sent} reviews across {changes} profile changes, {} failed",
        tally.failed
    );
    assert!(sent > 40, "only {sent} requests sent");
    assert_eq!(
        tally.failed, 0,
        "of {sent} failed across {changes} profile changes: {:?}",
        tally.failures
    );
}

#[tokio::test]
async fn cipher_suite_flags_that_name_nothing_rustls_serves_refuse_to_start() {
    let _parallel = support::parallel();
    support::install_provider();
    let dir = tempfile::tempdir().unwrap();
    let certs = support::dev_certs();
    let volume = support::SecretVolume::new(dir.path(), &certs);
    let mut s = support::settings(&volume);
    s.tls_cipher_suites = Some(vec!["DES-CBC3-SHA".into()]);
    let err = match bootimage_webhook::app::start(
        s,
        bootimage_webhook::core::snapshot::shared(support::offline_snapshot()),
        true,
    )
    .await
    {
        Ok(_) => panic!("started with no usable cipher suite"),
        Err(e) => format!("{e:#}"),
    };
    assert!(err.contains("--tls-cipher-suites"), "{err}");
    assert!(err.contains("DES-CBC3-SHA"), "{err}");

    // IANA names and a min version in OpenShift's spelling, as flags.
    let server = support::start_server_with(|s| {
        s.tls_min_version = Some(MinVersion::Tls12);
        s.tls_cipher_suites = Some(vec!["TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384".into()]);
    })
    .await;
    let aes256 = tls12_with(&server, &[cs::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384]);
    assert_eq!(
        served(&aes256, &server).await.1,
        CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384
    );
    // The flags stay above a cluster profile: Modern does not take TLS 1.2 away.
    tls_profile::apply(
        &server.running.tls,
        Some(&json!({"spec": {"tlsSecurityProfile": {"type": "Modern", "modern": {}}}})),
    );
    assert_eq!(server.running.tls.policy().source, "Modern+flags");
    served(&aes256, &server).await;
}
