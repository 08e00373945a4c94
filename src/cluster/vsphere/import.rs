//! An import: download the OVA once (checksum and size checked), `CreateImportSpec`,
//! `ImportVApp`, the NFC upload of its disks, `HttpNfcLeaseComplete`, `MarkAsTemplate`; what
//! a failed import created is deleted.

use std::time::{Duration, Instant};

use k8s_openapi::jiff::SignedDuration;

use crate::core::platforms::vsphere::{FailureDomain, VSphereTarget};

use super::error::{ImportError, on};
use super::marker::{self, Marker};
use super::objects;
use super::ova::{self, OvaError};
use super::place::{Place, see};
use super::state::{Settings, State, Want};
use super::vim::{self, ImportTarget, Moref, Vim, VimError};
use crate::cluster::cause::{Cause, cause};

/// How often a lease is told an upload goes on (vCenter's lease timeout is five minutes).
const LEASE_PROGRESS: Duration = Duration::from_secs(60);

/// The import itself; what it created is deleted when it fails.
pub async fn import(
    settings: &Settings,
    state: &mut State,
    vim: &Vim,
    place: &Place,
    want: &Want<'_>,
) -> Result<(), ImportError> {
    let (fd, name, target) = (want.fd, want.name.as_str(), want.target);
    let started = Instant::now();
    let provisioning = disk_provisioning(state, vim, place, want).await;
    tracing::info!(template = name, failure_domain = %fd.name, url = %target.location, host = place.host.as_ref().map(|h| h.value.as_str()), disk_provisioning = %provisioning, "importing the RHCOS OVA");
    let ova = fetch(settings, state, target).await?;
    let networks: Vec<(String, Moref)> = ova::networks(&ova.descriptor)
        .into_iter()
        .map(|n| (n, place.network.clone()))
        .collect();
    let bytes = ova.files.values().map(|f| f.1).sum();
    let budget = marker::import_budget(ova.files.len(), bytes);
    let now = vim.current_time().await.map_err(|e| on(fd, e))?;
    let marker = Marker {
        infra_id: want.infra.infra_id.clone(),
        release: target.release.clone(),
        ova_sha256: target.sha256.clone(),
        import_deadline: SignedDuration::try_from(budget)
            .ok()
            .and_then(|b| now.checked_add(b).ok()),
    };
    let into = ImportTarget {
        name,
        pool: &place.pool,
        datastore: &place.datastore,
        disk_provisioning: &provisioning,
    };
    let spec = vim
        .create_import_spec(&ova.descriptor, &into, &networks, &marker.pairs())
        .await
        .map_err(|e| on(fd, e))?;
    check_files(&spec, &ova)?;
    let lease = vim
        .import_vapp(&place.pool, &spec, &place.folder, place.host.as_ref())
        .await
        .map_err(|e| on(fd, e))?;
    let mut created = None;
    let leased = lease_through(vim, fd, &lease, &spec, &ova, &mut created);
    let result = match tokio::time::timeout(budget, leased).await {
        Ok(result) => result,
        Err(_) => Err(ImportError::Deadline {
            failure_domain: fd.name.clone(),
            name: name.to_owned(),
            budget,
        }),
    };
    let uploaded = match result {
        Ok(uploaded) => uploaded,
        Err(e) => {
            let _ = vim.lease_abort(&lease).await;
            if let Some(vm) = created {
                discard(state, vim, want, &vm).await;
            }
            return Err(e);
        }
    };
    if let Some(vm) = &created {
        state
            .access
            .tag(fd, &want.infra.infra_id, &want.tag_ids, vm)
            .await;
    }
    tracing::info!(template = name, failure_domain = %fd.name, seconds = started.elapsed().as_secs_f64(), bytes = uploaded, "imported the RHCOS OVA as a template");
    Ok(())
}

