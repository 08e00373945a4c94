//! The pure core: what a MachineSet should boot from, decided without I/O. The webhook,
//! the toucher, `preview` and `status` all call [`decision::decide`] on a [`snapshot`].

pub mod age;
pub mod arch;
pub mod configmap;
pub mod decision;
pub mod document;
pub mod facts;
pub mod lenient;
pub mod platforms;
pub mod reason;
pub mod skew;
pub mod snapshot;
pub mod stream_choice;
pub mod stream_doc;
pub mod stub;
pub mod view;
