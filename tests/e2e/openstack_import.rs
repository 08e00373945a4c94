//! OpenStack imports end to end: the webhook with `--openstack-import`, as its
//! ServiceAccount with the component's RBAC, against a real kube-apiserver and a real
//! Keystone and Glance (support::openstack, a project of the test's own). The stream's
//! qcow2.gz is a real small qcow2, served over HTTP on loopback; the machine API's Secret
//! holds the project's `clouds.yaml`.

use crate::support;

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use base64::Engine;
use bootimage_webhook::cluster::openstack::image_name;
use serde_json::{Value, json};
use support::cluster::*;
use support::clusters::Profile;
use support::openstack::{Files, Qcow2, Servers, Tenant};
use support::vsphere::assert_answered;

const RELEASE: &str = "9.8.20260428-0";
const GZ_PATH: &str = "/art/rhcos-9.8.20260428-0-openstack.x86_64.qcow2.gz";
/// The next build, which the stream names later.
const NEXT: &str = "9.8.20260601-0";
const NEXT_GZ_PATH: &str = "/art/rhcos-9.8.20260601-0-openstack.x86_64.qcow2.gz";
/// The build after it, which a restarted webhook fetches from a site's mirror.
const THIRD: &str = "9.8.20260715-0";
const THIRD_FILE: &str = "rhcos-9.8.20260715-0-openstack.x86_64.qcow2.gz";
const CUSTOM_IMAGE: &str = "my-golden-rhcos";
/// The OpenStack cluster on 4.22, as OpenShift leaves it, and its infrastructure name.
const PROFILE: Profile = Profile {
    platform: "openstack",
    release: "4.22",
};
const PROFILE_INFRA: &str = "ci-os-x7k2b";
/// The same cluster on 4.19, whose MCO leaves the same status here.
const PROFILE_4_19: Profile = Profile {
    platform: "openstack",
    release: "4.19",
};
/// How long an import of the test qcow2 may take here (it takes seconds).
const IMPORTED_WITHIN: Duration = Duration::from_secs(120);

/// The apiserver with an OpenStack cluster whose credentials name the project's Keystone,
/// and the stream's qcow2 served.
struct World {
    cluster: Cluster,
    tenant: Tenant,
    infra: String,
    files: Files,
    qcow2: Qcow2,
    next: Qcow2,
    cache: tempfile::TempDir,
}

impl World {
    /// `stream_sha256`: what the stream says the `.gz`'s SHA-256 is (`None`: the truth).
    fn start(servers: &Servers, project: &str, stream_sha256: Option<&str>) -> World {
        World::start_on(PROFILE, servers, project, stream_sha256)
    }

    /// [`World::start`] from `profile`.
    fn start_on(
        profile: Profile,
        servers: &Servers,
        project: &str,
        stream_sha256: Option<&str>,
    ) -> World {
        support::install_provider();
        let infra = format!("ci-os-{project}");
        // The profile's cluster, its infrastructure name the test's own: each test's images
        // carry it, and no two tests share one.
        let cluster =
            Cluster::start_profile_with(profile, &[(PROFILE_INFRA, &infra)]).with_shipped_touch();
        let tenant = servers.tenant(project);
        let cache = tempfile::tempdir().unwrap();
        let qcow2 = Qcow2::make(cache.path(), 1, 7);
        let next = Qcow2::make(cache.path(), 1, 8);
        let files = Files::serve(BTreeMap::from([
            (GZ_PATH.to_owned(), qcow2.gz.clone()),
            (NEXT_GZ_PATH.to_owned(), next.gz.clone()),
        ]));
        let world = World {
            cluster,
            tenant,
            infra,
            files,
            qcow2,
            next,
            cache,
        };
        world.openstack_cluster();
        let gz_sha256 = stream_sha256.unwrap_or(&world.qcow2.gz_sha256).to_owned();
        world.set_stream(RELEASE, GZ_PATH, &gz_sha256, &world.qcow2.sha256);
        let c = &world.cluster;
        c.kubectl(&["create", "namespace", "openshift-config"]);
        support::rbac::importer_grants_to_the_webhook(&c.api, "openstack-import");
        world
    }

