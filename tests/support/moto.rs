//! moto's EC2 server (from the test venv of scripts/install-test-deps), serving the AMIs it
//! is given, shared by tests/e2e/ec2.rs and tests/e2e/proxy.rs.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
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

/// AWS's standard environment, pointed at EC2 (and STS) at `endpoint` in `region`, with
/// moto's test credentials and nothing of this machine's own AWS setup.
pub fn aws_env(cmd: &mut Command, endpoint: &str, region: &str) {
    cmd.env("AWS_ENDPOINT_URL", endpoint)
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_REGION", region)
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env_remove("AWS_PROFILE")
        .env_remove("AWS_SHARED_CREDENTIALS_FILE");
}

/// moto's EC2, on a loopback port (0: any free one), killed on drop.
pub struct Moto {
    child: Child,
    pub addr: SocketAddr,
    tls: bool,
    _amis: tempfile::NamedTempFile,
}

impl Moto {
    /// `amis`: what EC2 holds, in moto's AMI file format.
    pub fn start(port: u16, amis: &Value) -> Moto {
        Moto::serve(port, amis, None, &[])
    }

    /// Over HTTPS, with the certificate and key `tls.crt` and `tls.key` in `certs`.
    pub fn start_tls(amis: &Value, certs: &Path) -> Moto {
        Moto::serve(0, amis, Some(certs), &[])
    }

    /// With moto's own settings in `env`: `MOTO_ENABLE_RECORDING` and
    /// `MOTO_RECORDER_FILEPATH` (every request written to a file, headers and body), or
    /// `INITIAL_NO_AUTH_ACTION_COUNT` (after that many calls, each request's signature and
    /// its IAM permissions are checked against moto's IAM).
    pub fn start_with(amis: &Value, env: &[(&str, &str)]) -> Moto {
        Moto::serve(0, amis, None, env)
    }

    fn serve(port: u16, amis: &Value, certs: Option<&Path>, env: &[(&str, &str)]) -> Moto {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), amis.to_string()).unwrap();
        let bin = venv_bin("moto_server");
        let mut cmd = Command::new(&bin);
        cmd.args(["-H", "127.0.0.1", "-p", &port.to_string()]);
        if let Some(certs) = certs {
            cmd.arg("--ssl-cert")
                .arg(certs.join("tls.crt"))
                .arg("--ssl-key")
                .arg(certs.join("tls.key"));
        }
        let mut child = cmd
            .envs(env.iter().copied())
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
            let rest = line.split("Running on ").nth(1);
            let rest = rest.map(|r| {
                r.trim_start_matches("http://")
                    .trim_start_matches("https://")
            });
            if let Some(rest) = rest {
                addr = rest.trim().trim_end_matches('/').parse().ok();
                break;
            }
            seen.push(line);
        }
        let addr = addr.unwrap_or_else(|| panic!("moto did not start: {seen:?}"));
        Moto {
            child,
            addr,
            tls: certs.is_some(),
            _amis: file,
        }
    }

    /// Its URL; over TLS, named `localhost` (the name its certificate carries).
    pub fn url(&self) -> String {
        match self.tls {
            true => format!("https://localhost:{}", self.addr.port()),
            false => format!("http://{}", self.addr),
        }
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
