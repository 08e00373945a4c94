//! `skew`'s flags: `skew record` (by hand) and `skew keep` (the opt-in keeper of
//! `manifests/components/skew-record-keeper`).

use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};

use super::{StatusArgs, duration, period};
use crate::cluster::apis;
use crate::core::skew::record::TakeOver;

#[derive(Debug, Args)]
pub struct SkewArgs {
    #[command(subcommand)]
    pub command: SkewCommand,
}

#[derive(Debug, Subcommand)]
pub enum SkewCommand {
    /// Print (or with --apply, make) the MachineConfiguration change Manual skew
    /// enforcement needs: the oldest boot image any MachineSet still uses.
    #[command(
        long_about = "Print the change of MachineConfiguration `cluster` that Manual boot image skew enforcement needs: `spec.bootImageSkewEnforcement: {mode: Manual, manual: {mode: RHCOSVersion, rhcosVersion: <the oldest boot image in use>}}` (OCPVersion when the image tells only its OpenShift release), as `status` computes it, with the MachineSet and image it was read from, as a merge patch and as the `oc patch` command.\n\nRefuses (exit status 1, nothing written) when no version can be told: no MachineSets, a MachineSet whose boot image version is unknown, or a version the CRD would refuse.\n\n--apply makes the change with the kubeconfig's user (never the webhook's ServiceAccount), as a merge patch of field manager bootimage-webhook-skew-record; where the MCO records the version itself (Automatic, or the MachineSets' boot images managed by it) or enforcement is turned off (mode None), only with --force."
    )]
    Record(Box<SkewRecordArgs>),
    /// Keep the Manual record current: one replica, holding its own Lease, records the
    /// oldest boot image in use whenever it changes (the opt-in component
    /// skew-record-keeper).
    #[command(
        long_about = "Keep MachineConfiguration `cluster`'s Manual skew record current, as `skew record --apply` would write it: on each pass (every --interval, while holding the Lease --lease-name in the pod's namespace) the MachineSets' boot images are surveyed and, when the oldest in use is not the one recorded, `spec.bootImageSkewEnforcement` is written as a merge patch of field manager bootimage-webhook-skew-record-keeper.\n\nOnly in Manual mode (the administrator's, or the one the MCO chose itself). Mode None, the MCO's Automatic mode (or MachineSets whose boot images it manages) and a record written by another field manager are left as they are, unless --take-over names them. Runs until SIGTERM or SIGINT."
    )]
    Keep(SkewKeepArgs),
}

#[derive(Debug, Args)]
pub struct SkewRecordArgs {
    /// Read the cluster as `status` reads it (-o table, wide or json).
    #[command(flatten)]
    pub status: StatusArgs,
    /// Make the change on MachineConfiguration `cluster` with the kubeconfig's user.
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_SKEW_RECORD_APPLY")]
    pub apply: bool,
    /// With --apply: write even where the MCO records the version itself (Automatic, or
    /// boot images it manages) or enforcement is turned off (mode None).
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_SKEW_RECORD_FORCE")]
    pub force: bool,
    /// With --apply: how long to wait for the MCO to report on the change.
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_SKEW_RECORD_WAIT", value_parser = duration, default_value = "30s")]
    pub wait: Duration,
}

/// What `--take-over` may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TakeOverOf {
    /// Skew enforcement turned off (mode None), by the administrator or the MCO.
    #[value(name = "none")]
    Off,
    /// The MCO's Automatic mode, or MachineSets whose boot images it manages.
    Automatic,
    /// A Manual record another field manager wrote.
    Others,
}

#[derive(Debug, Args)]
pub struct SkewKeepArgs {
    /// How often the record is checked.
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_SKEW_KEEP_INTERVAL", value_parser = period, default_value = "5m")]
    pub interval: Duration,
    /// What the keeper may take over besides its own record (comma-separated): none,
    /// automatic, others. Taking over mode None also needs the admission policy's check
    /// of the old mode removed (docs/configuration.md).
    #[arg(
        long,
        env = "BOOTIMAGE_WEBHOOK_SKEW_KEEP_TAKE_OVER",
        value_enum,
        value_delimiter = ','
    )]
    pub take_over: Vec<TakeOverOf>,
    /// Lease that elects the one replica that writes (in the pod's namespace).
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_SKEW_KEEP_LEASE_NAME", default_value = apis::KEEPER_LEASE_NAME)]
    pub lease_name: String,
    /// The pod's namespace (downward API) [default: the kubeconfig's namespace].
    #[arg(long, env = "POD_NAMESPACE")]
    pub pod_namespace: Option<String>,
    /// The Lease holder identity (downward API) [default: the host name].
    #[arg(long, env = "POD_NAME")]
    pub pod_name: Option<String>,
    /// Namespace of the MachineSets.
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_MACHINE_API_NAMESPACE", default_value = apis::MACHINE_API_NAMESPACE)]
    pub machine_api_namespace: String,
    /// Namespace of the boot images ConfigMap.
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_CONFIGMAP_NAMESPACE", default_value = apis::MCO_NAMESPACE)]
    pub configmap_namespace: String,
    /// Name of the boot images ConfigMap.
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_CONFIGMAP_NAME", default_value = apis::BOOTIMAGES_CONFIGMAP)]
    pub configmap_name: String,
}

impl SkewKeepArgs {
    pub fn take_over(&self) -> TakeOver {
        let has = |t| self.take_over.contains(&t);
        TakeOver {
            none: has(TakeOverOf::Off),
            automatic: has(TakeOverOf::Automatic),
            others: has(TakeOverOf::Others),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use clap::Parser;

    use super::*;
    use crate::config::{Cli, Command, StatusOutput};

    fn skew(args: &[&str]) -> SkewCommand {
        let cli = Cli::try_parse_from([&["bootimage-webhook", "skew"][..], args].concat()).unwrap();
        let Command::Skew(skew) = cli.command else {
            panic!()
        };
        skew.command
    }

    #[test]
    fn skew_record_reads_the_cluster_as_status_does() {
        let SkewCommand::Record(r) = skew(&["record", "--apply", "-o", "json"]) else {
            panic!()
        };
        assert!(r.apply && !r.force);
        assert_eq!(r.wait, Duration::from_secs(30));
        assert_eq!(r.status.output, StatusOutput::Json);
        assert_eq!(r.status.timeout, Duration::from_secs(30));
    }

    #[test]
    fn skew_keep_takes_over_only_what_it_is_told() {
        let SkewCommand::Keep(k) = skew(&["keep"]) else {
            panic!()
        };
        assert_eq!(k.take_over(), TakeOver::default());
        assert_eq!(k.interval, Duration::from_secs(300));
        assert_eq!(k.lease_name, "bootimage-webhook-skew-record-keeper");
        let SkewCommand::Keep(k) = skew(&["keep", "--take-over", "others,none"]) else {
            panic!()
        };
        let want = TakeOver {
            none: true,
            others: true,
            automatic: false,
        };
        assert_eq!(k.take_over(), want);
    }
}
