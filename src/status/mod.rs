//! `bootimage-webhook status`: what the webhook would decide for every MachineSet of the
//! cluster, and the gate, for an administrator. Read-only: the same watchers build the same
//! snapshot as `serve`, the same [`decide`](crate::core::decision::decide) runs on every
//! MachineSet, and nothing is written.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use hyper::Uri;
use kube::api::{Api, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::DynamicObject;
use serde::Serialize;
use serde_json::Value;

use crate::cluster::touch::FIELD_MANAGER;
use crate::cluster::watch;
use crate::cluster::{apis, aws_credentials, ec2, egress};
use crate::config::StatusArgs;
use crate::core::decision::{self, Reason};
use crate::core::platforms::aws::AwsLearned;
use crate::core::platforms::vsphere::VSphereLearned;
use crate::core::platforms::{self, Platform};
use crate::core::skew::record::{Advice, Manual, Proposal};
use crate::core::skew::{self, Enforcement, Source};
use crate::core::snapshot::{self, ClusterFacts, Enrollment, Gate, Snapshot};
use crate::core::stream_choice;
use crate::health::Health;
use crate::metrics::Metrics;

mod policy;
mod record;
mod render;
pub(crate) use policy::PolicyState;
pub use record::{Outcome, RecordError, record, render_outcome};
pub use render::render;

/// One MachineSet as `status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Row {
    pub namespace: String,
    pub name: String,
    /// `MachineSet` or `ControlPlaneMachineSet`.
    pub kind: String,
    pub platform: Option<&'static str>,
    pub arch: Option<&'static str>,
    /// The stream its image comes from (`rhel-10 (label)`), when the ConfigMap carries
    /// `streams`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream: Option<String>,
    pub current: Option<String>,
    pub target: Option<String>,
    pub reason: Reason,
    pub message: String,
    /// When our toucher last wrote it (its managedFields entry), RFC 3339.
    pub last_touch: Option<String>,
    /// Given up on for its target: the webhook leaves its writes alone (`RevertLoop`), or
    /// the toucher stopped after three touches that did not move it (a `BootImageNotMoved`
    /// Event for this target).
    pub given_up: bool,
}

/// The whole answer of `status`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub gate: GateState,
    pub enrollment: EnrollmentState,
    pub release: Option<String>,
    pub stream: Option<String>,
    /// The ConfigMap's `streams` (the default one marked `(default)`); empty for a
    /// single-stream ConfigMap.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub streams: Vec<String>,
    pub skew: Skew,
    /// Whether EC2 was asked, and with which credentials (only when an AWS MachineSet's AMI
    /// is not in the stream: otherwise `None`).
    pub ec2: Option<Ec2State>,
    /// VMs in the failure domains' folders named like the vSphere templates this project
    /// imports that carry no marker of it: never deleted or used.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub vsphere_unmarked: Vec<String>,
    /// The ValidatingAdmissionPolicy that limits the webhook's writes: while it does not
    /// hold, nothing is touched.
    pub admission_policy: PolicyState,
    pub machine_sets: Vec<Row>,
}

/// EC2, as `status` asked it: the source of the credentials (`None`: none could be had)
/// and what went wrong, if anything.
#[derive(Debug, Clone, Serialize)]
pub struct Ec2State {
    pub credentials: Option<String>,
    pub error: Option<String>,
}

/// Where the cluster stands against the MCO's boot image skew check: the oldest boot image
/// of all MachineSets (managed or not), and what the MCO's check says of an upgrade.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Skew {
    /// `None` when no MachineSet names a boot image of known version.
    pub oldest: Option<OldestImage>,
    /// `namespace/name` of the MachineSets whose boot image version is unknown.
    pub unknown: Vec<String>,
    pub machine_sets: usize,
    /// MachineConfiguration `cluster`'s mode and recorded version, and the MCO's verdict.
    pub enforcement: Enforcement,
    pub floor: Floor,
    /// What `skew record` would write for Manual enforcement, and where the record stands.
    pub record: SkewRecord,
}

/// What `skew record` would write (or why it cannot tell a version), the version the
/// administrator recorded, and what `status` says of it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SkewRecord {
    pub proposal: Option<Proposal>,
    pub refusal: Option<String>,
    /// `spec.bootImageSkewEnforcement.manual` when its mode is Manual.
    pub recorded: Option<Manual>,
    /// Only in Manual mode, or when a mode must be chosen.
    pub advice: Option<Advice>,
}

