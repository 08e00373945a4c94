//! The clock a connection's reads run against, by where it is between requests:
//!
//! - **fresh** (TLS up, no request yet): the whole first head within the header timeout,
//!   as hyper's own timer would, so a client that never asks is cut off soon;
//! - **idle** (a response sent, waiting for the next request): the idle timeout, longer
//!   than the apiserver's own (Go's `IdleConnTimeout`, 90 s), so that the client, not
//!   us, closes a keep-alive connection and no request races a close;
//! - **head** (the first byte of the next request is in): the header timeout again;
//! - **busy** (the head is whole, the handler has the request): no clock here; the
//!   handler has its body timeout.
//!
//! Writes have a clock of their own: a response the client does not take (the write
//! blocked, its buffers full) ends the connection after the write timeout, and while it
//! waits the connection is charged to the budget for the buffers it holds, so that the
//! budget can evict it sooner when it needs the room.
//!
//! hyper's `header_read_timeout` cannot do this: its timer starts when hyper starts to
//! read a head, which for a keep-alive connection is as soon as it goes idle, so idle
//! connections were closed after the header timeout and opened again.

use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

use super::budget::{Budget, Charge, Full};

/// Where a connection is; shared by its IO (which reads it, and sees a head begin) and
/// its service (which sees a head complete and a response leave). The low two bits are
/// the phase, the rest counts requests, so that every change of phase restarts the clock
/// even when a pipelined request skips one. One task touches it: relaxed is enough.
#[derive(Debug, Default)]
pub struct Phase(AtomicU32, AtomicBool);

const FRESH: u32 = 0;
const IDLE: u32 = 1;
const HEAD: u32 = 2;
const BUSY: u32 = 3;
const PHASE: u32 = 3;
const ONE_REQUEST: u32 = 4;

impl Phase {
    /// A whole request head reached the service. True if it was the connection's first.
    pub fn request(&self) -> bool {
        let was = self.0.load(Ordering::Relaxed);
        let next = (was & !PHASE).wrapping_add(ONE_REQUEST) | BUSY;
        self.0.store(next, Ordering::Relaxed);
        was & PHASE == FRESH
    }

    /// The service answered: the connection waits for its next request.
    pub fn answered(&self) {
        let was = self.0.load(Ordering::Relaxed);
        self.0.store(was & !PHASE | IDLE, Ordering::Relaxed);
    }

    /// Whether the connection waits for a request, and which: its first (nothing whole
    /// yet), or its next (idle); `None` while a request is under way, its head begun.
    pub fn waiting(&self) -> Option<Waiting> {
        match self.get() & PHASE {
            FRESH => Some(Waiting::Fresh),
            IDLE => Some(Waiting::Idle),
            _ => None,
        }
    }

    fn get(&self) -> u32 {
        self.0.load(Ordering::Relaxed)
    }

    /// Whether a response write waits for the client to take what was sent.
    pub fn write_blocked(&self) -> bool {
        self.1.load(Ordering::Relaxed)
    }

    /// Idle to head, on the first byte; nothing else (a fresh head is already timed).
    pub(crate) fn head_begins(&self) -> Option<u32> {
        let was = self.get();
        (was & PHASE == IDLE).then(|| {
            let now = was & !PHASE | HEAD;
            self.0.store(now, Ordering::Relaxed);
            now
        })
    }
}

/// What a waiting connection waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waiting {
    /// Its first request: no whole head yet (the TLS handshake, or a head dripping in).
    Fresh,
    /// Its next request, idle after a response.
    Idle,
}

#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    pub header: Duration,
    pub idle: Duration,
    /// For a write the client does not take.
    pub write: Duration,
}

/// What a blocked write is charged to: the port's budget, under the client's address, for
/// `bytes` (what a connection's write buffers can hold).
#[derive(Clone)]
pub struct WriteCharge {
    pub budget: Budget,
    pub peer: IpAddr,
    pub bytes: usize,
}

/// A write under way that the client does not take.
struct Blocked {
    until: Pin<Box<Sleep>>,
    charge: Option<Result<Charge, Full>>,
}

