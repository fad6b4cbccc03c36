//! The chaos generator: a seeded random schedule of composed faults, written
//! as an ordinary scenario (so `run --file F` replays it).
//!
//! A schedule is bursts and quiet phases. A burst starts faults drawn from the
//! whole vocabulary the containers can inject (`faults::FaultKind`), each
//! lasting shorter than, about as long as, or much longer than `down_after`;
//! the next fault usually starts before the last one ends, so faults overlap.
//! Each fault's end is its own step (`restart`, `unpause`, `thaw`, `heal`,
//! `clear_netem`) at the drawn time. Then `quiet` heals whatever is left and
//! lets the cluster run long enough for the liveness bound.

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use faults::FaultKind;

use crate::scenario::{
    BridgeSpec, Dur, Expect, NetemSpec, OneWaySpec, PauseSpec, RestartDataSpec, Scenario, Step,
    SwitchoverSpec, Targets, Timings, Workload,
};

/// The kinds a burst draws from: every kind the containers inject but
/// `heal` (the ends and the quiet phases heal).
pub fn drawn_kinds() -> Vec<FaultKind> {
    FaultKind::ALL
        .into_iter()
        .filter(|k| k.in_containers() && *k != FaultKind::Heal)
        .collect()
}

/// What to generate.
#[derive(Clone, Debug)]
pub struct Plan {
    pub seed: u64,
    pub nodes: usize,
    /// Time spent in bursts and quiet phases (the schedule's length).
    pub duration_ms: u64,
    pub backend: String,
    pub timings: Timings,
    /// Length of each quiet phase.
    pub quiet_ms: u64,
}

/// A step at a time offset from the start of the faults.
struct Timed {
    at: u64,
    order: usize,
    step: Step,
    /// The fault this step starts (ends and quiet phases start none), and
    /// whether an earlier fault is still in force then.
    starts: Option<(FaultKind, bool)>,
}

/// A generated schedule.
#[derive(Clone, Debug)]
pub struct Generated {
    pub scenario: Scenario,
    /// Per scenario step: the fault it starts, if any, and whether it
    /// overlaps an earlier one.
    pub starts: Vec<Option<(FaultKind, bool)>>,
    /// Faults that start while an earlier one is still in force.
    pub overlapping: usize,
}

fn one(s: &str) -> Targets {
    Targets::One(s.to_string())
}

/// The kevy adapter's quiesce limit (`datanode/kevy_quiesce.rs`,
/// `FENCE_QUIESCE_MAX`): a third of the data-node stalls outlast it.
const QUIESCE_LIMIT_MS: u64 = 60_000;

/// How long a fault of `kind` lasts: [`fault_ms`], except that a third of
/// the data-node stalls outlast the kevy quiesce limit (issue 34 (b)).
fn duration_ms(rng: &mut StdRng, kind: FaultKind, down_after: u64) -> u64 {
    if kind == FaultKind::StallData && rng.gen_ratio(1, 3) {
        rng.gen_range(QUIESCE_LIMIT_MS + 1_000..=QUIESCE_LIMIT_MS + 10_000)
    } else {
        fault_ms(rng, down_after)
    }
}

/// A fault duration around `down_after`: shorter, about equal, or much longer.
fn fault_ms(rng: &mut StdRng, down_after: u64) -> u64 {
    let f = match rng.gen_range(0..3) {
        0 => rng.gen_range(0.2..0.8),
        1 => rng.gen_range(0.9..1.2),
        _ => rng.gen_range(2.5..8.0),
    };
    (down_after as f64 * f) as u64
}

/// The node a fault hits: the primary (resolved when the step runs) about
/// half the time, otherwise a named node.
fn victim(rng: &mut StdRng, ids: &[String]) -> String {
    if rng.gen_bool(0.5) {
        "primary".into()
    } else {
        ids.choose(rng).expect("nodes").clone()
    }
}

