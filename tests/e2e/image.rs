//! The container image, started as the Deployment starts it.
//!
//! Without `BOOTIMAGE_WEBHOOK_IMAGE`, the image is the Dockerfile's target `runtime-prebuilt`
//! around the static amd64 binary of `scripts/build-static` (`scripts/test` builds it first),
//! on the local distroless static stand-in of `scripts/image-bases`; with it (`scripts/build-image` sets it), the image named there,
//! e.g. the full Dockerfile build. Either way it is run with podman (runc) as
//! `manifests/base/deployment.yaml` runs it: the image's own user (the Deployment sets none),
//! a read-only root file system, no capabilities, no privilege escalation, `/tmp` a small
//! scratch mount, the serving certificate in a kubelet-style Secret volume at the
//! Deployment's mount path, the Deployment's args and environment. Offline, since there is
//! no cluster: the ConfigMap comes from a file (`BOOTIMAGE_WEBHOOK_CONFIGMAP_FILE`).
//!
//! Checked: the process runs as 65532 with `/` mounted read-only, `/readyz` turns ready,
//! `examples/review-gcp-update.json` posted over TLS by a client that verifies the
//! certificate gets the patch the README shows, SIGTERM stops it cleanly within the
//! Deployment's grace period, and the image has no shell (`--entrypoint /bin/sh` fails,
//! and no shell is among its files). The image's size is printed.
//!
//! Needs podman and runc (`scripts/install-image-deps`, which `scripts/test` runs) and root.

use crate::support;

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::image::{
    CONFIGMAP_DIR, CONFIGMAP_FIXTURE, Container, Image, Process, Volumes,
    a_review_over_tls_is_patched, deployment_security, image_under_test, podman, podman_ok, probe,
    repo, run_flags, unique,
};

/// A line for the run's output and for scripts/test's summary.
fn report(line: String) {
    support::report::report("image", &line);
}

/// What the Deployment's one container is started with.
struct Deployment {
    args: Vec<String>,
    /// The `value` environment entries, and the `fieldRef` ones with stand-in values.
    env: Vec<(String, String)>,
    tls_mount: String,
    tmp_mount: String,
    tmp_size: String,
    read_only_root: bool,
    drop_all_capabilities: bool,
    no_privilege_escalation: bool,
    run_as_user: Option<u64>,
    webhook_port: u16,
    admin_port: u16,
    grace: Duration,
}

/// The Deployment as `manifests/base/deployment.yaml` writes it.
fn deployment() -> Deployment {
    let text = std::fs::read_to_string(repo("manifests/base/deployment.yaml")).unwrap();
    let d: Value = serde_saphyr::from_str(&text).unwrap();
    let pod = &d["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    let sc = &c["securityContext"];
    Deployment {
        // The command after the image's entrypoint, then the args (the user-data
        // Secrets of --user-data-secrets, which ends the command).
        args: strings(&c["command"])
            .into_iter()
            .skip(1)
            .chain(strings(&c["args"]))
            .collect(),
        env: env_with_stand_ins(c),
        tls_mount: mount_path(c, "tls"),
        tmp_mount: mount_path(c, "tmp"),
        tmp_size: tmp_size_limit(pod),
        read_only_root: sc["readOnlyRootFilesystem"] == true,
        drop_all_capabilities: sc["capabilities"]["drop"] == json!(["ALL"]),
        no_privilege_escalation: sc["allowPrivilegeEscalation"] == false,
        run_as_user: sc["runAsUser"]
            .as_u64()
            .or(pod["securityContext"]["runAsUser"].as_u64()),
        webhook_port: container_port(c, "webhook"),
        admin_port: container_port(c, "admin"),
        grace: Duration::from_secs(pod["terminationGracePeriodSeconds"].as_u64().unwrap()),
    }
}

/// A YAML list of strings.
fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_owned())
        .collect()
}

/// The container's environment: `value` entries as written, `fieldRef` ones with the
/// stand-in values a pod of this name and namespace would get.
fn env_with_stand_ins(c: &Value) -> Vec<(String, String)> {
    c["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let name = e["name"].as_str().unwrap().to_owned();
            let value = match e["value"].as_str() {
                Some(v) => v.to_owned(),
                None => {
                    let path = e["valueFrom"]["fieldRef"]["fieldPath"].as_str().unwrap();
                    match path {
                        "metadata.name" => "bootimage-webhook-image-test".to_owned(),
                        "metadata.namespace" => "bootimage-webhook".to_owned(),
                        other => panic!("fieldRef {other} has no stand-in here"),
                    }
                }
            };
            (name, value)
        })
        .collect()
}

