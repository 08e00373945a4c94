//! `bootimage-webhook status` against a real kube-apiserver: every MachineSet with its
//! reason and the gate, the boot image skew for each enforcement mode, the gate
//! remembering a finished upgrade through the MCO's stamp, and the way through a proxy.
//!
//! The setup (tests/support/cluster.rs): a real kube-apiserver holding the project's own
//! manifests, the webhook registered with the shipped rules, selectors, CEL matchConditions,
//! timeout and failure policy, and the binary running as the manifests' ServiceAccount, so
//! the RBAC the apiserver enforces is the RBAC we ship. Every scenario is judged by what the
//! apiserver stored and by its audit log. Each test has its own apiserver; they run in
//! parallel.

use crate::support;

use std::time::Duration;

use base64::Engine;
use serde_json::{Value, json};
use support::CURRENT_X86;
use support::cluster::*;
use support::proxy::Tinyproxy;

/// `status` on a cluster with one MachineSet of each reason this
/// apiserver can hold (no webhook registered, so they stay as written), with the gate
/// closed and then open; read-only.
#[test]
fn status_shows_every_machineset_with_its_reason_and_the_gate() {
    let _parallel = support::parallel();
    let c = Cluster::start(false);
    let world = one_machineset_of_each_reason(&c);
    for (ms, _) in &world {
        c.create(ms);
    }
    the_toucher_gave_up_on(&c, "ms-not-moved");
    // A write by our toucher's field manager: status shows when.
    c.kubectl(&[
        "annotate",
        "machineset",
        "ms-current",
        "-n",
        NS,
        "--field-manager=bootimage-webhook",
        &format!("{TOUCH}=t"),
    ]);

    // The gate closed: every MachineSet past the gate waits, and status says why.
    let closed = status_json(&c);
    assert_eq!(closed["gate"]["open"], false, "{closed:#}");
    let why = closed["gate"]["reason"].as_str().unwrap();
    assert!(
        why.contains("MCOReleaseImageVersion=4.20.9, not 4.21.0")
            && why.contains("once a master has completed"),
        "{why}"
    );
    assert_eq!(
        status_row(&closed, "ms-stale")["reason"],
        "UpgradeInProgress"
    );
    assert_eq!(
        status_row(&closed, "ms-owned")["reason"],
        "OwnedByController"
    );

    // A master finishes: the gate opens, and each MachineSet shows its own reason.
    c.master_finished();
    let open: Value = eventually(
        "status to see the gate open",
        Duration::from_secs(30),
        String::new,
        || Some(status_json(&c)).filter(|v| v["gate"]["open"] == true),
    );
    assert!(
        open["gate"]["reason"]
            .as_str()
            .unwrap()
            .contains("ConfigMap stamped MCOReleaseImageVersion=4.21.0"),
        "{open:#}"
    );
    assert_eq!(open["release"], "4.21.0");
    assert_eq!(
        open["machineSets"].as_array().unwrap().len(),
        world.len(),
        "{open:#}"
    );
    for (ms, want) in &world {
        let name = ms["metadata"]["name"].as_str().unwrap();
        assert_eq!(status_row(&open, name)["reason"], *want, "{name}: {open:#}");
    }
    assert_the_rows_name_images_touches_and_give_ups(&open);
    assert_the_table(&status(&c, "table"), world.len());
    let wide = status(&c, "wide");
    assert!(
        wide.contains(CURRENT_X86) && wide.contains("MESSAGE"),
        "{wide}"
    );
    status_as_the_service_account_only_reads(&c, &open);
}

