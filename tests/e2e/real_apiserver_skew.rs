//! `bootimage-webhook skew record` against a real kube-apiserver holding OpenShift 4.22's
//! MachineConfiguration CRD, whose CEL rules judge every write of
//! `spec.bootImageSkewEnforcement`: the record it makes is one the API accepts, its version
//! is the oldest boot image in use, a refusal writes nothing, and `status` says when the
//! record no longer matches the MachineSets.
//!
//! The cluster is one where the MCO manages no boot images (its status reports
//! `managedBootImagesStatus: {}`, as on OpenStack, Nutanix or vSphere without the MCO's
//! boot image updates): Manual enforcement is the administrator's to record. No MCO runs, so
//! the record is judged by what the apiserver stored and by its audit log.

use crate::support;

use std::process::Output;
use std::time::Instant;

use serde_json::{Value, json};
use support::CURRENT_X86;
use support::cluster::*;

/// The rhcos-4.16 stream's GCP image: older than the others here.
const LEGACY: &str = "projects/rhcos-cloud/global/images/rhcos-416-94-202405291527-0-gcp-x86-64";
const CRD_4_22: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/crds/openshift-4.22/0000_80_machine-config_01_machineconfigurations-Default.crd.yaml"
);
const FIELD_MANAGER: &str = "bootimage-webhook-skew-record";

#[test]
fn skew_record_writes_the_oldest_boot_image_the_api_accepts() {
    let _parallel = support::parallel();
    let started = Instant::now();
    let c = Cluster::start(true);
    a_cluster_whose_boot_images_the_mco_does_not_manage(&c);
    for ms in [
        machineset("ms-old", OLD),
        machineset("ms-current", CURRENT_X86),
        machineset("ms-custom", CUSTOM),
    ] {
        c.create(&ms);
    }

    a_boot_image_of_unknown_version_is_refused(&c);
    the_record_is_printed_then_applied(&c);

    // A MachineSet moved back to an older image: the record overstates; status says so.
    set_image(&c, "ms-current", LEGACY);
    let table = status(&c, "table");
    println!("--- status after a MachineSet moved back:\n{table}");
    let line = record_line(&table);
    assert!(
        line.contains("is newer than the oldest boot image in use")
            && line.ends_with(
                "run `bootimage-webhook skew record` to record rhcosVersion 416.94.202405291527-0"
            ),
        "{line}"
    );
    recording_over_another_mode_is_accepted(&c);
    automatic_enforcement_is_not_switched_without_force(&c);
    the_webhook_may_not_write_it(&c);
    println!("skew e2e: {:.1}s", started.elapsed().as_secs_f64());
}

/// A boot image of unknown version: no version can be told, and nothing is written.
fn a_boot_image_of_unknown_version_is_refused(c: &Cluster) {
    let mark = c.audit().len();
    let out = skew_record(c, &["--apply"]);
    assert!(!out.status.success(), "{}", text(&out));
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    println!("--- skew record --apply, a custom image:\n{said}");
    assert!(
        said.contains("cannot tell which boot image version to record")
            && said.contains(&format!("{NS}/ms-custom")),
        "{said}"
    );
    assert_eq!(skew_spec(c), Value::Null);
    assert_eq!(machine_configuration_writes(c, mark), Vec::<String>::new());
    c.kubectl(&["delete", "machineset", "ms-custom", "-n", NS]);
}

