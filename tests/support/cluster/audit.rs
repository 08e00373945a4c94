//! Reading the apiserver's audit log and Events: our touches, the creations, how the
//! admission chain treated our webhook.

use serde_json::{Value, json};

use super::{Cluster, NS, SA_USER, WEBHOOK};

pub fn is_ours(e: &Value) -> bool {
    e["user"]["username"] == SA_USER
}

/// Whether the audit event was made with the token whose `jti` is given.
pub fn with_token(e: &Value, jti: &str) -> bool {
    e["user"]["extra"]["authentication.kubernetes.io/credential-id"]
        .as_array()
        .is_some_and(|ids| ids.iter().any(|i| i == &json!(format!("JTI={jti}"))))
}

/// Whether the audit event is of a server-side dry run (nothing stored).
pub fn is_dry_run(e: &Value) -> bool {
    e["requestURI"]
        .as_str()
        .is_some_and(|u| u.contains("dryRun="))
}

/// The touches in `events`: MachineSet patches by our ServiceAccount (of one token, if
/// `jti` is given), by MachineSet name, in order; not the dry runs that probe the
/// admission policy.
pub fn touches(events: &[Value], jti: Option<&str>) -> Vec<String> {
    events
        .iter()
        .filter(|e| {
            is_ours(e)
                && e["verb"] == "patch"
                && e["stage"] == "ResponseComplete"
                && e["objectRef"]["resource"] == "machinesets"
                && e["objectRef"].get("subresource").is_none()
                && !is_dry_run(e)
                && jti.is_none_or(|j| with_token(e, j))
        })
        .map(|e| e["objectRef"]["name"].as_str().unwrap_or("").to_owned())
        .collect()
}

pub fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

/// The one completed `create` of MachineSet `name` in `events`.
pub fn creation<'a>(events: &'a [Value], name: &str) -> &'a Value {
    let found: Vec<_> = events
        .iter()
        .filter(|e| {
            e["verb"] == "create"
                && e["stage"] == "ResponseComplete"
                && e["objectRef"]["resource"] == "machinesets"
                && e["objectRef"]["name"] == name
        })
        .collect();
    assert_eq!(found.len(), 1, "creations of {name}: {found:?}");
    found[0]
}

/// How the apiserver's admission chain treated our webhook on a request, from the audit
/// annotations it records: `None` if it did not call it (rules, selectors or
/// matchConditions left it out), else whether the call failed open, and the reason code
/// our webhook gave.
#[derive(Debug, PartialEq, Eq)]
pub enum Call {
    NotCalled,
    FailedOpen,
    Answered { mutated: bool, reason: String },
}

pub fn webhook_call(event: &Value) -> Call {
    let ann = event["annotations"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    // "failed-open..." holds the webhook's name, "mutation..." a JSON object naming it.
    let ours = |prefix: &str| {
        ann.iter().find(|(k, v)| {
            k.starts_with(prefix)
                && (v == &WEBHOOK
                    || serde_json::from_str::<Value>(v.as_str().unwrap_or("null"))
                        .is_ok_and(|v| v["webhook"] == WEBHOOK))
        })
    };
    if ours("failed-open.mutation.webhook.admission.k8s.io/").is_some() {
        return Call::FailedOpen;
    }
    match ours("mutation.webhook.admission.k8s.io/") {
        None => Call::NotCalled,
        Some((_, v)) => {
            let v: Value = serde_json::from_str(v.as_str().unwrap()).unwrap();
            Call::Answered {
                mutated: v["mutated"] == true,
                reason: ann
                    .get(&format!("{WEBHOOK}/reason"))
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned(),
            }
        }
    }
}

pub fn answered(reason: &str, mutated: bool) -> Call {
    Call::Answered {
        mutated,
        reason: reason.into(),
    }
}

/// The Events of `reason` on MachineSet `name`, as the apiserver stored them.
pub fn events_of(c: &Cluster, reason: &str, name: &str) -> Vec<Value> {
    let list = c.api.get_json(["events.events.k8s.io", "-n", NS]);
    list["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e["reason"] == reason && e["regarding"]["name"] == name)
        .collect()
}
