//! The decision: a pure function from a MachineSet (its [`MachineSetView`]) and a snapshot
//! to a reason, a message and a minimal JSON Patch (behaviour §4, §5). No I/O: the webhook,
//! the toucher, `preview` and `status` all call [`decide`]. Each rule is one function that
//! either lets the MachineSet through to the next rule or decides (`Err(Decision)`).

use std::collections::BTreeMap;

use kube::core::SelectorExt;
use serde::Serialize;
use serde_json::{Map, Value};

use super::arch::Arch;
use super::platforms::{self, Context, Edit, Outcome, Platform, Target};
pub use super::reason::Reason;
use super::snapshot::{BootImages, ClusterFacts, Enrollment, Managed, Snapshot, Stub};
use super::stream_choice::{self, NotCarried};
use super::view::{Annotations, MachineSetView, ProviderSpecValue, SpecFields};

mod story;

/// Per-MachineSet opt-out: this label with the value `"false"`.
pub const OPT_OUT_LABEL: &str = "bootimages.machineconfiguration.openshift.io/managed";
/// Records the image this project injected.
pub const BOOT_IMAGE_ANNOTATION: &str = "bootimages.machineconfiguration.openshift.io/boot-image";
/// Set by the toucher to make a MachineSet pass through the webhook.
pub const TOUCH_ANNOTATION: &str = "bootimages.machineconfiguration.openshift.io/touch";
/// Written by our own patch when a write brought the old boot image back: `<count> <target>`,
/// how many times the image was put back after it had been set to `<target>` (behaviour §4,
/// rule 11). It lives on the object, so it survives restarts and is the same for every replica.
pub const REVERTS_ANNOTATION: &str = "bootimages.machineconfiguration.openshift.io/reverts";
/// Reverts of the same target that are re-mutated; the next one is left as sent.
pub const REVERT_LIMIT: u32 = 3;
pub use super::stream_choice::OS_STREAM_LABEL;
pub const OS_ID_LABEL: &str = "machine.openshift.io/os-id";
pub const ARCH_ANNOTATION: &str = "capacity.cluster-autoscaler.kubernetes.io/labels";
const ARCH_LABEL_PREFIX: &str = "kubernetes.io/arch=";

