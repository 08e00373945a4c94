//! Cluster API MachineSets (`cluster.x-k8s.io`, in `openshift-cluster-api`): the decision, a
//! pure function like the machine API's. A Cluster API MachineSet boots from the template
//! its `spec.template.spec.infrastructureRef` names, and the providers refuse changes to a
//! template's spec, so a new image is a clone of the template with only the image changed,
//! named by its content, and the reference moved to it once it exists.
//!
//! The target is the machine API decision's own: the MachineSet and its template are read as
//! the machine API MachineSet cluster-capi-operator converted them from (its labels and
//! annotations, the template's image in the providerSpec field it came from), and that
//! decision's rules (opt-out, enrollment, stream, gate, architecture, the platform's rule, the
//! stub) give the reason and the image. What is Cluster API's own comes first: an owner
//! MachineDeployment, a machine API twin still authoritative, a template that is missing or
//! of a kind not served.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

use super::decision::{
    self, BOOT_IMAGE_ANNOTATION, OPT_OUT_LABEL, OpKind, Patch, PatchOp, escape_token,
};
use super::platforms::Platform;
use super::reason::Reason;
use super::snapshot::Snapshot;

pub mod template;

pub use template::{CLONE_LABEL, Clone, INFRASTRUCTURE_GROUP, SOURCE_ANNOTATION, TemplateKind};

/// The group of Cluster API's MachineSets and MachineDeployments.
pub const CLUSTER_API_GROUP: &str = "cluster.x-k8s.io";
/// Where OpenShift keeps its Cluster API objects (cluster-capi-operator's
/// `DefaultCAPINamespace`).
pub const CLUSTER_API_NAMESPACE: &str = "openshift-cluster-api";
/// The reference the decision moves.
pub const INFRASTRUCTURE_REF_NAME: &str = "/spec/template/spec/infrastructureRef/name";

/// What decided, in one code: the machine API decision's reason, or one of Cluster API's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ClusterApiReason {
    /// The machine API rules decided (the same codes, `UpToDate` among them).
    Decided(Reason),
    /// Not a Cluster API MachineSet, or no readable `infrastructureRef`.
    NotApplicable,
    /// The MachineSet or its template carries the opt-out label.
    OptedOut,
    /// Owned by a MachineDeployment, whose template change would replace every Machine:
    /// left alone unless the opt-in says otherwise.
    MachineDeploymentOwned,
    /// The machine API MachineSet of the same name is still authoritative: this copy is
    /// written by cluster-capi-operator's sync controller, not by us.
    MachineAPIAuthoritative,
    /// The template the MachineSet names is not there (yet).
    TemplateMissing,
    /// The template is of a kind not served, or selects its image another way.
    UnsupportedTemplate,
    /// AWS: the cluster's region is not known, and the AMI depends on it.
    RegionUnknown,
    /// The clone with the target is not made yet: the reference moves once it is.
    CloneAwaited,
    /// A template of the clone's name exists but is not that clone (no marker, another
    /// spec): never pointed at, and left as it is.
    CloneNameTaken,
    /// The reference moves to the clone.
    Repointed,
}

impl ClusterApiReason {
    pub fn as_str(self) -> &'static str {
        match self {
            ClusterApiReason::Decided(r) => r.as_str(),
            ClusterApiReason::NotApplicable => "NotApplicable",
            ClusterApiReason::OptedOut => "OptedOut",
            ClusterApiReason::MachineDeploymentOwned => "MachineDeploymentOwned",
            ClusterApiReason::MachineAPIAuthoritative => "MachineAPIAuthoritative",
            ClusterApiReason::TemplateMissing => "TemplateMissing",
            ClusterApiReason::UnsupportedTemplate => "UnsupportedTemplate",
            ClusterApiReason::RegionUnknown => "RegionUnknown",
            ClusterApiReason::CloneAwaited => "CloneAwaited",
            ClusterApiReason::CloneNameTaken => "CloneNameTaken",
            ClusterApiReason::Repointed => "Repointed",
        }
    }
}

