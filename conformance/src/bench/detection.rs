//! `bench-detection`: the fastest detection time that does not fail over
//! falsely, per target, and the durable failover at it (issue 22 item 1).
//!
//! Two phases over one run directory, so a sweep can be taken in chunks
//! (one Docker lock at a time, one target at a time) and rendered once at
//! the end; each phase resumes from the runs the directory already holds:
//! 1. **Sweep**: for every target whose detection can be set (ours on both
//!    backends, Sentinel's `down-after-milliseconds`; kevy's built-in
//!    election only at its compiled-in 5000 ms), the loss soak up to
//!    `soak_runs` times per detection value, its loss period stretched to
//!    `soak_secs`. A value is *safe* for a target when all `soak_runs` of
//!    its soak runs had no failover, no lost acknowledged write and no
//!    runner error. Two rules keep this affordable without weakening it
//!    (an exhaustive sweep is ~8 h):
//!    - a (target, value) is abandoned at its first unsafe run: one false
//!      failover, lost write or error decides it, more runs cannot make it
//!      safe;
//!    - values are taken ascending and a target stops at its first safe
//!      value, under the stated assumption that a longer detection is never
//!      less safe than a shorter one (the page says so).
//!
//!    Soaks of different targets may run concurrently (`parallel`).
//! 2. **Failover**: at each target's fastest safe value, primary-kill and
//!    isolate-primary `runs` times, one at a time (timings are measured).
//!
//! The same code runs CI-scale (a few values, one short soak) and
//! full-scale (10 runs of 2 minutes per value): only the plan differs, and
//! the page says which it was.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicUsize;

use serde::{Deserialize, Serialize};

use super::{failed_over, find_scenario, harness_failed, play, FAILOVER_SCENARIOS, SOAK_SCENARIO};
use crate::error::Result;
use crate::history::History;
use crate::report::RunResult;
use crate::runner::RunOptions;
use crate::scenario::{Dur, Scenario, Step, Timings};
use crate::target::kevy_builtin::KEVY_DOWN_AFTER_MS;
use crate::target::TargetKind;

/// What one invocation of `bench-detection` runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DetectionPlan {
    pub targets: Vec<TargetKind>,
    /// Detection times swept, in ms (ascending after [`DetectionPlan::values`]).
    pub values_ms: Vec<u64>,
    /// Soak runs a (target, value) needs to be called safe.
    pub soak_runs: u64,
    /// Length of the soak's loss period, in seconds.
    pub soak_secs: u64,
    /// Runs of each failover scenario at the fastest safe value.
    pub runs: u64,
    /// Soaks of different targets played at once (failover runs stay serial).
    pub parallel: usize,
}

