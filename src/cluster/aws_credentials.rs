//! Which AWS credentials EC2 is asked with. The project's own come first: AWS's standard
//! chain ([`Provider::from_env`]: keys in the environment, a profile of the shared
//! credentials and config files (`AWS_SHARED_CREDENTIALS_FILE` pointing at the Secret of the
//! project's CredentialsRequest), a web identity the environment names). When they are
//! absent and `--aws-machine-api-credentials` is set, the machine API's Secret
//! `openshift-machine-api/aws-cloud-credentials` (the one the MCO uses) is read through the
//! Kubernetes API, by name, each time a client may be needed; a new `resourceVersion` (a
//! rotation) makes a new client. A role's credentials (STS web identity, `AssumeRole`) are
//! kept until shortly before they expire, then asked for again. Key values are never
//! logged, printed or kept beyond the client.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;

use crate::cluster::aws_profile::{self, FileKind, Profiles, Properties};
use crate::cluster::aws_query::{AwsHttps, Credentials, QueryError};

/// The machine API's AWS Secret (made by the cloud-credential-operator from the
/// machine-api-operator's CredentialsRequest; it includes `ec2:DescribeImages`).
pub const MACHINE_API_SECRET: &str = "aws-cloud-credentials";

/// Where the credentials in use come from, as the log and `status` say it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The SDK's standard chain: this process's environment and files.
    Own,
    /// The machine API's Secret, `namespace/name`.
    MachineApi(String),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Own => f.write_str(
                "own (AWS standard chain: environment, AWS_SHARED_CREDENTIALS_FILE, profile)",
            ),
            Source::MachineApi(at) => write!(f, "machine-api Secret {at}"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    #[error(
        "no credentials of our own, and the machine API's Secret {0} does not exist (on AWS the machine-api-operator's CredentialsRequest makes it)"
    )]
    NotFound(String),
    #[error(
        "no credentials of our own, and not allowed to get the machine API's Secret {0} (the component aws-machine-api-credentials grants that get): {1}"
    )]
    Forbidden(String, String),
    #[error("no credentials of our own, and reading the machine API's Secret {0} failed: {1}")]
    Kube(String, String),
    #[error(
        "the machine API's Secret {0} holds neither aws_access_key_id and aws_secret_access_key nor a credentials file"
    )]
    Empty(String),
}

/// What the machine API's Secret holds.
#[derive(Clone, PartialEq, Eq)]
pub enum SecretCredentials {
    /// `aws_access_key_id` and `aws_secret_access_key` (mint and passthrough modes).
    Static {
        access_key_id: String,
        secret_access_key: String,
    },
    /// `credentials`: an AWS shared-credentials file; on STS clusters a `role_arn` and a
    /// `web_identity_token_file` (STS web identity), read as its `default` profile.
    File(String),
}

/// Never the keys themselves.
impl fmt::Debug for SecretCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SecretCredentials::Static { .. } => f.write_str("Static(<redacted>)"),
            SecretCredentials::File(_) => f.write_str("File(<redacted>)"),
        }
    }
}

fn text(data: &BTreeMap<String, ByteString>, key: &str) -> Option<String> {
    data.get(key)
        .and_then(|v| std::str::from_utf8(&v.0).ok())
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
}

/// The credentials in a Secret's `data`: static keys when both are there, else the
/// `credentials` file, else none. Pure.
pub fn parse(data: &BTreeMap<String, ByteString>) -> Option<SecretCredentials> {
    match (
        text(data, "aws_access_key_id"),
        text(data, "aws_secret_access_key"),
    ) {
        (Some(access_key_id), Some(secret_access_key)) => Some(SecretCredentials::Static {
            access_key_id,
            secret_access_key,
        }),
        _ => text(data, "credentials").map(SecretCredentials::File),
    }
}

/// The machine API's Secret, read by name.
pub struct MachineApiSecret {
    pub api: Api<Secret>,
    pub namespace: String,
}

impl MachineApiSecret {
    pub fn new(client: kube::Client, namespace: &str) -> MachineApiSecret {
        MachineApiSecret {
            api: Api::namespaced(client, namespace),
            namespace: namespace.to_owned(),
        }
    }

