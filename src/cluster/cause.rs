//! What an error of the importers (vSphere, OpenStack, Nutanix) keeps of its cause: the
//! underlying error itself where there is one, so its own sources stay reachable, else what
//! was wrong, in words.

use std::error::Error;
use std::sync::Arc;

/// Shared, so that an error that is remembered (a bad OVA) can be cloned.
pub type Cause = Arc<dyn Error + Send + Sync>;

pub fn cause(e: impl Into<Box<dyn Error + Send + Sync>>) -> Cause {
    Arc::from(e.into())
}

/// An error with its sources, for a message: hyper's own message alone says only
/// "client error".
pub fn chain(e: &(dyn Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}
