//! The serving side: AdmissionReview bytes to response bytes ([`admission`]), carried over
//! HTTPS ([`server`], [`accept`], [`tls`]). It reads the snapshot and never calls anything.

pub mod accept;
pub mod admission;
pub mod body;
pub mod budget;
mod deadline;
pub mod profile;
pub mod server;
pub mod slots;
pub mod tls;
