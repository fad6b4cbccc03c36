//! `bench-scale`: durable failover (primary-kill) against the size of the
//! data set, per target, with where the time goes (issue 35).
//!
//! Every cell plays the conformance scenario `primary-kill-100mb` with its
//! `load_data` step set to the cell's size and the plan's detection time
//! (heartbeat as [`super::detection::set_detection`] sets it), runs
//! interleaved per seed (size A target 1, size A target 2, ...). kevy's
//! replication trace (`KEVY_DEBUG_REPL_TRACE=1`, compiled into kevy 7) is
//! switched on so that its promotion bump and snapshot ship/load lines
//! date each phase; the figures come from the same history and checkers
//! as every conformance run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicUsize;

use serde::{Deserialize, Serialize};

use super::breakdown::{self, stamp, Phases};
use super::{find_scenario, harness_failed, load_runs, play};
use crate::error::Result;
use crate::history::{History, Ms};
use crate::report::RunResult;
use crate::runner::RunOptions;
use crate::scenario::{Scenario, Step};
use crate::target::TargetKind;

/// The scenario every cell plays, at the cell's size.
pub const SCALE_SCENARIO: &str = "primary-kill-100mb";

/// What one invocation runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScalePlan {
    pub targets: Vec<TargetKind>,
    /// Data set sizes in MB, played in this order.
    pub sizes_mb: Vec<u64>,
    pub runs: u64,
    pub down_after_ms: u64,
}

/// The scenario at one size and the plan's detection time.
pub fn scenario_at(base: &Scenario, mb: u64, down_after_ms: u64) -> Scenario {
    let mut s = base.clone();
    super::detection::set_detection(&mut s.timings, down_after_ms);
    for st in &mut s.steps {
        if let Step::LoadData(l) = st {
            l.mb = mb;
        }
    }
    s.env.insert("KEVY_DEBUG_REPL_TRACE".into(), "1".into());
    s
}

/// The directory of one size's runs.
pub fn size_dir(out: &Path, mb: u64) -> PathBuf {
    out.join(format!("size-{mb}mb"))
}

/// Plays the plan; each run's files go to its size's directory.
pub async fn run(all: &[Scenario], plan: &ScalePlan, opts: &RunOptions) -> Result<()> {
    let base = find_scenario(all, SCALE_SCENARIO)?;
    let run_no = AtomicUsize::new(0);
    for &mb in &plan.sizes_mb {
        let scn = scenario_at(&base, mb, plan.down_after_ms);
        let mut o = opts.clone();
        o.out_dir = size_dir(&opts.out_dir, mb);
        // A size's load bounds the run, not the default limit for short scenarios.
        o.max_scenario = o
            .max_scenario
            .max(std::time::Duration::from_millis(scn.planned_ms() + 120_000));
        for seed in 1..=plan.runs {
            for &t in &plan.targets {
                tracing::info!("bench-scale: {t} at {mb} MB, run {seed}");
                play(&scn, t, seed, &o, &run_no).await?;
            }
        }
    }
    Ok(())
}

/// What a data node's log says happened after the fault, in ms after it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct NodeEvents {
    /// The data node applied its promotion (kevy: the feed generation bump;
    /// Redis: `MASTER MODE enabled`).
    pub promoted: Option<Ms>,
    /// Full syncs this node served as a primary (kevy: `shipping snapshot`;
    /// Redis: `Full resync requested by replica`).
    pub full_served: usize,
    /// Partial resyncs it served (Redis `PSYNC` accepted).
    pub partial_served: usize,
    /// Full syncs this node took as a replica (kevy trace: `snapshot
    /// begin`; Redis: `Full resync from master`).
    pub full_taken: usize,
    /// First sync started as a replica (kevy: `snapshot begin`; Redis:
    /// `MASTER <-> REPLICA sync started`).
    pub sync_started: Option<Ms>,
    /// First sync loaded (kevy: `snapshot end`; Redis: `Finished with
    /// success` or a successful partial resync).
    pub sync_loaded: Option<Ms>,
    /// The primary began / finished shipping its first snapshot (kevy trace).
    pub ship_begin: Option<Ms>,
    pub ship_end: Option<Ms>,
}

/// Markers per event, kevy's and Redis's (every needle of one must match).
const PROMOTED: &[&[&str]] = &[
    &["promoted", "feed generation bumped"],
    &["MASTER MODE enabled"],
];
const FULL_SERVED: &[&[&str]] = &[
    &["shipping snapshot"],
    &["Full resync requested by replica"],
];
const PARTIAL_SERVED: &[&[&str]] = &[&["Partial resynchronization request", "accepted"]];
const FULL_TAKEN: &[&[&str]] = &[&["snapshot begin"], &["Full resync from master"]];
const SYNC_STARTED: &[&[&str]] = &[&["snapshot begin"], &["MASTER <-> REPLICA sync started"]];
const SYNC_LOADED: &[&[&str]] = &[
    &["snapshot end"],
    &["MASTER <-> REPLICA sync: Finished with success"],
    &["Successful partial resynchronization with master"],
];
const SHIP_BEGIN: &[&[&str]] = &[&["ship begin"]];
const SHIP_END: &[&[&str]] = &[&["ship end"]];

