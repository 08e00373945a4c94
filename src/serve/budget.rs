//! The bytes that request bodies (and responses whose write is blocked) hold at once,
//! across every connection, shared per peer. Bytes are charged before they are held and
//! given back when they are no longer; what does not fit is refused at once, unless a
//! holder is evicted to make room:
//!
//! - a peer (an IP address) holds at most its share, a quarter of the budget (never less
//!   than the largest body), so that one client cannot hold it all;
//! - when the budget is full, a holder that made no progress for [`STALLED`] gives way
//!   first (the one stalled longest: a body declared and not sent, a response its client
//!   does not read);
//! - then the peer holding the most gives way to one holding less, its holder that made
//!   progress longest ago first: peers that together hold the budget cannot keep a
//!   lighter one out.
//!
//! An evicted holder's charge is given back at once; its connection is told, and ends.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::task::AtomicWaker;
use prometheus_client::metrics::gauge::Gauge;
use tokio::time::Instant;

/// A holder that received nothing for this long makes no progress: an apiserver's body
/// comes in one burst, and a client reads a response as soon as it is written.
pub const STALLED: Duration = Duration::from_millis(250);

/// The budget, shared by every connection of the port (a clone is one pointer).
#[derive(Clone)]
pub struct Budget(Arc<Inner>);

struct Inner {
    total: usize,
    share: usize,
    /// What the progress stamps count from.
    epoch: Instant,
    state: Mutex<State>,
    /// Bytes charged now.
    held: Gauge,
}

#[derive(Default)]
struct State {
    held: usize,
    peers: HashMap<IpAddr, usize>,
    holders: HashMap<u64, Holder>,
    next: u64,
}

struct Holder {
    peer: IpAddr,
    bytes: usize,
    progress: Arc<Progress>,
}

/// What a holder tells the budget (that it made progress) and the budget tells it (that
/// it was evicted).
#[derive(Default)]
struct Progress {
    /// Milliseconds from the budget's epoch to the last progress (or the charge).
    last: AtomicU64,
    evicted: AtomicBool,
    waker: AtomicWaker,
}

/// Why bytes were not charged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Full {
    #[error("this address already holds its share of the budget")]
    Peer,
    #[error("the budget is full")]
    All,
}

/// Bytes charged to one holder; given back when dropped (or when evicted).
pub struct Charge {
    budget: Budget,
    id: u64,
    progress: Arc<Progress>,
}

impl std::fmt::Debug for Charge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Charge").field("id", &self.id).finish()
    }
}

impl Charge {
    /// Bytes came (a body's) or left (a response's): not stalled.
    pub fn progressed(&self) {
        let now = self.budget.now();
        self.progress.last.store(now, Ordering::Relaxed);
    }

    /// Ready once the holder was evicted to make room (its bytes already given back).
    pub fn poll_evicted(&self, cx: &mut Context<'_>) -> Poll<()> {
        if self.progress.evicted.load(Ordering::Acquire) {
            return Poll::Ready(());
        }
        self.progress.waker.register(cx.waker());
        if self.progress.evicted.load(Ordering::Acquire) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }

    pub async fn evicted(&self) {
        std::future::poll_fn(|cx| self.poll_evicted(cx)).await;
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        let mut st = self.budget.lock();
        if let Some(h) = st.holders.remove(&self.id) {
            self.budget.release(&mut st, &h);
        }
    }
}

impl Budget {
    /// `total` bytes, each peer's share a quarter of them and at least `largest` (so that
    /// the largest body always has room); `held` follows the charge.
    pub fn new(total: usize, largest: usize, held: Gauge) -> Self {
        Budget(Arc::new(Inner {
            total,
            share: (total / 4).max(largest).min(total),
            epoch: Instant::now(),
            state: Mutex::default(),
            held,
        }))
    }

    pub fn total(&self) -> usize {
        self.0.total
    }

    /// What one address may hold.
    pub fn share(&self) -> usize {
        self.0.share
    }

    /// Charge `bytes` to `peer` now, evicting stalled or heavier holders if that makes
    /// room; never waits.
    pub fn charge(&self, peer: IpAddr, bytes: usize) -> Result<Charge, Full> {
        let peer = peer.to_canonical();
        if bytes > self.0.share {
            return Err(Full::Peer);
        }
        let now = self.now();
        let mut st = self.lock();
        loop {
            let mine = st.peers.get(&peer).copied().unwrap_or(0);
            let full = if mine + bytes > self.0.share {
                Full::Peer
            } else if st.held + bytes > self.0.total {
                Full::All
            } else {
                break;
            };
            let Some(id) = victim(&st, full, peer, mine + bytes, now) else {
                return Err(full);
            };
            if let Some(h) = st.holders.remove(&id) {
                self.release(&mut st, &h);
                h.progress.evicted.store(true, Ordering::Release);
                h.progress.waker.wake();
            }
        }
        let progress = Arc::new(Progress {
            last: AtomicU64::new(now),
            ..Progress::default()
        });
        let id = st.next;
        st.next += 1;
        st.held += bytes;
        *st.peers.entry(peer).or_insert(0) += bytes;
        st.holders.insert(
            id,
            Holder {
                peer,
                bytes,
                progress: progress.clone(),
            },
        );
        self.0.held.set(st.held as i64);
        Ok(Charge {
            budget: self.clone(),
            id,
            progress,
        })
    }

    fn release(&self, st: &mut State, h: &Holder) {
        st.held -= h.bytes;
        if let Some(n) = st.peers.get_mut(&h.peer) {
            *n -= h.bytes;
            if *n == 0 {
                st.peers.remove(&h.peer);
            }
        }
        self.0.held.set(st.held as i64);
    }

