//! Tests that need the machine to themselves, and the rest. Each tier is one test binary,
//! whose tests run in parallel threads; a few hold thousands of sockets, measure a process's
//! peak memory, bound a latency or a shutdown's timing, or run containers and a node, and
//! fail or prove less with another test beside them. Those take [`alone`] first; every other
//! test takes [`parallel`] first (a property test for each case, between which an `alone`
//! test may run). An `alone` test waits for the tests running to finish and runs by itself:
//! no test starts beside it, `alone` or not.
//!
//! The guarantee holds only if no test starts without either: the first [`alone`] of a run
//! checks that every test of `tests/fast/` and `tests/e2e/` takes one, and fails naming
//! those that do not.

use std::path::Path;
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock, PoisonError};

struct State {
    /// Tests holding a [`Parallel`].
    parallel: usize,
    /// A test holds an [`Alone`].
    alone: bool,
    /// Tests waiting for an [`Alone`]: none starts in parallel meanwhile.
    waiting: usize,
}

static STATE: Mutex<State> = Mutex::new(State {
    parallel: 0,
    alone: false,
    waiting: 0,
});
static CHANGED: Condvar = Condvar::new();

fn state() -> MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(PoisonError::into_inner)
}

fn wait(s: MutexGuard<'static, State>) -> MutexGuard<'static, State> {
    CHANGED.wait(s).unwrap_or_else(PoisonError::into_inner)
}

/// Held for a test's whole run by a test that runs by itself.
#[must_use = "the test runs alone only while this is held"]
pub struct Alone(());

/// Held for a test's whole run by a test that may run beside others.
#[must_use = "the test is known to be running only while this is held"]
pub struct Parallel(());

/// Waits until no other test runs, and keeps any from starting until dropped (a failed
/// test's included).
pub fn alone() -> Alone {
    let unguarded = unguarded_tests();
    assert!(
        unguarded.is_empty(),
        "tests that take neither support::alone() nor support::parallel() first, and so could \
         run beside this one: {unguarded:#?}"
    );
    let mut s = state();
    s.waiting += 1;
    while s.alone || s.parallel > 0 {
        s = wait(s);
    }
    s.waiting -= 1;
    s.alone = true;
    Alone(())
}

/// Waits while a test runs alone or waits to, then runs beside the other `parallel` ones.
pub fn parallel() -> Parallel {
    let mut s = state();
    while s.alone || s.waiting > 0 {
        s = wait(s);
    }
    s.parallel += 1;
    Parallel(())
}

impl Drop for Alone {
    fn drop(&mut self) {
        state().alone = false;
        CHANGED.notify_all();
    }
}

impl Drop for Parallel {
    fn drop(&mut self) {
        let mut s = state();
        s.parallel -= 1;
        if s.parallel == 0 {
            CHANGED.notify_all();
        }
    }
}

/// `file:line` of each test in the tiers' files whose body does not start by taking
/// [`alone`] or [`parallel`]. Read once per process.
fn unguarded_tests() -> &'static [String] {
    static UNGUARDED: OnceLock<Vec<String>> = OnceLock::new();
    UNGUARDED.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
        let mut found = Vec::new();
        for tier in ["fast", "e2e"] {
            let mut files: Vec<_> = std::fs::read_dir(root.join(tier))
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|e| e == "rs"))
                .collect();
            files.sort();
            for file in files {
                let text = std::fs::read_to_string(&file).unwrap();
                for line in unguarded_in(&text) {
                    found.push(format!("tests/{tier}/{}:{line}", file_name(&file)));
                }
            }
        }
        found
    })
}

fn file_name(path: &Path) -> String {
    path.file_name().unwrap().to_string_lossy().into_owned()
}

/// The lines (1-based) of the test attributes in `text` whose function's first statement
/// takes neither guard.
fn unguarded_in(text: &str) -> Vec<usize> {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let attr = line.trim_start();
        if !(attr.starts_with("#[test]") || attr.starts_with("#[tokio::test")) {
            continue;
        }
        // The function's signature, the line that opens its body, its first statement.
        let signature = (i..lines.len()).find(|&j| lines[j].contains("fn "));
        let body = signature.and_then(|f| (f..lines.len()).find(|&j| lines[j].ends_with('{')));
        let first = body.and_then(|b| lines[b + 1..].iter().find(|l| !l.trim().is_empty()));
        let guarded = first
            .is_some_and(|l| l.contains("support::alone()") || l.contains("support::parallel()"));
        if !guarded {
            found.push(i + 1);
        }
    }
    found
}
