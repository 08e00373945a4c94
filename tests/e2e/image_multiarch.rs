//! The multi-arch image: amd64 and arm64 (the control planes the webhook runs on) as one
//! manifest list, and the arm64 image answering a review under emulation.
//!
//! Both images are the Dockerfile's target `runtime-prebuilt` around the static binary of
//! `scripts/build-static` for that architecture, on that architecture's stand-in of
//! distroless static (`ARCH=arm64 scripts/image-bases runtime`). Their manifest list
//! (`buildah manifest create`, `add`) is written as an OCI layout (`buildah manifest push
//! --all ... oci:DIR`, no registry), and read back: one entry per architecture with the
//! right os and architecture, each entry's config saying the same, every blob there with its
//! digest. The arm64 image is then run with podman as the Deployment runs it (its own user,
//! read-only root, no capabilities), its entrypoint being qemu-user (`qemu-aarch64-static`,
//! mounted from this machine: no binfmt registration needed) running the image's own
//! `/usr/local/bin/bootimage-webhook`; `examples/review-gcp-update.json` posted over TLS (the
//! certificate verified) must get the README's patch.
//!
//! When the aarch64 Rust std cannot be installed (`rustup target add` fails: a machine that
//! does not reach static.rust-lang.org), the arm64 half does not run: the test says so loudly,
//! with the reason, in its report (scripts/test prints it), and still checks the amd64 half.
//! Needs podman, buildah, runc, qemu-user-static, gcc-aarch64-linux-gnu
//! (`scripts/install-image-deps`) and root.

use crate::support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::image::{
    CONFIGMAP_DIR, CONFIGMAP_FIXTURE, Container, Image, Volumes, a_review_over_tls_is_patched,
    deployment_security, podman_ok, prebuilt_image, run_flags, runtime_base_of, static_binary,
    unique,
};

const QEMU: &str = "/usr/bin/qemu-aarch64-static";
/// What the image's size stays under, on every architecture.
const SIZE_GOAL: u64 = 40_000_000;

fn report(line: String) {
    support::report::report("image-multiarch", &line);
}

fn buildah(args: &[&str]) -> String {
    let out = Command::new("buildah")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running buildah ({e}); scripts/install-image-deps"));
    assert!(
        out.status.success(),
        "buildah {args:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The ELF machine of `binary`: 62 is x86-64, 183 AArch64.
fn elf_machine(binary: &Path) -> u16 {
    let bytes = std::fs::read(binary).unwrap();
    assert_eq!(&bytes[..4], b"\x7fELF", "{} is not ELF", binary.display());
    u16::from_le_bytes([bytes[18], bytes[19]])
}

/// True if `binary` is the image profile's (target/<triple>/image/).
fn in_image_profile(binary: &Path) -> bool {
    binary.parent().and_then(Path::file_name) == Some("image".as_ref())
}

/// A manifest list removed on drop.
struct ManifestList(String);

impl Drop for ManifestList {
    fn drop(&mut self) {
        let _ = Command::new("buildah")
            .args(["manifest", "rm", &self.0])
            .output();
    }
}

/// A blob of the OCI layout at `dir`, its digest checked.
fn blob(dir: &Path, digest: &str) -> Vec<u8> {
    let hex = digest.strip_prefix("sha256:").unwrap();
    let bytes = std::fs::read(dir.join("blobs/sha256").join(hex)).unwrap();
    let out = Command::new("sha256sum")
        .arg(dir.join("blobs/sha256").join(hex))
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).starts_with(hex));
    bytes
}

