//! The bytes of request bodies held at once, across every connection: a body is admitted
//! only if its length (declared, or the largest allowed when it is not) fits in what is
//! left, and is charged until its request is answered. A quarter of the budget is kept
//! for small bodies, so that reviews of ordinary MachineSets are still answered while
//! large bodies take the rest.

use std::sync::Arc;

use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Bodies up to this size may use the reserve. An ordinary MachineSet review (the object
/// and, on UPDATE, the old one) is a few tens of kilobytes.
pub const SMALL_BODY: usize = 256 * 1024;

/// The shared pool, and the reserve only small bodies may draw on.
pub struct Budget {
    total: usize,
    shared: Arc<Semaphore>,
    reserve: Arc<Semaphore>,
    /// Bytes charged now.
    held: Gauge,
}

/// Bytes charged to a body; given back when dropped.
#[derive(Debug)]
pub struct Charge {
    _permit: OwnedSemaphorePermit,
    bytes: i64,
    held: Gauge,
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.held.dec_by(self.bytes);
    }
}

impl Budget {
    /// `total` bytes, a quarter of them kept for small bodies; `held` follows the charge.
    pub fn new(total: usize, held: Gauge) -> Self {
        let reserve = total / 4;
        Budget {
            total,
            shared: Arc::new(Semaphore::new(total - reserve)),
            reserve: Arc::new(Semaphore::new(reserve)),
            held,
        }
    }

    pub fn total(&self) -> usize {
        self.total
    }

    /// Charge `bytes` now, or `None` when they do not fit. Never waits.
    pub fn charge(&self, bytes: usize) -> Option<Charge> {
        let n = u32::try_from(bytes).ok()?;
        let permit = self
            .shared
            .clone()
            .try_acquire_many_owned(n)
            .ok()
            .or_else(|| {
                (bytes <= SMALL_BODY)
                    .then(|| self.reserve.clone().try_acquire_many_owned(n).ok())
                    .flatten()
            })?;
        let bytes = i64::from(n);
        self.held.inc_by(bytes);
        Some(Charge {
            _permit: permit,
            bytes,
            held: self.held.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1024 * 1024;

    #[test]
    fn large_bodies_take_the_shared_pool_and_small_ones_still_fit() {
        let held = Gauge::default();
        let budget = Budget::new(32 * MIB, held.clone());
        let large: Vec<Charge> = (0..3).filter_map(|_| budget.charge(8 * MIB)).collect();
        assert_eq!(large.len(), 3, "24 MiB shared");
        assert!(
            budget.charge(8 * MIB).is_none(),
            "the reserve is not for them"
        );
        assert!(budget.charge(SMALL_BODY + 1).is_none());
        let small: Vec<Charge> = (0..32).filter_map(|_| budget.charge(SMALL_BODY)).collect();
        assert_eq!(small.len(), 32, "8 MiB kept for small bodies");
        assert!(budget.charge(1).is_none(), "all of it taken");
        assert_eq!(held.get(), (32 * MIB) as i64);
        drop(large);
        assert_eq!(held.get(), (8 * MIB) as i64, "given back on drop");
        assert!(budget.charge(8 * MIB).is_some());
    }

    #[test]
    fn more_than_a_body_may_be_is_never_charged() {
        let budget = Budget::new(32 * MIB, Gauge::default());
        assert!(budget.charge(usize::MAX).is_none());
        assert!(budget.charge(25 * MIB).is_none());
    }
}
