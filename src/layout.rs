//! The shape of `src/`, held by tests: docs/layout.md names every file; no files import
//! each other in a circle; no cloud's code imports another cloud's.
//!
//! An import is any path the code names from the crate's root (`crate::`, `$crate::`),
//! from a parent (`super::`), or from a child module it declares (`use child::…`): it
//! points at the deepest module file that path reaches. Test modules are left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use regex::Regex;

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

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// docs/layout.md names every file of `src/`, in the section of its part: by its path
/// within the part, or by its name in a row of files of one folder.
#[test]
fn the_layout_document_names_every_file() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("docs/layout.md")).unwrap();
    let mut all = Vec::new();
    files(&src(), &mut all);
    let missing: Vec<String> = all
        .iter()
        .map(|p| p.strip_prefix(src()).unwrap().to_owned())
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

/// The library's modules: module path (`core::platforms`, empty for the root) -> its file
/// (relative to `src/`). `main.rs` is another crate, and imports only this one.
fn modules() -> BTreeMap<Vec<String>, String> {
    let mut all = Vec::new();
    files(&src(), &mut all);
    all.iter()
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .map(|p| {
            p.strip_prefix(src())
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|rel| rel != "main.rs")
        .map(|rel| {
            let mut path: Vec<String> = rel
                .trim_end_matches(".rs")
                .split('/')
                .map(str::to_owned)
                .collect();
            if matches!(path.last().map(String::as_str), Some("mod" | "lib")) {
                path.pop();
            }
            (path, rel)
        })
        .collect()
}

/// A file's code without its test modules (a `#[cfg(test)]` before a `mod`) and comments.
fn code(rel: &str) -> String {
    let text = std::fs::read_to_string(src().join(rel)).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let end = (0..lines.len())
        .find(|&i| {
            lines[i].trim() == "#[cfg(test)]"
                && lines[i + 1..]
                    .iter()
                    .find(|l| !l.trim().is_empty())
                    .is_some_and(|l| l.trim_start().starts_with("mod "))
        })
        .unwrap_or(lines.len());
    lines[..end]
        .iter()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The paths a `use` tree names, its braces expanded (`a::{b, c::{d}}` -> `a::b`, `a::c::d`).
fn expand(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        let path = tree.split(" as ").next().unwrap_or(tree).trim();
        return vec![path.trim_end_matches("::self").to_owned()];
    };
    let prefix = &tree[..open];
    let close = tree.rfind('}').filter(|&c| c > open).unwrap_or(tree.len());
    let inner = &tree[open + 1..close];
    let (mut parts, mut depth, mut start) = (Vec::new(), 0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
        .into_iter()
        .filter(|p| !p.trim().is_empty())
        .flat_map(|p| match p.trim() {
            "self" => vec![prefix.trim_end_matches("::").to_owned()],
            p => expand(&format!("{prefix}{p}")),
        })
        .collect()
}

/// Every module path file `module` names (as written: `crate::…`, `super::…`, `child::…`).
fn named_paths(rel: &str) -> Vec<String> {
    static USE: std::sync::LazyLock<Regex> = std::sync::LazyLock::new(|| {
        Regex::new(r"(?m)^\s*(?:pub(?:\([a-z]+\))?\s+)?use\s+([^;]+);").expect("a constant pattern")
    });
    static INLINE: std::sync::LazyLock<Regex> = std::sync::LazyLock::new(|| {
        Regex::new(r"(?:\$crate|\bcrate|\bsuper)(?:::(?:super|[A-Za-z_][A-Za-z0-9_]*))+")
            .expect("a constant pattern")
    });
    let code = code(rel);
    let mut out: Vec<String> = USE
        .captures_iter(&code)
        .flat_map(|c| expand(&c[1]))
        .collect();
    out.extend(INLINE.find_iter(&code).map(|m| m.as_str().to_owned()));
    out
}

/// The module file a path named in module `at` reaches: the deepest module it walks
/// through (`None`: outside the crate, or a name the module itself defines).
fn target(path: &str, at: &[String], modules: &BTreeMap<Vec<String>, String>) -> Option<String> {
    let mut segments = path.split("::").map(str::trim).peekable();
    let mut module: Vec<String> = match *segments.peek()? {
        "crate" | "$crate" => {
            segments.next();
            Vec::new()
        }
        "super" => at.to_vec(),
        "self" => {
            segments.next();
            at.to_vec()
        }
        first => {
            let mut child = at.to_vec();
            child.push(first.to_owned());
            if !modules.contains_key(&child) {
                return None;
            }
            at.to_vec()
        }
    };
    for segment in segments {
        if segment == "super" {
            module.pop()?;
            continue;
        }
        let mut deeper = module.clone();
        deeper.push(segment.to_owned());
        if !modules.contains_key(&deeper) {
            break;
        }
        module = deeper;
    }
    modules.get(&module).cloned()
}

/// Which module file imports which. A file naming what its own folder's `mod.rs` (or an
/// ancestor's) defines is inside that module, not importing it: the module and its files
/// are one room to this reading. What the module takes from its files counts, so a circle
/// that runs through a module's files and out again is still found.
fn imports() -> BTreeMap<String, BTreeSet<String>> {
    let modules = modules();
    let path_of: BTreeMap<&String, &Vec<String>> = modules.iter().map(|(p, f)| (f, p)).collect();
    let mut graph = BTreeMap::new();
    for (at, rel) in &modules {
        let named: BTreeSet<String> = named_paths(rel)
            .iter()
            .filter_map(|p| target(p, at, &modules))
            .filter(|t| !at.starts_with(path_of[t]))
            .collect();
        graph.insert(rel.clone(), named);
    }
    graph
}

/// The files that import each other in a circle, each circle as its files (Tarjan).
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Walk<'g> {
        graph: &'g BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'g str, (usize, usize)>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        found: Vec<Vec<String>>,
    }
    impl<'g> Walk<'g> {
        fn visit(&mut self, v: &'g str) {
            let n = self.index.len();
            self.index.insert(v, (n, n));
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in self.graph.get(v).into_iter().flatten() {
                let low = if !self.index.contains_key(w.as_str()) {
                    self.visit(w);
                    self.index[w.as_str()].1
                } else if self.on_stack.contains(w.as_str()) {
                    self.index[w.as_str()].0
                } else {
                    continue;
                };
                let entry = self.index.get_mut(v).unwrap();
                entry.1 = entry.1.min(low);
            }
            let (i, low) = self.index[v];
            if i == low {
                let mut circle = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    circle.push(w.to_owned());
                    if w == v {
                        break;
                    }
                }
                if circle.len() > 1 {
                    circle.sort();
                    self.found.push(circle);
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !walk.index.contains_key(v.as_str()) {
            walk.visit(v);
        }
    }
    walk.found
}

#[test]
fn no_files_import_each_other_in_a_circle() {
    let graph = imports();
    let found = circles(&graph);
    let told: Vec<String> = found
        .iter()
        .map(|circle| {
            let ties: Vec<String> = circle
                .iter()
                .flat_map(|a| {
                    graph[a]
                        .iter()
                        .filter(|b| circle.contains(b))
                        .map(move |b| format!("{a} -> {b}"))
                })
                .collect();
            ties.join(", ")
        })
        .collect();
    assert!(told.is_empty(), "import circles: {told:#?}");
}

/// The clouds: a platform module of the core each (`core/platforms/<cloud>.rs`).
fn clouds() -> Vec<String> {
    let shared = ["mod", "rules", "artifact", "tests"];
    std::fs::read_dir(src().join("core/platforms"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter_map(|p| Some(p.file_stem()?.to_string_lossy().into_owned()))
        .filter(|stem| !shared.contains(&stem.as_str()))
        .collect()
}

/// The cloud a file belongs to: a folder or file named after it, or after its service
/// (`ec2`), or a file whose name begins with it (`aws_query`).
fn cloud_of<'c>(rel: &str, clouds: &'c [String]) -> Option<&'c String> {
    const SERVICES: [(&str, &str); 1] = [("ec2", "aws")];
    let parts: Vec<&str> = rel.trim_end_matches(".rs").split('/').collect();
    clouds.iter().find(|c| {
        parts.iter().any(|p| {
            *p == c.as_str()
                || p.strip_prefix(c.as_str())
                    .is_some_and(|r| r.starts_with('_'))
                || SERVICES.contains(&(*p, c.as_str()))
        })
    })
}

#[test]
fn no_cloud_imports_another() {
    let clouds = clouds();
    assert!(clouds.len() >= 6, "{clouds:?}");
    let crossing: Vec<String> = imports()
        .iter()
        .flat_map(|(a, to)| to.iter().map(move |b| (a, b)))
        .filter_map(|(a, b)| {
            let (from, into) = (cloud_of(a, &clouds)?, cloud_of(b, &clouds)?);
            (from != into).then(|| format!("{a} ({from}) -> {b} ({into})"))
        })
        .collect();
    assert!(
        crossing.is_empty(),
        "a cloud imports another: {crossing:#?}"
    );
}

/// The reading of imports finds what the tests above rely on: a circle, and an import of
/// each written form.
#[test]
fn imports_are_read_in_every_form() {
    let graph = imports();
    let of = |f: &str| graph.get(f).unwrap_or_else(|| panic!("no module {f}"));
    // `crate::` with braces and `self as`, `super::` from a child, `use child::…`.
    assert!(of("core/platforms/gcp.rs").contains("core/skew/version.rs"));
    assert!(of("core/platforms/gcp.rs").contains("core/platforms/rules.rs"));
    assert!(of("core/platforms/rules.rs").contains("core/learned.rs"));
    assert!(of("core/platforms/mod.rs").contains("core/platforms/rules.rs"));
    // A file naming its own module's definitions is inside it, not importing it.
    assert!(!of("core/facts/enrollment.rs").contains("core/facts/mod.rs"));
    assert!(of("core/stream_choice.rs").contains("core/skew/version.rs"));
    assert!(of("core/stream_choice.rs").contains("core/skew/mod.rs"));
    assert!(of("core/mod.rs").is_empty(), "{:?}", of("core/mod.rs"));
    let two: BTreeMap<String, BTreeSet<String>> =
        [("a.rs", ["b.rs"]), ("b.rs", ["c.rs"]), ("c.rs", ["a.rs"])]
            .into_iter()
            .map(|(a, b)| (a.to_owned(), b.iter().map(|s| (*s).to_owned()).collect()))
            .collect();
    assert_eq!(circles(&two), vec![vec!["a.rs", "b.rs", "c.rs"]]);
    let clouds = clouds();
    let of = |f: &str| cloud_of(f, &clouds).map(String::as_str);
    assert_eq!(of("cluster/nutanix/prism.rs"), Some("nutanix"));
    assert_eq!(of("cluster/ec2.rs"), Some("aws"));
    assert_eq!(of("cluster/aws_query.rs"), Some("aws"));
    assert_eq!(of("cluster/importer/https.rs"), None);
}
