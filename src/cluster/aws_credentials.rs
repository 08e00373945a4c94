//! Which AWS credentials EC2 is asked with. The project's own come first: the SDK's standard
//! chain (environment, `AWS_SHARED_CREDENTIALS_FILE` pointing at the Secret of the project's
//! CredentialsRequest, a profile). When they are absent and `--aws-machine-api-credentials`
//! is set, the machine API's Secret `openshift-machine-api/aws-cloud-credentials` (the one
//! the MCO uses) is read through the Kubernetes API, by name, each time a client may be
//! needed; a new `resourceVersion` (a rotation) makes a new client. Key values are never
//! logged, printed or kept beyond the client.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;

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
                "own (AWS SDK standard chain: environment, AWS_SHARED_CREDENTIALS_FILE, profile)",
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

/// What the machine API's Secret holds, in the form the SDK takes.
#[derive(Clone, PartialEq, Eq)]
pub enum SecretCredentials {
    /// `aws_access_key_id` and `aws_secret_access_key` (mint and passthrough modes).
    Static {
        access_key_id: String,
        secret_access_key: String,
    },
    /// `credentials`: an AWS shared-credentials file; on STS clusters a `role_arn` and a
    /// `web_identity_token_file` (STS web identity), read by the SDK's profile provider.
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

/// Whether this process has AWS credentials of its own: the SDK's standard environment
/// names some (variables, or a credentials or config file that exists). Without this the
/// SDK would also probe the instance metadata service: seconds of waiting on a laptop, and
/// in a pod the node's instance profile, which is not ours to use.
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
}
