//! The skew rules, each against the MCO's tables and real stream data.

use serde_json::json;

use super::*;
use crate::core::configmap::EMBEDDED_CONFIGMAP;
use crate::core::platforms::aws::{AwsLearned, Described, MarketImage};

const FAQ: &str = include_str!("../../../tests/fixtures/openshift-os-faq-rhel-of-ocp.excerpt.md");

fn parse_token(s: &str) -> Token {
    let (a, b) = s.split_once('.').unwrap();
    token(a, b).unwrap()
}

#[test]
fn the_table_is_the_one_openshift_os_documents() {
    let mut documented = Vec::new();
    for line in FAQ.lines() {
        let Some((ocp, rhel)) = line.split_once(" | ") else {
            continue;
        };
        if !ocp.starts_with(|c: char| c.is_ascii_digit()) {
            continue;
        }
        for r in rhel.split(" and ") {
            let r = r.trim().trim_end_matches(" EUS");
            documented.push((parse_token(ocp), parse_token(r)));
        }
    }
    assert!(documented.len() > 10, "{FAQ}");
    assert_eq!(RHEL_OF_OCP, documented.as_slice());
}

fn v(image: &str) -> Option<(Option<String>, Token, Option<String>)> {
    from_name(image).map(|v| (v.rhcos, v.rhel, v.release.map(|r| r.to_string())))
}

#[test]
fn versions_from_image_names() {
    let some = |r: Option<&str>, rhel: Token, ocp: Option<&str>| {
        Some((r.map(str::to_owned), rhel, ocp.map(str::to_owned)))
    };
    for (image, want) in [
        (
            "projects/rhcos-cloud/global/images/rhcos-9-8-20260428-0-gcp-x86-64",
            some(Some("9.8.20260428-0"), (9, 8), Some("4.22-5.0")),
        ),
        (
            "rhcos-9-6-20250826-1-gcp-x86-64",
            some(Some("9.6.20250826-1"), (9, 6), Some("4.19-4.21")),
        ),
        (
            "projects/rhcos-cloud/global/images/rhcos-416-94-202405291527-0-gcp-x86-64",
            some(Some("416.94.202405291527-0"), (9, 4), Some("4.16")),
        ),
        (
            "rhcos-412-86-202301311551-0-gcp-x86-64",
            some(Some("412.86.202301311551-0"), (8, 6), Some("4.12")),
        ),
        (
            "rhcos-410-84-202210040010-0-gcp-x86-64",
            some(Some("410.84.202210040010-0"), (8, 4), Some("4.10")),
        ),
        (
            "azureopenshift:aro4:aro_420:9.6.20251015",
            some(Some("9.6.20251015"), (9, 6), Some("4.19-4.21")),
        ),
        (
            "azureopenshift:aro4:aro_418:418.94.20250122",
            some(Some("418.94.20250122"), (9, 4), Some("4.18")),
        ),
        (
            "redhat:rh-ocp-worker:rh-ocp-worker:4.18.2025031114",
            some(None, (9, 4), Some("4.18")),
        ),
        // RHEL 10.1 shipped in no OpenShift release: its RHEL is known, its release not.
        (
            "rhcos-10-1-20251005-0-gcp-x86-64",
            some(Some("10.1.20251005-0"), (10, 1), None),
        ),
        (
            "rhcos-9.6.20250701-0-x86_64",
            some(Some("9.6.20250701-0"), (9, 6), Some("4.19-4.21")),
        ),
        ("ami-06f85a7940faa3217", None),
        ("projects/my-project/global/images/custom", None),
        ("rhcos-9-6-latest-gcp-x86-64", None),
        (
            "rhcos-9-6-20251399-1-gcp-x86-64",
            some(Some("9.6.20251399-1"), (9, 6), Some("4.19-4.21")),
        ),
        ("redhat:rh-ocp-worker:rh-ocp-worker:latest", None),
        ("redhat:rh-ocp-worker:rh-ocp-worker:4.3.2020010100", None),
        (
            "/subscriptions/x/resourceGroups/rg/providers/Microsoft.Compute/galleries/g/images/i/versions/latest",
            None,
        ),
        ("rhcos-", None),
        ("rhcos-é-ü-20250101-0-gcp", None),
        ("rhcos-9-\u{1F600}-20250101-0", None),
        ("a:b:c:ü.é.20250101", None),
        ("a:b:c:4é.1.20250101", None),
        ("a:b:c:4.18.", None),
        ("", None),
        (":::", None),
        ("rhcos-99999999999999999999-1-20250101-0", None),
    ] {
        assert_eq!(v(image), want, "{image}");
    }
    // A version is a version even with an impossible date; it then has no build date.
    assert_eq!(
        from_name("rhcos-9-6-20251399-1-gcp-x86-64").unwrap().built,
        None
    );
}

