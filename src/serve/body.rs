//! A review's body, read into memory against the budget of bodies in flight, or the answer
//! that refuses it. The length must be declared (the apiserver always declares it): the
//! body is charged for it before a byte is read, so that a body that does not fit is
//! refused at once, and one that is admitted is read to the end. Once admitted it must
//! keep coming: after a short grace, at least the minimum rate on average, so that a
//! client that declares a large body and then dawdles gives its charge back within about
//! the grace, not the whole body timeout.

use std::net::IpAddr;
use std::time::Duration;

use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use http_body_util::BodyExt;
use hyper::body::Body as _;
use tokio::time::Instant;

use super::budget::{Budget, Charge, STALLED};

/// Well above the apiserver's 3 MiB request cap; an UPDATE carries two objects.
pub const MAX_BODY: usize = 8 * 1024 * 1024;

/// Time a body has for its first bytes (a lost segment's retransmission, a slow start)
/// before it is held to the minimum rate.
pub const BODY_GRACE: Duration = Duration::from_secs(1);

fn is_json(content_type: Option<&HeaderValue>) -> bool {
    content_type
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
}

/// How fast a body must come.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// The whole body within this, once the head is in.
    pub timeout: Duration,
    /// Bytes a second on average, once the grace is over.
    pub min_rate: u64,
}

/// Why a body was refused, as the answer says it.
#[derive(Debug)]
pub struct Refused {
    pub code: StatusCode,
    pub reason: &'static str,
    pub message: String,
    /// Try again in a second (the budget was full).
    pub retry_after: bool,
}

fn refuse(code: StatusCode, reason: &'static str, message: &str) -> Refused {
    Refused {
        code,
        reason,
        message: message.to_owned(),
        retry_after: false,
    }
}

/// The review's bytes, or why they are refused: not JSON, no declared length, too large,
/// over the budget of bodies in flight, truncated, or too slow to arrive. The charge is
/// held until the request is answered.
pub async fn read(
    budget: &Budget,
    limits: Limits,
    req: Request,
    peer: IpAddr,
) -> Result<(Vec<u8>, Charge), Refused> {
    if !is_json(req.headers().get(header::CONTENT_TYPE)) {
        let got = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("none");
        let msg = format!("Content-Type must be application/json, got {got}");
        return Err(refuse(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "UnsupportedMediaType",
            &msg,
        ));
    }
    let too_large = || {
        let msg = format!("request body is larger than the {MAX_BODY}-byte limit");
        refuse(StatusCode::PAYLOAD_TOO_LARGE, "PayloadTooLarge", &msg)
    };
    // As hyper read the head: the Content-Length, zero for no body at all, none for a
    // chunked one.
    let declared = req.body().size_hint().exact();
    let limit = match declared {
        Some(n) if n > MAX_BODY as u64 => return Err(too_large()),
        Some(n) => n as usize,
        None => {
            let msg = "a request body must declare its length (Content-Length)";
            return Err(refuse(StatusCode::LENGTH_REQUIRED, "LengthRequired", msg));
        }
    };
    let charge = match budget.charge(peer, limit) {
        Ok(charge) => charge,
        Err(full) => {
            let msg = format!(
                "too many request bodies in flight: {limit} more bytes do not fit ({full}: {} bytes in all, {} per address); try again",
                budget.total(),
                budget.share()
            );
            return Err(overloaded(&msg));
        }
    };
    let pace = Pace::new(limits.timeout, limits.min_rate);
    match read_body(req.into_body(), limit, pace, &charge).await {
        Ok(bytes) => Ok((bytes, charge)),
        Err(ReadError::TooLarge) => Err(too_large()),
        Err(ReadError::Unreadable(e)) => {
            let msg = format!("request body truncated or unreadable: {e}");
            Err(refuse(StatusCode::BAD_REQUEST, "BadBody", &msg))
        }
        Err(ReadError::Slow { received }) => {
            let msg = format!(
                "request body too slow: {received} of {limit} bytes after {:?} (at least {} bytes a second after {BODY_GRACE:?}, all within {:?})",
                pace.started.elapsed(),
                limits.min_rate,
                limits.timeout
            );
            Err(refuse(StatusCode::REQUEST_TIMEOUT, "BodyTimeout", &msg))
        }
        Err(ReadError::Evicted { received }) => {
            let msg = format!(
                "request body evicted to make room: {received} of {limit} bytes after {:?}, none for the last {STALLED:?} or more than others hold; try again",
                pace.started.elapsed(),
            );
            Err(overloaded(&msg))
        }
    }
}

fn overloaded(msg: &str) -> Refused {
    Refused {
        retry_after: true,
        ..refuse(StatusCode::SERVICE_UNAVAILABLE, "Overloaded", msg)
    }
}

enum ReadError {
    TooLarge,
    Unreadable(axum::Error),
    Slow {
        received: usize,
    },
    /// Its charge was taken back to make room for another body.
    Evicted {
        received: usize,
    },
}

/// When a body's next bytes are due.
#[derive(Clone, Copy)]
struct Pace {
    started: Instant,
    /// The body timeout: the whole body by then, however fast it came.
    end: Instant,
    bytes_per_second: u64,
}

impl Pace {
    fn new(timeout: Duration, bytes_per_second: u64) -> Self {
        let started = Instant::now();
        Pace {
            started,
            end: started + timeout,
            bytes_per_second: bytes_per_second.max(1),
        }
    }

    /// With `received` bytes in, the next must come before the average falls below the
    /// minimum rate (after the grace), and before the body timeout.
    fn due(&self, received: usize) -> Instant {
        let earned = Duration::from_secs_f64(received as f64 / self.bytes_per_second as f64);
        (self.started + BODY_GRACE + earned).min(self.end)
    }
}

/// The body into one buffer of `limit` bytes at most, allocated once (no copy at the end,
/// so a body costs its length, not twice that), each frame told to the budget as progress.
async fn read_body(
    mut body: axum::body::Body,
    limit: usize,
    pace: Pace,
    charge: &Charge,
) -> Result<Vec<u8>, ReadError> {
    let mut bytes = Vec::with_capacity(limit);
    loop {
        let due = pace.due(bytes.len());
        let next = tokio::select! {
            biased;
            next = tokio::time::timeout_at(due, body.frame()) => next,
            () = charge.evicted() => {
                let received = bytes.len();
                return Err(ReadError::Evicted { received });
            }
        };
        let frame = match next {
            Ok(Some(frame)) => frame.map_err(ReadError::Unreadable)?,
            Ok(None) => return Ok(bytes),
            Err(_) => {
                let received = bytes.len();
                return Err(ReadError::Slow { received });
            }
        };
        if let Ok(data) = frame.into_data() {
            if data.len() > limit - bytes.len() {
                return Err(ReadError::TooLarge);
            }
            bytes.extend_from_slice(&data);
            charge.progressed();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_body_is_due_at_the_minimum_rate_after_the_grace_and_by_the_timeout() {
        let pace = Pace::new(Duration::from_secs(10), 1000);
        let at = |n| pace.due(n) - pace.started;
        assert_eq!(at(0), BODY_GRACE, "nothing yet: the grace");
        assert_eq!(at(500), BODY_GRACE + Duration::from_millis(500));
        assert_eq!(
            at(1_000_000),
            Duration::from_secs(10),
            "never past the timeout"
        );
    }
}