/// The end step for a fault that lasts, with the token it ended on.
fn end_of(kind: FaultKind, who: &str) -> Option<Step> {
    // A fault aimed at "primary" ends on whatever nodes it hit: the primary
    // may have changed by the time it ends.
    let t = || {
        if who == "primary" {
            one("all")
        } else {
            one(who)
        }
    };
    let restart = || {
        if who == "primary" {
            one("down")
        } else {
            one(who)
        }
    };
    Some(match kind {
        FaultKind::Kill | FaultKind::KillElector | FaultKind::StopElector => {
            Step::Restart(restart())
        }
        FaultKind::Pause => Step::Unpause(t()),
        FaultKind::FreezeElector | FaultKind::ReadOnlyState | FaultKind::StallData => {
            Step::Thaw(t())
        }
        FaultKind::Isolate | FaultKind::Split | FaultKind::Bridge | FaultKind::OneWay => Step::Heal,
        FaultKind::Netem => Step::ClearNetem,
        _ => return None,
    })
}

/// The step that starts one fault of `kind`.
fn start_of(kind: FaultKind, rng: &mut StdRng, ids: &[String], who: &str) -> Step {
    let n = ids.len();
    match kind {
        FaultKind::Kill => Step::Kill(one(who)),
        FaultKind::Restart => Step::Restart(one(who)),
        FaultKind::KillElector => Step::KillElector(one(who)),
        FaultKind::StopElector => Step::StopElector(one(who)),
        FaultKind::KillData => Step::KillData(one(who)),
        FaultKind::RestartData => {
            // With its files, empty, or from the files the burst's
            // `copy_data` kept; half of them fast (0-100 ms, faster than
            // kevy's own reconnect), the rest after the container's gap.
            let files = rng.gen_range(0..3);
            let gap_ms = rng.gen_bool(0.5).then(|| rng.gen_range(0..=100));
            Step::RestartData(RestartDataSpec {
                on: one(who),
                lose_data: files == 1,
                older: files == 2,
                gap_ms,
            })
        }
        FaultKind::StallData => Step::StallData(PauseSpec {
            targets: one(who),
            duration: None,
        }),
        FaultKind::FreezeElector => Step::FreezeElector(PauseSpec {
            targets: one(who),
            duration: None,
        }),
        FaultKind::ReadOnlyState => Step::ReadOnlyState(PauseSpec {
            targets: one(who),
            duration: None,
        }),
        FaultKind::Pause => Step::Pause(PauseSpec {
            targets: one(who),
            duration: None,
        }),
        FaultKind::Isolate => Step::Isolate(one(who)),
        FaultKind::Split => {
            // A minority of 1 ..= (n-1)/2 nodes, with the primary or without.
            let size = rng.gen_range(1..=(n - 1) / 2);
            let mut side: Vec<String> = if rng.gen_bool(0.5) {
                vec!["primary".into()]
            } else {
                vec![]
            };
            let mut pool = ids.to_vec();
            pool.shuffle(rng);
            while side.len() < size {
                side.push(pool.pop().expect("nodes"));
            }
            Step::Split(vec![Targets::Many(side), one("others")])
        }
        FaultKind::Bridge => {
            let mut pool = ids.to_vec();
            pool.shuffle(rng);
            let middle = pool.pop().expect("nodes");
            let cut = rng.gen_range(1..pool.len());
            let right = pool.split_off(cut);
            Step::Bridge(BridgeSpec {
                left: Targets::Many(pool),
                middle,
                right: Targets::Many(right),
            })
        }
        FaultKind::OneWay => Step::OneWay(OneWaySpec {
            from: one(who),
            to: one("others"),
        }),
        FaultKind::Netem => Step::Netem(NetemSpec {
            targets: if rng.gen_bool(0.5) {
                one("all")
            } else {
                one(who)
            },
            delay_ms: rng.gen_range(0..40),
            jitter_ms: rng.gen_range(0..10),
            loss_pct: f64::from(rng.gen_range(1..=8u8)),
        }),
        FaultKind::LiftFence => Step::LiftFence(one(who)),
        FaultKind::Switchover => Step::Switchover(SwitchoverSpec {
            to: ids.choose(rng).expect("nodes").clone(),
            timeout_ms: None,
        }),
        FaultKind::Heal => Step::Heal,
    }
}

