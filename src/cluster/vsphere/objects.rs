//! What the importer reads from MachineSets, ControlPlaneMachineSets and Machines.

use serde_json::Value;

/// The vSphere providerSpec value of a MachineSet, ControlPlaneMachineSet or Machine.
fn provider_value(obj: &Value) -> Option<&Value> {
    obj.pointer("/spec/template/spec/providerSpec/value")
        .or_else(|| obj.pointer("/spec/providerSpec/value"))
        .or_else(|| {
            obj.pointer(
                "/spec/template/machines_v1beta1_machine_openshift_io/spec/providerSpec/value",
            )
        })
}

/// The template the object names, as written (a name or an inventory path).
pub fn template_path(obj: &Value) -> Option<&str> {
    provider_value(obj)?.get("template")?.as_str()
}

/// The template the object names (its last path element).
pub fn template_of(obj: &Value) -> Option<&str> {
    let template = template_path(obj)?;
    Some(template.rsplit('/').next().unwrap_or(template))
}

/// `providerSpec.value.tagIDs`: the tags its machines get, which the new template gets too.
pub fn tag_ids_of(obj: &Value) -> Vec<String> {
    crate::core::lenient::strings(provider_value(obj).and_then(|v| v.get("tagIDs")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn templates_and_tags_of_each_kind() {
        let value = json!({"template": "/DC0/vm/f/ci-rhcos", "tagIDs": ["urn:vmomi:InventoryServiceTag:1:GLOBAL", 7]});
        let machineset =
            json!({"spec": {"template": {"spec": {"providerSpec": {"value": value}}}}});
        let machine = json!({"spec": {"providerSpec": {"value": {"template": "ci-rhcos"}}}});
        let cpms = json!({"spec": {"template": {"machines_v1beta1_machine_openshift_io": {"spec": {"providerSpec": {"value": {"template": "a/b"}}}}}}});
        assert_eq!(template_path(&machineset), Some("/DC0/vm/f/ci-rhcos"));
        assert_eq!(template_of(&machineset), Some("ci-rhcos"));
        assert_eq!(template_of(&machine), Some("ci-rhcos"));
        assert_eq!(template_of(&cpms), Some("b"));
        assert_eq!(template_of(&json!({"spec": {}})), None);
        assert_eq!(
            tag_ids_of(&machineset),
            ["urn:vmomi:InventoryServiceTag:1:GLOBAL"]
        );
        assert!(tag_ids_of(&machine).is_empty());
    }
}
