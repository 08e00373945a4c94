//! YAML or JSON text read as JSON values: a ConfigMap file, `preview`'s MachineSets.

use serde_json::Value;

/// A document that is neither JSON nor YAML (JSON when it starts with `{`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DocumentError {
    #[error("invalid JSON: {0}")]
    Json(String),
    #[error("invalid YAML: {0}")]
    Yaml(String),
}

/// YAML or JSON text to a JSON value (JSON is read as JSON first: exact and faster).
pub fn parse_document(text: &str) -> Result<Value, DocumentError> {
    match serde_json::from_str(text) {
        Ok(v) => Ok(v),
        Err(json_err) if text.trim_start().starts_with('{') => {
            Err(DocumentError::Json(json_err.to_string()))
        }
        Err(_) => {
            serde_saphyr::from_str::<Value>(text).map_err(|e| DocumentError::Yaml(e.to_string()))
        }
    }
}

/// Every document of a YAML stream (`---` separated), or the one JSON document.
pub fn parse_documents(text: &str) -> Result<Vec<Value>, DocumentError> {
    match serde_json::from_str(text) {
        Ok(v) => Ok(vec![v]),
        Err(json_err) if text.trim_start().starts_with('{') => {
            Err(DocumentError::Json(json_err.to_string()))
        }
        Err(_) => serde_saphyr::from_str_multiple::<Value, Vec<Value>>(text)
            .map_err(|e| DocumentError::Yaml(e.to_string())),
    }
}