    /// The machine API's Secret with the project's `clouds.yaml`, in place of the profile's
    /// example one.
    fn openstack_cluster(&self) {
        let c = &self.cluster;
        let clouds = base64::engine::general_purpose::STANDARD.encode(&self.tenant.clouds_yaml);
        let secret = json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": "openstack-cloud-credentials", "namespace": NS},
            "data": {"clouds.yaml": clouds}});
        let out = c
            .api
            .kubectl_stdin(["apply", "-f", "-"], &secret.to_string());
        assert!(out.status.success(), "{}", text(&out));
    }

    /// The stream with the qcow2.gz served at `path` as its x86_64 `openstack` artifact
    /// of RHCOS `release`.
    fn set_stream(&self, release: &str, path: &str, gz_sha256: &str, sha256: &str) {
        self.set_stream_at(release, &self.files.url(path), gz_sha256, sha256);
    }

    /// The stream naming the qcow2.gz of RHCOS `release` at `location`.
    fn set_stream_at(&self, release: &str, location: &str, gz_sha256: &str, sha256: &str) {
        let configmap = support::fixture("configmap-coreos-bootimages.assembled.yaml");
        let mut stream: Value =
            serde_json::from_str(configmap["data"]["stream"].as_str().unwrap()).unwrap();
        let openstack = &mut stream["architectures"]["x86_64"]["artifacts"]["openstack"];
        assert_eq!(openstack["release"], RELEASE);
        openstack["release"] = json!(release);
        openstack["formats"]["qcow2.gz"]["disk"] = json!({"location": location,
            "sha256": gz_sha256, "uncompressed-sha256": sha256});
        self.cluster.set_stream(&stream.to_string());
    }

    /// `replica-a` with the importer on, registered, holding the Lease.
    fn holder(&self) -> Replica {
        self.holder_with(&[], None)
    }

    /// [`World::holder`] with more flags, restarted on `bind` (the address the webhook is
    /// registered at) when given.
    fn holder_with(&self, more: &[&str], bind: Option<&str>) -> Replica {
        let cache = self.cache.path().join("qcow2");
        let mut flags = vec![
            "--openstack-import",
            "--openstack-image-cache",
            cache.to_str().unwrap(),
            "--openstack-image-retention",
            "1s",
            // The importer's passes come this often too: retention needs passes.
            "--touch-resync",
            "3s",
        ];
        flags.extend_from_slice(more);
        let Some(bind) = bind else {
            return self.cluster.holder(&flags);
        };
        let a = self
            .cluster
            .replica_in("replica-a", "0s", bind, &flags, &[]);
        self.cluster
            .wait_holder("replica-a", Duration::from_secs(30));
        a
    }

    /// An image of the project's own, as the installer or a customer uploads it (no data).
    fn image(&self, name: &str) -> Value {
        let image = json!({"name": name, "disk_format": "qcow2", "container_format": "bare",
            "visibility": "private", "hw_disk_bus": "scsi", "hw_scsi_model": "virtio-scsi"});
        self.tenant.glance("POST", "/v2/images", Some(image))
    }

    /// The installer's worker MachineSet, on the image the installer uploaded.
    fn installer_ms(&self) -> String {
        format!("{}-worker-0", self.infra)
    }

    fn ours(&self, release: &str) -> String {
        image_name(&self.infra, release)
    }
}

/// A worker MachineSet on `image`; booted from a volume of it with `root_volume`.
fn openstack_machineset(name: &str, image: &str, root_volume: bool) -> Value {
    let mut value = json!({
        "apiVersion": "machine.openshift.io/v1alpha1", "kind": "OpenstackProviderSpec",
        "cloudName": "openstack",
        "cloudsSecret": {"name": "openstack-cloud-credentials", "namespace": NS},
        "flavor": "m1.xlarge", "image": image,
        "userDataSecret": {"name": "worker-user-data"}});
    if root_volume {
        value["rootVolume"] = json!({"diskSize": 100, "sourceUUID": image});
    }
    json!({
        "apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"replicas": 0,
            "selector": {"matchLabels": {"machine.openshift.io/cluster-api-machineset": name}},
            "template": {
                "metadata": {"labels": {"machine.openshift.io/cluster-api-machineset": name}},
                "spec": {"providerSpec": {"value": value}}}}
    })
}

fn field<'a>(ms: &'a Value, path: &str) -> &'a str {
    ms.pointer(&format!("{PROVIDER}/{path}"))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn wait_image(c: &Cluster, name: &str, path: &str, wanted: &str, r: &Replica) {
    eventually(
        &format!("{name}'s {path} to move to {wanted}"),
        IMPORTED_WITHIN,
        || r.served.log_text(),
        || (field(&c.get(name), path) == wanted).then_some(()),
    );
}