/// The stream's OVA from the cache (downloaded when not there), opened; an OVA found bad is
/// not downloaded again until the stream names another.
async fn fetch(
    settings: &Settings,
    state: &mut State,
    target: &VSphereTarget,
) -> Result<ova::Ova, ImportError> {
    let key = format!("{} {}", target.location, target.sha256);
    if let Some((bad, why)) = &state.bad_ova
        && *bad == key
    {
        return Err(why.clone().into());
    }
    let limits = ova::Limits {
        max_bytes: settings.max_ova_bytes,
        deadline: settings.download_timeout,
    };
    let mirror = settings.artifact_mirror.as_ref();
    let fetched = ova::fetch(
        &state.access.https,
        &settings.cache_dir,
        target,
        mirror,
        limits,
    )
    .await;
    let path = match fetched {
        Err(e) if e.is_bad_ova() => {
            state.bad_ova = Some((key, e.clone()));
            return Err(e.into());
        }
        other => other?,
    };
    let opened = tokio::task::spawn_blocking(move || ova::open(&path)).await;
    Ok(opened.map_err(|e| OvaError::Read {
        path: String::new(),
        cause: cause(e),
    })??)
}

/// The lease's part: its VM (into `created`), the uploads, completing it, and marking the
/// VM a template; the bytes sent.
async fn lease_through(
    vim: &Vim,
    fd: &FailureDomain,
    lease: &Moref,
    spec: &vim::ImportSpec,
    ova: &ova::Ova,
    created: &mut Option<Moref>,
) -> Result<u64, ImportError> {
    let info = vim.lease_ready(lease).await.map_err(|e| on(fd, e))?;
    *created = Some(info.entity.clone());
    let uploaded = upload_all(vim, lease, &info, spec, ova).await?;
    vim.lease_complete(lease).await.map_err(|e| on(fd, e))?;
    let marked = vim.mark_as_template(&info.entity).await;
    marked.map_err(|e| on(fd, e))?;
    Ok(uploaded)
}

/// Deletes the VM of this replica's failed import (its lease aborted), once vCenter says it
/// is still that: marked ours, not a template, named by nothing.
async fn discard(state: &mut State, vim: &Vim, want: &Want<'_>, vm: &Moref) {
    let (fd, name) = (want.fd, want.name.as_str());
    let named = want.listed.is_some_and(|l| l.named.contains(name));
    let cleared = match see(vim, vm).await {
        Ok(seen) => seen
            .clearable(name, &want.infra.infra_id, named, true)
            .map_err(|why| why.to_string()),
        Err(e) => Err(e.to_string()),
    };
    let destroyed = match cleared {
        Ok(()) => vim.destroy(vm).await.map_err(|e| e.to_string()),
        Err(why) => Err(why),
    };
    match destroyed {
        Ok(()) => {
            tracing::info!(template = name, failure_domain = %fd.name, "deleted the VM of a failed import")
        }
        Err(why) => {
            tracing::warn!(template = name, failure_domain = %fd.name, error = %why, "cannot delete the VM of a failed import; the next import tries again");
            state.failed_imports.insert(vm.value.clone());
        }
    }
}

/// The disk provisioning of the template the waiting MachineSets use now (as the MCO
/// carries it), else the install-config's `platform.vsphere.diskType`; empty (the
/// datastore's default) when neither says.
async fn disk_provisioning(state: &State, vim: &Vim, place: &Place, want: &Want<'_>) -> String {
    for current in want.waiting.iter().filter_map(objects::template_path) {
        let path = match current.contains('/') {
            true => current.to_owned(),
            false => format!("{}/{current}", place.folder_path),
        };
        let Ok(Some(vm)) = vim.find(&path).await else {
            continue;
        };
        if let Ok(Some(p)) = vim.disk_provisioning(&vm).await {
            return p;
        }
    }
    state
        .access
        .install_config_disk_type()
        .await
        .unwrap_or_default()
}

