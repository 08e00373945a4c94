//! The HTTPS webhook (axum on hyper over rustls, HTTP/1.1 keep-alive) and the plain-HTTP
//! admin port. The request path reads the snapshot and nothing else.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};

use super::admission;
use super::body;
use super::budget::Budget;
use super::deadline::{Deadline, Timeouts, Waiting};
use super::slots::{Admitted, Conn, Slots};
use super::tls::Serving;
use crate::core::reason::Reason;
use crate::core::snapshot::SharedSnapshot;
use crate::health::{Health, until};
use crate::metrics::{self, RequestReason, SharedMetrics};
use admission::Reviewed;
use prometheus_client::metrics::gauge::Gauge;
use tracing::Level;

pub const WEBHOOK_PATH: &str = "/mutate-machinesets";
/// Well above the apiserver's 3 MiB request cap; an UPDATE carries two objects.
pub const MAX_BODY: usize = 8 * 1024 * 1024;

/// What every request reads; shared behind one `Arc`, so a request clones one pointer.
pub struct AppState {
    pub snapshot: SharedSnapshot,
    pub metrics: SharedMetrics,
    pub health: Arc<Health>,
    /// Rung when a decision waits on something the background learns (an AMI EC2 has not
    /// classified yet), so that it need not wait for the next resync.
    pub wanted: Arc<Notify>,
    /// The same, for a vSphere template the importer has not made ready yet.
    pub wanted_template: Arc<Notify>,
    /// Time allowed for the body to arrive once the headers are in.
    pub body_timeout: Duration,
    /// Bytes a second a body must keep up, on average, once its grace is over.
    pub min_body_rate: u64,
    pub refusals: Arc<RefusalLog>,
    /// Bytes of request bodies held at once (`--max-body-bytes-in-flight`).
    pub budget: Budget,
}

/// The client's address, put on each request by the accept loop.
#[derive(Debug, Clone, Copy)]
pub struct Peer(pub SocketAddr);

fn peer(req: &Request) -> Option<SocketAddr> {
    req.extensions().get::<Peer>().map(|p| p.0)
}

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
    fn admit(&self) -> Option<u64> {
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

pub fn webhook_router(state: AppState) -> Router {
    Router::new()
        .route(WEBHOOK_PATH, post(mutate).fallback(method_not_allowed))
        .fallback(not_found)
        .with_state(Arc::new(state))
}

type St = State<Arc<AppState>>;

/// One exit for every webhook response: metrics, content type, and `Connection: close`
/// while draining so that clients move to another replica.
fn respond(
    st: &AppState,
    start: Instant,
    code: StatusCode,
    outcome: RequestReason,
    body: Vec<u8>,
) -> Response {
    let seconds = start.elapsed().as_secs_f64();
    match outcome {
        RequestReason::Decided(reason) => st.metrics.requests.decided(reason, seconds),
        RequestReason::Refused(class) => st.metrics.requests.refused(class, code.as_u16(), seconds),
    }
    let mut res = (code, body).into_response();
    let headers = res.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if st.health.shutting_down.load(Ordering::Acquire) {
        headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    res
}

pub(super) fn fail(
    st: &AppState,
    peer: Option<SocketAddr>,
    start: Instant,
    code: StatusCode,
    reason: &'static str,
    message: &str,
) -> Response {
    if let Some(suppressed) = st.refusals.admit() {
        let peer = peer.map_or_else(|| "unknown".to_owned(), |p| p.to_string());
        tracing::warn!(
            code = code.as_u16(),
            reason,
            peer = %peer,
            suppressed,
            "refused a request with {code}: {message}"
        );
    }
    respond(
        st,
        start,
        code,
        RequestReason::Refused(reason),
        admission::error_body(code.as_u16(), message),
    )
}

async fn not_found(State(st): St, req: Request) -> Response {
    let msg = format!(
        "no such path {}; the webhook is POST {WEBHOOK_PATH}",
        req.uri().path()
    );
    let peer = peer(&req);
    fail(
        &st,
        peer,
        Instant::now(),
        StatusCode::NOT_FOUND,
        "NotFound",
        &msg,
    )
}

async fn method_not_allowed(State(st): St, req: Request) -> Response {
    let msg = format!("method {} not allowed; use POST", req.method());
    let mut res = fail(
        &st,
        peer(&req),
        Instant::now(),
        StatusCode::METHOD_NOT_ALLOWED,
        "MethodNotAllowed",
        &msg,
    );
    res.headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static("POST"));
    res
}

/// Counts a request in flight until it is answered (or dropped).
struct InFlight<'a>(&'a Gauge);

