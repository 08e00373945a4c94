//! Cluster API MachineSets through their decision (`core::cluster_api`): the MachineSet and its
//! template as cluster-capi-operator writes them (tests/fixtures/cluster-api/), the target from
//! the machine API rules, the clone with only the image changed, and the reference moved to it
//! once it exists. Every patch is applied with the `json-patch` crate.

use crate::support;

use std::collections::BTreeMap;

use bootimage_webhook::core::cluster_api::{
    self, CLONE_LABEL, ClusterApiDecision, ClusterApiReason, INFRASTRUCTURE_REF_NAME, Inputs,
    SOURCE_ANNOTATION,
};
use bootimage_webhook::core::decision::{
    BOOT_IMAGE_ANNOTATION, OPT_OUT_LABEL, OS_STREAM_LABEL, Reason,
};
use bootimage_webhook::core::platforms::aws::{AwsLearned, Described, RED_HAT_OWNER};
use bootimage_webhook::core::platforms::openstack::{self, OpenStackLearned};
use bootimage_webhook::core::snapshot::{Gate, Learned, Snapshot, parse_documents};
use serde_json::{Value, json};
use support::clouds::{real_stream, snapshot};

const REGION: &str = "us-east-1";
const OLD_AMI: &str = "ami-0b0d0f6a2b5e6ab31";

/// The template and the MachineSet of an assembled fixture.
fn pair(name: &str) -> (Value, Value) {
    let mut docs = parse_documents(&support::fixture_text(name)).unwrap();
    let ms = docs.pop().unwrap();
    (docs.pop().unwrap(), ms)
}

fn aws() -> (Value, Value) {
    pair("cluster-api/aws-worker.assembled.yaml")
}

fn stream_ami() -> String {
    real_stream()["architectures"]["x86_64"]["images"]["aws"]["regions"][REGION]["image"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// The real stream, with EC2's word that the old AMI is Red Hat's.
fn aws_snapshot() -> Snapshot {
    let mut learned = AwsLearned::default();
    learned.images.insert(
        (REGION.into(), OLD_AMI.into()),
        Described::Found {
            owner: RED_HAT_OWNER.into(),
            name: "rhcos-416.94.202405291527-0-x86_64".into(),
        },
    );
    snapshot(&real_stream(), Some(learned))
}

fn inputs<'a>(
    ms: &'a Value,
    template: &'a Value,
    templates: &'a BTreeMap<String, Value>,
) -> Inputs<'a> {
    Inputs {
        machine_set: ms,
        template: Some(template),
        region: Some(REGION),
        twin_authority: None,
        templates,
        machine_deployments: false,
    }
}

fn decide(inputs: Inputs<'_>, snap: &Snapshot) -> ClusterApiDecision {
    let d = cluster_api::decide(&inputs, snap);
    if d.reason != ClusterApiReason::Repointed {
        assert!(d.patch.0.is_empty(), "{}: {:?}", d.message, d.patch);
    }
    d
}

fn applied(object: &Value, d: &ClusterApiDecision) -> Value {
    let mut out = object.clone();
    json_patch::patch(&mut out, &d.patch.to_json_patch().unwrap()).unwrap();
    out
}

