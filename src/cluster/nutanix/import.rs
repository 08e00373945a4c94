//! What a background loop calls: [`Importer::look`] (read-only, every replica: the image
//! MachineSets may move to, if there is one), [`Importer::ensure`] (the Lease holder: that
//! image, imported when missing, after clearing what a failed import of ours left),
//! [`Importer::ours`] and [`Importer::retire`] (retention).
//!
//! An import: the image created with the marker in its description and `source_uri` set to
//! the stream's URL, with the stream's SHA-256 as its checksum, so that Prism Central fetches
//! the qcow2 and checks it; its task followed to the end; the image read back, complete, with
//! the checksum it reports compared to the stream's. When that task fails and there is a
//! cache, the qcow2 is downloaded here (the OpenStack importer's download, checked as it
//! arrives) and uploaded to an empty image with its checksum. What a failed import created
//! is deleted, after reading it again.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

use super::error::{NutanixError, cause};
use super::marker::{self, Keep, Marker, image_name};
use super::prism::{Image, Prism};
use crate::cluster::importer::artifact::{self, ArtifactError};
use crate::cluster::importer::https;
use crate::core::platforms::artifact::{Artifact, ArtifactMirror, download_url};

/// The importer's settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The longest a Prism Central task (the create from the URL) may take.
    pub task_timeout: Duration,
    /// The first pause between two reads of a task (doubling up to five seconds).
    pub poll: Duration,
    /// Where the qcow2 is kept when Prism Central cannot fetch it and it is uploaded from
    /// here (`None`: it is not).
    pub cache_dir: Option<PathBuf>,
    /// The qcow2 downloaded here, at most.
    pub max_bytes: u64,
    /// The longest a download here may take, end to end.
    pub download_timeout: Duration,
    /// A site's own server (`--artifact-base-url`): the URL Prism Central fetches and the
    /// one downloaded here, instead of the stream's.
    pub artifact_mirror: Option<ArtifactMirror>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            task_timeout: Duration::from_secs(3600),
            poll: Duration::from_secs(2),
            cache_dir: None,
            max_bytes: 16 << 30,
            download_timeout: Duration::from_secs(7200),
            artifact_mirror: None,
        }
    }
}

/// What is wanted: the cluster's image of the stream's qcow2.
#[derive(Debug, Clone)]
pub struct Want<'a> {
    pub infra_id: &'a str,
    /// The stream the artifact is of (`rhel-9`), for the marker.
    pub stream: &'a str,
    pub artifact: &'a Artifact,
    /// The images MachineSets, ControlPlaneMachineSets and Machines name (by name or
    /// uuid), as listed right now; `None` when they could not be listed (nothing is deleted).
    pub named: Option<&'a BTreeSet<String>>,
}

impl Want<'_> {
    pub fn name(&self) -> String {
        image_name(self.infra_id, &self.artifact.release)
    }

    /// The uuid its import creates the image with, from the URL or for an upload.
    pub fn import_uuid(&self, from_url: bool) -> String {
        marker::import_uuid(self.infra_id, &self.name(), &self.artifact.sha256, from_url)
    }

    fn names(&self, image: &Image) -> bool {
        self.named.is_none_or(|n| {
            n.contains(&image.uuid) || image.name.as_ref().is_some_and(|name| n.contains(name))
        })
    }
}

/// What Prism Central holds under the wanted name.
#[derive(Debug, Default)]
pub struct Look {
    /// Ours, complete, of the stream's qcow2: MachineSets may move to it.
    pub ready: Option<Image>,
    /// Ours, complete, of the stream's qcow2 too, beside `ready` (an earlier import's).
    pub twins: Vec<Image>,
    /// Ours, not complete: an import under way, or one that failed.
    pub unfinished: Vec<Image>,
    /// Ours, of another qcow2 than the stream's, or holding other data than its marker says.
    pub stale: Vec<Image>,
    /// Not marked by this cluster: never touched, and nothing is imported beside them.
    pub taken: Vec<Image>,
    /// Marked as ours, but made by another user than the credentials': look-alikes,
    /// never touched, and nothing is imported beside them.
    pub lookalikes: Vec<Image>,
    /// Under another name that the machine API could take for this one (another case, or
    /// one its name filter selects): never touched, and nothing is imported beside them.
    pub near: Vec<Image>,
    /// Prism Central's clock when it answered.
    pub now: Option<Timestamp>,
}

