//! Where a failure domain's templates go, and what is there now (read only: every replica
//! and `status` look).

use std::sync::Arc;

use crate::core::platforms::vsphere::{
    self, FailureDomain, TemplateName, VSphereInfra, VSphereLearned, VSphereTarget,
};
use crate::core::platforms::{Platform, Target};
use crate::core::snapshot::{Arch, Snapshot};

use super::access::Access;
use super::error::{ImportError, on};
use super::marker::{Keep, Marker, Seen};
use super::vim::{Moref, Vim, VimError};

/// Which of the stream's templates are ready in vCenter, looked at without changing
/// anything (`status`); `None` when this is not a vSphere cluster with an OVA in its
/// stream.
pub async fn look(access: &Access, snap: &Snapshot) -> Option<VSphereLearned> {
    let (infra, targets) = on_vsphere(snap)?;
    let mut learned = VSphereLearned::default();
    for (target, fd) in each_template(&targets, &infra) {
        let name = vsphere::template_name(&infra.infra_id, &target.release, &fd.name);
        let found = async {
            let vim = access.login(fd).await?;
            let place = Place::find(&vim, &infra, fd).await;
            let found = match place {
                Ok(place) => {
                    learned
                        .unmarked
                        .extend(unmarked(&vim, &place, &infra).await);
                    is_ready(&vim, &place, fd, &name, &infra.infra_id, target).await
                }
                Err(e) => Err(e),
            };
            vim.logout().await;
            found
        };
        match found.await {
            Ok(Found::Template) => {
                learned.templates.insert((fd.name.clone(), name));
            }
            Ok(Found::Foreign(why)) => {
                learned
                    .unavailable
                    .get_or_insert(not_ours(fd, &name, why).to_string());
            }
            Ok(Found::Missing | Found::Leftover(_)) => {}
            Err(e) => {
                learned.unavailable.get_or_insert(e.to_string());
            }
        }
    }
    Some(learned)
}

/// The inventory paths of the VMs in the folder named like our templates (for any of the
/// cluster's failure domains) that carry no marker of this cluster.
async fn unmarked(vim: &Vim, place: &Place, infra: &VSphereInfra) -> Vec<String> {
    let Ok(vms) = vim.folder_vms(&place.folder).await else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (vm, name) in vms {
        if TemplateName::parse(&name, &infra.infra_id, &infra.failure_domains).is_none() {
            continue;
        }
        let marker = vim.extra_config(&vm).await.ok().flatten();
        let ours = marker
            .as_ref()
            .and_then(Marker::read)
            .is_some_and(|m| m.infra_id == infra.infra_id);
        if !ours {
            out.push(format!("{}/{name}", place.folder_path));
        }
    }
    out
}

/// What is at the template's place in vCenter.
pub enum Found {
    /// Our template, made from the stream's OVA.
    Template,
    Missing,
    /// A VM of ours of that name that is not a template: an interrupted import's, or one
    /// still running.
    Leftover(Moref),
    /// A VM or template of that name that is not provably ours, or not from this OVA: it
    /// is never touched, and the template is not imported.
    Foreign(Keep),
}

pub async fn is_ready(
    vim: &Vim,
    place: &Place,
    fd: &FailureDomain,
    name: &str,
    infra_id: &str,
    target: &VSphereTarget,
) -> Result<Found, ImportError> {
    let found = vim.find(&format!("{}/{name}", place.folder_path)).await;
    let Some(vm) = found.map_err(|e| on(fd, e))? else {
        return Ok(Found::Missing);
    };
    let seen = see(vim, &vm).await.map_err(|e| on(fd, e))?;
    match (
        seen.template,
        seen.usable(name, infra_id, &target.release, &target.sha256),
    ) {
        (_, Ok(())) => Ok(Found::Template),
        (None, _) => Err(ImportError::Unreadable {
            failure_domain: fd.name.clone(),
            name: name.to_owned(),
        }),
        (Some(false), Err(_)) if seen.clearable(name, infra_id, false, true).is_ok() => {
            Ok(Found::Leftover(vm))
        }
        (_, Err(why)) => Ok(Found::Foreign(why)),
    }
}

/// What vCenter says about the VM right now: its name, whether it is a template, its
/// marker, and vCenter's clock.
pub async fn see(vim: &Vim, vm: &Moref) -> Result<Seen, VimError> {
    let extra = vim.extra_config(vm).await?;
    Ok(Seen {
        name: vim.name(vm).await?,
        template: vim.is_template(vm).await?,
        marker: extra.as_ref().and_then(Marker::read),
        now: vim.current_time().await?,
    })
}

