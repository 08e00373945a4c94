//! How the vCenters are reached: HTTPS, and the credentials Secret read through the
//! Kubernetes API.

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::Api;

use crate::core::platforms::vsphere::FailureDomain;

use super::error::{ImportError, address, on};
use super::https::{Https, HttpsError};
use super::tags;
use super::vim::{Moref, Vim};
use crate::cluster::cause::{Cause, cause};

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

    /// Attaches the installer's cluster tag to the new template, and the tags the waiting
    /// MachineSets give their machines (`tagIDs`, as the MCO does). Clusters the installer
    /// did not make have no such tag: the template is kept, untagged, with a warning.
    pub async fn tag(&self, fd: &FailureDomain, infra_id: &str, tag_ids: &[String], vm: &Moref) {
        let tagging = async {
            let (user, password) = self.credentials(&fd.server).await?;
            Ok::<_, ImportError>(
                tags::Tagging::login(&self.https, &address(fd), &user, &password).await?,
            )
        };
        let tagging = match tagging.await {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!(error = %e, template = %vm.value, failure_domain = %fd.name, "the template is imported but not tagged: openshift-install destroy will not delete it");
                return;
            }
        };
        if let Err(e) = tagging.attach_cluster_tag(infra_id, vm).await {
            tracing::warn!(error = %e, template = %vm.value, failure_domain = %fd.name, "the template is imported but not tagged: openshift-install destroy will not delete it");
        }
        for id in tag_ids {
            if let Err(e) = tagging.attach(id, vm).await {
                tracing::warn!(error = %e, tag = %id, template = %vm.value, failure_domain = %fd.name, "cannot attach a MachineSet's tag to the template");
            }
        }
        tagging.logout().await;
    }

    /// The install-config's `platform.vsphere.diskType` (ConfigMap
    /// `kube-system/cluster-config-v1`), for a template with no earlier one to follow.
    pub async fn install_config_disk_type(&self) -> Option<String> {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), "kube-system");
        let cm = match api.get("cluster-config-v1").await {
            Ok(cm) => cm,
            Err(e) => {
                tracing::debug!(error = %e, "cannot read the install-config: the datastore's default disk provisioning");
                return None;
            }
        };
        let text = cm.data?.remove("install-config")?;
        let config: serde_json::Value = serde_saphyr::from_str(&text).ok()?;
        let disk_type = config.pointer("/platform/vsphere/diskType")?.as_str()?;
        Some(disk_type.to_owned())
            .filter(|t| ["thin", "thick", "eagerZeroedThick"].contains(&t.as_str()))
    }

    /// `<server>.username` and `<server>.password` of the credentials Secret, as the
    /// machine API reads them.
    async fn credentials(&self, server: &str) -> Result<(String, String), ImportError> {
        let secret = format!("Secret {}/{}", self.namespace, self.name);
        let missing = |cause: Cause| ImportError::Credentials {
            server: server.to_owned(),
            cause,
        };
        let api: Api<Secret> = Api::namespaced(self.client.clone(), &self.namespace);
        let found = api.get(&self.name).await;
        let data = found
            .map_err(|e| missing(cause(format!("{secret}: {e}"))))?
            .data
            .unwrap_or_default();
        let key = |suffix: &str| {
            let key = format!("{server}.{suffix}");
            data.get(&key)
                .map(|v| String::from_utf8_lossy(&v.0).into_owned())
                .ok_or_else(|| missing(cause(format!("{secret} has no {key}"))))
        };
        Ok((key("username")?, key("password")?))
    }
}
