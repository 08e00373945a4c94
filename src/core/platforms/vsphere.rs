//! vSphere: `template` becomes the versioned template of the stream's OVA in the
//! MachineSet's failure domain, `<infra-id>-rhcos-<release>-<failure domain>` (behaviour
//! §4.9, docs/vsphere.md).
//!
//! The MCO imports the OVA itself and swaps it in under the installer's fixed name by two
//! renames. An admission call cannot import a disk, and renaming a template under running
//! machines has a window where it is missing, so here each release gets its own name: the
//! background importer (`cluster::vsphere`) imports it, the snapshot learns the names that
//! are ready ([`VSphereLearned`]), and only then does a MachineSet move to it
//! (`TemplateNotImported` until then).

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::artifact::{Artifact, is_rhcos_release};
use super::rules::{Context, Edit, EntryError, McoManages, Outcome, Rules, per_arch};
use crate::core::arch::Arch;
pub use crate::core::learned::{FailureDomain, VSphereInfra, VSphereLearned};
use crate::core::lenient::{Field, Object};
use crate::core::reason::Reason;
use crate::core::view::SpecFields;

/// vSphere's [`Rules`].
pub struct VSphere;

impl Rules for VSphere {
    const NAME: &'static str = "VSphere";
    /// What the MCO manages on vSphere: MachineSets from 4.21 (4.20 with
    /// TechPreviewNoUpgrade; by default from 4.22), never the ControlPlaneMachineSet.
    const MCO_MANAGES: McoManages = McoManages {
        machine_sets: true,
        control_plane_machine_sets: false,
    };
    const KIND: &'static str = "VSphereMachineProviderSpec";
    const BOOT_FIELDS: &'static [&'static str] = &["template"];
    type Target = VSphereTarget;

    fn targets(
        architectures: &BTreeMap<Arch, &Value>,
    ) -> BTreeMap<Arch, Result<VSphereTarget, EntryError>> {
        per_arch(architectures, |_, entry| {
            Artifact::read(entry, "vmware", "ova")
        })
    }

    /// `template`.
    fn current_image(spec: &SpecFields<'_>) -> Option<String> {
        spec.read::<Cow<'_, str>>("template")
            .as_str()
            .map(str::to_owned)
    }

    fn reconcile(spec: &SpecFields<'_>, target: &VSphereTarget, ctx: &Context<'_>) -> Outcome {
        reconcile(spec, target, ctx)
    }
}
/// vSphere refuses longer inventory names.
pub const MAX_NAME_CHARS: usize = 80;
/// Hex digits of the name's SHA-256 that end a shortened name.
const SHORT_HASH_HEX: usize = 8;

/// The stream's OVA for one architecture (`artifacts.vmware`, format `ova`): its release
/// is part of the template's name.
pub(crate) type VSphereTarget = Artifact;

/// A template name this project gives, `<infra-id>-rhcos-<release>-<failure domain>`, and
/// the one place such names are written and read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TemplateName<'a> {
    pub infra_id: &'a str,
    /// An RHCOS release ([`is_rhcos_release`]).
    pub release: &'a str,
    pub failure_domain: &'a str,
}

impl<'a> TemplateName<'a> {
    /// The name, within vSphere's 80 characters: a longer name keeps its beginning and ends
    /// with a short SHA-256 of the whole name, so that it stays the same for the same inputs
    /// and differs between failure domains.
    pub fn format(&self) -> String {
        shorten(&format!(
            "{}-rhcos-{}-{}",
            self.infra_id, self.release, self.failure_domain
        ))
    }

