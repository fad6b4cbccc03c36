//! Figures measured from a history: failover time, write unavailability, counts.

use serde::{Deserialize, Serialize};

use crate::checkers::CheckResult;
use crate::history::{History, Ms, Outcome};

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Metrics {
    pub writes: usize,
    pub acknowledged: usize,
    pub not_acknowledged: usize,
    pub failed: usize,
    pub unknown: usize,
    /// First primary-removing fault to the first acknowledged write on another node.
    pub failover_ms: Option<Ms>,
    /// First primary-removing fault to the first sample showing another writable primary.
    pub election_ms: Option<Ms>,
    /// First primary-removing fault to the first `SET` another node answered
    /// OK, acknowledged or not, at the `SET`'s answer (before its `WAIT`):
    /// when clients had found the new primary and it took writes; the
    /// failover figure where no replica is left to acknowledge (two data
    /// nodes and a witness, docs/protocol.md §4.5). Histories from before
    /// `set_ok_ms` fall back to the write's completion.
    #[serde(default)]
    pub first_write_ms: Option<Ms>,
    /// Longest time without an acknowledged write while writers ran (from their first
    /// attempt to their stop).
    pub max_write_gap_ms: Option<Ms>,
    pub lost_acknowledged: usize,
    pub violations: usize,
}

pub fn compute(h: &History, checks: &[CheckResult]) -> Metrics {
    let count = |o: Outcome| h.writes.iter().filter(|w| w.outcome == o).count();
    let mut m = Metrics {
        writes: h.writes.len(),
        acknowledged: count(Outcome::Ok),
        not_acknowledged: count(Outcome::NotAcked),
        failed: count(Outcome::Fail),
        unknown: count(Outcome::Unknown),
        lost_acknowledged: crate::checkers::lost_count(h),
        violations: checks.iter().map(|c| c.violations.len()).sum(),
        ..Default::default()
    };
    if let Some(f) = h.first_primary_fault() {
        let old = f.primary_before.as_deref().unwrap_or("");
        m.failover_ms = h
            .writes
            .iter()
            .filter(|w| w.outcome == Outcome::Ok && w.node != old && w.complete_ms >= f.at_ms)
            .map(|w| w.complete_ms - f.at_ms)
            .min();
        m.first_write_ms = h
            .writes
            .iter()
            .filter(|w| matches!(w.outcome, Outcome::Ok | Outcome::NotAcked))
            .filter(|w| w.node != old)
            .map(|w| w.set_ok_ms.unwrap_or(w.complete_ms))
            .filter(|&t| t >= f.at_ms)
            .map(|t| t - f.at_ms)
            .min();
        m.election_ms = h
            .sampled_primary_intervals()
            .iter()
            .filter(|(n, _)| n.as_str() != old)
            .flat_map(|(_, l)| l.iter().filter(|i| i.end > f.at_ms))
            .map(|i| i.start.max(f.at_ms) - f.at_ms)
            .min();
    }
    let acks = h.ack_times();
    // From the first write the writers attempted (so an initial stretch without
    // acknowledgements counts too).
    let first_invoke = h.writes.iter().map(|w| w.invoke_ms).min();
    if let (Some(first), false) = (first_invoke, acks.is_empty()) {
        let stop = h
            .writers_stopped_ms
            .unwrap_or(*acks.last().unwrap_or(&first));
        let mut prev = first;
        let mut gap = 0;
        for &t in acks.iter().chain(std::iter::once(&stop)) {
            gap = gap.max(t.saturating_sub(prev));
            prev = prev.max(t);
        }
        m.max_write_gap_ms = Some(gap);
    }
    m
}

/// Median and 95th percentile (nearest rank) of a list of values.
pub fn median_p95(values: &[Ms]) -> Option<(Ms, Ms)> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_unstable();
    let rank = |p: f64| {
        let r = (p * v.len() as f64).ceil() as usize;
        v[r.clamp(1, v.len()) - 1]
    };
    Some((rank(0.5), rank(0.95)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::fixtures::*;
    use crate::history::WriteOp;

    #[test]
    fn failover_time_runs_from_the_fault_to_the_first_ack_elsewhere() {
        let mut h = history(3);
        steady(&mut h, "n1", "primary", 1, 0, 1000);
        steady(&mut h, "n2", "primary", 2, 2600, 4000);
        h.faults.push(primary_kill(1000));
        h.writes.push(write("n1", "a", 900, Outcome::Ok));
        h.writes.push(write("n2", "b", 2700, Outcome::Fail));
        h.writes.push(write("n2", "c", 2800, Outcome::Ok));
        h.writers_stopped_ms = Some(3000);
        let m = compute(&h, &[]);
        assert_eq!(m.failover_ms, Some(1805));
        assert_eq!(m.election_ms, Some(1600));
        assert_eq!(m.max_write_gap_ms, Some(2805 - 905));
        assert_eq!((m.acknowledged, m.failed), (2, 1));
    }

    #[test]
    fn the_first_write_elsewhere_counts_at_the_sets_answer_not_at_its_wait() {
        let mut h = history(3);
        h.faults.push(primary_kill(1000));
        // Taken at 1400, acknowledged by a replica at 1650.
        h.writes.push(WriteOp {
            set_ok_ms: Some(1400),
            complete_ms: 1650,
            ..write("n2", "a", 1390, Outcome::Ok)
        });
        let m = compute(&h, &[]);
        assert_eq!(m.first_write_ms, Some(400), "the SET's answer");
        assert_eq!(m.failover_ms, Some(650), "the WAIT's answer");
    }

    #[test]
    fn percentiles_use_the_nearest_rank() {
        assert_eq!(median_p95(&[]), None);
        assert_eq!(median_p95(&[5]), Some((5, 5)));
        let v: Vec<Ms> = (1..=20).collect();
        assert_eq!(median_p95(&v), Some((10, 19)));
    }
}
