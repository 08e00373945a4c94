//! The decision's reasons and what they say (behaviour §4, §5): invalid providerSpecs
//! reported, unknown fields kept, every reason code reachable, every fixture decided, the
//! log line in the MCO's words, and a writer that keeps reverting the image. Every patch is
//! checked as in tests/support/decision.rs.

use crate::support;

use std::collections::BTreeSet;

use bootimage_webhook::core::decision::{self, BOOT_IMAGE_ANNOTATION, Reason};
use bootimage_webhook::core::platforms::aws::{self, AwsLearned, Described};
use bootimage_webhook::core::platforms::vsphere;
use bootimage_webhook::core::snapshot::{Gate, Learned, Snapshot, Stub, Stubs};
use serde_json::{Value, json};
use support::decision::*;
use support::{CURRENT_X86, azure_ms, decide_update, fixture, offline_snapshot, stream_ami};

#[test]
fn invalid_provider_specs_are_reported_not_touched() {
    let _parallel = support::parallel();
    let snap = offline_snapshot();
    let cases: [(&str, Value); 6] = [
        (
            "/spec/template/spec/providerSpec/value",
            json!("GCPMachineProviderSpec"),
        ),
        (
            "/spec/template/spec/providerSpec/value/disks",
            json!({"boot": true}),
        ),
        (
            "/spec/template/spec/providerSpec/value/disks/0",
            json!("pd-ssd"),
        ),
        (
            "/spec/template/spec/providerSpec/value/disks/0/image",
            json!(42),
        ),
        (
            "/spec/template/spec/providerSpec/value/disks/0/image",
            json!({"name": "x"}),
        ),
        (
            "/spec/template/spec/providerSpec/value/disks/0/boot",
            json!("yes"),
        ),
    ];
    for (pointer, value) in cases {
        let mut ms = gcp_ms();
        set(&mut ms, pointer, value.clone());
        let d = expect(&ms, &snap, Reason::InvalidProviderSpec);
        assert!(!d.message.is_empty(), "{pointer}={value}");
    }
}

#[test]
fn unknown_fields_survive_byte_for_byte_semantics() {
    let _parallel = support::parallel();
    // A providerSpec full of fields this project has never heard of, in odd shapes.
    let mut ms = gcp_ms();
    let spec = &mut ms["spec"]["template"]["spec"]["providerSpec"]["value"];
    spec["confidentialCompute"] = json!("IntelTrustedDomainExtensions");
    spec["futureField"] = json!({"nested": [1, 2.5, {"deep": null}], "unicode": "ünïcödé ✓ <&>", "big": 12345678901234567890u64, "neg": -0.0, "exp": 1e300});
    spec["resourceManagerTags"] =
        json!([{"parentID": "organizations/1", "key": "k", "value": "v"}]);
    spec["disks"][0]["encryptionKey"] =
        json!({"kmsKey": {"name": "k", "keyRing": "r"}, "kmsKeyServiceAccount": ""});
    spec["disks"][0]["x-unknown"] = json!([[], {}, "", 0]);
    spec["disks"].as_array_mut().unwrap().push(json!({"boot": false, "image": "projects/me/global/images/data", "sizeGb": 10, "mystery": true}));
    ms["status"] =
        json!({"replicas": 3, "observedGeneration": 7, "authoritativeAPI": "MachineAPI"});
    ms["metadata"]["annotations"] = json!({"a/b~c": "1", "machine.openshift.io/memoryMb": "16384"});
    ms["metadata"]["managedFields"] = json!([{"manager": "m", "fieldsV1": {"f:spec": {}}}]);
    let snap = offline_snapshot();
    let d = decision::decide_object(&ms, &snap);
    let out = apply_checked(&ms, &d, &snap);
    assert_eq!(out["metadata"]["annotations"]["a/b~c"], "1");
    // With an annotations map present the annotation is one escaped add.
    let last = serde_json::to_value(d.patch.0.last().unwrap()).unwrap();
    assert_eq!(
        last["path"],
        "/metadata/annotations/bootimages.machineconfiguration.openshift.io~1boot-image"
    );
}

#[test]
fn annotation_shapes() {
    let _parallel = support::parallel();
    let snap = offline_snapshot();
    // A stale annotation is replaced; a null map is replaced by a map.
    let mut stale = gcp_ms();
    annotate(&mut stale, BOOT_IMAGE_ANNOTATION, OLD_X86);
    let d = expect(&stale, &snap, Reason::Updated);
    assert_eq!(
        serde_json::to_value(&d.patch.0[1]).unwrap()["op"],
        "replace"
    );
    let mut null = gcp_ms();
    null["metadata"]["annotations"] = Value::Null;
    expect(&null, &snap, Reason::Updated);
}

