//! Seeded simulation of whole clusters under faults (docs/protocol.md §9).
//!
//! `cargo test -p elector --test simulation` runs `SIM_SEEDS` (default 1500)
//! random schedules; a failure prints its seed, and `SIM_SEED=<n>` replays
//! exactly that one.

mod sim;

use elector::core::Faults;
use elector::protocol::Role;
use rand::Rng;
use sim::{Sim, World};

const RUN_MS: u64 = 30_000;
const SETTLE_MS: u64 = 20_000;

/// One random schedule: partitions (one-way included), crashes of the
/// elector alone or the whole node, restarts, pauses, planned switchovers
/// (which then race every other fault); then everything heals
/// and the cluster must converge on exactly one primary.
/// On failure: the simulation (boxed: it is large) and what went wrong.
type Failure = Box<(Sim, String)>;

fn run_schedule(seed: u64, faults: Faults) -> Result<Sim, Failure> {
    let mut pick = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(seed);
    let n = if pick.gen_bool(0.6) { 3 } else { 5 };
    let world = World::random(&mut pick);
    let mut sim = Sim::new(seed, n, world, faults);
    let mut t = 0;
    while t < RUN_MS {
        t += pick.gen_range(300..3_000);
        if let Err(e) = sim.run_until(t) {
            return Err(Box::new((sim, e)));
        }
        let victim = pick.gen_range(0..n);
        let fault = pick.gen_range(0..11);
        if std::env::var_os("SIM_TRACE").is_some() {
            eprintln!("{t:>6} FAULT {fault} victim=n{}", victim + 1);
        }
        match fault {
            0 | 1 => sim.heal(),
            2 => {
                // Isolate one node both ways.
                for j in 0..n {
                    if j != victim {
                        sim.blocked[victim][j] = true;
                        sim.blocked[j][victim] = true;
                    }
                }
            }
            3 => {
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
            4 => {
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
            5 => sim.crash(victim, false),
            6 => sim.crash(victim, true),
            7 => sim.restart(victim),
            8 => {
                let ms = pick.gen_range(200..2_500);
                sim.pause(victim, ms);
            }
            9 => sim.request_switchover(victim, pick.gen_range(300..3_000)),
            _ => {
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
        }
    }
    sim.heal();
    for i in 0..n {
        sim.restart(i);
    }
    if let Err(e) = sim.run_until(RUN_MS + SETTLE_MS) {
        return Err(Box::new((sim, e)));
    }
    if let Err(e) = converged(&sim) {
        return Err(Box::new((sim, e)));
    }
    Ok(sim)
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
    if let Ok(one) = std::env::var("SIM_SEED") {
        return vec![one.parse().expect("SIM_SEED is a number")];
    }
    let count: u64 = std::env::var("SIM_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1500);
    (0..count).collect()
}

#[test]
fn random_fault_schedules_keep_every_invariant_and_converge_after_healing() {
    let mut events = 0;
    let mut worst_overlap = 0;
    let mut acked = 0;
    for seed in seeds() {
        match run_schedule(seed, Faults::default()) {
            Ok(sim) => {
                events += sim.events_handled;
                worst_overlap = worst_overlap.max(sim.inv.longest_overlap_ms);
                acked += sim.acked.len();
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
    eprintln!("simulated {events} events; {acked} acknowledged writes kept; longest writable overlap {worst_overlap} ms");
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
