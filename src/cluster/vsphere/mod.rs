//! vSphere, in the background (never on the request path): every replica looks in vCenter
//! for the versioned template of the stream's OVA in each failure domain and publishes the
//! ones that are ready ([`VSphereLearned`](crate::core::platforms::vsphere::VSphereLearned));
//! the Lease holder imports the missing ones a waiting MachineSet needs, one failure domain
//! at a time, and deletes templates of ours that nothing has named for
//! `--vsphere-template-retention`.
//!
//! Nothing is deleted on the strength of its name: every VM imported here carries a marker
//! from its creation (`marker`), and is read again right before it is deleted.
//!
//! The files, each using only those below it: `background` (its pass on the frame of
//! [`importer`](crate::cluster::importer)), `import` and `retention` (what the Lease holder
//! does), `place` (what is where in vCenter), `state`, `access` (credentials and sessions),
//! `error`, `marker` and `objects` (pure rules), and the protocols: `vim` (SOAP), `xml` (its
//! messages), `tags` (vAPI), `ova`, `https`.

mod access;
mod background;
mod error;
mod https;
mod import;
mod marker;
mod objects;
mod ova;
mod place;
mod retention;
mod state;
mod tags;
mod vim;
mod xml;

pub use access::Access;
pub use background::Background;
pub use error::ImportError;
pub use https::HttpsError;
pub use place::look;
pub use state::Settings;
