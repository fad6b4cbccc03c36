//! Needs Docker and `elector-node:latest`: `cargo test -p conformance -- --ignored`.
//! (The same negative control runs in `just conformance`, as part of the quick suite.)

use std::time::Duration;

use conformance::runner::{run_scenario, RunOptions};
use conformance::scenario::Scenario;
use conformance::suite;

#[test]
#[ignore = "needs Docker and the elector-node:latest image"]
fn a_deliberately_broken_elector_makes_the_suite_fail() {
    conformance::docker::install_api_proxy().expect("docker engine");
    let dir = suite::default_scenario_dir();
    let scn = Scenario::load(&dir.join("broken-elector-isolate-replica.yaml")).unwrap();
    assert_eq!(scn.elector_bin.as_deref(), Some("elector-faulty"));
    let opts = RunOptions {
        image: std::env::var("CONFORMANCE_IMAGE").unwrap_or_else(|_| "elector-node:latest".into()),
        out_dir: suite::default_out_dir(),
        session: format!("itest{:x}", std::process::id()),
        max_scenario: Duration::from_secs(180),
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (result, _history) = rt.block_on(run_scenario(
        &scn,
        conformance::target::TargetKind::ElectorKevy,
        1,
        &opts,
        1,
    ));
    assert!(result.error.is_none(), "runner error: {:?}", result.error);
    let failed = result.failed_checks();
    assert!(
        !result.checks_passed,
        "the broken elector passed every checker"
    );
    assert!(
        failed.contains(&"single_writable_primary") || failed.contains(&"minority_never_elects"),
        "expected split-brain or minority checker to fire, got {failed:?}"
    );
    assert!(
        result.passed,
        "negative control counts as passed when caught"
    );
}
