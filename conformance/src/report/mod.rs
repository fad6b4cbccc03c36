//! Run results and their renderings: JSON per run, a Markdown summary, an SVG timeline.

mod markdown;
mod svg;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::checkers::CheckResult;
use crate::error::Result;
use crate::history::{FaultEvent, History, Ms};
use crate::metrics::Metrics;
use crate::target::{Setting, TargetKind};
use crate::usage::ProcUsage;

pub use markdown::summary_markdown;
pub use svg::timeline_svg;

/// One step as the runner played it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepLog {
    pub at_ms: Ms,
    pub label: String,
    pub ok: bool,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
    /// The target cannot express this step; `note` says why. Never silently skipped.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub not_applicable: bool,
}

impl StepLog {
    pub fn done(at_ms: Ms, label: &str, note: String) -> StepLog {
        StepLog {
            at_ms,
            label: label.to_string(),
            ok: true,
            note,
            not_applicable: false,
        }
    }
}

/// The outcome of one scenario run (one target, one seed).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    pub scenario: String,
    /// The data node: `kevy` or `redis`.
    pub backend: String,
    /// `elector+kevy`, `elector+redis`, `kevy-builtin` or `redis-sentinel`.
    #[serde(default)]
    pub target: String,
    pub seed: u64,
    pub nodes: usize,
    pub elector_bin: String,
    /// Failure detection time the target ran with (kevy's is compiled in).
    #[serde(default)]
    pub detection_ms: u64,
    /// Settings the target ran with.
    #[serde(default)]
    pub settings: Vec<Setting>,
    /// Negative control: the checkers were expected to fail.
    pub expect_violation: bool,
    /// The scenario expects a failover (its time counts in the summary's
    /// failover statistics; an N=2 "new primary after the restart" does not).
    #[serde(default)]
    pub expect_failover: bool,
    /// Every applicable checker passed.
    pub checks_passed: bool,
    /// The run met its expectation (checkers pass, or fail for a negative control) and the
    /// runner itself did not fail.
    pub passed: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The run could not judge the product (the harness overran a timed
    /// fault; see `runner::assemble::freeze_overran`); `error` says why.
    #[serde(default)]
    pub void: bool,
    /// Why earlier tries of this run were void and repeated.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub earlier_void_runs: Vec<String>,
    pub duration_ms: Ms,
    pub metrics: Metrics,
    pub checks: Vec<CheckResult>,
    pub steps: Vec<StepLog>,
    pub faults: Vec<FaultEvent>,
    /// Memory and CPU of the control processes at the end of the run.
    #[serde(default)]
    pub usage: Vec<ProcUsage>,
}

impl RunResult {
    pub fn id(&self) -> String {
        let slug = self
            .target
            .parse::<TargetKind>()
            .map(|k| k.slug().to_string())
            .unwrap_or_else(|_| self.backend.clone());
        format!("{}-{slug}-s{}", self.scenario, self.seed)
    }

    /// Steps the target could not express.
    pub fn not_applicable(&self) -> Vec<&StepLog> {
        self.steps.iter().filter(|s| s.not_applicable).collect()
    }

    pub fn failed_checks(&self) -> Vec<&str> {
        self.checks
            .iter()
            .filter(|c| !c.passed)
            .map(|c| c.name.as_str())
            .collect()
    }

    /// Decides `passed` from the checks, the expectation and a runner error.
    pub fn verdict(
        checks: &[CheckResult],
        expect_violation: bool,
        error: Option<&str>,
    ) -> (bool, bool) {
        let checks_passed = checks.iter().all(|c| c.passed);
        let passed = error.is_none() && (checks_passed != expect_violation);
        (checks_passed, passed)
    }
}

/// Writes `<id>.json`, `<id>.history.json` and `<id>.svg` into `dir`.
pub fn write_run(dir: &Path, r: &RunResult, h: &History) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let id = r.id();
    let json = dir.join(format!("{id}.json"));
    std::fs::write(&json, serde_json::to_vec_pretty(r)?)?;
    let hist = dir.join(format!("{id}.history.json"));
    std::fs::write(&hist, serde_json::to_vec(h)?)?;
    let svg = dir.join(format!("{id}.svg"));
    std::fs::write(&svg, timeline_svg(r, h))?;
    Ok(vec![json, hist, svg])
}