/// MachineSets on the installer's image move to the stream's image after one import,
/// which carries how the cloud boots RHCOS from the installer's image; a MachineSet on a
/// customer's image stays. When the stream moves on, so do they, and the image of ours
/// nothing names any more is retired; the customer's images in Glance (one named like
/// ours) and the installer's stay. Restarted with a site's mirror, the webhook imports
/// the next build from it alone.
#[test]
fn stale_machinesets_move_to_the_image_imported_once_and_a_customers_stay() {
    let _parallel = support::parallel();
    let (servers, _turn) = block_on(Servers::shared());
    let world = World::start(servers, "bgmove", None);
    let c = &world.cluster;
    let installer = format!("{}-rhcos", world.infra);
    world.image(&installer);
    let a = world.holder();
    let ms_image = world.installer_ms();
    assert_eq!(field(&c.get(&ms_image), "image"), installer);
    c.create(&openstack_machineset("ms-volume", &installer, true));
    c.create(&openstack_machineset("ms-custom", CUSTOM_IMAGE, false));

    let ours = world.ours(RELEASE);
    wait_image(c, &ms_image, "image", &ours, &a);
    wait_image(c, "ms-volume", "rootVolume/sourceUUID", &ours, &a);
    // The volume's image field named the same image: it follows.
    assert_eq!(field(&c.get("ms-volume"), "image"), ours);
    let imported = a.lines("imported the RHCOS qcow2 into Glance");
    assert_eq!(imported.len(), 1, "{}", a.served.log_text());
    eprintln!("{}", imported[0]);
    assert_eq!(world.files.hits.load(Ordering::SeqCst), 1);
    let held = world.tenant.images_named(&ours);
    assert_eq!(held.len(), 1, "{held:?}");
    assert_eq!(held[0]["status"], "active");
    assert_eq!(held[0]["hw_disk_bus"], "scsi");
    assert_eq!(
        held[0]["bootimage_webhook_infrastructure_name"],
        world.infra
    );
    assert_eq!(field(&c.get("ms-custom"), "image"), CUSTOM_IMAGE);
    assert_answered(c, "ms-custom", "CustomImage");
    the_next_release_retires_ours_alone(&world, &a, &installer);
    assert!(a.lines("cannot import the OpenStack image").is_empty());
    c.assert_nothing_refused(&[&a]);
    let bind = a.served.webhook.to_string();
    drop(a);
    a_restart_imports_the_third_from_a_mirror_alone(&world, &bind);
}

/// MachineConfiguration `cluster` as OpenShift 4.19 and 4.22 leave it on OpenStack
/// (`managedBootImagesStatus: {}`, the profiles'): the MCO manages no boot images here, so
/// its status is not a selection; installing the webhook is the opt-in. The installer's
/// MachineSets are enrolled, move to the image imported once, and the decision's log line and
/// `status` say which rule enrolled them.
#[test]
fn the_status_the_mco_leaves_on_openstack_enrolls_the_installers_machinesets() {
    let _parallel = support::parallel();
    let (servers, _turn) = block_on(Servers::shared());
    for (profile, project) in [(PROFILE_4_19, "bgenroll19"), (PROFILE, "bgenroll")] {
        enrolled_by_the_webhooks_own_opt_in(&World::start_on(profile, servers, project, None));
    }
}

fn enrolled_by_the_webhooks_own_opt_in(world: &World) {
    let c = &world.cluster;
    let mc = c.api.get_json(["machineconfiguration", "cluster"]);
    assert_eq!(mc["status"]["managedBootImagesStatus"], json!({}), "{mc:#}");
    let installer = format!("{}-rhcos", world.infra);
    world.image(&installer);
    let a = world.holder();
    let worker_a = world.installer_ms();
    c.create(&openstack_machineset("ms-worker-b", &installer, true));
    let mut opted = openstack_machineset("ms-opted-out", &installer, false);
    opted["metadata"]["labels"] = json!({OPT_OUT: "false"});
    c.create(&opted);

    let ours = world.ours(RELEASE);
    wait_image(c, &worker_a, "image", &ours, &a);
    wait_image(c, "ms-worker-b", "rootVolume/sourceUUID", &ours, &a);
    assert_eq!(world.tenant.images_named(&ours).len(), 1);
    assert_eq!(world.files.hits.load(Ordering::SeqCst), 1);
    let rule = "the MCO does not manage boot images on OpenStack; installing bootimage-webhook is the opt-in";
    let moved = a.lines(&format!("Patching machineset {worker_a}"));
    assert!(
        moved
            .iter()
            .any(|l| l.contains(&format!("enrolled={rule}"))),
        "{moved:#?}"
    );
    // The label still opts one out, and nothing else of it changed.
    assert_eq!(field(&c.get("ms-opted-out"), "image"), installer);
    let report = status_json(c);
    assert_eq!(
        report["enrollment"]["machineSets"],
        format!("all: {rule}"),
        "{report:#}"
    );
    assert_eq!(status_row(&report, &worker_a)["reason"], "UpToDate");
    assert_eq!(status_row(&report, "ms-worker-b")["reason"], "UpToDate");
    assert_eq!(status_row(&report, "ms-opted-out")["reason"], "OptedOut");
    let table = status(c, "table");
    assert!(
        table.contains(&format!("Enrolled MachineSets: all: {rule}\n")),
        "{table}"
    );
    c.assert_nothing_refused(&[&a]);
}