/// What the decision reads besides the snapshot. The cluster side fills it; nothing here is
/// fetched.
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    /// The Cluster API MachineSet.
    pub machine_set: &'a Value,
    /// The template its `infrastructureRef` names, if found.
    pub template: Option<&'a Value>,
    /// AWS: the region (Infrastructure `status.platformStatus.aws.region`); a template names
    /// none.
    pub region: Option<&'a str>,
    /// `status.authoritativeAPI` of the machine API MachineSet of the same name, if there
    /// is one.
    pub twin_authority: Option<&'a str>,
    /// The templates of the template's kind in the MachineSet's namespace, by name: a clone
    /// counts as made only when the one of its name carries the marker and its spec.
    pub templates: &'a BTreeMap<String, Value>,
    /// The opt-in: MachineSets owned by a MachineDeployment are decided too.
    pub machine_deployments: bool,
}

/// The decision on one Cluster API MachineSet.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterApiDecision {
    pub reason: ClusterApiReason,
    pub message: String,
    pub platform: Option<&'static str>,
    pub current: Option<String>,
    pub target: Option<String>,
    /// The template with the target, to be made by the template maker: set with
    /// `CloneAwaited` and `Repointed`.
    pub clone: Option<Clone>,
    /// The MachineSet's JSON Patch: the reference moved to the clone and the image recorded;
    /// empty unless `Repointed`.
    pub patch: Patch,
}

impl ClusterApiDecision {
    fn new(reason: ClusterApiReason, message: impl Into<String>) -> Self {
        ClusterApiDecision {
            reason,
            message: message.into(),
            platform: None,
            current: None,
            target: None,
            clone: None,
            patch: Patch::default(),
        }
    }
}

/// A rule that decided, boxed: the decision is large and most rules let it through.
type Stop = Box<ClusterApiDecision>;

fn stop(reason: ClusterApiReason, message: impl Into<String>) -> Stop {
    Box::new(ClusterApiDecision::new(reason, message))
}

/// Decide one Cluster API MachineSet. Pure; never panics on any input.
pub fn decide(inputs: &Inputs<'_>, snap: &Snapshot) -> ClusterApiDecision {
    rules(inputs, snap).unwrap_or_else(|decided| *decided)
}

/// The template a Cluster API MachineSet names: its kind and name (`apiGroup` of v1beta2, or
/// the group of v1beta1's `apiVersion`, must be the infrastructure group).
pub fn infrastructure_ref(ms: &Value) -> Option<(&str, &str)> {
    let r = ms.pointer("/spec/template/spec/infrastructureRef")?;
    let group = match r.get("apiGroup").and_then(Value::as_str) {
        Some(g) => g,
        None => {
            r.get("apiVersion")
                .and_then(Value::as_str)?
                .split_once('/')?
                .0
        }
    };
    let kind = r.get("kind").and_then(Value::as_str)?;
    let name = r.get("name").and_then(Value::as_str)?;
    (group == INFRASTRUCTURE_GROUP).then_some((kind, name))
}

