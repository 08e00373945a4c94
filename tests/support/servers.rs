//! The webhook served in-process (`app::start`) on 127.0.0.1:0 with a fresh test CA, the
//! real stream and the gate open, its certificate in a kubelet-style Secret volume.

use std::net::SocketAddr;
use std::time::Duration;

use bootimage_webhook::app::{self, Running, Settings};
use bootimage_webhook::core::snapshot;
use bootimage_webhook::serve::server::ConnLimits;
use bootimage_webhook::serve::tls::DevCerts;

use super::fixtures::offline_snapshot;
use super::https::{Https, Reply, admin_get, dev_certs, install_provider};
use super::volume::SecretVolume;

pub struct TestServer {
    pub running: Running,
    pub certs: DevCerts,
    pub volume: SecretVolume,
    pub client: Https,
    _dir: tempfile::TempDir,
}

pub fn settings(volume: &SecretVolume) -> Settings {
    Settings {
        cert_file: volume.cert(),
        key_file: volume.key(),
        bind_address: "127.0.0.1:0".parse().unwrap(),
        admin_address: "127.0.0.1:0".parse().unwrap(),
        tls_min_version: None,
        tls_cipher_suites: None,
        cert_reload_interval: Duration::from_millis(200),
        limits: ConnLimits {
            handshake_timeout: Duration::from_secs(2),
            header_read_timeout: Duration::from_millis(800),
            idle_timeout: Duration::from_secs(3),
        },
        body_timeout: Duration::from_secs(2),
        min_body_rate: bootimage_webhook::config::DEFAULT_MIN_BODY_RATE,
        max_body_bytes_in_flight: bootimage_webhook::config::DEFAULT_MAX_BODY_BYTES_IN_FLIGHT,
        drain_timeout: Duration::from_secs(5),
    }
}

/// A server with a fresh test CA and the real stream, gate open.
pub async fn start_server() -> TestServer {
    start_server_with(|_| {}).await
}

pub async fn start_server_with(tweak: impl FnOnce(&mut Settings)) -> TestServer {
    install_provider();
    let dir = tempfile::tempdir().unwrap();
    let certs = dev_certs();
    let volume = SecretVolume::new(dir.path(), &certs);
    let mut s = settings(&volume);
    tweak(&mut s);
    let running = app::start(s, snapshot::shared(offline_snapshot()), true)
        .await
        .unwrap();
    let client = Https::new(&certs.ca_pem);
    TestServer {
        running,
        certs,
        volume,
        client,
        _dir: dir,
    }
}

impl TestServer {
    pub fn addr(&self) -> SocketAddr {
        self.running.webhook_addr
    }

    pub async fn post_review(&self, body: &[u8]) -> Reply {
        self.client
            .post(
                self.addr(),
                "/mutate-machinesets",
                Some("application/json"),
                body.to_vec(),
            )
            .await
            .unwrap()
    }

    pub async fn admin_get(&self, path: &str) -> (u16, String) {
        admin_get(self.running.admin_addr, path).await
    }
}
