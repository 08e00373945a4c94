//! The image under test, shared by tests/image.rs and tests/real_node.rs: `BOOTIMAGE_WEBHOOK_IMAGE`
//! if set (`scripts/build-image` sets it), else the Dockerfile's target `runtime-prebuilt`
//! around the binary this test run built, on the runtime base of `scripts/image-bases`
//! (or `BOOTIMAGE_WEBHOOK_RUNTIME_IMAGE`). Built with podman, removed on drop.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

pub const RUNTIME_BASE_ENV: &str = "BOOTIMAGE_WEBHOOK_RUNTIME_IMAGE";
pub const IMAGE_ENV: &str = "BOOTIMAGE_WEBHOOK_IMAGE";

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
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("{prefix}-{}-{nanos}", std::process::id())
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

/// The runtime base: $BOOTIMAGE_WEBHOOK_RUNTIME_IMAGE, or the stand-in of scripts/image-bases.
pub fn runtime_base() -> String {
    if let Ok(name) = std::env::var(RUNTIME_BASE_ENV)
        && !name.is_empty()
    {
        return name;
    }
    let out = Command::new(repo("scripts/image-bases"))
        .arg("runtime")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "scripts/image-bases runtime: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("RUNTIME_IMAGE="))
        .unwrap_or_else(|| panic!("no RUNTIME_IMAGE= in {stdout:?}"))
        .to_owned()
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
    let base = runtime_base();
    // The build context holds the binary alone: the repository's .dockerignore keeps
    // target/ out of a context, and a context needs nothing else for this target.
    let context = tempfile::tempdir().unwrap();
    std::fs::copy(super::binary::BIN, context.path().join("bootimage-webhook")).unwrap();
    let name = format!("localhost/{}:test", unique("bootimage-webhook-image-test"));
    let dockerfile = repo("Dockerfile");
    let mut args = vec![
        "build".to_owned(),
        "--runtime".into(),
        "runc".into(),
        "--network".into(),
        "none".into(),
        "--target".into(),
        "runtime-prebuilt".into(),
        "--build-arg".into(),
        format!("RUNTIME_IMAGE={base}"),
        "--build-arg".into(),
        "BINARY=bootimage-webhook".into(),
        "-f".into(),
        dockerfile.display().to_string(),
        "-t".into(),
        name.clone(),
    ];
    args.push(context.path().display().to_string());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let started = Instant::now();
    podman_ok(&args);
    Image {
        built: Some(format!(
            "built {name} (target runtime-prebuilt on {base}) in {:.1} s",
            started.elapsed().as_secs_f64()
        )),
        name,
        built_here: true,
    }
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
