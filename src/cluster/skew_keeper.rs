//! `skew keep`, the opt-in keeper of the Manual skew record
//! (`manifests/components/skew-record-keeper`): while it holds its own Lease, each pass
//! surveys the MachineSets' boot images as `skew record` does and, when the record is due
//! and the mode lets it ([`record::keep`]), writes `spec.bootImageSkewEnforcement` of
//! MachineConfiguration `cluster`. Its ServiceAccount writes nothing else: RBAC gives it that
//! one object, and its admission policy that one field, in Manual mode.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, Patch, PatchParams, ValidationDirective};
use kube::core::DynamicObject;
use serde_json::Value;
use tokio::sync::watch;

use super::apis;
use super::lease::LeaseCheck;
use crate::core::configmap::BootImages;
use crate::core::platforms;
use crate::core::skew;
use crate::core::skew::record::{self, KEEPER_FIELD_MANAGER, Keep, TakeOver};
use crate::core::snapshot::Learned;
use crate::health::until;

/// How a pass that wrote begins its words.
const RECORDED: &str = "recorded";

/// Where the keeper reads and what it may take over.
#[derive(Debug, Clone)]
pub struct KeeperSettings {
    pub machine_api_namespace: String,
    pub configmap_namespace: String,
    pub configmap_name: String,
    pub interval: Duration,
    pub take_over: TakeOver,
}

/// What went wrong on a pass; the next pass tries again.
#[derive(Debug, thiserror::Error)]
pub enum KeepError {
    #[error("reading {0}: {1}")]
    Read(&'static str, kube::Error),
    #[error("the boot images ConfigMap is unusable: {0}")]
    BootImages(String),
    #[error("checking the Lease: {0}")]
    Lease(kube::Error),
    #[error("writing MachineConfiguration cluster: {0}")]
    Write(kube::Error),
}

/// The keeper of one process.
pub struct Keeper {
    client: kube::Client,
    settings: KeeperSettings,
    lease: LeaseCheck,
    /// What the last pass said, so that a pass that finds the same says nothing.
    last_said: Option<String>,
}

impl Keeper {
    pub fn new(client: kube::Client, settings: KeeperSettings, lease: LeaseCheck) -> Self {
        Keeper {
            client,
            settings,
            lease,
            last_said: None,
        }
    }

    /// A pass at once when it leads, then every interval while it does, until `stop`.
    pub async fn run(mut self, mut leader: watch::Receiver<bool>, mut stop: watch::Receiver<bool>) {
        loop {
            tokio::select! {
                _ = until(&mut leader, true) => {}
                _ = until(&mut stop, true) => return,
            }
            match self.pass().await {
                Ok(said) => self.say(said),
                Err(e) => {
                    tracing::warn!(error = %e, "skew record keeper: pass failed; trying again at the next");
                    self.last_said = None;
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(self.settings.interval) => {}
                _ = until(&mut leader, false) => {}
                _ = until(&mut stop, true) => return,
            }
        }
    }

    /// Logs `said` when it differs from the last pass's words (a write, always).
    fn say(&mut self, said: String) {
        if said.starts_with(RECORDED) || self.last_said.as_deref() != Some(said.as_str()) {
            tracing::info!("skew record keeper: {said}");
            self.last_said = Some(said);
        }
    }

    /// One pass: survey, decide, and write when due. What it found, in words.
    pub async fn pass(&self) -> Result<String, KeepError> {
        let s = &self.settings;
        let machine_sets: Api<DynamicObject> = Api::namespaced_with(
            self.client.clone(),
            &s.machine_api_namespace,
            &apis::MACHINESET.api_resource(),
        );
        let listed = machine_sets
            .list(&ListParams::default())
            .await
            .map_err(|e| KeepError::Read("the MachineSets", e))?;
        let objects: Vec<Value> = listed
            .items
            .iter()
            .filter_map(|o| serde_json::to_value(o).ok())
            .collect();
        let boot = self.boot_images().await?;
        let images: Vec<(String, Option<String>)> = objects
            .iter()
            .map(|ms| {
                let meta = |k: &str| ms["metadata"][k].as_str().unwrap_or_default().to_owned();
                let who = format!("{}/{}", meta("namespace"), meta("name"));
                (who, platforms::referenced_image(ms))
            })
            .collect();
        let survey = skew::survey(
            images
                .iter()
                .map(|(who, image)| (who.clone(), image.as_deref())),
            Some(&boot),
            &Learned::default(),
        );
        let proposal = record::propose(&survey);
        let mcs = self.machine_configurations();
        let mc = mcs
            .get_opt("cluster")
            .await
            .map_err(|e| KeepError::Read("MachineConfiguration cluster", e))?
            .and_then(|o| serde_json::to_value(o).ok());
        let oldest = survey.oldest.as_ref().map(|(_, _, v)| v);
        match record::keep(mc.as_ref(), &proposal, oldest, s.take_over) {
            Keep::Current(now) => Ok(format!(
                "{now} is the oldest boot image in use: nothing to record"
            )),
            Keep::Leave(why) => Ok(format!("not recording: {why}")),
            Keep::Write { manual, before } => {
                if self
                    .lease
                    .held_until()
                    .await
                    .map_err(KeepError::Lease)?
                    .is_none()
                {
                    return Ok("the Lease is not held: not writing".into());
                }
                let params = PatchParams {
                    field_manager: Some(KEEPER_FIELD_MANAGER.into()),
                    field_validation: Some(ValidationDirective::Strict),
                    ..PatchParams::default()
                };
                mcs.patch("cluster", &params, &Patch::Merge(manual.merge_patch()))
                    .await
                    .map_err(KeepError::Write)?;
                let (who, image) = survey
                    .oldest
                    .as_ref()
                    .map(|(w, i, _)| (w.as_str(), i.as_str()))
                    .unwrap_or_default();
                let said = format!(
                    "{RECORDED} spec.bootImageSkewEnforcement: {manual}, the oldest boot image in use ({image}, {who}); it was {before}"
                );
                Ok(said)
            }
        }
    }

    fn machine_configurations(&self) -> Api<DynamicObject> {
        Api::all_with(
            self.client.clone(),
            &apis::MACHINECONFIGURATION.api_resource(),
        )
    }

    /// The boot images ConfigMap, read once per pass (get by name).
    async fn boot_images(&self) -> Result<BootImages, KeepError> {
        let s = &self.settings;
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &s.configmap_namespace);
        let cm = api
            .get(&s.configmap_name)
            .await
            .map_err(|e| KeepError::Read("the boot images ConfigMap", e))?;
        let data: BTreeMap<String, String> = cm.data.unwrap_or_default();
        BootImages::from_data(&data).map_err(|e| KeepError::BootImages(e.to_string()))
    }
}