/// From an administrator's machine behind a proxy: `status` reaches the API server
/// (named `localhost` in its kubeconfig, the proxy being `127.0.0.1`) through
/// `HTTPS_PROXY`, in a CONNECT tunnel the proxy logs; straight when `NO_PROXY` names the
/// server (the proxy is then a dead port, so only a direct call can succeed); through the
/// proxy when `NO_PROXY` names only the proxy's host. kube alone gets the last two wrong:
/// it matches `NO_PROXY` against the proxy's address.
///
/// Each proxied case has a proxy of its own and asks for at least one tunnel: hyper may
/// open a spare connection that the proxy logs after `status` exits, so a count compared
/// across cases would not be final.
#[test]
fn status_reaches_the_api_server_through_the_proxy_unless_no_proxy_names_it() {
    let _parallel = support::parallel();
    let c = Cluster::start(false);
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let admin = std::fs::read_to_string(c.api.kubeconfig()).unwrap();
    std::fs::write(
        &kubeconfig,
        admin.replace("https://127.0.0.1:", "https://localhost:"),
    )
    .unwrap();
    let server = c.api.url().replace("https://127.0.0.1:", "localhost:");
    let status = |proxy: &str, no_proxy: &str| {
        let out = std::process::Command::new(support::binary::BIN)
            .args(["status", "-o", "json"])
            .env("KUBECONFIG", &kubeconfig)
            .env("HTTPS_PROXY", proxy)
            .env("NO_PROXY", no_proxy)
            .env_remove("https_proxy")
            .env_remove("no_proxy")
            .output()
            .expect("running status");
        assert!(out.status.success(), "status: {}", text(&out));
    };
    let tunnels_after_status = |name: &str, no_proxy: &str| {
        let own = dir.path().join(name);
        std::fs::create_dir(&own).unwrap();
        let proxy = Tinyproxy::start(&own);
        status(&proxy.url(), no_proxy);
        (proxy.tunnels_to(&server), proxy.log())
    };

    let (through, log) = tunnels_after_status("plain", "");
    assert!(through > 0, "no tunnel to {server}: {log}");
    let dead = format!("http://127.0.0.1:{}", support::proxy::free_port());
    status(&dead, "localhost");
    let (through, log) = tunnels_after_status("proxy-host-only", "127.0.0.1");
    assert!(through > 0, "NO_PROXY named only the proxy's host: {log}");
}

/// One MachineSet (not yet created) of each reason this apiserver can hold without a
/// webhook, with the reason `status` gives it once the gate is open; the spec-2 stub's
/// Secret is created.
fn one_machineset_of_each_reason(c: &Cluster) -> Vec<(Value, &'static str)> {
    let user_data =
        base64::engine::general_purpose::STANDARD.encode(br#"{"ignition":{"version":"2.2.0"}}"#);
    c.create_all(&[
        &json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": "worker-user-data-managed", "namespace": NS},
        "data": {"userData": user_data}}),
    ]);
    let arch = |name: &str, arch: &str| {
        annotated(
            name,
            "capacity.cluster-autoscaler.kubernetes.io/labels",
            &format!("kubernetes.io/arch={arch}"),
        )
    };
    let mut owned = machineset("ms-owned", OLD);
    owned["metadata"]["ownerReferences"] = json!([{"apiVersion": "hive.openshift.io/v1",
        "kind": "MachinePool", "name": "worker", "uid": "6f1e2d3c-0000-4000-8000-00000000000a"}]);
    let mut windows = machineset("ms-windows", OLD);
    windows["spec"]["template"]["metadata"]["labels"]["machine.openshift.io/os-id"] =
        json!("Windows");
    let osstream = "machineconfiguration.openshift.io/osstream";
    let reverts = "bootimages.machineconfiguration.openshift.io/reverts";
    vec![
        (machineset("ms-stale", OLD), "Updated"),
        (machineset("ms-not-moved", OLD), "Updated"),
        (machineset("ms-current", CURRENT_X86), "UpToDate"),
        (machineset("ms-custom", CUSTOM), "CustomImage"),
        (labelled("ms-opted-out", OPT_OUT, "false"), "OptedOut"),
        (owned, "OwnedByController"),
        (
            labelled("ms-rhel-10", osstream, "rhel-10"),
            "UnsupportedOSStream",
        ),
        (windows, "Windows"),
        (arch("ms-bad-arch", "sparc"), "InvalidArchitecture"),
        (arch("ms-s390x", "s390x"), "NoImageInStream"),
        (
            with_spec("ms-openstack", "/kind", json!("OpenstackProviderSpec")),
            "UnsupportedPlatform",
        ),
        (
            with_spec("ms-no-boot-disk", "/disks/0/boot", json!(false)),
            "NoBootDisk",
        ),
        (
            with_spec("ms-bad-disks", "/disks", json!(7)),
            "InvalidProviderSpec",
        ),
        (
            with_spec(
                "ms-stub-2",
                "/userDataSecret",
                json!({"name": "worker-user-data-managed"}),
            ),
            "StubIgnitionSpec2",
        ),
        (
            annotated("ms-reverted", reverts, &format!("4 {CURRENT_X86}")),
            "RevertLoop",
        ),
    ]
}

