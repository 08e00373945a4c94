//! An import: download the OVA once (checksum and size checked), `CreateImportSpec`,
//! `ImportVApp`, the NFC upload of its disks, `HttpNfcLeaseComplete`, `MarkAsTemplate`; what
//! a failed import created is deleted.

use std::time::{Duration, Instant};

use super::error::{ImportError, on};
use super::ova::{self, OvaError};
use super::place::Place;
use super::state::{Settings, State, Want};
use super::vim::{self, Moref, Vim, VimError};
use crate::core::platforms::vsphere::FailureDomain;

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
    tracing::info!(template = name, failure_domain = %fd.name, url = %target.location, host = place.host.as_ref().map(|h| h.value.as_str()), "importing the RHCOS OVA");
    let s = settings;
    let key = format!("{} {}", target.location, target.sha256);
    if let Some((bad, why)) = &state.bad_ova
        && *bad == key
    {
        return Err(why.clone().into());
    }
    let fetched = ova::fetch(&state.access.https, &s.cache_dir, target, s.max_ova_bytes).await;
    let path = match fetched {
        Err(e) if e.is_bad_ova() => {
            state.bad_ova = Some((key, e.clone()));
            return Err(e.into());
        }
        other => other?,
    };
    let ova = tokio::task::spawn_blocking(move || ova::open(&path))
        .await
        .map_err(|e| OvaError::Read {
            path: String::new(),
            why: e.to_string(),
        })??;
    let networks: Vec<(String, Moref)> = ova::networks(&ova.descriptor)
        .into_iter()
        .map(|n| (n, place.network.clone()))
        .collect();
    let spec = vim
        .create_import_spec(
            &ova.descriptor,
            name,
            &place.pool,
            &place.datastore,
            &networks,
        )
        .await
        .map_err(|e| on(fd, e))?;
    check_files(&spec, &ova)?;
    let lease = vim
        .import_vapp(&place.pool, &spec, &place.folder, place.host.as_ref())
        .await
        .map_err(|e| on(fd, e))?;
    let mut created = None;
    let mut uploaded = 0;
    let result = async {
        let info = vim.lease_ready(&lease).await.map_err(|e| on(fd, e))?;
        created = Some(info.entity.clone());
        uploaded = upload_all(vim, &lease, &info, &spec, &ova).await?;
        vim.lease_complete(&lease).await.map_err(|e| on(fd, e))?;
        let marked = vim.mark_as_template(&info.entity).await;
        marked.map_err(|e| on(fd, e))
    }
    .await;
    if let (Ok(()), Some(vm)) = (&result, &created) {
        state.access.tag(fd, &want.infra.infra_id, vm).await;
    }
    if let Err(e) = result {
        let _ = vim.lease_abort(&lease).await;
        if let Some(vm) = created {
            match vim.destroy(&vm).await {
                Ok(()) => {
                    tracing::info!(template = name, failure_domain = %fd.name, "deleted the VM of a failed import")
                }
                Err(d) => {
                    tracing::warn!(template = name, error = %d, "cannot delete the VM of a failed import; the next import deletes it");
                    state.failed_imports.insert(vm.value.clone());
                }
            }
        }
        return Err(e);
    }
    tracing::info!(template = name, failure_domain = %fd.name, seconds = started.elapsed().as_secs_f64(), bytes = uploaded, "imported the RHCOS OVA as a template");
    Ok(())
}

/// Every file the import spec names is in the OVA, and there is at least one: a template
/// without its disk must never be made.
fn check_files(spec: &vim::ImportSpec, ova: &ova::Ova) -> Result<(), OvaError> {
    let bad = |why: String| OvaError::Read {
        path: ova.path.display().to_string(),
        why,
    };
    if spec.files.is_empty() {
        return Err(bad(
            "vCenter's import spec names no file to upload from it".into()
        ));
    }
    match spec.files.iter().find(|f| !ova.files.contains_key(&f.path)) {
        Some(f) => Err(bad(format!(
            "its descriptor names {}, which is not in it",
            f.path
        ))),
        None => Ok(()),
    }
}

/// Deletes the VM of the template's name that is not a template when this replica may: it
/// was made before this replica began to lead (an interrupted import of an earlier
/// holder), or by an import of ours whose cleanup failed. Otherwise another import may
/// still be writing it: nothing is deleted, and the pass reports it.
pub async fn leftover(
    state: &mut State,
    vim: &Vim,
    fd: &FailureDomain,
    name: &str,
    vm: &Moref,
) -> Result<(), ImportError> {
    let created = vim.created(vm).await.map_err(|e| on(fd, e))?;
    let before_us = matches!((created, state.leading_since), (Some(c), Some(l)) if c < l);
    if !before_us && !state.failed_imports.contains(&vm.value) {
        return Err(ImportError::Busy {
            failure_domain: fd.name.clone(),
            name: name.to_owned(),
        });
    }
    tracing::info!(template = name, failure_domain = %fd.name, "deleting a VM an interrupted import left");
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
    let unreadable = |why: String| OvaError::Read {
        path: ova.path.display().to_string(),
        why,
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
                    why: format!(
                        "no device for {} ({}) among {:?}",
                        item.path,
                        item.device_id,
                        info.devices.iter().map(|d| &d.0).collect::<Vec<_>>()
                    ),
                },
            });
        };
        let (offset, size) = ova.files.get(&item.path).copied().ok_or_else(|| {
            unreadable(format!(
                "its descriptor names {}, which is not in it",
                item.path
            ))
        })?;
        let body = ova::body(ova, offset, size)
            .await
            .map_err(|e| unreadable(e.to_string()))?;
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
