//! Every Kubernetes API this program calls, in one table: the watchers and the toucher
//! build their clients from it, and the RBAC consistency test compares it with
//! `manifests/base/rbac.yaml`. Namespaces and names are the defaults of the flags.

use kube::core::{ApiResource, GroupVersionKind};

/// Where a resource lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Cluster,
    /// A fixed namespace (the default of its flag).
    Namespace(&'static str),
    /// The pod's own namespace (`POD_NAMESPACE`).
    Own,
}

#[derive(Debug, Clone, Copy)]
pub struct Call {
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
    pub scope: Scope,
    /// Object names the calls are limited to (by field selector or by name), if any.
    pub names: &'static [&'static str],
    pub verbs: &'static [&'static str],
    /// The code that makes the call.
    pub why: &'static str,
}

impl Call {
    pub fn api_resource(&self) -> ApiResource {
        ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(self.group, self.version, self.kind),
            self.plural,
        )
    }
}

pub const MCO_NAMESPACE: &str = "openshift-machine-config-operator";
pub const MACHINE_API_NAMESPACE: &str = "openshift-machine-api";
pub const BOOTIMAGES_CONFIGMAP: &str = "coreos-bootimages";
pub(crate) const LEASE_NAME: &str = "bootimage-webhook";
/// The Lease of `import`, the importers' own process.
pub const IMPORTER_LEASE_NAME: &str = "bootimage-importer";
/// The ConfigMap the importer publishes the images it proved into (its own namespace).
pub const IMPORTED_IMAGES_CONFIGMAP: &str = "bootimage-importer-images";
/// The ValidatingAdmissionPolicy that limits this ServiceAccount's MachineSet writes to boot
/// images, and its binding (`manifests/base/validatingadmissionpolicy.yaml`); the toucher
/// probes that it holds.
pub const ADMISSION_POLICY: &str = "bootimage-webhook-boot-images-only";

const LIST_WATCH: &[&str] = &["list", "watch"];
const LIST_WATCH_GET: &[&str] = &["get", "list", "watch"];

pub const CONFIGMAP: Call = Call {
    group: "",
    version: "v1",
    kind: "ConfigMap",
    plural: "configmaps",
    scope: Scope::Namespace(MCO_NAMESPACE),
    names: &[BOOTIMAGES_CONFIGMAP],
    verbs: LIST_WATCH,
    why: "watch::start: the boot images (watcher, field selector metadata.name)",
};
pub(crate) const MACHINECONFIGPOOL: Call = Call {
    group: "machineconfiguration.openshift.io",
    version: "v1",
    kind: "MachineConfigPool",
    plural: "machineconfigpools",
    scope: Scope::Cluster,
    names: &["master"],
    verbs: LIST_WATCH,
    why: "watch::watch_master_pool: with --master-pool-gate, the master pool for the gate (field selector metadata.name)",
};
pub(crate) const MACHINECONFIG: Call = Call {
    group: "machineconfiguration.openshift.io",
    version: "v1",
    kind: "MachineConfig",
    plural: "machineconfigs",
    scope: Scope::Cluster,
    names: &[],
    verbs: LIST_WATCH,
    why: "watch::watch_master_pool: with --master-pool-gate, metadata of the rendered MachineConfigs, for the release annotation",
};
pub(crate) const INFRASTRUCTURE: Call = Call {
    group: "config.openshift.io",
    version: "v1",
    kind: "Infrastructure",
    plural: "infrastructures",
    scope: Scope::Cluster,
    names: &["cluster"],
    verbs: LIST_WATCH,
    why: "watch::start: the cluster platform",
};
pub(crate) const CLUSTERVERSION: Call = Call {
    group: "config.openshift.io",
    version: "v1",
    kind: "ClusterVersion",
    plural: "clusterversions",
    scope: Scope::Cluster,
    names: &["version"],
    verbs: LIST_WATCH,
    why: "watch::start: multi-arch flag and upgrade history",
};
pub(crate) const NODE: Call = Call {
    group: "",
    version: "v1",
    kind: "Node",
    plural: "nodes",
    scope: Scope::Cluster,
    names: &[],
    verbs: LIST_WATCH,
    why: "watch::start: metadata of the master nodes (label selector), for the control-plane arch",
};
pub(crate) const MACHINECONFIGURATION: Call = Call {
    group: "operator.openshift.io",
    version: "v1",
    kind: "MachineConfiguration",
    plural: "machineconfigurations",
    scope: Scope::Cluster,
    names: &["cluster"],
    verbs: LIST_WATCH,
    why: "watch::start: enrollment, managedBootImagesStatus or (4.17, 4.18) spec.managedBootImages (absent is normal)",
};
/// The user-data Secrets OpenShift makes in the machine API namespace: the installer's
/// `worker-user-data` and `master-user-data`, and the MCO's `<pool>-user-data-managed` of
/// the two pools every cluster has. The default of `--user-data-secrets`, and the
/// `resourceNames` of the shipped Role.
pub const USER_DATA_SECRETS: &[&str] = &[
    "worker-user-data",
    "master-user-data",
    "worker-user-data-managed",
    "master-user-data-managed",
];

