//! Seeded simulation of whole clusters under faults (docs/protocol.md §9).
//!
//! `cargo test -p elector --test simulation` runs `SIM_SEEDS` (default 1500)
//! random schedules; a failure prints its seed, and `SIM_SEED=<n>` replays
//! exactly that one.

mod sim;

use elector::core::Faults;
use elector::protocol::Role;
use faults::FaultKind;
use rand::Rng;
use sim::{Sim, World};

const RUN_MS: u64 = 30_000;
const SETTLE_MS: u64 = 20_000;
/// How many times a schedule plays the operator before convergence must hold.
const OPERATOR_TRIES: usize = 3;
/// How often, and how far apart, a schedule that has not converged at the
/// end of its settling time is looked at again before the operator is
/// called: a moment's lapse of a lease in a lossy world is not a stuck
/// cluster, and a lapse that lasts is still found.
const LOOK_AGAIN: usize = 3;
const LOOK_AGAIN_MS: u64 = 2_000;

/// One random schedule: partitions (one-way included), crashes of the
/// elector alone or the whole node, restarts, pauses, planned switchovers
/// (which then race every other fault); then everything heals
/// and the cluster must converge on exactly one primary.
/// On failure: the simulation (boxed: it is large) and what went wrong.
type Failure = Box<(Sim, String)>;

fn run_schedule(seed: u64, faults: Faults) -> Result<Sim, Failure> {
    let mut pick = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(seed);
    let n = if pick.gen_bool(0.6) { 3 } else { 5 };
    run_schedule_with(seed, (n, 0), faults, pick)
}

/// The same random schedule over `(data members, witnesses)` (§4.5).
fn run_schedule_with(
    seed: u64,
    (data, witnesses): (usize, usize),
    faults: Faults,
    pick: rand::rngs::StdRng,
) -> Result<Sim, Failure> {
    run_schedule_acked_at(seed, (data, witnesses), faults, pick, None)
}

/// Which fault the schedule injects next, named in the vocabulary the
/// conformance suite shares (`faults`). The draw is the one the simulator
/// has always made (0..16, two draws for the disk or the fence), so every
/// seed replays the schedule it did before the names were shared.
///
/// With `stalls` (`Sim::draws_data_stalls`), one of the two draws that
/// otherwise bridge stalls a data node alone instead; off, the draw is the
/// old one.
fn draw_kind(pick: &mut rand::rngs::StdRng, stalls: bool) -> FaultKind {
    match pick.gen_range(0..16) {
        0 | 1 => FaultKind::Heal,
        2 => FaultKind::Isolate,
        3 => FaultKind::OneWay,
        4 => FaultKind::Split,
        // Two draws for a whole-node crash (once with and once without its
        // data; the AOF data node loses nothing either way).
        5 | 6 => FaultKind::Kill,
        7 => FaultKind::Restart,
        8 => FaultKind::Pause,
        9 => FaultKind::Switchover,
        // Parts failing alone (protocol §6.4.1, §6.8): the elector
        // without its data node, the data node without its elector,
        // the disk, a fence lifted by hand.
        11 => FaultKind::KillElector,
        12 => FaultKind::FreezeElector,
        13 => FaultKind::RestartData,
        14 => {
            if pick.gen_bool(0.5) {
                FaultKind::ReadOnlyState
            } else {
                FaultKind::LiftFence
            }
        }
        10 if stalls => FaultKind::StallData,
        _ => FaultKind::Bridge,
    }
}

/// Injects one fault of `kind` around `victim`, drawing its parameters.
fn inject(sim: &mut Sim, pick: &mut rand::rngs::StdRng, kind: FaultKind, victim: usize, n: usize) {
    sim.injected.push(kind);
    match kind {
        FaultKind::Heal => sim.heal(),
        FaultKind::Isolate => {
            // Isolate one node both ways.
            for j in 0..n {
                if j != victim {
                    sim.blocked[victim][j] = true;
                    sim.blocked[j][victim] = true;
                }
            }
        }
        FaultKind::OneWay => {
            // One-way: victim stops hearing (or being heard by) everyone.
            let outbound = pick.gen_bool(0.5);
            for j in (0..n).filter(|&j| j != victim) {
                if outbound {
                    sim.blocked[victim][j] = true;
                } else {
                    sim.blocked[j][victim] = true;
                }
            }
        }
        FaultKind::Split => {
            // Random majority/minority split.
            let minority: Vec<usize> = (0..n).filter(|_| pick.gen_bool(0.4)).collect();
            for a in 0..n {
                for b in 0..n {
                    if minority.contains(&a) != minority.contains(&b) {
                        sim.blocked[a][b] = true;
                    }
                }
            }
        }
        FaultKind::Kill => sim.crash(victim, false),
        FaultKind::Restart => sim.restart(victim),
        FaultKind::Pause => {
            let ms = pick.gen_range(200..2_500);
            sim.pause(victim, ms);
        }
        FaultKind::Switchover => sim.request_switchover(victim, pick.gen_range(300..3_000)),
        FaultKind::KillElector => sim.crash_elector(victim),
        FaultKind::FreezeElector => sim.pause_elector(victim, pick.gen_range(200..4_000)),
        FaultKind::RestartData => sim.restart_data(victim, false),
        // Shorter than a lease, past `down_after`, or past both.
        FaultKind::StallData => sim.stall_data(victim, pick.gen_range(200..8_000)),
        FaultKind::ReadOnlyState => sim.break_disk(victim, pick.gen_range(500..5_000)),
        FaultKind::LiftFence => sim.lift_fence_by_hand(victim),
        FaultKind::Bridge => {
            // Bridge: the victim sees both halves, the halves not each other.
            let half: Vec<usize> = (0..n)
                .filter(|&j| j != victim && pick.gen_bool(0.5))
                .collect();
            for a in 0..n {
                for b in 0..n {
                    if a != victim && b != victim && half.contains(&a) != half.contains(&b) {
                        sim.blocked[a][b] = true;
                    }
                }
            }
        }
        FaultKind::Netem | FaultKind::StopElector | FaultKind::KillData => {
            unreachable!("draw_kind never draws {kind}: not in the simulator")
        }
    }
}

fn run_schedule_acked_at(
    seed: u64,
    (data, witnesses): (usize, usize),
    faults: Faults,
    pick: rand::rngs::StdRng,
    ack_copies: Option<usize>,
) -> Result<Sim, Failure> {
    run_schedule_on(seed, (data, witnesses), faults, pick, ack_copies, false)
}

/// A random schedule on Redis-like servers or on the kevy model (§9).
fn run_schedule_on(
    seed: u64,
    (data, witnesses): (usize, usize),
    faults: Faults,
    pick: rand::rngs::StdRng,
    ack_copies: Option<usize>,
    kevy: bool,
) -> Result<Sim, Failure> {
    run_schedule_tweaked(
        seed,
        (data, witnesses),
        faults,
        pick,
        ack_copies,
        kevy,
        |_| {},
    )
}

