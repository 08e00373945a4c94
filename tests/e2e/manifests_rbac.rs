//! RBAC and the ValidatingAdmissionPolicy of the rendered manifests: RBAC covers every
//! call in `src/cluster/apis.rs` and nothing more, in the default build and with each
//! opt-in component; the webhook's `--user-data-secrets` is its Role's grant, and the one
//! line that grants another Secret updates both; nothing reads Secrets but by name, nor
//! MachineConfigs, nor writes Secrets or ControlPlaneMachineSets, unless a component asks;
//! the policy binds the webhook's ServiceAccount alone and knows the annotations the code
//! writes; the vSphere component's cache and a disconnected site's documented patches fit
//! the flags. tests/e2e/permissions.rs tries the same on a real apiserver.

use crate::support;

use std::collections::BTreeSet;

use bootimage_webhook::cluster::apis::{self, Scope};
use bootimage_webhook::core::decision::{
    BOOT_IMAGE_ANNOTATION, REVERTS_ANNOTATION, TOUCH_ANNOTATION,
};
use clap::Parser;
use serde_json::Value;
use support::render::{
    find, render, render_with, render_with_component, render_with_documented, strings,
    user_data_secrets_of, with_what_it_needs,
};

const OWN_NAMESPACE: &str = "bootimage-webhook";
const SERVICE_ACCOUNT: &str = "bootimage-webhook";
const SECRETS_ROLE: &str = "bootimage-webhook-user-data-secrets";

/// One permission: (namespace or "" for cluster, group, resource, verb, name or "" for any).
type Grant = (String, String, String, String, String);

fn granted(docs: &[Value]) -> BTreeSet<Grant> {
    granted_to(docs, SERVICE_ACCOUNT, OWN_NAMESPACE)
}

