//! The cluster profiles (`tests/fixtures/clusters/`, `scripts/cluster-profiles`): every
//! platform the webhook serves has one on every release, each with every object a scenario
//! starts from, each file naming where it comes from upstream, and each holding what
//! OpenShift writes on that platform and release where the webhook reads it.

use std::collections::BTreeSet;

use bootimage_webhook::core::platforms::Platform;
use bootimage_webhook::core::snapshot::BootImages;
use serde_json::{Value, json};

use crate::support;
use support::clusters::{FILES, PLATFORMS, Profile};

/// The providerSpec kind the installer writes on each platform.
fn provider_kind(platform: &str) -> &'static str {
    match platform {
        "gcp" => "GCPMachineProviderSpec",
        "aws" => "AWSMachineProviderConfig",
        "azure" => "AzureMachineProviderSpec",
        "vsphere" => "VSphereMachineProviderSpec",
        "openstack" => "OpenstackProviderSpec",
        "nutanix" => "NutanixMachineProviderConfig",
        other => panic!("no providerSpec kind known for {other}"),
    }
}

#[test]
fn cluster_profiles_every_platform_has_one_on_every_release() {
    let _parallel = support::parallel();
    let served: BTreeSet<String> = Platform::ALL
        .iter()
        .map(|p| p.name().to_lowercase())
        .collect();
    let profiled: BTreeSet<String> = PLATFORMS.iter().map(|p| p.to_string()).collect();
    assert_eq!(
        served, profiled,
        "a platform the webhook serves has no profile"
    );
    let dirs: BTreeSet<String> =
        std::fs::read_dir(Profile::new("gcp", "4.17").dir().parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap())
            .filter(|e| e.file_type().unwrap().is_dir())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
    let wanted: BTreeSet<String> = Profile::all()
        .iter()
        .map(|p| format!("{}-{}", p.platform, p.release))
        .collect();
    assert_eq!(
        dirs, wanted,
        "tests/fixtures/clusters/ holds exactly the profiles"
    );
    for profile in Profile::all() {
        for (file, kinds) in FILES {
            let objects = profile.objects(file);
            assert!(!objects.is_empty(), "{profile:?} {file} is empty");
            for o in &objects {
                let kind = o["kind"].as_str().unwrap_or_default();
                assert!(kinds.contains(&kind), "{profile:?} {file} holds a {kind}");
                assert!(o["metadata"]["name"].is_string(), "{profile:?} {file}: {o}");
            }
            let sources = profile.sources(file);
            assert!(
                sources.iter().any(|s| s.starts_with("openshift/")),
                "{profile:?} {file} names no upstream source: {sources:?}"
            );
        }
    }
}

#[test]
fn cluster_profiles_hold_what_openshift_writes_where_the_webhook_reads_it() {
    let _parallel = support::parallel();
    for profile in Profile::all() {
        let infra = profile.object("infrastructure.yaml");
        let kind = Platform::ALL
            .into_iter()
            .find(|p| p.name().to_lowercase() == profile.platform)
            .unwrap()
            .name();
        assert_eq!(
            infra["status"]["platformStatus"]["type"], kind,
            "{profile:?}"
        );
        assert_eq!(infra["spec"]["platformSpec"]["type"], kind, "{profile:?}");
        let infra_id = infra["status"]["infrastructureName"].as_str().unwrap();
        machine_configuration_as_its_mco_writes_it(profile);
        history_with_the_install_last(profile);
        bootimages_stamped(profile);
        installer_objects(profile, infra_id);
    }
}

/// What `syncMachineConfiguration` of the release leaves on the platform.
fn machine_configuration_as_its_mco_writes_it(profile: Profile) {
    let mc = profile.object("machineconfiguration.yaml");
    let status = &mc["status"];
    assert_eq!(status["observedGeneration"], 1, "{profile:?}");
    assert!(
        status["nodeDisruptionPolicyStatus"]["clusterPolicies"]["files"].is_array(),
        "{profile:?}"
    );
    let managed = status.get("managedBootImagesStatus");
    let mco_manages = match profile.release {
        "4.17" => None,
        "4.19" => Some(["gcp", "aws"].contains(&profile.platform)),
        _ => Some(!["openstack", "nutanix"].contains(&profile.platform)),
    };
    match mco_manages {
        // 4.17's CRD has no such field: the apiserver would prune it.
        None => assert_eq!(managed, None, "{profile:?}"),
        // The copied old status, whose struct the apiserver keeps as `{}`.
        Some(false) => assert_eq!(managed, Some(&json!({})), "{profile:?}"),
        Some(true) => assert_eq!(
            managed.unwrap()["machineManagers"][0],
            json!({"resource": "machinesets", "apiGroup": "machine.openshift.io",
                   "selection": {"mode": "All"}}),
            "{profile:?}"
        ),
    }
    let skew = status.get("bootImageSkewEnforcementStatus");
    if profile.release != "4.22" {
        assert_eq!(skew, None, "{profile:?}");
        return;
    }
    let cv = profile.object("clusterversion.yaml");
    let install = &cv["status"]["history"].as_array().unwrap().last().unwrap()["version"];
    let skew = skew.unwrap_or_else(|| panic!("{profile:?}: no skew status on 4.22"));
    if mco_manages == Some(true) {
        assert_eq!(skew["mode"], "Automatic", "{profile:?}");
        assert_eq!(&skew["automatic"]["ocpVersion"], install, "{profile:?}");
    } else {
        assert_eq!(skew["mode"], "Manual", "{profile:?}");
        assert_eq!(skew["manual"]["mode"], "OCPVersion", "{profile:?}");
        assert_eq!(&skew["manual"]["ocpVersion"], install, "{profile:?}");
    }
}

