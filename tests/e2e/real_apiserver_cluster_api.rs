//! Cluster API MachineSets on a real kube-apiserver holding Cluster API's, CAPA's and CAPO's own
//! CRDs (tests/fixtures/crds/cluster-api/): the MachineSets and templates as
//! cluster-capi-operator writes them in `openshift-cluster-api`, the template maker's pass
//! (`cluster::cluster_api::pass`) making the clones the decision asks for, and the decision's
//! patch moving the reference, each judged by what the apiserver stored.

use crate::support;

use std::collections::BTreeMap;

use bootimage_webhook::cluster::cluster_api::{self, Outcome, Settings};
use bootimage_webhook::core::cluster_api::{
    CLONE_LABEL, ClusterApiReason, INFRASTRUCTURE_REF_NAME, SOURCE_ANNOTATION,
};
use bootimage_webhook::core::decision::{BOOT_IMAGE_ANNOTATION, Reason};
use bootimage_webhook::core::platforms::aws::{AwsLearned, Described, RED_HAT_OWNER};
use bootimage_webhook::core::platforms::openstack::{self, OpenStackLearned};
use bootimage_webhook::core::snapshot::{
    Arch, BootImages, Gate, Learned, Snapshot, parse_documents,
};
use serde_json::{Value, json};
use support::apiserver::ApiServer;

const NS: &str = "openshift-cluster-api";
const AWS_MS: &str = "ci-ln-x7k2p-worker-us-east-1a";
const AWS_TEMPLATE: &str = "ci-ln-x7k2p-worker-us-east-1a-8f3a2c1d";
const OPENSTACK_MS: &str = "ostest-x7k2p-worker-0";
const OLD_AMI: &str = "ami-0b0d0f6a2b5e6ab31";
const REGION: &str = "us-east-1";

