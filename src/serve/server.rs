//! The HTTPS webhook (axum on hyper over rustls, HTTP/1.1 keep-alive) and the plain-HTTP
//! admin port: their routes and handlers. The request path reads the snapshot and nothing
//! else. The connections under them are [`accept`](super::accept)'s.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tokio::sync::Notify;

use super::accept::Peer;
use super::admission;
use super::body;
use super::budget::Budget;
use crate::core::reason::Reason;
use crate::core::snapshot::{SharedSnapshot, Snapshot};
use crate::health::Health;
use crate::metrics::{self, RequestReason, SharedMetrics};
use admission::Reviewed;
use prometheus_client::metrics::gauge::Gauge;
use tracing::Level;

pub const WEBHOOK_PATH: &str = "/mutate-machinesets";

pub use super::accept::{ConnLimits, MAX_HEAD, MAX_HEADERS, WRITE_BUFFERS};
pub use super::body::MAX_BODY;
pub use super::refusals::RefusalLog;
pub use super::slots::{MAX_CONNECTIONS, MAX_CONNECTIONS_PER_PEER};

/// What every request reads; shared behind one `Arc`, so a request clones one pointer.
pub(crate) struct AppState {
    pub snapshot: SharedSnapshot,
    pub metrics: SharedMetrics,
    pub health: Arc<Health>,
    /// Rung when a decision waits on something the background learns (an AMI EC2 has not
    /// classified yet), so that it need not wait for the next resync.
    pub wanted: Arc<Notify>,
    /// The same, for an image an importer has not made ready yet (a vSphere template, an
    /// OpenStack image).
    pub wanted_import: Arc<Notify>,
    /// Time allowed for the body to arrive once the headers are in.
    pub body_timeout: Duration,
    /// Bytes a second a body must keep up, on average, once its grace is over.
    pub min_body_rate: u64,
    pub refusals: Arc<RefusalLog>,
    /// Bytes of request bodies held at once (`--max-body-bytes-in-flight`).
    pub budget: Budget,
}

fn peer(req: &Request) -> Option<SocketAddr> {
    req.extensions().get::<Peer>().map(|p| p.0)
}

pub(crate) fn webhook_router(state: AppState) -> Router {
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

fn fail(
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
    let limits = body::Limits {
        timeout: st.body_timeout,
        min_rate: st.min_body_rate,
    };
    let ip = peer.map_or(IpAddr::V6(Ipv6Addr::UNSPECIFIED), |p| p.ip());
    let (bytes, _charge) = match body::read(&st.budget, limits, req, ip).await {
        Ok(read) => read,
        Err(r) => {
            let mut res = fail(&st, peer, start, r.code, r.reason, &r.message);
            if r.retry_after {
                res.headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            }
            return res;
        }
    };

    let snapshot = st.snapshot.load();
    match admission::review(&bytes, &snapshot) {
        Ok(r) => {
            log_decision(&r, &snapshot);
            // Not an await: a flag the background task picks up.
            match r.decision.reason {
                Reason::AMIUnclassified => st.wanted.notify_one(),
                Reason::TemplateNotImported | Reason::ImageNotImported => {
                    st.wanted_import.notify_one()
                }
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
fn log_decision(r: &Reviewed<'_>, snapshot: &Snapshot) {
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
                enrolled = r.decision.enrolled.map(|k| text(snapshot.cluster.enrollment_rule(k))),
                snapshot = %snapshot.id,
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

pub(crate) fn admin_router(metrics: SharedMetrics, health: Arc<Health>) -> Router {
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