    fn now(&self) -> u64 {
        self.0.epoch.elapsed().as_millis() as u64
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.0.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Who gives way so that `peer` may hold `wants` in all: over its share, one of its own
/// stalled holders; over the budget, the holder stalled longest, else the peer holding the
/// most (when that is more than `wants`), its holder that progressed longest ago.
fn victim(st: &State, full: Full, peer: IpAddr, wants: usize, now: u64) -> Option<u64> {
    let stalled_ms = STALLED.as_millis() as u64;
    let stalled =
        |h: &Holder| now.saturating_sub(h.progress.last.load(Ordering::Relaxed)) >= stalled_ms;
    let oldest = |of: &dyn Fn(&Holder) -> bool| {
        st.holders
            .iter()
            .filter(|(_, h)| of(h))
            .min_by_key(|(_, h)| h.progress.last.load(Ordering::Relaxed))
            .map(|(id, _)| *id)
    };
    if full == Full::Peer {
        return oldest(&|h| h.peer == peer && stalled(h));
    }
    oldest(&stalled).or_else(|| {
        let (heaviest, held) = st.peers.iter().max_by_key(|(_, n)| **n)?;
        (*heaviest != peer && *held > wants)
            .then(|| oldest(&|h| h.peer == *heaviest))
            .flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1024 * 1024;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    fn budget() -> (Budget, Gauge) {
        let held = Gauge::default();
        (Budget::new(32 * MIB, 8 * MIB, held.clone()), held)
    }

    fn evicted(c: &Charge) -> bool {
        c.progress.evicted.load(Ordering::Acquire)
    }

    #[tokio::test(start_paused = true)]
    async fn a_peer_holds_at_most_its_share_and_others_still_fit() {
        let (budget, held) = budget();
        let a = budget.charge(ip(2), 8 * MIB).unwrap();
        assert_eq!(budget.charge(ip(2), 1).err(), Some(Full::Peer));
        // Mapped IPv6 is the same peer.
        let mapped = IpAddr::from(std::net::Ipv4Addr::new(127, 0, 0, 2).to_ipv6_mapped());
        assert_eq!(budget.charge(mapped, 1).err(), Some(Full::Peer));
        let b = budget.charge(ip(1), 64 * 1024).unwrap();
        assert_eq!(held.get(), (8 * MIB + 64 * 1024) as i64);
        drop(a);
        assert_eq!(held.get(), (64 * 1024) as i64, "given back on drop");
        assert!(budget.charge(ip(2), 8 * MIB).is_ok());
        assert!(!evicted(&b));
        assert_eq!(budget.charge(ip(3), 8 * MIB + 1).err(), Some(Full::Peer));
    }

    #[tokio::test(start_paused = true)]
    async fn a_peer_over_its_share_evicts_only_its_own_stalled_holders() {
        let (budget, _) = budget();
        let old = budget.charge(ip(2), 6 * MIB).unwrap();
        tokio::time::advance(STALLED).await;
        let fresh = budget.charge(ip(2), 2 * MIB).unwrap();
        let next = budget.charge(ip(2), 4 * MIB).unwrap();
        assert!(
            evicted(&old) && !evicted(&fresh),
            "its stalled one gave way"
        );
        assert_eq!(
            budget.charge(ip(2), 4 * MIB).err(),
            Some(Full::Peer),
            "none of its own is stalled"
        );
        drop(next);
    }

    #[tokio::test(start_paused = true)]
    async fn when_full_the_stalled_go_first() {
        let (budget, held) = budget();
        let stalled = budget.charge(ip(2), 8 * MIB).unwrap();
        tokio::time::advance(STALLED).await;
        let others: Vec<Charge> = (3..6)
            .map(|p| budget.charge(ip(p), 8 * MIB).unwrap())
            .collect();
        assert_eq!(held.get(), (32 * MIB) as i64, "four peers fill it");
        let waiter = tokio::spawn(async move {
            stalled.evicted().await;
            stalled
        });
        tokio::task::yield_now().await;
        let review = budget.charge(ip(1), 64 * 1024).unwrap();
        let stalled = tokio::time::timeout(Duration::from_secs(1), waiter)
            .await
            .expect("the evicted holder is woken")
            .unwrap();
        assert!(evicted(&stalled));
        assert!(others.iter().all(|c| !evicted(c)) && !evicted(&review));
        assert_eq!(
            held.get(),
            (24 * MIB + 64 * 1024) as i64,
            "its bytes given back"
        );
        drop(stalled);
        assert_eq!(held.get(), (24 * MIB + 64 * 1024) as i64, "and only once");
    }

    #[tokio::test(start_paused = true)]
    async fn then_the_heaviest_peer_gives_way_to_a_lighter_one() {
        let (budget, _) = budget();
        let first = budget.charge(ip(2), 4 * MIB).unwrap();
        let heavy: Vec<Charge> = (0..3)
            .map(|_| budget.charge(ip(2), MIB + MIB / 3).unwrap())
            .collect();
        let rest: Vec<Charge> = (3..6)
            .map(|p| budget.charge(ip(p), 7 * MIB).unwrap())
            .collect();
        // Everyone keeps sending, ip(2)'s first body the longest ago.
        tokio::time::advance(STALLED / 2).await;
        for c in heavy.iter().chain(&rest) {
            c.progressed();
        }
        assert_eq!(
            budget.charge(ip(6), 8 * MIB).err(),
            Some(Full::All),
            "no one holds more than it would"
        );
        let _lighter = budget.charge(ip(6), 4 * MIB).unwrap();
        assert!(evicted(&first), "the heaviest peer's oldest gave way");
        assert!(heavy.iter().chain(&rest).all(|c| !evicted(c)));
    }
}
