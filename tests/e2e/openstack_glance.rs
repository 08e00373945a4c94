//! The OpenStack cluster side against a real Keystone and Glance (scripts/openstack-servers),
//! each test in a project of its own: the first import, a second run that uploads nothing,
//! a customer's look-alike image left alone, a wrong checksum that imports nothing, Glance
//! killed mid-upload and a retry, the cloud's CA bundle honoured, and a site's own mirror.
//! The stream's qcow2.gz is a real small qcow2 (qemu-img), gzipped, served over HTTP on
//! loopback.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bootimage_webhook::cluster::egress::Proxy;
use bootimage_webhook::cluster::openstack::{
    self, Credentials, Importer, OpenStackError, Qcow2Target, Settings, Want, image_name,
};
use bootimage_webhook::core::platforms::artifact::ArtifactMirror;
use serde_json::json;
use support::openstack::*;

pub(crate) const RELEASE: &str = "9.8.20260428-0";
const GZ_PATH: &str = "/art/rhcos-9.8.20260428-0-openstack.x86_64.qcow2.gz";

/// The stream's artifact, served; its target; a cache directory.
pub(crate) struct Stream {
    pub(crate) files: Files,
    pub(crate) qcow2: Qcow2,
    pub(crate) target: Qcow2Target,
    cache: tempfile::TempDir,
}

impl Stream {
    pub(crate) fn new(mib: u32, seed: u32) -> Stream {
        let cache = tempfile::tempdir().unwrap();
        let qcow2 = Qcow2::make(cache.path(), mib, seed);
        let files = Files::serve(BTreeMap::from([(GZ_PATH.to_owned(), qcow2.gz.clone())]));
        let target = Qcow2Target {
            stream: "rhel-9".into(),
            release: RELEASE.into(),
            location: files.url(GZ_PATH),
            sha256: qcow2.gz_sha256.clone(),
            uncompressed_sha256: qcow2.sha256.clone(),
        };
        Stream {
            files,
            qcow2,
            target,
            cache,
        }
    }

    pub(crate) fn settings(&self) -> Settings {
        Settings {
            cache_dir: self.cache.path().join("qcow2"),
            max_bytes: 1 << 30,
            download_timeout: Duration::from_secs(120),
            active_timeout: Duration::from_secs(120),
            artifact_mirror: None,
        }
    }

    /// The settings of a site whose artifacts come from `mirror`'s `/rhcos/`.
    fn mirrored(&self, mirror: &Files) -> Settings {
        let base = ArtifactMirror::parse(&mirror.url("/rhcos")).unwrap();
        Settings {
            artifact_mirror: Some(base),
            ..self.settings()
        }
    }
}

pub(crate) fn importer(tenant: &Tenant, cloud: &str) -> Importer {
    importer_via(tenant, cloud, Proxy::new("", "", ""))
}

fn importer_via(tenant: &Tenant, cloud: &str, proxy: Proxy) -> Importer {
    let parsed = openstack::parse_clouds(&tenant.clouds_yaml, cloud).unwrap();
    openstack::connect_cloud(parsed, &Credentials::default(), |_| None, proxy).unwrap()
}

