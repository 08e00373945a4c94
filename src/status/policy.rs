//! Whether the ValidatingAdmissionPolicy that limits the webhook's writes is in force, as
//! `status` can tell with an administrator's read-only view: the policy and its binding
//! exist and the binding denies, and the Lease holder's last word on it (its Events: it
//! stops touching while its probe is admitted).

use kube::api::Api;
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use serde::Serialize;
use serde_json::Value;

use crate::cluster::apis::ADMISSION_POLICY;
use crate::cluster::touch::wall::{ENFORCED, NOT_ENFORCED};

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyState {
    /// The policy's and its binding's name.
    pub name: &'static str,
    /// `Some(true)`: both exist, and the binding names the policy and denies; `None`: they
    /// could not be read.
    pub present: Option<bool>,
    /// What is wrong (or why it is not known), if anything.
    pub problem: Option<String>,
    /// The Lease holder's last Event on it: `Some(false)` when it found the policy not
    /// enforced (and stopped touching), `Some(true)` when it found it enforced again.
    pub toucher_found_enforced: Option<bool>,
}

impl PolicyState {
    /// Whether touching is stopped (or will be at the Lease holder's next probe) because
    /// the policy does not hold.
    pub fn broken(&self) -> bool {
        self.present == Some(false) || self.toucher_found_enforced == Some(false)
    }
}

fn resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", kind),
        plural,
    )
}

/// One of the two objects, by name, as JSON (`Ok(None)`: absent, or its API not served).
async fn read(client: &kube::Client, kind: &str, plural: &str) -> Result<Option<Value>, String> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource(kind, plural));
    match api.get_opt(ADMISSION_POLICY).await {
        Ok(o) => Ok(o.and_then(|o| serde_json::to_value(o).ok())),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
        Err(e) => Err(format!("{kind} {ADMISSION_POLICY} could not be read: {e}")),
    }
}

/// The policy as the cluster has it; `events` are the machine API namespace's.
pub async fn policy(client: &kube::Client, events: &[Value]) -> PolicyState {
    let policy = read(
        client,
        "ValidatingAdmissionPolicy",
        "validatingadmissionpolicies",
    )
    .await;
    let binding = read(
        client,
        "ValidatingAdmissionPolicyBinding",
        "validatingadmissionpolicybindings",
    )
    .await;
    judge(policy, binding, events)
}

/// The state of the policy from what was read of it and the namespace's Events. Pure.
pub fn judge(
    policy: Result<Option<Value>, String>,
    binding: Result<Option<Value>, String>,
    events: &[Value],
) -> PolicyState {
    let (present, problem) = match (policy, binding) {
        (Err(e), _) | (_, Err(e)) => (None, Some(e)),
        (Ok(None), _) => (
            Some(false),
            Some(format!(
                "ValidatingAdmissionPolicy {ADMISSION_POLICY} not found"
            )),
        ),
        (_, Ok(None)) => (
            Some(false),
            Some(format!(
                "ValidatingAdmissionPolicyBinding {ADMISSION_POLICY} not found"
            )),
        ),
        (Ok(Some(_)), Ok(Some(b))) => match binding_problem(&b) {
            Some(p) => (Some(false), Some(p)),
            None => (Some(true), None),
        },
    };
    PolicyState {
        name: ADMISSION_POLICY,
        present,
        problem,
        toucher_found_enforced: toucher_verdict(events),
    }
}

/// What keeps a binding from enforcing the policy, if anything.
fn binding_problem(b: &Value) -> Option<String> {
    let spec = &b["spec"];
    if spec["policyName"] != ADMISSION_POLICY {
        return Some(format!(
            "ValidatingAdmissionPolicyBinding {ADMISSION_POLICY} binds policy {} instead",
            spec["policyName"]
        ));
    }
    let deny = spec["validationActions"]
        .as_array()
        .is_some_and(|a| a.iter().any(|v| v == "Deny"));
    (!deny).then(|| {
        format!(
            "ValidatingAdmissionPolicyBinding {ADMISSION_POLICY} does not deny (validationActions {})",
            spec["validationActions"]
        )
    })
}

/// The Lease holder's last verdict among `events`: the newest of its two Events.
fn toucher_verdict(events: &[Value]) -> Option<bool> {
    let when = |e: &Value| -> String {
        e.pointer("/series/lastObservedTime")
            .or_else(|| e.get("eventTime"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    events
        .iter()
        .filter(|e| e["reason"] == NOT_ENFORCED || e["reason"] == ENFORCED)
        .max_by_key(|e| when(e))
        .map(|e| e["reason"] == ENFORCED)
}

/// The `Admission policy:` line of the table output.
pub fn line(p: &PolicyState) -> String {
    if p.broken() {
        let why = p.problem.clone().unwrap_or_else(|| {
            "the Lease holder's probe was admitted: the policy is there but not enforced".into()
        });
        return format!(
            "Admission policy: NOT in force ({why}): touching is stopped while it does not hold (the Lease holder probes it at start and at every resync); fix: re-apply the manifests (oc apply -k manifests/ or your overlay), and touching resumes by itself\n"
        );
    }
    match &p.problem {
        Some(problem) => format!("Admission policy: <unknown> ({problem})\n"),
        None => format!(
            "Admission policy: in force ({} and its binding, Deny)\n",
            p.name
        ),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn binding(actions: Value) -> Value {
        json!({"spec": {"policyName": ADMISSION_POLICY, "validationActions": actions}})
    }

    fn event(reason: &str, time: &str) -> Value {
        json!({"reason": reason, "eventTime": time})
    }

    #[test]
    fn in_force_when_both_exist_and_the_binding_denies() {
        let p = judge(Ok(Some(json!({}))), Ok(Some(binding(json!(["Deny"])))), &[]);
        assert!(!p.broken());
        assert_eq!(
            line(&p),
            "Admission policy: in force (bootimage-webhook-boot-images-only and its binding, Deny)\n"
        );
    }

    #[test]
    fn not_in_force_without_the_binding_or_its_deny() {
        let p = judge(Ok(Some(json!({}))), Ok(None), &[]);
        assert!(p.broken());
        assert!(line(&p).starts_with("Admission policy: NOT in force (ValidatingAdmissionPolicyBinding bootimage-webhook-boot-images-only not found): touching is stopped"), "{}", line(&p));
        assert!(line(&p).contains("re-apply the manifests"));
        let warn = judge(Ok(Some(json!({}))), Ok(Some(binding(json!(["Warn"])))), &[]);
        assert!(warn.broken());
        assert!(judge(Ok(None), Ok(Some(binding(json!(["Deny"])))), &[]).broken());
    }

    #[test]
    fn the_lease_holders_newest_event_counts() {
        let both = Ok(Some(binding(json!(["Deny"]))));
        let found = [event(NOT_ENFORCED, "2026-12-06T10:00:00.000000Z")];
        let p = judge(Ok(Some(json!({}))), both.clone(), &found);
        assert!(p.broken());
        assert!(line(&p).contains("probe was admitted"), "{}", line(&p));
        let again = [
            found[0].clone(),
            event(ENFORCED, "2026-12-06T10:05:00.000000Z"),
        ];
        assert!(!judge(Ok(Some(json!({}))), both, &again).broken());
    }

    #[test]
    fn unknown_when_it_cannot_be_read() {
        let p = judge(Err("forbidden".into()), Ok(None), &[]);
        assert_eq!(p.present, None);
        assert!(!p.broken());
        assert_eq!(line(&p), "Admission policy: <unknown> (forbidden)\n");
    }
}
