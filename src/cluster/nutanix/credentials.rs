//! What the machine API reads to reach Prism Central, read the same way: the user and
//! password from its credentials Secret's `credentials` key (a JSON list, of which the
//! `basic_auth` entry counts), and the address and port from Infrastructure `cluster`.

use serde::Deserialize;
use serde_json::Value;

/// Where the installer puts the machine API's credentials, and the key it writes.
pub const SECRET_NAMESPACE: &str = "openshift-machine-api";
pub const SECRET_NAME: &str = "nutanix-credentials";
pub const SECRET_KEY: &str = "credentials";

/// Prism Central's user and password.
#[derive(Clone, PartialEq, Eq)]
pub struct BasicAuth {
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for BasicAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BasicAuth")
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
struct Credential {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    data: Value,
}

/// The Prism Central user and password of the Secret's `credentials`, as the machine API
/// reads them: the first entry decides, and only `basic_auth` with both set is usable.
pub fn parse(credentials: &str) -> Result<BasicAuth, String> {
    let list: Vec<Credential> = serde_json::from_str(credentials)
        .map_err(|e| format!("its {SECRET_KEY} is not a JSON list of credentials: {e}"))?;
    let first = list
        .first()
        .ok_or_else(|| format!("its {SECRET_KEY} lists no credentials"))?;
    if first.kind != "basic_auth" {
        return Err(format!(
            "credentials of type {:?}: only basic_auth is read, as the machine API reads it",
            first.kind
        ));
    }
    let text = |key: &str| {
        first.data["prismCentral"][key]
            .as_str()
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
    };
    match (text("username"), text("password")) {
        (Some(username), Some(password)) => Ok(BasicAuth { username, password }),
        _ => Err("its basic_auth has no prismCentral username and password".into()),
    }
}

/// `https://<address>:<port>` of Infrastructure `cluster`'s
/// `spec.platformSpec.nutanix.prismCentral`.
pub fn endpoint(infrastructure: &Value) -> Result<String, String> {
    let pc = infrastructure
        .pointer("/spec/platformSpec/nutanix/prismCentral")
        .ok_or("Infrastructure cluster has no spec.platformSpec.nutanix.prismCentral")?;
    let address = pc
        .get("address")
        .and_then(Value::as_str)
        .filter(|a| !a.is_empty())
        .ok_or("its address is not set")?;
    let port = pc
        .get("port")
        .and_then(Value::as_u64)
        .filter(|p| (1..=65535).contains(p))
        .ok_or("its port is not between 1 and 65535")?;
    let host = match address.contains(':') && !address.starts_with('[') {
        true => format!("[{address}]"),
        false => address.to_owned(),
    };
    Ok(format!("https://{host}:{port}"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_machine_apis_credentials_are_read_as_it_reads_them() {
        // As the installer writes them, and as Red Hat's procedure shows them.
        let text = r#"[{"type":"basic_auth","data":{"prismCentral":{"username":"admin","password":"s3cret"},"prismElements":null}}]"#;
        let auth = parse(text).unwrap();
        assert_eq!(
            (auth.username.as_str(), auth.password.as_str()),
            ("admin", "s3cret")
        );
        assert!(!format!("{auth:?}").contains("s3cret"));
        for (bad, says) in [
            ("{}", "not a JSON list"),
            ("[]", "lists no credentials"),
            (r#"[{"type":"oauth","data":{}}]"#, "only basic_auth"),
            (
                r#"[{"type":"basic_auth","data":{"prismCentral":{"username":"admin","password":""}}}]"#,
                "no prismCentral username and password",
            ),
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn prism_centrals_endpoint_is_infrastructures() {
        let infra =
            |pc: Value| json!({"spec": {"platformSpec": {"nutanix": {"prismCentral": pc}}}});
        assert_eq!(
            endpoint(&infra(json!({"address": "pc.example.com", "port": 9440}))),
            Ok("https://pc.example.com:9440".into())
        );
        assert_eq!(
            endpoint(&infra(json!({"address": "fd00::5", "port": 9440}))),
            Ok("https://[fd00::5]:9440".into())
        );
        assert!(endpoint(&infra(json!({"address": "", "port": 9440}))).is_err());
        assert!(endpoint(&infra(json!({"address": "pc", "port": 0}))).is_err());
        assert!(endpoint(&json!({"spec": {}})).is_err());
    }
}
