//! The machine API's `clouds.yaml` (Secret `openshift-machine-api/openstack-cloud-credentials`,
//! key `clouds.yaml`, cloud `openstack`: the names the installer writes into every
//! MachineSet's `cloudsSecret` and `cloudName`), read as the machine API reads it: Keystone
//! v3 with a password or an application credential, the region and interface of the
//! endpoints, and the CA bundle.
//!
//! The CA bundle: the installer writes the CA into ConfigMap
//! `openshift-config/cloud-provider-config` (key `ca-bundle.pem`) and points `cacert` at the
//! masters' copy of it (`/etc/kubernetes/static-pod-resources/configmaps/cloud-config/
//! ca-bundle.pem`), which is not in this pod; the machine API reads the ConfigMap. The
//! cloud-credential-operator and HyperShift put it in the Secret itself, key `cacert`. All
//! of them are trusted here, beside the system's roots, and the file `cacert` names when
//! the pod has it; a `cacert` that none of them provides is an error naming all three.
//!
//! `verify: false` does not turn verification off. The machine API itself never honours it
//! (it always verifies, with the ConfigMap's CA), so a cluster whose machines are created
//! has a CA that verifies; an image uploaded over an unverified connection would be one
//! nobody can vouch for, and the credentials would go to whoever answered. It is named in
//! the error when verification then fails.

use std::collections::BTreeMap;

use serde::Deserialize;

/// The Secret and cloud the installer names in every MachineSet.
pub const SECRET_NAMESPACE: &str = "openshift-machine-api";
pub const SECRET_NAME: &str = "openstack-cloud-credentials";
pub const SECRET_KEY: &str = "clouds.yaml";
pub const SECRET_CA_KEY: &str = "cacert";
pub const CLOUD_NAME: &str = "openstack";
/// Where the installer keeps the cloud's CA bundle.
pub const CA_CONFIGMAP_NAMESPACE: &str = "openshift-config";
pub const CA_CONFIGMAP_NAME: &str = "cloud-provider-config";
pub const CA_CONFIGMAP_KEY: &str = "ca-bundle.pem";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CloudsError {
    #[error("{SECRET_KEY} is not YAML a cloud can be read from: {0}")]
    Yaml(String),
    #[error("{SECRET_KEY} has no cloud {0:?} (it has {1:?})")]
    NoCloud(String, Vec<String>),
    #[error("cloud {cloud}: {what}")]
    Invalid { cloud: String, what: String },
}

/// How Keystone is asked for a token.
#[derive(Clone, PartialEq, Eq)]
pub enum Auth {
    Password {
        user: Named,
        password: String,
        project: Option<Named>,
    },
    ApplicationCredential {
        /// By id, or by name with its user.
        id: Option<String>,
        name: Option<String>,
        user: Option<Named>,
        secret: String,
    },
}

impl std::fmt::Debug for Auth {
    /// Without the secrets.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Auth::Password { user, project, .. } => f
                .debug_struct("Password")
                .field("user", user)
                .field("project", project)
                .finish_non_exhaustive(),
            Auth::ApplicationCredential { id, name, .. } => f
                .debug_struct("ApplicationCredential")
                .field("id", id)
                .field("name", name)
                .finish_non_exhaustive(),
        }
    }
}

/// A user or project: its id, or its name in a domain (by id or name).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Named {
    pub id: Option<String>,
    pub name: Option<String>,
    pub domain_id: Option<String>,
    pub domain_name: Option<String>,
}

/// Which of an endpoint's URLs is used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interface {
    Public,
    Internal,
    Admin,
}

impl Interface {
    pub fn as_str(self) -> &'static str {
        match self {
            Interface::Public => "public",
            Interface::Internal => "internal",
            Interface::Admin => "admin",
        }
    }
}

/// One cloud of `clouds.yaml`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cloud {
    pub name: String,
    pub auth_url: String,
    pub auth: Auth,
    pub region: Option<String>,
    pub interface: Interface,
    /// `cacert`: a path.
    pub cacert: Option<String>,
    /// `verify: false` (never honoured: see the module's documentation).
    pub verify_off: bool,
}

#[derive(Deserialize)]
struct File {
    #[serde(default)]
    clouds: BTreeMap<String, Raw>,
}

#[derive(Deserialize, Default)]
struct Raw {
    auth_type: Option<String>,
    #[serde(default)]
    auth: RawAuth,
    region_name: Option<String>,
    interface: Option<String>,
    endpoint_type: Option<String>,
    cacert: Option<String>,
    verify: Option<serde_json::Value>,
}

