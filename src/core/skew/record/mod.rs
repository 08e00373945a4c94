//! What Manual skew enforcement needs recorded on MachineConfiguration `cluster`
//! (`spec.bootImageSkewEnforcement`), from the oldest boot image in use: which field, the
//! merge patch, whether `status` should say to record it again, and why it cannot be
//! recorded or should not be written. Pure: the callers bring the survey and the object.
//!
//! The field's rules are the CRD's (openshift/api `operator/v1`, `BootImageSkewEnforcement`):
//! `rhcosVersion` and `ocpVersion` each have a pattern and a length (the constants below),
//! and each is required by its `mode` and forbidden otherwise.

use std::cmp::Ordering;
use std::fmt;
use std::sync::LazyLock;

use regex::Regex;
use serde::{Serialize, Serializer};
use serde_json::{Value, json};

use super::{Release, Source, Survey, Token, Version, from_release, generic, rhel_of_release};

mod keep;
pub use keep::{KEEPER_FIELD_MANAGER, Keep, TakeOver, due, keep};

/// The field manager of `skew record --apply`'s write.
pub const FIELD_MANAGER: &str = "bootimage-webhook-skew-record";

const RHCOS_LENGTH: std::ops::RangeInclusive<usize> = 14..=21;
const OCP_LENGTH: std::ops::RangeInclusive<usize> = 5..=10;

/// The first OpenShift release whose MCO enforces boot image skew.
const ENFORCING_RELEASE: [u64; 3] = [4, 22, 0];

static RHCOS_RULE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^[0-9]+\.[0-9]+\.([0-9]{8}|[0-9]{12})-[0-9]+$").expect("a constant pattern")
});
static OCP_RULE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[0-9]+\.[0-9]+\.[0-9]+$").expect("a constant pattern"));

/// `spec.bootImageSkewEnforcement.manual.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ManualMode {
    #[serde(rename = "RHCOSVersion")]
    RhcosVersion,
    #[serde(rename = "OCPVersion")]
    OcpVersion,
}

impl ManualMode {
    /// The mode's name and the field it requires.
    fn names(self) -> (&'static str, &'static str) {
        match self {
            ManualMode::RhcosVersion => ("RHCOSVersion", "rhcosVersion"),
            ManualMode::OcpVersion => ("OCPVersion", "ocpVersion"),
        }
    }
}

/// `spec.bootImageSkewEnforcement.manual`: a mode and the version its field holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manual {
    pub mode: ManualMode,
    pub version: String,
}

impl Manual {
    /// As the API writes it: `{"mode": "RHCOSVersion", "rhcosVersion": "9.6.20250826-1"}`.
    pub fn api(&self) -> Value {
        let (mode, field) = self.mode.names();
        json!({"mode": mode, field: self.version})
    }

    /// The merge patch that records it. The other mode's field is removed: the CRD forbids
    /// it beside this mode, and a merge patch would otherwise keep it.
    pub fn merge_patch(&self) -> Value {
        let (mode, field) = self.mode.names();
        let other = match self.mode {
            ManualMode::RhcosVersion => "ocpVersion",
            ManualMode::OcpVersion => "rhcosVersion",
        };
        json!({"spec": {"bootImageSkewEnforcement": {"mode": "Manual",
            "manual": {"mode": mode, field: self.version, other: null}}}})
    }
}

impl Serialize for Manual {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.api().serialize(s)
    }
}

impl fmt::Display for Manual {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (mode, field) = self.mode.names();
        write!(
            f,
            "{{mode: Manual, manual: {{mode: {mode}, {field}: {}}}}}",
            self.version
        )
    }
}

/// `oc patch` of MachineConfiguration `cluster` with `patch`, quoted for a POSIX shell.
pub fn oc_command(patch: &Value) -> String {
    let quoted = patch.to_string().replace('\'', r"'\''");
    format!("oc patch machineconfiguration cluster --type merge -p '{quoted}'")
}

/// What `skew record` would write, and where its version was read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Proposal {
    pub manual: Manual,
    /// `namespace/name` of the MachineSet with the oldest boot image.
    pub machine_set: String,
    pub image: String,
    pub source: Source,
    /// How the version was had, in words.
    pub how: String,
}

