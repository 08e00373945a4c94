//! What the background loop calls: [`Importer::look`] (read-only, every replica: the
//! image MachineSets may move to, if there is one), [`Importer::ensure`] (the Lease
//! holder: that image, imported when missing, after clearing what an interrupted import of
//! ours left), [`Importer::ours`] and [`Importer::retire`] (retention).
//!
//! An import: the artifact from the cache (downloaded and checked when not there), the
//! image created with the marker in its properties, the qcow2 streamed to it, then read
//! until `active` and checked against what was sent (size, SHA-256, and Glance's own
//! SHA-512). What a failed import created is deleted, after reading it again.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use k8s_openapi::jiff::{SignedDuration, Timestamp};

use super::error::{OpenStackError, cause};
use super::glance::{Glance, Image};
use super::marker::{self, Keep, Marker, image_name_for};
use crate::cluster::importer::artifact::{self, ArtifactError, Qcow2Target};
use crate::core::arch::Arch;
use crate::core::platforms::artifact::ArtifactMirror;

/// The importer's settings.
#[derive(Debug, Clone)]
pub struct Settings {
    pub cache_dir: PathBuf,
    /// The `.gz` and the qcow2, each.
    pub max_bytes: u64,
    /// The longest a download may take, end to end.
    pub download_timeout: Duration,
    /// The longest Glance may take to make an uploaded image `active`.
    pub active_timeout: Duration,
    /// Where the qcow2.gz is downloaded from instead of the stream's host
    /// (`--artifact-base-url`).
    pub artifact_mirror: Option<ArtifactMirror>,
}

/// What is wanted: the cluster's image of the stream's qcow2.
#[derive(Debug, Clone)]
pub struct Want<'a> {
    pub infra_id: &'a str,
    pub target: &'a Qcow2Target,
    /// The images MachineSets, ControlPlaneMachineSets and Machines name (by name or id),
    /// as listed right now; `None` when they could not be listed (nothing is deleted).
    pub named: Option<&'a BTreeSet<String>>,
    /// The properties a new image carries over from the one the waiting MachineSets use
    /// now ([`Importer::carried_from`]): how the cloud boots RHCOS (`hw_*` and the like).
    pub carried: BTreeMap<String, String>,
    /// The architecture the name carries, on a multi-architecture cluster.
    pub arch: Option<Arch>,
}

impl Want<'_> {
    pub fn name(&self) -> String {
        image_name_for(self.infra_id, &self.target.release, self.arch)
    }

    fn names(&self, image: &Image) -> bool {
        self.named.is_none_or(|n| {
            n.contains(&image.id) || image.name.as_ref().is_some_and(|name| n.contains(name))
        })
    }
}

/// What Glance holds under the wanted name.
#[derive(Debug, Default)]
pub struct Look {
    /// Ours, active, of the stream's qcow2: MachineSets may move to it.
    pub ready: Option<Image>,
    /// Ours, not (yet) active: an import under way or interrupted.
    pub unfinished: Vec<Image>,
    /// Ours, active, of another qcow2 than the stream's (same release, other checksum).
    pub stale: Vec<Image>,
    /// Not marked by this cluster: never touched, and nothing is imported beside them.
    pub taken: Vec<Image>,
    /// Marked as ours, but owned by another project, or holding other data than the
    /// stream's by Glance's own hash: look-alikes, never touched, and nothing is imported
    /// beside them.
    pub lookalikes: Vec<Image>,
    /// Ours by marker and owner, whose data this replica cannot prove yet: it has not
    /// computed the digest Glance keeps (`os_hash_value`) of the stream's qcow2.
    pub unproven: Vec<Image>,
    /// Glance's clock when it answered.
    pub now: Option<Timestamp>,
}

impl Look {
    /// The image MachineSets may move to: ready, and the only image under its name (the
    /// machine API resolves the name and refuses one that names several).
    pub fn usable(&self) -> Option<&Image> {
        let alone = self.unfinished.is_empty()
            && self.stale.is_empty()
            && self.taken.is_empty()
            && self.lookalikes.is_empty()
            && self.unproven.is_empty();
        self.ready.as_ref().filter(|_| alone)
    }

