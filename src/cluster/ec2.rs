//! EC2, asked in the background (never on the request path): who owns an AMI that is not
//! in the stream, and which AWS Marketplace images a product has. The answers become
//! [`AwsLearned`] in the snapshot, where the AWS rule reads them.
//!
//! Credentials are the SDK's standard chain: environment variables, a shared credentials
//! file (`AWS_SHARED_CREDENTIALS_FILE`: the Secret the cloud-credential-operator makes from
//! `manifests/`'s CredentialsRequest, static keys or STS web identity), or a profile. HTTPS
//! goes through rustls on ring, as everything else here, and through the cluster-wide proxy
//! where the environment says so ([`egress`](crate::cluster::egress)).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use kube::api::{Api, ListParams};
use kube::core::DynamicObject;
use tokio::sync::{Notify, watch};

use crate::cluster::apis;
use crate::cluster::aws_credentials::{self, MachineApiSecret, SecretCredentials, Source};
use crate::core::arch::Arch;
use crate::core::platforms::Platform;
use crate::core::platforms::aws::{self, AwsLearned, Query};
use crate::core::snapshot::{Learned, SharedSnapshot, Snapshot};
use crate::core::view::{MachineSetView, ProviderSpecValue};
use crate::health::until;

#[derive(Debug, thiserror::Error)]
pub enum Ec2Error {
    #[error("no AWS credentials: {0}")]
    NoCredentials(String),
    #[error(transparent)]
    TrustedRoots(#[from] crate::cluster::egress::CaBundleError),
    /// Made only where EC2 is called (the `ec2` feature).
    #[error("EC2 DescribeImages in {region}: {message}")]
    #[cfg_attr(not(feature = "ec2"), allow(dead_code))]
    Call { region: String, message: String },
    /// A client could not be made with these credentials (named, never shown).
    #[error("with the {credentials}: {error}")]
    With {
        credentials: Source,
        error: Box<Ec2Error>,
    },
}

/// The AWS SDK client (the default `ec2` feature; without it, as in the fuzz build, EC2
/// is never asked and AWS AMIs outside the stream stay `AMIUnclassified`).
#[cfg(feature = "ec2")]
mod sdk {
    use super::*;
    use crate::core::platforms::aws::{Described, MarketImage};
    use aws_config::environment::region::EnvironmentVariableRegionProvider;
    use aws_config::meta::region::ProvideRegion;
    use aws_config::profile::ProfileFileCredentialsProvider;
    use aws_config::provider_config::ProviderConfig;
    use aws_config::{BehaviorVersion, Region, SdkConfig};
    use aws_runtime::env_config::file::{EnvConfigFileKind, EnvConfigFiles};
    use aws_sdk_ec2::Client;
    use aws_sdk_ec2::config::SharedHttpClient;
    use aws_sdk_ec2::config::{Credentials, SharedCredentialsProvider};
    use aws_sdk_ec2::error::DisplayErrorContext;
    use aws_sdk_ec2::error::ProvideErrorMetadata;
    use aws_sdk_ec2::types::Filter;
    use std::collections::HashMap;
    use std::sync::Mutex;

    use crate::cluster::egress::{self, ProxiedHttps};

    /// The SDK provider for credentials read from the machine API's Secret: static keys as
    /// they are; a shared-credentials file through the SDK's own profile provider (STS web
    /// identity included), from memory, never written to disk. aws-config is built without
    /// its `credentials-process` and `sso` features: a Secret cannot make this process run
    /// a program.
    fn secret_provider(
        given: &SecretCredentials,
        https: SharedHttpClient,
        region: Option<Region>,
    ) -> SharedCredentialsProvider {
        match given {
            SecretCredentials::Static {
                access_key_id,
                secret_access_key,
            } => SharedCredentialsProvider::new(Credentials::new(
                access_key_id,
                secret_access_key,
                None,
                None,
                "machine-api-secret",
            )),
            SecretCredentials::File(contents) => {
                let files = EnvConfigFiles::builder()
                    .with_contents(EnvConfigFileKind::Credentials, contents.clone())
                    .build();
                let conf = ProviderConfig::default()
                    .with_http_client(https)
                    .with_region(region);
                SharedCredentialsProvider::new(
                    ProfileFileCredentialsProvider::builder()
                        .configure(&conf)
                        .profile_files(files)
                        .profile_name("default")
                        .build(),
                )
            }
        }
    }

