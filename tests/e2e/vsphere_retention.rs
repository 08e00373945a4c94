//! vSphere retention end to end, in a layout customers have: two failure domains sharing a
//! folder and a datastore (fd-a and fd-c), with the installer's, the MCO's and customers'
//! templates beside ours, some named like ours. Only our own templates (name read back
//! exactly, marker of this cluster) that nothing names are deleted after the retention.

use crate::support;

use bootimage_webhook::core::platforms::vsphere::template_name;
use support::cluster::Replica;
use support::vcsim::VCenter;
use support::vsphere::*;

/// A new release: each failure domain's template is imported and its MachineSet moves on
/// (the installer's in fd-a and fd-b, one made here in fd-c);
/// the previous release's templates of both failure domains sharing the folder, now named
/// by nothing, are deleted once unused for the retention (here a second, instead of a
/// week), each logged with its own failure domain. Nothing else in the folder is touched.
#[test]
fn unused_templates_of_ours_in_a_shared_folder_are_deleted_and_nothing_else() {
    let _parallel = support::parallel();
    let world = World::start(Ova::good());
    let vc = world.vcenter();
    let c = &world.cluster;
    let shared = folder("fd-a");
    assert_eq!(shared, folder("fd-c"));
    let others = templates_not_ours(vc, &shared);
    let a = world.holder_with(&["--vsphere-template-retention", "1s"]);
    // ms-a is the installer's MachineSet in fd-a; the installer's in fd-b (its own
    // datacenter and folder) moves beside them.
    let ms_a = INSTALLER_MS_A;
    c.create(&vsphere_machineset(
        "ms-c",
        "fd-c",
        &format!("{INFRA_ID}-rhcos-east-east-c"),
    ));
    let old = |fd: &str| template_name(INFRA_ID, RELEASE, fd);
    wait_template(c, ms_a, &old("fd-a"), &a);
    wait_template(c, "ms-c", &old("fd-c"), &a);

    let newer = "9.8.20260601-0";
    world.set_stream_release(&Ova::good(), newer);
    let new = |fd: &str| template_name(INFRA_ID, newer, fd);
    wait_template(c, ms_a, &new("fd-a"), &a);
    wait_template(c, "ms-c", &new("fd-c"), &a);
    for fd in ["fd-a", "fd-c"] {
        let line = wait_logged(
            &a,
            "deleted a template of ours",
            &format!("template={} ", old(fd)),
        );
        assert!(
            line.contains(&format!("failure_domain=\"{fd}\""))
                || line.contains(&format!("failure_domain={fd}")),
            "{line}"
        );
        let (old, new) = (
            format!("{shared}/{}", old(fd)),
            format!("{shared}/{}", new(fd)),
        );
        assert!(!vc.exists(&old), "{old} is deleted");
        assert!(vc.is_template(&new), "{new} stays");
    }
    // The second import carried the disk provisioning of the template it replaced.
    let imports = logged(&a, "importing the RHCOS OVA", newer);
    assert!(
        imports.len() == 3 && imports.iter().all(|l| l.contains("disk_provisioning=thin")),
        "{imports:#?}"
    );
    for name in &others {
        assert!(vc.is_template(&format!("{shared}/{name}")), "{name} stays");
    }
    assert!(
        vc.exists(&format!("{shared}/{CUSTOM_TEMPLATE}")),
        "the customer's VM stays"
    );
    the_one_named_like_ours_is_reported(&world, &a, &format!("{shared}/{}", others[4]));
    // fd-a's and fd-c's in the shared folder, and fd-b's in its own.
    let deletions = logged(&a, "deleted a template of ours", "").len();
    assert_eq!(deletions, 3, "{}", a.served.log_text());
}

/// Templates in `shared` that are not ours, and a customer's VM; the last of them is named
/// exactly as ours would be.
fn templates_not_ours(vc: &VCenter, shared: &str) -> [String; 5] {
    let templates = [
        // The installer's and the MCO's (its name, and its swap's temporary names).
        INSTALLER_A.to_owned(),
        format!("{INFRA_ID}-rhcos-fd-a"),
        "mco-old-1a2b3c4d".to_owned(),
        // A customer's golden image named like ours.
        format!("{INFRA_ID}-rhcos-4.16-golden-fd-a"),
        // Exactly our name for an older release, but not marked as ours.
        template_name(INFRA_ID, "9.8.20250101-0", "fd-c"),
    ];
    for name in &templates {
        vc.create_vm(shared, &pool("fd-a"), name);
        vc.mark_as_template(&format!("{shared}/{name}"));
    }
    vc.create_vm(shared, &pool("fd-a"), CUSTOM_TEMPLATE);
    templates
}

/// The log lines of `r` that hold both `what` and `detail`.
fn logged(r: &Replica, what: &str, detail: &str) -> Vec<String> {
    let lines = r.served.log().into_iter();
    lines
        .filter(|l| l.contains(what) && l.contains(detail))
        .collect()
}

/// The first log line of `r` holding both `what` and `detail`, once there is one.
fn wait_logged(r: &Replica, what: &str, detail: &str) -> String {
    support::cluster::eventually(
        &format!("a log line: {what} {detail}"),
        IMPORTED_WITHIN,
        || r.served.log_text(),
        || logged(r, what, detail).into_iter().next(),
    )
}

/// The template named exactly like ours but not marked as ours (`path`) is logged once,
/// and `status` names it.
fn the_one_named_like_ours_is_reported(world: &World, a: &Replica, path: &str) {
    let name = path.rsplit('/').next().unwrap();
    let reported = logged(a, "not marked as ours", name).len();
    assert_eq!(reported, 1, "{}", a.served.log_text());
    let out = std::process::Command::new(support::binary::BIN)
        .args(["status", "-o", "json", "--vsphere-ca-file"])
        .arg(world.tls.path().join("vsphere-ca.pem"))
        .env("KUBECONFIG", world.cluster.api.kubeconfig())
        .output()
        .expect("running status");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        report["vsphereUnmarked"],
        serde_json::json!([path]),
        "{report:#}"
    );
}
