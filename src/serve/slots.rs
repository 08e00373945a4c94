//! Which connections a port serves: at most [`MAX_CONNECTIONS`] at once, at most
//! [`MAX_CONNECTIONS_PER_PEER`] of them from one IP address, and, when every slot is taken,
//! the connection that has waited longest for a request gives way to the new one.
//!
//! A connection waits while it has not sent a whole request head yet (in its TLS handshake,
//! or before its first request) and while it is idle between requests. A connection with
//! a request in flight (its head whole, its response not sent) is never in the queue, and
//! one that has begun its next head is passed over: only waiting connections give way.
//! Waiting longest goes first: a client that drips a head, or sends one request and sits
//! idle, is older than a well-behaved client's handshake and than the connections an
//! apiserver's pool keeps busy.
//!
//! An address at its cap is not refused while one of its own connections is idle: the one
//! idle longest gives way, so that clients sharing an address with a hog (a node's probes,
//! an apiserver behind the same source NAT) still get in.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

use super::deadline::{Phase, Waiting};

/// Connections served at once per port; more are closed at once, unless one gives way.
pub const MAX_CONNECTIONS: usize = 1024;

/// Connections from one IP address at once. A quarter of the slots: one address (one
/// attacker, or one misbehaving client) can never take them all, and three quarters are
/// left to everyone else. An apiserver opens one connection per webhook call in flight and
/// keeps a few idle ones in its pool, far fewer than this even when the control plane's
/// apiservers reach us through one address (a source NAT on the node), so the cap never
/// holds back an apiserver.
pub const MAX_CONNECTIONS_PER_PEER: usize = MAX_CONNECTIONS / 4;

/// How long a new connection waits for the slot of one that was told to give way.
const GIVE_WAY: Duration = Duration::from_secs(1);

/// Connections an address may have beyond its cap for the moment between telling its own
/// idle ones to give way and their closing.
const OVER_CAP: usize = 16;

/// Why a connection was closed as soon as it was accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("too many connections from this address")]
    PeerFull,
    #[error("too many connections, none of them waiting for a request")]
    AllBusy,
}

/// A port's slots, the connections per address and the queue of waiting connections.
pub struct Slots {
    permits: Arc<Semaphore>,
    per_peer: Mutex<HashMap<IpAddr, usize>>,
    /// Waiting connections, by when they began to wait: the first has waited longest.
    queue: Mutex<BTreeMap<u64, Arc<Conn>>>,
    next: AtomicU64,
}

/// One connection, as the slots see it.
pub struct Conn {
    /// Its peer's address, as counted.
    ip: IpAddr,
    /// Where it is between requests; its IO and its service move it along.
    pub phase: Arc<Phase>,
    give_way: Notify,
    /// Its key in the queue while it is there.
    key: AtomicU64,
}

impl Conn {
    fn new(ip: IpAddr) -> Self {
        Conn {
            ip,
            phase: Arc::default(),
            give_way: Notify::new(),
            key: AtomicU64::new(0),
        }
    }

    /// Resolves once the connection is told to give way (at once if it was told before).
    pub async fn told(&self) {
        self.give_way.notified().await;
    }
}

/// A connection's place among the [`MAX_CONNECTIONS`]: a permit now, or one to wait for
/// while the connection told to give way closes.
pub enum Slot {
    Now(OwnedSemaphorePermit),
    AfterGiveWay(Arc<Semaphore>),
}

impl Slot {
    /// The permit, once the connection told to give way has gone (`None`: it stayed).
    pub async fn taken(self) -> Option<OwnedSemaphorePermit> {
        match self {
            Slot::Now(p) => Some(p),
            Slot::AfterGiveWay(permits) => tokio::time::timeout(GIVE_WAY, permits.acquire_owned())
                .await
                .ok()?
                .ok(),
        }
    }
}

/// What an accepted connection holds for as long as it lives.
pub struct Admitted {
    pub slot: Slot,
    pub conn: Arc<Conn>,
    /// Its count against its address, given back when dropped.
    pub peer: PeerCount,
}

/// One connection counted against its address.
pub struct PeerCount {
    slots: Arc<Slots>,
    ip: IpAddr,
}

impl Drop for PeerCount {
    fn drop(&mut self) {
        let mut counts = lock(&self.slots.per_peer);
        if let Some(n) = counts.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                counts.remove(&self.ip);
            }
        }
    }
}

