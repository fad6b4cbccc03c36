//! `conformance chaos`: seeded random schedules of composed faults on a 3-node
//! and then a 5-node cluster, per backend, with the usual writers (`SET` +
//! `WAIT quorum-1`) and every checker over the whole run (issue 21).
//!
//! Each schedule is written as a scenario file before it runs; a failing run
//! prints the seed and the `run --file` command that replays it. After each
//! run: faults by kind, overlapping faults, availability, and the recovery
//! time after quiet phases (median, worst).

pub mod schedule;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use faults::FaultKind;

use crate::checkers;
use crate::error::Result;
use crate::history::History;
use crate::report::{self, RunResult};
use crate::runner::{run_scenario, RunOptions};
use crate::scenario::Timings;
use crate::target::TargetKind;

pub use schedule::{generate, Generated, Plan};

/// The cluster sizes each chaos run covers, in order.
pub const SIZES: [usize; 2] = [3, 5];

/// Quiet phase length: the liveness bound with default timings (15.8 s)
/// and some margin, so every quiet phase can show its recovery.
pub const QUIET_MS: u64 = 20_000;

/// The figures of one chaos run.
#[derive(Clone, Debug)]
pub struct Figures {
    pub target: TargetKind,
    pub nodes: usize,
    pub seed: u64,
    pub file: PathBuf,
    pub passed: bool,
    /// Faults that ran (not the ones a stopped run never reached), by kind.
    pub by_kind: BTreeMap<FaultKind, usize>,
    pub overlapping: usize,
    pub availability: Option<f64>,
    /// Recovery after each quiet phase, ms (None: none within the phase).
    pub recoveries: Vec<Option<u64>>,
    pub lost: usize,
    /// Times the runner played the operator (accept-data-loss, §6.10).
    pub operator_acts: usize,
    pub failed_checks: Vec<String>,
    pub error: Option<String>,
}

impl Figures {
    pub fn faults(&self) -> usize {
        self.by_kind.values().sum()
    }

    /// One block of text for the terminal and the issue note.
    pub fn describe(&self, image: &str) -> String {
        let mut rec: Vec<u64> = self.recoveries.iter().flatten().copied().collect();
        rec.sort_unstable();
        let kinds: Vec<String> = self
            .by_kind
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        let mut out = format!(
            "{} {} n={} seed={}: {} faults of {} kinds ({} overlapping): {}\n  \
             availability {} ; recovery after {} quiet phases: median {} ms, worst {} ms{}\n  \
             lost acknowledged writes {}; operator accepted data loss {} times; checks {}\n  schedule {}\n",
            if self.passed { "PASS" } else { "FAIL" },
            self.target,
            self.nodes,
            self.seed,
            self.faults(),
            self.by_kind.len(),
            self.overlapping,
            kinds.join(", "),
            self.availability
                .map_or("-".into(), |a| format!("{:.1} %", a * 100.0)),
            self.recoveries.len(),
            checkers::median(&rec).map_or("-".into(), |m| m.to_string()),
            rec.last().map_or("-".into(), |m| m.to_string()),
            match self.recoveries.iter().filter(|r| r.is_none()).count() {
                0 => String::new(),
                k => format!(" ({k} without any acknowledged write)"),
            },
            self.lost,
            self.operator_acts,
            if self.failed_checks.is_empty() {
                "all passed".into()
            } else {
                format!("FAILED: {}", self.failed_checks.join(", "))
            },
            self.file.display(),
        );
        if let Some(e) = &self.error {
            out.push_str(&format!("  error: {e}\n"));
        }
        if !self.passed {
            out.push_str(&format!(
                "  replay: cargo run -p conformance --release -- run --file {} --image {image}\n",
                self.file.display()
            ));
        }
        out
    }
}

/// Faults by kind among the steps that ran (not skipped for want of a
/// target, not cut off by a failed run), and how many of them overlapped an
/// earlier fault.
pub fn count_kinds(g: &Generated, r: &RunResult) -> (BTreeMap<FaultKind, usize>, usize) {
    let mut by_kind = BTreeMap::new();
    let mut overlapping = 0;
    for (start, log) in g.starts.iter().zip(&r.steps) {
        if let Some((k, overlaps)) = start {
            if log.ok && !log.not_applicable {
                *by_kind.entry(*k).or_default() += 1;
                overlapping += usize::from(*overlaps);
            }
        }
    }
    (by_kind, overlapping)
}

pub fn figures(
    target: TargetKind,
    g: &Generated,
    r: &RunResult,
    h: &History,
    file: &Path,
) -> Figures {
    let (by_kind, overlapping) = count_kinds(g, r);
    Figures {
        target,
        nodes: r.nodes,
        seed: r.seed,
        file: file.to_path_buf(),
        passed: r.passed,
        by_kind,
        overlapping,
        availability: checkers::availability(h),
        recoveries: checkers::recoveries(h)
            .into_iter()
            .map(|(_, x)| x)
            .collect(),
        lost: checkers::lost_count(h),
        operator_acts: h.operator.len(),
        failed_checks: r
            .checks
            .iter()
            .filter(|c| !c.passed)
            .map(|c| c.name.clone())
            .collect(),
        error: r.error.clone(),
    }
}

/// Runs `minutes` of chaos per target, split evenly between the cluster
/// sizes; writes each schedule, report and history to `opts.out_dir`.
pub async fn run(
    targets: &[TargetKind],
    seed: u64,
    minutes: f64,
    timings: &Timings,
    opts: &RunOptions,
) -> Result<Vec<Figures>> {
    let dir = opts.out_dir.join("chaos");
    std::fs::create_dir_all(&dir)?;
    let mut all = vec![];
    let mut run_no = 0;
    for t in targets {
        for nodes in SIZES {
            run_no += 1;
            let plan = Plan {
                seed,
                nodes,
                duration_ms: (minutes * 60_000.0 / SIZES.len() as f64) as u64,
                backend: t.backend().to_string(),
                timings: timings.clone(),
                quiet_ms: QUIET_MS,
            };
            let g = generate(&plan);
            let file = dir.join(format!("{}.yaml", g.scenario.name));
            std::fs::write(&file, serde_yaml::to_string(&g.scenario)?)?;
            let file = std::fs::canonicalize(&file).unwrap_or(file);
            eprintln!(
                "chaos: {} n={nodes} seed={seed}: schedule {}",
                t,
                file.display()
            );
            let mut o = opts.clone();
            // Real time runs past the planned sleeps (restarts, waits): give
            // the steps twice their plan before the runner cuts them off.
            o.max_scenario = std::time::Duration::from_millis(2 * g.scenario.planned_ms());
            let (r, h) = run_scenario(&g.scenario, *t, seed, &o, run_no).await;
            report::write_run(&dir, &r, &h)?;
            report::log_run(&r);
            let f = figures(*t, &g, &r, &h, &file);
            eprintln!("{}", f.describe(&opts.image));
            all.push(f);
        }
    }
    Ok(all)
}
