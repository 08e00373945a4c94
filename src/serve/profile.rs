//! OpenShift's TLS security profile (`apiservers.config.openshift.io/cluster`
//! `spec.tlsSecurityProfile`, behaviour §6) turned into what rustls serves: the minimum
//! version, the TLS 1.2 cipher suites rustls has of the profile's list, and the key
//! exchange groups. Pure: the cluster side reads the object, `tls` builds the config.
//!
//! The built-in profiles are openshift/api's `config/v1/types_tlssecurityprofile.go`
//! (`TLSProfiles`). As that file says, TLS 1.3 suites are not configurable: they are always
//! enabled when TLS 1.3 is negotiated (Go's crypto/tls does the same for every other
//! OpenShift component), so a list restricts the TLS 1.2 suites only. rustls has no TLS
//! below 1.2: `VersionTLS10`/`VersionTLS11` serve from 1.2.

use rustls::SupportedCipherSuite;
use rustls::crypto::SupportedKxGroup;
use rustls::crypto::ring::{cipher_suite as cs, kx_group};
use serde_json::Value;

/// `--tls-min-version`: ours (`1.2`) or OpenShift's spelling (`VersionTLS12`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MinVersion {
    #[value(name = "1.2", alias = "VersionTLS12")]
    Tls12,
    #[value(name = "1.3", alias = "VersionTLS13")]
    Tls13,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProfileError {
    #[error("tlsSecurityProfile type {0:?} is not one of Old, Intermediate, Modern, Custom")]
    UnknownType(String),
    #[error("tlsSecurityProfile type Custom has no custom section")]
    CustomWithoutSpec,
    #[error(
        "minTLSVersion {0:?} is not one of VersionTLS10, VersionTLS11, VersionTLS12, VersionTLS13"
    )]
    UnknownMinVersion(String),
    #[error(
        "none of the cipher suites {named:?} is one rustls serves (it has TLS_AES_128_GCM_SHA256, TLS_AES_256_GCM_SHA384, TLS_CHACHA20_POLY1305_SHA256 and the ECDHE-ECDSA/ECDHE-RSA AES-GCM and CHACHA20-POLY1305 suites)"
    )]
    NoUsableCipher { named: Vec<String> },
    #[error("none of the groups {named:?} is one rustls serves (X25519, secp256r1, secp384r1)")]
    NoUsableGroup { named: Vec<String> },
    #[error("spec.tlsSecurityProfile is not an object")]
    Malformed,
}

/// A profile as the APIServer (or the built-in table) gives it: names, not yet resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    /// `Old`, `Intermediate`, `Modern` or `Custom`.
    pub kind: &'static str,
    pub ciphers: Vec<String>,
    /// Empty: no opinion (rustls's default groups).
    pub groups: Vec<String>,
    pub min_tls_version: String,
}

const TLS13_NAMES: [&str; 3] = [
    "TLS_AES_128_GCM_SHA256",
    "TLS_AES_256_GCM_SHA384",
    "TLS_CHACHA20_POLY1305_SHA256",
];
const INTERMEDIATE_TLS12: [&str; 6] = [
    "ECDHE-ECDSA-AES128-GCM-SHA256",
    "ECDHE-RSA-AES128-GCM-SHA256",
    "ECDHE-ECDSA-AES256-GCM-SHA384",
    "ECDHE-RSA-AES256-GCM-SHA384",
    "ECDHE-ECDSA-CHACHA20-POLY1305",
    "ECDHE-RSA-CHACHA20-POLY1305",
];
const OLD_EXTRA: [&str; 15] = [
    "ECDHE-ECDSA-AES128-SHA256",
    "ECDHE-RSA-AES128-SHA256",
    "ECDHE-ECDSA-AES128-SHA",
    "ECDHE-RSA-AES128-SHA",
    "ECDHE-ECDSA-AES256-SHA384",
    "ECDHE-RSA-AES256-SHA384",
    "ECDHE-ECDSA-AES256-SHA",
    "ECDHE-RSA-AES256-SHA",
    "AES128-GCM-SHA256",
    "AES256-GCM-SHA384",
    "AES128-SHA256",
    "AES256-SHA256",
    "AES128-SHA",
    "AES256-SHA",
    "DES-CBC3-SHA",
];
const DEFAULT_GROUPS: [&str; 4] = ["X25519MLKEM768", "X25519", "secp256r1", "secp384r1"];

impl Profile {
    pub fn old() -> Self {
        Self::builtin(
            "Old",
            TLS13_NAMES
                .iter()
                .chain(&INTERMEDIATE_TLS12)
                .chain(&OLD_EXTRA),
            "VersionTLS10",
        )
    }

