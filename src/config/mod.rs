//! Command line. Every flag can also come from the environment variable named in `--help`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

mod import;
mod nutanix;
mod openstack;
mod parse;
mod vsphere;

pub use import::{ImportArgs, ImporterArgs};
pub use nutanix::NutanixArgs;
pub use openstack::OpenStackArgs;
use parse::{body_budget, duration, period, rate};
pub use vsphere::{VSphereAccessArgs, VSphereArgs};

use crate::cluster::apis;
use crate::cluster::watch::WatchSettings;
use crate::serve::tls::MinVersion;

mod skew;
pub use skew::{SkewArgs, SkewCommand, SkewKeepArgs, SkewRecordArgs, TakeOverOf};

#[derive(Debug, Parser)]
#[command(
    name = "bootimage-webhook",
    version,
    about = "Keeps OpenShift MachineSets on the current RHCOS boot image"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    #[command(flatten)]
    pub log: LogArgs,
    #[command(flatten)]
    pub egress: EgressArgs,
}

/// What every outbound client (EC2, vCenter, the OVA download) trusts.
#[derive(Debug, Args)]
pub struct EgressArgs {
    /// PEM bundle of CAs trusted by every outbound client beside the system's roots: the
    /// cluster-wide proxy's, as OpenShift injects it into a ConfigMap labelled
    /// `config.openshift.io/inject-trusted-cabundle` (key `ca-bundle.crt`).
    #[arg(long, global = true, env = "BOOTIMAGE_WEBHOOK_TRUSTED_CA_BUNDLE")]
    pub trusted_ca_bundle: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the mutating admission webhook (HTTPS) and the admin port (HTTP).
    Serve(Box<ServeArgs>),
    /// Run the importers apart from the webhook, and publish the images they prove into the
    /// ConfigMap the webhook reads.
    Import(Box<ImportArgs>),
    /// Show offline what the webhook would do to MachineSets.
    #[command(
        long_about = "Show offline what the webhook would do to MachineSets: the same decision, \
without a cluster.\n\n\
Input (--machineset-file, YAML or JSON; `-` reads standard input): one MachineSet, a `kind: List` \
as `oc get machinesets -n openshift-machine-api -o yaml` prints it, or a stream of YAML documents. \
Other objects beside MachineSets (a MachineAutoscaler in the same file) are skipped with a note on \
standard error; an input with no MachineSet at all is an error.\n\n\
Output: one JSON object per MachineSet, one per line (JSON Lines; pipe to `jq .` to read), in \
input order: {\"reason\", \"message\", \"patch\", \"machineSet\"}, where machineSet is the \
object with the patch applied and patch is empty unless reason is Updated.",
        after_long_help = "Exit status:\n  0  every MachineSet was decided (with --exit-code: and none would change)\n  1  the input or the ConfigMap could not be read, or a flag is wrong\n  2  with --exit-code: at least one MachineSet would change (like `git diff --exit-code`)"
    )]
    Preview(PreviewArgs),
    /// Write a CA and a serving certificate, and print the caBundle.
    Certs(CertsArgs),
    /// Show every MachineSet of the cluster as the webhook decides it, and the gate.
    #[command(
        long_about = "Show every MachineSet of the cluster as the webhook decides it, and the gate: read-only, with the kubeconfig as kubectl finds it (KUBECONFIG, ~/.kube/config, in-cluster), the same watchers and the same decision as `serve`.\n\nOne row per MachineSet: namespace/name, platform, arch, current image, target, reason code, when the toucher last wrote it, and whether the webhook gave up on it (RevertLoop). `-o wide` adds whole image names and the message; `-o json` is for scripts."
    )]
    Status(StatusArgs),
    /// Boot image skew enforcement: record the oldest boot image in use (Manual mode).
    Skew(SkewArgs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StatusOutput {
    Table,
    Wide,
    Json,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Output format.
    #[arg(
        short = 'o',
        long,
        env = "BOOTIMAGE_WEBHOOK_STATUS_OUTPUT",
        value_enum,
        default_value = "table"
    )]
    pub output: StatusOutput,
    /// Kubeconfig file [default: as kubectl finds it: KUBECONFIG, ~/.kube/config, in-cluster].
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context [default: the current context].
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_CONTEXT")]
    pub context: Option<String>,
    /// How long to wait for the cluster's objects to be listed.
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_STATUS_TIMEOUT", value_parser = period, default_value = "30s")]
    pub timeout: Duration,
    #[command(flatten)]
    pub read: ReadArgs,
    /// vSphere: vCenter is asked which templates are ready, read-only.
    #[command(flatten)]
    pub vsphere: VSphereAccessArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Args)]
