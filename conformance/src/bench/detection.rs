//! `bench-detection`: the fastest detection time that does not fail over
//! falsely, per target, and the durable failover at it (issue 22 item 1).
//!
//! Two phases over one run directory, so a sweep can be taken in chunks
//! (one Docker lock at a time) and rendered once at the end:
//! 1. **Sweep**: for every detection value and every target whose detection
//!    can be set (ours on both backends, Sentinel's `down-after-milliseconds`;
//!    kevy's built-in election only at its compiled-in 5000 ms), the loss
//!    soak `soak_runs` times, its loss period stretched to `soak_secs`.
//!    A value is *safe* for a target when every one of its soak runs had no
//!    failover, no lost acknowledged write and no runner error.
//! 2. **Failover**: at each target's fastest safe value, primary-kill and
//!    isolate-primary `runs` times.
//!
//! The same code runs CI-scale (a few values, one short soak) and
//! full-scale (10 runs of 2 minutes per value): only the plan differs, and
//! the page says which it was.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{failed_over, find_scenario, harness_failed, play, FAILOVER_SCENARIOS, SOAK_SCENARIO};
use crate::error::Result;
use crate::history::History;
use crate::report::RunResult;
use crate::runner::RunOptions;
use crate::scenario::{Dur, Scenario, Step};
use crate::target::kevy_builtin::KEVY_DOWN_AFTER_MS;
use crate::target::TargetKind;

/// What one invocation of `bench-detection` runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DetectionPlan {
    pub targets: Vec<TargetKind>,
    /// Detection times swept, in ms (ascending after [`DetectionPlan::values`]).
    pub values_ms: Vec<u64>,
    /// Soak runs per (target, value).
    pub soak_runs: u64,
    /// Length of the soak's loss period, in seconds.
    pub soak_secs: u64,
    /// Runs of each failover scenario at the fastest safe value.
    pub runs: u64,
}

impl DetectionPlan {
    /// The values a target is swept over: kevy's built-in election has one.
    pub fn values(&self, t: TargetKind) -> Vec<u64> {
        if t == TargetKind::KevyBuiltin {
            return vec![KEVY_DOWN_AFTER_MS];
        }
        let mut v = self.values_ms.clone();
        v.sort_unstable();
        v.dedup();
        v
    }
}

/// The soak with the plan's detection time and loss period.
pub fn soak_at(soak: &Scenario, detection_ms: u64, soak_secs: u64) -> Scenario {
    let mut s = soak.clone();
    s.timings.down_after_ms = detection_ms;
    let netem = s.steps.iter().position(|st| matches!(st, Step::Netem(_)));
    if let Some(i) = netem {
        if let Some(Step::Sleep(d)) = s.steps.get_mut(i + 1) {
            *d = Dur(soak_secs * 1000);
        }
    }
    s
}

/// Phase 1: the soak sweep, values ascending, targets interleaved.
pub async fn sweep(
    all: &[Scenario],
    plan: &DetectionPlan,
    opts: &RunOptions,
) -> Result<Vec<(RunResult, History)>> {
    let soak = find_scenario(all, SOAK_SCENARIO)?;
    let mut values: Vec<u64> = plan.targets.iter().flat_map(|&t| plan.values(t)).collect();
    values.sort_unstable();
    values.dedup();
    let mut out = vec![];
    let mut run_no = 0;
    for seed in 1..=plan.soak_runs {
        for &v in &values {
            let mut o = opts.clone();
            o.out_dir = opts.out_dir.join(format!("sweep-{v}ms"));
            for &t in plan
                .targets
                .iter()
                .filter(|&&t| plan.values(t).contains(&v))
            {
                let scn = soak_at(&soak, v, plan.soak_secs);
                out.push(play(&scn, t, seed, &o, &mut run_no).await?);
            }
        }
    }
    Ok(out)
}

