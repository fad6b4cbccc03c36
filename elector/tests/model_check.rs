//! Exhaustive model checking of the election core (issue 39, protocol §9.4):
//! the real `Core`, driver and gate of three electors under a network that
//! loses, duplicates and reorders, crash-restart with durable state, timers
//! as actions and quorum-acknowledged client writes (`tests/model/`).
//!
//! Each search is a breadth-first search over every interleaving from a
//! start state (`model::Start`) to a depth bound: `MODEL_DEPTH` or the
//! default below (`just model-check` runs deeper). Each run prints the
//! states it explored, the depth reached and the time it took, and a
//! counterexample as the list of model actions that leads to it.

mod model;

use elector::core::Faults;
use model::{Cluster, ClusterModel, Start};
use stateright::{Checker, HasDiscoveries, Model};
use std::time::Instant;

/// The full bounds under `MODEL_FULL=1` (`just model-check`), the quick
/// ones otherwise.
fn cluster() -> Cluster {
    if std::env::var_os("MODEL_FULL").is_some() {
        Cluster::three()
    } else {
        Cluster::three_quick()
    }
}

fn depth(default: usize) -> usize {
    std::env::var("MODEL_DEPTH")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Runs a BFS of `model` to `depth`, prints what it explored and each
/// discovery's schedule, and returns the finished checker.
fn check(
    name: &str,
    model: ClusterModel,
    depth: usize,
    stop_at_failure: bool,
) -> impl Checker<ClusterModel> {
    let start = Instant::now();
    let mut builder = model.checker().target_max_depth(depth);
    if stop_at_failure {
        builder = builder.finish_when(HasDiscoveries::AnyFailures);
    }
    let checker = builder.spawn_bfs().join();
    eprintln!(
        "\nmodel {name}: depth {} (bound {depth}), {} states ({} unique), {:.1?}",
        checker.max_depth(),
        checker.state_count(),
        checker.unique_state_count(),
        start.elapsed()
    );
    for p in checker.model().properties() {
        if let Some(path) = checker.discovery(p.name) {
            let last = path.last_state().ghost.clone();
            eprintln!(
                "  {}: {:?}\n    {:?}",
                p.name,
                path.into_actions(),
                last.violation()
            );
        }
    }
    checker
}

#[test]
fn a_settled_cluster_keeps_every_safety_property_under_writes_faults_and_reordering() {
    let model = ClusterModel::new(cluster(), Start::Settled);
    let checker = check("settled", model, depth(7), false);
    for p in checker.model().properties() {
        // No election starts within this bound from a healthy cluster.
        if p.name != "a new primary is elected" {
            if p.name == "a write is acknowledged" {
                assert!(checker.discovery(p.name).is_some(), "{}", p.name);
            } else {
                assert!(checker.discovery(p.name).is_none(), "{} violated", p.name);
            }
        }
    }
}

#[test]
fn the_election_after_a_primary_crash_keeps_every_safety_property_in_every_interleaving() {
    let model = ClusterModel::new(cluster(), Start::PrimaryCrashed);
    check("primary crashed", model, depth(9), false).assert_properties();
}

#[test]
fn the_election_after_a_primary_is_cut_off_keeps_every_safety_property_in_every_interleaving() {
    let model = ClusterModel::new(cluster(), Start::PrimaryIsolated);
    // The successor's election is five steps away, so it is only reached
    // from depth 7 on; a smaller `MODEL_DEPTH` checks only the safety
    // properties.
    let bound = depth(7);
    let checker = check("primary isolated", model, bound, false);
    if bound >= 7 {
        checker.assert_properties();
    } else {
        for p in checker.model().properties() {
            if p.name == "a new primary is elected" {
                continue;
            }
            if p.name == "a write is acknowledged" {
                assert!(checker.discovery(p.name).is_some(), "{}", p.name);
            } else {
                assert!(checker.discovery(p.name).is_none(), "{} violated", p.name);
            }
        }
    }
}

/// The checker can fail: with the core's test-only switches that remove a
/// rule (`elector::core::Faults`, the same ones the simulator's controls
/// use), the search finds the property that rule protects broken.
fn finds_with(faults: Faults, start: Start, property: &'static str) {
    let cluster = Cluster {
        faults,
        ..cluster()
    };
    let model = ClusterModel::new(cluster, start);
    let checker = check(&format!("{faults:?}"), model, depth(8), true);
    assert!(
        checker.discovery(property).is_some(),
        "the search did not find {property:?} broken with {faults:?}"
    );
}

/// Ignored in `cargo test` (depth 8 from a cut-off primary takes minutes);
/// `just model-check` runs it.
#[test]
#[ignore]
fn without_lease_fencing_the_search_finds_two_writable_data_nodes() {
    finds_with(
        Faults {
            no_lease_fencing: true,
            ..Faults::default()
        },
        Start::SuccessorElected,
        "at most one writable data node",
    );
}

#[test]
fn two_data_members_and_a_witness_keep_every_safety_property_after_a_primary_crash() {
    let cluster = if std::env::var_os("MODEL_FULL").is_some() {
        Cluster {
            witnesses: 1,
            ..Cluster::three()
        }
    } else {
        Cluster::two_and_witness_quick()
    };
    let model = ClusterModel::new(cluster, Start::PrimaryCrashed);
    // n3 is a witness: its elector never drives a data node.
    assert!(model.init.nodes[2].target.is_none());
    assert!(model.init.nodes[1].target.is_some());
    check("2 data + witness, primary crashed", model, depth(9), false).assert_properties();
}
