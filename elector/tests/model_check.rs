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

use elector::core::{Faults, Timings};
use model::{Act, Cluster, ClusterModel, Start};
use stateright::{Checker, Expectation, HasDiscoveries, Model};
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
    report(&format!("{name} (bfs)"), depth, start, &checker);
    checker
}

fn report(name: &str, depth: usize, start: Instant, checker: &impl Checker<ClusterModel>) {
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
            // The schedule prints as Rust (`[Deliver(0), Advance, ...]`):
            // `ClusterModel::replay` re-executes it (see the regression
            // tests below).
            eprintln!(
                "  {}: {:?}\n    {:?}",
                p.name,
                path.into_actions(),
                last.violation()
            );
        }
    }
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

/// Asserts that the search broke no `always` property.
fn assert_no_always_broken(checker: &impl Checker<ClusterModel>) {
    for p in checker.model().properties() {
        if p.expectation == Expectation::Always {
            assert!(checker.discovery(p.name).is_none(), "{} violated", p.name);
        }
    }
}

/// Asserts that the search broke no `always` property, and that it reached
/// an acknowledged write (else the data properties held vacuously).
/// Returns whether it also reached a new primary.
fn assert_safe(checker: &impl Checker<ClusterModel>) -> bool {
    assert_no_always_broken(checker);
    assert!(
        checker.discovery("a write is acknowledged").is_some(),
        "no write was acknowledged: the data properties held vacuously"
    );
    checker.discovery("a new primary is elected").is_some()
}

fn with_data_restarts(cluster: Cluster) -> Cluster {
    Cluster {
        max_data_restarts: 1,
        ..cluster
    }
}

#[test]
fn a_data_node_restarting_empty_or_with_its_files_under_a_settled_cluster_loses_no_acknowledged_write(
) {
    // The primary's own data node coming back empty is the dangerous one:
    // its elector must not make it writable again (the tether, §6.10).
    let model = ClusterModel::new(with_data_restarts(cluster()), Start::Settled);
    let checker = check("settled, data restarts", model, depth(7), false);
    assert_safe(&checker);
}

#[test]
fn a_data_node_restart_during_the_election_after_a_primary_crash_loses_no_acknowledged_write() {
    let model = ClusterModel::new(with_data_restarts(cluster()), Start::PrimaryCrashed);
    let checker = check("primary crashed, data restarts", model, depth(8), false);
    assert_safe(&checker);
}

#[test]
fn two_nodes_keep_every_safety_property_when_the_old_primary_returns_with_an_unacknowledged_tail() {
    // Two data members, quorum 2, `WAIT 1`: the old primary took a write
    // its replica does not hold, its elector died, its data node came back
    // with its files (a new process: the tail unproven) and its elector
    // started again; the survivor stands (§4.5, §6.10). The search may
    // restart a data node once more.
    let model = ClusterModel::new(
        Cluster {
            max_data_restarts: 2,
            ..Cluster::two_quick()
        },
        Start::PrimaryBackWithTail,
    );
    assert_eq!(model.init.nodes.len(), 2);
    let checker = check(
        "2 nodes, old primary back with a tail",
        model,
        depth(9),
        false,
    );
    let elected = assert_safe(&checker);
    let who = checker
        .discovery("a new primary is elected")
        .map(|path| path.last_state().ghost.primaries.clone());
    eprintln!(
        "  2 nodes: a new primary within the bound: {elected} (epoch -> node index: {who:?})"
    );
    // The rule of §4.5 (`CoreConfig::held_guards_the_promise`): the old
    // primary's unproven tail does not count in its vote, so the survivor
    // (n2) is elected within the bound. Before it (commit 799f342) this
    // search elected nobody.
    let who = who.expect("a new primary within the bound");
    assert_eq!(who.values().last(), Some(&1), "{who:?}");
}

#[test]
fn two_data_members_and_a_witness_lose_no_acknowledged_write_across_data_node_restarts() {
    let model = ClusterModel::new(
        with_data_restarts(Cluster::two_and_witness_quick()),
        Start::PrimaryCrashedWithTail,
    );
    let checker = check(
        "2 data + witness, tail, data restarts",
        model,
        depth(8),
        false,
    );
    let elected = assert_safe(&checker);
    eprintln!("  2 data + witness: a new primary within the bound: {elected}");
}

/// Searches `cluster` with `faults` from `start`, `ahead` steps along the
/// fault-free schedule, to `bound` (breadth first, stopping at the first
/// violation); asserts `property` is the one broken and that the printed
/// schedule replays to a state that breaks it. Returns the schedule.
fn finds(
    cluster: Cluster,
    faults: Faults,
    (start, ahead): (Start, usize),
    bound: usize,
    property: &'static str,
) -> Vec<Act> {
    let model = ClusterModel::new(Cluster { faults, ..cluster }, start).skip_ahead(ahead);
    finds_in(model, bound, property)
}

