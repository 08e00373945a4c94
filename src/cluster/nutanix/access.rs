//! How Prism Central is reached: the machine API's credentials Secret and Infrastructure
//! `cluster`, read through the Kubernetes API by name, then Prism Central over HTTPS.

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DynamicObject, ListParams};

use super::credentials::{self, BasicAuth};
use super::error::NutanixError;
use super::import::Importer;
use super::prism::Prism;
use crate::cluster::apis;
use crate::cluster::egress::Proxy;
use crate::cluster::importer::https::{self, Https, HttpsError};

/// What the Secret and Infrastructure hold, as read.
#[derive(Debug, Clone)]
pub struct Credentials {
    /// `https://<address>:<port>` of Prism Central.
    pub endpoint: String,
    pub auth: BasicAuth,
}

pub(super) fn secret_name() -> String {
    format!(
        "Secret {}/{}",
        credentials::SECRET_NAMESPACE,
        credentials::SECRET_NAME
    )
}

/// Reads the Secret and Infrastructure `cluster` (both must be there).
pub async fn read(client: &kube::Client) -> Result<Credentials, NutanixError> {
    let bad = |why: String| NutanixError::Credentials {
        secret: secret_name(),
        why,
    };
    let secrets: Api<Secret> = Api::namespaced(client.clone(), credentials::SECRET_NAMESPACE);
    let secret = secrets
        .get(credentials::SECRET_NAME)
        .await
        .map_err(|e| bad(e.to_string()))?;
    let data = secret.data.unwrap_or_default();
    let text = data
        .get(credentials::SECRET_KEY)
        .ok_or_else(|| bad(format!("no key {}", credentials::SECRET_KEY)))?;
    let text = std::str::from_utf8(&text.0)
        .map_err(|_| bad(format!("its {} is not UTF-8 text", credentials::SECRET_KEY)))?;
    let auth = credentials::parse(text).map_err(bad)?;
    // Listed by name, as the watcher's grant allows (list and watch, no get).
    let infrastructures: Api<DynamicObject> =
        Api::all_with(client.clone(), &apis::INFRASTRUCTURE.api_resource());
    let endpoint_error = |why: String| NutanixError::Endpoint { why };
    let listed = infrastructures
        .list(&ListParams::default().fields("metadata.name=cluster"))
        .await
        .map_err(|e| endpoint_error(e.to_string()))?;
    let infrastructure = listed
        .items
        .into_iter()
        .next()
        .ok_or_else(|| endpoint_error("there is no Infrastructure cluster".into()))?;
    let value = serde_json::to_value(&infrastructure).map_err(|e| endpoint_error(e.to_string()))?;
    let endpoint = credentials::endpoint(&value).map_err(|why| NutanixError::Endpoint { why })?;
    Ok(Credentials { endpoint, auth })
}

/// The importer for Prism Central as the credentials say, through the cluster-wide proxy
/// where the environment says so.
pub fn connect(creds: &Credentials) -> Result<Importer, NutanixError> {
    connect_via(creds, Proxy::from_env())
}

/// As [`connect`], through `proxy`. Certificates are always verified, against the system's
/// roots and the trusted CA bundle (where the cluster's additional trust bundle is).
pub fn connect_via(creds: &Credentials, proxy: Proxy) -> Result<Importer, NutanixError> {
    let tls = |e: HttpsError| NutanixError::Endpoint {
        why: format!("its TLS client: {e}"),
    };
    let roots = https::roots(&[]).map_err(tls)?;
    let http = Https::new(roots, false, proxy).map_err(tls)?;
    Ok(Importer::new(Prism::new(
        http,
        &creds.endpoint,
        &creds.auth,
    )))
}
