//! The image under test, shared by tests/e2e/image.rs, tests/e2e/real_node.rs and
//! tests/e2e/image_multiarch.rs: `BOOTIMAGE_WEBHOOK_IMAGE` if set (`scripts/build-image` sets it),
//! else the Dockerfile's target `runtime-prebuilt` around the static binary of
//! `scripts/build-static`, on the runtime base of `scripts/image-bases` (or
//! `BOOTIMAGE_WEBHOOK_RUNTIME_IMAGE`). Built with podman, removed on drop.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use bootimage_webhook::serve::tls::DevCerts;
use serde_json::{Value, json};

use super::{CURRENT_X86, Https, SecretVolume, dev_certs};

pub const RUNTIME_BASE_ENV: &str = "BOOTIMAGE_WEBHOOK_RUNTIME_IMAGE";
pub const IMAGE_ENV: &str = "BOOTIMAGE_WEBHOOK_IMAGE";
/// Where the Deployment mounts the ConfigMap, and the fixture the offline runs read there.
pub const CONFIGMAP_DIR: &str = "/etc/bootimage-webhook/configmap";
pub const CONFIGMAP_FIXTURE: &str = "configmap-coreos-bootimages.assembled.yaml";

pub fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

pub fn podman(args: &[&str]) -> Output {
    Command::new("podman")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running podman ({e}); scripts/install-image-deps installs it"))
}