/// The list pushed to an OCI layout and read back: architecture -> compressed size.
fn pushed_list(list: &str, images: &[(&str, &Image)]) -> BTreeMap<String, u64> {
    let dir = tempfile::tempdir().unwrap();
    let dest = format!("oci:{}:multiarch", dir.path().display());
    buildah(&["manifest", "push", "--all", "--format", "oci", list, &dest]);
    let layout: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("index.json")).unwrap()).unwrap();
    let top = &layout["manifests"][0];
    assert_eq!(
        top["mediaType"], "application/vnd.oci.image.index.v1+json",
        "{layout}"
    );
    let index: Value =
        serde_json::from_slice(&blob(dir.path(), top["digest"].as_str().unwrap())).unwrap();
    let entries = index["manifests"].as_array().unwrap();
    assert_eq!(entries.len(), images.len(), "{index}");
    let mut sizes = BTreeMap::new();
    for entry in entries {
        let arch = entry["platform"]["architecture"]
            .as_str()
            .unwrap()
            .to_owned();
        assert_eq!(entry["platform"]["os"], "linux", "{entry}");
        let manifest: Value =
            serde_json::from_slice(&blob(dir.path(), entry["digest"].as_str().unwrap())).unwrap();
        let config: Value = serde_json::from_slice(&blob(
            dir.path(),
            manifest["config"]["digest"].as_str().unwrap(),
        ))
        .unwrap();
        assert_eq!(
            config["architecture"],
            arch.as_str(),
            "config of the {arch} entry"
        );
        assert_eq!(config["os"], "linux");
        assert_eq!(config["config"]["User"], "65532:65532");
        let mut size = 0;
        for layer in manifest["layers"].as_array().unwrap() {
            size += blob(dir.path(), layer["digest"].as_str().unwrap()).len() as u64;
        }
        sizes.insert(arch, size);
    }
    let want: Vec<&str> = images.iter().map(|(a, _)| *a).collect();
    assert_eq!(sizes.keys().map(String::as_str).collect::<Vec<_>>(), want);
    sizes
}

/// The image's size as podman counts it (uncompressed), and its platform checked.
fn image_size(arch: &str, image: &Image) -> u64 {
    let size: u64 = podman_ok(&["image", "inspect", "--format", "{{.Size}}", &image.name])
        .parse()
        .unwrap();
    let platform = podman_ok(&[
        "image",
        "inspect",
        "--format",
        "{{.Os}}/{{.Architecture}}",
        &image.name,
    ]);
    assert_eq!(platform, format!("linux/{arch}"));
    size
}

/// The arm64 image run under qemu-user as the Deployment runs it; the review's reply checked.
async fn answers_under_emulation(image: &Image) {
    let volumes = Volumes::as_the_kubelet_lays_them_out();
    let args = run_under_qemu(image, &volumes);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let started = Instant::now();
    let container = Container(podman_ok(&args));
    let webhook = container.host_port(9443);
    let admin = container.host_port(8080);
    // qemu-user starts it slower than a native run.
    container.wait_ready(admin, Duration::from_secs(120));
    report(format!(
        "arm64 image under qemu-user ready after {:.1} s",
        started.elapsed().as_secs_f64()
    ));

    let asked = Instant::now();
    a_review_over_tls_is_patched(webhook, &volumes.certs).await;
    report(format!(
        "arm64 answered examples/review-gcp-update.json over TLS with the patch in {:.0} ms (emulated)",
        asked.elapsed().as_secs_f64() * 1e3
    ));
    // The process is the arm64 binary under qemu, not something else answering.
    let pid = container.inspect("{{.State.Pid}}");
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
    assert!(
        cmdline.starts_with("/qemu-aarch64 /usr/local/bin/bootimage-webhook serve"),
        "{cmdline}"
    );
    podman_ok(&["stop", "--time", "30", &container.0]);
    assert_eq!(
        container.inspect("{{.State.ExitCode}}"),
        "0",
        "{}",
        container.logs()
    );
}

