//! Serving certificates: loading (PKCS#1, PKCS#8, SEC1; the whole chain), reloading by
//! polling (the service-ca swaps a Secret volume's `..data` symlink, which inotify on the
//! files does not see), and the dev CA that `--dev` and `certs` write.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::{ServerConfig, SupportedProtocolVersion};
use tokio::sync::watch;

pub use super::profile::MinVersion;
use super::profile::{self, Overrides, Policy, Profile, ProfileError};
use crate::metrics::SharedMetrics;

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("reading {path}: {cause}")]
    Read {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("certificate file has no PEM CERTIFICATE block: {0}")]
    NoCertificate(String),
    #[error("private key file has no PEM private key (PKCS#1, PKCS#8 or SEC1): {0}")]
    NoKey(String),
    #[error("certificate and key do not form a usable pair: {0}")]
    Pair(rustls::Error),
    #[error("TLS configuration: {0}")]
    Config(rustls::Error),
    #[error("generating certificates: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("writing {path}: {cause}")]
    Write {
        path: PathBuf,
        cause: std::io::Error,
    },
}

/// The one crypto provider we build with: ring (no aws-lc).
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Parse a PEM chain and key and check that they belong together.
pub fn certified_key(cert_pem: &[u8], key_pem: &[u8]) -> Result<CertifiedKey, TlsError> {
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::NoCertificate(e.to_string()))?;
    if chain.is_empty() {
        return Err(TlsError::NoCertificate("empty".into()));
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| TlsError::NoKey(e.to_string()))?;
    CertifiedKey::from_der(chain, key, &provider()).map_err(TlsError::Pair)
}

/// Hands every new handshake the current pair; a reload swaps it without a lock.
#[derive(Debug)]
pub struct CertResolver {
    current: ArcSwap<CertifiedKey>,
}

impl CertResolver {
    pub fn new(key: CertifiedKey) -> Self {
        CertResolver {
            current: ArcSwap::from_pointee(key),
        }
    }

    pub fn set(&self, key: CertifiedKey) {
        self.current.store(Arc::new(key));
    }
}

impl ResolvesServerCert for CertResolver {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.load_full())
    }
}

/// HTTP/1.1 only (the apiserver speaks it to webhooks, and it avoids the HTTP/2 rapid-reset
/// class of bugs), with the versions, suites and groups of `policy`.
pub(crate) fn server_config(
    resolver: Arc<CertResolver>,
    policy: &Policy,
) -> Result<Arc<ServerConfig>, TlsError> {
    let versions: &[&'static SupportedProtocolVersion] = if policy.tls12() {
        &[&rustls::version::TLS13, &rustls::version::TLS12]
    } else {
        &[&rustls::version::TLS13]
    };
    let provider = CryptoProvider {
        cipher_suites: policy.suites.clone(),
        kx_groups: policy.groups.clone(),
        ..rustls::crypto::ring::default_provider()
    };
    let mut config = ServerConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(versions)
        .map_err(TlsError::Config)?
        .with_no_client_auth()
        .with_cert_resolver(resolver);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The `ServerConfig` every new handshake takes, swapped whole when the cluster's TLS
/// profile changes (connections already up keep theirs), as the certificate reload swaps
/// the pair inside it.
pub struct Serving {
    resolver: Arc<CertResolver>,
    overrides: Overrides,
    config: ArcSwap<ServerConfig>,
    policy: Mutex<Policy>,
}

/// What [`Serving::apply`] did.
#[derive(Debug)]
pub enum Applied {
    /// The new configuration serves from the next handshake.
    Changed(Policy),
    /// The same versions, suites and groups as before.
    Unchanged(Policy),
}

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error(transparent)]
    Profile(#[from] ProfileError),
    #[error(transparent)]
    Tls(#[from] TlsError),
}

impl Serving {
    /// The flags' configuration above `profile`; failing here is fatal (a wrong flag).
    pub fn new(
        resolver: Arc<CertResolver>,
        overrides: Overrides,
        profile: &Profile,
    ) -> Result<Self, ApplyError> {
        let policy = profile::resolve(profile, &overrides)?;
        let config = server_config(resolver.clone(), &policy)?;
        Ok(Serving {
            resolver,
            overrides,
            config: ArcSwap::new(config),
            policy: Mutex::new(policy),
        })
    }

    /// For one new connection.
    pub fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        tokio_rustls::TlsAcceptor::from(self.config.load_full())
    }

    pub fn policy(&self) -> Policy {
        self.policy
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Serve `profile` (with the flags above it) from the next handshake. An error keeps
    /// the configuration served now.
    pub fn apply(&self, profile: &Profile) -> Result<Applied, ApplyError> {
        let new = profile::resolve(profile, &self.overrides)?;
        let mut current = self.policy.lock().unwrap_or_else(|p| p.into_inner());
        if current.same_as(&new) {
            *current = new.clone();
            return Ok(Applied::Unchanged(new));
        }
        let config = server_config(self.resolver.clone(), &new)?;
        self.config.store(config);
        *current = new.clone();
        Ok(Applied::Changed(new))
    }
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|cause| TlsError::Read {
        path: path.to_owned(),
        cause,
    })
}

