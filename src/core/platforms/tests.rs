//! The platforms' lookups, and what ties each platform's module to what is written
//! elsewhere about it: the admission policy's and the webhook's kind lists, and the
//! reasons tagged with it.

use std::collections::{BTreeMap, BTreeSet};

use regex::Regex;
use serde_json::Value;

use super::rules::is_resource_name;
use super::*;
use crate::core::document::parse_documents;
use crate::core::reason::Reason;

#[test]
fn resource_names() {
    for ok in ["rhcos-cloud", "rhcos-9-8-20260428-0-gcp-x86-64", "a"] {
        assert!(is_resource_name(ok), "{ok}");
    }
    for bad in [
        "",
        "Rhcos",
        "9abc",
        "abc-",
        "a/b",
        "a_b",
        "a.b",
        &"a".repeat(64),
    ] {
        assert!(!is_resource_name(bad), "{bad}");
    }
}

#[test]
fn lookup() {
    assert_eq!(
        Platform::by_kind("GCPMachineProviderSpec").unwrap().name(),
        "GCP"
    );
    assert_eq!(
        Platform::by_name("GCP").unwrap().provider_spec_kind(),
        "GCPMachineProviderSpec"
    );
    assert_eq!(
        Platform::by_kind("AWSMachineProviderConfig")
            .unwrap()
            .name(),
        "AWS"
    );
    assert_eq!(
        Platform::by_kind("VSphereMachineProviderSpec")
            .unwrap()
            .name(),
        "VSphere"
    );
    assert_eq!(
        Platform::by_kind("OpenstackProviderSpec").unwrap().name(),
        "OpenStack"
    );
    assert_eq!(
        Platform::by_kind("NutanixMachineProviderConfig")
            .unwrap()
            .name(),
        "Nutanix"
    );
    assert_eq!(
        known_platform_of_kind("IBMCloudMachineProviderSpec"),
        Some("IBMCloud")
    );
    assert_eq!(
        known_platform_of_kind("AWSMachineProviderConfig"),
        Some("AWS")
    );
}

const POLICY: &str = include_str!("../../../manifests/base/validatingadmissionpolicy.yaml");
const WEBHOOK: &str = include_str!("../../../manifests/base/mutatingwebhookconfiguration.yaml");
const BOOT_IMAGES_POLICY: &str = "bootimage-webhook-boot-images-only";