pub struct LogArgs {
    /// Log format: plain text lines for `oc logs`, or JSON objects.
    #[arg(
        long,
        global = true,
        env = "BOOTIMAGE_WEBHOOK_LOG_FORMAT",
        value_enum,
        default_value = "text"
    )]
    pub log_format: LogFormat,
    /// Log filter in RUST_LOG syntax, e.g. `info` or `info,bootimage_webhook=debug`.
    #[arg(long, global = true, env = "RUST_LOG", default_value = "info")]
    pub log_level: String,
}

/// A quarter of the Deployment's memory limit: the rest is the process itself, its
/// connections' buffers (each one's request head bounded by
/// [`MAX_HEAD`](crate::serve::server::MAX_HEAD), its TLS records by TLS, their number by
/// the connection cap, so that together they have a fixed ceiling) and what a review
/// costs beside its body.
pub const DEFAULT_MAX_BODY_BYTES_IN_FLIGHT: usize = 32 * 1024 * 1024;

/// Far below the network's speed, at which an apiserver sends a review, and fast enough for
/// the largest body to arrive within the default body timeout.
pub const DEFAULT_MIN_BODY_RATE: u64 = 1024 * 1024;

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Serving certificate chain (PEM). With --dev: certs/tls.crt, generated if missing.
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_TLS_CERT_FILE")]
    pub tls_cert_file: Option<PathBuf>,
    /// Serving private key (PEM: PKCS#1, PKCS#8 or SEC1). With --dev: certs/tls.key.
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_TLS_PRIVATE_KEY_FILE")]
    pub tls_private_key_file: Option<PathBuf>,
    /// Webhook HTTPS address [default: 0.0.0.0:9443; 127.0.0.1:9443 with --dev].
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_BIND_ADDRESS")]
    pub bind_address: Option<SocketAddr>,
    /// Admin HTTP address for /healthz, /readyz, /metrics [default: 0.0.0.0:8080; 127.0.0.1:8080 with --dev].
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_ADMIN_ADDRESS")]
    pub admin_address: Option<SocketAddr>,
    /// Lowest TLS version accepted (`1.2`/`VersionTLS12`, `1.3`/`VersionTLS13`), above the
    /// cluster's TLS security profile [default: the profile's; offline 1.2].
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_TLS_MIN_VERSION", value_enum)]
    pub tls_min_version: Option<MinVersion>,
    /// TLS 1.2 cipher suites, OpenSSL or IANA names, comma-separated, above the cluster's
    /// TLS security profile [default: the profile's; offline Intermediate's]. TLS 1.3
    /// suites are always all enabled; names rustls does not serve are left out (logged).
    #[arg(
        long,
        env = "BOOTIMAGE_WEBHOOK_TLS_CIPHER_SUITES",
        value_delimiter = ','
    )]
    pub tls_cipher_suites: Option<Vec<String>>,
    /// How often the certificate files are checked for a new pair.
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_CERT_RELOAD_INTERVAL", value_parser = period, default_value = "10s")]
    pub cert_reload_interval: Duration,
    #[command(flatten)]
    pub offline: OfflineArgs,
    /// First run on one machine: make dev certificates in certs/ if missing, use the
    /// embedded ConfigMap, listen on 127.0.0.1 only.
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_DEV")]
    pub dev: bool,
    /// Time a client has to send each request head.
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_HEADER_READ_TIMEOUT", value_parser = duration, default_value = "5s")]
    pub header_read_timeout: Duration,
    /// Time a keep-alive connection is held between requests: longer than the apiserver's
    /// own (90 s), so that it is the client that closes an idle connection.
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_IDLE_TIMEOUT", value_parser = duration, default_value = "120s")]
    pub idle_timeout: Duration,
    /// Time a client has to send a request body, and to finish the TLS handshake.
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_BODY_TIMEOUT", value_parser = duration, default_value = "10s")]
    pub body_timeout: Duration,
    /// Bytes a second a request body must keep up on average, after a grace of a second
    /// for its first bytes: a slower one is refused with 408 and its charge given back.
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_MIN_BODY_RATE", value_parser = clap::value_parser!(u64).range(1..), default_value_t = DEFAULT_MIN_BODY_RATE)]
    pub min_body_rate: u64,
    /// Bytes of request bodies held at once, across all connections: a body whose
    /// declared length does not fit in what is left is refused at once with 503 and
    /// `Retry-After: 1`, unless stalled holders, then the address holding the most, give
    /// way. One address holds at most a quarter (and never less than the largest body,
    /// 8 MiB), so that ordinary reviews are answered whoever holds the rest. The default is
    /// a quarter of the Deployment's 128 MiB memory limit; change both together.
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_MAX_BODY_BYTES_IN_FLIGHT", value_parser = body_budget, default_value_t = DEFAULT_MAX_BODY_BYTES_IN_FLIGHT)]
    pub max_body_bytes_in_flight: usize,
    /// On SIGTERM, keep serving (with readiness failing) this long so endpoints drop us
    /// [default: 5s; 0s with --dev, where no endpoints route to us].
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_SHUTDOWN_DELAY", value_parser = duration)]
    pub shutdown_delay: Option<Duration>,
    /// Then wait at most this long for in-flight requests.
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_DRAIN_TIMEOUT", value_parser = duration, default_value = "20s")]
    pub drain_timeout: Duration,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

