//! Independent RFC 6902 JSON Patch applier for integration tests, backed by
//! the library kube-apiserver itself uses to apply mutating-webhook patches:
//! `gopkg.in/evanphx/json-patch.v4` at the version the pinned Kubernetes
//! release requires (`jsonpatch.DecodePatch(patch)` then `patch.Apply(doc)`).
//!
//! The Go harness is the module `tests/go/evanphx` (`main.go`, `go.mod`,
//! `go.sum`). It is built once per machine with the machine's Go (1.26 or
//! newer, module mode, the Go module proxy for the first download) into
//! `~/.cache/bootimage-webhook/bin/evanphx-apply-<library version>-<hash of the
//! module's files>`; later runs reuse that binary. If Go is missing or the build
//! fails, the tests panic: they never skip silently. Set
//! `EVANPHX_APPLY=/path/to/evanphx-apply` to use a prebuilt harness binary instead.
//!
//! Compare results as parsed `serde_json::Value`s, never as bytes: Go's
//! encoding/json sorts object keys, writes `<`, `>`, `&` as `\u003c` etc.,
//! and leaves untouched subtrees (numbers included, e.g. `1.0`, `1e3`)
//! exactly as they were written in the input document.
//!
//! Known behaviour of this library version worth remembering in tests:
//! `replace` on a missing *object* key succeeds and adds it (the apiserver
//! does the same); `replace` on a missing *array* index fails.

use std::ffi::OsString;
use std::fs;
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// The Go module of the harness (our own code, package main).
pub const HARNESS_MODULE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/go/evanphx");

/// The library the harness applies patches with (its version is read from go.mod).
const LIBRARY: &str = "gopkg.in/evanphx/json-patch.v4";

const INSTALL_HINT: &str = "the harness needs Go 1.26 or newer (`go` on PATH or \
     /usr/local/go/bin/go) and, on its first build, the Go module proxy; \
     `scripts/install-test-deps` checks for Go. Or set EVANPHX_APPLY to a prebuilt \
     evanphx-apply binary";

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
             (the apiserver's dispatcher runs the same library: find out why before \
             changing the test)\npatch: {}",
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

/// Path of the harness binary: `$EVANPHX_APPLY` if set, otherwise the cached
/// binary built (once per machine) from [`HARNESS_MODULE`].
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

/// `~/.cache/bootimage-webhook/bin`, the binary cache `scripts/test-apiserver` uses too.
fn bin_cache() -> PathBuf {
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| OsString::from("/tmp"));
    PathBuf::from(home).join(".cache/bootimage-webhook/bin")
}

fn find_go() -> OsString {
    for candidate in ["go", "/usr/local/go/bin/go"] {
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

fn read(path: &Path) -> Vec<u8> {
    fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// 64-bit FNV-1a: a stable cache key (std's hasher may change between Rust releases).
fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for b in part.iter().chain(&[0u8]) {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

/// `evanphx-apply-<library version>-<hash of go.mod, go.sum, main.go>`.
fn cached_name(module: &Path) -> String {
    let go_mod = read(&module.join("go.mod"));
    let go_sum = read(&module.join("go.sum"));
    let main_go = read(&module.join("main.go"));
    let text = String::from_utf8_lossy(&go_mod);
    // `require gopkg.in/evanphx/json-patch.v4 vX.Y.Z` (or the same inside a require block).
    let version = text
        .lines()
        .map(|l| l.trim().trim_start_matches("require").trim_start())
        .find_map(|l| l.strip_prefix(LIBRARY)?.split_whitespace().next())
        .unwrap_or_else(|| panic!("{}/go.mod does not require {LIBRARY}", module.display()));
    format!(
        "evanphx-apply-{version}-{:016x}",
        fnv1a(&[&go_mod, &go_sum, &main_go])
    )
}

fn build_harness() -> PathBuf {
    let module = Path::new(HARNESS_MODULE);
    let cache = bin_cache();
    let bin = cache.join(cached_name(module));
    if bin.is_file() {
        return bin;
    }
    let go = find_go();
    fs::create_dir_all(&cache).unwrap_or_else(|e| panic!("create {}: {e}", cache.display()));

    // Build to a private name, then rename: several test binaries may build
    // concurrently (e.g. under cargo-nextest) and one may be running the binary.
    let tmp_bin = cache.join(format!(".evanphx-apply.{}.tmp", unique_suffix()));
    let output = Command::new(&go)
        .current_dir(module)
        .args(["build", "-trimpath", "-o"])
        .arg(&tmp_bin)
        .arg(".")
        // The machine's Go, never a downloaded toolchain; go.mod and go.sum as committed.
        .env("GOTOOLCHAIN", "local")
        .env("GOFLAGS", "-mod=readonly")
        .env("CGO_ENABLED", "0")
        .env_remove("GO111MODULE")
        .output()
        .unwrap_or_else(|e| panic!("failed to run `go build`: {e}\n{INSTALL_HINT}"));
    if !output.status.success() {
        let _ = fs::remove_file(&tmp_bin);
        panic!(
            "building the evanphx harness in {} failed ({}):\n{}{}\n{INSTALL_HINT}",
            module.display(),
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr),
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
