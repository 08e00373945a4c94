//! Nutanix, in the background (never on the request path): the stream's RHCOS qcow2 made an
//! image of this cluster in Prism Central, which MachineSets then move to.
//!
//! Nothing is deleted on the strength of its name: every image made here carries a marker in
//! its description from its creation (`marker`), and is read again right before it is
//! deleted; an image under our name without our marker is never touched, and nothing is
//! imported beside it (the machine API needs image names to be unique, and Prism Central
//! does not make them so).
//!
//! The files, each using only those below it: `background` (the importer on the frame
//! every importer shares), `access` (the credentials Secret and Infrastructure, through the
//! Kubernetes API), `import` (what the background loop calls),
//! `prism` (Prism Central's v3 API, over the OpenStack client's HTTPS and beside its
//! download), and the pure rules:
//! `credentials`, `marker`, `error`.

mod access;
mod background;
mod credentials;
mod error;
mod import;
mod marker;
mod prism;

pub use access::{Credentials, connect, connect_via, read};
pub use background::{Background, Nutanix, Source, look};
pub use credentials::{BasicAuth, SECRET_KEY, SECRET_NAME, SECRET_NAMESPACE, endpoint, parse};
pub use error::NutanixError;
pub use import::{Importer, Look, Settings, Want};
pub use marker::{Keep, Marker, TAG, image_name};
pub use prism::{Image, Prism, Task};
