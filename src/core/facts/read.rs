//! Cluster facts read from live objects, as pure functions: the master-upgrade gate (behaviour §3),
//! platform, architectures and stub Ignition versions (enrollment is
//! [`enrollment`](super::enrollment)'s). The watchers feed them; the tests call them directly.

use std::collections::BTreeSet;

use serde_json::Value;

use super::{Gate, Stub};
use crate::core::arch::Arch;
use crate::core::configmap::KEY_MCO_RELEASE_IMAGE_VERSION;
use crate::core::platforms::Platform;

/// On the rendered MachineConfig: the release it was rendered for.
pub(crate) const RELEASE_IMAGE_VERSION_ANNOTATION: &str =
    "machineconfiguration.openshift.io/release-image-version";

fn condition_true(pool: &Value, kind: &str) -> bool {
    pool.pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| c["type"] == kind && c["status"] == "True")
}

/// What the gate reads, gathered by the watchers.
#[derive(Debug, Default, Clone, Copy)]
pub struct GateInputs<'a> {
    /// `--master-pool-gate`: the pool rule may open the gate before the MCO stamps.
    pub pool_rule: bool,
    /// MachineConfigPool `master`.
    pub master_pool: Option<&'a Value>,
    /// The release annotation of the MachineConfig named by the pool's
    /// `spec.configuration.name`: `None` if that MachineConfig is not known (yet),
    /// `Some(None)` if it has no such annotation.
    pub rendered_release: Option<Option<&'a str>>,
    /// The ConfigMap's `releaseVersion`.
    pub release_version: Option<&'a str>,
    /// The ConfigMap's `MCOReleaseImageVersion`: the MCO's stamp, written once a master
    /// has completed that release, and kept.
    pub stamp: Option<&'a str>,
    /// ClusterVersion `version`, for `--wait-for-upgrade-complete`.
    pub cluster_version: Option<&'a Value>,
    pub wait_for_upgrade_complete: bool,
}

/// Open once a master has completed the current upgrade (behaviour §3): the ConfigMap's
/// stamp equals its `releaseVersion` (the MCO's verdict, which it keeps: a later master
/// rollout, a paused or degraded pool do not close the gate again), or, with the pool
/// rule, the rule by which the MCO stamps holds now on the master pool. Then the optional
/// ClusterVersion wait.
pub fn gate(i: GateInputs<'_>) -> Gate {
    let Some(release) = i.release_version else {
        return Gate::closed("the coreos-bootimages ConfigMap has not been read");
    };
    let finished = if i.stamp == Some(release) {
        format!("ConfigMap stamped {KEY_MCO_RELEASE_IMAGE_VERSION}={release}")
    } else if !i.pool_rule {
        let stamp = i.stamp.unwrap_or("<unset>");
        return Gate::closed(format!(
            "ConfigMap {KEY_MCO_RELEASE_IMAGE_VERSION}={stamp}, not {release}: the MCO stamps it once a master has completed {release}"
        ));
    } else {
        match pool_rule(i.master_pool, i.rendered_release, release) {
            Ok(finished) => finished,
            Err(why) => {
                let stamp = i.stamp.unwrap_or("<unset>");
                return Gate::closed(format!(
                    "ConfigMap {KEY_MCO_RELEASE_IMAGE_VERSION}={stamp}, not {release}, and {why}"
                ));
            }
        }
    };
    if i.wait_for_upgrade_complete {
        let state = i
            .cluster_version
            .and_then(|cv| cv.pointer("/status/history/0/state"))
            .and_then(Value::as_str)
            .unwrap_or("<none>");
        if state != "Completed" {
            return Gate::closed(format!(
                "{finished}, but ClusterVersion history[0].state is {state}, not Completed (--wait-for-upgrade-complete)"
            ));
        }
    }
    Gate::open(format!("release {release}: {finished}"))
}

