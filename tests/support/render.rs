//! The shipped manifests rendered with kustomize (`kubectl kustomize`), as shipped, with
//! opt-in components enabled, or with more user-data Secrets granted, each the way
//! `manifests/kustomization.yaml` tells an administrator to (its commented-out entries
//! uncommented, its one-line grant patch added, its other example patches uncommented).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// kubectl with kustomize: $KUBECTL, the one scripts/check-manifests installs, or PATH's.
pub fn kubectl() -> PathBuf {
    if let Ok(k) = std::env::var("KUBECTL") {
        return k.into();
    }
    let venv = Path::new(&std::env::var("HOME").unwrap_or_else(|_| "/tmp".into()))
        .join(".cache/bootimage-webhook/venv/bin/kubectl");
    if venv.exists() {
        venv
    } else {
        "kubectl".into()
    }
}

/// `dir` (relative to the repository) as shipped.
pub fn render(dir: &str) -> Vec<Value> {
    render_at(Path::new(env!("CARGO_MANIFEST_DIR")), dir)
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// The OpenShift build with the opt-in `component` enabled as the manifests' README says:
/// its commented-out entry in manifests/kustomization.yaml uncommented.
pub fn render_with_component(component: &str) -> Vec<Value> {
    render_with(&[component], &[])
}

/// The OpenShift build with each of `components` enabled (see `render_with_component`).
pub fn render_with_components(components: &[&str]) -> Vec<Value> {
    render_with(components, &[])
}

/// The OpenShift build with `components` enabled and each Secret of `grant` granted by
/// the one-line patch manifests/kustomization.yaml documents (its example line, with the
/// Secret's name).
pub fn render_with(components: &[&str], grant: &[&str]) -> Vec<Value> {
    render_edited(components, grant, &[])
}

/// The OpenShift build with `components` enabled and the example patch lines of
/// manifests/kustomization.yaml that contain each of `marks`, uncommented as written.
pub fn render_with_documented(components: &[&str], marks: &[&str]) -> Vec<Value> {
    render_edited(components, &[], marks)
}

fn render_edited(components: &[&str], grant: &[&str], marks: &[&str]) -> Vec<Value> {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("manifests");
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests"),
        &copy,
    );
    let kustomization = copy.join("kustomization.yaml");
    let mut text = std::fs::read_to_string(&kustomization).unwrap();
    for component in components {
        let commented = format!("  # - components/{component}\n");
        assert!(
            text.contains(&commented),
            "manifests/kustomization.yaml has no commented-out entry for {component}"
        );
        text = text.replace(&commented, &format!("  - components/{component}\n"));
    }
    let example = |mark: &str| {
        text.lines()
            .find(|l| l.starts_with("#   - {target: ") && l.contains(mark))
            .unwrap_or_else(|| panic!("manifests/kustomization.yaml documents no {mark} patch"))
            .trim_start_matches('#')
            .to_owned()
    };
    let grant_line = "{kind: Role, name: bootimage-webhook-user-data-secrets}";
    let mut lines: Vec<String> = grant
        .iter()
        .map(|name| example(grant_line).replace("infra-user-data-managed", name))
        .collect();
    lines.extend(marks.iter().map(|mark| example(mark)));
    if !lines.is_empty() {
        let patches = format!("patches:\n{}\n", lines.join("\n"));
        assert!(text.contains("\n# patches:\n"), "no commented-out patches:");
        text = text.replacen("\n# patches:\n", &format!("\n{patches}"), 1);
    }
    std::fs::write(&kustomization, text).unwrap();
    render_at(dir.path(), "manifests")
}

fn render_at(root: &Path, dir: &str) -> Vec<Value> {
    let home = tempfile::tempdir().unwrap();
    let out = Command::new(kubectl())
        .args(["kustomize", dir])
        .current_dir(root)
        .env_remove("KUBECONFIG")
        .env("HOME", home.path())
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "kubectl ({}): {e}; run scripts/check-manifests once to install it",
                kubectl().display()
            )
        });
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    bootimage_webhook::core::snapshot::parse_documents(&String::from_utf8(out.stdout).unwrap())
        .unwrap()
        .into_iter()
        .filter(|d| !d.is_null())
        .collect()
}

/// The one object of `kind` called `name`.
pub fn find<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

/// The strings of a JSON array (nothing for anything else).
pub fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(str::to_owned))
        .collect()
}

/// The webhook container's `--user-data-secrets`: the names after the flag, which ends
/// its command, in its args.
pub fn user_data_secrets_of(docs: &[Value]) -> Vec<String> {
    let c =
        &find(docs, "Deployment", "bootimage-webhook")["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(
        strings(&c["command"]).last().map(String::as_str),
        Some("--user-data-secrets"),
        "{c}"
    );
    strings(&c["args"])
}

/// `components`, and the importer's component first when one of them needs it.
pub fn with_what_it_needs<'a>(components: &[&'a str]) -> Vec<&'a str> {
    use bootimage_webhook::cluster::apis;
    let mut out = Vec::new();
    if components.iter().any(|c| apis::NEED_IMPORTER.contains(c))
        && !components.contains(&apis::IMPORTER_COMPONENT)
    {
        out.push(apis::IMPORTER_COMPONENT);
    }
    out.extend_from_slice(components);
    out
}