    /// An EC2 client per region, from one SDK configuration.
    pub struct Ec2 {
        /// `AWS_ENDPOINT_URL` and the like, for the proxy an error names.
        endpoint: Option<String>,
        config: SdkConfig,
        clients: Mutex<HashMap<String, Client>>,
    }

    impl Ec2 {
        /// From the SDK's standard environment; fails when no credentials can be had, so that
        /// callers can say so once instead of failing every call.
        pub async fn from_env() -> Result<Ec2, Ec2Error> {
            Ec2::connect(None, None).await
        }

        /// With `given` credentials (the machine API's Secret) instead of the SDK's chain, or
        /// the chain when `None`. `region` (a MachineSet's, else the environment's) is where
        /// STS is asked for a web identity's credentials; EC2 itself is asked in each
        /// MachineSet's region.
        pub async fn connect(
            given: Option<&SecretCredentials>,
            region: Option<&str>,
        ) -> Result<Ec2, Ec2Error> {
            let https = ProxiedHttps::shared(&egress::extra_roots()?);
            let mut loader = aws_config::defaults(BehaviorVersion::latest())
                .http_client(https.clone())
                .timeout_config(
                    aws_config::timeout::TimeoutConfig::builder()
                        .operation_timeout(Duration::from_secs(20))
                        .build(),
                );
            if let Some(given) = given {
                // The environment's region only (not the SDK's whole region chain, which
                // would ask the instance metadata service).
                let region = match region {
                    Some(r) => Some(Region::new(r.to_owned())),
                    None => EnvironmentVariableRegionProvider::new().region().await,
                };
                loader = loader.credentials_provider(secret_provider(given, https, region));
            }
            let config = loader.load().await;
            let provider = config.credentials_provider().ok_or_else(|| {
                Ec2Error::NoCredentials("no credentials provider configured".into())
            })?;
            use aws_sdk_ec2::config::ProvideCredentials;
            provider
                .provide_credentials()
                .await
                .map_err(|e| Ec2Error::NoCredentials(DisplayErrorContext(e).to_string()))?;
            Ok(Ec2 {
                endpoint: config.endpoint_url().map(str::to_owned),
                config,
                clients: Mutex::new(HashMap::new()),
            })
        }

        fn client(&self, region: &str) -> Client {
            let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
            clients
                .entry(region.to_owned())
                .or_insert_with(|| {
                    let conf = aws_sdk_ec2::config::Builder::from(&self.config)
                        .region(Region::new(region.to_owned()))
                        .build();
                    Client::from_conf(conf)
                })
                .clone()
        }

        /// Who owns `ami` in `region` (and its name, which carries a marketplace product id).
        pub async fn describe(&self, region: &str, ami: &str) -> Result<Described, Ec2Error> {
            let out = self
                .client(region)
                .describe_images()
                .image_ids(ami)
                .send()
                .await;
            match out {
                Ok(out) => Ok(out
                    .images()
                    .iter()
                    .find(|i| i.image_id() == Some(ami))
                    .map_or(Described::NotFound, |i| Described::Found {
                        owner: i.owner_id().unwrap_or_default().to_owned(),
                        name: i.name().unwrap_or_default().to_owned(),
                    })),
                // EC2 answers an unknown (or deregistered) AMI with an error, not an empty list.
                Err(e) if e.code().is_some_and(|c| c.starts_with("InvalidAMIID")) => {
                    Ok(Described::NotFound)
                }
                Err(e) => Err(self.call_error(region, &e)),
            }
        }