    /// Reads `name` as one of ours for one of `failure_domains`: exactly what [`format`]
    /// gives them (the hash too, when shortened), with a release that is an RHCOS release.
    /// Anything else (a customer's `<infra-id>-rhcos-4.16-golden-<fd>`, the installer's or
    /// the MCO's names, a release cut off by shortening) is not ours.
    ///
    /// [`format`]: TemplateName::format
    pub fn parse(
        name: &'a str,
        infra_id: &'a str,
        failure_domains: &'a [FailureDomain],
    ) -> Option<TemplateName<'a>> {
        let rest = name.strip_prefix(infra_id)?.strip_prefix("-rhcos-")?;
        rest.match_indices('-')
            .map(|(i, _)| &rest[..i])
            .filter(|release| is_rhcos_release(release))
            .flat_map(|release| {
                failure_domains.iter().map(move |fd| TemplateName {
                    infra_id,
                    release,
                    failure_domain: &fd.name,
                })
            })
            .find(|candidate| candidate.format() == name)
    }
}

/// [`TemplateName::format`] of these parts.
pub fn template_name(infra_id: &str, release: &str, failure_domain: &str) -> String {
    TemplateName {
        infra_id,
        release,
        failure_domain,
    }
    .format()
}

fn shorten(full: &str) -> String {
    if full.chars().count() <= MAX_NAME_CHARS {
        return full.to_owned();
    }
    let hash = ring::digest::digest(&ring::digest::SHA256, full.as_bytes());
    let hex: String = hash.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    let keep: String = full
        .chars()
        .take(MAX_NAME_CHARS - SHORT_HASH_HEX - 1)
        .collect();
    format!("{keep}-{}", &hex[..SHORT_HASH_HEX])
}

/// The names the installer gives a failure domain's template: per region and zone, per
/// failure domain, and the single template of clusters without failure domains.
pub(crate) fn installer_names(infra_id: &str, fd: &FailureDomain) -> [String; 3] {
    [
        format!("{infra_id}-rhcos-{}-{}", fd.region, fd.zone),
        format!("{infra_id}-rhcos-{}", fd.name),
        format!("{infra_id}-rhcos"),
    ]
}

/// Whether a template name is one we may move a MachineSet away from: the installer's
/// names, or a versioned name of ours (of any release, shortened or not).
fn is_ours(
    name: &str,
    infra_id: &str,
    fd: &FailureDomain,
    learned: Option<&VSphereLearned>,
) -> bool {
    if installer_names(infra_id, fd).iter().any(|n| n == name) {
        return true;
    }
    if learned.is_some_and(|l| l.imported_by_us(name)) {
        return true;
    }
    TemplateName::parse(name, infra_id, std::slice::from_ref(fd)).is_some()
}

/// `folder` with no trailing slash and single slashes, as Go's `path.Clean` leaves the
/// inventory paths it compares.
fn clean_path(p: &str) -> String {
    let absolute = p.starts_with('/');
    let parts: Vec<&str> = p
        .split('/')
        .filter(|s| !s.is_empty() && *s != ".")
        .collect();
    let joined = parts.join("/");
    if absolute {
        format!("/{joined}")
    } else {
        joined
    }
}

/// Whether the VM at `inventory_path` is a direct child of `folder` (the MCO's
/// `isInFolder`); no folder means anywhere.
pub fn is_in_folder(inventory_path: &str, folder: Option<&str>) -> bool {
    let Some(folder) = folder.filter(|f| !f.is_empty()) else {
        return true;
    };
    let path = clean_path(inventory_path);
    match path.rsplit_once('/') {
        Some((parent, _)) => parent == clean_path(folder),
        None => false,
    }
}

/// Infrastructure `cluster`'s vSphere facts; `None` when it names no infrastructure id.
/// Failure domains that are not objects are left out (nothing can match them).
pub fn infra(infrastructure: &Value) -> Option<VSphereInfra> {
    let infra_id = infrastructure
        .pointer("/status/infrastructureName")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())?;
    let port_of = |server: &str| {
        infrastructure
            .pointer("/spec/platformSpec/vsphere/vcenters")
            .and_then(Value::as_array)?
            .iter()
            .find(|v| v.get("server").and_then(Value::as_str) == Some(server))?
            .get("port")?
            .as_u64()
            .and_then(|p| u16::try_from(p).ok())
    };
    let failure_domains = infrastructure
        .pointer("/spec/platformSpec/vsphere/failureDomains")
        .and_then(Value::as_array)
        .map(|fds| {
            fds.iter()
                .filter_map(failure_domain)
                .map(|fd| FailureDomain {
                    port: port_of(&fd.server),
                    ..fd
                })
                .collect()
        })
        .unwrap_or_default();
    Some(VSphereInfra {
        infra_id: infra_id.to_owned(),
        failure_domains,
    })
}

