//! AWS's shared config and credentials files, read as AWS's tools read them: `[name]`
//! sections in the credentials file, `[default]` and `[profile name]` in the config file,
//! `key = value` properties, `#` and `;` comments, indented lines continuing a property
//! (sub-properties, which nothing here reads), and a profile's properties in the
//! credentials file winning over the same profile's in the config file.
//!
//! Hand-written: AWS's own parser lives in its SDK's configuration loader, which the
//! project no longer builds (src/cluster/aws_query.rs says why), and a generic INI crate
//! knows neither the two files' section names nor how they merge.

use std::collections::BTreeMap;

/// A profile's properties, keys in lower case.
pub type Properties = BTreeMap<String, String>;

/// Profiles by name.
pub type Profiles = BTreeMap<String, Properties>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// `~/.aws/config`: `[default]`, `[profile name]`.
    Config,
    /// `~/.aws/credentials`: `[name]`.
    Credentials,
}

/// The profiles of one file. Lines that are none of the above are skipped, as AWS's CLI
/// skips them; a section that is not a profile (`[sso-session x]`, `[services x]`) is
/// read into nothing.
pub fn parse(text: &str, kind: FileKind) -> Profiles {
    let mut profiles = Profiles::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with(';') {
            continue;
        }
        if let Some(header) = trimmed.strip_prefix('[') {
            current = header
                .split_once(']')
                .and_then(|(name, _)| profile_name(name.trim(), kind));
            if let Some(name) = &current {
                profiles.entry(name.clone()).or_default();
            }
            continue;
        }
        // An indented line continues the property above it (a sub-property).
        if line.starts_with([' ', '\t']) {
            continue;
        }
        let (Some(name), Some((key, value))) = (&current, trimmed.split_once('=')) else {
            continue;
        };
        let key = key.trim().to_ascii_lowercase();
        if key.is_empty() {
            continue;
        }
        let value = strip_comment(value.trim());
        if let Some(profile) = profiles.get_mut(name) {
            profile.insert(key, value.to_owned());
        }
    }
    profiles
}

/// The profile a section header names in a file of `kind`, if it names one.
fn profile_name(header: &str, kind: FileKind) -> Option<String> {
    match kind {
        FileKind::Credentials => (!header.is_empty()).then(|| header.to_owned()),
        FileKind::Config if header == "default" => Some("default".to_owned()),
        FileKind::Config => header
            .strip_prefix("profile")
            .filter(|rest| rest.starts_with([' ', '\t']))
            .map(|rest| rest.trim().to_owned())
            .filter(|name| !name.is_empty()),
    }
}

/// A value without a comment that follows it after white space.
fn strip_comment(value: &str) -> &str {
    let cut = value
        .char_indices()
        .find(|&(i, c)| (c == '#' || c == ';') && i > 0 && value[..i].ends_with([' ', '\t']))
        .map_or(value.len(), |(i, _)| i);
    value[..cut].trim_end()
}

/// The config file's profiles with the credentials file's over them.
pub fn merge(config: Profiles, credentials: Profiles) -> Profiles {
    let mut out = config;
    for (name, properties) in credentials {
        out.entry(name).or_default().extend(properties);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_two_files_name_their_profiles_differently_and_merge() {
        let config = parse(
            "[default]\nregion = us-east-2\n\n[profile admin]\nrole_arn = arn:aws:iam::1:role/a\n\
             source_profile = base ; the keys\n[sso-session corp]\nsso_region = us-east-1\n\
             [profilex]\nregion = nowhere\n",
            FileKind::Config,
        );
        assert_eq!(config["default"]["region"], "us-east-2");
        assert_eq!(config["admin"]["source_profile"], "base");
        assert!(!config.contains_key("corp") && !config.contains_key("x"));
        let credentials = parse(
            "# keys\n[base]\naws_access_key_id=AKID\naws_secret_access_key = s#not-a-comment\n\
             [default]\nRegion = eu-west-1\n[profile odd]\nx = 1\n",
            FileKind::Credentials,
        );
        assert_eq!(
            credentials["base"]["aws_secret_access_key"],
            "s#not-a-comment"
        );
        assert_eq!(credentials["profile odd"]["x"], "1");
        let merged = merge(config, credentials);
        assert_eq!(merged["default"]["region"], "eu-west-1");
        assert_eq!(merged["base"]["aws_access_key_id"], "AKID");
    }

    #[test]
    fn indented_lines_continue_a_property_and_never_become_one() {
        let p = parse(
            "[default]\ns3 =\n  aws_access_key_id = not-this\n\tmax_concurrent_requests = 20\n\
             aws_access_key_id = AKID\n",
            FileKind::Credentials,
        );
        assert_eq!(p["default"]["aws_access_key_id"], "AKID");
        assert_eq!(p["default"]["s3"], "");
    }

    #[test]
    fn nonsense_is_skipped_and_never_panics() {
        for text in [
            "",
            "=",
            "[",
            "[]",
            "]\n=x",
            "key = value",
            "[default\nk=v",
            "[ profile ]\n=\n",
        ] {
            let _ = parse(text, FileKind::Config);
            let _ = parse(text, FileKind::Credentials);
        }
        assert!(parse("key = value\n", FileKind::Credentials).is_empty());
    }
}