/// Polls the cert and key files and swaps the pair when their bytes change.
pub(crate) struct Reloader {
    cert_path: PathBuf,
    key_path: PathBuf,
    resolver: Arc<CertResolver>,
    seen: Mutex<Seen>,
}

struct Seen {
    good: (Vec<u8>, Vec<u8>),
    /// The last pair that failed, so that one bad pair is reported once, not every poll.
    bad: Option<(Vec<u8>, Vec<u8>)>,
}

/// What one poll found.
#[derive(Debug)]
pub(crate) enum Poll {
    Unchanged,
    Loaded,
    /// Changed files that do not make a usable pair; the previous pair stays.
    Failed(TlsError),
    /// The same bad pair as last time.
    StillBad,
}

impl Reloader {
    /// Load the pair once; failing here is fatal (nothing to serve with).
    pub fn load(cert_path: PathBuf, key_path: PathBuf) -> Result<Self, TlsError> {
        let (cert, key) = (read(&cert_path)?, read(&key_path)?);
        let resolver = Arc::new(CertResolver::new(certified_key(&cert, &key)?));
        Ok(Reloader {
            cert_path,
            key_path,
            resolver,
            seen: Mutex::new(Seen {
                good: (cert, key),
                bad: None,
            }),
        })
    }

    pub(crate) fn resolver(&self) -> Arc<CertResolver> {
        self.resolver.clone()
    }

    pub fn poll(&self) -> Poll {
        let pair = read(&self.cert_path).and_then(|c| Ok((c, read(&self.key_path)?)));
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        let pair = match pair {
            Ok(p) => p,
            // Unreadable: report it once until the files can be read again.
            Err(e) if seen.bad.as_ref().is_some_and(|b| b.0.is_empty()) => {
                drop(e);
                return Poll::StillBad;
            }
            Err(e) => {
                seen.bad = Some((Vec::new(), Vec::new()));
                return Poll::Failed(e);
            }
        };
        if seen.good == pair {
            seen.bad = None;
            return Poll::Unchanged;
        }
        if seen.bad.as_ref() == Some(&pair) {
            return Poll::StillBad;
        }
        match certified_key(&pair.0, &pair.1) {
            Ok(key) => {
                self.resolver.set(key);
                *seen = Seen {
                    good: pair,
                    bad: None,
                };
                Poll::Loaded
            }
            Err(e) => {
                seen.bad = Some(pair);
                Poll::Failed(e)
            }
        }
    }

    pub async fn run(
        self,
        every: Duration,
        metrics: SharedMetrics,
        mut stop: watch::Receiver<bool>,
    ) {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = stop.changed() => return,
            }
            let mut result = self.poll();
            if matches!(result, Poll::Failed(_)) {
                // The two files are read one after the other; a symlink swap between the
                // reads gives a mismatched pair. Look once more before calling it bad.
                tokio::time::sleep(Duration::from_millis(100)).await;
                if let again @ (Poll::Loaded | Poll::Unchanged | Poll::Failed(_)) = self.poll() {
                    result = again;
                }
            }
            match result {
                Poll::Unchanged | Poll::StillBad => {}
                Poll::Loaded => {
                    metrics.certs.reloads.inc();
                    tracing::info!(cert = %self.cert_path.display(), "loaded the new serving certificate");
                }
                Poll::Failed(e) => {
                    metrics.certs.reload_errors.inc();
                    tracing::error!(error = %e, "new serving certificate not usable; keeping the previous one");
                }
            }
        }
    }
}

