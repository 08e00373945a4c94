//! The record's rules: the field chosen for each kind of version, the CRD's rules, the
//! merge patch, the refusals, and what `status` says of a record.

use serde_json::json;

use super::*;
use crate::core::skew::{from_name, survey};
use crate::core::snapshot::Learned;

const OLD: &str = "projects/rhcos-cloud/global/images/rhcos-9-6-20250826-1-gcp-x86-64";
const LEGACY: &str = "projects/rhcos-cloud/global/images/rhcos-416-94-202405291527-0-gcp-x86-64";
const CURRENT: &str = "projects/rhcos-cloud/global/images/rhcos-9-8-20260428-0-gcp-x86-64";

fn surveyed(images: &[(&str, Option<&str>)]) -> Survey {
    survey(
        images.iter().map(|(w, i)| (format!("ns/{w}"), *i)),
        None,
        &Learned::default(),
    )
}

fn rhcos(v: &str) -> Manual {
    Manual {
        mode: ManualMode::RhcosVersion,
        version: v.into(),
    }
}

fn ocp(v: &str) -> Manual {
    Manual {
        mode: ManualMode::OcpVersion,
        version: v.into(),
    }
}

fn manual_mc(m: &Manual) -> Value {
    json!({"spec": {"bootImageSkewEnforcement": {"mode": "Manual", "manual": m.api()}}})
}

#[test]
fn the_oldest_image_is_proposed_with_its_rhcos_version() {
    let s = surveyed(&[
        ("new", Some(CURRENT)),
        ("old", Some(OLD)),
        ("legacy", Some(LEGACY)),
    ]);
    let p = propose(&s).unwrap();
    assert_eq!(p.manual, rhcos("416.94.202405291527-0"));
    assert_eq!(p.machine_set, "ns/legacy");
    assert_eq!(p.image, LEGACY);
    assert_eq!(p.source, Source::Name);
    assert_eq!(p.how, "RHCOS 416.94.202405291527-0, read from its name");
}

#[test]
fn only_an_openshift_release_is_recorded_as_its_first_release() {
    // A Red Hat marketplace offer names its OpenShift release only.
    let v = from_name("redhat:rh-ocp-worker:rh-ocp-worker:4.18.2025031114").unwrap();
    assert_eq!(v.rhcos, None);
    assert_eq!(choose(&v, "ns/a", "x").unwrap(), ocp("4.18.0"));
}

#[test]
fn a_version_the_crd_would_refuse_is_not_proposed() {
    // An Azure marketplace version is an RHCOS release without its build number, and
    // RHEL 9.6 is in a range of OpenShift releases: there is no one version to write.
    let image = "azureopenshift:aro4:aro_419:9.6.20250826";
    let v = from_name(image).unwrap();
    let why = choose(&v, "ns/a", image).unwrap_err();
    assert!(matches!(why, Refusal::NoOneVersion { .. }), "{why:?}");
    assert_eq!(
        why.to_string(),
        "ns/a's image azureopenshift:aro4:aro_419:9.6.20250826 belongs to OpenShift 4.19-4.21 and its RHCOS version 9.6.20250826 is not one the CRD takes (it must be 14 to 21 characters long): no one version to record (the CRD takes an RHCOS version with its build number, or one OpenShift release)"
    );
    // Too long for the CRD, though well formed.
    let long = Version {
        rhcos: Some("4180.94.202410090804-0".into()),
        release: None,
        ..from_name(LEGACY).unwrap()
    };
    assert!(matches!(
        choose(&long, "ns/a", "x"),
        Err(Refusal::Rejected {
            field: "rhcosVersion",
            ..
        })
    ));
}

#[test]
fn the_crd_rules() {
    for ok in [
        "9.6.20250826-1",
        "416.94.202405291527-0",
        "10.2.20260101-12",
    ] {
        assert_eq!(rhcos_rule(ok), Ok(()), "{ok}");
    }
    for bad in [
        "9.6.20250826",
        "9.6.2025082-1",
        "9.6.202508261-1",
        "a.6.20250826-1",
        "9.6.20250826-1 ",
    ] {
        assert!(rhcos_rule(bad).is_err(), "{bad}");
    }
    assert!(rhcos_rule("41800.94.202410090804-0").is_err());
    for ok in ["4.18.0", "4.22.10", "10.10.1000"] {
        assert_eq!(ocp_rule(ok), Ok(()), "{ok}");
    }
    for bad in ["4.18", "4.1", "v4.18.0", "4.18.0-rc.1", "10.100.10000"] {
        assert!(ocp_rule(bad).is_err(), "{bad}");
    }
}

