//! The rendered manifests agree with the code: webhook path and ports, the opt-out label,
//! and RBAC that covers every call in `src/cluster/apis.rs` and nothing more.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use bootimage_webhook::cluster::apis::{self, Scope};
use bootimage_webhook::core::decision::OPT_OUT_LABEL;
use bootimage_webhook::serve::server::WEBHOOK_PATH;
use serde_json::Value;

const OWN_NAMESPACE: &str = "bootimage-webhook";
const SERVICE_ACCOUNT: &str = "bootimage-webhook";

/// kubectl with kustomize: $KUBECTL, the one scripts/check-manifests installs, or PATH's.
fn kubectl() -> PathBuf {
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

fn render(dir: &str) -> Vec<Value> {
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
fn render_with_component(component: &str) -> Vec<Value> {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("manifests");
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests"),
        &copy,
    );
    let kustomization = copy.join("kustomization.yaml");
    let text = std::fs::read_to_string(&kustomization).unwrap();
    let commented = format!("  # - components/{component}\n");
    assert!(
        text.contains(&commented),
        "manifests/kustomization.yaml has no commented-out entry for {component}"
    );
    let enabled = text.replace(&commented, &format!("  - components/{component}\n"));
    std::fs::write(&kustomization, enabled).unwrap();
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

fn find<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(str::to_owned))
        .collect()
}

#[test]
fn webhook_configuration_matches_the_server() {
    for build in ["manifests", "manifests/overlays/cert-manager"] {
        let docs = render(build);
        let mwc = docs
            .iter()
            .find(|d| d["kind"] == "MutatingWebhookConfiguration")
            .unwrap();
        let hook = &mwc["webhooks"][0];
        let svc_ref = &hook["clientConfig"]["service"];
        assert_eq!(svc_ref["path"], WEBHOOK_PATH, "{build}");
        let port = svc_ref["port"].as_i64().unwrap_or(443);
        let service = find(&docs, "Service", svc_ref["name"].as_str().unwrap());
        assert_eq!(service["metadata"]["namespace"], svc_ref["namespace"]);
        let sp = service["spec"]["ports"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["port"] == port)
            .expect("service port");
        let deploy = find(&docs, "Deployment", "bootimage-webhook");
        let container = &deploy["spec"]["template"]["spec"]["containers"][0];
        let cport = container["ports"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == sp["targetPort"])
            .expect("target port");
        assert_eq!(
            cport["containerPort"], 9443,
            "the server's default --bind-address port"
        );
        let admin = container["ports"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == "admin")
            .unwrap();
        assert_eq!(
            admin["containerPort"], 8080,
            "the server's default --admin-address port"
        );
        assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
        assert_eq!(container["livenessProbe"]["httpGet"]["path"], "/healthz");
        // The opt-out label: the objectSelector excludes exactly the code's label.
        let exprs = hook["objectSelector"]["matchExpressions"]
            .as_array()
            .unwrap();
        assert!(
            exprs.iter().any(|e| e["key"] == OPT_OUT_LABEL
                && e["operator"] == "NotIn"
                && strings(&e["values"]) == ["false"]),
            "{build}: {exprs:?}"
        );
        assert_eq!(strings(&hook["admissionReviewVersions"]), ["v1"]);
        assert_eq!(hook["sideEffects"], "None");
        assert_eq!(hook["failurePolicy"], "Ignore");
        assert_eq!(hook["reinvocationPolicy"], "IfNeeded");
        let rule = &hook["rules"][0];
        assert_eq!(strings(&rule["resources"]), ["machinesets"]);
        assert_eq!(strings(&rule["operations"]), ["CREATE", "UPDATE"]);
    }
}

/// One permission: (namespace or "" for cluster, group, resource, verb, name or "" for any).
type Grant = (String, String, String, String, String);