/// The MCO's stamping rule on the master pool (`stampBootImagesConfigMap`): its target
/// rendered config was rendered for `release`, and a master runs it. `Ok` says which.
fn pool_rule(
    pool: Option<&Value>,
    rendered_release: Option<Option<&str>>,
    release: &str,
) -> Result<String, String> {
    let Some(pool) = pool else {
        return Err("MachineConfigPool master not seen yet".into());
    };
    let target = pool
        .pointer("/spec/configuration/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if target.is_empty() {
        return Err("MachineConfigPool master has no spec.configuration.name yet".into());
    }
    let rendered = match rendered_release {
        None => return Err(format!("rendered MachineConfig {target} not seen yet")),
        Some(None) => {
            return Err(format!(
                "rendered MachineConfig {target} has no {RELEASE_IMAGE_VERSION_ANNOTATION} annotation"
            ));
        }
        Some(Some(r)) => r,
    };
    if rendered != release {
        return Err(format!(
            "master pool targets {target}, rendered for release {rendered}, not the boot images' release {release}"
        ));
    }
    let current = pool
        .pointer("/status/configuration/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let updated_count = pool
        .pointer("/status/updatedMachineCount")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let updating = condition_true(pool, "Updating");
    let updated = condition_true(pool, "Updated");
    if updating && updated_count > 0 {
        Ok(format!("{updated_count} master(s) run {target}"))
    } else if updated && current == target {
        Ok(format!("master pool Updated on {target}"))
    } else {
        Err(format!(
            "no master has completed the update to {target} yet (Updating={updating}, Updated={updated}, updatedMachineCount={updated_count})"
        ))
    }
}

/// Infrastructure `cluster`: `status.platformStatus.type` (older clusters: `status.platform`),
/// or the name of a variant of a platform that no platform serves (Azure Stack Hub).
pub fn platform(infrastructure: &Value) -> Option<String> {
    let kind = infrastructure
        .pointer("/status/platformStatus/type")
        .or_else(|| infrastructure.pointer("/status/platform"))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())?;
    Some(Platform::infrastructure_name(kind, infrastructure))
}

/// ClusterVersion `version`: `status.desired.architecture == Multi`.
pub fn multi_arch(cluster_version: &Value) -> bool {
    cluster_version
        .pointer("/status/desired/architecture")
        .and_then(Value::as_str)
        == Some("Multi")
}

/// The control plane's architecture from the masters' `kubernetes.io/arch` labels: known
/// only when they all agree.
pub fn control_plane_arch<'a>(
    node_arch_labels: impl IntoIterator<Item = Option<&'a str>>,
) -> Option<Arch> {
    let arches: BTreeSet<Option<Arch>> = node_arch_labels
        .into_iter()
        .map(|l| l.and_then(Arch::from_k8s))
        .collect();
    match arches.into_iter().collect::<Vec<_>>().as_slice() {
        [Some(a)] => Some(*a),
        _ => None,
    }
}

