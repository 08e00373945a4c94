//! The decision: a pure function from a MachineSet (raw JSON) and a snapshot to a reason,
//! a message and a minimal JSON Patch (behaviour §4, §5). No I/O: the webhook, the toucher and
//! `preview` all call [`decide`].

use std::collections::BTreeMap;

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, Patch, PatchOperation, ReplaceOperation};
use kube::core::SelectorExt;
use serde_json::{Map, Value};

use super::arch::Arch;
use super::platforms::{self, Outcome};
pub use super::reason::Reason;
use super::snapshot::{Enrollment, Snapshot};

/// Per-MachineSet opt-out: this label with the value `"false"`.
pub const OPT_OUT_LABEL: &str = "bootimages.machineconfiguration.openshift.io/managed";
/// Records the image this project injected.
pub const BOOT_IMAGE_ANNOTATION: &str = "bootimages.machineconfiguration.openshift.io/boot-image";
/// Set by the toucher to make a MachineSet pass through the webhook.
pub const TOUCH_ANNOTATION: &str = "bootimages.machineconfiguration.openshift.io/touch";
pub const OS_STREAM_LABEL: &str = "machineconfiguration.openshift.io/osstream";
pub const SUPPORTED_OS_STREAM: &str = "rhel-9";
pub const OS_ID_LABEL: &str = "machine.openshift.io/os-id";
pub const ARCH_ANNOTATION: &str = "capacity.cluster-autoscaler.kubernetes.io/labels";
const ARCH_LABEL_PREFIX: &str = "kubernetes.io/arch=";

#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub reason: Reason,
    /// One sentence for people: logs, `preview`, events.
    pub message: String,
    /// Empty unless `reason == Updated`.
    pub patch: Patch,
    pub platform: Option<&'static str>,
    pub arch: Option<Arch>,
    pub current: Option<String>,
    pub target: Option<String>,
}

impl Decision {
    fn new(reason: Reason, message: impl Into<String>) -> Self {
        Decision {
            reason,
            message: message.into(),
            patch: Patch(Vec::new()),
            platform: None,
            arch: None,
            current: None,
            target: None,
        }
    }

    pub fn not_applicable(message: impl Into<String>) -> Self {
        Decision::new(Reason::NotApplicable, message)
    }
}

