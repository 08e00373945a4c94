//! A spec-2 stub Ignition rewritten as spec 3 (behaviour §4 rule 10, `--upgrade-stub-ignition`),
//! as the MCO's `ParseAndConvertConfig` does with Ignition's own spec-2 to spec-3 rules, for
//! what a stub holds: the config it merges (`ignition.config.append` becomes `merge`, a
//! `replace` stays), the CAs it trusts, the timeouts, and each reference's verification hash
//! and HTTP headers, all carried over as they are. A stub that holds anything else (files,
//! units, users, networkd) is not translated: a person must look at it.

use serde_json::{Map, Value, json};

/// The spec the MCO writes (`ign3types.MaxVersion`), and so do we.
pub const UPGRADED_VERSION: &str = "3.5.0";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StubError {
    #[error("userData is not JSON: {0}")]
    NotJson(String),
    #[error("userData is not a JSON object")]
    NotObject,
    #[error("ignition.version {0:?} is not spec 2")]
    NotSpec2(String),
    #[error("{0} is not empty: a stub holds only its ignition section, translate it by hand")]
    MoreThanAStub(String),
    #[error("ignition{0}: {1}")]
    Field(String, &'static str),
}

/// The spec-3 stub for `user_data`, written compactly.
pub fn upgrade(user_data: &[u8]) -> Result<Vec<u8>, StubError> {
    let config: Value =
        serde_json::from_slice(user_data).map_err(|e| StubError::NotJson(e.to_string()))?;
    let config = config.as_object().ok_or(StubError::NotObject)?;
    let ignition = config
        .get("ignition")
        .and_then(Value::as_object)
        .ok_or_else(|| field("", "no ignition object"))?;
    let version = ignition
        .get("version")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !version.starts_with("2.") {
        return Err(StubError::NotSpec2(version.to_owned()));
    }
    for (key, value) in config {
        if key != "ignition" && !is_empty(value) {
            return Err(StubError::MoreThanAStub(key.clone()));
        }
    }
    let mut out = Map::new();
    if let Some(refs) = ignition.get("config") {
        out.insert("config".into(), config_refs(refs)?);
    }
    if let Some(security) = ignition.get("security") {
        out.insert("security".into(), security_section(security)?);
    }
    if let Some(timeouts) = ignition.get("timeouts") {
        let t = timeouts
            .as_object()
            .ok_or_else(|| field("timeouts", "not an object"))?;
        out.insert("timeouts".into(), Value::Object(t.clone()));
    }
    out.insert("version".into(), json!(UPGRADED_VERSION));
    // Writing a Value cannot fail.
    Ok(serde_json::to_vec(&json!({ "ignition": out })).unwrap_or_default())
}

/// A problem at `ignition.<path>` (`""`: the section itself).
fn field(path: &str, what: &'static str) -> StubError {
    let at = if path.is_empty() {
        String::new()
    } else {
        format!(".{path}")
    };
    StubError::Field(at, what)
}

/// Absent, null, or an object (or array) with nothing but empty things in it.
fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Object(m) => m.values().all(is_empty),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

/// `ignition.config`: `append` becomes `merge`, `replace` stays.
fn config_refs(refs: &Value) -> Result<Value, StubError> {
    let refs = refs
        .as_object()
        .ok_or_else(|| field("config", "not an object"))?;
    let mut out = Map::new();
    for (key, value) in refs {
        match key.as_str() {
            "append" => {
                let list = value
                    .as_array()
                    .ok_or_else(|| field("config.append", "not an array"))?;
                let merged = list
                    .iter()
                    .map(|r| resource(r, "config.append[]"))
                    .collect::<Result<Vec<_>, _>>()?;
                out.insert("merge".into(), Value::Array(merged));
            }
            "replace" if value.is_null() => {}
            "replace" => {
                out.insert("replace".into(), resource(value, "config.replace")?);
            }
            _ => return Err(field("config", "holds a key spec 2 does not have")),
        }
    }
    Ok(Value::Object(out))
}

/// `ignition.security.tls.certificateAuthorities`, each carried over.
fn security_section(security: &Value) -> Result<Value, StubError> {
    let security = security
        .as_object()
        .ok_or_else(|| field("security", "not an object"))?;
    let mut out = Map::new();
    for (key, value) in security {
        if key != "tls" {
            return Err(field("security", "holds a key spec 2 does not have"));
        }
        let tls = value
            .as_object()
            .ok_or_else(|| field("security.tls", "not an object"))?;
        let mut tls_out = Map::new();
        for (key, value) in tls {
            if key != "certificateAuthorities" {
                return Err(field("security.tls", "holds a key spec 2 does not have"));
            }
            let cas = value
                .as_array()
                .ok_or_else(|| field("security.tls.certificateAuthorities", "not an array"))?
                .iter()
                .map(|ca| resource(ca, "security.tls.certificateAuthorities[]"))
                .collect::<Result<Vec<_>, _>>()?;
            tls_out.insert(key.clone(), Value::Array(cas));
        }
        out.insert("tls".into(), Value::Object(tls_out));
    }
    Ok(Value::Object(out))
}

/// A config or CA reference: its source, verification and headers, exactly; nothing else.
fn resource(r: &Value, path: &str) -> Result<Value, StubError> {
    let r = r.as_object().ok_or_else(|| field(path, "not an object"))?;
    let mut out = Map::new();
    for (key, value) in r {
        match key.as_str() {
            "source" if value.is_string() => {}
            "source" => return Err(field(path, "source is not a string")),
            "verification" | "httpHeaders" => {}
            _ => return Err(field(path, "holds a key spec 2 does not have")),
        }
        out.insert(key.clone(), value.clone());
    }
    if !out.contains_key("source") {
        return Err(field(path, "has no source"));
    }
    Ok(Value::Object(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 4.5-era installer stub (its CA shortened).
    const SPEC2: &str = r#"{"ignition":{"config":{"append":[{"source":"https://api-int.c1.example.com:22623/config/worker","verification":{}}]},"security":{"tls":{"certificateAuthorities":[{"source":"data:text/plain;charset=utf-8;base64,LS0tLS1CRUdJTg==","verification":{}}]}},"timeouts":{},"version":"2.2.0"},"networkd":{},"passwd":{},"storage":{},"systemd":{}}"#;

    #[test]
    fn the_installer_stub_keeps_its_source_and_ca() {
        let out: Value = serde_json::from_slice(&upgrade(SPEC2.as_bytes()).unwrap()).unwrap();
        assert_eq!(
            out,
            json!({"ignition": {
                "config": {"merge": [{"source": "https://api-int.c1.example.com:22623/config/worker", "verification": {}}]},
                "security": {"tls": {"certificateAuthorities": [{"source": "data:text/plain;charset=utf-8;base64,LS0tLS1CRUdJTg==", "verification": {}}]}},
                "timeouts": {},
                "version": "3.5.0"}})
        );
    }

    #[test]
    fn hashes_headers_replace_and_timeouts_are_carried_over() {
        let stub = json!({"ignition": {"version": "2.3.0",
            "config": {"append": [{"source": "https://a/config/worker", "verification": {"hash": "sha512-00"},
                                   "httpHeaders": [{"name": "X-Token", "value": "t"}]}],
                       "replace": {"source": "https://b/config/worker"}},
            "timeouts": {"httpResponseHeaders": 30, "httpTotal": 120}}});
        let out: Value =
            serde_json::from_slice(&upgrade(stub.to_string().as_bytes()).unwrap()).unwrap();
        let i = &out["ignition"];
        assert_eq!(i["config"]["merge"], stub["ignition"]["config"]["append"]);
        assert_eq!(
            i["config"]["replace"],
            stub["ignition"]["config"]["replace"]
        );
        assert_eq!(i["timeouts"], stub["ignition"]["timeouts"]);
        assert!(i["config"].get("append").is_none());
    }

    #[test]
    fn what_is_not_a_spec_2_stub_is_refused_with_why() {
        let refused = |s: &str| upgrade(s.as_bytes()).unwrap_err();
        assert!(matches!(refused("#cloud-config"), StubError::NotJson(_)));
        assert_eq!(refused("[]"), StubError::NotObject);
        assert_eq!(
            refused(r#"{"ignition":{"version":"3.2.0"}}"#),
            StubError::NotSpec2("3.2.0".into())
        );
        assert_eq!(
            refused(r#"{"ignition":{"version":"2.2.0"},"storage":{"files":[{"path":"/etc/x"}]}}"#),
            StubError::MoreThanAStub("storage".into())
        );
        assert!(matches!(
            refused(
                r#"{"ignition":{"version":"2.2.0","config":{"append":[{"verification":{}}]}}}"#
            ),
            StubError::Field(_, "has no source")
        ));
        assert!(matches!(
            refused(
                r#"{"ignition":{"version":"2.2.0","config":{"append":[{"source":"x","compression":"gzip"}]}}}"#
            ),
            StubError::Field(_, "holds a key spec 2 does not have")
        ));
    }
}