/// What a user-data Secret's `userData` says of its stub Ignition (plain JSON, not base64
/// inside the data, as the installer and the MCO write it). Only the version is kept.
pub fn stub(user_data: Option<&[u8]>) -> Stub {
    let Some(bytes) = user_data else {
        return Stub::Unreadable("it has no userData".into());
    };
    let config: Value = match serde_json::from_slice(bytes) {
        Ok(v) => v,
        Err(e) => return Stub::Unreadable(format!("its userData is not JSON ({e})")),
    };
    match config.pointer("/ignition/version") {
        Some(Value::String(v)) => Stub::Version(v.clone()),
        _ => Stub::Unreadable("its userData has no ignition.version string".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn azure_stack_is_not_azure() {
        let infra = |cloud: &str| json!({"status": {"platformStatus": {"type": "Azure", "azure": {"cloudName": cloud}}}});
        assert_eq!(
            platform(&infra("AzurePublicCloud")).as_deref(),
            Some("Azure")
        );
        assert_eq!(
            platform(&infra("AzureStackCloud")).as_deref(),
            Some("AzureStackCloud")
        );
        assert_eq!(
            platform(&json!({"status": {"platform": "GCP"}})).as_deref(),
            Some("GCP")
        );
    }
    use serde_json::json;

    fn pool(spec: &str, status: &str, updated: i64, conditions: &[(&str, &str)]) -> Value {
        json!({
            "spec": {"configuration": {"name": spec}},
            "status": {
                "configuration": {"name": status},
                "updatedMachineCount": updated,
                "conditions": conditions.iter().map(|(t, s)| json!({"type": t, "status": s})).collect::<Vec<_>>(),
            }
        })
    }

    fn inputs<'a>(p: &'a Value, rendered: Option<Option<&'a str>>) -> GateInputs<'a> {
        GateInputs {
            pool_rule: true,
            master_pool: Some(p),
            rendered_release: rendered,
            release_version: Some("4.21.0"),
            stamp: None,
            cluster_version: None,
            wait_for_upgrade_complete: false,
        }
    }

    #[test]
    fn gate_opens_on_the_exact_rule() {
        let new = "rendered-master-new";
        // Updating with a master already on the new config.
        let p = pool(
            new,
            "rendered-master-old",
            1,
            &[("Updating", "True"), ("Updated", "False")],
        );
        assert!(gate(inputs(&p, Some(Some("4.21.0")))).open);
        // Updated and settled on it.
        let p = pool(new, new, 3, &[("Updated", "True"), ("Updating", "False")]);
        assert!(gate(inputs(&p, Some(Some("4.21.0")))).open);
    }

    #[test]
    fn gate_stays_closed_otherwise() {
        let new = "rendered-master-new";
        let cases = [
            // Updating, nobody there yet.
            (
                pool(new, "rendered-master-old", 0, &[("Updating", "True")]),
                Some(Some("4.21.0")),
                "no master has completed",
            ),
            // Updated says True but status still on the old config.
            (
                pool(new, "rendered-master-old", 3, &[("Updated", "True")]),
                Some(Some("4.21.0")),
                "no master has completed",
            ),
            // The target was rendered for another release.
            (
                pool(new, new, 3, &[("Updated", "True")]),
                Some(Some("4.20.9")),
                "rendered for release 4.20.9",
            ),
            (
                pool(new, new, 3, &[("Updated", "True")]),
                Some(None),
                "has no machineconfiguration",
            ),
            (
                pool(new, new, 3, &[("Updated", "True")]),
                None,
                "not seen yet",
            ),
            (
                pool("", new, 3, &[("Updated", "True")]),
                Some(Some("4.21.0")),
                "no spec.configuration.name",
            ),
            // Conditions present but False.
            (
                pool(new, new, 3, &[("Updated", "False"), ("Updating", "False")]),
                Some(Some("4.21.0")),
                "no master has completed",
            ),
        ];
        for (p, rendered, says) in cases {
            let g = gate(inputs(&p, rendered));
            assert!(!g.open, "{p}");
            assert!(g.reason.contains(says), "{}: wanted {says}", g.reason);
        }
        assert!(
            !gate(GateInputs {
                release_version: Some("4.21.0"),
                ..Default::default()
            })
            .open
        );
        let p = pool(new, new, 3, &[("Updated", "True")]);
        assert!(
            !gate(GateInputs {
                release_version: None,
                ..inputs(&p, Some(Some("4.21.0")))
            })
            .open
        );
    }

    /// The gate remembers a finished upgrade through the MCO's stamp.
    #[test]
    fn the_stamp_keeps_the_gate_open_after_the_upgrade() {
        let new = "rendered-master-new";
        fn stamped<'a>(p: &'a Value, rendered: Option<Option<&'a str>>) -> GateInputs<'a> {
            GateInputs {
                stamp: Some("4.21.0"),
                ..inputs(p, rendered)
            }
        }
        // A routine master MachineConfig rollout after the upgrade: Updating, nobody on
        // the new rendered config yet, which is still rendered for 4.21.0.
        let rollout = pool(
            "rendered-master-newer",
            new,
            0,
            &[("Updating", "True"), ("Updated", "False")],
        );
        let unstamped = gate(inputs(&rollout, Some(Some("4.21.0"))));
        assert!(
            !unstamped.open,
            "without the stamp the pool rule alone closes it"
        );
        let g = gate(stamped(&rollout, Some(Some("4.21.0"))));
        assert!(g.open, "{}", g.reason);
        assert!(
            g.reason.contains("MCOReleaseImageVersion=4.21.0"),
            "{}",
            g.reason
        );
        // A paused (or degraded) pool: no condition says anything is finished, and the
        // rendered config of the pool's target is not even known.
        let paused = pool(new, "rendered-master-old", 0, &[("Updated", "False")]);
        assert!(gate(stamped(&paused, None)).open);
        assert!(gate(stamped(&paused, Some(None))).open);
        // No pool at all (not listed yet, or gone): the stamp is enough.
        assert!(
            gate(GateInputs {
                stamp: Some("4.21.0"),
                release_version: Some("4.21.0"),
                ..Default::default()
            })
            .open
        );
        // ... and --wait-for-upgrade-complete stays stricter than the stamp.
        let partial = json!({"status": {"history": [{"state": "Partial"}]}});
        let g = gate(GateInputs {
            cluster_version: Some(&partial),
            wait_for_upgrade_complete: true,
            ..stamped(&paused, None)
        });
        assert!(!g.open);
        assert!(g.reason.contains("not Completed"), "{}", g.reason);
    }

    #[test]
    fn a_new_release_closes_the_gate_until_a_master_finishes_or_the_stamp_moves() {
        let new = "rendered-master-422";
        // The ConfigMap now says 4.22.0; the stamp is still 4.21.0's, the master pool
        // is rolling out 4.22.0 and no master has finished.
        let rolling = pool(
            new,
            "rendered-master-421",
            0,
            &[("Updating", "True"), ("Updated", "False")],
        );
        fn at<'a>(p: &'a Value, stamp: &'static str) -> GateInputs<'a> {
            GateInputs {
                release_version: Some("4.22.0"),
                stamp: Some(stamp),
                ..inputs(p, Some(Some("4.22.0")))
            }
        }
        let g = gate(at(&rolling, "4.21.0"));
        assert!(!g.open);
        assert!(
            g.reason
                .contains("MCOReleaseImageVersion=4.21.0, not 4.22.0")
                && g.reason.contains("no master has completed"),
            "{}",
            g.reason
        );
        // A master finishes: the pool rule opens it before the MCO stamps.
        let one_done = pool(
            new,
            "rendered-master-421",
            1,
            &[("Updating", "True"), ("Updated", "False")],
        );
        assert!(gate(at(&one_done, "4.21.0")).open);
        // Or the MCO stamps 4.22.0 (its own view of the same event).
        assert!(gate(at(&rolling, "4.22.0")).open);
        // A stamp of an older release while the pool targets a config of the old release
        // does not open it either.
        let old_target = pool(
            "rendered-master-421",
            "rendered-master-421",
            3,
            &[("Updated", "True")],
        );
        assert!(
            !gate(GateInputs {
                rendered_release: Some(Some("4.21.0")),
                ..at(&old_target, "4.21.0")
            })
            .open
        );
    }

    /// The default install reads no MachineConfig: the MCO's stamp alone opens the gate,
    /// whatever the pool says, and keeps it open through a routine master rollout.
    #[test]
    fn without_the_pool_rule_the_stamp_alone_opens_the_gate() {
        fn stamp_only<'a>(stamp: Option<&'a str>, p: &'a Value) -> GateInputs<'a> {
            GateInputs {
                pool_rule: false,
                stamp,
                ..inputs(p, Some(Some("4.21.0")))
            }
        }
        let done = &pool("r", "r", 3, &[("Updated", "True")]);
        let g = gate(stamp_only(Some("4.20.9"), done));
        assert!(!g.open, "a finished pool opens nothing without the stamp");
        assert_eq!(
            g.reason,
            "ConfigMap MCOReleaseImageVersion=4.20.9, not 4.21.0: the MCO stamps it once a master has completed 4.21.0"
        );
        let g = gate(stamp_only(None, done));
        assert!(!g.open);
        assert!(g.reason.contains("=<unset>, not 4.21.0"), "{}", g.reason);
        let rollout = &pool("rendered-master-newer", "r", 0, &[("Updating", "True")]);
        let g = gate(stamp_only(Some("4.21.0"), rollout));
        assert!(g.open, "{}", g.reason);
        assert_eq!(
            g.reason,
            "release 4.21.0: ConfigMap stamped MCOReleaseImageVersion=4.21.0"
        );
        // Nothing of the pool is needed at all.
        let g = gate(GateInputs {
            stamp: Some("4.21.0"),
            release_version: Some("4.21.0"),
            ..Default::default()
        });
        assert!(g.open, "{}", g.reason);
    }

    #[test]
    fn wait_for_upgrade_complete_replays_upstream_is_cluster_stable() {
        // TestIsClusterStable: only history[0].state == Completed counts.
        let p = pool("r", "r", 3, &[("Updated", "True")]);
        for (history, open) in [
            (json!([]), false),
            (json!([{"state": "Partial"}]), false),
            (json!([{"state": "Completed"}]), true),
            (
                json!([{"state": "Partial", "version": "4.19.0"}, {"state": "Completed", "version": "4.18.0"}]),
                false,
            ),
            (
                json!([{"state": "Completed"}, {"state": "Completed"}]),
                true,
            ),
        ] {
            let cv = json!({"status": {"history": history}});
            let g = gate(GateInputs {
                cluster_version: Some(&cv),
                wait_for_upgrade_complete: true,
                ..inputs(&p, Some(Some("4.21.0")))
            });
            assert_eq!(g.open, open, "{history}: {}", g.reason);
            // Without the flag the ClusterVersion does not matter.
            assert!(
                gate(GateInputs {
                    cluster_version: Some(&cv),
                    ..inputs(&p, Some(Some("4.21.0")))
                })
                .open
            );
        }
    }

    #[test]
    fn platform_arch_and_ignition() {
        assert_eq!(
            platform(&json!({"status": {"platformStatus": {"type": "GCP"}}})).as_deref(),
            Some("GCP")
        );
        assert_eq!(
            platform(&json!({"status": {"platform": "AWS"}})).as_deref(),
            Some("AWS")
        );
        assert_eq!(platform(&json!({})), None);
        assert!(multi_arch(
            &json!({"status": {"desired": {"architecture": "Multi"}}})
        ));
        assert!(!multi_arch(
            &json!({"status": {"desired": {"version": "4.21.0"}}})
        ));
        assert_eq!(
            control_plane_arch([Some("amd64"), Some("amd64")]),
            Some(Arch::Amd64)
        );
        assert_eq!(control_plane_arch([Some("arm64")]), Some(Arch::Arm64));
        assert_eq!(control_plane_arch([Some("amd64"), Some("arm64")]), None);
        assert_eq!(control_plane_arch([Some("amd64"), None]), None);
        assert_eq!(control_plane_arch(std::iter::empty()), None);
        assert_eq!(
            stub(Some(br#"{"ignition":{"version":"2.2.0"}}"#)),
            Stub::Version("2.2.0".into())
        );
        assert_eq!(
            stub(Some(br#"{"ignition":{"version":"3.4.0"},"storage":{}}"#)),
            Stub::Version("3.4.0".into())
        );
        let unreadable = |s: Stub| match s {
            Stub::Unreadable(why) => why,
            other => panic!("{other:?}"),
        };
        assert!(unreadable(stub(Some(b"#cloud-config"))).starts_with("its userData is not JSON"));
        assert!(unreadable(stub(Some(b"[]"))).contains("no ignition.version"));
        assert!(
            unreadable(stub(Some(br#"{"ignition":{"version":3}}"#)))
                .contains("no ignition.version")
        );
        assert_eq!(unreadable(stub(None)), "it has no userData");
    }
}
