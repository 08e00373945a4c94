//! The importer apart from the webhook, on a real kube-apiserver (`KUBE_VERSION=1.30` too):
//! in the builds of the opt-in components (the default, each alone, the importers with each
//! other one, all together; every pair too with `EVERY_PAIR=1`), no ServiceAccount may both
//! read a cloud credential an importer component names and write MachineSets or
//! ControlPlaneMachineSets (the apiserver's own SubjectAccessReviews, with the groups a
//! ServiceAccount's token carries); the importer's Deployment, run as its ServiceAccount with
//! the build's RBAC, holds its Lease and publishes into its ConfigMap; and the importer's
//! admission policy lets the webhook's ServiceAccount set a vSphere template, an OpenStack
//! image or a Nutanix image the ConfigMap lists, and no other.

use crate::support;

use std::collections::BTreeSet;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use bootimage_webhook::cluster::apis;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};
use support::apiserver::ApiServer;
use support::cluster::*;
use support::render::{find, render_with, strings, with_what_it_needs};

/// The cloud credentials the importer components grant: (namespace, Secret).
const CREDENTIALS: [(&str, &str); 3] = [
    ("kube-system", "vsphere-creds"),
    (NS, "openstack-cloud-credentials"),
    (NS, "nutanix-credentials"),
];
const RBAC_KINDS: [&str; 4] = ["Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"];
const PART_OF: &str = "app.kubernetes.io/part-of=bootimage-webhook";
const IMPORTER: &str = "bootimage-importer";
const IMPORTER_USER: &str = "system:serviceaccount:bootimage-webhook:bootimage-importer";

/// Every opt-in component: those with calls of their own, and the proxy's, which patches
/// the Deployments.
fn optin() -> Vec<&'static str> {
    let mut all: Vec<&str> = apis::COMPONENTS.iter().map(|(c, _)| *c).collect();
    all.push("cluster-proxy");
    all
}

/// The default build, each opt-in component alone, the three importers with each other
/// component, and all of them together (each with the importer's component where it needs
/// it); with `EVERY_PAIR=1`, each pair too. A component only adds grants (its patches add a
/// rule or a name, never remove one), so what any combination grants, the build with all of
/// them grants too; the others show each grant where it first appears.
fn builds() -> Vec<Vec<&'static str>> {
    let all = optin();
    let importers = ["vsphere-import", "openstack-import", "nutanix-import"];
    let every_pair = std::env::var("EVERY_PAIR").is_ok_and(|v| v == "1");
    let mut out = vec![Vec::new()];
    for (i, a) in all.iter().enumerate() {
        out.push(with_what_it_needs(&[*a]));
        if every_pair {
            for b in &all[i + 1..] {
                out.push(with_what_it_needs(&[*a, *b]));
            }
        } else if !importers.contains(a) && *a != apis::IMPORTER_COMPONENT {
            let mut with = importers.to_vec();
            with.push(a);
            out.push(with_what_it_needs(&with));
        }
    }
    out.push(with_what_it_needs(&all));
    out
}

/// The build's RBAC in place of the previous build's.
fn install_rbac(api: &ApiServer, docs: &[Value]) {
    let kinds = "clusterrole,clusterrolebinding,role,rolebinding";
    api.kubectl_ok(["delete", kinds, "-A", "-l", PART_OF, "--ignore-not-found"]);
    let rbac: Vec<&Value> = docs
        .iter()
        .filter(|d| RBAC_KINDS.contains(&d["kind"].as_str().unwrap_or("")))
        .collect();
    let list = json!({"apiVersion": "v1", "kind": "List", "items": rbac});
    let args = ["apply", "-f", "-"];
    let out = api.kubectl_stdin(args, &list.to_string());
    api.expect_ok(&args, out);
}