#[test]
fn cluster_api_aws_an_old_ami_is_cloned_then_the_reference_moves() {
    let _parallel = support::parallel();
    let (template, ms) = aws();
    let snap = aws_snapshot();
    let none = BTreeMap::new();
    let d = decide(inputs(&ms, &template, &none), &snap);
    assert_eq!(d.reason, ClusterApiReason::CloneAwaited, "{}", d.message);
    assert_eq!(d.platform, Some("AWS"));
    assert_eq!(d.current.as_deref(), Some(OLD_AMI));
    assert_eq!(d.target.as_deref(), Some(stream_ami().as_str()));
    let clone = d.clone.clone().unwrap();
    assert!(
        clone.name.starts_with("ci-ln-x7k2p-worker-us-east-1a-"),
        "{}",
        clone.name
    );
    assert!(clone.name.len() <= 63);
    // Only the image differs from the source's spec; the marker and the source are recorded.
    let mut expected = template["spec"].clone();
    expected["template"]["spec"]["ami"] = json!({"id": stream_ami()});
    assert_eq!(clone.object["spec"], expected);
    assert_eq!(clone.object["kind"], template["kind"]);
    assert_eq!(clone.object["apiVersion"], template["apiVersion"]);
    let meta = &clone.object["metadata"];
    assert_eq!(meta["name"], json!(clone.name));
    assert_eq!(meta["namespace"], json!("openshift-cluster-api"));
    assert_eq!(meta["labels"][CLONE_LABEL], json!("true"));
    assert_eq!(
        meta["labels"]["machine.openshift.io/cluster-api-machineset"],
        json!("ci-ln-x7k2p-worker-us-east-1a")
    );
    assert_eq!(
        meta["annotations"][SOURCE_ANNOTATION],
        template["metadata"]["name"]
    );

    // Once it exists, the MachineSet is repointed, and its image recorded.
    let made = BTreeMap::from([(clone.name.clone(), clone.object.clone())]);
    let d = decide(inputs(&ms, &template, &made), &snap);
    assert_eq!(d.reason, ClusterApiReason::Repointed, "{}", d.message);
    let moved = applied(&ms, &d);
    assert_eq!(
        moved.pointer(INFRASTRUCTURE_REF_NAME),
        Some(&json!(clone.name))
    );
    assert_eq!(
        moved["metadata"]["annotations"][BOOT_IMAGE_ANNOTATION],
        json!(stream_ami())
    );
    let mut rest = moved.clone();
    rest["spec"]["template"]["spec"]["infrastructureRef"]["name"] =
        ms["spec"]["template"]["spec"]["infrastructureRef"]["name"].clone();
    rest["metadata"]["annotations"]
        .as_object_mut()
        .unwrap()
        .remove(BOOT_IMAGE_ANNOTATION);
    assert_eq!(rest, ms, "nothing else moves");

    // A template of that name that is not the clone is never pointed at.
    let mut unmarked = clone.object.clone();
    unmarked["metadata"]["labels"]
        .as_object_mut()
        .unwrap()
        .remove(CLONE_LABEL);
    let mut other_ami = clone.object.clone();
    other_ami["spec"]["template"]["spec"]["ami"]["id"] = json!("ami-0badc0ffee0000000");
    for squatter in [unmarked, other_ami] {
        let taken = BTreeMap::from([(clone.name.clone(), squatter)]);
        let d = decide(inputs(&ms, &template, &taken), &snap);
        assert_eq!(d.reason, ClusterApiReason::CloneNameTaken, "{}", d.message);
    }

    // On the clone, it is up to date: a second pass changes nothing.
    let d = decide(inputs(&moved, &clone.object, &made), &snap);
    assert_eq!(
        d.reason,
        ClusterApiReason::Decided(Reason::UpToDate),
        "{}",
        d.message
    );
    assert!(d.clone.is_none());
}

#[test]
fn cluster_api_only_our_clones_nobody_keeps_are_retired() {
    let _parallel = support::parallel();
    let (template, ms) = aws();
    let snap = aws_snapshot();
    let none = BTreeMap::new();
    let clone = decide(inputs(&ms, &template, &none), &snap).clone.unwrap();
    let source = template["metadata"]["name"].as_str().unwrap().to_owned();
    let templates = BTreeMap::from([
        (source.clone(), template.clone()),
        (clone.name.clone(), clone.object.clone()),
    ]);
    let keep = |names: &[&str]| names.iter().map(|n| n.to_string()).collect();
    // Unused, the source is not ours: only the clone goes.
    assert_eq!(
        cluster_api::retired(&templates, &keep(&[])),
        [clone.name.as_str()]
    );
    assert!(cluster_api::retired(&templates, &keep(&[&clone.name])).is_empty());
}

