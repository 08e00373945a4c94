//! Nutanix imports end to end: the webhook with `--nutanix-import`, as its ServiceAccount
//! with the component's RBAC, against a real kube-apiserver and the Prism Central double
//! (support::prism_double, no emulator exists) behind TLS on loopback, its CA trusted with
//! `--trusted-ca-bundle`. The stream's qcow2 is served over HTTP on loopback, which the
//! double fetches itself; the machine API's Secret holds the double's user.

use crate::support;

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use base64::Engine;
use bootimage_webhook::cluster::nutanix::{Marker, image_name};
use bootimage_webhook::serve::tls::DevCerts;
use serde_json::{Value, json};
use support::cluster::*;
use support::clusters::Profile;
use support::openstack::{Files, Forwarder};
use support::prism_double::PrismDouble;
use support::vsphere::assert_answered;

const USER: &str = "admin";
const PASSWORD: &str = "Nutanix/4u";
const RELEASE: &str = "9.8.20260428-0";
/// The next build, which the stream names later.
const NEXT: &str = "9.8.20260601-0";
const CUSTOM_IMAGE: &str = "my-golden-rhcos";
/// The Nutanix cluster on 4.22, as OpenShift leaves it, and its infrastructure name.
const PROFILE: Profile = Profile {
    platform: "nutanix",
    release: "4.22",
};
const PROFILE_INFRA: &str = "ci-ntnx-x7k2b";
/// How long an import of the test qcow2 may take here (it takes seconds).
const IMPORTED_WITHIN: Duration = Duration::from_secs(120);

fn path(release: &str) -> String {
    format!("/art/rhcos-{release}-nutanix.x86_64.qcow2")
}

/// Bytes standing for a release's qcow2 (Prism Central does not look inside).
fn qcow2(seed: u8) -> Vec<u8> {
    let mut data = b"QFI\xfb\x00\x00\x00\x03".to_vec();
    data.extend((0..200_000u32).map(|i| ((i.wrapping_mul(2654435761) >> 13) as u8) ^ seed));
    data
}

