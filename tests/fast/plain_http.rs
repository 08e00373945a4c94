//! Keystone, Glance and Prism Central are reached over https:// only: a plain http://
//! endpoint is refused before anything is sent. This tier never passes the tests' flag
//! (`--allow-plain-http-for-tests`), which the end-to-end tier's own servers need.

use crate::support;

use std::collections::BTreeSet;

use bootimage_webhook::cluster::egress::Proxy;
use bootimage_webhook::cluster::importer::HttpsError;
use bootimage_webhook::cluster::{nutanix, openstack};
use bootimage_webhook::core::platforms::artifact::Artifact;

const SHA: &str = "0000000000000000000000000000000000000000000000000000000000000000";

#[tokio::test]
async fn openstack_a_plain_http_keystone_is_refused() {
    let _parallel = support::parallel();
    let yaml = "clouds:\n  openstack:\n    auth:\n      auth_url: http://127.0.0.1:9/v3\n      username: u\n      password: p\n      project_name: x\n      user_domain_name: Default\n      project_domain_name: Default\n    region_name: RegionOne\n";
    let cloud = openstack::parse_clouds(yaml, "openstack").unwrap();
    let creds = openstack::Credentials::default();
    let mut importer =
        openstack::connect_cloud(cloud, &creds, |_| None, Proxy::new("", "", "")).unwrap();
    let target = openstack::Qcow2Target {
        stream: "rhel-9".into(),
        release: "9.8.20260428-0".into(),
        location: "https://example.invalid/x.qcow2.gz".into(),
        sha256: SHA.into(),
        uncompressed_sha256: SHA.into(),
    };
    let named = BTreeSet::new();
    let want = openstack::Want {
        infra_id: "ci-abc12",
        target: &target,
        named: Some(&named),
        carried: Default::default(),
        arch: None,
    };
    let e = importer.look(&want).await.unwrap_err();
    assert!(
        matches!(
            e,
            openstack::OpenStackError::Https(HttpsError::PlainHttp { .. })
        ),
        "{e}"
    );
    assert!(e.to_string().contains("http://127.0.0.1:9/v3"), "{e}");
}

#[tokio::test]
async fn nutanix_a_plain_http_prism_central_is_refused() {
    let _parallel = support::parallel();
    let creds = nutanix::Credentials {
        endpoint: "http://127.0.0.1:9".into(),
        auth: nutanix::BasicAuth {
            username: "u".into(),
            password: "p".into(),
        },
    };
    let importer = nutanix::connect_via(&creds, Proxy::new("", "", "")).unwrap();
    let artifact = Artifact {
        release: "9.8.20260428-0".into(),
        location: "https://example.invalid/x.qcow2".into(),
        sha256: SHA.into(),
        uncompressed_sha256: None,
    };
    let want = nutanix::Want {
        infra_id: "ci-abc12",
        stream: "rhel-9",
        artifact: &artifact,
        named: None,
    };
    let e = importer.look(&want).await.unwrap_err().to_string();
    assert!(
        e.contains("plain http:// is refused") && e.contains("127.0.0.1:9"),
        "{e}"
    );
}
