//! `bootimage-webhook status`: what the webhook would decide for every MachineSet of the
//! cluster, and the gate, for an administrator. Read-only: the same watchers build the same
//! snapshot as `serve`, the same [`decide`](crate::core::decision::decide) runs on every
//! MachineSet, and nothing is written.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use kube::api::{Api, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::DynamicObject;
use serde::Serialize;
use serde_json::Value;

use crate::cluster::touch::FIELD_MANAGER;
use crate::cluster::watch;
use crate::cluster::{apis, aws_credentials, ec2};
use crate::config::{StatusArgs, StatusOutput};
use crate::core::age;
use crate::core::decision::{self, Reason};
use crate::core::platforms::aws::AwsLearned;
use crate::core::snapshot::{self, Gate, Snapshot};
use crate::health::Health;
use crate::metrics::Metrics;

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
    pub release: Option<String>,
    pub stream: Option<String>,
    /// Whether EC2 was asked, and with which credentials (only when an AWS MachineSet's AMI
    /// is not in the stream: otherwise `None`).
    pub ec2: Option<Ec2State>,
    pub machine_sets: Vec<Row>,
}

/// EC2, as `status` asked it: the source of the credentials (`None`: none could be had)
/// and what went wrong, if anything.
#[derive(Debug, Clone, Serialize)]
pub struct Ec2State {
    pub credentials: Option<String>,
    pub error: Option<String>,
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
            Row {
                namespace: meta("namespace"),
                name: meta("name"),
                kind: ms["kind"].as_str().unwrap_or("MachineSet").to_owned(),
                platform: d.platform,
                arch: d.arch.map(|a| a.rpm()),
                current: d.current.or_else(|| age::referenced_image(ms)),
                target: d.target,
                given_up,
                reason: d.reason,
                message: d.message,
                last_touch: last_write_by(ms, FIELD_MANAGER),
            }
        })
        .collect();
    rows.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    rows
}

/// The report in the asked format: a table (image names shortened to their last path
/// segment), a wide table (whole names and the message), or JSON.
pub fn render(report: &Report, output: StatusOutput) -> String {
    if output == StatusOutput::Json {
        // Plain data: serializing cannot fail.
        return serde_json::to_string_pretty(report).unwrap_or_default() + "\n";
    }
    let wide = output == StatusOutput::Wide;
    let short = |s: &Option<String>| -> String {
        match s.as_deref() {
            None => "-".into(),
            Some("") => "<empty>".into(),
            Some(s) if wide => s.to_owned(),
            Some(s) => s.rsplit('/').next().unwrap_or(s).to_owned(),
        }
    };
    let mut header = vec![
        "NAMESPACE/NAME",
        "PLATFORM",
        "ARCH",
        "CURRENT",
        "TARGET",
        "REASON",
        "LAST TOUCH",
        "GIVEN UP",
    ];
    if wide {
        header.push("MESSAGE");
    }
    let mut table: Vec<Vec<String>> = vec![header.into_iter().map(str::to_owned).collect()];
    for r in &report.machine_sets {
        let mut row = vec![
            if r.kind == "MachineSet" {
                format!("{}/{}", r.namespace, r.name)
            } else {
                format!("{}/{} ({})", r.namespace, r.name, r.kind)
            },
            r.platform.unwrap_or("-").to_owned(),
            r.arch.unwrap_or("-").to_owned(),
            short(&r.current),
            short(&r.target),
            r.reason.to_string(),
            r.last_touch.clone().unwrap_or_else(|| "-".into()),
            if r.given_up { "yes" } else { "no" }.to_owned(),
        ];
        if wide {
            row.push(r.message.clone());
        }
        table.push(row);
    }
    let columns = table[0].len();
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            table
                .iter()
                .map(|r| r[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = format!(
        "Gate: {} ({})\nRelease: {}, stream {}\n",
        if report.gate.open { "open" } else { "closed" },
        report.gate.reason,
        report.release.as_deref().unwrap_or("<unknown>"),
        report.stream.as_deref().unwrap_or("<unknown>"),
    );
    if let Some(ec2) = &report.ec2 {
        let asked = match &ec2.credentials {
            Some(c) => format!("asked with {c}"),
            None => "not asked".into(),
        };
        match &ec2.error {
            Some(e) => out.push_str(&format!("EC2: {asked} ({e})\n")),
            None => out.push_str(&format!("EC2: {asked}\n")),
        }
    }
    out.push('\n');
    for row in &table {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            line.push_str(cell);
            if c + 1 < columns {
                let pad = widths[c] - cell.chars().count() + 2;
                line.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    if report.machine_sets.is_empty() {
        out.push_str("(no MachineSets)\n");
    }
    out
}

async fn client(args: &StatusArgs) -> anyhow::Result<kube::Client> {
    let options = KubeConfigOptions {
        context: args.context.clone(),
        ..Default::default()
    };
    let config = match &args.kubeconfig {
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
    Ok(kube::Client::try_from(config)?)
}

/// Reads the cluster as `serve` does and decides every MachineSet.
pub async fn report(args: &StatusArgs) -> anyhow::Result<Report> {
    let client = client(args).await?;
    let snapshot = snapshot::shared(Snapshot::empty());
    let health = Arc::new(Health::default());
    let learned = Arc::new(crate::cluster::ec2::LearnedCell::default());
    let _ids = watch::start(
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
    // The builder runs 50 ms after the last watcher has listed (it lets a burst land).
    tokio::time::sleep(Duration::from_millis(500)).await;
    let api: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &args.read.machine_api_namespace,
        &apis::MACHINESET.api_resource(),
    );
    let mut items = api
        .list(&ListParams::default())
        .await
        .context("listing MachineSets")?
        .items;
    if args.read.control_plane_machine_sets {
        let cpms: Api<DynamicObject> = Api::namespaced_with(
            client.clone(),
            &args.read.machine_api_namespace,
            &apis::CONTROLPLANEMACHINESET.api_resource(),
        );
        match cpms.list(&ListParams::default()).await {
            Ok(list) => items.extend(list.items),
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e).context("listing ControlPlaneMachineSets"),
        }
    }
    let objects: Vec<Value> = items
        .iter()
        .filter_map(|o| serde_json::to_value(o).ok())
        .collect();
    // The toucher's give-ups, as its Events tell them (none readable: none shown).
    let events: Vec<Value> = Api::<k8s_openapi::api::events::v1::Event>::namespaced(
        client.clone(),
        &args.read.machine_api_namespace,
    )
    .list(&ListParams::default())
    .await
    .map(|l| {
        l.items
            .iter()
            .filter_map(|e| serde_json::to_value(e).ok())
            .collect()
    })
    .unwrap_or_default();
    let snap = snapshot.load_full();
    let (snap, ec2) = ask_ec2(&client, args, &objects, &snap).await;
    Ok(Report {
        gate: (&snap.cluster.gate).into(),
        release: snap.boot_images.as_ref().map(|b| b.release_version.clone()),
        stream: snap.boot_images.as_ref().map(|b| b.stream_name.clone()),
        ec2,
        machine_sets: rows(&objects, &events, &snap),
    })
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
