//! The decision, rule by rule and reason by reason (behaviour §4, §5), on real fixtures. Every
//! patch is applied with evanphx/json-patch (the apiserver's library); the result must
//! equal the input but for the boot image(s) and the annotation, and a second pass must
//! give no patch.

mod support;

use std::collections::{BTreeMap, BTreeSet};

use bootimage_webhook::core::decision::{self, BOOT_IMAGE_ANNOTATION, Decision, Reason};
use bootimage_webhook::core::facts;
use bootimage_webhook::core::platforms::aws::{self, AwsLearned, Described};
use bootimage_webhook::core::snapshot::{
    Arch, BootImages, ClusterFacts, Enrollment, Gate, KEY_MCO_RELEASE_IMAGE_VERSION,
    KEY_RELEASE_VERSION, KEY_STREAM, Learned, Snapshot, Stub, Stubs,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::{Value, json};
use support::{
    CURRENT_ARM, CURRENT_X86, azure_ms, cpms_image, decide_update, evanphx, fixture,
    offline_snapshot, stream_ami, without_image_fields,
};

const OLD_X86: &str = "projects/rhcos-cloud/global/images/rhcos-9-6-20250826-1-gcp-x86-64";

/// The real build02 GCP MachineSet (boots rhcos-9-6 on x86_64).
fn gcp_ms() -> Value {
    fixture("machineset-gcp-build02-infra-a.yaml")
}

fn snap_with(f: impl FnOnce(&mut ClusterFacts)) -> Snapshot {
    let base = offline_snapshot();
    let mut cluster = base.cluster.clone();
    f(&mut cluster);
    Snapshot::new(base.boot_images.clone(), cluster)
}

fn set(ms: &mut Value, pointer: &str, value: Value) {
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    let mut cur = &mut *ms;
    for tok in parent.split('/').skip(1) {
        let tok = tok.replace("~1", "/").replace("~0", "~");
        cur = if cur.is_array() {
            &mut cur[tok.parse::<usize>().unwrap()]
        } else {
            cur.as_object_mut().unwrap().entry(tok).or_insert(json!({}))
        };
    }
    let key = key.replace("~1", "/").replace("~0", "~");
    if let Some(a) = cur.as_array_mut() {
        a[key.parse::<usize>().unwrap()] = value;
    } else {
        cur.as_object_mut().unwrap().insert(key, value);
    }
}

fn label(ms: &mut Value, key: &str, value: &str) {
    let labels = ms["metadata"]
        .as_object_mut()
        .unwrap()
        .entry("labels")
        .or_insert(json!({}));
    labels[key] = json!(value);
}

fn annotate(ms: &mut Value, key: &str, value: &str) {
    let ann = ms["metadata"]
        .as_object_mut()
        .unwrap()
        .entry("annotations")
        .or_insert(json!({}));
    ann[key] = json!(value);
}

/// The boot image(s) as the decision names them: GCP boot disks, the AWS AMI id, the
/// Azure marketplace image as a URN.
fn boot_images(ms: &Value) -> Vec<String> {
    let spec = &ms["spec"]["template"]["spec"]["providerSpec"]["value"];
    if let Some(ami) = spec["ami"]["id"].as_str() {
        return vec![ami.to_owned()];
    }
    if spec["image"].is_object() {
        let i = &spec["image"];
        let f = |k: &str| i[k].as_str().unwrap_or("").to_owned();
        return vec![format!(
            "{}:{}:{}:{}",
            f("publisher"),
            f("offer"),
            f("sku"),
            f("version")
        )];
    }
    ms.pointer("/spec/template/spec/providerSpec/value/disks")
        .and_then(Value::as_array)
        .map(|d| {
            d.iter()
                .filter(|d| d["boot"] == json!(true))
                .map(|d| d["image"].as_str().unwrap_or("").to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Apply the decision's patch with evanphx, check what changed and that a second pass is
/// a no-op. Returns the patched MachineSet.
fn apply_checked(ms: &Value, d: &Decision, snap: &Snapshot) -> Value {
    assert_eq!(d.reason, Reason::Updated, "{}", d.message);
    let patch = serde_json::to_value(&d.patch).unwrap();
    let out = evanphx::apply(ms, &patch).unwrap_or_else(|e| panic!("evanphx refused {patch}: {e}"));
    let target = d.target.as_deref().unwrap();
    assert_eq!(
        without_image_fields(&out),
        without_image_fields(ms),
        "only the boot image(s) and the annotation may change; patch {patch}"
    );
    assert!(
        boot_images(&out).iter().all(|i| i == target),
        "{:?}",
        boot_images(&out)
    );
    assert_eq!(
        out["metadata"]["annotations"][BOOT_IMAGE_ANNOTATION],
        json!(target)
    );
    let again = decision::decide_object(&out, snap);
    assert_eq!(
        again.reason,
        Reason::UpToDate,
        "second pass: {}",
        again.message
    );
    assert!(
        again.patch.0.is_empty(),
        "second pass patched: {:?}",
        again.patch
    );
    out
}

fn expect(ms: &Value, snap: &Snapshot, reason: Reason) -> Decision {
    let d = decision::decide_object(ms, snap);
    assert_eq!(d.reason, reason, "message: {}", d.message);
    if reason != Reason::Updated {
        assert!(
            d.patch.0.is_empty(),
            "{reason} must not patch: {:?}",
            d.patch
        );
    } else {
        apply_checked(ms, &d, snap);
    }
    assert!(!d.message.is_empty());
    d
}

#[test]
fn rule_11_updated_on_the_real_machineset() {
    let ms = gcp_ms();
    let snap = offline_snapshot();
    let d = expect(&ms, &snap, Reason::Updated);
    assert_eq!(d.current.as_deref(), Some(OLD_X86));
    assert_eq!(d.target.as_deref(), Some(CURRENT_X86));
    assert_eq!(d.platform, Some("GCP"));
    assert_eq!(d.arch, Some(Arch::Amd64));
    // Minimal: one replace for the disk, one add for the (missing) annotations map.
    let patch = serde_json::to_value(&d.patch).unwrap();
    assert_eq!(
        patch,
        json!([
            {"op": "replace", "path": "/spec/template/spec/providerSpec/value/disks/0/image", "value": CURRENT_X86},
            {"op": "add", "path": "/metadata/annotations", "value": {BOOT_IMAGE_ANNOTATION: CURRENT_X86}}
        ])
    );
}

#[test]
fn rule_11_up_to_date() {
    let mut ms = gcp_ms();
    set(
        &mut ms,
        "/spec/template/spec/providerSpec/value/disks/0/image",
        json!(CURRENT_X86),
    );
    let d = expect(&ms, &offline_snapshot(), Reason::UpToDate);
    assert_eq!(d.current.as_deref(), Some(CURRENT_X86));
}

#[test]
fn rule_1_not_applicable() {
    let snap = offline_snapshot();
    expect(
        &fixture("admissionreview-v1-pod-create.gke.kube-rs.json")["request"]["object"],
        &snap,
        Reason::NotApplicable,
    );
    let mut ms = gcp_ms();
    ms["spec"]["template"]["spec"]["providerSpec"] = json!({});
    expect(&ms, &snap, Reason::NotApplicable);
    ms["spec"]["template"]["spec"]["providerSpec"] = json!({"value": null});
    expect(&ms, &snap, Reason::NotApplicable);
    let mut other_group = gcp_ms();
    other_group["apiVersion"] = json!("cluster.x-k8s.io/v1beta1");
    expect(&other_group, &snap, Reason::NotApplicable);
    for junk in [
        json!(null),
        json!(3),
        json!("MachineSet"),
        json!([]),
        json!({}),
    ] {
        expect(&junk, &snap, Reason::NotApplicable);
    }
}

#[test]
fn rule_2_opt_out_label() {
    let snap = offline_snapshot();
    let mut ms = gcp_ms();
    label(&mut ms, decision::OPT_OUT_LABEL, "false");
    expect(&ms, &snap, Reason::OptedOut);
    // Only "false" opts out.
    label(&mut ms, decision::OPT_OUT_LABEL, "true");
    expect(&ms, &snap, Reason::Updated);
}

#[test]
fn rule_2_machineconfiguration_enrollment() {
    let ms = gcp_ms();
    let none = snap_with(|c| c.enrollment = Enrollment::None);
    expect(&ms, &none, Reason::OptedOut);

    let selector = |v: Value| {
        let ls: LabelSelector = serde_json::from_value(v).unwrap();
        Enrollment::Partial(ls.try_into().unwrap())
    };
    // The selector reads the MachineSet's own labels (build02 has cluster-api-cluster).
    let selected = snap_with(|c| {
        c.enrollment = selector(
            json!({"matchLabels": {"machine.openshift.io/cluster-api-cluster": "build02-fmpjh"}}),
        )
    });
    expect(&ms, &selected, Reason::Updated);
    let not_selected =
        snap_with(|c| c.enrollment = selector(json!({"matchLabels": {"test": "boot"}})));
    let d = expect(&ms, &not_selected, Reason::OptedOut);
    assert!(d.message.contains("Partial"), "{}", d.message);
    let expr = snap_with(|c| {
        c.enrollment = selector(
            json!({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["gold"]}]}),
        )
    });
    expect(&ms, &expr, Reason::Updated);
}

#[test]
fn rule_3_owned_by_controller() {
    let mut ms = gcp_ms();
    ms["metadata"]["ownerReferences"] = json!([{"apiVersion": "hive.openshift.io/v1", "kind": "MachinePool", "name": "worker", "uid": "u"}]);
    let d = expect(&ms, &offline_snapshot(), Reason::OwnedByController);
    assert!(d.message.contains("MachinePool/worker"), "{}", d.message);
    ms["metadata"]["ownerReferences"] = json!([]);
    expect(&ms, &offline_snapshot(), Reason::Updated);
}

#[test]
fn rule_3b_cluster_api_authoritative_is_left_alone() {
    // MAPI -> CAPI migration: the MCO skips MachineSets whose status.authoritativeAPI is
    // ClusterAPI or Migrating; MachineAPI (and no status) are ours.
    let snap = offline_snapshot();
    for (status, reason) in [
        (
            json!({"authoritativeAPI": "ClusterAPI"}),
            Reason::ClusterAPIAuthoritative,
        ),
        (
            json!({"authoritativeAPI": "Migrating"}),
            Reason::ClusterAPIAuthoritative,
        ),
        (json!({"authoritativeAPI": "MachineAPI"}), Reason::Updated),
        (json!({"replicas": 1}), Reason::Updated),
        (json!({"authoritativeAPI": null}), Reason::Updated),
        (json!({"authoritativeAPI": 7}), Reason::Updated),
        (json!(null), Reason::Updated),
    ] {
        let mut ms = gcp_ms();
        ms["status"] = status.clone();
        let d = expect(&ms, &snap, reason);
        if reason == Reason::ClusterAPIAuthoritative {
            assert!(
                d.message.contains("status.authoritativeAPI is") && d.message.contains("migration"),
                "{status}: {}",
                d.message
            );
        }
    }
    // An owner still wins (rule 3 before 3b).
    let mut ms = gcp_ms();
    ms["status"] = json!({"authoritativeAPI": "ClusterAPI"});
    ms["metadata"]["ownerReferences"] = json!([{"kind": "K", "name": "n"}]);
    expect(&ms, &snap, Reason::OwnedByController);
}

#[test]
fn rule_4_os_stream_upstream_table() {
    // TestSyncMAPIMachineSetOSStreamLabel: rhel-10 and custom-stream skip; rhel-9 and no label go on.
    let snap = offline_snapshot();
    for (value, reason) in [
        (Some("rhel-10"), Reason::UnsupportedOSStream),
        (Some("custom-stream"), Reason::UnsupportedOSStream),
        (Some("rhel-9"), Reason::Updated),
        (None, Reason::Updated),
    ] {
        let mut ms = gcp_ms();
        if let Some(v) = value {
            label(&mut ms, decision::OS_STREAM_LABEL, v);
        }
        let d = expect(&ms, &snap, reason);
        if let Some(v) = value.filter(|_| reason == Reason::UnsupportedOSStream) {
            assert!(
                d.message.contains(&format!("unsupported stream: {v}")),
                "{}",
                d.message
            );
        }
    }
}

#[test]
fn rule_5_windows() {
    let mut ms = gcp_ms();
    ms["spec"]["template"]["metadata"]["labels"][decision::OS_ID_LABEL] = json!("Windows");
    expect(&ms, &offline_snapshot(), Reason::Windows);
    ms["spec"]["template"]["metadata"]["labels"][decision::OS_ID_LABEL] = json!("rhcos");
    expect(&ms, &offline_snapshot(), Reason::Updated);
}

#[test]
fn rule_6_not_ready_and_gate_closed() {
    let ms = gcp_ms();
    expect(&ms, &Snapshot::empty(), Reason::NotReady);
    let closed = snap_with(|c| c.gate = Gate::closed("master pool still updating"));
    let d = expect(&ms, &closed, Reason::UpgradeInProgress);
    assert_eq!(d.message, "master pool still updating");
    // Offline, an unstamped ConfigMap keeps the gate closed.
    let mut data = BTreeMap::new();
    data.insert(
        KEY_STREAM.to_owned(),
        support::fixture_text("stream-coreos-rhel-9.installer.json"),
    );
    data.insert(KEY_RELEASE_VERSION.to_owned(), "4.21.0".to_owned());
    data.insert(
        KEY_MCO_RELEASE_IMAGE_VERSION.to_owned(),
        "4.20.9".to_owned(),
    );
    let unstamped = BootImages::from_data(&data).unwrap();
    expect(
        &ms,
        &Snapshot::offline(unstamped.clone(), false, Some(Arch::Amd64), false),
        Reason::UpgradeInProgress,
    );
    expect(
        &ms,
        &Snapshot::offline(unstamped, true, Some(Arch::Amd64), false),
        Reason::Updated,
    );
}

#[test]
fn rule_7_architecture_upstream_table() {
    // TestGetArchFromMachineSet, replayed from the transcribed upstream table.
    let table = fixture("unit-cases-boot-image-controller.json");
    let cases = table["TestGetArchFromMachineSet"]["cases"]
        .as_array()
        .unwrap();
    assert!(cases.len() >= 13);
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let multi = case["cluster"] == "multi";
        let mut ms = gcp_ms();
        if let Some(a) = case["annotation"].as_str() {
            annotate(&mut ms, decision::ARCH_ANNOTATION, a);
        }
        let snap = snap_with(|c| c.multi_arch = multi);
        let d = decision::decide_object(&ms, &snap);
        if case["expectError"] == json!(true) {
            let want = if case["annotation"].is_null() {
                Reason::ArchitectureUnknown
            } else {
                Reason::InvalidArchitecture
            };
            assert_eq!(d.reason, want, "{name}: {}", d.message);
            if let Some(text) = case["errorText"]
                .as_str()
                .filter(|_| want == Reason::InvalidArchitecture)
            {
                assert_eq!(d.message, text, "{name}");
            }
        } else {
            let expected = case["expectedArch"].as_str().unwrap();
            let arch = d
                .arch
                .unwrap_or_else(|| panic!("{name}: no arch, {}", d.message));
            if let Some(rpm) = Arch::from_rpm(expected) {
                assert_eq!(arch, rpm, "{name}");
            } else {
                assert_eq!(
                    arch,
                    Arch::Amd64,
                    "{name}: defaults to the control-plane arch"
                );
            }
            // ppc64le and s390x have no GCP image in the stream.
            let want = if matches!(arch, Arch::Amd64 | Arch::Arm64) {
                Reason::Updated
            } else {
                Reason::NoImageInStream
            };
            assert_eq!(d.reason, want, "{name}: {}", d.message);
        }
    }
}

#[test]
fn rule_7_arm64_gets_the_aarch64_image() {
    let mut ms = gcp_ms();
    annotate(
        &mut ms,
        decision::ARCH_ANNOTATION,
        "kubernetes.io/arch=arm64",
    );
    let d = expect(&ms, &offline_snapshot(), Reason::Updated);
    assert_eq!(d.target.as_deref(), Some(CURRENT_ARM));
}

#[test]
fn rule_7_unknown_control_plane_arch() {
    let snap = snap_with(|c| c.control_plane_arch = None);
    expect(&gcp_ms(), &snap, Reason::ArchitectureUnknown);
}

#[test]
fn rule_8_unsupported_platform() {
    let snap = offline_snapshot();
    let aws = fixture("machineset-aws-build01-ci-tests-worker-us-east-1a.yaml");
    let mut openstack = gcp_ms();
    openstack["spec"]["template"]["spec"]["providerSpec"]["value"]["kind"] =
        json!("OpenstackProviderSpec");
    let d = expect(&openstack, &snap, Reason::UnsupportedPlatform);
    assert!(d.message.contains("OpenStack"), "{}", d.message);
    let on_stack = snap_with(|c| c.platform = Some("AzureStackCloud".into()));
    expect(&azure_ms(), &on_stack, Reason::UnsupportedPlatform);
    let mut weird = gcp_ms();
    weird["spec"]["template"]["spec"]["providerSpec"]["value"]["kind"] = json!("NopeProviderSpec");
    expect(&weird, &snap, Reason::UnsupportedPlatform);
    // A live cluster says what it is: a GCP spec on AWS, or a cluster we don't serve.
    let on_aws = snap_with(|c| c.platform = Some("AWS".into()));
    expect(&gcp_ms(), &on_aws, Reason::UnsupportedPlatform);
    let on_gcp = snap_with(|c| c.platform = Some("GCP".into()));
    expect(&gcp_ms(), &on_gcp, Reason::Updated);
    expect(&aws, &on_gcp, Reason::UnsupportedPlatform);
}

#[test]
fn rule_8_no_image_in_stream() {
    let snap = offline_snapshot();
    let mut ppc = gcp_ms();
    annotate(
        &mut ppc,
        decision::ARCH_ANNOTATION,
        "kubernetes.io/arch=ppc64le",
    );
    let d = expect(&ppc, &snap, Reason::NoImageInStream);
    assert!(d.message.contains("ppc64le"), "{}", d.message);
    // An architecture missing from the stream altogether.
    let mut data = BTreeMap::new();
    data.insert(
        KEY_STREAM.to_owned(),
        r#"{"stream":"s","architectures":{"aarch64":{"images":{}}}}"#.to_owned(),
    );
    data.insert(KEY_RELEASE_VERSION.to_owned(), "4.21.0".to_owned());
    let thin = Snapshot::offline(
        BootImages::from_data(&data).unwrap(),
        true,
        Some(Arch::Amd64),
        false,
    );
    let d = expect(&gcp_ms(), &thin, Reason::NoImageInStream);
    assert!(d.message.contains("x86_64"), "{}", d.message);
}

#[test]
fn rule_9_custom_image_leaves_everything() {
    let mut ms = gcp_ms();
    set(
        &mut ms,
        "/spec/template/spec/providerSpec/value/disks/0/image",
        json!(
            "projects/redhat-marketplace-public/global/images/redhat-coreos-ocp-413-x86-64-202305021736"
        ),
    );
    let d = expect(&ms, &offline_snapshot(), Reason::CustomImage);
    assert!(
        d.message.contains("redhat-marketplace-public"),
        "{}",
        d.message
    );
}

#[test]
fn rule_9_empty_or_missing_boot_image_gets_the_target() {
    // behaviour §4.9: machine-api would default an empty image to a stale 4.14 one.
    for image in [Some(json!("")), Some(Value::Null), None] {
        let mut ms = gcp_ms();
        let disk = &mut ms["spec"]["template"]["spec"]["providerSpec"]["value"]["disks"][0];
        match &image {
            Some(v) => disk["image"] = v.clone(),
            None => {
                disk.as_object_mut().unwrap().remove("image");
            }
        }
        let d = expect(&ms, &offline_snapshot(), Reason::Updated);
        let op = serde_json::to_value(&d.patch.0[0]).unwrap();
        assert_eq!(
            op["op"],
            if image.is_none() { "add" } else { "replace" },
            "{op}"
        );
    }
}

#[test]
fn rule_9_no_boot_disk_says_so() {
    let snap = offline_snapshot();
    for disks in [
        json!([]),
        json!(null),
        json!([{"boot": false, "image": "projects/rhcos-cloud/global/images/old"}, {"image": "x"}]),
    ] {
        let mut ms = gcp_ms();
        set(
            &mut ms,
            "/spec/template/spec/providerSpec/value/disks",
            disks.clone(),
        );
        let d = expect(&ms, &snap, Reason::NoBootDisk);
        assert!(d.message.contains("boot: true"), "{disks}: {}", d.message);
    }
}

#[test]
fn rule_9_derived_gcp_cases_replayed() {
    let file = fixture("derived-cases-gcp-reconcile.json");
    let cases = file["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 12);
    let stream = fixture("stream-coreos-rhel-9.installer.json");
    let snap = offline_snapshot();
    assert_eq!(
        snap.boot_images.as_ref().unwrap().stream_name,
        stream["stream"]
    );
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let mut ms = gcp_ms();
        ms["spec"]["template"]["spec"]["providerSpec"]["value"]["disks"] = case["disks"].clone();
        if case["arch"] == "aarch64" {
            annotate(
                &mut ms,
                decision::ARCH_ANNOTATION,
                "kubernetes.io/arch=arm64",
            );
        }
        let d = decision::decide_object(&ms, &snap);
        let expect = &case["expect"];
        // The one deliberate difference from the MCO: behaviour §4.9 gives an empty boot image
        // the target (the MCO skips it; machine-api would then default a stale image).
        let spec_divergence = name == "empty boot image does not match prefix (skip)";
        if spec_divergence {
            assert_eq!(d.reason, Reason::Updated, "{name}: {}", d.message);
            apply_checked(&ms, &d, &snap);
            continue;
        }
        if expect["patchRequired"] == json!(true) {
            let out = apply_checked(&ms, &d, &snap);
            let disks = &out["spec"]["template"]["spec"]["providerSpec"]["value"]["disks"];
            assert_eq!(disks, &expect["disksAfter"], "{name}");
        } else if expect["reconcileSkipped"] == json!(true) {
            assert_eq!(d.reason, Reason::CustomImage, "{name}: {}", d.message);
            assert!(d.patch.0.is_empty(), "{name}");
        } else {
            assert_eq!(d.reason, Reason::UpToDate, "{name}: {}", d.message);
        }
    }
}

#[test]
fn rule_10_stub_ignition_spec_2() {
    let ms = gcp_ms();
    let stub = |name: &str, stub: Stub| snap_with(|c| c.stubs = Stubs::learned([(name, stub)]));
    let spec2 = stub("worker-user-data", Stub::Version("2.2.0".into()));
    let d = expect(&ms, &spec2, Reason::StubIgnitionSpec2);
    assert!(d.message.contains("worker-user-data"), "{}", d.message);
    expect(
        &ms,
        &stub("worker-user-data", Stub::Version("3.4.0".into())),
        Reason::Updated,
    );
    let mut current = gcp_ms();
    set(
        &mut current,
        "/spec/template/spec/providerSpec/value/disks/0/image",
        json!(CURRENT_X86),
    );
    expect(&current, &spec2, Reason::UpToDate);
}

#[test]
fn rule_10_every_user_data_secret_is_checked() {
    let mut ms = gcp_ms();
    set(
        &mut ms,
        "/spec/template/spec/providerSpec/value/userDataSecret",
        json!({"name": "custom-user-data"}),
    );
    let stub = |name: &str, stub: Stub| snap_with(|c| c.stubs = Stubs::learned([(name, stub)]));
    // Another Secret's stub says nothing of this one's: not read yet, it waits.
    let d = expect(
        &ms,
        &stub("worker-user-data", Stub::Version("3.4.0".into())),
        Reason::StubIgnitionUnknown,
    );
    assert!(d.message.contains("custom-user-data"), "{}", d.message);
    assert!(d.patch.0.is_empty());
    let spec2 = stub("custom-user-data", Stub::Version("2.2.0".into()));
    expect(&ms, &spec2, Reason::StubIgnitionSpec2);
    expect(
        &ms,
        &stub("custom-user-data", Stub::Version("3.1.0".into())),
        Reason::Updated,
    );
    let d = expect(
        &ms,
        &stub("custom-user-data", Stub::Missing),
        Reason::UserDataSecretMissing,
    );
    assert!(
        d.message.contains("custom-user-data does not exist"),
        "{}",
        d.message
    );
    let d = expect(
        &ms,
        &stub(
            "custom-user-data",
            Stub::Unreadable("its userData is not JSON (expected value)".into()),
        ),
        Reason::StubIgnitionUnreadable,
    );
    assert!(d.message.contains("not JSON"), "{}", d.message);
    // A version that is not spec 3 at all cannot boot either.
    expect(
        &ms,
        &stub("custom-user-data", Stub::Version("1.0.0".into())),
        Reason::StubIgnitionSpec2,
    );
    // Offline nothing can be read, and nothing is checked.
    expect(&ms, &offline_snapshot(), Reason::Updated);
}

/// The webhook reads only the Secrets its Role grants: a MachineSet naming another is
/// left alone with a reason that names the Secret and the grant, whatever is known of
/// the stub, online and offline (`preview`), and never as a stub that is fine.
#[test]
fn rule_10_a_secret_outside_the_grant_is_left_alone_and_named() {
    let mut ms = gcp_ms();
    set(
        &mut ms,
        "/spec/template/spec/providerSpec/value/userDataSecret",
        json!({"name": "infra-user-data-managed"}),
    );
    let grant = ["worker-user-data", "master-user-data"];
    let spec3 = || Stubs::learned([("infra-user-data-managed", Stub::Version("3.4.0".into()))]);
    for stubs in [
        spec3().granting(grant),
        Stubs::learned([]).granting(grant),
        Stubs {
            unchecked: true,
            ..Stubs::default()
        }
        .granting(grant),
    ] {
        let d = expect(
            &ms,
            &snap_with(|c| c.stubs = stubs.clone()),
            Reason::UserDataSecretNotGranted,
        );
        assert_eq!(
            d.message,
            "user-data Secret infra-user-data-managed is outside the webhook's grant (--user-data-secrets=master-user-data,worker-user-data): its stub Ignition cannot be checked, so the boot image stays; grant it by adding infra-user-data-managed to the resourceNames of Role bootimage-webhook-user-data-secrets in openshift-machine-api (manifests/kustomization.yaml: the user-data Secrets patch), which also adds it to --user-data-secrets"
        );
        assert!(d.patch.0.is_empty());
        assert_eq!(d.target.as_deref(), Some(CURRENT_X86));
    }
    // Granted, the same stub moves it.
    let granted = snap_with(|c| {
        c.stubs = spec3().granting(grant.into_iter().chain(["infra-user-data-managed"]))
    });
    expect(&ms, &granted, Reason::Updated);
    // A MachineSet on its target needs no stub: up to date whatever the grant.
    let mut current = ms.clone();
    set(
        &mut current,
        "/spec/template/spec/providerSpec/value/disks/0/image",
        json!(CURRENT_X86),
    );
    expect(
        &current,
        &snap_with(|c| c.stubs = Stubs::learned([]).granting(grant)),
        Reason::UpToDate,
    );
}

#[test]
fn invalid_provider_specs_are_reported_not_touched() {
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
    // One input per reason; together they must cover Reason::ALL.
    let snap = offline_snapshot();
    let mut seen = BTreeSet::new();
    let mut check = |ms: Value, snap: &Snapshot| {
        seen.insert(decision::decide_object(&ms, snap).reason);
    };
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
                json!("OpenstackProviderSpec")
        }),
        &snap,
    );
    // vSphere: no Infrastructure offline (NoFailureDomain), then its failure domains with
    // nothing imported (TemplateNotImported).
    let vsphere = support::example("machineset-vsphere.yaml");
    check(vsphere.clone(), &snap);
    check(
        vsphere,
        &snap_with(|c| {
            c.vsphere = facts::vsphere(&support::example("infrastructure-vsphere.yaml"))
                .map(std::sync::Arc::new)
        }),
    );
    // A marketplace AMI whose product has no image at or below the stream's version.
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
    check(
        aws,
        &snap_with(|c| c.learned = Learned::default().with_aws(learned)),
    );
    for (case, reason) in cloud_cases() {
        let d = decision::decide_object(&case, &snap);
        assert_eq!(d.reason, reason, "{}", d.message);
        check(case, &snap);
    }
    check(
        with(&|m| annotate(m, decision::ARCH_ANNOTATION, "kubernetes.io/arch=s390x")),
        &snap,
    );
    check(
        with(&|m| {
            set(
                m,
                "/spec/template/spec/providerSpec/value/disks/0/image",
                json!("projects/x/global/images/y"),
            )
        }),
        &snap,
    );
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
        with(&|m| {
            set(
                m,
                "/spec/template/spec/providerSpec/value/disks/0/image",
                json!(CURRENT_X86),
            )
        }),
        &snap,
    );
    check(
        with(&|m| set(m, "/spec/template/spec/providerSpec/value/disks", json!(7))),
        &snap,
    );
    check(
        with(&|m| set(m, "/spec/template/spec/providerSpec/value/disks", json!([]))),
        &snap,
    );
    check(
        with(&|m| {
            annotate(
                m,
                decision::REVERTS_ANNOTATION,
                &format!("{} {CURRENT_X86}", decision::REVERT_LIMIT + 1),
            )
        }),
        &snap,
    );
    let all: BTreeSet<Reason> = Reason::ALL.into_iter().collect();
    assert_eq!(
        seen,
        all,
        "missing: {:?}",
        all.difference(&seen).collect::<Vec<_>>()
    );
}

