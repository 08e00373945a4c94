//! The wall (behaviour §7): the toucher writes only while the ValidatingAdmissionPolicy
//! holds its ServiceAccount's writes. It proves it by asking the API server, as itself, for
//! a server-side dry run of a write the policy must deny: a change of a MachineSet's
//! `spec.replicas` (of a ControlPlaneMachineSet's labels when there is no MachineSet).
//! Denied by the policy: the wall stands. Admitted: the policy is not in
//! force (deleted, unbound, never applied, not served), and touching stops until it denies
//! the probe again. Any other answer cannot tell and changes nothing: the last verdict
//! stands, and with none yet (a new Lease term) nothing is touched.

use std::collections::HashSet;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Patch, PatchParams};
use kube::runtime::events::{Event, EventType};
use serde_json::{Value, json};

use super::retry::{Fault, within};
use super::{FIELD_MANAGER, PassError, Planned, Toucher};
use crate::cluster::apis;
use crate::core::view::CPMS_KIND;

/// The label a ControlPlaneMachineSet's probe would set (never stored: a dry run).
pub(crate) const PROBE_LABEL: &str = "bootimages.machineconfiguration.openshift.io/policy-probe";

/// The log condition and Warning Event reason: the policy admitted the probe.
pub const NOT_ENFORCED: &str = "AdmissionPolicyNotEnforced";
/// The log condition and Normal Event reason: the policy denies the probe again.
pub const ENFORCED: &str = "AdmissionPolicyEnforced";
/// The log condition: the probe's answer proves nothing either way.
pub(crate) const UNVERIFIED: &str = "AdmissionPolicyUnverified";
/// The log condition and Warning Event reason: the policy refused a boot image the
/// ConfigMap names, so the API server judged it against an older copy of the ConfigMap.
pub const PARAMETER_STALE: &str = "AdmissionPolicyParameterStale";

/// Words every message of the policy's rules on values holds (and no other rule's).
pub const VALUE_RULE_MARK: &str = "(stream or streams)";

/// What one probe's answer says of the policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The policy denied the write.
    Holds,
    /// The write would have been stored.
    Hole,
    /// Anything else: the API server down, a conflict, the MachineSet gone, a refusal
    /// by RBAC or by another admission plugin.
    Unknown,
}

/// The verdict of a dry run's answer: only the policy's own denial (Invalid, or Forbidden if
/// its validation says so, naming the policy) is proof; only success is a hole. Pure.
pub fn classify(answer: Result<(), &Fault>) -> Verdict {
    match answer {
        Ok(()) => Verdict::Hole,
        Err(f) if policy_denial(f).is_some() => Verdict::Holds,
        Err(_) => Verdict::Unknown,
    }
}

/// The policy's own denial's message (Invalid, or Forbidden if its validation says so).
fn policy_denial(f: &Fault) -> Option<&str> {
    let needle = format!("ValidatingAdmissionPolicy '{}'", apis::ADMISSION_POLICY);
    match f {
        Fault::Kube(kube::Error::Api(s))
            if (s.code == 422 || s.code == 403) && s.message.contains(&needle) =>
        {
            Some(&s.message)
        }
        _ => None,
    }
}

/// Whether a touch was refused by the policy's rules on values: the API server found the
/// target outside its copy of the ConfigMap. The toucher's targets come from that
/// ConfigMap, so the copy the API server judged with is not the one it serves. Pure.
pub fn refused_for_value(f: &Fault) -> bool {
    policy_denial(f).is_some_and(|m| m.contains(VALUE_RULE_MARK))
}

/// The toucher's knowledge of the wall in one Lease term.
#[derive(Debug, Default)]
pub(super) struct Wall {
    /// The last verdict that proved something (`None`: none yet this term).
    pub holds: Option<bool>,
    /// A probe is due whatever else: the term's first pass, and each resync.
    pub due: bool,
    /// (MachineSet uid, target) refusals on values already told this term.
    pub stale_told: HashSet<(String, String)>,
}