fn matches(line: &str, markers: &[&[&str]]) -> bool {
    markers.iter().any(|m| m.iter().all(|n| line.contains(n)))
}

/// A node's events in its log between `from` and `to` (Unix ms); a
/// replica's sync start and load only from `sync_after` ms after `from`
/// (a Redis replica retries the dead primary until it is retargeted).
pub fn node_events(log: &str, from: u64, to: u64, sync_after: Ms) -> NodeEvents {
    let mut e = NodeEvents::default();
    for line in log.lines() {
        let Some(t) = stamp(line) else { continue };
        if t < from || t >= to {
            continue;
        }
        let rel = t - from;
        let first = |slot: &mut Option<Ms>, markers: &[&[&str]]| {
            if slot.is_none() && matches(line, markers) {
                *slot = Some(rel);
            }
        };
        first(&mut e.promoted, PROMOTED);
        if rel >= sync_after {
            first(&mut e.sync_started, SYNC_STARTED);
            first(&mut e.sync_loaded, SYNC_LOADED);
        }
        first(&mut e.ship_begin, SHIP_BEGIN);
        first(&mut e.ship_end, SHIP_END);
        e.full_served += usize::from(matches(line, FULL_SERVED));
        e.partial_served += usize::from(matches(line, PARTIAL_SERVED));
        e.full_taken += usize::from(matches(line, FULL_TAKEN));
    }
    e
}

/// One run's figures.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ScaleRun {
    pub id: String,
    pub size_mb: u64,
    pub target: TargetKind,
    pub started: bool,
    pub error: Option<String>,
    pub lost: usize,
    /// Fault to the first `SET` answered OK on another node.
    pub first_set_ok: Option<Ms>,
    /// Fault to the first write a replica acknowledged there.
    pub durable: Option<Ms>,
    /// The electors' phases (ours only).
    #[serde(skip)]
    pub phases: Option<Phases>,
    /// The node that took over (the first one a write succeeded on).
    pub new_primary: Option<String>,
    /// Per surviving node, from the fault until the old primary's restart.
    pub nodes: BTreeMap<String, NodeEvents>,
    /// The `load_data` step's note (keys, load and acknowledgement time).
    pub load_note: String,
}

/// The first `SET` answered OK after `at` on a node other than `old`.
fn first_set_ok(h: &History, at: Ms, old: Option<&str>) -> Option<(Ms, String)> {
    h.writes
        .iter()
        .filter(|w| Some(w.node.as_str()) != old)
        .filter_map(|w| Some((w.set_ok_ms?, w.node.clone())))
        .filter(|(t, _)| *t >= at)
        .min()
        .map(|(t, n)| (t - at, n))
}

/// A run's figures from its result, history and saved logs in `dir`.
pub fn figures(dir: &Path, size_mb: u64, r: &RunResult, h: &History) -> Option<ScaleRun> {
    let target = r.target.parse::<TargetKind>().ok()?;
    let mut out = ScaleRun {
        id: r.id(),
        size_mb,
        target,
        started: !harness_failed(r),
        error: r.error.clone(),
        lost: r.metrics.lost_acknowledged,
        first_set_ok: None,
        durable: r.metrics.failover_ms,
        phases: None,
        new_primary: None,
        nodes: BTreeMap::new(),
        load_note: r
            .steps
            .iter()
            .find(|s| s.label.starts_with("load_data"))
            .map(|s| s.note.clone())
            .unwrap_or_default(),
    };
    let Some(fault) = h.faults.iter().find(|f| f.removes_primary) else {
        return Some(out);
    };
    if let Some((t, n)) = first_set_ok(h, fault.at_ms, fault.primary_before.as_deref()) {
        out.first_set_ok = Some(t);
        out.new_primary = Some(n);
    }
    let logs: BTreeMap<String, String> = h
        .nodes
        .iter()
        .filter_map(|n| {
            let text = std::fs::read_to_string(dir.join(format!("{}.{n}.log", r.id()))).ok()?;
            Some((n.clone(), text))
        })
        .collect();
    if target.is_elector() {
        out.phases = breakdown::phases(r, h, &logs);
    }
    if h.start_unix_ms > 0 {
        let from = h.start_unix_ms + fault.at_ms;
        // Until the killed node came back: its own resync is not the failover's.
        let to = h
            .faults
            .iter()
            .filter(|f| f.at_ms > fault.at_ms)
            .map(|f| f.at_ms)
            .chain(fault.end_ms)
            .chain(
                r.steps
                    .iter()
                    .filter(|s| s.label.starts_with("restart"))
                    .map(|s| s.at_ms),
            )
            .filter(|&t| t > fault.at_ms)
            .min()
            .map_or(u64::MAX, |t| h.start_unix_ms + t);
        let survivors = logs.iter().filter(|(n, _)| !fault.nodes.contains(*n));
        for (n, log) in survivors.clone() {
            out.nodes.insert(n.clone(), node_events(log, from, to, 0));
        }
        // Replicas' syncs count from the new primary's promotion on.
        let promoted = out
            .new_primary
            .as_ref()
            .and_then(|np| out.nodes.get(np))
            .and_then(|e| e.promoted);
        if let Some(p) = promoted {
            for (n, log) in survivors {
                if Some(n) != out.new_primary.as_ref() {
                    out.nodes.insert(n.clone(), node_events(log, from, to, p));
                }
            }
        }
    }
    Some(out)
}

