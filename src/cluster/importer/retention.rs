//! The retention clock: since when each image of ours has been seen unused by this
//! replica while it held the Lease. An image is due once unused for the retention; a use
//! stops its clock; losing the Lease stops them all, so the clock starts again wherever
//! the Lease goes.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

#[derive(Debug)]
pub struct Retention<K> {
    pub period: Duration,
    unused_since: BTreeMap<K, Instant>,
}

impl<K: Ord + Clone> Retention<K> {
    pub fn new(period: Duration) -> Retention<K> {
        Retention {
            period,
            unused_since: BTreeMap::new(),
        }
    }

    /// Whether `key`, seen `used` or not at `now`, has been unused for the retention.
    pub fn due(&mut self, key: &K, used: bool, now: Instant) -> bool {
        if used {
            self.unused_since.remove(key);
            return false;
        }
        let since = *self.unused_since.entry(key.clone()).or_insert(now);
        now.saturating_duration_since(since) >= self.period
    }

    /// Its clock starts again (deleted, or found in use right before).
    pub fn forget(&mut self, key: &K) {
        self.unused_since.remove(key);
    }

    /// Only these are still there: the others' clocks go.
    pub fn keep_only(&mut self, present: impl Fn(&K) -> bool) {
        self.unused_since.retain(|k, _| present(k));
    }

    /// The Lease is not held here: every clock stops.
    pub fn clear(&mut self) {
        self.unused_since.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_image_is_due_once_unused_for_the_whole_retention() {
        let week = Duration::from_secs(7 * 86400);
        let mut r = Retention::new(week);
        let start = Instant::now();
        let (a, b) = ("a".to_owned(), "b".to_owned());
        assert!(!r.due(&a, false, start));
        assert!(!r.due(&a, false, start + week - Duration::from_secs(1)));
        assert!(r.due(&a, false, start + week));
        // A use in between starts the clock again.
        assert!(!r.due(&b, false, start));
        assert!(!r.due(&b, true, start + week));
        assert!(!r.due(&b, false, start + week));
        assert!(r.due(&b, false, start + week + week));
        // Forgotten, gone, or the Lease lost: the clock starts again.
        r.forget(&a);
        assert!(!r.due(&a, false, start + week + week));
        r.keep_only(|k| k != &a);
        assert!(!r.due(&a, false, start + 3 * week));
        assert!(r.due(&a, false, start + 4 * week));
        r.clear();
        assert!(!r.due(&a, false, start + 4 * week));
        assert!(!r.due(&b, false, start + 4 * week));
    }

    #[test]
    fn a_zero_retention_is_due_at_once() {
        let mut r = Retention::new(Duration::ZERO);
        assert!(r.due(&1, false, Instant::now()));
    }
}