    pub fn intermediate() -> Self {
        Self::builtin(
            "Intermediate",
            TLS13_NAMES.iter().chain(&INTERMEDIATE_TLS12),
            "VersionTLS12",
        )
    }

    pub fn modern() -> Self {
        Self::builtin("Modern", TLS13_NAMES.iter(), "VersionTLS13")
    }

    fn builtin<'a>(
        kind: &'static str,
        ciphers: impl Iterator<Item = &'a &'static str>,
        min: &str,
    ) -> Self {
        Profile {
            kind,
            ciphers: ciphers.map(|c| (*c).to_owned()).collect(),
            groups: DEFAULT_GROUPS.iter().map(|g| (*g).to_owned()).collect(),
            min_tls_version: min.to_owned(),
        }
    }

    /// Read an APIServer object (`spec.tlsSecurityProfile`); absent or null is Intermediate,
    /// as for every OpenShift component.
    pub fn from_apiserver(object: &Value) -> Result<Self, ProfileError> {
        match object.pointer("/spec/tlsSecurityProfile") {
            None | Some(Value::Null) => Ok(Self::intermediate()),
            Some(p) => Self::from_spec(p),
        }
    }

    /// Read a `TLSSecurityProfile` object.
    pub(crate) fn from_spec(p: &Value) -> Result<Self, ProfileError> {
        let Some(obj) = p.as_object() else {
            return Err(ProfileError::Malformed);
        };
        let kind = match obj.get("type") {
            None | Some(Value::Null) => "",
            Some(Value::String(s)) => s.as_str(),
            Some(other) => return Err(ProfileError::UnknownType(other.to_string())),
        };
        match kind {
            // An empty type is no opinion: the default.
            "" | "Intermediate" => Ok(Self::intermediate()),
            "Old" => Ok(Self::old()),
            "Modern" => Ok(Self::modern()),
            "Custom" => {
                let Some(custom) = obj.get("custom").and_then(Value::as_object) else {
                    return Err(ProfileError::CustomWithoutSpec);
                };
                let strings = |key: &str| crate::core::lenient::strings(custom.get(key));
                Ok(Profile {
                    kind: "Custom",
                    ciphers: strings("ciphers"),
                    groups: strings("groups"),
                    min_tls_version: custom
                        .get("minTLSVersion")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned(),
                })
            }
            other => Err(ProfileError::UnknownType(other.to_owned())),
        }
    }
}

/// What the command line puts above the profile (`--tls-min-version`,
/// `--tls-cipher-suites`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overrides {
    pub min_version: Option<MinVersion>,
    pub cipher_suites: Option<Vec<String>>,
}

/// What rustls will serve, and what of the profile it could not.
#[derive(Debug, Clone)]
pub struct Policy {
    /// Where it came from: the profile's type, with `+flags` when overridden.
    pub source: String,
    pub min: MinVersion,
    /// The TLS 1.3 suites (always all of them) then the TLS 1.2 suites of the list, in
    /// the list's order.
    pub suites: Vec<SupportedCipherSuite>,
    pub groups: Vec<&'static dyn SupportedKxGroup>,
    /// Cipher names rustls does not serve (or does not know).
    pub dropped_ciphers: Vec<String>,
    pub dropped_groups: Vec<String>,
    /// The profile asked for a version below 1.2 (served from 1.2).
    pub raised_from: Option<String>,
}

impl Policy {
    /// TLS 1.2 offered at all: allowed by the minimum, and some TLS 1.2 suite to offer.
    pub(crate) fn tls12(&self) -> bool {
        self.min == MinVersion::Tls12 && self.suites.iter().any(|s| s.tls13().is_none())
    }

    /// One line for logs: `Intermediate: TLS 1.2+, TLS 1.2 suites ...`.
    pub fn summary(&self) -> String {
        let tls12: Vec<String> = self
            .suites
            .iter()
            .filter(|s| s.tls13().is_none())
            .map(|s| format!("{:?}", s.suite()))
            .collect();
        if self.tls12() {
            format!(
                "{}: TLS 1.2 and 1.3, TLS 1.2 suites {}",
                self.source,
                tls12.join(",")
            )
        } else {
            format!("{}: TLS 1.3 only", self.source)
        }
    }

    /// The same configuration (what a log of changes compares).
    pub(crate) fn same_as(&self, other: &Policy) -> bool {
        self.min == other.min
            && self.tls12() == other.tls12()
            && self
                .suites
                .iter()
                .map(|s| s.suite())
                .eq(other.suites.iter().map(|s| s.suite()))
            && self
                .groups
                .iter()
                .map(|g| g.name())
                .eq(other.groups.iter().map(|g| g.name()))
    }
}