/// As [`run_schedule_on`], with `tweak` applied to the simulator first (a
/// control's switch).
fn run_schedule_tweaked(
    seed: u64,
    (data, witnesses): (usize, usize),
    faults: Faults,
    mut pick: rand::rngs::StdRng,
    ack_copies: Option<usize>,
    kevy: bool,
    tweak: fn(&mut Sim),
) -> Result<Sim, Failure> {
    let n = data + witnesses;
    let world = World::random(&mut pick);
    let mut sim = if kevy {
        Sim::kevy(seed, data, witnesses, world, faults)
    } else {
        Sim::with_witnesses(seed, data, witnesses, world, faults)
    };
    tweak(&mut sim);
    sim.ack_copies_override = ack_copies;
    let mut t = 0;
    while t < RUN_MS {
        t += pick.gen_range(300..3_000);
        if let Err(e) = sim.run_until(t) {
            return Err(Box::new((sim, e)));
        }
        let victim = pick.gen_range(0..n);
        let kind = draw_kind(&mut pick, sim.draws_data_stalls);
        if std::env::var_os("SIM_TRACE").is_some() {
            eprintln!("{t:>6} FAULT {kind} victim=n{}", victim + 1);
        }
        inject(&mut sim, &mut pick, kind, victim, n);
    }
    sim.heal();
    for i in 0..n {
        sim.restart(i);
    }
    if let Err(e) = sim.run_until(RUN_MS + SETTLE_MS) {
        return Err(Box::new((sim, e)));
    }
    // An operator whose first `accept-data-loss` did not take (the node it
    // chose lost its disk a moment later and resigned) looks again; three
    // tries, each only while §6.10 still leaves the cluster to an operator.
    let mut until = RUN_MS + SETTLE_MS;
    if let Err(e) = look_again(&mut sim, &mut until) {
        return Err(Box::new((sim, e)));
    }
    // An operator whose first `accept-data-loss` did not take (the node it
    // chose lost its disk a moment later and resigned) looks again; three
    // tries, each only while §6.10 still leaves the cluster to an operator.
    for _ in 0..OPERATOR_TRIES {
        if converged(&sim).is_ok() || !sim.play_the_operator() {
            break;
        }
        until += SETTLE_MS;
        let run = sim.run_until(until);
        if let Err(e) = run.and_then(|()| look_again(&mut sim, &mut until)) {
            return Err(Box::new((sim, e)));
        }
    }
    if let Err(e) = converged(&sim) {
        return Err(Box::new((sim, e)));
    }
    Ok(sim)
}

/// A world that loses up to a fifth of all messages can lapse a healthy
/// primary's lease for a moment (two nodes, seed 1920: quorum lost 380 ms
/// before the check, regained 110 ms after it; seed 875 on kevy: regained,
/// its data node not yet told): a schedule that has not converged is looked
/// at again a little later before it counts as stuck. A lapse that lasts is
/// still found.
fn look_again(sim: &mut Sim, until: &mut u64) -> Result<(), String> {
    for _ in 0..LOOK_AGAIN {
        if converged(sim).is_ok() {
            break;
        }
        *until += LOOK_AGAIN_MS;
        sim.run_until(*until)?;
    }
    Ok(())
}

/// After the final heal: exactly one unfenced primary, everyone follows it.
fn converged(sim: &Sim) -> Result<(), String> {
    let primaries: Vec<usize> = (0..sim.nodes.len())
        .filter(|&i| sim.role_of(i) == Some(Role::Primary))
        .collect();
    let [p] = primaries[..] else {
        return Err(format!(
            "after the final heal {} primaries (want exactly 1)",
            primaries.len()
        ));
    };
    let core = sim.nodes[p].core.as_ref().expect("primary runs");
    if core.fenced() || !sim.nodes[p].data.writable() {
        return Err(format!(
            "after the final heal primary n{} is still fenced",
            p + 1
        ));
    }
    for (i, node) in sim.nodes.iter().enumerate() {
        let c = node.core.as_ref().expect("all restarted");
        if i != p && (c.primary() != Some(sim.ids[p].as_str()) || c.epoch() != core.epoch()) {
            return Err(format!(
                "n{} follows {:?} in epoch {}, not n{} in {}",
                i + 1,
                c.primary(),
                c.epoch(),
                p + 1,
                core.epoch()
            ));
        }
    }
    Ok(())
}

fn seeds() -> Vec<u64> {
    sim::seeds_from_env("SIM_SEEDS", 1500)
}

/// kevy schedules that once failed, run whatever the seed count (unless
/// `SIM_SEED` picks one): 919 (5 nodes, a replica promoted by hand offered
/// another stream's offset as its data epoch's and was elected without
/// write 408: `Unproven::LeftStream`; found while the model's hand
/// promotion kept the generation), 1566 and 2024 (2 + witness and 3 nodes:
/// a primary fenced for good beside replicas below their floors:
/// `Reason::FencedTooLong`).
const KEVY_REGRESSION_SEEDS: &[u64] = &[919, 1566, 2024];

/// `seeds` and, unless one seed was asked for, `regressions` after them.
fn with_regressions(mut seeds: Vec<u64>, regressions: &[u64]) -> Vec<u64> {
    if std::env::var_os("SIM_SEED").is_none() {
        seeds.extend(
            regressions
                .iter()
                .filter(|s| !seeds.contains(s))
                .collect::<Vec<_>>(),
        );
    }
    seeds
}

/// One random schedule on the kevy model, its membership drawn from the
/// seed (3 or 5 data nodes, or 2 + a witness), `tweak` applied to the
/// simulator first: what every kevy test and control of this file runs.
fn run_kevy_schedule(
    seed: u64,
    faults: Faults,
    tweak: fn(&mut Sim),
) -> ((usize, usize), Result<Sim, Failure>) {
    let mut pick = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(seed ^ 0xce77);
    let membership = [(3, 0), (5, 0), (2, 1)][pick.gen_range(0..3)];
    let run = run_schedule_tweaked(seed, membership, faults, pick, None, true, tweak);
    (membership, run)
}

/// The same random schedules on the kevy 7.0.0 model, every elector driving
/// it through the real kevy policy (§9, `sim/kevy.rs`): 3 or 5 data nodes,
/// or 2 + a witness. `SIM_KEVY_SEEDS` sets how many (default 500).
#[test]
fn random_fault_schedules_on_kevy_keep_every_invariant_and_converge_after_healing() {
    let mut events = 0;
    let mut operator = 0;
    for seed in with_regressions(
        sim::seeds_from_env("SIM_KEVY_SEEDS", 500),
        KEVY_REGRESSION_SEEDS,
    ) {
        let (membership, run) = run_kevy_schedule(seed, Faults::default(), |_| {});
        match run {
            Ok(sim) => {
                events += sim.events_handled;
                operator += u64::from(sim.operator_interventions > 0);
            }
            Err(failure) => {
                let (sim, e) = *failure;
                panic!(
                    "kevy simulation with {membership:?} failed: {e}\nreplay with: SIM_SEED={seed} cargo test -p elector --test simulation on_kevy\n{}",
                    sim.describe()
                )
            }
        }
    }
    eprintln!("simulated {events} events on the kevy model; the operator accepted a data loss in {operator} schedules");
}

/// Two data nodes and no witness (quorum 2, `WAIT 1`, §4.5): the random
/// schedules on the Redis-like and the kevy model. Nothing fails over while
/// a node is down; after the final heal one primary holds every
/// acknowledged write. `SIM_TWO_NODE_SEEDS` sets how many (default 300).
/// Two-node schedules that once failed, run whatever the seed count: 373
/// (kevy: the joined primary, proven in the stream it started, refused for
/// ever by its follower's unclaimed join, which counted kevy's
/// lifetime-maximum `INFO` offset in the joined epoch; §6.10 "The joined
/// stream's source").
const TWO_NODE_REGRESSION_SEEDS: &[u64] = &[373];

#[test]
fn random_fault_schedules_on_two_nodes_keep_every_invariant_and_converge_after_healing() {
    let mut operator = [0u64; 2];
    for seed in with_regressions(
        sim::seeds_from_env("SIM_TWO_NODE_SEEDS", 300),
        TWO_NODE_REGRESSION_SEEDS,
    ) {
        for (i, kevy) in [false, true].into_iter().enumerate() {
            let pick = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(seed ^ 0x2002);
            match run_schedule_on(seed, (2, 0), Faults::default(), pick, None, kevy) {
                Ok(sim) => operator[i] += u64::from(sim.operator_interventions > 0),
                Err(failure) => {
                    let (sim, e) = *failure;
                    panic!(
                        "two nodes (kevy: {kevy}) failed: {e}\nreplay with: SIM_SEED={seed} cargo test -p elector --test simulation on_two_nodes\n{}",
                        sim.describe()
                    )
                }
            }
        }
    }
    eprintln!(
        "two nodes: the operator accepted a data loss in {} (Redis-like) and {} (kevy) schedules",
        operator[0], operator[1]
    );
}