/// [`finds`] from a model built by the caller.
fn finds_in(model: ClusterModel, bound: usize, property: &'static str) -> Vec<Act> {
    let name = format!("{:?}", model.cluster.faults);
    let checker = check(&name, model, bound, true);
    let path = checker
        .discovery(property)
        .unwrap_or_else(|| panic!("the search did not find {property:?} broken ({name})"));
    let schedule = path.into_actions();
    let replayed = checker
        .model()
        .replay(&schedule)
        .expect("the counterexample replays");
    assert!(
        checker.model().broken(&replayed).contains(&property),
        "the replayed schedule does not break {property:?}"
    );
    schedule
}

#[test]
fn promoting_without_a_quorum_is_found_as_two_primaries_in_one_epoch() {
    // Both replicas stand after the primary's crash; with the rule off
    // each promotes itself without a majority of votes (§5.3).
    let faults = Faults {
        promote_without_quorum: true,
        ..Faults::default()
    };
    finds(
        Cluster::three_quick(),
        faults,
        (Start::PrimaryCrashed, 0),
        9,
        "at most one primary per epoch",
    );
}

#[test]
fn ignoring_the_floor_is_found_as_an_acknowledged_write_lost_after_a_data_node_restart() {
    // The replica that acknowledged comes back empty; without the floor it
    // stands (or votes) with offset 0 and the write is gone (§6.10).
    let faults = Faults {
        ignore_floor: true,
        ..Faults::default()
    };
    finds(
        Cluster::three_quick(),
        faults,
        (Start::ReplicaRestartedEmpty, 4),
        9,
        "every acknowledged write is on every later primary",
    );
}

#[test]
fn a_replica_back_empty_after_acknowledging_keeps_its_floor_while_the_primary_is_down() {
    // The same start as the control above, with the rule in place: the
    // floor keeps the restarted replica from standing or voting below the
    // write, so no primary without it is ever elected (and, with two of
    // three down in effect, none at all: that is the price).
    let model = ClusterModel::new(Cluster::three_quick(), Start::ReplicaRestartedEmpty);
    let checker = check("replica restarted empty", model, depth(9), false);
    assert_safe(&checker);
}

/// The counterexample the search printed for `ignore_floor` (the voter's
/// forgotten offset after a data-node restart), kept as a schedule: it
/// replays deterministically to the lost write with the rule off, and with
/// the rule in place the same schedule elects nobody without the write.
#[test]
fn the_forgotten_floor_counterexample_replays_to_the_lost_write_and_the_floor_prevents_it() {
    use Act::*;
    let schedule = [
        Deliver(4),
        Persist(1),
        Deliver(4),
        Persist(2),
        Deliver(4),
        // The winner's `led` is durable: its data node is told (§6.10).
        Persist(1),
        Round(1),
    ];
    let lost = "every acknowledged write is on every later primary";
    let faulty = Cluster {
        faults: Faults {
            ignore_floor: true,
            ..Faults::default()
        },
        ..Cluster::three_quick()
    };
    let model = ClusterModel::new(faulty, Start::ReplicaRestartedEmpty).skip_ahead(4);
    let end = model.replay(&schedule).expect("the schedule replays");
    assert_eq!(model.broken(&end), vec![lost], "{:?}", end.ghost);

    let fixed =
        ClusterModel::new(Cluster::three_quick(), Start::ReplicaRestartedEmpty).skip_ahead(4);
    match fixed.replay(&schedule) {
        // The restarted replica never stands, so the schedule's messages
        // are not there to deliver.
        Err(_) => {}
        Ok(end) => assert!(fixed.broken(&end).is_empty(), "{:?}", end.ghost),
    }
    // And no other schedule of that length from there loses it either.
    let checker = check("forgotten floor, fixed", fixed, schedule.len() + 2, false);
    assert!(checker.discovery(lost).is_none());
}

/// The liveness variant (§5.1, §6.2, §9.2's "liveness during faults"):
/// after the primary's elector dies, `k` steps of faults (loss, reordering,
/// the dead elector's restart) and then calm; the model's time bound after
/// the calm is `ms`, so every path ends, and the `eventually` property is
/// judged at each end. The search runs to the end of every path (the
/// depth bound is only a guard, asserted unreached).
fn liveness_model(k: u32, ms: u64, never_stand: Vec<usize>) -> ClusterModel {
    let cluster = Cluster {
        liveness: Some((k, ms)),
        never_stand,
        // A lease of two heartbeats (voter_fresh 400 − hb 100 − margin
        // 100): with `model_timings` it is exactly one, and as every tick
        // of the model happens at once and a replica echoes the stamp it
        // heard a heartbeat ago, a new primary's lease ends at each tick,
        // so it never stays writable (the first version of this check
        // found that). Real configurations keep the lease many heartbeats
        // long (the default: 3.4 s against 200 ms).
        timings: Timings {
            down_after_ms: 600,
            ..model::model_timings()
        },
        ..cluster()
    };
    ClusterModel::new(cluster, Start::PrimaryJustCrashed)
}