    pub fn source(&self) -> Source {
        Source::MachineApi(format!("{}/{MACHINE_API_SECRET}", self.namespace))
    }

    /// One `get` by name: its credentials and its `resourceVersion` (which changes when the
    /// cloud-credential-operator rotates it).
    pub async fn read(&self) -> Result<(SecretCredentials, String), CredentialsError> {
        let at = format!("{}/{MACHINE_API_SECRET}", self.namespace);
        let secret = match self.api.get(MACHINE_API_SECRET).await {
            Ok(s) => s,
            Err(kube::Error::Api(s)) if s.code == 404 => {
                return Err(CredentialsError::NotFound(at));
            }
            Err(kube::Error::Api(s)) if s.code == 403 => {
                return Err(CredentialsError::Forbidden(at, s.message));
            }
            Err(e) => return Err(CredentialsError::Kube(at, e.to_string())),
        };
        let version = secret.metadata.resource_version.unwrap_or_default();
        let creds = secret
            .data
            .as_ref()
            .and_then(parse)
            .ok_or(CredentialsError::Empty(at))?;
        Ok((creds, version))
    }
}

/// Whether this process has AWS credentials of its own: the standard environment names
/// some (variables, or a credentials or config file that exists). The chain never asks the
/// instance metadata service: in a pod that would be the node's instance profile, which is
/// not ours to use.
pub fn own_configured() -> bool {
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let named = [
        "AWS_ACCESS_KEY_ID",
        "AWS_PROFILE",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
    ]
    .into_iter()
    .any(|k| env(k).is_some());
    // A file named by the environment counts only when it is there: the Deployment always
    // names the mount of the CredentialsRequest's Secret, which is optional.
    let file = |var: &str, default: &str| {
        env(var)
            .map(PathBuf::from)
            .or_else(|| home.as_ref().map(|h| h.join(default)))
            .is_some_and(|p| p.is_file())
    };
    named
        || file("AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials")
        || file("AWS_CONFIG_FILE", ".aws/config")
}

/// Why no credentials could be had.
#[derive(Debug, thiserror::Error)]
pub enum ChainError {
    #[error(
        "no credentials in the environment (AWS_ACCESS_KEY_ID, AWS_PROFILE, AWS_WEB_IDENTITY_TOKEN_FILE, or a credentials or config file)"
    )]
    Nothing,
    #[error("the AWS profile {profile}: {why}")]
    Profile { profile: String, why: String },
    #[error("reading {path}: {cause}")]
    File {
        path: String,
        #[source]
        cause: std::io::Error,
    },
    #[error("reading the web identity token file {path}: {cause}")]
    Token {
        path: String,
        #[source]
        cause: std::io::Error,
    },
    #[error("STS, for the role {role}: {cause}")]
    Sts {
        role: String,
        #[source]
        cause: QueryError,
    },
}

/// Where credentials come from, once the chain has picked.
#[derive(Clone, PartialEq, Eq)]
pub enum Provider {
    /// Keys as given (the environment's, a profile's, the machine API's Secret's).
    Keys(Credentials),
    /// STS `AssumeRoleWithWebIdentity` with the token in `token_file`, read again each time
    /// (the kubelet rotates a projected token).
    WebIdentity {
        role_arn: String,
        token_file: PathBuf,
        session_name: Option<String>,
    },
    /// STS `AssumeRole` with the credentials of `source` (a profile's `source_profile` or
    /// `credential_source = Environment`).
    AssumeRole {
        role_arn: String,
        session_name: Option<String>,
        external_id: Option<String>,
        source: Box<Provider>,
    },
}

/// Never the keys themselves.
impl fmt::Debug for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Provider::Keys(_) => f.write_str("Keys(<redacted>)"),
            Provider::WebIdentity { role_arn, .. } => write!(f, "WebIdentity({role_arn})"),
            Provider::AssumeRole {
                role_arn, source, ..
            } => write!(f, "AssumeRole({role_arn}, from {source:?})"),
        }
    }
}

