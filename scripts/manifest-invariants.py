#!/usr/bin/env python3
"""Cross-object checks on a rendered manifest set, for scripts/check-manifests.

kubernetes-validate checks each built-in object against its schema; nothing
there checks that the objects fit together, or that the webhook settings are
the ones behaviour §6 asks for. This does, on the output of `kubectl kustomize`.

    manifest-invariants.py openshift RENDERED.yaml
    manifest-invariants.py cert-manager RENDERED.yaml

The webhook's CEL matchConditions are not evaluated here: the real
kube-apiserver compiles and evaluates them in tests/real_apiserver.rs.

Prints one line per problem and exits 1 if there is any.
"""

import re
import sys

import yaml

NAME = "bootimage-webhook"
NAMESPACE = "bootimage-webhook"
WEBHOOK_NAME = "bootimage.machineset.bootimages.machineconfiguration.openshift.io"
TLS_SECRET = "bootimage-webhook-tls"
TLS_DIR = "/etc/bootimage-webhook/tls"
OPT_OUT_LABEL = "bootimages.machineconfiguration.openshift.io/managed"
IMAGE = "quay.io/example/bootimage-webhook:latest"
SVC_DNS = [f"{NAME}.{NAMESPACE}.svc", f"{NAME}.{NAMESPACE}.svc.cluster.local"]
MONITORING_KINDS = {"ServiceMonitor", "PrometheusRule"}

problems = []


def check(cond, msg):
    if not cond:
        problems.append(msg)
    return cond


def load(path):
    with open(path, encoding="utf-8") as f:
        return [d for d in yaml.safe_load_all(f) if d]


def find(docs, kind, name=NAME, namespace=None):
    hits = [
        d
        for d in docs
        if d.get("kind") == kind
        and d["metadata"].get("name") == name
        and (namespace is None or d["metadata"].get("namespace") == namespace)
    ]
    check(len(hits) == 1, f"expected one {kind} {namespace or ''}/{name}, found {len(hits)}")
    return hits[0] if hits else {}


def selects(selector, labels):
    """matchLabels-only selector semantics (all this project uses)."""
    match = selector.get("matchLabels", {})
    return bool(match) and all(labels.get(k) == v for k, v in match.items())