fn granted(docs: &[Value]) -> BTreeSet<Grant> {
    let bound: BTreeSet<(String, String, String)> = docs
        .iter()
        .filter(|d| d["kind"] == "RoleBinding" || d["kind"] == "ClusterRoleBinding")
        .filter(|b| {
            b["subjects"].as_array().into_iter().flatten().any(|s| {
                s["kind"] == "ServiceAccount"
                    && s["name"] == SERVICE_ACCOUNT
                    && s["namespace"] == OWN_NAMESPACE
            })
        })
        .map(|b| {
            let ns = if b["kind"] == "RoleBinding" {
                b["metadata"]["namespace"].as_str().unwrap().to_owned()
            } else {
                String::new()
            };
            (
                ns,
                b["roleRef"]["kind"].as_str().unwrap().to_owned(),
                b["roleRef"]["name"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let mut out = BTreeSet::new();
    for (ns, kind, name) in bound {
        let role_ns = if kind == "Role" {
            ns.clone()
        } else {
            String::new()
        };
        let role = docs
            .iter()
            .find(|d| {
                d["kind"] == kind
                    && d["metadata"]["name"] == name
                    && d["metadata"]["namespace"].as_str().unwrap_or("") == role_ns
            })
            .unwrap_or_else(|| panic!("bound {kind} {name} in {ns:?} is missing"));
        for rule in role["rules"].as_array().unwrap() {
            let names = strings(&rule["resourceNames"]);
            let names = if names.is_empty() {
                vec![String::new()]
            } else {
                names
            };
            for g in strings(&rule["apiGroups"]) {
                for r in strings(&rule["resources"]) {
                    for v in strings(&rule["verbs"]) {
                        for n in &names {
                            out.insert((ns.clone(), g.clone(), r.clone(), v.clone(), n.clone()));
                        }
                    }
                }
            }
        }
    }
    out
}

fn needed<'a>(calls: impl IntoIterator<Item = &'a apis::Call>) -> BTreeSet<Grant> {
    let mut out = BTreeSet::new();
    for call in calls {
        let ns = match call.scope {
            Scope::Cluster => String::new(),
            Scope::Namespace(n) => n.to_owned(),
            Scope::Own => OWN_NAMESPACE.to_owned(),
        };
        for verb in call.verbs {
            // create names no existing object: it cannot be narrowed by resourceNames.
            let names: Vec<&str> = if call.names.is_empty() || *verb == "create" {
                vec![""]
            } else {
                call.names.to_vec()
            };
            for n in names {
                out.insert((
                    ns.clone(),
                    call.group.to_owned(),
                    call.plural.to_owned(),
                    verb.to_string(),
                    n.to_owned(),
                ));
            }
        }
    }
    out
}

#[test]
fn rbac_is_exactly_the_calls_the_code_makes() {
    for build in ["manifests", "manifests/overlays/cert-manager"] {
        rbac_matches(build, &render(build), apis::ALL.iter());
    }
    // Each opt-in component adds exactly its own calls.
    for (component, calls) in apis::COMPONENTS {
        let build = format!("manifests + components/{component}");
        let docs = render_with_component(component);
        rbac_matches(&build, &docs, apis::ALL.iter().chain(calls.iter()));
    }
}

fn rbac_matches<'a>(build: &str, docs: &[Value], calls: impl Iterator<Item = &'a apis::Call>) {
    let calls: Vec<&apis::Call> = calls.collect();
    let granted = granted(docs);
    let needed = needed(calls.iter().copied());
    let missing: Vec<_> = needed.difference(&granted).collect();
    let extra: Vec<_> = granted.difference(&needed).collect();
    let callers: Vec<&str> = calls
        .iter()
        .filter(|c| missing.iter().any(|m| m.2 == c.plural && m.1 == c.group))
        .map(|c| c.why)
        .collect();
    assert!(
        missing.is_empty(),
        "{build}: the code calls these without RBAC: {missing:#?} (from {callers:?})"
    );
    assert!(
        extra.is_empty(),
        "{build}: RBAC grants more than the code calls: {extra:#?}"
    );
}

/// Each component turns on the flag the code reads, and adds nothing else to the
/// Deployment: the default build never has it.
#[test]
fn each_component_sets_its_flag() {
    for (component, flag) in [
        (
            "aws-machine-api-credentials",
            "BOOTIMAGE_WEBHOOK_AWS_MACHINE_API_CREDENTIALS",
        ),
        (
            "upgrade-stub-ignition",
            "BOOTIMAGE_WEBHOOK_UPGRADE_STUB_IGNITION",
        ),
    ] {
        component_sets_its_flag(component, flag);
    }
}

fn component_sets_its_flag(component: &str, flag: &str) {
    let env_of = |docs: &[Value]| -> Vec<Value> {
        let deploy = find(docs, "Deployment", "bootimage-webhook");
        deploy["spec"]["template"]["spec"]["containers"][0]["env"]
            .as_array()
            .unwrap()
            .clone()
    };
    let plain = env_of(&render("manifests"));
    assert!(!plain.iter().any(|e| e["name"] == flag));
    let with = env_of(&render_with_component(component));
    let added: Vec<&Value> = with.iter().filter(|e| !plain.contains(e)).collect();
    assert_eq!(added, [&serde_json::json!({"name": flag, "value": "true"})]);
    // A variable no flag reads would be ignored without a word: the flag reads this one.
    let cli = <bootimage_webhook::config::Cli as clap::CommandFactory>::command();
    let serve = cli.find_subcommand("serve").unwrap();
    assert!(
        serve
            .get_arguments()
            .any(|a| a.get_env().is_some_and(|e| e == flag)),
        "no serve flag reads {flag}"
    );
}

#[test]
fn the_deployment_feeds_the_lease_identity_and_namespace() {
    let docs = render("manifests");
    let deploy = find(&docs, "Deployment", "bootimage-webhook");
    let env = deploy["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .unwrap();
    for (name, path) in [
        ("POD_NAME", "metadata.name"),
        ("POD_NAMESPACE", "metadata.namespace"),
    ] {
        assert!(
            env.iter()
                .any(|e| e["name"] == name && e["valueFrom"]["fieldRef"]["fieldPath"] == path),
            "{name}"
        );
    }
    assert_eq!(deploy["metadata"]["namespace"], OWN_NAMESPACE);
}