fn failure_domain(fd: &Value) -> Option<FailureDomain> {
    let s = |pointer: &str| {
        fd.pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let name = s("/name");
    if name.is_empty() {
        return None;
    }
    Some(FailureDomain {
        name,
        region: s("/region"),
        zone: s("/zone"),
        server: s("/server"),
        port: None,
        datacenter: s("/topology/datacenter"),
        datastore: s("/topology/datastore"),
        compute_cluster: s("/topology/computeCluster"),
        resource_pool: s("/topology/resourcePool"),
        folder: s("/topology/folder"),
        networks: crate::core::lenient::strings(fd.pointer("/topology/networks")),
        vm_group: s("/zoneAffinity/hostGroup/vmGroup"),
    })
}

/// `providerSpec.value.workspace`.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct Workspace<'a> {
    #[serde(borrow)]
    server: Field<Cow<'a, str>>,
    #[serde(borrow)]
    datacenter: Field<Cow<'a, str>>,
    #[serde(borrow)]
    datastore: Field<Cow<'a, str>>,
    #[serde(borrow)]
    resource_pool: Field<Cow<'a, str>>,
    #[serde(borrow)]
    folder: Field<Cow<'a, str>>,
    #[serde(borrow, rename = "vmGroup")]
    vm_group: Field<Cow<'a, str>>,
}

/// The workspace's fields as strings (absent or null: empty), or which one is not.
fn workspace_fields<'w>(w: &'w Workspace<'_>) -> Result<[&'w str; 6], Outcome> {
    let mut out = [""; 6];
    for (slot, (name, field)) in out.iter_mut().zip([
        ("server", &w.server),
        ("datacenter", &w.datacenter),
        ("datastore", &w.datastore),
        ("resourcePool", &w.resource_pool),
        ("folder", &w.folder),
        ("vmGroup", &w.vm_group),
    ]) {
        *slot = match field {
            Field::Is(s) => s.as_ref(),
            Field::Absent | Field::Null => "",
            Field::Wrong(_) => {
                return Err(Outcome::skip(
                    Reason::InvalidProviderSpec,
                    format!("providerSpec.value.workspace.{name} is not a string"),
                ));
            }
        };
    }
    Ok(out)
}

/// The failure domain the workspace is placed in, matched as the MCO (and the control
/// plane machine set operator) match it: server, datacenter, datastore, VM group and the
/// path-cleaned resource pool.
fn matching<'i>(infra: &'i VSphereInfra, ws: &[&str; 6]) -> Option<&'i FailureDomain> {
    let [server, datacenter, datastore, pool, _, vm_group] = *ws;
    infra.failure_domains.iter().find(|fd| {
        fd.server == server
            && fd.datacenter == datacenter
            && fd.datastore == datastore
            && fd.vm_group == vm_group
            && clean_path(&fd.resource_pool) == clean_path(pool)
    })
}