/// The MCO's floor (`OCPVersionBootImageSkewLimit`, `RHCOSVersionBootImageSkewLimit`).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Floor {
    pub ocp_version: &'static str,
    pub rhel_version: &'static str,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OldestImage {
    pub namespace: String,
    pub name: String,
    pub image: String,
    /// As RHCOS writes it; `None` when only the OpenShift release is known.
    pub rhcos_version: Option<String>,
    pub rhel_version: String,
    /// `4.16`, or a range (`4.19-4.21`) when the RHCOS version names only its RHEL.
    pub ocp_release: Option<String>,
    pub source: Source,
    /// Below the MCO's floor, were it the version the MCO recorded.
    pub below_floor: bool,
}

/// The skew of `rows` (their images, read with `snap`'s stream and learned facts), and
/// MachineConfiguration `cluster` as read (`Err`: why it could not be). Pure.
pub fn skew(
    rows: &[Row],
    snap: &Snapshot,
    machine_configuration: Result<Option<&Value>, &dyn std::fmt::Display>,
) -> Skew {
    let survey = skew::survey(
        rows.iter()
            .map(|r| (format!("{}/{}", r.namespace, r.name), r.current.as_deref())),
        snap.boot_images.as_deref(),
        &snap.cluster.learned,
    );
    let record = skew_record(&survey, snap, machine_configuration.ok().flatten());
    let oldest = survey.oldest.map(|(who, image, v)| {
        let (namespace, name) = who.split_once('/').unwrap_or(("", &who));
        OldestImage {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            image,
            rhcos_version: v.rhcos.clone(),
            rhel_version: format!("{}.{}", v.rhel.0, v.rhel.1),
            ocp_release: v.release.map(|r| r.to_string()),
            source: v.source,
            below_floor: v.below_floor(),
        }
    });
    let enforcement = match machine_configuration {
        Ok(mc) => skew::enforcement(mc),
        Err(why) => Enforcement {
            message: format!("MachineConfiguration cluster could not be read: {why}"),
            ..skew::enforcement(None)
        },
    };
    Skew {
        oldest,
        unknown: survey.unknown,
        machine_sets: survey.count,
        enforcement,
        floor: Floor {
            ocp_version: skew::OCP_FLOOR,
            rhel_version: skew::RHEL_FLOOR,
        },
        record,
    }
}

/// The record's part of [`skew`].
fn skew_record(survey: &skew::Survey, snap: &Snapshot, mc: Option<&Value>) -> SkewRecord {
    let proposal = skew::record::propose(survey);
    let release = snap
        .boot_images
        .as_deref()
        .map(|b| b.release_version.as_str());
    let oldest = survey.oldest.as_ref().map(|(_, _, v)| v);
    SkewRecord {
        advice: skew::record::advise(&proposal, oldest, mc, release),
        recorded: mc.and_then(skew::record::recorded),
        refusal: proposal.as_ref().err().map(ToString::to_string),
        proposal: proposal.ok(),
    }
}

/// `rhel-10 (default)`, `rhel-9`: the ConfigMap's streams by name.
fn stream_names(boot: &crate::core::configmap::BootImages) -> Vec<String> {
    boot.streams()
        .keys()
        .map(
            |name| match boot.default_stream.as_deref() == Some(name.as_str()) {
                true => format!("{name} (default)"),
                false => name.clone(),
            },
        )
        .collect()
}

#[derive(Debug, Clone, Serialize)]
pub struct GateState {
    pub open: bool,
    pub reason: String,
}

impl From<&Gate> for GateState {
    fn from(g: &Gate) -> Self {
        GateState {
            open: g.open,
            reason: g.reason.clone(),
        }
    }
}

/// Which rule enrolls MachineSets (and, with `--control-plane-machine-sets`,
/// ControlPlaneMachineSets), and what it selects.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EnrollmentState {
    pub machine_sets: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub control_plane_machine_sets: Option<String>,
}

impl From<&ClusterFacts> for EnrollmentState {
    fn from(c: &ClusterFacts) -> Self {
        let words = |e: &Enrollment, rule: &str| match e {
            Enrollment::All => format!("all: {rule}"),
            Enrollment::None => format!("none: {rule}"),
            Enrollment::Partial(s) => format!("those matching {s}: {rule}"),
        };
        EnrollmentState {
            machine_sets: words(&c.enrollment, &c.enrollment_rule),
            control_plane_machine_sets: c
                .control_plane_machine_sets
                .then(|| words(&c.cpms_enrollment, &c.cpms_enrollment_rule)),
        }
    }
}