pub(crate) const USER_DATA_SECRET: Call = Call {
    group: "",
    version: "v1",
    kind: "Secret",
    plural: "secrets",
    scope: Scope::Namespace(MACHINE_API_NAMESPACE),
    names: USER_DATA_SECRETS,
    verbs: LIST_WATCH_GET,
    why: "stubs::Learner: each Secret of --user-data-secrets, watched by name (metadata only) and read (get) once per resourceVersion, for its stub Ignition version",
};
pub const MACHINESET: Call = Call {
    group: "machine.openshift.io",
    version: "v1beta1",
    kind: "MachineSet",
    plural: "machinesets",
    scope: Scope::Namespace(MACHINE_API_NAMESPACE),
    names: &[],
    verbs: &["list", "watch", "patch"],
    why: "touch::Toucher::pass: list, then merge-patch the touch annotation; touch::wall: a server-side dry-run merge patch of spec.replicas, which the admission policy must deny; watch::start_stubs: watched, to wake the toucher; importer::Lister::list: which images are waited for and named",
};
pub const CONTROLPLANEMACHINESET: Call = Call {
    group: "machine.openshift.io",
    version: "v1",
    kind: "ControlPlaneMachineSet",
    plural: "controlplanemachinesets",
    scope: Scope::Namespace(MACHINE_API_NAMESPACE),
    names: &[],
    verbs: &["list", "watch", "patch"],
    why: "touch::Toucher::pass, status: with --control-plane-machine-sets, list, then merge-patch the touch annotation; touch::wall: with no MachineSet, a server-side dry-run merge patch of a label, which the admission policy must deny; watch::start_stubs: watched, to wake the toucher; importer::Lister::list: the images they name",
};
pub(crate) const EVENT: Call = Call {
    group: "events.k8s.io",
    version: "v1",
    kind: "Event",
    plural: "events",
    scope: Scope::Namespace(MACHINE_API_NAMESPACE),
    names: &[],
    verbs: &["create", "patch"],
    why: "touch::Toucher::give_up, touch::wall, importer::Warnings::warn: kube-runtime Recorder (create, then patch a repeat)",
};
pub const LEASE: Call = Call {
    group: "coordination.k8s.io",
    version: "v1",
    kind: "Lease",
    plural: "leases",
    scope: Scope::Own,
    names: &[LEASE_NAME],
    verbs: &["get", "create", "patch"],
    why: "app::lead: kube-lease-manager (get, create, server-side apply)",
};

pub(crate) const APISERVER: Call = Call {
    group: "config.openshift.io",
    version: "v1",
    kind: "APIServer",
    plural: "apiservers",
    scope: Scope::Cluster,
    names: &["cluster"],
    verbs: &["get", "list", "watch"],
    why: "tls_profile::follow: the TLS security profile (get once, then watch by field selector metadata.name)",
};

/// With `--upgrade-stub-ignition` only: granted by the opt-in kustomize component
/// `manifests/components/upgrade-stub-ignition`, not by the base RBAC; the workers' stubs.
pub const USER_DATA_SECRET_WRITE: Call = Call {
    group: "",
    version: "v1",
    kind: "Secret",
    plural: "secrets",
    scope: Scope::Namespace(MACHINE_API_NAMESPACE),
    names: &["worker-user-data", "worker-user-data-managed"],
    verbs: &["update"],
    why: "stub_upgrade::Upgrader: with --upgrade-stub-ignition, update the stub in place, its original kept in the same Secret",
};

/// The masters' stubs, only when both `upgrade-stub-ignition` and
/// `control-plane-machine-sets` are in the build: the control plane's Ignition is rewritten
/// only where its boot image is managed.
pub(crate) const MASTER_USER_DATA_SECRET_WRITE: Call = Call {
    names: &["master-user-data", "master-user-data-managed"],
    why: "stub_upgrade::Upgrader: with --upgrade-stub-ignition and --control-plane-machine-sets, update the masters' stubs in place",
    ..USER_DATA_SECRET_WRITE
};