/// Found by the kevy schedules with snapshot loading: seed 23 (3 nodes; a
/// replica acknowledged a write while loading, every read failed, and it
/// was fenced before any reading claimed the joined stream; it then voted
/// as if it held only its older stream and elected a node without that
/// write, until leaving an unclaimed join came to count like an inherited
/// one, §6.10); seed 1937 (5 nodes; a replica whose host died after it
/// acknowledged write 944 while loading came back unproven in its
/// unclaimed join of epoch 8 and voted for another replica that had
/// claimed epoch 8 at offset 78, without the write, §6.10 "An unproven
/// join"); seed 5700 (3 nodes; a replica whose first data was the joined
/// stream came back from a host crash as a new kevy process, with no record
/// and no floor, counted itself empty and voted for a node without the
/// write it had acknowledged, §6.10 "A join outlives its elector"); seed
/// 2752 (3 nodes; a first cut of §6.10 "An old primary's tail" returned
/// `(stream, ∞)` for an old primary of stream 1 without counting its
/// unclaimed join of epoch 3 above it, and it voted for a candidate of
/// epoch 2 without write 852, which it had acknowledged in epoch 3).
const KEVY_LOADING_REGRESSION_SEEDS: &[u64] = &[23, 1937, 5700, 2752];

/// The kevy schedules with replicas that load each full resync's snapshot
/// for up to 1.5 s, their reads timing out meanwhile while the process
/// lives (issue 35): the driver then spares a replica it left following
/// the blind fence (§6.8). `SIM_KEVY_LOADING_SEEDS` sets how many (default
/// 250).
#[test]
fn random_fault_schedules_on_kevy_with_snapshot_loading_keep_every_invariant_and_converge() {
    for seed in with_regressions(
        sim::seeds_from_env("SIM_KEVY_LOADING_SEEDS", 250),
        KEVY_LOADING_REGRESSION_SEEDS,
    ) {
        let (membership, run) = run_kevy_schedule(seed, Faults::default(), |sim| {
            sim.kevy_loads_snapshots = true
        });
        if let Err(failure) = run {
            let (sim, e) = *failure;
            panic!(
                "kevy simulation with loading, {membership:?}, failed: {e}\nreplay with: SIM_SEED={seed} cargo test -p elector --test simulation snapshot_loading\n{}",
                sim.describe()
            )
        }
    }
}

/// Runs kevy seed `seed` with snapshot loading under `faults` (an old rule
/// put back) and asserts the invariants find an acknowledged write lost.
fn a_loading_seed_loses_a_write_under(seed: u64, faults: Faults, old_rule: &str) {
    let (_, run) = run_kevy_schedule(seed, faults, |sim| sim.kevy_loads_snapshots = true);
    let Err(failure) = run else {
        panic!("seed {seed} kept every write with {old_rule}");
    };
    assert!(
        failure.1.contains("lost") || failure.1.contains("acknowledged"),
        "seed {seed} failed otherwise than by a lost write: {}",
        failure.1
    );
    eprintln!("seed {seed} with {old_rule}: {}", failure.1);
}

/// The control of seed 1937 (§6.10, "An unproven join"): with the rule
/// withdrawn, an unproven join votes for a replica that claimed the joined
/// stream short of what it acknowledged, and the invariants see the write
/// lost.
#[test]
fn counting_an_unproven_join_from_zero_is_caught_by_the_invariants() {
    let faults = Faults {
        count_an_unproven_join_from_zero: true,
        ..Faults::default()
    };
    a_loading_seed_loses_a_write_under(1937, faults, "the unproven join counted from (joined, 0)");
}

/// The control of seed 5700 (§6.10, "A join outlives its elector"): with a
/// fresh start trusted during an unclaimed join, a replica whose first data
/// was the joined stream comes back after its host crashed as a new kevy
/// process reading 0, counts as empty, and votes for a node without the
/// write it acknowledged; the invariants see the write lost. "A join whose
/// process is gone" closes the same hole a second way (the join is a floor
/// of `(joined, 0)` until the process is found), so both are put back.
#[test]
fn trusting_a_fresh_start_during_a_join_is_caught_by_the_invariants() {
    let faults = Faults {
        trust_a_fresh_start_during_a_join: true,
        trust_a_recorded_reading_during_a_join: true,
        ..Faults::default()
    };
    a_loading_seed_loses_a_write_under(5700, faults, "a fresh start trusted during a join");
}

/// Stall schedules that once failed, run whatever the seed count (unless
/// `SIM_SEED` picks one): 1091 (kevy, 3 nodes: a fence lifted by hand while
/// the adapter waited for its new upstream's promotion stayed lifted
/// through a second wait; the policy now reads its own node before every
/// wait, `kevy_policy` "following").
const STALL_REGRESSION_SEEDS: &[u64] = &[1091];

/// Data nodes that stall alone (SIGSTOP for 0.2-8 s under a running
/// elector: reads time out, the tether goes unanswered, commands wait,
/// nothing replicates) among the other faults, on the Redis-like model (3 or
/// 5 nodes) and the kevy model (3, 5, or 2 + a witness). `SIM_STALL_SEEDS`
/// sets how many of each (default 300).
#[test]
fn random_fault_schedules_with_data_node_stalls_keep_every_invariant_and_converge() {
    let mut stalls = 0;
    for seed in with_regressions(
        sim::seeds_from_env("SIM_STALL_SEEDS", 300),
        STALL_REGRESSION_SEEDS,
    ) {
        let mut pick = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(seed ^ 0x57a1);
        let n = if pick.gen_bool(0.6) { 3 } else { 5 };
        let redis =
            run_schedule_tweaked(seed, (n, 0), Faults::default(), pick, None, false, |sim| {
                sim.draws_data_stalls = true
            });
        let (membership, kevy) =
            run_kevy_schedule(seed, Faults::default(), |sim| sim.draws_data_stalls = true);
        for (model, membership, run) in [("Redis-like", (n, 0), redis), ("kevy", membership, kevy)]
        {
            match run {
                Ok(sim) => {
                    stalls += sim
                        .injected
                        .iter()
                        .filter(|k| **k == FaultKind::StallData)
                        .count()
                }
                Err(failure) => {
                    let (sim, e) = *failure;
                    panic!(
                        "{model} simulation with data-node stalls, {membership:?}, failed: {e}\nreplay with: SIM_SEED={seed} cargo test -p elector --test simulation data_node_stalls\n{}",
                        sim.describe()
                    )
                }
            }
        }
    }
    assert!(stalls > 0, "the schedules stalled no data node");
    eprintln!("stalled a data node alone {stalls} times");
}

#[test]
fn random_fault_schedules_keep_every_invariant_and_converge_after_healing() {
    let mut events = 0;
    let mut worst_overlap = 0;
    let mut acked = 0;
    let mut operator = 0;
    let mut kinds = std::collections::BTreeMap::<FaultKind, usize>::new();
    for seed in seeds() {
        match run_schedule(seed, Faults::default()) {
            Ok(sim) => {
                for k in &sim.injected {
                    *kinds.entry(*k).or_default() += 1;
                }
                events += sim.events_handled;
                worst_overlap = worst_overlap.max(sim.inv.longest_overlap_ms);
                acked += sim.acked.len();
                operator += u64::from(sim.operator_interventions > 0);
            }
            Err(failure) => {
                let (sim, e) = *failure;
                panic!(
                "simulation failed: {e}\nreplay with: SIM_SEED={seed} cargo test -p elector --test simulation\n{}",
                sim.describe()
            )
            }
        }
    }
    eprintln!("simulated {events} events; {acked} acknowledged writes kept; longest writable overlap {worst_overlap} ms; the operator accepted a data loss in {operator} schedules");
    let kinds: Vec<String> = kinds.iter().map(|(k, n)| format!("{k} {n}")).collect();
    eprintln!("faults injected by kind: {}", kinds.join(", "));
}

