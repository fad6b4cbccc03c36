//! `bench-failover`: every target through the same failover scenarios at the same
//! detection time, runs interleaved (target A seed 1, target B seed 1, ...), then one
//! table and one chart ([`render`], [`chart`]) written to `docs/`.
//!
//! Figures come from the same history and checkers as every conformance run:
//! durable failover = fault to the first write a replica acknowledged
//! (`SET` + `WAIT quorum-1`) on another node ([`crate::metrics`]).

pub mod breakdown;
pub mod chart;
pub mod detection;
pub mod detection_render;
pub mod render;
pub mod scale;
pub mod scale_render;
pub mod writes;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::history::{History, Ms};
use crate::metrics::median_p95;
use crate::report::{self, RunResult};
use crate::runner::{run_scenario, RunOptions};
use crate::scenario::Scenario;
use crate::target::TargetKind;

/// The failover scenarios, and the soak that must not fail over.
pub const FAILOVER_SCENARIOS: [&str; 2] = ["primary-kill", "isolate-primary"];
pub const SOAK_SCENARIO: &str = "soak-loss-jitter";

/// What one invocation runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    pub targets: Vec<TargetKind>,
    /// Runs of each failover scenario per target.
    pub runs: u64,
    /// Runs of the loss soak per target.
    pub soak_runs: u64,
    /// Detection time every target runs with (kevy's built-in election is fixed
    /// at 5000 ms, so that is the default).
    pub down_after_ms: u64,
}

impl Plan {
    /// Our electors' heartbeat at the plan's detection time.
    pub fn hb_interval_ms(&self) -> u64 {
        let mut t = crate::scenario::Timings::default();
        detection::set_detection(&mut t, self.down_after_ms);
        t.hb_interval_ms
    }
}

/// The machine a bench ran on, for the report.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Machine {
    pub nproc: String,
    pub memory: String,
    pub kernel: String,
    pub docker: String,
    pub commit: String,
}

impl Machine {
    /// The page's "Machine:" line.
    pub fn line(&self) -> String {
        format!(
            "- Machine: {} CPUs, {} memory, kernel {}, Docker {}; commit {}.",
            self.nproc, self.memory, self.kernel, self.docker, self.commit
        )
    }
}

/// A scenario a bench plays, by name.
pub(crate) fn find_scenario(all: &[Scenario], name: &str) -> Result<Scenario> {
    all.iter()
        .find(|s| s.name == name)
        .cloned()
        .ok_or_else(|| Error::Scenario {
            file: name.to_string(),
            message: "bench scenario missing".into(),
        })
}

/// The scenarios of a plan with the plan's detection time, in play order.
pub fn scenarios(all: &[Scenario], plan: &Plan) -> Result<(Vec<Scenario>, Scenario)> {
    let find = |name: &str| {
        find_scenario(all, name).map(|mut s| {
            // As bench-detection does: the heartbeat a tenth of the detection
            // time when the default 100 ms would leave fewer than ten (500 ms
            // with a 100 ms heartbeat is a config our electors refuse).
            detection::set_detection(&mut s.timings, plan.down_after_ms);
            s
        })
    };
    let failover = FAILOVER_SCENARIOS
        .iter()
        .map(|n| find(n))
        .collect::<Result<Vec<_>>>()?;
    Ok((failover, find(SOAK_SCENARIO)?))
}

/// Attempts at a run whose cluster did not start (the harness failed, not the target).
const START_ATTEMPTS: usize = 3;

/// The cluster never started: nothing was measured, the target is not to blame.
pub fn harness_failed(r: &RunResult) -> bool {
    r.error
        .as_deref()
        .is_some_and(|e| e.starts_with("cluster start"))
}

/// Plays one run, again when its cluster never started (the harness, not
/// the target, failed); writes its report files into `opts.out_dir`.
pub(crate) async fn play(
    scn: &Scenario,
    t: TargetKind,
    seed: u64,
    opts: &RunOptions,
    run_no: &AtomicUsize,
) -> Result<(RunResult, History)> {
    let mut attempt = 0;
    let (r, h) = loop {
        attempt += 1;
        // Shared by runs played concurrently: each cluster's containers get their own id.
        let n = run_no.fetch_add(1, Ordering::Relaxed) + 1;
        let (r, h) = run_scenario(scn, t, seed, opts, n).await;
        if !harness_failed(&r) || attempt >= START_ATTEMPTS {
            break (r, h);
        }
        tracing::warn!(
            "{}: {} (attempt {attempt}); again",
            r.id(),
            r.error.as_deref().unwrap_or("")
        );
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    };
    report::write_run(&opts.out_dir, &r, &h)?;
    report::log_run(&r);
    Ok((r, h))
}

