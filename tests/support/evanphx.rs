//! Independent RFC 6902 JSON Patch applier for integration tests, backed by
//! the library kube-apiserver itself uses to apply mutating-webhook patches:
//! evanphx/json-patch, v4 API (`jsonpatch.DecodePatch(patch)` then
//! `patch.Apply(doc)`).
//!
//! Include it from an integration test with
//!
//! ```ignore
//! #[path = "support/evanphx.rs"]
//! mod evanphx;
//! ```
//!
//! The Go harness in `tests/evanphx/main.go` is built once per test process,
//! in GOPATH mode and fully offline, against the Debian packages `golang-go`
//! and `golang-github-evanphx-json-patch-dev` (install them with
//! `scripts/install-test-deps`). If they are missing, the tests panic: they
//! never skip silently. Set `EVANPHX_APPLY=/path/to/evanphx-apply` to use a
//! prebuilt harness binary instead.
//!
//! Compare results as parsed `serde_json::Value`s, never as bytes: Go's
//! encoding/json sorts object keys, writes `<`, `>`, `&` as `\u003c` etc.,
//! and leaves untouched subtrees (numbers included, e.g. `1.0`, `1e3`)
//! exactly as they were written in the input document.
//!
//! Known behaviour of this library version worth remembering in tests:
//! `replace` on a missing *object* key succeeds and adds it (the apiserver's
//! v4 library does the same); `replace` on a missing *array* index fails.

#![allow(dead_code)]

use std::ffi::OsString;
use std::fs;
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Source of the Go harness (our own code, package main).
pub const HARNESS_SOURCE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/evanphx/main.go");

/// GOPATH root of Debian's Go library packages.
const DEBIAN_GOCODE: &str = "/usr/share/gocode";

/// Where `golang-github-evanphx-json-patch-dev` installs the library.
const DEBIAN_EVANPHX_DIR: &str = "/usr/share/gocode/src/github.com/evanphx/json-patch";

/// Package directory name used inside the temporary GOPATH.
const GO_PACKAGE_DIR: &str = "evanphx-apply";

const INSTALL_HINT: &str = "run `scripts/install-test-deps` from the repository root \
     (it installs the Debian packages golang-go and golang-github-evanphx-json-patch-dev), \
     or set EVANPHX_APPLY to a prebuilt evanphx-apply binary";

static HARNESS: OnceLock<PathBuf> = OnceLock::new();
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Applies `patch` (a JSON Patch array) to `doc` with evanphx/json-patch.
///
/// `Ok` holds the patched document; `Err` holds the harness's stderr
/// (`error: <message>`) when `DecodePatch` or `Apply` fails. Panics if the
/// harness cannot be built or run, or if the library itself panics.
pub fn apply(
    doc: &serde_json::Value,
    patch: &serde_json::Value,
) -> Result<serde_json::Value, String> {
    let doc = serde_json::to_vec(doc).expect("serialize document");
    let patch = serde_json::to_vec(patch).expect("serialize patch");
    apply_bytes(&doc, &patch)
}

/// Like [`apply`], but with raw bytes (e.g. the exact `patch` bytes the
/// webhook puts, base64-decoded, into its AdmissionReview response).
pub fn apply_bytes(doc: &[u8], patch: &[u8]) -> Result<serde_json::Value, String> {
    let harness = harness_path();
    let doc_file = TempFile::new("doc", doc);
    let patch_file = TempFile::new("patch", patch);

    let output = Command::new(harness)
        .arg(&doc_file.0)
        .arg(&patch_file.0)
        .output()
        .unwrap_or_else(|e| panic!("failed to run evanphx harness {}: {e}", harness.display()));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);

    match output.status.code() {
        Some(0) => Ok(serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
            panic!("evanphx harness printed invalid JSON ({e}):\n{stdout}\nstderr:\n{stderr}")
        })),
        Some(1) => Err(stderr.trim_end().to_string()),
        Some(3) => panic!(
            "evanphx/json-patch panicked while applying the patch: {}\n\
             (Debian's golang-github-evanphx-json-patch-dev 5.2.0 root package lacks a few \
             hardening fixes of the v4.12 tag the apiserver vendors: negative array indices \
             in replace/test/move/copy, a null intermediate value, an empty document. \
             The apiserver would not panic here; avoid this input or check it by hand.)\n\
             patch: {}",
            stderr.trim_end(),
            String::from_utf8_lossy(patch)
        ),
        _ => panic!(
            "evanphx harness {} failed unexpectedly ({}):\nstdout:\n{stdout}\nstderr:\n{stderr}",
            harness.display(),
            output.status
        ),
    }
}

/// Path of the harness binary: `$EVANPHX_APPLY` if set, otherwise the binary
/// built (once per process) from [`HARNESS_SOURCE`].
pub fn harness_path() -> &'static Path {
    HARNESS.get_or_init(|| match std::env::var_os("EVANPHX_APPLY") {
        Some(p) if !p.is_empty() => {
            let p = PathBuf::from(p);
            assert!(
                p.is_file(),
                "EVANPHX_APPLY={} does not exist or is not a file",
                p.display()
            );
            p
        }
        _ => build_harness(),
    })
}

