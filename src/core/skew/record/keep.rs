//! The rule of `skew keep`, the opt-in keeper of the Manual record: whether to write
//! `spec.bootImageSkewEnforcement` of MachineConfiguration `cluster`, and what. Pure: the
//! keeper brings the object and the proposal `skew record` would make.
//!
//! The keeper writes only in Manual mode (the administrator's, or the one the MCO chose
//! itself when `spec` sets none), and never over `None`, `Automatic` or a record another
//! field manager wrote, unless the administrator lets it take that over.

use std::cmp::Ordering;

use serde_json::Value;

use super::{
    FIELD_MANAGER, Manual, ManualMode, Proposal, Refusal, compare, mco_manages, mcos_own_record,
    recorded,
};
use crate::core::skew::Version;

/// The field manager of the keeper's writes.
pub const KEEPER_FIELD_MANAGER: &str = "bootimage-webhook-skew-record-keeper";

/// The field managers whose records the keeper keeps without being told to: its own, and
/// `skew record --apply`'s (the same rule, run by hand).
const OURS: [&str; 2] = [KEEPER_FIELD_MANAGER, FIELD_MANAGER];

/// What the administrator lets the keeper take over (`--take-over`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TakeOver {
    /// Enforcement turned off: mode `None`, in `spec` or chosen by the MCO.
    pub none: bool,
    /// The MCO's `Automatic` mode, or MachineSets whose boot images it manages.
    pub automatic: bool,
    /// A Manual record another field manager wrote.
    pub others: bool,
}

/// What the keeper does on a pass.
#[derive(Debug, Clone, PartialEq)]
pub enum Keep {
    /// The record already names the oldest boot image in use.
    Current(String),
    /// Write `manual` (its merge patch); `before` says what it replaces.
    Write { manual: Manual, before: String },
    /// Nothing is written.
    Leave(Leave),
}

/// Why the keeper writes nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Leave {
    #[error("MachineConfiguration cluster not found: there is nothing to keep")]
    NoMachineConfiguration,
    #[error(
        "the MCO reports no skew enforcement mode yet (status.bootImageSkewEnforcementStatus): nothing to keep until it chooses one"
    )]
    NoMode,
    #[error(
        "skew enforcement is turned off (mode None, {0}): the keeper does not turn it back on (--take-over=none lets it)"
    )]
    NotEnforced(&'static str),
    #[error(
        "the MCO keeps the record itself ({0}): a Manual record would stop it (--take-over=automatic lets the keeper take it over)"
    )]
    Automatic(&'static str),
    #[error(
        "the Manual record {record} was written by field manager {manager:?}, not by the keeper: it is left as it is (--take-over=others lets the keeper keep it)"
    )]
    OthersRecord { record: String, manager: String },
    #[error("the version to record cannot be told: {0}")]
    CannotTell(Refusal),
}

/// The keeper's pass on `mc` (MachineConfiguration `cluster`), with what `skew record`
/// proposes from the MachineSets (`oldest`: the version the proposal was read from).
pub fn keep(
    mc: Option<&Value>,
    proposal: &Result<Proposal, Refusal>,
    oldest: Option<&Version>,
    take_over: TakeOver,
) -> Keep {
    let Some(mc) = mc else {
        return Keep::Leave(Leave::NoMachineConfiguration);
    };
    let (record, before) = match mode_allows(mc, take_over) {
        Ok(found) => found,
        Err(leave) => return Keep::Leave(leave),
    };
    let proposal = match proposal {
        Ok(p) => p,
        Err(why) => return Keep::Leave(Leave::CannotTell(why.clone())),
    };
    let current = match (&record, oldest) {
        (Some(r), Some(o)) => compare(r, &proposal.manual, o) == Some(Ordering::Equal),
        _ => false,
    };
    if current {
        return Keep::Current(before);
    }
    Keep::Write {
        manual: proposal.manual.clone(),
        before,
    }
}

