//! Azure end to end, from the Azure profiles (`tests/fixtures/clusters/azure-<release>`): on
//! each release the installer's MachineSets, on the image gallery the installer made for the
//! cluster, move to the stream's unpaid marketplace image once the webhook runs, whether the
//! MCO manages Azure on that release (4.22: its status selects them) or not (4.17, 4.19: the
//! webhook's own opt-in); the ControlPlaneMachineSet, not asked for, keeps its image.

use crate::support;

use std::time::Duration;

use serde_json::Value;
use support::cluster::*;
use support::clusters::Profile;

fn azure_image(o: &Value) -> Value {
    o.pointer(&format!("{PROVIDER}/image"))
        .cloned()
        .unwrap_or_default()
}

#[test]
fn azure_profiles_installer_machinesets_move_to_the_marketplace_image_on_every_release() {
    let _parallel = support::parallel();
    for release in ["4.17", "4.19", "4.22"] {
        let profile = Profile::new("azure", release);
        let c = Cluster::start_profile(profile);
        let a = c.holder(&[]);
        let installed = azure_image(&profile.machine_sets()[0]);
        assert!(
            installed["resourceID"]
                .as_str()
                .unwrap()
                .contains("/galleries/")
        );
        for ms in profile.machine_sets() {
            let name = ms["metadata"]["name"].as_str().unwrap().to_owned();
            let moved = eventually(
                &format!("{release}: {name} to move to the marketplace image"),
                Duration::from_secs(60),
                || a.served.log_text(),
                || {
                    let image = azure_image(&c.get(&name));
                    (image["resourceID"] == "" && image["publisher"] != "").then_some(image)
                },
            );
            assert_eq!(
                moved["type"], "MarketplaceNoPlan",
                "{release} {name}: {moved}"
            );
            let stored = c.get(&name);
            assert!(annotation(&stored, BOOT_IMAGE).is_some(), "{stored}");
        }
        let cpms = c
            .api
            .get_json(["controlplanemachineset", "cluster", "-n", NS]);
        let template = &cpms["spec"]["template"]["machines_v1beta1_machine_openshift_io"];
        assert_eq!(
            template["spec"]["providerSpec"]["value"]["image"], installed,
            "{release}: the ControlPlaneMachineSet moved unasked"
        );
        let report = status_json(&c);
        for ms in profile.machine_sets() {
            let row = status_row(&report, ms["metadata"]["name"].as_str().unwrap());
            assert_eq!(row["reason"], "UpToDate", "{release}: {row:#}");
        }
        c.assert_nothing_refused(&[&a]);
    }
}