/// The error for a VM at the template's name that is not provably ours.
pub fn not_ours(fd: &FailureDomain, name: &str, why: Keep) -> ImportError {
    ImportError::NotOurs {
        failure_domain: fd.name.clone(),
        name: name.to_owned(),
        why,
    }
}

/// The cluster's vSphere facts and each stream's OVA (one per release: a dual-stream
/// release has a template per stream), when this is a vSphere cluster whose streams have
/// one (vSphere is amd64 only).
pub fn on_vsphere(snap: &Snapshot) -> Option<(Arc<VSphereInfra>, Vec<VSphereTarget>)> {
    if snap.cluster.platform.as_deref() != Some(Platform::VSphere.name()) {
        return None;
    }
    let infra = snap.cluster.vsphere.clone()?;
    let arch = snap.cluster.control_plane_arch.unwrap_or(Arch::Amd64);
    let boot_images = snap.boot_images.as_ref()?;
    let mut targets: Vec<VSphereTarget> = Vec::new();
    for doc in boot_images.docs() {
        if let Some(Ok(Target::VSphere(t))) =
            doc.target(arch, crate::core::platforms::Platform::VSphere)
            && !targets.iter().any(|have| have.release == t.release)
        {
            targets.push(t.clone());
        }
    }
    (!targets.is_empty()).then_some((infra, targets))
}

/// Each stream's template in each failure domain.
pub fn each_template<'a>(
    targets: &'a [VSphereTarget],
    infra: &'a VSphereInfra,
) -> Vec<(&'a VSphereTarget, &'a FailureDomain)> {
    let mut out = Vec::with_capacity(targets.len() * infra.failure_domains.len());
    for target in targets {
        out.extend(infra.failure_domains.iter().map(|fd| (target, fd)));
    }
    out
}

/// Where a failure domain's templates go, found in vCenter.
pub struct Place {
    pub folder_path: String,
    pub folder: Moref,
    pub pool: Moref,
    pub datastore: Moref,
    pub network: Moref,
    /// A connected host of the compute cluster that sees the datastore (as the MCO picks
    /// one: a cluster without DRS needs it); `None` leaves the choice to vCenter.
    pub host: Option<Moref>,
}

impl Place {
    pub async fn find(
        vim: &Vim,
        infra: &VSphereInfra,
        fd: &FailureDomain,
    ) -> Result<Place, ImportError> {
        let dc = fd.datacenter.trim_matches('/');
        let folder_path = match fd.folder.trim_end_matches('/') {
            "" => format!("/{dc}/vm/{}", infra.infra_id),
            f => f.to_owned(),
        };
        let pool_path = match fd.resource_pool.as_str() {
            "" => format!("{}/Resources", fd.compute_cluster.trim_end_matches('/')),
            p => p.to_owned(),
        };
        let network = fd
            .networks
            .first()
            .ok_or_else(|| ImportError::NoNetwork(fd.name.clone()))?;
        let network_path = match network.starts_with('/') {
            true => network.clone(),
            false => format!("/{dc}/network/{network}"),
        };
        let lookup = |what: &'static str, path: String| async move {
            match vim.find(&path).await {
                Ok(Some(m)) => Ok(m),
                Ok(None) => Err(ImportError::NotFound {
                    failure_domain: fd.name.clone(),
                    what,
                    path,
                }),
                Err(e) => Err(on(fd, e)),
            }
        };
        let datastore = lookup("datastore", fd.datastore.clone()).await?;
        let host = match vim.find(&fd.compute_cluster).await {
            Ok(Some(cluster)) => host_seeing(vim, &cluster, &datastore)
                .await
                .map_err(|e| on(fd, e))?,
            Ok(None) | Err(_) => None,
        };
        Ok(Place {
            host,
            folder: lookup("folder", folder_path.clone()).await?,
            pool: lookup("resource pool", pool_path).await?,
            datastore,
            network: lookup("network", network_path).await?,
            folder_path,
        })
    }
}

/// The first connected host of `cluster` that mounts `datastore`.
async fn host_seeing(
    vim: &Vim,
    cluster: &Moref,
    datastore: &Moref,
) -> Result<Option<Moref>, VimError> {
    for host in vim.morefs(cluster, "host").await? {
        let connected = vim
            .property(&host, "runtime.connectionState", |v| {
                v.and_then(|v| v.text()) == Some("connected")
            })
            .await?;
        let maintenance = vim
            .property(&host, "runtime.inMaintenanceMode", |v| {
                v.and_then(|v| v.text()) == Some("true")
            })
            .await?;
        if connected && !maintenance && vim.morefs(&host, "datastore").await?.contains(datastore) {
            return Ok(Some(host));
        }
    }
    Ok(None)
}
