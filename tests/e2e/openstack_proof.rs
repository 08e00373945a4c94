//! Ownership proven, not named, against a real Keystone and Glance: an image is ours only
//! when the credentials' project owns it and Glance's own hash of its data (`os_hash_value`,
//! which only Glance writes) is the digest of the stream's qcow2 computed here, while
//! uploading it or, for an image already in Glance, from the download. A look-alike that
//! copies our marker, from another project or from ours with other data, is named with its
//! id, never used, never deleted, and nothing is imported beside it.

use crate::openstack_glance::{RELEASE, Stream, importer, want};
use crate::support;

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;

use bootimage_webhook::cluster::openstack::{OpenStackError, Settings, image_name};
use serde_json::{Value, json};
use support::openstack::*;

/// An image under `name` with the marker of an import of `stream`, copied.
fn marker_copy(infra: &str, name: &str, stream: &Stream, visibility: &str) -> Value {
    json!({
        "name": name, "disk_format": "qcow2", "container_format": "bare",
        "visibility": visibility,
        "bootimage_webhook_infrastructure_name": infra, "bootimage_webhook_stream": "rhel-9",
        "bootimage_webhook_release": RELEASE,
        "bootimage_webhook_qcow2_sha256": stream.qcow2.sha256,
    })
}

fn id_of(made: &Value) -> String {
    made["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{made}"))
        .to_owned()
}

fn ids(images: &[Value]) -> Vec<String> {
    images
        .iter()
        .map(|i| i["id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copied_marker_in_our_project_over_other_data_is_named_and_never_used() {
    let _parallel = support::parallel();
    let (servers, _turn) = Servers::shared().await;
    let tenant = servers.tenant("forged");
    let stream = Stream::new(1, 21);
    let (infra, named) = ("ci-os-forge1", BTreeSet::new());
    let name = image_name(infra, RELEASE);
    // A member of the project plants the next release's name, marker and all.
    let made = tenant.glance(
        "POST",
        "/v2/images",
        Some(marker_copy(infra, &name, &stream, "private")),
    );
    let forged = id_of(&made);
    let other = Stream::new(1, 22);
    tenant.upload(&forged, &other.qcow2.qcow2);

    let mut imp = importer(&tenant, "openstack");
    let wanted = want(infra, &stream.target, &named);
    // Its hash cannot be judged before the stream's qcow2 is hashed here.
    let look = imp.look(&wanted).await.unwrap();
    assert_eq!(look.unproven.len(), 1, "{look:?}");
    assert!(look.usable().is_none());
    let e = imp.ensure(&stream.settings(), &wanted).await.unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, OpenStackError::LookAlike { .. }), "{text}");
    assert!(text.contains(&forged), "{text}");
    // Downloaded once, to prove; nothing uploaded beside it, nothing deleted.
    assert_eq!(stream.files.hits.load(Ordering::SeqCst), 1);
    assert_eq!(
        ids(&tenant.images_named(&name)),
        std::slice::from_ref(&forged)
    );
    let look = imp.look(&wanted).await.unwrap();
    assert_eq!(look.lookalikes.len(), 1);
    assert!(look.usable().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_projects_image_with_our_marker_is_not_ours_and_is_named_as_such() {
    let _parallel = support::parallel();
    let (servers, _turn) = Servers::shared().await;
    let ours = servers.tenant("owner");
    let stream = Stream::new(1, 23);
    let (infra, named) = ("ci-os-steal1", BTreeSet::new());
    let name = image_name(infra, RELEASE);
    // Public (only an admin may publish), from another project, with the stream's own
    // bytes: still not ours.
    let (glance, admin) = (&servers.env["GLANCE_URL"], servers.admin_token());
    let body = marker_copy(infra, &name, &stream, "public");
    let planted = id_of(&call(
        "POST",
        &format!("{glance}/v2/images"),
        &admin,
        Some(body),
    ));
    upload(glance, &admin, &planted, &stream.qcow2.qcow2);

    let mut imp = importer(&ours, "openstack");
    let wanted = want(infra, &stream.target, &named);
    let e = imp.ensure(&stream.settings(), &wanted).await.unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, OpenStackError::LookAlike { .. }), "{text}");
    assert!(
        text.contains(&planted) && !text.contains("not marked as ours"),
        "{text}"
    );
    // Retention never takes it: ours are the project's alone.
    assert!(imp.ours(infra).await.unwrap().is_empty());
    let e = imp
        .retire(&planted, infra, &BTreeSet::new())
        .await
        .unwrap_err();
    assert!(e.to_string().contains("look-alike"), "{e}");
    assert_eq!(ids(&ours.images_named(&name)), [planted]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_already_in_glance_is_proven_by_the_digest_computed_here() {
    let _parallel = support::parallel();
    let (servers, _turn) = Servers::shared().await;
    let tenant = servers.tenant("proven");
    let stream = Stream::new(1, 24);
    let (infra, named) = ("ci-os-prove1", BTreeSet::new());
    let wanted = want(infra, &stream.target, &named);
    let mut first = importer(&tenant, "openstack");
    let image = first.ensure(&stream.settings(), &wanted).await.unwrap();
    // The importer that uploaded it knows the digest.
    assert!(first.look(&wanted).await.unwrap().usable().is_some());
    // A new replica (a restarted pod, an empty cache) cannot say before hashing the qcow2.
    let cache = tempfile::tempdir().unwrap();
    let elsewhere = Settings {
        cache_dir: cache.path().join("qcow2"),
        ..stream.settings()
    };
    let mut second = importer(&tenant, "openstack");
    let look = second.look(&wanted).await.unwrap();
    assert!(look.usable().is_none());
    assert_eq!(
        look.unproven.iter().map(|i| &i.id).collect::<Vec<_>>(),
        [&image.id]
    );
    let look = second.look_proven(&elsewhere, &wanted).await.unwrap();
    assert_eq!(look.usable().map(|i| &i.id), Some(&image.id));
    // Downloaded once more, to hash it; nothing uploaded.
    assert_eq!(stream.files.hits.load(Ordering::SeqCst), 2);
    assert_eq!(tenant.images_named(&image_name(infra, RELEASE)).len(), 1);
}