/// A cipher name, OpenSSL's spelling (as the profiles give them) or IANA's (as Go and
/// rustls name them), to the rustls suite.
pub fn cipher(name: &str) -> Option<SupportedCipherSuite> {
    let n = name.trim().to_ascii_uppercase();
    Some(match n.as_str() {
        "TLS_AES_128_GCM_SHA256" => cs::TLS13_AES_128_GCM_SHA256,
        "TLS_AES_256_GCM_SHA384" => cs::TLS13_AES_256_GCM_SHA384,
        "TLS_CHACHA20_POLY1305_SHA256" => cs::TLS13_CHACHA20_POLY1305_SHA256,
        "ECDHE-ECDSA-AES128-GCM-SHA256" | "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256" => {
            cs::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
        }
        "ECDHE-RSA-AES128-GCM-SHA256" | "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256" => {
            cs::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256
        }
        "ECDHE-ECDSA-AES256-GCM-SHA384" | "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384" => {
            cs::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384
        }
        "ECDHE-RSA-AES256-GCM-SHA384" | "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384" => {
            cs::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384
        }
        // Go spells these without the hash (`TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305`).
        "ECDHE-ECDSA-CHACHA20-POLY1305"
        | "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256"
        | "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305" => {
            cs::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256
        }
        "ECDHE-RSA-CHACHA20-POLY1305"
        | "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256"
        | "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305" => cs::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
        _ => return None,
    })
}

fn group(name: &str) -> Option<&'static dyn SupportedKxGroup> {
    Some(match name.trim().to_ascii_lowercase().as_str() {
        "x25519" => kx_group::X25519,
        "secp256r1" | "p-256" | "prime256v1" => kx_group::SECP256R1,
        "secp384r1" | "p-384" => kx_group::SECP384R1,
        _ => return None,
    })
}

fn min_version(s: &str) -> Result<(MinVersion, Option<String>), ProfileError> {
    match s {
        "VersionTLS10" | "VersionTLS11" => Ok((MinVersion::Tls12, Some(s.to_owned()))),
        // Custom without minTLSVersion: the Intermediate profile's.
        "VersionTLS12" | "" => Ok((MinVersion::Tls12, None)),
        "VersionTLS13" => Ok((MinVersion::Tls13, None)),
        other => Err(ProfileError::UnknownMinVersion(other.to_owned())),
    }
}