#[derive(Deserialize, Default)]
struct RawAuth {
    auth_url: Option<String>,
    username: Option<String>,
    user_id: Option<String>,
    password: Option<String>,
    user_domain_name: Option<String>,
    user_domain_id: Option<String>,
    project_name: Option<String>,
    project_id: Option<String>,
    tenant_name: Option<String>,
    tenant_id: Option<String>,
    project_domain_name: Option<String>,
    project_domain_id: Option<String>,
    domain_name: Option<String>,
    domain_id: Option<String>,
    application_credential_id: Option<String>,
    application_credential_name: Option<String>,
    application_credential_secret: Option<String>,
}

/// The cloud `name` of the `clouds.yaml` text.
pub fn parse(text: &str, name: &str) -> Result<Cloud, CloudsError> {
    let file: File = serde_saphyr::from_str(text).map_err(|e| CloudsError::Yaml(e.to_string()))?;
    let mut clouds = file.clouds;
    let Some(raw) = clouds.remove(name) else {
        return Err(CloudsError::NoCloud(
            name.to_owned(),
            clouds.into_keys().collect(),
        ));
    };
    let invalid = |what: String| CloudsError::Invalid {
        cloud: name.to_owned(),
        what,
    };
    let auth_url = given(&raw.auth.auth_url)
        .ok_or_else(|| invalid("no auth.auth_url".into()))?
        .to_owned();
    let auth = match raw.auth_type.as_deref().map(str::to_ascii_lowercase) {
        None => password(&raw.auth),
        Some(t) if ["password", "v3password"].contains(&t.as_str()) => password(&raw.auth),
        Some(t) if ["v3applicationcredential", "applicationcredential"].contains(&t.as_str()) => {
            application_credential(&raw.auth)
        }
        Some(t) => Err(format!(
            "auth_type {t} is not supported here: use v3password or v3applicationcredential"
        )),
    }
    .map_err(invalid)?;
    let interface =
        interface(raw.interface.as_deref().or(raw.endpoint_type.as_deref())).map_err(invalid)?;
    Ok(Cloud {
        name: name.to_owned(),
        auth_url,
        auth,
        region: given(&raw.region_name).map(str::to_owned),
        interface,
        cacert: given(&raw.cacert).map(str::to_owned),
        verify_off: raw.verify.as_ref().is_some_and(is_false),
    })
}

fn given(value: &Option<String>) -> Option<&str> {
    value.as_deref().map(str::trim).filter(|v| !v.is_empty())
}

/// `false`, `"false"`, `no`, `0`: YAML and the libraries that read `clouds.yaml` say off
/// in all of these ways.
fn is_false(v: &serde_json::Value) -> bool {
    match v {
        serde_json::Value::Bool(b) => !b,
        serde_json::Value::String(s) => {
            ["false", "no", "off", "0"].contains(&s.trim().to_ascii_lowercase().as_str())
        }
        serde_json::Value::Number(n) => n.as_u64() == Some(0),
        _ => false,
    }
}

fn interface(value: Option<&str>) -> Result<Interface, String> {
    let Some(v) = value.map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok(Interface::Public);
    };
    let lower = v.to_ascii_lowercase();
    match lower.strip_suffix("url").unwrap_or(&lower) {
        "public" => Ok(Interface::Public),
        "internal" => Ok(Interface::Internal),
        "admin" => Ok(Interface::Admin),
        _ => Err(format!(
            "interface {v} is not one of public, internal, admin"
        )),
    }
}

fn password(a: &RawAuth) -> Result<Auth, String> {
    let user = user(a).ok_or("no auth.username or auth.user_id")?;
    let password = given(&a.password).ok_or("no auth.password")?.to_owned();
    let project_id = given(&a.project_id).or(given(&a.tenant_id));
    let project_name = given(&a.project_name).or(given(&a.tenant_name));
    let project = (project_id.is_some() || project_name.is_some()).then(|| Named {
        id: project_id.map(str::to_owned),
        name: project_name.map(str::to_owned),
        domain_id: given(&a.project_domain_id)
            .or(given(&a.domain_id))
            .map(str::to_owned),
        domain_name: given(&a.project_domain_name)
            .or(given(&a.domain_name))
            .map(str::to_owned),
    });
    Ok(Auth::Password {
        user,
        password,
        project,
    })
}

fn user(a: &RawAuth) -> Option<Named> {
    let (id, name) = (given(&a.user_id), given(&a.username));
    (id.is_some() || name.is_some()).then(|| Named {
        id: id.map(str::to_owned),
        name: name.map(str::to_owned),
        domain_id: given(&a.user_domain_id)
            .or(given(&a.domain_id))
            .map(str::to_owned),
        domain_name: given(&a.user_domain_name)
            .or(given(&a.domain_name))
            .map(str::to_owned),
    })
}