impl Default for Slots {
    fn default() -> Self {
        Slots::new(MAX_CONNECTIONS)
    }
}

impl Slots {
    pub fn new(max: usize) -> Self {
        Slots {
            permits: Arc::new(Semaphore::new(max)),
            per_peer: Mutex::default(),
            queue: Mutex::default(),
            next: AtomicU64::new(0),
        }
    }

    /// A new connection from `ip`: counted against its address, given a slot (the waiting
    /// connection that has waited longest told to give way when every slot is taken), and
    /// queued as waiting for its first request.
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<Admitted, Refused> {
        let ip = ip.to_canonical();
        let peer = self.count(ip)?;
        let slot = match self.permits.clone().try_acquire_owned() {
            Ok(p) => Slot::Now(p),
            Err(_) if self.evict_longest_waiting() => Slot::AfterGiveWay(self.permits.clone()),
            Err(_) => return Err(Refused::AllBusy),
        };
        let conn = Arc::new(Conn::new(ip));
        self.waits(&conn);
        Ok(Admitted { slot, conn, peer })
    }

    fn count(self: &Arc<Self>, ip: IpAddr) -> Result<PeerCount, Refused> {
        let mut counts = lock(&self.per_peer);
        let n = counts.entry(ip).or_insert(0);
        if *n >= MAX_CONNECTIONS_PER_PEER
            && (*n >= MAX_CONNECTIONS_PER_PEER + OVER_CAP || !self.evict_own_idle(ip))
        {
            return Err(Refused::PeerFull);
        }
        *n += 1;
        Ok(PeerCount {
            slots: self.clone(),
            ip,
        })
    }

    /// The connection waits for a request (again): at the back of the queue.
    pub fn waits(&self, conn: &Arc<Conn>) {
        let key = self.next.fetch_add(1, Ordering::Relaxed);
        conn.key.store(key, Ordering::Relaxed);
        lock(&self.queue).insert(key, conn.clone());
    }

    /// The connection has a request in flight, or has ended: out of the queue.
    pub fn busy(&self, conn: &Conn) {
        lock(&self.queue).remove(&conn.key.load(Ordering::Relaxed));
    }

    /// Tell the connection that has waited longest to give way; false when none waits.
    /// Those that began a head since are passed over (they queue again once answered).
    fn evict_longest_waiting(&self) -> bool {
        let mut queue = lock(&self.queue);
        while let Some((_, conn)) = queue.pop_first() {
            if conn.phase.waiting().is_some() {
                conn.give_way.notify_one();
                return true;
            }
        }
        false
    }

    /// Tell the connection of `ip` idle the longest to give way; false when none is idle.
    fn evict_own_idle(&self, ip: IpAddr) -> bool {
        let mut queue = lock(&self.queue);
        let own = queue
            .iter()
            .find(|(_, c)| c.ip == ip && c.phase.waiting() == Some(Waiting::Idle))
            .map(|(key, _)| *key);
        let Some(conn) = own.and_then(|key| queue.remove(&key)) else {
            return false;
        };
        conn.give_way.notify_one();
        true
    }

