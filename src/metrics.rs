//! Prometheus metrics, served as OpenMetrics text on the admin port. One registry per
//! server (no globals), so tests can run servers side by side. Grouped by subsystem, each
//! with its own `register`; shared as one `Arc<Metrics>`. On the request path a decision
//! costs two atomic adds: its counter is resolved once, at start.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::SystemTime;

use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

use crate::core::reason::Reason;
use crate::core::snapshot::SharedSnapshot;

/// A new metric, registered under `name`.
fn registered<M>(registry: &mut Registry, name: &str, help: &str) -> M
where
    M: prometheus_client::registry::Metric + Clone + Default,
{
    let metric = M::default();
    registry.register(name, help, metric.clone());
    metric
}

pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

pub type SharedMetrics = Arc<Metrics>;

pub struct Metrics {
    registry: Registry,
    pub requests: RequestMetrics,
    pub certs: CertMetrics,
    pub snapshot: SnapshotMetrics,
    pub watch: WatchMetrics,
    pub touch: TouchMetrics,
}

impl Metrics {
    pub fn new(snapshot: Option<SharedSnapshot>) -> SharedMetrics {
        let mut registry = Registry::with_prefix("bootimage_webhook");
        Arc::new(Metrics {
            requests: RequestMetrics::register(&mut registry),
            certs: CertMetrics::register(&mut registry),
            snapshot: SnapshotMetrics::register(&mut registry, snapshot),
            watch: WatchMetrics::register(&mut registry),
            touch: TouchMetrics::register(&mut registry),
            registry,
        })
    }

    /// The OpenMetrics text exposition.
    pub fn render(&self) -> String {
        self.snapshot.refresh_age();
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        out
    }
}

impl EncodeLabelValue for Reason {
    fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> std::fmt::Result {
        EncodeLabelValue::encode(&self.as_str(), encoder)
    }
}

/// Why a request ended as it did: the decision, or why it was refused.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum RequestReason {
    Decided(Reason),
    /// A refusal class, e.g. `PayloadTooLarge`.
    Refused(&'static str),
}

