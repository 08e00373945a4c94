//! The rendered manifests agree with the code: webhook path and ports, the opt-out label.
//! And they fit together: the webhook settings of behaviour §6, selectors that select the
//! pods, a pod the restricted SCC admits, and each build's own certificates, monitoring
//! and network policy. Run on the builds scripts/check-manifests renders: OpenShift,
//! OpenShift with the opt-in components, and the cert-manager overlay. RBAC and the
//! ValidatingAdmissionPolicy: tests/e2e/manifests_rbac.rs.

use crate::support;

use std::collections::BTreeSet;

use bootimage_webhook::cluster::apis;
use bootimage_webhook::core::decision::OPT_OUT_LABEL;
use bootimage_webhook::serve::server::WEBHOOK_PATH;
use serde_json::Value;
use support::render::{find, render, render_with_components, strings};

mod cert_manager;

const OWN_NAMESPACE: &str = "bootimage-webhook";

#[test]
fn webhook_configuration_matches_the_server() {
    let _parallel = support::parallel();
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
        // The rest of the webhook's settings, the opt-out label among them:
        // webhook_settings_are_those_of_behaviour_6.
    }
}
#[test]
fn the_deployment_feeds_the_lease_identity_and_namespace() {
    let _parallel = support::parallel();
    for b in builds() {
        for (var, field) in [
            ("POD_NAME", "metadata.name"),
            ("POD_NAMESPACE", "metadata.namespace"),
        ] {
            assert_eq!(
                env(b.container(), var).map(|e| &e["valueFrom"]["fieldRef"]["fieldPath"]),
                Some(&Value::from(field)),
                "{}: {var} comes from the downward API's {field}",
                b.name
            );
        }
        assert_eq!(
            b.ours("Deployment")["metadata"]["namespace"],
            OWN_NAMESPACE,
            "{}: the Deployment is in our namespace",
            b.name
        );
    }
}

// How the objects fit together, on each build scripts/check-manifests renders.

const NAME: &str = "bootimage-webhook";
const WEBHOOK_NAME: &str = "bootimage.machineset.bootimages.machineconfiguration.openshift.io";
const TLS_SECRET: &str = "bootimage-webhook-tls";
const TLS_DIR: &str = "/etc/bootimage-webhook/tls";
const IMAGE: &str = "quay.io/example/bootimage-webhook:latest";
const SERVICE_DNS: [&str; 2] = [
    "bootimage-webhook.bootimage-webhook.svc",
    "bootimage-webhook.bootimage-webhook.svc.cluster.local",
];
const MONITORING_LABEL: &str = "openshift.io/cluster-monitoring";

/// One rendered build: its name in messages, whether it is OpenShift's, and its objects.
struct Build {
    name: &'static str,
    openshift: bool,
    docs: Vec<Value>,
}

/// The three builds, rendered once for all the tests of this file.
fn builds() -> &'static [Build] {
    static BUILDS: std::sync::OnceLock<Vec<Build>> = std::sync::OnceLock::new();
    BUILDS.get_or_init(|| {
        let optin: Vec<&str> = apis::COMPONENTS.iter().map(|(c, _)| *c).collect();
        vec![
            Build {
                name: "openshift",
                openshift: true,
                docs: render("manifests"),
            },
            Build {
                name: "openshift with the opt-in components",
                openshift: true,
                docs: render_with_components(&optin),
            },
            Build {
                name: "cert-manager",
                openshift: false,
                docs: render("manifests/overlays/cert-manager"),
            },
        ]
    })
}

impl Build {
    /// The one object of `kind` called `name` in `namespace` ("" for cluster-scoped).
    fn one(&self, kind: &str, name: &str, namespace: &str) -> &Value {
        let hits: Vec<&Value> = self
            .docs
            .iter()
            .filter(|d| d["kind"] == kind && d["metadata"]["name"] == name)
            .filter(|d| d["metadata"]["namespace"].as_str().unwrap_or("") == namespace)
            .collect();
        assert_eq!(
            hits.len(),
            1,
            "{}: expected one {kind} {namespace}/{name}",
            self.name
        );
        hits[0]
    }