    /// The image MachineSets may move to once this replica proves it (`status`, which
    /// does not download the qcow2, reports it so).
    pub fn usable_once_proven(&self) -> Option<&Image> {
        let alone = self.unfinished.is_empty()
            && self.stale.is_empty()
            && self.taken.is_empty()
            && self.lookalikes.is_empty();
        match (&self.ready, self.unproven.as_slice()) {
            (Some(ready), []) => Some(ready),
            (None, [one]) => Some(one),
            _ => None,
        }
        .filter(|_| alone)
    }

    /// What stops an import or a move that only a person can clear: a look-alike under
    /// the name, or an image that is not ours.
    pub fn blocked(&self, name: &str) -> Option<OpenStackError> {
        if !self.lookalikes.is_empty() {
            return Some(OpenStackError::LookAlike {
                name: name.to_owned(),
                images: self
                    .lookalikes
                    .iter()
                    .map(|i| {
                        format!(
                            "{} (project {})",
                            i.id,
                            i.prop("owner").unwrap_or("unknown")
                        )
                    })
                    .collect(),
            });
        }
        (!self.taken.is_empty()).then(|| OpenStackError::NameTaken {
            name: name.to_owned(),
            ids: self.taken.iter().map(|i| i.id.clone()).collect(),
        })
    }
}

/// What Glance's own hash of an image's data says of it.
enum Proof {
    /// The stream's qcow2.
    Holds,
    /// Other data, or no hash this replica can check.
    Differs,
    /// Not known here yet: the digest of the stream's qcow2 Glance keeps is not computed.
    Unknown,
}

pub struct Importer {
    pub glance: Glance,
    /// Images of this replica's imports that failed and could not be deleted then.
    failed_here: BTreeSet<String>,
    /// The artifact found bad (its URL and checksums) and why: not downloaded again until
    /// the stream names another.
    bad_artifact: Option<(String, OpenStackError)>,
    /// The SHA-512 of each qcow2 (by its SHA-256) this replica computed itself, while
    /// uploading it or from its download: what Glance's `os_hash_value` must be.
    digests: BTreeMap<String, String>,
}

impl Importer {
    pub fn new(glance: Glance) -> Importer {
        Importer {
            glance,
            failed_here: BTreeSet::new(),
            bad_artifact: None,
            digests: BTreeMap::new(),
        }
    }

    /// What Glance's hash of `image` (`os_hash_algo`, `os_hash_value`, which only Glance
    /// writes) says of it against the stream's qcow2.
    fn proof(&self, image: &Image, t: &Qcow2Target) -> Proof {
        let value = image.prop("os_hash_value");
        let wanted = match image.prop("os_hash_algo") {
            Some("sha256") => Some(&t.uncompressed_sha256),
            Some("sha512") => match self.digests.get(&t.uncompressed_sha256) {
                Some(d) => Some(d),
                None => return Proof::Unknown,
            },
            _ => None,
        };
        match (wanted, value) {
            (Some(w), Some(v)) if w == v => Proof::Holds,
            _ => Proof::Differs,
        }
    }

    /// The SHA-512 of the stream's qcow2, computed here from its download (the cache,
    /// else downloaded and checked against the stream's SHA-256), so that an image already
    /// in Glance can be proven.
    pub async fn prove(
        &mut self,
        settings: &Settings,
        t: &Qcow2Target,
    ) -> Result<(), OpenStackError> {
        if self.digests.contains_key(&t.uncompressed_sha256) {
            return Ok(());
        }
        let path = self.fetch(settings, t).await?;
        let (_, (sha256, sha512)) = artifact::digests(&path)
            .await
            .map_err(|e| cache_error(settings, e))?;
        if sha256 != t.uncompressed_sha256 {
            return Err(OpenStackError::Artifact(ArtifactError::Checksum {
                url: t.location.clone(),
                what: "cached qcow2 (changed on disk since it was checked)",
                want: t.uncompressed_sha256.clone(),
                got: sha256,
            }));
        }
        self.digests.insert(sha256, sha512);
        Ok(())
    }

