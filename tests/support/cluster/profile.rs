//! A cluster profile (`support::clusters`) loaded into the real apiserver as OpenShift
//! leaves it: every object created as its writer creates it, then each status written
//! through its subresource as the operator that owns it writes it, then every object read
//! back: the apiserver must hold every field the profile gives (it adds its defaults, and
//! a field its CRD lacks would be pruned: such a profile is wrong, not the test).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::super::apiserver::ApiServer;
use super::super::clusters::{FILES, Profile};
use super::{create_all, set_master_updated, set_status};

/// Loads `profile` into `api`; returns its objects as loaded.
pub fn load_profile(api: &ApiServer, profile: Profile) -> Vec<Value> {
    load_profile_with(api, profile, &[])
}

/// [`load_profile`] with each `(from, to)` replaced in the profile's text first: the
/// addresses of a test's own servers (vcsim, Prism Central), where a profile names the
/// example ones.
pub fn load_profile_with(api: &ApiServer, profile: Profile, replace: &[(&str, &str)]) -> Vec<Value> {
    let mut objects = Vec::new();
    for (file, _) in FILES {
        let mut text = profile.text(file);
        for (from, to) in replace {
            text = text.replace(from, to);
        }
        let docs = bootimage_webhook::core::snapshot::parse_documents(&text)
            .unwrap_or_else(|e| panic!("profile {profile:?} {file}: {e}"));
        objects.extend(docs.into_iter().filter(|d| !d.is_null()));
    }
    let specs: Vec<Value> = objects
        .iter()
        .map(|o| {
            let mut o = o.clone();
            o.as_object_mut().unwrap().remove("status");
            o
        })
        .collect();
    create_all(api, &specs.iter().collect::<Vec<_>>());
    for o in &objects {
        if let Some(status) = o.get("status") {
            let kind = o["kind"].as_str().unwrap().to_lowercase();
            set_status(api, &kind, o["metadata"]["name"].as_str().unwrap(), status.clone());
        }
    }
    let stored = stored(api, &objects);
    for o in &objects {
        let what = format!("{profile:?} {} {}", o["kind"], o["metadata"]["name"]);
        let held = stored
            .iter()
            .find(|s| s["kind"] == o["kind"] && s["metadata"]["name"] == o["metadata"]["name"])
            .unwrap_or_else(|| panic!("{what}: not stored"));
        assert_holds(held, o, &what, "");
    }
    objects
}

/// Deletes what [`load_profile`] created.
pub fn unload_profile(api: &ApiServer, objects: &[Value]) {
    let list = json!({"apiVersion": "v1", "kind": "List", "items": objects});
    let out = api.kubectl_stdin(["delete", "--wait=true", "-f", "-"], &list.to_string());
    api.expect_ok(&["delete", "-f", "-"], out);
}

/// What the cluster runs besides what the profile holds, as the default install's gate and
/// the architecture read it: the master pool done with the profile's release (its rendered
/// MachineConfig of that release) and one amd64 master Node.
pub fn run_state(api: &ApiServer, profile: Profile) {
    let cv = profile.object("clusterversion.yaml");
    let release = cv["status"]["history"][0]["version"].as_str().unwrap();
    let world = [
        json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
               "metadata": {"name": "master"},
               "spec": {"configuration": {"name": "rendered-master-new"},
                        "machineConfigSelector": {"matchLabels": {"machineconfiguration.openshift.io/role": "master"}},
                        "nodeSelector": {"matchLabels": {"node-role.kubernetes.io/master": ""}}}}),
        json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
               "metadata": {"name": "rendered-master-new",
                            "annotations": {"machineconfiguration.openshift.io/release-image-version": release}},
               "spec": {"config": {"ignition": {"version": "3.5.0"}}}}),
        json!({"apiVersion": "v1", "kind": "Node",
               "metadata": {"name": "master-0",
                            "labels": {"node-role.kubernetes.io/master": "", "kubernetes.io/arch": "amd64"}}}),
    ];
    create_all(api, &world.iter().collect::<Vec<_>>());
    set_master_updated(api, 1);
}

/// `kind.group`, as kubectl names the resource of `o`.
fn resource(o: &Value) -> String {
    let kind = o["kind"].as_str().unwrap().to_lowercase();
    match o["apiVersion"].as_str().unwrap().split_once('/') {
        Some((group, _)) => format!("{kind}.{group}"),
        None => kind,
    }
}

/// What the apiserver holds of `objects`: one `get` per namespace.
fn stored(api: &ApiServer, objects: &[Value]) -> Vec<Value> {
    let mut by_namespace: BTreeMap<Option<&str>, Vec<String>> = BTreeMap::new();
    for o in objects {
        let name = format!("{}/{}", resource(o), o["metadata"]["name"].as_str().unwrap());
        by_namespace
            .entry(o["metadata"]["namespace"].as_str())
            .or_default()
            .push(name);
    }
    let mut held = Vec::new();
    for (namespace, mut args) in by_namespace {
        if let Some(ns) = namespace {
            args.extend(["-n".to_owned(), ns.to_owned()]);
        }
        let got = api.get_json(&args);
        match got["items"].as_array() {
            Some(items) => held.extend(items.iter().cloned()),
            None => held.push(got),
        }
    }
    held
}

/// Every field of `want` is in `stored` with its value (a null: absent or null); lists
/// element by element.
pub fn assert_holds(stored: &Value, want: &Value, what: &str, path: &str) {
    match want {
        Value::Null => assert!(
            stored.is_null(),
            "{what}: the apiserver holds {stored} at {path}, the profile null"
        ),
        Value::Object(fields) => {
            for (k, v) in fields {
                let at = format!("{path}/{k}");
                match stored.get(k) {
                    Some(s) => assert_holds(s, v, what, &at),
                    None => assert!(
                        v.is_null(),
                        "{what}: the apiserver dropped {at} (the profile has {v})"
                    ),
                }
            }
        }
        Value::Array(items) => {
            let held = stored.as_array().map_or(0, Vec::len);
            assert_eq!(held, items.len(), "{what}: {path} holds {stored}");
            for (i, v) in items.iter().enumerate() {
                assert_holds(&stored[i], v, what, &format!("{path}/{i}"));
            }
        }
        _ => assert_eq!(stored, want, "{what}: {path}"),
    }
}