/// What the watchers read, for `serve` and `status` alike.
#[derive(Debug, Args)]
pub struct ReadArgs {
    /// Namespace of the boot images ConfigMap.
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_CONFIGMAP_NAMESPACE", default_value = apis::MCO_NAMESPACE)]
    pub configmap_namespace: String,
    /// Name of the boot images ConfigMap.
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_CONFIGMAP_NAME", default_value = apis::BOOTIMAGES_CONFIGMAP)]
    pub configmap_name: String,
    /// Namespace of the MachineSets (and of their user-data Secrets and Events).
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_MACHINE_API_NAMESPACE", default_value = apis::MACHINE_API_NAMESPACE)]
    pub machine_api_namespace: String,
    #[command(flatten)]
    pub grant: GrantArgs,
    /// Also open the gate on the master MachineConfigPool and its rendered MachineConfig,
    /// as soon as a master runs the release, before the MCO stamps the ConfigMap (needs
    /// components/master-pool-gate's RBAC: reading MachineConfigs, which hold secrets).
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_MASTER_POOL_GATE")]
    pub master_pool_gate: bool,
    /// Also wait for ClusterVersion history[0].state == Completed before images move.
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_WAIT_FOR_UPGRADE_COMPLETE")]
    pub wait_for_upgrade_complete: bool,
    /// Also manage the ControlPlaneMachineSet's boot image (off by default, as the MCO
    /// gates it; `status` shows them). The CPMS operator ignores boot image fields: no control plane rollout
    /// follows.
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_CONTROL_PLANE_MACHINE_SETS")]
    pub control_plane_machine_sets: bool,
    /// AWS: when this process has no AWS credentials of its own (environment, the Secret of
    /// the project's CredentialsRequest), ask EC2 with the machine API's, from the Secret
    /// aws-cloud-credentials in the MachineSets' namespace (a `get` by name; the kustomize
    /// component aws-machine-api-credentials grants it and sets this).
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_AWS_MACHINE_API_CREDENTIALS")]
    pub aws_machine_api_credentials: bool,
}

impl ReadArgs {
    /// The machine API's AWS Secret, with --aws-machine-api-credentials.
    pub fn machine_api_secret(
        &self,
        client: &kube::Client,
    ) -> Option<crate::cluster::aws_credentials::MachineApiSecret> {
        self.aws_machine_api_credentials.then(|| {
            crate::cluster::aws_credentials::MachineApiSecret::new(
                client.clone(),
                &self.machine_api_namespace,
            )
        })
    }