impl DetectionPlan {
    /// The values a target is swept over, ascending: kevy's built-in
    /// election has one.
    pub fn values(&self, t: TargetKind) -> Vec<u64> {
        if t == TargetKind::KevyBuiltin {
            return vec![KEVY_DOWN_AFTER_MS];
        }
        let mut v = self.values_ms.clone();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Runs of each failover scenario planned per target.
    pub fn required_runs(&self) -> usize {
        usize::try_from(self.runs).unwrap_or(usize::MAX)
    }

    /// Soak runs a value needs to be called safe.
    pub fn required(&self) -> usize {
        usize::try_from(self.soak_runs).unwrap_or(usize::MAX)
    }

    /// The next soak a target's sweep needs, as (value, seed), given the
    /// verdicts so far; `None` when its sweep is over: it reached a safe
    /// value, every value was found unsafe, or a value's cluster kept
    /// failing to start (`soak_runs` times: the harness, not the target).
    pub fn next_soak(
        &self,
        t: TargetKind,
        verdicts: &BTreeMap<(TargetKind, u64), SoakVerdict>,
    ) -> Option<(u64, u64)> {
        for v in self.values(t) {
            let x = verdicts.get(&(t, v)).cloned().unwrap_or_default();
            match x.status(self.required()) {
                ValueStatus::Unsafe => continue,
                ValueStatus::Safe => return None,
                ValueStatus::Incomplete | ValueStatus::NotRun => {
                    if x.not_started >= self.required().max(1) {
                        return None;
                    }
                    // A seed per stored run, so no run's files are overwritten.
                    return Some((v, (x.runs + x.not_started + 1) as u64));
                }
            }
        }
        None
    }

    /// The soaks to play next: one per target whose sweep is not over, at
    /// most `parallel`, in the plan's target order.
    pub fn next_batch(
        &self,
        verdicts: &BTreeMap<(TargetKind, u64), SoakVerdict>,
    ) -> Vec<(TargetKind, u64, u64)> {
        self.targets
            .iter()
            .filter_map(|&t| self.next_soak(t, verdicts).map(|(v, seed)| (t, v, seed)))
            .take(self.parallel.max(1))
            .collect()
    }
}

/// Most heartbeats per detection time an operator would set: the elector's
/// config check warns below 10 heartbeats per `down_after`, and refuses a
/// lease under 3 heartbeats (500 ms at the default 100 ms heartbeat is
/// refused: lease 500 - 300 - 100 = 100 ms).
pub const HEARTBEATS_PER_DETECTION: u64 = 10;

/// Sets a detection time the way an operator would: `down_after` itself,
/// and the heartbeat lowered from its default to a tenth of it when the
/// default would leave fewer than [`HEARTBEATS_PER_DETECTION`] (peers
/// ignore the heartbeat).
pub fn set_detection(t: &mut Timings, detection_ms: u64) {
    t.down_after_ms = detection_ms;
    t.hb_interval_ms = t
        .hb_interval_ms
        .min(detection_ms / HEARTBEATS_PER_DETECTION)
        .max(1);
}

/// The soak with the plan's detection time and loss period.
pub fn soak_at(soak: &Scenario, detection_ms: u64, soak_secs: u64) -> Scenario {
    let mut s = soak.clone();
    set_detection(&mut s.timings, detection_ms);
    let netem = s.steps.iter().position(|st| matches!(st, Step::Netem(_)));
    if let Some(i) = netem {
        if let Some(Step::Sleep(d)) = s.steps.get_mut(i + 1) {
            *d = Dur(soak_secs * 1000);
        }
    }
    s
}

/// The directory of one detection value's soak runs.
fn sweep_dir(opts: &RunOptions, v: u64) -> std::path::PathBuf {
    opts.out_dir.join(format!("sweep-{v}ms"))
}

/// Phase 1: the soak sweep. Resumes from the runs already stored under
/// `opts.out_dir`; plays [`DetectionPlan::next_batch`] until every
/// target's sweep is over.
pub async fn sweep(all: &[Scenario], plan: &DetectionPlan, opts: &RunOptions) -> Result<()> {
    let soak = find_scenario(all, SOAK_SCENARIO)?;
    let stored = load_all(&opts.out_dir)?;
    let mut verdicts = soak_verdicts(&stored);
    drop(stored);
    let run_no = AtomicUsize::new(0);
    loop {
        let batch = plan.next_batch(&verdicts);
        if batch.is_empty() {
            return Ok(());
        }
        tracing::info!(
            "sweep: {}",
            batch
                .iter()
                .map(|(t, v, s)| format!("{t} at {v} ms (seed {s})"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let scenarios: Vec<(TargetKind, u64, Scenario, RunOptions)> = batch
            .iter()
            .map(|&(t, v, seed)| {
                let mut o = opts.clone();
                o.out_dir = sweep_dir(opts, v);
                (t, seed, soak_at(&soak, v, plan.soak_secs), o)
            })
            .collect();
        let played = futures::future::join_all(
            scenarios
                .iter()
                .map(|(t, seed, scn, o)| play(scn, *t, *seed, o, &run_no)),
        )
        .await;
        for p in played {
            let (r, h) = p?;
            // Only the verdicts are kept: a 2-minute soak's history is large.
            add_verdict(&mut verdicts, &r, &h);
        }
    }
}

/// Phase 2: primary-kill and isolate-primary at each target's fastest safe
/// value (targets with none are skipped), one run at a time, all of
/// primary-kill's runs first. Runs already stored at the same value are not
/// played again.
pub async fn failover(
    all: &[Scenario],
    plan: &DetectionPlan,
    fastest: &BTreeMap<TargetKind, u64>,
    opts: &RunOptions,
) -> Result<()> {
    let run_no = AtomicUsize::new(0);
    let mut o = opts.clone();
    o.out_dir = opts.out_dir.join("failover");
    let done: Vec<(String, String, u64, u64)> = super::load_runs(&o.out_dir)
        .unwrap_or_default()
        .into_iter()
        .filter(|(r, _)| !harness_failed(r))
        .map(|(r, _)| (r.scenario, r.target, r.seed, r.detection_ms))
        .collect();
    let opts = &o;
    // Scenario by scenario: when time cuts the phase short, primary-kill
    // has its runs and isolate-primary fewer, not both half of them.
    for name in FAILOVER_SCENARIOS {
        let base = find_scenario(all, name)?;
        for seed in 1..=plan.runs {
            for &t in &plan.targets {
                let Some(&v) = fastest.get(&t) else { continue };
                let key = (name.to_string(), t.name().to_string(), seed, v);
                if done.contains(&key) {
                    continue;
                }
                let mut scn = base.clone();
                set_detection(&mut scn.timings, v);
                play(&scn, t, seed, opts, &run_no).await?;
            }
        }
    }
    Ok(())
}

/// Every run stored under `dir` by [`sweep`] (one directory per value) and
/// [`failover`]: the page is rendered from these alone.
pub fn load_all(dir: &std::path::Path) -> Result<Vec<(RunResult, History)>> {
    let mut out = vec![];
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(out);
    };
    let mut subdirs: Vec<_> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    subdirs.sort();
    for d in subdirs {
        out.extend(super::load_runs(&d)?);
    }
    Ok(out)
}

/// The soak verdict of one (target, detection value).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SoakVerdict {
    pub runs: usize,
    pub false_failovers: usize,
    pub lost: usize,
    pub errors: usize,
    /// Clusters that never started: not a verdict either way.
    pub not_started: usize,
}

/// Where one (target, value) stands against a plan's required soak runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueStatus {
    /// Every required run played, none failed over, lost a write or erred.
    Safe,
    /// A run failed over, lost a write or erred: more runs cannot help.
    Unsafe,
    /// Some runs, all clean, fewer than required.
    Incomplete,
    NotRun,
}

impl SoakVerdict {
    /// Whether a run failed over, lost an acknowledged write or erred.
    pub fn failed(&self) -> bool {
        self.false_failovers > 0 || self.lost > 0 || self.errors > 0
    }