/// An IO that ends reading (end of stream, as a client closing would) when the clock of
/// its phase runs out.
pub struct Deadline<T> {
    io: T,
    phase: Arc<Phase>,
    timeouts: Timeouts,
    /// The state (phase and request count) the deadline below was set for.
    timed: u32,
    deadline: Instant,
    /// Armed only when a read has to wait, and only moved when the deadline did.
    sleep: Pin<Box<Sleep>>,
    charge: Option<WriteCharge>,
    blocked: Option<Blocked>,
}

impl<T> Deadline<T> {
    pub fn new(io: T, phase: Arc<Phase>, timeouts: Timeouts, charge: Option<WriteCharge>) -> Self {
        let deadline = Instant::now() + timeouts.header;
        Deadline {
            io,
            phase,
            timeouts,
            timed: FRESH,
            deadline,
            sleep: Box::pin(tokio::time::sleep_until(deadline)),
            charge,
            blocked: None,
        }
    }

    /// A write's outcome, held to the write clock: pending, it starts the clock and the
    /// charge, and fails once the clock runs out or the charge is refused or evicted.
    fn wrote<R>(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<io::Result<R>>,
    ) -> Poll<io::Result<R>> {
        if polled.is_ready() {
            if self.blocked.take().is_some() {
                self.phase.1.store(false, Ordering::Relaxed);
            }
            return polled;
        }
        let (timeout, charge) = (self.timeouts.write, &self.charge);
        let blocked = self.blocked.get_or_insert_with(|| Blocked {
            until: Box::pin(tokio::time::sleep(timeout)),
            charge: charge.as_ref().map(|c| c.budget.charge(c.peer, c.bytes)),
        });
        self.phase.1.store(true, Ordering::Relaxed);
        let why = match &blocked.charge {
            Some(Err(full)) => format!("a response write is blocked and {full}"),
            Some(Ok(c)) if c.poll_evicted(cx).is_ready() => {
                "a blocked response write was evicted to make room".to_owned()
            }
            _ if blocked.until.as_mut().poll(cx).is_ready() => {
                format!("a response write was blocked for {timeout:?}")
            }
            _ => return Poll::Pending,
        };
        tracing::debug!("{why}; closing the connection");
        Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, why)))
    }

    fn start_clock(&mut self, state: u32) {
        self.timed = state;
        let limit = match state & PHASE {
            IDLE => self.timeouts.idle,
            _ => self.timeouts.header,
        };
        self.deadline = Instant::now() + limit;
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Deadline<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let state = this.phase.get();
        let phase = state & PHASE;
        if state != this.timed && phase != BUSY {
            this.start_clock(state);
        }
        let before = buf.filled().len();
        match Pin::new(&mut this.io).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before
                    && let Some(head) = this.phase.head_begins()
                {
                    this.start_clock(head);
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending if phase == BUSY => Poll::Pending,
            Poll::Pending => {
                if this.sleep.deadline() != this.deadline {
                    this.sleep.as_mut().reset(this.deadline);
                }
                ready!(this.sleep.as_mut().poll(cx));
                // Out of time: the stream ends here, as if the client had closed it.
                tracing::debug!(phase = name(phase), "connection timed out");
                Poll::Ready(Ok(()))
            }
        }
    }
}

