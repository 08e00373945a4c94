//! vSphere imports end to end (support::vsphere's world: the webhook and its importer
//! against vcsim and a real kube-apiserver): what moves where, what is imported and how
//! (marker, tags, disk provisioning), and what happens when vCenter or the OVA is wrong.
//!
//! The replicas run the toucher at the shipped defaults. Every MachineSet write goes
//! through the apiserver, which applies the webhook's patches with its own JSON Patch
//! library.

use crate::support;

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bootimage_webhook::core::platforms::vsphere::template_name;
use serde_json::json;
use support::cluster::*;
use support::openstack::Files;
use support::vcsim::VCenter;
use support::vsphere::*;

/// A stale MachineSet in each failure domain moves to the template imported there; a
/// MachineSet on a template that is neither the installer's nor ours stays.
#[test]
fn stale_machinesets_move_to_the_template_imported_in_their_failure_domain() {
    let _parallel = support::parallel();
    let world = World::start(Ova::good());
    let vc = world.vcenter();
    let c = &world.cluster;
    // The install-config chose eager-zeroed disks.
    world.install_config_disk_type("eagerZeroedThick");
    let tag = vc.create_tag("machines", "workers-b");
    // The installer's MachineSets, one per failure domain as the profile has them; an
    // administrator gave fd-b's machines a tag of their own.
    assert_eq!(template(&c.get(INSTALLER_MS_A)), INSTALLER_A);
    assert_eq!(template(&c.get(INSTALLER_MS_B)), INSTALLER_B);
    let tagged = json!([{"op": "add", "path": format!("{PROVIDER}/tagIDs"), "value": [tag]}]);
    c.kubectl(&[
        "patch",
        "machineset",
        INSTALLER_MS_B,
        "-n",
        NS,
        "--type=json",
        "-p",
        &tagged.to_string(),
    ]);
    let a = world.holder();
    c.create(&vsphere_machineset("ms-custom", "fd-a", CUSTOM_TEMPLATE));
    for (name, fd, own_tags) in [
        (INSTALLER_MS_A, "fd-a", vec![]),
        (INSTALLER_MS_B, "fd-b", vec!["workers-b"]),
    ] {
        let wanted = template_name(INFRA_ID, RELEASE, fd);
        wait_template(c, name, &wanted, &a);
        let path = format!("/{}/vm/{INFRA_ID}/{wanted}", datacenter(fd));
        assert!(
            vc.is_template(&path),
            "{wanted} is not a template in vCenter"
        );
        assert_tagged_and_marked(vc, &path, &own_tags);
    }
    let ms_b = c.get(INSTALLER_MS_B);
    assert_eq!(
        ms_b.pointer(&format!("{PROVIDER}/tagIDs")),
        Some(&json!([tag]))
    );
    assert_one_import_per_failure_domain(&a);
    assert_eq!(template(&c.get("ms-custom")), CUSTOM_TEMPLATE);
    // The webhook said why it left the customer's template alone.
    assert_answered(c, "ms-custom", "CustomImage");
    // `status` looks in vCenter itself and agrees; a MachineSet written while the webhook
    // is not registered would move there.
    c.kubectl(&[
        "delete",
        "mutatingwebhookconfiguration",
        "bootimage-webhook",
    ]);
    c.create(&vsphere_machineset("ms-late", "fd-b", INSTALLER_B));
    assert_eq!(template(&c.get("ms-late")), INSTALLER_B);
    let rows = world.status();
    assert_eq!(rows["ms-late"]["reason"], "Updated", "{rows:#}");
    assert_eq!(rows[INSTALLER_MS_A]["reason"], "UpToDate", "{rows:#}");
    assert_eq!(rows[INSTALLER_MS_B]["reason"], "UpToDate", "{rows:#}");
    assert_eq!(rows["ms-custom"]["reason"], "CustomImage", "{rows:#}");
}

/// The template at `path` is tagged as the installer tags everything of the cluster, and
/// with the MachineSet's `own_tags`; and marked as ours from its creation: the cluster,
/// the release, the OVA, the import's deadline.
fn assert_tagged_and_marked(vc: &VCenter, path: &str, own_tags: &[&str]) {
    // vCenter lists a VM's tags in no set order.
    let mut tags = vc.tags_of(path);
    tags.sort();
    let mut want = [&[INFRA_ID], own_tags].concat();
    want.sort();
    assert_eq!(tags, want);
    let extra = vc.extra_config(path);
    let marker = |key: &str| extra.get(&format!("bootimage_webhook.{key}")).cloned();
    assert_eq!(
        marker("infrastructure_name").as_deref(),
        Some(INFRA_ID),
        "{extra:?}"
    );
    assert_eq!(marker("release").as_deref(), Some(RELEASE), "{extra:?}");
    let sha = Ova::good().stream_sha256;
    assert_eq!(
        marker("ova_sha256").as_deref(),
        Some(sha.as_str()),
        "{extra:?}"
    );
    assert!(marker("import_deadline").is_some(), "{extra:?}");
}

