//! What goes wrong in a failure domain, and the vCenter address errors name.

use crate::core::platforms::vsphere::FailureDomain;

use super::marker::Keep;
use super::ova::OvaError;
use super::tags;
use super::vim::VimError;
use crate::cluster::cause::Cause;

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("no vSphere credentials for {server}: {cause}")]
    Credentials {
        server: String,
        #[source]
        cause: Cause,
    },
    #[error("vCenter {server}: {error}")]
    Vim { server: String, error: VimError },
    #[error(transparent)]
    Ova(#[from] OvaError),
    #[error("failure domain {failure_domain}: {what} {path} not found in vCenter")]
    NotFound {
        failure_domain: String,
        what: &'static str,
        path: String,
    },
    #[error("failure domain {0} names no network")]
    NoNetwork(String),
    #[error(
        "failure domain {failure_domain}: vCenter does not say whether the VM {name} is a template (inaccessible, or not readable with these credentials)"
    )]
    Unreadable {
        failure_domain: String,
        name: String,
    },
    #[error(
        "failure domain {failure_domain}: a VM {name} of ours is not a template, and {why}: it is left alone"
    )]
    Busy {
        failure_domain: String,
        name: String,
        why: Keep,
    },
    #[error(
        "failure domain {failure_domain}: a VM {name} is where the template goes, and {why}: it is not provably this project's, so it is left alone and nothing is imported there"
    )]
    NotOurs {
        failure_domain: String,
        name: String,
        why: Keep,
    },
    #[error(
        "failure domain {failure_domain}: the import of {name} did not finish within {budget:?}: aborted"
    )]
    Deadline {
        failure_domain: String,
        name: String,
        budget: std::time::Duration,
    },
    #[error(transparent)]
    Tag(#[from] tags::TagError),
}

pub fn on(fd: &FailureDomain, error: VimError) -> ImportError {
    ImportError::Vim {
        server: address(fd),
        error,
    }
}

/// `host[:port]` of the failure domain's vCenter (`vcenters[].port` when not 443).
pub fn address(fd: &FailureDomain) -> String {
    let host = match fd.server.contains(':') {
        true => format!("[{}]", fd.server),
        false => fd.server.clone(),
    };
    match fd.port {
        Some(port) if port != 443 => format!("{host}:{port}"),
        _ => host,
    }
}