/// A JSON Patch (RFC 6902) of `add` and `replace` operations, the only ones the webhook
/// writes, serialized by serde on the request path; [`Patch::to_json_patch`] hands it to
/// the `json-patch` crate to apply.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Patch(pub Vec<PatchOp>);

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PatchOp {
    pub op: OpKind,
    /// A JSON pointer, escaped.
    pub path: String,
    pub value: Value,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OpKind {
    Add,
    Replace,
}

impl Patch {
    /// The same operations as the `json-patch` crate's, to apply them.
    pub fn to_json_patch(&self) -> Result<json_patch::Patch, serde_json::Error> {
        serde_json::from_value(serde_json::to_value(self)?)
    }
}

/// `/` and `~` in a JSON pointer token (RFC 6901).
pub fn escape_token(out: &mut String, token: &str) {
    for c in token.chars() {
        match c {
            '~' => out.push_str("~0"),
            '/' => out.push_str("~1"),
            c => out.push(c),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub reason: Reason,
    /// One sentence for people: logs, `preview`, events.
    pub message: String,
    /// Empty unless `reason == Updated`, or `RevertLoop` where the count must be recorded.
    pub patch: Patch,
    pub platform: Option<&'static str>,
    pub arch: Option<Arch>,
    pub current: Option<String>,
    pub target: Option<String>,
    /// Which kind's enrollment let it past rule 2 (behaviour §4): its rule is the
    /// snapshot's [`ClusterFacts::enrollment_rule`].
    pub enrolled: Option<Managed>,
}

impl Decision {
    fn new(reason: Reason, message: impl Into<String>) -> Self {
        Decision {
            reason,
            message: message.into(),
            patch: Patch::default(),
            platform: None,
            arch: None,
            current: None,
            target: None,
            enrolled: None,
        }
    }

    pub(crate) fn not_applicable(message: impl Into<String>) -> Self {
        Decision::new(Reason::NotApplicable, message)
    }

    fn on(mut self, platform: Platform, arch: Arch) -> Self {
        self.platform = Some(platform.name());
        self.arch = Some(arch);
        self
    }

    fn enrolled_by(mut self, kind: Managed) -> Self {
        self.enrolled = Some(kind);
        self
    }

    fn with_images(mut self, current: Option<String>, target: Option<String>) -> Self {
        self.current = current;
        self.target = target;
        self
    }
}

/// Decide what to do with one MachineSet (behaviour §4, first match wins). Pure; never
/// panics on any input.
pub fn decide(ms: &MachineSetView<'_>, snap: &Snapshot) -> Decision {
    rules(ms, snap).unwrap_or_else(|decided| decided)
}

/// [`decide`] on a MachineSet held as a JSON value (the toucher's list, `preview`'s file).
pub fn decide_object(ms: &Value, snap: &Snapshot) -> Decision {
    // Writing a Value cannot fail, and any JSON reads as a view.
    let json = serde_json::to_vec(ms).unwrap_or_default();
    match MachineSetView::parse(&json) {
        Ok(view) => decide(&view, snap),
        Err(e) => Decision::not_applicable(format!("not a readable object: {e}")),
    }
}

fn rules(ms: &MachineSetView<'_>, snap: &Snapshot) -> Result<Decision, Decision> {
    let spec = applicable(ms, &snap.cluster)?; // 1
    let kind = enrolled(ms, &snap.cluster)?; // 2
    let decided = enrolled_rules(ms, spec, snap).unwrap_or_else(|decided| decided);
    Ok(decided.enrolled_by(kind))
}

/// Rules 3 to 11, for a MachineSet that is enrolled.
fn enrolled_rules(
    ms: &MachineSetView<'_>,
    spec: &SpecFields<'_>,
    snap: &Snapshot,
) -> Result<Decision, Decision> {
    not_owned(ms)?; // 3
    machine_api_authoritative(ms)?; // 3b
    stream_choice::label_carried(ms, snap.boot_images.as_deref()).map_err(unsupported)?; // 4
    not_windows(ms)?; // 5
    let boot_images = ready(snap)?; // 6
    let arch = architecture(ms, &snap.cluster)?; // 7
    let (platform, target) = platform_and_target(ms, spec, arch, snap, boot_images)?; // 8
    let ctx = Context {
        arch,
        control_plane: ms.is_control_plane_machine_set(),
        aws_marketplace: snap.cluster.aws_marketplace,
        infrastructure_name: snap.cluster.infrastructure_name.as_deref(),
        vsphere: snap.cluster.vsphere.as_deref(),
        learned: &snap.cluster.learned,
    };
    let change = platform_rule(platform, spec, target, &ctx)?; // 9
    stub_ignition_can_boot(spec, &change, &snap.cluster).map_err(|d| d.on(platform, arch))?; // 10
    let d = patch(ms, change).on(platform, arch);
    not_given_up(ms, d) // 11
}

/// Rule 11: not given up on. A MachineSet whose recorded reverts of this target passed
/// the limit keeps what its other writer wrote.
fn not_given_up(ms: &MachineSetView<'_>, d: Decision) -> Result<Decision, Decision> {
    let recorded = recorded_reverts(ms, d.target.as_deref().unwrap_or(""));
    if recorded > REVERT_LIMIT {
        Err(revert_loop(ms, d, recorded))
    } else {
        Ok(d)
    }
}

/// The reverts of `target` our patch recorded on `ms` (0: none, or of another target).
pub(crate) fn recorded_reverts(ms: &MachineSetView<'_>, target: &str) -> u32 {
    ms.annotation(REVERTS_ANNOTATION)
        .and_then(|v| v.split_once(' '))
        .filter(|(_, t)| *t == target)
        .and_then(|(n, _)| n.parse().ok())
        .unwrap_or(0)
}

/// [`decide`] for an UPDATE, which also sees the stored object: a write whose old object
/// already had the target and whose new object brings another image back is a revert
/// (GitOps, ACM policies). The first [`REVERT_LIMIT`] reverts of a target are re-mutated
/// and counted on the object; the next is left as sent, and so is every later write, until
/// the target changes, so that two writers do not fight (the MCO degrades after three
/// identical re-patches, OCPBUGS-55967). Never a denial.
///
/// `old` is the request's `oldObject`, read only when the new object would be patched.
pub fn decide_update(ms: &MachineSetView<'_>, old: Option<&str>, snap: &Snapshot) -> Decision {
    let d = decide(ms, snap);
    if d.reason != Reason::Updated {
        return d;
    }
    let target = d.target.clone().unwrap_or_default();
    let Some(old) = old
        .filter(|o| may_name_the_target(o, &target, &d.patch))
        .and_then(|o| MachineSetView::parse(o.as_bytes()).ok())
    else {
        return d;
    };
    let recorded = recorded_reverts(&old, &target).max(recorded_reverts(ms, &target));
    if recorded > REVERT_LIMIT {
        // Given up already; the writer dropped our record: write it back.
        return revert_loop(ms, d, recorded);
    }
    let before = decide(&old, snap);
    let had_target = before.reason == Reason::UpToDate && before.target.as_deref() == Some(&target);
    if !had_target {
        return d;
    }
    let count = recorded + 1;
    if count > REVERT_LIMIT {
        return revert_loop(ms, d, count);
    }
    let mut d = d;
    let map_created = d
        .patch
        .0
        .iter()
        .any(|op| op.path == "/metadata/annotations");
    d.patch
        .0
        .extend(record_reverts(ms, count, &target, map_created));
    let writer = match ms.labels().get(HIVE_MACHINE_POOL_LABEL) {
        Some(pool) => hive_writer(pool),
        None => "another writer".to_owned(),
    };
    d.message = format!(
        "{} (revert {count} of {REVERT_LIMIT}: {writer} put the old image back)",
        d.message
    );
    d
}

/// Whether the old object's text can hold the target or a count of its reverts: it must
/// then name the target (the count annotation does) or every string the patch writes
/// outside `metadata` (the image it would have). Most UPDATEs of a stale MachineSet have an
/// old object just as stale, and this spares reading it (a second parse, a second decision)
/// on the request path. `oldObject` is written by the apiserver's encoder, which writes
/// these characters as they are; a string with any other character is not looked for, and
/// the old object is read.
fn may_name_the_target(old: &str, target: &str, patch: &Patch) -> bool {
    fn strings<'v>(value: &'v Value, out: &mut Vec<&'v str>) {
        match value {
            Value::String(s) => out.push(s),
            Value::Array(items) => items.iter().for_each(|v| strings(v, out)),
            Value::Object(map) => map.values().for_each(|v| strings(v, out)),
            _ => {}
        }
    }
    let plain = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._:/+=@ ".contains(&b))
    };
    let mut written = Vec::new();
    for op in patch
        .0
        .iter()
        .filter(|op| !op.path.starts_with("/metadata/"))
    {
        strings(&op.value, &mut written);
    }
    written.retain(|s| !s.is_empty());
    if !plain(target) || written.is_empty() || !written.iter().all(|s| plain(s)) {
        return true;
    }
    // memchr's SIMD search: the old object is kilobytes, and `str::contains` went through
    // it far slower on every UPDATE of a stale MachineSet.
    let has = |s: &str| memchr::memmem::find(old.as_bytes(), s.as_bytes()).is_some();
    // Where the patch writes the target itself (GCP), one search answers both.
    has(target) || (!written.contains(&target) && written.iter().all(|s| has(s)))
}

/// The op recording `count` reverts of `target` (none when it is recorded already).
fn record_reverts(
    ms: &MachineSetView<'_>,
    count: u32,
    target: &str,
    map_created: bool,
) -> Option<PatchOp> {
    let value = format!("{count} {target}");
    if ms.annotation(REVERTS_ANNOTATION) == Some(value.as_str()) {
        return None;
    }
    let annotations = match ms.annotations_for(REVERTS_ANNOTATION) {
        Annotations::Null | Annotations::Absent if map_created => {
            Annotations::Map { has_key: false }
        }
        a => a,
    };
    annotation_op(annotations, REVERTS_ANNOTATION, &value)
}

/// Who writes the old image back on a MachineSet Hive made: Hive itself, which does so only
/// when the hub's MachinePool carries the override annotation.
fn hive_writer(pool: &str) -> String {
    format!(
        "Hive (which made this MachineSet from MachinePool {pool:?}, and writes the providerSpec back when that MachinePool on the hub carries {HIVE_OVERRIDE_ANNOTATION}: \"true\")"
    )
}

/// `d` (an `Updated` decision) turned into `RevertLoop`: no image moves; only the count is
/// recorded if the object does not carry it.
fn revert_loop(ms: &MachineSetView<'_>, d: Decision, count: u32) -> Decision {
    let provider_spec = ms.provider_spec_pointer();
    let fields: Vec<String> = d
        .patch
        .0
        .iter()
        .filter_map(|op| op.path.strip_prefix(provider_spec))
        .map(|p| {
            let mut f = provider_spec[1..].replace('/', ".");
            for token in p.split('/').skip(1) {
                if token.parse::<usize>().is_ok() {
                    f.push_str(&format!("[{token}]"));
                } else {
                    f.push('.');
                    f.push_str(&token.replace("~1", "/").replace("~0", "~"));
                }
            }
            f
        })
        .collect();
    let fields = if fields.is_empty() {
        "the boot image".to_owned()
    } else {
        fields.join(", ")
    };
    let target = d.target.clone().unwrap_or_default();
    let current = d.current.clone().unwrap_or_default();
    let message = match ms.labels().get(HIVE_MACHINE_POOL_LABEL) {
        Some(pool) => format!(
            "{} put {fields} back to {current} {count} times after it was set to {target}: its writes are left as sent and the MachineSet is not touched for this target; remove {HIVE_OVERRIDE_ANNOTATION} from the MachinePool on the hub (Hive then leaves the providerSpec alone), or opt the MachineSet out with the label {OPT_OUT_LABEL}=false",
            hive_writer(pool)
        ),
        None => format!(
            "another writer put {fields} back to {current} {count} times after it was set to {target}: its writes are left as sent and the MachineSet is not touched for this target; make that writer ignore {fields} (Argo CD ignoreDifferences, an ACM policy without it), or opt the MachineSet out with the label {OPT_OUT_LABEL}=false"
        ),
    };
    let mut out = Decision::new(Reason::RevertLoop, message).with_images(d.current, d.target);
    out.platform = d.platform;
    out.arch = d.arch;
    out.patch = Patch(
        record_reverts(ms, count, &target, false)
            .into_iter()
            .collect(),
    );
    out
}

/// Rule 1: a `machine.openshift.io` MachineSet (or, with `--control-plane-machine-sets`,
/// a ControlPlaneMachineSet) with a providerSpec object.
fn applicable<'v, 'a>(
    ms: &'v MachineSetView<'a>,
    cluster: &ClusterFacts,
) -> Result<&'v SpecFields<'a>, Decision> {
    let (kind, api_version) = (ms.kind(), ms.api_version());
    if ms.is_control_plane_machine_set()
        && api_version.starts_with("machine.openshift.io/")
        && !cluster.control_plane_machine_sets
    {
        return Err(Decision::not_applicable(
            "ControlPlaneMachineSets are not managed (--control-plane-machine-sets is off)",
        ));
    }
    if !(kind == "MachineSet" || ms.is_control_plane_machine_set())
        || !api_version.starts_with("machine.openshift.io/")
    {
        return Err(Decision::not_applicable(format!(
            "not a machine.openshift.io MachineSet (apiVersion {api_version:?}, kind {kind:?})"
        )));
    }
    match ms.provider_spec() {
        ProviderSpecValue::None => Err(Decision::not_applicable("no providerSpec value")),
        ProviderSpecValue::NotObject(_) => Err(Decision::new(
            Reason::InvalidProviderSpec,
            "spec.template.spec.providerSpec.value is not an object",
        )),
        ProviderSpecValue::Object(spec) => Ok(spec),
    }
}

/// 2. Not opted out, by label or by the enrollment of its kind: the kind that enrolled it.
fn enrolled(ms: &MachineSetView<'_>, cluster: &ClusterFacts) -> Result<Managed, Decision> {
    if ms.labels().get(OPT_OUT_LABEL) == Some("false") {
        return Err(Decision::new(
            Reason::OptedOut,
            format!("label {OPT_OUT_LABEL}=false"),
        ));
    }
    let (kind, enrollment) = if ms.is_control_plane_machine_set() {
        (Managed::ControlPlaneMachineSets, &cluster.cpms_enrollment)
    } else {
        (Managed::MachineSets, &cluster.enrollment)
    };
    let rule = cluster.enrollment_rule(kind);
    match enrollment {
        Enrollment::All => Ok(kind),
        Enrollment::None => Err(Decision::new(
            Reason::OptedOut,
            format!("MachineConfiguration cluster selects none (mode None): {rule}"),
        )),
        Enrollment::Partial(selector) => {
            let labels: BTreeMap<String, String> = ms
                .labels()
                .strings()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect();
            if selector.matches(&labels) {
                Ok(kind)
            } else {
                Err(Decision::new(
                    Reason::OptedOut,
                    format!(
                        "not selected by the MachineConfiguration Partial selector {selector}: {rule}"
                    ),
                ))
            }
        }
    }
}

/// 3. Somebody else's: its owner manages the providerSpec.
fn not_owned(ms: &MachineSetView<'_>) -> Result<(), Decision> {
    match ms.first_owner() {
        Some((kind, name)) => Err(Decision::new(
            Reason::OwnedByController,
            format!("owned by {kind}/{name}: its owner manages the providerSpec"),
        )),
        None => Ok(()),
    }
}

/// The label Hive puts on the MachineSets it makes from a MachinePool. Hive writes their
/// providerSpec back only when the hub's MachinePool carries [`HIVE_OVERRIDE_ANNOTATION`], so
/// they are managed as the MCO manages them, and a write-back is caught by rule 11.
pub const HIVE_MACHINE_POOL_LABEL: &str = "hive.openshift.io/machine-pool";
/// The annotation on the hub's MachinePool that makes Hive write its providerSpec back.
pub const HIVE_OVERRIDE_ANNOTATION: &str = "hive.openshift.io/override-machinepool-platform";

/// 3b. MAPI -> CAPI migration: only a MachineSet the Machine API is authoritative for is
/// ours to write (absent: clusters without the migration).
fn machine_api_authoritative(ms: &MachineSetView<'_>) -> Result<(), Decision> {
    match ms.authoritative_api() {
        Some(api @ ("ClusterAPI" | "Migrating")) => Err(Decision::new(
            Reason::ClusterAPIAuthoritative,
            format!(
                "status.authoritativeAPI is {api}: the Cluster API copy is authoritative, and writing this Machine API copy would fight the migration"
            ),
        )),
        _ => Ok(()),
    }
}

/// 4 (and 8). A stream the ConfigMap does not carry is left alone.
fn unsupported(NotCarried(message): NotCarried) -> Decision {
    Decision::new(Reason::UnsupportedOSStream, message)
}

/// 5. Windows images come from elsewhere.
fn not_windows(ms: &MachineSetView<'_>) -> Result<(), Decision> {
    if ms.os_id(OS_ID_LABEL) == Some("Windows") {
        Err(Decision::new(
            Reason::Windows,
            format!("{OS_ID_LABEL}=Windows"),
        ))
    } else {
        Ok(())
    }
}

/// 6. The ConfigMap has been read, and a master has completed the current upgrade.
fn ready(snap: &Snapshot) -> Result<&BootImages, Decision> {
    let Some(boot_images) = snap.boot_images.as_deref() else {
        return Err(Decision::new(
            Reason::NotReady,
            "the coreos-bootimages ConfigMap has not been read yet",
        ));
    };
    if !snap.cluster.gate.open {
        return Err(Decision::new(
            Reason::UpgradeInProgress,
            snap.cluster.gate.reason.clone(),
        ));
    }
    Ok(boot_images)
}

/// Rule 7: arch from the autoscaler annotation (`k=v,k=v`), or the control plane's; never
/// a guess on a multi-arch cluster (OCPBUGS-69674).
fn architecture(ms: &MachineSetView<'_>, cluster: &ClusterFacts) -> Result<Arch, Decision> {
    if ms.is_control_plane_machine_set() {
        // The control plane's own machines: its architecture, always (as the MCO).
        return cluster.control_plane_arch.ok_or_else(|| {
            Decision::new(
                Reason::ArchitectureUnknown,
                "the control-plane architecture is not known",
            )
        });
    }
    let Some(value) = ms.annotation(ARCH_ANNOTATION) else {
        if cluster.multi_arch {
            return Err(Decision::new(
                Reason::ArchitectureUnknown,
                format!(
                    "no architecture annotation found on machineset ({ARCH_ANNOTATION}) in a multi-arch cluster: not guessing"
                ),
            ));
        }
        return cluster.control_plane_arch.ok_or_else(|| {
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

/// Rule 8: the platform serves this providerSpec kind on this cluster, and the
/// MachineSet's stream has its image for this architecture.
fn platform_and_target<'s>(
    ms: &MachineSetView<'_>,
    spec: &SpecFields<'_>,
    arch: Arch,
    snap: &Snapshot,
    boot_images: &'s BootImages,
) -> Result<(Platform, &'s Target), Decision> {
    let kind = spec.kind();
    let spec_kind = kind.as_str().unwrap_or("");
    let platform = match &snap.cluster.platform {
        Some(cluster) => match Platform::by_name(cluster) {
            Some(p) if p.provider_spec_kind() == spec_kind => Some(p),
            Some(p) => {
                return Err(Decision::new(
                    Reason::UnsupportedPlatform,
                    format!(
                        "providerSpec kind {spec_kind:?} does not match the cluster platform {} ({})",
                        p.name(),
                        p.provider_spec_kind()
                    ),
                ));
            }
            None => {
                return Err(Decision::new(
                    Reason::UnsupportedPlatform,
                    format!("cluster platform {cluster} is not supported"),
                ));
            }
        },
        None => Platform::by_kind(spec_kind),
    };
    let Some(platform) = platform else {
        let what = platforms::known_platform_of_kind(spec_kind)
            .map(|p| format!("platform {p} ({spec_kind}) is not supported yet"))
            .unwrap_or_else(|| format!("unknown providerSpec kind {spec_kind:?}"));
        return Err(Decision::new(Reason::UnsupportedPlatform, what));
    };
    if !platform.serves(arch) {
        return Err(Decision::new(
            Reason::UnsupportedArchitecture,
            format!(
                "{} boot images are not managed for {arch} machines",
                platform.name()
            ),
        )
        .on(platform, arch));
    }
    let chosen = stream_choice::choose(ms, spec, platform, boot_images, &snap.cluster.learned)
        .map_err(|n| unsupported(n).on(platform, arch))?;
    let doc = chosen.doc;
    if !doc.architectures.contains(&arch) {
        return Err(Decision::new(
            Reason::NoImageInStream,
            format!("the stream {} has no {arch} architecture", doc.name),
        )
        .on(platform, arch));
    }
    match doc.target(arch, platform) {
        Some(Ok(target)) => Ok((platform, target)),
        Some(Err(why)) => Err(Decision::new(
            Reason::NoImageInStream,
            format!(
                "the stream's {} entry for {arch} is unusable: {why}",
                platform.name()
            ),
        )
        .on(platform, arch)),
        None => Err(Decision::new(
            Reason::NoImageInStream,
            format!("the stream has no {} image for {arch}", platform.name()),
        )
        .on(platform, arch)),
    }
}

/// What the platform rule found to change.
struct Change {
    edits: Vec<Edit>,
    current: String,
    target: String,
}

/// 9. The platform's own rule: which fields move, or why none may.
fn platform_rule(
    platform: Platform,
    spec: &SpecFields<'_>,
    target: &Target,
    ctx: &Context<'_>,
) -> Result<Change, Decision> {
    let arch = ctx.arch;
    match target.reconcile(spec, ctx) {
        Outcome::Changes {
            edits,
            current,
            target,
        } => Ok(Change {
            edits,
            current,
            target,
        }),
        Outcome::UpToDate { current, target } => Err(Decision::new(
            Reason::UpToDate,
            format!("boot image is already {target}"),
        )
        .with_images(Some(current), Some(target))
        .on(platform, arch)),
        Outcome::Skip {
            reason,
            message,
            current,
            target,
        } => Err(Decision::new(reason, message)
            .with_images(current, target)
            .on(platform, arch)),
    }
}

/// Rule 10: new images boot only with a spec-3 stub Ignition, so the user-data Secret
/// the MachineSet names must be read, exist, and hold one.
fn stub_ignition_can_boot(
    spec: &SpecFields<'_>,
    change: &Change,
    cluster: &ClusterFacts,
) -> Result<(), Decision> {
    let Some(secret) = spec.user_data_secret() else {
        return Ok(());
    };
    let target = &change.target;
    if !cluster.stubs.grants(&secret) {
        return Err(not_granted(&secret, cluster)
            .with_images(Some(change.current.clone()), Some(target.clone())));
    }
    if cluster.stubs.unchecked {
        return Ok(());
    }
    let (reason, message) = match cluster.stubs.by_name.get(secret.as_ref()) {
        Some(Stub::Version(v)) if v.starts_with('3') => return Ok(()),
        Some(Stub::Version(v)) => (
            Reason::StubIgnitionSpec2,
            format!(
                "user-data Secret {secret} holds an Ignition spec {v} stub, which {target} cannot boot: upgrade the stub to spec 3 first (--upgrade-stub-ignition does it, keeping a backup)"
            ),
        ),
        Some(Stub::Unreadable(why)) => (
            Reason::StubIgnitionUnreadable,
            format!(
                "user-data Secret {secret} holds no readable stub Ignition: {why}; the boot image stays until it does"
            ),
        ),
        Some(Stub::Missing) => (
            Reason::UserDataSecretMissing,
            format!(
                "user-data Secret {secret} does not exist: no machine of this MachineSet can boot until it does; the boot image stays"
            ),
        ),
        None => (
            Reason::StubIgnitionUnknown,
            format!(
                "the stub Ignition of user-data Secret {secret} is not read yet; the boot image moves to {target} once it is, if it is spec 3"
            ),
        ),
    };
    Err(Decision::new(reason, message)
        .with_images(Some(change.current.clone()), Some(target.clone())))
}

/// A user-data Secret outside the grant is never read: its stub cannot be checked. The
/// message names the Secret and how to grant it.
fn not_granted(secret: &str, cluster: &ClusterFacts) -> Decision {
    let granted = cluster
        .stubs
        .granted
        .iter()
        .flatten()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(",");
    Decision::new(
        Reason::UserDataSecretNotGranted,
        format!(
            "user-data Secret {secret} is outside the webhook's grant (--user-data-secrets={granted}): its stub Ignition cannot be checked, so the boot image stays; grant it by adding {secret} to the resourceNames of Role bootimage-webhook-user-data-secrets in openshift-machine-api (manifests/kustomization.yaml: the user-data Secrets patch), which also adds it to --user-data-secrets"
        ),
    )
}

/// 12. The patch: the platform's edits and the annotation that records the image.
fn patch(ms: &MachineSetView<'_>, change: Change) -> Decision {
    let provider_spec = ms.provider_spec_pointer();
    let Change {
        edits,
        current,
        target,
    } = change;
    let mut ops: Vec<PatchOp> = edits
        .into_iter()
        .map(|e| set([provider_spec, &e.pointer].concat(), e.exists, e.value))
        .collect();
    ops.extend(annotation_op(
        ms.annotations_for(BOOT_IMAGE_ANNOTATION),
        BOOT_IMAGE_ANNOTATION,
        &target,
    ));
    let was = if current.is_empty() {
        "<empty>"
    } else {
        &current
    };
    let mut message = String::with_capacity(16 + was.len() + target.len());
    for part in ["boot image ", was, " -> ", &target] {
        message.push_str(part);
    }
    let mut d = Decision::new(Reason::Updated, message);
    d.patch = Patch(ops);
    d.with_images(Some(current), Some(target))
}

fn set(path: String, exists: bool, value: Value) -> PatchOp {
    let op = if exists { OpKind::Replace } else { OpKind::Add };
    PatchOp { op, path, value }
}

/// The op that sets `metadata.annotations[key]`, creating the map when there is none.
fn annotation_op(annotations: Annotations, key: &str, value: &str) -> Option<PatchOp> {
    const MAP: &str = "/metadata/annotations";
    let value = Value::String(value.to_owned());
    let map = || Value::Object(Map::from_iter([(key.to_owned(), value.clone())]));
    match annotations {
        Annotations::Map { has_key } => {
            let mut path = String::with_capacity(MAP.len() + 1 + key.len() + 4);
            path.push_str(MAP);
            path.push('/');
            escape_token(&mut path, key);
            Some(set(path, has_key, value.clone()))
        }
        Annotations::Null => Some(set(MAP.into(), true, map())),
        Annotations::Absent => Some(set(MAP.into(), false, map())),
        // No metadata object, or annotations that are not a map: the apiserver would have
        // refused such an object; record nothing rather than overwrite it.
        Annotations::Unwritable => None,
    }
}

#[cfg(test)]
mod tests;