#[test]
fn cluster_api_the_clone_name_is_its_content() {
    let _parallel = support::parallel();
    let (template, ms) = aws();
    let snap = aws_snapshot();
    let none = BTreeMap::new();
    let a = decide(inputs(&ms, &template, &none), &snap).clone.unwrap();
    let mut reordered = template.clone();
    let spec = reordered["spec"]["template"]["spec"]
        .as_object_mut()
        .unwrap();
    let keys: Vec<String> = spec.keys().rev().cloned().collect();
    let rev: serde_json::Map<String, Value> =
        keys.iter().map(|k| (k.clone(), spec[k].clone())).collect();
    *spec = rev;
    let b = decide(inputs(&ms, &reordered, &none), &snap).clone.unwrap();
    assert_eq!(a.name, b.name, "the same content, in another order");
    let mut bigger = template.clone();
    bigger["spec"]["template"]["spec"]["instanceType"] = json!("m6i.2xlarge");
    let c = decide(inputs(&ms, &bigger, &none), &snap).clone.unwrap();
    assert_ne!(a.name, c.name, "other content, another name");
}

#[test]
fn cluster_api_openstack_moves_to_the_imported_image_once_it_is_usable() {
    let _parallel = support::parallel();
    let (template, ms) = pair("cluster-api/openstack-worker.assembled.yaml");
    let release = real_stream()["architectures"]["x86_64"]["artifacts"]["openstack"]["release"]
        .as_str()
        .unwrap()
        .to_owned();
    let ours = openstack::image_name("ostest-x7k2p", &release);
    let with = |usable: &[&str]| {
        let base = snapshot(&real_stream(), None);
        let mut cluster = base.cluster.clone();
        cluster.infrastructure_name = Some("ostest-x7k2p".into());
        cluster.learned = Learned::default().with_openstack(OpenStackLearned {
            images: usable.iter().map(|i| (*i).to_owned()).collect(),
            ..OpenStackLearned::default()
        });
        Snapshot::new(base.boot_images.clone(), cluster)
    };
    let none = BTreeMap::new();
    let openstack_inputs = Inputs {
        region: None,
        ..inputs(&ms, &template, &none)
    };
    let d = decide(openstack_inputs, &with(&[]));
    assert_eq!(
        d.reason,
        ClusterApiReason::Decided(Reason::ImageNotImported),
        "{}",
        d.message
    );
    assert!(d.clone.is_none());
    let d = decide(openstack_inputs, &with(&[&ours]));
    assert_eq!(d.reason, ClusterApiReason::CloneAwaited, "{}", d.message);
    assert_eq!(d.platform, Some("OpenStack"));
    assert_eq!(d.current.as_deref(), Some("ostest-x7k2p-rhcos"));
    let clone = d.clone.unwrap();
    let mut expected = template["spec"].clone();
    expected["template"]["spec"]["image"]["filter"]["name"] = json!(ours);
    assert_eq!(clone.object["spec"], expected);
}

