//! moto's EC2 server (from the test venv of scripts/install-test-deps), serving the AMIs it
//! is given, shared by tests/ec2.rs and tests/proxy.rs.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use serde_json::Value;

/// A program of the test venv (`VENV`, else ~/.cache/bootimage-webhook/venv).
pub fn venv_bin(name: &str) -> PathBuf {
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    std::env::var_os("VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| home.join(".cache/bootimage-webhook/venv"))
        .join("bin")
        .join(name)
}

/// moto's EC2, on a loopback port (0: any free one), killed on drop.
pub struct Moto {
    child: Child,
    pub addr: SocketAddr,
    _amis: tempfile::NamedTempFile,
}

impl Moto {
    /// `amis`: what EC2 holds, in moto's AMI file format.
    pub fn start(port: u16, amis: &Value) -> Moto {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), amis.to_string()).unwrap();
        let bin = venv_bin("moto_server");
        let mut child = Command::new(&bin)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .env("MOTO_AMIS_PATH", file.path())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "{}: {e} (scripts/install-test-deps installs moto[server])",
                    bin.display()
                )
            });
        let lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let mut seen = Vec::new();
        let mut addr = None;
        for line in lines.map_while(Result::ok) {
            if let Some(rest) = line.split("Running on http://").nth(1) {
                addr = rest.trim().parse().ok();
                break;
            }
            seen.push(line);
        }
        let addr = addr.unwrap_or_else(|| panic!("moto did not start: {seen:?}"));
        Moto {
            child,
            addr,
            _amis: file,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
