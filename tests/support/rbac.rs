//! The RBAC an administrator gets by enabling opt-in components and granting more
//! user-data Secrets in `manifests/kustomization.yaml`, applied over the shipped one on
//! a test apiserver.

use serde_json::Value;

use super::apiserver::ApiServer;
use super::render;

const RBAC_KINDS: [&str; 4] = ["Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"];

/// Applies the RBAC of the build with `components` and `grant` (see
/// [`render::render_with`]) over the shipped one; returns the `--user-data-secrets` flag of
/// that build, for a replica to be given as the Deployment gives it.
pub fn enable(api: &ApiServer, components: &[&str], grant: &[&str]) -> Vec<String> {
    let docs = render::render_with(components, grant);
    let rbac: Vec<&Value> = docs
        .iter()
        .filter(|d| RBAC_KINDS.contains(&d["kind"].as_str().unwrap_or("")))
        .collect();
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": rbac});
    let args = ["apply", "--server-side", "--force-conflicts", "-f", "-"];
    let out = api.kubectl_stdin(args, &list.to_string());
    api.expect_ok(&args, out);
    vec![
        "--user-data-secrets".into(),
        render::user_data_secrets_of(&docs).join(","),
    ]
}

/// Applies the admission policies of the build with `components` over the shipped ones.
pub fn enable_policies(api: &ApiServer, components: &[&str]) {
    let docs = render::render_with(components, &[]);
    let policies: Vec<&Value> = docs
        .iter()
        .filter(|d| d["kind"] == "ValidatingAdmissionPolicy")
        .collect();
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": policies});
    let args = ["apply", "--server-side", "--force-conflicts", "-f", "-"];
    let out = api.kubectl_stdin(args, &list.to_string());
    api.expect_ok(&args, out);
}

/// Applies an importer component's `rbac.yaml` with its grants bound to the webhook's
/// ServiceAccount instead of the importer's: for the tests of `serve` running the importers
/// in its own process (development and tests), under the webhook's identity. No shipped
/// build binds them so: there the importer's ServiceAccount alone holds them
/// (tests/e2e/real_apiserver_importer.rs).
pub fn importer_grants_to_the_webhook(api: &ApiServer, component: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("manifests/components")
        .join(component)
        .join("rbac.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let subject = "  - kind: ServiceAccount\n    name: bootimage-importer\n";
    assert!(text.contains(subject), "{}", path.display());
    let text = text.replace(
        subject,
        "  - kind: ServiceAccount\n    name: bootimage-webhook\n",
    );
    let args = ["apply", "-f", "-"];
    let out = api.kubectl_stdin(args, &text);
    api.expect_ok(&args, out);
}