fn boot() -> BootImages {
    BootImages::from_document(EMBEDDED_CONFIGMAP).unwrap()
}

#[test]
fn the_stream_knows_its_own_images_and_their_release() {
    let boot = boot();
    let learned = Learned::default();
    // An AMI says nothing by itself, but this one is the stream's (us-east-1, x86_64).
    let ami = "ami-0fbc8be8796dc1df5";
    assert_eq!(from_name(ami), None);
    let v = version_of(ami, Some(&boot), &learned).unwrap();
    assert_eq!(v.source, Source::Stream);
    assert_eq!(v.rhcos.as_deref(), Some("9.8.20260428-0"));
    assert_eq!(v.release, Some(Release::Exact((4, 21))));
    let gcp = "projects/rhcos-cloud/global/images/rhcos-9-8-20260428-0-gcp-x86-64";
    assert_eq!(
        version_of(gcp, Some(&boot), &learned).unwrap().source,
        Source::Stream
    );
    // Not in the stream: read from the name, the release from the table.
    let old = version_of("rhcos-9-6-20250826-1-gcp-x86-64", Some(&boot), &learned).unwrap();
    assert_eq!(
        (old.source, old.release),
        (Source::Name, releases_of_rhel((9, 6)))
    );
    assert_eq!(
        version_of("ami-00000000000000000", Some(&boot), &learned),
        None
    );
    assert_eq!(version_of(ami, None, &learned), None);
}

#[test]
fn ec2_tells_what_an_ami_is() {
    let mut aws = AwsLearned::default();
    aws.images.insert(
        ("us-east-1".into(), "ami-0aaaaaaaaaaaaaaaa".into()),
        Described::Found {
            owner: "531415883065".into(),
            name: "rhcos-9.6.20250701-0-x86_64".into(),
        },
    );
    aws.images.insert(
        ("us-east-1".into(), "ami-0bbbbbbbbbbbbbbbb".into()),
        Described::NotFound,
    );
    aws.marketplace.insert(
        ("us-east-1".into(), "prod".into()),
        vec![MarketImage {
            id: "ami-0cccccccccccccccc".into(),
            description: "OpenShift rhcos-418.94.202502251502-0".into(),
            creation_date: "2025-03-01T00:00:00.000Z".into(),
        }],
    );
    let learned = Learned::default().with_aws(aws);
    let of = |ami: &str| version_of(ami, None, &learned).map(|v| (v.source, v.rhcos.unwrap()));
    assert_eq!(
        of("ami-0aaaaaaaaaaaaaaaa"),
        Some((Source::Ec2, "9.6.20250701-0".into()))
    );
    assert_eq!(
        of("ami-0cccccccccccccccc"),
        Some((Source::Ec2, "418.94.202502251502-0".into()))
    );
    assert_eq!(of("ami-0bbbbbbbbbbbbbbbb"), None);
    assert_eq!(of("ami-0dddddddddddddddd"), None);
}

