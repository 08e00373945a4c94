//! The real binary, spawned the one way every test does it: `serve` on `127.0.0.1:0` for
//! both ports, the bound addresses read back from its log (picking a free port first and
//! binding it later races with everything else on the machine), its whole log kept for
//! assertions and for the failure message.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_bootimage-webhook");

/// Raise this process's open-file limit to `want` (at most the hard limit), for a test
/// that holds thousands of sockets; the servers it spawns inherit it. The limit reached.
#[allow(dead_code, reason = "only the fast tier uses it")]
pub fn raise_open_files(want: u64) -> u64 {
    use rustix::process::{Resource, getrlimit, setrlimit};
    // The limit is the process's, and the tests run in threads of one process: one at a
    // time reads and raises it, so that none lowers what another has just raised.
    static RAISING: Mutex<()> = Mutex::new(());
    let _raising = RAISING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut limit = getrlimit(Resource::Nofile);
    // `None` is no limit.
    if limit.current.is_some_and(|now| now < want) {
        limit.current = Some(limit.maximum.map_or(want, |hard| want.min(hard)));
        setrlimit(Resource::Nofile, limit).expect("raising RLIMIT_NOFILE");
    }
    limit.current.unwrap_or(u64::MAX)
}

/// A running `bootimage-webhook serve`, killed on drop.
pub struct Served {
    child: Child,
    pub webhook: SocketAddr,
    pub admin: SocketAddr,
    log: Arc<Mutex<Vec<String>>>,
    lines: Receiver<String>,
    /// Reads stdout into `log` until the process closes it.
    reader: Option<std::thread::JoinHandle<()>>,
}

/// `bootimage-webhook serve` with both ports on `127.0.0.1:0`; add the rest.
pub fn serve_command() -> Command {
    serve_command_on("127.0.0.1:0")
}

/// [`serve_command`] with the webhook on `bind` (a port this test's own server just
/// released, for a restart on the same address) and the admin port on `127.0.0.1:0`.
pub fn serve_command_on(bind: &str) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args([
        "serve",
        "--bind-address",
        bind,
        "--admin-address",
        "127.0.0.1:0",
    ])
    .env("RUST_LOG", "info")
    // The tests' clouds (Keystone, Glance, the artifacts' servers) are plain http.
    .env("BOOTIMAGE_WEBHOOK_ALLOW_PLAIN_HTTP_FOR_TESTS", "true")
    .env_remove("KUBERNETES_SERVICE_HOST");
    cmd
}

fn address_after(line: &str, prefix: &str) -> Option<SocketAddr> {
    line.split_once(prefix)
        .and_then(|(_, rest)| rest.split(['/', ' ', '"']).next())
        .and_then(|a| a.parse().ok())
}

impl Served {
    /// Spawn `cmd` (from [`serve_command`]) and wait until both ports are announced.
    pub fn spawn(mut cmd: Command) -> Served {
        let mut child = cmd
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawning {BIN}: {e}"));
        let stdout = child.stdout.take().unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let (tx, lines) = channel();
        let reader = {
            let log = log.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                    log.lock().unwrap().push(line.clone());
                    let _ = tx.send(line);
                }
            })
        };
        let mut served = Served {
            child,
            webhook: SocketAddr::from(([0, 0, 0, 0], 0)),
            admin: SocketAddr::from(([0, 0, 0, 0], 0)),
            log,
            lines,
            reader: Some(reader),
        };
        let (mut webhook, mut admin) = (None, None);
        while webhook.is_none() || admin.is_none() {
            let line = served
                .next_line(Duration::from_secs(30))
                .unwrap_or_else(|| {
                    panic!(
                        "the server never announced its ports:\n{}",
                        served.log_text()
                    )
                });
            if line.contains("serving the webhook") {
                webhook = address_after(&line, "https://");
            }
            if line.contains("serving /healthz") {
                admin = address_after(&line, "http://");
            }
        }
        served.webhook = webhook.unwrap();
        served.admin = admin.unwrap();
        served
    }

    fn next_line(&self, wait: Duration) -> Option<String> {
        self.lines.recv_timeout(wait).ok()
    }

    /// Forget the lines not read yet, so that [`wait_for_line`](Self::wait_for_line) sees
    /// only what comes after this call.
    #[allow(dead_code, reason = "only the end-to-end tier uses it")]
    pub fn drain(&self) {
        while self.lines.try_recv().is_ok() {}
    }

    /// Wait for a log line that satisfies `want`, among those not read yet (every line since
    /// the start, or since the last [`drain`](Self::drain)).
    pub fn wait_for_line(&self, wait: Duration, want: impl Fn(&str) -> bool) -> Option<String> {
        let deadline = Instant::now() + wait;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            let line = self.next_line(left)?;
            if want(&line) {
                return Some(line);
            }
        }
        None
    }

    /// Every line logged so far.
    pub fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    pub fn log_text(&self) -> String {
        self.log().join("\n")
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Send a signal by name (`TERM`, `INT`, `KILL`).
    pub fn signal(&self, name: &str) {
        // An already stopped process is not an error for a test that stops it.
        let _ = Command::new("kill")
            .args([&format!("-{name}"), &self.pid().to_string()])
            .stderr(Stdio::null())
            .status();
    }

    /// Whether the process has exited (without waiting).
    #[allow(dead_code, reason = "only the end-to-end tier uses it")]
    pub fn exited(&mut self) -> bool {
        self.child.try_wait().unwrap().is_some()
    }

    /// Wait for the exit, at most `wait` (then kill it and panic with the log). Once it
    /// returns, [`log`](Self::log) holds every line the process wrote.
    pub fn wait_exit(&mut self, wait: Duration) -> ExitStatus {
        let deadline = Instant::now() + wait;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                if let Some(reader) = self.reader.take() {
                    let _ = reader.join();
                }
                return status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!(
                    "still running after {wait:?}; killed. Log:\n{}",
                    self.log_text()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A field of /proc/<pid>/status, in bytes (the kernel writes kB).
#[allow(dead_code, reason = "only the fast tier uses it")]
pub fn proc_status(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().strip_suffix(" kB")?.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
        * 1024
}