#[test]
fn every_reason_code_is_reachable() {
    let _parallel = support::parallel();
    // One input per reason; together they must cover Reason::ALL.
    let snap = offline_snapshot();
    for (case, reason) in cloud_cases() {
        let d = decision::decide_object(&case, &snap);
        assert_eq!(d.reason, reason, "{}", d.message);
    }
    let seen: BTreeSet<Reason> = one_input_per_reason()
        .iter()
        .map(|(ms, snap)| decision::decide_object(ms, snap).reason)
        .collect();
    let all: BTreeSet<Reason> = Reason::ALL.into_iter().collect();
    assert_eq!(
        seen,
        all,
        "missing: {:?}",
        all.difference(&seen).collect::<Vec<_>>()
    );
}

/// A MachineSet and a snapshot for each reason code, from the rules' order: the GCP
/// fixture edited, the other clouds' fixtures, and snapshots that close the gate or hold
/// what the background learned.
fn one_input_per_reason() -> Vec<(Value, Snapshot)> {
    let mut inputs = inputs_up_to_the_platform_rule();
    inputs.extend(inputs_from_the_platform_rule_on());
    inputs
}

/// Rules 1 to 8: not a MachineSet, opted out, owned, another stream, Windows, not ready,
/// the gate, the architecture, the platform.
fn inputs_up_to_the_platform_rule() -> Vec<(Value, Snapshot)> {
    let snap = offline_snapshot();
    let mut inputs = Vec::new();
    let mut check = |ms: Value, snap: &Snapshot| inputs.push((ms, snap.clone()));
    let with = |f: &dyn Fn(&mut Value)| {
        let mut ms = gcp_ms();
        f(&mut ms);
        ms
    };
    check(json!({"kind": "Pod"}), &snap);
    check(with(&|m| label(m, decision::OPT_OUT_LABEL, "false")), &snap);
    check(
        with(&|m| m["metadata"]["ownerReferences"] = json!([{"kind": "K", "name": "n"}])),
        &snap,
    );
    check(
        with(&|m| m["status"] = json!({"authoritativeAPI": "Migrating"})),
        &snap,
    );
    check(
        with(&|m| label(m, decision::OS_STREAM_LABEL, "rhel-10")),
        &snap,
    );
    check(
        with(&|m| {
            m["spec"]["template"]["metadata"]["labels"][decision::OS_ID_LABEL] = json!("Windows")
        }),
        &snap,
    );
    check(gcp_ms(), &snap_with(|c| c.gate = Gate::closed("x")));
    check(gcp_ms(), &Snapshot::empty());
    check(
        with(&|m| annotate(m, decision::ARCH_ANNOTATION, "kubernetes.io/arch=sparc")),
        &snap,
    );
    check(gcp_ms(), &snap_with(|c| c.multi_arch = true));
    check(
        fixture("machineset-aws-build01-ci-tests-worker-us-east-1a.yaml"),
        &snap,
    );
    check(
        with(&|m| {
            m["spec"]["template"]["spec"]["providerSpec"]["value"]["kind"] =
                json!("IBMCloudMachineProviderSpec")
        }),
        &snap,
    );
    inputs
}

/// Rules 8 to 12: each cloud's own reasons, the stub Ignition, a revert loop, the outcome.
fn inputs_from_the_platform_rule_on() -> Vec<(Value, Snapshot)> {
    let mut inputs = inputs_for_the_platform_rules();
    inputs.extend(inputs_for_the_stub_and_the_outcome());
    inputs
}

/// The GCP fixture with `f` applied.
fn gcp_with(f: &dyn Fn(&mut Value)) -> Value {
    let mut ms = gcp_ms();
    f(&mut ms);
    ms
}

