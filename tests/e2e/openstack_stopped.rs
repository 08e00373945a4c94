//! The OpenStack cluster side against a real Keystone and Glance, where the first imports
//! of a cloud leave things behind or the cluster boots several architectures: an image of
//! ours whose data never came (`queued`) is deleted once its import provably stopped and
//! nothing names it, and only then; on a multi-architecture cluster each architecture's
//! qcow2 of one release is an image of its own name, so both imports proceed.

use crate::openstack_glance::{RELEASE, Stream, importer, want};
use crate::support;

use std::collections::BTreeSet;

use bootimage_webhook::cluster::openstack::{
    INFRASTRUCTURE, OpenStackError, QCOW2_SHA256, STREAM, Want, image_name, image_name_for,
};
use bootimage_webhook::core::snapshot::Arch;
use serde_json::{Value, json};
use support::openstack::*;

/// An image made as an import of ours starts one (the marker, no data yet): `queued`.
fn queued_of_ours(tenant: &Tenant, infra: &str, name: &str, deadline: &str) -> String {
    let image = json!({
        "name": name, "disk_format": "qcow2", "container_format": "bare",
        "visibility": "private", INFRASTRUCTURE: infra, STREAM: "rhel-9",
        "bootimage_webhook_release": RELEASE, QCOW2_SHA256: "ab".repeat(32),
        "bootimage_webhook_import_deadline": deadline,
    });
    let made = tenant.glance("POST", "/v2/images", Some(image));
    assert_eq!(made["status"], "queued", "{made}");
    made["id"].as_str().unwrap().to_owned()
}

fn status(tenant: &Tenant, id: &str) -> Option<Value> {
    let listed = tenant.glance("GET", "/v2/images", None);
    listed["images"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["id"] == json!(id))
        .map(|i| i["status"].clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_image_of_ours_is_deleted_once_its_import_stopped_and_only_then() {
    let _parallel = support::parallel();
    let (servers, _turn) = Servers::shared().await;
    let tenant = servers.tenant("stopped");
    let infra = "ci-os-stop1";
    let name = image_name(infra, RELEASE);
    let older = image_name(infra, "9.8.20260101-0");
    let stopped = queued_of_ours(&tenant, infra, &older, "2020-01-01T00:00:00Z");
    let running = queued_of_ours(&tenant, infra, &name, "2100-01-01T00:00:00Z");
    let mut imp = importer(&tenant, "openstack");
    let ours: BTreeSet<String> = imp
        .ours(infra)
        .await
        .unwrap()
        .into_iter()
        .map(|i| i.id)
        .collect();
    assert_eq!(ours, [stopped.clone(), running.clone()].into());

    // Named by a Machine: kept, however long ago its import stopped.
    let named = BTreeSet::from([older.clone()]);
    let e = imp.clear(&stopped, infra, &named).await.unwrap_err();
    assert!(matches!(e, OpenStackError::Busy { .. }), "{e}");
    // Its deadline not past by Glance's clock: another replica may still be uploading.
    let e = imp
        .clear(&running, infra, &BTreeSet::new())
        .await
        .unwrap_err();
    assert!(e.to_string().contains("still being imported"), "{e}");
    assert_eq!(status(&tenant, &running), Some(json!("queued")));
    // Stopped, named by nothing: deleted.
    imp.clear(&stopped, infra, &BTreeSet::new()).await.unwrap();
    assert_eq!(status(&tenant, &stopped), None);
    // Another cluster's is never ours.
    let e = imp
        .clear(&running, "ci-os-other", &BTreeSet::new())
        .await
        .unwrap_err();
    assert!(e.to_string().contains("not this cluster"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_multi_arch_cluster_both_architectures_of_a_release_are_imported() {
    let _parallel = support::parallel();
    let (servers, _turn) = Servers::shared().await;
    let tenant = servers.tenant("multiarch");
    let infra = "ci-os-multi1";
    let named = BTreeSet::new();
    let (amd, arm) = (Stream::new(2, 11), Stream::new(2, 12));
    let mut imp = importer(&tenant, "openstack");
    let mut ids = Vec::new();
    for (stream, arch) in [(&amd, Arch::Amd64), (&arm, Arch::Arm64)] {
        let wanted = Want {
            arch: Some(arch),
            ..want(infra, &stream.target, &named)
        };
        let image = imp.ensure(&stream.settings(), &wanted).await.unwrap();
        let name = image_name_for(infra, RELEASE, Some(arch));
        assert_eq!(image.name.as_deref(), Some(name.as_str()));
        assert_eq!(image.prop("architecture"), Some(arch.rpm()));
        assert_eq!(
            image.prop("os_hash_value"),
            Some(stream.qcow2.sha512.as_str())
        );
        ids.push(image.id);
    }
    assert_ne!(ids[0], ids[1]);
    for (stream, arch) in [(&amd, Arch::Amd64), (&arm, Arch::Arm64)] {
        let wanted = Want {
            arch: Some(arch),
            ..want(infra, &stream.target, &named)
        };
        assert!(imp.look(&wanted).await.unwrap().usable().is_some());
    }
    assert!(tenant.images_named(&image_name(infra, RELEASE)).is_empty());
}
