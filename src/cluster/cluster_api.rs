//! Cluster API MachineSets on the cluster ([cluster-api.md](../../docs/cluster-api.md)): the
//! template maker's pass, which reads what `core::cluster_api::decide` needs, decides every
//! Cluster API MachineSet of a namespace, makes the template clones it asks for, and retires
//! ours that nobody uses. It creates and deletes templates and never writes a MachineSet: moving the reference is the webhook's
//! (the decision's patch), under another identity. Not wired into any command yet.

use std::collections::{BTreeMap, BTreeSet};

use kube::api::{Api, DeleteParams, ListParams, PostParams, Preconditions};
use kube::core::DynamicObject;
use kube::{Client, Error as KubeError};
use serde_json::Value;

use super::apis::{self, Call};
use crate::core::cluster_api::{
    self, CLONE_LABEL, Clone, ClusterApiDecision, ClusterApiReason, Inputs, TemplateKind, template,
};
use crate::core::snapshot::Snapshot;

/// What goes wrong in a pass.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{what}: {source}")]
    Api {
        what: String,
        #[source]
        source: KubeError,
    },
    /// A template holds the clone's name but is not ours, or not the clone: never used.
    #[error(
        "{kind} {name} exists but is not the clone the decision asks for (no {CLONE_LABEL} label, or another spec): left as it is"
    )]
    NotOurs { kind: String, name: String },
    #[error("the clone is not an object the API takes: {0}")]
    Unwritable(#[source] serde_json::Error),
}

/// The settings of a pass.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The namespace of the Cluster API MachineSets (`openshift-cluster-api`).
    pub namespace: String,
    /// The namespace of their machine API twins (`openshift-machine-api`).
    pub machine_api_namespace: String,
    /// AWS: the cluster's region.
    pub region: Option<String>,
    /// The opt-in: MachineSets owned by a MachineDeployment are decided too.
    pub machine_deployments: bool,
    /// Retire our clones that no MachineSet names and no decision wants.
    pub retire: bool,
}

/// What a pass did.
#[derive(Debug, Default)]
pub struct Pass {
    pub outcomes: Vec<Outcome>,
    /// The clones retired (kind, name), or why one could not be.
    pub retired: Vec<(String, String, Result<(), Error>)>,
}

/// One MachineSet's outcome in a pass.
#[derive(Debug)]
pub struct Outcome {
    pub machine_set: String,
    pub decision: ClusterApiDecision,
    /// The clone this pass created (`Some(true)`), found already made (`Some(false)`), or
    /// could not use.
    pub made: Option<Result<bool, Error>>,
}

/// The call of a served template kind.
fn template_call(kind: &str) -> Option<&'static Call> {
    [
        &apis::AWS_MACHINE_TEMPLATE,
        &apis::OPENSTACK_MACHINE_TEMPLATE,
    ]
    .into_iter()
    .find(|c| c.kind == kind && TemplateKind::by_kind(kind).is_some())
}

fn api_error(what: impl Into<String>) -> impl FnOnce(KubeError) -> Error {
    let what = what.into();
    move |source| Error::Api { what, source }
}

/// The template maker's pass over `settings.namespace`: every Cluster API MachineSet decided,
/// each clone it asks for made, and (with `retire`) our clones nobody names or wants
/// deleted. Errors of one MachineSet or clone are its own; a list that fails ends the pass.
pub async fn pass(client: &Client, snap: &Snapshot, settings: &Settings) -> Result<Pass, Error> {
    let ns = settings.namespace.as_str();
    let machine_sets: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        ns,
        &apis::CLUSTER_API_MACHINESET.api_resource(),
    );
    let listed = machine_sets
        .list(&ListParams::default())
        .await
        .map_err(api_error(format!("list Cluster API MachineSets in {ns}")))?;
    let twins = twin_authorities(client, &settings.machine_api_namespace).await?;
    let mut templates: BTreeMap<String, BTreeMap<String, Value>> = BTreeMap::new();
    // Per kind, the templates a MachineSet names or a decision wants.
    let mut kept: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut done = Pass::default();
    for ms in listed.items {
        let ms = serde_json::to_value(&ms).unwrap_or_default();
        let name = ms["metadata"]["name"].as_str().unwrap_or("").to_owned();
        let named = cluster_api::infrastructure_ref(&ms).map(|(k, n)| (k.to_owned(), n.to_owned()));
        if let Some((kind, template)) = &named {
            if !templates.contains_key(kind) {
                let listed = list_templates(client, ns, kind).await?;
                templates.insert(kind.clone(), listed);
            }
            kept.entry(kind.clone())
                .or_default()
                .insert(template.clone());
        }
        let of_kind = |k: &str| templates.get(k);
        let decision = decide_one(&ms, of_kind, twins.get(&name), settings, snap);
        if let (Some((kind, _)), Some(clone)) = (&named, &decision.clone) {
            kept.entry(kind.clone())
                .or_default()
                .insert(clone.name.clone());
        }
        let made = match (&decision.reason, &decision.clone) {
            (ClusterApiReason::CloneAwaited, Some(clone)) => Some(make(client, clone).await),
            _ => None,
        };
        done.outcomes.push(Outcome {
            machine_set: name,
            decision,
            made,
        });
    }
    if settings.retire {
        for (kind, of_kind) in &templates {
            let keep = kept.get(kind).cloned().unwrap_or_default();
            for name in cluster_api::retired(of_kind, &keep) {
                let result = retire(client, ns, kind, &of_kind[name]).await;
                done.retired.push((kind.clone(), name.to_owned(), result));
            }
        }
    }
    Ok(done)
}

