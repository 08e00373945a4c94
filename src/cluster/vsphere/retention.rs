//! Templates of ours that nothing has named for `--vsphere-template-retention` are deleted.
//! A template is ours when its name reads back exactly as one of ours (for any failure
//! domain: folders and datastores may be shared) and its marker says this cluster made it;
//! the clock runs per template identity (server, datacenter, folder, name), so two failure
//! domains' passes over one folder keep one clock.

use std::collections::BTreeSet;
use std::time::Instant;

use crate::cluster::importer::{Listed, Retention};
use crate::core::platforms::vsphere::{TemplateName, VSphereInfra, VSphereTarget};

use super::marker::{Keep, Marker};
use super::place::{Place, see};
use super::state::{Identity, State, Want};
use super::vim::{Moref, Vim};

/// A template due for deletion, as found; it is read again right before.
pub struct Due {
    vm: Moref,
    name: String,
    release: String,
    /// The failure domain its name is for.
    failure_domain: String,
    identity: Identity,
}

/// Whether the template `name` is in use: a MachineSet, ControlPlaneMachineSet or Machine
/// names it, or it is some failure domain's current template of some stream.
pub fn in_use(
    name: &str,
    named: &BTreeSet<String>,
    infra: &VSphereInfra,
    targets: &[VSphereTarget],
) -> bool {
    named.contains(name)
        || targets.iter().any(|target| {
            infra.failure_domains.iter().any(|f| {
                crate::core::platforms::vsphere::template_name(
                    &infra.infra_id,
                    &target.release,
                    &f.name,
                ) == name
            })
        })
}

/// The templates of ours in the failure domain's folder that have been unused for the
/// retention. Names that read as ours but carry no marker of this cluster are reported
/// once and never become candidates.
pub async fn due(
    clock: &mut Retention<Identity>,
    state: &mut State,
    vim: &Vim,
    place: &Place,
    want: &Want<'_>,
    listed: &Listed,
) -> Vec<Due> {
    let (fd, infra) = (want.fd, want.infra);
    let Ok(vms) = vim.folder_vms(&place.folder).await else {
        return Vec::new();
    };
    let mut due = Vec::new();
    for (vm, name) in vms {
        let identity = Identity::new(fd, &place.folder_path, &name);
        let parsed = TemplateName::parse(&name, &infra.infra_id, &infra.failure_domains);
        let Some(parsed) = parsed.filter(|_| !in_use(&name, &listed.named, infra, want.targets))
        else {
            clock.forget(&identity);
            continue;
        };
        let marked = match vim.extra_config(&vm).await {
            Ok(Some(extra)) => Marker::read(&extra),
            _ => continue,
        };
        if !marked
            .as_ref()
            .is_some_and(|m| m.infra_id == infra.infra_id && m.release == parsed.release)
        {
            if state.unmarked_reported.insert(identity.clone()) {
                let why = marked.map_or(Keep::Unmarked, |m| Keep::OtherCluster(m.infra_id));
                tracing::warn!(template = %name, folder = %place.folder_path, failure_domain = parsed.failure_domain, reason = %why, "a VM named like one of our templates is not marked as ours: it is never deleted");
            }
            continue;
        }
        if clock.due(&identity, false, Instant::now()) {
            due.push(Due {
                release: parsed.release.to_owned(),
                failure_domain: parsed.failure_domain.to_owned(),
                vm,
                name,
                identity,
            });
        }
    }
    due
}

/// Deletes a template found due once vCenter says, right now, that it still is what it
/// was (called so, a template, marked by this cluster for its release) and the objects
/// listed right now (`named`) do not name it.
pub async fn delete(
    clock: &mut Retention<Identity>,
    vim: &Vim,
    due: &Due,
    infra: &VSphereInfra,
    targets: &[VSphereTarget],
    named: &BTreeSet<String>,
) {
    let used = in_use(&due.name, named, infra, targets);
    let allowed = match see(vim, &due.vm).await {
        Ok(seen) => seen
            .retirable(&due.name, &infra.infra_id, &due.release, used)
            .map_err(|why| why.to_string()),
        Err(e) => Err(e.to_string()),
    };
    if let Err(why) = allowed {
        tracing::info!(template = %due.name, failure_domain = %due.failure_domain, reason = %why, "a template of ours due for deletion is kept");
        clock.forget(&due.identity);
        return;
    }
    match vim.destroy(&due.vm).await {
        Ok(()) => {
            tracing::info!(template = %due.name, failure_domain = %due.failure_domain, folder = %due.identity.folder, "deleted a template of ours that nothing has named for the retention");
            clock.forget(&due.identity);
        }
        Err(e) => {
            tracing::warn!(template = %due.name, failure_domain = %due.failure_domain, error = %e, "cannot delete an unused template of ours")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::platforms::vsphere::{FailureDomain, template_name};

    fn infra() -> VSphereInfra {
        let fd = |name: &str| FailureDomain {
            name: name.into(),
            folder: "/DC0/vm/shared".into(),
            ..FailureDomain::default()
        };
        VSphereInfra {
            infra_id: "ci-vs-abc12".into(),
            failure_domains: vec![fd("fd-a"), fd("fd-b")],
        }
    }

    #[test]
    fn every_failure_domains_current_template_and_every_named_one_is_in_use() {
        let infra = infra();
        let target = |release: &str| VSphereTarget {
            release: release.into(),
            location: "https://example/rhcos.ova".into(),
            sha256: "ab".repeat(32),
            uncompressed_sha256: None,
        };
        // A dual-stream release: a RHEL 9 and a RHEL 10 template are both current.
        let targets = [target("9.8.20260601-0"), target("10.2.20260715-0")];
        let old = |fd: &str| template_name("ci-vs-abc12", "9.8.20260428-0", fd);
        let named: BTreeSet<String> = [old("fd-b")].into();
        for release in ["9.8.20260601-0", "10.2.20260715-0"] {
            let current = template_name("ci-vs-abc12", release, "fd-b");
            assert!(in_use(&current, &BTreeSet::new(), &infra, &targets));
        }
        assert!(in_use(&old("fd-b"), &named, &infra, &targets));
        assert!(!in_use(&old("fd-a"), &named, &infra, &targets));
    }

    #[test]
    fn the_clock_is_one_per_template_identity() {
        let infra = infra();
        let (a, b) = (&infra.failure_domains[0], &infra.failure_domains[1]);
        // Two failure domains sharing a folder see the same template as one.
        assert_eq!(
            Identity::new(a, "/DC0/vm/shared", "t"),
            Identity::new(b, "/DC0/vm/shared", "t")
        );
        assert_ne!(
            Identity::new(a, "/DC0/vm/shared", "t"),
            Identity::new(a, "/DC0/vm/other", "t")
        );
        let other_server = FailureDomain {
            server: "vc2".into(),
            ..a.clone()
        };
        assert_ne!(
            Identity::new(a, "/DC0/vm/shared", "t"),
            Identity::new(&other_server, "/DC0/vm/shared", "t")
        );
    }
}