    /// Connections counted against `ip` now.
    #[cfg(test)]
    fn counted(&self, ip: IpAddr) -> usize {
        lock(&self.per_peer)
            .get(&ip.to_canonical())
            .copied()
            .unwrap_or(0)
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    fn told(conn: &Conn) -> bool {
        let notified = conn.give_way.notified();
        tokio::pin!(notified);
        // A stored notification completes the first poll.
        notified.as_mut().enable()
    }

    /// A request, answered: the connection is idle.
    fn answer(slots: &Slots, a: &Admitted) {
        a.conn.phase.request();
        slots.busy(&a.conn);
        a.conn.phase.answered();
        slots.waits(&a.conn);
    }

    #[test]
    fn one_address_gets_a_quarter_of_the_slots_and_no_more() {
        let slots = Arc::new(Slots::default());
        let held: Vec<Admitted> = (0..MAX_CONNECTIONS_PER_PEER)
            .map(|_| slots.admit(ip(2)).ok().unwrap())
            .collect();
        assert_eq!(
            slots.admit(ip(2)).err(),
            Some(Refused::PeerFull),
            "none of its own is idle"
        );
        // The same address written as IPv4-mapped IPv6 is the same peer.
        let mapped = IpAddr::from(std::net::Ipv4Addr::new(127, 0, 0, 2).to_ipv6_mapped());
        assert_eq!(slots.admit(mapped).err(), Some(Refused::PeerFull));
        assert!(slots.admit(ip(1)).is_ok(), "another address is served");
        drop(held);
        assert_eq!(slots.counted(ip(2)), 0, "given back on drop");
        assert!(slots.admit(ip(2)).is_ok());
    }

    #[test]
    fn an_address_at_its_cap_closes_its_own_connection_idle_the_longest() {
        let slots = Arc::new(Slots::default());
        let held: Vec<Admitted> = (0..MAX_CONNECTIONS_PER_PEER)
            .map(|_| slots.admit(ip(2)).ok().unwrap())
            .collect();
        let other = slots.admit(ip(3)).ok().unwrap();
        answer(&slots, &other);
        answer(&slots, &held[7]);
        answer(&slots, &held[3]);
        let probe = slots.admit(ip(2)).ok().unwrap();
        assert!(told(&held[7].conn), "its own idle the longest");
        assert!(!told(&held[3].conn) && !told(&other.conn));
        let next = slots.admit(ip(2)).ok();
        assert!(
            next.is_some() && told(&held[3].conn),
            "then the next idle one"
        );
        assert_eq!(slots.admit(ip(2)).err(), Some(Refused::PeerFull));
        assert_eq!(
            slots.counted(ip(2)),
            MAX_CONNECTIONS_PER_PEER + 2,
            "over the cap until the told ones close"
        );
        drop((probe, held));
        assert_eq!(slots.counted(ip(2)), 1);
    }

    #[test]
    fn over_the_cap_only_by_a_few_while_they_close() {
        let slots = Arc::new(Slots::default());
        let held: Vec<Admitted> = (0..MAX_CONNECTIONS_PER_PEER)
            .map(|_| slots.admit(ip(2)).ok().unwrap())
            .collect();
        for a in &held {
            answer(&slots, a);
        }
        // The told ones have not closed yet.
        let more: Vec<Admitted> = (0..OVER_CAP)
            .map(|_| slots.admit(ip(2)).ok().unwrap())
            .collect();
        assert_eq!(slots.admit(ip(2)).err(), Some(Refused::PeerFull));
        drop(more);
    }

    #[test]
    fn the_connection_waiting_longest_gives_way_and_one_in_flight_never_does() {
        let slots = Arc::new(Slots::new(3));
        let a = slots.admit(ip(1)).ok().unwrap();
        let b = slots.admit(ip(2)).ok().unwrap();
        let c = slots.admit(ip(3)).ok().unwrap();
        // a: a request in flight. b: answered, idle since. c: no request yet, but it
        // began waiting before b went idle.
        a.conn.phase.request();
        slots.busy(&a.conn);
        b.conn.phase.request();
        slots.busy(&b.conn);
        b.conn.phase.answered();
        slots.waits(&b.conn);

        let d = slots.admit(ip(4)).ok().unwrap();
        assert!(matches!(d.slot, Slot::AfterGiveWay(_)));
        assert!(told(&c.conn), "c waited longest");
        assert_eq!(c.conn.phase.waiting(), Some(Waiting::Fresh));
        assert!(!told(&a.conn) && !told(&b.conn));

        let e = slots.admit(ip(5)).ok().unwrap();
        assert!(matches!(e.slot, Slot::AfterGiveWay(_)));
        assert!(told(&b.conn), "then the idle one");
        assert_eq!(b.conn.phase.waiting(), Some(Waiting::Idle));
        assert!(!told(&a.conn), "never the one with a request in flight");
        // d and e wait too (fresh), so a sixth goes on; with them gone, none is left.
        slots.busy(&d.conn);
        slots.busy(&e.conn);
        assert_eq!(slots.admit(ip(6)).err(), Some(Refused::AllBusy));
        assert_eq!(
            slots.counted(ip(6)),
            0,
            "a refused connection is not counted"
        );
    }

    #[test]
    fn a_connection_that_began_its_next_head_is_passed_over() {
        let slots = Arc::new(Slots::new(1));
        let a = slots.admit(ip(1)).ok().unwrap();
        a.conn.phase.request();
        slots.busy(&a.conn);
        a.conn.phase.answered();
        slots.waits(&a.conn);
        a.conn.phase.head_begins();
        assert_eq!(slots.admit(ip(2)).err(), Some(Refused::AllBusy));
        assert!(!told(&a.conn));
    }
}