/// Deletes one clone, on the condition that it is still the object judged (its uid and
/// version): a clone changed since the list is left for the next pass.
async fn retire(client: &Client, ns: &str, kind: &str, template: &Value) -> Result<(), Error> {
    let name = template
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let call = template_call(kind).ok_or_else(|| not_ours(kind, name))?;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &call.api_resource());
    let field = |key: &str| {
        template
            .pointer(&format!("/metadata/{key}"))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: field("uid"),
            resource_version: field("resourceVersion"),
        }),
        ..DeleteParams::default()
    };
    match api.delete(name, &params).await {
        Ok(_) => Ok(()),
        Err(KubeError::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(api_error(format!("delete {kind} {name}"))(e)),
    }
}

/// The decision on one MachineSet, with the templates of its kind as listed.
fn decide_one<'t>(
    ms: &Value,
    templates_of: impl Fn(&str) -> Option<&'t BTreeMap<String, Value>>,
    twin: Option<&String>,
    settings: &Settings,
    snap: &Snapshot,
) -> ClusterApiDecision {
    let named = cluster_api::infrastructure_ref(ms);
    let of_kind = named.and_then(|(kind, _)| templates_of(kind));
    let template = named.and_then(|(_, name)| of_kind?.get(name));
    let none = BTreeMap::new();
    let inputs = Inputs {
        machine_set: ms,
        template,
        region: settings.region.as_deref(),
        twin_authority: twin.map(String::as_str),
        templates: of_kind.unwrap_or(&none),
        machine_deployments: settings.machine_deployments,
    };
    cluster_api::decide(&inputs, snap)
}

/// The machine API MachineSets' `status.authoritativeAPI`, by name (none where there is no
/// machine API, or it is not served).
async fn twin_authorities(client: &Client, ns: &str) -> Result<BTreeMap<String, String>, Error> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), ns, &apis::MACHINESET.api_resource());
    let listed = match api.list(&ListParams::default()).await {
        Ok(l) => l,
        Err(KubeError::Api(s)) if s.code == 404 => return Ok(BTreeMap::new()),
        Err(e) => {
            return Err(api_error(format!("list machine API MachineSets in {ns}"))(
                e,
            ));
        }
    };
    Ok(listed
        .items
        .into_iter()
        .filter_map(|ms| {
            let api = ms.data.pointer("/status/authoritativeAPI")?.as_str()?;
            Some((ms.metadata.name?, api.to_owned()))
        })
        .collect())
}

/// The templates of `kind` in `ns`, by name (none of a kind not served).
async fn list_templates(
    client: &Client,
    ns: &str,
    kind: &str,
) -> Result<BTreeMap<String, Value>, Error> {
    let Some(call) = template_call(kind) else {
        return Ok(BTreeMap::new());
    };
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &call.api_resource());
    let listed = api
        .list(&ListParams::default())
        .await
        .map_err(api_error(format!("list {kind} in {ns}")))?;
    Ok(listed
        .items
        .into_iter()
        .filter_map(|t| {
            let name = t.metadata.name.clone()?;
            Some((name, serde_json::to_value(&t).ok()?))
        })
        .collect())
}

/// Creates the clone: `Ok(true)` made now, `Ok(false)` there already (the same content, ours).
pub async fn make(client: &Client, clone: &Clone) -> Result<bool, Error> {
    let kind = clone.object["kind"].as_str().unwrap_or("");
    let ns = clone.object["metadata"]["namespace"].as_str().unwrap_or("");
    let call = template_call(kind).ok_or_else(|| not_ours(kind, &clone.name))?;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &call.api_resource());
    // The clone is written as the source was read, in the version the call names.
    let mut object = clone.object.clone();
    object["apiVersion"] = Value::String(format!("{}/{}", call.group, call.version));
    let object: DynamicObject = serde_json::from_value(object).map_err(Error::Unwritable)?;
    match api.create(&PostParams::default(), &object).await {
        Ok(_) => Ok(true),
        Err(KubeError::Api(s)) if s.code == 409 => {
            let there = api
                .get(&clone.name)
                .await
                .map_err(api_error(format!("get {kind} {}", clone.name)))?;
            let there = serde_json::to_value(&there).unwrap_or_default();
            if template::is_clone(&there, clone) {
                Ok(false)
            } else {
                Err(not_ours(kind, &clone.name))
            }
        }
        Err(e) => Err(api_error(format!("create {kind} {}", clone.name))(e)),
    }
}

fn not_ours(kind: &str, name: &str) -> Error {
    Error::NotOurs {
        kind: kind.to_owned(),
        name: name.to_owned(),
    }
}