/// The MachineSet's template moves to the versioned template of the stream's OVA in its
/// failure domain, once that template is ready in vCenter.
fn reconcile(spec: &SpecFields<'_>, target: &VSphereTarget, ctx: &Context<'_>) -> Outcome {
    let workspace = match spec.read::<Object<Workspace<'_>>>("workspace") {
        Field::Is(Object(w)) => w,
        Field::Absent | Field::Null => Workspace::default(),
        Field::Wrong(_) => {
            return Outcome::skip(
                Reason::InvalidProviderSpec,
                "providerSpec.value.workspace is not an object",
            );
        }
    };
    let ws = match workspace_fields(&workspace) {
        Ok(ws) => ws,
        Err(skip) => return skip,
    };
    let current = match spec.read::<Cow<'_, str>>("template") {
        Field::Is(t) => t.into_owned(),
        Field::Absent | Field::Null => String::new(),
        Field::Wrong(_) => {
            return Outcome::skip(
                Reason::InvalidProviderSpec,
                "providerSpec.value.template is not a string",
            );
        }
    };
    let Some(infra) = ctx.vsphere else {
        return Outcome::skip(
            Reason::NoFailureDomain,
            "Infrastructure cluster names no infrastructure id and no vSphere failure domains",
        )
        .with_current(&current);
    };
    let Some(fd) = matching(infra, &ws) else {
        let [server, datacenter, datastore, pool, _, vm_group] = ws;
        return Outcome::skip(
            Reason::NoFailureDomain,
            format!(
                "providerSpec workspace (server: {server}, datacenter: {datacenter}, datastore: {datastore}, resourcePool: {pool}, vmGroup: {vm_group}) does not match any vCenter/failure domain in the Infrastructure object"
            ),
        )
        .with_current(&current);
    };
    let exists = spec.raw("template").is_some();
    decide_template(current, exists, ws[4], infra, fd, target, ctx)
}