/// `<CARGO_TARGET_TMPDIR or temp_dir()>/evanphx-harness`.
fn harness_root() -> PathBuf {
    let base = option_env!("CARGO_TARGET_TMPDIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("CARGO_TARGET_TMPDIR").map(PathBuf::from))
        .unwrap_or_else(std::env::temp_dir);
    base.join("evanphx-harness")
}

fn find_go() -> OsString {
    // Debian's golang-go puts `go` on PATH (/usr/bin/go -> /usr/lib/go/bin/go).
    for candidate in ["go", "/usr/lib/go/bin/go"] {
        match Command::new(candidate).arg("version").output() {
            Ok(out) if out.status.success() => return OsString::from(candidate),
            Ok(out) => panic!(
                "`{candidate} version` failed ({}): {}\n{INSTALL_HINT}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ),
            Err(e) if e.kind() == ErrorKind::NotFound => continue,
            Err(e) => panic!("cannot run `{candidate}`: {e}\n{INSTALL_HINT}"),
        }
    }
    panic!(
        "the Go toolchain (`go`) was not found, needed to build the evanphx/json-patch test oracle.\n{INSTALL_HINT}"
    );
}

fn build_harness() -> PathBuf {
    let go = find_go();
    assert!(
        Path::new(DEBIAN_EVANPHX_DIR).join("patch.go").is_file(),
        "the Go library evanphx/json-patch was not found at {DEBIAN_EVANPHX_DIR}.\n{INSTALL_HINT}"
    );
    let src = Path::new(HARNESS_SOURCE);
    assert!(
        src.is_file(),
        "evanphx harness source {} is missing",
        src.display()
    );

    let root = harness_root();
    let unique = unique_suffix();
    let gopath = root.join(format!("gopath-{unique}"));
    let pkg_dir = gopath.join("src").join(GO_PACKAGE_DIR);
    fs::create_dir_all(&pkg_dir).unwrap_or_else(|e| panic!("create {}: {e}", pkg_dir.display()));
    fs::copy(src, pkg_dir.join("main.go"))
        .unwrap_or_else(|e| panic!("copy {} into {}: {e}", src.display(), pkg_dir.display()));

    let gocache = root.join("gocache");
    fs::create_dir_all(&gocache).unwrap_or_else(|e| panic!("create {}: {e}", gocache.display()));

    // Build to a private name, then rename: several test binaries may build
    // concurrently (e.g. under cargo-nextest) and one may be running the old binary.
    let bin = root.join("evanphx-apply");
    let tmp_bin = root.join(format!("evanphx-apply.{unique}.tmp"));
    let mut gopath_var = gopath.clone().into_os_string();
    gopath_var.push(":");
    gopath_var.push(DEBIAN_GOCODE);

    let output = Command::new(&go)
        .current_dir(&pkg_dir)
        .args(["build", "-o"])
        .arg(&tmp_bin)
        .arg(".")
        .env("GO111MODULE", "off")
        .env("GOPATH", &gopath_var)
        .env("GOCACHE", &gocache)
        // Ignore any user `go env -w` settings (GOFLAGS=-mod=... breaks GOPATH mode).
        .env("GOENV", "off")
        .env_remove("GOFLAGS")
        .env("GOPROXY", "off")
        .env("GOTOOLCHAIN", "local")
        .env("CGO_ENABLED", "0")
        .output()
        .unwrap_or_else(|e| panic!("failed to run `go build`: {e}\n{INSTALL_HINT}"));

    let _ = fs::remove_dir_all(&gopath);
    if !output.status.success() {
        let _ = fs::remove_file(&tmp_bin);
        panic!(
            "building the evanphx harness failed ({}):\n{}{}\n\
             GOPATH={} GO111MODULE=off; if the library is missing, {INSTALL_HINT}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr),
            gopath_var.to_string_lossy()
        );
    }
    fs::rename(&tmp_bin, &bin)
        .unwrap_or_else(|e| panic!("rename {} -> {}: {e}", tmp_bin.display(), bin.display()));
    bin
}

fn unique_suffix() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{}-{n}-{nanos}", std::process::id())
}

/// A temp file under `std::env::temp_dir()`, removed on drop.
struct TempFile(PathBuf);

impl TempFile {
    fn new(kind: &str, contents: &[u8]) -> TempFile {
        let path = std::env::temp_dir().join(format!("evanphx-{}-{kind}.json", unique_suffix()));
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .unwrap_or_else(|e| panic!("create temp file {}: {e}", path.display()));
        f.write_all(contents)
            .unwrap_or_else(|e| panic!("write temp file {}: {e}", path.display()));
        TempFile(path)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}