/// One import per failure domain, each on a host of that failure domain's cluster that
/// sees its datastore, with the install-config's disk type, the disk uploaded whole. The
/// import's time is printed (`cargo test --features e2e --test e2e -- vsphere_import::
/// --nocapture`).
fn assert_one_import_per_failure_domain(a: &Replica) {
    let imported = a.lines("imported the RHCOS OVA as a template");
    assert_eq!(imported.len(), 2, "{}", a.served.log_text());
    let importing = a.lines("importing the RHCOS OVA");
    assert!(
        importing.len() == 2
            && importing
                .iter()
                .all(|l| l.contains("host=\"host-")
                    && l.contains("disk_provisioning=eagerZeroedThick")),
        "{importing:#?}"
    );
    for line in imported {
        assert!(line.contains(&format!("bytes={DISK_BYTES}")), "{line}");
        eprintln!("{line}");
    }
}

/// A disconnected site: the stream's host cannot be reached, and `--artifact-base-url`
/// names the site's own HTTP server, which holds the OVA under its file name and nothing
/// else. The template is imported from there, checked against the stream's checksum.
#[test]
fn a_disconnected_site_imports_the_ova_from_its_mirror() {
    let _parallel = support::parallel();
    let world = World::start(Ova::good());
    let vc = world.vcenter();
    let c = &world.cluster;
    let ova = Ova::good();
    let file = format!("rhcos-{RELEASE}-vmware.x86_64.ova");
    let upstream = format!(
        "https://rhcos.mirror.invalid/art/storage/prod/streams/rhel-9.8/builds/{RELEASE}/x86_64/{file}"
    );
    world.set_stream_at(RELEASE, &upstream, &ova.stream_sha256);
    let at = format!("/rhcos/{file}");
    let mirror = Files::serve(BTreeMap::from([(at.clone(), ova.bytes.to_vec())]));
    let a = world.holder_with(&["--artifact-base-url", &mirror.url("/rhcos")]);
    c.create(&vsphere_machineset("ms-a", "fd-a", INSTALLER_A));
    let wanted = template_name(INFRA_ID, RELEASE, "fd-a");
    wait_template(c, "ms-a", &wanted, &a);
    let path = format!("{}/{wanted}", folder("fd-a"));
    assert!(vc.is_template(&path), "{wanted} is not a template");
    // Marked with the stream's checksum, which the download was checked against.
    assert_tagged_and_marked(vc, &path, &[]);
    let downloads = a.lines("downloading the RHCOS OVA");
    assert_eq!(downloads.len(), 1, "{downloads:#?}");
    assert!(downloads[0].contains(&mirror.url(&at)), "{}", downloads[0]);
    assert_eq!(mirror.hits.load(Ordering::SeqCst), 1);
    c.assert_nothing_refused(&[&a]);
}

/// vCenter down: nothing is denied, one log line says why, and once it is back the
/// template is imported and the MachineSet moves.
#[test]
fn vcenter_unreachable_then_back_denies_nothing_and_imports_after() {
    let _parallel = support::parallel();
    let mut world = World::start(Ova::good());
    let port = free_port();
    world.point_at(port);
    let c = &world.cluster;
    let a = world.holder();
    c.create(&vsphere_machineset("ms-a", "fd-a", INSTALLER_A));
    a.wait_line("cannot import the vSphere template");
    assert_eq!(template(&c.get("ms-a")), INSTALLER_A);
    assert_answered(c, "ms-a", "TemplateNotImported");
    let rows = world.status();
    let message = rows["ms-a"]["message"].as_str().unwrap_or_default();
    assert_eq!(rows["ms-a"]["reason"], "TemplateNotImported", "{rows:#}");
    assert!(message.contains("Connection refused"), "{message}");
    // Retries go on (backoff) without another line for the same trouble.
    std::thread::sleep(Duration::from_secs(20));
    let lines = a.lines("cannot import the vSphere template");
    assert_eq!(
        lines.len(),
        1,
        "one line per trouble:\n{}",
        a.served.log_text()
    );

    world.start_vcenter_on(port);
    let c = &world.cluster;
    // A write rings the importer instead of waiting for its backoff.
    c.kubectl(&["annotate", "machineset", "ms-a", "-n", NS, "poke=1"]);
    a.wait_line("vCenter answers again");
    wait_template(c, "ms-a", &template_name(INFRA_ID, RELEASE, "fd-a"), &a);
    c.assert_nothing_refused(&[&a]);
}

