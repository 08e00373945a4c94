//! Which stream document a MachineSet's boot image comes from: the choice among the
//! ConfigMap's streams (behaviour §4, rules 4 and 8).
//!
//! A single-stream ConfigMap (no `data.streams`) keeps the MCO's rule: a label, when set,
//! must be `rhel-9`, and the image comes from `data.stream`. With `data.streams` (dual-stream
//! releases): the label names the stream; without one, the stream of the RHEL the current
//! image is built from; when that cannot be told, the default stream. No MachineSet is
//! moved to another RHEL major unless its label asks for that stream.

use std::fmt;

use serde_json::Value;

use super::configmap::BootImages;
use super::platforms::{Learned, Platform};
use super::skew::{self, version::rhel_major_of_release};
use super::snapshot::Snapshot;
use super::stream_doc::StreamDoc;
use super::view::{MachineSetView, ProviderSpecValue, SpecFields};

/// Set by the installer on MachineSets and ControlPlaneMachineSets: the OS stream of their
/// machines.
pub const OS_STREAM_LABEL: &str = "machineconfiguration.openshift.io/osstream";
/// The only stream a single-stream ConfigMap serves, as the MCO's `SupportedOSStream`.
pub(crate) const SUPPORTED_OS_STREAM: &str = "rhel-9";

/// How the stream was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// The MachineSet's `osstream` label.
    Label,
    /// The RHEL of its current boot image.
    Image,
    /// The ConfigMap's default (`data.stream`).
    Default,
}

/// The stream document a MachineSet's image comes from.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Chosen<'b> {
    /// Its name in `data.streams`; `None` for a single-stream ConfigMap.
    pub name: Option<&'b str>,
    pub doc: &'b StreamDoc,
    pub why: Why,
}

impl Chosen<'_> {
    /// `rhel-10 (label)`, for `status` and `preview`; `None` for a single-stream ConfigMap.
    pub fn describe(&self, boot: &BootImages) -> Option<String> {
        if boot.streams().is_empty() {
            return None;
        }
        let name = self.name.unwrap_or("default");
        let why = match self.why {
            Why::Label => "label",
            Why::Image => "image",
            Why::Default => "default",
        };
        Some(format!("{name} ({why})"))
    }
}

/// A MachineSet whose stream the ConfigMap does not carry, in words: it is left alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NotCarried(pub String);

impl fmt::Display for NotCarried {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Rule 4: a label names a stream the ConfigMap carries (`rhel-9` when it has no `streams`,
/// or has not been read yet: the MCO's rule).
pub(crate) fn label_carried(
    ms: &MachineSetView<'_>,
    boot: Option<&BootImages>,
) -> Result<(), NotCarried> {
    let Some(label) = ms.labels().get(OS_STREAM_LABEL) else {
        return Ok(());
    };
    match boot.filter(|b| !b.streams().is_empty()) {
        None if label == SUPPORTED_OS_STREAM => Ok(()),
        None => Err(NotCarried(format!(
            "unsupported stream: {label} (label {OS_STREAM_LABEL}); only {SUPPORTED_OS_STREAM} is updated"
        ))),
        Some(b) if b.streams().contains_key(label) => Ok(()),
        Some(b) => Err(NotCarried(format!(
            "unsupported stream: {label} (label {OS_STREAM_LABEL}); the coreos-bootimages ConfigMap carries {}: leaving the MachineSet alone",
            carried(b)
        ))),
    }
}

/// Rule 8: the stream document the MachineSet's image comes from.
pub(crate) fn choose<'b>(
    ms: &MachineSetView<'_>,
    spec: &SpecFields<'_>,
    platform: Platform,
    boot: &'b BootImages,
    learned: &Learned,
) -> Result<Chosen<'b>, NotCarried> {
    let streams = boot.streams();
    let default = Chosen {
        name: boot.default_stream.as_deref(),
        doc: boot.default_doc(),
        why: Why::Default,
    };
    if streams.is_empty() {
        return Ok(Chosen {
            name: None,
            ..default
        });
    }
    if let Some(label) = ms.labels().get(OS_STREAM_LABEL) {
        label_carried(ms, Some(boot))?;
        return Ok(streams
            .get_key_value(label)
            .map(|(name, doc)| Chosen {
                name: Some(name),
                doc,
                why: Why::Label,
            })
            .unwrap_or(default));
    }
    let Some(image) = platform.current_image(spec) else {
        return Ok(default);
    };
    let Some(major) = rhel_major(platform, &image, boot, learned) else {
        return Ok(default);
    };
    of_major(boot, major).ok_or_else(|| {
        NotCarried(format!(
            "boot image {image} is RHEL {major}, and the coreos-bootimages ConfigMap carries no RHEL {major} stream ({}): leaving the MachineSet alone; label it {OS_STREAM_LABEL}=<stream> to move it to another",
            carried(boot)
        ))
    })
}

/// The RHEL major an image of `platform` is built from, where it can be told: a stream
/// names it, or the platform reads it (its version, its name, what was learned).
fn rhel_major(
    platform: Platform,
    image: &str,
    boot: &BootImages,
    learned: &Learned,
) -> Option<u32> {
    if let Some(release) = boot.rhcos_release_of(image) {
        return rhel_major_of_release(release);
    }
    let version = skew::version_of(image, Some(boot), learned);
    platform.rhel_major_of(image, version.as_ref(), learned)
}

/// The stream a MachineSet follows, as `status` and `preview` show it (`rhel-10 (label)`,
/// `rhel-9 (image)`, `rhel-10 (default)`; a label no stream answers: as labelled), when
/// the ConfigMap carries `streams`; `None` otherwise.
pub fn shown(ms: &Value, snap: &Snapshot) -> Option<String> {
    let boot = snap.boot_images.as_deref()?;
    if boot.streams().is_empty() {
        return None;
    }
    let json = serde_json::to_vec(ms).ok()?;
    let view = MachineSetView::parse(&json).ok()?;
    let label = view.labels().get(OS_STREAM_LABEL);
    let ProviderSpecValue::Object(spec) = view.provider_spec() else {
        return label.map(|l| format!("{l} (label)"));
    };
    let kind = spec.kind();
    let platform = kind.as_str().and_then(Platform::by_kind);
    match platform.map(|p| choose(&view, spec, p, boot, &snap.cluster.learned)) {
        Some(Ok(chosen)) => chosen.describe(boot),
        Some(Err(_)) | None => label.map(|l| format!("{l} (label)")),
    }
}

/// The stream of RHEL `major`: the default when it is one, else the first by name.
fn of_major(boot: &BootImages, major: u32) -> Option<Chosen<'_>> {
    let mut of = boot
        .streams()
        .iter()
        .filter(|(_, d)| d.rhel_major == Some(major));
    let first = of.next()?;
    let (name, doc) = std::iter::once(first)
        .chain(of)
        .find(|(name, _)| boot.default_stream.as_deref() == Some(name.as_str()))
        .unwrap_or(first);
    Some(Chosen {
        name: Some(name),
        doc,
        why: Why::Image,
    })
}

/// `rhel-10 (RHEL 10), rhel-9 (RHEL 9)`.
fn carried(boot: &BootImages) -> String {
    let names: Vec<String> = boot
        .streams()
        .iter()
        .map(|(name, d)| match d.rhel_major {
            Some(major) => format!("{name:?} (RHEL {major})"),
            None => format!("{name:?}"),
        })
        .collect();
    names.join(", ")
}