/// Every ServiceAccount of the build, as (namespace, name): its objects and its bindings'
/// subjects.
fn service_accounts(docs: &[Value]) -> BTreeSet<(String, String)> {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    let objects = docs
        .iter()
        .filter(|d| d["kind"] == "ServiceAccount")
        .map(|d| {
            (
                text(&d["metadata"]["namespace"]),
                text(&d["metadata"]["name"]),
            )
        });
    let subjects = docs
        .iter()
        .filter(|d| d["kind"] == "RoleBinding" || d["kind"] == "ClusterRoleBinding")
        .flat_map(|b| b["subjects"].as_array().cloned().unwrap_or_default())
        .filter(|s| s["kind"] == "ServiceAccount")
        .map(|s| (text(&s["namespace"]), text(&s["name"])));
    objects.chain(subjects).collect()
}

/// What one ServiceAccount may do: (the credentials it reads, the writes of machines it makes).
type May = (Vec<String>, Vec<String>);

/// The apiserver's answers for each of `accounts`, in one `kubectl create` of
/// SubjectAccessReviews, with the groups a ServiceAccount's token carries.
fn may(api: &ApiServer, accounts: &[(String, String)]) -> Vec<May> {
    let mut items = Vec::new();
    // (which account, what, whether a read)
    let mut what: Vec<(usize, String, bool)> = Vec::new();
    for (i, (ns, name)) in accounts.iter().enumerate() {
        let user = format!("system:serviceaccount:{ns}:{name}");
        let groups = json!([
            "system:serviceaccounts",
            format!("system:serviceaccounts:{ns}"),
            "system:authenticated"
        ]);
        let review = |namespace: &str, verb: &str, group: &str, resource: &str, object: &str| {
            json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                "spec": {"user": user, "groups": groups, "resourceAttributes": {
                    "namespace": namespace, "verb": verb, "group": group,
                    "resource": resource, "name": object}}})
        };
        for (namespace, secret) in CREDENTIALS {
            items.push(review(namespace, "get", "", "secrets", secret));
            what.push((i, format!("get secret {namespace}/{secret}"), true));
        }
        for resource in ["machinesets", "controlplanemachinesets"] {
            for verb in ["patch", "update"] {
                items.push(review(NS, verb, "machine.openshift.io", resource, ""));
                what.push((i, format!("{verb} {resource}"), false));
            }
        }
    }
    let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
    let args = ["create", "-o", "json", "-f", "-"];
    let out = api.kubectl_stdin(args, &list.to_string());
    let text = api.expect_ok(&args, out);
    // One JSON object per review, one after the other (or a List).
    let answers: Vec<Value> = serde_json::Deserializer::from_str(&text)
        .into_iter::<Value>()
        .map(Result::unwrap)
        .flat_map(|d| match d["items"].as_array() {
            Some(items) => items.clone(),
            None => vec![d],
        })
        .collect();
    assert_eq!(answers.len(), what.len(), "{text}");
    let mut out = vec![May::default(); accounts.len()];
    for ((i, label, read), answer) in what.into_iter().zip(&answers) {
        if answer["status"]["allowed"] == true {
            if read {
                out[i].0.push(label)
            } else {
                out[i].1.push(label)
            }
        }
    }
    out
}