/// One log line with a run's verdict and figures.
pub fn log_run(r: &RunResult) {
    let verdict = if r.passed { "PASS" } else { "FAIL" };
    tracing::info!(
        "{verdict} {} (failover {:?} ms, first write {:?} ms, {} acked, {} lost, {} violations{})",
        r.id(),
        r.metrics.failover_ms,
        r.metrics.first_write_ms,
        r.metrics.acknowledged,
        r.metrics.lost_acknowledged,
        r.metrics.violations,
        r.error
            .as_deref()
            .map(|e| format!(", error: {e}"))
            .unwrap_or_default()
    );
}

/// Writes `summary.md` and `summary.json` for a whole suite run.
pub fn write_summary(dir: &Path, runs: &[RunResult]) -> Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let md = dir.join("summary.md");
    std::fs::write(&md, summary_markdown(runs))?;
    std::fs::write(dir.join("summary.json"), serde_json::to_vec_pretty(runs)?)?;
    Ok(md)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::checkers::{check_all, CheckResult};
    use crate::history::fixtures::*;
    use crate::history::Outcome;
    use crate::scenario::Expect;

    pub fn sample_run() -> (RunResult, History) {
        let mut h = history(3);
        h.initial_primary = Some("n1".into());
        h.final_primary = Some("n2".into());
        steady(&mut h, "n1", "primary", 1, 0, 1000);
        unreachable(&mut h, "n1", 1000, 3000);
        steady(&mut h, "n1", "replica", 2, 3000, 4000);
        steady(&mut h, "n2", "replica", 1, 0, 2500);
        steady(&mut h, "n2", "primary", 2, 2500, 4000);
        steady(&mut h, "n3", "replica", 2, 0, 4000);
        h.faults.push(FaultEvent {
            at_ms: 1000,
            end_ms: Some(3000),
            kind: "kill".into(),
            label: "kill primary <n1> & <tag>".into(),
            nodes: vec!["n1".into()],
            primary_before: Some("n1".into()),
            removes_primary: true,
            majority: vec!["n2".into(), "n3".into()],
        });
        h.writes.push(write("n1", "w:0:0", 500, Outcome::Ok));
        h.writes.push(write("n1", "w:0:1", 1200, Outcome::Fail));
        h.writes.push(write("n2", "w:0:2", 2600, Outcome::Ok));
        h.end_ms = 4000;
        let checks = check_all(&h, &Expect::default());
        let metrics = crate::metrics::compute(&h, &checks);
        let r = RunResult {
            scenario: "primary-kill".into(),
            backend: "kevy".into(),
            target: "elector+kevy".into(),
            detection_ms: 1500,
            settings: vec![],
            usage: vec![],
            seed: 1,
            nodes: 3,
            elector_bin: "elector".into(),
            expect_violation: false,
            expect_failover: true,
            checks_passed: false,
            passed: false,
            error: None,
            void: false,
            earlier_void_runs: vec![],
            duration_ms: 4000,
            metrics,
            checks,
            steps: vec![],
            faults: h.faults.clone(),
        };
        (r, h)
    }

    #[test]
    fn a_negative_control_passes_only_when_a_checker_fails() {
        let ok = CheckResult::new("a", vec![], vec![]);
        let bad = CheckResult::new("b", vec![crate::checkers::Violation::msg("x")], vec![]);
        assert_eq!(
            RunResult::verdict(std::slice::from_ref(&ok), false, None),
            (true, true)
        );
        assert_eq!(
            RunResult::verdict(&[ok.clone(), bad.clone()], false, None),
            (false, false)
        );
        assert_eq!(
            RunResult::verdict(&[ok.clone(), bad.clone()], true, None),
            (false, true)
        );
        assert_eq!(
            RunResult::verdict(std::slice::from_ref(&ok), true, None),
            (true, false)
        );
        assert_eq!(
            RunResult::verdict(&[ok], false, Some("boom")),
            (true, false)
        );
    }

    #[test]
    fn run_files_are_written_and_the_json_round_trips() {
        let (r, h) = sample_run();
        let dir = std::env::temp_dir().join(format!("cf-report-test-{}", std::process::id()));
        let files = write_run(&dir, &r, &h).unwrap();
        assert_eq!(files.len(), 3);
        let back: RunResult = serde_json::from_slice(&std::fs::read(&files[0]).unwrap()).unwrap();
        assert_eq!(back, r);
        let back_h: History = serde_json::from_slice(&std::fs::read(&files[1]).unwrap()).unwrap();
        assert_eq!(back_h, h);
        let md = write_summary(&dir, &[r]).unwrap();
        assert!(std::fs::read_to_string(md)
            .unwrap()
            .contains("primary-kill"));
        std::fs::remove_dir_all(dir).unwrap();
    }
}
