//! What the importers proved, published by the Lease holder into the ConfigMap only the
//! importer's ServiceAccount may write (a server-side apply of its `data`), whenever the
//! snapshot moves and it says something new. The webhook reads it back into its own
//! snapshot; the admission policy admits an importer platform's boot value only if it is
//! listed there.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use tokio::sync::watch;

use crate::core::platforms::Platform;
use crate::core::published;
use crate::core::snapshot::SharedSnapshot;
use crate::health::until;

/// The field manager of the importer's writes.
pub const FIELD_MANAGER: &str = "bootimage-importer";
/// The first wait before a failed write is tried again (doubles to a minute).
const RETRY: Duration = Duration::from_secs(2);

pub struct Publisher {
    pub api: Api<ConfigMap>,
    pub name: String,
    /// The platforms whose importer runs here: each is published, with no image at first.
    pub serves: Vec<Platform>,
    pub snapshot: SharedSnapshot,
}

impl Publisher {
    /// Until `stop`: on the Lease holder, write what changed.
    pub async fn run(
        self,
        mut ids: watch::Receiver<String>,
        mut leader: watch::Receiver<bool>,
        mut stop: watch::Receiver<bool>,
    ) {
        let mut written: Option<BTreeMap<String, String>> = None;
        let mut retry = RETRY;
        loop {
            let mut failed = false;
            if *leader.borrow_and_update() {
                let snap = self.snapshot.load();
                let (data, left_out) =
                    published::render(&snap.cluster.learned, &self.serves, &snap);
                if !left_out.is_empty() {
                    tracing::warn!(names = ?left_out, "names that cannot be ConfigMap keys: not published, so never admitted");
                }
                if written.as_ref() != Some(&data) {
                    match self.write(&data).await {
                        Ok(()) => {
                            tracing::info!(configmap = %self.name, images = data.len() - self.serves.len(), "published the images proved");
                            written = Some(data);
                            retry = RETRY;
                        }
                        Err(e) => {
                            tracing::warn!(configmap = %self.name, error = %e, "cannot publish the images proved; trying again");
                            failed = true;
                        }
                    }
                }
            } else {
                // Another replica may write meanwhile: write again once this one leads.
                written = None;
            }
            let wait = if failed { retry } else { Duration::MAX };
            tokio::select! {
                r = ids.changed() => if r.is_err() { return },
                r = leader.changed() => if r.is_err() { return },
                _ = tokio::time::sleep(wait) => retry = (retry * 2).min(Duration::from_secs(60)),
                _ = until(&mut stop, true) => return,
            }
        }
    }

    /// The whole `data`, as this field manager's: keys it no longer sets are removed.
    async fn write(&self, data: &BTreeMap<String, String>) -> Result<(), kube::Error> {
        let object = json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": self.name},
            "data": data,
        });
        let params = PatchParams::apply(FIELD_MANAGER).force();
        self.api
            .patch(&self.name, &params, &Patch::Apply(object))
            .await
            .map(|_| ())
    }
}