/// The profile with the flags above it, as rustls can serve it. An error (nothing of a
/// Custom list usable, an unknown version) leaves the caller's current configuration.
pub(crate) fn resolve(profile: &Profile, overrides: &Overrides) -> Result<Policy, ProfileError> {
    let (mut min, mut raised_from) = min_version(&profile.min_tls_version)?;
    if let Some(m) = overrides.min_version {
        (min, raised_from) = (m, None);
    }
    let names = overrides.cipher_suites.as_ref().unwrap_or(&profile.ciphers);
    let mut tls12 = Vec::new();
    let mut named_tls13 = false;
    let mut dropped_ciphers = Vec::new();
    for name in names {
        match cipher(name) {
            Some(s) if s.tls13().is_some() => named_tls13 = true,
            Some(s) => {
                if !tls12
                    .iter()
                    .any(|t: &SupportedCipherSuite| t.suite() == s.suite())
                {
                    tls12.push(s);
                }
            }
            None => dropped_ciphers.push(name.clone()),
        }
    }
    if tls12.is_empty() && !named_tls13 {
        return Err(ProfileError::NoUsableCipher {
            named: names.clone(),
        });
    }
    // TLS 1.3 suites are not configurable (openshift/api): all of them, always.
    let mut suites = vec![
        cs::TLS13_AES_128_GCM_SHA256,
        cs::TLS13_AES_256_GCM_SHA384,
        cs::TLS13_CHACHA20_POLY1305_SHA256,
    ];
    if min == MinVersion::Tls12 {
        suites.extend(tls12);
    }
    let mut groups = Vec::new();
    let mut dropped_groups = Vec::new();
    for name in &profile.groups {
        match group(name) {
            Some(g)
                if !groups
                    .iter()
                    .any(|h: &&dyn SupportedKxGroup| h.name() == g.name()) =>
            {
                groups.push(g)
            }
            Some(_) => {}
            None => dropped_groups.push(name.clone()),
        }
    }
    if groups.is_empty() {
        if !profile.groups.is_empty() {
            return Err(ProfileError::NoUsableGroup {
                named: profile.groups.clone(),
            });
        }
        groups = rustls::crypto::ring::default_provider().kx_groups;
    }
    let flags = overrides.min_version.is_some() || overrides.cipher_suites.is_some();
    Ok(Policy {
        source: format!("{}{}", profile.kind, if flags { "+flags" } else { "" }),
        min,
        suites,
        groups,
        dropped_ciphers,
        dropped_groups,
        raised_from,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tls12_names(p: &Policy) -> Vec<String> {
        p.suites
            .iter()
            .filter(|s| s.tls13().is_none())
            .map(|s| format!("{:?}", s.suite()))
            .collect()
    }

    #[test]
    fn builtin_profiles() {
        let none = Overrides::default();
        let i = resolve(&Profile::intermediate(), &none).unwrap();
        assert_eq!(i.min, MinVersion::Tls12);
        assert_eq!(i.suites.len(), 9, "{i:?}");
        assert!(i.dropped_ciphers.is_empty());
        assert_eq!(i.dropped_groups, ["X25519MLKEM768"]);
        assert_eq!(i.groups.len(), 3);

        let m = resolve(&Profile::modern(), &none).unwrap();
        assert_eq!(m.min, MinVersion::Tls13);
        assert!(!m.tls12());
        assert_eq!(m.suites.len(), 3);

        let o = resolve(&Profile::old(), &none).unwrap();
        assert_eq!(o.min, MinVersion::Tls12);
        assert_eq!(o.raised_from.as_deref(), Some("VersionTLS10"));
        assert_eq!(o.suites.len(), 9);
        assert_eq!(o.dropped_ciphers.len(), 15, "the CBC, RSA-kx and 3DES ones");
    }

    #[test]
    fn reading_the_apiserver() {
        let p = |v: Value| Profile::from_apiserver(&json!({"spec": v}));
        assert_eq!(p(json!({})).unwrap(), Profile::intermediate());
        assert_eq!(
            p(json!({"tlsSecurityProfile": null})).unwrap(),
            Profile::intermediate()
        );
        assert_eq!(
            p(json!({"tlsSecurityProfile": {}})).unwrap(),
            Profile::intermediate()
        );
        assert_eq!(
            p(json!({"tlsSecurityProfile": {"type": "Modern", "modern": {}}})).unwrap(),
            Profile::modern()
        );
        assert_eq!(
            p(json!({"tlsSecurityProfile": {"type": "Old", "old": {}}})).unwrap(),
            Profile::old()
        );
        assert_eq!(
            p(json!({"tlsSecurityProfile": {"type": "Weird"}})).unwrap_err(),
            ProfileError::UnknownType("Weird".into())
        );
        assert_eq!(
            p(json!({"tlsSecurityProfile": {"type": "Custom"}})).unwrap_err(),
            ProfileError::CustomWithoutSpec
        );
        let c = p(json!({"tlsSecurityProfile": {"type": "Custom", "custom": {
            "ciphers": ["ECDHE-RSA-AES128-GCM-SHA256", "AES128-SHA", "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"],
            "minTLSVersion": "VersionTLS12"}}}))
        .unwrap();
        let r = resolve(&c, &Overrides::default()).unwrap();
        assert_eq!(
            tls12_names(&r),
            [
                "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
                "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"
            ]
        );
        assert_eq!(r.dropped_ciphers, ["AES128-SHA"]);
        assert_eq!(r.groups.len(), 3, "no groups named: rustls's defaults");
    }

    #[test]
    fn a_custom_list_of_unknown_suites_is_an_error() {
        let c = Profile {
            kind: "Custom",
            ciphers: vec!["AES128-SHA".into(), "NOT-A-CIPHER".into()],
            groups: vec![],
            min_tls_version: "VersionTLS12".into(),
        };
        let e = resolve(&c, &Overrides::default()).unwrap_err();
        assert!(matches!(e, ProfileError::NoUsableCipher { .. }), "{e}");
        assert!(e.to_string().contains("NOT-A-CIPHER"), "{e}");
        let bad_version = Profile {
            min_tls_version: "VersionTLS14".into(),
            ..Profile::intermediate()
        };
        assert!(resolve(&bad_version, &Overrides::default()).is_err());
        let bad_groups = Profile {
            groups: vec!["X25519MLKEM768".into()],
            ..Profile::intermediate()
        };
        assert!(matches!(
            resolve(&bad_groups, &Overrides::default()).unwrap_err(),
            ProfileError::NoUsableGroup { .. }
        ));
    }

    #[test]
    fn flags_override_the_profile() {
        let o = Overrides {
            min_version: Some(MinVersion::Tls12),
            cipher_suites: Some(vec!["TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305".into()]),
        };
        let r = resolve(&Profile::modern(), &o).unwrap();
        assert!(r.tls12());
        assert_eq!(
            tls12_names(&r),
            ["TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256"]
        );
        assert_eq!(r.source, "Modern+flags");
        // Only TLS 1.3 names: TLS 1.2 has nothing to offer.
        let only13 = Overrides {
            cipher_suites: Some(vec!["TLS_AES_128_GCM_SHA256".into()]),
            ..Overrides::default()
        };
        assert!(!resolve(&Profile::intermediate(), &only13).unwrap().tls12());
    }
}