#[test]
fn cluster_api_what_is_left_alone_says_why() {
    let _parallel = support::parallel();
    let (template, ms) = aws();
    let snap = aws_snapshot();
    let none = BTreeMap::new();
    let base = inputs(&ms, &template, &none);
    let reason = |i: Inputs<'_>, snap: &Snapshot| decide(i, snap).reason;

    let mut owned = ms.clone();
    owned["metadata"]["ownerReferences"] = json!([{
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment",
        "name": "workers", "uid": "6d1e0f6c-0000-4000-8000-000000000001", "controller": true
    }]);
    let d = decide(
        Inputs {
            machine_set: &owned,
            ..base
        },
        &snap,
    );
    assert_eq!(d.reason, ClusterApiReason::MachineDeploymentOwned);
    assert!(
        d.message.contains("MachineDeployment workers"),
        "{}",
        d.message
    );
    let opted_in = Inputs {
        machine_set: &owned,
        machine_deployments: true,
        ..base
    };
    assert_eq!(reason(opted_in, &snap), ClusterApiReason::CloneAwaited);
    // A Cluster owning it (as the MachineSet controller makes it) is no MachineDeployment.
    let mut by_cluster = ms.clone();
    by_cluster["metadata"]["ownerReferences"] = json!([{
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
        "name": "ci-ln-x7k2p", "uid": "6d1e0f6c-0000-4000-8000-000000000002"
    }]);
    assert_eq!(
        reason(
            Inputs {
                machine_set: &by_cluster,
                ..base
            },
            &snap
        ),
        ClusterApiReason::CloneAwaited
    );

    for (api, expected) in [
        ("MachineAPI", ClusterApiReason::MachineAPIAuthoritative),
        ("Migrating", ClusterApiReason::MachineAPIAuthoritative),
        ("ClusterAPI", ClusterApiReason::CloneAwaited),
    ] {
        let i = Inputs {
            twin_authority: Some(api),
            ..base
        };
        assert_eq!(reason(i, &snap), expected, "twin {api}");
    }

    let mut out = ms.clone();
    out["metadata"]["labels"][OPT_OUT_LABEL] = json!("false");
    assert_eq!(
        reason(
            Inputs {
                machine_set: &out,
                ..base
            },
            &snap
        ),
        ClusterApiReason::OptedOut
    );
    let mut out = template.clone();
    out["metadata"]["labels"][OPT_OUT_LABEL] = json!("false");
    assert_eq!(
        reason(
            Inputs {
                template: Some(&out),
                ..base
            },
            &snap
        ),
        ClusterApiReason::OptedOut
    );

    assert_eq!(
        reason(
            Inputs {
                template: None,
                ..base
            },
            &snap
        ),
        ClusterApiReason::TemplateMissing
    );
    let mut eks = template.clone();
    eks["spec"]["template"]["spec"]["ami"]["eksLookupType"] = json!("AmazonLinux");
    assert_eq!(
        reason(
            Inputs {
                template: Some(&eks),
                ..base
            },
            &snap
        ),
        ClusterApiReason::UnsupportedTemplate
    );
    let mut gcp = ms.clone();
    gcp["spec"]["template"]["spec"]["infrastructureRef"]["kind"] = json!("GCPMachineTemplate");
    assert_eq!(
        reason(
            Inputs {
                machine_set: &gcp,
                ..base
            },
            &snap
        ),
        ClusterApiReason::UnsupportedTemplate
    );
    let mut mapi = ms.clone();
    mapi["apiVersion"] = json!("machine.openshift.io/v1beta1");
    assert_eq!(
        reason(
            Inputs {
                machine_set: &mapi,
                ..base
            },
            &snap
        ),
        ClusterApiReason::NotApplicable
    );
}

#[test]
fn cluster_api_the_machine_api_rules_decide_the_target() {
    let _parallel = support::parallel();
    let (template, ms) = aws();
    let none = BTreeMap::new();
    let base = inputs(&ms, &template, &none);
    let reason = |i: Inputs<'_>, snap: &Snapshot| decide(i, snap).reason;
    let decided = |r| ClusterApiReason::Decided(r);

    // The gate.
    let open = aws_snapshot();
    let mut cluster = open.cluster.clone();
    cluster.gate = Gate::closed("a master is still updating");
    let closed = Snapshot::new(open.boot_images.clone(), cluster);
    assert_eq!(reason(base, &closed), decided(Reason::UpgradeInProgress));
    // EC2 has not said whose the AMI is.
    let unknown = snapshot(&real_stream(), None);
    assert_eq!(reason(base, &unknown), decided(Reason::AMIUnclassified));
    // No region: no AMI to take.
    let no_region = Inputs {
        region: None,
        ..base
    };
    assert_eq!(reason(no_region, &open), ClusterApiReason::RegionUnknown);
    // A stream the ConfigMap does not carry.
    let mut rhel10 = ms.clone();
    rhel10["metadata"]["labels"][OS_STREAM_LABEL] = json!("rhel-10");
    assert_eq!(
        reason(
            Inputs {
                machine_set: &rhel10,
                ..base
            },
            &open
        ),
        decided(Reason::UnsupportedOSStream)
    );
    // Windows machines are not ours.
    let mut windows = ms.clone();
    windows["spec"]["template"]["metadata"]["labels"]["machine.openshift.io/os-id"] =
        json!("Windows");
    assert_eq!(
        reason(
            Inputs {
                machine_set: &windows,
                ..base
            },
            &open
        ),
        decided(Reason::Windows)
    );
    // The AMI selected by no id.
    let mut no_id = template.clone();
    no_id["spec"]["template"]["spec"]
        .as_object_mut()
        .unwrap()
        .remove("ami");
    assert_eq!(
        reason(
            Inputs {
                template: Some(&no_id),
                ..base
            },
            &open
        ),
        decided(Reason::NoAMIID)
    );
}