impl Wall {
    /// A new Lease term: nothing proven yet, probe at once.
    pub(crate) fn new_term() -> Self {
        Wall {
            holds: None,
            due: true,
            stale_told: HashSet::new(),
        }
    }
}

fn is_cpms(o: &Value) -> bool {
    o["kind"] == CPMS_KIND
}

/// The object to probe with: the first MachineSet listed, else the first
/// ControlPlaneMachineSet (listed only with `--control-plane-machine-sets`).
fn probe_target(objects: &[Value]) -> Option<&Value> {
    let named = || objects.iter().filter(|o| o["metadata"]["name"].is_string());
    named()
        .find(|o| !is_cpms(o))
        .or_else(|| named().find(|o| is_cpms(o)))
}

/// The probe's merge patch: a write the policy must deny and the object's own schema
/// allows. A ControlPlaneMachineSet's replicas are immutable by its schema, which would
/// refuse the probe before the policy is asked: its labels instead.
fn probe_patch(o: &Value) -> Value {
    if is_cpms(o) {
        let other = match o["metadata"]["labels"][PROBE_LABEL].as_str() {
            Some("a") => "b",
            _ => "a",
        };
        json!({"metadata": {"labels": {PROBE_LABEL: other}}})
    } else {
        json!({"spec": {"replicas": other_replicas(o)}})
    }
}

/// A `spec.replicas` other than the MachineSet's (absent reads as the schema's default).
fn other_replicas(ms: &Value) -> i64 {
    let now = ms["spec"]["replicas"].as_i64().unwrap_or(1);
    if now < i64::from(i32::MAX) {
        now + 1
    } else {
        now - 1
    }
}

impl Toucher {
    /// Whether this pass may write: probes when due (or when it would write, or while the
    /// wall is not proven), tells every change of verdict, and keeps the last verdict when
    /// the answer cannot tell. `Err` stops the pass: a hole, or touches waiting on a wall
    /// not proven yet; it is tried again after a backoff, which probes again.
    pub(super) async fn wall_holds(
        &mut self,
        objects: &[Value],
        work: bool,
    ) -> Result<(), PassError> {
        if !self.settings.admission_policy_check {
            return Ok(());
        }
        let due = std::mem::take(&mut self.wall.due);
        if due || work || self.wall.holds != Some(true) {
            match probe_target(objects) {
                Some(ms) => self.probe(ms, due).await,
                None => tracing::debug!("nothing to probe the admission policy with"),
            }
        }
        match self.wall.holds {
            Some(true) => Ok(()),
            Some(false) => Err(PassError::PolicyNotEnforced),
            None if work => Err(PassError::PolicyUnproven),
            None => Ok(()),
        }
    }

    /// One dry run, its verdict recorded, logged, counted and told.
    async fn probe(&mut self, ms: &Value, due: bool) {
        let name = ms["metadata"]["name"].as_str().unwrap_or_default();
        let params = PatchParams {
            dry_run: true,
            field_manager: Some(FIELD_MANAGER.into()),
            ..PatchParams::default()
        };
        let api = match &self.cpms_api {
            Some(cpms) if is_cpms(ms) => cpms,
            _ => &self.api,
        };
        let patch = probe_patch(ms);
        let answer = within(api.patch(name, &params, &Patch::Merge(&patch))).await;
        let before = self.wall.holds;
        match classify(answer.as_ref().map(drop)) {
            Verdict::Holds => {
                self.wall.holds = Some(true);
                self.metrics.touch.admission_policy_enforced.set(1);
                tracing::debug!(machineset = %name, "the admission policy denied the probe: it holds");
                if before == Some(false) {
                    tracing::info!(condition = ENFORCED, machineset = %name, "the ValidatingAdmissionPolicy {} denies the ServiceAccount's writes again: touching resumes", apis::ADMISSION_POLICY);
                    self.tell(ms, EventType::Normal, ENFORCED, enforced_note())
                        .await;
                }
            }
            Verdict::Hole => {
                self.wall.holds = Some(false);
                self.metrics.touch.admission_policy_enforced.set(0);
                // Told when found, and again at each resync while it lasts (the Recorder
                // folds the repeats into one Event, kept fresh); the retries in between
                // only probe.
                if before != Some(false) || due {
                    let note = not_enforced_note(ms);
                    tracing::error!(condition = NOT_ENFORCED, machineset = %name, "{note}");
                    self.tell(ms, EventType::Warning, NOT_ENFORCED, note).await;
                } else {
                    tracing::debug!(machineset = %name, "the admission policy still admits the probe");
                }
            }
            Verdict::Unknown => {
                let error = answer.err().map(|e| e.to_string()).unwrap_or_default();
                let kept = match before {
                    Some(true) => "the last verdict stands: it holds",
                    Some(false) => "the last verdict stands: it does not hold",
                    None => "not touching until it is proven",
                };
                tracing::warn!(condition = UNVERIFIED, machineset = %name, %error, "could not tell whether the admission policy holds ({kept})");
            }
        }
    }