fn fixture_path(name: &str) -> String {
    format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn stream() -> Value {
    support::fixture("stream-coreos-rhel-9.installer.json")
}

/// The ConfigMap of `stream` at `release`, stamped by a master done with it, on an amd64
/// control plane.
fn stamped(stream: &Value, release: &str) -> Snapshot {
    let data = BTreeMap::from([
        ("stream".to_owned(), stream.to_string()),
        ("releaseVersion".to_owned(), release.to_owned()),
        ("MCOReleaseImageVersion".to_owned(), release.to_owned()),
    ]);
    Snapshot::offline(
        BootImages::from_data(&data).unwrap(),
        false,
        Some(Arch::Amd64),
        false,
    )
}

/// The real stream, EC2's word that the old AMI is Red Hat's, and our OpenStack image usable.
fn snapshot() -> Snapshot {
    let base = stamped(&stream(), "4.21.0");
    let mut aws = AwsLearned::default();
    aws.images.insert(
        (REGION.into(), OLD_AMI.into()),
        Described::Found {
            owner: RED_HAT_OWNER.into(),
            name: "rhcos-416.94.202405291527-0-x86_64".into(),
        },
    );
    let mut cluster = base.cluster.clone();
    cluster.infrastructure_name = Some("ostest-x7k2p".into());
    cluster.learned = Learned::default()
        .with_aws(aws)
        .with_openstack(OpenStackLearned {
            images: [our_glance_image()].into(),
            ..OpenStackLearned::default()
        });
    Snapshot::new(base.boot_images.clone(), cluster)
}

fn stream_ami() -> String {
    stream()["architectures"]["x86_64"]["images"]["aws"]["regions"][REGION]["image"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn our_glance_image() -> String {
    let release = stream()["architectures"]["x86_64"]["artifacts"]["openstack"]["release"]
        .as_str()
        .unwrap()
        .to_owned();
    openstack::image_name("ostest-x7k2p", &release)
}

/// The apiserver with the Cluster API CRDs, the namespace and the assembled fixtures.
fn start() -> ApiServer {
    let api = ApiServer::start();
    let crds = fixture_path("crds/cluster-api");
    api.kubectl_ok(["apply", "--server-side", "-f", &crds]);
    api.kubectl_ok(["wait", "--for=condition=Established", "crd", "--all"]);
    api.kubectl_ok(["create", "namespace", NS]);
    api.kubectl_ok(["apply", "--server-side", "-f", &fixture_path("cluster-api")]);
    api
}

fn settings() -> Settings {
    Settings {
        namespace: NS.into(),
        machine_api_namespace: "openshift-machine-api".into(),
        region: Some(REGION.into()),
        machine_deployments: false,
        retire: true,
    }
}

/// One template maker's pass with the admin's client, retiring: each MachineSet's outcome by
/// name, and the clones retired.
fn pass_retiring(api: &ApiServer, snap: &Snapshot) -> (BTreeMap<String, Outcome>, Vec<String>) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let done = rt.block_on(async {
        let kubeconfig = kube::config::Kubeconfig::read_from(api.kubeconfig()).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .unwrap();
        let client = kube::Client::try_from(config).unwrap();
        cluster_api::pass(&client, snap, &settings()).await.unwrap()
    });
    let retired = done
        .retired
        .into_iter()
        .map(|(kind, name, result)| {
            result.unwrap();
            format!("{kind}/{name}")
        })
        .collect();
    let outcomes = done
        .outcomes
        .into_iter()
        .map(|o| (o.machine_set.clone(), o))
        .collect();
    (outcomes, retired)
}

/// [`pass_retiring`]'s outcomes, where nothing is to be retired.
fn pass(api: &ApiServer, snap: &Snapshot) -> BTreeMap<String, Outcome> {
    let (outcomes, retired) = pass_retiring(api, snap);
    assert_eq!(retired, Vec::<String>::new(), "nothing retired");
    outcomes
}

/// Moves the AWS MachineSet as the webhook would: the decision's patch, stored.
fn repoint(api: &ApiServer, outcome: &Outcome) {
    assert_eq!(
        outcome.decision.reason,
        ClusterApiReason::Repointed,
        "{}",
        outcome.decision.message
    );
    let patch = serde_json::to_string(&outcome.decision.patch).unwrap();
    api.kubectl_ok([
        "-n",
        NS,
        "patch",
        "machineset.cluster.x-k8s.io",
        AWS_MS,
        "--type=json",
        "-p",
        &patch,
    ]);
}

fn stored(api: &ApiServer, resource: &str, name: &str) -> Value {
    api.get_json(["-n", NS, resource, name])
}

#[test]
fn real_apiserver_cluster_api_clones_are_made_and_the_reference_moves() {
    let _parallel = support::parallel();
    let api = start();
    let snap = snapshot();
    let source = stored(&api, "awsmachinetemplate", AWS_TEMPLATE);

    let first = pass(&api, &snap);
    let aws = &first[AWS_MS];
    assert_eq!(
        aws.decision.reason,
        ClusterApiReason::CloneAwaited,
        "{}",
        aws.decision.message
    );
    assert!(matches!(aws.made, Some(Ok(true))), "{:?}", aws.made);
    let clone = aws.decision.clone.clone().unwrap();

    // As stored: the source's spec with only the AMI changed, the marker, the source named.
    let made = stored(&api, "awsmachinetemplate", &clone.name);
    let mut expected = source["spec"].clone();
    expected["template"]["spec"]["ami"] = json!({"id": stream_ami()});
    assert_eq!(made["spec"], expected);
    assert_eq!(made["metadata"]["labels"][CLONE_LABEL], json!("true"));
    assert_eq!(
        made["metadata"]["annotations"][SOURCE_ANNOTATION],
        source["metadata"]["name"]
    );
    let unchanged = stored(&api, "awsmachinetemplate", AWS_TEMPLATE);
    assert_eq!(
        unchanged["spec"], source["spec"],
        "the source is left as it was"
    );

    let os = &first[OPENSTACK_MS];
    assert_eq!(
        os.decision.reason,
        ClusterApiReason::CloneAwaited,
        "{}",
        os.decision.message
    );
    let os_clone = os.decision.clone.clone().unwrap();
    let os_made = stored(&api, "openstackmachinetemplate", &os_clone.name);
    assert_eq!(
        os_made["spec"]["template"]["spec"]["image"],
        json!({"filter": {"name": our_glance_image()}})
    );

    // The next pass finds the clones made: the MachineSets are to be repointed, nothing made.
    let second = pass(&api, &snap);
    let aws = &second[AWS_MS];
    assert_eq!(
        aws.decision.reason,
        ClusterApiReason::Repointed,
        "{}",
        aws.decision.message
    );
    assert!(aws.made.is_none(), "{:?}", aws.made);

    // The decision's patch, as the webhook answers it, is what the apiserver stores.
    let patch = serde_json::to_string(&aws.decision.patch).unwrap();
    api.kubectl_ok([
        "-n",
        NS,
        "patch",
        "machineset.cluster.x-k8s.io",
        AWS_MS,
        "--type=json",
        "-p",
        &patch,
    ]);
    let ms = stored(&api, "machineset.cluster.x-k8s.io", AWS_MS);
    assert_eq!(
        ms.pointer(INFRASTRUCTURE_REF_NAME),
        Some(&json!(clone.name))
    );
    assert_eq!(
        ms["metadata"]["annotations"][BOOT_IMAGE_ANNOTATION],
        json!(stream_ami())
    );

    // Then it is up to date.
    let third = pass(&api, &snap);
    assert_eq!(
        third[AWS_MS].decision.reason,
        ClusterApiReason::Decided(Reason::UpToDate),
        "{}",
        third[AWS_MS].decision.message
    );
}

#[test]
fn real_apiserver_cluster_api_what_is_left_alone_gets_no_clone() {
    let _parallel = support::parallel();
    let api = start();
    let snap = snapshot();
    let templates = |api: &ApiServer| -> usize {
        api.get_json(["-n", NS, "awsmachinetemplates"])["items"]
            .as_array()
            .unwrap()
            .len()
    };
    // A MachineDeployment's MachineSet, as Cluster API's controller owns it.
    let mut ms = parse_documents(&support::fixture_text(
        "cluster-api/aws-worker.assembled.yaml",
    ))
    .unwrap()
    .pop()
    .unwrap();
    ms["metadata"]["name"] = json!("ci-ln-x7k2p-deployed-a");
    ms["metadata"]["ownerReferences"] = json!([{
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment", "name": "deployed",
        "uid": "6d1e0f6c-0000-4000-8000-000000000001", "controller": true, "blockOwnerDeletion": true
    }]);
    api.kubectl_stdin(["apply", "--server-side", "-f", "-"], &ms.to_string());
    // The gate closed: the machine API rules decide, nothing is made.
    let outcomes = {
        let mut cluster = snap.cluster.clone();
        cluster.gate = Gate::closed("a master is updating");
        pass(&api, &Snapshot::new(snap.boot_images.clone(), cluster))
    };
    assert_eq!(
        outcomes[AWS_MS].decision.reason,
        ClusterApiReason::Decided(Reason::UpgradeInProgress)
    );
    assert_eq!(templates(&api), 1, "the gate closed: nothing made");

    let outcomes = pass(&api, &snap);
    let deployed = &outcomes["ci-ln-x7k2p-deployed-a"];
    assert_eq!(
        deployed.decision.reason,
        ClusterApiReason::MachineDeploymentOwned
    );
    assert!(deployed.made.is_none());
    // The standalone AWS MachineSet's clone, made once. (A machine API twin still
    // authoritative is the fast tier's: the Default CRDs here prune status.authoritativeAPI.)
    assert_eq!(templates(&api), 2);
}

#[test]
fn real_apiserver_cluster_api_a_name_taken_by_another_template_is_not_used() {
    let _parallel = support::parallel();
    let api = start();
    let snap = snapshot();
    // The clone's name, as the decision computes it from the stored source.
    let source = stored(&api, "awsmachinetemplate", AWS_TEMPLATE);
    let name = {
        let clone = pass(&api, &snap)[AWS_MS].decision.clone.clone().unwrap();
        api.kubectl_ok(["-n", NS, "delete", "awsmachinetemplate", &clone.name]);
        clone.name
    };
    // Somebody else's template under that name, with another AMI and no marker.
    let mut squatter = source.clone();
    squatter["metadata"] = json!({"name": name, "namespace": NS});
    squatter["spec"]["template"]["spec"]["ami"] = json!({"id": "ami-0badc0ffee0000000"});
    api.kubectl_stdin(["create", "-f", "-"], &squatter.to_string());

    let outcomes = pass(&api, &snap);
    let aws = &outcomes[AWS_MS];
    assert_eq!(
        aws.decision.reason,
        ClusterApiReason::CloneNameTaken,
        "{}",
        aws.decision.message
    );
    assert!(aws.decision.patch.0.is_empty(), "never repointed there");
    assert!(aws.made.is_none(), "{:?}", aws.made);
    let there = stored(&api, "awsmachinetemplate", &name);
    assert_eq!(
        there["spec"]["template"]["spec"]["ami"]["id"],
        json!("ami-0badc0ffee0000000")
    );
    let ms = stored(&api, "machineset.cluster.x-k8s.io", AWS_MS);
    assert_eq!(
        ms.pointer(INFRASTRUCTURE_REF_NAME),
        Some(&json!(AWS_TEMPLATE))
    );
}

#[test]
fn real_apiserver_cluster_api_old_clones_are_retired_and_nothing_else() {
    let _parallel = support::parallel();
    let api = start();
    let snap = snapshot();
    let first = pass(&api, &snap)[AWS_MS]
        .decision
        .clone
        .clone()
        .unwrap()
        .name;
    repoint(&api, &pass(&api, &snap)[AWS_MS]);
    // The stream moves on: a newer AMI for the region; EC2 says the one we gave is Red Hat's.
    let newer = "ami-0000000000000newer";
    let mut next = stream();
    next["architectures"]["x86_64"]["images"]["aws"]["regions"][REGION]["image"] = json!(newer);
    let next = {
        let base = stamped(&next, "4.21.1");
        let mut aws = AwsLearned::default();
        aws.images.insert(
            (REGION.into(), stream_ami()),
            Described::Found {
                owner: RED_HAT_OWNER.into(),
                name: "rhcos-9.8.20260428-0-x86_64".into(),
            },
        );
        let mut cluster = snap.cluster.clone();
        cluster.learned = snap.cluster.learned.with_aws(aws);
        Snapshot::new(base.boot_images.clone(), cluster)
    };
    // The clone in use stays while the next is made and until the MachineSet leaves it.
    let made = pass(&api, &next);
    assert_eq!(made[AWS_MS].decision.reason, ClusterApiReason::CloneAwaited);
    let second = made[AWS_MS].decision.clone.clone().unwrap().name;
    assert_ne!(first, second);
    repoint(&api, &pass(&api, &next)[AWS_MS]);
    let (outcomes, retired) = pass_retiring(&api, &next);
    assert_eq!(
        outcomes[AWS_MS].decision.reason,
        ClusterApiReason::Decided(Reason::UpToDate)
    );
    assert_eq!(retired, [format!("AWSMachineTemplate/{first}")]);
    let left: Vec<String> = api.get_json(["-n", NS, "awsmachinetemplates"])["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["metadata"]["name"].as_str().unwrap().to_owned())
        .collect();
    let mut expected = vec![AWS_TEMPLATE.to_owned(), second];
    expected.sort();
    assert_eq!(
        left, expected,
        "the source, unused but not ours, and the clone in use stay"
    );
    // The OpenStack clone the other MachineSet waits for is wanted: kept.
    assert_eq!(
        api.get_json(["-n", NS, "openstackmachinetemplates"])["items"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
}