    /// What `import` watches: the same, but no user-data Secret.
    pub(crate) fn import_watch_settings(&self) -> WatchSettings {
        WatchSettings {
            user_data_secrets: Vec::new(),
            ..self.watch_settings()
        }
    }

    pub(crate) fn watch_settings(&self) -> WatchSettings {
        WatchSettings {
            configmap_namespace: self.configmap_namespace.clone(),
            configmap_name: self.configmap_name.clone(),
            machine_api_namespace: self.machine_api_namespace.clone(),
            wait_for_upgrade_complete: self.wait_for_upgrade_complete,
            control_plane_machine_sets: self.control_plane_machine_sets,
            user_data_secrets: self.grant.user_data_secrets.clone(),
            aws_marketplace: self.grant.aws_marketplace,
            master_pool_gate: self.master_pool_gate,
            imported_images: None,
        }
    }
}

/// The user-data Secrets the webhook may read (`serve`, `status`, `preview`).
#[derive(Debug, Args)]
pub struct GrantArgs {
    /// The user-data Secrets (in the MachineSets' namespace) whose stub Ignition is read:
    /// the `resourceNames` of Role bootimage-webhook-user-data-secrets, which the shipped
    /// Deployment passes here. A MachineSet naming another Secret keeps its boot image
    /// (`UserDataSecretNotGranted`); no other Secret is ever read.
    #[arg(
        long,
        env = "BOOTIMAGE_WEBHOOK_USER_DATA_SECRETS",
        value_delimiter = ',',
        num_args = 1..,
        default_values = apis::USER_DATA_SECRETS
    )]
    pub user_data_secrets: Vec<String>,
    /// AWS: move AWS Marketplace AMIs to their product's newest image, which EC2 names and
    /// the stream does not. Set by the kustomize component aws-marketplace, whose admission
    /// policy lets the webhook write such AMIs; without it they stay
    /// (`MarketplaceNotEnabled`).
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_AWS_MARKETPLACE")]
    pub aws_marketplace: bool,
}

/// The cluster side: watchers, gate, touch (used when neither --configmap-file nor --dev).
#[derive(Debug, Args)]
pub struct ClusterArgs {
    #[command(flatten)]
    pub read: ReadArgs,
    /// Lease that elects the one replica that touches MachineSets (in the pod's namespace).
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_LEASE_NAME", default_value = apis::LEASE_NAME)]
    pub lease_name: String,
    /// The pod's namespace (downward API) [default: the kubeconfig's namespace].
    #[arg(long, env = "POD_NAMESPACE")]
    pub pod_namespace: Option<String>,
    /// The Lease holder identity (downward API) [default: the host name].
    #[arg(long, env = "POD_NAME")]
    pub pod_name: Option<String>,
    /// Touch pass even without a change, to catch MachineSets a fail-open call missed.
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_TOUCH_RESYNC", value_parser = period, default_value = "10m")]
    pub touch_resync: Duration,
    /// Touch writes per second at most.
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_TOUCH_RATE", value_parser = rate, default_value = "10")]
    pub touch_rate: f64,
    /// After a change, wait this long before touching, so every replica has seen it.
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_TOUCH_SETTLE", value_parser = duration, default_value = "5s")]
    pub touch_settle: Duration,
    /// On the Lease holder, rewrite a spec-2 stub Ignition that keeps MachineSets off
    /// their boot image as spec 3, as the MCO does, keeping the original in the same
    /// Secret's `userData-spec2-backup` (needs components/upgrade-stub-ignition's RBAC).
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_UPGRADE_STUB_IGNITION")]
    pub upgrade_stub_ignition: bool,
    /// Never touch MachineSets (and take no Lease): serve and watch only.
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_NO_TOUCH")]
    pub no_touch: bool,
    /// Touch without first proving that the ValidatingAdmissionPolicy limits our writes:
    /// for a kubeconfig the policy does not bind (a developer's). The manifests never set it.
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_NO_ADMISSION_POLICY_CHECK")]
    pub no_admission_policy_check: bool,
    /// Delay before the second touch of a MachineSet whose image did not move (doubles),
    /// and before a pass stopped by a fault of the API server is tried again (doubles to
    /// 30 s, jittered).
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_TOUCH_BACKOFF", value_parser = duration, default_value = "2s")]
    pub touch_backoff: Duration,
    /// Read what the importer (`import`, the Deployment bootimage-importer) published into
    /// this ConfigMap of the pod's namespace into the snapshot, over what importers in this
    /// process learned (set by components/importer).
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_IMPORTED_IMAGES_CONFIGMAP")]
    pub imported_images_configmap: Option<String>,
    /// Importers in this process, for development and tests: the manifests run them apart
    /// (`import`), under an identity of their own.
    #[command(flatten)]
    pub importers: ImporterArgs,
}

