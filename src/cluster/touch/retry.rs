//! When the toucher tries again (behaviour §7): a fault of the moment (the API server
//! unreachable, overloaded or restarting) is retried with a capped, jittered backoff until
//! a pass completes; anything else waits for the next pass. Only the revert-loop rule
//! gives up on a MachineSet.

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};

/// The longest a retry waits before its jitter (which adds up to as much again), so that
/// after a long API server outage the touches resume soon after its end.
pub(crate) const MAX_RETRY_DELAY: Duration = Duration::from_secs(30);

/// The shortest first delay, whatever `--touch-backoff` says: a retry never spins.
pub(crate) const MIN_RETRY_DELAY: Duration = Duration::from_millis(100);

/// No answer from the API server within this: the call is abandoned as a transient fault
/// (the client itself has no read timeout).
pub(crate) const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a call to the API server failed.
#[derive(Debug, thiserror::Error)]
pub enum Fault {
    #[error(transparent)]
    Kube(#[from] kube::Error),
    #[error("no answer from the API server within {0:?}")]
    TimedOut(Duration),
}

impl Fault {
    /// Whether trying again soon may succeed: the connection failed or was cut, the API
    /// server did not answer in time, was overloaded (429) or failed (5xx). Refusals (403,
    /// 404, 422, ...) are answers, and asking again at once would get the same one.
    pub(crate) fn is_transient(&self) -> bool {
        match self {
            Fault::TimedOut(_) => true,
            Fault::Kube(kube::Error::Api(status)) => {
                status.code == 408 || status.code == 429 || status.code >= 500
            }
            Fault::Kube(
                kube::Error::HyperError(_) | kube::Error::Service(_) | kube::Error::ReadEvents(_),
            ) => true,
            Fault::Kube(_) => false,
        }
    }

    /// The HTTP status the API server answered with, if it answered.
    pub fn code(&self) -> Option<u16> {
        match self {
            Fault::Kube(kube::Error::Api(status)) => Some(status.code),
            _ => None,
        }
    }
}

/// A call to the API server, abandoned after [`CALL_TIMEOUT`].
pub async fn within<T>(call: impl Future<Output = Result<T, kube::Error>>) -> Result<T, Fault> {
    match tokio::time::timeout(CALL_TIMEOUT, call).await {
        Ok(result) => result.map_err(Fault::Kube),
        Err(_) => Err(Fault::TimedOut(CALL_TIMEOUT)),
    }
}

/// The delays between passes retried after a transient fault: `first`, doubling, capped
/// at [`MAX_RETRY_DELAY`] and at half the resync (the resync's pass comes anyway), each
/// with up to as much again at random so that retries do not come in step.
#[derive(Debug)]
pub(crate) struct Backoff {
    builder: ExponentialBuilder,
    delays: ExponentialBackoff,
}

impl Backoff {
    pub fn new(first: Duration, resync: Duration) -> Self {
        let first = first.max(MIN_RETRY_DELAY);
        let cap = MAX_RETRY_DELAY.min(resync / 2).max(first);
        let builder = ExponentialBuilder::default()
            .with_min_delay(first)
            .with_max_delay(cap)
            .with_factor(2.0)
            .with_jitter()
            .without_max_times();
        Backoff {
            delays: builder.build(),
            builder,
        }
    }

    /// The wait before the next retry.
    pub(crate) fn next_delay(&mut self) -> Duration {
        // Unbounded in count: the schedule never ends.
        self.delays.next().unwrap_or(MAX_RETRY_DELAY)
    }

    /// After a pass that completed: the next fault starts from `first` again.
    pub(crate) fn reset(&mut self) {
        self.delays = self.builder.build();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;

    fn api(code: u16) -> Fault {
        Fault::Kube(kube::Error::Api(Box::new(Status {
            code,
            ..Status::failure("x", "y")
        })))
    }

    #[test]
    fn faults_of_the_moment_are_transient_and_answers_are_not() {
        for code in [408, 429, 500, 502, 503, 504] {
            assert!(api(code).is_transient(), "{code}");
        }
        for code in [400, 401, 403, 404, 409, 410, 422] {
            assert!(!api(code).is_transient(), "{code}");
        }
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert!(Fault::Kube(kube::Error::Service(Box::new(refused))).is_transient());
        let cut = std::io::Error::from(std::io::ErrorKind::UnexpectedEof);
        assert!(Fault::Kube(kube::Error::ReadEvents(cut)).is_transient());
        assert!(Fault::TimedOut(CALL_TIMEOUT).is_transient());
        let garbage = serde_json::from_str::<u8>("x").unwrap_err();
        assert!(!Fault::Kube(kube::Error::SerdeError(garbage)).is_transient());
        assert_eq!(api(503).code(), Some(503));
        assert_eq!(Fault::TimedOut(CALL_TIMEOUT).code(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_that_never_answers_is_a_timeout() {
        let never = std::future::pending::<Result<(), kube::Error>>();
        let fault = within(never).await.unwrap_err();
        assert!(matches!(fault, Fault::TimedOut(d) if d == CALL_TIMEOUT));
    }

    /// Each delay is its step of the doubling schedule plus up to as much again.
    fn assert_schedule(b: &mut Backoff, steps: &[u64]) {
        for (i, &step) in steps.iter().enumerate() {
            let d = b.next_delay();
            let step = Duration::from_secs(step);
            assert!(
                step <= d && d < step * 2,
                "retry {}: {d:?} is not in [{step:?}, {:?})",
                i + 1,
                step * 2
            );
        }
    }

    #[test]
    fn the_schedule_doubles_from_the_first_delay_to_the_cap_with_jitter() {
        // The shipped defaults: --touch-backoff 2s, --touch-resync 10m.
        let mut b = Backoff::new(Duration::from_secs(2), Duration::from_secs(600));
        assert_schedule(&mut b, &[2, 4, 8, 16, 30, 30, 30, 30, 30, 30]);
        // Two schedules differ: the jitter is random.
        let mut other = Backoff::new(Duration::from_secs(2), Duration::from_secs(600));
        let ours: Vec<Duration> = (0..20).map(|_| b.next_delay()).collect();
        let theirs: Vec<Duration> = (0..20).map(|_| other.next_delay()).collect();
        assert_ne!(ours, theirs);
        b.reset();
        assert_schedule(&mut b, &[2, 4]);
    }

    #[test]
    fn the_schedule_never_waits_past_the_resync() {
        let resync = Duration::from_secs(20);
        let mut b = Backoff::new(Duration::from_secs(2), resync);
        assert_schedule(&mut b, &[2, 4, 8, 10, 10, 10]);
        for _ in 0..100 {
            assert!(b.next_delay() < resync);
        }
        // A first delay above the cap is kept as it is.
        let mut b = Backoff::new(Duration::from_secs(5), Duration::from_secs(4));
        assert_schedule(&mut b, &[5, 5]);
        // None: a retry never spins.
        let mut b = Backoff::new(Duration::ZERO, Duration::from_secs(600));
        assert!(b.next_delay() >= MIN_RETRY_DELAY);
    }
}
