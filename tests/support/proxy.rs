//! A real forward proxy (tinyproxy, a Debian package) on a loopback port, logging every
//! request it forwards and every tunnel it opens.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A loopback port nobody listens on (yet).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Kills and reaps a child on drop.
pub struct Reaped(pub Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub struct Tinyproxy {
    _child: Reaped,
    port: u16,
    log: PathBuf,
}

impl Tinyproxy {
    /// Started in `dir` (its configuration and log), ready to accept connections.
    pub fn start(dir: &Path) -> Tinyproxy {
        let port = free_port();
        let conf = dir.join("tinyproxy.conf");
        let log = dir.join("tinyproxy.log");
        std::fs::write(
            &conf,
            format!("Port {port}\nListen 127.0.0.1\nTimeout 60\nLogLevel Info\nMaxClients 20\n"),
        )
        .unwrap();
        let child = Command::new("tinyproxy")
            .args(["-d", "-c"])
            .arg(&conf)
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("tinyproxy: {e} (scripts/install-test-deps installs it)"));
        let t = Tinyproxy {
            _child: Reaped(child),
            port,
            log,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !t.log().contains("Accepting connections") {
            assert!(
                Instant::now() < deadline,
                "tinyproxy did not start: {}",
                t.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        t
    }

    /// Its URL, with `host` naming the loopback address.
    pub fn url_as(&self, host: &str) -> String {
        format!("http://{host}:{}", self.port)
    }

    pub fn url(&self) -> String {
        self.url_as("127.0.0.1")
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The plain-HTTP requests it forwarded to `target` (host:port).
    pub fn requests_to(&self, target: &str) -> usize {
        self.count(&format!("http://{target}/"))
    }

    /// The CONNECT tunnels it was asked to open to `target` (host:port).
    pub fn tunnels_to(&self, target: &str) -> usize {
        self.count(&format!("CONNECT {target} "))
    }

    fn count(&self, needle: &str) -> usize {
        self.log()
            .lines()
            .filter(|l| l.contains("Request (") && l.contains(needle))
            .count()
    }
}