fn rules(inputs: &Inputs<'_>, snap: &Snapshot) -> Result<ClusterApiDecision, Stop> {
    let ms = inputs.machine_set;
    let (kind, name) = applicable(ms)?;
    opted_out(ms, "MachineSet")?;
    not_in_a_deployment(ms, inputs.machine_deployments)?;
    cluster_api_authoritative(inputs.twin_authority)?;
    let template = inputs.template.ok_or_else(|| {
        stop(
            ClusterApiReason::TemplateMissing,
            format!("{kind} {name} is not found"),
        )
    })?;
    opted_out(template, kind)?;
    let served = TemplateKind::by_kind(kind).ok_or_else(|| {
        stop(
            ClusterApiReason::UnsupportedTemplate,
            format!("templates of kind {kind} are not served"),
        )
    })?;
    let current = served.image(template).map_err(|why| {
        stop(
            ClusterApiReason::UnsupportedTemplate,
            format!("{kind} {name}: {why}"),
        )
    })?;
    if served.regional && inputs.region.is_none() {
        return Err(stop(
            ClusterApiReason::RegionUnknown,
            "the cluster's region (Infrastructure status.platformStatus.aws.region) is not known: no AMI to take",
        ));
    }
    let twin = machine_api_twin(ms, served, current, inputs.region);
    let d = decision::decide_object(&twin, snap);
    let mut out = stop(ClusterApiReason::Decided(d.reason), d.message.clone());
    out.platform = d.platform;
    out.current = d.current.clone();
    out.target = d.target.clone();
    if d.reason != Reason::Updated {
        return Err(out);
    }
    let sets = template_edits(&d.patch, served).map_err(|pointer| {
        Box::new(ClusterApiDecision {
            reason: ClusterApiReason::UnsupportedTemplate,
            message: format!(
                "the {} rule moves providerSpec{pointer}, which a {kind} has no field for",
                served.platform
            ),
            ..(*out).clone()
        })
    })?;
    let base = ms
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or(name);
    let clone = template::clone_of(template, base, &sets);
    out.clone = Some(clone.clone());
    let target = out.target.clone().unwrap_or_default();
    match inputs.templates.get(&clone.name) {
        None => {
            out.reason = ClusterApiReason::CloneAwaited;
            out.message = format!(
                "{} (template {name} -> {}, once the template maker has made it)",
                d.message, clone.name
            );
            return Err(out);
        }
        Some(there) if !template::is_clone(there, &clone) => {
            out.reason = ClusterApiReason::CloneNameTaken;
            out.message = format!(
                "{kind} {} exists but is not the clone of {name} with {target} (no {CLONE_LABEL} label, or another spec): the MachineSet keeps {name}",
                clone.name
            );
            return Err(out);
        }
        Some(_) => {}
    }
    out.reason = ClusterApiReason::Repointed;
    out.message = format!("{} (template {name} -> {})", d.message, clone.name);
    out.patch = repoint(ms, &clone.name, &target);
    Ok(*out)
}

/// The clones to retire among one kind's templates (by name): ours (the marker), and in
/// `kept` neither as a template a MachineSet names nor as a clone a decision asks for. A
/// template without the marker is never retired, used or not.
pub fn retired<'t>(
    templates: &'t BTreeMap<String, Value>,
    kept: &BTreeSet<String>,
) -> Vec<&'t str> {
    templates
        .iter()
        .filter(|(name, t)| !kept.contains(*name) && template::is_marked(t))
        .map(|(name, _)| name.as_str())
        .collect()
}

/// A `cluster.x-k8s.io` MachineSet naming an infrastructure template.
fn applicable(ms: &Value) -> Result<(&str, &str), Stop> {
    let group = ms
        .get("apiVersion")
        .and_then(Value::as_str)
        .and_then(|v| v.split_once('/'))
        .map(|(g, _)| g);
    let kind = ms.get("kind").and_then(Value::as_str);
    if group != Some(CLUSTER_API_GROUP) || kind != Some("MachineSet") {
        return Err(stop(
            ClusterApiReason::NotApplicable,
            "not a cluster.x-k8s.io MachineSet",
        ));
    }
    infrastructure_ref(ms).ok_or_else(|| {
        stop(
            ClusterApiReason::NotApplicable,
            format!(
                "spec.template.spec.infrastructureRef names no {INFRASTRUCTURE_GROUP} template"
            ),
        )
    })
}

fn opted_out(object: &Value, what: &str) -> Result<(), Stop> {
    let label = object
        .pointer("/metadata/labels")
        .and_then(|l| l.get(OPT_OUT_LABEL))
        .and_then(Value::as_str);
    if label == Some("false") {
        return Err(stop(
            ClusterApiReason::OptedOut,
            format!("{what} labelled {OPT_OUT_LABEL}=false"),
        ));
    }
    Ok(())
}

/// A MachineSet a MachineDeployment owns: moving its template is the MachineDeployment's to
/// do, and replaces every Machine.
fn not_in_a_deployment(ms: &Value, opted_in: bool) -> Result<(), Stop> {
    let owners = ms
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array);
    let deployment = owners.into_iter().flatten().find(|o| {
        o.get("kind").and_then(Value::as_str) == Some("MachineDeployment")
            && o.get("apiVersion")
                .and_then(Value::as_str)
                .is_some_and(|v| v.starts_with("cluster.x-k8s.io/"))
    });
    match deployment {
        Some(owner) if !opted_in => Err(stop(
            ClusterApiReason::MachineDeploymentOwned,
            format!(
                "owned by MachineDeployment {}: a new template there replaces every Machine, so it is left alone (the opt-in --cluster-api-machine-deployments decides it)",
                owner.get("name").and_then(Value::as_str).unwrap_or("")
            ),
        )),
        _ => Ok(()),
    }
}