#[test]
fn no_identity_of_any_build_reads_a_cloud_credential_and_writes_machinesets() {
    let _parallel = support::parallel();
    let api = ApiServer::start();
    for ns in [
        "bootimage-webhook",
        "openshift-config",
        apis::KEEPER_NAMESPACE,
    ] {
        api.kubectl_ok(["create", "namespace", ns]);
    }
    let builds = builds();
    // Rendered four at a time (kustomize is most of the time).
    let rendered: Vec<Vec<Value>> = builds
        .chunks(builds.len().div_ceil(4))
        .map(|chunk| {
            std::thread::spawn({
                let chunk = chunk.to_vec();
                move || {
                    chunk
                        .iter()
                        .map(|c| render_with(c, &[]))
                        .collect::<Vec<_>>()
                }
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    let mut wrong = Vec::new();
    for (components, docs) in builds.iter().zip(&rendered) {
        install_rbac(&api, docs);
        let accounts: Vec<(String, String)> = service_accounts(docs).into_iter().collect();
        assert!(accounts.contains(&(OWN_NS.to_owned(), SA.to_owned())));
        let answers = may(&api, &accounts);
        for ((ns, name), (reads, writes)) in accounts.iter().zip(&answers) {
            let user = format!("system:serviceaccount:{ns}:{name}");
            if !reads.is_empty() && !writes.is_empty() {
                wrong.push(format!(
                    "{components:?}: {user} may {reads:?} and {writes:?}"
                ));
            }
            if user == SA_USER && !reads.is_empty() {
                wrong.push(format!("{components:?}: the webhook may {reads:?}"));
            }
            if user == IMPORTER_USER && !writes.is_empty() {
                wrong.push(format!("{components:?}: the importer may {writes:?}"));
            }
        }
        // The last build has everything: each half is held, by two identities.
        if components == builds.last().unwrap() {
            let two = [
                (OWN_NS.to_owned(), IMPORTER.to_owned()),
                (OWN_NS.to_owned(), SA.to_owned()),
            ];
            let answers = may(&api, &two);
            assert_eq!(answers[0].0.len(), CREDENTIALS.len(), "{answers:?}");
            assert!(
                answers[1].1.contains(&"patch machinesets".to_owned()),
                "{answers:?}"
            );
        }
    }
    assert!(wrong.is_empty(), "{} builds: {wrong:#?}", builds.len());
}

/// The importer as its Deployment runs it (`import`, the Deployment's command and env), with
/// a token of its ServiceAccount and the build's RBAC alone; killed on drop.
struct Importer {
    child: Child,
    log: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for Importer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Importer {
    fn start(c: &Cluster, deployment: &Value) -> Importer {
        let container = &deployment["spec"]["template"]["spec"]["containers"][0];
        let command = strings(&container["command"]);
        assert_eq!(command[1], "import", "{command:?}");
        let token = c.kubectl(&["create", "token", IMPORTER, "-n", OWN_NS, "--duration=1h"]);
        let kubeconfig = c.api.token_kubeconfig(token.trim(), Some(OWN_NS));
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("import.log");
        let mut cmd = Command::new(support::binary::BIN);
        cmd.args(&command[1..])
            .args(["--admin-address", "127.0.0.1:0"]);
        for env in container["env"].as_array().unwrap() {
            if let Some(value) = env["value"].as_str() {
                cmd.env(env["name"].as_str().unwrap(), value);
            }
        }
        // The caches the Deployment mounts, here in the test's directory.
        for cache in ["OPENSTACK_IMAGE", "NUTANIX_IMAGE", "VSPHERE_OVA"] {
            cmd.env(
                format!("BOOTIMAGE_WEBHOOK_{cache}_CACHE"),
                dir.path().join(cache),
            );
        }
        let file = std::fs::File::create(&log).unwrap();
        cmd.env("KUBECONFIG", kubeconfig)
            .env("POD_NAME", "importer-a")
            .env("POD_NAMESPACE", OWN_NS)
            .env("RUST_LOG", "info")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .stdin(Stdio::null());
        let child = cmd.spawn().unwrap();
        Importer {
            child,
            log,
            _dir: dir,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// The object `kind`/`name` of the webhook's namespace, if there is one.
fn get(c: &Cluster, kind: &str, name: &str) -> Option<Value> {
    let out = c
        .api
        .kubectl(["get", kind, name, "-n", OWN_NS, "-o", "json"]);
    out.status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).unwrap())
}

/// The importer's objects of the build: its ServiceAccount and ConfigMap, all RBAC, and the
/// importer's admission policy and binding.
fn install_importer(c: &Cluster, docs: &[Value]) {
    let named = |d: &&Value, name: &str| d["metadata"]["name"] == name;
    let objects: Vec<&Value> = docs
        .iter()
        .filter(|d| {
            (d["kind"] == "ServiceAccount" && named(d, IMPORTER))
                || (d["kind"] == "ConfigMap" && named(d, apis::IMPORTED_IMAGES_CONFIGMAP))
                || (d["kind"]
                    .as_str()
                    .unwrap_or("")
                    .starts_with("ValidatingAdmissionPolicy")
                    && named(d, apis::IMPORTED_IMAGES_POLICY))
        })
        .collect();
    assert_eq!(objects.len(), 4, "{objects:#?}");
    c.create_all(&objects);
    install_rbac(&c.api, docs);
}

/// A MachineSet of cluster `infra` with the providerSpec `value`.
fn cloud_machineset(name: &str, infra: &str, value: Value) -> Value {
    let mut ms = machineset(name, OLD);
    ms["metadata"]["labels"]["machine.openshift.io/cluster-api-cluster"] = json!(infra);
    ms["spec"]["template"]["spec"]["providerSpec"]["value"] = value;
    ms
}

/// MachineSets as the webhook's ServiceAccount's own token reaches them (no `get`: `kubectl
/// patch` would read first).
struct Webhook {
    rt: tokio::runtime::Runtime,
    api: Api<DynamicObject>,
}

impl Webhook {
    fn new(c: &Cluster) -> Webhook {
        let path = c.api.token_kubeconfig(&c.token(), Some(NS));
        let kubeconfig = kube::config::Kubeconfig::read_from(path).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let api = rt.block_on(async {
            let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
                .await
                .unwrap();
            let client = kube::Client::try_from(config).unwrap();
            Api::namespaced_with(client, NS, &apis::MACHINESET.api_resource())
        });
        Webhook { rt, api }
    }

    /// A server-side dry run of the JSON `patch` on MachineSet `name`: `Ok` when admitted.
    fn dry_run(&self, name: &str, patch: &Value) -> Result<(), String> {
        let patch: json_patch::Patch = serde_json::from_value(patch.clone()).unwrap();
        let params = PatchParams {
            dry_run: true,
            ..PatchParams::default()
        };
        self.rt
            .block_on(self.api.patch(name, &params, &Patch::<()>::Json(patch)))
            .map(drop)
            .map_err(|e| e.to_string())
    }
}

#[test]
fn the_importer_runs_import_and_the_webhook_may_name_only_what_it_lists() {
    let _parallel = support::parallel();
    let c = Cluster::start(true);
    c.kubectl(&["create", "namespace", "openshift-config"]);
    let components = with_what_it_needs(&["vsphere-import", "openstack-import", "nutanix-import"]);
    let docs = render_with(&components, &[]);
    install_importer(&c, &docs);
    let importer = Importer::start(&c, find(&docs, "Deployment", IMPORTER));
    eventually(
        "the importer to hold its Lease and publish what it serves",
        Duration::from_secs(60),
        || importer.log(),
        || {
            let lease = get(&c, "lease", IMPORTER)?;
            (lease["spec"]["holderIdentity"] == "importer-a").then_some(())?;
            let data = &get(&c, "configmap", apis::IMPORTED_IMAGES_CONFIGMAP)?["data"];
            ["vsphere", "openstack", "nutanix"]
                .iter()
                .all(|p| data.get(format!("status.{p}")).is_some())
                .then_some(())
        },
    );
    let log = importer.log();
    assert!(!log.contains("forbidden"), "{log}");
    drop(importer);
    the_policy_admits_only_what_is_listed(&c);
}

const INFRA: &str = "ci-sep-x7k2b";
/// Another cluster's infrastructure name: its names are unlisted here, and the base policy
/// admits them on its MachineSets.
const OTHER: &str = "ci-sep-o3q9d";
const RELEASE: &str = "9.8.20260428-0";

/// The importer's policy, with the webhook's own token: on each importer platform a name
/// the ConfigMap lists is admitted, another cluster's (which the base policy admits) refused.
fn the_policy_admits_only_what_is_listed(c: &Cluster) {
    let listed = format!("{INFRA}-rhcos-{RELEASE}");
    let template = format!("{listed}-fd-a");
    // What the importer would list, written here as an administrator.
    let record = json!({"digest": "sha256:00", "release": RELEASE, "stream": "rhel-9"}).to_string();
    let data = json!({"data": {format!("openstack.{listed}"): record,
        format!("nutanix.{listed}"): record, format!("vsphere.{template}"): record}});
    let cm = apis::IMPORTED_IMAGES_CONFIGMAP;
    let patch = data.to_string();
    c.kubectl(&[
        "patch",
        "configmap",
        cm,
        "-n",
        OWN_NS,
        "--type=merge",
        "-p",
        &patch,
    ]);
    let webhook = Webhook::new(c);
    for (platform, value, ours, theirs) in cases(&listed, &template) {
        let field = if platform == "vSphere" {
            "template"
        } else {
            "image"
        };
        let patch = |v: &Value| json!([{"op": "replace", "path": format!("{PROVIDER}/{field}"), "value": v}]);
        let (mine, other) = (
            format!("ms-{field}-{platform}"),
            format!("ms-{field}-{platform}-o"),
        );
        let (mine, other) = (mine.to_lowercase(), other.to_lowercase());
        c.create(&cloud_machineset(&mine, INFRA, value.clone()));
        c.create(&cloud_machineset(&other, OTHER, value));
        // Once the apiserver enforces the policy and has the ConfigMap.
        let last = std::cell::RefCell::new(String::new());
        let try_it = |name: &str, v: &Value| {
            let r = webhook.dry_run(name, &patch(v));
            *last.borrow_mut() = format!("{r:?}");
            r
        };
        eventually(
            &format!("the importer's policy to refuse an unlisted {platform} value"),
            Duration::from_secs(60),
            || last.borrow().clone(),
            || {
                let e = try_it(&other, &theirs).err()?;
                (e.contains(apis::IMPORTED_IMAGES_POLICY) && e.contains(platform)).then_some(())
            },
        );
        eventually(
            &format!("the importer's policy to admit a listed {platform} value"),
            Duration::from_secs(30),
            || last.borrow().clone(),
            || try_it(&mine, &ours).ok(),
        );
        // An administrator is not bound by it.
        let theirs = patch(&theirs).to_string();
        c.kubectl(&[
            "patch",
            "machineset",
            &other,
            "-n",
            NS,
            "--type=json",
            "--dry-run=server",
            "-p",
            &theirs,
        ]);
    }
}

/// Each importer platform: its name in the policy's messages, a providerSpec on the
/// installer's image, the value listed, another cluster's.
fn cases(listed: &str, template: &str) -> [(&'static str, Value, Value, Value); 3] {
    let nutanix = |name: &str| json!({"type": "name", "name": name});
    // (platform, providerSpec, the value listed, another cluster's)
    [
        (
            "OpenStack",
            json!({"apiVersion": "machine.openshift.io/v1alpha1", "kind": "OpenstackProviderSpec",
                "flavor": "m1.large", "image": "installer-rhcos"}),
            json!(listed),
            json!(format!("{OTHER}-rhcos-{RELEASE}")),
        ),
        (
            "Nutanix",
            json!({"apiVersion": "machine.openshift.io/v1", "kind": "NutanixMachineProviderConfig",
                "image": nutanix("installer-rhcos")}),
            nutanix(listed),
            nutanix(&format!("{OTHER}-rhcos-{RELEASE}")),
        ),
        (
            "vSphere",
            json!({"apiVersion": "machine.openshift.io/v1beta1",
                "kind": "VSphereMachineProviderSpec", "template": "installer-rhcos"}),
            json!(template),
            json!(format!("{OTHER}-rhcos-{RELEASE}-fd-a")),
        ),
    ]
}