        /// The marketplace images of `product` in `region` (MCO `findMarketplaceAMI`'s search).
        pub async fn marketplace(
            &self,
            region: &str,
            product: &str,
        ) -> Result<Vec<MarketImage>, Ec2Error> {
            // By owner id, not the `aws-marketplace` alias: both work on EC2, and emulators
            // know only the id.
            let mut pages = self
                .client(region)
                .describe_images()
                .owners(aws::MARKETPLACE_OWNER)
                .filters(
                    Filter::builder()
                        .name("name")
                        .values(format!("*{product}*"))
                        .build(),
                )
                .into_paginator()
                .items()
                .send();
            let mut images = Vec::new();
            while let Some(image) = pages.next().await {
                let image = image.map_err(|e| self.call_error(region, &e))?;
                images.push(MarketImage {
                    id: image.image_id().unwrap_or_default().to_owned(),
                    description: image.description().unwrap_or_default().to_owned(),
                    creation_date: image.creation_date().unwrap_or_default().to_owned(),
                });
            }
            Ok(images)
        }

        /// Ask every query; what was answered goes into `learned`, what failed comes back.
        pub async fn answer(
            &self,
            queries: &[Query],
            learned: &mut AwsLearned,
        ) -> Vec<(Query, Ec2Error)> {
            let mut failed = Vec::new();
            for q in queries {
                match q {
                    Query::Describe { region, ami } => match self.describe(region, ami).await {
                        Ok(d) => {
                            learned.images.insert((region.clone(), ami.clone()), d);
                        }
                        Err(e) => failed.push((q.clone(), e)),
                    },
                    Query::Marketplace { region, product } => {
                        match self.marketplace(region, product).await {
                            Ok(images) => {
                                learned
                                    .marketplace
                                    .insert((region.clone(), product.clone()), images);
                            }
                            Err(e) => failed.push((q.clone(), e)),
                        }
                    }
                }
            }
            failed
        }
    }

    impl Ec2 {
        /// EC2's own error, or why it was not reached (naming the proxy it was asked
        /// through).
        fn call_error<E, R>(&self, region: &str, e: &aws_sdk_ec2::error::SdkError<E, R>) -> Ec2Error
        where
            E: ProvideErrorMetadata + std::error::Error + 'static,
            R: std::fmt::Debug,
        {
            let message = match (e.code(), e.message()) {
                (Some(code), Some(msg)) => format!("{code}: {msg}"),
                (Some(code), None) => code.to_owned(),
                _ => {
                    let endpoint = self
                        .endpoint
                        .clone()
                        .unwrap_or_else(|| format!("https://ec2.{region}.amazonaws.com"));
                    let through = endpoint.parse().map(|u| egress::through(&u));
                    format!(
                        "{}{}",
                        aws_sdk_ec2::error::DisplayErrorContext(e),
                        through.unwrap_or_default()
                    )
                }
            };
            Ec2Error::Call {
                region: region.to_owned(),
                message,
            }
        }
    }
}

#[cfg(feature = "ec2")]
pub use sdk::Ec2;

/// Built without the `ec2` feature: no client can be made, so nothing is asked.
#[cfg(not(feature = "ec2"))]
pub struct Ec2;

#[cfg(not(feature = "ec2"))]
impl Ec2 {
    pub async fn from_env() -> Result<Ec2, Ec2Error> {
        Ec2::connect(None, None).await
    }

    pub async fn connect(
        _given: Option<&SecretCredentials>,
        _region: Option<&str>,
    ) -> Result<Ec2, Ec2Error> {
        Err(Ec2Error::NoCredentials(
            "this build has no EC2 client (built without the ec2 feature)".into(),
        ))
    }

    pub async fn answer(
        &self,
        queries: &[Query],
        _learned: &mut AwsLearned,
    ) -> Vec<(Query, Ec2Error)> {
        queries
            .iter()
            .map(|q| {
                (
                    q.clone(),
                    Ec2Error::NoCredentials("no EC2 client in this build".into()),
                )
            })
            .collect()
    }
}

/// The EC2 client, made again when its credentials change: the project's own first (the
/// SDK's chain; a changed credentials file is a rotation), else, when given, the machine
/// API's Secret, read by name on every [`Ec2Access::client`] call (a new `resourceVersion`
/// is a rotation).
pub struct Ec2Access {
    machine_api: Option<MachineApiSecret>,
    ec2: Option<Ec2>,
    /// What the client was made from: the source and its version.
    made_from: Option<(Source, Vec<u8>)>,
}

impl Ec2Access {
    pub fn new(machine_api: Option<MachineApiSecret>) -> Ec2Access {
        Ec2Access {
            machine_api,
            ec2: None,
            made_from: None,
        }
    }