    /// A touch refused on its value although the ConfigMap names it: told once per
    /// MachineSet and target in a Lease term (each pass tries again).
    pub(super) async fn report_stale_parameter(&mut self, p: &Planned) {
        if !self
            .wall
            .stale_told
            .insert((p.uid.clone(), p.target.clone()))
        {
            tracing::debug!(machineset = %p.name, target = %p.target, "the admission policy still refuses the target");
            return;
        }
        let note = stale_note(&p.name, &p.target);
        tracing::error!(condition = PARAMETER_STALE, machineset = %p.name, target = %p.target, "{note}");
        let event = Event {
            type_: EventType::Warning,
            reason: PARAMETER_STALE.into(),
            note: Some(note),
            action: "Update".into(),
            secondary: None,
        };
        if let Err(e) = self.own_event(&event, &self.reference(p)).await {
            tracing::warn!(machineset = %p.name, error = %e, "could not record the Event");
        }
    }

    /// A Warning or Normal Event on the probed object: Events are granted in its namespace
    /// only, where an administrator looks for the toucher's Events anyway.
    async fn tell(&self, ms: &Value, type_: EventType, reason: &str, note: String) {
        let meta = |k: &str| ms["metadata"][k].as_str().unwrap_or_default().to_owned();
        let p = Planned {
            kind: ms["kind"]
                .as_str()
                .unwrap_or(apis::MACHINESET.kind)
                .to_owned(),
            name: meta("name"),
            uid: meta("uid"),
            current: String::new(),
            target: String::new(),
        };
        let on: ObjectReference = self.reference(&p);
        let event = Event {
            type_,
            reason: reason.into(),
            note: Some(note),
            action: "ProbeAdmissionPolicy".into(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&event, &on).await {
            tracing::warn!(machineset = %p.name, error = %e, "could not record the Event");
        }
    }
}

fn not_enforced_note(probed: &Value) -> String {
    let name = probed["metadata"]["name"].as_str().unwrap_or_default();
    let what = if is_cpms(probed) {
        format!("a label of ControlPlaneMachineSet {name}")
    } else {
        format!("spec.replicas of MachineSet {name}")
    };
    format!(
        "the ValidatingAdmissionPolicy {policy} did not deny a dry-run change of {what} by this ServiceAccount: the policy or its binding is missing or not enforced, so the ServiceAccount's writes are not limited to boot images. Not touching MachineSets until it holds again; re-apply the manifests (policy and binding {policy}).",
        policy = apis::ADMISSION_POLICY
    )
}

fn stale_note(name: &str, target: &str) -> String {
    format!(
        "the ValidatingAdmissionPolicy {policy} refused to let MachineSet {name} move to {target}, which the ConfigMap {ns}/{cm} names: the API server judged the write against an older copy of that ConfigMap. Kubernetes keeps such a copy from the moment the policy's binding was deleted until the kube-apiserver restarts (kubernetes/kubernetes#130887); if the binding was deleted and re-created, restart the kube-apiserver pods. Trying again at each pass.",
        policy = apis::ADMISSION_POLICY,
        ns = apis::MCO_NAMESPACE,
        cm = apis::BOOTIMAGES_CONFIGMAP,
    )
}

fn enforced_note() -> String {
    format!(
        "the ValidatingAdmissionPolicy {} denies the ServiceAccount's writes beyond boot images again: touching resumes",
        apis::ADMISSION_POLICY
    )
}

#[cfg(test)]
mod tests {
    use kube::core::Status;