    fn ours(&self, kind: &str) -> &Value {
        self.one(kind, NAME, OWN_NAMESPACE)
    }

    fn webhook_configuration(&self) -> &Value {
        self.one("MutatingWebhookConfiguration", NAME, "")
    }

    fn pod_template(&self) -> &Value {
        &self.ours("Deployment")["spec"]["template"]
    }

    fn container(&self) -> &Value {
        let containers = self.pod_template()["spec"]["containers"].as_array();
        assert_eq!(
            containers.map(Vec::len),
            Some(1),
            "{}: the pod has one container",
            self.name
        );
        &self.pod_template()["spec"]["containers"][0]
    }

    /// The ingress peers of the NetworkPolicy rule that opens `port`: `Some(None)` for a port
    /// open to any source (no `from`), `None` for a port no rule opens.
    fn ingress_peers(&self, port: &str) -> Option<Option<&Value>> {
        let ingress = self.ours("NetworkPolicy")["spec"]["ingress"].as_array()?;
        ingress
            .iter()
            .find(|rule| items(&rule["ports"]).any(|p| p["port"] == port))
            .map(|rule| rule.get("from"))
    }
}

/// The annotation keys of `object`.
fn annotations(object: &Value) -> Vec<String> {
    object["metadata"]["annotations"]
        .as_object()
        .map(|a| a.keys().cloned().collect())
        .unwrap_or_default()
}

fn items(v: &Value) -> impl Iterator<Item = &Value> {
    v.as_array().into_iter().flatten()
}

/// A matchLabels selector (all this project uses) that selects `labels`.
fn selects(selector: &Value, labels: &Value) -> bool {
    let Some(wanted) = selector["matchLabels"].as_object() else {
        return false;
    };
    !wanted.is_empty() && wanted.iter().all(|(k, v)| &labels[k] == v)
}