/// Rules 8 and 9, the clouds' side: vSphere without and with its failure domains, a
/// marketplace AMI, each cloud's own reasons, an architecture the stream lacks, an image
/// that is not RHCOS.
fn inputs_for_the_platform_rules() -> Vec<(Value, Snapshot)> {
    let snap = offline_snapshot();
    let mut inputs = Vec::new();
    let mut check = |ms: Value, snap: &Snapshot| inputs.push((ms, snap.clone()));
    // vSphere: no Infrastructure offline (NoFailureDomain), then its failure domains with
    // nothing imported (TemplateNotImported).
    let vsphere = support::example("machineset-vsphere.yaml");
    check(vsphere.clone(), &snap);
    check(
        vsphere,
        &snap_with(|c| {
            c.vsphere = vsphere::infra(&support::example("infrastructure-vsphere.yaml"))
                .map(std::sync::Arc::new)
        }),
    );
    // OpenStack: the image not imported yet (ImageNotImported), and its ControlPlaneMachineSet
    // left alone.
    let openstack = support::example("machineset-openstack.yaml");
    let on_openstack = snap_with(|c| c.infrastructure_name = Some("ostest-x7k2p".into()));
    check(openstack.clone(), &on_openstack);
    check(
        json!({"apiVersion": "machine.openshift.io/v1", "kind": "ControlPlaneMachineSet",
            "metadata": {"name": "cluster", "namespace": "openshift-machine-api"},
            "spec": {"template": {"machineType": "machines_v1beta1_machine_openshift_io",
                "machines_v1beta1_machine_openshift_io": {"metadata": {},
                    "spec": openstack["spec"]["template"]["spec"].clone()}}}}),
        &on_openstack,
    );
    // A marketplace AMI whose product has no image at or below the stream's version, and
    // the same without --aws-marketplace.
    let (aws, learned) = a_marketplace_ami_without_an_image();
    check(aws.clone(), &learned);
    let mut cluster = learned.cluster.clone();
    cluster.aws_marketplace = false;
    check(aws, &Snapshot::new(learned.boot_images.clone(), cluster));
    for (case, _) in cloud_cases() {
        check(case, &snap);
    }
    // An imported image not there yet, and a control plane whose operator compares the
    // providerSpec whole (Nutanix's, as OpenStack's).
    let nutanix = support::example("machineset-nutanix.yaml");
    let with_id = snap_with(|c| c.infrastructure_name = Some("ntnx-x7k2p".into()));
    check(nutanix.clone(), &with_id);
    let cpms = json!({"apiVersion": "machine.openshift.io/v1", "kind": "ControlPlaneMachineSet",
        "metadata": {"name": "cluster", "namespace": "openshift-machine-api"},
        "spec": {"replicas": 3, "state": "Active", "template": {
            "machineType": "machines_v1beta1_machine_openshift_io",
            "machines_v1beta1_machine_openshift_io":
                {"metadata": {}, "spec": nutanix["spec"]["template"]["spec"]}}}});
    check(cpms, &with_id);
    check(
        gcp_with(&|m| annotate(m, decision::ARCH_ANNOTATION, "kubernetes.io/arch=s390x")),
        &snap,
    );
    check(
        gcp_with(&|m| {
            set(
                m,
                "/spec/template/spec/providerSpec/value/disks/0/image",
                json!("projects/x/global/images/y"),
            )
        }),
        &snap,
    );
    inputs
}

/// Rules 10 to 12 and the rest of 9: the user-data Secret's stub Ignition in each state
/// and outside the grant, then the GCP MachineSet updated, already up to date, with disks
/// that are not an array or hold no boot disk, and in a revert loop.
fn inputs_for_the_stub_and_the_outcome() -> Vec<(Value, Snapshot)> {
    let snap = offline_snapshot();
    let mut inputs = Vec::new();
    let mut check = |ms: Value, snap: &Snapshot| inputs.push((ms, snap.clone()));
    for stub in [
        Some(Stub::Version("2.2.0".into())),
        Some(Stub::Missing),
        Some(Stub::Unreadable("x".into())),
        None,
    ] {
        check(
            gcp_ms(),
            &snap_with(|c| c.stubs = Stubs::learned(stub.map(|s| ("worker-user-data", s)))),
        );
    }
    check(
        gcp_ms(),
        &snap_with(|c| c.stubs = Stubs::learned([]).granting(["master-user-data"])),
    );
    check(gcp_ms(), &snap);
    check(
        gcp_with(&|m| {
            set(
                m,
                "/spec/template/spec/providerSpec/value/disks/0/image",
                json!(CURRENT_X86),
            )
        }),
        &snap,
    );
    check(
        gcp_with(&|m| set(m, "/spec/template/spec/providerSpec/value/disks", json!(7))),
        &snap,
    );
    check(
        gcp_with(&|m| set(m, "/spec/template/spec/providerSpec/value/disks", json!([]))),
        &snap,
    );
    check(
        gcp_with(&|m| {
            annotate(
                m,
                decision::REVERTS_ANNOTATION,
                &format!("{} {CURRENT_X86}", decision::REVERT_LIMIT + 1),
            )
        }),
        &snap,
    );
    inputs
}