    /// What Glance holds under the wanted name, every image of ours proven: the stream's
    /// qcow2 is hashed here first when an image needs it.
    pub async fn look_proven(
        &mut self,
        settings: &Settings,
        want: &Want<'_>,
    ) -> Result<Look, OpenStackError> {
        let look = self.look(want).await?;
        if look.unproven.is_empty() {
            return Ok(look);
        }
        self.prove(settings, want.target).await?;
        self.look(want).await
    }

    /// What Glance holds under the wanted name (read-only).
    pub async fn look(&mut self, want: &Want<'_>) -> Result<Look, OpenStackError> {
        let name = want.name();
        let (images, now) = self.glance.list(&[("name", &name)]).await?;
        let project = self.glance.project().await?;
        let mut look = Look {
            now,
            ..Look::default()
        };
        let t = want.target;
        for image in images
            .into_iter()
            .filter(|i| i.name.as_deref() == Some(&name))
        {
            let seen = image.seen(now, project.as_deref());
            match seen.usable(&name, want.infra_id, &t.release, &t.uncompressed_sha256) {
                Ok(()) => match self.proof(&image, t) {
                    Proof::Holds if look.ready.is_none() => look.ready = Some(image),
                    Proof::Holds => look.stale.push(image),
                    Proof::Unknown => look.unproven.push(image),
                    Proof::Differs => look.lookalikes.push(image),
                },
                Err(Keep::NotActive(_)) => look.unfinished.push(image),
                Err(Keep::OtherImage { .. }) => look.stale.push(image),
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
    ) -> Result<Image, OpenStackError> {
        let look = self.look_proven(settings, want).await?;
        if let Some(e) = look.blocked(&want.name()) {
            return Err(e);
        }
        if let Some(stale) = look.stale.first() {
            return Err(busy(
                stale,
                Keep::OtherImage {
                    marked: stale.prop(marker::RELEASE).unwrap_or_default().to_owned(),
                    sha256: stale
                        .prop(marker::QCOW2_SHA256)
                        .unwrap_or_default()
                        .to_owned(),
                    wanted: format!(
                        "{} and qcow2 {}",
                        want.target.release, want.target.uncompressed_sha256
                    ),
                },
            ));
        }
        // Beside the image MachineSets move to too: the name must be its alone.
        for leftover in &look.unfinished {
            self.clear_leftover(want, leftover).await?;
        }
        match look.ready {
            Some(image) => Ok(image),
            None => self.import(settings, want).await,
        }
    }

    /// Deletes what an import of ours left when Glance says, right now, that it may go.
    async fn clear_leftover(
        &mut self,
        want: &Want<'_>,
        image: &Image,
    ) -> Result<(), OpenStackError> {
        let (now_image, now) = self.glance.get(&image.id).await?;
        let Some(seen_image) = now_image else {
            self.failed_here.remove(&image.id);
            return Ok(());
        };
        let failed_here = self.failed_here.contains(&image.id);
        let project = self.glance.project().await?;
        let seen = seen_image.seen(now, project.as_deref());
        if let Err(why) = seen.clearable(
            &want.name(),
            want.infra_id,
            want.names(&seen_image),
            failed_here,
        ) {
            return Err(busy(&seen_image, why));
        }
        tracing::info!(image = %want.name(), id = %image.id, status = %seen.status, glance_time = ?now, "deleting an image an interrupted import of ours left");
        self.glance.delete(&image.id).await?;
        self.failed_here.remove(&image.id);
        Ok(())
    }

    /// The import itself; what it created is deleted when it fails.
    async fn import(
        &mut self,
        settings: &Settings,
        want: &Want<'_>,
    ) -> Result<Image, OpenStackError> {
        let started = Instant::now();
        let t = want.target;
        let path = self.fetch(settings, t).await?;
        // The download may have taken long: the name is looked at again, and Glance's clock
        // read, right before the image is made.
        let now = self.still_free(want).await?;
        let (body, size, sent) = artifact::body(&path)
            .await
            .map_err(|e| cache_error(settings, e))?;
        let budget = marker::import_budget(size);
        let marker = Marker {
            infra_id: want.infra_id.to_owned(),
            stream: t.stream.clone(),
            release: t.release.clone(),
            qcow2_sha256: t.uncompressed_sha256.clone(),
            // Glance sent no Date: the pod's clock.
            import_deadline: now
                .or_else(|| Some(Timestamp::now()))
                .and_then(|n| n.checked_add(SignedDuration::try_from(budget).ok()?).ok()),
        };
        let name = want.name();
        tracing::info!(image = %name, url = %t.location, bytes = size, "importing the RHCOS qcow2 into Glance");
        // As Red Hat's manual procedure describes the image, unless the image in use says
        // otherwise; the marker over all.
        let mut props: BTreeMap<String, String> = [("os_type", "linux"), ("os_distro", "rhcos")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        // Nova places an image by its architecture where the cloud has several.
        if let Some(arch) = want.arch {
            props.insert("architecture".into(), arch.rpm().into());
        }
        props.extend(want.carried.clone());
        props.extend(marker.pairs().into_iter().map(|(k, v)| (k.to_owned(), v)));
        // The installer's tag: openshift-install destroy deletes the images that carry it.
        let tags = [format!("openshiftClusterID={}", want.infra_id)];
        let image = self.glance.create(&name, &props, &tags).await?;
        let uploaded = async {
            self.glance.upload(&image, body, size).await?;
            let active = self.wait_active(&image, settings.active_timeout).await?;
            let sent = sent.lock().map(|s| (s.bytes, s.digests())).map_err(|_| {
                OpenStackError::Answer {
                    what: "upload".into(),
                    url: String::new(),
                    why: "the upload's tally is lost".into(),
                }
            })?;
            check_sent(&active, t, sent.clone())?;
            Ok::<_, OpenStackError>((active, sent.1.1))
        };
        let result = tokio::time::timeout(budget, uploaded)
            .await
            .unwrap_or_else(|_| {
                Err(OpenStackError::NotActive {
                    name: name.clone(),
                    id: image.id.clone(),
                    status: "not done".into(),
                    limit: budget,
                })
            });
        match result {
            Ok((active, sha512)) => {
                tracing::info!(image = %name, id = %active.id, seconds = started.elapsed().as_secs_f64(), bytes = size, "imported the RHCOS qcow2 into Glance");
                self.digests.insert(t.uncompressed_sha256.clone(), sha512);
                Ok(active)
            }
            Err(e) => {
                if matches!(e, OpenStackError::Artifact(ArtifactError::Checksum { .. })) {
                    let _ = tokio::fs::remove_file(&path).await;
                }
                self.discard(want, &image).await;
                Err(e)
            }
        }
    }

    /// Glance's clock, once the wanted name is still free: nothing under it, neither
    /// anyone's nor ours (another import, or one finished meanwhile).
    async fn still_free(&mut self, want: &Want<'_>) -> Result<Option<Timestamp>, OpenStackError> {
        let look = self.look(want).await?;
        if let Some(e) = look.blocked(&want.name()) {
            return Err(e);
        }
        let mut ours = look
            .ready
            .iter()
            .chain(&look.unfinished)
            .chain(&look.stale)
            .chain(&look.unproven);
        match ours.next() {
            Some(image) => Err(busy(image, Keep::Appeared)),
            None => Ok(look.now),
        }
    }

    /// The stream's qcow2 from the cache (downloaded when not there); an artifact found bad
    /// is not downloaded again until the stream names another.
    async fn fetch(
        &mut self,
        settings: &Settings,
        t: &Qcow2Target,
    ) -> Result<PathBuf, OpenStackError> {
        let key = format!("{} {} {}", t.location, t.sha256, t.uncompressed_sha256);
        if let Some((bad, why)) = &self.bad_artifact
            && *bad == key
        {
            return Err(why.clone());
        }
        let limits = artifact::Limits {
            max_bytes: settings.max_bytes,
            deadline: settings.download_timeout,
        };
        let (http, mirror) = (
            &self.glance.keystone.http,
            settings.artifact_mirror.as_ref(),
        );
        let fetched = artifact::fetch(http, &settings.cache_dir, t, mirror, limits).await;
        match fetched {
            Ok(path) => Ok(path),
            Err(e) => {
                let e = OpenStackError::from(e);
                if e.is_bad_artifact() {
                    self.bad_artifact = Some((key, e.clone()));
                }
                Err(e)
            }
        }
    }

    /// Reads the image until Glance says `active`; `killed` or gone is a failure.
    async fn wait_active(
        &mut self,
        image: &Image,
        limit: Duration,
    ) -> Result<Image, OpenStackError> {
        let name = image.name.clone().unwrap_or_default();
        let since = Instant::now();
        let mut pause = Duration::from_millis(200);
        loop {
            let (now, _) = self.glance.get(&image.id).await?;
            let status = now
                .as_ref()
                .map_or("deleted".to_owned(), |i| i.status.clone());
            match (now, status.as_str()) {
                (Some(active), "active") => return Ok(active),
                (_, "killed" | "deleted" | "pending_delete" | "deactivated") => {
                    return Err(OpenStackError::Failed {
                        name,
                        id: image.id.clone(),
                        status,
                    });
                }
                _ if since.elapsed() >= limit => {
                    return Err(OpenStackError::NotActive {
                        name,
                        id: image.id.clone(),
                        status,
                        limit,
                    });
                }
                _ => {}
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(5));
        }
    }

    /// Deletes the image of this replica's failed import, once Glance says it is still
    /// that: called so, marked by this cluster, named by nothing. Else remembered, so that
    /// the next pass may delete it without waiting for its deadline.
    async fn discard(&mut self, want: &Want<'_>, image: &Image) {
        let name = want.name();
        let project = self.glance.project().await.ok().flatten();
        let allowed = match self.glance.get(&image.id).await {
            Ok((None, _)) => return,
            Ok((Some(now), clock)) => {
                let seen = now.seen(clock, project.as_deref());
                let named = want.names(&now);
                match seen.status.as_str() {
                    "active" => seen.retirable(&name, want.infra_id, named),
                    _ => seen.clearable(&name, want.infra_id, named, true),
                }
                .map_err(|why| why.to_string())
            }
            Err(e) => Err(e.to_string()),
        };
        let deleted = match allowed {
            Ok(()) => self
                .glance
                .delete(&image.id)
                .await
                .map_err(|e| e.to_string()),
            Err(why) => Err(why),
        };
        match deleted {
            Ok(()) => {
                tracing::info!(image = %name, id = %image.id, "deleted the image of a failed import")
            }
            Err(why) => {
                tracing::warn!(image = %name, id = %image.id, error = %why, "cannot delete the image of a failed import; the next import tries again");
                self.failed_here.insert(image.id.clone());
            }
        }
    }

    /// The properties to carry over from the image `name` the waiting MachineSets use now
    /// ([`marker::carried`]); none when that name is not exactly one image.
    pub async fn carried_from(
        &mut self,
        name: &str,
    ) -> Result<BTreeMap<String, String>, OpenStackError> {
        let (images, _) = self.glance.list(&[("name", name)]).await?;
        let mut named = images.iter().filter(|i| i.name.as_deref() == Some(name));
        match (named.next(), named.next()) {
            (Some(image), None) => Ok(marker::carried(&image.props)),
            _ => Ok(BTreeMap::new()),
        }
    }

    /// Every image this cluster marked that the credentials' project owns, whatever its
    /// name (for retention and `status`): a copied marker makes nothing ours.
    pub async fn ours(&mut self, infra_id: &str) -> Result<Vec<Image>, OpenStackError> {
        let (images, _) = self
            .glance
            .list(&[(marker::INFRASTRUCTURE, infra_id)])
            .await?;
        let project = self.glance.project().await?;
        Ok(images
            .into_iter()
            .filter(|i| i.marker().is_some_and(|m| m.infra_id == infra_id))
            .filter(|i| i.owned_by(project.as_deref()))
            .collect())
    }

    /// Deletes an image of ours whose data never came (`queued`, `killed`: an import that
    /// failed or was cut off, of any release), once Glance says, right now, that its import
    /// provably stopped and `named` (listed right now) does not name it.
    pub async fn clear(
        &mut self,
        id: &str,
        infra_id: &str,
        named: &BTreeSet<String>,
    ) -> Result<(), OpenStackError> {
        let (now_image, now) = self.glance.get(id).await?;
        let Some(image) = now_image else {
            self.failed_here.remove(id);
            return Ok(());
        };
        let name = image.name.clone().unwrap_or_default();
        let is_named = named.contains(id) || named.contains(&name);
        let project = self.glance.project().await?;
        let failed_here = self.failed_here.contains(id);
        let seen = image.seen(now, project.as_deref());
        seen.clearable(&name, infra_id, is_named, failed_here)
            .map_err(|why| busy(&image, why))?;
        tracing::info!(image = %name, id, status = %seen.status, glance_time = ?now, "deleting an image of ours whose import stopped");
        self.glance.delete(id).await?;
        self.failed_here.remove(id);
        Ok(())
    }

    /// Deletes an image of ours found unused for the retention, once Glance says, right
    /// now, that it still is what it was (its release's name, marked by this cluster,
    /// active) and `named` (listed right now) does not name it.
    pub async fn retire(
        &mut self,
        id: &str,
        infra_id: &str,
        named: &BTreeSet<String>,
    ) -> Result<(), OpenStackError> {
        let (now, _) = self.glance.get(id).await?;
        let Some(image) = now else {
            return Ok(());
        };
        let name = image.name.clone().unwrap_or_default();
        let is_named = named.contains(id) || named.contains(&name);
        let project = self.glance.project().await?;
        image
            .seen(None, project.as_deref())
            .retirable(&name, infra_id, is_named)
            .map_err(|why| busy(&image, why))?;
        tracing::info!(image = %name, id, "deleting an image of ours that nothing has named for the retention");
        self.glance.delete(id).await
    }
}

fn busy(image: &Image, why: Keep) -> OpenStackError {
    OpenStackError::Busy {
        name: image.name.clone().unwrap_or_default(),
        id: image.id.clone(),
        why,
    }
}

fn cache_error(settings: &Settings, e: std::io::Error) -> OpenStackError {
    OpenStackError::Artifact(ArtifactError::Cache {
        dir: settings.cache_dir.display().to_string(),
        cause: cause(e),
    })
}

/// What Glance holds is what was sent, and what was sent is the stream's qcow2.
fn check_sent(
    image: &Image,
    t: &Qcow2Target,
    (bytes, (sha256, sha512)): (u64, (String, String)),
) -> Result<(), OpenStackError> {
    let mismatch = |what: &'static str, glance: String, sent: String| OpenStackError::Mismatch {
        name: image.name.clone().unwrap_or_default(),
        id: image.id.clone(),
        what,
        glance,
        sent,
    };
    if sha256 != t.uncompressed_sha256 {
        return Err(OpenStackError::Artifact(ArtifactError::Checksum {
            url: t.location.clone(),
            what: "cached qcow2 (changed on disk since it was checked)",
            want: t.uncompressed_sha256.clone(),
            got: sha256,
        }));
    }
    if let Some(size) = image.size.filter(|s| *s != bytes) {
        return Err(mismatch("size", size.to_string(), bytes.to_string()));
    }
    // Glance's own hash of what it stored, in the algorithm it chose.
    let hash = image.prop("os_hash_value").unwrap_or("none").to_owned();
    match image.prop("os_hash_algo") {
        Some("sha512") if hash == sha512 => Ok(()),
        Some("sha256") if hash == sha256 => Ok(()),
        Some("sha512") => Err(mismatch("SHA-512", hash, sha512)),
        Some("sha256") => Err(mismatch("SHA-256", hash, sha256)),
        other => Err(mismatch(
            "os_hash_algo",
            other.unwrap_or("none").to_owned(),
            "sha512 or sha256".into(),
        )),
    }
}
