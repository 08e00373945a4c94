//! Every cluster profile (`tests/fixtures/clusters/`) is what a real apiserver stores: each
//! loaded on the CRDs of its release (4.19's on 4.22's, the nearest the repository holds),
//! every field read back as the profile gives it, then deleted before the next.

use crate::support;
use support::apiserver::ApiServer;
use support::cluster::{load_profile, unload_profile};
use support::clusters::{PLATFORMS, Profile, RELEASES};

/// The CRD folder of `release` under `tests/fixtures/crds`.
fn crds(release: &str) -> String {
    let folder = if release == "4.17" {
        "openshift-4.17"
    } else {
        "openshift-4.22"
    };
    format!(
        "{}/tests/fixtures/crds/{folder}",
        env!("CARGO_MANIFEST_DIR")
    )
}

#[test]
fn cluster_profiles_are_stored_as_written_on_their_releases_crds() {
    let _parallel = support::parallel();
    let api = ApiServer::start();
    for release in RELEASES {
        api.kubectl_ok([
            "apply",
            "--server-side",
            "--force-conflicts",
            "-f",
            &crds(release),
        ]);
        api.kubectl_ok(["wait", "--for=condition=Established", "crd", "--all"]);
        for platform in PLATFORMS {
            let objects = load_profile(&api, Profile::new(platform, release));
            unload_profile(&api, &objects);
        }
    }
}