/// The shared vocabulary says which kinds the simulator injects; over a
/// few dozen seeds the schedules draw exactly those, so a kind added to the
/// vocabulary as simulated is really simulated (or the claim is corrected).
#[test]
fn the_schedules_draw_exactly_the_kinds_the_vocabulary_marks_as_simulated() {
    let mut drawn = std::collections::BTreeSet::new();
    for seed in 0..40 {
        let mut pick = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(seed);
        for _ in 0..20 {
            drawn.insert(draw_kind(&mut pick, true));
        }
    }
    let claimed: std::collections::BTreeSet<FaultKind> = FaultKind::ALL
        .into_iter()
        .filter(|k| k.in_simulator())
        .collect();
    assert_eq!(drawn, claimed);
}

/// The control of "the tick after a promotion" (docs/architecture.md
/// §kevy): a kevy policy that reports a promoted node's first master
/// reading at once lets the core claim the startup generation as the
/// epoch's stream; the next reading names the new one and resigns the
/// primary, at every promotion. The convergence check sees it.
#[test]
fn reporting_a_kevy_promotion_before_it_names_its_generation_is_caught_by_the_convergence_check() {
    let caught = (0..30).find_map(|seed| {
        run_kevy_schedule(seed, Faults::default(), |sim| {
            sim.kevy_report_before_naming = true
        })
        .1
        .err()
        .map(|f| (seed, f.1))
    });
    let (seed, e) = caught.expect("no kevy seed failed with the promotion reported before naming");
    eprintln!("seed {seed}: {e}");
}

/// Witnesses (§4.5) in the random schedules: 2 data nodes + 1 witness, 3 + 2
/// and 4 + 1, every fault of the plain schedules (a fault aimed at a
/// witness's data node does nothing: it has none), the same invariants
/// after every event (no acknowledged write lost counts acknowledgements at
/// the cluster's data promise), convergence after the final heal.
#[test]
fn random_fault_schedules_with_witnesses_keep_every_invariant_and_converge_after_healing() {
    let mut events = 0;
    for seed in seeds() {
        let mut pick = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(seed ^ 0x3173);
        let membership = [(2, 1), (3, 2), (4, 1)][pick.gen_range(0..3)];
        match run_schedule_with(seed, membership, Faults::default(), pick) {
            Ok(sim) => events += sim.events_handled,
            Err(failure) => {
                let (sim, e) = *failure;
                panic!(
                    "simulation with {membership:?} (data, witnesses) failed: {e}\nreplay with: SIM_SEED={seed} cargo test -p elector --test simulation with_witnesses\n{}",
                    sim.describe()
                )
            }
        }
    }
    eprintln!("simulated {events} events with witnesses");
}

/// The control: in 3 data nodes + 2 witnesses, counting a write acknowledged
/// at one replica copy (the plain 3-node rule) instead of the data promise
/// (two, §4.5) lets the witnesses elect a data node that lacks it, and the
/// invariants see the lost write.
#[test]
fn acknowledging_below_the_data_promise_is_caught_by_the_invariants() {
    let found = (0..3_000).find_map(|seed| {
        let pick = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(seed ^ 0x3173);
        run_schedule_acked_at(seed, (3, 2), Faults::default(), pick, Some(1))
            .err()
            .map(|f| (seed, f.1))
    });
    let (seed, e) = found.expect("no seed lost a write acknowledged below the data promise");
    eprintln!("seed {seed}: {e}");
}

/// The checkers must be able to fail: each deliberate bug is caught on some
/// seed of a small range (protocol §9.3).
fn first_failing_seed(faults: Faults) -> Option<(u64, String)> {
    (0..300).find_map(|seed| run_schedule(seed, faults).err().map(|f| (seed, f.1)))
}

#[test]
fn promoting_without_a_quorum_is_caught_by_the_invariants() {
    let found = first_failing_seed(Faults {
        promote_without_quorum: true,
        ..Faults::default()
    });
    assert!(found.is_some(), "no seed exposed promote_without_quorum");
}

#[test]
fn accepting_twice_per_epoch_is_caught_by_the_invariants() {
    let found = first_failing_seed(Faults {
        accept_twice_per_epoch: true,
        ..Faults::default()
    });
    let (seed, e) = found.expect("no seed exposed accept_twice_per_epoch");
    eprintln!("seed {seed}: {e}");
}

#[test]
fn skipping_the_lease_fence_is_caught_by_the_invariants() {
    let found = first_failing_seed(Faults {
        no_lease_fencing: true,
        ..Faults::default()
    });
    let (seed, e) = found.expect("no seed exposed no_lease_fencing");
    eprintln!("seed {seed}: {e}");
}

/// The first of `seeds` whose kevy schedule fails under `faults`.
fn first_failing_kevy_seed(seeds: &[u64], faults: Faults) -> Option<(u64, String)> {
    seeds.iter().find_map(|&seed| {
        run_kevy_schedule(seed, faults, |_| {})
            .1
            .err()
            .map(|f| (seed, f.1))
    })
}

/// §6.9: without `fenced_too_long`, kevy schedules end with a primary
/// fenced for good and nobody else electable (first found as seeds 1566
/// and 2024; any change of timing moves such a schedule to other seeds, so
/// the control looks for one, those two first).
#[test]
fn holding_a_lost_lease_for_ever_is_caught_by_the_convergence_check() {
    let faults = Faults {
        hold_a_lost_lease: true,
        ..Faults::default()
    };
    let found = [1566, 2024].into_iter().chain(0..4_000).find_map(|seed| {
        let (_, e) = first_failing_kevy_seed(&[seed], faults)?;
        e.contains("still fenced").then_some(seed)
    });
    let seed = found.expect("no schedule exposes hold_a_lost_lease");
    eprintln!("hold_a_lost_lease found by kevy seed {seed}");
}

// ----- Parts that fail alone: one focused schedule per finding (protocol §6.8, §6.9, §6.2.1, §6.4.1) -----

/// What a focused schedule does to the primary once the cluster is up.
type Fault = fn(&mut Sim, usize, &mut rand::rngs::StdRng);

/// Boots a cluster, lets it elect, applies `fault` to the primary while
/// clients write, holds it with the liveness check on (a healthy majority
/// must have a writable primary within the bound), then heals everything
/// and requires convergence. Every invariant is checked after every event.
fn run_focused(seed: u64, world: World, fault: Fault) -> Result<Sim, Failure> {
    run_focused_in(seed, world, three_or_five, fault)
}

/// Builds a focused schedule's cluster from its seed and draw.
type Build = fn(u64, World, &mut rand::rngs::StdRng) -> Sim;

fn three_or_five(seed: u64, world: World, pick: &mut rand::rngs::StdRng) -> Sim {
    let n = if pick.gen_bool(0.6) { 3 } else { 5 };
    Sim::new(seed, n, world, Faults::default())
}

/// As [`run_focused`], on the cluster `build` makes.
fn run_focused_in(seed: u64, world: World, build: Build, fault: Fault) -> Result<Sim, Failure> {
    let mut pick = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(seed ^ 0xf0c5);
    let mut sim = build(seed, world, &mut pick);
    let n = sim.nodes.len();
    let mut t0 = pick.gen_range(3_000..5_000);
    if let Err(e) = sim.run_until(t0) {
        return Err(Box::new((sim, e)));
    }
    // Two nodes that stand together split the vote and back off again: the
    // first election can take a few rounds.
    let boot_limit = t0 + 20_000;
    while sim.primary().is_none() && t0 < boot_limit {
        t0 += 500;
        if let Err(e) = sim.run_until(t0) {
            return Err(Box::new((sim, e)));
        }
    }
    let Some(p) = sim.primary() else {
        return Err(Box::new((sim, "no primary before the fault".into())));
    };
    let t = sim.timings;
    sim.inv.liveness_bound_ms = Some(
        t.lease_ms()
            + t.voter_fresh_ms()
            + 2 * t.down_after_ms
            + 4 * (t.election_timeout_ms + t.backoff_max_ms),
    );
    fault(&mut sim, p, &mut pick);
    if let Err(e) = sim.run_until(t0 + 15_000) {
        return Err(Box::new((sim, e)));
    }
    sim.inv.liveness_bound_ms = None;
    sim.heal();
    for i in 0..n {
        sim.restart(i);
    }
    if let Err(e) = sim.run_until(t0 + 35_000) {
        return Err(Box::new((sim, e)));
    }
    if let Err(e) = converged(&sim) {
        return Err(Box::new((sim, e)));
    }
    Ok(sim)
}