impl EncodeLabelValue for RequestReason {
    fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> std::fmt::Result {
        match self {
            RequestReason::Decided(r) => EncodeLabelValue::encode(r, encoder),
            RequestReason::Refused(s) => EncodeLabelValue::encode(s, encoder),
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub reason: RequestReason,
    pub code: u16,
}

pub struct RequestMetrics {
    family: Family<RequestLabels, Counter>,
    /// `{reason, code="200"}` per decision reason, in `Reason::ALL` order.
    decided: Vec<Counter>,
    latency: Histogram,
    pub in_flight: Gauge,
    /// Bytes of request bodies charged against `--max-body-bytes-in-flight`.
    pub body_bytes: Gauge,
}

impl RequestMetrics {
    fn register(registry: &mut Registry) -> Self {
        let family = Family::<RequestLabels, Counter>::default();
        // prometheus-client appends `_total` to counters itself.
        registry.register(
            "requests",
            "Admission requests by decision reason (or error) and HTTP status code",
            family.clone(),
        );
        let decided = Reason::ALL
            .iter()
            .map(|&r| {
                let labels = RequestLabels {
                    reason: RequestReason::Decided(r),
                    code: 200,
                };
                family.get_or_create(&labels).clone()
            })
            .collect();
        // 50us .. ~0.8s: the handler is expected in the tens of microseconds.
        let latency = Histogram::new(exponential_buckets(0.000_05, 2.0, 15));
        registry.register_with_unit(
            "request_duration",
            "Time from request head to response, body read included",
            Unit::Seconds,
            latency.clone(),
        );
        let in_flight: Gauge = registered(
            registry,
            "requests_in_flight",
            "Admission requests being served",
        );
        let body_bytes: Gauge = registered(
            registry,
            "request_body_bytes_in_flight",
            "Bytes of request bodies (and of blocked response writes) held now, of the --max-body-bytes-in-flight budget (over it, requests are refused with 503, reason Overloaded)",
        );
        RequestMetrics {
            family,
            decided,
            latency,
            in_flight,
            body_bytes,
        }
    }

    /// A review answered with `reason`.
    pub fn decided(&self, reason: Reason, seconds: f64) {
        let i = Reason::ALL.iter().position(|&r| r == reason);
        if let Some(counter) = i.and_then(|i| self.decided.get(i)) {
            counter.inc();
        }
        self.latency.observe(seconds);
    }

    /// A request refused with `code` (not on the served path: resolved each time).
    pub fn refused(&self, class: &'static str, code: u16, seconds: f64) {
        self.family
            .get_or_create(&RequestLabels {
                reason: RequestReason::Refused(class),
                code,
            })
            .inc();
        self.latency.observe(seconds);
    }
}

pub struct CertMetrics {
    pub reloads: Counter,
    pub reload_errors: Counter,
}

impl CertMetrics {
    fn register(registry: &mut Registry) -> Self {
        let reloads: Counter = registered(
            registry,
            "certificate_reloads",
            "Serving certificate pairs loaded after a change on disk",
        );
        let reload_errors: Counter = registered(
            registry,
            "certificate_reload_errors",
            "Changed certificate pairs that failed to load (the previous pair stays)",
        );
        CertMetrics {
            reloads,
            reload_errors,
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SnapshotLabels {
    id: String,
}

pub struct SnapshotMetrics {
    source: Option<SharedSnapshot>,
    age: Gauge<f64, AtomicU64>,
    info: Family<SnapshotLabels, Gauge>,
    gate_open: Gauge,
}

impl SnapshotMetrics {
    fn register(registry: &mut Registry, source: Option<SharedSnapshot>) -> Self {
        let age = Gauge::<f64, AtomicU64>::default();
        registry.register_with_unit(
            "snapshot_age",
            "Age of the snapshot the webhook decides from",
            Unit::Seconds,
            age.clone(),
        );
        let info: Family<SnapshotLabels, Gauge> = registered(
            registry,
            "snapshot_info",
            "The snapshot id in use (value 1)",
        );
        let gate_open: Gauge = registered(
            registry,
            "gate_open",
            "1 when a master has completed the current upgrade and boot images may move",
        );
        SnapshotMetrics {
            source,
            age,
            info,
            gate_open,
        }
    }

    /// Record the snapshot now in use.
    pub fn in_use(&self, previous: Option<&str>, id: &str, gate_open: bool) {
        if let Some(prev) = previous.filter(|p| *p != id) {
            self.info.remove(&SnapshotLabels {
                id: prev.to_owned(),
            });
        }
        self.info
            .get_or_create(&SnapshotLabels { id: id.to_owned() })
            .set(1);
        self.gate_open.set(i64::from(gate_open));
    }

    fn refresh_age(&self) {
        if let Some(snap) = &self.source {
            let age = SystemTime::now()
                .duration_since(snap.load().built_at)
                .unwrap_or_default();
            self.age.set(age.as_secs_f64());
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WatcherLabels {
    watcher: String,
}

pub struct WatchMetrics {
    errors: Family<WatcherLabels, Counter>,
    pub configmap_errors: Counter,
}

impl WatchMetrics {
    fn register(registry: &mut Registry) -> Self {
        WatchMetrics {
            errors: registered(
                registry,
                "watch_errors",
                "Watch errors by watcher; each is followed by a restart with backoff",
            ),
            configmap_errors: registered(
                registry,
                "configmap_errors",
                "coreos-bootimages contents that could not be used (the last good snapshot stays)",
            ),
        }
    }

    pub fn error(&self, watcher: &str) {
        self.errors
            .get_or_create(&WatcherLabels {
                watcher: watcher.to_owned(),
            })
            .inc();
    }
}

/// What one touch write came to.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum TouchOutcome {
    /// The image moved.
    Moved,
    /// The write went through but the image did not move.
    NotMoved,
    /// The write failed.
    Error,
    /// The MachineSet changed (or went) so that it no longer needs the touch.
    Changed,
}

impl TouchOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            TouchOutcome::Moved => "moved",
            TouchOutcome::NotMoved => "not_moved",
            TouchOutcome::Error => "error",
            TouchOutcome::Changed => "changed",
        }
    }
}

impl EncodeLabelValue for TouchOutcome {
    fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> std::fmt::Result {
        EncodeLabelValue::encode(&self.as_str(), encoder)
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: TouchOutcome,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: Reason,
}

/// The release of the oldest boot image (see `core::skew`); `unknown` for a part not known.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OldestImageLabels {
    pub rhcos_version: String,
    pub rhel_version: String,
    pub ocp_release: String,
}

impl From<&crate::core::skew::Version> for OldestImageLabels {
    fn from(v: &crate::core::skew::Version) -> Self {
        OldestImageLabels {
            rhcos_version: v.rhcos.clone().unwrap_or_else(|| "unknown".into()),
            rhel_version: format!("{}.{}", v.rhel.0, v.rhel.1),
            ocp_release: v
                .release
                .map_or_else(|| "unknown".into(), |r| r.to_string()),
        }
    }
}

pub struct TouchMetrics {
    touches: Family<OutcomeLabels, Counter>,
    /// MachineSets by the reason of their decision, as the Lease holder last counted them.
    machinesets: Family<ReasonLabels, Gauge>,
    /// Age in days of the oldest boot image an enrolled MachineSet still names.
    pub oldest_boot_image_age_days: Gauge,
    /// One series, 1, labelled with the oldest boot image's release (none: not known).
    oldest_boot_image_info: Family<OldestImageLabels, Gauge>,
    /// Normal `BootImageUpdated` Events recorded.
    pub updated_events: Counter,
    pub given_up: Counter,
    /// MachineSets left to another writer that kept putting the old image back.
    pub revert_loops: Counter,
    pub leader: Gauge,
    /// The Lease holder's last proof of the admission policy (its values: see its help).
    pub admission_policy_enforced: Gauge,
    /// 1 when Manual skew enforcement's record is not the oldest boot image in use.
    pub skew_record_due: Gauge,
}

impl TouchMetrics {
    fn register(registry: &mut Registry) -> Self {
        let touches: Family<OutcomeLabels, Counter> = registered(
            registry,
            "touches",
            "Touch writes by outcome: moved, not_moved, error, changed",
        );
        let given_up: Counter = registered(
            registry,
            "touch_given_up",
            "MachineSets left alone after three touches that did not move the image",
        );
        let machinesets: Family<ReasonLabels, Gauge> = registered(
            registry,
            "machinesets",
            "MachineSets by decision reason, as the Lease holder counted them at its last pass (0 on other replicas)",
        );
        for reason in Reason::ALL {
            let _ = machinesets.get_or_create(&ReasonLabels { reason });
        }
        let oldest_boot_image_age_days: Gauge = registered(
            registry,
            "oldest_boot_image_age_days",
            "Age in days (from its RHCOS build date) of the oldest boot image an enrolled MachineSet names, as the Lease holder saw it at its last pass (0: none known, or not the Lease holder)",
        );
        let oldest_boot_image_info: Family<OldestImageLabels, Gauge> = registered(
            registry,
            "oldest_boot_image_info",
            "1, labelled with the RHCOS version, RHEL and OpenShift release of the oldest boot image any MachineSet names, managed or not (lowest RHEL, then release, then build), as the Lease holder saw it at its last pass (no series: none of known version, or not the Lease holder)",
        );
        let updated_events: Counter = registered(
            registry,
            "boot_image_updated_events",
            "Normal BootImageUpdated Events recorded on MachineSets whose boot image moved",
        );
        let revert_loops: Counter = registered(
            registry,
            "revert_loops",
            "MachineSets left as written after another writer put the old boot image back more than three times (one per MachineSet and target, counted by the Lease holder)",
        );
        let leader: Gauge = registered(
            registry,
            "leader",
            "1 while this replica holds the touch Lease",
        );
        let admission_policy_enforced: Gauge = registered(
            registry,
            "admission_policy_enforced",
            "1 when the Lease holder's last probe (a server-side dry run of a write the ValidatingAdmissionPolicy must deny) was denied by the policy, 0 when it was admitted (the policy is not in force: nothing is touched until it is), -1 when not known (no verdict yet, or not the Lease holder)",
        );
        admission_policy_enforced.set(-1);
        let skew_record_due: Gauge = registered(
            registry,
            "skew_record_due",
            "1 when MachineConfiguration cluster enforces boot image skew in Manual mode and its record (spec.bootImageSkewEnforcement, else the one the MCO chose) is not the oldest boot image any MachineSet names, as the Lease holder saw it at its last pass: run `bootimage-webhook skew record` (0: current, not Manual, the version in use unknown, or not the Lease holder)",
        );
        TouchMetrics {
            touches,
            machinesets,
            oldest_boot_image_age_days,
            oldest_boot_image_info,
            updated_events,
            given_up,
            revert_loops,
            leader,
            admission_policy_enforced,
            skew_record_due,
        }
    }

    /// The census of the Lease holder's pass (`None`: not the holder any more: all 0, and
    /// no oldest release).
    pub fn census(
        &self,
        by_reason: Option<&std::collections::BTreeMap<Reason, i64>>,
        oldest_days: i64,
        oldest_release: Option<OldestImageLabels>,
    ) {
        let current = oldest_release
            .as_ref()
            .is_some_and(|l| self.oldest_boot_image_info.get(l).is_some());
        if !current {
            self.oldest_boot_image_info.clear();
            if let Some(labels) = oldest_release {
                self.oldest_boot_image_info.get_or_create(&labels).set(1);
            }
        }
        for reason in Reason::ALL {
            let n = by_reason.and_then(|m| m.get(&reason)).copied().unwrap_or(0);
            self.machinesets
                .get_or_create(&ReasonLabels { reason })
                .set(n);
        }
        self.oldest_boot_image_age_days.set(oldest_days);
    }

    pub fn touched(&self, outcome: TouchOutcome) {
        self.touches.get_or_create(&OutcomeLabels { outcome }).inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_with_total_suffix() {
        let m = Metrics::new(None);
        m.requests.decided(Reason::Updated, 0.0001);
        m.requests.refused("PayloadTooLarge", 413, 0.0001);
        m.touch.touched(TouchOutcome::NotMoved);
        let text = m.render();
        for line in [
            r#"bootimage_webhook_requests_total{reason="Updated",code="200"} 1"#,
            r#"bootimage_webhook_requests_total{reason="UpToDate",code="200"} 0"#,
            r#"bootimage_webhook_requests_total{reason="PayloadTooLarge",code="413"} 1"#,
            r#"bootimage_webhook_touches_total{outcome="not_moved"} 1"#,
            "bootimage_webhook_request_duration_seconds_count 2",
            "bootimage_webhook_certificate_reload_errors_total 0",
            // Not known until the Lease holder's first probe.
            "bootimage_webhook_admission_policy_enforced -1",
        ] {
            assert!(text.contains(line), "{line} not in:\n{text}");
        }
        assert!(text.ends_with("# EOF\n"));
    }

    #[test]
    fn the_oldest_boot_image_info_has_one_series_at_most() {
        let m = Metrics::new(None);
        let name = "bootimage_webhook_oldest_boot_image_info{";
        let series = |m: &Metrics| -> Vec<String> {
            m.render()
                .lines()
                .filter(|l| l.starts_with(name))
                .map(str::to_owned)
                .collect()
        };
        assert!(series(&m).is_empty());
        let old = crate::core::skew::from_name("rhcos-416-94-202405291527-0-gcp-x86-64").unwrap();
        m.touch.census(None, 0, Some((&old).into()));
        assert_eq!(
            series(&m),
            [
                r#"bootimage_webhook_oldest_boot_image_info{rhcos_version="416.94.202405291527-0",rhel_version="9.4",ocp_release="4.16"} 1"#
            ]
        );
        m.touch.census(None, 0, Some((&old).into()));
        assert_eq!(series(&m).len(), 1);
        // A Red Hat marketplace offer names only its OpenShift release.
        let newer =
            crate::core::skew::from_name("redhat:rh-ocp-worker:rh-ocp-worker:4.18.2025031114")
                .unwrap();
        m.touch.census(None, 0, Some((&newer).into()));
        assert_eq!(
            series(&m),
            [
                r#"bootimage_webhook_oldest_boot_image_info{rhcos_version="unknown",rhel_version="9.4",ocp_release="4.18"} 1"#
            ]
        );
        m.touch.census(None, 0, None);
        assert!(series(&m).is_empty());
    }
}