#[test]
fn every_fixture_machineset_is_decided_without_panic() {
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
    // The docs sample's image is `<path_to_image>`: not an RHCOS image.
    let d = decision::decide_object(
        &fixture("machineset-gcp.openshift-docs-sample.rendered.yaml"),
        &offline_snapshot(),
    );
    assert_eq!(d.reason, Reason::CustomImage, "{}", d.message);
}

#[test]
fn touch_plan_picks_exactly_the_machinesets_the_webhook_would_change() {
    use bootimage_webhook::cluster::touch;
    let snap = offline_snapshot();
    let mut current = gcp_ms();
    set(
        &mut current,
        "/spec/template/spec/providerSpec/value/disks/0/image",
        json!(CURRENT_X86),
    );
    current["metadata"]["name"] = json!("current");
    let mut opted = gcp_ms();
    label(&mut opted, decision::OPT_OUT_LABEL, "false");
    let mut stale = gcp_ms();
    stale["metadata"]["uid"] = json!("u-1");
    let fleet = vec![
        stale.clone(),
        current,
        opted,
        fixture("machineset-aws-build01-ci-tests-worker-us-east-1a.yaml"),
    ];
    let planned = touch::plan(&fleet, &snap);
    assert_eq!(
        planned,
        vec![touch::Planned {
            kind: "MachineSet".into(),
            name: "build02-fmpjh-infra-a".into(),
            uid: "u-1".into(),
            current: OLD_X86.into(),
            target: CURRENT_X86.into(),
        }]
    );
    // Nothing while the gate is closed.
    assert!(touch::plan(&fleet, &snap_with(|c| c.gate = Gate::closed("x"))).is_empty());
    // And nothing once the webhook has done its work.
    let d = decision::decide_object(&stale, &snap);
    let done = apply_checked(&stale, &d, &snap);
    assert!(touch::plan(&[done], &snap).is_empty());
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

/// Issue 12, item 6: the decision line's message in the MCO's words, so that grepping the
/// logs for a MachineSet's name tells its story.
#[test]
fn the_log_message_reads_like_the_mco() {
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

/// Applies a decision's patch as the apiserver would.
fn applied(ms: &Value, d: &Decision) -> Value {
    let mut out = ms.clone();
    json_patch::patch(&mut out, &d.patch.to_json_patch().unwrap()).unwrap();
    out
}

/// Issue 12, item 4: an actor writes the old image back 5 times: exactly 3 re-mutations,
/// then its writes stand, the toucher plans nothing and reports one loop.
#[test]
fn a_revert_loop_is_re_mutated_three_times_then_left_alone() {
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

#[test]
fn writes_that_are_not_reverts_are_not_counted() {
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

// ------------------------------------------------------------------ ControlPlaneMachineSets

const CPMS_SPEC: &str =
    "/spec/template/machines_v1beta1_machine_openshift_io/spec/providerSpec/value";

/// The GCP ControlPlaneMachineSet of the enhancement (boots rhcos-9-6 on x86_64), with
/// its placeholder labels made real.
fn cpms() -> Value {
    let mut c = fixture("cpms-gcp-enhancement-excerpt.yaml");
    c["metadata"]["labels"] = json!({"machine.openshift.io/cluster-api-cluster": "build02-fmpjh"});
    c
}

/// Issue 12, item 7: upstream TestSyncControlPlaneMachineSetOSStreamLabel, replayed from
/// the fixture: rhel-10 and custom streams skip; rhel-9 and no label go on.
#[test]
fn cpms_os_stream_upstream_table() {
    let table = fixture("unit-cases-boot-image-controller.json");
    let cases = table["TestSyncControlPlaneMachineSetOSStreamLabel"]["cases"]
        .as_array()
        .unwrap();
    assert_eq!(cases.len(), 4);
    let snap = offline_snapshot();
    for case in cases {
        let mut c = cpms();
        for (k, v) in case["labels"].as_object().unwrap() {
            c["metadata"]["labels"][k] = v.clone();
        }
        let d = decision::decide_object(&c, &snap);
        let skips = case["expectLog"]
            .as_str()
            .is_some_and(|l| l.contains("unsupported stream"));
        if skips {
            assert_eq!(d.reason, Reason::UnsupportedOSStream, "{}", case["name"]);
            let stream = c["metadata"]["labels"][decision::OS_STREAM_LABEL]
                .as_str()
                .unwrap();
            assert!(
                d.message.contains(&format!("unsupported stream: {stream}")),
                "{}: {}",
                case["name"],
                d.message
            );
        } else {
            // Processing goes on: here, to the patch.
            assert_eq!(d.reason, Reason::Updated, "{}: {}", case["name"], d.message);
        }
    }
}

#[test]
fn cpms_is_decided_on_its_own_providerspec_path_and_the_control_plane_arch() {
    let snap = offline_snapshot();
    let c = cpms();
    let d = decision::decide_object(&c, &snap);
    assert_eq!(d.reason, Reason::Updated, "{}", d.message);
    assert_eq!(d.patch.0[0].path, format!("{CPMS_SPEC}/disks/0/image"));
    let moved = applied(&c, &d);
    assert_eq!(cpms_image(&moved), CURRENT_X86);
    assert_eq!(
        moved["metadata"]["annotations"][BOOT_IMAGE_ANNOTATION],
        json!(CURRENT_X86)
    );
    // Idempotent, and nothing else changed.
    assert_eq!(
        decision::decide_object(&moved, &snap).reason,
        Reason::UpToDate
    );
    let mut back = moved.clone();
    back["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("annotations");
    set(
        &mut back,
        &format!("{CPMS_SPEC}/disks/0/image"),
        json!(cpms_image(&c)),
    );
    assert_eq!(back, c);
    // The arch is the control plane's: no annotation lookup, no multi-arch refusal.
    let mut annotated = cpms();
    annotate(
        &mut annotated,
        decision::ARCH_ANNOTATION,
        "kubernetes.io/arch=arm64",
    );
    let d = decision::decide_object(&annotated, &snap_with(|c| c.multi_arch = true));
    assert_eq!(d.reason, Reason::Updated, "{}", d.message);
    assert_eq!(d.target.as_deref(), Some(CURRENT_X86));
    let d = decision::decide_object(&c, &snap_with(|c| c.control_plane_arch = None));
    assert_eq!(d.reason, Reason::ArchitectureUnknown);
}

#[test]
fn cpms_windows_is_read_on_the_node_metadata() {
    let snap = offline_snapshot();
    let mut node = cpms();
    set(
        &mut node,
        "/spec/template/machines_v1beta1_machine_openshift_io/spec/metadata/labels",
        json!({(decision::OS_ID_LABEL): "Windows"}),
    );
    expect(&node, &snap, Reason::Windows);
    // The Machines' own labels are not where the MCO looks for a CPMS.
    let mut machine = cpms();
    machine["spec"]["template"]["machines_v1beta1_machine_openshift_io"]["metadata"]["labels"]
        [decision::OS_ID_LABEL] = json!("Windows");
    assert_eq!(
        decision::decide_object(&machine, &snap).reason,
        Reason::Updated
    );
}

#[test]
fn cpms_needs_the_flag_and_its_own_enrollment() {
    let c = cpms();
    let off = snap_with(|f| f.control_plane_machine_sets = false);
    let d = expect(&c, &off, Reason::NotApplicable);
    assert!(
        d.message.contains("--control-plane-machine-sets"),
        "{}",
        d.message
    );
    // MachineSets are not affected by the flag.
    expect(&gcp_ms(), &off, Reason::Updated);
    // The MachineConfiguration selection for controlplanemachinesets, not machinesets'.
    expect(
        &c,
        &snap_with(|f| f.cpms_enrollment = Enrollment::None),
        Reason::OptedOut,
    );
    assert_eq!(
        decision::decide_object(&c, &snap_with(|f| f.enrollment = Enrollment::None)).reason,
        Reason::Updated
    );
    let mut opted = cpms();
    label(&mut opted, decision::OPT_OUT_LABEL, "false");
    expect(&opted, &offline_snapshot(), Reason::OptedOut);
    // The MCO's own selection, read for that resource.
    let mc = json!({"status": {"managedBootImagesStatus": {"machineManagers": [
        {"resource": "machinesets", "apiGroup": "machine.openshift.io", "selection": {"mode": "All"}}]}}});
    assert!(matches!(
        bootimage_webhook::core::facts::enrollment_of(Some(&mc), "controlplanemachinesets"),
        Ok(Enrollment::None)
    ));
    let mc = json!({"status": {"managedBootImagesStatus": {"machineManagers": [
        {"resource": "controlplanemachinesets", "apiGroup": "machine.openshift.io", "selection": {"mode": "All"}}]}}});
    assert!(matches!(
        bootimage_webhook::core::facts::enrollment_of(Some(&mc), "controlplanemachinesets"),
        Ok(Enrollment::All)
    ));
}
