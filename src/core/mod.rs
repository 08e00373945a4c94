//! The pure core: what a MachineSet should boot from, decided without I/O. The webhook,
//! the toucher, `preview` and `status` all call [`decision::decide`] on a [`snapshot`].

pub(crate) mod age;
pub(crate) mod arch;
pub mod cluster_api;
pub(crate) mod configmap;
pub mod decision;
pub(crate) mod document;
pub mod facts;
pub mod learned;
pub(crate) mod lenient;
pub mod platforms;
pub mod published;
pub mod reason;
pub(crate) mod skew;
pub mod snapshot;
pub mod stream_choice;
pub(crate) mod stream_doc;
pub mod stub;
pub mod view;
