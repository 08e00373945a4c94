//! `status` as an administrator reads it: the lines above the table (the gate, the
//! release and streams, the skew), then one row per MachineSet aligned as `oc get` aligns
//! them, or the report as JSON.

use super::{Report, Skew};
use crate::config::StatusOutput;
use crate::core::skew::Upgrade;

/// The lines above the table: the gate, the release and stream, the skew (EC2's line and a
/// blank line follow).
fn heading(report: &Report, wide: bool) -> String {
    let streams = if report.streams.is_empty() {
        String::new()
    } else {
        format!("; streams {}", report.streams.join(", "))
    };
    let cpms = match &report.enrollment.control_plane_machine_sets {
        Some(e) => format!("Enrolled ControlPlaneMachineSets: {e}\n"),
        None => String::new(),
    };
    format!(
        "Gate: {} ({})\nEnrolled MachineSets: {}\n{cpms}Release: {}, stream {}{streams}\n{}{}",
        if report.gate.open { "open" } else { "closed" },
        report.gate.reason,
        report.enrollment.machine_sets,
        report.release.as_deref().unwrap_or("<unknown>"),
        report.stream.as_deref().unwrap_or("<unknown>"),
        skew_line(&report.skew, wide),
        record_line(&report.skew),
    )
}

/// What `status` says of the skew record (Manual mode, or no mode where one is needed).
pub(super) fn record_line(s: &Skew) -> String {
    match &s.record.advice {
        Some(a) => format!("Skew record: {}\n", a.message),
        None => String::new(),
    }
}

/// The skew line of the table output.
pub(super) fn skew_line(s: &Skew, wide: bool) -> String {
    let mut line = String::from("Skew: ");
    match &s.oldest {
        Some(o) => {
            let image = if wide {
                &o.image
            } else {
                o.image.rsplit('/').next().unwrap_or(&o.image)
            };
            line += &format!("oldest boot image {image} ({}/{}): ", o.namespace, o.name);
            if let Some(v) = &o.rhcos_version {
                line += &format!("RHCOS {v}, ");
            }
            line += &format!(
                "RHEL {}, OpenShift {} (from {}){}",
                o.rhel_version,
                o.ocp_release.as_deref().unwrap_or("<unknown>"),
                o.source,
                if o.below_floor {
                    ", below the MCO's floor"
                } else {
                    ""
                },
            );
        }
        None => line += "no boot image of known version",
    }
    if !s.unknown.is_empty() {
        line += &format!(
            "; {} of {} MachineSets with a boot image of unknown version",
            s.unknown.len(),
            s.machine_sets
        );
    }
    let e = &s.enforcement;
    line += "; MCO skew enforcement ";
    line += e.mode.as_deref().unwrap_or("<unknown>");
    let recorded: Vec<String> = [
        ("OCP", &e.recorded_ocp_version),
        ("RHCOS", &e.recorded_rhcos_version),
    ]
    .into_iter()
    .filter_map(|(k, v)| v.as_ref().map(|v| format!("{k} {v}")))
    .collect();
    if !recorded.is_empty() {
        line += &format!(" (recorded {})", recorded.join(", "));
    }
    line += &match e.upgrade {
        Upgrade::Refused => format!(": an upgrade would be refused ({})", e.message),
        Upgrade::Allowed => format!(": an upgrade would not be refused ({})", e.message),
        Upgrade::NotEnforced => format!(": {}", e.message),
        Upgrade::Unknown => format!(
            ": whether an upgrade would be refused is unknown ({})",
            e.message
        ),
    };
    line + "\n"
}

/// The report in the asked format: a table (image names shortened to their last path
/// segment), a wide table (whole names and the message), or JSON.
pub fn render(report: &Report, output: StatusOutput) -> String {
    if output == StatusOutput::Json {
        // Plain data: serializing cannot fail.
        return serde_json::to_string_pretty(report).unwrap_or_default() + "\n";
    }
    let wide = output == StatusOutput::Wide;
    let mut out = heading(report, wide);
    if let Some(ec2) = &report.ec2 {
        let asked = match &ec2.credentials {
            Some(c) => format!("asked with {c}"),
            None => "not asked".into(),
        };
        match &ec2.error {
            Some(e) => out.push_str(&format!("EC2: {asked} ({e})\n")),
            None => out.push_str(&format!("EC2: {asked}\n")),
        }
    }
    out.push_str(&super::policy::line(&report.admission_policy));
    if !report.vsphere_unmarked.is_empty() {
        out.push_str(&format!(
            "vSphere: named like our templates but not marked as ours (never deleted or used): {}\n",
            report.vsphere_unmarked.join(", ")
        ));
    }
    out.push('\n');
    out.push_str(&aligned(&table(report, wide)));
    if report.machine_sets.is_empty() {
        out.push_str("(no MachineSets)\n");
    }
    out
}

/// The header and one row per MachineSet.
fn table(report: &Report, wide: bool) -> Vec<Vec<String>> {
    let short = |s: &Option<String>| -> String {
        match s.as_deref() {
            None => "-".into(),
            Some("") => "<empty>".into(),
            Some(s) if wide => s.to_owned(),
            Some(s) => s.rsplit('/').next().unwrap_or(s).to_owned(),
        }
    };
    let mut header = vec![
        "NAMESPACE/NAME",
        "PLATFORM",
        "ARCH",
        "CURRENT",
        "TARGET",
        "REASON",
        "LAST TOUCH",
        "GIVEN UP",
    ];
    // Single-stream ConfigMaps have no stream to show.
    let streams = report.machine_sets.iter().any(|r| r.stream.is_some());
    if streams {
        header.insert(3, "STREAM");
    }
    if wide {
        header.push("MESSAGE");
    }
    let mut table: Vec<Vec<String>> = vec![header.into_iter().map(str::to_owned).collect()];
    for r in &report.machine_sets {
        let mut row = vec![
            if r.kind == "MachineSet" {
                format!("{}/{}", r.namespace, r.name)
            } else {
                format!("{}/{} ({})", r.namespace, r.name, r.kind)
            },
            r.platform.unwrap_or("-").to_owned(),
            r.arch.unwrap_or("-").to_owned(),
            short(&r.current),
            short(&r.target),
            r.reason.to_string(),
            r.last_touch.clone().unwrap_or_else(|| "-".into()),
            if r.given_up { "yes" } else { "no" }.to_owned(),
        ];
        if streams {
            row.insert(3, r.stream.clone().unwrap_or_else(|| "-".into()));
        }
        if wide {
            row.push(r.message.clone());
        }
        table.push(row);
    }
    table
}

/// Columns padded to their widest cell plus two spaces, as `oc get` prints them.
fn aligned(table: &[Vec<String>]) -> String {
    let columns = table.first().map_or(0, Vec::len);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            table
                .iter()
                .map(|r| r[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in table {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            line.push_str(cell);
            if c + 1 < columns {
                let pad = widths[c] - cell.chars().count() + 2;
                line.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}