/// `podman run` of the arm64 image as the Deployment runs it (read-only root, no
/// capabilities, no privilege escalation, a small /tmp, the certificate and the ConfigMap
/// mounted, offline), with this machine's qemu-user as its entrypoint; the image is left
/// as it is.
fn run_under_qemu(image: &Image, volumes: &Volumes) -> Vec<String> {
    let name = unique("bootimage-webhook-arm64-test");
    let mut args: Vec<String> = vec!["run".into(), "--detach".into(), "--name".into(), name];
    args.extend(run_flags());
    let env = [
        (
            "BOOTIMAGE_WEBHOOK_TLS_CERT_FILE",
            "/etc/bootimage-webhook/tls/tls.crt".to_owned(),
        ),
        (
            "BOOTIMAGE_WEBHOOK_TLS_PRIVATE_KEY_FILE",
            "/etc/bootimage-webhook/tls/tls.key".to_owned(),
        ),
        (
            "BOOTIMAGE_WEBHOOK_CONFIGMAP_FILE",
            format!("{CONFIGMAP_DIR}/{CONFIGMAP_FIXTURE}"),
        ),
        (
            "BOOTIMAGE_WEBHOOK_ASSUME_MASTERS_UPDATED",
            "true".to_owned(),
        ),
        ("BOOTIMAGE_WEBHOOK_CONTROL_PLANE_ARCH", "amd64".to_owned()),
    ];
    for (k, v) in env {
        args.extend(["--env".into(), format!("{k}={v}")]);
    }
    args.extend([
        "--network".into(),
        "slirp4netns:port_handler=slirp4netns".into(),
        "--publish".into(),
        "127.0.0.1::9443".into(),
        "--publish".into(),
        "127.0.0.1::8080".into(),
    ]);
    args.extend(deployment_security("/tmp:rw,size=64m"));
    args.extend([
        "--volume".into(),
        format!("{}:/etc/bootimage-webhook/tls:ro", volumes.tls.display()),
        "--volume".into(),
        format!("{}:{CONFIGMAP_DIR}:ro", volumes.configmap.display()),
        "--volume".into(),
        format!("{QEMU}:/qemu-aarch64:ro"),
        "--entrypoint".into(),
        "/qemu-aarch64".into(),
        image.name.clone(),
        "/usr/local/bin/bootimage-webhook".into(),
        "serve".into(),
        "--log-format".into(),
        "text".into(),
    ]);
    args
}

#[tokio::test(flavor = "multi_thread")]
async fn amd64_and_arm64_as_one_manifest_list() {
    let _alone = support::alone();
    let amd64_binary = static_binary("amd64").unwrap_or_else(|why| panic!("{why}"));
    assert_eq!(elf_machine(&amd64_binary), 62, "{}", amd64_binary.display());
    let amd64 = prebuilt_image("amd64", &amd64_binary, &runtime_base_of("amd64").0);
    report(amd64.built.clone().unwrap());
    // The size goal holds for the image profile's binaries (a dev build's is several times
    // larger): scripts/build-multiarch builds those.
    let mut sized = vec![in_image_profile(&amd64_binary)];

    let arm64 = match static_binary("arm64") {
        Ok(binary) => {
            assert_eq!(
                elf_machine(&binary),
                183,
                "{} is not AArch64",
                binary.display()
            );
            let image = prebuilt_image("arm64", &binary, &runtime_base_of("arm64").0);
            report(image.built.clone().unwrap());
            sized.push(in_image_profile(&binary));
            Some(image)
        }
        Err(why) => {
            report(format!(
                "ARM64 NOT TESTED: no arm64 binary, so no arm64 image, no emulated review; \
                 the manifest list below holds amd64 alone. Why: {}",
                why.trim()
            ));
            None
        }
    };
    let mut images = vec![("amd64", &amd64)];
    if let Some(arm64) = &arm64 {
        images.push(("arm64", arm64));
    }

    let list = ManifestList(format!(
        "localhost/{}:list",
        unique("bootimage-webhook-multiarch")
    ));
    buildah(&["manifest", "create", &list.0]);
    for (_, image) in &images {
        buildah(&[
            "manifest",
            "add",
            &list.0,
            &format!("containers-storage:{}", image.name),
        ]);
    }
    let compressed = pushed_list(&list.0, &images);
    for ((arch, image), sized) in images.iter().zip(sized) {
        let size = image_size(arch, image);
        report(format!(
            "{arch}: {} is {size} bytes ({:.1} MB; goal under {} MB for the image profile), {} bytes compressed in the list",
            image.name,
            size as f64 / 1e6,
            SIZE_GOAL / 1_000_000,
            compressed[*arch]
        ));
        if sized {
            assert!(size < SIZE_GOAL, "{arch}: {size} bytes");
        }
    }
    if let Some(arm64) = &arm64 {
        answers_under_emulation(arm64).await;
    }
}