/// A MachineSet on the old image with one label set.
fn labelled(name: &str, key: &str, value: &str) -> Value {
    let mut m = machineset(name, OLD);
    m["metadata"]["labels"][key] = json!(value);
    m
}

/// A MachineSet on the old image with one annotation set.
fn annotated(name: &str, key: &str, value: &str) -> Value {
    let mut m = machineset(name, OLD);
    m["metadata"]
        .as_object_mut()
        .unwrap()
        .entry("annotations")
        .or_insert(json!({}))[key] = json!(value);
    m
}

/// A MachineSet on the old image with one providerSpec value field (a JSON pointer under
/// it) set.
fn with_spec(name: &str, path: &str, value: Value) -> Value {
    let mut m = machineset(name, OLD);
    let (parent, key) = path.rsplit_once('/').unwrap();
    m.pointer_mut(&format!("{PROVIDER}{parent}")).unwrap()[key] = value;
    m
}

/// The toucher gave up on `name` for the current target: its Event says so.
fn the_toucher_gave_up_on(c: &Cluster, name: &str) {
    let uid = c.get(name)["metadata"]["uid"].clone();
    c.create_all(&[&json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": format!("{name}.1"), "namespace": NS},
        "eventTime": "2026-12-01T00:00:00.000000Z", "type": "Warning", "reason": "BootImageNotMoved",
        "action": "Touch", "reportingController": "bootimage-webhook", "reportingInstance": "replica-a",
        "regarding": {"apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet",
                      "name": name, "namespace": NS, "uid": uid},
        "note": format!("3 touches did not move the boot image from {OLD} to {CURRENT_X86}: is the webhook reachable, or is another controller reverting it? Not touching again until the target changes.")})]);
}

/// The rows of `status -o json` with the gate open: what each names beside its reason.
fn assert_the_rows_name_images_touches_and_give_ups(open: &Value) {
    let row = |name: &str| status_row(open, name).clone();
    let stale = row("ms-stale");
    assert_eq!(stale["namespace"], NS);
    assert_eq!(stale["platform"], "GCP");
    assert_eq!(stale["arch"], "x86_64");
    assert_eq!(stale["current"], OLD);
    assert_eq!(stale["target"], CURRENT_X86);
    assert_eq!(stale["givenUp"], false);
    assert_eq!(stale["lastTouch"], Value::Null);
    assert!(row("ms-current")["lastTouch"].is_string(), "{open:#}");
    assert_eq!(row("ms-reverted")["givenUp"], true);
    assert_eq!(row("ms-not-moved")["givenUp"], true);
    // Rows decided before any platform rule still show the image they name.
    assert_eq!(row("ms-opted-out")["current"], OLD);
    assert_eq!(row("ms-opted-out")["target"], Value::Null);
}