/// The webhook restarted with `--artifact-base-url` on a site whose only way to the
/// artifacts is its mirror: the stream names a host nobody reaches, the third build is
/// fetched from the mirror once, checked against the stream's checksums, imported, and the
/// MachineSets move to it; the image of the build before is not imported again.
fn a_restart_imports_the_third_from_a_mirror_alone(world: &World, bind: &str) {
    let c = &world.cluster;
    let third = Qcow2::make(world.cache.path(), 1, 9);
    let mirror = Files::serve(BTreeMap::from([(
        format!("/rhcos/{THIRD_FILE}"),
        third.gz.clone(),
    )]));
    let base = mirror.url("/rhcos/");
    let b = world.holder_with(&["--artifact-base-url", &base], Some(bind));
    let unreachable = format!(
        "https://rhcos.mirror.invalid/art/storage/prod/streams/rhel-9.8/builds/{THIRD}/x86_64/{THIRD_FILE}"
    );
    world.set_stream_at(THIRD, &unreachable, &third.gz_sha256, &third.sha256);
    let ours = world.ours(THIRD);
    wait_image(c, &world.installer_ms(), "image", &ours, &b);
    wait_image(c, "ms-volume", "rootVolume/sourceUUID", &ours, &b);
    // Twice: the restarted replica first asks for the build before (to prove the image it
    // finds in Glance by hashing its qcow2; this mirror does not hold it), then the third.
    assert_eq!(mirror.hits.load(Ordering::SeqCst), 2);
    // The first server saw the two builds before the restart, and nothing since.
    assert_eq!(world.files.hits.load(Ordering::SeqCst), 2);
    let held = world.tenant.images_named(&ours);
    assert_eq!(held.len(), 1, "{held:?}");
    assert_eq!(held[0]["status"], "active");
    let imported = b.lines("imported the RHCOS qcow2 into Glance");
    assert_eq!(imported.len(), 1, "{}", b.served.log_text());
    assert_eq!(field(&c.get("ms-custom"), "image"), CUSTOM_IMAGE);
    c.assert_nothing_refused(&[&b]);
}

/// The stream names the next build: the MachineSets move to its image, and the previous
/// image of ours, named by nothing, goes after the retention (1s here); the installer's,
/// the customer's and a look-alike without our marker stay.
fn the_next_release_retires_ours_alone(world: &World, a: &Replica, installer: &str) {
    let c = &world.cluster;
    let custom = world.image(CUSTOM_IMAGE);
    let alike = world.image(&world.ours("9.6.20250101-0"));
    let (previous, next) = (world.ours(RELEASE), world.ours(NEXT));
    let n = &world.next;
    world.set_stream(NEXT, NEXT_GZ_PATH, &n.gz_sha256, &n.sha256);
    wait_image(c, &world.installer_ms(), "image", &next, a);
    wait_image(c, "ms-volume", "rootVolume/sourceUUID", &next, a);
    eventually(
        &format!("{previous} to be retired"),
        Duration::from_secs(60),
        || a.served.log_text(),
        || {
            world
                .tenant
                .images_named(&previous)
                .is_empty()
                .then_some(())
        },
    );
    let retired = a.lines("deleted an image of ours that nothing has named for the retention");
    assert_eq!(retired.len(), 1, "{retired:#?}");
    assert_eq!(world.files.hits.load(Ordering::SeqCst), 2);
    assert_eq!(world.tenant.images_named(&next).len(), 1);
    for (name, id) in [
        (installer, None),
        (CUSTOM_IMAGE, custom["id"].as_str()),
        (alike["name"].as_str().unwrap(), alike["id"].as_str()),
    ] {
        let found = world.tenant.images_named(name);
        assert_eq!(found.len(), 1, "{name}: {found:?}");
        if let Some(id) = id {
            assert_eq!(found[0]["id"], id);
        }
    }
}

