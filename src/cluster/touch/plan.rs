//! Which MachineSets a pass touches, and what it counts (behaviour §7): the webhook's own
//! decision over a list. Pure: no I/O.

use std::collections::BTreeMap;

use k8s_openapi::jiff::civil::Date;
use serde_json::Value;

use crate::core::age;
use crate::core::decision::{self, Reason};
use crate::core::platforms;
use crate::core::skew;
use crate::core::snapshot::Snapshot;

/// A MachineSet the webhook would change now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned {
    /// `MachineSet`, or `ControlPlaneMachineSet`.
    pub kind: String,
    pub name: String,
    pub uid: String,
    pub current: String,
    pub target: String,
}

/// The same decision as the webhook, over a list: which MachineSets need a touch. Pure.
pub fn plan(machinesets: &[Value], snap: &Snapshot) -> Vec<Planned> {
    decided(machinesets, snap, Reason::Updated)
        .map(|(planned, _)| planned)
        .collect()
}

/// A MachineSet given up on for its target (`RevertLoop`), with the decision's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Looping {
    pub machineset: Planned,
    pub message: String,
}

/// The MachineSets that another writer keeps putting back (behaviour §4, rule 11). Pure.
pub fn revert_loops(machinesets: &[Value], snap: &Snapshot) -> Vec<Looping> {
    decided(machinesets, snap, Reason::RevertLoop)
        .map(|(machineset, message)| Looping {
            machineset,
            message,
        })
        .collect()
}

/// The MachineSets decided with `reason`, with the decision's message.
fn decided<'a>(
    machinesets: &'a [Value],
    snap: &'a Snapshot,
    reason: Reason,
) -> impl Iterator<Item = (Planned, String)> + 'a {
    machinesets.iter().filter_map(move |ms| {
        let d = decision::decide_object(ms, snap);
        (d.reason == reason).then(|| {
            let meta = |k: &str| {
                ms.pointer(&format!("/metadata/{k}"))
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned()
            };
            let planned = Planned {
                kind: ms["kind"].as_str().unwrap_or_default().to_owned(),
                name: meta("name"),
                uid: meta("uid"),
                current: d.current.unwrap_or_default(),
                target: d.target.unwrap_or_default(),
            };
            (planned, d.message)
        })
    })
}

/// What the Lease holder counts on each pass (behaviour §7): MachineSets by reason, the
/// oldest boot image an enrolled MachineSet names, and each MachineSet's image now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Census {
    pub by_reason: BTreeMap<Reason, i64>,
    /// (age in days, MachineSet name, image) of the oldest dated boot image.
    pub oldest: Option<(i64, String, String)>,
    /// uid -> (kind, name, the image it boots now, the target when it is on it).
    pub images: BTreeMap<String, (String, String, String, Option<String>)>,
    /// The version of the oldest boot image any MachineSet names, managed or not
    /// ([`skew::survey`]).
    pub oldest_release: Option<skew::Version>,
    /// Manual skew enforcement's record is not the oldest boot image in use.
    pub skew_record_due: bool,
}

/// Reasons of MachineSets that are not ours to count in the boot image age: not enrolled,
/// not RHCOS (Windows, another stream, a custom image), or someone else's.
const NOT_AGED: [Reason; 7] = [
    Reason::NotApplicable,
    Reason::OptedOut,
    Reason::OwnedByController,
    Reason::ClusterAPIAuthoritative,
    Reason::UnsupportedOSStream,
    Reason::Windows,
    Reason::CustomImage,
];