const LIVENESS_GUARD: usize = 400;

/// The time bound after the calm (`MODEL_LIVENESS_MS`).
fn liveness_ms() -> u64 {
    std::env::var("MODEL_LIVENESS_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000)
}

#[test]
fn once_faults_stop_a_majority_elects_a_primary_within_the_bound_after_the_primary_crash() {
    // The survivors detect the death after down_after (500 ms), stand and
    // win within 1000 ms of the calm. `cargo test` calms at the crash
    // (every order of the fault-free steps that follow);
    // `MODEL_LIVENESS_STEPS=k` allows k steps of faults first.
    let k = std::env::var("MODEL_LIVENESS_STEPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let checker = check(
        &format!("liveness, {k} fault steps"),
        liveness_model(k, liveness_ms(), Vec::new()),
        LIVENESS_GUARD,
        false,
    );
    assert!(
        checker.max_depth() < LIVENESS_GUARD,
        "a path did not end within the guard: the eventually property was not judged everywhere"
    );
    if let Some(path) = checker.discovery(model::LIVENESS) {
        let end = path.last_state();
        let nodes: Vec<String> = end
            .nodes
            .iter()
            .map(|n| match &n.proc {
                Some(p) => format!(
                    "{:?} epoch {} fenced {} writable {}",
                    p.core.role(),
                    p.core.epoch(),
                    p.core.fenced(),
                    n.server.writable()
                ),
                None => "down".into(),
            })
            .collect();
        panic!("a path ended with no primary at {}: {nodes:?}", end.now);
    }
    for p in checker.model().properties() {
        if p.expectation == Expectation::Always {
            assert!(checker.discovery(p.name).is_none(), "{} violated", p.name);
        }
    }
}

#[test]
fn survivors_that_never_stand_are_found_to_leave_the_cluster_without_a_primary() {
    // The control: n2 and n3 have priority 0 (they never stand, §5.1), so
    // after n1's crash no path elects anyone; the checker must say so.
    let model = liveness_model(0, 1_000, vec![1, 2]);
    let checker = check("liveness control, never stand", model, LIVENESS_GUARD, true);
    let path = checker
        .discovery(model::LIVENESS)
        .expect("the search did not find a path without a primary");
    let schedule = path.into_actions();
    eprintln!("  no primary after: {schedule:?}");
    let end = checker
        .model()
        .replay(&schedule)
        .expect("the schedule replays");
    assert!(end.calm_at.is_some() && !model::has_primary(&end));
}

/// From boot, the first primary's disk stalls once its data node is
/// writable (the write of its stream record never completes, and every
/// heartbeat waits behind it, §5.2), so the others elect a successor; the
/// search starts `before` steps before the successor's promotion on that
/// schedule, every action (the stalled write's completion included) open
/// to it.
fn stalled_primary_disk(fences_wait_for_persist: bool, before: usize) -> ClusterModel {
    let cluster = Cluster {
        faults: Faults {
            fences_wait_for_persist,
            ..Faults::default()
        },
        ..Cluster::three_quick()
    };
    let writable = |s: &model::State| s.nodes.iter().any(|n| n.server.writable());
    let model = ClusterModel::new(cluster, Start::Boot).skip_ahead_until(|_, _| false, writable, 0);
    let p = (0..model.init.nodes.len())
        .find(|&i| model.init.nodes[i].server.writable())
        .expect("a first primary");
    let stalled = move |_: &model::State, a: &Act| *a == Act::Persist(p);
    model.skip_ahead_until(stalled, |s| s.ghost.promotions >= 1, before)
}

/// How many steps before the successor's promotion the stalled-disk
/// searches start, and their bound.
const STALL_BEFORE: usize = 3;
const STALL_BOUND: usize = 10;

#[test]
fn a_fence_waiting_behind_a_stalled_persist_is_found_as_two_writable_data_nodes() {
    // The defect §5.2.1 removed (issue 10 finding 2): with the fence behind
    // the pending write, the stalled primary's lease lapses but its data
    // node stays writable while the successor's becomes writable.
    finds_in(
        stalled_primary_disk(true, STALL_BEFORE),
        STALL_BOUND,
        "at most one writable data node",
    );
}

#[test]
fn a_primary_whose_disk_stalls_fences_before_its_successor_is_writable() {
    // The same schedule with the rule in place: the lease's fence leaves at
    // once, so in no interleaving of the bound are two data nodes writable.
    let model = stalled_primary_disk(false, STALL_BEFORE);
    let checker = check("stalled primary disk", model, STALL_BOUND, false);
    assert_no_always_broken(&checker);
    assert!(
        checker.discovery("a new primary is elected").is_some(),
        "the successor was not elected within the bound: the check held vacuously"
    );
}

/// A kevy cluster (`Backend::promotion_restarts_stream`; the model's kevy
/// is demoted by a lease fence, as before the write quiesce of §6.4.1) with
/// a lease of two heartbeats (`down_after` 600 ms) and three writes.
fn kevy_cluster(faults: Faults) -> Cluster {
    Cluster {
        backend: elector::core::Backend {
            promotion_restarts_stream: true,
        },
        faults,
        max_writes: 3,
        timings: Timings {
            down_after_ms: 600,
            ..model::model_timings()
        },
        ..Cluster::three_quick()
    }
}

/// Plays `act` on the model's start state: the model from there.
fn then(model: ClusterModel, act: Act) -> ClusterModel {
    let init = model
        .replay(&[act])
        .expect("the scripted action is enabled");
    ClusterModel { init, ..model }
}

/// Settled, two writes on every node; the primary's lease lapses and its
/// fence is applied (demoting kevy) before the echo that renews the lease
/// arrives. Returns the model from there and the primary's index.
fn kevy_demoted_in_epoch(faults: Faults) -> (ClusterModel, usize) {
    let model = ClusterModel::new(kevy_cluster(faults), Start::Settled);
    let p = (0..3)
        .find(|&i| model.init.nodes[i].server.writable())
        .expect("a primary");
    let model = then(then(model, Act::Write(p)), Act::Write(p));
    let everywhere = |s: &model::State| s.nodes.iter().all(|n| n.server.log.len() == 2);
    let none = |_: &model::State, _: &Act| false;
    let model = model.skip_ahead_until(none, everywhere, 0);
    let fence_due = move |s: &model::State| {
        s.nodes[p].round_due && s.nodes[p].proc.as_ref().is_some_and(|c| c.core.fenced())
    };
    let model = then(model.skip_ahead_until(none, fence_due, 0), Act::Round(p));
    (model, p)
}

/// [`kevy_demoted_in_epoch`] with `repromote_in_epoch`: the primary makes
/// its data node writable again in the same epoch, a new stream whose
/// offsets start at 0. It takes a third write, acknowledged by one replica
/// (which full-syncs into the new stream: offset 1) while the other stays
/// in the old stream (offset 2, the same data epoch); then the primary's
/// elector dies. The search starts a step before the successor's OFFER.
fn kevy_repromoted_in_epoch() -> ClusterModel {
    let faults = Faults {
        repromote_in_epoch: true,
        ..Faults::default()
    };
    let (model, p) = kevy_demoted_in_epoch(faults);
    let stream = model.init.nodes[p].server.stream;
    let lagging = move |_: &model::State, a: &Act| *a == Act::Sync((p + 2) % 3);
    let reopened =
        move |s: &model::State| s.nodes[p].server.writable() && s.nodes[p].server.stream != stream;
    let model = then(model.skip_ahead_until(lagging, reopened, 0), Act::Write(p));
    let acked = |s: &model::State| s.ghost.acked.len() == 3;
    let model = then(model.skip_ahead_until(lagging, acked, 0), Act::Crash(p));
    let offered = |s: &model::State| s.ghost.votes.keys().any(|&(_, e)| e > 1);
    model.skip_ahead_until(lagging, offered, 0)
}

#[test]
fn a_kevy_primary_made_writable_again_in_its_epoch_is_found_to_lose_an_acknowledged_write() {
    // The kevy same-epoch stream restart (§6.10, chaos seed 2126): the
    // lagging replica's offset in the old stream outranks the acknowledging
    // replica's in the new one, both under one data epoch, and it is
    // elected without the write.
    finds_in(
        kevy_repromoted_in_epoch(),
        11,
        "every acknowledged write is on every later primary",
    );
}

#[test]
fn a_kevy_primary_demoted_in_its_epoch_resigns_instead_of_starting_a_second_stream() {
    // The same schedule with the rule in place: the reading of the demoted
    // kevy makes the primary resign, so no second stream is started under
    // its epoch, and no interleaving of the bound from there breaks a
    // safety property.
    let (model, p) = kevy_demoted_in_epoch(Faults::default());
    let core = &model.init.nodes[p].proc.as_ref().expect("running").core;
    assert_ne!(core.role(), elector::protocol::Role::Primary);
    let checker = check("kevy demoted in its epoch", model, depth(7), false);
    assert_no_always_broken(&checker);
}