impl Look {
    /// The image MachineSets may move to: ready, and the only image under its name, by
    /// any comparison the machine API makes (it refuses a name that selects several).
    pub fn usable(&self) -> Option<&Image> {
        let alone = self.twins.is_empty()
            && self.unfinished.is_empty()
            && self.stale.is_empty()
            && self.taken.is_empty()
            && self.lookalikes.is_empty()
            && self.near.is_empty();
        self.ready.as_ref().filter(|_| alone)
    }

    /// What stops an import or a move that only a person can clear: an image not ours
    /// under the name, or under a name the machine API could take for it.
    pub fn blocked(&self, name: &str) -> Option<NutanixError> {
        if !self.lookalikes.is_empty() {
            return Some(NutanixError::LookAlike {
                name: name.to_owned(),
                images: self
                    .lookalikes
                    .iter()
                    .map(|i| {
                        let by = i.owner.as_deref().unwrap_or("an unknown user");
                        format!("{} (made by {by})", i.uuid)
                    })
                    .collect(),
            });
        }
        if !self.taken.is_empty() {
            return Some(NutanixError::NameTaken {
                name: name.to_owned(),
                uuids: self.taken.iter().map(|i| i.uuid.clone()).collect(),
            });
        }
        (!self.near.is_empty()).then(|| NutanixError::NearName {
            name: name.to_owned(),
            images: self
                .near
                .iter()
                .map(|i| format!("{} ({})", i.name.as_deref().unwrap_or_default(), i.uuid))
                .collect(),
        })
    }
}

pub struct Importer {
    pub prism: Prism,
    /// Images of this replica's imports that failed and could not be deleted then.
    failed_here: BTreeSet<String>,
    /// The credentials' user, read once.
    me: tokio::sync::OnceCell<String>,
}

impl Importer {
    pub fn new(prism: Prism) -> Importer {
        Importer {
            prism,
            failed_here: BTreeSet::new(),
            me: tokio::sync::OnceCell::new(),
        }
    }

    /// The credentials' user's uuid: only what it made may be ours.
    pub async fn me(&self) -> Result<&str, NutanixError> {
        self.me
            .get_or_try_init(|| self.prism.me())
            .await
            .map(String::as_str)
    }

    /// What Prism Central holds under the wanted name (read-only).
    pub async fn look(&self, want: &Want<'_>) -> Result<Look, NutanixError> {
        let name = want.name();
        // Every image: the machine API's `name==` filter may select other names than
        // this one, and the cluster-api provider ignores case.
        let (mut images, now) = self.prism.list(None).await?;
        // An import under way is listed only once it succeeded: read it by its uuid.
        for uuid in [want.import_uuid(true), want.import_uuid(false)] {
            if images.iter().all(|i| i.uuid != uuid)
                && let (Some(image), _) = self.prism.get(&uuid).await?
            {
                images.push(image);
            }
        }
        let me = self.me().await?;
        let mut look = Look {
            now,
            ..Look::default()
        };
        let a = want.artifact;
        // Being deleted is as good as gone.
        let gone = ["DELETED", "DELETE_PENDING"];
        for image in images
            .into_iter()
            .filter(|i| !gone.contains(&i.state.as_str()))
        {
            let Some(called) = image.name.as_deref() else {
                continue;
            };
            if called != name {
                if marker::answers_to(&name, called) {
                    look.near.push(image);
                }
                continue;
            }
            match image
                .seen(now, me)
                .usable(&name, want.infra_id, &a.release, &a.sha256)
            {
                Ok(()) if holds(&image, &a.sha256) => match look.ready {
                    None => look.ready = Some(image),
                    Some(_) => look.twins.push(image),
                },
                Ok(()) | Err(Keep::OtherImage { .. }) => look.stale.push(image),
                Err(Keep::NotComplete(_)) => look.unfinished.push(image),
                Err(Keep::NotOwned(_)) => look.lookalikes.push(image),
                Err(_) => look.taken.push(image),
            }
        }
        Ok(look)
    }

