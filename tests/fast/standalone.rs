//! The repository stands alone: nothing in it reads or names the folder that sat beside
//! the first checkouts. A clone has only itself.

use std::path::Path;

use crate::support;

/// Spelled in two halves so that this file does not name it itself.
const OUTSIDE: &str = concat!("..", "/shared");

fn walk(dir: &Path, hits: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if path.is_dir() {
            // Build output and git's own files are not the repository's content.
            if !matches!(name.as_ref(), "target" | ".git" | "node_modules") {
                walk(&path, hits);
            }
        } else if let Ok(text) = std::fs::read_to_string(&path)
            && text.contains(OUTSIDE)
        {
            hits.push(path.display().to_string());
        }
    }
}

#[test]
fn no_file_names_the_folder_beside_the_checkout() {
    let _parallel = support::parallel();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut hits = Vec::new();
    walk(root, &mut hits);
    assert!(
        hits.is_empty(),
        "these files name {OUTSIDE}, which a clone does not have: {hits:?}"
    );
}

#[test]
fn fixtures_have_provenance() {
    let _parallel = support::parallel();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap()
        + &std::fs::read_to_string(dir.join("crds/README.md")).unwrap();
    let mut missing = Vec::new();
    // The CRD sets of the older OpenShift releases sit in folders of crds/ (its README).
    let mut subs = vec![dir.clone(), dir.join("crds")];
    for e in std::fs::read_dir(dir.join("crds")).unwrap().flatten() {
        if e.path().is_dir() {
            subs.push(e.path());
        }
    }
    for sub in subs {
        for e in std::fs::read_dir(&sub).unwrap().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if e.path().is_file() && name != "README.md" && !readme.contains(&name) {
                missing.push(name);
            }
        }
    }
    // The four managedbootimages templates share one row, written with a brace list.
    missing.retain(|n| !n.starts_with("machineconfiguration-template-managedbootimages-"));
    assert!(
        missing.is_empty(),
        "fixtures without a provenance line: {missing:?}"
    );
}