/// Behind a cluster-wide proxy that is down: nothing is denied or imported, the
/// MachineSet keeps its template, and the one log line names the proxy, so that an
/// administrator looks at the proxy rather than at vCenter.
#[test]
fn with_the_proxy_down_nothing_moves_and_the_line_names_the_proxy() {
    let _parallel = support::parallel();
    let world = World::start(Ova::good());
    let c = &world.cluster;
    let proxy = format!("http://127.0.0.1:{}", support::proxy::free_port());
    let a = world.holder_in(&[], &[("HTTPS_PROXY", &proxy), ("NO_PROXY", "")]);
    c.create(&vsphere_machineset("ms-a", "fd-a", INSTALLER_A));
    a.wait_line("cannot import the vSphere template");
    assert_answered(c, "ms-a", "TemplateNotImported");
    assert_eq!(template(&c.get("ms-a")), INSTALLER_A);
    let lines = a.lines("cannot import the vSphere template");
    assert_eq!(lines.len(), 1, "{lines:#?}");
    let through = format!("(through the proxy {proxy})");
    assert!(lines[0].contains(&through), "{}", lines[0]);
    c.assert_nothing_refused(&[&a]);
}

/// The stream's checksum does not match the OVA: nothing is imported, the MachineSet
/// keeps its template, a Warning Event on it says why, and so does the webhook.
#[test]
fn a_bad_checksum_imports_nothing_and_warns() {
    let _parallel = support::parallel();
    let world = World::start(Ova::bad_checksum());
    let vc = world.vcenter();
    let c = &world.cluster;
    let a = world.holder();
    c.create(&vsphere_machineset("ms-a", "fd-a", INSTALLER_A));
    let events = warned(c, &a, "ms-a", IMPORTED_WITHIN);
    let note = events[0]["note"].as_str().unwrap_or_default();
    assert_eq!(events[0]["type"], "Warning");
    assert!(
        note.contains("SHA-256") && note.contains("not imported"),
        "{note}"
    );
    let wanted = template_name(INFRA_ID, RELEASE, "fd-a");
    assert!(
        !vc.exists(&format!("/DC0/vm/{INFRA_ID}/{wanted}")),
        "nothing is imported"
    );
    assert_eq!(template(&c.get("ms-a")), INSTALLER_A);
    assert_answered(c, "ms-a", "TemplateNotImported");
    let rows = world.status();
    assert_eq!(rows["ms-a"]["reason"], "TemplateNotImported", "{rows:#}");
    // `status` says what is wrong: the URL, the expected and the actual checksum.
    let message = rows["ms-a"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("https://")
            && message.contains(&"0".repeat(64))
            && message.contains(&Ova::good().stream_sha256),
        "{message}"
    );
    // The log says why, once.
    let lines = a.lines("cannot import the vSphere template");
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert!(lines[0].contains("SHA-256") && lines[0].contains(&"0".repeat(64)));
    assert!(
        !a.served
            .log()
            .iter()
            .any(|l| l.contains("imported the RHCOS OVA as a template"))
    );
}

/// An OVA that lacks the disk its descriptor names makes nothing in vCenter, and says why
/// on the MachineSet.
#[test]
fn an_ova_without_its_disk_makes_nothing() {
    let _parallel = support::parallel();
    let world = World::start(Ova::without_disk());
    let vc = world.vcenter();
    let c = &world.cluster;
    let a = world.holder();
    c.create(&vsphere_machineset("ms-a", "fd-a", INSTALLER_A));
    let events = warned(c, &a, "ms-a", IMPORTED_WITHIN);
    let note = events[0]["note"].as_str().unwrap_or_default();
    assert!(note.contains("disk.vmdk, which is not in it"), "{note}");
    let wanted = template_name(INFRA_ID, RELEASE, "fd-a");
    assert!(
        !vc.exists(&format!("{}/{wanted}", folder("fd-a"))),
        "an import without its disk left a VM"
    );
    assert_eq!(template(&c.get("ms-a")), INSTALLER_A);
}