    /// The wanted image, imported when missing (the Lease holder), and alone under its
    /// name. An image under the name that is not ours stops it; so does one of ours that
    /// may still be written.
    pub async fn ensure(
        &mut self,
        settings: &Settings,
        want: &Want<'_>,
    ) -> Result<Image, NutanixError> {
        let look = self.look(want).await?;
        if let Some(e) = look.blocked(&want.name()) {
            return Err(e);
        }
        if let Some(stale) = look.stale.first() {
            return Err(stale_error(stale, want));
        }
        for twin in &look.twins {
            self.clear_twin(want, &twin.uuid).await?;
        }
        self.retry_discards(want).await;
        for leftover in &look.unfinished {
            self.clear_leftover(want, &leftover.uuid).await?;
        }
        match look.ready {
            Some(image) => Ok(image),
            None => self.import(settings, want, look.now).await,
        }
    }

    /// Deletes a second complete image of ours of the same qcow2 under the name (an
    /// earlier import's), once Prism Central says it still is that and no object names
    /// it by its uuid (a name names both).
    async fn clear_twin(&self, want: &Want<'_>, uuid: &str) -> Result<(), NutanixError> {
        let (now, _) = self.prism.get(uuid).await?;
        let Some(image) = now else {
            return Ok(());
        };
        let by_uuid = want.named.is_none_or(|n| n.contains(uuid));
        image
            .seen(None, self.me().await?)
            .retirable(&want.name(), want.infra_id, by_uuid)
            .map_err(|why| busy(&image, why))?;
        tracing::info!(image = %want.name(), uuid, "deleting a second image of ours of the same qcow2 under the name");
        self.prism.delete(uuid).await.map(drop)
    }

    /// Deletes what an import of ours left when Prism Central says, right now, that it may go.
    async fn clear_leftover(&mut self, want: &Want<'_>, uuid: &str) -> Result<(), NutanixError> {
        let (now_image, now) = self.prism.get(uuid).await?;
        let Some(seen_image) = now_image else {
            self.failed_here.remove(uuid);
            return Ok(());
        };
        let failed_here = self.failed_here.contains(uuid);
        let seen = seen_image.seen(now, self.me().await?);
        let named = want.names(&seen_image);
        seen.clearable(&want.name(), want.infra_id, named, failed_here)
            .map_err(|why| busy(&seen_image, why))?;
        tracing::info!(image = %want.name(), uuid, state = %seen.state, prism_time = ?now, "deleting an image a failed import of ours left");
        self.prism.delete(uuid).await?;
        self.failed_here.remove(uuid);
        Ok(())
    }

    /// This replica's failed imports that could not be deleted then, read again by uuid:
    /// Prism Central lists no image that was not created successfully.
    async fn retry_discards(&mut self, want: &Want<'_>) {
        let uuids: Vec<String> = self.failed_here.iter().cloned().collect();
        for uuid in uuids {
            if let Err(e) = self.clear_leftover(want, &uuid).await {
                tracing::debug!(uuid, error = %e, "a failed import of ours is not deleted yet");
            }
        }
    }

