//! How the vCenters are reached: HTTPS, and the credentials Secret read through the
//! Kubernetes API.

use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;

use crate::core::platforms::vsphere::FailureDomain;

use super::error::{ImportError, address, on};
use super::https::{Https, HttpsError};
use super::tags;
use super::vim::{Moref, Vim};

/// How the vCenters are reached: HTTPS, and the credentials Secret read through the
/// Kubernetes API.
pub struct Access {
    pub client: kube::Client,
    namespace: String,
    name: String,
    pub https: Https,
}

impl Access {
    pub fn new(
        client: kube::Client,
        secret: (&str, &str),
        ca_file: Option<&std::path::Path>,
    ) -> Result<Access, HttpsError> {
        Ok(Access {
            client,
            namespace: secret.0.to_owned(),
            name: secret.1.to_owned(),
            https: Https::new(ca_file)?,
        })
    }

    pub async fn login(&self, fd: &FailureDomain) -> Result<Vim, ImportError> {
        let (user, password) = self.credentials(&fd.server).await?;
        Vim::login(&self.https, &address(fd), &user, &password)
            .await
            .map_err(|error| on(fd, error))
    }

    /// Attaches the installer's cluster tag to the new template. Clusters the installer
    /// did not make have no such tag: the template is kept, untagged, with a warning.
    pub async fn tag(&self, fd: &FailureDomain, infra_id: &str, vm: &Moref) {
        let tagged = async {
            let (user, password) = self.credentials(&fd.server).await?;
            let tagging = tags::Tagging::login(&self.https, &address(fd), &user, &password).await?;
            let attached = tagging.attach_cluster_tag(infra_id, vm).await;
            tagging.logout().await;
            attached.map_err(ImportError::from)
        };
        if let Err(e) = tagged.await {
            tracing::warn!(error = %e, template = %vm.value, failure_domain = %fd.name, "the template is imported but not tagged: openshift-install destroy will not delete it");
        }
    }

    /// `<server>.username` and `<server>.password` of the credentials Secret, as the
    /// machine API reads them.
    async fn credentials(&self, server: &str) -> Result<(String, String), ImportError> {
        let secret = format!("Secret {}/{}", self.namespace, self.name);
        let missing = |why: String| ImportError::Credentials {
            server: server.to_owned(),
            why,
        };
        let api: Api<Secret> = Api::namespaced(self.client.clone(), &self.namespace);
        let found = api.get(&self.name).await;
        let data = found
            .map_err(|e| missing(format!("{secret}: {e}")))?
            .data
            .unwrap_or_default();
        let key = |suffix: &str| {
            let key = format!("{server}.{suffix}");
            data.get(&key)
                .map(|v| String::from_utf8_lossy(&v.0).into_owned())
                .ok_or_else(|| missing(format!("{secret} has no {key}")))
        };
        Ok((key("username")?, key("password")?))
    }
}
