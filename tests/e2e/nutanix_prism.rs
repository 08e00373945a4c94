//! The Nutanix cluster side against the Prism Central double (tests/support/prism_double.rs,
//! no emulator exists): the first import from the stream's URL, a second run that fetches
//! nothing, a second release beside the first and the retention, a customer's look-alike
//! never touched, a wrong checksum that imports nothing, a URL Prism Central cannot reach
//! uploaded from here, a failed import left behind and deleted on the next pass, a name
//! clash after the import, a list longer than a page, credentials Prism Central refuses,
//! and a site's mirror. The stream's qcow2 is served over HTTP on loopback.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bootimage_webhook::cluster::egress::Proxy;
use bootimage_webhook::cluster::nutanix::{
    self, BasicAuth, Credentials, Importer, Marker, NutanixError, Settings, Want, image_name,
};
use bootimage_webhook::core::platforms::artifact::{Artifact, ArtifactMirror};
use serde_json::{Value, json};
use support::openstack::Files;
use support::prism_double::{PrismDouble, SOMEONE_ELSE};

const USER: &str = "admin";
pub(crate) const PASSWORD: &str = "Nutanix/4u";
pub(crate) const INFRA: &str = "ntnx-x7k2p";
pub(crate) const RELEASE_A: &str = "9.8.20260428-0";
pub(crate) const RELEASE_B: &str = "9.8.20260601-0";

fn path(release: &str) -> String {
    format!("/art/rhcos-{release}-nutanix.x86_64.qcow2")
}

/// Bytes standing for a release's qcow2 (Prism Central does not look inside).
fn qcow2(seed: u8) -> Vec<u8> {
    let mut data = b"QFI\xfb\x00\x00\x00\x03".to_vec();
    data.extend((0..300_000u32).map(|i| ((i.wrapping_mul(2654435761) >> 13) as u8) ^ seed));
    data
}

