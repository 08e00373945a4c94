//! vSphere: nothing is deleted or used on the strength of its name. A VM at our template's
//! name is cleared only when its marker says this cluster's import made it and vCenter says
//! that import stopped (a new Lease holder never destroys an import a previous holder may
//! still be writing); one that is not marked is never touched; a stream whose checksum does
//! not match the file at its URL imports nothing and moves nothing.

use crate::support;

use std::time::Duration;

use bootimage_webhook::core::platforms::vsphere::template_name;
use support::cluster::*;
use support::vsphere::*;

/// The marker an import of ours writes, with its deadline.
fn marker(sha256: &str, deadline: &str) -> [(&'static str, String); 4] {
    [
        ("bootimage_webhook.infrastructure_name", INFRA_ID.to_owned()),
        ("bootimage_webhook.release", RELEASE.to_owned()),
        ("bootimage_webhook.ova_sha256", sha256.to_owned()),
        ("bootimage_webhook.import_deadline", deadline.to_owned()),
    ]
}

/// A previous Lease holder's import still running (a marked VM, not yet a template, whose
/// deadline vCenter's clock has not passed) is left alone; once vCenter's clock is past it,
/// the VM is deleted and the template imported.
#[test]
fn a_previous_holders_import_is_left_alone_until_vcenter_says_it_stopped() {
    let _parallel = support::parallel();
    let world = World::start(Ova::good());
    let vc = world.vcenter();
    let c = &world.cluster;
    let wanted = template_name(INFRA_ID, RELEASE, "fd-a");
    let path = format!("{}/{wanted}", folder("fd-a"));
    let sha = Ova::good().stream_sha256;
    let running = marker(&sha, "2999-01-01T00:00:00Z");
    let pairs: Vec<(&str, &str)> = running.iter().map(|(k, v)| (*k, v.as_str())).collect();
    vc.create_vm_with(&folder("fd-a"), &pool("fd-a"), &wanted, &pairs);
    let a = world.holder();
    c.create(&vsphere_machineset("ms-a", "fd-a", INSTALLER_A));
    a.wait_line("its import may still be running");
    std::thread::sleep(Duration::from_secs(5));
    assert!(
        vc.exists(&path) && !vc.is_template(&path),
        "the running import's VM stays"
    );
    assert_eq!(template(&c.get("ms-a")), INSTALLER_A);
    assert!(
        !a.served.log_text().contains("deleting a VM"),
        "{}",
        a.served.log_text()
    );

    // vCenter's clock passes the deadline (and a lease's timeout after it).
    vc.set_extra_config(
        &path,
        &[("bootimage_webhook.import_deadline", "2020-01-01T00:00:00Z")],
    );
    c.kubectl(&["annotate", "machineset", "ms-a", "-n", NS, "poke=1"]);
    a.wait_line("deleting a VM an interrupted import of ours left");
    eventually(
        "ms-a to move to the new import",
        Duration::from_secs(300),
        || a.served.log_text(),
        || (template(&c.get("ms-a")) == wanted).then_some(()),
    );
    assert!(vc.is_template(&path));
    assert_eq!(vc.extra_config(&path)["bootimage_webhook.ova_sha256"], sha);
}

/// A VM or template at our template's name that carries no marker of ours (a customer's,
/// or another tool's) is never deleted and never used: the MachineSets stay, and the Event,
/// the log and `status` say why.
#[test]
fn a_vm_named_like_our_template_but_unmarked_is_never_touched() {
    let _parallel = support::parallel();
    let world = World::start(Ova::good());
    let vc = world.vcenter();
    let c = &world.cluster;
    let (in_a, in_b) = (
        template_name(INFRA_ID, RELEASE, "fd-a"),
        template_name(INFRA_ID, RELEASE, "fd-b"),
    );
    let (path_a, path_b) = (
        format!("{}/{in_a}", folder("fd-a")),
        format!("{}/{in_b}", folder("fd-b")),
    );
    vc.create_vm(&folder("fd-a"), &pool("fd-a"), &in_a);
    vc.create_vm(&folder("fd-b"), &pool("fd-b"), &in_b);
    vc.mark_as_template(&path_b);
    let a = world.holder_with(&["--vsphere-template-retention", "1s"]);
    c.create(&vsphere_machineset("ms-a", "fd-a", INSTALLER_A));
    c.create(&vsphere_machineset("ms-b", "fd-b", INSTALLER_B));
    for ms in ["ms-a", "ms-b"] {
        let events = warned(c, &a, ms, IMPORTED_WITHIN);
        let note = events[0]["note"].as_str().unwrap_or_default();
        assert!(note.contains("not provably this project's"), "{note}");
    }
    let rows = world.status();
    for ms in ["ms-a", "ms-b"] {
        assert_eq!(rows[ms]["reason"], "TemplateNotImported", "{rows:#}");
        let message = rows[ms]["message"].as_str().unwrap_or_default();
        assert!(message.contains("carries no marker"), "{message}");
    }
    std::thread::sleep(Duration::from_secs(5));
    assert!(
        vc.exists(&path_a) && !vc.is_template(&path_a),
        "the VM stays as it was"
    );
    assert!(vc.is_template(&path_b), "the template stays");
    assert_eq!(template(&c.get("ms-a")), INSTALLER_A);
    assert_eq!(template(&c.get("ms-b")), INSTALLER_B);
    let log = a.served.log_text();
    assert!(
        !log.contains("deleting") && !log.contains("deleted"),
        "{log}"
    );
    assert!(log.contains("carries no marker"), "{log}");
}

/// The stream names a new release at a new URL but keeps the previous file's checksum: the
/// file kept for that checksum is not reused, nothing is imported, no MachineSet moves, and
/// the Event, the log and `status` name the URL and both checksums. Once the stream is
/// right, the new release is imported from the right file.
#[test]
fn a_stream_whose_checksum_is_not_its_files_imports_nothing() {
    let _parallel = support::parallel();
    let world = World::start(Ova::good());
    let vc = world.vcenter();
    let c = &world.cluster;
    let a = world.holder();
    c.create(&vsphere_machineset("ms-a", "fd-a", INSTALLER_A));
    let old = template_name(INFRA_ID, RELEASE, "fd-a");
    wait_template(c, "ms-a", &old, &a);

    let (newer, rebuilt) = ("9.8.20260601-0", Ova::rebuilt(7));
    let url = world
        .ova
        .serve("/rhcos-9.8.20260601-0-vmware.x86_64.ova", &rebuilt);
    let stale = Ova::good().stream_sha256;
    world.set_stream_at(newer, &url, &stale);
    let new = template_name(INFRA_ID, newer, "fd-a");
    let events = warned(c, &a, "ms-a", IMPORTED_WITHIN);
    let note = events[0]["note"].as_str().unwrap_or_default();
    for said in [&url, &stale, &rebuilt.stream_sha256] {
        assert!(note.contains(said.as_str()), "{said} not in {note}");
    }
    let message = world.status()["ms-a"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        message.contains(&url) && message.contains(&rebuilt.stream_sha256),
        "{message}"
    );
    let log = a.served.log_text();
    assert!(
        log.contains(&rebuilt.stream_sha256) && log.contains(&url),
        "{log}"
    );
    assert!(
        !vc.exists(&format!("{}/{new}", folder("fd-a"))),
        "nothing is imported"
    );
    assert_eq!(template(&c.get("ms-a")), old);

    world.set_stream_at(newer, &url, &rebuilt.stream_sha256);
    eventually(
        "ms-a to move to the new release",
        Duration::from_secs(300),
        || a.served.log_text(),
        || (template(&c.get("ms-a")) == new).then_some(()),
    );
    let extra = vc.extra_config(&format!("{}/{new}", folder("fd-a")));
    assert_eq!(extra["bootimage_webhook.ova_sha256"], rebuilt.stream_sha256);
    assert_eq!(extra["bootimage_webhook.release"], newer);
}