fn focused_seeds() -> Vec<u64> {
    sim::seeds_from_env("SIM_FOCUSED_SEEDS", 300)
}

fn world_for(seed: u64) -> World {
    World::random(&mut <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(seed ^ 0x3040))
}

/// A world without loss, duplication, failing persists or slow fences: any
/// election in it is caused by the fault under test.
fn calm_world(seed: u64) -> World {
    World {
        loss: 0.0,
        duplicate: 0.0,
        persist_fail: 0.0,
        fence_ms: (1, 30),
        ..world_for(seed)
    }
}

fn all_focused_seeds_pass(name: &str, world: fn(u64) -> World, fault: Fault) {
    let mut acked = 0;
    for seed in focused_seeds() {
        match run_focused(seed, world(seed), fault) {
            Ok(sim) => acked += sim.acked.len(),
            Err(failure) => {
                let (sim, e) = *failure;
                panic!(
                    "{name}: {e}\nreplay with: SIM_SEED={seed} cargo test -p elector --test simulation {name}\n{}",
                    sim.describe()
                )
            }
        }
    }
    eprintln!("{name}: {acked} acknowledged writes kept");
}

fn first_focused_failure(world: fn(u64) -> World, fault: Fault) -> Option<(u64, String)> {
    (0..100).find_map(|seed| {
        run_focused(seed, world(seed), fault)
            .err()
            .map(|f| (seed, f.1))
    })
}

/// §4.5, §6.10 (conformance `n2-primary-kill` on kevy failed now and
/// then): two nodes, quorum 2. The primary's host dies (elector and data
/// node) while clients write, stays down 2 to 5 s (the survivor alone must
/// not promote), and comes back with its files or empty. On kevy its new
/// process names no stream, so it cannot prove its data and does not
/// stand; its held position may include a tail the survivor never got,
/// which no `WAIT 1` acknowledged. The survivor must then be elected
/// within the liveness bound, with no operator, and keep every
/// acknowledged write; on the Redis-like model and on the kevy model.
#[test]
fn two_nodes_elect_the_survivor_when_the_old_primary_returns_unable_to_prove_its_tail() {
    let fault: Fault = |sim, p, pick| {
        sim.crash(p, true);
        let _ = sim.run_until(sim.now + pick.gen_range(2_000..5_000));
        if pick.gen_bool(0.5) {
            sim.restart_data(p, true);
        }
        sim.restart(p);
    };
    let builds: [(&str, Build); 2] = [
        ("redis", |seed, world, _| {
            Sim::new(seed, 2, world, Faults::default())
        }),
        ("kevy", |seed, world, _| {
            Sim::kevy(seed, 2, 0, world, Faults::default())
        }),
    ];
    focused_seeds_pass_on_each("two_nodes_elect", &builds, world_for, fault);
}

/// Every focused seed of `fault` passes on each backend's cluster
/// (`builds`); a failure names its replay command (`name` filters the test).
fn focused_seeds_pass_on_each(
    name: &str,
    builds: &[(&str, Build)],
    world: fn(u64) -> World,
    fault: Fault,
) {
    for &(backend, build) in builds {
        let mut acked = 0;
        for seed in focused_seeds() {
            match run_focused_in(seed, world(seed), build, fault) {
                Ok(sim) => acked += sim.acked.len(),
                Err(failure) => {
                    let (sim, e) = *failure;
                    panic!(
                        "{name} on {backend}: {e}\nreplay with: SIM_SEED={seed} cargo test -p elector --test simulation {name}\n{}",
                        sim.describe()
                    )
                }
            }
        }
        eprintln!("{name} on {backend}: {acked} acknowledged writes kept");
    }
}

/// Kills the primary of a calm 3-node kevy cluster and returns, per
/// surviving replica, how many full resyncs it took in the 15 s after, its
/// reads timing out while it loads each snapshot (issue 35).
fn full_syncs_after_a_primary_kill(
    seed: u64,
    unread_without_tether: bool,
) -> Result<Vec<u64>, String> {
    let mut sim = Sim::kevy(seed, 3, 0, calm_world(seed), Faults::default());
    sim.unread_without_tether = unread_without_tether;
    sim.kevy_loads_snapshots = true;
    let mut t = 3_000;
    sim.run_until(t)?;
    while sim.primary().is_none() && t < 20_000 {
        t += 500;
        sim.run_until(t)?;
    }
    // Enough data that loading it outlasts a read's timeout.
    t += 2_000;
    sim.run_until(t)?;
    let p = sim.primary().ok_or("no primary before the fault")?;
    let syncs = |sim: &Sim, i: usize| sim.nodes[i].data.kevy.as_ref().map_or(0, |k| k.full_syncs);
    let before: Vec<u64> = (0..3).map(|i| syncs(&sim, i)).collect();
    sim.crash(p, true);
    sim.run_until(t + 15_000)?;
    let q = sim.primary().ok_or("no primary after the kill")?;
    Ok((0..3)
        .filter(|&i| i != p && i != q)
        .map(|i| syncs(&sim, i) - before[i])
        .collect())
}

/// Issue 35, §6.8: a kevy replica that took the new primary's snapshot
/// and is loading it answers no read in time; its tether shows the same
/// process, which the driver left following, so it is not fenced blind
/// and loads once: exactly one full resync per surviving replica.
#[test]
fn a_kevy_replica_loading_a_snapshot_after_a_failover_full_syncs_once() {
    for seed in sim::seeds_from_env("SIM_LOADING_SEEDS", 40) {
        let syncs = full_syncs_after_a_primary_kill(seed, false)
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        assert_eq!(
            syncs,
            vec![1],
            "seed {seed}: full resyncs of the surviving replica"
        );
    }
}

/// The control: an executor that drops the tether's answer on a failed
/// read (the adapter before issue 35) fences the loading replica blind at
/// every poll, and each blind fence, run once the load is in, restarts its
/// sync: it full-syncs again and again, and in the calm model no replica
/// is ever ready to take over (no primary after the kill).
#[test]
fn without_the_tether_on_a_failed_read_a_loading_replica_full_syncs_again() {
    let caught = (0..10).find_map(|seed| match full_syncs_after_a_primary_kill(seed, true) {
        Ok(syncs) if syncs.iter().all(|&n| n <= 1) => None,
        other => Some((seed, other)),
    });
    let (seed, outcome) = caught.expect("every seed synced once without the tether's answer");
    eprintln!("seed {seed}: {outcome:?}");
}

/// Finding 1 (§6.8): the primary's data node dies and comes back (with its
/// data or empty) under a running elector. It must never be made writable
/// again without a new election, and an empty one never wins.
#[test]
fn a_primary_data_node_that_restarts_empty_is_never_made_writable_again() {
    all_focused_seeds_pass(
        "a_primary_data_node_that_restarts_empty_is_never_made_writable_again",
        world_for,
        |sim, p, pick| {
            let lose = pick.gen_bool(0.7);
            sim.restart_data(p, lose);
        },
    );
}

/// Finding 2 (§5.2.1): the primary's disk fails for good. It must fence
/// although its persists fail, and the others elect while it lasts.
#[test]
fn a_new_primary_whose_disk_fails_fences_before_anyone_else_takes_writes() {
    all_focused_seeds_pass(
        "a_new_primary_whose_disk_fails_fences_before_anyone_else_takes_writes",
        world_for,
        // The old primary is cut off; the disk of whoever wins next breaks
        // the moment it is elected, so its first persist as primary (the
        // stream epoch, §4.3) fails while its data node is writable.
        |sim, p, pick| {
            sim.break_disk_on_promotion = Some(8_000);
            isolate_primary(sim, p, pick);
        },
    );
}