/// The schedule for `plan`, as a scenario: wait for a primary, start the
/// writers, then bursts and quiet phases until the duration is used up.
pub fn generate(plan: &Plan) -> Generated {
    let mut rng = StdRng::seed_from_u64(plan.seed ^ (plan.nodes as u64).wrapping_mul(0x9e37));
    let ids: Vec<String> = (1..=plan.nodes).map(|i| format!("n{i}")).collect();
    let down_after = plan.timings.down_after_ms;
    let kinds = drawn_kinds();
    let mut timed: Vec<Timed> = vec![];
    let push = |timed: &mut Vec<Timed>, at: u64, step: Step, starts: Option<(FaultKind, bool)>| {
        let order = timed.len();
        timed.push(Timed {
            at,
            order,
            step,
            starts,
        });
    };
    let mut overlapping = 0;
    let mut t = 0u64;
    while t < plan.duration_ms {
        // One burst: 2 ..= 5 faults; each next one starts after a gap
        // shorter than the faults themselves, so most overlap.
        let mut burst_end = t;
        let mut in_force_until = t;
        // Every node's files as they are now: a `restart_data` from older
        // files in this burst comes back without what was acknowledged since.
        push(&mut timed, t, Step::CopyData(one("all")), None);
        for _ in 0..rng.gen_range(2..=5) {
            let kind = *kinds.choose(&mut rng).expect("kinds");
            let who = victim(&mut rng, &ids);
            let overlaps = t < in_force_until;
            overlapping += usize::from(overlaps);
            let step = start_of(kind, &mut rng, &ids, &who);
            push(&mut timed, t, step, Some((kind, overlaps)));
            let lasts = duration_ms(&mut rng, kind, down_after);
            if let Some(end) = end_of(kind, &who) {
                push(&mut timed, t + lasts, end, None);
                burst_end = burst_end.max(t + lasts);
                in_force_until = in_force_until.max(t + lasts);
            }
            t += rng.gen_range(down_after / 5..=down_after * 2);
            burst_end = burst_end.max(t);
        }
        push(&mut timed, burst_end, Step::Quiet(Dur(plan.quiet_ms)), None);
        t = burst_end + plan.quiet_ms;
    }
    timed.sort_by_key(|x| (x.at, x.order));
    let mut steps = vec![
        Step::WaitPrimary(Dur(60_000)),
        Step::StartWriters,
        Step::Sleep(Dur(3_000)),
    ];
    let mut starts = vec![None; steps.len()];
    let mut now = 0;
    for x in timed {
        if x.at > now {
            steps.push(Step::Sleep(Dur(x.at - now)));
            starts.push(None);
            now = x.at;
        }
        let quiet = matches!(x.step, Step::Quiet(_));
        steps.push(x.step);
        starts.push(x.starts);
        if quiet {
            // The quiet step sleeps itself; the next burst starts after it.
            now += plan.quiet_ms;
        }
    }
    let minutes = plan.duration_ms / 60_000 + 5;
    let scenario = Scenario {
        name: format!("chaos-{}-n{}-{}", plan.backend, plan.nodes, plan.seed),
        description: format!(
            "Generated by `conformance chaos --seed {}` ({} nodes, {}): bursts of overlapping faults, quiet phases.",
            plan.seed, plan.nodes, plan.backend
        ),
        tags: vec!["chaos".into()],
        nodes: plan.nodes,
        witnesses: 0,
        backend: Some(plan.backend.clone()),
        elector_bin: None,
        timings: plan.timings.clone(),
        workload: Workload {
            think_ms: 20,
            max_ops_per_writer: 1_000_000,
            max_duration_s: minutes * 60,
            ..Workload::default()
        },
        extra_yaml: None,
        env: [("DATA_NODE_RESTART".to_string(), "1".to_string())]
            .into_iter()
            .collect(),
        operator: true,
        steps,
        expect: Expect::default(),
    };
    Generated {
        scenario,
        starts,
        overlapping,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(seed: u64, nodes: usize, minutes: u64) -> Plan {
        Plan {
            seed,
            nodes,
            duration_ms: minutes * 60_000,
            backend: "kevy".into(),
            timings: Timings::default(),
            quiet_ms: 20_000,
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_schedule_and_another_seed_another() {
        let a = generate(&plan(7, 3, 5));
        let b = generate(&plan(7, 3, 5));
        let c = generate(&plan(8, 3, 5));
        assert_eq!(a.scenario, b.scenario);
        assert_ne!(a.scenario.steps, c.scenario.steps);
    }

    #[test]
    fn a_schedule_is_a_valid_scenario_file_that_reads_back_the_same() {
        for nodes in [3, 5] {
            let g = generate(&plan(3, nodes, 10));
            let text = serde_yaml::to_string(&g.scenario).unwrap();
            let back = Scenario::parse("chaos.yaml", &text).unwrap();
            assert_eq!(back, g.scenario);
            assert_eq!(g.starts.len(), g.scenario.steps.len());
        }
    }

    #[test]
    fn thirty_minutes_draw_every_kind_with_overlaps_and_quiet_phases() {
        let g = generate(&plan(11, 5, 15));
        let g3 = generate(&plan(11, 3, 15));
        let mut kinds = std::collections::BTreeSet::new();
        let mut count = 0;
        for (k, _) in g.starts.iter().chain(&g3.starts).flatten() {
            kinds.insert(*k);
            count += 1;
        }
        assert!(count >= 100, "{count} faults");
        assert_eq!(kinds.len(), drawn_kinds().len(), "{kinds:?}");
        // A quarter at least (a third or more in most seeds; 31 % in this one).
        assert!(
            g.overlapping + g3.overlapping >= count / 4,
            "{} + {} of {count}",
            g.overlapping,
            g3.overlapping
        );
        let quiet = g
            .scenario
            .steps
            .iter()
            .filter(|s| matches!(s, Step::Quiet(_)))
            .count();
        assert!(quiet >= 10, "{quiet} quiet phases");
    }

    #[test]
    fn data_nodes_restart_fast_empty_and_from_older_files_and_stall_past_the_quiesce_limit() {
        let g = generate(&plan(11, 3, 30));
        let g5 = generate(&plan(11, 5, 30));
        let restarts: Vec<&RestartDataSpec> = g
            .scenario
            .steps
            .iter()
            .chain(&g5.scenario.steps)
            .filter_map(|s| match s {
                Step::RestartData(r) => Some(r),
                _ => None,
            })
            .collect();
        assert!(
            restarts
                .iter()
                .any(|r| r.lose_data && r.gap_ms.is_some_and(|g| g <= 100)),
            "{restarts:?}"
        );
        assert!(restarts.iter().any(|r| r.older));
        assert!(restarts.iter().any(|r| !r.lose_data && !r.older));
        assert!(restarts.iter().all(|r| !(r.lose_data && r.older)));
        // Every older restart has a copy before it in its burst.
        let first_copy = g
            .scenario
            .steps
            .iter()
            .position(|s| matches!(s, Step::CopyData(_)));
        let first_older = g
            .scenario
            .steps
            .iter()
            .position(|s| matches!(s, Step::RestartData(r) if r.older));
        assert!(first_copy.is_some() && first_copy < first_older);
        // A stall that outlasts the quiesce limit: its thaw comes > 60 s later.
        let mut rng = StdRng::seed_from_u64(3);
        let long = (0..60)
            .map(|_| duration_ms(&mut rng, FaultKind::StallData, 1500))
            .filter(|&d| d > QUIESCE_LIMIT_MS)
            .count();
        assert!(
            (10..=35).contains(&long),
            "{long} of 60 stalls past the limit"
        );
        let mut rng = StdRng::seed_from_u64(3);
        assert!((0..60).all(|_| duration_ms(&mut rng, FaultKind::Kill, 1500) < QUIESCE_LIMIT_MS));
    }

    #[test]
    fn fault_durations_fall_short_of_near_and_far_beyond_down_after() {
        let mut rng = StdRng::seed_from_u64(1);
        let d: Vec<u64> = (0..300).map(|_| fault_ms(&mut rng, 1500)).collect();
        assert!(d.iter().any(|&x| x < 1200));
        assert!(d.iter().any(|&x| (1350..=1800).contains(&x)));
        assert!(d.iter().any(|&x| x > 3750));
    }
}