/// Why no version can be recorded, or why it should not be written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error(
        "no MachineSets to read a boot image from: nothing tells which version to record (record one by hand, or set mode None)"
    )]
    NoMachineSets,
    #[error(
        "the boot image version of {} is unknown (a custom image, an AMI EC2 was not asked about, or no image named): the oldest boot image in use cannot be told; move it to an image of known version, or record one by hand",
        .0.join(", ")
    )]
    Unknown(Vec<String>),
    #[error(
        "{field} {value:?} of {machine_set}'s image would be refused by the MachineConfiguration CRD: {why}"
    )]
    Rejected {
        machine_set: String,
        field: &'static str,
        value: String,
        why: String,
    },
    #[error(
        "{machine_set}'s image {image} belongs to OpenShift {release}{rhcos}: no one version to record (the CRD takes an RHCOS version with its build number, or one OpenShift release)"
    )]
    NoOneVersion {
        machine_set: String,
        image: String,
        release: String,
        rhcos: String,
    },
    #[error("MachineConfiguration cluster not found: there is nothing to record the version on")]
    NoMachineConfiguration,
    #[error(
        "MachineConfiguration cluster's skew enforcement is Automatic: the MCO records the version itself after each boot image update; recording one switches it to Manual, which must then be recorded again by hand after every update (give --force to do so all the same)"
    )]
    Automatic,
    #[error(
        "the MCO manages the MachineSets' boot images (managedBootImagesStatus: machinesets All), so its skew enforcement is Automatic; recording a version switches it to Manual, which must then be recorded again by hand after every update (give --force to do so all the same)"
    )]
    ManagedByMco,
    #[error(
        "MachineConfiguration cluster sets skew enforcement mode None: recording a version turns enforcement back on (give --force to do so)"
    )]
    NotEnforced,
}

/// Whether `value` passes the CRD's rules for `rhcosVersion`.
pub fn rhcos_rule(value: &str) -> Result<(), String> {
    if !RHCOS_LENGTH.contains(&value.len()) {
        return Err(format!(
            "it must be {} to {} characters long",
            RHCOS_LENGTH.start(),
            RHCOS_LENGTH.end()
        ));
    }
    RHCOS_RULE.is_match(value).then_some(()).ok_or_else(|| {
        "it must match [major].[minor].[datestamp(YYYYMMDD)]-[buildnumber] or [major].[minor].[timestamp(YYYYMMDDHHmm)]-[buildnumber]".to_owned()
    })
}

/// Whether `value` passes the CRD's rules for `ocpVersion`.
pub fn ocp_rule(value: &str) -> Result<(), String> {
    if !OCP_LENGTH.contains(&value.len()) {
        return Err(format!(
            "it must be {} to {} characters long",
            OCP_LENGTH.start(),
            OCP_LENGTH.end()
        ));
    }
    OCP_RULE
        .is_match(value)
        .then_some(())
        .ok_or_else(|| "it must match the format x.y.z".to_owned())
}

/// The field that records `v` (the oldest image, on `machine_set`): its RHCOS version when
/// the CRD takes it as written, else its one OpenShift release, as `x.y.0`: the image
/// names only the minor, and its first release is never newer than the image.
pub fn choose(v: &Version, machine_set: &str, image: &str) -> Result<Manual, Refusal> {
    let rejected = |field, value: &str, why| Refusal::Rejected {
        machine_set: machine_set.to_owned(),
        field,
        value: value.to_owned(),
        why,
    };
    let rhcos = match &v.rhcos {
        Some(r) => match rhcos_rule(r) {
            Ok(()) => {
                return Ok(Manual {
                    mode: ManualMode::RhcosVersion,
                    version: r.clone(),
                });
            }
            Err(why) => Some((r, why)),
        },
        None => None,
    };
    match v.release {
        Some(Release::Exact((a, b))) => {
            let version = format!("{a}.{b}.0");
            ocp_rule(&version).map_err(|why| rejected("ocpVersion", &version, why))?;
            Ok(Manual {
                mode: ManualMode::OcpVersion,
                version,
            })
        }
        Some(release @ Release::Between(..)) => Err(Refusal::NoOneVersion {
            machine_set: machine_set.to_owned(),
            image: image.to_owned(),
            release: release.to_string(),
            rhcos: rhcos
                .map(|(r, why)| {
                    format!(" and its RHCOS version {r} is not one the CRD takes ({why})")
                })
                .unwrap_or_default(),
        }),
        None => Err(match rhcos {
            Some((r, why)) => rejected("rhcosVersion", r, why),
            None => rejected("ocpVersion", "", "its OpenShift release is unknown".into()),
        }),
    }
}