/// Phase 2: primary-kill and isolate-primary at each target's fastest safe
/// value (targets with none are skipped).
pub async fn failover(
    all: &[Scenario],
    plan: &DetectionPlan,
    fastest: &BTreeMap<TargetKind, u64>,
    opts: &RunOptions,
) -> Result<Vec<(RunResult, History)>> {
    let mut out = vec![];
    let mut run_no = 0;
    let mut o = opts.clone();
    o.out_dir = opts.out_dir.join("failover");
    let opts = &o;
    for seed in 1..=plan.runs {
        for name in FAILOVER_SCENARIOS {
            let base = find_scenario(all, name)?;
            for &t in &plan.targets {
                let Some(&v) = fastest.get(&t) else { continue };
                let mut scn = base.clone();
                scn.timings.down_after_ms = v;
                out.push(play(&scn, t, seed, opts, &mut run_no).await?);
            }
        }
    }
    Ok(out)
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

impl SoakVerdict {
    /// Safe: at least one run, and none failed over, lost a write or erred.
    pub fn safe(&self) -> bool {
        self.runs > 0 && self.false_failovers == 0 && self.lost == 0 && self.errors == 0
    }
}

/// Per (target, detection value) soak verdicts from the runs of a directory.
pub fn soak_verdicts(runs: &[(RunResult, History)]) -> BTreeMap<(TargetKind, u64), SoakVerdict> {
    let mut m: BTreeMap<(TargetKind, u64), SoakVerdict> = BTreeMap::new();
    for (r, h) in runs.iter().filter(|(r, _)| r.scenario == SOAK_SCENARIO) {
        let Ok(t) = r.target.parse::<TargetKind>() else {
            continue;
        };
        let v = m.entry((t, r.detection_ms)).or_default();
        if harness_failed(r) {
            v.not_started += 1;
            continue;
        }
        v.runs += 1;
        v.false_failovers += usize::from(failed_over(h));
        v.lost += r.metrics.lost_acknowledged;
        v.errors += usize::from(r.error.is_some());
    }
    m
}

/// Each target's fastest safe detection: the smallest value that is safe
/// and above which (among the values swept) every value is safe too, so a
/// lucky short value below an unsafe one does not count.
pub fn fastest_safe(
    verdicts: &BTreeMap<(TargetKind, u64), SoakVerdict>,
) -> BTreeMap<TargetKind, u64> {
    let mut per: BTreeMap<TargetKind, Vec<(u64, bool)>> = BTreeMap::new();
    for (&(t, v), verdict) in verdicts {
        per.entry(t).or_default().push((v, verdict.safe()));
    }
    per.into_iter()
        .filter_map(|(t, mut vs)| {
            vs.sort_unstable();
            let mut fastest = None;
            for &(v, safe) in vs.iter().rev() {
                if !safe {
                    break;
                }
                fastest = Some(v);
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

    #[test]
    fn the_fastest_safe_value_has_only_safe_values_above_it() {
        let t = TargetKind::ElectorKevy;
        let m = BTreeMap::from([
            ((t, 500), verdict(2, 0)),
            ((t, 750), verdict(2, 1)),
            ((t, 1000), verdict(2, 0)),
            ((t, 2000), verdict(2, 0)),
        ]);
        assert_eq!(fastest_safe(&m), BTreeMap::from([(t, 1000)]));
    }

    #[test]
    fn a_target_unsafe_at_its_largest_value_or_never_run_has_no_fastest_value() {
        let t = TargetKind::RedisSentinel;
        let m = BTreeMap::from([((t, 500), verdict(1, 0)), ((t, 1000), verdict(0, 0))]);
        assert!(
            fastest_safe(&m).is_empty(),
            "no run at 1000: not known safe"
        );
        let m = BTreeMap::from([((t, 500), verdict(1, 0)), ((t, 1000), verdict(1, 1))]);
        assert!(fastest_safe(&m).is_empty());
    }

    #[test]
    fn kevy_builtin_is_swept_at_its_compiled_in_value_only() {
        let plan = DetectionPlan {
            targets: TargetKind::ALL.to_vec(),
            values_ms: vec![1000, 500, 1000],
            soak_runs: 1,
            soak_secs: 30,
            runs: 1,
        };
        assert_eq!(
            plan.values(TargetKind::KevyBuiltin),
            vec![KEVY_DOWN_AFTER_MS]
        );
        assert_eq!(plan.values(TargetKind::ElectorRedis), vec![500, 1000]);
    }

    #[test]
    fn the_soak_runs_with_the_plan_detection_and_loss_period() {
        let all = Scenario::load_dir(&crate::suite::default_scenario_dir()).unwrap();
        let soak = find_scenario(&all, SOAK_SCENARIO).unwrap();
        let s = soak_at(&soak, 750, 120);
        assert_eq!(s.timings.down_after_ms, 750);
        let i = s
            .steps
            .iter()
            .position(|st| matches!(st, Step::Netem(_)))
            .unwrap();
        assert_eq!(s.steps[i + 1], Step::Sleep(Dur(120_000)));
    }
}
