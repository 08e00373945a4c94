//! Warning Events on the objects that wait for an import that cannot happen until a person
//! acts (a bad artifact, a foreign image under our name): once per object and trouble, not
//! once per pass, each trouble an Event of its own with its own note.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use serde_json::Value;

pub struct Warnings {
    client: kube::Client,
    reporter: Reporter,
    /// Events already sent.
    sent: BTreeSet<String>,
}

/// What an Event says and of what.
pub struct Warning<'a> {
    /// The platform's not-imported reason, as the webhook says it.
    pub reason: &'a str,
    pub action: &'a str,
    pub note: &'a str,
}

impl Warnings {
    pub fn new(client: kube::Client, reporter: Reporter) -> Warnings {
        Warnings {
            client,
            reporter,
            sent: BTreeSet::new(),
        }
    }

    /// The Warning on each of `objects` that has not had it yet.
    pub async fn warn(&mut self, objects: impl IntoIterator<Item = &Value>, w: &Warning<'_>) {
        for object in objects {
            let reference = reference(object);
            if !first_time(&mut self.sent, &reference, w) {
                continue;
            }
            let event = Event {
                type_: EventType::Warning,
                reason: w.reason.into(),
                note: Some(w.note.chars().take(1000).collect()),
                action: w.action.into(),
                secondary: None,
            };
            // A recorder of its own: one shared would count a new trouble as the last
            // Event on the object (same reason and action), whose note would then be stale.
            let recorder = Recorder::new(self.client.clone(), self.reporter.clone());
            if let Err(err) = recorder.publish(&event, &reference).await {
                tracing::warn!(error = %err, "cannot record the Event");
            }
        }
    }
}

/// Whether this Warning on this object is new (and remembered from now on).
fn first_time(sent: &mut BTreeSet<String>, reference: &ObjectReference, w: &Warning<'_>) -> bool {
    let key = format!(
        "{:?}/{:?}/{:?}: {}: {}",
        reference.kind, reference.namespace, reference.name, w.reason, w.note
    );
    sent.insert(key)
}

fn reference(object: &Value) -> ObjectReference {
    let field = |p: &str| object.pointer(p).and_then(Value::as_str).map(str::to_owned);
    ObjectReference {
        api_version: field("/apiVersion"),
        kind: field("/kind"),
        name: field("/metadata/name"),
        namespace: field("/metadata/namespace"),
        uid: field("/metadata/uid"),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_warning_goes_once_per_object_and_trouble() {
        let ms = |name: &str| {
            json!({"apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet",
                   "metadata": {"name": name, "namespace": "openshift-machine-api", "uid": "u1"}})
        };
        let r = reference(&ms("a"));
        assert_eq!(r.name.as_deref(), Some("a"));
        assert_eq!(r.uid.as_deref(), Some("u1"));
        assert_eq!(r.kind.as_deref(), Some("MachineSet"));
        let w = |note| Warning {
            reason: "ImageNotImported",
            action: "ImportImage",
            note,
        };
        let mut sent = BTreeSet::new();
        assert!(first_time(&mut sent, &r, &w("bad checksum")));
        assert!(!first_time(&mut sent, &r, &w("bad checksum")));
        assert!(first_time(&mut sent, &r, &w("name taken")));
        assert!(first_time(
            &mut sent,
            &reference(&ms("b")),
            &w("bad checksum")
        ));
    }
}
