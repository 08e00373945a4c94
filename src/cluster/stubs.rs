//! The stub Ignition of every user-data Secret a MachineSet (or the ControlPlaneMachineSet)
//! names, learned in the background for rule 10 (behaviour §4): a metadata-only watch of
//! the machine-api namespace's Secrets says which exist and when they change, and each
//! Secret a MachineSet names (and the installer's two) is read once per `resourceVersion`.
//! Only the stub's Ignition version is kept; the Secret's data is dropped as soon as it is
//! parsed.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::core::{DynamicObject, PartialObjectMeta};
use kube::runtime::reflector::Store;
use tokio::sync::Notify;

use crate::core::facts;
use crate::core::snapshot::Stub;
use crate::core::view::MachineSetView;

/// The data key of a user-data Secret, as the installer and the MCO write it.
pub const USER_DATA_KEY: &str = "userData";
/// The installer's user-data Secrets: always read, so that the first MachineSet naming one
/// is decided at once (a new cluster's, a dry run).
const INSTALLER_SECRETS: [&str; 2] = ["worker-user-data", "master-user-data"];
const FIRST_RETRY: Duration = Duration::from_secs(2);
const MAX_RETRY: Duration = Duration::from_secs(300);

/// What the learner has read, by Secret name: the snapshot builder reads it.
pub type Learned = Arc<ArcSwap<BTreeMap<String, Stub>>>;

/// The Secret a MachineSet's (or ControlPlaneMachineSet's) providerSpec names
/// (`userDataSecret.name`), read as the decision reads it.
pub fn user_data_secret(object: &impl serde::Serialize) -> Option<String> {
    let json = serde_json::to_vec(object).ok()?;
    let view = MachineSetView::parse(&json).ok()?;
    view.user_data_secret().map(|s| s.into_owned())
}

/// The Secret names the MachineSets' providerSpecs name.
pub fn named_secrets(objects: &[Arc<DynamicObject>]) -> BTreeSet<String> {
    objects
        .iter()
        .filter_map(|o| user_data_secret(o.as_ref()))
        .collect()
}

pub struct Learner {
    pub api: Api<Secret>,
    /// The namespace's Secrets, metadata only.
    pub secrets: Store<PartialObjectMeta<Secret>>,
    /// MachineSets (and ControlPlaneMachineSets): who names which Secret.
    pub machinesets: Vec<Store<DynamicObject>>,
    pub out: Learned,
    /// Rung by the Secret and MachineSet watches.
    pub wake: Arc<Notify>,
    /// Rung when `out` changes (the snapshot builder).
    pub changed: Arc<Notify>,
}

/// One Secret as last read: the `resourceVersion` it was read at (`None`: absent).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Read {
    version: Option<String>,
    stub: Stub,
}

impl Learner {
    /// Learns until the process ends; `first_round` runs once the Secrets named when both
    /// lists arrived have each been tried once (readiness waits for it).
    pub async fn run(self, first_round: impl FnOnce()) {
        // Absent is an answer only once the Secrets have been listed.
        if self.secrets.wait_until_ready().await.is_err() {
            return;
        }
        if let Some(ms) = self.machinesets.first() {
            let _ = ms.wait_until_ready().await;
        }
        let mut read: BTreeMap<String, Read> = BTreeMap::new();
        let mut failing: BTreeMap<String, String> = BTreeMap::new();
        let mut retry = FIRST_RETRY;
        let mut first_round = Some(first_round);
        loop {
            let named: BTreeSet<String> = self
                .machinesets
                .iter()
                .flat_map(|s| named_secrets(&s.state()))
                .chain(INSTALLER_SECRETS.map(String::from))
                .collect();
            let before = read.clone();
            read.retain(|name, _| named.contains(name));
            for name in &named {
                self.learn(name, &mut read, &mut failing).await;
            }
            if read != before {
                let stubs = read.iter().map(|(k, r)| (k.clone(), r.stub.clone()));
                self.out.store(Arc::new(stubs.collect()));
                self.changed.notify_one();
            }
            if let Some(done) = first_round.take() {
                done();
            }
            retry = if failing.is_empty() {
                FIRST_RETRY
            } else {
                (retry * 2).min(MAX_RETRY)
            };
            tokio::select! {
                _ = self.wake.notified() => {}
                _ = tokio::time::sleep(retry), if !failing.is_empty() => {}
            }
            // Let a burst of events (a re-list) land first.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Reads `name` if it is new or changed since last read.
    async fn learn(
        &self,
        name: &str,
        read: &mut BTreeMap<String, Read>,
        failing: &mut BTreeMap<String, String>,
    ) {
        let listed = self
            .secrets
            .state()
            .into_iter()
            .find(|s| s.metadata.name.as_deref() == Some(name))
            .map(|s| s.metadata.resource_version.clone().unwrap_or_default());
        let Some(version) = listed else {
            failing.remove(name);
            read.insert(
                name.to_owned(),
                Read {
                    version: None,
                    stub: Stub::Missing,
                },
            );
            return;
        };
        if read.get(name).and_then(|r| r.version.as_deref()) == Some(version.as_str()) {
            return;
        }
        match self.api.get_opt(name).await {
            Ok(secret) => {
                if failing.remove(name).is_some() {
                    tracing::info!(secret = name, "user-data Secret readable again");
                }
                let r = secret.map_or(
                    Read {
                        version: None,
                        stub: Stub::Missing,
                    },
                    |s| Read {
                        version: s.metadata.resource_version.clone(),
                        stub: stub_of(&s),
                    },
                );
                if let Stub::Unreadable(why) = &r.stub {
                    tracing::warn!(secret = name, %why, "user-data Secret holds no readable stub Ignition: the MachineSets naming it keep their boot images");
                }
                read.insert(name.to_owned(), r);
            }
            Err(e) => {
                let e = e.to_string();
                if failing.get(name) != Some(&e) {
                    tracing::warn!(secret = name, error = %e, "cannot read a user-data Secret; the MachineSets naming it keep their boot images until it can be read");
                    failing.insert(name.to_owned(), e);
                }
            }
        }
    }
}

/// The stub of a Secret just read; its data goes with it.
fn stub_of(secret: &Secret) -> Stub {
    let user_data = secret.data.as_ref().and_then(|d| d.get(USER_DATA_KEY));
    facts::stub(user_data.map(|b| b.0.as_slice()))
}
