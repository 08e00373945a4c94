//! Figures a passing test wants seen: `cargo test` hides a passing test's output, so each
//! line also goes to `target/tmp/<name>-report.txt`, which scripts/test prints afterwards.

use std::io::Write;
use std::path::Path;

/// Prints `<name>: <line>` and appends it to `target/tmp/<name>-report.txt`.
pub fn report(name: &str, line: &str) {
    eprintln!("{name}: {line}");
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-report.txt"));
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    writeln!(f, "{name}: {line}").unwrap();
}