#[derive(Debug, Args)]
pub struct PreviewArgs {
    /// MachineSets, YAML or JSON: one, a List (`oc get machinesets -o yaml`) or a YAML
    /// stream; `-` for standard input.
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_MACHINESET_FILE")]
    pub machineset_file: PathBuf,
    /// Exit with status 2 when any MachineSet would change (0 when none would), for
    /// GitOps pipelines.
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_PREVIEW_EXIT_CODE")]
    pub exit_code: bool,
    #[command(flatten)]
    pub offline: OfflineArgs,
    #[command(flatten)]
    pub grant: GrantArgs,
}

/// What replaces the cluster offline (`serve --configmap-file`, `serve --dev`, `preview`).
#[derive(Debug, Args)]
pub struct OfflineArgs {
    /// The coreos-bootimages ConfigMap, YAML or JSON (`oc get configmap coreos-bootimages
    /// -n openshift-machine-config-operator -o yaml`). `serve` given one runs offline
    /// instead of following the cluster [default: the embedded RHCOS 9.8 one with `serve
    /// --dev` and `preview`].
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_CONFIGMAP_FILE")]
    pub configmap_file: Option<PathBuf>,
    /// Offline: open the gate even if the ConfigMap is not stamped by the MCO.
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_ASSUME_MASTERS_UPDATED")]
    pub assume_masters_updated: bool,
    /// Offline: control-plane architecture (amd64, arm64, ppc64le, s390x) [default: this machine's].
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_CONTROL_PLANE_ARCH")]
    pub control_plane_arch: Option<String>,
    /// Offline: behave as on a multi-arch cluster (no architecture guessing).
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_MULTI_ARCH")]
    pub multi_arch: bool,
    /// Offline: Infrastructure `cluster`, YAML or JSON (`oc get infrastructure cluster -o
    /// yaml`), for its infrastructure id and vSphere failure domains: without it a vSphere
    /// MachineSet is `NoFailureDomain` and an OpenStack one `NotReady`.
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_INFRASTRUCTURE_FILE")]
    pub infrastructure_file: Option<PathBuf>,
}

impl OfflineArgs {
    pub fn offline<'a>(&'a self, grant: &'a GrantArgs) -> crate::offline::Offline<'a> {
        crate::offline::Offline {
            user_data_secrets: &grant.user_data_secrets,
            aws_marketplace: grant.aws_marketplace,
            configmap_file: self.configmap_file.as_deref(),
            assume_masters_updated: self.assume_masters_updated,
            control_plane_arch: self.control_plane_arch.as_deref(),
            multi_arch: self.multi_arch,
            infrastructure_file: self.infrastructure_file.as_deref(),
        }
    }
}