/// Whether the mode lets the keeper write: the record it would replace (`None`: none
/// readable) and, in words, where it stands now.
fn mode_allows(mc: &Value, take_over: TakeOver) -> Result<(Option<Manual>, String), Leave> {
    let spec_mode = mc
        .pointer("/spec/bootImageSkewEnforcement/mode")
        .and_then(Value::as_str);
    let status_mode = mc
        .pointer("/status/bootImageSkewEnforcementStatus/mode")
        .and_then(Value::as_str)
        .filter(|m| !m.is_empty());
    match spec_mode {
        Some("None") if !take_over.none => return Err(Leave::NotEnforced("spec")),
        Some("Manual") => {
            let record = recorded(mc);
            let words = record
                .as_ref()
                .map_or_else(|| "an unreadable Manual record".into(), |r| r.to_string());
            if let Some(manager) = other_manager(mc, record.as_ref()).filter(|_| !take_over.others)
            {
                return Err(Leave::OthersRecord {
                    record: words,
                    manager,
                });
            }
            return Ok((record, format!("spec {words}")));
        }
        Some(mode) => return Ok((None, format!("spec mode {mode}"))),
        None => {}
    }
    if mco_manages(mc) && !take_over.automatic {
        return Err(Leave::Automatic("it manages the MachineSets' boot images"));
    }
    match status_mode {
        None => Err(Leave::NoMode),
        Some("Automatic") if !take_over.automatic => Err(Leave::Automatic("mode Automatic")),
        Some("None") if !take_over.none => Err(Leave::NotEnforced("chosen by the MCO")),
        Some(mode) => {
            let record = mcos_own_record(mc);
            let words = record
                .as_ref()
                .map_or_else(|| format!("mode {mode}"), |r| r.to_string());
            Ok((record, format!("the MCO's own {words}")))
        }
    }
}

/// Whether Manual enforcement's record (the spec's, else the one the MCO chose itself) is
/// not the oldest boot image in use: the record is due, whoever keeps it. False outside
/// Manual mode, where the MCO manages the MachineSets' boot images, and where the version
/// in use cannot be told.
pub fn due(
    mc: Option<&Value>,
    proposal: &Result<Proposal, Refusal>,
    oldest: Option<&Version>,
) -> bool {
    let Some(mc) = mc else {
        return false;
    };
    let record = match mc
        .pointer("/spec/bootImageSkewEnforcement/mode")
        .and_then(Value::as_str)
    {
        Some("Manual") => recorded(mc),
        Some(_) => return false,
        None => match mcos_own_record(mc) {
            Some(r) => Some(r),
            None => return false,
        },
    };
    match (proposal, oldest, record) {
        (Ok(p), Some(o), Some(r)) => compare(&r, &p.manual, o) != Some(Ordering::Equal),
        (Ok(_), Some(_), None) => true,
        _ => false,
    }
}

