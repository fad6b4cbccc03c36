//! Durable write latency in containers, per target (issue 22 item 3): the
//! conformance writers (`SET` then `WAIT quorum-1 1000`, no pause between
//! writes) on an idle 3-node cluster, 1 and 16 clients, each finding the
//! primary the way the target's clients do. The loopback figure
//! (`just bench-writes`) has no peers and no Docker port forwarding; this
//! one has both, so a peer's and our figures are taken the same way.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicUsize;

use super::{find_scenario, harness_failed, play, SOAK_SCENARIO};
use crate::error::Result;
use crate::history::{History, Ms, Outcome};
use crate::report::RunResult;
use crate::runner::RunOptions;
use crate::scenario::{Dur, Expect, Scenario, Step};
use crate::target::TargetKind;

/// Client counts measured.
pub const CLIENTS: [u32; 2] = [1, 16];

/// Name prefix of the write-latency runs; the client count follows.
const PREFIX: &str = "durable-writes-";

/// Writes in the first second after the writers start are left out: they
/// include each client's connection setup and primary discovery.
const WARMUP_MS: Ms = 1000;

/// The write-latency scenario for `clients` writers over `secs` seconds:
/// the soak's cluster and settings, no fault.
pub fn scenario(all: &[Scenario], clients: u32, secs: u64) -> Result<Scenario> {
    let mut s = find_scenario(all, SOAK_SCENARIO)?;
    s.name = format!("{PREFIX}{clients}");
    s.description = format!("{clients} writer(s), SET then WAIT quorum-1 1000, no fault");
    s.tags = vec!["bench".into()];
    s.workload.writers = clients;
    s.workload.readers = 0;
    s.workload.think_ms = 0;
    s.workload.wait_timeout_ms = 1000;
    s.workload.max_ops_per_writer = u64::MAX;
    s.steps = vec![
        Step::WaitPrimary(Dur(60_000)),
        Step::StartWriters,
        Step::Sleep(Dur(secs * 1000 + WARMUP_MS)),
    ];
    s.expect = Expect {
        failover: Some(false),
        ..Expect::default()
    };
    Ok(s)
}

/// Plays both client counts on every target of `targets`, one run at a
/// time, into `opts.out_dir`; runs already stored there are kept.
pub async fn measure(
    all: &[Scenario],
    targets: &[TargetKind],
    secs: u64,
    opts: &RunOptions,
) -> Result<()> {
    let done: Vec<(String, String)> = super::load_runs(&opts.out_dir)
        .unwrap_or_default()
        .into_iter()
        .filter(|(r, _)| !harness_failed(r) && r.error.is_none())
        .map(|(r, _)| (r.scenario, r.target))
        .collect();
    let run_no = AtomicUsize::new(0);
    for clients in CLIENTS {
        let scn = scenario(all, clients, secs)?;
        for &t in targets {
            if done.contains(&(scn.name.clone(), t.name().to_string())) {
                continue;
            }
            play(&scn, t, 1, opts, &run_no).await?;
        }
    }
    Ok(())
}

/// Figures of one target at one client count.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WriteStats {
    /// Round trips (`SET` invoke to `WAIT` answer) of acknowledged writes, ms.
    pub acked: Vec<Ms>,
    /// Writes whose `WAIT` saw no replica acknowledgement (or failed).
    pub not_acked: usize,
    /// Length of the measured window, ms.
    pub window_ms: Ms,
}

impl WriteStats {
    /// (p50, p99) by nearest rank.
    pub fn percentiles(&self) -> Option<(Ms, Ms)> {
        let mut v = self.acked.clone();
        v.sort_unstable();
        let at = |q: f64| {
            let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
            v[rank - 1]
        };
        (!v.is_empty()).then(|| (at(0.5), at(0.99)))
    }

    /// Acknowledged writes per second over the window.
    pub fn acked_per_s(&self) -> f64 {
        if self.window_ms == 0 {
            return 0.0;
        }
        self.acked.len() as f64 * 1000.0 / self.window_ms as f64
    }
}

/// The client count of a write-latency run, from its scenario name.
pub fn clients_of(r: &RunResult) -> Option<u32> {
    r.scenario.strip_prefix(PREFIX)?.parse().ok()
}

/// One run's figures: writes invoked from the end of the warm-up to the
/// last write's answer.
pub fn run_stats(h: &History) -> WriteStats {
    let Some(first) = h.writes.iter().map(|w| w.invoke_ms).min() else {
        return WriteStats::default();
    };
    let from = first + WARMUP_MS;
    let mine: Vec<_> = h.writes.iter().filter(|w| w.invoke_ms >= from).collect();
    let to = mine.iter().map(|w| w.complete_ms).max().unwrap_or(from);
    WriteStats {
        acked: mine
            .iter()
            .filter(|w| w.outcome == Outcome::Ok)
            .map(|w| w.complete_ms.saturating_sub(w.invoke_ms))
            .collect(),
        not_acked: mine.iter().filter(|w| w.outcome != Outcome::Ok).count(),
        window_ms: to.saturating_sub(from),
    }
}

/// Per (target, clients) figures of the write-latency runs among `runs`.
pub fn stats(runs: &[(RunResult, History)]) -> BTreeMap<(TargetKind, u32), WriteStats> {
    let mut m: BTreeMap<(TargetKind, u32), WriteStats> = BTreeMap::new();
    for (r, h) in runs.iter().filter(|(r, _)| !harness_failed(r)) {
        let (Some(c), Ok(t)) = (clients_of(r), r.target.parse::<TargetKind>()) else {
            continue;
        };
        let x = run_stats(h);
        let e = m.entry((t, c)).or_default();
        e.acked.extend(x.acked);
        e.not_acked += x.not_acked;
        e.window_ms += x.window_ms;
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::WriteOp;

    fn write(invoke_ms: Ms, complete_ms: Ms, outcome: Outcome) -> WriteOp {
        WriteOp {
            writer: 0,
            key: format!("w:0:{invoke_ms}"),
            value: String::new(),
            node: "n1".into(),
            invoke_ms,
            complete_ms,
            set_ok_ms: None,
            outcome,
            replicas: None,
            error: None,
        }
    }

    #[test]
    fn the_write_scenario_runs_the_asked_writers_back_to_back_without_a_fault() {
        let all = Scenario::load_dir(&crate::suite::default_scenario_dir()).unwrap();
        let s = scenario(&all, 16, 10).unwrap();
        assert_eq!((s.workload.writers, s.workload.think_ms), (16, 0));
        assert_eq!(s.workload.wait_timeout_ms, 1000);
        assert!(s.steps.iter().all(|st| matches!(
            st,
            Step::WaitPrimary(_) | Step::StartWriters | Step::Sleep(_)
        )));
        assert_eq!(s.steps.last(), Some(&Step::Sleep(Dur(11_000))));
    }

    #[test]
    fn write_figures_leave_out_the_first_second_and_count_unacknowledged_writes() {
        let h = History {
            writes: vec![
                write(100, 900, Outcome::Ok),
                write(1100, 1200, Outcome::Ok),
                write(1200, 1300, Outcome::Ok),
                write(1300, 2300, Outcome::NotAcked),
                write(2300, 3100, Outcome::Ok),
            ],
            ..History::default()
        };
        let x = run_stats(&h);
        assert_eq!(x.acked, vec![100, 100, 800]);
        assert_eq!((x.not_acked, x.window_ms), (1, 2000));
        assert_eq!(x.percentiles(), Some((100, 800)));
        assert!((x.acked_per_s() - 1.5).abs() < 1e-9);
    }
}
