//! Which MachineSets and ControlPlaneMachineSets are enrolled, and by which rule (behaviour
//! §4, rule 2). Where the MCO manages a platform's boot images, its MachineConfiguration
//! `cluster` selects them, as the MCO's own controller reads it. Elsewhere (OpenStack,
//! Nutanix, and the releases or feature gates in which the MCO manages none on a platform)
//! its selection says nothing of this webhook: installing it is the opt-in, and the opt-out
//! label and the webhook's `objectSelector` decide.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::Value;

use super::Enrollment;
use crate::core::platforms::Platform;

/// The kinds a MachineConfiguration's `machineManagers` name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Managed {
    MachineSets,
    ControlPlaneMachineSets,
}

impl Managed {
    /// Its `resource` in a `machineManagers` entry.
    fn resource(self) -> &'static str {
        match self {
            Managed::MachineSets => "machinesets",
            Managed::ControlPlaneMachineSets => "controlplanemachinesets",
        }
    }

    /// What opts this kind in where the MCO's selection does not speak.
    fn opt_in(self) -> &'static str {
        match self {
            Managed::MachineSets => "installing bootimage-webhook is the opt-in",
            Managed::ControlPlaneMachineSets => "--control-plane-machine-sets is the opt-in",
        }
    }

    /// "boot images", "ControlPlaneMachineSet boot images".
    fn images(self) -> &'static str {
        match self {
            Managed::MachineSets => "boot images",
            Managed::ControlPlaneMachineSets => "ControlPlaneMachineSet boot images",
        }
    }
}

/// An enrollment and the rule that gave it, in words for the decision's log line, its
/// `OptedOut` message and `status`.
#[derive(Debug, Clone)]
pub struct Enrolled {
    pub enrollment: Enrollment,
    pub rule: Arc<str>,
}

impl Enrolled {
    fn new(enrollment: Enrollment, rule: impl Into<Arc<str>>) -> Self {
        Enrolled {
            enrollment,
            rule: rule.into(),
        }
    }

    /// Before anything is read, and offline: the webhook's own opt-in.
    pub fn unread(kind: Managed) -> Self {
        Enrolled::new(
            Enrollment::All,
            format!("no MachineConfiguration cluster read: {}", kind.opt_in()),
        )
    }

    /// An unusable selection: nothing is managed.
    pub fn unusable(error: &EnrollmentError) -> Self {
        Enrolled::new(
            Enrollment::None,
            format!(
                "MachineConfiguration cluster's selection is unusable ({error}): nothing is managed"
            ),
        )
    }
}

/// MachineConfiguration `cluster` whose status does not answer its spec yet
/// (`status.observedGeneration` behind `metadata.generation`): its
/// `managedBootImagesStatus` may be the previous selection's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("status.observedGeneration {observed} is behind metadata.generation {generation}")]
pub(crate) struct NotObserved {
    pub generation: i64,
    pub observed: i64,
}

/// Whether the MCO has answered MachineConfiguration `cluster`'s spec: it follows
/// `managedBootImagesStatus` only once `status.observedGeneration` equals
/// `metadata.generation`. Without an observedGeneration (no status yet, or OpenShift 4.17
/// and 4.18, whose MCO reads the spec) there is nothing to wait for.
pub(crate) fn observed(machine_configuration: &Value) -> Result<(), NotObserved> {
    let generation = machine_configuration.pointer("/metadata/generation");
    let observed = machine_configuration.pointer("/status/observedGeneration");
    match (
        generation.and_then(Value::as_i64),
        observed.and_then(Value::as_i64),
    ) {
        (Some(generation), Some(observed)) if observed < generation => Err(NotObserved {
            generation,
            observed,
        }),
        _ => Ok(()),
    }
}

/// Why a MachineConfiguration's boot image selection cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnrollmentError {
    #[error("mode Partial without selection.partial.machineResourceSelector")]
    PartialWithoutSelector,
    #[error("machineResourceSelector: {0}")]
    Selector(String),
    #[error("unknown selection mode {0:?}")]
    UnknownMode(Option<String>),
}

