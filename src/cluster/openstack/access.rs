//! How Glance is reached: the machine API's `clouds.yaml` Secret and the cloud's CA bundle,
//! read through the Kubernetes API by name, then Keystone and Glance over HTTPS.

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::Api;

use super::clouds::{self, Cloud};
use super::error::OpenStackError;
use super::glance::Glance;
use super::import::Importer;
use super::keystone::Keystone;
use crate::cluster::egress::Proxy;
use crate::cluster::importer::https::{self, Https};

/// What the Secret and the ConfigMap hold, as read.
#[derive(Default, PartialEq, Eq)]
pub struct Credentials {
    pub clouds_yaml: String,
    /// The Secret's `cacert` key.
    pub secret_cacert: Option<Vec<u8>>,
    /// ConfigMap `openshift-config/cloud-provider-config`, key `ca-bundle.pem`.
    pub configmap_ca: Option<String>,
}

pub(super) fn secret_name() -> String {
    format!(
        "Secret {}/{}",
        clouds::SECRET_NAMESPACE,
        clouds::SECRET_NAME
    )
}

/// Reads the Secret (it must be there) and the ConfigMap (it may not be, or not be
/// readable: the Secret's CA and the system's roots are then all there is).
pub async fn read(client: &kube::Client) -> Result<Credentials, OpenStackError> {
    let missing = |why: String| OpenStackError::Credentials {
        secret: secret_name(),
        why,
    };
    let secrets: Api<Secret> = Api::namespaced(client.clone(), clouds::SECRET_NAMESPACE);
    let secret = secrets
        .get(clouds::SECRET_NAME)
        .await
        .map_err(|e| missing(e.to_string()))?;
    let mut data = secret.data.unwrap_or_default();
    let clouds_yaml = data
        .remove(clouds::SECRET_KEY)
        .ok_or_else(|| missing(format!("no key {}", clouds::SECRET_KEY)))?;
    let clouds_yaml = String::from_utf8(clouds_yaml.0)
        .map_err(|_| missing(format!("its {} is not UTF-8 text", clouds::SECRET_KEY)))?;
    let configmaps: Api<ConfigMap> =
        Api::namespaced(client.clone(), clouds::CA_CONFIGMAP_NAMESPACE);
    let configmap_ca = match configmaps.get_opt(clouds::CA_CONFIGMAP_NAME).await {
        Ok(cm) => cm.and_then(|cm| cm.data?.remove(clouds::CA_CONFIGMAP_KEY)),
        Err(e) => {
            tracing::warn!(error = %e, configmap = clouds::CA_CONFIGMAP_NAME, "cannot read the cloud's CA bundle from its ConfigMap: trusting the Secret's and the system's");
            None
        }
    };
    Ok(Credentials {
        clouds_yaml,
        secret_cacert: data.remove(clouds::SECRET_CA_KEY).map(|b| b.0),
        configmap_ca,
    })
}

/// The cloud `openstack` of the credentials, and the client that trusts its CA bundles.
pub fn connect(creds: &Credentials) -> Result<Importer, OpenStackError> {
    let cloud = clouds::parse(&creds.clouds_yaml, clouds::CLOUD_NAME).map_err(|e| {
        OpenStackError::Credentials {
            secret: secret_name(),
            why: e.to_string(),
        }
    })?;
    let read = |path: &str| std::fs::read(path).ok();
    connect_cloud(cloud, creds, read, Proxy::from_env())
}

/// As [`connect`], for a cloud already read; `read` reads the file `cacert` names, and
/// everything goes through `proxy` where its rules say so.
pub fn connect_cloud(
    cloud: Cloud,
    creds: &Credentials,
    read: impl Fn(&str) -> Option<Vec<u8>>,
    proxy: Proxy,
) -> Result<Importer, OpenStackError> {
    let sources = clouds::ca_sources(
        &cloud,
        creds.secret_cacert.as_deref(),
        creds.configmap_ca.as_deref(),
        read,
    )
    .map_err(|why| OpenStackError::CaBundle {
        from: cloud.cacert.clone().unwrap_or_default(),
        why,
    })?;
    let roots = https::roots(&sources.bundles)?;
    let http = Https::new(roots, cloud.verify_off, proxy)?;
    Ok(Importer::new(Glance::new(Keystone::new(http, cloud))))
}
