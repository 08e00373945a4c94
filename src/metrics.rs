//! Prometheus metrics, served as text on the admin port. One registry per server (no
//! globals), so tests can run servers side by side.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::SystemTime;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

use crate::core::snapshot::SharedSnapshot;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// A decision reason, or the error class of a request we could not review.
    pub reason: String,
    pub code: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WatcherLabels {
    pub watcher: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    pub outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SnapshotLabels {
    pub id: String,
}

#[derive(Clone)]
pub struct Metrics {
    registry: Arc<Registry>,
    pub requests: Family<RequestLabels, Counter>,
    pub latency: Histogram,
    pub in_flight: Gauge,
    pub cert_reloads: Counter,
    pub cert_reload_errors: Counter,
    snapshot_age: Gauge<f64, AtomicU64>,
    snapshot: Option<SharedSnapshot>,
    pub gate_open: Gauge,
    pub snapshot_info: Family<SnapshotLabels, Gauge>,
    pub watch_errors: Family<WatcherLabels, Counter>,
    pub configmap_errors: Counter,
    pub touches: Family<OutcomeLabels, Counter>,
    pub touch_given_up: Counter,
    pub leader: Gauge,
}

impl Metrics {
    pub fn new(snapshot: Option<SharedSnapshot>) -> Self {
        let mut registry = Registry::with_prefix("bootimage_webhook");
        let requests = Family::<RequestLabels, Counter>::default();
        // prometheus-client appends `_total` to counters itself.
        registry.register(
            "requests",
            "Admission requests by decision reason (or error) and HTTP status code",
            requests.clone(),
        );
        // 50us .. ~0.8s: the handler is expected in the tens of microseconds.
        let latency = Histogram::new(exponential_buckets(0.000_05, 2.0, 15));
        registry.register_with_unit(
            "request_duration",
            "Time from request head to response, body read included",
            Unit::Seconds,
            latency.clone(),
        );
        let in_flight = Gauge::default();
        registry.register(
            "requests_in_flight",
            "Admission requests being served",
            in_flight.clone(),
        );
        let cert_reloads = Counter::default();
        registry.register(
            "certificate_reloads",
            "Serving certificate pairs loaded after a change on disk",
            cert_reloads.clone(),
        );
        let cert_reload_errors = Counter::default();
        registry.register(
            "certificate_reload_errors",
            "Changed certificate pairs that failed to load (the previous pair stays)",
            cert_reload_errors.clone(),
        );
        let snapshot_age = Gauge::<f64, AtomicU64>::default();
        registry.register_with_unit(
            "snapshot_age",
            "Age of the snapshot the webhook decides from",
            Unit::Seconds,
            snapshot_age.clone(),
        );
        let gate_open = Gauge::default();
        registry.register(
            "gate_open",
            "1 when a master has completed the current upgrade and boot images may move",
            gate_open.clone(),
        );
        let snapshot_info = Family::<SnapshotLabels, Gauge>::default();
        registry.register(
            "snapshot_info",
            "The snapshot id in use (value 1)",
            snapshot_info.clone(),
        );
        let watch_errors = Family::<WatcherLabels, Counter>::default();
        registry.register(
            "watch_errors",
            "Watch errors by watcher; each is followed by a restart with backoff",
            watch_errors.clone(),
        );
        let configmap_errors = Counter::default();
        registry.register(
            "configmap_errors",
            "coreos-bootimages contents that could not be used (the last good snapshot stays)",
            configmap_errors.clone(),
        );
        let touches = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "touches",
            "Touch writes by outcome: moved, not_moved, error, changed",
            touches.clone(),
        );
        let touch_given_up = Counter::default();
        registry.register(
            "touch_given_up",
            "MachineSets left alone after three touches that did not move the image",
            touch_given_up.clone(),
        );
        let leader = Gauge::default();
        registry.register(
            "leader",
            "1 while this replica holds the touch Lease",
            leader.clone(),
        );
        Metrics {
            gate_open,
            snapshot_info,
            watch_errors,
            configmap_errors,
            touches,
            touch_given_up,
            leader,
            registry: Arc::new(registry),
            requests,
            latency,
            in_flight,
            cert_reloads,
            cert_reload_errors,
            snapshot_age,
            snapshot,
        }
    }

    pub fn observe(&self, reason: &str, code: u16, seconds: f64) {
        self.requests
            .get_or_create(&RequestLabels {
                reason: reason.to_owned(),
                code,
            })
            .inc();
        self.latency.observe(seconds);
    }

    pub fn watch_error(&self, watcher: &str) {
        self.watch_errors
            .get_or_create(&WatcherLabels {
                watcher: watcher.to_owned(),
            })
            .inc();
    }

    pub fn touch(&self, outcome: &str) {
        self.touches
            .get_or_create(&OutcomeLabels {
                outcome: outcome.to_owned(),
            })
            .inc();
    }

    /// Record the snapshot now in use.
    pub fn snapshot_in_use(&self, previous: Option<&str>, id: &str, gate_open: bool) {
        if let Some(prev) = previous.filter(|p| *p != id) {
            self.snapshot_info.remove(&SnapshotLabels {
                id: prev.to_owned(),
            });
        }
        self.snapshot_info
            .get_or_create(&SnapshotLabels { id: id.to_owned() })
            .set(1);
        self.gate_open.set(i64::from(gate_open));
    }

    /// The OpenMetrics text exposition.
    pub fn render(&self) -> String {
        if let Some(snap) = &self.snapshot {
            let built = snap.load().built_at;
            let age = SystemTime::now()
                .duration_since(built)
                .unwrap_or_default()
                .as_secs_f64();
            self.snapshot_age.set(age);
        }
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        out
    }
}

pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_with_total_suffix() {
        let m = Metrics::new(None);
        m.observe("Updated", 200, 0.0001);
        let text = m.render();
        assert!(
            text.contains(r#"bootimage_webhook_requests_total{reason="Updated",code="200"} 1"#),
            "{text}"
        );
        assert!(text.contains("bootimage_webhook_request_duration_seconds_bucket"));
        assert!(text.contains("bootimage_webhook_certificate_reload_errors_total 0"));
        assert!(text.ends_with("# EOF\n"));
    }
}