    /// The status given the runs a value needs (`required`, at least one).
    pub fn status(&self, required: usize) -> ValueStatus {
        if self.failed() {
            ValueStatus::Unsafe
        } else if self.runs >= required.max(1) {
            ValueStatus::Safe
        } else if self.runs > 0 {
            ValueStatus::Incomplete
        } else {
            ValueStatus::NotRun
        }
    }
}

/// Adds one soak run to the verdicts.
fn add_verdict(m: &mut BTreeMap<(TargetKind, u64), SoakVerdict>, r: &RunResult, h: &History) {
    if r.scenario != SOAK_SCENARIO {
        return;
    }
    let Ok(t) = r.target.parse::<TargetKind>() else {
        return;
    };
    let v = m.entry((t, r.detection_ms)).or_default();
    if harness_failed(r) {
        v.not_started += 1;
        return;
    }
    v.runs += 1;
    v.false_failovers += usize::from(failed_over(h));
    v.lost += r.metrics.lost_acknowledged;
    v.errors += usize::from(r.error.is_some());
}

/// Per (target, detection value) soak verdicts from the runs of a directory.
pub fn soak_verdicts(runs: &[(RunResult, History)]) -> BTreeMap<(TargetKind, u64), SoakVerdict> {
    let mut m = BTreeMap::new();
    for (r, h) in runs {
        add_verdict(&mut m, r, h);
    }
    m
}

/// Each target's fastest safe detection: the smallest value with all its
/// `required` runs clean and no unsafe value above it. The sweep stops at
/// the first safe value, so values above it are normally not run; when they
/// were (an exhaustive sweep, or an earlier plan), an unsafe one above
/// disqualifies every safe value below it: a lucky short value under an
/// unsafe longer one does not count.
pub fn fastest_safe(
    verdicts: &BTreeMap<(TargetKind, u64), SoakVerdict>,
    required: usize,
) -> BTreeMap<TargetKind, u64> {
    let mut per: BTreeMap<TargetKind, Vec<(u64, ValueStatus)>> = BTreeMap::new();
    for (&(t, v), verdict) in verdicts {
        per.entry(t)
            .or_default()
            .push((v, verdict.status(required)));
    }
    per.into_iter()
        .filter_map(|(t, mut vs)| {
            vs.sort_unstable_by_key(|&(v, _)| v);
            let mut fastest = None;
            for &(v, status) in vs.iter().rev() {
                match status {
                    ValueStatus::Unsafe => break,
                    ValueStatus::Safe => fastest = Some(v),
                    ValueStatus::Incomplete | ValueStatus::NotRun => {}
                }
            }
            Some((t, fastest?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(runs: usize, false_failovers: usize) -> SoakVerdict {
        SoakVerdict {
            runs,
            false_failovers,
            ..SoakVerdict::default()
        }
    }

    fn plan(targets: Vec<TargetKind>, values_ms: Vec<u64>, soak_runs: u64) -> DetectionPlan {
        DetectionPlan {
            targets,
            values_ms,
            soak_runs,
            soak_secs: 30,
            runs: 1,
            parallel: 1,
        }
    }

    #[test]
    fn the_fastest_safe_value_has_no_unsafe_value_above_it() {
        let t = TargetKind::ElectorKevy;
        let m = BTreeMap::from([
            ((t, 500), verdict(2, 0)),
            ((t, 750), verdict(1, 1)),
            ((t, 1000), verdict(2, 0)),
            ((t, 2000), verdict(2, 0)),
        ]);
        assert_eq!(fastest_safe(&m, 2), BTreeMap::from([(t, 1000)]));
    }

    #[test]
    fn values_above_the_first_safe_one_need_not_have_run() {
        let t = TargetKind::ElectorRedis;
        let m = BTreeMap::from([((t, 500), verdict(1, 1)), ((t, 750), verdict(10, 0))]);
        assert_eq!(fastest_safe(&m, 10), BTreeMap::from([(t, 750)]));
    }

    #[test]
    fn a_value_with_fewer_clean_runs_than_required_is_not_safe() {
        let t = TargetKind::RedisSentinel;
        let m = BTreeMap::from([((t, 500), verdict(3, 0)), ((t, 1000), verdict(0, 0))]);
        assert!(fastest_safe(&m, 10).is_empty(), "3 of 10 runs: not known");
        let m = BTreeMap::from([((t, 500), verdict(10, 0)), ((t, 1000), verdict(1, 1))]);
        assert!(
            fastest_safe(&m, 10).is_empty(),
            "unsafe above: the assumption failed"
        );
    }

    #[test]
    fn a_value_is_abandoned_at_its_first_unsafe_run() {
        let t = TargetKind::ElectorKevy;
        let p = plan(vec![t], vec![500, 1000], 10);
        let m = BTreeMap::from([((t, 500), verdict(4, 0))]);
        assert_eq!(p.next_soak(t, &m), Some((500, 5)));
        let m = BTreeMap::from([((t, 500), verdict(5, 1))]);
        assert_eq!(p.next_soak(t, &m), Some((1000, 1)), "500 failed once");
    }

    #[test]
    fn a_target_sweep_stops_at_its_first_safe_value() {
        let t = TargetKind::ElectorRedis;
        let p = plan(vec![t], vec![1000, 500, 750], 2);
        assert_eq!(p.next_soak(t, &BTreeMap::new()), Some((500, 1)));
        let m = BTreeMap::from([((t, 500), verdict(1, 1)), ((t, 750), verdict(2, 0))]);
        assert_eq!(p.next_soak(t, &m), None, "750 is safe: 1000 is not run");
        let m = BTreeMap::from([
            ((t, 500), verdict(1, 1)),
            ((t, 750), verdict(1, 1)),
            ((t, 1000), verdict(1, 1)),
        ]);
        assert_eq!(p.next_soak(t, &m), None, "every value unsafe");
    }

    #[test]
    fn a_value_whose_cluster_never_starts_ends_the_sweep_without_a_verdict() {
        let t = TargetKind::ElectorKevy;
        let p = plan(vec![t], vec![500, 1000], 2);
        let stuck = SoakVerdict {
            not_started: 1,
            ..SoakVerdict::default()
        };
        let m = BTreeMap::from([((t, 500), stuck.clone())]);
        assert_eq!(
            p.next_soak(t, &m),
            Some((500, 2)),
            "a fresh seed, no file overwritten"
        );
        let m = BTreeMap::from([(
            (t, 500),
            SoakVerdict {
                not_started: 2,
                ..stuck
            },
        )]);
        assert_eq!(p.next_soak(t, &m), None);
    }

    #[test]
    fn a_batch_holds_one_soak_per_unfinished_target_up_to_the_parallelism() {
        let mut p = plan(TargetKind::ALL.to_vec(), vec![500], 1);
        let done = BTreeMap::from([((TargetKind::ElectorKevy, 500), verdict(1, 0))]);
        let batch = p.next_batch(&done);
        assert!(batch.iter().all(|b| b.0 != TargetKind::ElectorKevy));
        assert_eq!(batch.len(), 1, "parallel 1: serial");
        p.parallel = 4;
        let batch = p.next_batch(&done);
        assert_eq!(batch.len(), TargetKind::ALL.len() - 1);
        assert!(batch.contains(&(TargetKind::KevyBuiltin, KEVY_DOWN_AFTER_MS, 1)));
    }

    #[test]
    fn kevy_builtin_is_swept_at_its_compiled_in_value_only() {
        let p = plan(TargetKind::ALL.to_vec(), vec![1000, 500, 1000], 1);
        assert_eq!(p.values(TargetKind::KevyBuiltin), vec![KEVY_DOWN_AFTER_MS]);
        assert_eq!(p.values(TargetKind::ElectorRedis), vec![500, 1000]);
    }

    #[test]
    fn the_soak_runs_with_the_plan_detection_and_loss_period() {
        let all = Scenario::load_dir(&crate::suite::default_scenario_dir()).unwrap();
        let soak = find_scenario(&all, SOAK_SCENARIO).unwrap();
        let s = soak_at(&soak, 750, 120);
        assert_eq!(s.timings.down_after_ms, 750);
        assert_eq!(s.timings.hb_interval_ms, 75);
        assert_eq!(soak_at(&soak, 3000, 120).timings.hb_interval_ms, 100);
        let i = s
            .steps
            .iter()
            .position(|st| matches!(st, Step::Netem(_)))
            .unwrap();
        assert_eq!(s.steps[i + 1], Step::Sleep(Dur(120_000)));
    }
}