/// A CA and a serving pair signed by it, as PEM.
pub struct DevCerts {
    pub ca_pem: String,
    /// Leaf then CA, as the service-ca writes `tls.crt`.
    pub chain_pem: String,
    pub key_pem: String,
}

impl DevCerts {
    /// `names` become SANs: IP literals as IP SANs, the rest as DNS names.
    pub fn generate(names: &[String]) -> Result<Self, TlsError> {
        use rcgen::{
            BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
            KeyPair, KeyUsagePurpose,
        };
        let now = time::OffsetDateTime::now_utc();
        let mut ca = CertificateParams::new(Vec::<String>::new())?;
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(DnType::CommonName, "bootimage-webhook dev CA");
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        ca.not_before = now - time::Duration::hours(1);
        ca.not_after = now + time::Duration::days(365);
        let ca_key = KeyPair::generate()?;
        let ca_cert = ca.self_signed(&ca_key)?;
        let issuer = Issuer::new(ca, ca_key);

        let mut leaf = CertificateParams::new(names.to_vec())?;
        leaf.distinguished_name.push(
            DnType::CommonName,
            names.first().map_or("bootimage-webhook", String::as_str),
        );
        leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        leaf.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        leaf.use_authority_key_identifier_extension = true;
        leaf.not_before = now - time::Duration::hours(1);
        leaf.not_after = now + time::Duration::days(90);
        let leaf_key = KeyPair::generate()?;
        let leaf_cert = leaf.signed_by(&leaf_key, &issuer)?;
        Ok(DevCerts {
            ca_pem: ca_cert.pem(),
            chain_pem: format!("{}{}", leaf_cert.pem(), ca_cert.pem()),
            key_pem: leaf_key.serialize_pem(),
        })
    }

    /// Write `ca.crt`, `tls.crt`, `tls.key` into `dir` (the key readable by the owner only).
    /// The files [`DevCerts::write`] writes.
    pub const FILES: [&str; 3] = ["ca.crt", "tls.crt", "tls.key"];

    pub fn write(&self, dir: &Path) -> Result<(), TlsError> {
        let werr = |path: &Path| {
            let path = path.to_owned();
            move |cause| TlsError::Write { path, cause }
        };
        std::fs::create_dir_all(dir).map_err(werr(dir))?;
        for (name, body, mode) in [
            ("ca.crt", &self.ca_pem, 0o644),
            ("tls.crt", &self.chain_pem, 0o644),
            ("tls.key", &self.key_pem, 0o600),
        ] {
            let path = dir.join(name);
            write_private(&path, body.as_bytes(), mode).map_err(werr(&path))?;
        }
        Ok(())
    }

    /// The `caBundle` of a webhook configuration: the CA PEM, base64.
    pub fn ca_bundle(&self) -> String {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(&self.ca_pem)
    }
}

fn write_private(path: &Path, body: &[u8], mode: u32) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(path)?;
    f.write_all(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dev_certs_load_as_a_pair() {
        let c = DevCerts::generate(&["localhost".into(), "127.0.0.1".into()]).unwrap();
        let key = certified_key(c.chain_pem.as_bytes(), c.key_pem.as_bytes()).unwrap();
        assert_eq!(key.cert.len(), 2, "leaf and CA are both served");
        assert!(!c.ca_bundle().is_empty());
    }

    #[test]
    fn mismatched_pair_is_refused() {
        let a = DevCerts::generate(&["a".into()]).unwrap();
        let b = DevCerts::generate(&["b".into()]).unwrap();
        let err = certified_key(a.chain_pem.as_bytes(), b.key_pem.as_bytes()).unwrap_err();
        assert!(matches!(err, TlsError::Pair(_)), "{err}");
        assert!(matches!(
            certified_key(b"junk", a.key_pem.as_bytes()).unwrap_err(),
            TlsError::NoCertificate(_)
        ));
        assert!(matches!(
            certified_key(a.chain_pem.as_bytes(), b"junk").unwrap_err(),
            TlsError::NoKey(_)
        ));
    }
}