#[test]
fn no_version_is_told_without_machinesets_or_with_an_unknown_image() {
    assert_eq!(propose(&surveyed(&[])), Err(Refusal::NoMachineSets));
    let s = surveyed(&[
        ("old", Some(OLD)),
        ("custom", Some("projects/p/global/images/custom")),
        ("none", None),
    ]);
    let why = propose(&s).unwrap_err();
    assert_eq!(
        why,
        Refusal::Unknown(vec!["ns/custom".into(), "ns/none".into()])
    );
    assert!(
        why.to_string()
            .starts_with("the boot image version of ns/custom, ns/none is unknown")
    );
}

#[test]
fn the_patch_sets_the_field_and_removes_the_other() {
    let m = rhcos("9.6.20250826-1");
    assert_eq!(
        m.merge_patch(),
        json!({"spec": {"bootImageSkewEnforcement": {"mode": "Manual",
            "manual": {"mode": "RHCOSVersion", "rhcosVersion": "9.6.20250826-1", "ocpVersion": null}}}})
    );
    assert_eq!(
        ocp("4.18.0").merge_patch()["spec"]["bootImageSkewEnforcement"]["manual"],
        json!({"mode": "OCPVersion", "ocpVersion": "4.18.0", "rhcosVersion": null})
    );
    assert_eq!(
        oc_command(&m.merge_patch()),
        r#"oc patch machineconfiguration cluster --type merge -p '{"spec":{"bootImageSkewEnforcement":{"mode":"Manual","manual":{"mode":"RHCOSVersion","rhcosVersion":"9.6.20250826-1","ocpVersion":null}}}}'"#
    );
    assert_eq!(
        oc_command(&json!("it's")),
        r#"oc patch machineconfiguration cluster --type merge -p '"it'\''s"'"#
    );
    assert_eq!(
        m.to_string(),
        "{mode: Manual, manual: {mode: RHCOSVersion, rhcosVersion: 9.6.20250826-1}}"
    );
    assert_eq!(recorded(&manual_mc(&m)), Some(m));
    assert_eq!(
        recorded(&json!({"spec": {"bootImageSkewEnforcement": {"mode": "None"}}})),
        None
    );
}

#[test]
fn apply_is_guarded_where_the_mco_records_or_enforcement_is_off() {
    let managed = json!({"status": {"managedBootImagesStatus": {"machineManagers": [
        {"resource": "machinesets", "apiGroup": "machine.openshift.io", "selection": {"mode": "All"}}]}}});
    let partial = json!({"status": {"managedBootImagesStatus": {"machineManagers": [
        {"resource": "machinesets", "apiGroup": "machine.openshift.io", "selection": {"mode": "Partial"}}]}}});
    let automatic = json!({"status": {"bootImageSkewEnforcementStatus": {"mode": "Automatic"}}});
    let none = json!({"spec": {"bootImageSkewEnforcement": {"mode": "None"}}});
    let unmanaged = json!({"status": {"managedBootImagesStatus": {}}});
    assert_eq!(guard(None, true), Err(Refusal::NoMachineConfiguration));
    assert_eq!(guard(Some(&managed), false), Err(Refusal::ManagedByMco));
    assert_eq!(guard(Some(&automatic), false), Err(Refusal::Automatic));
    assert_eq!(guard(Some(&none), false), Err(Refusal::NotEnforced));
    for forced in [&managed, &automatic, &none] {
        assert_eq!(guard(Some(forced), true), Ok(()));
    }
    assert_eq!(guard(Some(&partial), false), Ok(()));
    assert_eq!(guard(Some(&unmanaged), false), Ok(()));
    // Already Manual: recording again is what Manual mode asks for.
    let mut manual = manual_mc(&rhcos("9.6.20250826-1"));
    manual["status"] = managed["status"].clone();
    assert_eq!(guard(Some(&manual), false), Ok(()));
}

fn advice_for(images: &[(&str, Option<&str>)], mc: &Value, release: &str) -> Option<Advice> {
    let s = surveyed(images);
    let p = propose(&s);
    advise(
        &p,
        s.oldest.as_ref().map(|(_, _, v)| v),
        Some(mc),
        Some(release),
    )
}