/// The AWS fixture on a marketplace AMI whose product EC2 lists no image for, and a
/// snapshot that knows it.
fn a_marketplace_ami_without_an_image() -> (Value, Snapshot) {
    let aws = fixture("machineset-aws-build01-ci-tests-worker-us-east-1a.yaml");
    let ami = aws["spec"]["template"]["spec"]["providerSpec"]["value"]["ami"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let product = "59ead7de-2540-4653-a8b0-fa7926d5c845";
    let mut learned = AwsLearned::default();
    learned.images.insert(
        ("us-east-1".into(), ami),
        Described::Found {
            owner: aws::MARKETPLACE_OWNER.into(),
            name: format!("RHEL-9.4-RHCOS-9.6_HVM_GA-20260210-x86_64-0-{product}"),
        },
    );
    learned
        .marketplace
        .insert(("us-east-1".into(), product.into()), Vec::new());
    (
        aws,
        snap_with(|c| {
            c.learned = Learned::default().with_aws(learned);
            c.aws_marketplace = true;
        }),
    )
}

#[test]
fn every_fixture_machineset_is_decided_without_panic() {
    let _parallel = support::parallel();
    let snap = offline_snapshot();
    for name in [
        "machineset-gcp-build02-infra-a.yaml",
        "machineset-gcp.openshift-docs-sample.rendered.yaml",
        "machineset-aws-build01-ci-tests-worker-us-east-1a.yaml",
        "machineset-azure.openshift-docs-sample.rendered.yaml",
    ] {
        let ms = fixture(name);
        let d = decision::decide_object(&ms, &snap);
        if d.reason == Reason::Updated {
            apply_checked(&ms, &d, &snap);
        }
    }
}

#[test]
fn the_docs_sample_with_placeholders_is_left_alone() {
    let _parallel = support::parallel();
    // The docs sample's image is `<path_to_image>`: not an RHCOS image.
    let d = decision::decide_object(
        &fixture("machineset-gcp.openshift-docs-sample.rendered.yaml"),
        &offline_snapshot(),
    );
    assert_eq!(d.reason, Reason::CustomImage, "{}", d.message);
}

/// One AWS or Azure MachineSet per cloud-specific reason, from the real fixtures.
fn cloud_cases() -> Vec<(Value, Reason)> {
    let aws = fixture("machineset-aws-build01-ci-tests-worker-us-east-1a.yaml");
    let azure = azure_ms();
    let aws_with = |f: &dyn Fn(&mut Value)| {
        let mut m = aws.clone();
        f(&mut m["spec"]["template"]["spec"]["providerSpec"]["value"]);
        m
    };
    let azure_with = |f: &dyn Fn(&mut Value)| {
        let mut m = azure.clone();
        f(&mut m["spec"]["template"]["spec"]["providerSpec"]["value"]);
        m
    };
    let mut ppc = azure.clone();
    annotate(
        &mut ppc,
        decision::ARCH_ANNOTATION,
        "kubernetes.io/arch=ppc64le",
    );
    vec![
        (
            aws_with(&|s| s["ami"] = json!({"arn": "arn:aws:ec2:us-east-1::image/ami-1"})),
            Reason::NoAMIID,
        ),
        (
            aws_with(&|s| {
                s["ami"]["id"] = json!(stream_ami("us-east-1"));
                s["placement"]["region"] = json!("mars-north-1");
            }),
            Reason::RegionNotInStream,
        ),
        (aws.clone(), Reason::AMIUnclassified),
        (
            azure_with(&|s| {
                s["securityProfile"] = json!({"settings": {"securityType": "ConfidentialVM"}})
            }),
            Reason::SecurityTypeUnsupported,
        ),
        (ppc, Reason::UnsupportedArchitecture),
        (
            azure_with(&|s| {
                s["image"] = json!({"publisher": "me", "offer": "mine", "sku": "1", "version": "1"})
            }),
            Reason::CustomImage,
        ),
    ]
}

/// The decision line's message in the MCO's words, so that grepping the
/// logs for a MachineSet's name tells its story.
#[test]
fn the_log_message_reads_like_the_mco() {
    let _parallel = support::parallel();
    let snap = offline_snapshot();
    let d = expect(&gcp_ms(), &snap, Reason::Updated);
    assert_eq!(
        d.story("infra-a"),
        format!(
            "Reconciling machineset infra-a on GCP, with arch x86_64; New target boot image: {CURRENT_X86}; Current image: {OLD_X86}; Patching machineset infra-a"
        )
    );
    let mut current = gcp_ms();
    set(
        &mut current,
        "/spec/template/spec/providerSpec/value/disks/0/image",
        json!(CURRENT_X86),
    );
    let d = expect(&current, &snap, Reason::UpToDate);
    assert_eq!(
        d.story("infra-a"),
        format!(
            "Reconciling machineset infra-a on GCP, with arch x86_64; New target boot image: {CURRENT_X86}; Current image: {CURRENT_X86}; No patching required for machineset infra-a"
        )
    );
    // A skip before any platform is known says why, in our words after the MCO's.
    let mut opted = gcp_ms();
    label(&mut opted, decision::OPT_OUT_LABEL, "false");
    let d = expect(&opted, &snap, Reason::OptedOut);
    assert_eq!(
        d.story("infra-a"),
        format!(
            "No patching required for machineset infra-a: OptedOut: label {}=false",
            decision::OPT_OUT_LABEL
        )
    );
    // A platform skip names the platform and arch too.
    let mut custom = gcp_ms();
    set(
        &mut custom,
        "/spec/template/spec/providerSpec/value/disks/0/image",
        json!("projects/x/global/images/y"),
    );
    let d = expect(&custom, &snap, Reason::CustomImage);
    let story = d.story("infra-a");
    assert!(
        story.starts_with("Reconciling machineset infra-a on GCP, with arch x86_64; ")
            && story.contains("No patching required for machineset infra-a: CustomImage: "),
        "{story}"
    );
}

/// An actor writes the old image back 5 times: exactly 3 re-mutations,
/// then its writes stand, the toucher plans nothing and reports one loop.
#[test]
fn a_revert_loop_is_re_mutated_three_times_then_left_alone() {
    let _parallel = support::parallel();
    let snap = offline_snapshot();
    let image = "/spec/template/spec/providerSpec/value/disks/0/image";
    // Created stale; the webhook moves it.
    let created = gcp_ms();
    let d = decision::decide_object(&created, &snap);
    assert_eq!(d.reason, Reason::Updated);
    let mut stored = applied(&created, &d);
    assert_eq!(stored.pointer(image), Some(&json!(CURRENT_X86)));
    let mut reasons = Vec::new();
    for _ in 0..5 {
        // The other writer puts the old image back (annotations as stored).
        let mut write = stored.clone();
        set(&mut write, image, json!(OLD_X86));
        let d = decide_update(&write, &stored, &snap);
        reasons.push(d.reason);
        stored = applied(&write, &d);
    }
    use Reason::{RevertLoop, Updated};
    assert_eq!(reasons, [Updated, Updated, Updated, RevertLoop, RevertLoop]);
    assert_eq!(
        stored.pointer(image),
        Some(&json!(OLD_X86)),
        "the writes stand"
    );
    assert_eq!(
        stored["metadata"]["annotations"][decision::REVERTS_ANNOTATION],
        json!(format!("4 {CURRENT_X86}"))
    );
    // The toucher: nothing to touch, one loop to report, with the field and the fix.
    let d = decision::decide_object(&stored, &snap);
    assert_eq!(d.reason, RevertLoop);
    assert!(d.patch.0.is_empty(), "recorded already: {:?}", d.patch);
    for words in [
        "spec.template.spec.providerSpec.value.disks[0].image",
        "ignoreDifferences",
        decision::OPT_OUT_LABEL,
    ] {
        assert!(d.message.contains(words), "{words}: {}", d.message);
    }
    assert!(!d.message.contains("Hive"), "not Hive's: {}", d.message);
    let list = [stored.clone()];
    assert!(bootimage_webhook::cluster::touch::plan(&list, &snap).is_empty());
    assert_eq!(
        bootimage_webhook::cluster::touch::revert_loops(&list, &snap).len(),
        1
    );
    // A writer that replaces the object without our annotation: still left alone, and the
    // count is written back.
    let mut bare = stored.clone();
    bare["metadata"]["annotations"]
        .as_object_mut()
        .unwrap()
        .remove(decision::REVERTS_ANNOTATION);
    let d = decide_update(&bare, &stored, &snap);
    assert_eq!(d.reason, RevertLoop);
    let again = applied(&bare, &d);
    assert_eq!(again.pointer(image), Some(&json!(OLD_X86)));
    assert_eq!(
        again["metadata"]["annotations"][decision::REVERTS_ANNOTATION],
        json!(format!("4 {CURRENT_X86}"))
    );
    // A new target starts afresh: a count of another target counts for nothing.
    let mut other = stored.clone();
    annotate(
        &mut other,
        decision::REVERTS_ANNOTATION,
        "4 projects/rhcos-cloud/global/images/rhcos-older",
    );
    assert_eq!(decision::decide_object(&other, &snap).reason, Updated);
}

/// A MachineSet Hive made from a MachinePool (its labels, no owner reference) is moved, as
/// the MCO moves it. When the hub's MachinePool carries Hive's override annotation, Hive
/// writes its providerSpec back: the guard catches it, and every message names Hive and the
/// annotation. An owner reference still keeps a MachineSet out.
#[test]
fn a_hive_machineset_moves_and_hives_write_back_is_caught_naming_hive() {
    let _parallel = support::parallel();
    let snap = offline_snapshot();
    let image = "/spec/template/spec/providerSpec/value/disks/0/image";
    let mut hives = gcp_ms();
    label(&mut hives, decision::HIVE_MACHINE_POOL_LABEL, "worker");
    label(&mut hives, "hive.openshift.io/managed", "true");
    let d = decision::decide_object(&hives, &snap);
    assert_eq!(d.reason, Reason::Updated, "{}", d.message);
    let mut stored = applied(&hives, &d);
    assert_eq!(stored.pointer(image), Some(&json!(CURRENT_X86)));
    let mut messages = Vec::new();
    for _ in 0..4 {
        // Hive writes the MachinePool's providerSpec back, the old image in it.
        let mut write = stored.clone();
        set(&mut write, image, json!(OLD_X86));
        let d = decide_update(&write, &stored, &snap);
        messages.push((d.reason, d.message.clone()));
        stored = applied(&write, &d);
    }
    use Reason::{RevertLoop, Updated};
    let reasons: Vec<Reason> = messages.iter().map(|(r, _)| *r).collect();
    assert_eq!(reasons, [Updated, Updated, Updated, RevertLoop]);
    for (_, message) in &messages {
        for words in [
            "Hive",
            "MachinePool \"worker\"",
            decision::HIVE_OVERRIDE_ANNOTATION,
        ] {
            assert!(message.contains(words), "{words}: {message}");
        }
    }
    let given_up = decision::decide_object(&stored, &snap);
    assert_eq!(given_up.reason, RevertLoop);
    assert!(given_up.message.contains(decision::OPT_OUT_LABEL));
    assert!(
        !given_up.message.contains("ignoreDifferences"),
        "{}",
        given_up.message
    );
    // An owner reference still keeps a Hive MachineSet out, as in the MCO.
    hives["metadata"]["ownerReferences"] = json!([{"kind": "MachinePool", "name": "worker"}]);
    assert_eq!(
        decision::decide_object(&hives, &snap).reason,
        Reason::OwnedByController
    );
}

#[test]
fn writes_that_are_not_reverts_are_not_counted() {
    let _parallel = support::parallel();
    let snap = offline_snapshot();
    let image = "/spec/template/spec/providerSpec/value/disks/0/image";
    // A stale MachineSet written again stale (a scale, the toucher's annotation): moved,
    // nothing counted.
    let stale = gcp_ms();
    let mut write = stale.clone();
    annotate(&mut write, decision::TOUCH_ANNOTATION, "x");
    let d = decide_update(&write, &stale, &snap);
    assert_eq!(d.reason, Reason::Updated);
    let after = applied(&write, &d);
    assert!(
        after["metadata"]["annotations"]
            .get(decision::REVERTS_ANNOTATION)
            .is_none()
    );
    // A write that keeps the target: nothing to do.
    let mut write = after.clone();
    annotate(&mut write, decision::TOUCH_ANNOTATION, "y");
    assert_eq!(
        decide_update(&write, &after, &snap).reason,
        Reason::UpToDate
    );
    // A revert on a MachineSet without annotations at all: the map is created once.
    let mut old = after.clone();
    old["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("annotations");
    let mut write = old.clone();
    set(&mut write, image, json!(OLD_X86));
    let d = decide_update(&write, &old, &snap);
    assert_eq!(d.reason, Reason::Updated);
    let moved = applied(&write, &d);
    assert_eq!(moved.pointer(image), Some(&json!(CURRENT_X86)));
    assert_eq!(
        moved["metadata"]["annotations"][decision::REVERTS_ANNOTATION],
        json!(format!("1 {CURRENT_X86}"))
    );
}
