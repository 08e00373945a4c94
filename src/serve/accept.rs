//! The accept loop of both ports: connections admitted to their slots, TLS (or plain
//! HTTP) opened under a deadline, HTTP/1.1 served on each until it ends or is told to give
//! way, and the drain on stop.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use super::budget::Budget;
use super::deadline::{Deadline, Timeouts, Waiting, WriteCharge};
use super::refusals::RefusalLog;
use super::slots::{Admitted, Conn, MAX_CONNECTIONS, MAX_CONNECTIONS_PER_PEER, Slots};
use super::tls::Serving;
use crate::health::until;

/// The client's address, put on each request by the accept loop.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Peer(pub SocketAddr);

#[derive(Debug, Clone, Copy)]
pub struct ConnLimits {
    /// For the TLS handshake and for the first byte, against idle or slow clients.
    pub handshake_timeout: Duration,
    /// For each request head, from its first byte (the first one: from the handshake).
    pub header_read_timeout: Duration,
    /// For a keep-alive connection between requests.
    pub idle_timeout: Duration,
}

const PLAIN_HTTP_REPLY: &[u8] = b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nConnection: close\r\nContent-Length: 48\r\n\r\nClient sent an HTTP request to an HTTPS server.\n";

/// The most a request head may take, request line included (431 beyond): one TLS record.
/// It bounds each connection's read buffer while a head comes in, so that the heads of
/// every slot together stay a small, fixed part of the memory limit. An apiserver's head
/// is a few hundred bytes.
pub const MAX_HEAD: usize = 16 * 1024;

/// Header fields in a request head (431 beyond); an apiserver sends a handful.
pub const MAX_HEADERS: usize = 32;

/// What a connection whose response write is blocked may hold in buffers, charged to the
/// budget while it waits: TLS's send buffer (rustls's default limit, 64 KiB) and hyper's
/// (bounded like the head).
pub const WRITE_BUFFERS: usize = 64 * 1024 + MAX_HEAD;

/// How a port turns an accepted TCP connection into a byte stream: TLS, or nothing.
#[derive(Clone)]
pub enum Transport {
    /// TLS with the configuration served at accept time (the cluster's profile can change
    /// it); plain HTTP spoken to it is refused, and logged through the [`RefusalLog`].
    Tls(Arc<Serving>, Arc<RefusalLog>),
    Plain,
}

/// What every connection of a port shares.
struct Port {
    transport: Transport,
    router: Router,
    limits: ConnLimits,
    timeouts: Timeouts,
    slots: Arc<Slots>,
    /// What blocked writes are charged to (the webhook's body budget).
    budget: Option<Budget>,
}

/// A connection's byte stream, TLS or plain.
trait Io: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Io for T {}

/// A port: where it listens, how it speaks, what it serves.
pub struct Listening {
    pub listener: TcpListener,
    pub transport: Transport,
    pub router: Router,
    /// What blocked response writes are charged to, if anything.
    pub budget: Option<Budget>,
}

/// Serve until `stop` turns true, then drain: in-flight requests finish (up to
/// `drain_timeout`, after which what is left is cut), idle keep-alive connections close.
/// A response write the client does not take is cut after the header timeout.
pub async fn serve(
    on: Listening,
    limits: ConnLimits,
    mut stop: watch::Receiver<bool>,
    drain_timeout: Duration,
) {
    let Listening {
        listener,
        transport,
        router,
        budget,
    } = on;
    let port = Arc::new(Port {
        transport,
        router,
        limits,
        timeouts: Timeouts {
            header: limits.header_read_timeout,
            idle: limits.idle_timeout,
            write: limits.header_read_timeout,
        },
        slots: Arc::new(Slots::default()),
        budget,
    });
    // Connections closed as they come are logged like refusals: a burst, then a count.
    let full = RefusalLog::default();
    let mut conns = tokio::task::JoinSet::new();
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = stopped(&mut stop) => break,
        };
        let (tcp, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // EMFILE and friends: back off instead of spinning.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let admitted = match port.slots.admit(peer.ip()) {
            Ok(a) => a,
            Err(why) => {
                if let Some(suppressed) = full.admit() {
                    tracing::warn!(%peer, limit = MAX_CONNECTIONS, per_peer = MAX_CONNECTIONS_PER_PEER, suppressed, "{why}; closing this one");
                }
                continue;
            }
        };
        // Reap finished connection tasks so the set does not grow.
        while conns.try_join_next().is_some() {}
        let stop = stop.clone();
        conns.spawn(connection(port.clone(), stop, tcp, peer, admitted));
    }
    drop(listener);
    let drained = async { while conns.join_next().await.is_some() {} };
    if tokio::time::timeout(drain_timeout, drained).await.is_err() {
        tracing::warn!(
            ?drain_timeout,
            left = conns.len(),
            "connections still open after the drain timeout; closing them"
        );
    }
    conns.abort_all();
}

impl Port {
    /// The connection's byte stream: the TCP stream, or TLS after a handshake with the
    /// configuration of the moment it starts (`None`: plain HTTP refused, or no handshake).
    async fn open(&self, tcp: TcpStream, peer: SocketAddr) -> Option<Box<dyn Io>> {
        let (serving, refusals) = match &self.transport {
            Transport::Plain => return Some(Box::new(tcp)),
            Transport::Tls(serving, refusals) => (serving, refusals),
        };
        let wait = self.limits.handshake_timeout;
        let tcp = plain_http_guard(tcp, peer, refusals, wait).await?;
        match tokio::time::timeout(wait, serving.acceptor().accept(tcp)).await {
            Ok(Ok(tls)) => Some(Box::new(tls)),
            Ok(Err(e)) => {
                tracing::debug!(%peer, error = %e, "TLS handshake failed");
                None
            }
            Err(_) => {
                tracing::debug!(%peer, "TLS handshake timed out");
                None
            }
        }
    }
}