    use super::*;

    fn refused(code: u16, reason: &str, message: &str) -> Fault {
        Fault::Kube(kube::Error::Api(Box::new(Status {
            code,
            ..Status::failure(message, reason)
        })))
    }

    const DENIED: &str = "machinesets.machine.openshift.io \"ms-a\" is invalid: : ValidatingAdmissionPolicy 'bootimage-webhook-boot-images-only' with binding 'bootimage-webhook-boot-images-only' denied request: the bootimage-webhook ServiceAccount may change only the boot image: replicas, selector, template metadata and labels are not its to change";

    #[test]
    fn only_the_policys_own_denial_is_proof_and_only_success_is_a_hole() {
        assert_eq!(classify(Ok(())), Verdict::Hole);
        assert_eq!(
            classify(Err(&refused(422, "Invalid", DENIED))),
            Verdict::Holds
        );
        let forbidden = DENIED.replace("is invalid", "is forbidden");
        assert_eq!(
            classify(Err(&refused(403, "Forbidden", &forbidden))),
            Verdict::Holds
        );
        // Another policy, another plugin, RBAC, a conflict, a deleted MachineSet, the API
        // server down or slow: nothing proven either way.
        let other = DENIED.replace("bootimage-webhook-boot-images-only", "someone-elses");
        let rbac = "machinesets.machine.openshift.io \"ms-a\" is forbidden: User \"system:serviceaccount:bootimage-webhook:bootimage-webhook\" cannot patch resource \"machinesets\"";
        let unknown = [
            refused(422, "Invalid", &other),
            refused(422, "Invalid", "spec.replicas: Invalid value: -1"),
            refused(403, "Forbidden", rbac),
            refused(409, "Conflict", "the object has been modified"),
            refused(
                404,
                "NotFound",
                "machinesets.machine.openshift.io \"ms-a\" not found",
            ),
            refused(500, "InternalError", DENIED),
            refused(503, "ServiceUnavailable", "etcdserver: leader changed"),
            Fault::TimedOut(super::super::retry::CALL_TIMEOUT),
            Fault::Kube(kube::Error::Service(Box::new(std::io::Error::from(
                std::io::ErrorKind::ConnectionRefused,
            )))),
        ];
        for fault in &unknown {
            assert_eq!(classify(Err(fault)), Verdict::Unknown, "{fault}");
        }
    }

    #[test]
    fn a_refusal_on_values_is_told_apart_from_the_other_rules() {
        let gcp = "machinesets.machine.openshift.io \"ms-a\" is invalid: : ValidatingAdmissionPolicy 'bootimage-webhook-boot-images-only' with binding 'bootimage-webhook-boot-images-only' denied request: the bootimage-webhook ServiceAccount may set a GCP boot disk image only to an image of the ConfigMap openshift-machine-config-operator/coreos-bootimages (stream or streams), and no other disk image";
        assert!(refused_for_value(&refused(422, "Invalid", gcp)));
        assert!(!refused_for_value(&refused(422, "Invalid", DENIED)));
        let other = gcp.replace("bootimage-webhook-boot-images-only", "someone-elses");
        assert!(!refused_for_value(&refused(422, "Invalid", &other)));
        assert!(!refused_for_value(&refused(500, "InternalError", gcp)));
    }