fn name(phase: u32) -> &'static str {
    match phase {
        FRESH => "waiting for the first request",
        IDLE => "idle",
        _ => "reading a request head",
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Deadline<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.io).poll_write(cx, buf);
        this.wrote(cx, polled)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        this.wrote(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.io).poll_flush(cx);
        this.wrote(cx, polled)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.io).poll_shutdown(cx);
        this.wrote(cx, polled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    const T: Timeouts = Timeouts {
        header: Duration::from_secs(5),
        idle: Duration::from_secs(120),
        write: Duration::from_secs(5),
    };

    async fn ends_after(io: &mut Deadline<tokio::io::DuplexStream>) -> Duration {
        let start = Instant::now();
        let mut buf = [0u8; 8];
        assert_eq!(io.read(&mut buf).await.unwrap(), 0, "the stream ends");
        start.elapsed()
    }

    #[tokio::test(start_paused = true)]
    async fn each_phase_has_its_clock() {
        let (a, client) = tokio::io::duplex(64);
        let phase = Arc::new(Phase::default());
        let mut io = Deadline::new(a, phase.clone(), T, None);
        // Fresh: the header timeout.
        assert_eq!(ends_after(&mut io).await, T.header);

        let (a, mut client2) = tokio::io::duplex(64);
        let mut io = Deadline::new(a, phase.clone(), T, None);
        assert_eq!(phase.waiting(), Some(Waiting::Fresh));
        assert!(phase.request(), "the first request");
        assert_eq!(phase.waiting(), None);
        // Busy: no clock (the handler has its own); data flows.
        client2.write_all(b"body").await.unwrap();
        let mut buf = [0u8; 4];
        io.read_exact(&mut buf).await.unwrap();
        let waiting = tokio::time::timeout(Duration::from_secs(3600), io.read(&mut buf)).await;
        assert!(waiting.is_err(), "a busy connection is not timed here");
        // Idle: the idle timeout, not the header one.
        phase.answered();
        assert_eq!(ends_after(&mut io).await, T.idle);
        drop(client);
    }

    #[tokio::test(start_paused = true)]
    async fn a_head_begun_while_idle_has_the_header_timeout() {
        let (a, mut client) = tokio::io::duplex(64);
        let phase = Arc::new(Phase::default());
        let mut io = Deadline::new(a, phase.clone(), T, None);
        phase.request();
        phase.answered();
        tokio::time::sleep(Duration::from_secs(100)).await;
        client.write_all(b"POST /").await.unwrap();
        let mut buf = [0u8; 6];
        io.read_exact(&mut buf).await.unwrap();
        assert_eq!(phase.waiting(), None, "a head begun is a request under way");
        assert!(!phase.request(), "not the first");
        phase.answered();
        client.write_all(b"POST /mut").await.unwrap();
        let mut buf = [0u8; 9];
        io.read_exact(&mut buf).await.unwrap();
        assert_eq!(ends_after(&mut io).await, T.header);
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_the_client_does_not_take_is_charged_then_cut() {
        let (a, client) = tokio::io::duplex(64);
        let phase = Arc::new(Phase::default());
        let held = prometheus_client::metrics::gauge::Gauge::default();
        let budget = Budget::new(1 << 20, 1 << 18, held.clone());
        let charge = WriteCharge {
            budget,
            peer: IpAddr::from([127, 0, 0, 2]),
            bytes: 1000,
        };
        let mut io = Deadline::new(a, phase.clone(), T, Some(charge));
        io.write_all(&[b'x'; 64]).await.unwrap();
        assert!(
            !phase.write_blocked() && held.get() == 0,
            "taken: not blocked"
        );
        let start = Instant::now();
        let blocked = io.write_all(b"more");
        tokio::pin!(blocked);
        assert!(futures::poll!(blocked.as_mut()).is_pending());
        assert!(phase.write_blocked());
        assert_eq!(held.get(), 1000, "its buffers charged while it waits");
        let err = blocked.await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert_eq!(start.elapsed(), T.write);
        drop(io);
        assert_eq!(held.get(), 0);
        drop(client);
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_taken_late_is_not_cut() {
        let (a, mut client) = tokio::io::duplex(64);
        let phase = Arc::new(Phase::default());
        let mut io = Deadline::new(a, phase.clone(), T, None);
        io.write_all(&[b'x'; 64]).await.unwrap();
        let reader = tokio::spawn(async move {
            tokio::time::sleep(T.write / 2).await;
            let mut buf = [0u8; 128];
            let n = client.read(&mut buf).await.unwrap();
            (n, client)
        });
        io.write_all(b"more").await.unwrap();
        assert!(!phase.write_blocked());
        let (n, _client) = reader.await.unwrap();
        assert_eq!(n, 64);
    }
}