/// The machine API MachineSet of the same name, while it is authoritative (or migrating),
/// has its Cluster API copy written by the sync controller.
fn cluster_api_authoritative(twin: Option<&str>) -> Result<(), Stop> {
    match twin {
        Some(api @ ("MachineAPI" | "Migrating")) => Err(stop(
            ClusterApiReason::MachineAPIAuthoritative,
            format!(
                "the machine API MachineSet of this name has status.authoritativeAPI {api}: this copy is cluster-capi-operator's to write"
            ),
        )),
        _ => Ok(()),
    }
}

/// The machine API MachineSet the Cluster API one was converted from, as far as the rules
/// read it: its labels and annotations, its Machines' labels, and a providerSpec of the platform's kind holding
/// the template's image, the region and the user-data Secret.
fn machine_api_twin(
    ms: &Value,
    served: TemplateKind,
    image: Option<&str>,
    region: Option<&str>,
) -> Value {
    let meta = |key: &str| ms.pointer(&format!("/metadata/{key}")).cloned();
    let kind = Platform::by_name(served.platform).map_or("", |p| p.provider_spec_kind());
    let mut value = json!({ "kind": kind });
    if let Some(image) = image {
        template::set_pointer(&mut value, served.provider_image, json!(image));
    }
    if let Some(region) = region {
        value["placement"] = json!({ "region": region });
    }
    if let Some(secret) = ms.pointer("/spec/template/spec/bootstrap/dataSecretName") {
        value["userDataSecret"] = json!({ "name": secret });
    }
    let mut metadata = Map::new();
    for key in ["name", "namespace", "labels", "annotations"] {
        if let Some(v) = meta(key) {
            metadata.insert(key.into(), v);
        }
    }
    // The Machines' labels (the os-id among them) are the machine API template's, copied.
    let machines = ms
        .pointer("/spec/template/metadata")
        .cloned()
        .unwrap_or_else(|| json!({}));
    json!({
        "apiVersion": "machine.openshift.io/v1beta1",
        "kind": "MachineSet",
        "metadata": metadata,
        "spec": {"template": {
            "metadata": machines,
            "spec": {"providerSpec": {"value": value}},
        }},
    })
}

/// The machine API patch's providerSpec edits, as the template's fields they set; the
/// pointer of an edit with no such field, if any.
fn template_edits(
    patch: &Patch,
    served: TemplateKind,
) -> Result<Vec<(&'static str, Value)>, String> {
    const PROVIDER_SPEC: &str = "/spec/template/spec/providerSpec/value";
    patch
        .0
        .iter()
        .filter_map(|op| Some((op.path.strip_prefix(PROVIDER_SPEC)?, &op.value)))
        .map(|(pointer, value)| match served.template_pointer(pointer) {
            Some(to) => Ok((to, value.clone())),
            None => Err(pointer.to_owned()),
        })
        .collect()
}

/// The MachineSet's patch: `infrastructureRef.name` to the clone, and the image recorded.
fn repoint(ms: &Value, clone: &str, target: &str) -> Patch {
    let mut ops = vec![PatchOp {
        op: OpKind::Replace,
        path: INFRASTRUCTURE_REF_NAME.into(),
        value: Value::String(clone.into()),
    }];
    match ms.pointer("/metadata/annotations") {
        Some(Value::Object(map)) => {
            let mut path = "/metadata/annotations/".to_owned();
            escape_token(&mut path, BOOT_IMAGE_ANNOTATION);
            let op = if map.contains_key(BOOT_IMAGE_ANNOTATION) {
                OpKind::Replace
            } else {
                OpKind::Add
            };
            ops.push(PatchOp {
                op,
                path,
                value: Value::String(target.into()),
            });
        }
        other => ops.push(PatchOp {
            op: if other.is_some() {
                OpKind::Replace
            } else {
                OpKind::Add
            },
            path: "/metadata/annotations".into(),
            value: json!({ BOOT_IMAGE_ANNOTATION: target }),
        }),
    }
    Patch(ops)
}