/// Finding 3 (§6.4.1): the primary's elector is stopped or killed while
/// its data node keeps serving. The watchdog fences the data node within
/// the lease, before a successor can take writes.
#[test]
fn a_stopped_or_dead_primary_elector_has_its_data_node_fenced_by_the_watchdog() {
    all_focused_seeds_pass(
        "a_stopped_or_dead_primary_elector_has_its_data_node_fenced_by_the_watchdog",
        world_for,
        |sim, p, pick| {
            if pick.gen_bool(0.5) {
                sim.pause_elector(p, 12_000);
            } else {
                sim.crash_elector(p);
            }
        },
    );
}

/// Without the dead-man switch the same fault leaves two writable data
/// nodes: the invariants see it (so the test above can fail).
#[test]
fn without_the_watchdog_a_stopped_primary_elector_is_caught_by_the_invariants() {
    let found = first_focused_failure(
        |seed| World {
            watchdog: false,
            ..world_for(seed)
        },
        |sim, p, _| sim.pause_elector(p, 12_000),
    );
    let (seed, e) = found.expect("no seed exposed a stopped elector without the watchdog");
    eprintln!("seed {seed}: {e}");
}

/// Composed faults (found by seeds 1157 and 4886 of the random schedules
/// once the simulator ran the real adapter; the schedule fails the same way
/// on the code before): the primary is cut off from its quorum, then its
/// elector freezes or dies before its lease ends. Counting a lease of
/// silence from the freeze outlasted the real lease, and the majority's
/// successor with it; the watchdog now fences at the end of the lease the
/// elector last reported (§6.4.1).
#[test]
fn a_cut_off_primary_whose_elector_then_stops_is_fenced_when_its_lease_ends() {
    all_focused_seeds_pass(
        "a_cut_off_primary_whose_elector_then_stops_is_fenced_when_its_lease_ends",
        world_for,
        isolate_then_stop_elector,
    );
}

/// The control: with a watchdog that only counts silence, the same faults
/// leave two writable data nodes, and the invariants see it.
#[test]
fn counting_the_watchdog_lease_from_the_freeze_is_caught_by_the_invariants() {
    let found = first_focused_failure(
        |seed| World {
            watchdog_knows_lease: false,
            ..calm_world(seed)
        },
        isolate_then_stop_elector,
    );
    let (seed, e) = found.expect("no seed exposed a watchdog blind to the lease");
    eprintln!("seed {seed}: {e}");
}

fn isolate_then_stop_elector(sim: &mut Sim, p: usize, pick: &mut rand::rngs::StdRng) {
    isolate_primary(sim, p, pick);
    let lease = sim.timings.lease_ms();
    // A violation meanwhile stays recorded and fails the run.
    let _ = sim.run_until(sim.now + pick.gen_range(lease / 4..lease * 3 / 4));
    if pick.gen_bool(0.5) {
        sim.crash_elector(p);
    } else {
        sim.pause_elector(p, 12_000);
    }
}

/// Parts failing alone, in quick succession (§6.4.1, §6.8): the primary's
/// elector dies and is started again (by systemd or the entrypoint) before
/// the watchdog acts, while its data node kept taking writes and fences are
/// slow. The new elector's adapter starts afresh, so it neither votes nor
/// stands until its start-up clamp has really applied; no acknowledged
/// write is lost. (The simulator's old hand-written adapter kept the dead
/// one's applied target and lost writes here.)
#[test]
fn a_primary_elector_restarted_before_the_watchdog_acts_loses_no_acknowledged_write() {
    all_focused_seeds_pass(
        "a_primary_elector_restarted_before_the_watchdog_acts_loses_no_acknowledged_write",
        |seed| World {
            fence_ms: (1, 500),
            ..world_for(seed)
        },
        |sim, p, pick| {
            sim.crash_elector(p);
            let _ = sim.run_until(sim.now + pick.gen_range(100..1_200));
            sim.restart(p);
        },
    );
}

/// Finding 4 (§6.4.1): a fence lifted by hand on a fenced node is seen on
/// the next poll and put back.
#[test]
fn a_fence_lifted_by_hand_is_put_back_on_the_next_poll() {
    all_focused_seeds_pass(
        "a_fence_lifted_by_hand_is_put_back_on_the_next_poll",
        world_for,
        |sim, p, pick| {
            let n = sim.nodes.len();
            let replica = (p + 1 + pick.gen_range(0..n - 1)) % n;
            sim.lift_fence_by_hand(replica);
        },
    );
}

/// §6.4.1: the watchdog clamps a healthy primary's data node (its probe of
/// the elector timed out on a loaded host). The same process holds the same
/// data, so this costs no election: the primary re-issues its target, keeps
/// its epoch, and takes acknowledged writes again. (Before, the adapter took
/// the demotion for a restart and the primary resigned: a 2 % loss soak
/// failed over.) The invariants are checked after every event as always.
#[test]
fn a_watchdog_false_alarm_on_a_healthy_primary_costs_no_election() {
    for seed in focused_seeds().into_iter().take(100) {
        let mut sim = Sim::new(seed, 3, calm_world(seed), Faults::default());
        let fail = |sim: &Sim, e: String| -> ! {
            panic!(
                "{e}\nreplay with: SIM_SEED={seed} cargo test -p elector --test simulation a_watchdog_false_alarm\n{}",
                sim.describe()
            )
        };
        if let Err(e) = sim.run_until(4_000) {
            fail(&sim, e);
        }
        let Some(p) = sim.primary() else {
            fail(&sim, "no primary before the fault".into())
        };
        let epoch = sim.nodes[p].core.as_ref().map(|c| c.epoch());
        sim.watchdog_clamp(p);
        if let Err(e) = sim.run_until(9_000) {
            fail(&sim, e);
        }
        let after = sim.nodes[p].core.as_ref().map(|c| c.epoch());
        if sim.primary() != Some(p) || after != epoch {
            fail(&sim, format!("the false alarm moved the primary: {p} epoch {epoch:?} -> {:?} epoch {after:?}", sim.primary()));
        }
        if !sim.acked.iter().any(|w| w.at > 4_500) {
            fail(&sim, "no acknowledged write after the false alarm".into());
        }
    }
}

/// Finding 6: a rolling change raises `down_after` on the primary first.
/// Restarted with the new timings it wins again and, cut off, holds a lease
/// longer than its peers' refusal window. Returns the first violation over
/// `seeds` (the invariants are checked after every event).
fn rolling_timing_change(fingerprint_check: bool, seeds: u64) -> Option<(u64, String)> {
    (0..seeds).find_map(|seed| {
        let world = World {
            fingerprint_check,
            ..calm_world(seed)
        };
        let mut sim = Sim::new(seed, 3, world, Faults::default());
        let step = |sim: &mut Sim, until: u64| sim.run_until(until).err();
        if let Some(e) = step(&mut sim, 4_000) {
            return Some((seed, e));
        }
        let p = sim.primary()?;
        let raised = elector::core::Timings {
            down_after_ms: sim.timings.down_after_ms * 3,
            ..sim.timings
        };
        sim.reconfigure(p, raised);
        if let Some(e) = step(&mut sim, 9_000) {
            return Some((seed, e));
        }
        // Whoever is primary now is cut off from the others.
        let q = sim.primary()?;
        for j in 0..sim.nodes.len() {
            if j != q {
                sim.blocked[q][j] = true;
                sim.blocked[j][q] = true;
            }
        }
        if let Some(e) = step(&mut sim, 20_000) {
            return Some((seed, e));
        }
        // The rolling change completes; the cluster is whole again.
        sim.heal();
        for j in 0..sim.nodes.len() {
            if sim.nodes[j].timings_override.is_none() {
                sim.reconfigure(j, raised);
            }
        }
        if let Some(e) = step(&mut sim, 40_000) {
            return Some((seed, e));
        }
        sim.primary()
            .is_none()
            .then(|| (seed, "no primary after the rolling change".into()))
    })
}

