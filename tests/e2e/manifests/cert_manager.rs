//! The cert-manager build (vanilla Kubernetes): nothing of OpenShift in it, and a serving
//! certificate of its own CA injected into the webhook configuration.

use super::*;

#[test]
fn the_cert_manager_build_has_nothing_of_openshift() {
    let _parallel = support::parallel();
    let b = cert_manager_build();
    for d in &b.docs {
        let what = format!("{} {}", d["kind"], d["metadata"]["name"]);
        assert!(
            !annotations(d)
                .iter()
                .any(|k| k.starts_with("service.beta.openshift.io/")),
            "{}: {what} keeps no service-ca annotation",
            b.name
        );
        assert!(
            d["kind"] != "ServiceMonitor" && d["kind"] != "PrometheusRule",
            "{}: {what}: no OpenShift monitoring objects",
            b.name
        );
        assert!(
            d["kind"] != "Namespace" || d["metadata"]["labels"].get(MONITORING_LABEL).is_none(),
            "{}: {what}: no OpenShift monitoring label",
            b.name
        );
    }
    assert!(
        matches!(b.ingress_peers("webhook"), Some(None)),
        "{}: 9443 is open to any source on vanilla Kubernetes",
        b.name
    );
}

#[test]
fn the_cert_manager_build_injects_a_serving_certificate_of_its_own_ca() {
    let _parallel = support::parallel();
    let b = cert_manager_build();
    let inject =
        &b.webhook_configuration()["metadata"]["annotations"]["cert-manager.io/inject-ca-from"];
    let (namespace, name) = inject
        .as_str()
        .and_then(|i| i.split_once('/'))
        .unwrap_or_else(|| panic!("{}: the webhook asks cert-manager to inject a CA", b.name));
    let serving = &b.one("Certificate", name, namespace)["spec"];
    assert_eq!(
        serving["secretName"], TLS_SECRET,
        "{}: the injected Certificate writes {TLS_SECRET}",
        b.name
    );
    let dns = strings(&serving["dnsNames"]);
    assert!(
        SERVICE_DNS.iter().all(|n| dns.iter().any(|d| d == n)),
        "{}: the serving Certificate names the Service: {SERVICE_DNS:?}",
        b.name
    );
    assert_eq!(
        serving["privateKey"]["rotationPolicy"], "Always",
        "{}: the serving key is rotated Always",
        b.name
    );
    assert_ne!(
        serving["isCA"], true,
        "{}: the serving Certificate is not a CA",
        b.name
    );
    let issuer = b.one(
        "Issuer",
        serving["issuerRef"]["name"].as_str().unwrap_or(""),
        namespace,
    );
    let ca_secret = &issuer["spec"]["ca"]["secretName"];
    let cas: Vec<&Value> = b
        .docs
        .iter()
        .filter(|d| d["kind"] == "Certificate" && d["spec"]["secretName"] == *ca_secret)
        .collect();
    assert!(
        cas.len() == 1 && cas[0]["spec"]["isCA"] == true,
        "{}: the serving Issuer is a CA Issuer of a CA Certificate",
        b.name
    );
    b.one(
        "Issuer",
        cas[0]["spec"]["issuerRef"]["name"].as_str().unwrap_or(""),
        namespace,
    );
}