fn sha256(data: &[u8]) -> String {
    let d = ring::digest::digest(&ring::digest::SHA256, data);
    d.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// The apiserver with a Nutanix cluster whose Infrastructure names the double (behind
/// TLS), and the stream's two releases served.
struct World {
    cluster: Cluster,
    prism: PrismDouble,
    /// Ends TLS in front of the double, as Prism Central's port 9440 would.
    tls: Forwarder,
    infra: String,
    files: Files,
    data: BTreeMap<&'static str, Vec<u8>>,
    dir: tempfile::TempDir,
}

impl World {
    fn start(infra: &str) -> World {
        World::start_on(PROFILE, infra)
    }

    /// [`World::start`] from `profile`.
    fn start_on(profile: Profile, infra: &str) -> World {
        support::install_provider();
        // The profile's cluster, its infrastructure name the test's own.
        let cluster =
            Cluster::start_profile_with(profile, &[(PROFILE_INFRA, infra)]).with_shipped_touch();
        let prism = PrismDouble::start(USER, PASSWORD);
        prism.add_category(&format!("kubernetes-io-cluster-{infra}"), "owned");
        let certs = DevCerts::generate(&["127.0.0.1".into()]).unwrap();
        let tls = Forwarder::start(
            prism
                .endpoint()
                .rsplit(':')
                .next()
                .unwrap()
                .parse()
                .unwrap(),
            Some((&certs.chain_pem, &certs.key_pem)),
            None,
        );
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("ca.pem"), &certs.ca_pem).unwrap();
        let data = BTreeMap::from([(RELEASE, qcow2(1)), (NEXT, qcow2(2))]);
        let files = Files::serve(data.iter().map(|(r, d)| (path(r), d.clone())).collect());
        let world = World {
            cluster,
            prism,
            tls,
            infra: infra.to_owned(),
            files,
            data,
            dir,
        };
        world.nutanix_cluster();
        world.set_stream(RELEASE);
        support::rbac::importer_grants_to_the_webhook(&world.cluster.api, "nutanix-import");
        world
    }

    /// The profile's Infrastructure pointed at the double as its Prism Central, and the
    /// machine API's Secret with the double's user in place of the profile's example one.
    fn nutanix_cluster(&self) {
        let c = &self.cluster;
        let endpoint = json!({"address": "127.0.0.1", "port": self.tls.port});
        let spec = json!({"spec": {"platformSpec": {"nutanix": {"prismCentral": endpoint}}}});
        c.kubectl(&[
            "patch",
            "infrastructure",
            "cluster",
            "--type=merge",
            "-p",
            &spec.to_string(),
        ]);
        let credentials = json!([{"type": "basic_auth", "data": {"prismCentral":
            {"username": USER, "password": PASSWORD}, "prismElements": null}}]);
        let encoded = base64::engine::general_purpose::STANDARD.encode(credentials.to_string());
        let secret = json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": "nutanix-credentials", "namespace": NS},
            "data": {"credentials": encoded}});
        let out = c
            .api
            .kubectl_stdin(["apply", "-f", "-"], &secret.to_string());
        assert!(out.status.success(), "{}", text(&out));
    }

    /// The stream with `release`'s qcow2, served here, as its x86_64 `nutanix` artifact.
    fn set_stream(&self, release: &str) {
        self.set_stream_sha256(release, &sha256(&self.data[release]));
    }

    /// As [`World::set_stream`], the stream saying the qcow2's SHA-256 is `sha256`.
    fn set_stream_sha256(&self, release: &str, sha256: &str) {
        let configmap = support::fixture("configmap-coreos-bootimages.assembled.yaml");
        let mut stream: Value =
            serde_json::from_str(configmap["data"]["stream"].as_str().unwrap()).unwrap();
        let nutanix = &mut stream["architectures"]["x86_64"]["artifacts"]["nutanix"];
        assert_eq!(nutanix["release"], RELEASE);
        nutanix["release"] = json!(release);
        nutanix["formats"]["qcow2"]["disk"] = json!({"location": self.files.url(&path(release)),
            "sha256": sha256});
        self.cluster.set_stream(&stream.to_string());
    }

    /// `replica-a` with the importer on, registered, holding the Lease.
    fn holder(&self) -> Replica {
        let cache = self.dir.path().join("qcow2");
        let ca = self.dir.path().join("ca.pem");
        self.cluster.holder(&[
            "--nutanix-import",
            "--nutanix-image-cache",
            cache.to_str().unwrap(),
            "--nutanix-image-retention",
            "1s",
            "--trusted-ca-bundle",
            ca.to_str().unwrap(),
            // The importer's passes come this often too: retention needs passes.
            "--touch-resync",
            "3s",
        ])
    }

    /// The installer's worker MachineSet, on the image the installer uploaded.
    fn installer_ms(&self) -> String {
        format!("{}-worker-0", self.infra)
    }

    fn ours(&self, release: &str) -> String {
        image_name(&self.infra, release)
    }
}

/// A worker MachineSet on the image `name`.
fn nutanix_machineset(ms: &str, image: &str) -> Value {
    let value = json!({
        "apiVersion": "machine.openshift.io/v1", "kind": "NutanixMachineProviderConfig",
        "cluster": {"type": "uuid", "uuid": "00000000-0000-0000-0000-000000000001"},
        "credentialsSecret": {"name": "nutanix-credentials"},
        "image": {"type": "name", "name": image},
        "memorySize": "16Gi", "systemDiskSize": "120Gi", "vcpuSockets": 4, "vcpusPerSocket": 1,
        "subnets": [{"type": "uuid", "uuid": "00000000-0000-0000-0000-000000000002"}],
        "userDataSecret": {"name": "worker-user-data"}});
    json!({
        "apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet",
        "metadata": {"name": ms, "namespace": NS},
        "spec": {"replicas": 0,
            "selector": {"matchLabels": {"machine.openshift.io/cluster-api-machineset": ms}},
            "template": {
                "metadata": {"labels": {"machine.openshift.io/cluster-api-machineset": ms}},
                "spec": {"providerSpec": {"value": value}}}}
    })
}