/// Whether the MCO manages `kind` on the platform Infrastructure names, in some release
/// (`None`: not read yet, and MachineConfiguration `cluster` alone can tell). Azure Stack
/// Hub, bare metal and every platform without a module: never.
pub(crate) fn mco_may_manage(platform: Option<&str>, kind: Managed) -> bool {
    let Some(name) = platform else {
        return true;
    };
    Platform::by_name(name).is_some_and(|p| {
        let m = p.mco_manages();
        match kind {
            Managed::MachineSets => m.machine_sets,
            Managed::ControlPlaneMachineSets => m.control_plane_machine_sets,
        }
    })
}

/// The enrollment of `kind` and its rule, from Infrastructure's platform and
/// MachineConfiguration `cluster` (`last`: what this gave before, kept while the MCO has not
/// answered a newer spec, as the MCO's controller waits for it).
///
/// - A platform the MCO never manages: all, whatever the MachineConfiguration says.
/// - `status.managedBootImagesStatus` with a `machineManagers` list (OpenShift 4.19 and later,
///   where the MCO manages the platform in this release, with its feature gates): that list,
///   as the MCO reads it (a list without an entry for `kind` manages none of it, except a
///   ControlPlaneMachineSet's missing entry beside others: the MCO does not manage those
///   in this release).
/// - `managedBootImagesStatus: {}`: the MCO's operator keeps the old status and fills the
///   field only where it manages boot images, so it manages none here in this release: all.
/// - No such status (OpenShift 4.17 and 4.18, or not written yet): MachineSets follow
///   `spec.managedBootImages` if it is set, as those releases' MCO does; else all.
pub fn enrollment(
    platform: Option<&str>,
    machine_configuration: Option<&Value>,
    kind: Managed,
    last: Option<&Enrolled>,
) -> Result<Enrolled, EnrollmentError> {
    let on = platform.unwrap_or("this platform");
    if !mco_may_manage(platform, kind) {
        let rule = format!(
            "the MCO does not manage {} on {on}; {}",
            kind.images(),
            kind.opt_in()
        );
        return Ok(Enrolled::new(Enrollment::All, rule));
    }
    let Some(mc) = machine_configuration else {
        let rule = format!("no MachineConfiguration cluster: {}", kind.opt_in());
        return Ok(Enrolled::new(Enrollment::All, rule));
    };
    if let Err(stale) = observed(mc) {
        return Ok(last.cloned().unwrap_or_else(|| {
            let rule = format!(
                "MachineConfiguration cluster's {stale}: nothing moves on a selection the MCO has not made"
            );
            Enrolled::new(Enrollment::None, rule)
        }));
    }
    if let Some(status) = mc.pointer("/status/managedBootImagesStatus") {
        return from_status(status, on, kind);
    }
    match mc.pointer("/spec/managedBootImages") {
        Some(spec) if kind == Managed::MachineSets => Ok(Enrolled::new(
            selection(spec, kind)?,
            "MachineConfiguration cluster's spec.managedBootImages, which the MCO of a release without managedBootImagesStatus (4.17, 4.18) follows",
        )),
        _ => {
            let rule = format!(
                "MachineConfiguration cluster selects no {}: {}",
                kind.images(),
                kind.opt_in()
            );
            Ok(Enrolled::new(Enrollment::All, rule))
        }
    }
}

/// [`enrollment`] from a `managedBootImagesStatus` the MCO wrote.
fn from_status(status: &Value, on: &str, kind: Managed) -> Result<Enrolled, EnrollmentError> {
    let Some(managers) = status.get("machineManagers").and_then(Value::as_array) else {
        let rule = format!(
            "the MCO does not manage {} on {on} in this release (MachineConfiguration cluster's managedBootImagesStatus is empty); {}",
            kind.images(),
            kind.opt_in()
        );
        return Ok(Enrolled::new(Enrollment::All, rule));
    };
    if kind == Managed::ControlPlaneMachineSets
        && !managers.is_empty()
        && entry(managers, kind).is_none()
    {
        let rule = format!(
            "the MCO does not manage {} on {on} in this release (MachineConfiguration cluster's managedBootImagesStatus has no entry for them); {}",
            kind.images(),
            kind.opt_in()
        );
        return Ok(Enrolled::new(Enrollment::All, rule));
    }
    let rule = format!(
        "the MCO manages {} on {on}: bootimage-webhook follows MachineConfiguration cluster's status.managedBootImagesStatus",
        kind.images()
    );
    Ok(Enrolled::new(selection(status, kind)?, rule))
}