fn env(key: &str) -> Option<String> {
    std::env::var(key).ok().filter(|v| !v.trim().is_empty())
}

/// Keys in the environment, if both are there.
fn env_keys() -> Option<Credentials> {
    Some(Credentials {
        access_key_id: env("AWS_ACCESS_KEY_ID")?,
        secret_access_key: env("AWS_SECRET_ACCESS_KEY")?,
        session_token: env("AWS_SESSION_TOKEN"),
        expires: None,
    })
}

/// A shared file named by `var`, else `~/<default>`: its profiles (none if it is absent).
fn read_profiles(var: &str, default: &str, kind: FileKind) -> Result<Profiles, ChainError> {
    let path = match env(var) {
        Some(p) => PathBuf::from(p),
        None => match std::env::var_os("HOME") {
            Some(home) => Path::new(&home).join(default),
            None => return Ok(Profiles::new()),
        },
    };
    match std::fs::read_to_string(&path) {
        Ok(text) => Ok(aws_profile::parse(&text, kind)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Profiles::new()),
        Err(cause) => Err(ChainError::File {
            path: path.display().to_string(),
            cause,
        }),
    }
}

/// The profiles of this process's shared config and credentials files.
fn env_profiles() -> Result<Profiles, ChainError> {
    let config = read_profiles("AWS_CONFIG_FILE", ".aws/config", FileKind::Config)?;
    let credentials = read_profiles(
        "AWS_SHARED_CREDENTIALS_FILE",
        ".aws/credentials",
        FileKind::Credentials,
    )?;
    Ok(aws_profile::merge(config, credentials))
}

impl Provider {
    /// AWS's standard chain, in its order: keys in the environment
    /// (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`); the profile
    /// `AWS_PROFILE` names (else `default`) of the shared credentials and config files; a
    /// web identity (`AWS_WEB_IDENTITY_TOKEN_FILE`, `AWS_ROLE_ARN`,
    /// `AWS_ROLE_SESSION_NAME`). Not the container or instance metadata endpoints
    /// ([`own_configured`] says why).
    pub fn from_env() -> Result<Provider, ChainError> {
        if let Some(keys) = env_keys() {
            return Ok(Provider::Keys(keys));
        }
        let profiles = env_profiles()?;
        let named = env("AWS_PROFILE");
        let name = named.clone().unwrap_or_else(|| "default".to_owned());
        if profiles.contains_key(&name) {
            return resolve(&profiles, &name, &mut Vec::new());
        }
        if named.is_some() {
            return Err(ChainError::Profile {
                profile: name,
                why: "not in the shared credentials or config file".into(),
            });
        }
        match (env("AWS_WEB_IDENTITY_TOKEN_FILE"), env("AWS_ROLE_ARN")) {
            (Some(token_file), Some(role_arn)) => Ok(Provider::WebIdentity {
                role_arn,
                token_file: PathBuf::from(token_file),
                session_name: env("AWS_ROLE_SESSION_NAME"),
            }),
            _ => Err(ChainError::Nothing),
        }
    }

    /// The `default` profile of a shared credentials file's `contents` (the machine API's
    /// Secret), nothing else of this process's.
    pub fn from_file(contents: &str) -> Result<Provider, ChainError> {
        let profiles = aws_profile::parse(contents, FileKind::Credentials);
        resolve(&profiles, "default", &mut Vec::new())
    }
}