/// The CVO's history, newest first: the current release, then the install.
fn history_with_the_install_last(profile: Profile) {
    let cv = profile.object("clusterversion.yaml");
    let history = cv["status"]["history"].as_array().unwrap();
    assert!(history.len() >= 2, "{profile:?}: installed, then upgraded");
    assert!(
        history.iter().all(|h| h["state"] == "Completed"),
        "{profile:?}"
    );
    let current = history[0]["version"].as_str().unwrap();
    assert!(
        current.starts_with(&format!("{}.", profile.release)),
        "{profile:?}: {current}"
    );
    assert_eq!(cv["status"]["desired"]["version"], current, "{profile:?}");
}

/// `coreos-bootimages` as the CVO applies it, stamped by the MCO for the current release.
fn bootimages_stamped(profile: Profile) {
    let cm = profile.object("coreos-bootimages.yaml");
    assert_eq!(
        cm["metadata"]["namespace"], "openshift-machine-config-operator",
        "{profile:?}"
    );
    let data = &cm["data"];
    let cv = profile.object("clusterversion.yaml");
    let current = &cv["status"]["history"][0]["version"];
    assert_eq!(&data["releaseVersion"], current, "{profile:?}");
    assert_eq!(&data["MCOReleaseImageVersion"], current, "{profile:?}");
    assert!(data["MCOVersionHash"].is_string(), "{profile:?}");
    assert_eq!(
        data.get("streams").is_some(),
        profile.release == "4.22",
        "{profile:?}: `streams` came with the OS image streams"
    );
    let text = profile.text("coreos-bootimages.yaml");
    BootImages::from_document(&text).unwrap_or_else(|e| panic!("{profile:?}: {e}"));
}

/// The installer's MachineSets and ControlPlaneMachineSet, and the Secrets they name.
fn installer_objects(profile: Profile, infra_id: &str) {
    let secrets: BTreeSet<String> = profile
        .objects("secrets.yaml")
        .iter()
        .map(|s| s["metadata"]["name"].as_str().unwrap().to_owned())
        .collect();
    let cpms = profile.object("controlplanemachineset.yaml");
    let cpms_template = cpms["spec"]["template"]["machines_v1beta1_machine_openshift_io"].clone();
    let mut templates: Vec<(String, Value)> = profile
        .machine_sets()
        .into_iter()
        .map(|ms| {
            let name = ms["metadata"]["name"].as_str().unwrap().to_owned();
            assert!(
                name.starts_with(&format!("{infra_id}-worker")),
                "{profile:?}: {name}"
            );
            assert_eq!(
                ms["metadata"]["labels"]["machine.openshift.io/cluster-api-cluster"], infra_id,
                "{profile:?}"
            );
            (name, ms["spec"]["template"].clone())
        })
        .collect();
    templates.push(("the ControlPlaneMachineSet".into(), cpms_template));
    for (name, template) in templates {
        let value = &template["spec"]["providerSpec"]["value"];
        assert_eq!(
            value["kind"],
            provider_kind(profile.platform),
            "{profile:?} {name}"
        );
        for field in ["userDataSecret", "credentialsSecret", "cloudsSecret"] {
            if let Some(secret) = value[field]["name"].as_str() {
                assert!(
                    secrets.contains(secret),
                    "{profile:?} {name}: no Secret {secret}"
                );
            }
        }
    }
    for role in ["worker", "master"] {
        let secret = profile
            .objects("secrets.yaml")
            .into_iter()
            .find(|s| s["metadata"]["name"] == format!("{role}-user-data"))
            .unwrap_or_else(|| panic!("{profile:?}: no {role}-user-data"));
        assert!(secret["data"]["userData"].is_string(), "{profile:?}");
    }
}