/// What `skew record` would write for `survey`: refused when there is no MachineSet, or
/// when any has a boot image of unknown version (the oldest could be that one).
pub fn propose(survey: &Survey) -> Result<Proposal, Refusal> {
    if survey.count == 0 {
        return Err(Refusal::NoMachineSets);
    }
    if !survey.unknown.is_empty() {
        return Err(Refusal::Unknown(survey.unknown.clone()));
    }
    let Some((who, image, v)) = &survey.oldest else {
        return Err(Refusal::NoMachineSets);
    };
    let manual = choose(v, who, image)?;
    let how = match manual.mode {
        ManualMode::RhcosVersion => format!("RHCOS {}, read from {}", manual.version, v.source),
        ManualMode::OcpVersion => format!(
            "OpenShift {}, read from {} (the image tells the minor only: its first release is recorded)",
            v.release.map(|r| r.to_string()).unwrap_or_default(),
            v.source
        ),
    };
    Ok(Proposal {
        manual,
        machine_set: who.clone(),
        image: image.clone(),
        source: v.source,
        how,
    })
}

fn spec_enforcement(mc: &Value) -> Option<&Value> {
    mc.pointer("/spec/bootImageSkewEnforcement")
        .filter(|v| !v.is_null())
}

/// The version the administrator recorded: `spec.bootImageSkewEnforcement.manual` when its
/// mode is `Manual`.
pub fn recorded(mc: &Value) -> Option<Manual> {
    let spec = spec_enforcement(mc)?;
    if spec["mode"] != "Manual" {
        return None;
    }
    manual_of(&spec["manual"])
}

/// The Manual record the MCO chose itself (`status.bootImageSkewEnforcementStatus.manual`)
/// where `spec` sets no mode and the MCO does not manage the MachineSets' boot images: on
/// 4.22, the install release.
pub fn mcos_own_record(mc: &Value) -> Option<Manual> {
    if spec_enforcement(mc).is_some() || mco_manages(mc) {
        return None;
    }
    let status = mc.pointer("/status/bootImageSkewEnforcementStatus")?;
    if status["mode"] != "Manual" {
        return None;
    }
    manual_of(&status["manual"])
}

/// A `manual` object: its mode and the version its field holds.
fn manual_of(manual: &Value) -> Option<Manual> {
    let (mode, field) = match manual["mode"].as_str()? {
        "RHCOSVersion" => (ManualMode::RhcosVersion, "rhcosVersion"),
        "OCPVersion" => (ManualMode::OcpVersion, "ocpVersion"),
        _ => return None,
    };
    Some(Manual {
        mode,
        version: manual[field].as_str()?.to_owned(),
    })
}

/// Whether the MCO manages every MachineSet's boot image (its status says `All`).
pub fn mco_manages(mc: &Value) -> bool {
    mc.pointer("/status/managedBootImagesStatus/machineManagers")
        .and_then(Value::as_array)
        .is_some_and(|managers| {
            managers.iter().any(|m| {
                m["resource"] == "machinesets"
                    && m["apiGroup"] == "machine.openshift.io"
                    && m["selection"]["mode"] == "All"
            })
        })
}

/// Why `--apply` should not write without `--force`: no object, an enforcement the MCO
/// runs itself (Automatic, or boot images it manages), or enforcement turned off.
pub fn guard(mc: Option<&Value>, force: bool) -> Result<(), Refusal> {
    let mc = mc.ok_or(Refusal::NoMachineConfiguration)?;
    if force {
        return Ok(());
    }
    if spec_enforcement(mc).is_some_and(|s| s["mode"] == "None") {
        return Err(Refusal::NotEnforced);
    }
    if recorded(mc).is_some() {
        return Ok(());
    }
    if mc.pointer("/status/bootImageSkewEnforcementStatus/mode") == Some(&json!("Automatic")) {
        return Err(Refusal::Automatic);
    }
    if mco_manages(mc) {
        return Err(Refusal::ManagedByMco);
    }
    Ok(())
}

/// Where the recorded version stands against the oldest boot image in use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum AdviceState {
    /// The record is what `skew record` would write.
    Current,
    /// Older than the oldest in use: the MCO may refuse an upgrade it need not.
    Older,
    /// Newer than the oldest in use: the MCO does not see the oldest image.
    Newer,
    /// Another version, neither older nor newer as far as can be told.
    Differs,
    /// Manual, but the version in use cannot be told.
    CannotTell,
    /// No mode chosen where the MCO needs one before it allows an upgrade.
    ChooseMode,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Advice {
    pub state: AdviceState,
    pub message: String,
}

/// The command `status` suggests.
pub const COMMAND: &str = "bootimage-webhook skew record";