fn application_credential(a: &RawAuth) -> Result<Auth, String> {
    let secret = given(&a.application_credential_secret)
        .ok_or("no auth.application_credential_secret")?
        .to_owned();
    let id = given(&a.application_credential_id).map(str::to_owned);
    let name = given(&a.application_credential_name).map(str::to_owned);
    let user = user(a);
    match (&id, &name, &user) {
        (Some(_), _, _) | (None, Some(_), Some(_)) => Ok(Auth::ApplicationCredential {
            id,
            name,
            user,
            secret,
        }),
        _ => Err(
            "no auth.application_credential_id (or its name with auth.username or auth.user_id)"
                .into(),
        ),
    }
}

/// Where the cloud's CA certificates came from, for the log and errors.
#[derive(Debug, Default)]
pub struct CaSources {
    /// PEM text, each with where it came from.
    pub bundles: Vec<(String, Vec<u8>)>,
}

/// The CA bundles to trust for `cloud`, beside the system's roots: the Secret's `cacert`
/// key, the ConfigMap's `ca-bundle.pem`, and the file `cacert` names when the pod has it
/// (`read` reads it). A `cacert` in `clouds.yaml` with none of them is an error.
pub fn ca_sources(
    cloud: &Cloud,
    secret_cacert: Option<&[u8]>,
    configmap: Option<&str>,
    read: impl Fn(&str) -> Option<Vec<u8>>,
) -> Result<CaSources, String> {
    let mut sources = CaSources::default();
    let nonempty = |b: &[u8]| !b.iter().all(u8::is_ascii_whitespace);
    if let Some(pem) = secret_cacert.filter(|b| nonempty(b)) {
        let from = format!("Secret {SECRET_NAMESPACE}/{SECRET_NAME} key {SECRET_CA_KEY}");
        sources.bundles.push((from, pem.to_vec()));
    }
    if let Some(pem) = configmap.filter(|b| nonempty(b.as_bytes())) {
        let from = format!(
            "ConfigMap {CA_CONFIGMAP_NAMESPACE}/{CA_CONFIGMAP_NAME} key {CA_CONFIGMAP_KEY}"
        );
        sources.bundles.push((from, pem.as_bytes().to_vec()));
    }
    if let Some(path) = &cloud.cacert {
        if let Some(pem) = read(path).filter(|b| nonempty(b)) {
            sources.bundles.push((path.clone(), pem));
        } else if sources.bundles.is_empty() {
            return Err(format!(
                "clouds.yaml names the CA bundle {path}, which is not in this pod, and neither \
                 Secret {SECRET_NAMESPACE}/{SECRET_NAME} (key {SECRET_CA_KEY}) nor ConfigMap \
                 {CA_CONFIGMAP_NAMESPACE}/{CA_CONFIGMAP_NAME} (key {CA_CONFIGMAP_KEY}) holds it"
            ));
        }
    }
    Ok(sources)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// As the installer writes it (openshift/installer, the cloud `openstack` with the CA
    /// path rewritten to the masters' copy).
    const INSTALLER: &str = r#"
    clouds:
      openstack:
        auth:
          auth_url: https://keystone.example:13000/v3
          password: s3cret
          project_id: 0123456789abcdef
          project_name: shiftstack
          user_domain_name: Default
          username: ocp
        cacert: /etc/kubernetes/static-pod-resources/configmaps/cloud-config/ca-bundle.pem
        endpoint_type: public
        identity_api_version: "3"
        region_name: regionOne
        verify: true
    "#;

    const APPCRED: &str = r#"
    clouds:
      openstack:
        auth_type: v3applicationcredential
        auth:
          auth_url: https://keystone.example:5000
          application_credential_id: ac1
          application_credential_secret: acsecret
        region_name: RegionTwo
        interface: internal
        verify: false
    "#;

    #[test]
    fn the_installers_password_cloud_reads() {
        let cloud = parse(INSTALLER, CLOUD_NAME).unwrap();
        assert_eq!(cloud.auth_url, "https://keystone.example:13000/v3");
        assert_eq!(cloud.region.as_deref(), Some("regionOne"));
        assert_eq!(cloud.interface, Interface::Public);
        assert!(!cloud.verify_off);
        assert_eq!(
            cloud.cacert.as_deref(),
            Some("/etc/kubernetes/static-pod-resources/configmaps/cloud-config/ca-bundle.pem")
        );
        let Auth::Password {
            user,
            password,
            project,
        } = &cloud.auth
        else {
            panic!("{:?}", cloud.auth)
        };
        assert_eq!(user.name.as_deref(), Some("ocp"));
        assert_eq!(user.domain_name.as_deref(), Some("Default"));
        assert_eq!(password, "s3cret");
        let project = project.as_ref().unwrap();
        assert_eq!(project.id.as_deref(), Some("0123456789abcdef"));
        // No project domain: the user's is not taken for it (the id scopes alone).
        assert_eq!(project.domain_name, None);
    }

    #[test]
    fn an_application_credential_reads_and_verify_false_is_remembered() {
        let cloud = parse(APPCRED, "openstack").unwrap();
        assert_eq!(cloud.interface, Interface::Internal);
        assert_eq!(cloud.region.as_deref(), Some("RegionTwo"));
        assert!(cloud.verify_off);
        assert_eq!(
            cloud.auth,
            Auth::ApplicationCredential {
                id: Some("ac1".into()),
                name: None,
                user: None,
                secret: "acsecret".into(),
            }
        );
        // The secret never shows in a debug print.
        assert!(!format!("{cloud:?}").contains("acsecret"));
        assert!(!format!("{:?}", parse(INSTALLER, "openstack").unwrap()).contains("s3cret"));
    }

    #[test]
    fn what_is_missing_or_wrong_is_named() {
        let err = |text: &str| parse(text, "openstack").unwrap_err().to_string();
        assert!(err("clouds: {other: {}}").contains("no cloud \"openstack\""));
        assert!(err("clouds: {other: {}}").contains("other"));
        assert!(err(": : :\n\t-").contains("not YAML"));
        assert!(
            err("clouds: {openstack: {auth: {username: u, password: p}}}").contains("auth_url")
        );
        assert!(
            err("clouds: {openstack: {auth: {auth_url: x, username: u}}}").contains("password")
        );
        let token = "clouds: {openstack: {auth_type: token, auth: {auth_url: x}}}";
        assert!(err(token).contains("auth_type token is not supported"));
        let bad =
            "clouds: {openstack: {interface: side, auth: {auth_url: x, username: u, password: p}}}";
        assert!(err(bad).contains("interface side"));
        let nameonly = "clouds: {openstack: {auth_type: v3applicationcredential, auth: {auth_url: x, application_credential_name: n, application_credential_secret: s}}}";
        assert!(err(nameonly).contains("application_credential_id"));
        // Not a panic on anything.
        for junk in ["", "clouds:", "clouds: 3", "- a", "clouds: {openstack: 3}"] {
            let _ = parse(junk, "openstack");
        }
    }

    #[test]
    fn interface_names_of_every_spelling_read() {
        for (v, want) in [
            ("publicURL", Interface::Public),
            ("internalURL", Interface::Internal),
            ("Admin", Interface::Admin),
            ("", Interface::Public),
        ] {
            assert_eq!(interface(Some(v)), Ok(want), "{v}");
        }
        for v in ["no", "false", "0", "Off"] {
            assert!(is_false(&serde_json::Value::String(v.into())), "{v}");
        }
        assert!(!is_false(&serde_json::Value::Bool(true)));
    }

    #[test]
    fn every_ca_source_is_trusted_and_a_missing_one_is_named() {
        let cloud = parse(INSTALLER, "openstack").unwrap();
        let none = |_: &str| None;
        // The installer's layout: the path is the masters', the ConfigMap has the bundle.
        let found = ca_sources(&cloud, None, Some("PEM-CM"), none).unwrap();
        assert_eq!(found.bundles.len(), 1);
        assert!(found.bundles[0].0.contains("cloud-provider-config"));
        // The cloud-credential-operator's or HyperShift's: the Secret's cacert key.
        let found = ca_sources(&cloud, Some(b"PEM-S"), None, none).unwrap();
        assert!(found.bundles[0].0.contains("key cacert"));
        // A path the pod has (mounted by the administrator).
        let file = |p: &str| p.ends_with("ca-bundle.pem").then(|| b"PEM-F".to_vec());
        let found = ca_sources(&cloud, Some(b"PEM-S"), Some("PEM-CM"), file).unwrap();
        assert_eq!(found.bundles.len(), 3);
        // A CA named and found nowhere: an error naming the three places.
        let e = ca_sources(&cloud, Some(b"  \n"), None, none).unwrap_err();
        for part in [
            "ca-bundle.pem",
            "openstack-cloud-credentials",
            "cloud-provider-config",
        ] {
            assert!(e.contains(part), "{e}");
        }
        // No CA named: the system's roots are enough, the ConfigMap's added when there.
        let plain = Cloud {
            cacert: None,
            ..cloud
        };
        assert!(
            ca_sources(&plain, None, None, none)
                .unwrap()
                .bundles
                .is_empty()
        );
    }
}
