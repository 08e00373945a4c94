//! The JSON Patch oracle the tests apply our patches with, chosen by the tier.
//!
//! In the end-to-end tier (the `e2e` feature, which `scripts/test` turns on) it is the
//! apiserver's own library, evanphx/json-patch (`evanphx.rs`, a Go harness built on first
//! use): what the apiserver will do with a patch is what it does. In the fast tier (plain
//! `cargo test`, the Rust toolchain alone) it is the `json-patch` crate, an RFC 6902
//! applier that needs nothing but the build. Both fail a test on a patch they refuse.

use serde_json::Value;

/// The library applying patches in this tier, for failure messages.
#[cfg(feature = "e2e")]
pub const NAME: &str = "evanphx/json-patch";
#[cfg(not(feature = "e2e"))]
pub const NAME: &str = "the json-patch crate";

/// Applies `patch` (a JSON Patch array) to `doc`; `Err` holds why the library refused it.
#[cfg(feature = "e2e")]
pub fn apply(doc: &Value, patch: &Value) -> Result<Value, String> {
    super::evanphx::apply(doc, patch)
}

/// Applies `patch` (a JSON Patch array) to `doc`; `Err` holds why the library refused it.
#[cfg(not(feature = "e2e"))]
pub fn apply(doc: &Value, patch: &Value) -> Result<Value, String> {
    let patch: json_patch::Patch =
        serde_json::from_value(patch.clone()).map_err(|e| format!("not a JSON Patch: {e}"))?;
    let mut out = doc.clone();
    json_patch::patch(&mut out, &patch).map_err(|e| e.to_string())?;
    Ok(out)
}
