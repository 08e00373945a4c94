//! vSphere retention end to end, in a layout customers have: two failure domains sharing a
//! folder and a datastore (fd-a and fd-c), with the installer's, the MCO's and customers'
//! templates beside ours, some named like ours. Only our own templates (name read back
//! exactly, marker of this cluster) that nothing names are deleted after the retention.

mod support;

use bootimage_webhook::core::platforms::vsphere::template_name;
use support::vsphere::*;

/// A new release: each failure domain's template is imported and its MachineSet moves on;
/// the previous release's templates of both failure domains sharing the folder, now named
/// by nothing, are deleted once unused for the retention (here a second, instead of a
/// week), each logged with its own failure domain. Nothing else in the folder is touched.
#[test]
fn unused_templates_of_ours_in_a_shared_folder_are_deleted_and_nothing_else() {
    let world = World::start(Ova::good());
    let vc = world.vcenter();
    let c = &world.cluster;
    let shared = folder("fd-a");
    assert_eq!(shared, folder("fd-c"));
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
        vc.create_vm(&shared, &pool("fd-a"), name);
        vc.mark_as_template(&format!("{shared}/{name}"));
    }
    vc.create_vm(&shared, &pool("fd-a"), CUSTOM_TEMPLATE);
    let a = world.holder_with(&["--vsphere-template-retention", "1s"]);
    c.create(&vsphere_machineset("ms-a", "fd-a", INSTALLER_A));
    c.create(&vsphere_machineset(
        "ms-c",
        "fd-c",
        &format!("{INFRA_ID}-rhcos-east-east-c"),
    ));
    let old = |fd: &str| template_name(INFRA_ID, RELEASE, fd);
    wait_template(c, "ms-a", &old("fd-a"), &a);
    wait_template(c, "ms-c", &old("fd-c"), &a);

    let newer = "9.8.20260601-0";
    world.set_stream_release(&Ova::good(), newer);
    let new = |fd: &str| template_name(INFRA_ID, newer, fd);
    wait_template(c, "ms-a", &new("fd-a"), &a);
    wait_template(c, "ms-c", &new("fd-c"), &a);
    for fd in ["fd-a", "fd-c"] {
        let deleted = format!("template={} ", old(fd));
        support::cluster::eventually(
            &format!("{} to be deleted", old(fd)),
            IMPORTED_WITHIN,
            || a.served.log_text(),
            || {
                a.served
                    .log()
                    .into_iter()
                    .find(|l| l.contains("deleted a template of ours") && l.contains(&deleted))
            },
        );
        let line = a
            .served
            .log()
            .into_iter()
            .find(|l| l.contains("deleted a template of ours") && l.contains(&deleted))
            .unwrap();
        assert!(
            line.contains(&format!("failure_domain=\"{fd}\""))
                || line.contains(&format!("failure_domain={fd}")),
            "{line}"
        );
        assert!(
            !vc.exists(&format!("{shared}/{}", old(fd))),
            "{} is deleted",
            old(fd)
        );
        assert!(
            vc.is_template(&format!("{shared}/{}", new(fd))),
            "{} stays",
            new(fd)
        );
    }
    // The second import carried the disk provisioning of the template it replaced.
    let imports: Vec<String> = a
        .served
        .log()
        .into_iter()
        .filter(|l| l.contains("importing the RHCOS OVA") && l.contains(newer))
        .collect();
    assert!(
        imports.len() == 2 && imports.iter().all(|l| l.contains("disk_provisioning=thin")),
        "{imports:#?}"
    );
    for name in &templates {
        assert!(vc.is_template(&format!("{shared}/{name}")), "{name} stays");
    }
    assert!(
        vc.exists(&format!("{shared}/{CUSTOM_TEMPLATE}")),
        "the customer's VM stays"
    );
    // The one named exactly like ours is reported, once.
    let reported = a
        .served
        .log()
        .into_iter()
        .filter(|l| l.contains("not marked as ours") && l.contains(&templates[4]))
        .count();
    assert_eq!(reported, 1, "{}", a.served.log_text());
    // `status` names the ones that look like ours but are not marked as ours.
    let out = std::process::Command::new(support::binary::BIN)
        .args(["status", "-o", "json", "--vsphere-ca-file"])
        .arg(world.tls.path().join("vsphere-ca.pem"))
        .env("KUBECONFIG", c.api.kubeconfig())
        .output()
        .expect("running status");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        report["vsphereUnmarked"],
        serde_json::json!([format!("{shared}/{}", templates[4])]),
        "{report:#}"
    );
    let deletions = a
        .served
        .log()
        .into_iter()
        .filter(|l| l.contains("deleted a template of ours"))
        .count();
    assert_eq!(deletions, 2, "{}", a.served.log_text());
}
