//! A spec-2 stub Ignition rewritten as spec 3 (behaviour §4 rule 10, `--upgrade-stub-ignition`),
//! as the MCO's `ParseAndConvertConfig` does with Ignition's own spec-2 to spec-3 rules, for
//! what a stub holds: the config it merges (`ignition.config.append` becomes `merge`, a
//! `replace` stays), the CAs it trusts, the timeouts, and each reference's verification hash
//! and HTTP headers, all carried over as they are. A stub that holds anything else (files,
//! units, users, networkd) is not translated: a person must look at it.

use serde_json::{Map, Value, json};

/// The spec the MCO writes (`ign3types.MaxVersion`), and so do we.
pub(crate) const UPGRADED_VERSION: &str = "3.5.0";

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
    #[error(
        "it is not written as the installer writes a spec-2.2 stub, the only one the admission policy lets the webhook upgrade: translate it by hand"
    )]
    NotInstallerShape,
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

/// The installer's spec-2 stub is `SPEC2_HEAD` + X + `SPEC2_TAIL`, X running from its config
/// source to its version (the sources, the CA, the verifications and the timeouts).
const SPEC2_HEAD: &[u8] = br#"{"ignition":{"config":{"append":[{"source""#;
const SPEC2_TAIL: &[u8] = br#"2.2.0"},"networkd":{},"passwd":{},"storage":{},"systemd":{}}"#;
/// Its spec-3 stub is `SPEC3_HEAD` + X + `SPEC3_TAIL`: the head padded by a blank to the
/// length of `SPEC2_HEAD`, so that X encodes the same in both Secrets' base64. That is what
/// the admission policy `bootimage-webhook-stub-upgrades-only` compares, having no JSON
/// (nor base64) decoder.
const SPEC3_HEAD: &[u8] = br#"{"ignition":{"config":{"merge": [{"source""#;
const SPEC3_TAIL: &[u8] = br#"3.5.0"}}"#;

/// [`upgrade`] of the installer's spec-2 stub, written as `SPEC3_HEAD` + X + `SPEC3_TAIL`:
/// the only stub upgrade the admission policy lets the webhook write. Any other stub is a
/// person's to translate.
pub fn upgrade_installer_stub(user_data: &[u8]) -> Result<Vec<u8>, StubError> {
    let upgraded = upgrade(user_data)?;
    let carried = user_data
        .strip_prefix(SPEC2_HEAD)
        .and_then(|rest| rest.strip_suffix(SPEC2_TAIL))
        .ok_or(StubError::NotInstallerShape)?;
    let written = [SPEC3_HEAD, carried, SPEC3_TAIL].concat();
    let same = |a: &[u8], b: &[u8]| {
        serde_json::from_slice::<Value>(a).ok() == serde_json::from_slice::<Value>(b).ok()
    };
    if same(&written, &upgraded) {
        Ok(written)
    } else {
        Err(StubError::NotInstallerShape)
    }
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
    fn the_installers_stub_is_written_with_its_bytes_carried_over() {
        let written = upgrade_installer_stub(SPEC2.as_bytes()).unwrap();
        let parsed = |b: &[u8]| serde_json::from_slice::<Value>(b).unwrap();
        assert_eq!(
            parsed(&written),
            parsed(&upgrade(SPEC2.as_bytes()).unwrap())
        );
        let middle = &SPEC2.as_bytes()[SPEC2_HEAD.len()..SPEC2.len() - SPEC2_TAIL.len()];
        assert_eq!(written, [SPEC3_HEAD, middle, SPEC3_TAIL].concat());
        assert_eq!(SPEC2_HEAD.len(), SPEC3_HEAD.len());
        let hashed = SPEC2.replacen(
            r#""verification":{}"#,
            r#""verification":{"hash":"sha512-00"}"#,
            1,
        );
        let written = upgrade_installer_stub(hashed.as_bytes()).unwrap();
        assert!(String::from_utf8(written).unwrap().contains("sha512-00"));
    }

    /// The admission policy compares the stubs as base64 (it has no decoder): its constants
    /// are these heads, and each tail after the last zero, one or two bytes of X (which
    /// ends with `"version":"`), encoded.
    #[test]
    fn the_admission_policy_holds_these_bytes() {
        use base64::Engine;
        let policy = include_str!("../../manifests/base/validatingadmissionpolicy.yaml");
        let b64 =
            |parts: &[&[u8]]| base64::engine::general_purpose::STANDARD.encode(parts.concat());
        let mut want = vec![b64(&[SPEC2_HEAD]), b64(&[SPEC3_HEAD])];
        for last in [&b""[..], b"\"", b":\""] {
            want.push(b64(&[last, SPEC2_TAIL]));
            want.push(b64(&[last, SPEC3_TAIL]));
        }
        for w in want {
            assert!(policy.contains(&format!("'{w}'")), "the policy lacks {w}");
        }
        assert_eq!(SPEC2_HEAD.len() % 3, 0);
        let (head, tail) = (SPEC2_HEAD.len(), SPEC2_TAIL.len());
        assert!(policy.contains(&format!("- {head} - {tail}\n")), "lengths");
        let encoded_head = head / 3 * 4;
        assert!(policy.contains(&format!("substring({encoded_head}, {encoded_head} + 4 *")));
    }

    #[test]
    fn a_stub_written_otherwise_is_left_to_a_person() {
        let reformatted =
            serde_json::to_string_pretty(&serde_json::from_str::<Value>(SPEC2).unwrap()).unwrap();
        let older = SPEC2.replace(r#""networkd":{},"#, "");
        let spec21 = SPEC2.replace("2.2.0", "2.1.0");
        for stub in [reformatted, older, spec21] {
            assert_eq!(
                upgrade_installer_stub(stub.as_bytes()),
                Err(StubError::NotInstallerShape),
                "{stub}"
            );
        }
        // Not a stub at all: the translation's own reason.
        assert!(matches!(
            upgrade_installer_stub(br#"{"ignition":{"version":"3.2.0"}}"#),
            Err(StubError::NotSpec2(_))
        ));
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
