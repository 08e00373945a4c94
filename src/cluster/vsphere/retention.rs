//! Templates of ours that nothing has named for `--vsphere-template-retention` are deleted.

use std::time::Instant;

use crate::core::platforms::vsphere;

use super::place::Place;
use super::state::{Listed, Settings, State, Want};
use super::vim::Vim;

/// Deletes the templates of ours in the folder that no MachineSet or
/// ControlPlaneMachineSet names and that have been unused for the retention.
pub async fn retire(
    settings: &Settings,
    state: &mut State,
    vim: &Vim,
    place: &Place,
    want: &Want<'_>,
    listed: &Listed,
) {
    let fd = want.fd;
    let mut named = listed.named.clone();
    // Every failure domain's current template stays, wherever the folders are shared.
    named.extend(
        want.infra
            .failure_domains
            .iter()
            .map(|f| vsphere::template_name(&want.infra.infra_id, &want.target.release, &f.name)),
    );
    let Ok(vms) = vim.folder_vms(&place.folder).await else {
        return;
    };
    for (vm, name) in vms {
        let key = (fd.server.clone(), name.clone());
        if named.contains(&name) || !vsphere::is_imported_name(&name, &want.infra.infra_id, fd) {
            state.unused_since.remove(&key);
            continue;
        }
        let since = *state
            .unused_since
            .entry(key.clone())
            .or_insert_with(Instant::now);
        if since.elapsed() < settings.retention {
            continue;
        }
        // Only a template, and only one vCenter says is one.
        if !matches!(vim.is_template(&vm).await, Ok(Some(true))) {
            continue;
        }
        match vim.destroy(&vm).await {
            Ok(()) => {
                tracing::info!(template = %name, failure_domain = %fd.name, "deleted a template of ours that nothing has named for the retention");
                state.unused_since.remove(&key);
            }
            Err(e) => {
                tracing::warn!(template = %name, error = %e, "cannot delete an unused template of ours")
            }
        }
    }
}