/// Where the container mounts `volume`.
fn mount_path(c: &Value, volume: &str) -> String {
    c["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == volume)
        .unwrap_or_else(|| panic!("no volumeMount {volume}"))["mountPath"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// The `tmp` emptyDir's size limit in podman's words (`16Mi` -> `16m`).
fn tmp_size_limit(pod: &Value) -> String {
    let tmp_volume = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "tmp")
        .unwrap();
    tmp_volume["emptyDir"]["sizeLimit"]
        .as_str()
        .unwrap()
        .trim_end_matches('i')
        .to_lowercase()
}

/// The container port named `name`.
fn container_port(c: &Value, name: &str) -> u16 {
    c["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap()["containerPort"]
        .as_u64()
        .unwrap() as u16
}

/// Every path in the image's file system, from `podman export` of a container never started.
fn image_files(image: &str) -> Vec<String> {
    let created = Container(podman_ok(&["create", "--runtime", "runc", image]));
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("podman export '{}' | tar -t", created.0))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.trim_start_matches("./").trim_end_matches('/').to_owned())
        .collect()
}

fn no_shell(image: &Image) {
    let flags = run_flags();
    let mut base: Vec<&str> = vec!["run", "--rm", "--network", "none"];
    base.extend(flags.iter().map(String::as_str));
    // The same flags start the binary, so that the failure below is the missing shell's.
    let mut control = base.clone();
    control.extend(["--entrypoint", "/usr/local/bin/bootimage-webhook"]);
    control.extend([image.name.as_str(), "--version"]);
    let version = podman_ok(&control);
    assert!(version.starts_with("bootimage-webhook "), "{version}");

    let mut shell = base.clone();
    shell.extend(["--entrypoint", "/bin/sh", image.name.as_str(), "-c", "true"]);
    let out = podman(&shell);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "a shell ran in the image: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        err.contains("/bin/sh") && (err.contains("no such file") || err.contains("not found")),
        "--entrypoint /bin/sh failed for another reason: {err}"
    );

    let files = image_files(&image.name);
    assert!(
        files.iter().any(|f| f == "usr/local/bin/bootimage-webhook"),
        "the binary is not in the image"
    );
    let shells: Vec<&String> = files
        .iter()
        .filter(|f| {
            let name = f.rsplit('/').next().unwrap();
            matches!(name, "sh" | "bash" | "dash" | "ash" | "busybox")
        })
        .collect();
    assert!(shells.is_empty(), "shells in the image: {shells:?}");
    assert!(
        !files.iter().any(|f| f == "var/lib/dpkg/status"),
        "a dpkg database in the image"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_image_runs_as_the_deployment_runs_it() {
    let _alone = support::alone();
    let image = image_under_test();
    if let Some(built) = &image.built {
        report(built.clone());
    }
    its_config_is_what_the_deployment_expects(&image);
    no_shell(&image);
    let d = deployment();
    assert_eq!(
        d.run_as_user, None,
        "the Deployment sets no user: the image's applies"
    );
    assert!(d.read_only_root && d.drop_all_capabilities && d.no_privilege_escalation);

    let volumes = Volumes::as_the_kubelet_lays_them_out();
    let started = Instant::now();
    let (container, name) = run_as_the_deployment(&image, &d, &volumes);
    let webhook = container.host_port(d.webhook_port);
    let admin = container.host_port(d.admin_port);
    container.wait_ready(admin, Duration::from_secs(30));
    report(format!(
        "ready after {:.1} s",
        started.elapsed().as_secs_f64()
    ));
    assert_eq!(probe(admin, "/healthz"), Some(200));

    the_process_is_confined(&container, &d);
    a_review_over_tls_is_patched(webhook, &volumes.certs).await;
    let (metrics_status, metrics) = support::admin_get(admin, "/metrics").await;
    assert_eq!(metrics_status, 200);
    assert!(
        metrics.contains("bootimage_webhook_"),
        "no metrics of ours:\n{metrics}"
    );

    // SIGTERM, as the kubelet stops it: a clean exit within the grace period.
    let grace = d.grace.as_secs().to_string();
    let stopping = Instant::now();
    podman_ok(&["stop", "--time", &grace, &name]);
    let exit = container.inspect("{{.State.ExitCode}}");
    let logs = container.logs();
    assert_eq!(exit, "0", "exit code after SIGTERM; log:\n{logs}");
    assert!(stopping.elapsed() < d.grace, "{:?}", stopping.elapsed());
    assert!(logs.contains("received SIGTERM"), "{logs}");
    assert!(
        logs.contains("Updated"),
        "the review's decision is not in the log:\n{logs}"
    );
    report(format!(
        "{} passed in {:.1} s (stopped after {:.1} s)",
        image.name,
        started.elapsed().as_secs_f64(),
        stopping.elapsed().as_secs_f64()
    ));
}

/// Its size reported; a numeric user (runAsNonRoot needs one) and the binary as entrypoint.
fn its_config_is_what_the_deployment_expects(image: &Image) {
    let size: u64 = podman_ok(&["image", "inspect", "--format", "{{.Size}}", &image.name])
        .parse()
        .unwrap();
    report(format!(
        "{} is {size} bytes ({:.1} MB)",
        image.name,
        size as f64 / 1e6
    ));
    let inspect = |format: &str| podman_ok(&["image", "inspect", "--format", format, &image.name]);
    assert_eq!(
        inspect("{{.Config.User}}"),
        "65532:65532",
        "runAsNonRoot needs a numeric user"
    );
    assert_eq!(
        inspect("{{json .Config.Entrypoint}}"),
        r#"["/usr/local/bin/bootimage-webhook"]"#
    );
}

/// `podman run` with the Deployment's security context, mounts, environment and args,
/// offline (there is no cluster to follow). Returns the container and its name.
fn run_as_the_deployment(image: &Image, d: &Deployment, v: &Volumes) -> (Container, String) {
    let name = unique("bootimage-webhook-image-test");
    let mut args: Vec<String> = vec![
        "run".into(),
        "--detach".into(),
        "--name".into(),
        name.clone(),
    ];
    args.extend(run_flags());
    // Loopback-only published ports through slirp4netns: needs no bridge or iptables.
    args.extend([
        "--network".into(),
        "slirp4netns:port_handler=slirp4netns".into(),
        "--publish".into(),
        format!("127.0.0.1::{}", d.webhook_port),
        "--publish".into(),
        format!("127.0.0.1::{}", d.admin_port),
    ]);
    args.extend(deployment_security(&format!(
        "{}:rw,size={}",
        d.tmp_mount, d.tmp_size
    )));
    args.extend([
        "--volume".into(),
        format!("{}:{}:ro", v.tls.display(), d.tls_mount),
        "--volume".into(),
        format!("{}:{CONFIGMAP_DIR}:ro", v.configmap.display()),
    ]);
    let offline = [
        (
            "BOOTIMAGE_WEBHOOK_CONFIGMAP_FILE",
            format!("{CONFIGMAP_DIR}/{CONFIGMAP_FIXTURE}"),
        ),
        ("BOOTIMAGE_WEBHOOK_ASSUME_MASTERS_UPDATED", "true".into()),
        ("BOOTIMAGE_WEBHOOK_CONTROL_PLANE_ARCH", "amd64".into()),
    ];
    let env = d.env.iter().map(|(k, v)| (k.as_str(), v.clone()));
    for (k, v) in env.chain(offline) {
        args.extend(["--env".into(), format!("{k}={v}")]);
    }
    args.push(image.name.clone());
    args.extend(d.args.iter().cloned());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    (Container(podman_ok(&args)), name)
}

/// The process runs as the image's user, with / read-only, a tmpfs, and no capabilities.
fn the_process_is_confined(container: &Container, d: &Deployment) {
    let process = Process::of(container.inspect("{{.State.Pid}}"));
    for key in ["Uid", "Gid"] {
        assert_eq!(process.status(key), ["65532"; 4], "{key}");
    }
    assert!(
        process.root_read_only(),
        "root not read-only: {:?}",
        process.mount("/")
    );
    let tmp = process
        .mount(&d.tmp_mount)
        .unwrap_or_else(|| panic!("no {} mount", d.tmp_mount));
    assert!(tmp.contains(" tmpfs "), "{tmp}");
    assert_eq!(
        process.status("CapEff"),
        ["0000000000000000"],
        "capabilities left"
    );
}