/// Plays the plan, interleaving targets inside every seed; writes each run's
/// report files into `opts.out_dir` as it goes. Returns results and histories.
pub async fn run(
    all: &[Scenario],
    plan: &Plan,
    opts: &RunOptions,
) -> Result<Vec<(RunResult, History)>> {
    let (failover, soak) = scenarios(all, plan)?;
    let mut out = vec![];
    let run_no = AtomicUsize::new(0);
    for seed in 1..=plan.runs.max(plan.soak_runs) {
        let mut this_seed: Vec<&Scenario> = vec![];
        if seed <= plan.runs {
            this_seed.extend(failover.iter());
        }
        if seed <= plan.soak_runs {
            this_seed.push(&soak);
        }
        for scn in this_seed {
            for &t in &plan.targets {
                out.push(play(scn, t, seed, opts, &run_no).await?);
            }
        }
    }
    Ok(out)
}

/// Loads every run (`<id>.json` with its `<id>.history.json`) a bench wrote into
/// `dir`, in run order: the page can be rendered again from them.
pub fn load_runs(dir: &std::path::Path) -> Result<Vec<(RunResult, History)>> {
    let mut out = vec![];
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let Some(id) = name.strip_suffix(".history.json") else {
            continue;
        };
        let r: RunResult = serde_json::from_slice(&std::fs::read(dir.join(format!("{id}.json")))?)?;
        let h: History = serde_json::from_slice(&std::fs::read(&path)?)?;
        out.push((r, h));
    }
    out.sort_by(|a, b| {
        (a.0.seed, &a.0.scenario, &a.0.target).cmp(&(b.0.seed, &b.0.scenario, &b.0.target))
    });
    Ok(out)
}

/// Figures of one target in one scenario.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stats {
    pub runs: usize,
    /// Durable failover times of the runs that had one.
    pub failover: Vec<Ms>,
    /// Longest stretch without an acknowledged write, per run.
    pub write_gap: Vec<Ms>,
    pub lost: usize,
    /// Windows with two writable primaries longer than the lease.
    pub split_windows: usize,
    /// Runs where a primary other than the first one became writable
    /// (soak: a false failover).
    pub failovers: usize,
    pub errors: usize,
    /// Runs whose cluster never started: not counted anywhere else.
    pub not_started: usize,
    /// Run ids with lost writes or two writable primaries.
    pub evidence: Vec<String>,
}

impl Stats {
    /// (median, p95, min, max) of the failover times.
    pub fn summary(&self) -> Option<(Ms, Ms, Ms, Ms)> {
        let (med, p95) = median_p95(&self.failover)?;
        let min = *self.failover.iter().min()?;
        let max = *self.failover.iter().max()?;
        Some((med, p95, min, max))
    }
}

/// The (scenario, target) cells with nothing to show: no run whose cluster
/// started, or no run with an acknowledged write after the fault. Such a
/// target never elected (a refused config, a broken image): the bench fails
/// rather than publish a blank row beside its peers' figures.
pub fn unelected(st: &BTreeMap<(String, TargetKind), Stats>, plan: &Plan) -> Vec<String> {
    let mut out = vec![];
    if plan.runs == 0 {
        return out;
    }
    for scn in FAILOVER_SCENARIOS {
        for &t in &plan.targets {
            let why = match st.get(&(scn.to_string(), t)) {
                None => "no run".to_string(),
                Some(x) if x.runs == 0 => {
                    format!("{} clusters that never started", x.not_started)
                }
                Some(x) if x.failover.is_empty() => format!(
                    "{} runs, none with an acknowledged write after the fault (runner errors: {})",
                    x.runs, x.errors
                ),
                Some(_) => continue,
            };
            out.push(format!("{scn} / {t}: {why}"));
        }
    }
    out
}

/// Violations of the single-writable-primary checker in a run.
pub fn split_windows(r: &RunResult) -> usize {
    r.checks
        .iter()
        .filter(|c| c.name == "single_writable_primary")
        .map(|c| c.violations.len())
        .sum()
}

/// Whether a primary other than the initial one became writable during the run.
pub fn failed_over(h: &History) -> bool {
    let Some(first) = &h.initial_primary else {
        return false;
    };
    let end = h.writers_stopped_ms.unwrap_or(h.end_ms);
    h.sampled_primary_intervals()
        .iter()
        .any(|(n, l)| n != first && l.iter().any(|i| i.start < end))
}