/// Every run stored under `out`, per size, as figures.
pub fn load_all(out: &Path, plan: &ScalePlan) -> Result<Vec<ScaleRun>> {
    let mut v = vec![];
    for &mb in &plan.sizes_mb {
        let dir = size_dir(out, mb);
        if !dir.is_dir() {
            continue;
        }
        for (r, h) in load_runs(&dir)? {
            v.extend(figures(&dir, mb, &r, &h));
        }
    }
    Ok(v)
}

/// The cells with nothing to show (no started run, or no durable failover
/// in any run): the bench fails rather than publish a blank row.
pub fn empty_cells(runs: &[ScaleRun], plan: &ScalePlan) -> Vec<String> {
    let mut out = vec![];
    for &mb in &plan.sizes_mb {
        for &t in &plan.targets {
            let cell: Vec<&ScaleRun> = runs
                .iter()
                .filter(|r| r.size_mb == mb && r.target == t && r.started)
                .collect();
            if cell.iter().all(|r| r.durable.is_none()) {
                out.push(format!(
                    "{t} at {mb} MB: {} runs, none with an acknowledged write after the fault",
                    cell.len()
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cell_sets_the_load_size_the_detection_and_kevys_trace() {
        let all = Scenario::load_dir(&crate::suite::default_scenario_dir()).unwrap();
        let base = find_scenario(&all, SCALE_SCENARIO).unwrap();
        let s = scenario_at(&base, 1000, 500);
        assert!(s
            .steps
            .iter()
            .any(|st| matches!(st, Step::LoadData(l) if l.mb == 1000)));
        assert_eq!(
            (s.timings.down_after_ms, s.timings.hb_interval_ms),
            (500, 50)
        );
        assert_eq!(s.env["KEVY_DEBUG_REPL_TRACE"], "1");
        assert!(
            s.planned_ms() > 1_000_000,
            "a 1 GB load's bound is in the run's limit"
        );
    }

    #[test]
    fn kevy_and_redis_log_lines_date_promotion_and_syncs_and_count_full_syncs() {
        let from = 1_764_042_660_000; // 2025-11-25T03:51:00Z
        let kevy = "2025-11-25T03:50:59.000000000Z kevy: replica fd 9 generation 1 != feed generation 2 (sent_offset 0); shipping snapshot\n\
            2025-11-25T03:51:01.000000000Z kevy: shard 0 promoted — replication feed generation bumped to 3\n\
            2025-11-25T03:51:01.200000000Z kevy: [repltrace t=1] shard 0 fd 12 ship begin: gen 3 ack_offset 0\n\
            2025-11-25T03:51:01.300000000Z kevy: replica fd 12 generation 2 != feed generation 3 (sent_offset 5); shipping snapshot\n\
            2025-11-25T03:51:02.500000000Z kevy: [repltrace t=1] shard 0 fd 12 ship end: gen 3 ack_offset 0\n";
        let e = node_events(kevy, from, u64::MAX, 0);
        assert_eq!(e.promoted, Some(1000));
        assert_eq!((e.ship_begin, e.ship_end), (Some(1200), Some(2500)));
        assert_eq!(
            e.full_served, 1,
            "the line before the fault is not this failover's"
        );
        let redis = "2025-11-25T03:51:01.000000000Z 1:S 25 Nov 2025 03:51:01.000 * MASTER <-> REPLICA sync started\n\
            2025-11-25T03:51:01.100000000Z 1:S 25 Nov 2025 03:51:01.100 * Successful partial resynchronization with master.\n\
            2025-11-25T03:51:09.000000000Z 1:S 25 Nov 2025 03:51:09.000 * Full resync from master: x:1\n";
        let e = node_events(redis, from, from + 5000, 0);
        assert_eq!((e.sync_started, e.sync_loaded), (Some(1000), Some(1100)));
        let late = node_events(redis, from, from + 5000, 1050);
        assert_eq!(
            (late.sync_started, late.sync_loaded),
            (None, Some(1100)),
            "before the promotion: a retry toward the dead primary"
        );
        assert_eq!(
            e.full_taken, 0,
            "after the window: the old primary's return"
        );
    }
}