/// Without the check the simulator shows finding 6: two writable primaries.
#[test]
fn without_the_fingerprint_check_a_rolling_timing_change_overlaps_two_primaries() {
    let (seed, e) = rolling_timing_change(false, 100)
        .expect("no seed showed the overlap: the reproduction of finding 6 is broken");
    eprintln!("seed {seed}: {e}");
    assert!(e.contains("writable"), "seed {seed}: {e}");
}

/// With it (nodes whose lease terms differ refuse each other's `HELLO`), the
/// reconfigured node is on its own until a majority shares its terms: never
/// two writable primaries, and a primary once the change is complete.
#[test]
fn a_rolling_timing_change_never_overlaps_primaries_when_mismatched_peers_refuse_each_other() {
    if let Some((seed, e)) = rolling_timing_change(true, 100) {
        panic!("seed {seed}: {e}");
    }
}

/// Finding 8 (§3.6): with auth off, forged frames in a peer's name claim
/// epochs far beyond anything known (a heartbeat's `max_epoch`, an ANNOUNCE
/// that would be persisted). They are dropped: the invariants hold, a
/// majority keeps electing while they arrive, and the cluster converges.
#[test]
fn forged_frames_with_huge_epochs_neither_wedge_elections_nor_persist() {
    use elector::protocol::{Heartbeat, Message, Role as WireRole, MAX_EPOCH};
    all_focused_seeds_pass(
        "forged_frames_with_huge_epochs_neither_wedge_elections_nor_persist",
        world_for,
        |sim, p, pick| {
            let n = sim.nodes.len();
            for k in 0..20 {
                let from = pick.gen_range(0..n);
                let to = (from + 1 + pick.gen_range(0..n - 1)) % n;
                let huge = [MAX_EPOCH, MAX_EPOCH - 1, 1 << 40][k % 3];
                let msg = if k % 2 == 0 {
                    Message::Hb(Heartbeat {
                        epoch: huge,
                        node_id: sim.ids[from].clone(),
                        role: WireRole::Primary,
                        offset: u64::MAX >> 2,
                        max_epoch: huge,
                        primary: Some(sim.ids[from].clone()),
                        eligible: true,
                        fenced: false,
                        lease_lost: false,
                        data_epoch: huge,
                        stamp: 1,
                        echo: 0,
                        priority: 100,
                        floor: Some((huge, 1)),
                        unled: false,
                    })
                } else {
                    Message::Announce {
                        epoch: huge,
                        primary: sim.ids[from].clone(),
                        primary_addr: format!("{}:6379", sim.ids[from]),
                        stamp: 1,
                    }
                };
                sim.deliver_after(from, to, msg, pick.gen_range(0..8_000));
            }
            // A real fault as well, so an election must happen meanwhile.
            isolate_primary(sim, p, pick);
        },
    );
}

/// Finding 5 (§6.9): the primary can send but not receive. It fences when
/// its lease runs out; the others, who still hear it, must stop counting it
/// as alive and elect while the fault lasts.
#[test]
fn a_primary_that_can_send_but_not_receive_is_replaced_while_the_fault_lasts() {
    all_focused_seeds_pass(
        "a_primary_that_can_send_but_not_receive_is_replaced_while_the_fault_lasts",
        world_for,
        |sim, p, _| {
            for j in 0..sim.nodes.len() {
                if j != p {
                    sim.blocked[j][p] = true;
                }
            }
        },
    );
}

/// Finding 7 (§6.2.1): the old primary's fence takes a whole second (a
/// command running into the data node's timeout) while it is cut off. With
/// the margin configured to cover it, no successor takes writes before the
/// fence is in force.
#[test]
fn a_slow_fence_within_the_margin_never_overlaps_a_successor() {
    all_focused_seeds_pass(
        "a_slow_fence_within_the_margin_never_overlaps_a_successor",
        |seed| World {
            margin_override: Some(1_050),
            fence_ms: (1, 30),
            ..world_for(seed)
        },
        isolate_primary_with_a_slow_fence,
    );
}

/// The same slow fence with the old margin of a single heartbeat: caught.
#[test]
fn a_slow_fence_without_a_margin_is_caught_by_the_invariants() {
    let found = first_focused_failure(
        |seed| World {
            margin_override: Some(0),
            fence_ms: (1, 30),
            ..world_for(seed)
        },
        isolate_primary_with_a_slow_fence,
    );
    let (seed, e) = found.expect("no seed exposed a slow fence without a margin");
    eprintln!("seed {seed}: {e}");
}

fn isolate_primary_with_a_slow_fence(sim: &mut Sim, p: usize, pick: &mut rand::rngs::StdRng) {
    sim.nodes[p].slow_fence_ms = Some(1_000);
    isolate_primary(sim, p, pick);
}

fn isolate_primary(sim: &mut Sim, p: usize, _: &mut rand::rngs::StdRng) {
    for j in 0..sim.nodes.len() {
        if j != p {
            sim.blocked[j][p] = true;
            sim.blocked[p][j] = true;
        }
    }
}

/// Issue 34, protocol §6.10 (found by the Ansible rehearsal): every
/// elector stopped cleanly at once (each fences its data node first, as on
/// SIGTERM) and started again, the data nodes running with their data.
/// With the liveness check on, a primary must follow within the bound,
/// holding every acknowledged write.
fn stop_and_start_every_elector(sim: &mut Sim, _: usize, pick: &mut rand::rngs::StdRng) {
    let n = sim.nodes.len();
    for i in 0..n {
        sim.stop_elector_fencing(i);
    }
    // The new processes start a moment later (a package upgrade, a
    // restart by the service manager).
    let _ = sim.run_until(sim.now + pick.gen_range(20..2_000));
    for i in 0..n {
        sim.restart(i);
    }
}

fn kevy_three_or_five(seed: u64, world: World, pick: &mut rand::rngs::StdRng) -> Sim {
    let n = if pick.gen_bool(0.6) { 3 } else { 5 };
    Sim::kevy(seed, n, 0, world, Faults::default())
}

fn kevy_three_or_five_without_marks(seed: u64, world: World, pick: &mut rand::rngs::StdRng) -> Sim {
    let mut sim = kevy_three_or_five(seed, world, pick);
    sim.kevy_without_marks = true;
    sim
}

#[test]
fn every_elector_stopped_and_started_at_once_elects_again_with_every_acknowledged_write() {
    let builds: [(&str, Build); 2] = [("redis", three_or_five), ("kevy", kevy_three_or_five)];
    focused_seeds_pass_on_each(
        "every_elector_stopped_and_started_at_once",
        &builds,
        calm_world,
        stop_and_start_every_elector,
    );
}

/// Every elector killed at once (SIGKILL, an OOM kill of the service's
/// cgroup: no stop fence), silent long enough that each watchdog clamps
/// its data node (§6.4.1), then started again. On kevy the replicas were
/// detached by the watchdog, whose pipeline wrote each one's position to
/// the shared file under the watchdog's own process mark: the restarted
/// electors prove those positions by that mark (§6.10) and elect again,
/// holding every acknowledged write.
fn kill_every_elector_until_the_watchdogs_clamp(
    sim: &mut Sim,
    _: usize,
    pick: &mut rand::rngs::StdRng,
) {
    kill_every_elector_and_wait_for_the_watchdogs(sim, pick);
    let _ = sim.run_until(sim.now + pick.gen_range(20..2_000));
    start_every_elector(sim);
}

/// Every elector crashed, and time enough for every watchdog to clamp
/// (the lease, then a probe).
fn kill_every_elector_and_wait_for_the_watchdogs(sim: &mut Sim, pick: &mut rand::rngs::StdRng) {
    for i in 0..sim.nodes.len() {
        sim.crash_elector(i);
    }
    let clamped = sim.timings.lease_ms() + 2 * sim.timings.hb_interval_ms;
    let _ = sim.run_until(sim.now + clamped + pick.gen_range(0..500));
}