/// Per (scenario, target) figures.
pub fn stats(runs: &[(RunResult, History)]) -> BTreeMap<(String, TargetKind), Stats> {
    let mut m: BTreeMap<(String, TargetKind), Stats> = BTreeMap::new();
    for (r, h) in runs {
        let Ok(kind) = r.target.parse::<TargetKind>() else {
            continue;
        };
        let s = m.entry((r.scenario.clone(), kind)).or_default();
        if harness_failed(r) {
            s.not_started += 1;
            continue;
        }
        s.runs += 1;
        if r.error.is_some() {
            s.errors += 1;
        }
        if let Some(f) = r.metrics.failover_ms {
            s.failover.push(f);
        }
        if let Some(g) = r.metrics.max_write_gap_ms {
            s.write_gap.push(g);
        }
        s.lost += r.metrics.lost_acknowledged;
        let windows = split_windows(r);
        s.split_windows += windows;
        if failed_over(h) {
            s.failovers += 1;
        }
        if r.metrics.lost_acknowledged > 0 || windows > 0 {
            s.evidence.push(r.id());
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::sample_run;

    fn as_target(mut r: RunResult, t: TargetKind, failover: Option<Ms>) -> RunResult {
        r.target = t.name().into();
        r.metrics.failover_ms = failover;
        r
    }

    #[test]
    fn stats_group_runs_by_scenario_and_target_and_take_percentiles() {
        let (r, h) = sample_run();
        let runs = vec![
            (
                as_target(r.clone(), TargetKind::ElectorKevy, Some(5000)),
                h.clone(),
            ),
            (
                as_target(r.clone(), TargetKind::ElectorKevy, Some(7000)),
                h.clone(),
            ),
            (
                as_target(r.clone(), TargetKind::ElectorKevy, Some(6000)),
                h.clone(),
            ),
            (
                as_target(r.clone(), TargetKind::KevyBuiltin, None),
                h.clone(),
            ),
            (
                RunResult {
                    error: Some("cluster start: docker: Pool overlaps".into()),
                    ..as_target(r, TargetKind::KevyBuiltin, None)
                },
                h,
            ),
        ];
        let m = stats(&runs);
        let ours = &m[&("primary-kill".to_string(), TargetKind::ElectorKevy)];
        assert_eq!(ours.runs, 3);
        assert_eq!(ours.summary(), Some((6000, 7000, 5000, 7000)));
        let peer = &m[&("primary-kill".to_string(), TargetKind::KevyBuiltin)];
        assert_eq!((peer.runs, peer.summary()), (1, None));
        assert_eq!(
            (peer.not_started, peer.errors),
            (1, 0),
            "a cluster that never started is no run"
        );
    }

    #[test]
    fn a_run_where_another_node_became_writable_counts_as_a_failover() {
        let (_, h) = sample_run();
        // The sample run: n1 primary, killed, n2 writable from 2500 ms.
        assert!(failed_over(&h));
        let mut calm = h.clone();
        calm.samples.retain(|s| s.node == "n1");
        assert!(!failed_over(&calm));
    }

    #[test]
    fn the_bench_plays_the_two_failover_scenarios_and_the_soak_at_the_plan_detection_time() {
        let all = Scenario::load_dir(&crate::suite::default_scenario_dir()).unwrap();
        let plan = Plan {
            targets: TargetKind::ALL.to_vec(),
            runs: 1,
            soak_runs: 1,
            down_after_ms: 5000,
        };
        let (failover, soak) = scenarios(&all, &plan).unwrap();
        assert_eq!(
            failover.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
            FAILOVER_SCENARIOS.to_vec()
        );
        assert_eq!(soak.name, SOAK_SCENARIO);
        assert!(failover
            .iter()
            .chain([&soak])
            .all(|s| s.timings.down_after_ms == 5000));
    }

    #[test]
    fn a_short_detection_lowers_the_heartbeat_to_a_valid_config_as_bench_detection_does() {
        let all = Scenario::load_dir(&crate::suite::default_scenario_dir()).unwrap();
        let plan = Plan {
            targets: TargetKind::ALL.to_vec(),
            runs: 1,
            soak_runs: 1,
            down_after_ms: 500,
        };
        let (failover, soak) = scenarios(&all, &plan).unwrap();
        for s in failover.iter().chain([&soak]) {
            assert_eq!(s.timings.down_after_ms, 500);
            // 100 ms would leave a lease under three heartbeats: refused.
            assert_eq!(s.timings.hb_interval_ms, 50, "{}", s.name);
        }
    }

    #[test]
    fn a_target_without_any_failover_figure_is_reported_and_one_with_figures_is_not() {
        let (r, h) = sample_run();
        let plan = Plan {
            targets: vec![TargetKind::ElectorKevy, TargetKind::RedisSentinel],
            runs: 1,
            soak_runs: 0,
            down_after_ms: 500,
        };
        let mut runs = vec![];
        for scn in FAILOVER_SCENARIOS {
            let mut ours = as_target(r.clone(), TargetKind::ElectorKevy, None);
            ours.scenario = scn.into();
            let mut peer = as_target(r.clone(), TargetKind::RedisSentinel, Some(900));
            peer.scenario = scn.into();
            runs.push((ours, h.clone()));
            runs.push((peer, h.clone()));
        }
        let bad = unelected(&stats(&runs), &plan);
        assert_eq!(bad.len(), 2, "{bad:?}");
        assert!(bad.iter().all(|b| b.contains("elector+kevy")), "{bad:?}");
    }
}
