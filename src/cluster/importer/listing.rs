//! What the Lease holder lists: the objects that may wait for an import, and every image
//! they and the Machines name.

use std::collections::BTreeSet;

use kube::api::{Api, ListParams};
use kube::core::DynamicObject;
use serde_json::Value;

use crate::cluster::apis::{self, Call};
use crate::core::decision::{Decision, decide_object};
use crate::core::reason::Reason;
use crate::core::snapshot::{SharedSnapshot, Snapshot};

/// What one listing found.
#[derive(Debug, Default)]
pub struct Listed {
    /// MachineSets and ControlPlaneMachineSets, which may wait for an import.
    pub sets: Vec<Value>,
    /// The images those and the Machines name.
    pub named: BTreeSet<String>,
}

/// Lists the MachineSets, the ControlPlaneMachineSets when they are managed, and the
/// Machines of the platform's grant.
pub struct Lister {
    pub client: kube::Client,
    /// Where the MachineSets are.
    pub namespace: String,
    pub snapshot: SharedSnapshot,
    pub machines: Call,
    pub named: fn(&Value) -> Vec<String>,
}

impl Lister {
    /// `None` when they cannot be listed (then nothing is imported or deleted).
    pub async fn list(&self) -> Option<Listed> {
        let mut listed = Listed::default();
        // ControlPlaneMachineSets only with --control-plane-machine-sets (and its grant).
        let cpms = self.snapshot.load().cluster.control_plane_machine_sets;
        let cpms = cpms.then_some(apis::CONTROLPLANEMACHINESET);
        for call in [Some(apis::MACHINESET), cpms, Some(self.machines)]
            .into_iter()
            .flatten()
        {
            let api: Api<DynamicObject> =
                Api::namespaced_with(self.client.clone(), &self.namespace, &call.api_resource());
            let items = match api.list(&ListParams::default()).await {
                Ok(list) => list.items,
                // A CRD not installed holds nothing; MachineSets must be there.
                Err(kube::Error::Api(s)) if s.code == 404 && call.kind != apis::MACHINESET.kind => {
                    Vec::new()
                }
                Err(e) => {
                    tracing::warn!(error = %e, kind = call.kind, "cannot list them to find which boot images are needed");
                    return None;
                }
            };
            let objects = items.iter().filter_map(|o| serde_json::to_value(o).ok());
            listed.add(objects, call.kind != self.machines.kind, self.named);
        }
        Some(listed)
    }
}

impl Listed {
    /// Adds what `objects` name, and keeps them when they may wait (`sets`).
    pub fn add(
        &mut self,
        objects: impl IntoIterator<Item = Value>,
        sets: bool,
        named: fn(&Value) -> Vec<String>,
    ) {
        for o in objects {
            self.named.extend(named(&o));
            if sets {
                self.sets.push(o);
            }
        }
    }
}

/// An object waiting for an import, and the decision that says so.
#[derive(Debug)]
pub struct Waiting {
    pub object: Value,
    pub decision: Decision,
}

/// The objects whose decision is `reason` (the platform's not-imported reason) with the
/// target `name`.
pub fn waiting_for(sets: &[Value], snap: &Snapshot, reason: Reason, name: &str) -> Vec<Waiting> {
    sets.iter()
        .filter_map(|o| {
            let decision = decide_object(o, snap);
            let waits = decision.reason == reason && decision.target.as_deref() == Some(name);
            waits.then(|| Waiting {
                object: o.clone(),
                decision,
            })
        })
        .collect()
}

/// The providerSpec value of a MachineSet, ControlPlaneMachineSet or Machine.
pub fn provider_value(object: &Value) -> Option<&Value> {
    object
        .pointer("/spec/template/spec/providerSpec/value")
        .or_else(|| object.pointer("/spec/providerSpec/value"))
        .or_else(|| {
            object.pointer(
                "/spec/template/machines_v1beta1_machine_openshift_io/spec/providerSpec/value",
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn image_of(o: &Value) -> Vec<String> {
        provider_value(o)
            .and_then(|v| v.get("image"))
            .and_then(Value::as_str)
            .map(str::to_owned)
            .into_iter()
            .collect()
    }

    #[test]
    fn machines_are_named_but_never_wait() {
        let set = json!({"kind": "MachineSet", "spec": {"template": {"spec": {"providerSpec": {"value": {"image": "a"}}}}}});
        let cpms = json!({"kind": "ControlPlaneMachineSet", "spec": {"template": {"machines_v1beta1_machine_openshift_io": {"spec": {"providerSpec": {"value": {"image": "b"}}}}}}});
        let machine =
            json!({"kind": "Machine", "spec": {"providerSpec": {"value": {"image": "c"}}}});
        let mut listed = Listed::default();
        listed.add([set.clone(), cpms.clone()], true, image_of);
        listed.add([machine, json!({"spec": {}})], false, image_of);
        assert_eq!(listed.named, ["a", "b", "c"].map(String::from).into());
        assert_eq!(listed.sets, [set, cpms]);
    }
}
