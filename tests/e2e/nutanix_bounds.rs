//! What Prism Central answers is read within bounds the pod's memory holds: an answer
//! larger than the cap per answer, or a list whose pages together pass the cap per list,
//! is one error of the pass that asked, and the next pass, once the answers are back to
//! size, works.

use crate::nutanix_prism::{PASSWORD, RELEASE_A, World, settings, want};
use crate::support;

use std::collections::BTreeSet;

use bootimage_webhook::cluster::importer::HttpsError;
use bootimage_webhook::cluster::importer::{MAX_ANSWER, MAX_LIST};
use bootimage_webhook::cluster::nutanix::NutanixError;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nutanix_an_oversized_answer_is_one_error_not_the_pod() {
    let _parallel = support::parallel();
    let world = World::new();
    let (a, named) = (world.artifact(RELEASE_A), BTreeSet::new());
    let mut importer = world.importer(PASSWORD);
    world.prism.pad_lists(MAX_ANSWER + 1);
    let e = importer.look(&want(&a, &named)).await.unwrap_err();
    let text = e.to_string();
    assert!(
        matches!(e, NutanixError::Https(HttpsError::TooLarge { .. })),
        "{text}"
    );
    assert!(
        text.contains(&format!("larger than {MAX_ANSWER} bytes")),
        "{text}"
    );
    // The same client, once the answers are back to size: the import goes on.
    world.prism.pad_lists(0);
    let image = importer
        .ensure(&settings(), &want(&a, &named))
        .await
        .unwrap();
    assert_eq!(image.state, "COMPLETE");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nutanix_a_list_past_its_cap_is_one_error() {
    let _parallel = support::parallel();
    let world = World::new();
    let (a, named) = (world.artifact(RELEASE_A), BTreeSet::new());
    let importer = world.importer(PASSWORD);
    // Pages under the cap per answer, together past the cap per list.
    let page = MAX_ANSWER * 3 / 4;
    world.prism.pad_lists(page);
    for n in 0..(MAX_LIST / page + 1) * 100 {
        world
            .prism
            .add_image(&format!("someone-{n}"), "theirs", b"x");
    }
    let e = importer
        .look(&want(&a, &named))
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains(&format!("larger than {MAX_LIST} bytes")), "{e}");
    world.prism.pad_lists(0);
    assert!(importer.look(&want(&a, &named)).await.is_ok());
}