fn entry(managers: &[Value], kind: Managed) -> Option<&Value> {
    managers
        .iter()
        .find(|m| m["resource"] == kind.resource() && m["apiGroup"] == "machine.openshift.io")
}

/// `kind`'s entry of a `machineManagers` list holder, as the MCO reads it: no entry (an
/// empty list too: the legacy opt-out) manages none.
fn selection(holder: &Value, kind: Managed) -> Result<Enrollment, EnrollmentError> {
    let managers = holder.get("machineManagers").and_then(Value::as_array);
    let Some(entry) = managers.and_then(|m| entry(m, kind)) else {
        return Ok(Enrollment::None);
    };
    match entry.pointer("/selection/mode").and_then(Value::as_str) {
        Some("All") => Ok(Enrollment::All),
        Some("None") => Ok(Enrollment::None),
        Some("Partial") => {
            let raw = entry
                .pointer("/selection/partial/machineResourceSelector")
                .cloned()
                .ok_or(EnrollmentError::PartialWithoutSelector)?;
            let selector: LabelSelector = serde_json::from_value(raw)
                .map_err(|e| EnrollmentError::Selector(e.to_string()))?;
            selector
                .try_into()
                .map(Enrollment::Partial)
                .map_err(|e: kube::core::ParseExpressionError| EnrollmentError::Selector(e.0))
        }
        other => Err(EnrollmentError::UnknownMode(other.map(str::to_owned))),
    }
}

#[cfg(test)]
mod tests {
    use kube::core::SelectorExt;
    use serde_json::json;

    use super::*;

    const MS: Managed = Managed::MachineSets;
    const CPMS: Managed = Managed::ControlPlaneMachineSets;

    /// MachineConfiguration `cluster` as the MCO of 4.19 and later leaves it: generation 1
    /// answered, with this `managedBootImagesStatus`.
    fn answered(status: Value) -> Value {
        json!({"metadata": {"name": "cluster", "generation": 1},
               "status": {"observedGeneration": 1, "managedBootImagesStatus": status}})
    }

    fn managers(entries: &[(&str, Value)]) -> Value {
        let list: Vec<Value> = entries
            .iter()
            .map(|(resource, selection)| json!({"resource": resource, "apiGroup": "machine.openshift.io", "selection": selection}))
            .collect();
        json!({"machineManagers": list})
    }

    fn ms_mode(selection: Value) -> Value {
        answered(managers(&[("machinesets", selection)]))
    }

    fn words(e: &Enrollment) -> String {
        match e {
            Enrollment::All => "All".into(),
            Enrollment::None => "None".into(),
            Enrollment::Partial(s) => format!("Partial {s}"),
        }
    }

    fn enrolled(platform: Option<&str>, mc: Option<&Value>, kind: Managed) -> (String, String) {
        let e = enrollment(platform, mc, kind, None).unwrap();
        (words(&e.enrollment), e.rule.to_string())
    }