    /// Where the credentials of the current client come from (none made yet: `None`).
    pub fn source(&self) -> Option<&Source> {
        self.ec2
            .as_ref()
            .and(self.made_from.as_ref())
            .map(|(s, _)| s)
    }

    /// The client for the credentials there are now. `region`: where STS is asked, for a
    /// web identity from the machine API's Secret.
    pub async fn client(&mut self, region: Option<&str>) -> Result<&Ec2, Ec2Error> {
        let (source, version, given) = match &self.machine_api {
            Some(secret) if !aws_credentials::own_configured() => {
                let (creds, version) = secret
                    .read()
                    .await
                    .map_err(|e| Ec2Error::NoCredentials(e.to_string()))?;
                (secret.source(), version.into_bytes(), Some(creds))
            }
            _ => {
                let file = credentials_file().and_then(|f| std::fs::read(f).ok());
                (Source::Own, file.unwrap_or_default(), None)
            }
        };
        if self
            .made_from
            .as_ref()
            .is_none_or(|(s, v)| (s, v) != (&source, &version))
        {
            self.ec2 = None;
        }
        let ec2 = match self.ec2.take() {
            Some(ec2) => ec2,
            None => Ec2::connect(given.as_ref(), region)
                .await
                .map_err(|e| Ec2Error::With {
                    credentials: source.clone(),
                    error: Box::new(e),
                })?,
        };
        let key = (source, version);
        self.made_from = Some(key);
        Ok(self.ec2.insert(ec2))
    }
}

/// The region of the first query: where STS is asked, for a web identity.
pub fn first_region(queries: &[Query]) -> Option<&str> {
    queries.first().map(|q| match q {
        Query::Describe { region, .. } | Query::Marketplace { region, .. } => region.as_str(),
    })
}

/// Everything `machinesets` (JSON objects) need from EC2 under `snap`, asked in two rounds
/// (a marketplace AMI's product is known once its owner is): what was learned, and the
/// first failure.
pub async fn classify(
    client: &Ec2,
    machinesets: &[Vec<u8>],
    snap: &Snapshot,
) -> (AwsLearned, Option<Ec2Error>) {
    let mut learned = AwsLearned::default();
    let first: Vec<Query> = queries_for(machinesets.iter().map(Vec::as_slice), snap)
        .into_iter()
        .collect();
    let failed = client.answer(&first, &mut learned).await;
    let next: Vec<Query> = {
        let with = with_learned(snap, learned.clone());
        queries_for(machinesets.iter().map(Vec::as_slice), &with)
            .into_iter()
            .collect()
    };
    let failed_next = client.answer(&next, &mut learned).await;
    let error = failed.into_iter().chain(failed_next).next().map(|(_, e)| e);
    (learned, error)
}

/// `snap` with these EC2 answers.
pub fn with_learned(snap: &Snapshot, learned: AwsLearned) -> Snapshot {
    let mut cluster = snap.cluster.clone();
    cluster.learned = cluster.learned.with_aws(learned);
    Snapshot::new(snap.boot_images.clone(), cluster)
}

/// The queries the AWS rule needs answered for these MachineSets (JSON objects).
pub fn queries_for<'a>(
    machinesets: impl IntoIterator<Item = &'a [u8]>,
    snap: &Snapshot,
) -> BTreeSet<Query> {
    let Some(boot_images) = snap.boot_images.as_deref() else {
        return BTreeSet::new();
    };
    let stream: Vec<_> = Arch::ALL
        .iter()
        .filter_map(|&a| match boot_images.target(a, Platform::Aws) {
            Some(Ok(t)) => Some(t),
            _ => None,
        })
        .collect();
    let learned = snap.cluster.learned.aws.as_deref();
    let mut out = BTreeSet::new();
    for json in machinesets {
        let Ok(view) = MachineSetView::parse(json) else {
            continue;
        };
        if let ProviderSpecValue::Object(spec) = view.provider_spec() {
            out.extend(aws::queries(
                spec,
                stream.iter().copied(),
                learned,
                snap.cluster.aws_marketplace,
            ));
        }
    }
    out
}

