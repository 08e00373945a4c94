//! OpenStack, in the background (never on the request path): the stream's RHCOS qcow2
//! uploaded to Glance as an image of this cluster, which MachineSets then move to.
//!
//! Nothing is deleted on the strength of its name: every image made here carries a marker
//! in its properties from its creation (`marker`), and is read again right before it is
//! deleted; an image under our name without our marker is never touched, and nothing is
//! imported beside it (the machine API needs image names to be unique).
//!
//! The files, each using only those below it: `background` (the importer on the frame of
//! [`importer`](crate::cluster::importer)), `access` (the credentials Secret and the CA
//! bundle, through the Kubernetes API), `import` (what the background loop calls),
//! `glance`, `keystone`, and the pure rules: `clouds` (`clouds.yaml`), `marker`, `error`.

mod access;
mod background;
mod clouds;
mod error;
mod glance;
mod import;
mod keystone;
mod marker;

pub use crate::cluster::importer::artifact::{ArtifactError, Qcow2Target};
pub use crate::cluster::importer::https::{MAX_ANSWER, MAX_LIST};
pub use access::{Credentials, connect, connect_cloud, read};
pub use background::{Background, OpenStack, Wanted, Work, look, work};
pub use clouds::{CLOUD_NAME, Cloud, parse as parse_clouds};
pub use error::OpenStackError;
pub use glance::{Glance, Image};
pub use import::{Importer, Look, Settings, Want};
pub use marker::{
    INFRASTRUCTURE, Keep, Marker, QCOW2_SHA256, RELEASE, STREAM, image_name, image_name_for,
};
