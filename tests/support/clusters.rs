//! The cluster profiles (`tests/fixtures/clusters/<platform>-<release>/`, written by
//! `scripts/cluster-profiles`): each platform's cluster on each release as OpenShift writes
//! and keeps its objects. Read here; loaded into the real apiserver by
//! `support::cluster::load_profile`.

use std::path::PathBuf;

use serde_json::Value;

/// Every platform with a profile, by its folder name.
pub const PLATFORMS: [&str; 6] = ["gcp", "aws", "azure", "vsphere", "openstack", "nutanix"];
/// Every release with a profile.
pub const RELEASES: [&str; 3] = ["4.17", "4.19", "4.22"];

/// The files of a profile and the kinds each holds, in the order they are loaded (the
/// Secrets before the MachineSets that name them).
pub const FILES: [(&str, &[&str]); 7] = [
    ("infrastructure.yaml", &["Infrastructure"]),
    ("clusterversion.yaml", &["ClusterVersion"]),
    ("machineconfiguration.yaml", &["MachineConfiguration"]),
    ("coreos-bootimages.yaml", &["ConfigMap"]),
    ("secrets.yaml", &["Secret"]),
    ("machinesets.yaml", &["MachineSet"]),
    ("controlplanemachineset.yaml", &["ControlPlaneMachineSet"]),
];

/// One profile: a platform's cluster on a release.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Profile {
    pub platform: &'static str,
    pub release: &'static str,
}

impl Profile {
    pub fn new(platform: &'static str, release: &'static str) -> Profile {
        Profile { platform, release }
    }

    /// All eighteen.
    #[allow(dead_code, reason = "not every test binary lists them all")]
    pub fn all() -> Vec<Profile> {
        PLATFORMS
            .iter()
            .flat_map(|p| RELEASES.iter().map(|r| Profile::new(p, r)))
            .collect()
    }

    /// `platform`'s profile on the release whose CRDs the test apiserver holds: the
    /// Kubernetes `KUBE_VERSION` picks runs OpenShift 4.17's CRDs on 1.30 and 4.22's (or
    /// newer) otherwise (`scripts/test-apiserver versions`). A profile on CRDs older than its
    /// release would lose the fields they lack.
    #[allow(dead_code, reason = "only the suites run on every Kubernetes pick it")]
    pub fn on_running_release(platform: &'static str) -> Profile {
        let wanted = std::env::var("KUBE_VERSION").unwrap_or_default();
        let minor: Vec<&str> = wanted.trim_start_matches('v').split('.').take(2).collect();
        let release = if minor == ["1", "30"] { "4.17" } else { "4.22" };
        Profile::new(platform, release)
    }

    pub fn dir(&self) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/clusters")
            .join(format!("{}-{}", self.platform, self.release))
    }

    pub fn text(&self, file: &str) -> String {
        let path = self.dir().join(file);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("profile {}: {e}", path.display()))
    }

    /// The objects of `file`, in order.
    pub fn objects(&self, file: &str) -> Vec<Value> {
        bootimage_webhook::core::snapshot::parse_documents(&self.text(file))
            .unwrap_or_else(|e| panic!("profile {self:?} {file}: {e}"))
            .into_iter()
            .filter(|d| !d.is_null())
            .collect()
    }

    /// Every object of the profile, file by file in [`FILES`]' order.
    #[allow(dead_code, reason = "not every test binary loads a profile")]
    pub fn all_objects(&self) -> Vec<Value> {
        FILES.iter().flat_map(|(f, _)| self.objects(f)).collect()
    }

    /// The installer's worker MachineSets.
    #[allow(dead_code, reason = "not every test binary reads them")]
    pub fn machine_sets(&self) -> Vec<Value> {
        self.objects("machinesets.yaml")
    }

    /// The one object of `file`.
    #[allow(dead_code, reason = "not every test binary reads them")]
    pub fn object(&self, file: &str) -> Value {
        let mut all = self.objects(file);
        assert_eq!(all.len(), 1, "profile {self:?} {file} holds one object");
        all.remove(0)
    }

    /// The `Source:` lines of a file's header: where it comes from upstream.
    #[allow(dead_code, reason = "only the fast tier reads them")]
    pub fn sources(&self, file: &str) -> Vec<String> {
        self.text(file)
            .lines()
            .take_while(|l| l.starts_with('#'))
            .filter_map(|l| l.strip_prefix("# Source: ").map(str::to_owned))
            .collect()
    }
}