impl<'a> InFlight<'a> {
    fn new(gauge: &'a Gauge) -> Self {
        gauge.inc();
        InFlight(gauge)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.dec();
    }
}

async fn mutate(State(st): St, req: Request) -> Response {
    let start = Instant::now();
    let _in_flight = InFlight::new(&st.metrics.requests.in_flight);
    let peer = peer(&req);
    let (bytes, _charge) = match body::read(&st, req, peer, start).await {
        Ok(read) => read,
        Err(refused) => return refused,
    };

    let snapshot = st.snapshot.load();
    match admission::review(&bytes, &snapshot) {
        Ok(r) => {
            log_decision(&r, &snapshot.id);
            // Not an await: a flag the background task picks up.
            match r.decision.reason {
                Reason::AMIUnclassified => st.wanted.notify_one(),
                Reason::TemplateNotImported => st.wanted_template.notify_one(),
                _ => {}
            }
            let reason = RequestReason::Decided(r.decision.reason);
            respond(&st, start, StatusCode::OK, reason, r.body)
        }
        Err(e) => fail(
            &st,
            peer,
            start,
            StatusCode::BAD_REQUEST,
            "InvalidReview",
            &e.to_string(),
        ),
    }
}

/// One line per decision: at info when the image moves, at debug otherwise (a MachineSet
/// scaled a hundred times a day is not news). Strings are written as they are (`%`):
/// `Debug` would escape them a character at a time.
fn log_decision(r: &Reviewed<'_>, snapshot: &str) {
    use tracing::field::display as text;
    macro_rules! line {
        ($level:expr) => {
            tracing::event!(
                $level,
                uid = %r.uid,
                machineset = %format_args!("{}/{}", r.namespace, r.name),
                operation = %r.operation,
                dry_run = r.dry_run,
                reason = %r.decision.reason,
                platform = r.decision.platform.map(text),
                arch = r.decision.arch.map(|a| text(a.rpm())),
                current = r.decision.current.as_deref().map(text),
                target = r.decision.target.as_deref().map(text),
                snapshot = %snapshot,
                "{}", r.decision.story(&r.name)
            )
        };
    }
    if r.decision.reason == Reason::Updated {
        line!(Level::INFO);
    } else {
        line!(Level::DEBUG);
    }
}

pub fn admin_router(metrics: SharedMetrics, health: Arc<Health>) -> Router {
    let ready = {
        let health = health.clone();
        move || async move {
            match health.ready() {
                Ok(()) => (StatusCode::OK, "ready\n".to_owned()),
                Err(why) => (
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("not ready: {why}\n"),
                ),
            }
        }
    };
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(ready))
        .route(
            "/metrics",
            get(move || async move {
                (
                    [(header::CONTENT_TYPE, metrics::CONTENT_TYPE)],
                    metrics.render(),
                )
            }),
        )
}

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

pub use super::slots::{MAX_CONNECTIONS, MAX_CONNECTIONS_PER_PEER};

/// The most a request head may take, request line included (431 beyond): one TLS record.
/// It bounds each connection's read buffer while a head comes in, so that the heads of
/// every slot together stay a small, fixed part of the memory limit. An apiserver's head
/// is a few hundred bytes.
pub const MAX_HEAD: usize = 16 * 1024;

/// Header fields in a request head (431 beyond); an apiserver sends a handful.
pub const MAX_HEADERS: usize = 32;

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
}

/// A connection's byte stream, TLS or plain.
trait Io: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Io for T {}

/// Serve until `stop` turns true, then drain: in-flight requests finish (up to
/// `drain_timeout`, after which what is left is cut), idle keep-alive connections close.
pub async fn serve(
    listener: TcpListener,
    transport: Transport,
    router: Router,
    limits: ConnLimits,
    mut stop: watch::Receiver<bool>,
    drain_timeout: Duration,
) {
    let port = Arc::new(Port {
        transport,
        router,
        limits,
        timeouts: Timeouts {
            header: limits.header_read_timeout,
            idle: limits.idle_timeout,
        },
        slots: Arc::new(Slots::default()),
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
    let io = Deadline::new(io, conn.phase.clone(), port.timeouts);
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
