//! One test body over every cloud behind the shared pass's `Adapter`, each with its own
//! server behind it: OpenStack's real Keystone and Glance, Nutanix's Prism Central double
//! (no emulator exists). vSphere runs its own pass (a template per failure domain, tags
//! for a marker) and has its own tests.
//!
//! The body: an image made through the adapter is used once listed and proved, by this
//! client and a new one; a look-alike that copies our marker but was made by another owner
//! blocks the name, is reported with its id, is never listed as ours and never deleted;
//! an image of ours due for retirement is deleted only once read back as ours and named
//! by nothing.

use crate::nutanix_prism::{self, INFRA as NUTANIX_INFRA, PASSWORD, RELEASE_A, RELEASE_B};
use crate::openstack_glance::{self, RELEASE as OPENSTACK_RELEASE, Stream};
use crate::support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use bootimage_webhook::cluster::importer::Adapter;
use bootimage_webhook::cluster::importer::adapter::{Found, Want, Wanted};
use bootimage_webhook::cluster::nutanix::{self, Marker, Nutanix, Source};
use bootimage_webhook::cluster::openstack::{self, OpenStack, Qcow2Target};
use bootimage_webhook::core::snapshot::Arch;
use serde_json::{Value, json};
use support::openstack::{Servers, Tenant, call, upload};

/// Which image of the body a cloud is asked for.
#[derive(Clone, Copy)]
enum Which {
    /// The one the adapter imports.
    Ours,
    /// The one a look-alike holds.
    Forged,
}

/// A cloud behind its adapter, with its server.
trait Cloud {
    type A: Adapter;
    fn adapter(&self) -> Self::A;
    fn client(&self) -> <Self::A as Adapter>::Client;
    /// The cluster's infrastructure id, and the image wanted.
    fn wanted(&self, which: Which) -> (String, Wanted<<Self::A as Adapter>::Target>);
    /// Plants, as another owner, an image with our marker and the stream's data under the
    /// wanted name: its id.
    fn plant(&self, infra: &str, wanted: &Wanted<<Self::A as Adapter>::Target>) -> String;
    /// The ids of the images the cloud holds under `name`.
    fn held(&self, name: &str) -> Vec<String>;
}

async fn body<C: Cloud>(cloud: &C) {
    let mut adapter = cloud.adapter();
    let mut client = cloud.client();
    let none = BTreeSet::new();

    // Made, then used once listed and proved: by this client, and by a new one.
    let (infra, wanted) = cloud.wanted(Which::Ours);
    let want = Want {
        infra_id: &infra,
        wanted: &wanted,
        named: Some(&none),
    };
    let found = adapter.look(&mut client, &want).await.unwrap();
    assert!(matches!(found, Found::Absent), "{found:?}");
    adapter.ensure(&mut client, &want, None).await.unwrap();
    let found = adapter.look(&mut client, &want).await.unwrap();
    assert!(matches!(found, Found::Usable), "{found:?}");
    let mut other = cloud.client();
    let found = adapter.look(&mut other, &want).await.unwrap();
    assert!(matches!(found, Found::Usable), "{found:?}");
    let ours = C::A::ours(&mut client, &infra).await.unwrap();
    let [mine] = &ours[..] else {
        panic!("{ours:?}")
    };
    assert!(
        mine.complete && !mine.stopped && mine.name == wanted.name,
        "{mine:?}"
    );
    assert_eq!(cloud.held(&wanted.name), std::slice::from_ref(&mine.id));

    // A look-alike with our marker, by another owner: reported with its id, left alone.
    let (forged_infra, forged_wanted) = cloud.wanted(Which::Forged);
    let forged = cloud.plant(&forged_infra, &forged_wanted);
    let asked = Want {
        infra_id: &forged_infra,
        wanted: &forged_wanted,
        named: Some(&none),
    };
    match adapter.look(&mut client, &asked).await.unwrap() {
        Found::Blocked(e) => assert!(e.to_string().contains(&forged), "{e}"),
        other => panic!("{other:?}"),
    }
    let e = adapter.ensure(&mut client, &asked, None).await.unwrap_err();
    assert!(C::A::warns(&e) && e.to_string().contains(&forged), "{e}");
    let listed = C::A::ours(&mut client, &forged_infra).await.unwrap();
    assert!(listed.iter().all(|o| o.id != forged), "{listed:?}");
    let kept = C::A::retire(&mut client, &forged, &forged_infra, &none)
        .await
        .unwrap_err();
    assert!(
        C::A::kept(&kept) && kept.to_string().contains("look-alike"),
        "{kept}"
    );
    assert_eq!(cloud.held(&forged_wanted.name), [forged]);

    // Retired only once read back as ours and named by nothing.
    let named = BTreeSet::from([wanted.name.clone()]);
    let kept = C::A::retire(&mut client, &mine.id, &infra, &named)
        .await
        .unwrap_err();
    assert!(C::A::kept(&kept), "{kept}");
    assert_eq!(cloud.held(&wanted.name), std::slice::from_ref(&mine.id));
    C::A::retire(&mut client, &mine.id, &infra, &none)
        .await
        .unwrap();
    let since = Instant::now();
    // A delete may finish in a task of the cloud's.
    while !cloud.held(&wanted.name).is_empty() && since.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(cloud.held(&wanted.name).is_empty());
}