#[test]
fn the_oldest_is_the_lowest_rhel_then_release_then_build() {
    let boot = boot();
    let learned = Learned::default();
    let s = survey(
        [
            ("a".to_owned(), Some("rhcos-9-6-20250826-1-gcp-x86-64")),
            (
                "b".to_owned(),
                Some("rhcos-416-94-202405291527-0-gcp-x86-64"),
            ),
            (
                "c".to_owned(),
                Some("rhcos-418-94-202401010000-0-gcp-x86-64"),
            ),
            ("d".to_owned(), Some("ami-00000000000000000")),
            ("e".to_owned(), None),
            (
                "f".to_owned(),
                Some("rhcos-417-94-202412010000-0-gcp-x86-64"),
            ),
        ],
        Some(&boot),
        &learned,
    );
    let (who, image, v) = s.oldest.unwrap();
    // 4.16 before 4.17 and 4.18 (all RHEL 9.4), though 4.18's build is the earliest.
    assert_eq!(
        (who.as_str(), image.as_str()),
        ("b", "rhcos-416-94-202405291527-0-gcp-x86-64")
    );
    assert_eq!(v.release, Some(Release::Exact((4, 16))));
    assert_eq!(s.unknown, ["d", "e"]);
    assert_eq!(s.count, 6);
    assert!(!v.below_floor());
    let s = survey(
        [(
            "x".to_owned(),
            Some("rhcos-412-86-202301311551-0-gcp-x86-64"),
        )],
        None,
        &learned,
    );
    assert!(s.oldest.unwrap().2.below_floor());
    assert_eq!(survey([], None, &learned), Survey::default());
}

fn mc(status: Value) -> Value {
    json!({"apiVersion": "operator.openshift.io/v1", "kind": "MachineConfiguration",
           "metadata": {"name": "cluster"}, "spec": {}, "status": status})
}

fn done() -> Value {
    json!([{"type": "BootImageUpdateProgressing", "status": "False", "reason": "x", "message": ""},
           {"type": "BootImageUpdateDegraded", "status": "False", "reason": "x", "message": ""}])
}

fn judge(status: Value) -> (Upgrade, String) {
    let e = enforcement(Some(&mc(status)));
    (e.upgrade, e.message)
}

fn manual(field: &str, v: &str) -> Value {
    let mode = if field == "ocpVersion" {
        "OCPVersion"
    } else {
        "RHCOSVersion"
    };
    json!({"bootImageSkewEnforcementStatus": {"mode": "Manual", "manual": {"mode": mode, field: v}}})
}

fn automatic(v: Value, conditions: Value) -> Value {
    json!({"bootImageSkewEnforcementStatus": {"mode": "Automatic", "automatic": v}, "conditions": conditions})
}

/// Cases and messages of the MCO's own `TestCheckBootImageSkewUpgradeableGuard`.
#[test]
fn the_mcos_verdict_in_manual_mode() {
    for (status, want, message) in [
        (
            manual("ocpVersion", "4.12.0"),
            Upgrade::Refused,
            "Upgrades have been disabled because the cluster is using OCP boot image version 4.12.0, which is below the minimum required version 4.13.0",
        ),
        (
            manual("ocpVersion", "4.10.0"),
            Upgrade::Refused,
            "Upgrades have been disabled because the cluster is using OCP boot image version 4.10.0, which is below the minimum required version 4.13.0",
        ),
        (
            manual("ocpVersion", "4.13.0"),
            Upgrade::Allowed,
            "recorded OCP version 4.13.0",
        ),
        (
            manual("rhcosVersion", "9.0.20251023-0"),
            Upgrade::Refused,
            "Upgrades have been disabled because the cluster is using RHCOS boot image version 9.0.20251023-0(RHEL version: 9.0), which is below the minimum required RHEL version 9.2",
        ),
        (
            manual("rhcosVersion", "411.86.202308081056-0"),
            Upgrade::Refused,
            "Upgrades have been disabled because the cluster is using RHCOS boot image version 411.86.202308081056-0(RHEL version: 8.6), which is below the minimum required RHEL version 9.2",
        ),
        (
            manual("rhcosVersion", "9.1.20251023-0"),
            Upgrade::Refused,
            "(RHEL version: 9.1)",
        ),
        (
            manual("rhcosVersion", "9.2.20251023-0"),
            Upgrade::Allowed,
            "recorded RHCOS version 9.2.20251023-0",
        ),
        (
            manual("rhcosVersion", "413.92.202305021736-0"),
            Upgrade::Allowed,
            "recorded RHCOS version",
        ),
    ] {
        let (upgrade, text) = judge(status.clone());
        assert_eq!(upgrade, want, "{status}: {text}");
        assert!(
            text.starts_with(message) || text.contains(message),
            "{status}: {text}"
        );
    }
}