    /// The import itself: from the stream's URL, or, when Prism Central could not fetch it
    /// and there is a cache, downloaded here and uploaded.
    async fn import(
        &mut self,
        settings: &Settings,
        want: &Want<'_>,
        now: Option<Timestamp>,
    ) -> Result<Image, NutanixError> {
        let started = Instant::now();
        let (name, a) = (want.name(), want.artifact);
        let marker = marker_for(settings, want, now);
        let categories = self.categories(want.infra_id).await?;
        let input = |source: Option<&str>| {
            let uuid = want.import_uuid(source.is_some());
            image_input(&name, &uuid, &marker, &categories, a, source)
        };
        // The mirror's URL, when there is one, both for Prism Central and for here.
        let mirror = settings.artifact_mirror.as_ref();
        let url = download_url(mirror, &a.location).map_err(|e| ArtifactError::Download {
            url: a.location.clone(),
            cause: cause(e),
        })?;
        // Prism Central fetches it: over https, as everything here.
        https::require_https(&url)?;
        tracing::info!(image = %name, url, "importing the RHCOS qcow2 into Prism Central from its URL");
        let from_url = self.attempt(settings, want, &input(Some(&url)), None).await;
        let done = match (from_url, &settings.cache_dir) {
            (Err(e @ NutanixError::Task { .. }), Some(dir)) => {
                tracing::warn!(image = %name, error = %e, "Prism Central did not import the qcow2 from its URL: downloading it here and uploading it");
                let limits = artifact::Limits {
                    max_bytes: settings.max_bytes,
                    deadline: settings.download_timeout,
                };
                let http = self.prism.http();
                let path = artifact::fetch_plain(http, dir, &url, &a.sha256, limits).await?;
                self.attempt(settings, want, &input(None), Some(&path))
                    .await
            }
            (result, _) => result,
        }?;
        tracing::info!(image = %name, uuid = %done.uuid, seconds = started.elapsed().as_secs_f64(), bytes = ?done.size, "imported the RHCOS qcow2 into Prism Central");
        Ok(done)
    }

    /// One image made from `input` (from a URL, or empty and then uploaded from `file`),
    /// followed to the end and checked; deleted when any of it fails.
    async fn attempt(
        &mut self,
        settings: &Settings,
        want: &Want<'_>,
        input: &Value,
        file: Option<&Path>,
    ) -> Result<Image, NutanixError> {
        let name = want.name();
        let (image, task) = self.create(input).await?;
        let result = async {
            if let Some(task) = &task {
                let what = format!("create image {name}");
                self.wait_task(task, &what, settings).await?;
            }
            if let Some(path) = file {
                let (body, size, _) =
                    artifact::body(path)
                        .await
                        .map_err(|e| ArtifactError::Cache {
                            dir: path.display().to_string(),
                            cause: cause(e),
                        })?;
                let sha256 = &want.artifact.sha256;
                self.prism.upload(&image.uuid, body, size, sha256).await?;
            }
            self.complete(&image, want.artifact, settings).await
        }
        .await;
        if result.is_err() {
            self.discard(want, &image).await;
        }
        result
    }

    /// The image of `input`, under the uuid it names: a create another replica made
    /// first is refused, and looked at on the next pass. A uuid still refused once its
    /// image is gone (deleted, and not given again) is left to Prism Central to choose.
    async fn create(&self, input: &Value) -> Result<(Image, Option<String>), NutanixError> {
        let uuid = input.pointer("/metadata/uuid").and_then(Value::as_str);
        match (self.prism.create(input).await, uuid) {
            (Err(NutanixError::Prism { status: 409, .. }), Some(uuid)) => {
                if let (Some(there), _) = self.prism.get(uuid).await? {
                    return Err(busy(&there, Keep::Appeared));
                }
                let mut again = input.clone();
                if let Some(meta) = again.get_mut("metadata").and_then(Value::as_object_mut) {
                    meta.remove("uuid");
                }
                self.prism.create(&again).await
            }
            (result, _) => result,
        }
    }

    /// The installer's category for the cluster, where Prism Central has it: v3 refuses an
    /// image naming a category that does not exist.
    async fn categories(&self, infra_id: &str) -> Result<Value, NutanixError> {
        let key = format!("kubernetes-io-cluster-{infra_id}");
        let mut categories = serde_json::Map::new();
        if self.prism.category_exists(&key, "owned").await? {
            categories.insert(key, json!("owned"));
        }
        Ok(Value::Object(categories))
    }

