//! The binary as people use it: `preview`, `certs`, `serve` errors, and the README's first
//! run (`serve --dev` and the curl line it prints).

use crate::support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::Value;
use support::binary::BIN;
use support::{CURRENT_ARM, CURRENT_X86, fixture_path};

mod serve_dev;

fn repo(rel: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn run(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().unwrap()
}

/// `preview`'s JSON lines, one per MachineSet.
fn preview_all(args: &[&str]) -> Vec<Value> {
    let out = run(&[&["preview"], args].concat());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    json_lines(&out.stdout)
}

fn json_lines(stdout: &[u8]) -> Vec<Value> {
    let text = std::str::from_utf8(stdout).unwrap();
    assert!(text.is_empty() || text.ends_with('\n'), "{text}");
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn preview(args: &[&str]) -> Value {
    let mut all = preview_all(args);
    assert_eq!(all.len(), 1, "{all:?}");
    all.remove(0)
}

fn boot_image(v: &Value) -> &str {
    v["machineSet"]["spec"]["template"]["spec"]["providerSpec"]["value"]["disks"][0]["image"]
        .as_str()
        .unwrap()
}

#[test]
fn preview_the_example_with_the_embedded_configmap() {
    let _parallel = support::parallel();
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
    let input = bootimage_webhook::core::snapshot::parse_document(
        &std::fs::read_to_string(&example).unwrap(),
    )
    .unwrap();
    assert_eq!(
        support::oracle::apply(&input, &v["patch"]).unwrap(),
        v["machineSet"]
    );
}

#[test]
fn preview_follows_the_flags() {
    let _parallel = support::parallel();
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
    assert_eq!(aws["reason"], "AMIUnclassified");
    assert!(
        aws["message"]
            .as_str()
            .unwrap()
            .contains("would need EC2 to classify"),
        "{aws}"
    );
    // Flags come from the environment too.
    let out = Command::new(BIN)
        .arg("preview")
        .env("BOOTIMAGE_WEBHOOK_MACHINESET_FILE", ms)
        .env("BOOTIMAGE_WEBHOOK_MULTI_ARCH", "true")
        .output()
        .unwrap();
    let v = json_lines(&out.stdout);
    assert_eq!(v[0]["reason"], "ArchitectureUnknown");
}

#[test]
fn preview_refuses_unreadable_input_clearly() {
    let _parallel = support::parallel();
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
    let configmap = fixture_path("configmap-coreos-bootimages.assembled.yaml")
        .to_str()
        .unwrap()
        .to_owned();
    let empty = write("empty.yaml", "---\n");
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
        (
            vec!["--machineset-file", &scalar],
            "is not an object but a string",
        ),
        (
            vec!["--machineset-file", &configmap],
            "holds no MachineSet (found ConfigMap/coreos-bootimages)",
        ),
        (vec!["--machineset-file", &empty], "holds no MachineSet"),
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
    let _parallel = support::parallel();
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
    bootimage_webhook::serve::tls::certified_key(&cert, &key).unwrap();
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
    let _parallel = support::parallel();
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
        (
            vec![
                "serve",
                "--artifact-base-url",
                "ftp://mirror.internal/rhcos/",
            ],
            "not an http:// or https:// URL",
        ),
    ] {
        let out = run(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    // The Deployment sets it by its variable: refused the same way, before anything starts.
    let out = Command::new(BIN)
        .arg("serve")
        .env(
            "BOOTIMAGE_WEBHOOK_ARTIFACT_BASE_URL",
            "mirror.internal/rhcos/",
        )
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("--artifact-base-url") && err.contains("not an http:// or https:// URL"),
        "{err}"
    );
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
    let _parallel = support::parallel();
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
    let _parallel = support::parallel();
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

/// What administrators have: a `kind: List` from `oc get machinesets -o yaml`, several YAML
/// documents, standard input. One line per MachineSet, in input order.
#[test]
fn preview_takes_lists_streams_and_stdin() {
    let _parallel = support::parallel();
    let gcp = support::fixture("machineset-gcp-build02-infra-a.yaml");
    let current = already_current(&gcp);
    let dir = tempfile::tempdir().unwrap();
    let list = dir.path().join("list.yaml");
    let yaml_list = yaml_list_of(&gcp, &current);
    std::fs::write(&list, &yaml_list).unwrap();
    let args = ["--control-plane-arch", "amd64", "--machineset-file"];
    let from_list = preview_all(&[&args[..], &[list.to_str().unwrap()]].concat());
    assert_eq!(
        names_and_reasons(&from_list),
        [
            ("build02-fmpjh-infra-a".to_owned(), "Updated".to_owned()),
            ("already-current".to_owned(), "UpToDate".to_owned())
        ]
    );
    assert_eq!(boot_image(&from_list[0]), CURRENT_X86);

    // A JSON MachineSetList (`oc get machinesets -o json`), from standard input.
    let json_list = serde_json::json!({"apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSetList", "items": [current, gcp]});
    let out = preview_amd64_from_stdin(&serde_json::to_vec(&json_list).unwrap());
    assert!(out.status.success());
    assert_eq!(
        names_and_reasons(&json_lines(&out.stdout)),
        [
            ("already-current".to_owned(), "UpToDate".to_owned()),
            ("build02-fmpjh-infra-a".to_owned(), "Updated".to_owned())
        ]
    );

    // A YAML stream: the List, then a GCP MachineSet and its MachineAutoscaler (skipped,
    // and said so on standard error).
    let aws = std::fs::read_to_string(fixture_path(
        "machineset-aws-build01-ci-tests-worker-us-east-1a.yaml",
    ))
    .unwrap();
    let stream = dir.path().join("stream.yaml");
    std::fs::write(&stream, format!("{yaml_list}---\n{aws}")).unwrap();
    let out = run(&[&["preview"], &args[..], &[stream.to_str().unwrap()]].concat());
    assert!(out.status.success());
    assert_eq!(json_lines(&out.stdout).len(), 3);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("skipping MachineAutoscaler/build01-9hdwj-ci-tests-worker-us-east-1a"),
        "{err}"
    );
}

/// `gcp` renamed `already-current` and already on the current x86 boot image: a
/// MachineSet `preview` leaves as it is, next to one it updates.
fn already_current(gcp: &Value) -> Value {
    let mut current = gcp.clone();
    current["metadata"]["name"] = "already-current".into();
    current["spec"]["template"]["spec"]["providerSpec"]["value"]["disks"][0]["image"] =
        CURRENT_X86.into();
    current
}

/// A `kind: List` as `oc get machinesets -o yaml` writes it, with `first` and `second` as
/// items (JSON is YAML's flow style).
fn yaml_list_of(first: &Value, second: &Value) -> String {
    format!(
        "apiVersion: v1\nkind: List\nmetadata:\n  resourceVersion: \"\"\nitems:\n- {}\n- {}\n",
        serde_json::to_string(first).unwrap(),
        serde_json::to_string(second).unwrap()
    )
}

/// Each `preview` line's MachineSet name and reason, in output order.
fn names_and_reasons(v: &[Value]) -> Vec<(String, String)> {
    v.iter()
        .map(|r| {
            (
                r["machineSet"]["metadata"]["name"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
                r["reason"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// `preview --control-plane-arch amd64 --machineset-file -` with `input` on standard input.
fn preview_amd64_from_stdin(input: &[u8]) -> Output {
    let mut child = Command::new(BIN)
        .args([
            "preview",
            "--control-plane-arch",
            "amd64",
            "--machineset-file",
            "-",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(input).unwrap();
    }
    child.wait_with_output().unwrap()
}

/// `--exit-code` as `git diff --exit-code`: 2 when something would change, 0 when not,
/// 1 for an error (also for a wrong flag, so 2 always means "would change").
#[test]
fn preview_exit_codes() {
    let _parallel = support::parallel();
    let stale = fixture_path("machineset-gcp-build02-infra-a.yaml");
    let stale = stale.to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut ms = support::fixture("machineset-gcp-build02-infra-a.yaml");
    ms["spec"]["template"]["spec"]["providerSpec"]["value"]["disks"][0]["image"] =
        CURRENT_X86.into();
    let current = dir.path().join("current.json");
    std::fs::write(&current, serde_json::to_vec(&ms).unwrap()).unwrap();
    let code = |args: &[&str]| {
        run(&[&["preview", "--control-plane-arch", "amd64"], args].concat())
            .status
            .code()
    };
    assert_eq!(code(&["--machineset-file", stale]), Some(0));
    assert_eq!(code(&["--machineset-file", stale, "--exit-code"]), Some(2));
    assert_eq!(
        code(&[
            "--machineset-file",
            current.to_str().unwrap(),
            "--exit-code"
        ]),
        Some(0)
    );
    assert_eq!(
        code(&["--machineset-file", "/nonexistent", "--exit-code"]),
        Some(1)
    );
    assert_eq!(
        code(&["--machineset-file", stale, "--no-such-flag"]),
        Some(1)
    );
    let help = run(&["preview", "--help"]);
    assert_eq!(help.status.code(), Some(0));
    let help = String::from_utf8_lossy(&help.stdout);
    for says in [
        "kind: List",
        "standard input",
        "one JSON object per MachineSet",
        "Exit status",
        "--exit-code",
        "embedded",
    ] {
        assert!(
            help.contains(says),
            "preview --help does not say {says:?}:\n{help}"
        );
    }
    assert!(!help.contains("offline mode instead of watching"), "{help}");
}

/// `preview ... | head -c 50`: the reader goes away; we stop quietly, no panic.
#[test]
fn preview_into_a_closed_pipe_ends_quietly() {
    let _parallel = support::parallel();
    let gcp = support::fixture("machineset-gcp-build02-infra-a.yaml");
    let items: Vec<Value> = (0..2000).map(|_| gcp.clone()).collect();
    let dir = tempfile::tempdir().unwrap();
    let list = dir.path().join("many.json");
    std::fs::write(
        &list,
        serde_json::to_vec(&serde_json::json!({"kind": "List", "items": items})).unwrap(),
    )
    .unwrap();
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "set -o pipefail; {BIN} preview --machineset-file {} 2>err | head -c 50 >/dev/null; echo $?; cat err",
            list.display()
        ))
        .current_dir(dir.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let (code, err) = text.split_once('\n').unwrap();
    assert_eq!(code, "0", "{text}");
    assert!(err.is_empty(), "stderr: {err}");
}

#[test]
fn certs_refuses_to_overwrite_without_force() {
    let _parallel = support::parallel();
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().to_str().unwrap();
    let first = run(&["certs", "--out", out_dir, "--dns", "localhost"]);
    assert!(first.status.success());
    let ca = std::fs::read(dir.path().join("ca.crt")).unwrap();
    let again = run(&["certs", "--out", out_dir, "--dns", "localhost"]);
    assert_eq!(again.status.code(), Some(1));
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(err.contains("exists") && err.contains("--force"), "{err}");
    assert_eq!(
        std::fs::read(dir.path().join("ca.crt")).unwrap(),
        ca,
        "untouched"
    );
    let forced = run(&["certs", "--out", out_dir, "--dns", "localhost", "--force"]);
    assert!(forced.status.success());
    assert_ne!(
        std::fs::read(dir.path().join("ca.crt")).unwrap(),
        ca,
        "a new CA"
    );
}