/// Every string of a YAML file's documents: the CEL expressions among them.
fn strings(text: &str) -> Vec<String> {
    fn walk(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::String(s) => out.push(s.clone()),
            Value::Array(items) => items.iter().for_each(|i| walk(i, out)),
            Value::Object(map) => map.values().for_each(|i| walk(i, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    for doc in parse_documents(text).unwrap() {
        walk(&doc, &mut out);
    }
    out
}

/// The providerSpec kinds a CEL text names, as quoted literals.
fn kinds_in(text: &str) -> BTreeSet<String> {
    let kind = Regex::new(r"'([A-Za-z0-9]+Provider(?:Spec|Config))'").unwrap();
    kind.captures_iter(text).map(|c| c[1].to_owned()).collect()
}

fn served_kinds() -> BTreeSet<String> {
    Platform::ALL
        .iter()
        .map(|p| p.provider_spec_kind().to_owned())
        .collect()
}

/// The boot images policy's variable of that name.
fn policy_variable(name: &str) -> String {
    let docs = parse_documents(POLICY).unwrap();
    let policy = docs
        .iter()
        .find(|d| {
            d["kind"] == "ValidatingAdmissionPolicy" && d["metadata"]["name"] == BOOT_IMAGES_POLICY
        })
        .expect("the boot images policy");
    let variables = policy["spec"]["variables"].as_array().unwrap();
    let variable = variables.iter().find(|v| v["name"] == name);
    variable
        .and_then(|v| v["expression"].as_str())
        .unwrap_or_else(|| panic!("no variable {name}"))
        .to_owned()
}

/// The policy's `bootFields`: each map written in it is exactly each platform's kind to its
/// boot fields, so that a platform without its entry (or a stale entry) fails here.
#[test]
fn the_policys_boot_fields_map_is_each_platforms_boot_fields() {
    let want: BTreeMap<String, Vec<String>> = Platform::ALL
        .iter()
        .map(|p| {
            let fields = p.boot_fields().iter().map(|f| f.to_string()).collect();
            (p.provider_spec_kind().to_owned(), fields)
        })
        .collect();
    let expression = policy_variable("bootFields");
    let map = Regex::new(r"\{[^{}]*\}").unwrap();
    let pair = Regex::new(r"'([^']*)'\s*:\s*\[([^\]]*)\]").unwrap();
    let field = Regex::new(r"'([^']*)'").unwrap();
    let maps: Vec<BTreeMap<String, Vec<String>>> = map
        .find_iter(&expression)
        .map(|m| {
            pair.captures_iter(m.as_str())
                .map(|c| {
                    let fields = field.captures_iter(&c[2]).map(|f| f[1].to_owned());
                    (c[1].to_owned(), fields.collect())
                })
                .collect()
        })
        .collect();
    assert!(!maps.is_empty(), "bootFields writes no map: {expression}");
    for written in maps {
        assert_eq!(written, want, "the policy's bootFields: {expression}");
    }
}

/// Every list or map of providerSpec kinds in the policies and in the webhook's
/// matchConditions names exactly the served kinds, and no kind outside them is named.
#[test]
fn every_kind_list_in_the_manifests_is_platform_all() {
    let served = served_kinds();
    let literal = Regex::new(r"\[[^\[\]]*\]|\{[^{}]*\}").unwrap();
    let mut lists = 0;
    for (file, text) in [("policy", POLICY), ("webhook", WEBHOOK)] {
        for cel in strings(text) {
            for m in literal.find_iter(&cel) {
                let named = kinds_in(m.as_str());
                if named.is_empty() {
                    continue;
                }
                lists += 1;
                assert_eq!(named, served, "{file}: {}", m.as_str());
            }
            let stray: Vec<String> = kinds_in(&cel).difference(&served).cloned().collect();
            assert!(
                stray.is_empty(),
                "{file} names {stray:?}, which no platform reads: {cel}"
            );
        }
    }
    assert!(
        lists >= 3,
        "the bootFields map and the webhook's kind lists: {lists}"
    );
}

/// The policy checks the value each platform writes, in a validation of its own.
#[test]
fn the_policy_checks_each_platforms_value() {
    let validations: Vec<String> = parse_documents(POLICY)
        .unwrap()
        .iter()
        .filter(|d| d["metadata"]["name"] == BOOT_IMAGES_POLICY)
        .flat_map(|d| {
            d["spec"]["validations"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|v| v["expression"].as_str().map(str::to_owned))
        .collect();
    for p in Platform::ALL {
        let own = format!("variables.kind != '{}'", p.provider_spec_kind());
        assert!(
            validations.iter().any(|v| v.contains(&own)),
            "no validation of the policy checks the {} value ({own})",
            p.name()
        );
    }
}

/// A reason tagged with platforms is given by each of those platforms' modules, and by no
/// other.
#[test]
fn a_platforms_reasons_are_its_modules() {
    for reason in Reason::ALL {
        let owners = reason.platforms();
        if owners.is_empty() {
            continue;
        }
        for owner in owners {
            assert!(
                Platform::ALL.iter().any(|p| format!("{p:?}") == *owner),
                "{reason} is tagged with {owner}, which is no platform"
            );
        }
        let given = format!("Reason::{}", reason.as_str());
        for (platform, source) in SOURCES {
            assert_eq!(
                source.contains(&given),
                owners.contains(&format!("{platform:?}").as_str()),
                "{reason} is {owners:?}'s: given in {}'s module?",
                platform.name()
            );
        }
    }
}