/// With `--aws-machine-api-credentials` only: `manifests/components/aws-machine-api-credentials`.
pub(crate) const AWS_MACHINE_API_SECRET: Call = Call {
    group: "",
    version: "v1",
    kind: "Secret",
    plural: "secrets",
    scope: Scope::Namespace(MACHINE_API_NAMESPACE),
    names: &["aws-cloud-credentials"],
    verbs: &["get"],
    why: "aws_credentials::MachineApiSecret::read: with --aws-machine-api-credentials, the machine API's AWS credentials (get by name)",
};

/// With `--vsphere-import` only: granted to the importer by `manifests/components/vsphere-import`.
pub(crate) const VSPHERE_CREDENTIALS: Call = Call {
    group: "",
    version: "v1",
    kind: "Secret",
    plural: "secrets",
    scope: Scope::Namespace("kube-system"),
    names: &["vsphere-creds"],
    verbs: &["get"],
    why: "vsphere::Access::credentials: with --vsphere-import, the vCenter credentials (get by name)",
};

/// With `--vsphere-import` only: the disk provisioning of a failure domain's first template.
pub(crate) const VSPHERE_INSTALL_CONFIG: Call = Call {
    group: "",
    version: "v1",
    kind: "ConfigMap",
    plural: "configmaps",
    scope: Scope::Namespace("kube-system"),
    names: &["cluster-config-v1"],
    verbs: &["get"],
    why: "vsphere::Access::install_config_disk_type: with --vsphere-import, platform.vsphere.diskType of the install-config (get by name)",
};

/// With `--vsphere-import` only: the Machines' templates are never deleted.
pub(crate) const VSPHERE_MACHINE: Call = Call {
    group: "machine.openshift.io",
    version: "v1beta1",
    kind: "Machine",
    plural: "machines",
    scope: Scope::Namespace(MACHINE_API_NAMESPACE),
    names: &[],
    verbs: &["list"],
    why: "importer::Lister::list: with --vsphere-import, the templates Machines name (never deleted)",
};

/// With `--openstack-import` only: granted to the importer by `manifests/components/openstack-import`.
pub(crate) const OPENSTACK_CREDENTIALS: Call = Call {
    group: "",
    version: "v1",
    kind: "Secret",
    plural: "secrets",
    scope: Scope::Namespace(MACHINE_API_NAMESPACE),
    names: &["openstack-cloud-credentials"],
    verbs: &["get"],
    why: "openstack::read: with --openstack-import, the machine API's clouds.yaml (get by name)",
};

/// With `--openstack-import` only: the CA bundle the installer keeps for the cloud.
pub(crate) const OPENSTACK_CA_BUNDLE: Call = Call {
    group: "",
    version: "v1",
    kind: "ConfigMap",
    plural: "configmaps",
    scope: Scope::Namespace("openshift-config"),
    names: &["cloud-provider-config"],
    verbs: &["get"],
    why: "openstack::read: with --openstack-import, the cloud's CA bundle, ca-bundle.pem (get by name)",
};

/// With `--openstack-import` only: the Machines' images are never deleted.
pub(crate) const OPENSTACK_MACHINE: Call = Call {
    why: "importer::Lister::list: with --openstack-import, the images Machines name (never deleted)",
    ..VSPHERE_MACHINE
};

/// With `--nutanix-import` only: granted to the importer by `manifests/components/nutanix-import`.
pub(crate) const NUTANIX_CREDENTIALS: Call = Call {
    group: "",
    version: "v1",
    kind: "Secret",
    plural: "secrets",
    scope: Scope::Namespace(MACHINE_API_NAMESPACE),
    names: &["nutanix-credentials"],
    verbs: &["get"],
    why: "nutanix::read: with --nutanix-import, the machine API's Prism Central credentials (get by name)",
};

/// With `--nutanix-import` only: the Machines' images are never deleted.
pub(crate) const NUTANIX_MACHINE: Call = Call {
    why: "importer::Lister::list: with --nutanix-import, the images Machines name (never deleted)",
    ..VSPHERE_MACHINE
};

/// With `--imported-images-configmap` only (`manifests/components/importer`): what the
/// importer published, read by the webhook.
pub(crate) const IMPORTED_IMAGES: Call = Call {
    group: "",
    version: "v1",
    kind: "ConfigMap",
    plural: "configmaps",
    scope: Scope::Own,
    names: &[IMPORTED_IMAGES_CONFIGMAP],
    verbs: LIST_WATCH,
    why: "watch::start: with --imported-images-configmap, the images the importer proved (watcher, field selector metadata.name)",
};