/// Every key anywhere under `v`, with its path.
fn keys(v: &Value, path: &str, out: &mut Vec<(String, String)>) {
    match v {
        Value::Object(map) => {
            for (k, child) in map {
                let here = format!("{path}.{k}");
                out.push((here.clone(), k.clone()));
                keys(child, &here, out);
            }
        }
        Value::Array(list) => {
            for (i, child) in list.iter().enumerate() {
                keys(child, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

#[test]
fn each_build_has_one_of_each_object() {
    let _parallel = support::parallel();
    for b in builds() {
        for kind in [
            "Deployment",
            "Service",
            "PodDisruptionBudget",
            "NetworkPolicy",
            "ServiceAccount",
        ] {
            b.ours(kind);
        }
        b.one("Namespace", NAME, "");
        b.webhook_configuration();
    }
}

/// The webhook's settings, field by field, as behaviour §6 asks.
fn expected_webhook() -> serde_json::Map<String, Value> {
    let rule = |version: &str, resource: &str| {
        serde_json::json!({
            "apiGroups": ["machine.openshift.io"],
            "apiVersions": [version],
            "resources": [resource],
            "operations": ["CREATE", "UPDATE"],
            "scope": "Namespaced",
        })
    };
    let expected = serde_json::json!({
        "name": WEBHOOK_NAME,
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "failurePolicy": "Ignore",
        "timeoutSeconds": 2,
        "reinvocationPolicy": "IfNeeded",
        "matchPolicy": "Equivalent",
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "openshift-machine-api"}},
        "objectSelector": {"matchExpressions": [
            {"key": OPT_OUT_LABEL, "operator": "NotIn", "values": ["false"]}
        ]},
        "rules": [
            rule("v1beta1", "machinesets"),
            rule("v1", "controlplanemachinesets"),
        ],
    });
    expected.as_object().unwrap().clone()
}

#[test]
fn webhook_settings_are_those_of_behaviour_6() {
    let _parallel = support::parallel();
    for b in builds() {
        let hooks = &b.webhook_configuration()["webhooks"];
        assert_eq!(
            hooks.as_array().map(Vec::len),
            Some(1),
            "{}: one webhook in the configuration (CA injection covers all of them)",
            b.name
        );
        for (key, want) in expected_webhook() {
            assert_eq!(hooks[0][&key], want, "{}: webhook {key}", b.name);
        }
        let conditions: BTreeSet<&str> = items(&hooks[0]["matchConditions"])
            .filter_map(|c| c["name"].as_str())
            .collect();
        assert_eq!(
            conditions,
            BTreeSet::from(["supported-providerspec-kind", "not-windows"]),
            "{}: the webhook's matchConditions",
            b.name
        );
    }
}

#[test]
fn the_webhook_calls_our_service_with_an_injected_ca() {
    let _parallel = support::parallel();
    for b in builds() {
        let client = &b.webhook_configuration()["webhooks"][0]["clientConfig"];
        assert!(
            client.get("url").is_none(),
            "{}: clientConfig names the Service, not a url",
            b.name
        );
        assert!(
            client["caBundle"].as_str().unwrap_or("").is_empty(),
            "{}: the caBundle is injected, not written in the manifest",
            b.name
        );
        assert_eq!(
            (&client["service"]["name"], &client["service"]["namespace"]),
            (&Value::from(NAME), &Value::from(OWN_NAMESPACE)),
            "{}: clientConfig.service is ours",
            b.name
        );
        let ports = &b.ours("Service")["spec"]["ports"];
        let port = client["service"]["port"].as_i64().unwrap_or(443);
        let target = |p: i64| {
            items(ports)
                .find(|sp| sp["port"] == p)
                .map(|sp| &sp["targetPort"])
        };
        assert_eq!(
            target(port),
            Some(&Value::from("webhook")),
            "{}: the Service port the webhook calls targets 'webhook'",
            b.name
        );
        assert_eq!(
            target(8080),
            Some(&Value::from("admin")),
            "{}: the Service exposes 8080 -> 'admin'",
            b.name
        );
    }
}

#[test]
fn selectors_select_the_pods() {
    let _parallel = support::parallel();
    for b in builds() {
        let deployment = &b.ours("Deployment")["spec"];
        let labels = &b.pod_template()["metadata"]["labels"];
        assert_eq!(deployment["replicas"], 2, "{}: two replicas", b.name);
        assert!(
            selects(&deployment["selector"], labels),
            "{}: the Deployment's selector matches its pod labels",
            b.name
        );
        let service = serde_json::json!({"matchLabels": b.ours("Service")["spec"]["selector"]});
        assert!(
            selects(&service, labels),
            "{}: the Service's selector matches the pods",
            b.name
        );
        let pdb = &b.ours("PodDisruptionBudget")["spec"];
        assert!(
            selects(&pdb["selector"], labels),
            "{}: the PDB's selector matches the pods",
            b.name
        );
        assert_eq!(pdb["minAvailable"], 1, "{}: PDB minAvailable 1", b.name);
        let policy = &b.ours("NetworkPolicy")["spec"]["podSelector"];
        assert!(
            selects(policy, labels),
            "{}: the NetworkPolicy selects the pods",
            b.name
        );
    }
}

#[test]
fn pods_spread_and_run_as_the_restricted_scc_wants() {
    let _parallel = support::parallel();
    for b in builds() {
        let pod = &b.pod_template()["spec"];
        assert!(
            items(&pod["topologySpreadConstraints"])
                .any(|t| t["topologyKey"] == "kubernetes.io/hostname"),
            "{}: pods are spread across nodes",
            b.name
        );
        assert!(
            pod.get("priorityClassName").is_none(),
            "{}: no priorityClassName (system-* classes are refused outside openshift-/kube-)",
            b.name
        );
        assert_eq!(
            pod["serviceAccountName"], NAME,
            "{}: our ServiceAccount",
            b.name
        );
        let security = &pod["securityContext"];
        assert_eq!(
            security["runAsNonRoot"], true,
            "{}: pod runAsNonRoot",
            b.name
        );
        assert_eq!(
            security["seccompProfile"]["type"], "RuntimeDefault",
            "{}: pod seccompProfile RuntimeDefault",
            b.name
        );
        no_fixed_ids_nor_sub_paths(b.name, pod);
    }
}

fn no_fixed_ids_nor_sub_paths(build: &str, pod: &Value) {
    let mut all = Vec::new();
    keys(pod, "spec.template.spec", &mut all);
    for (path, key) in all {
        assert!(
            !["runAsUser", "runAsGroup", "fsGroup"].contains(&key.as_str()),
            "{build}: {path}: no fixed IDs (restricted-v2 assigns them)"
        );
        assert_ne!(
            key, "subPath",
            "{build}: {path}: no subPath mounts (the service-ca rotates by symlink swap)"
        );
    }
}

#[test]
fn the_container_serves_locked_down() {
    let _parallel = support::parallel();
    for b in builds() {
        let c = b.container();
        assert_eq!(c["image"], IMAGE, "{}: the image", b.name);
        // The image's entrypoint, then serve (the args are --user-data-secrets'
        // values: tests/e2e/manifests_rbac.rs).
        let command = strings(&c["command"]);
        assert_eq!(
            command[..2],
            ["/usr/local/bin/bootimage-webhook", "serve"],
            "{}: the container runs 'serve'",
            b.name
        );
        let ports: BTreeSet<(String, i64)> = items(&c["ports"])
            .map(|p| {
                (
                    p["name"].as_str().unwrap_or("").to_owned(),
                    p["containerPort"].as_i64().unwrap_or(0),
                )
            })
            .collect();
        assert_eq!(
            ports,
            BTreeSet::from([("admin".to_owned(), 8080), ("webhook".to_owned(), 9443)]),
            "{}: the container's ports are webhook 9443 and admin 8080",
            b.name
        );
        for (probe, path) in [("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")] {
            let get = &c[probe]["httpGet"];
            assert_eq!(
                (&get["path"], &get["port"]),
                (&Value::from(path), &Value::from("admin")),
                "{}: {probe} GETs {path} on port admin",
                b.name
            );
        }
        container_security(b.name, &c["securityContext"]);
        let resources = &c["resources"];
        assert!(
            resources["requests"]["cpu"].is_string()
                && resources["requests"]["memory"].is_string()
                && resources["limits"]["memory"].is_string(),
            "{}: cpu and memory requests and a memory limit",
            b.name
        );
    }
}

fn container_security(build: &str, security: &Value) {
    assert_eq!(
        security["allowPrivilegeEscalation"], false,
        "{build}: allowPrivilegeEscalation false"
    );
    assert_eq!(
        security["readOnlyRootFilesystem"], true,
        "{build}: readOnlyRootFilesystem"
    );
    assert_eq!(
        strings(&security["capabilities"]["drop"]),
        ["ALL"],
        "{build}: capabilities drop ALL"
    );
}

/// The env variable `name` of the container, if set.
fn env<'a>(container: &'a Value, name: &str) -> Option<&'a Value> {
    items(&container["env"]).find(|e| e["name"] == name)
}

#[test]
fn the_container_reads_tls_from_the_whole_secret() {
    let _parallel = support::parallel();
    for b in builds() {
        let c = b.container();
        for (var, file) in [
            ("BOOTIMAGE_WEBHOOK_TLS_CERT_FILE", "tls.crt"),
            ("BOOTIMAGE_WEBHOOK_TLS_PRIVATE_KEY_FILE", "tls.key"),
        ] {
            assert_eq!(
                env(c, var).map(|e| &e["value"]),
                Some(&Value::from(format!("{TLS_DIR}/{file}"))),
                "{}: {var} names {file} in {TLS_DIR}",
                b.name
            );
        }
        let mount = items(&c["volumeMounts"])
            .find(|m| m["mountPath"].as_str().map(|p| p.trim_end_matches('/')) == Some(TLS_DIR));
        let mount = mount.unwrap_or_else(|| panic!("{}: nothing mounted at {TLS_DIR}", b.name));
        assert_eq!(
            mount["readOnly"], true,
            "{}: {TLS_DIR} is mounted read-only",
            b.name
        );
        let volume =
            items(&b.pod_template()["spec"]["volumes"]).find(|v| v["name"] == mount["name"]);
        assert_eq!(
            volume.map(|v| &v["secret"]["secretName"]),
            Some(&Value::from(TLS_SECRET)),
            "{}: {TLS_DIR} mounts the Secret {TLS_SECRET} as a whole",
            b.name
        );
    }
}

#[test]
fn our_bindings_bind_only_our_service_accounts() {
    let _parallel = support::parallel();
    let sa =
        |name, ns| serde_json::json!([{"kind": "ServiceAccount", "name": name, "namespace": ns}]);
    // The skew record keeper's and the importer's bind their own ServiceAccounts.
    let keeper = sa(apis::KEEPER_SERVICE_ACCOUNT, apis::KEEPER_NAMESPACE);
    let importer = sa(apis::IMPORTER_SERVICE_ACCOUNT, OWN_NAMESPACE);
    for b in builds() {
        // Ours are named bootimage-*; the monitoring component's (prometheus-k8s) is not.
        for binding in b.docs.iter().filter(|d| {
            (d["kind"] == "RoleBinding" || d["kind"] == "ClusterRoleBinding")
                && d["metadata"]["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("bootimage-"))
        }) {
            let name = binding["metadata"]["name"].as_str().unwrap_or_default();
            let want = match name {
                apis::KEEPER_SERVICE_ACCOUNT => keeper.clone(),
                n if n.starts_with(apis::IMPORTER_SERVICE_ACCOUNT) => importer.clone(),
                _ => sa(NAME, OWN_NAMESPACE),
            };
            assert_eq!(
                binding["subjects"], want,
                "{}: {} {}/{name} binds its ServiceAccount and nothing else",
                b.name, binding["kind"], binding["metadata"]["namespace"]
            );
        }
    }
}

fn openshift_builds() -> impl Iterator<Item = &'static Build> {
    builds().iter().filter(|b| b.openshift)
}

fn cert_manager_build() -> &'static Build {
    builds().iter().find(|b| !b.openshift).unwrap()
}