/// Every file the import spec names is in the OVA, and there is at least one: a template
/// without its disk must never be made.
fn check_files(spec: &vim::ImportSpec, ova: &ova::Ova) -> Result<(), OvaError> {
    let bad = |cause: Cause| OvaError::Read {
        path: ova.path.display().to_string(),
        cause,
    };
    if spec.files.is_empty() {
        return Err(bad(cause(
            "vCenter's import spec names no file to upload from it",
        )));
    }
    match spec.files.iter().find(|f| !ova.files.contains_key(&f.path)) {
        Some(f) => Err(bad(cause(format!(
            "its descriptor names {}, which is not in it",
            f.path
        )))),
        None => Ok(()),
    }
}

/// Deletes what an import of ours left at the template's name (a VM that is not a
/// template) when vCenter says, right now, that it may go: marked by this cluster, named by
/// nothing, and its import provably stopped (one of this replica's that failed, or past
/// its deadline by vCenter's clock). Otherwise the pass reports it and nothing is deleted.
pub async fn clear_leftover(
    state: &mut State,
    vim: &Vim,
    want: &Want<'_>,
    vm: &Moref,
) -> Result<(), ImportError> {
    let (fd, name) = (want.fd, want.name.as_str());
    let named = want.listed.is_none_or(|l| l.named.contains(name));
    let seen = see(vim, vm).await.map_err(|e| on(fd, e))?;
    let failed_here = state.failed_imports.contains(&vm.value);
    if let Err(why) = seen.clearable(name, &want.infra.infra_id, named, failed_here) {
        return Err(ImportError::Busy {
            failure_domain: fd.name.clone(),
            name: name.to_owned(),
            why,
        });
    }
    tracing::info!(template = name, failure_domain = %fd.name, vcenter_time = %seen.now, "deleting a VM an interrupted import of ours left");
    vim.destroy(vm).await.map_err(|e| on(fd, e))?;
    state.failed_imports.remove(&vm.value);
    Ok(())
}

/// Sends each file of the import spec to its lease device, telling the lease it is in use
/// while a long upload goes on.
async fn upload_all(
    vim: &Vim,
    lease: &Moref,
    info: &vim::LeaseInfo,
    spec: &vim::ImportSpec,
    ova: &ova::Ova,
) -> Result<u64, ImportError> {
    let unreadable = |cause: Cause| OvaError::Read {
        path: ova.path.display().to_string(),
        cause,
    };
    let total: u64 = spec
        .files
        .iter()
        .filter_map(|f| ova.files.get(&f.path))
        .map(|f| f.1)
        .sum();
    let mut sent: u64 = 0;
    for item in &spec.files {
        let device = info.devices.iter().find(|(key, _)| *key == item.device_id);
        let Some((_, url)) = device else {
            return Err(ImportError::Vim {
                server: vim.server().to_owned(),
                error: VimError::Answer {
                    method: "HttpNfcLease".into(),
                    cause: cause(format!(
                        "no device for {} ({}) among {:?}",
                        item.path,
                        item.device_id,
                        info.devices.iter().map(|d| &d.0).collect::<Vec<_>>()
                    )),
                },
            });
        };
        let (offset, size) = ova.files.get(&item.path).copied().ok_or_else(|| {
            unreadable(cause(format!(
                "its descriptor names {}, which is not in it",
                item.path
            )))
        })?;
        let body = ova::body(ova, offset, size)
            .await
            .map_err(|e| unreadable(cause(e)))?;
        let upload = vim.upload(url, item, body, size);
        tokio::pin!(upload);
        let mut progress = tokio::time::interval(LEASE_PROGRESS);
        progress.tick().await;
        let done = loop {
            tokio::select! {
                done = &mut upload => break done,
                _ = progress.tick() => {
                    let percent = (sent * 100 / total.max(1)).min(99) as u8;
                    let _ = vim.lease_progress(lease, percent).await;
                }
            }
        };
        done.map_err(|error| ImportError::Vim {
            server: vim.server().to_owned(),
            error,
        })?;
        sent += size;
    }
    Ok(sent)
}