def walk(node, path=""):
    if isinstance(node, dict):
        for k, v in node.items():
            yield f"{path}.{k}", k, v
            yield from walk(v, f"{path}.{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from walk(v, f"{path}[{i}]")


def common(docs):
    dep = find(docs, "Deployment", namespace=NAMESPACE)
    svc = find(docs, "Service", namespace=NAMESPACE)
    mwc = find(docs, "MutatingWebhookConfiguration")
    pdb = find(docs, "PodDisruptionBudget", namespace=NAMESPACE)
    netpol = find(docs, "NetworkPolicy", namespace=NAMESPACE)
    find(docs, "ServiceAccount", namespace=NAMESPACE)
    find(docs, "Namespace")

    # Webhook settings (behaviour §6).
    hooks = mwc.get("webhooks", [])
    check(len(hooks) == 1, "the webhook configuration must hold exactly one webhook (CA injection covers all)")
    wh = hooks[0] if hooks else {}
    expected = {
        "name": WEBHOOK_NAME,
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "failurePolicy": "Ignore",
        "timeoutSeconds": 2,
        "reinvocationPolicy": "IfNeeded",
        "matchPolicy": "Equivalent",
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "openshift-machine-api"}},
        "objectSelector": {"matchExpressions": [{"key": OPT_OUT_LABEL, "operator": "NotIn", "values": ["false"]}]},
        "rules": [
            {
                "apiGroups": ["machine.openshift.io"],
                "apiVersions": ["v1beta1"],
                "resources": ["machinesets"],
                "operations": ["CREATE", "UPDATE"],
                "scope": "Namespaced",
            },
            {
                "apiGroups": ["machine.openshift.io"],
                "apiVersions": ["v1"],
                "resources": ["controlplanemachinesets"],
                "operations": ["CREATE", "UPDATE"],
                "scope": "Namespaced",
            },
        ],
    }
    for key, want in expected.items():
        check(wh.get(key) == want, f"webhook {key} is {wh.get(key)!r}, want {want!r}")
    check(
        {c.get("name") for c in wh.get("matchConditions", [])} == {"supported-providerspec-kind", "not-windows"},
        "webhook matchConditions must be supported-providerspec-kind and not-windows",
    )
    cc = wh.get("clientConfig", {})
    check("url" not in cc, "clientConfig must use the Service, not a url")
    check(not cc.get("caBundle"), "caBundle must be injected, not written in the manifest")
    ref = cc.get("service", {})
    check(ref.get("name") == NAME and ref.get("namespace") == NAMESPACE, f"clientConfig.service is {ref}")
    check(ref.get("path") == "/mutate-machinesets", f"clientConfig.service.path is {ref.get('path')!r}")
    svc_ports = {p.get("port"): p for p in svc.get("spec", {}).get("ports", [])}
    hook_port = svc_ports.get(ref.get("port", 443), {})
    check(hook_port.get("targetPort") == "webhook", "the Service port the webhook calls must target 'webhook'")
    check(svc_ports.get(8080, {}).get("targetPort") == "admin", "the Service must expose 8080 -> 'admin'")

    # The pods behind the Service, PDB and NetworkPolicy.
    spec = dep.get("spec", {})
    tmpl = spec.get("template", {})
    pod_labels = tmpl.get("metadata", {}).get("labels", {})
    pod = tmpl.get("spec", {})
    check(spec.get("replicas") == 2, "Deployment replicas must be 2")
    check(selects(spec.get("selector", {}), pod_labels), "Deployment selector does not match its pod labels")
    check(
        selects({"matchLabels": svc.get("spec", {}).get("selector", {})}, pod_labels),
        "Service selector does not match the pods",
    )
    check(selects(pdb.get("spec", {}).get("selector", {}), pod_labels), "PDB selector does not match the pods")
    check(pdb.get("spec", {}).get("minAvailable") == 1, "PDB minAvailable must be 1")
    check(selects(netpol.get("spec", {}).get("podSelector", {}), pod_labels), "NetworkPolicy does not select the pods")
    check(
        any(t.get("topologyKey") == "kubernetes.io/hostname" for t in pod.get("topologySpreadConstraints", [])),
        "pods must be spread across nodes",
    )
    check(
        "priorityClassName" not in pod, "no priorityClassName (system-* classes are refused outside openshift-/kube-)"
    )
    sa = pod.get("serviceAccountName")
    check(sa == NAME, f"serviceAccountName is {sa!r}")
    psc = pod.get("securityContext", {})
    check(psc.get("runAsNonRoot") is True, "pod runAsNonRoot must be true")
    check(psc.get("seccompProfile", {}).get("type") == "RuntimeDefault", "pod seccompProfile must be RuntimeDefault")
    for path, key, _ in walk(pod):
        check(key not in ("runAsUser", "runAsGroup", "fsGroup"), f"{path}: no fixed IDs (restricted-v2 assigns them)")
        check(key != "subPath", f"{path}: no subPath mounts (the service-ca rotates by symlink swap)")
    containers = pod.get("containers", [])
    check(len(containers) == 1, "one container")
    c = containers[0] if containers else {}
    check(c.get("image") == IMAGE, f"image is {c.get('image')!r}, want {IMAGE}")
    check((c.get("args") or c.get("command") or [None])[0] == "serve", "the container must run 'serve'")
    ports = {p.get("name"): p.get("containerPort") for p in c.get("ports", [])}
    check(ports == {"webhook": 9443, "admin": 8080}, f"container ports are {ports}")
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        get = c.get(probe, {}).get("httpGet", {})
        check(get.get("path") == path and get.get("port") == "admin", f"{probe} must GET {path} on port admin")
    csc = c.get("securityContext", {})
    check(csc.get("allowPrivilegeEscalation") is False, "allowPrivilegeEscalation must be false")
    check(csc.get("readOnlyRootFilesystem") is True, "readOnlyRootFilesystem must be true")
    check(csc.get("capabilities", {}).get("drop") == ["ALL"], "capabilities must drop ALL")
    res = c.get("resources", {})
    check(
        res.get("requests", {}).get("cpu")
        and res.get("requests", {}).get("memory")
        and res.get("limits", {}).get("memory"),
        "cpu/memory requests and a memory limit are required",
    )
    env = {e.get("name"): e for e in c.get("env", [])}
    check(env.get("BOOTIMAGE_WEBHOOK_TLS_CERT_FILE", {}).get("value") == f"{TLS_DIR}/tls.crt", "TLS cert file env")
    check(env.get("BOOTIMAGE_WEBHOOK_TLS_PRIVATE_KEY_FILE", {}).get("value") == f"{TLS_DIR}/tls.key", "TLS key env")
    for var, field in (("POD_NAME", "metadata.name"), ("POD_NAMESPACE", "metadata.namespace")):
        got = env.get(var, {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
        check(got == field, f"{var} must come from the downward API {field}")
    vols = {v.get("name"): v for v in pod.get("volumes", [])}
    mounts = {m.get("mountPath").rstrip("/"): m for m in c.get("volumeMounts", [])}
    tls_mount = mounts.get(TLS_DIR, {})
    check(tls_mount.get("readOnly") is True, f"{TLS_DIR} must be a read-only mount")
    check(
        vols.get(tls_mount.get("name"), {}).get("secret", {}).get("secretName") == TLS_SECRET,
        f"{TLS_DIR} must mount the Secret {TLS_SECRET} as a whole",
    )

    # Every RBAC binding is for our ServiceAccount, except the monitoring one.
    for d in docs:
        if d.get("kind") in ("RoleBinding", "ClusterRoleBinding") and d["metadata"]["name"] == NAME:
            subjects = d.get("subjects", [])
            check(
                subjects == [{"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}],
                f"{d['kind']} {d['metadata'].get('namespace', '')}/{NAME} subjects are {subjects}",
            )
    return {"svc": svc, "mwc": mwc, "netpol": netpol, "dep": dep}


def ingress_ports(netpol):
    return {
        str(p.get("port")): rule.get("from")
        for rule in netpol.get("spec", {}).get("ingress", [])
        for p in rule.get("ports", [])
    }


def openshift(docs):
    o = common(docs)
    svc_ann = o["svc"]["metadata"].get("annotations", {})
    check(
        svc_ann.get("service.beta.openshift.io/serving-cert-secret-name") == TLS_SECRET,
        "the Service must ask service-ca for the TLS Secret",
    )
    mwc_ann = o["mwc"]["metadata"].get("annotations", {})
    check(
        mwc_ann.get("service.beta.openshift.io/inject-cabundle") == "true", "the webhook needs service-ca CA injection"
    )
    check(not any(k.startswith("cert-manager.io/") for k in mwc_ann), "no cert-manager annotations on OpenShift")
    peers = ingress_ports(o["netpol"]).get("webhook")
    host_net = {
        "namespaceSelector": {"matchLabels": {"policy-group.network.openshift.io/host-network": ""}},
        "podSelector": {},
    }
    check(
        peers is None or host_net in peers,
        "9443 must be open to the host network (namespaceSelector + podSelector {} in one peer), or to all",
    )
    check("admin" in ingress_ports(o["netpol"]), "the admin port must be open to the monitoring namespaces")
    ns = find(docs, "Namespace")
    check(
        ns.get("metadata", {}).get("labels", {}).get("openshift.io/cluster-monitoring") == "true",
        "the namespace must be labelled for the platform Prometheus",
    )
    sm = find(docs, "ServiceMonitor", namespace=NAMESPACE)
    check(
        selects(sm.get("spec", {}).get("selector", {}), o["svc"]["metadata"].get("labels", {})),
        "the ServiceMonitor does not select the Service",
    )
    check(
        [e.get("port") for e in sm.get("spec", {}).get("endpoints", [])] == ["admin"],
        "the ServiceMonitor must scrape the admin port",
    )
    rule = find(docs, "PrometheusRule", namespace=NAMESPACE)
    exprs = {r.get("alert"): r.get("expr", "") for g in rule.get("spec", {}).get("groups", []) for r in g["rules"]}
    fail_open = [e for e in exprs.values() if "apiserver_admission_webhook_fail_open_count" in e]
    check(len(fail_open) == 1, "one alert on apiserver_admission_webhook_fail_open_count")
    for e in fail_open:
        m = re.search(r'name=~"([^"]+)"', e)
        if check(m, "the fail-open alert must select the webhook by name=~"):
            regex = m.group(1).replace("\\\\", "\\")  # PromQL string escaping
            check(re.fullmatch(regex, WEBHOOK_NAME), f"fail-open regex {regex!r} does not match {WEBHOOK_NAME}")
    check(
        any("bootimage_webhook_touch_given_up_total" in e and "increase(" in e for e in exprs.values()),
        "an alert on increase(bootimage_webhook_touch_given_up_total)",
    )
    check(any(re.search(r"\bup\{", e) for e in exprs.values()), "an alert on the webhook being down (up)")


def cert_manager(docs):
    o = common(docs)
    for d in docs:
        for k in d["metadata"].get("annotations", {}):
            check(not k.startswith("service.beta.openshift.io/"), f"{d['kind']} {d['metadata']['name']}: {k} left over")
        check(d["kind"] not in MONITORING_KINDS, f"{d['kind']} must not be in the cert-manager build")
        check(
            d["kind"] != "Namespace" or "openshift.io/cluster-monitoring" not in d["metadata"].get("labels", {}),
            "the OpenShift monitoring label must not be in the cert-manager build",
        )
    inject = o["mwc"]["metadata"].get("annotations", {}).get("cert-manager.io/inject-ca-from", "")
    ns, _, cert_name = inject.partition("/")
    cert = find(docs, "Certificate", name=cert_name, namespace=ns)
    cs = cert.get("spec", {})
    check(cs.get("secretName") == TLS_SECRET, f"the injected Certificate must write {TLS_SECRET}")
    check(set(SVC_DNS) <= set(cs.get("dnsNames", [])), f"the serving Certificate needs dnsNames {SVC_DNS}")
    check(cs.get("privateKey", {}).get("rotationPolicy") == "Always", "serving key rotationPolicy must be Always")
    check(not cs.get("isCA"), "the serving Certificate must not be a CA")
    issuer = find(docs, "Issuer", name=cs.get("issuerRef", {}).get("name"), namespace=ns)
    ca_secret = issuer.get("spec", {}).get("ca", {}).get("secretName")
    ca = [d for d in docs if d["kind"] == "Certificate" and d["spec"].get("secretName") == ca_secret]
    if check(len(ca) == 1 and ca[0]["spec"].get("isCA") is True, "the serving Issuer must be a CA Issuer of a CA cert"):
        find(docs, "Issuer", name=ca[0]["spec"]["issuerRef"]["name"], namespace=ns)
    peers = ingress_ports(o["netpol"])
    check("webhook" in peers and peers["webhook"] is None, "9443 must be open to any source on vanilla Kubernetes")


def main():
    mode, path = sys.argv[1], sys.argv[2]
    docs = load(path)
    if mode == "openshift":
        openshift(docs)
    elif mode == "cert-manager":
        cert_manager(docs)
    else:
        sys.exit(f"unknown mode {mode}")
    for p in problems:
        print(f"  {mode}: {p}")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