/// The calls of opt-in kustomize components, by component directory under
/// `manifests/components/`: granted to the webhook only when the component is in the build.
pub const COMPONENTS: &[(&str, &[Call])] = &[
    ("aws-machine-api-credentials", &[AWS_MACHINE_API_SECRET]),
    ("importer", &[IMPORTED_IMAGES]),
    // No call of its own: the admission policy's leave to write AMIs beyond the streams.
    ("aws-marketplace", &[]),
    ("control-plane-machine-sets", &[CONTROLPLANEMACHINESET]),
    ("master-pool-gate", &[MACHINECONFIGPOOL, MACHINECONFIG]),
    ("upgrade-stub-ignition", &[USER_DATA_SECRET_WRITE]),
    // None for the webhook: the importers run under the importer's ServiceAccount
    // (IMPORTER_COMPONENTS), and each of these requires the component `importer`.
    ("openstack-import", &[]),
    ("nutanix-import", &[]),
    ("vsphere-import", &[]),
    // None for the webhook: the keeper runs under a ServiceAccount of its own (KEEPER).
    ("skew-record-keeper", &[]),
];

/// The calls two opt-in components grant together, beyond each one's own.
pub const COMPONENT_PAIRS: &[(&str, &str, &[Call])] = &[(
    "upgrade-stub-ignition",
    "control-plane-machine-sets",
    &[MASTER_USER_DATA_SECRET_WRITE],
)];

/// The calls the base RBAC grants.
pub const ALL: &[Call] = &[
    CONFIGMAP,
    INFRASTRUCTURE,
    CLUSTERVERSION,
    NODE,
    MACHINECONFIGURATION,
    USER_DATA_SECRET,
    MACHINESET,
    EVENT,
    LEASE,
    APISERVER,
];

/// Where OpenShift keeps its Cluster API objects.
pub const CLUSTER_API_NAMESPACE: &str = "openshift-cluster-api";
const LIST_GET_CREATE_DELETE: &[&str] = &["list", "get", "create", "delete"];

pub const CLUSTER_API_MACHINESET: Call = Call {
    group: "cluster.x-k8s.io",
    version: "v1beta2",
    kind: "MachineSet",
    plural: "machinesets",
    scope: Scope::Namespace(CLUSTER_API_NAMESPACE),
    names: &[],
    verbs: &["list"],
    why: "cluster_api::pass: the Cluster API MachineSets decided",
};
pub const AWS_MACHINE_TEMPLATE: Call = Call {
    group: "infrastructure.cluster.x-k8s.io",
    version: "v1beta2",
    kind: "AWSMachineTemplate",
    plural: "awsmachinetemplates",
    scope: Scope::Namespace(CLUSTER_API_NAMESPACE),
    names: &[],
    verbs: LIST_GET_CREATE_DELETE,
    why: "cluster_api::pass: the templates the MachineSets name, the clones made (create; get when one exists) and retired (delete, ours only)",
};
pub const OPENSTACK_MACHINE_TEMPLATE: Call = Call {
    group: "infrastructure.cluster.x-k8s.io",
    version: "v1beta1",
    kind: "OpenStackMachineTemplate",
    plural: "openstackmachinetemplates",
    why: "cluster_api::pass: the templates the MachineSets name, the clones made (create; get when one exists) and retired (delete, ours only)",
    ..AWS_MACHINE_TEMPLATE
};

/// The calls of the Cluster API template maker (`cluster_api::pass`), an identity of its own
/// that no component grants yet: it creates and retires templates and writes no MachineSet.
pub const TEMPLATE_MAKER: &[Call] = &[
    CLUSTER_API_MACHINESET,
    AWS_MACHINE_TEMPLATE,
    OPENSTACK_MACHINE_TEMPLATE,
    Call {
        verbs: &["list"],
        why: "cluster_api::pass: the machine API twins' status.authoritativeAPI",
        ..MACHINESET
    },
];

