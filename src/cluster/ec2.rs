//! EC2, asked in the background (never on the request path): who owns an AMI that is not
//! in the stream, and which AWS Marketplace images a product has. The answers become
//! [`AwsLearned`] in the snapshot, where the AWS rule reads them.
//!
//! Credentials are AWS's standard chain ([`aws_credentials`]): environment variables, a
//! shared credentials file (`AWS_SHARED_CREDENTIALS_FILE`: the Secret the
//! cloud-credential-operator makes from `manifests/`'s CredentialsRequest, static keys or
//! STS web identity), or a profile. The calls are AWS's Query API
//! ([`aws_query`](crate::cluster::aws_query)): HTTPS through rustls on ring, as everything
//! else here, and through the cluster-wide proxy where the environment says so
//! ([`egress`](crate::cluster::egress)).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::api::{Api, ListParams};
use kube::core::DynamicObject;
use tokio::sync::{Notify, watch};

use crate::cluster::apis;
use crate::cluster::aws_credentials::{
    self, Cached, ChainError, MachineApiSecret, Provider, SecretCredentials, Source,
};
use crate::cluster::aws_query::{AwsHttps, Credentials, Image, QueryError};
use crate::cluster::learned::LearnedCell;
use crate::core::arch::Arch;
use crate::core::platforms::aws::{self, AwsLearned, Described, MarketImage, Query};
use crate::core::platforms::{Platform, Target};
use crate::core::snapshot::{SharedSnapshot, Snapshot};
use crate::core::view::{MachineSetView, ProviderSpecValue};
use crate::health::until;

#[derive(Debug, thiserror::Error)]
pub enum Ec2Error {
    #[error("no AWS credentials: {0}")]
    NoCredentials(String),
    #[error(transparent)]
    TrustedRoots(#[from] crate::cluster::egress::CaBundleError),
    #[error("EC2 DescribeImages in {region}: {message}")]
    Call {
        region: String,
        /// EC2's error code, when it answered with one.
        code: Option<String>,
        message: String,
    },
    /// A client could not be made with these credentials (named, never shown).
    #[error("with the {credentials}: {error}")]
    With {
        credentials: Source,
        error: Box<Ec2Error>,
    },
}

/// The EC2 client: AWS's Query API ([`AwsHttps`]) with credentials from
/// [`aws_credentials`].
pub struct Ec2 {
    https: AwsHttps,
    credentials: Cached,
}

impl Ec2 {
    /// From this process's standard chain; fails when no credentials can be had, so that
    /// callers can say so once instead of failing every call.
    pub async fn from_env() -> Result<Ec2, Ec2Error> {
        Ec2::connect(None, None).await
    }

    /// With `given` credentials (the machine API's Secret) instead of the standard chain,
    /// or the chain when `None`. `region` (a MachineSet's) is where STS is asked for a
    /// role's credentials, else the environment's (STS's global endpoint without one); EC2
    /// itself is asked in each MachineSet's region.
    pub async fn connect(
        given: Option<&SecretCredentials>,
        region: Option<&str>,
    ) -> Result<Ec2, Ec2Error> {
        let https = AwsHttps::new()?;
        let no_credentials = |e: ChainError| Ec2Error::NoCredentials(e.to_string());
        let provider = match given {
            None => Provider::from_env(),
            Some(SecretCredentials::Static {
                access_key_id,
                secret_access_key,
            }) => Ok(Provider::Keys(Credentials {
                access_key_id: access_key_id.clone(),
                secret_access_key: secret_access_key.clone(),
                session_token: None,
                expires: None,
            })),
            Some(SecretCredentials::File(contents)) => Provider::from_file(contents),
        }
        .map_err(no_credentials)?;
        let region = region
            .map(str::to_owned)
            .or_else(aws_credentials::env_region);
        let credentials = Cached::new(provider, region);
        credentials.get(&https).await.map_err(no_credentials)?;
        Ok(Ec2 { https, credentials })
    }

    /// One page of `DescribeImages` in `region`.
    async fn describe_images(
        &self,
        region: &str,
        params: &[(&str, &str)],
    ) -> Result<(Vec<Image>, Option<String>), Ec2Error> {
        let credentials = self
            .credentials
            .get(&self.https)
            .await
            .map_err(|e| Ec2Error::NoCredentials(e.to_string()))?;
        self.https
            .describe_images(region, &credentials, params)
            .await
            .map_err(|e| call_error(region, &e))
    }

    /// Who owns `ami` in `region` (and its name, which carries a marketplace product id).
    pub async fn describe(&self, region: &str, ami: &str) -> Result<Described, Ec2Error> {
        match self.describe_images(region, &[("ImageId.1", ami)]).await {
            Ok((images, _)) => {
                Ok(images
                    .into_iter()
                    .find(|i| i.id == ami)
                    .map_or(Described::NotFound, |i| Described::Found {
                        owner: i.owner,
                        name: i.name,
                    }))
            }
            // EC2 answers an unknown (or deregistered) AMI with an error, not an empty list.
            Err(Ec2Error::Call { code: Some(c), .. }) if c.starts_with("InvalidAMIID") => {
                Ok(Described::NotFound)
            }
            Err(e) => Err(e),
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
        let name = format!("*{product}*");
        let mut images = Vec::new();
        let mut next: Option<String> = None;
        loop {
            let mut params = vec![
                ("Owner.1", aws::MARKETPLACE_OWNER),
                ("Filter.1.Name", "name"),
                ("Filter.1.Value.1", name.as_str()),
            ];
            if let Some(token) = &next {
                params.push(("NextToken", token));
            }
            let (page, token) = self.describe_images(region, &params).await?;
            images.extend(page.into_iter().map(|i| MarketImage {
                id: i.id,
                description: i.description,
                creation_date: i.creation_date,
            }));
            match token {
                Some(token) if next.as_ref() != Some(&token) => next = Some(token),
                _ => return Ok(images),
            }
        }
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

/// EC2's own error (its code kept), or why it was not reached (naming the proxy it was
/// asked through).
fn call_error(region: &str, e: &QueryError) -> Ec2Error {
    Ec2Error::Call {
        region: region.to_owned(),
        code: e.code().map(str::to_owned),
        message: e.to_string(),
    }
}

/// The EC2 client, made again when its credentials change: the project's own first (the
/// standard chain; a changed credentials file is a rotation), else, when given, the machine
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
            Some(Ok(Target::Aws(t))) => Some(t),
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