/// The table an administrator reads: the gate line, the header, one line per MachineSet.
fn assert_the_table(table: &str, machinesets: usize) {
    let lines: Vec<&str> = table.lines().collect();
    assert!(
        lines[0].starts_with("Gate: open (release 4.21.0: "),
        "{table}"
    );
    let header = lines
        .iter()
        .position(|l| l.starts_with("NAMESPACE/NAME"))
        .expect("a header");
    for col in [
        "PLATFORM",
        "ARCH",
        "CURRENT",
        "TARGET",
        "REASON",
        "LAST TOUCH",
        "GIVEN UP",
    ] {
        assert!(lines[header].contains(col), "{table}");
    }
    assert_eq!(lines.len(), header + 1 + machinesets, "{table}");
    let stale_line = lines
        .iter()
        .find(|l| l.starts_with(&format!("{NS}/ms-stale ")))
        .expect("a row for ms-stale");
    let cells: Vec<&str> = stale_line.split_whitespace().collect();
    assert_eq!(
        cells,
        [
            &format!("{NS}/ms-stale"),
            "GCP",
            "x86_64",
            "rhcos-9-6-20250826-1-gcp-x86-64",
            CURRENT_X86.rsplit('/').next().unwrap(),
            "Updated",
            "-",
            "no"
        ]
    );
}