/// A value for a field: absent, null, a wrong type, or a string the rules may meet.
fn field_value() -> impl proptest::strategy::Strategy<Value = Option<Value>> {
    use proptest::prelude::*;
    prop_oneof![
        Just(None),
        Just(Some(Value::Null)),
        Just(Some(json!(7))),
        Just(Some(json!({"id": OLD_AMI}))),
        Just(Some(json!(["a"]))),
        "[a-z0-9.-]{0,12}".prop_map(|s| Some(json!(s))),
        Just(Some(json!(OLD_AMI))),
    ]
}

/// Where the field goes: the fields the decision reads, in the MachineSet and the template.
const POINTERS: [(bool, &str); 8] = [
    (true, "/spec/template/spec/infrastructureRef/kind"),
    (true, "/spec/template/spec/infrastructureRef/apiGroup"),
    (true, "/metadata/annotations"),
    (true, "/metadata/ownerReferences"),
    (true, "/spec/template/spec/bootstrap/dataSecretName"),
    (false, "/spec/template/spec/ami"),
    (false, "/spec/template/spec/ami/id"),
    (false, "/metadata/labels"),
];

fn put(object: &mut Value, pointer: &str, value: Option<Value>) {
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    if let Some(Value::Object(map)) = object.pointer_mut(parent) {
        match value {
            Some(v) => map.insert(key.to_owned(), v),
            None => map.remove(key),
        };
    }
}

/// Built once: the snapshot parses the whole stream.
static SNAPSHOT: std::sync::LazyLock<Snapshot> = std::sync::LazyLock::new(aws_snapshot);

proptest::proptest! {
    #![proptest_config(proptest::test_runner::Config {
        cases: 64,
        failure_persistence: None,
        ..proptest::test_runner::Config::default()
    })]

    /// Never panics and always says why; a clone differs from its source only in the image,
    /// and the patch moves nothing but the reference and the recorded image.
    #[test]
    fn cluster_api_any_input_is_decided_and_only_the_image_moves(
        edits in proptest::collection::vec((0..POINTERS.len(), field_value()), 0..4),
        made in proptest::bool::ANY,
    ) {
        let _parallel = support::parallel();
        let (mut template, mut ms) = aws();
        for (i, value) in edits {
            let (on_ms, pointer) = POINTERS[i];
            put(if on_ms { &mut ms } else { &mut template }, pointer, value);
        }
        let snap = &*SNAPSHOT;
        let none = BTreeMap::new();
        let first = cluster_api::decide(&inputs(&ms, &template, &none), snap);
        proptest::prop_assert!(!first.message.is_empty());
        let Some(clone) = first.clone.clone() else {
            proptest::prop_assert!(first.patch.0.is_empty());
            return Ok(());
        };
        let mut source = template["spec"].clone();
        source["template"]["spec"]["ami"] = clone.object["spec"]["template"]["spec"]["ami"].clone();
        proptest::prop_assert_eq!(&clone.object["spec"], &source);
        let templates = if made {
            BTreeMap::from([(clone.name.clone(), clone.object.clone())])
        } else {
            none
        };
        let d = cluster_api::decide(&inputs(&ms, &template, &templates), snap);
        for op in &d.patch.0 {
            proptest::prop_assert!(
                op.path == INFRASTRUCTURE_REF_NAME || op.path.starts_with("/metadata/annotations"),
                "{}", op.path
            );
        }
        proptest::prop_assert_eq!(d.patch.0.is_empty(), d.reason != ClusterApiReason::Repointed);
    }
}