/// A field manager other than ours that owns the recorded version (`managedFields`): the
/// record is then someone else's. Only the version field counts: an unchanged `mode`
/// stays with whoever wrote it first.
fn other_manager(mc: &Value, record: Option<&Manual>) -> Option<String> {
    const MANUAL: &str = "/fieldsV1/f:spec/f:bootImageSkewEnforcement/f:manual";
    let pointer = match record.map(|r| r.mode) {
        Some(ManualMode::RhcosVersion) => format!("{MANUAL}/f:rhcosVersion"),
        Some(ManualMode::OcpVersion) => format!("{MANUAL}/f:ocpVersion"),
        None => MANUAL.to_owned(),
    };
    mc.pointer("/metadata/managedFields")?
        .as_array()?
        .iter()
        .filter(|entry| entry.pointer(&pointer).is_some())
        .filter_map(|entry| entry["manager"].as_str())
        .find(|manager| !OURS.contains(manager))
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::core::skew::record::propose;
    use crate::core::skew::survey;
    use crate::core::snapshot::Learned;

    const LEGACY: &str =
        "projects/rhcos-cloud/global/images/rhcos-416-94-202405291527-0-gcp-x86-64";
    const CURRENT: &str = "projects/rhcos-cloud/global/images/rhcos-9-8-20260428-0-gcp-x86-64";

    /// The pass over MachineSets naming `images`.
    fn pass(mc: &Value, images: &[&str], take_over: TakeOver) -> Keep {
        let s = survey(
            images
                .iter()
                .enumerate()
                .map(|(i, image)| (format!("ns/ms-{i}"), Some(*image))),
            None,
            &Learned::default(),
        );
        let oldest = s.oldest.as_ref().map(|(_, _, v)| v.clone());
        keep(Some(mc), &propose(&s), oldest.as_ref(), take_over)
    }

    /// As the 4.22 MCO leaves it where it does not manage the boot images: no spec, Manual
    /// with the install release.
    fn mcos_own_manual() -> Value {
        json!({"spec": {"managementState": "Managed"},
               "status": {"managedBootImagesStatus": {},
                          "bootImageSkewEnforcementStatus": {"mode": "Manual",
                              "manual": {"mode": "OCPVersion", "ocpVersion": "4.16.0"}}}})
    }

    fn written_by(manager: &str, version: &str) -> Value {
        json!({"metadata": {"managedFields": [{"manager": manager, "operation": "Update",
                   "fieldsV1": {"f:spec": {"f:bootImageSkewEnforcement": {"f:manual": {
                       "f:mode": {}, "f:rhcosVersion": {}}, "f:mode": {}}}}}]},
               "spec": {"bootImageSkewEnforcement": {"mode": "Manual",
                   "manual": {"mode": "RHCOSVersion", "rhcosVersion": version}}},
               "status": {"bootImageSkewEnforcementStatus": {"mode": "Manual",
                   "manual": {"mode": "RHCOSVersion", "rhcosVersion": version}}}})
    }

    fn rhcos(v: &str) -> Manual {
        Manual {
            mode: ManualMode::RhcosVersion,
            version: v.into(),
        }
    }

    #[test]
    fn the_mcos_own_manual_record_is_kept_once_the_machinesets_move() {
        let mc = mcos_own_manual();
        // One MachineSet still boots the install image: the install release is right.
        assert!(matches!(
            pass(&mc, &[CURRENT, LEGACY], TakeOver::default()),
            Keep::Current(_)
        ));
        // All moved: the record is due, and the oldest in use is written.
        match pass(&mc, &[CURRENT, CURRENT], TakeOver::default()) {
            Keep::Write { manual, before } => {
                assert_eq!(manual, rhcos("9.8.20260428-0"));
                assert!(
                    before.contains("OCPVersion, ocpVersion: 4.16.0"),
                    "{before}"
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn its_own_record_is_kept_and_anyone_elses_left_unless_taken_over() {
        let ours = written_by(KEEPER_FIELD_MANAGER, "416.94.202405291527-0");
        assert!(matches!(
            pass(&ours, &[CURRENT], TakeOver::default()),
            Keep::Write { .. }
        ));
        assert!(matches!(
            pass(&ours, &[LEGACY], TakeOver::default()),
            Keep::Current(_)
        ));
        let by_hand = written_by(FIELD_MANAGER, "416.94.202405291527-0");
        assert!(matches!(
            pass(&by_hand, &[CURRENT], TakeOver::default()),
            Keep::Write { .. }
        ));
        let theirs = written_by("kubectl-patch", "416.94.202405291527-0");
        match pass(&theirs, &[CURRENT], TakeOver::default()) {
            Keep::Leave(leave @ Leave::OthersRecord { .. }) => {
                let words = leave.to_string();
                assert!(
                    words.contains("\"kubectl-patch\"") && words.contains("--take-over=others"),
                    "{words}"
                );
            }
            other => panic!("{other:?}"),
        }
        let others = TakeOver {
            others: true,
            ..TakeOver::default()
        };
        assert!(matches!(
            pass(&theirs, &[CURRENT], others),
            Keep::Write { .. }
        ));
    }

    #[test]
    fn none_and_automatic_are_left_unless_taken_over() {
        let spec_none = json!({"spec": {"bootImageSkewEnforcement": {"mode": "None"}},
                               "status": {"bootImageSkewEnforcementStatus": {"mode": "None"}}});
        let mco_none = json!({"status": {"bootImageSkewEnforcementStatus": {"mode": "None"}}});
        let automatic = json!({"status": {"bootImageSkewEnforcementStatus": {"mode": "Automatic",
            "automatic": {"ocpVersion": "4.16.0"}}}});
        let managed = json!({"status": {"managedBootImagesStatus": {"machineManagers": [
            {"resource": "machinesets", "apiGroup": "machine.openshift.io", "selection": {"mode": "All"}}]},
            "bootImageSkewEnforcementStatus": {"mode": "Manual",
                "manual": {"mode": "OCPVersion", "ocpVersion": "4.16.0"}}}});
        let none = TakeOver {
            none: true,
            ..TakeOver::default()
        };
        let auto = TakeOver {
            automatic: true,
            ..TakeOver::default()
        };
        for (mc, leave, allowed) in [
            (&spec_none, Leave::NotEnforced("spec"), none),
            (&mco_none, Leave::NotEnforced("chosen by the MCO"), none),
            (&automatic, Leave::Automatic("mode Automatic"), auto),
            (
                &managed,
                Leave::Automatic("it manages the MachineSets' boot images"),
                auto,
            ),
        ] {
            assert_eq!(
                pass(mc, &[CURRENT], TakeOver::default()),
                Keep::Leave(leave),
                "{mc}"
            );
            assert!(
                matches!(pass(mc, &[CURRENT], allowed), Keep::Write { .. }),
                "{mc}"
            );
        }
    }

    /// What the webhook's gauge says: due in Manual mode when the record (whoever wrote
    /// it) is not the oldest in use; never outside Manual mode.
    #[test]
    fn the_record_is_due_in_manual_mode_whoever_keeps_it() {
        let is_due = |mc: &Value, images: &[&str]| {
            let s = survey(
                images.iter().map(|i| ("ms".to_owned(), Some(*i))),
                None,
                &Learned::default(),
            );
            let oldest = s.oldest.as_ref().map(|(_, _, v)| v.clone());
            due(Some(mc), &propose(&s), oldest.as_ref())
        };
        let by_hand = written_by("kubectl-patch", "416.94.202405291527-0");
        assert!(!is_due(&by_hand, &[LEGACY, CURRENT]));
        assert!(is_due(&by_hand, &[CURRENT]));
        assert!(!is_due(&mcos_own_manual(), &[LEGACY]));
        assert!(is_due(&mcos_own_manual(), &[CURRENT]));
        let off = json!({"spec": {"bootImageSkewEnforcement": {"mode": "None"}}});
        let automatic =
            json!({"status": {"bootImageSkewEnforcementStatus": {"mode": "Automatic"}}});
        for mc in [off, automatic, json!({})] {
            assert!(!is_due(&mc, &[CURRENT]), "{mc}");
        }
        // A version that cannot be told is not called due.
        assert!(!is_due(
            &mcos_own_manual(),
            &["projects/my-project/global/images/custom"]
        ));
    }

    #[test]
    fn nothing_is_written_without_a_mode_an_object_or_a_version() {
        let no_mode = json!({"status": {"managedBootImagesStatus": {}}});
        assert_eq!(
            pass(&no_mode, &[CURRENT], TakeOver::default()),
            Keep::Leave(Leave::NoMode)
        );
        let none: Result<Proposal, Refusal> = Err(Refusal::NoMachineSets);
        assert_eq!(
            keep(None, &none, None, TakeOver::default()),
            Keep::Leave(Leave::NoMachineConfiguration)
        );
        assert_eq!(
            keep(Some(&mcos_own_manual()), &none, None, TakeOver::default()),
            Keep::Leave(Leave::CannotTell(Refusal::NoMachineSets))
        );
    }
}
