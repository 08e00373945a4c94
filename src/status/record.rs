//! `bootimage-webhook skew record`: the MachineConfiguration change Manual skew enforcement
//! needs, from the skew `status` computes (the same read of the cluster, the same survey),
//! and with `--apply` that change, made with the caller's kubeconfig as a merge patch.

use std::time::{Duration, Instant};

use kube::api::{Api, Patch, PatchParams, ValidationDirective};
use kube::core::DynamicObject;
use serde::Serialize;
use serde_json::Value;

use super::{OldestImage, client, machine_configuration, report_on};
use crate::cluster::apis;
use crate::config::{SkewRecordArgs, StatusOutput};
use crate::core::skew::record::{self, FIELD_MANAGER, Manual, Proposal, Refusal};
use crate::core::skew::{self, Enforcement};

/// Why nothing was recorded.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("cannot tell which boot image version to record: {0}")]
    CannotTell(String),
    #[error("not recording: {0}")]
    Guarded(#[from] Refusal),
    #[error("reading the cluster: {0:#}")]
    Read(anyhow::Error),
    #[error("MachineConfiguration cluster could not be read: {0}")]
    ReadMachineConfiguration(kube::Error),
    #[error(
        "MachineConfiguration cluster has no spec.bootImageSkewEnforcement on this cluster (OpenShift before 4.22 does not enforce boot image skew): nothing to record"
    )]
    NoSkewEnforcement,
    #[error("writing MachineConfiguration cluster: {0}")]
    Write(String),
}

/// A refused write in the API's words; its field unknown to the CRD told apart.
fn write_error(e: kube::Error) -> RecordError {
    match e {
        kube::Error::Api(s)
            if s.message
                .contains("unknown field \"spec.bootImageSkewEnforcement\"") =>
        {
            RecordError::NoSkewEnforcement
        }
        kube::Error::Api(s) => {
            RecordError::Write(format!("{} ({}, {})", s.message, s.reason, s.code))
        }
        other => RecordError::Write(other.to_string()),
    }
}

/// What `skew record` found, and with `--apply` what it wrote.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Outcome {
    /// The version to record and where it was read.
    pub proposal: Proposal,
    pub oldest: Option<OldestImage>,
    pub patch: Value,
    pub command: String,
    /// `spec.bootImageSkewEnforcement.manual` before, when its mode was Manual.
    pub recorded: Option<Manual>,
    /// The MCO's skew enforcement before, as `status` judges it.
    pub enforcement: Enforcement,
    pub warnings: Vec<String>,
    pub applied: Option<Applied>,
}

/// The write of `--apply`, read back.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Applied {
    pub field_manager: &'static str,
    pub generation: Option<i64>,
    /// `spec.bootImageSkewEnforcement` as stored.
    pub stored: Value,
    /// The MCO's skew enforcement once it observed this generation; `None` when it had not
    /// within `--wait`.
    pub mco: Option<Enforcement>,
    pub mco_note: String,
}

/// Reads the cluster as `status` does, proposes the record, and with `--apply` makes it.
pub async fn record(args: &SkewRecordArgs) -> Result<Outcome, RecordError> {
    let client = client(&args.status).await.map_err(RecordError::Read)?;
    let report = report_on(&client, &args.status)
        .await
        .map_err(RecordError::Read)?;
    let skew = report.skew;
    let Some(proposal) = skew.record.proposal else {
        let why = skew.record.refusal.unwrap_or_default();
        return Err(RecordError::CannotTell(why));
    };
    let mc = machine_configuration(client.clone())
        .await
        .map_err(RecordError::ReadMachineConfiguration)?;
    let guarded = record::guard(mc.as_ref(), args.force);
    if args.apply {
        guarded.clone()?;
    }
    let patch = proposal.manual.merge_patch();
    let mut outcome = Outcome {
        command: record::oc_command(&patch),
        warnings: warnings(skew.oldest.as_ref(), &guarded, args.apply),
        recorded: mc.as_ref().and_then(record::recorded),
        enforcement: skew.enforcement,
        oldest: skew.oldest,
        proposal,
        patch,
        applied: None,
    };
    if args.apply {
        outcome.applied = Some(apply(client, &outcome.patch, args.wait).await?);
    }
    Ok(outcome)
}

