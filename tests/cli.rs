//! The binary as people use it: `preview`, `certs`, `serve` errors, and the README's first
//! run (`serve --dev` and the curl line it prints).

mod support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::Value;
use support::{CURRENT_ARM, CURRENT_X86, fixture_path};

const BIN: &str = env!("CARGO_BIN_EXE_bootimage-webhook");

fn repo(rel: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn run(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().unwrap()
}

fn preview(args: &[&str]) -> Value {
    let out = run(&[&["preview"], args].concat());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn boot_image(v: &Value) -> &str {
    v["machineSet"]["spec"]["template"]["spec"]["providerSpec"]["value"]["disks"][0]["image"]
        .as_str()
        .unwrap()
}

#[test]
fn preview_the_example_with_the_embedded_configmap() {
    let example = repo("examples/machineset-gcp.yaml");
    let v = preview(&[
        "--machineset-file",
        example.to_str().unwrap(),
        "--control-plane-arch",
        "amd64",
    ]);
    assert_eq!(v["reason"], "Updated");
    assert_eq!(boot_image(&v), CURRENT_X86);
    assert_eq!(v["patch"].as_array().unwrap().len(), 2);
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys, ["reason", "message", "patch", "machineSet"]);
    // The printed MachineSet is the input with the patch applied, applied independently.
    let input =
        bootimage_webhook::snapshot::parse_document(&std::fs::read_to_string(&example).unwrap())
            .unwrap();
    assert_eq!(
        support::evanphx::apply(&input, &v["patch"]).unwrap(),
        v["machineSet"]
    );
}

#[test]
fn preview_follows_the_flags() {
    let ms = fixture_path("machineset-gcp-build02-infra-a.yaml");
    let ms = ms.to_str().unwrap();
    let arm = preview(&["--machineset-file", ms, "--control-plane-arch", "arm64"]);
    assert_eq!(boot_image(&arm), CURRENT_ARM);
    let multi = preview(&["--machineset-file", ms, "--multi-arch"]);
    assert_eq!(multi["reason"], "ArchitectureUnknown");
    assert_eq!(multi["patch"], Value::Array(vec![]));
    // The real assembled ConfigMap is stamped; an unstamped one keeps the gate closed.
    let cm = fixture_path("configmap-coreos-bootimages.assembled.yaml");
    let stamped = preview(&[
        "--machineset-file",
        ms,
        "--configmap-file",
        cm.to_str().unwrap(),
        "--control-plane-arch",
        "x86_64",
    ]);
    assert_eq!(stamped["reason"], "Updated");
    let dir = tempfile::tempdir().unwrap();
    let unstamped = dir.path().join("cm.yaml");
    let text = std::fs::read_to_string(&cm).unwrap().replace(
        "MCOReleaseImageVersion: 4.21.0",
        "MCOReleaseImageVersion: 4.20.3",
    );
    std::fs::write(&unstamped, text).unwrap();
    let closed = preview(&[
        "--machineset-file",
        ms,
        "--configmap-file",
        unstamped.to_str().unwrap(),
    ]);
    assert_eq!(closed["reason"], "UpgradeInProgress");
    assert!(closed["message"].as_str().unwrap().contains("4.20.3"));
    let open = preview(&[
        "--machineset-file",
        ms,
        "--configmap-file",
        unstamped.to_str().unwrap(),
        "--assume-masters-updated",
    ]);
    assert_eq!(open["reason"], "Updated");
    // A YAML stream with a MachineSet and a MachineAutoscaler: the MachineSet is taken.
    let aws = preview(&[
        "--machineset-file",
        fixture_path("machineset-aws-build01-ci-tests-worker-us-east-1a.yaml")
            .to_str()
            .unwrap(),
    ]);
    assert_eq!(aws["reason"], "UnsupportedPlatform");
    // Flags come from the environment too.
    let out = Command::new(BIN)
        .arg("preview")
        .env("BOOTIMAGE_WEBHOOK_MACHINESET_FILE", ms)
        .env("BOOTIMAGE_WEBHOOK_MULTI_ARCH", "true")
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["reason"], "ArchitectureUnknown");
}

#[test]
fn preview_refuses_unreadable_input_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, body: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, body).unwrap();
        p.to_str().unwrap().to_owned()
    };
    let ms = fixture_path("machineset-gcp-build02-infra-a.yaml")
        .to_str()
        .unwrap()
        .to_owned();
    let bad_yaml = write("bad.yaml", "kind: [unclosed\n");
    let bad_json = write("bad.json", "{\"kind\": ");
    let scalar = write("scalar.yaml", "just a string\n");
    let two = write(
        "two.yaml",
        &format!("{0}\n---\n{0}", std::fs::read_to_string(&ms).unwrap()),
    );
    let bad_cm = write(
        "cm.yaml",
        "data:\n  releaseVersion: 4.21.0\n  stream: '{\"architectures\": 5}'\n",
    );
    for (args, says) in [
        (
            vec!["--machineset-file", "/nonexistent.yaml"],
            "reading /nonexistent.yaml",
        ),
        (vec!["--machineset-file", &bad_yaml], "invalid YAML"),
        (vec!["--machineset-file", &bad_json], "invalid JSON"),
        (vec!["--machineset-file", &scalar], "not a JSON/YAML object"),
        (vec!["--machineset-file", &two], "holds 2 MachineSets"),
        (
            vec!["--machineset-file", &ms, "--configmap-file", &bad_cm],
            "no architectures object",
        ),
        (
            vec!["--machineset-file", &ms, "--control-plane-arch", "riscv64"],
            "unknown architecture",
        ),
        (vec![], "--machineset-file"),
    ] {
        let out = run(&[&["preview"], args.as_slice()].concat());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}: nothing on stdout");
    }
}