/// What the background learned, shared with the snapshot builder, which rebuilds when
/// told.
#[derive(Default)]
pub struct LearnedCell {
    pub facts: ArcSwap<Learned>,
    pub changed: Notify,
}

impl LearnedCell {
    /// Each importer publishes its own part; `rcu` keeps two publishing at once from
    /// losing one's.
    fn publish(&self, with: impl Fn(&Learned) -> Learned) {
        self.facts.rcu(|now| with(now));
        self.changed.notify_one();
    }

    fn publish_aws(&self, aws: AwsLearned) {
        self.publish(|now| now.with_aws(aws.clone()));
    }

    pub fn publish_vsphere(&self, vsphere: crate::core::platforms::vsphere::VSphereLearned) {
        self.publish(|now| now.with_vsphere(vsphere.clone()));
    }

    pub fn publish_openstack(
        &self,
        openstack: crate::core::platforms::openstack::OpenStackLearned,
    ) {
        self.publish(|now| now.with_openstack(openstack.clone()));
    }

    pub fn publish_nutanix(&self, nutanix: crate::core::platforms::nutanix::NutanixLearned) {
        self.publish(|now| now.with_nutanix(nutanix.clone()));
    }
}

/// How often a marketplace product's list is asked again (new images are published).
const MARKETPLACE_TTL: Duration = Duration::from_secs(6 * 3600);
/// The longest wait before a failed query is asked again.
const MAX_BACKOFF: Duration = Duration::from_secs(600);

/// The background: on an AWS cluster, find the AMIs the rule cannot decide yet (listing
/// the MachineSets), ask EC2, publish the answers. Runs on every replica: each serves the
/// webhook from its own snapshot.
pub struct Background {
    pub client: kube::Client,
    /// Where the MachineSets are.
    pub namespace: String,
    pub snapshot: SharedSnapshot,
    pub learned: Arc<LearnedCell>,
    /// Rung by the webhook when a decision waits on EC2 (a new AMI nobody asked about).
    pub wanted: Arc<Notify>,
    /// Look again at least this often.
    pub resync: Duration,
    /// The machine API's Secret, for when there are no credentials of our own
    /// (`--aws-machine-api-credentials`).
    pub machine_api: Option<MachineApiSecret>,
}