fn image_of(ms: &Value) -> Value {
    ms.pointer(&format!("{PROVIDER}/image"))
        .cloned()
        .unwrap_or_default()
}

fn wait_image(c: &Cluster, name: &str, wanted: &str, r: &Replica) {
    let want = json!({"type": "name", "name": wanted});
    eventually(
        &format!("{name}'s image to move to {wanted}"),
        IMPORTED_WITHIN,
        || r.served.log_text(),
        || (image_of(&c.get(name)) == want).then_some(()),
    );
}

/// MachineSets on the installer's image move to the stream's image after one import (Prism
/// Central fetches the qcow2 once); a MachineSet on a customer's image stays. A restart of
/// the webhook imports nothing again. When the stream moves on, so do they, and the image
/// of ours nothing names any more is retired; the customer's and the installer's stay.
#[test]
fn nutanix_machinesets_move_to_the_image_imported_once_and_a_customers_stay() {
    let _parallel = support::parallel();
    let world = World::start("ci-ntnx-bgmove");
    let c = &world.cluster;
    let installer = format!("{}-rhcos", world.infra);
    let installer_uuid = world.prism.add_image(&installer, "", b"installer");
    let custom_uuid = world.prism.add_image(CUSTOM_IMAGE, "", b"custom");
    let a = world.holder();
    let ms_a = world.installer_ms();
    assert_eq!(
        image_of(&c.get(&ms_a)),
        json!({"type": "name", "name": installer})
    );
    c.create(&nutanix_machineset("ms-b", &installer));
    c.create(&nutanix_machineset("ms-custom", CUSTOM_IMAGE));

    let ours = world.ours(RELEASE);
    wait_image(c, &ms_a, &ours, &a);
    wait_image(c, "ms-b", &ours, &a);
    let imported = a.lines("imported the RHCOS qcow2 into Prism Central");
    assert_eq!(imported.len(), 1, "{}", a.served.log_text());
    eprintln!("{}", imported[0]);
    assert_eq!(world.prism.fetches(), 1);
    let held = world.prism.images_named(&ours);
    assert_eq!(held.len(), 1, "{held:?}");
    assert_eq!(held[0]["status"]["state"], "COMPLETE", "{:#}", held[0]);
    assert_eq!(
        image_of(&c.get("ms-custom")),
        json!({"type": "name", "name": CUSTOM_IMAGE})
    );
    assert_answered(c, "ms-custom", "CustomImage");

    // A restart looks, finds the image usable and imports nothing.
    drop(a);
    c.kubectl(&[
        "delete",
        "mutatingwebhookconfiguration",
        "bootimage-webhook",
    ]);
    let a = world.holder();
    c.create(&nutanix_machineset("ms-c", &installer));
    wait_image(c, "ms-c", &ours, &a);
    assert!(a.lines("importing the RHCOS qcow2").is_empty());
    assert_eq!(world.prism.fetches(), 1);

    the_next_release_retires_ours_alone(&world, &a);
    for (name, uuid) in [
        (installer, installer_uuid),
        (CUSTOM_IMAGE.into(), custom_uuid),
    ] {
        let found = world.prism.images_named(&name);
        assert_eq!(found.len(), 1, "{name}: {found:?}");
        assert_eq!(found[0]["metadata"]["uuid"], uuid);
    }
    assert!(a.lines("cannot import the Nutanix image").is_empty());
    c.assert_nothing_refused(&[&a]);
}