fn warnings(
    oldest: Option<&OldestImage>,
    guarded: &Result<(), Refusal>,
    apply: bool,
) -> Vec<String> {
    let mut out = Vec::new();
    if oldest.is_some_and(|o| o.below_floor) {
        out.push(format!(
            "the oldest boot image is below the MCO's floor (RHEL {}, OpenShift {}): once recorded, the MCO refuses upgrades until that MachineSet boots a newer image",
            skew::RHEL_FLOOR,
            skew::OCP_FLOOR
        ));
    }
    if let (Err(why), false) = (guarded, apply) {
        out.push(format!("--apply would not write: {why}"));
    }
    out
}

/// The merge patch, by the kubeconfig's user under our own field manager; unknown fields
/// refused (a release without skew enforcement would drop them silently). Then the object
/// is read until the MCO has observed the change, or `wait` has passed.
async fn apply(
    client: kube::Client,
    patch: &Value,
    wait: Duration,
) -> Result<Applied, RecordError> {
    let api: Api<DynamicObject> = Api::all_with(client, &apis::MACHINECONFIGURATION.api_resource());
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        field_validation: Some(ValidationDirective::Strict),
        ..PatchParams::default()
    };
    let written = api
        .patch("cluster", &params, &Patch::Merge(patch))
        .await
        .map_err(write_error)?;
    let generation = written.metadata.generation;
    let stored = serde_json::to_value(&written)
        .ok()
        .and_then(|v| v.pointer("/spec/bootImageSkewEnforcement").cloned())
        .unwrap_or(Value::Null);
    let deadline = Instant::now() + wait;
    loop {
        let seen = api.get_opt("cluster").await.ok().flatten();
        let seen = seen.and_then(|o| serde_json::to_value(o).ok());
        let observed = seen
            .as_ref()
            .and_then(|v| v.pointer("/status/observedGeneration"))
            .and_then(Value::as_i64);
        if let (Some(o), Some(g)) = (observed, generation)
            && o >= g
        {
            let mco = skew::enforcement(seen.as_ref());
            let note = format!("the MCO observed generation {g}");
            return Ok(applied(generation, stored, Some(mco), note));
        }
        if Instant::now() >= deadline {
            let note = format!(
                "the MCO had not reported on generation {} within {wait:?} (status.observedGeneration {}): `bootimage-webhook status` shows what it says later",
                generation.map_or("<unknown>".into(), |g| g.to_string()),
                observed.map_or("<none>".into(), |o| o.to_string()),
            );
            return Ok(applied(generation, stored, None, note));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn applied(
    generation: Option<i64>,
    stored: Value,
    mco: Option<Enforcement>,
    note: String,
) -> Applied {
    Applied {
        field_manager: FIELD_MANAGER,
        generation,
        stored,
        mco,
        mco_note: note,
    }
}

/// The outcome as a table (lines of `key: value`; `-o wide` is the same) or JSON.
pub fn render_outcome(o: &Outcome, output: StatusOutput) -> String {
    if output == StatusOutput::Json {
        // Plain data: serializing cannot fail.
        return serde_json::to_string_pretty(o).unwrap_or_default() + "\n";
    }
    let p = &o.proposal;
    let mut out = format!(
        "Oldest boot image: {} ({}): {}\n",
        p.image, p.machine_set, p.how
    );
    let before = match (&o.recorded, &o.enforcement.mode) {
        (Some(m), _) => format!("skew enforcement {m}"),
        (None, Some(mode)) => format!("skew enforcement {mode}, as the MCO reports it"),
        (None, None) => "no skew enforcement mode chosen".into(),
    };
    out += &format!("Now: {before}\n");
    out += &format!("Record: spec.bootImageSkewEnforcement: {}\n", p.manual);
    out += &format!("Merge patch: {}\n", o.patch);
    out += &format!("Command: {}\n", o.command);
    for w in &o.warnings {
        out += &format!("Warning: {w}\n");
    }
    if let Some(a) = &o.applied {
        out += &format!(
            "Applied: spec.bootImageSkewEnforcement is now {} (generation {}, field manager {})\n",
            a.stored,
            a.generation.map_or("<unknown>".into(), |g| g.to_string()),
            a.field_manager
        );
        out += &match &a.mco {
            Some(e) => format!(
                "MCO: {}; mode {}, an upgrade {} ({})\n",
                a.mco_note,
                e.mode.as_deref().unwrap_or("<none>"),
                e.upgrade,
                e.message
            ),
            None => format!("MCO: {}\n", a.mco_note),
        };
    }
    out
}