impl Background {
    pub async fn run(self, mut changes: watch::Receiver<String>, mut stop: watch::Receiver<bool>) {
        let Background {
            client,
            namespace,
            snapshot,
            learned: cell,
            wanted,
            resync,
            machine_api,
        } = self;
        let api: Api<DynamicObject> =
            Api::namespaced_with(client, &namespace, &apis::MACHINESET.api_resource());
        let mut ec2 = Ec2Access::new(machine_api);
        let mut announced: Option<Source> = None;
        let mut learned = AwsLearned::default();
        let mut listed_at: BTreeMap<(String, String), Instant> = BTreeMap::new();
        let mut backoff = Duration::from_secs(5);
        let mut reported: Option<String> = None;
        loop {
            let snap = snapshot.load_full();
            let on_aws = snap.cluster.platform.as_deref() == Some(Platform::Aws.name());
            let mut wait = resync;
            if on_aws {
                let result = pass(&api, &snap, &mut ec2, &mut learned, &mut listed_at).await;
                // One line when the credentials in use are first known, or change source.
                if let Some(source) = ec2.source()
                    && announced.as_ref() != Some(source)
                {
                    tracing::info!(credentials = %source, "asking EC2 with these credentials");
                    announced = Some(source.clone());
                }
                match result {
                    Ok(Pass::Done { changed }) => {
                        if reported.take().is_some() {
                            tracing::info!("EC2 answers again: classifying AMIs");
                        }
                        backoff = Duration::from_secs(5);
                        if changed {
                            cell.publish_aws(learned.clone());
                        }
                    }
                    Ok(Pass::Nothing) => {}
                    Err(Trouble::Kube(why)) => {
                        tracing::warn!(error = %why, "cannot list MachineSets to find AMIs to classify; retrying");
                        wait = backoff;
                        backoff = (backoff * 2).min(MAX_BACKOFF);
                    }
                    Err(Trouble::Ec2(why)) => {
                        // One line per kind of trouble, not one per retry.
                        if reported.as_deref() != Some(&why) {
                            tracing::warn!(error = %why, retry_in = ?backoff, "cannot classify AMIs through EC2; those MachineSets keep their AMIs until it can");
                            reported = Some(why.clone());
                        }
                        if learned.unavailable.as_deref() != Some(&why) {
                            learned.unavailable = Some(why);
                            cell.publish_aws(learned.clone());
                        }
                        wait = backoff;
                        backoff = (backoff * 2).min(MAX_BACKOFF);
                    }
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                r = changes.changed() => if r.is_err() { return },
                // A new MachineSet on an AMI nobody asked about yet: now, not at the resync.
                _ = wanted.notified() => {}
                _ = until(&mut stop, true) => return,
            }
        }
    }
}

enum Trouble {
    /// The API server: no reason to tell the rule that EC2 is out of reach.
    Kube(String),
    Ec2(String),
}

enum Pass {
    /// No question to ask.
    Nothing,
    Done {
        changed: bool,
    },
}

fn credentials_file() -> Option<PathBuf> {
    std::env::var_os("AWS_SHARED_CREDENTIALS_FILE").map(PathBuf::from)
}

async fn pass(
    api: &Api<DynamicObject>,
    snap: &Snapshot,
    ec2: &mut Ec2Access,
    learned: &mut AwsLearned,
    listed_at: &mut BTreeMap<(String, String), Instant>,
) -> Result<Pass, Trouble> {
    let list = api
        .list(&ListParams::default())
        .await
        .map_err(|e| Trouble::Kube(e.to_string()))?;
    let objects: Vec<Vec<u8>> = list
        .items
        .iter()
        .filter_map(|o| serde_json::to_vec(o).ok())
        .collect();
    let mut queries = queries_for(objects.iter().map(Vec::as_slice), snap);
    // Marketplace lists grow: ask again after a while.
    let stale: Vec<(String, String)> = listed_at
        .iter()
        .filter(|(_, at)| at.elapsed() > MARKETPLACE_TTL)
        .map(|(k, _)| k.clone())
        .collect();
    for (region, product) in stale {
        queries.insert(Query::Marketplace { region, product });
    }
    if queries.is_empty() {
        return Ok(Pass::Nothing);
    }
    let queries: Vec<Query> = queries.into_iter().collect();
    let client = ec2
        .client(first_region(&queries))
        .await
        .map_err(|e| Trouble::Ec2(e.to_string()))?;
    let failed = client.answer(&queries, learned).await;
    for q in &queries {
        if let Query::Marketplace { region, product } = q
            && !failed.iter().any(|(f, _)| f == q)
        {
            listed_at.insert((region.clone(), product.clone()), Instant::now());
        }
    }
    let answered = queries.len() - failed.len();
    if answered > 0 {
        tracing::info!(answered, failed = failed.len(), "EC2 answered about AMIs");
        learned.unavailable = None;
    }
    match failed.into_iter().next() {
        Some((_, e)) if answered == 0 => Err(Trouble::Ec2(e.to_string())),
        Some((q, e)) => {
            tracing::warn!(query = ?q, error = %e, "EC2 could not answer; asking again later");
            Ok(Pass::Done { changed: true })
        }
        None => Ok(Pass::Done { changed: true }),
    }
}
