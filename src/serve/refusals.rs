//! Refused requests and connections, logged at warn so that `oc logs` shows an apiserver
//! (or anyone) sending something wrong, without letting a flood flood the log.

use std::time::{Duration, Instant};

/// Refused requests are logged at warn so that `oc logs` shows an apiserver (or anyone)
/// sending something wrong; at most [`RefusalLog::BURST`] lines per window, so that a flood
/// cannot flood the log. The next line says how many were left out. (A window counter
/// under a mutex: only refusals pass here, never the served path.)
#[derive(Debug)]
pub struct RefusalLog {
    window: Duration,
    state: std::sync::Mutex<RefusalWindow>,
}

#[derive(Debug)]
struct RefusalWindow {
    started: Instant,
    logged: u32,
    suppressed: u64,
}

impl RefusalLog {
    pub const BURST: u32 = 10;

    pub fn new(window: Duration) -> Self {
        RefusalLog {
            window,
            state: std::sync::Mutex::new(RefusalWindow {
                started: Instant::now(),
                logged: 0,
                suppressed: 0,
            }),
        }
    }

    /// `Some(n)`: log this one, and say that `n` were left out before it.
    pub(crate) fn admit(&self) -> Option<u64> {
        let mut w = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if w.started.elapsed() >= self.window {
            w.started = Instant::now();
            w.logged = 0;
        }
        if w.logged < Self::BURST {
            w.logged += 1;
            Some(std::mem::take(&mut w.suppressed))
        } else {
            w.suppressed += 1;
            None
        }
    }
}

impl Default for RefusalLog {
    fn default() -> Self {
        RefusalLog::new(Duration::from_secs(60))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusal_log_admits_a_burst_then_counts_what_it_leaves_out() {
        let log = RefusalLog::new(Duration::from_millis(200));
        for _ in 0..RefusalLog::BURST {
            assert_eq!(log.admit(), Some(0));
        }
        for _ in 0..7 {
            assert_eq!(log.admit(), None);
        }
        std::thread::sleep(Duration::from_millis(250));
        assert_eq!(
            log.admit(),
            Some(7),
            "the next line says how many were left out"
        );
        assert_eq!(log.admit(), Some(0));
    }
}