/// The last time the field manager `manager` wrote `object` (its `managedFields`).
fn last_write_by(object: &Value, manager: &str) -> Option<String> {
    object
        .pointer("/metadata/managedFields")?
        .as_array()?
        .iter()
        .filter(|f| f["manager"] == manager)
        .filter_map(|f| f["time"].as_str())
        .max()
        .map(str::to_owned)
}

/// Whether the toucher gave up on `uid` for `target`: a `BootImageNotMoved` Event on it
/// that names that target (`events`: events.k8s.io/v1 Events as JSON).
fn not_moved(events: &[Value], uid: &str, target: &str) -> bool {
    let to = format!(" to {target}:");
    !uid.is_empty()
        && events.iter().any(|e| {
            e["reason"] == "BootImageNotMoved"
                && e["regarding"]["uid"] == uid
                && e["note"].as_str().is_some_and(|n| n.contains(&to))
        })
}

/// A `TemplateNotImported` or `ImageNotImported` message with what the importer last said
/// about that template or image on this object (its Warning Event: a bad artifact, something
/// in the way that is not ours).
fn with_importer_note(
    message: String,
    events: &[Value],
    ms: &Value,
    reason: Reason,
    target: Option<&str>,
) -> String {
    let uid = ms["metadata"]["uid"].as_str().unwrap_or_default();
    let Some(target) = target.filter(|_| !uid.is_empty()) else {
        return message;
    };
    let what = match reason {
        Reason::TemplateNotImported => "template",
        _ => "image",
    };
    let about = format!("{what} {target} ");
    let note = events
        .iter()
        .filter(|e| e["reason"] == reason.as_str() && e["regarding"]["uid"] == uid)
        .filter_map(|e| {
            Some((
                e["eventTime"].as_str().unwrap_or_default(),
                e["note"].as_str()?,
            ))
        })
        .filter(|(_, note)| note.starts_with(&about))
        .max_by_key(|(time, _)| *time);
    match note {
        Some((_, note)) => format!("{message}; the importer says: {note}"),
        None => message,
    }
}

/// The rows of `machinesets` under `snap`, by namespace and name; `events` are the
/// namespace's Events, for the toucher's give-ups. Pure.
pub fn rows(machinesets: &[Value], events: &[Value], snap: &Snapshot) -> Vec<Row> {
    let mut rows: Vec<Row> = machinesets
        .iter()
        .map(|ms| {
            let d = decision::decide_object(ms, snap);
            let given_up = d.reason == Reason::RevertLoop
                || (d.reason == Reason::Updated
                    && d.target.as_deref().is_some_and(|t| {
                        let uid = ms["metadata"]["uid"].as_str().unwrap_or_default();
                        not_moved(events, uid, t)
                    }));
            let meta = |k: &str| {
                ms.pointer(&format!("/metadata/{k}"))
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned()
            };
            let target = d.target.as_deref();
            let message = match d.reason {
                Reason::TemplateNotImported | Reason::ImageNotImported => {
                    with_importer_note(d.message, events, ms, d.reason, target)
                }
                _ => d.message,
            };
            Row {
                namespace: meta("namespace"),
                name: meta("name"),
                kind: ms["kind"].as_str().unwrap_or("MachineSet").to_owned(),
                platform: d.platform,
                arch: d.arch.map(|a| a.rpm()),
                stream: stream_choice::shown(ms, snap),
                current: d.current.or_else(|| platforms::referenced_image(ms)),
                target: d.target,
                given_up,
                message,
                reason: d.reason,
                last_touch: last_write_by(ms, FIELD_MANAGER),
            }
        })
        .collect();
    rows.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    rows
}