#[test]
fn the_mcos_verdict_in_automatic_mode() {
    assert_eq!(
        judge(automatic(json!({"ocpVersion": "4.12.0"}), done())).0,
        Upgrade::Refused
    );
    assert_eq!(
        judge(automatic(json!({"ocpVersion": "4.21.0"}), done())).0,
        Upgrade::Allowed
    );
    // The OCP version wins over the RHCOS version when both are recorded.
    let both = json!({"ocpVersion": "4.21.0", "rhcosVersion": "411.86.202308081056-0"});
    assert_eq!(judge(automatic(both, done())).0, Upgrade::Allowed);
    // Not evaluated while the boot image controller has not finished a pass.
    let (u, m) = judge(automatic(json!({"ocpVersion": "4.12.0"}), json!([])));
    assert_eq!(u, Upgrade::Allowed);
    assert!(m.contains("has not finished a pass"), "{m}");
    let progressing = json!([{"type": "BootImageUpdateProgressing", "status": "True"}]);
    assert_eq!(
        judge(automatic(json!({"ocpVersion": "4.12.0"}), progressing)).0,
        Upgrade::Allowed
    );
    // Degraded refuses whatever is recorded.
    let degraded = json!([{"type": "BootImageUpdateProgressing", "status": "False"},
                          {"type": "BootImageUpdateDegraded", "status": "True", "message": "1 Degraded MAPI MachineSets"}]);
    let (u, m) = judge(automatic(json!({"ocpVersion": "4.21.0"}), degraded));
    assert_eq!(u, Upgrade::Refused);
    assert_eq!(
        m,
        "Upgrades have been disabled due to boot image update failures: boot image controller is degraded: 1 Degraded MAPI MachineSets"
    );
}

#[test]
fn no_verdict_without_a_mode_or_a_readable_version() {
    // None: not enforced; no mode yet: the MCO does not refuse; absent: unknown.
    let none = enforcement(Some(&mc(
        json!({"bootImageSkewEnforcementStatus": {"mode": "None"}}),
    )));
    assert_eq!(
        (none.mode.as_deref(), none.upgrade),
        (Some("None"), Upgrade::NotEnforced)
    );
    assert_eq!(judge(json!({})).0, Upgrade::Allowed);
    assert_eq!(enforcement(None).upgrade, Upgrade::Unknown);
    // Unreadable recorded versions do not refuse (the MCO logs them and goes on).
    let (u, m) = judge(manual("ocpVersion", "four"));
    assert_eq!(
        (u, m.as_str()),
        (
            Upgrade::Allowed,
            "recorded OCP version four is not readable: the MCO does not refuse"
        )
    );
    let (u, m) = judge(manual("rhcosVersion", "9.1"));
    assert_eq!(
        (u, m.as_str()),
        (
            Upgrade::Allowed,
            "recorded RHCOS version 9.1 is not readable: the MCO does not refuse"
        )
    );
    let (_, m) = judge(manual("rhcosVersion", "413.92.202305021736-0"));
    assert_eq!(
        m,
        "recorded RHCOS version 413.92.202305021736-0 (RHEL 9.2) is at or above the floor RHEL 9.2"
    );
}

#[test]
fn generic_versions_as_kubernetes_reads_them() {
    assert_eq!(generic("4.12.0"), Some(vec![4, 12, 0]));
    assert_eq!(generic("v4.13"), Some(vec![4, 13, 0]));
    assert_eq!(generic("4.13.0-rc.1"), Some(vec![4, 13, 0]));
    assert_eq!(generic("4.13.0.1"), Some(vec![4, 13, 0, 1]));
    assert_eq!(generic("4"), None);
    assert_eq!(generic(""), None);
    assert_eq!(generic("99999999999999999999999.1"), None);
    assert_eq!(rhel_of_rhcos("48.84.202208021106-0"), Some((8, 4)));
    assert_eq!(rhel_of_rhcos("9.6.20251023-0"), Some((9, 6)));
    assert_eq!(rhel_of_rhcos("9.6.2025102-0"), None);
    assert_eq!(rhel_of_rhcos("4.8.202208021106-0"), None);
}