/// The ServiceAccount of `skew keep` (`manifests/components/skew-record-keeper`), its own
/// identity: it reads what the survey needs and writes MachineConfiguration `cluster` alone.
pub const KEEPER_SERVICE_ACCOUNT: &str = "bootimage-webhook-skew-record-keeper";
/// Its namespace, of its own: the webhook's Service and NetworkPolicy cannot select it.
pub const KEEPER_NAMESPACE: &str = "bootimage-webhook-skew-record-keeper";
pub const KEEPER_LEASE_NAME: &str = "bootimage-webhook-skew-record-keeper";
/// The ValidatingAdmissionPolicy that limits the keeper's writes to the Manual record.
pub const KEEPER_ADMISSION_POLICY: &str = "bootimage-webhook-skew-record-only";

/// The calls of `skew keep`, granted to [`KEEPER_SERVICE_ACCOUNT`] alone.
pub const KEEPER: &[Call] = &[
    Call {
        verbs: &["list"],
        why: "skew_keeper::Keeper::pass: the MachineSets' boot images, surveyed as skew record does",
        ..MACHINESET
    },
    Call {
        verbs: &["get"],
        why: "skew_keeper::Keeper::pass: the boot images ConfigMap, whose stream tells its images' versions",
        ..CONFIGMAP
    },
    Call {
        verbs: &["get", "patch"],
        why: "skew_keeper::Keeper::pass: read the mode and record, write spec.bootImageSkewEnforcement (merge patch; the admission policy allows nothing else)",
        ..MACHINECONFIGURATION
    },
    Call {
        names: &[KEEPER_LEASE_NAME],
        why: "skew_keeper::run: kube-lease-manager, one keeper writes (get, create, server-side apply)",
        ..LEASE
    },
];

/// The ServiceAccount of `import` (`manifests/components/importer`), in the webhook's
/// namespace: it reads the cloud credentials and writes no MachineSet.
pub const IMPORTER_SERVICE_ACCOUNT: &str = "bootimage-importer";
/// The component that runs `import`, which each cloud's import component requires.
pub const IMPORTER_COMPONENT: &str = "importer";
/// The components that need [`IMPORTER_COMPONENT`] in the build.
pub const NEED_IMPORTER: &[&str] = &["vsphere-import", "openstack-import", "nutanix-import"];
/// The ValidatingAdmissionPolicy of the importer's component: the webhook's writes may set
/// an importer platform's boot value only to an image the importer's ConfigMap lists.
pub const IMPORTED_IMAGES_POLICY: &str = "bootimage-webhook-imported-images-only";

/// The calls of `import`, granted to [`IMPORTER_SERVICE_ACCOUNT`] by the component
/// `importer`: the watchers that follow the cluster, what waits for an import, its Events,
/// its Lease and the one ConfigMap it writes.
pub const IMPORTER: &[Call] = &[
    CONFIGMAP,
    INFRASTRUCTURE,
    CLUSTERVERSION,
    NODE,
    MACHINECONFIGURATION,
    Call {
        verbs: LIST_WATCH,
        why: "watch::start_stubs: watched, to wake the importers; importer::Lister::list: which images are waited for and named (no write)",
        ..MACHINESET
    },
    Call {
        why: "importer::Warnings::warn: kube-runtime Recorder (create, then patch a repeat)",
        ..EVENT
    },
    Call {
        names: &[IMPORTER_LEASE_NAME],
        why: "import::import (lease::lead): kube-lease-manager, one importer imports (get, create, server-side apply)",
        ..LEASE
    },
    Call {
        verbs: &["patch"],
        why: "importer::publish::Publisher::write: the server-side apply of the images proved, into the ConfigMap the component ships",
        ..IMPORTED_IMAGES
    },
];

/// The importer's calls of opt-in components, granted to [`IMPORTER_SERVICE_ACCOUNT`]:
/// each cloud's with its component; the ControlPlaneMachineSets when
/// `control-plane-machine-sets` is in the build too.
pub const IMPORTER_COMPONENTS: &[(&str, &[Call])] = &[
    (
        "vsphere-import",
        &[VSPHERE_CREDENTIALS, VSPHERE_INSTALL_CONFIG, VSPHERE_MACHINE],
    ),
    (
        "openstack-import",
        &[
            OPENSTACK_CREDENTIALS,
            OPENSTACK_CA_BUNDLE,
            OPENSTACK_MACHINE,
        ],
    ),
    ("nutanix-import", &[NUTANIX_CREDENTIALS, NUTANIX_MACHINE]),
    (
        "control-plane-machine-sets",
        &[Call {
            verbs: LIST_WATCH,
            why: "watch::start_stubs, importer::Lister::list: with --control-plane-machine-sets, the images they wait for and name (no write)",
            ..CONTROLPLANEMACHINESET
        }],
    ),
];
