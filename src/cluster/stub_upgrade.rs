//! `--upgrade-stub-ignition`, on the Lease holder: a spec-2 stub Ignition that keeps
//! MachineSets off the new boot image is rewritten as spec 3 in place, as the MCO does, its
//! original kept in the same Secret under `userData-spec2-backup` (the MCO keeps none),
//! in one update: the Role grants `update` of the granted Secrets by name, and no
//! `create` of Secrets (which RBAC cannot narrow by name). The learner then reads the new
//! stub and the toucher moves the MachineSets.
//!
//! A stub is upgraded only when every MachineSet naming it would move once it is spec 3 (or
//! is on its target already): one that would keep an old image (opted out, a custom image)
//! might not boot a spec-3 stub, and so blocks it.

use std::collections::{BTreeMap, HashSet};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use serde_json::Value;

use crate::cluster::stubs::{USER_DATA_KEY, user_data_secret};
use crate::core::decision::{self, Reason};
use crate::core::facts;
use crate::core::snapshot::{Snapshot, Stub};
use crate::core::stub::{self, UPGRADED_VERSION};

pub const UPGRADED_TO_ANNOTATION: &str =
    "machineconfiguration.openshift.io/stub-ignition-upgraded-to";
pub const UPGRADED_AT_ANNOTATION: &str =
    "machineconfiguration.openshift.io/stub-ignition-upgraded-at";
/// The data key that keeps the original spec-2 stub, beside `userData` (the machine API
/// reads `userData` alone).
pub const BACKUP_KEY: &str = "userData-spec2-backup";

/// A MachineSet as an Event names it: (kind, name, uid).
pub type Named = (String, String, String);

/// A user-data Secret whose spec-2 stub keeps MachineSets off their target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub secret: String,
    /// The MachineSets waiting for it (`StubIgnitionSpec2`).
    pub waiting: Vec<Named>,
    /// A MachineSet naming it that would not move, and why: the stub stays.
    pub blocked_by: Option<(String, Reason)>,
}

/// Which stubs to upgrade, from the same decision as the webhook. Pure.
pub fn candidates(machinesets: &[Value], snap: &Snapshot) -> Vec<Candidate> {
    let mut by_secret: BTreeMap<String, Candidate> = BTreeMap::new();
    let mut others: Vec<(String, String, Reason)> = Vec::new();
    for ms in machinesets {
        let Some(secret) = user_data_secret(ms) else {
            continue;
        };
        let d = decision::decide_object(ms, snap);
        let meta = |k: &str| ms["metadata"][k].as_str().unwrap_or_default().to_owned();
        match d.reason {
            Reason::StubIgnitionSpec2 => {
                let kind = ms["kind"].as_str().unwrap_or("MachineSet").to_owned();
                by_secret
                    .entry(secret.clone())
                    .or_insert_with(|| Candidate {
                        secret,
                        waiting: Vec::new(),
                        blocked_by: None,
                    })
                    .waiting
                    .push((kind, meta("name"), meta("uid")));
            }
            Reason::UpToDate => {}
            other => others.push((secret, meta("name"), other)),
        }
    }
    for (secret, name, reason) in others {
        if let Some(c) = by_secret.get_mut(&secret) {
            c.blocked_by.get_or_insert((name, reason));
        }
    }
    by_secret.into_values().collect()
}

/// What became of a candidate, for the log and an Event on each waiting MachineSet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Upgraded,
    /// Not upgraded, and why (a Warning Event, once per Secret version).
    Refused(String),
    /// Tried and failed on the API (a conflict, a refusal): tried again next pass.
    Failed(String),
}

#[derive(Debug, thiserror::Error)]
enum UpgradeError {
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Api(#[from] kube::Error),
}

/// Upgrades stubs; remembers what it refused so that each refusal is told once.
pub struct Upgrader {
    api: Api<Secret>,
    /// (Secret, resourceVersion) already refused.
    refused: HashSet<(String, String)>,
}

impl Upgrader {
    pub fn new(api: Api<Secret>) -> Self {
        Upgrader {
            api,
            refused: HashSet::new(),
        }
    }

    /// Upgrade `c`'s stub, if it may be; `None` when there is nothing new to say.
    pub async fn upgrade(&mut self, c: &Candidate) -> Option<Outcome> {
        let secret = match self.api.get_opt(&c.secret).await {
            Ok(Some(s)) => s,
            Ok(None) => return None,
            Err(e) => return Some(Outcome::Failed(e.to_string())),
        };
        let version = secret.metadata.resource_version.clone().unwrap_or_default();
        let key = (c.secret.clone(), version);
        if self.refused.contains(&key) {
            return None;
        }
        let result = match &c.blocked_by {
            Some((name, reason)) => Err(UpgradeError::Refused(format!(
                "MachineSet {name} names it too and would keep its boot image ({reason}); a spec-3 stub might not boot that image"
            ))),
            None => self.rewrite(secret).await,
        };
        match result {
            Ok(true) => Some(Outcome::Upgraded),
            // Spec 3 already (upgraded by an earlier pass the snapshot has not caught up with).
            Ok(false) => None,
            Err(UpgradeError::Refused(why)) => {
                self.refused.insert(key);
                Some(Outcome::Refused(why))
            }
            Err(UpgradeError::Api(e)) => Some(Outcome::Failed(e.to_string())),
        }
    }

    /// The stub rewritten in place with its backup beside it, in one update (optimistic:
    /// the version read). `false`: the stub is spec 3 already, nothing written.
    async fn rewrite(&self, mut secret: Secret) -> Result<bool, UpgradeError> {
        let name = secret.metadata.name.clone().unwrap_or_default();
        let original = secret
            .data
            .as_ref()
            .and_then(|d| d.get(USER_DATA_KEY))
            .map(|b| b.0.clone())
            .ok_or_else(|| UpgradeError::Refused("it has no userData".into()))?;
        if matches!(facts::stub(Some(&original)), Stub::Version(v) if v.starts_with('3')) {
            return Ok(false);
        }
        let upgraded = stub::upgrade_installer_stub(&original)
            .map_err(|e| UpgradeError::Refused(format!("its stub cannot be translated: {e}")))?;
        let data = secret.data.get_or_insert_with(Default::default);
        match data.get(BACKUP_KEY) {
            Some(kept) if kept.0 != original => {
                return Err(UpgradeError::Refused(format!(
                    "its {BACKUP_KEY} holds another stub: not overwriting a backup"
                )));
            }
            _ => {}
        }
        data.insert(BACKUP_KEY.into(), ByteString(original));
        data.insert(USER_DATA_KEY.into(), ByteString(upgraded));
        let annotations = secret
            .metadata
            .annotations
            .get_or_insert_with(Default::default);
        annotations.insert(UPGRADED_TO_ANNOTATION.into(), UPGRADED_VERSION.into());
        annotations.insert(UPGRADED_AT_ANNOTATION.into(), Timestamp::now().to_string());
        self.api
            .replace(&name, &PostParams::default(), &secret)
            .await?;
        Ok(true)
    }
}