pub(crate) fn want<'a>(
    infra: &'a str,
    target: &'a Qcow2Target,
    named: &'a BTreeSet<String>,
) -> Want<'a> {
    Want {
        infra_id: infra,
        target,
        named: Some(named),
        carried: BTreeMap::new(),
        arch: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_import_makes_an_active_marked_image_and_the_second_uploads_nothing() {
    let _parallel = support::parallel();
    let (servers, _turn) = Servers::shared().await;
    let tenant = servers.tenant("first");
    let stream = Stream::new(4, 1);
    let (infra, named) = ("ci-os-first1", BTreeSet::new());
    installer_image(&tenant, infra);

    let started = Instant::now();
    let mut first = importer(&tenant, "openstack");
    let carried = first.carried_from(&format!("{infra}-rhcos")).await.unwrap();
    let wanted = Want {
        carried,
        ..want(infra, &stream.target, &named)
    };
    assert!(first.look(&wanted).await.unwrap().ready.is_none());
    let image = first.ensure(&stream.settings(), &wanted).await.unwrap();
    eprintln!("first import: {:?}", started.elapsed());
    let name = image_name(infra, RELEASE);
    let held = tenant.images_named(&name);
    assert_eq!(held.len(), 1, "{held:?}");
    let held = &held[0];
    assert_eq!(held["id"], json!(image.id));
    assert_eq!(held["status"], "active");
    assert_eq!(held["visibility"], "private");
    assert_eq!(
        (&held["disk_format"], &held["container_format"]),
        (&json!("qcow2"), &json!("bare"))
    );
    assert_eq!(held["bootimage_webhook_infrastructure_name"], infra);
    assert_eq!(held["bootimage_webhook_stream"], "rhel-9");
    assert_eq!(held["bootimage_webhook_release"], RELEASE);
    assert_eq!(
        held["bootimage_webhook_qcow2_sha256"],
        json!(stream.qcow2.sha256)
    );
    assert!(held["bootimage_webhook_import_deadline"].as_str().is_some());
    assert_eq!(held["tags"], json!([format!("openshiftClusterID={infra}")]));
    // How the cloud boots RHCOS, carried over; nothing that described the old data.
    assert_eq!(
        (&held["hw_disk_bus"], &held["hw_scsi_model"]),
        (&json!("scsi"), &json!("virtio-scsi"))
    );
    assert_eq!(
        (&held["os_type"], &held["os_distro"]),
        (&json!("linux"), &json!("rhcos"))
    );
    assert!(
        held.get("owner_specified.openstack.sha256").is_none(),
        "{held}"
    );
    // Glance holds exactly the stream's uncompressed qcow2.
    assert_eq!(held["os_hash_value"], json!(stream.qcow2.sha512));
    assert_eq!(held["size"], json!(stream.qcow2.qcow2.len()));
    assert_eq!(stream.files.hits.load(Ordering::SeqCst), 1);
    // One token for every call of the import.
    assert_eq!(first.glance.keystone.issued(), 1);

    // Another replica, with the application credential: it finds the image, proves it
    // from the qcow2 in the cache, and uploads and downloads nothing.
    let started = Instant::now();
    let mut second = importer(&tenant, "openstack-appcred");
    let look = second.look(&wanted).await.unwrap();
    assert_eq!(
        look.unproven.iter().map(|i| &i.id).collect::<Vec<_>>(),
        [&image.id]
    );
    let look = second
        .look_proven(&stream.settings(), &wanted)
        .await
        .unwrap();
    assert_eq!(look.usable().map(|i| &i.id), Some(&image.id));
    let again = second.ensure(&stream.settings(), &wanted).await.unwrap();
    eprintln!("second run: {:?}", started.elapsed());
    assert_eq!(again.id, image.id);
    let after = tenant.images_named(&name);
    assert_eq!(after.len(), 1);
    assert_eq!(after[0]["updated_at"], held["updated_at"]);
    assert_eq!(stream.files.hits.load(Ordering::SeqCst), 1);
    let ours = second.ours(infra).await.unwrap();
    assert_eq!(ours.iter().map(|i| &i.id).collect::<Vec<_>>(), [&image.id]);

    twin_and_retention(&tenant, &mut second, &stream, held).await;
}

/// After the first test's imports: a twin of ours past its deadline, then retention.
async fn twin_and_retention(
    tenant: &Tenant,
    second: &mut Importer,
    stream: &Stream,
    held: &serde_json::Value,
) {
    let (infra, named) = ("ci-os-first1", BTreeSet::new());
    let wanted = want(infra, &stream.target, &named);
    let name = image_name(infra, RELEASE);
    let image = second.look(&wanted).await.unwrap().ready.unwrap();
    // A twin of ours that an import long gone left (queued, its deadline past by
    // Glance's clock): the name is no longer the image's alone, so MachineSets may not move
    // to it; the Lease holder deletes the twin and keeps the image.
    let mut twin = json!({"name": name, "disk_format": "qcow2", "container_format": "bare", "visibility": "private"});
    for key in [
        "bootimage_webhook_infrastructure_name",
        "bootimage_webhook_stream",
        "bootimage_webhook_release",
        "bootimage_webhook_qcow2_sha256",
    ] {
        twin[key] = held[key].clone();
    }
    twin["bootimage_webhook_import_deadline"] = json!("2026-01-01T00:00:00Z");
    let twin = tenant.glance("POST", "/v2/images", Some(twin));
    let look = second.look(&wanted).await.unwrap();
    assert!(look.usable().is_none());
    assert_eq!(look.unfinished.len(), 1);
    let kept = second.ensure(&stream.settings(), &wanted).await.unwrap();
    assert_eq!(kept.id, image.id);
    let after = tenant.images_named(&name);
    assert_eq!(
        after.iter().map(|i| &i["id"]).collect::<Vec<_>>(),
        [&json!(image.id)]
    );
    assert_ne!(twin["id"], json!(image.id));
    assert_eq!(
        second.look(&wanted).await.unwrap().usable().map(|i| &i.id),
        Some(&image.id)
    );

    // Retention: kept while a MachineSet or Machine names it (by name or id), else deleted.
    for by in [&name, &image.id] {
        let named = BTreeSet::from([by.clone()]);
        let e = second.retire(&image.id, infra, &named).await.unwrap_err();
        assert!(e.to_string().contains("named by a MachineSet"), "{e}");
    }
    second
        .retire(&image.id, infra, &BTreeSet::new())
        .await
        .unwrap();
    assert!(tenant.images_named(&name).is_empty());
    assert!(second.ours(infra).await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_look_alike_image_is_never_touched_and_nothing_is_imported_beside_it() {
    let _parallel = support::parallel();
    let (servers, _turn) = Servers::shared().await;
    let tenant = servers.tenant("lookalike");
    let stream = Stream::new(0, 2);
    let (infra, named) = ("ci-os-alike1", BTreeSet::new());
    let name = image_name(infra, RELEASE);
    // A customer's image under our name, without our marker; another with another
    // cluster's marker.
    let base = json!({"name": name, "disk_format": "qcow2", "container_format": "bare", "visibility": "private"});
    let plain = tenant.glance("POST", "/v2/images", Some(base.clone()));
    let mut marked = base.clone();
    for (k, v) in [
        ("bootimage_webhook_infrastructure_name", "ci-os-other"),
        ("bootimage_webhook_stream", "rhel-9"),
        ("bootimage_webhook_release", RELEASE),
        ("bootimage_webhook_qcow2_sha256", &stream.qcow2.sha256),
    ] {
        marked[k] = json!(v);
    }
    let other = tenant.glance("POST", "/v2/images", Some(marked));
    let ids = [plain["id"].as_str().unwrap(), other["id"].as_str().unwrap()];

    let mut imp = importer(&tenant, "openstack");
    let wanted = want(infra, &stream.target, &named);
    let look = imp.look(&wanted).await.unwrap();
    assert!(look.usable().is_none() && look.unfinished.is_empty());
    assert_eq!(look.taken.len(), 2);
    // Listed one to a page, both are found (Glance's next links followed).
    let (paged, _) = imp
        .glance
        .list(&[("name", &name), ("limit", "1")])
        .await
        .unwrap();
    let mut paged: Vec<_> = paged.iter().map(|i| i.id.as_str()).collect();
    paged.sort();
    let mut both = ids;
    both.sort();
    assert_eq!(paged, both);
    let e = imp.ensure(&stream.settings(), &wanted).await.unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, OpenStackError::NameTaken { .. }), "{text}");
    for id in ids {
        assert!(text.contains(id), "{text}");
    }
    assert!(text.contains("remove or rename them"), "{text}");
    // Both still there, as they were; nothing of ours beside them; nothing downloaded.
    let held = tenant.images_named(&name);
    assert_eq!(held.len(), 2, "{held:?}");
    for h in &held {
        assert_eq!(h["status"], "queued");
        assert!(ids.contains(&h["id"].as_str().unwrap()));
    }
    assert_eq!(stream.files.hits.load(Ordering::SeqCst), 0);
    // Retention never takes them either.
    assert!(imp.ours(infra).await.unwrap().is_empty());
    let e = imp
        .retire(ids[0], infra, &BTreeSet::new())
        .await
        .unwrap_err();
    assert!(e.to_string().contains("not marked as ours"), "{e}");
    let e = imp
        .retire(ids[1], infra, &BTreeSet::new())
        .await
        .unwrap_err();
    assert!(e.to_string().contains("ci-os-other"), "{e}");
    assert_eq!(tenant.images_named(&name).len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_checksum_imports_nothing_and_names_the_url_and_both_digests() {
    let _parallel = support::parallel();
    let (servers, _turn) = Servers::shared().await;
    let tenant = servers.tenant("checksum");
    let stream = Stream::new(0, 3);
    let (infra, named) = ("ci-os-sum1", BTreeSet::new());
    let wrong = "0".repeat(64);
    for (gz, uncompressed) in [
        (wrong.clone(), stream.qcow2.sha256.clone()),
        (stream.qcow2.gz_sha256.clone(), wrong.clone()),
    ] {
        let target = Qcow2Target {
            sha256: gz.clone(),
            uncompressed_sha256: uncompressed.clone(),
            ..stream.target.clone()
        };
        let mut imp = importer(&tenant, "openstack");
        let e = imp
            .ensure(&stream.settings(), &want(infra, &target, &named))
            .await
            .unwrap_err();
        let text = e.to_string();
        assert!(e.is_bad_artifact(), "{text}");
        let actual = if gz == wrong {
            &stream.qcow2.gz_sha256
        } else {
            &stream.qcow2.sha256
        };
        for part in [&target.location, &wrong, actual] {
            assert!(text.contains(part.as_str()), "{part} not in {text}");
        }
        // Remembered: not downloaded again for the same stream.
        let hits = stream.files.hits.load(Ordering::SeqCst);
        assert!(
            imp.ensure(&stream.settings(), &want(infra, &target, &named))
                .await
                .is_err()
        );
        assert_eq!(stream.files.hits.load(Ordering::SeqCst), hits);
    }
    assert!(tenant.images_named(&image_name(infra, RELEASE)).is_empty());
    let cached: Vec<_> = std::fs::read_dir(stream.settings().cache_dir)
        .unwrap()
        .collect();
    assert!(cached.is_empty(), "{cached:?}");
}

/// A disconnected site: the stream's host cannot be reached, and `--artifact-base-url`
/// names the site's own HTTP server. A file there that is not the stream's (the qcow2
/// left uncompressed under the `.gz`'s name) imports nothing and is named; the right file
/// is imported, checked against both of the stream's checksums.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mirror_serves_the_artifact_and_the_streams_checksums_still_decide() {
    let _parallel = support::parallel();
    let (servers, _turn) = Servers::shared().await;
    let tenant = servers.tenant("mirror");
    let stream = Stream::new(0, 7);
    let (infra, named) = ("ci-os-mirror1", BTreeSet::new());
    let file = GZ_PATH.rsplit('/').next().unwrap();
    let target = Qcow2Target {
        location: format!(
            "https://rhcos.mirror.invalid/art/storage/prod/streams/rhel-9.8/builds/{RELEASE}/x86_64/{file}"
        ),
        ..stream.target.clone()
    };
    let at = format!("/rhcos/{file}");
    let wrong = Files::serve(BTreeMap::from([(at.clone(), stream.qcow2.qcow2.clone())]));
    let e = importer(&tenant, "openstack")
        .ensure(&stream.mirrored(&wrong), &want(infra, &target, &named))
        .await
        .unwrap_err();
    let text = e.to_string();
    assert!(e.is_bad_artifact(), "{text}");
    for part in [
        &wrong.url(&at),
        &stream.qcow2.gz_sha256,
        &stream.qcow2.sha256,
    ] {
        assert!(text.contains(part.as_str()), "{part} not in {text}");
    }
    assert!(tenant.images_named(&image_name(infra, RELEASE)).is_empty());

    let mirror = Files::serve(BTreeMap::from([(at.clone(), stream.qcow2.gz.clone())]));
    let started = Instant::now();
    let image = importer(&tenant, "openstack")
        .ensure(&stream.mirrored(&mirror), &want(infra, &target, &named))
        .await
        .unwrap();
    eprintln!("import from the mirror: {:?}", started.elapsed());
    let held = tenant.images_named(&image_name(infra, RELEASE));
    assert_eq!(held.len(), 1, "{held:?}");
    assert_eq!(
        (&held[0]["id"], &held[0]["status"]),
        (&json!(image.id), &json!("active"))
    );
    assert_eq!(held[0]["os_hash_value"], json!(stream.qcow2.sha512));
    assert_eq!(
        held[0]["bootimage_webhook_qcow2_sha256"],
        json!(stream.qcow2.sha256)
    );
    assert_eq!(mirror.hits.load(Ordering::SeqCst), 1);
    assert_eq!(stream.files.hits.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn glance_killed_mid_upload_is_named_and_a_retry_clears_what_it_left() {
    let _parallel = support::parallel();
    // Servers of its own: Glance is killed.
    let servers = Servers::start();
    let tenant = servers.tenant("killed");
    let (slow, slow_tenant) = slowed(&servers, &tenant);
    let stream = Stream::new(24, 4);
    let (infra, named) = ("ci-os-kill1", BTreeSet::new());
    let name = image_name(infra, RELEASE);
    let settings = stream.settings();
    let target = stream.target.clone();

    let mut imp = importer(&slow_tenant, "openstack");
    let (settings2, target2, named2) = (settings.clone(), target.clone(), named.clone());
    let upload = tokio::spawn(async move {
        let r = imp
            .ensure(&settings2, &want(infra, &target2, &named2))
            .await
            .map(|i| i.id);
        (imp, r)
    });
    // Once Glance is writing the image, kill it.
    let deadline = Instant::now() + Duration::from_secs(60);
    while tenant
        .images_named(&name)
        .first()
        .map(|i| i["status"].clone())
        != Some(json!("saving"))
    {
        assert!(Instant::now() < deadline, "the image never became saving");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    servers.kill_glance();
    let (mut imp, result) = upload.await.unwrap();
    let e = result.unwrap_err().to_string();
    eprintln!("the cut upload: {e}");
    assert!(e.contains(&format!("127.0.0.1:{}", slow.port)), "{e}");
    assert!(
        e.contains(&format!("upload image {name}")) && e.contains("cut short"),
        "{e}"
    );
    // Keystone revokes the failed replica's token while Glance is down (so Glance has no
    // cached validation of it): its next call is refused, and the token renewed once.
    let revoked = imp.glance.keystone.token().await.unwrap().value;
    revoke(&servers, &revoked);
    let issued = imp.glance.keystone.issued();
    servers.restart();
    let left = tenant.images_named(&name);
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(left[0]["status"], "saving");

    // Another replica (a new Lease holder) cannot prove the import stopped: it leaves it.
    let mut other = importer(&tenant, "openstack");
    let e = other
        .ensure(&settings, &want(infra, &target, &named))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("still being imported"), "{e}");
    // The replica whose import failed deletes it and imports anew.
    let started = Instant::now();
    let image = imp
        .ensure(&settings, &want(infra, &target, &named))
        .await
        .unwrap();
    eprintln!("the retry: {:?}", started.elapsed());
    assert_eq!(imp.glance.keystone.issued(), issued + 1);
    let held = tenant.images_named(&name);
    assert_eq!(held.len(), 1, "{held:?}");
    assert_eq!(
        (&held[0]["id"], &held[0]["status"]),
        (&json!(image.id), &json!("active"))
    );
    assert_ne!(held[0]["id"], left[0]["id"]);
    assert_eq!(held[0]["os_hash_value"], json!(stream.qcow2.sha512));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_clouds_ca_bundle_is_honoured() {
    let _parallel = support::parallel();
    let (servers, _turn) = Servers::shared().await;
    let tenant = servers.tenant("tls");
    let certs = bootimage_webhook::serve::tls::DevCerts::generate(&["127.0.0.1".into()]).unwrap();
    let keystone_port: u16 = servers.env["KEYSTONE_PORT"].parse().unwrap();
    let tls = Forwarder::start(
        keystone_port,
        Some((&certs.chain_pem, &certs.key_pem)),
        None,
    );
    let https = format!("https://127.0.0.1:{}/v3", tls.port);
    let yaml = tenant
        .clouds_yaml
        .replace(&tenant.env["OS_AUTH_URL"], &https);
    assert!(yaml.contains(&https));
    let stream = Stream::new(0, 5);
    let (infra, named) = ("ci-os-tls1", BTreeSet::new());
    let wanted = want(infra, &stream.target, &named);
    let connect = |yaml: &str, creds: Credentials| {
        openstack::connect(&Credentials {
            clouds_yaml: yaml.to_owned(),
            ..creds
        })
        .unwrap()
    };
    // The CA in the Secret's cacert key, or in the installer's ConfigMap: trusted.
    for creds in [
        Credentials {
            secret_cacert: Some(certs.ca_pem.clone().into_bytes()),
            ..Default::default()
        },
        Credentials {
            configmap_ca: Some(certs.ca_pem.clone()),
            ..Default::default()
        },
    ] {
        let look = connect(&yaml, creds).look(&wanted).await.unwrap();
        assert!(look.ready.is_none());
    }
    // Without it: refused, and verify: false changes nothing but the message.
    let e = connect(&yaml, Credentials::default())
        .look(&wanted)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(&https) && e.to_lowercase().contains("certificate"),
        "{e}"
    );
    let off = yaml.replace(
        "identity_api_version: 3",
        "identity_api_version: 3\n    verify: false",
    );
    assert!(off.contains("verify: false"), "{off}");
    let e = connect(&off, Credentials::default())
        .look(&wanted)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("verify: false") && e.contains("cacert"), "{e}");
    // A cacert path the pod does not have, and no CA anywhere else: named.
    let named_ca = yaml.replace(
        "identity_api_version: 3",
        "identity_api_version: 3\n    cacert: /nowhere/ca.pem",
    );
    let e = openstack::connect(&Credentials {
        clouds_yaml: named_ca,
        ..Default::default()
    });
    let e = e.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(
        e.contains("/nowhere/ca.pem") && e.contains("cloud-provider-config"),
        "{e}"
    );
}

/// Keystone revokes `token` (its admin API).
fn revoke(servers: &Servers, token: &str) {
    let out = std::process::Command::new("curl")
        .args([
            "-sS",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "-X",
            "DELETE",
        ])
        .args(["-H", &format!("X-Auth-Token: {}", servers.admin_token())])
        .args(["-H", &format!("X-Subject-Token: {token}")])
        .arg(format!("{}/auth/tokens", servers.env["OS_AUTH_URL"]))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "204");
}

/// The tenant's cloud with its image endpoint behind a forwarder that paces what is sent
/// (slow enough to kill Glance mid-upload), registered as a region of its own.
fn slowed(servers: &Servers, tenant: &Tenant) -> (Forwarder, Tenant) {
    let glance_port: u16 = servers.env["GLANCE_PORT"].parse().unwrap();
    let slow = Forwarder::start(glance_port, None, Some(Duration::from_millis(20)));
    servers.image_endpoint_in("Slow", &format!("http://127.0.0.1:{}", slow.port));
    let yaml = tenant.clouds_yaml.replace("RegionOne", "Slow");
    let slow_tenant = Tenant {
        env: tenant.env.clone(),
        clouds_yaml: yaml,
    };
    (slow, slow_tenant)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keystone_glance_and_the_download_go_through_the_proxy() {
    let _parallel = support::parallel();
    let (servers, _turn) = Servers::shared().await;
    let tenant = servers.tenant("proxied");
    let stream = Stream::new(0, 6);
    let dir = tempfile::tempdir().unwrap();
    let proxy = support::proxy::Tinyproxy::start(dir.path());
    let (infra, named) = ("ci-os-proxy1", BTreeSet::new());
    let rules = Proxy::new("", &proxy.url(), "");
    let mut imp = importer_via(&tenant, "openstack", rules);
    let image = imp
        .ensure(&stream.settings(), &want(infra, &stream.target, &named))
        .await
        .unwrap();
    assert_eq!(tenant.images_named(&image_name(infra, RELEASE)).len(), 1);
    for (what, port) in [
        ("Keystone", servers.env["KEYSTONE_PORT"].clone()),
        ("Glance", servers.env["GLANCE_PORT"].clone()),
        ("the mirror", stream.files.addr.port().to_string()),
    ] {
        let through = proxy.requests_to(&format!("127.0.0.1:{port}"));
        assert!(
            through > 0,
            "{what}: nothing through the proxy: {}",
            proxy.log()
        );
    }
    assert_eq!(image.status, "active");
}

/// The installer's image, made with clusterOSImageProperties, and an upload client's digest
/// of its data.
fn installer_image(tenant: &Tenant, infra: &str) {
    let installer = json!({
        "name": format!("{infra}-rhcos"), "disk_format": "qcow2", "container_format": "bare",
        "visibility": "private", "hw_disk_bus": "scsi", "hw_scsi_model": "virtio-scsi",
        "owner_specified.openstack.sha256": "0123",
    });
    tenant.glance("POST", "/v2/images", Some(installer));
}
