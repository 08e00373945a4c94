//! The serving side: AdmissionReview bytes to response bytes ([`admission`]), carried over
//! HTTPS ([`server`], [`accept`], [`tls`]). It reads the snapshot and never calls anything.

pub(crate) mod accept;
pub mod admission;
pub(crate) mod body;
pub(crate) mod budget;
mod deadline;
pub mod profile;
pub(crate) mod refusals;
pub mod server;
pub(crate) mod slots;
pub mod tls;