#[test]
fn openshift_builds_take_certificates_from_the_service_ca() {
    let _parallel = support::parallel();
    for b in openshift_builds() {
        let service = b.ours("Service");
        assert_eq!(
            service["metadata"]["annotations"]["service.beta.openshift.io/serving-cert-secret-name"],
            TLS_SECRET,
            "{}: the Service asks the service-ca for the TLS Secret",
            b.name
        );
        let mwc = b.webhook_configuration();
        assert_eq!(
            mwc["metadata"]["annotations"]["service.beta.openshift.io/inject-cabundle"], "true",
            "{}: the webhook asks the service-ca to inject its CA",
            b.name
        );
        assert!(
            !annotations(mwc)
                .iter()
                .any(|k| k.starts_with("cert-manager.io/")),
            "{}: no cert-manager annotations on OpenShift",
            b.name
        );
    }
}

#[test]
fn openshift_builds_open_the_ports_to_their_callers() {
    let _parallel = support::parallel();
    let host_network = serde_json::json!({
        "namespaceSelector": {"matchLabels": {"policy-group.network.openshift.io/host-network": ""}},
        "podSelector": {},
    });
    for b in openshift_builds() {
        let webhook = b.ingress_peers("webhook");
        assert!(
            matches!(webhook, Some(None))
                || matches!(webhook, Some(Some(peers)) if items(peers).any(|p| *p == host_network)),
            "{}: 9443 is open to the host network (namespaceSelector and podSelector {{}} in one peer), or to all",
            b.name
        );
        assert!(
            b.ingress_peers("admin").is_some(),
            "{}: the admin port is open to the monitoring namespaces",
            b.name
        );
    }
}