fn sha256(data: &[u8]) -> String {
    let d = ring::digest::digest(&ring::digest::SHA256, data);
    d.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// Prism Central, the stream's two releases served, the cluster's category.
pub(crate) struct World {
    pub(crate) prism: PrismDouble,
    files: Files,
    data: BTreeMap<&'static str, Vec<u8>>,
    cache: tempfile::TempDir,
}

impl World {
    pub(crate) fn new() -> World {
        let prism = PrismDouble::start(USER, PASSWORD);
        prism.add_category(&format!("kubernetes-io-cluster-{INFRA}"), "owned");
        let data = BTreeMap::from([(RELEASE_A, qcow2(1)), (RELEASE_B, qcow2(2))]);
        let served = data.iter().map(|(r, d)| (path(r), d.clone())).collect();
        World {
            prism,
            files: Files::serve(served),
            data,
            cache: tempfile::tempdir().unwrap(),
        }
    }

    /// Uploads from here when Prism Central cannot fetch the URL.
    fn settings(&self) -> Settings {
        Settings {
            cache_dir: Some(self.cache.path().join("nutanix")),
            ..settings()
        }
    }

    pub(crate) fn artifact(&self, release: &str) -> Artifact {
        Artifact {
            release: release.into(),
            location: self.files.url(&path(release)),
            sha256: sha256(&self.data[release]),
            uncompressed_sha256: None,
        }
    }

    /// The bytes of a release's qcow2, as served.
    pub(crate) fn data(&self, release: &str) -> Vec<u8> {
        self.data[release].clone()
    }

    pub(crate) fn importer(&self, password: &str) -> Importer {
        let creds = Credentials {
            endpoint: self.prism.endpoint(),
            auth: BasicAuth {
                username: USER.into(),
                password: password.into(),
            },
        };
        nutanix::connect_via(&creds, Proxy::new("", "", "")).unwrap()
    }
}

/// No upload from here: Prism Central fetches the URL or nothing is imported.
pub(crate) fn settings() -> Settings {
    Settings {
        task_timeout: Duration::from_secs(60),
        poll: Duration::from_millis(50),
        ..Settings::default()
    }
}

pub(crate) fn want<'a>(artifact: &'a Artifact, named: &'a BTreeSet<String>) -> Want<'a> {
    Want {
        infra_id: INFRA,
        stream: "rhel-9",
        artifact,
        named: Some(named),
    }
}

/// Until Prism Central holds nothing called `name` (a delete finishes in a task).
fn until_none_named(prism: &PrismDouble, name: &str) -> Vec<Value> {
    let since = Instant::now();
    loop {
        let held = prism.images_named(name);
        if held.is_empty() || since.elapsed() > Duration::from_secs(10) {
            return held;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nutanix_prism_the_first_import_makes_a_complete_marked_image_and_the_second_fetches_nothing()
 {
    let _parallel = support::parallel();
    let world = World::new();
    let (a, named) = (world.artifact(RELEASE_A), BTreeSet::new());
    let name = image_name(INFRA, RELEASE_A);
    let mut first = world.importer(PASSWORD);
    assert!(first.look(&want(&a, &named)).await.unwrap().ready.is_none());
    let started = Instant::now();
    let image = first.ensure(&settings(), &want(&a, &named)).await.unwrap();
    eprintln!("first import: {:?}", started.elapsed());
    let held = world.prism.images_named(&name);
    assert_eq!(held.len(), 1, "{held:?}");
    let held = &held[0];
    assert_eq!(held["metadata"]["uuid"], json!(image.uuid));
    assert_eq!(held["status"]["state"], "COMPLETE");
    assert_eq!(held["spec"]["resources"]["source_uri"], json!(a.location));
    assert_eq!(
        held["spec"]["resources"]["checksum"],
        json!({"checksum_algorithm": "SHA_256", "checksum_value": a.sha256})
    );
    let category = format!("kubernetes-io-cluster-{INFRA}");
    assert_eq!(held["metadata"]["categories"][&category], "owned");
    let marker = image.marker().unwrap();
    assert_eq!(
        (marker.infra_id.as_str(), marker.release.as_str()),
        (INFRA, RELEASE_A)
    );
    assert_eq!(marker.sha256, a.sha256);
    assert!(marker.import_deadline.is_some());
    // Prism Central fetched the stream's URL and holds exactly its bytes.
    assert_eq!(
        world.prism.data(&image.uuid).as_deref(),
        Some(&world.data[RELEASE_A][..])
    );
    assert_eq!(world.files.hits.load(Ordering::SeqCst), 1);
    assert_eq!(image.checksum, Some(("SHA_256".into(), a.sha256.clone())));

    // Another replica finds it usable, and a second run fetches and creates nothing.
    let second = world.importer(PASSWORD);
    let look = second.look(&want(&a, &named)).await.unwrap();
    assert_eq!(look.usable().map(|i| &i.uuid), Some(&image.uuid));
    let again = first.ensure(&settings(), &want(&a, &named)).await.unwrap();
    assert_eq!(again.uuid, image.uuid);
    assert_eq!((world.prism.count(), world.prism.fetches()), (1, 1));
    let ours = second.ours(INFRA).await.unwrap();
    assert_eq!(
        ours.iter().map(|i| &i.uuid).collect::<Vec<_>>(),
        [&image.uuid]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nutanix_prism_a_second_release_comes_beside_the_first_which_then_retires() {
    let _parallel = support::parallel();
    let world = World::new();
    let (a, b, named) = (
        world.artifact(RELEASE_A),
        world.artifact(RELEASE_B),
        BTreeSet::new(),
    );
    let mut importer = world.importer(PASSWORD);
    let first = importer
        .ensure(&settings(), &want(&a, &named))
        .await
        .unwrap();
    let second = importer
        .ensure(&settings(), &want(&b, &named))
        .await
        .unwrap();
    assert_ne!(first.uuid, second.uuid);
    assert_eq!(
        world.prism.data(&second.uuid).as_deref(),
        Some(&world.data[RELEASE_B][..])
    );
    let mut ours: Vec<String> = importer
        .ours(INFRA)
        .await
        .unwrap()
        .into_iter()
        .map(|i| i.uuid)
        .collect();
    ours.sort();
    let mut both = vec![first.uuid.clone(), second.uuid.clone()];
    both.sort();
    assert_eq!(ours, both);
    // Kept while anything names it, by name or uuid; else deleted.
    for by in [image_name(INFRA, RELEASE_A), first.uuid.clone()] {
        let named = BTreeSet::from([by]);
        let kept = importer
            .retire(&first.uuid, INFRA, &named)
            .await
            .unwrap_err();
        assert!(matches!(kept, NutanixError::Busy { .. }), "{kept}");
    }
    importer
        .retire(&first.uuid, INFRA, &BTreeSet::new())
        .await
        .unwrap();
    assert!(until_none_named(&world.prism, &image_name(INFRA, RELEASE_A)).is_empty());
    assert_eq!(
        world
            .prism
            .images_named(&image_name(INFRA, RELEASE_B))
            .len(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nutanix_prism_a_customers_look_alike_is_never_touched() {
    let _parallel = support::parallel();
    let world = World::new();
    let (a, named) = (world.artifact(RELEASE_A), BTreeSet::new());
    let name = image_name(INFRA, RELEASE_A);
    // Made by hand under our name, even with our words in a description of its own.
    let theirs = world
        .prism
        .add_image(&name, "RHCOS by hand; bootimage-webhook: maybe", b"theirs");
    let installer = world.prism.add_image(
        &format!("{INFRA}-rhcos"),
        "Created By OpenShift Installer",
        b"old",
    );
    let mut importer = world.importer(PASSWORD);
    let look = importer.look(&want(&a, &named)).await.unwrap();
    assert!(look.usable().is_none());
    assert_eq!(
        look.taken.iter().map(|i| &i.uuid).collect::<Vec<_>>(),
        [&theirs]
    );
    let e = importer
        .ensure(&settings(), &want(&a, &named))
        .await
        .unwrap_err();
    assert!(
        matches!(&e, NutanixError::NameTaken { uuids, .. } if uuids.len() == 1 && uuids[0] == theirs),
        "{e}"
    );
    assert!(e.to_string().contains("remove or rename it"), "{e}");
    // Nothing made, fetched or deleted; neither is ours, so neither retires.
    assert_eq!((world.prism.count(), world.prism.fetches()), (2, 0));
    assert!(importer.ours(INFRA).await.unwrap().is_empty());
    for uuid in [&theirs, &installer] {
        let kept = importer
            .retire(uuid, INFRA, &BTreeSet::new())
            .await
            .unwrap_err();
        assert!(matches!(kept, NutanixError::Busy { .. }), "{kept}");
    }
    assert_eq!(world.prism.data(&theirs).as_deref(), Some(&b"theirs"[..]));
    assert_eq!(world.prism.count(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nutanix_prism_a_wrong_checksum_imports_nothing() {
    let _parallel = support::parallel();
    let world = World::new();
    let wrong = Artifact {
        sha256: "0".repeat(64),
        ..world.artifact(RELEASE_A)
    };
    let named = BTreeSet::new();
    let name = image_name(INFRA, RELEASE_A);
    let mut importer = world.importer(PASSWORD);
    // Prism Central fetches it and refuses it; the failed image is deleted.
    let e = importer
        .ensure(&settings(), &want(&wrong, &named))
        .await
        .unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, NutanixError::Task { .. }), "{text}");
    assert!(
        text.contains("FAILED") && text.contains(&"0".repeat(64)),
        "{text}"
    );
    assert_eq!(world.prism.fetches(), 1);
    let left = until_none_named(&world.prism, &name);
    assert!(left.is_empty(), "{left:?}");
    // With a cache, the download here refuses it too, and nothing is uploaded.
    let e = importer
        .ensure(&world.settings(), &want(&wrong, &named))
        .await
        .unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, NutanixError::Artifact(_)), "{text}");
    assert!(
        text.contains(&wrong.location) && text.contains(&"0".repeat(64)),
        "{text}"
    );
    assert_eq!(world.files.hits.load(Ordering::SeqCst), 3);
    let left = until_none_named(&world.prism, &name);
    assert!(left.is_empty(), "{left:?}");
    assert!(
        importer
            .look(&want(&wrong, &named))
            .await
            .unwrap()
            .ready
            .is_none()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nutanix_prism_a_url_prism_central_cannot_reach_is_uploaded_from_here() {
    let _parallel = support::parallel();
    let world = World::new();
    let (a, named) = (world.artifact(RELEASE_A), BTreeSet::new());
    world.prism.cannot_reach(&world.files.url("/"));
    let mut importer = world.importer(PASSWORD);
    // Without a cache, nothing can be done, and what was tried is gone.
    let e = importer
        .ensure(&settings(), &want(&a, &named))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("Could not access the URL"), "{e}");
    assert!(until_none_named(&world.prism, &image_name(INFRA, RELEASE_A)).is_empty());
    let started = Instant::now();
    let image = importer
        .ensure(&world.settings(), &want(&a, &named))
        .await
        .unwrap();
    eprintln!("import by upload: {:?}", started.elapsed());
    // Downloaded here once, uploaded with its checksum, marked as ours.
    assert_eq!(world.files.hits.load(Ordering::SeqCst), 1);
    assert_eq!(
        world.prism.data(&image.uuid).as_deref(),
        Some(&world.data[RELEASE_A][..])
    );
    assert_eq!(image.checksum, Some(("SHA_256".into(), a.sha256.clone())));
    assert_eq!(image.source_uri, None);
    assert_eq!(
        image.marker().map(|m| m.release),
        Some(RELEASE_A.to_owned())
    );
    let look = importer.look(&want(&a, &named)).await.unwrap();
    assert_eq!(look.usable().map(|i| &i.uuid), Some(&image.uuid));
    assert_eq!(
        world
            .prism
            .images_named(&image_name(INFRA, RELEASE_A))
            .len(),
        1
    );
}

/// A site's mirror (`--artifact-base-url`): the stream's host is unreachable, the mirror
/// holds the file under its own name. Prism Central is given the mirror's URL; when it
/// cannot reach the mirror either, the qcow2 is downloaded here from the mirror.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nutanix_prism_a_sites_mirror_is_what_prism_central_and_the_upload_fetch() {
    let _parallel = support::parallel();
    let world = World::new();
    let named = BTreeSet::new();
    let mirror = ArtifactMirror::parse(&world.files.url("/art")).unwrap();
    let elsewhere = |release: &str| Artifact {
        location: format!("https://rhcos.mirror.invalid{}", path(release)),
        ..world.artifact(release)
    };
    let (a, b) = (elsewhere(RELEASE_A), elsewhere(RELEASE_B));
    let mut importer = world.importer(PASSWORD);
    let mirrored = Settings {
        artifact_mirror: Some(mirror.clone()),
        ..settings()
    };
    let image = importer.ensure(&mirrored, &want(&a, &named)).await.unwrap();
    assert_eq!(image.source_uri, Some(world.files.url(&path(RELEASE_A))));
    assert_eq!(image.checksum, Some(("SHA_256".into(), a.sha256.clone())));
    assert_eq!(world.prism.fetches(), 1);
    // Prism Central cannot reach the mirror: downloaded here from it, and uploaded.
    world.prism.cannot_reach(&world.files.url("/"));
    let hits = world.files.hits.load(Ordering::SeqCst);
    let uploading = Settings {
        artifact_mirror: Some(mirror),
        ..world.settings()
    };
    let image = importer
        .ensure(&uploading, &want(&b, &named))
        .await
        .unwrap();
    assert_eq!(world.files.hits.load(Ordering::SeqCst), hits + 1);
    assert_eq!(
        world.prism.data(&image.uuid).as_deref(),
        Some(&world.data[RELEASE_B][..])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nutanix_prism_a_name_clash_after_the_import_stops_the_move() {
    let _parallel = support::parallel();
    let world = World::new();
    let (a, named) = (world.artifact(RELEASE_A), BTreeSet::new());
    let name = image_name(INFRA, RELEASE_A);
    let mut importer = world.importer(PASSWORD);
    let ours = importer
        .ensure(&settings(), &want(&a, &named))
        .await
        .unwrap();
    // Prism Central lets anyone make a twin under the same name: the machine API would
    // then refuse the name, so it is no longer usable, and nothing of theirs is touched.
    let twin = world
        .prism
        .add_image(&name, "a copy", &world.data[RELEASE_A]);
    let look = importer.look(&want(&a, &named)).await.unwrap();
    assert_eq!(look.ready.as_ref().map(|i| &i.uuid), Some(&ours.uuid));
    assert!(look.usable().is_none());
    let e = importer
        .ensure(&settings(), &want(&a, &named))
        .await
        .unwrap_err();
    assert!(
        matches!(&e, NutanixError::NameTaken { uuids, .. } if uuids.len() == 1 && uuids[0] == twin),
        "{e}"
    );
    assert_eq!(world.prism.images_named(&name).len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nutanix_prism_credentials_prism_central_refuses_are_said() {
    let _parallel = support::parallel();
    let world = World::new();
    let (a, named) = (world.artifact(RELEASE_A), BTreeSet::new());
    let importer = world.importer("wrong");
    // Prism Central answers a 401 with a page, not JSON: the error names the Secret, not
    // the page, nor a JSON error.
    let e = importer.look(&want(&a, &named)).await.unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, NutanixError::Unauthorized { .. }), "{text}");
    assert!(
        text.contains(
            "refused the credentials of Secret openshift-machine-api/nutanix-credentials"
        ) && text.ends_with("HTTP 401"),
        "{text}"
    );
    assert!(!text.contains("html") && !text.contains("JSON"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nutanix_prism_every_page_of_a_long_list_is_read() {
    let _parallel = support::parallel();
    let world = World::new();
    let (a, named) = (world.artifact(RELEASE_A), BTreeSet::new());
    let mut importer = world.importer(PASSWORD);
    let ours = importer
        .ensure(&settings(), &want(&a, &named))
        .await
        .unwrap();
    // More images than one page holds, ours among the first and a twin of it on the last.
    for n in 0..250 {
        world
            .prism
            .add_image(&format!("someone-{n}"), "theirs", b"x");
    }
    let twin = world
        .prism
        .add_image(&image_name(INFRA, RELEASE_A), "a copy", b"x");
    let found = importer.ours(INFRA).await.unwrap();
    assert_eq!(
        found.iter().map(|i| &i.uuid).collect::<Vec<_>>(),
        [&ours.uuid]
    );
    let look = importer.look(&want(&a, &named)).await.unwrap();
    assert_eq!(
        look.taken.iter().map(|i| &i.uuid).collect::<Vec<_>>(),
        [&twin]
    );
    assert!(look.usable().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nutanix_prism_a_failed_import_that_could_not_be_deleted_is_deleted_next_time() {
    let _parallel = support::parallel();
    let world = World::new();
    let (a, named) = (world.artifact(RELEASE_A), BTreeSet::new());
    let name = image_name(INFRA, RELEASE_A);
    world.prism.cannot_reach(&world.files.url("/"));
    world.prism.fail_deletes(1);
    let mut importer = world.importer(PASSWORD);
    importer
        .ensure(&settings(), &want(&a, &named))
        .await
        .unwrap_err();
    // Failed, so Prism Central lists it no more; the delete was refused, so it is there,
    // and found by the uuid its import gave it.
    let failed = world.prism.images_named(&name);
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0]["status"]["state"], "ERROR");
    let look = importer.look(&want(&a, &named)).await.unwrap();
    assert_eq!(
        look.unfinished
            .iter()
            .map(|i| json!(i.uuid))
            .collect::<Vec<_>>(),
        [failed[0]["metadata"]["uuid"].clone()]
    );
    // The next pass deletes it by its uuid, then imports.
    world.prism.reach_everything();
    let image = importer
        .ensure(&settings(), &want(&a, &named))
        .await
        .unwrap();
    let failed_uuid = failed[0]["metadata"]["uuid"].as_str().unwrap().to_owned();
    let held = until_none_named_but(&world.prism, &name, &image.uuid);
    assert_eq!(held, [json!(image.uuid)]);
    // The uuid of the failed import is given again once it is gone, else Prism Central's.
    assert!(image.uuid == failed_uuid || world.prism.conflicts() == 1);
}

/// Until Prism Central holds nothing called `name` but `keep`: the uuids it holds.
fn until_none_named_but(prism: &PrismDouble, name: &str, keep: &str) -> Vec<Value> {
    let since = Instant::now();
    loop {
        let held: Vec<Value> = prism
            .images_named(name)
            .iter()
            .map(|i| i["metadata"]["uuid"].clone())
            .collect();
        if held == [json!(keep)] || since.elapsed() > Duration::from_secs(10) {
            return held;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The Lease moves while the holder's import is under way: Prism Central lists the image
/// only once it is complete, so the new holder finds it by the uuid every replica gives
/// that import, waits, and then uses the one image.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nutanix_prism_a_new_lease_holder_waits_for_the_import_under_way() {
    let _parallel = support::parallel();
    let world = World::new();
    let (a, named) = (world.artifact(RELEASE_A), BTreeSet::new());
    let name = image_name(INFRA, RELEASE_A);
    // An import long enough to be under way when the Lease moves.
    world.prism.slow_creates(Duration::from_secs(3));
    let mut old_holder = world.importer(PASSWORD);
    let (a2, named2) = (a.clone(), named.clone());
    let under_way = tokio::spawn(async move {
        old_holder
            .ensure(&settings(), &want(&a2, &named2))
            .await
            .map(|i| i.uuid)
    });
    let since = Instant::now();
    while world.prism.images_named(&name).is_empty() {
        assert!(since.elapsed() < Duration::from_secs(10), "no create");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut new_holder = world.importer(PASSWORD);
    let look = new_holder.look(&want(&a, &named)).await.unwrap();
    assert!(look.usable().is_none());
    assert_eq!(look.unfinished.len(), 1, "{look:?}");
    let e = new_holder
        .ensure(&settings(), &want(&a, &named))
        .await
        .unwrap_err();
    assert!(
        matches!(&e, NutanixError::Busy { .. }) && e.to_string().contains("still being imported"),
        "{e}"
    );
    let uuid = under_way.await.unwrap().unwrap();
    let image = new_holder
        .ensure(&settings(), &want(&a, &named))
        .await
        .unwrap();
    assert_eq!(image.uuid, uuid);
    assert_eq!((world.prism.count(), world.prism.fetches()), (1, 1));
}

/// Two replicas start the same import at once: the second create carries the same uuid,
/// is refused, and makes no twin.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nutanix_prism_two_creates_of_one_import_make_one_image() {
    let _parallel = support::parallel();
    let world = World::new();
    let (a, named) = (world.artifact(RELEASE_A), BTreeSet::new());
    let name = image_name(INFRA, RELEASE_A);
    // Between a replica's look and its create, the other's create lands.
    world.prism.slow_categories(Duration::from_millis(800));
    let mut first = world.importer(PASSWORD);
    let mut second = world.importer(PASSWORD);
    let (a1, n1) = (a.clone(), named.clone());
    let one = tokio::spawn(async move { first.ensure(&settings(), &want(&a1, &n1)).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let e = second
        .ensure(&settings(), &want(&a, &named))
        .await
        .unwrap_err();
    assert!(
        matches!(&e, NutanixError::Busy { .. })
            && e.to_string()
                .contains("made while this import was starting"),
        "{e}"
    );
    let image = one.await.unwrap().unwrap();
    assert_eq!(world.prism.conflicts(), 1);
    assert_eq!(world.prism.images_named(&name).len(), 1);
    assert_eq!(
        second
            .ensure(&settings(), &want(&a, &named))
            .await
            .unwrap()
            .uuid,
        image.uuid
    );
}

/// The machine API's comparisons are looser than equality: an image of another case, or
/// one its `name==` filter selects as a regular expression, stops the import and the move,
/// and is never touched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nutanix_prism_a_name_the_machine_api_could_confuse_stops_the_move() {
    let _parallel = support::parallel();
    let world = World::new();
    let (a, named) = (world.artifact(RELEASE_A), BTreeSet::new());
    let name = image_name(INFRA, RELEASE_A);
    let upper = world.prism.add_image(&name.to_uppercase(), "theirs", b"x");
    let mut importer = world.importer(PASSWORD);
    let e = importer
        .ensure(&settings(), &want(&a, &named))
        .await
        .unwrap_err();
    assert!(
        matches!(&e, NutanixError::NearName { images, .. } if images.len() == 1 && images[0].contains(&upper)),
        "{e}"
    );
    assert_eq!((world.prism.count(), world.prism.fetches()), (1, 0));
    world.prism.remove_image(&upper);
    let ours = importer
        .ensure(&settings(), &want(&a, &named))
        .await
        .unwrap();
    assert!(
        importer
            .look(&want(&a, &named))
            .await
            .unwrap()
            .usable()
            .is_some()
    );
    // A name the filter selects: a dot of ours matches any character.
    let dotted = world
        .prism
        .add_image(&name.replacen('.', "x", 1), "theirs", b"x");
    let look = importer.look(&want(&a, &named)).await.unwrap();
    assert_eq!(look.ready.as_ref().map(|i| &i.uuid), Some(&ours.uuid));
    assert!(look.usable().is_none());
    assert_eq!(
        look.near.iter().map(|i| &i.uuid).collect::<Vec<_>>(),
        [&dotted]
    );
    let kept = importer
        .retire(&dotted, INFRA, &BTreeSet::new())
        .await
        .unwrap_err();
    assert!(matches!(kept, NutanixError::Busy { .. }), "{kept}");
    assert_eq!(world.prism.count(), 2);
}

/// Anyone who can create images can copy our description onto an image under the next
/// release's name, even with the stream's own bytes: it is not ours (another user made it),
/// so it is named with its id, never used, never deleted, and nothing is imported beside it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nutanix_prism_a_look_alike_with_our_marker_is_not_ours() {
    let _parallel = support::parallel();
    let world = World::new();
    let (b, named) = (world.artifact(RELEASE_B), BTreeSet::new());
    let copied = Marker {
        infra_id: INFRA.into(),
        stream: "rhel-9".into(),
        release: RELEASE_B.into(),
        sha256: b.sha256.clone(),
        import_deadline: None,
    };
    let name = image_name(INFRA, RELEASE_B);
    let forged = world
        .prism
        .add_image(&name, &copied.description(), &world.data[RELEASE_B]);
    let mut importer = world.importer(PASSWORD);
    let look = importer.look(&want(&b, &named)).await.unwrap();
    assert!(look.ready.is_none() && look.usable().is_none());
    let e = importer
        .ensure(&settings(), &want(&b, &named))
        .await
        .unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, NutanixError::LookAlike { .. }), "{text}");
    assert!(
        text.contains(&forged) && text.contains(SOMEONE_ELSE),
        "{text}"
    );
    assert!(importer.ours(INFRA).await.unwrap().is_empty());
    let kept = importer
        .retire(&forged, INFRA, &BTreeSet::new())
        .await
        .unwrap_err();
    assert!(kept.to_string().contains("look-alike"), "{kept}");
    assert_eq!((world.prism.count(), world.prism.fetches()), (1, 0));
}

/// Ours only while Prism Central's own checksum of the data is the stream's SHA-256: an
/// image of ours it reports no checksum for is not used.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nutanix_prism_an_image_without_prism_centrals_sha256_is_not_used() {
    let _parallel = support::parallel();
    let world = World::new();
    let (a, named) = (world.artifact(RELEASE_A), BTreeSet::new());
    let mut importer = world.importer(PASSWORD);
    let ours = importer
        .ensure(&settings(), &want(&a, &named))
        .await
        .unwrap();
    world.prism.forget_checksum(&ours.uuid);
    let look = importer.look(&want(&a, &named)).await.unwrap();
    assert!(look.usable().is_none());
    let e = importer
        .ensure(&settings(), &want(&a, &named))
        .await
        .unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, NutanixError::Mismatch { .. }), "{text}");
    assert!(
        text.contains("no checksum") && text.contains(&ours.uuid),
        "{text}"
    );
}