fn str_map(v: Option<&Value>) -> BTreeMap<String, String> {
    v.and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

/// Arch from the autoscaler annotation (`k=v,k=v`), or the control plane's (behaviour §4.7).
fn machineset_arch(
    annotations: &BTreeMap<String, String>,
    snap: &Snapshot,
) -> Result<Arch, Decision> {
    let Some(value) = annotations.get(ARCH_ANNOTATION) else {
        if snap.cluster.multi_arch {
            // Never guess on a multi-arch cluster (OCPBUGS-69674).
            return Err(Decision::new(
                Reason::ArchitectureUnknown,
                format!(
                    "no architecture annotation found on machineset ({ARCH_ANNOTATION}) in a multi-arch cluster: not guessing"
                ),
            ));
        }
        return snap.cluster.control_plane_arch.ok_or_else(|| {
            Decision::new(
                Reason::ArchitectureUnknown,
                "no architecture annotation and the control-plane architecture is not known",
            )
        });
    };
    let item = value
        .split(',')
        .map(str::trim)
        .find_map(|item| item.strip_prefix(ARCH_LABEL_PREFIX));
    match item {
        Some(name) => Arch::from_k8s(name).ok_or_else(|| {
            Decision::new(
                Reason::InvalidArchitecture,
                format!("invalid architecture value found in annotation: {name}"),
            )
        }),
        None => Err(Decision::new(
            Reason::InvalidArchitecture,
            format!("kubernetes.io/arch label not found in annotation: {value}"),
        )),
    }
}

/// Decide what to do with one MachineSet. Pure; never panics on any JSON.
pub fn decide(ms: &Value, snap: &Snapshot) -> Decision {
    // 1. Ours to look at at all?
    let kind = ms.get("kind").and_then(Value::as_str).unwrap_or("");
    let api_version = ms.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    if kind != "MachineSet" || !api_version.starts_with("machine.openshift.io/") {
        return Decision::not_applicable(format!(
            "not a machine.openshift.io MachineSet (apiVersion {api_version:?}, kind {kind:?})"
        ));
    }
    let spec = match ms.pointer("/spec/template/spec/providerSpec/value") {
        None | Some(Value::Null) => return Decision::not_applicable("no providerSpec value"),
        Some(v @ Value::Object(_)) => v,
        Some(_) => {
            return Decision::new(
                Reason::InvalidProviderSpec,
                "spec.template.spec.providerSpec.value is not an object",
            );
        }
    };
    let metadata = ms.get("metadata");
    let labels = str_map(metadata.and_then(|m| m.get("labels")));
    let annotations = str_map(metadata.and_then(|m| m.get("annotations")));

    // 2. Opt-out, by label or by the MCO's own enrollment.
    if labels.get(OPT_OUT_LABEL).map(String::as_str) == Some("false") {
        return Decision::new(Reason::OptedOut, format!("label {OPT_OUT_LABEL}=false"));
    }
    match &snap.cluster.enrollment {
        Enrollment::All => {}
        Enrollment::None => {
            return Decision::new(
                Reason::OptedOut,
                "MachineConfiguration cluster manages no MachineSet boot images (mode None)",
            );
        }
        Enrollment::Partial(selector) => {
            if !selector.matches(&labels) {
                return Decision::new(
                    Reason::OptedOut,
                    format!("not selected by the MachineConfiguration Partial selector {selector}"),
                );
            }
        }
    }

    // 3. Somebody else's.
    if let Some(owners) = metadata
        .and_then(|m| m.get("ownerReferences"))
        .and_then(Value::as_array)
        .filter(|o| !o.is_empty())
    {
        let first = &owners[0];
        let field = |k| first.get(k).and_then(Value::as_str).unwrap_or("?");
        return Decision::new(
            Reason::OwnedByController,
            format!(
                "owned by {}/{}: its owner manages the providerSpec",
                field("kind"),
                field("name")
            ),
        );
    }

    // 4. Another OS stream.
    if let Some(stream) = labels.get(OS_STREAM_LABEL)
        && stream != SUPPORTED_OS_STREAM
    {
        return Decision::new(
            Reason::UnsupportedOSStream,
            format!(
                "unsupported stream: {stream} (label {OS_STREAM_LABEL}); only {SUPPORTED_OS_STREAM} is updated"
            ),
        );
    }

    // 5. Windows images come from elsewhere.
    if ms
        .pointer("/spec/template/metadata/labels")
        .and_then(|l| l.get(OS_ID_LABEL))
        .and_then(Value::as_str)
        == Some("Windows")
    {
        return Decision::new(Reason::Windows, format!("{OS_ID_LABEL}=Windows"));
    }

    // 6. Not yet, or not now.
    let Some(boot_images) = snap.boot_images.as_deref() else {
        return Decision::new(
            Reason::NotReady,
            "the coreos-bootimages ConfigMap has not been read yet",
        );
    };
    if !snap.cluster.gate.open {
        return Decision::new(Reason::UpgradeInProgress, snap.cluster.gate.reason.clone());
    }

    // 7. Architecture.
    let arch = match machineset_arch(&annotations, snap) {
        Ok(a) => a,
        Err(d) => return d,
    };

    // 8. Platform, and the stream entry for it.
    let spec_kind = spec.get("kind").and_then(Value::as_str).unwrap_or("");
    let platform = match &snap.cluster.platform {
        Some(cluster) => match platforms::by_name(cluster) {
            Some(p) if p.provider_spec_kind() == spec_kind => Some(p),
            Some(p) => {
                return Decision::new(
                    Reason::UnsupportedPlatform,
                    format!(
                        "providerSpec kind {spec_kind:?} does not match the cluster platform {} ({})",
                        p.name(),
                        p.provider_spec_kind()
                    ),
                );
            }
            None => {
                return Decision::new(
                    Reason::UnsupportedPlatform,
                    format!("cluster platform {cluster} is not supported"),
                );
            }
        },
        None => platforms::by_kind(spec_kind),
    };
    let Some(platform) = platform else {
        let what = platforms::known_platform_of_kind(spec_kind)
            .map(|p| format!("platform {p} ({spec_kind}) is not supported yet"))
            .unwrap_or_else(|| format!("unknown providerSpec kind {spec_kind:?}"));
        return Decision::new(Reason::UnsupportedPlatform, what);
    };
    let with_context = |mut d: Decision| {
        d.platform = Some(platform.name());
        d.arch = Some(arch);
        d
    };
    let Some(arch_entry) = boot_images.architectures.get(&arch) else {
        return with_context(Decision::new(
            Reason::NoImageInStream,
            format!(
                "the stream {} has no {arch} architecture",
                boot_images.stream_name
            ),
        ));
    };

    // 9. The platform rule.
    let (edits, current, target) = match platform.reconcile(spec, arch, arch_entry) {
        Outcome::Skip {
            reason,
            message,
            current,
            target,
        } => {
            let mut d = with_context(Decision::new(reason, message));
            d.current = current;
            d.target = target;
            return d;
        }
        Outcome::UpToDate { current, target } => {
            let message = format!("boot image is already {target}");
            let mut d = with_context(Decision::new(Reason::UpToDate, message));
            d.current = Some(current);
            d.target = Some(target);
            return d;
        }
        Outcome::Changes {
            edits,
            current,
            target,
        } => (edits, current, target),
    };

    // 10. A spec-2 stub Ignition cannot boot a new image.
    let user_data = spec.pointer("/userDataSecret/name").and_then(Value::as_str);
    if let Some(version) = user_data.and_then(|s| snap.cluster.stub_ignition.get(s))
        && !version.starts_with('3')
    {
        let mut d = with_context(Decision::new(
            Reason::StubIgnitionSpec2,
            format!(
                "user-data Secret {} holds an Ignition spec {version} stub, which {target} cannot boot: upgrade the stub first",
                user_data.unwrap_or_default()
            ),
        ));
        d.current = Some(current);
        d.target = Some(target);
        return d;
    }

    // 11. Patch.
    let mut ops: Vec<PatchOperation> = edits
        .into_iter()
        .map(|e| {
            let path = PointerBuf::from_tokens(
                ["spec", "template", "spec", "providerSpec", "value"]
                    .into_iter()
                    .map(String::from)
                    .chain(e.path),
            );
            set(path, e.exists, e.value)
        })
        .collect();
    ops.extend(annotation_op(metadata, BOOT_IMAGE_ANNOTATION, &target));
    let mut d = with_context(Decision::new(
        Reason::Updated,
        format!(
            "boot image {} -> {target}",
            if current.is_empty() {
                "<empty>"
            } else {
                &current
            }
        ),
    ));
    d.patch = Patch(ops);
    d.current = Some(current);
    d.target = Some(target);
    d
}

fn set(path: PointerBuf, exists: bool, value: Value) -> PatchOperation {
    if exists {
        PatchOperation::Replace(ReplaceOperation { path, value })
    } else {
        PatchOperation::Add(AddOperation { path, value })
    }
}

/// The op that sets `metadata.annotations[key]`, creating the map when there is none.
fn annotation_op(metadata: Option<&Value>, key: &str, value: &str) -> Option<PatchOperation> {
    let value = Value::String(value.to_owned());
    match metadata.and_then(|m| m.get("annotations")) {
        Some(Value::Object(existing)) => Some(set(
            PointerBuf::from_tokens(["metadata", "annotations", key]),
            existing.contains_key(key),
            value,
        )),
        Some(Value::Null) => Some(set(
            PointerBuf::from_tokens(["metadata", "annotations"]),
            true,
            Value::Object(Map::from_iter([(key.to_owned(), value)])),
        )),
        None if metadata.is_some_and(Value::is_object) => Some(set(
            PointerBuf::from_tokens(["metadata", "annotations"]),
            false,
            Value::Object(Map::from_iter([(key.to_owned(), value)])),
        )),
        // No metadata object, or annotations that are not a map: the apiserver would have
        // refused such an object; record nothing rather than overwrite it.
        _ => None,
    }
}