/// podman's output, or a panic with its stderr.
pub fn podman_ok(args: &[&str]) -> String {
    let out = podman(args);
    assert!(
        out.status.success(),
        "podman {args:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

pub fn unique(prefix: &str) -> String {
    // The tests of a tier share one process: the count tells its callers apart.
    static COUNT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("{prefix}-{}-{n}-{nanos}", std::process::id())
}

/// The image under test; one built here is removed on drop.
pub struct Image {
    pub name: String,
    built_here: bool,
    /// How it was built, when built here.
    pub built: Option<String>,
}

impl Drop for Image {
    fn drop(&mut self) {
        if self.built_here {
            let _ = podman(&["rmi", "--force", &self.name]);
        }
    }
}

/// The runtime base of `arch`, the stand-in of scripts/image-bases (`ARCH=arch`): its image
/// name and its root file system's tarball.
pub fn runtime_base_of(arch: &str) -> (String, PathBuf) {
    let out = Command::new(repo("scripts/image-bases"))
        .arg("runtime")
        .env("ARCH", arch)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "ARCH={arch} scripts/image-bases runtime: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let value = |key: &str| -> String {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .unwrap_or_else(|| panic!("no {key} in {stdout:?}"))
            .to_owned()
    };
    (value("RUNTIME_IMAGE="), value("RUNTIME_ROOTFS=").into())
}

/// The runtime base: $BOOTIMAGE_WEBHOOK_RUNTIME_IMAGE, or this machine's stand-in.
pub fn runtime_base() -> String {
    if let Ok(name) = std::env::var(RUNTIME_BASE_ENV)
        && !name.is_empty()
    {
        return name;
    }
    runtime_base_of("amd64").0
}

/// The static binary of the image for `arch` (scripts/build-static), or why there is none.
/// scripts/test builds both before the tests and passes `BOOTIMAGE_WEBHOOK_STATIC_<ARCH>`
/// (a path) or `BOOTIMAGE_WEBHOOK_STATIC_<ARCH>_NOT_BUILT` (the reason: the aarch64 std could
/// not be installed); without either, it is built here in the dev profile, in a target
/// directory of its own (the one of this test run may be locked).
pub fn static_binary(arch: &str) -> Result<PathBuf, String> {
    let var = format!("BOOTIMAGE_WEBHOOK_STATIC_{}", arch.to_uppercase());
    if let Ok(path) = std::env::var(&var)
        && !path.is_empty()
    {
        return Ok(path.into());
    }
    if let Ok(why) = std::env::var(format!("{var}_NOT_BUILT")) {
        return Err(why);
    }
    let out = Command::new(repo("scripts/build-static"))
        .args([arch, "dev"])
        .env("CARGO_TARGET_DIR", repo("target/static-binaries"))
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    match out.status.code() {
        Some(0) => Ok(String::from_utf8_lossy(&out.stdout).trim().into()),
        Some(3) => Err(stderr),
        _ => panic!("scripts/build-static {arch} dev: {}\n{stderr}", out.status),
    }
}

/// The Dockerfile's target `runtime-prebuilt` around `binary`, for `arch`, on `base`.
pub fn prebuilt_image(arch: &str, binary: &Path, base: &str) -> Image {
    // The build context holds the binary alone: the repository's .dockerignore keeps
    // target/ out of a context, and a context needs nothing else for this target.
    let context = tempfile::tempdir().unwrap();
    std::fs::copy(binary, context.path().join("bootimage-webhook")).unwrap();
    let name = format!(
        "localhost/{}:test-{arch}",
        unique("bootimage-webhook-image-test")
    );
    let dockerfile = repo("Dockerfile");
    let platform = format!("linux/{arch}");
    let base_arg = format!("RUNTIME_IMAGE={base}");
    let started = Instant::now();
    podman_ok(&[
        "build",
        "--runtime",
        "runc",
        "--network",
        "none",
        "--platform",
        &platform,
        "--target",
        "runtime-prebuilt",
        "--build-arg",
        &base_arg,
        "--build-arg",
        "BINARY=bootimage-webhook",
        "-f",
        &dockerfile.display().to_string(),
        "-t",
        &name,
        &context.path().display().to_string(),
    ]);
    Image {
        built: Some(format!(
            "built {name} (target runtime-prebuilt for {platform} around {}, on {base}) in {:.1} s",
            binary.display(),
            started.elapsed().as_secs_f64()
        )),
        name,
        built_here: true,
    }
}

pub fn image_under_test() -> Image {
    if let Ok(name) = std::env::var(IMAGE_ENV)
        && !name.is_empty()
    {
        return Image {
            name,
            built_here: false,
            built: None,
        };
    }
    let binary =
        static_binary("amd64").unwrap_or_else(|why| panic!("no static amd64 binary: {why}"));
    prebuilt_image("amd64", &binary, &runtime_base())
}

/// A container's process as this machine sees it: `/proc/<pid>/status` and `mountinfo`.
pub struct Process {
    pid: String,
    status: String,
    mountinfo: String,
}

impl Process {
    pub fn of(pid: impl std::fmt::Display) -> Process {
        let read = |file: &str| {
            std::fs::read_to_string(format!("/proc/{pid}/{file}"))
                .unwrap_or_else(|e| panic!("read /proc/{pid}/{file}: {e}"))
        };
        Process {
            status: read("status"),
            mountinfo: read("mountinfo"),
            pid: pid.to_string(),
        }
    }

    /// The words of a `status` field (`Uid`: real, effective, saved, filesystem).
    pub fn status(&self, key: &str) -> Vec<&str> {
        let prefix = format!("{key}:");
        self.status
            .lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .unwrap_or_else(|| panic!("no {key} in /proc/{}/status", self.pid))
            .split_whitespace()
            .collect()
    }

    /// The `mountinfo` line of the mount at `point`.
    pub fn mount(&self, point: &str) -> Option<&str> {
        self.mountinfo
            .lines()
            .find(|l| l.split_whitespace().nth(4) == Some(point))
    }

    /// True if `/` is mounted read-only.
    pub fn root_read_only(&self) -> bool {
        let root = self.mount("/").expect("a / mount");
        let options = root.split_whitespace().nth(5).unwrap_or_default();
        options.split(',').any(|o| o == "ro")
    }
}

/// The hard limit of `resource` (a row of /proc/self/limits), at most `cap`: podman needs
/// explicit --ulimit values within the hard limits on these machines.
pub fn hard_limit(resource: &str, cap: u64) -> u64 {
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap();
    let row = limits
        .lines()
        .find(|l| l.starts_with(resource))
        .unwrap_or_else(|| panic!("{resource} not in /proc/self/limits"));
    let hard = row[resource.len()..].split_whitespace().nth(1).unwrap();
    hard.parse::<u64>().map_or(cap, |h| h.min(cap))
}

/// Flags every `podman run` here takes: runc, and the two limits.
pub fn run_flags() -> Vec<String> {
    let nofile = hard_limit("Max open files", 65536);
    let nproc = hard_limit("Max processes", 32768);
    vec![
        "--runtime".into(),
        "runc".into(),
        "--ulimit".into(),
        format!("nofile={nofile}:{nofile}"),
        "--ulimit".into(),
        format!("nproc={nproc}:{nproc}"),
    ]
}

/// The Deployment's securityContext and `/tmp` as podman flags: a read-only root, no
/// capabilities, no privilege escalation, `/tmp` a scratch mount (`tmp`: `PATH:OPTIONS`).
pub fn deployment_security(tmp: &str) -> Vec<String> {
    [
        "--read-only",
        "--read-only-tmpfs=false",
        "--cap-drop",
        "ALL",
    ]
    .into_iter()
    .chain(["--security-opt", "no-new-privileges", "--tmpfs", tmp])
    .map(str::to_owned)
    .collect()
}

/// A container removed on drop.
pub struct Container(pub String);

impl Drop for Container {
    fn drop(&mut self) {
        let _ = podman(&["rm", "--force", "--time", "0", &self.0]);
    }
}

impl Container {
    pub fn logs(&self) -> String {
        let out = podman(&["logs", &self.0]);
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    }

    pub fn inspect(&self, format: &str) -> String {
        podman_ok(&["inspect", "--format", format, &self.0])
    }

    /// Until `/readyz` on the admin port answers 200, at most `within`; the log if never.
    pub fn wait_ready(&self, admin: SocketAddr, within: Duration) {
        let deadline = Instant::now() + within;
        while probe(admin, "/readyz") != Some(200) {
            assert!(
                Instant::now() < deadline,
                "never ready; log:\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn host_port(&self, port: u16) -> SocketAddr {
        let mapped = podman_ok(&["port", &self.0, &format!("{port}/tcp")]);
        mapped
            .lines()
            .next()
            .and_then(|l| l.trim().parse().ok())
            .unwrap_or_else(|| panic!("podman port {port}: {mapped:?}"))
    }
}

/// A plain HTTP/1.1 GET, as the kubelet's httpGet probe sends it: the status code, if the
/// server answered at all.
pub fn probe(addr: SocketAddr, path: &str) -> Option<u16> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut reply = String::new();
    s.read_to_string(&mut reply).ok()?;
    reply.split_whitespace().nth(1)?.parse().ok()
}

/// The Secret volume (mode 0644, the Secret's default) and the ConfigMap's, as the kubelet
/// lays them out.
pub struct Volumes {
    _dir: tempfile::TempDir,
    pub tls: PathBuf,
    pub configmap: PathBuf,
    pub certs: DevCerts,
}

impl Volumes {
    pub fn as_the_kubelet_lays_them_out() -> Volumes {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let tls = dir.path().join("tls");
        std::fs::create_dir(&tls).unwrap();
        let certs = dev_certs();
        SecretVolume::new(&tls, &certs);
        let configmap = dir.path().join("configmap");
        std::fs::create_dir(&configmap).unwrap();
        std::fs::copy(
            repo(&format!("tests/fixtures/{CONFIGMAP_FIXTURE}")),
            configmap.join(CONFIGMAP_FIXTURE),
        )
        .unwrap();
        for d in [dir.path(), &tls, &configmap] {
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        Volumes {
            _dir: dir,
            tls,
            configmap,
            certs,
        }
    }
}

/// `examples/review-gcp-update.json` over TLS, the certificate verified against the test
/// CA, gets the stream's image.
pub async fn a_review_over_tls_is_patched(webhook: SocketAddr, certs: &DevCerts) {
    let review: Value = serde_json::from_str(
        &std::fs::read_to_string(repo("examples/review-gcp-update.json")).unwrap(),
    )
    .unwrap();
    let reply = Https::new(&certs.ca_pem)
        .post_review(webhook, &review)
        .await;
    assert_eq!(
        reply.status,
        200,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    let v = reply.json();
    assert_eq!(v["response"]["uid"], review["request"]["uid"]);
    assert_eq!(v["response"]["allowed"], true);
    assert_eq!(v["response"]["patchType"], "JSONPatch");
    assert_eq!(
        reply.patch().expect("a patch"),
        json!([
            {"op": "replace", "path": "/spec/template/spec/providerSpec/value/disks/0/image",
             "value": CURRENT_X86},
            {"op": "add", "path": "/metadata/annotations",
             "value": {"bootimages.machineconfiguration.openshift.io/boot-image": CURRENT_X86}},
        ])
    );
}