#[derive(Debug, Args)]
pub struct CertsArgs {
    /// Directory for ca.crt, tls.crt, tls.key.
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_CERTS_OUT")]
    pub out: PathBuf,
    /// Names the serving certificate is valid for (DNS names or IP addresses), e.g.
    /// bootimage-webhook.bootimage-webhook.svc.
    #[arg(
        long = "dns",
        env = "BOOTIMAGE_WEBHOOK_CERTS_DNS",
        value_delimiter = ',',
        required = true
    )]
    pub dns: Vec<String>,
    /// Overwrite ca.crt, tls.crt and tls.key if they exist (a new CA: webhook
    /// configurations that trust the old one must be given the new caBundle).
    #[arg(long, env = "BOOTIMAGE_WEBHOOK_CERTS_FORCE")]
    pub force: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn every_flag_has_an_env_var() {
        fn walk(cmd: &clap::Command, missing: &mut Vec<String>) {
            for arg in cmd.get_arguments() {
                let builtin = matches!(arg.get_id().as_str(), "help" | "version");
                if !builtin && !arg.is_positional() && arg.get_env().is_none() {
                    missing.push(format!("{} --{}", cmd.get_name(), arg.get_id()));
                }
            }
            for sub in cmd.get_subcommands() {
                walk(sub, missing);
            }
        }
        let mut missing = Vec::new();
        walk(&Cli::command(), &mut missing);
        assert!(missing.is_empty(), "flags without env: {missing:?}");
    }

    #[test]
    fn timers_and_rates_that_would_break_are_refused() {
        for args in [
            &["serve", "--cert-reload-interval", "0s"][..],
            &["serve", "--touch-resync", "0s"],
            &["serve", "--touch-rate", "0"],
            &["serve", "--touch-rate", "inf"],
            &["serve", "--touch-rate", "NaN"],
            &["serve", "--touch-rate", "-1"],
            &["serve", "--max-body-bytes-in-flight", "16777215"],
            &["serve", "--max-body-bytes-in-flight", "32Mi"],
            &["serve", "--max-body-bytes-in-flight", "-1"],
        ] {
            let argv = std::iter::once("bootimage-webhook").chain(args.iter().copied());
            assert!(Cli::try_parse_from(argv).is_err(), "{args:?}");
        }
        let ok =
            Cli::try_parse_from(["bootimage-webhook", "serve", "--touch-rate", "2.5"]).unwrap();
        let Command::Serve(s) = ok.command else {
            panic!()
        };
        assert_eq!(s.cluster.touch_rate, 2.5);
    }

    #[test]
    fn defaults() {
        let cli = Cli::try_parse_from(["bootimage-webhook", "serve"]).unwrap();
        let Command::Serve(s) = cli.command else {
            panic!()
        };
        assert_eq!(s.cert_reload_interval, Duration::from_secs(10));
        assert_eq!(s.max_body_bytes_in_flight, 32 * 1024 * 1024);
        assert_eq!(s.min_body_rate, 1024 * 1024);
        assert_eq!(s.tls_min_version, None, "the cluster's profile decides");
        assert_eq!(s.tls_cipher_suites, None);
        for (given, want) in [
            ("1.2", MinVersion::Tls12),
            ("VersionTLS12", MinVersion::Tls12),
            ("1.3", MinVersion::Tls13),
            ("VersionTLS13", MinVersion::Tls13),
        ] {
            let cli =
                Cli::try_parse_from(["bootimage-webhook", "serve", "--tls-min-version", given])
                    .unwrap();
            let Command::Serve(s) = cli.command else {
                panic!()
            };
            assert_eq!(s.tls_min_version, Some(want), "{given}");
        }
        assert!(
            Cli::try_parse_from([
                "bootimage-webhook",
                "serve",
                "--tls-min-version",
                "VersionTLS11"
            ])
            .is_err()
        );
        assert_eq!(cli.log.log_format, LogFormat::Text);
    }

    #[test]
    fn the_artifact_base_url_is_an_http_directory_or_refused() {
        let parse = |url: &str| {
            Cli::try_parse_from(["bootimage-webhook", "serve", "--artifact-base-url", url])
        };
        let Command::Serve(s) = parse("https://mirror.internal/rhcos").unwrap().command else {
            panic!()
        };
        let mirror = s.cluster.importers.artifact_base_url.as_ref().unwrap();
        assert_eq!(mirror.base(), "https://mirror.internal/rhcos/");
        let settings = s.cluster.importers.vsphere.settings(Some(mirror));
        assert_eq!(settings.artifact_mirror.as_ref(), Some(mirror));
        let nutanix = s.cluster.importers.nutanix.settings(Some(mirror));
        assert_eq!(nutanix.artifact_mirror.as_ref(), Some(mirror));
        let err = parse("ftp://mirror.internal/rhcos/")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("ftp://mirror.internal/rhcos/")
                && err.contains("--artifact-base-url")
                && err.contains("not an http:// or https:// URL"),
            "{err}"
        );
        let Command::Serve(s) = Cli::try_parse_from(["bootimage-webhook", "serve"])
            .unwrap()
            .command
        else {
            panic!()
        };
        assert_eq!(s.cluster.importers.artifact_base_url, None);
    }
}