/// The provider profile `name` describes. `seen`: the profiles on the way here (a
/// `source_profile` cycle is an error, not a hang).
fn resolve(
    profiles: &Profiles,
    name: &str,
    seen: &mut Vec<String>,
) -> Result<Provider, ChainError> {
    let error = |why: String| ChainError::Profile {
        profile: name.to_owned(),
        why,
    };
    let profile = profiles
        .get(name)
        .ok_or_else(|| error("not in the shared credentials or config file".into()))?;
    let get = |key: &str| profile.get(key).map(|v| v.trim()).filter(|v| !v.is_empty());
    seen.push(name.to_owned());
    let Some(role_arn) = get("role_arn") else {
        return profile_keys(profile).map(Provider::Keys).ok_or_else(|| {
            error(match () {
                _ if get("credential_process").is_some() => {
                    "credential_process is not supported: a configuration file cannot make this process run a program".into()
                }
                _ if profile.keys().any(|k| k.starts_with("sso_")) => {
                    "IAM Identity Center (sso_*) profiles are not supported".into()
                }
                _ => "neither aws_access_key_id and aws_secret_access_key nor role_arn".into(),
            })
        });
    };
    let session_name = get("role_session_name").map(str::to_owned);
    if let Some(token_file) = get("web_identity_token_file") {
        return Ok(Provider::WebIdentity {
            role_arn: role_arn.to_owned(),
            token_file: PathBuf::from(token_file),
            session_name,
        });
    }
    let source = match (get("source_profile"), get("credential_source")) {
        // A profile may name itself as the source of its own keys.
        (Some(source), _) if source == name => profile_keys(profile)
            .map(Provider::Keys)
            .ok_or_else(|| error("its source_profile is itself, and it has no keys".into()))?,
        (Some(source), _) if seen.iter().any(|s| s == source) => {
            return Err(error(format!(
                "source_profile {source} leads back to itself"
            )));
        }
        (Some(source), _) => resolve(profiles, source, seen)?,
        (None, Some("Environment")) => env_keys().map(Provider::Keys).ok_or_else(|| {
            error("credential_source Environment, but no keys in the environment".into())
        })?,
        (None, Some(other)) => {
            return Err(error(format!(
                "credential_source {other} is not supported (Environment is)"
            )));
        }
        (None, None) => {
            return Err(error(
                "role_arn without source_profile, credential_source or web_identity_token_file"
                    .into(),
            ));
        }
    };
    Ok(Provider::AssumeRole {
        role_arn: role_arn.to_owned(),
        session_name,
        external_id: get("external_id").map(str::to_owned),
        source: Box::new(source),
    })
}

fn profile_keys(profile: &Properties) -> Option<Credentials> {
    let get = |key: &str| {
        profile
            .get(key)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    };
    Some(Credentials {
        access_key_id: get("aws_access_key_id")?,
        secret_access_key: get("aws_secret_access_key")?,
        session_token: get("aws_session_token"),
        expires: None,
    })
}

/// The region STS is asked in when none is given: the environment's, else the profile's.
pub fn env_region() -> Option<String> {
    env("AWS_REGION")
        .or_else(|| env("AWS_DEFAULT_REGION"))
        .or_else(|| {
            let profiles = env_profiles().ok()?;
            let name = env("AWS_PROFILE").unwrap_or_else(|| "default".to_owned());
            profiles.get(&name)?.get("region").cloned()
        })
}

/// A role's credentials are asked for again this long before they expire.
const REFRESH_BEFORE: Duration = Duration::from_secs(300);

/// A provider and the credentials it last gave, asked again when they are about to expire.
pub struct Cached {
    provider: Provider,
    /// Where STS is asked (its global endpoint when `None`).
    region: Option<String>,
    held: tokio::sync::Mutex<Option<Credentials>>,
}

impl Cached {
    pub fn new(provider: Provider, region: Option<String>) -> Cached {
        Cached {
            provider,
            region,
            held: tokio::sync::Mutex::new(None),
        }
    }

    /// Credentials valid for a while yet.
    pub async fn get(&self, https: &AwsHttps) -> Result<Credentials, ChainError> {
        let mut held = self.held.lock().await;
        let fresh = |c: &Credentials| {
            c.expires
                .is_none_or(|at| at > SystemTime::now() + REFRESH_BEFORE)
        };
        if let Some(c) = held.as_ref().filter(|c| fresh(c)) {
            return Ok(c.clone());
        }
        let got = fetch(&self.provider, https, self.region.as_deref()).await?;
        *held = Some(got.clone());
        Ok(got)
    }
}