    /// Reads the task until it ends; anything but `SUCCEEDED` is a failure.
    async fn wait_task(
        &self,
        task: &str,
        what: &str,
        settings: &Settings,
    ) -> Result<(), NutanixError> {
        let since = Instant::now();
        let mut pause = settings.poll;
        loop {
            let now = self.prism.task(task).await?;
            match now.status.as_str() {
                "SUCCEEDED" => return Ok(()),
                "QUEUED" | "RUNNING" => {}
                _ => {
                    return Err(NutanixError::Task {
                        what: what.to_owned(),
                        task: task.to_owned(),
                        status: now.status,
                        detail: now.detail,
                    });
                }
            }
            if since.elapsed() >= settings.task_timeout {
                return Err(NutanixError::TaskTimeout {
                    what: what.to_owned(),
                    task: task.to_owned(),
                    limit: settings.task_timeout,
                });
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(5));
        }
    }

    /// The image once its task is done: complete, and holding what the stream says.
    async fn complete(
        &self,
        image: &Image,
        a: &Artifact,
        settings: &Settings,
    ) -> Result<Image, NutanixError> {
        let name = image.name.clone().unwrap_or_default();
        let since = Instant::now();
        loop {
            let (now, _) = self.prism.get(&image.uuid).await?;
            let Some(now) = now else {
                return Err(failed(image, "DELETED"));
            };
            let state = now.state.clone();
            match state.as_str() {
                "COMPLETE" if holds(&now, &a.sha256) => return Ok(now),
                "COMPLETE" => {
                    return Err(NutanixError::Mismatch {
                        name,
                        uuid: now.uuid.clone(),
                        what: "SHA-256",
                        prism: checksum_said(&now),
                        stream: a.sha256.clone(),
                    });
                }
                "PENDING" | "RUNNING" if since.elapsed() < settings.task_timeout => {
                    tokio::time::sleep(settings.poll).await;
                }
                _ => return Err(failed(&now, &now.state)),
            }
        }
    }

    /// Deletes the image of this replica's failed import, once Prism Central says it is
    /// still that: called so, marked by this cluster, named by nothing. Else remembered, so
    /// that the next pass may delete it without waiting for its deadline.
    async fn discard(&mut self, want: &Want<'_>, image: &Image) {
        let name = want.name();
        let me = match self.me().await {
            Ok(me) => me.to_owned(),
            Err(e) => {
                tracing::warn!(image = %name, uuid = %image.uuid, error = %e, "cannot delete the image of a failed import; the next import tries again");
                self.failed_here.insert(image.uuid.clone());
                return;
            }
        };
        let allowed = match self.prism.get(&image.uuid).await {
            Ok((None, _)) => return,
            Ok((Some(now), clock)) => {
                let seen = now.seen(clock, &me);
                let named = want.names(&now);
                match seen.state.as_str() {
                    "COMPLETE" => seen.retirable(&name, want.infra_id, named),
                    _ => seen.clearable(&name, want.infra_id, named, true),
                }
                .map_err(|why| why.to_string())
            }
            Err(e) => Err(e.to_string()),
        };
        let deleted = match allowed {
            Ok(()) => self
                .prism
                .delete(&image.uuid)
                .await
                .map(drop)
                .map_err(|e| e.to_string()),
            Err(why) => Err(why),
        };
        match deleted {
            Ok(()) => {
                tracing::info!(image = %name, uuid = %image.uuid, "deleted the image of a failed import")
            }
            Err(why) => {
                tracing::warn!(image = %name, uuid = %image.uuid, error = %why, "cannot delete the image of a failed import; the next import tries again");
                self.failed_here.insert(image.uuid.clone());
            }
        }
    }

    /// Every image this cluster marked and the credentials' user made, whatever its name
    /// (for retention and `status`): a copied marker makes nothing ours.
    pub async fn ours(&self, infra_id: &str) -> Result<Vec<Image>, NutanixError> {
        let me = self.me().await?;
        let (images, _) = self.prism.list(None).await?;
        Ok(images
            .into_iter()
            .filter(|i| i.marker().is_some_and(|m| m.infra_id == infra_id))
            .filter(|i| i.owner.as_deref() == Some(me))
            .collect())
    }