/// On 4.22 without a mode: `status` says to choose one; `skew record` prints the change
/// and where its version comes from, writing nothing; `--apply` writes it, as the
/// caller, under our field manager, and the API takes it; `status` then has nothing to
/// record.
fn the_record_is_printed_then_applied(c: &Cluster) {
    // OpenShift 4.22 without a mode, where the MCO does not manage the boot images.
    c.patch_configmap_data(json!({"releaseVersion": "4.22.0"}));
    let report = status_json(c);
    assert_eq!(
        report["skew"]["record"]["advice"]["state"], "ChooseMode",
        "{report:#}"
    );
    assert!(record_line(&status(c, "table")).contains("no skew enforcement mode chosen"));

    // Printed: the change and where its version comes from; nothing written.
    let mark = c.audit().len();
    let printed = skew_record_ok(c, &[]);
    println!("--- skew record:\n{printed}");
    assert!(
        printed.contains("\nNow: no skew enforcement mode chosen\n"),
        "{printed}"
    );
    assert!(
        printed.starts_with(&format!(
            "Oldest boot image: {OLD} ({NS}/ms-old): RHCOS 9.6.20250826-1, read from its name\n"
        )),
        "{printed}"
    );
    assert!(printed.contains(r#"Command: oc patch machineconfiguration cluster --type merge -p '{"spec":{"bootImageSkewEnforcement":{"mode":"Manual","manual":{"mode":"RHCOSVersion","rhcosVersion":"9.6.20250826-1","ocpVersion":null}}}}'"#), "{printed}");
    assert_eq!(machine_configuration_writes(c, mark), Vec::<String>::new());

    // Applied: the API takes it, as the caller, under our field manager.
    let applied: Value =
        serde_json::from_str(&skew_record_ok(c, &["--apply", "-o", "json"])).unwrap();
    println!("--- skew record --apply -o json:\n{applied:#}");
    let want = json!({"mode": "Manual", "manual": {"mode": "RHCOSVersion", "rhcosVersion": "9.6.20250826-1"}});
    assert_eq!(skew_spec(c), want);
    assert_eq!(applied["applied"]["stored"], want);
    assert_eq!(applied["applied"]["mco"], Value::Null, "no MCO runs here");
    assert_eq!(applied["proposal"]["machineSet"], format!("{NS}/ms-old"));
    assert_eq!(
        machine_configuration_writes(c, mark),
        ["patch by the caller".to_owned()]
    );
    let managers = c
        .api
        .get_json(["machineconfiguration", "cluster", "--show-managed-fields"]);
    assert!(
        managers["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["manager"] == FIELD_MANAGER && f["operation"] == "Update"),
        "{managers:#}"
    );
    let report = status_json(c);
    assert_eq!(
        report["skew"]["record"]["advice"]["state"], "Current",
        "{report:#}"
    );
    assert!(record_line(&status(c, "table")).ends_with("nothing to record"));
}
/// A release before skew enforcement (OpenShift 4.17's CRD has no
/// `spec.bootImageSkewEnforcement`): the apiserver refuses the field instead of dropping it,
/// and nothing is recorded.
#[test]
fn skew_record_refuses_where_the_crd_has_no_skew_enforcement() {
    let _parallel = support::parallel();
    let c = Cluster::start(true);
    let crd_4_17 = CRD_4_22
        .replace("openshift-4.22", "openshift-4.17")
        .replace("-Default.crd.yaml", ".crd.yaml");
    c.kubectl(&[
        "apply",
        "--server-side",
        "--force-conflicts",
        "-f",
        &crd_4_17,
    ]);
    c.set_status("machineconfiguration", "cluster", json!({}));
    c.create(&machineset("ms-old", OLD));
    // Served once a write of the field comes back without it (pruned).
    let none = r#"{"spec":{"bootImageSkewEnforcement":{"mode":"None"}}}"#;
    eventually(
        "the 4.17 CRD to be served",
        std::time::Duration::from_secs(30),
        String::new,
        || {
            let out = c.api.kubectl([
                "patch",
                "machineconfiguration",
                "cluster",
                "--dry-run=server",
                "--type=merge",
                "-o",
                "json",
                "-p",
                none,
            ]);
            let v: Value = serde_json::from_slice(&out.stdout).ok()?;
            v["spec"]
                .get("bootImageSkewEnforcement")
                .is_none()
                .then_some(())
        },
    );
    let out = skew_record(&c, &["--apply"]);
    println!(
        "--- skew record --apply, OpenShift 4.17's CRD:\n{}",
        text(&out)
    );
    assert!(!out.status.success(), "{}", text(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: MachineConfiguration cluster has no spec.bootImageSkewEnforcement on this cluster (OpenShift before 4.22 does not enforce boot image skew): nothing to record\n"
    );
    assert_eq!(skew_spec(&c), Value::Null);
}

/// The CEL rules run: a version the CRD refuses is refused; then `skew record --apply`
/// over an `OCPVersion` record writes `RHCOSVersion` and drops `ocpVersion`, which the CRD
/// forbids beside it.
fn recording_over_another_mode_is_accepted(c: &Cluster) {
    let bad = json!({"spec": {"bootImageSkewEnforcement": {"mode": "Manual",
        "manual": {"mode": "RHCOSVersion", "rhcosVersion": "9.6.20250826"}}}});
    let out = c.api.kubectl([
        "patch",
        "machineconfiguration",
        "cluster",
        "--type=merge",
        "-p",
        &bad.to_string(),
    ]);
    assert!(!out.status.success(), "{}", text(&out));
    let ocp = json!({"spec": {"bootImageSkewEnforcement": {"mode": "Manual",
        "manual": {"mode": "OCPVersion", "ocpVersion": "4.12.0", "rhcosVersion": null}}}});
    c.kubectl(&[
        "patch",
        "machineconfiguration",
        "cluster",
        "--type=merge",
        "-p",
        &ocp.to_string(),
    ]);
    let report = status_json(c);
    assert_eq!(
        report["skew"]["record"]["advice"]["state"], "Older",
        "{report:#}"
    );
    skew_record_ok(c, &["--apply"]);
    assert_eq!(
        skew_spec(c),
        json!({"mode": "Manual", "manual": {"mode": "RHCOSVersion", "rhcosVersion": "416.94.202405291527-0"}})
    );
    assert_eq!(
        status_json(c)["skew"]["record"]["advice"]["state"],
        "Current"
    );
}

/// Where the MCO records the version itself, `--apply` refuses (and writes nothing) unless
/// forced.
fn automatic_enforcement_is_not_switched_without_force(c: &Cluster) {
    c.kubectl(&[
        "patch",
        "machineconfiguration",
        "cluster",
        "--type=merge",
        "-p",
        r#"{"spec":{"bootImageSkewEnforcement":null}}"#,
    ]);
    c.set_status(
        "machineconfiguration",
        "cluster",
        json!({"managedBootImagesStatus": {},
               "bootImageSkewEnforcementStatus": {"mode": "Automatic", "automatic": {"ocpVersion": "4.22.0"}}}),
    );
    let mark = c.audit().len();
    let out = skew_record(c, &["--apply"]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("skew enforcement is Automatic"),
        "{}",
        text(&out)
    );
    assert_eq!(skew_spec(c), Value::Null);
    assert_eq!(machine_configuration_writes(c, mark), Vec::<String>::new());
    skew_record_ok(c, &["--apply", "--force"]);
    assert_eq!(
        skew_spec(c)["manual"]["rhcosVersion"],
        "416.94.202405291527-0"
    );
}

/// The webhook's ServiceAccount gained no write of MachineConfigurations (nor a read by
/// name: it lists the one it reads).
fn the_webhook_may_not_write_it(c: &Cluster) {
    for verb in ["patch", "update", "get"] {
        let out = c.api.kubectl([
            "auth",
            "can-i",
            verb,
            "machineconfigurations.operator.openshift.io/cluster",
            &format!("--as={SA_USER}"),
        ]);
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            "no",
            "{verb}: {}",
            text(&out)
        );
    }
}

/// No MCO boot image management (as it reports on a platform it does not manage), no
/// skew enforcement recorded, and OpenShift 4.22's MachineConfiguration CRD in place,
/// its CEL rules in force.
fn a_cluster_whose_boot_images_the_mco_does_not_manage(c: &Cluster) {
    c.kubectl(&[
        "apply",
        "--server-side",
        "--force-conflicts",
        "-f",
        CRD_4_22,
    ]);
    c.kubectl(&[
        "wait",
        "--for=condition=Established",
        "crd/machineconfigurations.operator.openshift.io",
    ]);
    c.kubectl(&[
        "patch",
        "machineconfiguration",
        "cluster",
        "--type=json",
        "-p",
        r#"[{"op":"remove","path":"/spec/managedBootImages"}]"#,
    ]);
    c.set_status(
        "machineconfiguration",
        "cluster",
        json!({"managedBootImagesStatus": {}}),
    );
    // The new schema is served once a write it refuses is refused by its rule.
    let bad = r#"{"spec":{"bootImageSkewEnforcement":{"mode":"Manual","manual":{"mode":"OCPVersion","ocpVersion":"4.22"}}}}"#;
    eventually(
        "the 4.22 CRD's rules to be in force",
        std::time::Duration::from_secs(30),
        String::new,
        || {
            let out = c.api.kubectl([
                "patch",
                "machineconfiguration",
                "cluster",
                "--dry-run=server",
                "--type=merge",
                "-p",
                bad,
            ]);
            text(&out)
                .contains("ocpVersion must match the OCP semver compatible format")
                .then_some(())
        },
    );
}

fn skew_spec(c: &Cluster) -> Value {
    c.api.get_json(["machineconfiguration", "cluster"])["spec"]["bootImageSkewEnforcement"].clone()
}

fn set_image(c: &Cluster, name: &str, image: &str) {
    let patch =
        json!([{"op": "replace", "path": format!("{PROVIDER}/disks/0/image"), "value": image}]);
    c.kubectl(&[
        "patch",
        "machineset",
        name,
        "-n",
        NS,
        "--type=json",
        "-p",
        &patch.to_string(),
    ]);
}

/// The writes of MachineConfigurations in the audit log since `mark`, not dry runs:
/// `patch by the caller` for a patch by another user than the webhook's ServiceAccount under
/// our field manager, else verb and user.
fn machine_configuration_writes(c: &Cluster, mark: usize) -> Vec<String> {
    c.audit()[mark..]
        .iter()
        .filter(|e| {
            e["stage"] == "ResponseComplete"
                && e["objectRef"]["resource"] == "machineconfigurations"
                && !matches!(e["verb"].as_str(), Some("get" | "list" | "watch"))
                && !is_dry_run(e)
        })
        .map(|e| {
            let ours = e["requestURI"]
                .as_str()
                .is_some_and(|u| u.contains(&format!("fieldManager={FIELD_MANAGER}")));
            if ours && e["verb"] == "patch" && !is_ours(e) {
                "patch by the caller".to_owned()
            } else {
                format!("{} by {}", e["verb"], e["user"]["username"])
            }
        })
        .collect()
}

/// `skew record` with the cluster-admin kubeconfig, as an administrator runs it.
fn skew_record(c: &Cluster, flags: &[&str]) -> Output {
    std::process::Command::new(support::binary::BIN)
        .args(["skew", "record", "--wait", "1s"])
        .args(flags)
        .env("KUBECONFIG", c.api.kubeconfig())
        .output()
        .expect("running skew record")
}

fn skew_record_ok(c: &Cluster, flags: &[&str]) -> String {
    let out = skew_record(c, flags);
    assert!(
        out.status.success(),
        "skew record {flags:?}: {}",
        text(&out)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The `Skew record:` line of `status`'s table.
fn record_line(table: &str) -> String {
    table
        .lines()
        .find_map(|l| l.strip_prefix("Skew record: "))
        .unwrap_or_else(|| panic!("no skew record line:\n{table}"))
        .to_owned()
}