    #[test]
    fn every_rule_on_values_and_no_other_carries_the_mark() {
        let policy = include_str!("../../../manifests/base/validatingadmissionpolicy.yaml");
        let docs: Vec<Value> = serde_saphyr::from_multiple(policy).expect("the policy parses");
        let rules = docs
            .iter()
            .filter(|d| d["metadata"]["name"] == apis::ADMISSION_POLICY)
            .flat_map(|d| {
                d["spec"]["validations"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            });
        let mut marked = Vec::new();
        for r in rules {
            let text = r["message"].as_str().or(r["messageExpression"].as_str());
            let text = text.expect("every rule says why");
            if text.contains(VALUE_RULE_MARK) {
                marked.push(r["expression"].as_str().unwrap_or_default().to_owned());
            }
        }
        // One rule on values per platform, each naming the ConfigMap it judges by.
        let platforms = crate::core::platforms::Platform::ALL.len();
        assert_eq!(marked.len(), platforms, "{marked:#?}");
        assert!(marked.iter().all(|e| e.contains("variables.update")));
    }

    #[test]
    fn the_stale_warning_names_the_configmap_and_the_fix() {
        let note = stale_note("ms-a", "projects/p/global/images/x");
        assert!(
            note.contains("MachineSet ms-a move to projects/p/global/images/x"),
            "{note}"
        );
        assert!(
            note.contains("openshift-machine-config-operator/coreos-bootimages"),
            "{note}"
        );
        assert!(note.contains("restart the kube-apiserver"), "{note}");
    }

    #[test]
    fn the_warning_names_what_was_probed_and_the_fix() {
        let ms = json!({"kind": "MachineSet", "metadata": {"name": "ms-a"}});
        let cpms = json!({"kind": "ControlPlaneMachineSet", "metadata": {"name": "cluster"}});
        let note = not_enforced_note(&ms);
        assert!(note.contains("spec.replicas of MachineSet ms-a"), "{note}");
        assert!(note.contains("re-apply the manifests"), "{note}");
        let note = not_enforced_note(&cpms);
        assert!(
            note.contains("a label of ControlPlaneMachineSet cluster"),
            "{note}"
        );
    }

    #[test]
    fn the_probe_always_asks_for_another_replica_count() {
        let ms = |r: Value| json!({"kind": "MachineSet", "spec": {"replicas": r}});
        assert_eq!(other_replicas(&ms(json!(0))), 1);
        assert_eq!(other_replicas(&ms(json!(3))), 4);
        assert_eq!(
            other_replicas(&ms(json!(i32::MAX))),
            i64::from(i32::MAX) - 1
        );
        // Absent: the schema's default.
        assert_eq!(other_replicas(&json!({"kind": "MachineSet"})), 2);
    }

    #[test]
    fn the_probe_is_made_on_a_machineset_else_on_the_control_plane_machine_set() {
        let cpms = json!({"kind": "ControlPlaneMachineSet", "metadata": {"name": "cluster"}});
        let ms = json!({"kind": "MachineSet", "metadata": {"name": "ms-a"}});
        // List items may come without their kind.
        let bare = json!({"metadata": {"name": "ms-b"}});
        assert_eq!(probe_target(&[cpms.clone(), ms.clone()]), Some(&ms));
        assert_eq!(probe_target(&[cpms.clone(), bare.clone()]), Some(&bare));
        assert_eq!(probe_target(std::slice::from_ref(&cpms)), Some(&cpms));
        assert_eq!(probe_target(&[]), None);
        assert_eq!(probe_patch(&ms), json!({"spec": {"replicas": 2}}));
        assert_eq!(
            probe_patch(&cpms),
            json!({"metadata": {"labels": {PROBE_LABEL: "a"}}})
        );
        let mut labelled = cpms.clone();
        labelled["metadata"]["labels"] = json!({PROBE_LABEL: "a"});
        assert_eq!(
            probe_patch(&labelled),
            json!({"metadata": {"labels": {PROBE_LABEL: "b"}}})
        );
    }
}