/// The Nutanix cluster on 4.19, as OpenShift leaves it (`managedBootImagesStatus: {}` there
/// too): the installer's MachineSet is enrolled by the webhook's own opt-in and moves to the
/// image imported once; `status` says by which rule.
#[test]
fn nutanix_on_4_19_the_installers_machineset_moves_after_one_import() {
    let _parallel = support::parallel();
    let profile = Profile {
        platform: "nutanix",
        release: "4.19",
    };
    let world = World::start_on(profile, "ci-ntnx-bg419");
    let c = &world.cluster;
    let mc = c.api.get_json(["machineconfiguration", "cluster"]);
    assert_eq!(mc["status"]["managedBootImagesStatus"], json!({}), "{mc:#}");
    let installer = format!("{}-rhcos", world.infra);
    world.prism.add_image(&installer, "", b"installer");
    let a = world.holder();
    let ours = world.ours(RELEASE);
    wait_image(c, &world.installer_ms(), &ours, &a);
    assert_eq!(world.prism.fetches(), 1);
    assert_eq!(world.prism.images_named(&ours).len(), 1);
    let rule = "the MCO does not manage boot images on Nutanix; installing bootimage-webhook is the opt-in";
    let ca = world.dir.path().join("ca.pem");
    let flags = ["--trusted-ca-bundle", ca.to_str().unwrap()];
    let report: Value = serde_json::from_str(&status_with(c, "json", &flags)).unwrap();
    assert_eq!(
        report["enrollment"]["machineSets"],
        format!("all: {rule}"),
        "{report:#}"
    );
    c.assert_nothing_refused(&[&a]);
}

/// The stream names the next build: the MachineSets move to its image, and the previous
/// image of ours, named by nothing, goes after the retention (1s here).
fn the_next_release_retires_ours_alone(world: &World, a: &Replica) {
    let c = &world.cluster;
    let (previous, next) = (world.ours(RELEASE), world.ours(NEXT));
    world.set_stream(NEXT);
    for ms in [world.installer_ms().as_str(), "ms-b", "ms-c"] {
        wait_image(c, ms, &next, a);
    }
    eventually(
        &format!("{previous} to be retired"),
        Duration::from_secs(60),
        || a.served.log_text(),
        || world.prism.images_named(&previous).is_empty().then_some(()),
    );
    let retired = a.lines("deleted an image of ours that nothing has named for the retention");
    assert_eq!(retired.len(), 1, "{retired:#?}");
    assert_eq!(world.prism.fetches(), 2);
    assert_eq!(world.prism.images_named(&next).len(), 1);
}