    /// Every platform, and a cluster whose Infrastructure is not read yet, against each
    /// MachineConfiguration a cluster may hold: where the MCO manages the platform, its
    /// selection as its own controller reads it; elsewhere all, whatever it says.
    #[test]
    fn every_platform_against_every_machine_configuration() {
        let partial = json!({"mode": "Partial", "partial": {"machineResourceSelector": {"matchLabels": {"boot": "yes"}}}});
        let mut stale = ms_mode(json!({"mode": "All"}));
        stale["metadata"]["generation"] = json!(2);
        let states: [(&str, Option<Value>); 6] = [
            ("no MachineConfiguration", None),
            ("{}", Some(answered(json!({})))),
            ("All", Some(ms_mode(json!({"mode": "All"})))),
            ("Partial", Some(ms_mode(partial))),
            ("None", Some(ms_mode(json!({"mode": "None"})))),
            ("generation not yet observed", Some(stale)),
        ];
        let mut platforms: Vec<Option<&str>> =
            Platform::ALL.iter().map(|p| Some(p.name())).collect();
        platforms.extend([
            Some("AzureStackCloud"),
            Some("BareMetal"),
            Some("None"),
            None,
        ]);
        for platform in platforms {
            let mco = matches!(platform, Some("GCP" | "AWS" | "Azure" | "VSphere") | None);
            let on = platform.unwrap_or("this platform");
            for (state, mc) in &states {
                let (got, rule) = enrolled(platform, mc.as_ref(), MS);
                let case = format!("{on}, {state}: {got}: {rule}");
                if !mco {
                    assert_eq!(got, "All", "{case}");
                    assert_eq!(
                        rule,
                        format!(
                            "the MCO does not manage boot images on {on}; installing bootimage-webhook is the opt-in"
                        ),
                        "{case}"
                    );
                    continue;
                }
                let (want, says) = match *state {
                    "no MachineConfiguration" => ("All", "no MachineConfiguration cluster: installing bootimage-webhook is the opt-in".to_owned()),
                    "{}" => ("All", format!("the MCO does not manage boot images on {on} in this release (MachineConfiguration cluster's managedBootImagesStatus is empty); installing bootimage-webhook is the opt-in")),
                    "generation not yet observed" => ("None", "MachineConfiguration cluster's status.observedGeneration 1 is behind metadata.generation 2: nothing moves on a selection the MCO has not made".to_owned()),
                    mode => (if mode == "Partial" { "Partial boot=yes" } else { mode }, format!("the MCO manages boot images on {on}: bootimage-webhook follows MachineConfiguration cluster's status.managedBootImagesStatus")),
                };
                assert_eq!(
                    (got.as_str(), rule.as_str()),
                    (want, says.as_str()),
                    "{case}"
                );
            }
        }
    }

    /// ControlPlaneMachineSets: the MCO manages them on AWS, GCP and Azure only, and only
    /// where its status has an entry for them (4.22; 4.21 with its feature gate).
    #[test]
    fn control_plane_machine_sets_by_platform() {
        let ms_only = ms_mode(json!({"mode": "All"}));
        let both = answered(managers(&[
            ("machinesets", json!({"mode": "All"})),
            ("controlplanemachinesets", json!({"mode": "None"})),
        ]));
        for platform in ["VSphere", "OpenStack", "Nutanix", "BareMetal"] {
            for mc in [None, Some(&ms_only), Some(&both)] {
                let (got, rule) = enrolled(Some(platform), mc, CPMS);
                assert_eq!(got, "All", "{platform}: {rule}");
                assert_eq!(
                    rule,
                    format!(
                        "the MCO does not manage ControlPlaneMachineSet boot images on {platform}; --control-plane-machine-sets is the opt-in"
                    )
                );
            }
        }
        for platform in ["AWS", "GCP", "Azure"] {
            let (got, rule) = enrolled(Some(platform), Some(&both), CPMS);
            assert_eq!(got, "None", "{rule}");
            assert!(
                rule.starts_with("the MCO manages ControlPlaneMachineSet boot images"),
                "{rule}"
            );
            // 4.21 without the gate, 4.19, 4.20: the MCO leaves them alone.
            let (got, rule) = enrolled(Some(platform), Some(&ms_only), CPMS);
            assert_eq!(got, "All", "{rule}");
            assert!(rule.contains("has no entry for them"), "{rule}");
            assert_eq!(
                enrolled(Some(platform), Some(&answered(json!({}))), CPMS).0,
                "All"
            );
            // The legacy opt-out (an empty list) turns everything off, these too.
            let off = answered(json!({"machineManagers": []}));
            assert_eq!(enrolled(Some(platform), Some(&off), CPMS).0, "None");
            assert_eq!(enrolled(Some(platform), Some(&off), MS).0, "None");
            // Releases without the status: the spec of 4.17 and 4.18 cannot name them.
            let spec = json!({"spec": {"managedBootImages": managers(&[("machinesets", json!({"mode": "None"}))])}});
            assert_eq!(enrolled(Some(platform), Some(&spec), CPMS).0, "All");
        }
    }

