//! The adapter contract suite (docs/protocol.md §6.11; issue 34): the same
//! checks on four targets (real Redis, real kevy 7.0.0, and the
//! simulator's Redis-like and kevy models, each behind the adapter code
//! that drives it in production or in the simulator), and a control that
//! shows the checks catch an adapter reading kevy's `INFO` as Redis's.

#[allow(dead_code)] // the simulator is shared with the simulation tests
mod sim;
mod support;

mod contract;

use contract::real::{Backend, RealTarget};
use contract::sim_target::SimTarget;

/// Simulator seeds per model (each a different world of delays):
/// `SIM_CONTRACT_SEEDS` raises the count, `SIM_SEED=<n>` replays one.
fn sim_seeds() -> Vec<u64> {
    sim::seeds_from_env("SIM_CONTRACT_SEEDS", 20)
}

#[test]
fn the_contract_holds_on_real_redis() {
    let readings =
        contract::run_all(|| RealTarget::start(Backend::Redis)).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("real Redis: {readings} readings held to the rules");
}

#[test]
fn the_contract_holds_on_real_kevy() {
    let readings =
        contract::run_all(|| RealTarget::start(Backend::Kevy)).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("real kevy: {readings} readings held to the rules");
}

#[test]
fn the_contract_holds_on_the_simulated_redis_like_node() {
    for seed in sim_seeds() {
        contract::run_all(|| SimTarget::new(seed, false)).unwrap_or_else(|e| panic!("{e}"));
    }
}

#[test]
fn the_contract_holds_on_the_simulated_kevy_node() {
    for seed in sim_seeds() {
        contract::run_all(|| SimTarget::new(seed, true)).unwrap_or_else(|e| panic!("{e}"));
    }
}

/// The check both controls must fail, and its failure.
fn restarted_empty_check_fails(make: impl Fn() -> SimTarget) -> String {
    const CHECK: &str = "a_primary_restarted_empty_leaves_no_reading_that_claims_what_it_lost";
    let failure = contract::run_one(CHECK, make).expect_err("the contract found nothing wrong");
    assert!(failure.contains(CHECK), "{failure}");
    failure
}

/// The control: kevy 7.0.0's `INFO` read as Redis's (one stream for good,
/// the offset a lifetime maximum) is what lost every acknowledged write
/// when a primary's kevy restarted empty (issue 34 (a)); the contract must
/// say so.
#[test]
fn the_contract_catches_an_adapter_that_reads_kevy_info_as_redis() {
    let failure = restarted_empty_check_fails(|| {
        let mut t = SimTarget::new(1, true);
        t.reads_info_as_redis = true;
        t
    });
    assert!(
        failure.contains("truthful"),
        "failed for another reason: {failure}"
    );
}

/// The control of the rule the contract found on real kevy (protocol
/// §6.11, "A move by itself"): a replica whose upstream's process was
/// replaced reconnects by itself and its token keeps the old generation's
/// offset for a tick; an adapter that believes it reports a position its
/// node does not hold, which drops back within one process.
#[test]
fn the_contract_catches_a_kevy_adapter_that_believes_a_resync_by_itself() {
    let failure = restarted_empty_check_fails(|| {
        let mut t = SimTarget::new(1, true);
        t.sim.kevy_believing_a_resync_by_itself();
        t
    });
    assert!(
        failure.contains("monotonic"),
        "failed for another reason: {failure}"
    );
}

/// protocol §6.10, "A replica's tail", "Across an elector restart", on real
/// kevy: the elector of a replica that followed its primary dies, an
/// operator moves the replica elsewhere, and the next elector's adapter
/// counts the runner as ended by someone else from the upstream the first
/// one kept (`<data_dir>/kevy-upstream`); left alone, it counts nothing.
#[test]
fn a_kevy_replica_moved_by_hand_while_its_elector_was_down_is_counted_by_the_next_one() {
    use elector::core::DataNodeTarget;
    for moved in [false, true] {
        let mut c =
            contract::Contract::new(RealTarget::start(Backend::Kevy).with_electors_adapters());
        c.reach(0, &DataNodeTarget::Primary)
            .unwrap_or_else(|e| panic!("{e}"));
        let follow = c.follow(0);
        c.reach(1, &follow).unwrap_or_else(|e| panic!("{e}"));
        let joined = c
            .read_until(1, 10_000, "joined", |r| r.link_up)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(joined.runners_ended_by_others, 0);
        if moved {
            c.t.replicaof_by_hand(1, "127.0.0.1", 1)
                .unwrap_or_else(|e| panic!("{e}"));
        }
        c.t.restart_adapter(1);
        let info = c.read(1).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            info.runners_ended_by_others,
            u64::from(moved),
            "moved by hand: {moved}; reading {info:?}"
        );
        if moved {
            assert!(!info.link_up, "a link someone else set is no join of ours");
        }
    }
}