/// Without the machine API's Secret nothing moves and one line says why; with it, an image
/// under our name that is not ours blocks the import (a Warning Event names it) until it is
/// removed; then the image is imported, the MachineSet moves, and the log says the trouble
/// is over.
#[test]
fn nutanix_no_secret_then_a_foreign_image_then_the_import() {
    let _parallel = support::parallel();
    let world = World::start("ci-ntnx-bgforeign");
    let c = &world.cluster;
    let ours = world.ours(RELEASE);
    c.kubectl(&["delete", "secret", "nutanix-credentials", "-n", NS]);
    let installer = format!("{}-rhcos", world.infra);
    world.prism.add_image(&installer, "", b"installer");
    let foreign = world.prism.add_image(&ours, "someone else's", b"foreign");
    let a = world.holder();
    c.create(&nutanix_machineset("ms-a", &installer));
    a.wait_line("cannot import the Nutanix image");
    let first = a.lines("cannot import the Nutanix image");
    assert!(first[0].contains("nutanix-credentials"), "{}", first[0]);
    assert_answered(c, "ms-a", "ImageNotImported");

    world.nutanix_cluster();
    let taken = format!("taken by {foreign}");
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
    assert_eq!(events[0]["type"], "Warning");
    assert_eq!(
        image_of(&c.get("ms-a")),
        json!({"type": "name", "name": installer})
    );
    assert_eq!(world.prism.fetches(), 0);
    // `status` looks in Prism Central itself, and adds the importer's Event.
    let ca = world.dir.path().join("ca.pem");
    let report: Value = serde_json::from_str(&status_with(
        c,
        "json",
        &["--trusted-ca-bundle", ca.to_str().unwrap()],
    ))
    .unwrap();
    let row = status_row(&report, "ms-a");
    let message = row["message"].as_str().unwrap_or_default();
    assert_eq!(row["reason"], "ImageNotImported", "{row:#}");
    assert!(message.contains(&taken), "{message}");
    assert!(message.contains("the importer says: image"), "{message}");

    // A new trouble is an Event of its own: a look-alike with our marker copied, made by
    // another user, in place of the foreign image. The first Event still names the image
    // it was about; none is counted again with a note that is no longer true.
    world.prism.remove_image(&foreign);
    let copied = Marker {
        infra_id: world.infra.clone(),
        stream: "rhel-9".into(),
        release: RELEASE.into(),
        sha256: "ab".repeat(32),
        import_deadline: None,
    };
    let alike = world
        .prism
        .add_image(&ours, &copied.description(), b"look-alike");
    let events = eventually(
        "a second Warning Event on ms-a naming the look-alike",
        Duration::from_secs(180),
        || a.served.log_text(),
        || {
            let e = events_of(c, "ImageNotImported", "ms-a");
            (e.len() == 2).then_some(e)
        },
    );
    let notes: Vec<&str> = events.iter().filter_map(|e| e["note"].as_str()).collect();
    assert!(notes.iter().any(|n| n.contains(&taken)), "{notes:#?}");
    assert!(
        notes
            .iter()
            .any(|n| n.contains(&alike) && n.contains("look-alike")),
        "{notes:#?}"
    );
    world.prism.remove_image(&alike);
    eventually(
        &format!("ms-a to move to {ours}"),
        Duration::from_secs(240),
        || a.served.log_text(),
        || (image_of(&c.get("ms-a"))["name"] == ours).then_some(()),
    );
    a.wait_line("Prism Central answers again");
    assert!(a.lines("cannot import the Nutanix image").len() >= 2);
    c.assert_nothing_refused(&[&a]);
}

/// The stream's checksum does not match the qcow2: Prism Central's import fails, so does the
/// download here; nothing is imported, the MachineSet keeps its image, and one Warning Event
/// and one log line say why. The bad qcow2 is not fetched again.
#[test]
fn nutanix_a_bad_checksum_imports_nothing_and_warns_once() {
    let _parallel = support::parallel();
    let world = World::start("ci-ntnx-bgbad");
    let c = &world.cluster;
    world.set_stream_sha256(RELEASE, &"0".repeat(64));
    let installer = format!("{}-rhcos", world.infra);
    world.prism.add_image(&installer, "", b"installer");
    let a = world.holder();
    c.create(&nutanix_machineset("ms-a", &installer));
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
        note.contains(&world.ours(RELEASE)) && note.contains(&path(RELEASE)),
        "{note}"
    );
    // Retries go on (backoff) without another line, Event or fetch.
    let (fetches, hits) = (
        world.prism.fetches(),
        world.files.hits.load(Ordering::SeqCst),
    );
    std::thread::sleep(Duration::from_secs(12));
    assert_eq!(
        a.lines("cannot import the Nutanix image").len(),
        1,
        "{}",
        a.served.log_text()
    );
    assert_eq!(events_of(c, "ImageNotImported", "ms-a").len(), 1);
    assert_eq!(world.prism.fetches(), fetches);
    assert_eq!(world.files.hits.load(Ordering::SeqCst), hits);
    assert_eq!(
        image_of(&c.get("ms-a")),
        json!({"type": "name", "name": installer})
    );
    assert!(world.prism.images_named(&world.ours(RELEASE)).is_empty());
    c.assert_nothing_refused(&[&a]);
}