#[test]
fn openshift_builds_are_scraped_by_the_platform_prometheus() {
    let _parallel = support::parallel();
    for b in openshift_builds() {
        assert_eq!(
            b.one("Namespace", NAME, "")["metadata"]["labels"][MONITORING_LABEL],
            "true",
            "{}: the namespace is labelled for the platform Prometheus",
            b.name
        );
        let monitor = &b.ours("ServiceMonitor")["spec"];
        assert!(
            selects(
                &monitor["selector"],
                &b.ours("Service")["metadata"]["labels"]
            ),
            "{}: the ServiceMonitor selects the Service",
            b.name
        );
        let ports: Vec<&Value> = items(&monitor["endpoints"]).map(|e| &e["port"]).collect();
        assert_eq!(
            ports,
            [&Value::from("admin")],
            "{}: the ServiceMonitor scrapes the admin port",
            b.name
        );
    }
}

/// The PrometheusRule's alert expressions.
fn alert_expressions(b: &Build) -> Vec<&str> {
    items(&b.ours("PrometheusRule")["spec"]["groups"])
        .flat_map(|g| items(&g["rules"]))
        .filter_map(|r| r["expr"].as_str())
        .collect()
}

#[test]
fn openshift_builds_alert_on_fail_open_give_up_and_down() {
    let _parallel = support::parallel();
    let up = regex::Regex::new(r"\bup\{").unwrap();
    for b in openshift_builds() {
        let exprs = alert_expressions(b);
        let fail_open: Vec<&str> = exprs
            .iter()
            .copied()
            .filter(|e| e.contains("apiserver_admission_webhook_fail_open_count"))
            .collect();
        assert_eq!(
            fail_open.len(),
            1,
            "{}: one alert on apiserver_admission_webhook_fail_open_count",
            b.name
        );
        fail_open_selects_the_webhook(b.name, fail_open[0]);
        assert!(
            exprs
                .iter()
                .any(|e| e.contains("bootimage_webhook_touch_given_up_total")
                    && e.contains("increase(")),
            "{}: an alert on increase(bootimage_webhook_touch_given_up_total)",
            b.name
        );
        assert!(
            exprs.iter().any(|e| up.is_match(e)),
            "{}: an alert on the webhook being down (up)",
            b.name
        );
        assert!(
            exprs.iter().any(
                |e| e.contains("bootimage_webhook_admission_policy_enforced")
                    && e.ends_with("== 0")
            ),
            "{}: an alert on the admission policy not in force",
            b.name
        );
        assert!(
            exprs
                .iter()
                .any(|e| e.contains("bootimage_webhook_skew_record_due") && e.ends_with("== 1")),
            "{}: an alert on the Manual skew record due",
            b.name
        );
    }
}

fn fail_open_selects_the_webhook(build: &str, expr: &str) {
    let selector = regex::Regex::new(r#"name=~"([^"]+)""#).unwrap();
    let captured = selector.captures(expr).unwrap_or_else(|| {
        panic!("{build}: the fail-open alert selects the webhook by name=~: {expr}")
    });
    // PromQL string escaping: \\ in the string is one backslash in the regex.
    let pattern = captured[1].replace(r"\\", r"\");
    let anchored = regex::Regex::new(&format!("^(?:{pattern})$")).unwrap();
    assert!(
        anchored.is_match(WEBHOOK_NAME),
        "{build}: the fail-open alert's name=~{pattern:?} matches {WEBHOOK_NAME}"
    );
}
