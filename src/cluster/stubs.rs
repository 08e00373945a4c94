//! The stub Ignition of the user-data Secrets the webhook may read (`--user-data-secrets`,
//! the Role's `resourceNames`), learned in the background for rule 10 (behaviour §4): a
//! metadata-only watch of each of them by name says whether it exists and when it changes,
//! and each is read once per `resourceVersion`. Only the stub's Ignition version is kept;
//! the Secret's data is dropped as soon as it is parsed. No other Secret is ever asked for.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::Store;
use tokio::sync::Notify;

use crate::core::facts;
use crate::core::facts::Stub;
use crate::core::view::MachineSetView;

/// The data key of a user-data Secret, as the installer and the MCO write it.
pub const USER_DATA_KEY: &str = "userData";
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

pub struct Learner {
    pub api: Api<Secret>,
    /// One store per granted Secret, metadata only.
    pub secrets: Vec<Store<PartialObjectMeta<Secret>>>,
    /// The Secrets it may read: all of them are read.
    pub granted: Vec<String>,
    pub out: Learned,
    /// Rung by the Secret watches.
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
    /// Learns until the process ends; `first_round` runs once every granted Secret has
    /// been listed and tried once (readiness waits for it).
    pub async fn run(self, first_round: impl FnOnce()) {
        // Absent is an answer only once the Secrets have been listed.
        for store in &self.secrets {
            if store.wait_until_ready().await.is_err() {
                return;
            }
        }
        let mut read: BTreeMap<String, Read> = BTreeMap::new();
        let mut failing: BTreeMap<String, String> = BTreeMap::new();
        let mut retry = FIRST_RETRY;
        let mut first_round = Some(first_round);
        loop {
            let before = read.clone();
            for name in &self.granted {
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
            .iter()
            .flat_map(Store::state)
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