    /// Deletes an image of ours found unused for the retention, once Prism Central says,
    /// right now, that it still is what it was (its release's name, marked by this cluster,
    /// complete) and `named` (listed right now) does not name it.
    pub async fn retire(
        &self,
        uuid: &str,
        infra_id: &str,
        named: &BTreeSet<String>,
    ) -> Result<(), NutanixError> {
        let (now, _) = self.prism.get(uuid).await?;
        let Some(image) = now else {
            return Ok(());
        };
        let name = image.name.clone().unwrap_or_default();
        let is_named = named.contains(uuid) || named.contains(&name);
        image
            .seen(None, self.me().await?)
            .retirable(&name, infra_id, is_named)
            .map_err(|why| busy(&image, why))?;
        tracing::info!(image = %name, uuid, "deleting an image of ours that nothing has named for the retention");
        self.prism.delete(uuid).await.map(drop)
    }
}

/// The marker of an import starting now, by Prism Central's clock where it said.
fn marker_for(settings: &Settings, want: &Want<'_>, now: Option<Timestamp>) -> Marker {
    let budget = marker::import_budget(None).max(settings.task_timeout);
    Marker {
        infra_id: want.infra_id.to_owned(),
        stream: want.stream.to_owned(),
        release: want.artifact.release.clone(),
        sha256: want.artifact.sha256.clone(),
        // Prism Central sent no Date: the pod's clock.
        import_deadline: now
            .or_else(|| Some(Timestamp::now()))
            .and_then(|n| n.checked_add(SignedDuration::try_from(budget).ok()?).ok()),
    }
}

/// An `image_intent_input`: from `source` with the stream's SHA-256 for Prism Central to
/// check, or empty, for an upload that carries the checksum itself.
fn image_input(
    name: &str,
    uuid: &str,
    marker: &Marker,
    categories: &Value,
    a: &Artifact,
    source: Option<&str>,
) -> Value {
    let mut resources = json!({"image_type": "DISK_IMAGE"});
    if let Some(uri) = source {
        resources["source_uri"] = json!(uri);
        resources["checksum"] =
            json!({"checksum_algorithm": "SHA_256", "checksum_value": a.sha256});
    }
    json!({
        "api_version": "3.1",
        "metadata": {"kind": "image", "uuid": uuid, "categories": categories},
        "spec": {"name": name, "description": marker.description(), "resources": resources},
    })
}

/// Whether Prism Central's own checksum of an image's data (its `status`) is the SHA-256
/// `sha256`: no checksum, or another algorithm's, proves nothing.
fn holds(image: &Image, sha256: &str) -> bool {
    matches!(&image.checksum, Some((alg, value)) if alg == "SHA_256" && value == sha256)
}

fn stale_error(image: &Image, want: &Want<'_>) -> NutanixError {
    let a = want.artifact;
    match image.marker() {
        Some(m) if m.release == a.release && m.sha256 == a.sha256 => NutanixError::Mismatch {
            name: want.name(),
            uuid: image.uuid.clone(),
            what: "SHA-256",
            prism: checksum_said(image),
            stream: a.sha256.clone(),
        },
        m => busy(
            image,
            Keep::OtherImage {
                marked: m.as_ref().map(|m| m.release.clone()).unwrap_or_default(),
                sha256: m.map(|m| m.sha256).unwrap_or_default(),
                wanted: format!("{} and qcow2 {}", a.release, a.sha256),
            },
        ),
    }
}

/// The checksum Prism Central reports, as a person reads it.
fn checksum_said(image: &Image) -> String {
    match &image.checksum {
        Some((alg, value)) => format!("{alg} {value}"),
        None => "no checksum".into(),
    }
}

fn busy(image: &Image, why: Keep) -> NutanixError {
    NutanixError::Busy {
        name: image.name.clone().unwrap_or_default(),
        uuid: image.uuid.clone(),
        why,
    }
}

fn failed(image: &Image, state: &str) -> NutanixError {
    NutanixError::Failed {
        name: image.name.clone().unwrap_or_default(),
        uuid: image.uuid.clone(),
        state: state.to_owned(),
        said: image.messages.join("; "),
    }
}