async fn client(args: &StatusArgs) -> anyhow::Result<kube::Client> {
    let options = KubeConfigOptions {
        context: args.context.clone(),
        ..Default::default()
    };
    let mut config = match &args.kubeconfig {
        Some(path) => {
            let kubeconfig = Kubeconfig::read_from(path)
                .with_context(|| format!("reading the kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &options).await?
        }
        None if args.context.is_some() => kube::Config::from_kubeconfig(&options).await?,
        None => kube::Config::infer()
            .await
            .context("finding a kubeconfig (KUBECONFIG, ~/.kube/config, or in-cluster)")?,
    };
    config.proxy_url = proxy_to_api_server(config.proxy_url, &config.cluster_url);
    Ok(kube::Client::try_from(config)?)
}

/// The proxy to the API server: the kubeconfig's `proxy-url`, else `HTTPS_PROXY` unless
/// `NO_PROXY` names the server. kube matches `NO_PROXY` against the proxy's own address,
/// so a proxy it took from the environment is chosen again here.
fn proxy_to_api_server(loaded: Option<Uri>, server: &Uri) -> Option<Uri> {
    let from_env = ["HTTPS_PROXY", "https_proxy"]
        .iter()
        .find_map(|name| std::env::var(name).ok().filter(|v| !v.is_empty()))
        .and_then(|url| url.parse::<Uri>().ok());
    if loaded.is_some() && loaded != from_env {
        return loaded;
    }
    egress::Proxy::from_env().intercept(server).and(from_env)
}

/// The Events of `namespace` as JSON (none when they cannot be listed).
async fn events(client: kube::Client, namespace: &str) -> Vec<Value> {
    Api::<k8s_openapi::api::events::v1::Event>::namespaced(client, namespace)
        .list(&ListParams::default())
        .await
        .map(|l| {
            l.items
                .iter()
                .filter_map(|e| serde_json::to_value(e).ok())
                .collect()
        })
        .unwrap_or_default()
}

/// MachineConfiguration `cluster` (listed by name, as the watcher reads it: the
/// webhook's RBAC allows no more); `None` when absent or not served.
async fn machine_configuration(client: kube::Client) -> Result<Option<Value>, kube::Error> {
    let api: Api<DynamicObject> = Api::all_with(client, &apis::MACHINECONFIGURATION.api_resource());
    match api
        .list(&ListParams::default().fields("metadata.name=cluster"))
        .await
    {
        Ok(list) => Ok(list
            .items
            .first()
            .and_then(|o| serde_json::to_value(o).ok())),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
        Err(e) => Err(e),
    }
}

/// Reads the cluster as `serve` does and decides every MachineSet.
pub async fn report(args: &StatusArgs) -> anyhow::Result<Report> {
    let client = client(args).await?;
    report_on(&client, args).await
}

/// [`report`] with `client`.
async fn report_on(client: &kube::Client, args: &StatusArgs) -> anyhow::Result<Report> {
    let client = client.clone();
    let snapshot = synced_snapshot(&client, args).await?;
    let objects = machine_sets(&client, args).await?;
    // The toucher's give-ups, as its Events tell them (none readable: none shown).
    let events = events(client.clone(), &args.read.machine_api_namespace).await;
    let machine_configuration = machine_configuration(client.clone()).await;
    let admission_policy = policy::policy(&client, &events).await;
    let (snap, ec2) = ask_ec2(&client, args, &objects, &snapshot).await;
    let snap = ask_vcenter(&client, args, snap).await;
    let snap = ask_glance(&client, snap).await;
    let snap = ask_prism_central(&client, snap).await;
    let machine_sets = rows(&objects, &events, &snap);
    Ok(Report {
        gate: (&snap.cluster.gate).into(),
        enrollment: (&snap.cluster).into(),
        release: snap.boot_images.as_ref().map(|b| b.release_version.clone()),
        stream: snap.boot_images.as_ref().map(|b| b.stream_name.clone()),
        streams: snap
            .boot_images
            .as_deref()
            .map(stream_names)
            .unwrap_or_default(),
        skew: skew(
            &machine_sets,
            &snap,
            machine_configuration
                .as_ref()
                .map(Option::as_ref)
                .map_err(|e| e as &dyn std::fmt::Display),
        ),
        ec2,
        vsphere_unmarked: snap
            .cluster
            .learned
            .vsphere
            .as_ref()
            .map(|l| l.unmarked.iter().cloned().collect())
            .unwrap_or_default(),
        admission_policy,
        machine_sets,
    })
}

/// The snapshot the server would hold: the same watches, run until every one has listed.
async fn synced_snapshot(
    client: &kube::Client,
    args: &StatusArgs,
) -> anyhow::Result<Arc<Snapshot>> {
    let snapshot = snapshot::shared(Snapshot::empty());
    let health = Arc::new(Health::default());
    let learned = Arc::new(crate::cluster::learned::LearnedCell::default());
    let _watching = watch::start(
        client.clone(),
        args.read.watch_settings(),
        snapshot.clone(),
        health.clone(),
        Metrics::new(None),
        learned,
    );
    let deadline = Instant::now() + args.timeout;
    while !health.synced.load(Ordering::Acquire) {
        if Instant::now() > deadline {
            bail!(
                "the cluster's objects could not all be listed within {:?} (unreachable, or not allowed to list them?)",
                args.timeout
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The builder waits for a burst of events to land before it rebuilds: give it time.
    tokio::time::sleep(Duration::from_millis(500)).await;
    Ok(snapshot.load_full())
}

/// The MachineSets, and the ControlPlaneMachineSets when they are managed, as JSON.
async fn machine_sets(client: &kube::Client, args: &StatusArgs) -> anyhow::Result<Vec<Value>> {
    let namespace = &args.read.machine_api_namespace;
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &apis::MACHINESET.api_resource());
    let mut items = api
        .list(&ListParams::default())
        .await
        .context("listing MachineSets")?
        .items;
    if args.read.control_plane_machine_sets {
        let cpms: Api<DynamicObject> = Api::namespaced_with(
            client.clone(),
            namespace,
            &apis::CONTROLPLANEMACHINESET.api_resource(),
        );
        match cpms.list(&ListParams::default()).await {
            Ok(list) => items.extend(list.items),
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e).context("listing ControlPlaneMachineSets"),
        }
    }
    Ok(items
        .iter()
        .filter_map(|o| serde_json::to_value(o).ok())
        .collect())
}

/// vSphere MachineSets are decided with what vCenter holds: each failure domain's template
/// is looked for (read-only, with the importer's credentials Secret), as every replica
/// does.
async fn ask_vcenter(client: &kube::Client, args: &StatusArgs, snap: Snapshot) -> Snapshot {
    if snap.cluster.platform.as_deref() != Some(Platform::VSphere.name()) {
        return snap;
    }
    let access = crate::cluster::vsphere::Access::new(
        client.clone(),
        args.vsphere.secret(),
        args.vsphere.vsphere_ca_file.as_deref(),
    );
    let learned = match access {
        Ok(access) => crate::cluster::vsphere::look(&access, &snap).await,
        Err(e) => Some(VSphereLearned {
            unavailable: Some(e.to_string()),
            ..VSphereLearned::default()
        }),
    };
    match learned {
        Some(learned) => {
            let mut snap = snap;
            snap.cluster.learned = snap.cluster.learned.with_vsphere(learned);
            snap
        }
        None => snap,
    }
}

/// OpenStack MachineSets are decided with what Glance holds: the stream's images are looked
/// for (read-only, with the machine API's Secret), as every replica does.
async fn ask_glance(client: &kube::Client, snap: Snapshot) -> Snapshot {
    match crate::cluster::openstack::look(client, &snap).await {
        Some(learned) => {
            let mut snap = snap;
            snap.cluster.learned = snap.cluster.learned.with_openstack(learned);
            snap
        }
        None => snap,
    }
}

/// Nutanix MachineSets are decided with what Prism Central holds, looked at as every
/// replica looks (read-only, with the machine API's Secret).
async fn ask_prism_central(client: &kube::Client, snap: Snapshot) -> Snapshot {
    match crate::cluster::nutanix::look(client, &snap).await {
        Some(learned) => {
            let mut snap = snap;
            snap.cluster.learned = snap.cluster.learned.with_nutanix(learned);
            snap
        }
        None => snap,
    }
}

/// AWS MachineSets whose AMI is not in the stream are decided as `serve` decides them: EC2
/// is asked with the same credentials, in the same order (this process's own, else with
/// --aws-machine-api-credentials the machine API's Secret, through the kubeconfig).
async fn ask_ec2(
    client: &kube::Client,
    args: &StatusArgs,
    objects: &[Value],
    snap: &Snapshot,
) -> (Snapshot, Option<Ec2State>) {
    let json: Vec<Vec<u8>> = objects
        .iter()
        .filter_map(|o| serde_json::to_vec(o).ok())
        .collect();
    let queries: Vec<_> = ec2::queries_for(json.iter().map(Vec::as_slice), snap)
        .into_iter()
        .collect();
    if queries.is_empty() {
        return (snap.clone(), None);
    }
    let machine_api = args.read.machine_api_secret(client);
    if machine_api.is_none() && !aws_credentials::own_configured() {
        let why =
            "no AWS credentials in the environment, and --aws-machine-api-credentials not given";
        let learned = AwsLearned {
            unavailable: Some(why.into()),
            ..AwsLearned::default()
        };
        let state = Ec2State {
            credentials: None,
            error: Some(why.into()),
        };
        return (ec2::with_learned(snap, learned), Some(state));
    }
    let mut access = ec2::Ec2Access::new(machine_api);
    let (learned, error) = match access.client(ec2::first_region(&queries)).await {
        Ok(c) => {
            let (mut learned, error) = ec2::classify(c, &json, snap).await;
            let error = error.map(|e| e.to_string());
            learned.unavailable.clone_from(&error);
            (learned, error)
        }
        Err(e) => (
            AwsLearned {
                unavailable: Some(e.to_string()),
                ..AwsLearned::default()
            },
            Some(e.to_string()),
        ),
    };
    let state = Ec2State {
        credentials: access.source().map(ToString::to_string),
        error,
    };
    (ec2::with_learned(snap, learned), Some(state))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::render::{record_line, skew_line};
    use super::*;
    use crate::core::skew::Upgrade;

    fn row(name: &str, current: Option<&str>) -> Row {
        Row {
            namespace: "openshift-machine-api".into(),
            name: name.into(),
            kind: "MachineSet".into(),
            platform: Some("GCP"),
            arch: Some("x86_64"),
            stream: None,
            current: current.map(str::to_owned),
            target: None,
            reason: Reason::UpToDate,
            message: String::new(),
            last_touch: None,
            given_up: false,
        }
    }

    #[test]
    fn the_skew_line_without_a_known_image_or_a_readable_machine_configuration() {
        let snap = Snapshot::empty();
        let rows = [row("a", Some("ami-0123456789abcdef0")), row("b", None)];
        let s = skew(&rows, &snap, Err(&"forbidden"));
        assert!(s.oldest.is_none());
        assert_eq!(
            s.unknown,
            ["openshift-machine-api/a", "openshift-machine-api/b"]
        );
        assert_eq!(s.enforcement.upgrade, Upgrade::Unknown);
        assert_eq!(
            skew_line(&s, false),
            "Skew: no boot image of known version; 2 of 2 MachineSets with a boot image of unknown version; MCO skew enforcement <unknown>: whether an upgrade would be refused is unknown (MachineConfiguration cluster could not be read: forbidden)\n"
        );
    }

    #[test]
    fn the_skew_line_below_the_floor() {
        let snap = Snapshot::empty();
        let old = "projects/rhcos-cloud/global/images/rhcos-412-86-202301311551-0-gcp-x86-64";
        let rows = [row("old", Some(old))];
        let mc = json!({"status": {"bootImageSkewEnforcementStatus": {"mode": "Manual",
            "manual": {"mode": "RHCOSVersion", "rhcosVersion": "412.86.202301311551-0"}}}});
        let s = skew(&rows, &snap, Ok(Some(&mc)));
        assert!(s.oldest.as_ref().unwrap().below_floor);
        assert_eq!(s.enforcement.upgrade, Upgrade::Refused);
        let wide = skew_line(&s, true);
        assert!(wide.starts_with(&format!("Skew: oldest boot image {old} (openshift-machine-api/old): RHCOS 412.86.202301311551-0, RHEL 8.6, OpenShift 4.12 (from its name), below the MCO's floor; MCO skew enforcement Manual (recorded RHCOS 412.86.202301311551-0): an upgrade would be refused (Upgrades have been disabled because the cluster is using RHCOS boot image version 412.86.202301311551-0(RHEL version: 8.6)")), "{wide}");
        assert!(
            skew_line(&s, false)
                .starts_with("Skew: oldest boot image rhcos-412-86-202301311551-0-gcp-x86-64 (")
        );
    }

    #[test]
    fn the_record_line_says_when_to_record_again() {
        let snap = Snapshot::empty();
        let old = "projects/rhcos-cloud/global/images/rhcos-9-6-20250826-1-gcp-x86-64";
        let rows = [row("old", Some(old))];
        let mc = json!({"spec": {"bootImageSkewEnforcement": {"mode": "Manual",
            "manual": {"mode": "OCPVersion", "ocpVersion": "4.12.0"}}}});
        let s = skew(&rows, &snap, Ok(Some(&mc)));
        assert_eq!(
            s.record.proposal.as_ref().unwrap().manual.version,
            "9.6.20250826-1"
        );
        assert_eq!(
            record_line(&s),
            "Skew record: recorded ocpVersion 4.12.0 is older than the oldest boot image in use; run `bootimage-webhook skew record` to record rhcosVersion 9.6.20250826-1\n"
        );
        // Not Manual, and no release that needs a mode: nothing said.
        let s = skew(&rows, &snap, Ok(None));
        assert_eq!(record_line(&s), "");
        let s = skew(&[], &snap, Ok(None));
        assert_eq!(
            s.record
                .refusal
                .as_deref()
                .map(|r| r.starts_with("no MachineSets")),
            Some(true)
        );
    }
}