#[test]
fn status_says_when_the_record_is_behind_or_ahead_of_the_images() {
    let state = |recorded: Manual, images: &[(&str, Option<&str>)]| {
        advice_for(images, &manual_mc(&recorded), "4.22.0").map(|a| a.state)
    };
    let both = [("a", Some(OLD)), ("b", Some(CURRENT))];
    assert_eq!(
        state(rhcos("9.6.20250826-1"), &both),
        Some(AdviceState::Current)
    );
    assert_eq!(
        state(rhcos("416.94.202405291527-0"), &both),
        Some(AdviceState::Older)
    );
    assert_eq!(state(ocp("4.16.0"), &both), Some(AdviceState::Older));
    assert_eq!(
        state(rhcos("9.8.20260428-0"), &both),
        Some(AdviceState::Newer)
    );
    assert_eq!(state(ocp("4.22.0"), &both), Some(AdviceState::Newer));
    // The same release recorded by its OpenShift version: as good.
    let legacy = [("a", Some(LEGACY))];
    assert_eq!(state(ocp("4.16.0"), &legacy), Some(AdviceState::Current));
    assert_eq!(
        state(rhcos("9.6.20250826-0"), &both),
        Some(AdviceState::Differs)
    );
    let unknown = [("a", Some(OLD)), ("c", Some("custom"))];
    assert_eq!(
        state(rhcos("9.6.20250826-1"), &unknown),
        Some(AdviceState::CannotTell)
    );
    let behind = advice_for(&both, &manual_mc(&rhcos("416.94.202405291527-0")), "4.22.0").unwrap();
    assert_eq!(
        behind.message,
        "recorded rhcosVersion 416.94.202405291527-0 is older than the oldest boot image in use; run `bootimage-webhook skew record` to record rhcosVersion 9.6.20250826-1"
    );
}

#[test]
fn status_says_a_mode_must_be_chosen_only_where_the_mco_needs_one() {
    let images = [("a", Some(OLD))];
    let unmanaged = json!({"status": {"managedBootImagesStatus": {}}});
    let chosen = advice_for(&images, &unmanaged, "4.22.0").unwrap();
    assert_eq!(chosen.state, AdviceState::ChooseMode);
    assert!(
        chosen
            .message
            .contains("run `bootimage-webhook skew record`"),
        "{}",
        chosen.message
    );
    assert_eq!(
        advice_for(&images, &unmanaged, "5.0.1").unwrap().state,
        AdviceState::ChooseMode
    );
    // Before 4.22 nothing is enforced; where the MCO manages them it is Automatic.
    assert_eq!(advice_for(&images, &unmanaged, "4.21.9"), None);
    let managed = json!({"status": {"managedBootImagesStatus": {"machineManagers": [
        {"resource": "machinesets", "apiGroup": "machine.openshift.io", "selection": {"mode": "All"}}]}}});
    assert_eq!(advice_for(&images, &managed, "4.22.0"), None);
    let none = json!({"spec": {"bootImageSkewEnforcement": {"mode": "None"}}});
    assert_eq!(advice_for(&images, &none, "4.22.0"), None);
    let automatic = json!({"status": {"bootImageSkewEnforcementStatus": {"mode": "Automatic"}}});
    assert_eq!(advice_for(&images, &automatic, "4.22.0"), None);
}

#[test]
fn status_reads_the_mcos_own_manual_record_where_spec_sets_none() {
    // 4.22 where the MCO does not manage the boot images: Manual from the install release.
    let own = json!({"status": {"managedBootImagesStatus": {},
        "bootImageSkewEnforcementStatus": {"mode": "Manual",
            "manual": {"mode": "OCPVersion", "ocpVersion": "4.16.0"}}}});
    let current = advice_for(&[("a", Some(LEGACY))], &own, "4.22.0").unwrap();
    assert_eq!(current.state, AdviceState::Current);
    let moved = advice_for(&[("a", Some(CURRENT))], &own, "4.22.0").unwrap();
    assert_eq!(moved.state, AdviceState::Older);
    assert!(
        moved
            .message
            .starts_with("the MCO's own record (the install release) ocpVersion 4.16.0 is older"),
        "{}",
        moved.message
    );
    assert_eq!(mcos_own_record(&own), Some(ocp("4.16.0")));
    // An administrator's spec, or boot images the MCO manages: not the MCO's own record.
    let mut spec = own.clone();
    spec["spec"] = json!({"bootImageSkewEnforcement": {"mode": "None"}});
    assert_eq!(mcos_own_record(&spec), None);
    let mut managed = own.clone();
    managed["status"]["managedBootImagesStatus"] = json!({"machineManagers": [
        {"resource": "machinesets", "apiGroup": "machine.openshift.io", "selection": {"mode": "All"}}]});
    assert_eq!(mcos_own_record(&managed), None);
}