/// One connection, from its slot to its end, or until it is told to give way while it
/// waits for a request.
async fn connection(
    port: Arc<Port>,
    mut stop: watch::Receiver<bool>,
    tcp: TcpStream,
    peer: SocketAddr,
    admitted: Admitted,
) {
    let Admitted {
        slot,
        conn,
        peer: _counted,
    } = admitted;
    let _leave = Leave(&port.slots, &conn);
    let Some(_permit) = slot.taken().await else {
        return;
    };
    let io = tokio::select! {
        io = port.open(tcp, peer) => io,
        _ = conn.told() => None,
        _ = stopped(&mut stop) => None,
    };
    let Some(io) = io else {
        return;
    };
    serve_http(&port, io, &conn, peer, stop).await;
}

/// HTTP/1.1 on the connection's byte stream until it ends: closed by the client or a
/// timeout, drained on `stop`, or closed to make room while it waits for a request.
async fn serve_http(
    port: &Arc<Port>,
    io: Box<dyn Io>,
    conn: &Arc<Conn>,
    peer: SocketAddr,
    mut stop: watch::Receiver<bool>,
) {
    let service = tower::ServiceExt::map_request(port.router.clone(), {
        let (port, conn) = (port.clone(), conn.clone());
        move |mut req: Request<hyper::body::Incoming>| {
            // A whole head: a request in flight, which never gives way.
            conn.phase.request();
            port.slots.busy(&conn);
            req.extensions_mut().insert(Peer(peer));
            req
        }
    });
    let service = TowerToHyperService::new(tower::ServiceExt::map_response(service, {
        let (port, conn) = (port.clone(), conn.clone());
        move |res| {
            conn.phase.answered();
            port.slots.waits(&conn);
            res
        }
    }));
    let mut http = hyper::server::conn::http1::Builder::new();
    // Heads and idle connections are timed by `Deadline`, not by hyper.
    http.header_read_timeout(None)
        .keep_alive(true)
        .max_buf_size(MAX_HEAD)
        .max_headers(MAX_HEADERS);
    let charge = port.budget.clone().map(|budget| WriteCharge {
        budget,
        peer: peer.ip(),
        bytes: WRITE_BUFFERS,
    });
    let io = Deadline::new(io, conn.phase.clone(), port.timeouts, charge);
    let served = http.serve_connection(TokioIo::new(io), service);
    tokio::pin!(served);
    let mut closing = false;
    loop {
        tokio::select! {
            result = served.as_mut() => {
                if let Err(e) = result {
                    tracing::debug!(%peer, error = %e, "connection ended with an error");
                }
                return;
            }
            _ = stopped(&mut stop), if !closing => {
                served.as_mut().graceful_shutdown();
                closing = true;
            }
            _ = conn.told(), if !closing => match conn.phase.waiting() {
                // Never a whole head: nothing to finish.
                Some(Waiting::Fresh) => {
                    tracing::debug!(%peer, "no request head yet; closed to make room for a new connection");
                    return;
                }
                // Its last response not taken: nothing to wait for.
                Some(Waiting::Idle) if conn.phase.write_blocked() => {
                    tracing::debug!(%peer, "response write blocked; closed to make room for a new connection");
                    return;
                }
                // Idle: closed once its last response is out.
                Some(Waiting::Idle) => {
                    tracing::debug!(%peer, "idle the longest; closed to make room for a new connection");
                    served.as_mut().graceful_shutdown();
                    closing = true;
                }
                // A request came in as it was told: it stays.
                None => {}
            },
        }
    }
}

/// Leaves the queue when the connection ends, however it ends.
struct Leave<'a>(&'a Slots, &'a Conn);

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        self.0.busy(self.1);
    }
}

/// A TLS connection starts with a handshake record (0x16). A letter means someone spoke
/// plain HTTP to the TLS port: tell them, as Go servers do, instead of a TLS alert.
async fn plain_http_guard(
    mut tcp: TcpStream,
    peer: SocketAddr,
    refusals: &RefusalLog,
    wait: Duration,
) -> Option<TcpStream> {
    let mut first = [0u8; 1];
    match tokio::time::timeout(wait, tcp.peek(&mut first)).await {
        Ok(Ok(1)) if first[0].is_ascii_alphabetic() => {
            if let Some(suppressed) = refusals.admit() {
                tracing::warn!(
                    code = 400,
                    reason = "PlainHTTP",
                    peer = %peer,
                    suppressed,
                    "refused a request with 400 Bad Request: plain HTTP sent to the HTTPS port"
                );
            }
            let _ = tcp.write_all(PLAIN_HTTP_REPLY).await;
            let _ = tcp.shutdown().await;
            None
        }
        Ok(Ok(1)) => Some(tcp),
        _ => None,
    }
}

async fn stopped(stop: &mut watch::Receiver<bool>) {
    until(stop, true).await;
}

/// Bind, saying which address in the error.
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| std::io::Error::new(e.kind(), format!("binding {addr}: {e}")))
}