/// What the bindings of `docs` grant the ServiceAccount `sa` of `namespace`.
fn granted_to(docs: &[Value], sa: &str, namespace: &str) -> BTreeSet<Grant> {
    let bound: BTreeSet<(String, String, String)> = docs
        .iter()
        .filter(|d| d["kind"] == "RoleBinding" || d["kind"] == "ClusterRoleBinding")
        .filter(|b| {
            b["subjects"].as_array().into_iter().flatten().any(|s| {
                s["kind"] == "ServiceAccount" && s["name"] == sa && s["namespace"] == namespace
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
    needed_in(calls, OWN_NAMESPACE)
}

/// [`needed`] of a process running in `own` namespace.
fn needed_in<'a>(calls: impl IntoIterator<Item = &'a apis::Call>, own: &str) -> BTreeSet<Grant> {
    let mut out = BTreeSet::new();
    for call in calls {
        let ns = match call.scope {
            Scope::Cluster => String::new(),
            Scope::Namespace(n) => n.to_owned(),
            Scope::Own => own.to_owned(),
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
    let _parallel = support::parallel();
    for build in ["manifests", "manifests/overlays/cert-manager"] {
        rbac_matches(build, &render(build), apis::ALL.iter());
    }
    // Each opt-in component adds exactly its own calls (with the importer's component
    // where it needs it), to the webhook and to the importer.
    for (component, _) in apis::COMPONENTS {
        build_matches(&with_what_it_needs(&[*component]));
    }
    // And pairs of components, their calls and those they grant together.
    for (first, second, _) in apis::COMPONENT_PAIRS {
        build_matches(&with_what_it_needs(&[*first, *second]));
    }
    build_matches(&with_what_it_needs(&[
        "control-plane-machine-sets",
        "vsphere-import",
        "openstack-import",
        "nutanix-import",
    ]));
}

/// The calls of `table` for the components of a build.
fn calls_of<'a>(
    table: &'a [(&str, &'a [apis::Call])],
    components: &[&str],
) -> impl Iterator<Item = &'a apis::Call> {
    table
        .iter()
        .filter(|(c, _)| components.contains(c))
        .flat_map(|(_, calls)| calls.iter())
}

/// The build with `components`: the webhook is granted the base's calls and theirs, the
/// importer (with its component) its own and theirs, and nothing else.
fn build_matches(components: &[&str]) {
    let build = format!("manifests + {components:?}");
    let docs = render_with(components, &[]);
    let together = apis::COMPONENT_PAIRS
        .iter()
        .filter(|(a, b, _)| components.contains(a) && components.contains(b))
        .flat_map(|(_, _, calls)| calls.iter());
    let webhook = apis::ALL
        .iter()
        .chain(calls_of(apis::COMPONENTS, components))
        .chain(together);
    rbac_matches(&build, &docs, webhook);
    let importer = granted_to(&docs, apis::IMPORTER_SERVICE_ACCOUNT, OWN_NAMESPACE);
    let wanted = if components.contains(&apis::IMPORTER_COMPONENT) {
        needed(
            apis::IMPORTER
                .iter()
                .chain(calls_of(apis::IMPORTER_COMPONENTS, components)),
        )
    } else {
        BTreeSet::new()
    };
    assert_eq!(importer, wanted, "{build}: the importer's grants");
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

/// The skew record keeper's ServiceAccount, in a namespace of its own, is granted exactly
/// the keeper's calls and is bound by its own admission policy alone; no build grants the
/// webhook's ServiceAccount a write of MachineConfiguration, and the component leaves the
/// webhook's Deployment as it is.
#[test]
fn the_keeper_has_exactly_its_calls_and_the_webhook_writes_no_machine_configuration() {
    let _parallel = support::parallel();
    let keeper_ns = apis::KEEPER_NAMESPACE;
    let docs = render_with_component("skew-record-keeper");
    let keepers = granted_to(&docs, apis::KEEPER_SERVICE_ACCOUNT, keeper_ns);
    assert_eq!(keepers, needed_in(apis::KEEPER, keeper_ns));
    let writes = |g: &BTreeSet<Grant>| -> Vec<Grant> {
        g.iter()
            .filter(|(_, group, resource, verb, _)| {
                group == "operator.openshift.io"
                    && resource.starts_with("machineconfigurations")
                    && !["get", "list", "watch"].contains(&verb.as_str())
            })
            .cloned()
            .collect()
    };
    let keeper_writes = writes(&keepers);
    assert_eq!(keeper_writes.len(), 1, "{keeper_writes:?}");
    assert_eq!(keeper_writes[0].3, "patch");
    assert_eq!(keeper_writes[0].4, "cluster");
    // Every component's grants to the webhook are its calls (the test above): none writes.
    let webhook_calls = apis::ALL
        .iter()
        .chain(apis::COMPONENTS.iter().flat_map(|(_, calls)| calls.iter()));
    assert_eq!(writes(&needed(webhook_calls)), Vec::<Grant>::new());
    for build in [render("manifests"), docs.clone()] {
        assert_eq!(writes(&granted(&build)), Vec::<Grant>::new());
    }
    let policy = find(
        &docs,
        "ValidatingAdmissionPolicy",
        apis::KEEPER_ADMISSION_POLICY,
    );
    let condition = policy["spec"]["matchConditions"][0]["expression"]
        .as_str()
        .unwrap();
    assert!(
        condition.contains(&format!(
            "'system:serviceaccount:{keeper_ns}:{}'",
            apis::KEEPER_SERVICE_ACCOUNT
        )),
        "{condition}"
    );
    let binding = find(
        &docs,
        "ValidatingAdmissionPolicyBinding",
        apis::KEEPER_ADMISSION_POLICY,
    );
    assert_eq!(
        binding["spec"]["validationActions"],
        serde_json::json!(["Deny"])
    );
    let deployment = |d: &[Value]| find(d, "Deployment", "bootimage-webhook").clone();
    assert_eq!(deployment(&docs), deployment(&render("manifests")));
    let keeper = find(&docs, "Deployment", "bootimage-webhook-skew-record-keeper");
    assert_eq!(keeper["spec"]["replicas"], 1);
    assert_eq!(
        keeper["spec"]["template"]["spec"]["serviceAccountName"],
        apis::KEEPER_SERVICE_ACCOUNT
    );
}

const WEBHOOK: &str = "bootimage-webhook";
const IMPORTER: &str = "bootimage-importer";

/// Each component turns on the flag the code reads, in the Deployment whose process reads
/// it (an importer's in the importer's), and adds nothing else to it: the build without the
/// component never has it.
#[test]
fn each_component_sets_its_flag() {
    let _parallel = support::parallel();
    let on = |flag| serde_json::json!({"name": flag, "value": "true"});
    for (component, flag) in [
        (
            "aws-machine-api-credentials",
            "BOOTIMAGE_WEBHOOK_AWS_MACHINE_API_CREDENTIALS",
        ),
        ("aws-marketplace", "BOOTIMAGE_WEBHOOK_AWS_MARKETPLACE"),
        (
            "control-plane-machine-sets",
            "BOOTIMAGE_WEBHOOK_CONTROL_PLANE_MACHINE_SETS",
        ),
        ("master-pool-gate", "BOOTIMAGE_WEBHOOK_MASTER_POOL_GATE"),
        (
            "upgrade-stub-ignition",
            "BOOTIMAGE_WEBHOOK_UPGRADE_STUB_IGNITION",
        ),
    ] {
        component_sets(&[], component, WEBHOOK, "serve", on(flag));
    }
    let configmap = serde_json::json!({"name": "BOOTIMAGE_WEBHOOK_IMPORTED_IMAGES_CONFIGMAP",
        "value": apis::IMPORTED_IMAGES_CONFIGMAP});
    component_sets(&[], apis::IMPORTER_COMPONENT, WEBHOOK, "serve", configmap);
    let importer = [apis::IMPORTER_COMPONENT];
    for (component, flag) in [
        ("vsphere-import", "BOOTIMAGE_WEBHOOK_VSPHERE_IMPORT"),
        ("openstack-import", "BOOTIMAGE_WEBHOOK_OPENSTACK_IMPORT"),
        ("nutanix-import", "BOOTIMAGE_WEBHOOK_NUTANIX_IMPORT"),
        (
            "control-plane-machine-sets",
            "BOOTIMAGE_WEBHOOK_CONTROL_PLANE_MACHINE_SETS",
        ),
    ] {
        component_sets(&importer, component, IMPORTER, "import", on(flag));
    }
}

/// The importer's Deployment runs `import`, one replica at a time, under its own
/// ServiceAccount, which no component binds to the webhook's roles; its pods are not the
/// webhook's Service's, PodDisruptionBudget's or NetworkPolicy's.
#[test]
fn the_importer_runs_apart_under_its_own_identity() {
    let _parallel = support::parallel();
    let docs = render_with(
        &with_what_it_needs(&["vsphere-import", "openstack-import", "nutanix-import"]),
        &[],
    );
    let deploy = find(&docs, "Deployment", IMPORTER);
    assert_eq!(deploy["spec"]["replicas"], 1);
    assert_eq!(deploy["spec"]["strategy"]["type"], "Recreate");
    let pod = &deploy["spec"]["template"];
    assert_eq!(
        pod["spec"]["serviceAccountName"],
        apis::IMPORTER_SERVICE_ACCOUNT
    );
    let command = strings(&pod["spec"]["containers"][0]["command"]);
    assert_eq!(command[1], "import", "{command:?}");
    let limit = pod["spec"]["containers"][0]["resources"]["limits"]["memory"].as_str();
    assert_eq!(limit, Some("256Mi"));
    let labels = &pod["metadata"]["labels"];
    let selected = |kind: &str, selector: &Value| {
        let wanted = selector.as_object().unwrap();
        assert!(!wanted.is_empty(), "{kind}");
        wanted.iter().all(|(k, v)| &labels[k] == v)
    };
    assert!(selected(
        "Deployment",
        &deploy["spec"]["selector"]["matchLabels"]
    ));
    assert!(!selected(
        "Service",
        &find(&docs, "Service", WEBHOOK)["spec"]["selector"]
    ));
    for kind in ["PodDisruptionBudget", "Deployment"] {
        let selector = &find(&docs, kind, WEBHOOK)["spec"]["selector"]["matchLabels"];
        assert!(
            !selected(kind, selector),
            "{kind} {WEBHOOK} selects the importer"
        );
    }
    let policy = &find(&docs, "NetworkPolicy", WEBHOOK)["spec"]["podSelector"]["matchLabels"];
    assert!(!selected("NetworkPolicy", policy));
    let own = &find(&docs, "NetworkPolicy", IMPORTER)["spec"];
    assert!(selected(
        "NetworkPolicy",
        &own["podSelector"]["matchLabels"]
    ));
    assert_eq!(own["policyTypes"], serde_json::json!(["Ingress", "Egress"]));
    assert!(own.get("ingress").is_none(), "no ingress: {own}");
    for cloud in ["vsphere", "openstack", "nutanix"] {
        let np = find(&docs, "NetworkPolicy", &format!("{IMPORTER}-{cloud}"));
        assert!(selected(
            "NetworkPolicy",
            &np["spec"]["podSelector"]["matchLabels"]
        ));
    }
    // The webhook's pods keep their name: the labels component leaves pod templates alone.
    let webhook = &find(&docs, "Deployment", WEBHOOK)["spec"]["template"]["metadata"]["labels"];
    assert_eq!(webhook["app.kubernetes.io/name"], WEBHOOK);
}

/// Each cloud's component stops the build without the importer's: it would otherwise
/// grant nothing and turn nothing on, without a word.
#[test]
fn each_import_component_needs_the_importer() {
    let _parallel = support::parallel();
    for component in apis::NEED_IMPORTER {
        let out = std::panic::catch_unwind(|| render_with_component(component));
        assert!(out.is_err(), "{component} renders without the importer");
    }
}

/// Each importer downloads into an emptyDir, bounded, mounted where its cache flag points
/// by default (the root file system is read-only); no two share a mount.
#[test]
fn the_import_components_mount_their_cache_where_the_flag_points() {
    let _parallel = support::parallel();
    for (component, volume, flag) in [
        ("vsphere-import", "ova-cache", "vsphere_ova_cache"),
        ("openstack-import", "qcow2-cache", "openstack_image_cache"),
        (
            "nutanix-import",
            "nutanix-qcow2-cache",
            "nutanix_image_cache",
        ),
    ] {
        cache_mounted_where_the_flag_points(component, volume, flag);
    }
    let both = render_with(
        &with_what_it_needs(&["vsphere-import", "openstack-import", "nutanix-import"]),
        &[],
    );
    let spec = &find(&both, "Deployment", IMPORTER)["spec"]["template"]["spec"];
    let mounts = spec["containers"][0]["volumeMounts"].as_array().unwrap();
    let paths: Vec<&str> = mounts
        .iter()
        .filter_map(|m| m["mountPath"].as_str())
        .collect();
    let unique: BTreeSet<&str> = paths.iter().copied().collect();
    assert_eq!(unique.len(), paths.len(), "{paths:?}");
}

fn cache_mounted_where_the_flag_points(component: &str, volume: &str, flag: &str) {
    let docs = render_with(&with_what_it_needs(&[component]), &[]);
    let spec = &find(&docs, "Deployment", IMPORTER)["spec"]["template"]["spec"];
    let mount = spec["containers"][0]["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == volume)
        .unwrap_or_else(|| panic!("{component}: the cache is mounted"));
    let cli = <bootimage_webhook::config::Cli as clap::CommandFactory>::command();
    let import = cli.find_subcommand("import").unwrap();
    let default = import
        .get_arguments()
        .find(|a| a.get_id() == flag)
        .and_then(|a| a.get_default_values().first().cloned())
        .unwrap_or_else(|| panic!("{flag} has a default"));
    assert_eq!(mount["mountPath"].as_str(), default.to_str(), "{component}");
    let volume = spec["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == volume)
        .unwrap_or_else(|| panic!("{component}: the cache volume"));
    assert!(volume["emptyDir"]["sizeLimit"].is_string(), "{volume}");
}

/// The documented patches of a disconnected site: the mirror's variable on the importer,
/// which the flag reads and accepts, and its port opened beside vCenter's.
#[test]
fn the_documented_mirror_patches_set_the_flag_and_open_the_port() {
    let _parallel = support::parallel();
    let var = "BOOTIMAGE_WEBHOOK_ARTIFACT_BASE_URL";
    let components = with_what_it_needs(&["vsphere-import"]);
    let docs = render_with_documented(&components, &[var, "bootimage-importer-vsphere"]);
    let deploy = find(&docs, "Deployment", IMPORTER);
    let env = &deploy["spec"]["template"]["spec"]["containers"][0]["env"];
    let set: Vec<&Value> = env
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["name"] == var)
        .collect();
    assert_eq!(set.len(), 1, "{env:#}");
    let url = set[0]["value"].as_str().unwrap();
    let cli = bootimage_webhook::config::Cli::try_parse_from([
        "bootimage-webhook",
        "import",
        "--artifact-base-url",
        url,
    ]);
    assert!(cli.is_ok(), "{url}: {:?}", cli.err());
    let policy = find(&docs, "NetworkPolicy", "bootimage-importer-vsphere");
    let ports: Vec<&Value> = policy["spec"]["egress"][0]["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| &p["port"])
        .collect();
    assert_eq!(ports, [&serde_json::json!(443), &serde_json::json!(8080)]);
    // The component alone sets neither.
    let plain = render_with(&components, &[]);
    let deploy = find(&plain, "Deployment", IMPORTER);
    assert!(!deploy.to_string().contains(var));
}

/// `component`, over a build with `base` components, adds exactly `added` to the env of
/// Deployment `deployment`, whose `subcommand` has a flag that reads it.
fn component_sets(
    base: &[&str],
    component: &str,
    deployment: &str,
    subcommand: &str,
    added: Value,
) {
    let env_of = |docs: &[Value]| -> Vec<Value> {
        let deploy = find(docs, "Deployment", deployment);
        deploy["spec"]["template"]["spec"]["containers"][0]["env"]
            .as_array()
            .unwrap()
            .clone()
    };
    let flag = added["name"].as_str().unwrap();
    let without = render_with(base, &[]);
    let plain = env_of(&without);
    assert!(!plain.iter().any(|e| e["name"] == flag));
    let mut components = base.to_vec();
    components.push(component);
    let with = env_of(&render_with(&components, &[]));
    let new: Vec<&Value> = with.iter().filter(|e| !plain.contains(e)).collect();
    assert_eq!(new, [&added], "{component} on {deployment}");
    // A variable no flag reads would be ignored without a word: the flag reads this one.
    let cli = <bootimage_webhook::config::Cli as clap::CommandFactory>::command();
    let command = cli.find_subcommand(subcommand).unwrap();
    assert!(
        command
            .get_arguments()
            .any(|a| a.get_env().is_some_and(|e| e == flag)),
        "no {subcommand} flag reads {flag}"
    );
}

/// The names of the user-data Secrets Role grants, in a build.
fn secrets_role_names(docs: &[Value]) -> Vec<String> {
    let role = find(docs, "Role", SECRETS_ROLE);
    let rules = role["rules"].as_array().unwrap();
    assert_eq!(rules.len(), 1, "{role}");
    strings(&rules[0]["resourceNames"])
}

/// The default of `serve --user-data-secrets`.
fn flag_default() -> Vec<String> {
    let cli = <bootimage_webhook::config::Cli as clap::CommandFactory>::command();
    let serve = cli.find_subcommand("serve").unwrap();
    serve
        .get_arguments()
        .find(|a| a.get_id() == "user_data_secrets")
        .expect("serve has --user-data-secrets")
        .get_default_values()
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .collect()
}

/// The code knows its grant: the shipped Role's names are the flag's default, the
/// Deployment passes them, and apis.rs lists them, in both builds.
#[test]
fn the_webhook_is_told_exactly_the_secrets_its_role_grants() {
    let _parallel = support::parallel();
    let shipped: Vec<String> = apis::USER_DATA_SECRETS
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(flag_default(), shipped);
    for build in ["manifests", "manifests/overlays/cert-manager"] {
        let docs = render(build);
        assert_eq!(secrets_role_names(&docs), shipped, "{build}");
        assert_eq!(user_data_secrets_of(&docs), shipped, "{build}");
    }
}

/// The one line manifests/kustomization.yaml documents grants a Secret to the Role and
/// to the flag together, for reading only: the stub upgrade updates the workers' stubs
/// alone (and the masters' with the control plane's component).
#[test]
fn one_line_grants_a_secret_to_the_role_and_the_flag() {
    let _parallel = support::parallel();
    let extra = ["infra-user-data-managed", "custom-user-data"];
    let mut want: Vec<String> = apis::USER_DATA_SECRETS
        .iter()
        .map(|s| s.to_string())
        .collect();
    want.extend(extra.map(String::from));
    for components in [&[][..], &["upgrade-stub-ignition"][..]] {
        let docs = render_with(components, &extra);
        assert_eq!(secrets_role_names(&docs), want, "{components:?}");
        assert_eq!(user_data_secrets_of(&docs), want, "{components:?}");
        let verbs = strings(&find(&docs, "Role", SECRETS_ROLE)["rules"][0]["verbs"]);
        assert_eq!(verbs, ["get", "list", "watch"], "{components:?}");
    }
    let upgraded = |components: &[&str]| {
        let docs = render_with(components, &extra);
        strings(&find(&docs, "Role", "bootimage-webhook-stub-upgrade")["rules"][0]["resourceNames"])
    };
    assert_eq!(
        upgraded(&["upgrade-stub-ignition"]),
        ["worker-user-data", "worker-user-data-managed"]
    );
    assert_eq!(
        upgraded(&["upgrade-stub-ignition", "control-plane-machine-sets"]),
        [
            "worker-user-data",
            "worker-user-data-managed",
            "master-user-data",
            "master-user-data-managed"
        ]
    );
}

/// A stolen token of the default install reads no Secret but the granted user-data ones
/// (never listed or watched without a name), reads no MachineConfig, writes no Secret
/// and no ControlPlaneMachineSet, and creates or deletes no MachineSet.
#[test]
fn the_default_install_grants_no_secret_read_by_kind_and_no_write_beyond_the_touch() {
    let _parallel = support::parallel();
    for build in ["manifests", "manifests/overlays/cert-manager"] {
        let granted = granted(&render(build));
        for (ns, group, resource, verb, name) in &granted {
            let what = format!("{build}: {verb} {group}/{resource} {name:?} in {ns:?}");
            if resource == "secrets" {
                assert!(!name.is_empty(), "{what}: Secrets by name only");
                assert!(["get", "list", "watch"].contains(&verb.as_str()), "{what}");
                assert!(apis::USER_DATA_SECRETS.contains(&name.as_str()), "{what}");
            }
            assert!(resource != "machineconfigs", "{what}");
            assert!(resource != "controlplanemachinesets", "{what}");
            if resource == "machinesets" {
                assert!(
                    ["list", "watch", "patch"].contains(&verb.as_str()),
                    "{what}"
                );
            }
            let writes = ["create", "update", "patch", "delete", "deletecollection"];
            if writes.contains(&verb.as_str()) {
                assert!(
                    ["machinesets", "events", "leases"].contains(&resource.as_str()),
                    "{what}"
                );
            }
        }
    }
    // Each of those grants lives only in the component that needs it.
    for (component, resource, verb) in [
        (
            "control-plane-machine-sets",
            "controlplanemachinesets",
            "patch",
        ),
        ("master-pool-gate", "machineconfigs", "list"),
        ("upgrade-stub-ignition", "secrets", "update"),
    ] {
        let granted = granted(&render_with_component(component));
        let hits: Vec<_> = granted
            .iter()
            .filter(|g| g.2 == resource && g.3 == verb)
            .collect();
        assert!(!hits.is_empty(), "{component} grants {verb} {resource}");
        if resource == "secrets" {
            assert!(hits.iter().all(|g| !g.4.is_empty()), "{hits:?}");
        }
    }
}

/// The ValidatingAdmissionPolicy is in every build, binds (Deny) the webhook's own
/// ServiceAccount and nobody else, covers MachineSets and ControlPlaneMachineSets, and
/// lets through exactly the annotations the code writes.
#[test]
fn the_admission_policy_holds_the_service_account_to_boot_images() {
    let _parallel = support::parallel();
    for build in ["manifests", "manifests/overlays/cert-manager"] {
        let docs = render(build);
        // The name the toucher's probe recognises the policy's denials by.
        let policy = find(&docs, "ValidatingAdmissionPolicy", apis::ADMISSION_POLICY);
        assert_eq!(policy["apiVersion"], "admissionregistration.k8s.io/v1");
        let spec = &policy["spec"];
        assert_eq!(spec["failurePolicy"], "Fail");
        let conditions = spec["matchConditions"].as_array().unwrap();
        assert_eq!(conditions.len(), 1);
        assert_eq!(
            conditions[0]["expression"],
            format!(
                "request.userInfo.username == 'system:serviceaccount:{OWN_NAMESPACE}:{SERVICE_ACCOUNT}'"
            )
        );
        let rules = spec["matchConstraints"]["resourceRules"]
            .as_array()
            .unwrap();
        let resources: BTreeSet<String> = rules
            .iter()
            .flat_map(|r| strings(&r["resources"]))
            .collect();
        for r in ["machinesets", "controlplanemachinesets"] {
            assert!(
                resources.contains(r) && resources.contains(&format!("{r}/*")),
                "{resources:?}"
            );
        }
        let owned = spec["variables"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == "owned")
            .unwrap()["expression"]
            .as_str()
            .unwrap()
            .to_owned();
        // ['touch', ...].map(n, '<prefix>/' + n)
        let quoted: Vec<&str> = owned.split('\'').skip(1).step_by(2).collect();
        let (prefix, names) = quoted.split_last().unwrap();
        let keys: BTreeSet<String> = names.iter().map(|n| format!("{prefix}{n}")).collect();
        assert_eq!(
            keys.iter().map(String::as_str).collect::<BTreeSet<_>>(),
            BTreeSet::from([BOOT_IMAGE_ANNOTATION, REVERTS_ANNOTATION, TOUCH_ANNOTATION])
        );
        let binding = find(
            &docs,
            "ValidatingAdmissionPolicyBinding",
            apis::ADMISSION_POLICY,
        );
        assert_eq!(binding["spec"]["policyName"], apis::ADMISSION_POLICY);
        assert_eq!(
            binding["spec"]["validationActions"],
            serde_json::json!(["Deny"])
        );
        assert!(binding["spec"].get("matchResources").is_none(), "{binding}");
        // Its parameter is the ConfigMap the webhook reads, which it cannot write.
        assert_eq!(
            spec["paramKind"],
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap"})
        );
        assert_eq!(
            binding["spec"]["paramRef"],
            serde_json::json!({"name": apis::BOOTIMAGES_CONFIGMAP, "namespace": apis::MCO_NAMESPACE,
                               "parameterNotFoundAction": "Deny"})
        );
        assert!(
            !apis::CONFIGMAP
                .verbs
                .iter()
                .any(|v| ["create", "update", "patch", "delete"].contains(v))
        );
        stub_policy_holds_the_service_account(&docs);
    }
}

/// The second policy binds (Deny) the webhook's ServiceAccount's writes of Secrets.
fn stub_policy_holds_the_service_account(docs: &[Value]) {
    let name = "bootimage-webhook-stub-upgrades-only";
    let policy = find(docs, "ValidatingAdmissionPolicy", name);
    let spec = &policy["spec"];
    assert_eq!(spec["failurePolicy"], "Fail");
    assert_eq!(
        spec["matchConditions"][0]["expression"],
        format!(
            "request.userInfo.username == 'system:serviceaccount:{OWN_NAMESPACE}:{SERVICE_ACCOUNT}'"
        )
    );
    let rule = &spec["matchConstraints"]["resourceRules"][0];
    assert_eq!(strings(&rule["resources"]), ["secrets", "secrets/*"]);
    assert_eq!(strings(&rule["operations"]), ["CREATE", "UPDATE", "DELETE"]);
    let binding = find(docs, "ValidatingAdmissionPolicyBinding", name);
    assert_eq!(binding["spec"]["policyName"], name);
    assert_eq!(
        binding["spec"]["validationActions"],
        serde_json::json!(["Deny"])
    );
}