/// Without the machine API's Secret nothing moves and one line says why; with it, an image
/// under our name that is not ours blocks the import (a Warning Event and `status` name it)
/// until it is removed; then the image is imported, the MachineSet moves, and the log says
/// the trouble is over.
#[test]
fn no_secret_then_a_foreign_image_then_the_import() {
    let _parallel = support::parallel();
    let (servers, _turn) = block_on(Servers::shared());
    let world = World::start(servers, "bgforeign", None);
    let c = &world.cluster;
    let ours = world.ours(RELEASE);
    c.kubectl(&["delete", "secret", "openstack-cloud-credentials", "-n", NS]);
    let installer = format!("{}-rhcos", world.infra);
    world.image(&installer);
    let foreign = world.image(&ours);
    let a = world.holder();
    c.create(&openstack_machineset("ms-a", &installer, false));
    a.wait_line("cannot import the OpenStack image");
    let first = a.lines("cannot import the OpenStack image");
    assert!(
        first[0].contains("openstack-cloud-credentials"),
        "{}",
        first[0]
    );
    assert_answered(c, "ms-a", "ImageNotImported");

    world.openstack_cluster();
    let taken = format!("taken by {}", foreign["id"].as_str().unwrap());
    let events = eventually(
        "a Warning Event on ms-a naming the foreign image",
        Duration::from_secs(180),
        || a.served.log_text(),
        || {
            let e = events_of(c, "ImageNotImported", "ms-a");
            e.iter()
                .any(|e| e["note"].as_str().is_some_and(|n| n.contains(&taken)))
                .then_some(e)
        },
    );
    assert_eq!(events.len(), 1, "{events:#?}");
    assert_eq!(field(&c.get("ms-a"), "image"), installer);
    assert_eq!(world.files.hits.load(Ordering::SeqCst), 0);
    // `status` looks in Glance itself, and adds the importer's Event.
    let report = status_json(c);
    let row = status_row(&report, "ms-a");
    let message = row["message"].as_str().unwrap_or_default();
    assert_eq!(row["reason"], "ImageNotImported", "{row:#}");
    assert!(message.contains(&taken), "{message}");
    assert!(message.contains("the importer says: image"), "{message}");

    world.tenant.glance(
        "DELETE",
        &format!("/v2/images/{}", foreign["id"].as_str().unwrap()),
        None,
    );
    eventually(
        &format!("ms-a to move to {ours}"),
        Duration::from_secs(240),
        || a.served.log_text(),
        || (field(&c.get("ms-a"), "image") == ours).then_some(()),
    );
    a.wait_line("Glance answers again");
    assert_eq!(a.lines("cannot import the OpenStack image").len(), 2);
    c.assert_nothing_refused(&[&a]);
}

/// The stream's checksum does not match the qcow2.gz: nothing is imported, the MachineSet
/// keeps its image, one Warning Event on it says why, and so does one log line.
#[test]
fn a_bad_checksum_imports_nothing_and_warns_once() {
    let _parallel = support::parallel();
    let (servers, _turn) = block_on(Servers::shared());
    let world = World::start(servers, "bgbad", Some(&"0".repeat(64)));
    let c = &world.cluster;
    let installer = format!("{}-rhcos", world.infra);
    world.image(&installer);
    let a = world.holder();
    c.create(&openstack_machineset("ms-a", &installer, false));
    let events = eventually(
        "a Warning Event on ms-a",
        IMPORTED_WITHIN,
        || a.served.log_text(),
        || {
            let e = events_of(c, "ImageNotImported", "ms-a");
            (!e.is_empty()).then_some(e)
        },
    );
    let note = events[0]["note"].as_str().unwrap_or_default();
    assert_eq!(events[0]["type"], "Warning");
    assert!(
        note.contains(&world.ours(RELEASE)) && note.contains(GZ_PATH),
        "{note}"
    );
    // Retries go on (backoff) without another line, Event or download.
    std::thread::sleep(Duration::from_secs(12));
    let lines = a.lines("cannot import the OpenStack image");
    assert_eq!(lines.len(), 1, "{}", a.served.log_text());
    assert_eq!(events_of(c, "ImageNotImported", "ms-a").len(), 1);
    assert_eq!(world.files.hits.load(Ordering::SeqCst), 1);
    assert_eq!(field(&c.get("ms-a"), "image"), installer);
    assert!(world.tenant.images_named(&world.ours(RELEASE)).is_empty());
    c.assert_nothing_refused(&[&a]);
}