#[test]
fn certs_writes_a_pair_and_prints_the_ca_bundle() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(&[
        "certs",
        "--out",
        dir.path().to_str().unwrap(),
        "--dns",
        "bootimage-webhook.bootimage-webhook.svc,localhost",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bundle = String::from_utf8(out.stdout).unwrap();
    let ca = base64::engine::general_purpose::STANDARD
        .decode(bundle.trim())
        .unwrap();
    assert_eq!(ca, std::fs::read(dir.path().join("ca.crt")).unwrap());
    let cert = std::fs::read(dir.path().join("tls.crt")).unwrap();
    let key = std::fs::read(dir.path().join("tls.key")).unwrap();
    bootimage_webhook::tls::certified_key(&cert, &key).unwrap();
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(dir.path().join("tls.key"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let out = run(&["certs", "--out", dir.path().to_str().unwrap()]);
    assert!(!out.status.success());
}

#[test]
fn serve_refuses_to_start_without_what_it_needs() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.pem");
    std::fs::write(&junk, "junk").unwrap();
    let junk = junk.to_str().unwrap();
    let cm = fixture_path("configmap-coreos-bootimages.assembled.yaml");
    for (args, says) in [
        (vec!["serve"], "--tls-cert-file"),
        (
            vec![
                "serve",
                "--tls-cert-file",
                junk,
                "--tls-private-key-file",
                junk,
            ],
            "loading the serving certificate",
        ),
        (
            vec![
                "serve",
                "--tls-cert-file",
                junk,
                "--tls-private-key-file",
                junk,
                "--configmap-file",
                cm.to_str().unwrap(),
                "--bind-address",
                "127.0.0.1:0",
                "--admin-address",
                "127.0.0.1:0",
            ],
            "loading the serving certificate",
        ),
        (
            vec!["serve", "--tls-min-version", "1.1"],
            "invalid value '1.1'",
        ),
        (
            vec!["serve", "--log-level", "info,[["],
            "invalid log filter",
        ),
    ] {
        let out = run(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    // Live mode with nowhere to find a cluster: a clear error, not a hang.
    support::dev_certs().write(dir.path()).unwrap();
    let out = Command::new(BIN)
        .args([
            "serve",
            "--bind-address",
            "127.0.0.1:0",
            "--admin-address",
            "127.0.0.1:0",
        ])
        .arg("--tls-cert-file")
        .arg(dir.path().join("tls.crt"))
        .arg("--tls-private-key-file")
        .arg(dir.path().join("tls.key"))
        .env("KUBECONFIG", dir.path().join("no-such-kubeconfig"))
        .env_remove("KUBERNETES_SERVICE_HOST")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("building the Kubernetes client"), "{err}");
}

#[test]
fn readme_first_run_serve_dev_and_its_curl_line() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("examples")).unwrap();
    std::fs::copy(
        repo("examples/review-gcp-update.json"),
        dir.path().join("examples/review-gcp-update.json"),
    )
    .unwrap();
    let mut child = Command::new(BIN)
        .args([
            "serve",
            "--dev",
            "--bind-address",
            "127.0.0.1:0",
            "--admin-address",
            "127.0.0.1:0",
            "--shutdown-delay",
            "0s",
        ])
        .current_dir(dir.path())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap())
        .lines()
        .map_while(Result::ok);
    let mut seen = Vec::new();
    let started = Instant::now();
    let mut curl = String::new();
    for line in lines.by_ref() {
        seen.push(line.clone());
        if line.trim_start().starts_with("curl ") {
            curl = line.trim().trim_end_matches('\\').to_owned();
        } else if !curl.is_empty() && line.trim_start().starts_with("--data") {
            curl.push_str(line.trim());
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "{seen:?}");
    }
    assert!(!curl.is_empty(), "no curl line printed: {seen:?}");
    assert!(dir.path().join("certs/ca.crt").exists() && dir.path().join("certs/tls.key").exists());
    let out = Command::new("sh")
        .arg("-c")
        .arg(&curl)
        .current_dir(dir.path())
        .output()
        .unwrap();
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let exit = child.wait().unwrap();
    assert!(
        out.status.success(),
        "{curl}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["response"]["allowed"], true);
    assert_eq!(v["response"]["patchType"], "JSONPatch");
    assert!(v["response"]["patch"].is_string());
    assert!(exit.success());
}

#[test]
fn json_logs_on_request() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(BIN)
        .args([
            "--log-format",
            "json",
            "serve",
            "--dev",
            "--bind-address",
            "127.0.0.1:0",
            "--admin-address",
            "127.0.0.1:0",
        ])
        .current_dir(dir.path())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let first = BufReader::new(child.stdout.take().unwrap())
        .lines()
        .next()
        .unwrap()
        .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    let v: Value = serde_json::from_str(&first).unwrap_or_else(|e| panic!("{e}: {first}"));
    assert_eq!(v["level"], "INFO");
    assert!(
        v["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{first}"
    );
    assert!(v["timestamp"].is_string());
}