fn amd64() -> BTreeSet<Arch> {
    BTreeSet::from([Arch::Amd64])
}

/// A project of the real Keystone and Glance, the stream's qcow2 served.
struct Glance {
    servers: &'static Servers,
    tenant: Tenant,
    stream: Stream,
}

impl Cloud for Glance {
    type A = OpenStack;

    fn adapter(&self) -> OpenStack {
        OpenStack::new(self.stream.settings())
    }

    fn client(&self) -> openstack::Importer {
        openstack_glance::importer(&self.tenant, "openstack")
    }

    fn wanted(&self, which: Which) -> (String, Wanted<Qcow2Target>) {
        let infra = match which {
            Which::Ours => "ci-os-adapt1",
            Which::Forged => "ci-os-adapt2",
        };
        let wanted = Wanted {
            name: openstack::image_name(infra, OPENSTACK_RELEASE),
            target: self.stream.target.clone(),
            arches: amd64(),
            arch: None,
        };
        (infra.to_owned(), wanted)
    }

    /// Public, made by the admin's project (only an admin may publish).
    fn plant(&self, infra: &str, wanted: &Wanted<Qcow2Target>) -> String {
        let t = &wanted.target;
        let body = json!({
            "name": wanted.name, "disk_format": "qcow2", "container_format": "bare",
            "visibility": "public",
            "bootimage_webhook_infrastructure_name": infra, "bootimage_webhook_stream": t.stream,
            "bootimage_webhook_release": t.release,
            "bootimage_webhook_qcow2_sha256": t.uncompressed_sha256,
        });
        let (glance, admin) = (&self.servers.env["GLANCE_URL"], self.servers.admin_token());
        let made = call("POST", &format!("{glance}/v2/images"), &admin, Some(body));
        let id = made["id"].as_str().unwrap_or_else(|| panic!("{made}"));
        upload(glance, &admin, id, &self.stream.qcow2.qcow2);
        id.to_owned()
    }

    fn held(&self, name: &str) -> Vec<String> {
        ids(&self.tenant.images_named(name), "/id")
    }
}

/// Prism Central's double, the stream's qcow2s served.
struct Prism(nutanix_prism::World);

impl Cloud for Prism {
    type A = Nutanix;

    fn adapter(&self) -> Nutanix {
        Nutanix::new(nutanix_prism::settings())
    }

    fn client(&self) -> nutanix::Importer {
        self.0.importer(PASSWORD)
    }

    fn wanted(&self, which: Which) -> (String, Wanted<Source>) {
        let release = match which {
            Which::Ours => RELEASE_A,
            Which::Forged => RELEASE_B,
        };
        let wanted = Wanted {
            name: nutanix::image_name(NUTANIX_INFRA, release),
            target: Source {
                stream: "rhel-9".into(),
                artifact: self.0.artifact(release),
            },
            arches: amd64(),
            arch: None,
        };
        (NUTANIX_INFRA.to_owned(), wanted)
    }

    /// Made by another user of Prism Central.
    fn plant(&self, infra: &str, wanted: &Wanted<Source>) -> String {
        let a = &wanted.target.artifact;
        let copied = Marker {
            infra_id: infra.into(),
            stream: wanted.target.stream.clone(),
            release: a.release.clone(),
            sha256: a.sha256.clone(),
            import_deadline: None,
        };
        let data = self.0.data(&a.release);
        self.0
            .prism
            .add_image(&wanted.name, &copied.description(), &data)
    }

    fn held(&self, name: &str) -> Vec<String> {
        ids(&self.0.prism.images_named(name), "/metadata/uuid")
    }
}

fn ids(images: &[Value], at: &str) -> Vec<String> {
    images
        .iter()
        .filter_map(|i| i.pointer(at).and_then(Value::as_str).map(str::to_owned))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn importer_adapters_openstack_on_keystone_and_glance() {
    let _parallel = support::parallel();
    let (servers, _turn) = Servers::shared().await;
    let cloud = Glance {
        servers,
        tenant: servers.tenant("adapter"),
        stream: Stream::new(1, 31),
    };
    body(&cloud).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn importer_adapters_nutanix_on_the_prism_central_double() {
    let _parallel = support::parallel();
    body(&Prism(nutanix_prism::World::new())).await;
}