/// Counts `machinesets` under `snap` as of `today`. Pure.
pub(crate) fn census(machinesets: &[Value], snap: &Snapshot, today: Date) -> Census {
    let mut c = Census::default();
    let mut all = Vec::new();
    for ms in machinesets {
        let d = decision::decide_object(ms, snap);
        *c.by_reason.entry(d.reason).or_default() += 1;
        let name = ms
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let uid = ms
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let image = d
            .current
            .clone()
            .or_else(|| platforms::referenced_image(ms));
        all.push((name.clone(), image.clone()));
        if let Some(image) = &image {
            let on_target = (d.reason == Reason::UpToDate)
                .then(|| d.target.clone())
                .flatten();
            let kind = ms["kind"].as_str().unwrap_or_default().to_owned();
            c.images
                .insert(uid, (kind, name.clone(), image.clone(), on_target));
            let days = (!NOT_AGED.contains(&d.reason))
                .then(|| age::age_days(image, today))
                .flatten();
            if let Some(days) = days
                && c.oldest.as_ref().is_none_or(|(o, _, _)| days > *o)
            {
                c.oldest = Some((days, name, image.clone()));
            }
        }
    }
    let survey = skew::survey(
        all.iter().map(|(n, i)| (n.clone(), i.as_deref())),
        snap.boot_images.as_deref(),
        &snap.cluster.learned,
    );
    c.skew_record_due = skew::record::due(
        snap.cluster.machine_configuration.as_deref(),
        &skew::record::propose(&survey),
        survey.oldest.as_ref().map(|(_, _, v)| v),
    );
    c.oldest_release = survey.oldest.map(|(_, _, v)| v);
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::arch::Arch;
    use crate::core::snapshot::{BootImages, EMBEDDED_CONFIGMAP, Gate, parse_document};
    use serde_json::json;

    const STALE: &str = "projects/rhcos-cloud/global/images/rhcos-9-6-20250826-1-gcp-x86-64";

    fn snapshot(gate_open: bool) -> Snapshot {
        let images = BootImages::from_document(EMBEDDED_CONFIGMAP).unwrap();
        let snap = Snapshot::offline(images, true, Some(Arch::Amd64), false);
        let mut cluster = snap.cluster.clone();
        if !gate_open {
            cluster.gate = Gate::closed("no master has completed the release");
        }
        Snapshot::new(snap.boot_images, cluster)
    }

    fn machineset(name: &str, image: &str) -> Value {
        let text = include_str!("../../../tests/fixtures/machineset-gcp-build02-infra-a.yaml");
        let mut ms = parse_document(text).unwrap();
        ms["metadata"]["name"] = json!(name);
        ms["metadata"]["uid"] = json!(format!("uid-{name}"));
        ms["spec"]["template"]["spec"]["providerSpec"]["value"]["disks"][0]["image"] = json!(image);
        ms
    }

    #[test]
    fn a_pass_plans_the_machinesets_the_webhook_would_move_and_no_others() {
        let snap = snapshot(true);
        let stale = machineset("stale", STALE);
        let target = plan(std::slice::from_ref(&stale), &snap)[0].target.clone();
        let current = machineset("current", &target);
        let mut opted_out = machineset("opted-out", STALE);
        opted_out["metadata"]["labels"]["bootimages.machineconfiguration.openshift.io/managed"] =
            json!("false");
        let fleet = [stale, current, opted_out];
        let planned = plan(&fleet, &snap);
        assert_eq!(
            planned,
            [Planned {
                kind: "MachineSet".into(),
                name: "stale".into(),
                uid: "uid-stale".into(),
                current: STALE.into(),
                target,
            }]
        );
        assert!(
            plan(&fleet, &snapshot(false)).is_empty(),
            "the gate is shut"
        );
        assert!(revert_loops(&fleet, &snap).is_empty());
    }

    #[test]
    fn the_census_counts_by_reason_and_ages_only_enrolled_images() {
        let snap = snapshot(true);
        let mut opted_out = machineset("opted-out", STALE);
        opted_out["metadata"]["labels"]["bootimages.machineconfiguration.openshift.io/managed"] =
            json!("false");
        let fleet = [machineset("a", STALE), machineset("b", STALE), opted_out];
        let today = Date::new(2026, 8, 26).unwrap();
        let c = census(&fleet, &snap, today);
        assert_eq!(c.by_reason.get(&Reason::Updated), Some(&2));
        assert_eq!(c.by_reason.get(&Reason::OptedOut), Some(&1));
        let (days, name, image) = c.oldest.expect("a dated image");
        assert_eq!((days, image.as_str()), (365, STALE));
        assert!(name == "a" || name == "b", "{name}");
        assert_eq!(
            c.images.len(),
            3,
            "every image is remembered, enrolled or not"
        );
    }
}
