//! bootimage-webhook: keeps OpenShift MachineSets booting from the current RHCOS image.
//!
//! Three parts and their wiring:
//! - [`core`]: the pure decision, platforms, snapshot and cluster facts (no I/O);
//! - [`serve`]: the webhook over HTTPS, reading only the snapshot;
//! - [`cluster`]: watchers feeding the snapshot, and the toucher;
//! - [`app`], [`config`], [`keep`], [`offline`], [`preview`], [`status`]: the commands that
//!   wire them.

pub mod app;
pub mod cluster;
pub mod config;
pub mod core;
pub(crate) mod health;
pub mod keep;
pub mod logging;
pub(crate) mod metrics;
pub(crate) mod offline;
pub mod preview;
pub mod serve;
pub mod status;

#[cfg(test)]
mod layout {
    use std::path::{Path, PathBuf};

    fn files(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                files(&path, out);
            } else {
                out.push(path);
            }
        }
    }

    /// docs/layout.md names every file of `src/`, in the section of its part: by its path
    /// within the part, or by its name in a row of files of one folder.
    #[test]
    fn the_layout_document_names_every_file() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let doc = std::fs::read_to_string(root.join("docs/layout.md")).unwrap();
        let mut all = Vec::new();
        files(&root.join("src"), &mut all);
        let missing: Vec<String> = all
            .iter()
            .map(|p| p.strip_prefix(root.join("src")).unwrap().to_owned())
            .filter(|rel| {
                let within = rel.components().skip(1).collect::<PathBuf>();
                let name = rel.file_name().unwrap().to_string_lossy();
                let named = |s: &str| doc.contains(&format!("`{s}`"));
                !(named(&within.to_string_lossy()) || named(&name) || named(&rel.to_string_lossy()))
            })
            .map(|rel| rel.display().to_string())
            .collect();
        assert!(
            missing.is_empty(),
            "docs/layout.md does not name {missing:?}"
        );
    }
}