    /// A status that does not answer its spec: the last enrollment stands (none before
    /// any), except where the MCO's selection does not speak.
    #[test]
    fn the_selection_waits_for_the_status_to_answer_the_spec() {
        let mc = |generation: i64, observed: Option<i64>| {
            let mut v = json!({"metadata": {"generation": generation}, "status": {}});
            if let Some(o) = observed {
                v["status"]["observedGeneration"] = o.into();
            }
            v
        };
        assert_eq!(
            observed(&mc(3, Some(2))),
            Err(NotObserved {
                generation: 3,
                observed: 2
            })
        );
        assert_eq!(observed(&mc(3, Some(3))), Ok(()));
        assert_eq!(observed(&mc(3, None)), Ok(()));
        let mut stale = ms_mode(json!({"mode": "None"}));
        stale["metadata"]["generation"] = json!(2);
        let last = enrollment(
            Some("GCP"),
            Some(&ms_mode(json!({"mode": "All"}))),
            MS,
            None,
        )
        .unwrap();
        let kept = enrollment(Some("GCP"), Some(&stale), MS, Some(&last)).unwrap();
        assert_eq!(
            (words(&kept.enrollment), kept.rule.clone()),
            ("All".into(), last.rule)
        );
        let open = enrollment(Some("OpenStack"), Some(&stale), MS, None).unwrap();
        assert!(matches!(open.enrollment, Enrollment::All));
    }

    /// OpenShift 4.17 and 4.18 have no status: their MCO follows the spec (GCP and AWS, the
    /// only platforms whose policy admits it); with neither, all.
    #[test]
    fn releases_without_the_status_follow_the_spec() {
        let spec = |managers: Value| json!({"spec": {"managedBootImages": managers}, "status": {}});
        let none = managers(&[("machinesets", json!({"mode": "None"}))]);
        let partial = managers(&[(
            "machinesets",
            json!({"mode": "Partial", "partial": {"machineResourceSelector": {"matchLabels": {"test": "boot"}}}}),
        )]);
        for platform in ["GCP", "AWS"] {
            let (got, rule) = enrolled(Some(platform), Some(&spec(none.clone())), MS);
            assert_eq!(got, "None");
            assert!(rule.contains("spec.managedBootImages"), "{rule}");
            assert_eq!(
                enrolled(Some(platform), Some(&spec(json!({}))), MS).0,
                "None"
            );
            let Enrollment::Partial(sel) =
                enrollment(Some(platform), Some(&spec(partial.clone())), MS, None)
                    .unwrap()
                    .enrollment
            else {
                panic!("Partial")
            };
            assert!(sel.matches(&[("test".to_owned(), "boot".to_owned())].into()));
            assert!(!sel.matches(&Default::default()));
            let (got, rule) =
                enrolled(Some(platform), Some(&json!({"spec": {}, "status": {}})), MS);
            assert_eq!(got, "All");
            assert_eq!(
                rule,
                "MachineConfiguration cluster selects no boot images: installing bootimage-webhook is the opt-in"
            );
        }
        // With the status, the status decides (the MCO's defaults are in it).
        let both = json!({"spec": {"managedBootImages": none}, "status": {"managedBootImagesStatus": managers(&[("machinesets", json!({"mode": "All"}))])}});
        assert_eq!(enrolled(Some("AWS"), Some(&both), MS).0, "All");
        // ... and on OpenStack neither speaks.
        assert_eq!(enrolled(Some("OpenStack"), Some(&spec(none)), MS).0, "All");
    }

    #[test]
    fn an_unusable_selection_is_an_error_where_it_speaks() {
        for selection in [
            json!({"mode": "Partial"}),
            json!({"mode": "Sometimes"}),
            json!({"mode": "Partial", "partial": {"machineResourceSelector": {"matchExpressions": [{"key": "a", "operator": "Near"}]}}}),
        ] {
            let mc = ms_mode(selection);
            assert!(
                enrollment(Some("GCP"), Some(&mc), MS, None).is_err(),
                "{mc}"
            );
            assert!(
                enrollment(Some("Nutanix"), Some(&mc), MS, None).is_ok(),
                "{mc}"
            );
        }
        let cpms_only = answered(managers(&[(
            "controlplanemachinesets",
            json!({"mode": "All"}),
        )]));
        assert_eq!(enrolled(Some("GCP"), Some(&cpms_only), MS).0, "None");
    }
}