/// The template rule, once the failure domain is known.
fn decide_template(
    current: String,
    exists: bool,
    folder: &str,
    infra: &VSphereInfra,
    fd: &FailureDomain,
    target: &VSphereTarget,
    ctx: &Context<'_>,
) -> Outcome {
    let wanted = template_name(&infra.infra_id, &target.release, &fd.name);
    if current == wanted {
        return Outcome::UpToDate {
            current,
            target: wanted,
        };
    }
    let learned = ctx.learned.vsphere.as_deref();
    // A path names where the template lives: only the workspace folder's are ours.
    let (parent, name) = match current.rsplit_once('/') {
        Some((parent, name)) => (Some(parent), name),
        None => (None, current.as_str()),
    };
    let outside = parent.is_some_and(|p| !folder.is_empty() && clean_path(p) != clean_path(folder));
    // An empty template has nothing to keep: it gets the target.
    if outside || !(current.is_empty() || is_ours(name, &infra.infra_id, fd, learned)) {
        let why = if outside {
            format!("is outside the workspace folder {folder}")
        } else {
            "is neither the installer's nor one this webhook imports".to_owned()
        };
        return Outcome::Skip {
            reason: Reason::CustomImage,
            message: format!(
                "template {current:?} {why}: the customer's, leaving the MachineSet alone"
            ),
            current: Some(current),
            target: Some(wanted),
        };
    }
    if !learned.is_some_and(|l| l.is_ready(&fd.name, &wanted)) {
        let why = match learned {
            Some(l) => l
                .unavailable
                .as_deref()
                .map(|u| format!(" ({u})"))
                .unwrap_or_default(),
            None => " (no importer has reported here)".to_owned(),
        };
        return Outcome::Skip {
            reason: Reason::TemplateNotImported,
            message: format!(
                "template {wanted} (RHCOS {}) is not imported in failure domain {} yet{why}: the MachineSet moves once it is",
                target.release, fd.name
            ),
            current: Some(current),
            target: Some(wanted),
        };
    }
    Outcome::Changes {
        edits: vec![Edit {
            pointer: "/template".into(),
            exists,
            value: Value::String(wanted.clone()),
        }],
        current,
        target: wanted,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_within_eighty_characters() {
        assert_eq!(
            template_name("ci-ln-abc12-xyz9q", "9.8.20260428-0", "us-east-1a"),
            "ci-ln-abc12-xyz9q-rhcos-9.8.20260428-0-us-east-1a"
        );
        let long_fd = "a-failure-domain-whose-name-is-very-long-indeed-and-goes-on";
        let a = template_name("ci-ln-abc12-xyz9q", "9.8.20260428-0", long_fd);
        let b = template_name(
            "ci-ln-abc12-xyz9q",
            "9.8.20260428-0",
            &format!("{long_fd}-2"),
        );
        assert_eq!(a.chars().count(), MAX_NAME_CHARS);
        assert_eq!(
            a,
            template_name("ci-ln-abc12-xyz9q", "9.8.20260428-0", long_fd)
        );
        assert_ne!(a, b);
        assert!(a.starts_with("ci-ln-abc12-xyz9q-rhcos-9.8.20260428-0-a-failure"));
        // Exactly eighty is left as it is.
        let eighty = "x".repeat(MAX_NAME_CHARS);
        assert_eq!(shorten(&eighty), eighty);
        // Multi-byte characters are counted as characters and never split.
        let wide = template_name("é".repeat(70).as_str(), "9.8.20260428-0", "fd");
        assert_eq!(wide.chars().count(), MAX_NAME_CHARS);
    }

    fn fd(name: &str) -> FailureDomain {
        FailureDomain {
            name: name.into(),
            region: "us-east".into(),
            zone: name.into(),
            ..FailureDomain::default()
        }
    }

    #[test]
    fn our_names_read_back_exactly() {
        let infra = "ci-ln-abc12-xyz9q";
        let fds = [fd("us-east-1a"), fd("f".repeat(70).as_str()), fd("a-b")];
        for domain in &fds {
            for release in ["9.8.20260428-0", "418.94.202511191518-0"] {
                let name = template_name(infra, release, &domain.name);
                let parsed = TemplateName::parse(&name, infra, &fds);
                assert_eq!(
                    parsed,
                    Some(TemplateName {
                        infra_id: infra,
                        release,
                        failure_domain: &domain.name
                    }),
                    "{name}"
                );
            }
        }
    }

    #[test]
    fn names_that_merely_look_like_ours_are_not() {
        let infra = "ci-ln-abc12-xyz9q";
        let fds = [fd("us-east-1a"), fd(&"f".repeat(70))];
        let ours = template_name(infra, "9.8.20260428-0", "us-east-1a");
        let long = template_name(infra, "9.8.20260428-0", &"g".repeat(70));
        let mut forged_hash = template_name(infra, "9.8.20260428-0", &"f".repeat(70));
        let end = forged_hash.len();
        forged_hash.replace_range(end - 8.., "00000000");
        let not_ours = [
            // A customer's golden image, the release part any string starting with a digit.
            format!("{infra}-rhcos-4.16-golden-us-east-1a"),
            format!("{infra}-rhcos-9.8-us-east-1a"),
            format!("{infra}-rhcos-9.8.20260428-0-us-east-1a-copy"),
            format!("{infra}-rhcos-9.8.20260428-0-us-west-2a"),
            "other-rhcos-9.8.20260428-0-us-east-1a".to_owned(),
            format!("{ours}x"),
            // The installer's and the MCO's names.
            format!("{infra}-rhcos-us-east-us-east-1a"),
            format!("{infra}-rhcos-us-east-1a"),
            format!("{infra}-rhcos"),
            "mco-tmp-1a2b3c4d".into(),
            "my-golden-rhcos".into(),
            // A shortened name for a failure domain the cluster does not have, or whose hash
            // is not the name's.
            long,
            forged_hash,
        ];
        for name in &not_ours {
            assert_eq!(TemplateName::parse(name, infra, &fds), None, "{name}");
        }
        assert!(TemplateName::parse(&ours, infra, &fds).is_some());
    }

    #[test]
    fn paths_are_cleaned_as_go_does() {
        assert_eq!(
            clean_path("/dc1/host/cluster1/Resources/"),
            "/dc1/host/cluster1/Resources"
        );
        assert_eq!(clean_path("//dc1//vm/./f"), "/dc1/vm/f");
        assert_eq!(clean_path("dc1/vm"), "dc1/vm");
    }
}