fn start_every_elector(sim: &mut Sim) {
    for i in 0..sim.nodes.len() {
        sim.restart(i);
    }
}

/// [`kill_every_elector_until_the_watchdogs_clamp`], and meanwhile the old
/// primary's data node restarts empty: only the replicas' positions, which
/// their watchdogs captured, can prove that nothing acknowledged is lost.
fn kill_every_elector_and_empty_the_primary(
    sim: &mut Sim,
    p: usize,
    pick: &mut rand::rngs::StdRng,
) {
    kill_every_elector_and_wait_for_the_watchdogs(sim, pick);
    sim.restart_data(p, true);
    let _ = sim.run_until(sim.now + pick.gen_range(20..1_000));
    start_every_elector(sim);
}

#[test]
fn every_elector_killed_with_its_old_primary_emptied_elects_a_replica_the_watchdog_captured() {
    let builds: [(&str, Build); 2] = [("redis", three_or_five), ("kevy", kevy_three_or_five)];
    focused_seeds_pass_on_each(
        "every_elector_killed_with_its_old_primary_emptied",
        &builds,
        calm_world,
        kill_every_elector_and_empty_the_primary,
    );
}

#[test]
fn every_elector_killed_and_started_after_the_watchdogs_clamped_elects_again_with_every_acknowledged_write(
) {
    let builds: [(&str, Build); 2] = [("redis", three_or_five), ("kevy", kevy_three_or_five)];
    focused_seeds_pass_on_each(
        "every_elector_killed_and_started_after_the_watchdogs_clamped",
        &builds,
        calm_world,
        kill_every_elector_until_the_watchdogs_clamp,
    );
}

/// The control: kevy without process marks (the rules before them) waits
/// for an operator when every elector restarts at once; the checks must
/// say so, or the test above could not fail.
#[test]
fn without_process_marks_every_kevy_elector_restarted_at_once_is_caught_by_the_liveness_check() {
    let found = (0..50).find_map(|seed| {
        run_focused_in(
            seed,
            calm_world(seed),
            kevy_three_or_five_without_marks,
            stop_and_start_every_elector,
        )
        .err()
        .map(|f| (seed, f.1))
    });
    let (seed, e) = found.expect("no seed exposed kevy without process marks");
    // Nodes below their floor count as unhealthy for the liveness check:
    // the final convergence check is what says it.
    assert!(
        e.contains("liveness") || e.contains("0 primaries"),
        "seed {seed}: {e}"
    );
    eprintln!("seed {seed}: {e}");
}

/// Issue 34 (f), protocol §5.2: the replica that acknowledged the latest
/// writes (the other one's data node stalled meanwhile) loses its elector
/// with its state file just as the primary's host crashes; once the others
/// no longer name that primary, the operator starts it with
/// `--reset-state`. Its data node still holds those writes, its floor is
/// gone: it must sit out, so nothing is elected without them until the old
/// primary is back (or, where that cannot prove its position, the operator
/// accepts a loss on a holder). Reset while a peer still named the old
/// primary, a fresh state would set out to follow it and its unclaimed
/// join would guard the writes; the model's first draft did that, and
/// showed nothing.
fn reset_the_acknowledging_replica_while_the_primary_is_down(
    sim: &mut Sim,
    p: usize,
    pick: &mut rand::rngs::StdRng,
) {
    let replicas: Vec<usize> = (0..sim.data_members()).filter(|&i| i != p).collect();
    let lagging = replicas[pick.gen_range(0..replicas.len())];
    let holder = replicas
        .iter()
        .copied()
        .find(|&i| i != lagging)
        .expect("3 nodes");
    sim.stall_data(lagging, pick.gen_range(2_500..4_000));
    let _ = sim.run_until(sim.now + pick.gen_range(600..1_200));
    sim.crash(p, true);
    sim.crash_elector(holder);
    let forgotten = sim.timings.down_after_ms + pick.gen_range(500..2_000);
    let _ = sim.run_until(sim.now + forgotten);
    sim.lose_state_and_reset(holder);
    let _ = sim.run_until(sim.now + pick.gen_range(3_000..6_000));
    sim.restart(p);
    let _ = sim.run_until(sim.now + 4_000);
    sim.play_the_operator();
}

fn three_nodes(seed: u64, world: World, _: &mut rand::rngs::StdRng) -> Sim {
    Sim::new(seed, 3, world, Faults::default())
}

fn kevy_three_nodes(seed: u64, world: World, _: &mut rand::rngs::StdRng) -> Sim {
    Sim::kevy(seed, 3, 0, world, Faults::default())
}

#[test]
fn a_replica_reset_while_the_primary_is_down_helps_elect_nobody_without_what_it_acknowledged() {
    let builds: [(&str, Build); 2] = [("redis", three_nodes), ("kevy", kevy_three_nodes)];
    focused_seeds_pass_on_each(
        "a_replica_reset_while_the_primary_is_down",
        &builds,
        calm_world,
        reset_the_acknowledging_replica_while_the_primary_is_down,
    );
}

/// The control: a reset that starts from a fresh state (the rule before
/// `PersistedState::after_state_loss`) votes `(0, 0)`, for the lagging
/// replica; the checks must find the acknowledged writes lost, or the test
/// above could not fail.
#[test]
fn a_replica_reset_as_a_fresh_node_is_caught_losing_acknowledged_writes() {
    fn fresh(seed: u64, world: World, pick: &mut rand::rngs::StdRng) -> Sim {
        let mut sim = three_nodes(seed, world, pick);
        sim.reset_as_fresh = true;
        sim
    }
    let found = (0..100).find_map(|seed| {
        run_focused_in(
            seed,
            calm_world(seed),
            fresh,
            reset_the_acknowledging_replica_while_the_primary_is_down,
        )
        .err()
        .map(|f| (seed, f.1))
        .filter(|(_, e)| e.contains("without acknowledged write"))
    });
    let (seed, e) = found.expect("no seed showed a reset as a fresh node losing a write");
    eprintln!("seed {seed}: {e}");
}

/// The control of seed 373 (§6.10, "The joined stream's source"): with the joined primary's offer judged against what the
/// unclaimed join read, two kevy nodes elect nobody after the final heal.
#[test]
fn counting_the_joined_sources_offer_against_the_join_leaves_two_kevy_nodes_without_a_primary() {
    let faults = Faults {
        count_the_joined_sources_offer_against_the_join: true,
        ..Faults::default()
    };
    for seed in TWO_NODE_REGRESSION_SEEDS {
        let pick = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(seed ^ 0x2002);
        let Err(failure) = run_schedule_on(*seed, (2, 0), faults, pick, None, true) else {
            panic!("seed {seed} elected with the join counted against its source");
        };
        assert!(
            failure.1.contains("0 primaries"),
            "seed {seed} failed otherwise: {}",
            failure.1
        );
    }
}

/// The control of §6.10 "The joining process's own reading" (a liveness
/// control): with the reading of the very process a join was set out from
/// counted unproven, a kevy schedule that now elects on its own calls the
/// operator instead (found by the chaos run, kevy, five nodes, seed 7;
/// seeds 18, 21 and 24 of the simulator's kevy schedules when written). A
/// change of timing moves such a schedule to other seeds, so the control
/// looks for one, those first.
#[test]
fn doubting_the_joining_process_calls_the_operator_where_the_rule_elects() {
    let doubting = Faults {
        doubt_the_joining_process: true,
        ..Faults::default()
    };
    let operator_calls = |seed, faults| {
        run_kevy_schedule(seed, faults, |_| {})
            .1
            .ok()
            .map(|sim| sim.operator_interventions)
    };
    let found = [18, 21, 24].into_iter().chain(0..3_000).find(|&seed| {
        operator_calls(seed, Faults::default()) == Some(0)
            && operator_calls(seed, doubting).is_some_and(|n| n > 0)
    });
    let seed =
        found.expect("no kevy schedule shows the joining process's reading sparing the operator");
    eprintln!("doubt_the_joining_process calls the operator in kevy seed {seed}");
}