/// What `provider` gives now (STS asked for a role's).
async fn fetch(
    provider: &Provider,
    https: &AwsHttps,
    region: Option<&str>,
) -> Result<Credentials, ChainError> {
    let session = |given: &Option<String>| {
        given.clone().unwrap_or_else(|| {
            let now = SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap_or_default();
            format!("bootimage-webhook-{}", now.as_secs())
        })
    };
    match provider {
        Provider::Keys(keys) => Ok(keys.clone()),
        Provider::WebIdentity {
            role_arn,
            token_file,
            session_name,
        } => {
            let token = std::fs::read_to_string(token_file).map_err(|cause| ChainError::Token {
                path: token_file.display().to_string(),
                cause,
            })?;
            https
                .assume_role_with_web_identity(
                    region,
                    role_arn,
                    &session(session_name),
                    token.trim(),
                )
                .await
                .map_err(|cause| ChainError::Sts {
                    role: role_arn.clone(),
                    cause,
                })
        }
        Provider::AssumeRole {
            role_arn,
            session_name,
            external_id,
            source,
        } => {
            let source = Box::pin(fetch(source, https, region)).await?;
            https
                .assume_role(
                    region,
                    &source,
                    role_arn,
                    &session(session_name),
                    external_id.as_deref(),
                )
                .await
                .map_err(|cause| ChainError::Sts {
                    role: role_arn.clone(),
                    cause,
                })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, ByteString> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
            .collect()
    }

    #[test]
    fn static_keys_win_over_the_file() {
        let d = data(&[
            ("aws_access_key_id", "AKIDEXAMPLE\n"),
            ("aws_secret_access_key", "secret"),
            ("credentials", "[default]\naws_access_key_id = x\n"),
        ]);
        assert_eq!(
            parse(&d),
            Some(SecretCredentials::Static {
                access_key_id: "AKIDEXAMPLE".into(),
                secret_access_key: "secret".into()
            })
        );
    }

    #[test]
    fn the_sts_form_is_the_credentials_file() {
        let file = "[default]\nrole_arn = arn:aws:iam::123456789012:role/x\nweb_identity_token_file = /var/run/secrets/openshift/serviceaccount/token\n";
        let d = data(&[("credentials", file)]);
        assert_eq!(parse(&d), Some(SecretCredentials::File(file.trim().into())));
        // One static key alone is not enough: the file is used.
        let d = data(&[("aws_access_key_id", "AKID"), ("credentials", file)]);
        assert!(matches!(parse(&d), Some(SecretCredentials::File(_))));
    }

    #[test]
    fn nothing_usable_is_none_and_never_panics() {
        for d in [
            data(&[]),
            data(&[("aws_access_key_id", "AKID")]),
            data(&[("aws_access_key_id", " "), ("aws_secret_access_key", "\n")]),
            data(&[("credentials", "")]),
        ] {
            assert_eq!(parse(&d), None, "{d:?}");
        }
        let mut d = data(&[("aws_secret_access_key", "s")]);
        d.insert("aws_access_key_id".into(), ByteString(vec![0xff, 0xfe]));
        assert_eq!(parse(&d), None);
    }

    #[test]
    fn debug_and_display_never_show_the_keys() {
        let c = SecretCredentials::Static {
            access_key_id: "AKIDEXAMPLE".into(),
            secret_access_key: "wJalrXUtnFEMI".into(),
        };
        let shown = format!("{c:?}");
        assert!(
            !shown.contains("AKIDEXAMPLE") && !shown.contains("wJalr"),
            "{shown}"
        );
        let f = SecretCredentials::File("role_arn = arn:aws:iam::1:role/x".into());
        assert!(!format!("{f:?}").contains("arn:aws"));
        assert_eq!(
            Source::MachineApi("openshift-machine-api/aws-cloud-credentials".into()).to_string(),
            "machine-api Secret openshift-machine-api/aws-cloud-credentials"
        );
    }

    fn keys(id: &str, secret: &str, token: Option<&str>) -> Provider {
        Provider::Keys(Credentials {
            access_key_id: id.into(),
            secret_access_key: secret.into(),
            session_token: token.map(Into::into),
            expires: None,
        })
    }

    #[test]
    fn the_secret_s_file_gives_keys_or_a_web_identity() {
        let file = "[default]\naws_access_key_id = AKID\naws_secret_access_key = s\naws_session_token = t\n";
        assert_eq!(
            Provider::from_file(file).unwrap(),
            keys("AKID", "s", Some("t"))
        );
        // The cloud-credential-operator's STS form.
        let sts = "[default]\nsts_regional_endpoints = regional\nrole_arn = arn:aws:iam::1:role/m\n\
                   web_identity_token_file = /var/run/secrets/openshift/serviceaccount/token\n";
        assert_eq!(
            Provider::from_file(sts).unwrap(),
            Provider::WebIdentity {
                role_arn: "arn:aws:iam::1:role/m".into(),
                token_file: "/var/run/secrets/openshift/serviceaccount/token".into(),
                session_name: None,
            }
        );
        // Another profile than `default` is not read.
        let other = "[other]\naws_access_key_id = AKID\naws_secret_access_key = s\n";
        let err = Provider::from_file(other).unwrap_err().to_string();
        assert!(err.contains("profile default"), "{err}");
    }

    fn profiles(config: &str, credentials: &str) -> Profiles {
        aws_profile::merge(
            aws_profile::parse(config, FileKind::Config),
            aws_profile::parse(credentials, FileKind::Credentials),
        )
    }

    #[test]
    fn a_role_is_assumed_with_its_source_profile_s_credentials() {
        let p = profiles(
            "[profile admin]\nrole_arn = arn:aws:iam::1:role/admin\nsource_profile = base\n\
             external_id = ext\nrole_session_name = me\n\
             [profile chained]\nrole_arn = arn:aws:iam::1:role/second\nsource_profile = admin\n",
            "[base]\naws_access_key_id = AKID\naws_secret_access_key = s\n",
        );
        let admin = Provider::AssumeRole {
            role_arn: "arn:aws:iam::1:role/admin".into(),
            session_name: Some("me".into()),
            external_id: Some("ext".into()),
            source: Box::new(keys("AKID", "s", None)),
        };
        assert_eq!(resolve(&p, "admin", &mut Vec::new()).unwrap(), admin);
        let chained = resolve(&p, "chained", &mut Vec::new()).unwrap();
        assert!(
            matches!(&chained, Provider::AssumeRole { source, .. } if **source == admin),
            "{chained:?}"
        );
    }

    #[test]
    fn what_cannot_give_credentials_says_why() {
        let p = profiles(
            "[profile a]\nrole_arn = r\nsource_profile = b\n[profile b]\nrole_arn = r\nsource_profile = a\n\
             [profile proc]\ncredential_process = /bin/evil\n\
             [profile sso]\nsso_session = corp\nsso_account_id = 1\n\
             [profile imds]\nrole_arn = r\ncredential_source = Ec2InstanceMetadata\n\
             [profile bare]\nregion = us-east-1\n[profile orphan]\nrole_arn = r\n",
            "",
        );
        let why = |name: &str| resolve(&p, name, &mut Vec::new()).unwrap_err().to_string();
        assert!(why("a").contains("leads back to itself"), "{}", why("a"));
        assert!(why("proc").contains("credential_process is not supported"));
        assert!(why("sso").contains("sso_*"));
        assert!(why("imds").contains("Ec2InstanceMetadata is not supported"));
        assert!(why("bare").contains("neither aws_access_key_id"));
        assert!(why("orphan").contains("without source_profile"));
        assert!(why("missing").contains("not in the shared credentials"));
    }

    #[test]
    fn a_profile_may_name_itself_as_the_source_of_its_keys() {
        let p = profiles(
            "",
            "[self]\nrole_arn = r\nsource_profile = self\naws_access_key_id = AKID\naws_secret_access_key = s\n",
        );
        let got = resolve(&p, "self", &mut Vec::new()).unwrap();
        assert!(
            matches!(&got, Provider::AssumeRole { source, .. } if **source == keys("AKID", "s", None)),
            "{got:?}"
        );
        assert!(!format!("{got:?}").contains("AKID"));
    }
}