/// What `status` says of the record: only in Manual mode (the recorded version, or with no
/// `spec` the one the MCO chose itself, against what `skew record` would write), or when a
/// release that enforces skew reports no mode on a platform whose boot images the MCO does
/// not manage. `release`: the ConfigMap's.
pub fn advise(
    proposal: &Result<Proposal, Refusal>,
    oldest: Option<&Version>,
    mc: Option<&Value>,
    release: Option<&str>,
) -> Option<Advice> {
    let mc = mc?;
    let (recorded, whose) = match (recorded(mc), mcos_own_record(mc)) {
        (Some(r), _) => (r, "recorded"),
        (None, Some(r)) => (r, "the MCO's own record (the install release)"),
        (None, None) => return choose_mode(mc, release),
    };
    let (proposal, oldest) = match (proposal, oldest) {
        (Ok(p), Some(o)) => (p, o),
        (Err(why), _) => {
            let message =
                format!("{whose} {recorded}; the version to record cannot be told: {why}");
            return Some(Advice {
                state: AdviceState::CannotTell,
                message,
            });
        }
        (Ok(_), None) => return None,
    };
    let (a, b) = (recorded.mode.names().1, &recorded.version);
    let now = format!(
        "{} {}",
        proposal.manual.mode.names().1,
        proposal.manual.version
    );
    let run = format!("run `{COMMAND}` to record {now}");
    let (state, message) = match compare(&recorded, &proposal.manual, oldest) {
        Some(Ordering::Equal) => (
            AdviceState::Current,
            format!("{whose} {a} {b} is the oldest boot image in use: nothing to record"),
        ),
        Some(Ordering::Less) => (
            AdviceState::Older,
            format!("{whose} {a} {b} is older than the oldest boot image in use; {run}"),
        ),
        Some(Ordering::Greater) => (
            AdviceState::Newer,
            format!(
                "{whose} {a} {b} is newer than the oldest boot image in use, which the MCO then does not see; {run}"
            ),
        ),
        None => (
            AdviceState::Differs,
            format!("{whose} {a} {b} is not the oldest boot image in use; {run}"),
        ),
    };
    Some(Advice { state, message })
}

/// No mode chosen on a release that enforces skew, where the MCO does not manage the
/// boot images (it would choose Automatic itself).
fn choose_mode(mc: &Value, release: Option<&str>) -> Option<Advice> {
    if spec_enforcement(mc).is_some() || mco_manages(mc) {
        return None;
    }
    let status = mc.pointer("/status/bootImageSkewEnforcementStatus/mode");
    if status
        .and_then(Value::as_str)
        .is_some_and(|m| !m.is_empty())
    {
        return None;
    }
    let release = release.and_then(generic)?;
    (release >= ENFORCING_RELEASE.to_vec()).then(|| Advice {
        state: AdviceState::ChooseMode,
        message: format!(
            "no skew enforcement mode chosen, and the MCO reports none yet: from OpenShift 4.22 it chooses one itself (Manual from the install release where it does not manage all MachineSets' boot images, None on single-node and on bare metal installed by machine-os-images) and refuses no upgrade until it has; run `{COMMAND}` to choose Manual with the oldest boot image in use now (or set mode None)"
        ),
    })
}

/// `recorded` against the version `skew record` would write (`proposed`, of `oldest`):
/// equal when the same, else by RHEL, then OpenShift release, then build date where both
/// are known; `None` when they cannot be compared.
fn compare(recorded: &Manual, proposed: &Manual, oldest: &Version) -> Option<Ordering> {
    if recorded == proposed {
        return Some(Ordering::Equal);
    }
    let r = as_version(recorded)?;
    let first = |v: &Version| v.release.map(Release::first);
    let by_release = match (first(&r), first(oldest)) {
        (Some(a), Some(b)) => a.cmp(&b),
        _ => Ordering::Equal,
    };
    let by_rhel = match recorded.mode {
        // An OpenShift release may have two RHELs: its own is not told.
        ManualMode::OcpVersion if rhel_of_release(first(&r)?).is_none() => Ordering::Equal,
        _ => r.rhel.cmp(&oldest.rhel),
    };
    let by_build = match (r.built, oldest.built) {
        (Some(a), Some(b)) => a.cmp(&b),
        _ => Ordering::Equal,
    };
    let order = by_rhel.then(by_release).then(by_build);
    // The same release recorded by OpenShift version is as good as the RHCOS one.
    match (order, recorded.mode, proposed.mode) {
        (Ordering::Equal, ManualMode::RhcosVersion, ManualMode::RhcosVersion) => None,
        (order, _, _) => Some(order),
    }
}

/// A recorded version read as the skew rules read an image's.
fn as_version(m: &Manual) -> Option<Version> {
    match m.mode {
        ManualMode::RhcosVersion => from_release(&m.version, Source::Name),
        ManualMode::OcpVersion => {
            let parts = generic(&m.version)?;
            let release: Token = (*parts.first()?, *parts.get(1)?);
            Some(Version {
                rhcos: None,
                rhel: rhel_of_release(release).unwrap_or((0, 0)),
                release: Some(Release::Exact(release)),
                built: None,
                source: Source::Name,
            })
        }
    }
}

#[cfg(test)]
mod tests;