/// Read-only: as the webhook's own ServiceAccount (whose every request the audit log
/// records), status only reads; it needs no more than the webhook's watchers and list.
/// It makes the same decisions as in `open` (the webhook's ServiceAccount may not list
/// Events, so the toucher's give-ups are not shown).
fn status_as_the_service_account_only_reads(c: &Cluster, open: &Value) {
    let kubeconfig = c.api.token_kubeconfig(&c.token(), Some(OWN_NS));
    let mark = c.audit().len();
    let out = std::process::Command::new(support::binary::BIN)
        .args(["status", "-o", "json"])
        .env("KUBECONFIG", &kubeconfig)
        .output()
        .expect("running status");
    assert!(out.status.success(), "status: {}", text(&out));
    let as_sa: Value = serde_json::from_slice(&out.stdout).unwrap();
    let reasons = |v: &Value| -> Vec<Value> {
        v["machineSets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| json!([r["name"], r["reason"], r["current"], r["target"]]))
            .collect()
    };
    assert_eq!(reasons(&as_sa), reasons(open));
    let ours: Vec<String> = c.audit()[mark..]
        .iter()
        .filter(|e| is_ours(e) && e["stage"] == "ResponseComplete")
        .map(|e| {
            format!(
                "{} {}",
                e["verb"].as_str().unwrap_or(""),
                e["objectRef"]["resource"].as_str().unwrap_or("")
            )
        })
        .collect();
    assert!(ours.iter().any(|r| r == "list machinesets"), "{ours:?}");
    let writes: Vec<&String> = ours
        .iter()
        .filter(|r| !(r.starts_with("get ") || r.starts_with("list ") || r.starts_with("watch ")))
        .collect();
    assert_eq!(writes, Vec::<&String>::new());
}

/// `status` tells where the cluster stands against the MCO's boot image
/// skew check: the oldest boot image of all MachineSets (managed or not), its RHCOS version
/// and OpenShift release, and, for each skew enforcement mode of MachineConfiguration
/// `cluster` (and without one), whether the MCO would refuse an upgrade.
#[test]
fn status_shows_the_boot_image_skew_for_each_enforcement_mode() {
    let _parallel = support::parallel();
    let c = Cluster::start(true);
    // A real older image (the rhcos-4.16 stream's), on a MachineSet this webhook does not
    // manage: the oldest all the same.
    let mut old = machineset("ms-old", LEGACY);
    old["metadata"]["labels"][OPT_OUT] = json!("false");
    for ms in [
        old,
        machineset("ms-9-6", OLD),
        machineset("ms-current", CURRENT_X86),
        machineset("ms-custom", CUSTOM),
    ] {
        c.create(&ms);
    }
    // OpenShift brought skew enforcement in 4.22: an older release's MachineConfiguration
    // has no status.bootImageSkewEnforcementStatus, and its apiserver drops what is written
    // there (KUBE_VERSION=1.30, OpenShift 4.17's CRDs).
    let has_enforcement = c.machine_configuration_status_has("bootImageSkewEnforcementStatus");
    for case in enforcement_cases() {
        skew_is_reported_under(&c, has_enforcement, case);
    }

    // The current image is the stream's: its release is the ConfigMap's.
    let report = status_json(&c);
    assert_eq!(report["skew"]["oldest"]["name"], "ms-old");
    c.kubectl(&["delete", "machineset", "ms-old", "-n", NS]);
    c.kubectl(&["delete", "machineset", "ms-9-6", "-n", NS]);
    let report = status_json(&c);
    assert_eq!(
        report["skew"]["oldest"],
        json!({"namespace": NS, "name": "ms-current", "image": CURRENT_X86,
               "rhcosVersion": "9.8.20260428-0", "rhelVersion": "9.8",
               "ocpRelease": "4.21", "source": "stream", "belowFloor": false}),
        "{report:#}"
    );

    // No MachineConfiguration: whether an upgrade would be refused is unknown.
    c.kubectl(&["delete", "machineconfiguration", "cluster"]);
    let report = status_json(&c);
    assert_eq!(
        report["skew"]["enforcement"]["upgrade"], "Unknown",
        "{report:#}"
    );
    assert_eq!(report["skew"]["enforcement"]["mode"], Value::Null);
    let table = status(&c, "table");
    println!("--- status, no MachineConfiguration:\n{table}");
    assert!(
        skew_line(&table).ends_with(
            "MCO skew enforcement <unknown>: whether an upgrade would be refused is unknown (MachineConfiguration cluster not found: the MCO's skew enforcement cannot be read)"
        ),
        "{table}"
    );
}

/// The rhcos-4.16 stream's GCP image: older than anything the current stream names.
const LEGACY: &str = "projects/rhcos-cloud/global/images/rhcos-416-94-202405291527-0-gcp-x86-64";

/// A skew enforcement status the MCO records, with the boot image controller's conditions,
/// and what `status` makes of it: the mode, the upgrade verdict, what the skew line says.
struct EnforcementCase {
    enforcement: Value,
    conditions: Value,
    mode: &'static str,
    upgrade: &'static str,
    says: &'static str,
}

fn enforcement_cases() -> Vec<EnforcementCase> {
    let t = "2026-12-01T00:00:00Z";
    let conditions = |degraded: &str| {
        json!([
            {"type": "BootImageUpdateProgressing", "status": "False", "lastTransitionTime": t,
             "reason": "MachineSetUpdated", "message": "Reconciled 4 of 4 MAPI MachineSets"},
            {"type": "BootImageUpdateDegraded", "status": degraded, "lastTransitionTime": t,
             "reason": "MachineSetUpdated", "message": "1 Degraded MAPI MachineSets"}])
    };
    let automatic = json!({"mode": "Automatic", "automatic": {"ocpVersion": "4.21.0"}});
    vec![
        EnforcementCase {
            enforcement: json!({"mode": "Manual", "manual": {"mode": "OCPVersion", "ocpVersion": "4.12.0"}}),
            conditions: json!([]),
            mode: "Manual",
            upgrade: "Refused",
            says: "MCO skew enforcement Manual (recorded OCP 4.12.0): an upgrade would be refused (Upgrades have been disabled because the cluster is using OCP boot image version 4.12.0, which is below the minimum required version 4.13.0)",
        },
        EnforcementCase {
            enforcement: json!({"mode": "Manual",
                "manual": {"mode": "RHCOSVersion", "rhcosVersion": "416.94.202405291527-0"}}),
            conditions: json!([]),
            mode: "Manual",
            upgrade: "Allowed",
            says: "MCO skew enforcement Manual (recorded RHCOS 416.94.202405291527-0): an upgrade would not be refused (recorded RHCOS version 416.94.202405291527-0 (RHEL 9.4) is at or above the floor RHEL 9.2)",
        },
        EnforcementCase {
            enforcement: automatic.clone(),
            conditions: conditions("False"),
            mode: "Automatic",
            upgrade: "Allowed",
            says: "MCO skew enforcement Automatic (recorded OCP 4.21.0): an upgrade would not be refused (recorded OCP version 4.21.0 is at or above the floor 4.13.0)",
        },
        EnforcementCase {
            enforcement: automatic,
            conditions: conditions("True"),
            mode: "Automatic",
            upgrade: "Refused",
            says: "an upgrade would be refused (Upgrades have been disabled due to boot image update failures: boot image controller is degraded: 1 Degraded MAPI MachineSets)",
        },
        EnforcementCase {
            enforcement: json!({"mode": "None"}),
            conditions: json!([]),
            mode: "None",
            upgrade: "NotEnforced",
            says: "MCO skew enforcement None: not enforced: the MCO does not check boot images, and never refuses an upgrade for them",
        },
    ]
}

/// Records `case` on MachineConfiguration `cluster` and checks `status -o json` and its
/// skew line; a release without enforcement (`has_enforcement` false) drops what is written
/// and never refuses.
fn skew_is_reported_under(c: &Cluster, has_enforcement: bool, case: EnforcementCase) {
    let managed = json!({"machineManagers": [
        {"resource": "machinesets", "apiGroup": "machine.openshift.io", "selection": {"mode": "All"}}]});
    c.set_status(
        "machineconfiguration",
        "cluster",
        json!({"managedBootImagesStatus": managed,
               "bootImageSkewEnforcementStatus": case.enforcement, "conditions": case.conditions}),
    );
    let mc = c.api.get_json(["machineconfiguration", "cluster"]);
    assert_eq!(
        mc.pointer("/status/bootImageSkewEnforcementStatus")
            .is_some(),
        has_enforcement,
        "{mc:#}"
    );
    let report = status_json(c);
    let skew = &report["skew"];
    let (mode, upgrade, says) = if has_enforcement {
        (json!(case.mode), case.upgrade, case.says)
    } else {
        // What such a cluster is: no mode, and the MCO never refuses for boot images.
        (
            Value::Null,
            "Allowed",
            "the MCO has recorded no skew enforcement mode: OpenShift before 4.22 has none",
        )
    };
    assert_eq!(
        skew["oldest"],
        json!({"namespace": NS, "name": "ms-old", "image": LEGACY,
               "rhcosVersion": "416.94.202405291527-0", "rhelVersion": "9.4",
               "ocpRelease": "4.16", "source": "name", "belowFloor": false}),
        "{report:#}"
    );
    assert_eq!(skew["unknown"], json!([format!("{NS}/ms-custom")]));
    assert_eq!(skew["machineSets"], 4);
    assert_eq!(
        skew["floor"],
        json!({"ocpVersion": "4.13.0", "rhelVersion": "9.2"})
    );
    assert_eq!(skew["enforcement"]["mode"], mode, "{report:#}");
    assert_eq!(skew["enforcement"]["upgrade"], upgrade, "{report:#}");
    let table = status(c, "table");
    println!("--- status, enforcement {mode} ({upgrade}):\n{table}");
    let line = skew_line(&table);
    let oldest = "Skew: oldest boot image rhcos-416-94-202405291527-0-gcp-x86-64 (openshift-machine-api/ms-old): RHCOS 416.94.202405291527-0, RHEL 9.4, OpenShift 4.16 (from its name); 1 of 4 MachineSets with a boot image of unknown version; ";
    assert!(line.starts_with(oldest), "{line}");
    assert!(line.contains(says), "{line}\nshould say: {says}");
}

/// The `Skew:` line of `status`'s table.
fn skew_line(table: &str) -> String {
    table
        .lines()
        .find(|l| l.starts_with("Skew: "))
        .unwrap_or_else(|| panic!("no skew line:\n{table}"))
        .to_owned()
}

/// The gate remembers a finished upgrade through the MCO's stamp, seen
/// by `status` on real MachineConfigPool, MachineConfig and ConfigMap objects.
#[test]
fn the_gate_remembers_a_finished_upgrade_through_the_stamp() {
    let _parallel = support::parallel();
    let c = Cluster::start(false);
    // The pool rule is the opt-in component's (it reads MachineConfigs).
    let gate = || -> (bool, String) {
        let v: Value =
            serde_json::from_str(&status_with(&c, "json", &["--master-pool-gate"])).unwrap();
        (
            v["gate"]["open"] == true,
            v["gate"]["reason"].as_str().unwrap_or("").to_owned(),
        )
    };
    let configmap = |data: Value| c.patch_configmap_data(data);
    let t = "2026-11-02T00:00:00Z";
    let pool_status = |updating: &str, updated: &str, count: u32| {
        c.set_status(
            "machineconfigpool",
            "master",
            json!({"observedGeneration": 2, "configuration": {"name": "rendered-master-new"},
                   "machineCount": 3, "updatedMachineCount": count, "readyMachineCount": 3,
                   "unavailableMachineCount": 0, "degradedMachineCount": 0,
                   "conditions": [
                       {"type": "Updating", "status": updating, "lastTransitionTime": t, "reason": "", "message": ""},
                       {"type": "Updated", "status": updated, "lastTransitionTime": t, "reason": "", "message": ""}]}),
        );
    };

    // Unstamped, nobody finished: closed.
    let (open, why) = gate();
    assert!(!open, "{why}");
    // A master finishes the upgrade: the pool rule opens it.
    c.set_master_updated(1);
    let (open, why) = gate();
    assert!(
        open && why.contains("1 master(s) run rendered-master-new"),
        "{why}"
    );

    // A routine master MachineConfig rollout after the upgrade (same release, nobody on
    // the new config yet). Without the stamp the pool rule alone closes the gate again...
    c.create_all(&[&json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
        "metadata": {"name": "rendered-master-newer",
                     "annotations": {"machineconfiguration.openshift.io/release-image-version": "4.21.0"}},
        "spec": {"config": {"ignition": {"version": "3.5.0"}}}})]);
    c.kubectl(&[
        "patch",
        "machineconfigpool",
        "master",
        "--type=merge",
        "-p",
        r#"{"spec":{"configuration":{"name":"rendered-master-newer"}}}"#,
    ]);
    pool_status("True", "False", 0);
    let (open, why) = gate();
    assert!(!open && why.contains("no master has completed"), "{why}");
    // ... but the MCO has stamped the finished release: the gate stays open.
    configmap(json!({"MCOReleaseImageVersion": "4.21.0"}));
    let (open, why) = gate();
    assert!(
        open && why.contains("MCOReleaseImageVersion=4.21.0"),
        "{why}"
    );
    // A paused (or degraded) pool after the stamp: still open.
    pool_status("False", "False", 0);
    let (open, why) = gate();
    assert!(open, "{why}");

    // A new release in the ConfigMap closes it until the stamp moves (or a master
    // finishes: the pool targets a config of the old release here).
    configmap(json!({"releaseVersion": "4.22.0"}));
    let (open, why) = gate();
    assert!(
        !open && why.contains("MCOReleaseImageVersion=4.21.0, not 4.22.0"),
        "{why}"
    );
    configmap(json!({"MCOReleaseImageVersion": "4.22.0"}));
    let (open, why) = gate();
    assert!(open && why.contains("4.22.0"), "{why}");
}
