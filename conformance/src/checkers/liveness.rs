//! Liveness and availability over a whole run (chaos runs, issue 21).
//!
//! **Liveness**: after every quiet phase begins (every fault healed, stopped
//! nodes started again), some primary acknowledges a durable write (`SET` +
//! `WAIT quorum-1`) within [`liveness_bound_ms`]. **Availability**: the share
//! of one-second buckets of the writing period in which at least one write
//! was acknowledged. Both report their figures as notes; only liveness can
//! fail a run (availability under a chosen fault mix has no right answer).

use super::{CheckResult, Violation};
use crate::history::{History, Ms, Outcome};

/// What bringing stopped containers back may take before the elector runs:
/// `docker start`, the entrypoint, the data node loading its AOF (or a wiped
/// one asking for a full sync). Measured at 1-3 s on the lab machine; the
/// allowance leaves room for a loaded CI host.
pub const RESTART_ALLOWANCE_MS: u64 = 8_000;

/// The liveness bound: an old primary's lease runs out (`lease_ms`), an
/// election completes (`election_bound_ms`: down_after + election timeout +
/// backoff + slack), after the restart allowance.
pub fn liveness_bound_ms(h: &History) -> Ms {
    h.lease_ms + h.election_bound_ms + RESTART_ALLOWANCE_MS
}

/// For each quiet phase: when its recovery is measured from (its start, or
/// the last act of the operator in it: the protocol left that phase to a
/// human, §6.10) and how long until the first acknowledged write completed
/// (None: none before the next quiet phase or the writers' stop).
pub fn recoveries(h: &History) -> Vec<(Ms, Option<Ms>)> {
    let acks = h.ack_times();
    let stop = h.writers_stopped_ms.unwrap_or(h.end_ms);
    h.quiet_ms
        .iter()
        .enumerate()
        .filter(|(_, &q)| q < stop)
        .map(|(i, &q)| {
            let until = h.quiet_ms.get(i + 1).copied().unwrap_or(stop).min(stop);
            let from = h
                .operator
                .iter()
                .map(|a| a.at_ms)
                .filter(|&at| at >= q && at < until)
                .max()
                .unwrap_or(q);
            let first = acks.iter().find(|&&a| a >= from && a <= until);
            (from, first.map(|a| a - from))
        })
        .collect()
}

pub fn liveness_after_quiet(h: &History) -> CheckResult {
    const NAME: &str = "liveness_after_quiet";
    if h.quiet_ms.is_empty() {
        return CheckResult::skipped(NAME, "no quiet phases");
    }
    let bound = liveness_bound_ms(h);
    let rec = recoveries(h);
    let mut violations = vec![];
    let mut times: Vec<Ms> = vec![];
    for (q, r) in &rec {
        match r {
            Some(ms) if *ms <= bound => times.push(*ms),
            Some(ms) => {
                times.push(*ms);
                violations.push(Violation::window(
                    format!("first acknowledged write {ms} ms after the quiet phase began (bound {bound} ms)"),
                    *q,
                    q + ms,
                    vec![],
                ));
            }
            None => violations.push(Violation::window(
                "no acknowledged write in the quiet phase",
                *q,
                *q,
                vec![],
            )),
        }
    }
    times.sort_unstable();
    let mut notes = vec![format!(
        "recovery after {} quiet phases: median {} ms, worst {} ms, all {:?} (bound {bound} ms)",
        rec.len(),
        median(&times).map_or("-".into(), |m| m.to_string()),
        times.last().map_or("-".into(), |m| m.to_string()),
        times
    )];
    if !h.operator.is_empty() {
        let acts: Vec<String> = h
            .operator
            .iter()
            .map(|a| format!("{} at {} ms", a.node, a.at_ms))
            .collect();
        notes.push(format!(
            "the operator accepted data loss {} times (§6.10), each on a node holding every acknowledged write: {}; those phases' recovery counts from the act",
            acts.len(),
            acts.join(", ")
        ));
    }
    CheckResult::new(NAME, violations, notes)
}

/// The share of one-second buckets between the first write and the writers'
/// stop in which some write was acknowledged (0.0 ..= 1.0).
pub fn availability(h: &History) -> Option<f64> {
    let start = h.writes.iter().map(|w| w.invoke_ms).min()?;
    let stop = h.writers_stopped_ms.unwrap_or(h.end_ms);
    let buckets = (stop.saturating_sub(start) / 1000).max(1) as usize;
    let mut hit = vec![false; buckets];
    for w in h.writes.iter().filter(|w| w.outcome == Outcome::Ok) {
        let b = (w.complete_ms.saturating_sub(start) / 1000) as usize;
        if b < buckets {
            hit[b] = true;
        }
    }
    Some(hit.iter().filter(|x| **x).count() as f64 / buckets as f64)
}

pub fn availability_note(h: &History) -> CheckResult {
    const NAME: &str = "availability";
    match availability(h) {
        Some(a) if !h.quiet_ms.is_empty() => CheckResult::new(
            NAME,
            vec![],
            vec![format!(
                "{:.1} % of seconds had an acknowledged write",
                a * 100.0
            )],
        ),
        _ => CheckResult::skipped(NAME, "measured in chaos runs (quiet phases) only"),
    }
}

pub fn median(sorted: &[Ms]) -> Option<Ms> {
    (!sorted.is_empty()).then(|| sorted[sorted.len() / 2])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::fixtures::history;
    use crate::history::WriteOp;

    fn ack(at: Ms) -> WriteOp {
        WriteOp {
            writer: 0,
            key: format!("k{at}"),
            value: "v".into(),
            node: "n1".into(),
            invoke_ms: at.saturating_sub(5),
            complete_ms: at,
            set_ok_ms: None,
            outcome: Outcome::Ok,
            replicas: Some(1),
            error: None,
        }
    }

    #[test]
    fn recovery_is_the_first_acknowledged_write_after_each_quiet_phase_begins() {
        let mut h = history(3);
        h.writes = vec![ack(1_000), ack(12_500), ack(13_000), ack(40_200)];
        h.quiet_ms = vec![10_000, 40_000];
        h.writers_stopped_ms = Some(50_000);
        assert_eq!(
            recoveries(&h),
            vec![(10_000, Some(2_500)), (40_000, Some(200))]
        );
        let c = liveness_after_quiet(&h);
        assert!(c.passed, "{c:?}");
        assert!(
            c.notes[0].contains("median 2500 ms, worst 2500 ms"),
            "{c:?}"
        );
    }

    #[test]
    fn a_quiet_phase_without_a_timely_acknowledged_write_fails_liveness() {
        let mut h = history(3);
        let bound = liveness_bound_ms(&h);
        h.writes = vec![ack(10_000 + bound + 1)];
        h.quiet_ms = vec![10_000, 60_000];
        h.writers_stopped_ms = Some(90_000);
        let c = liveness_after_quiet(&h);
        assert!(!c.passed);
        assert_eq!(c.violations.len(), 2, "{c:?}");
    }

    #[test]
    fn a_phase_left_to_the_operator_recovers_from_the_operators_act_and_says_so() {
        let mut h = history(3);
        let bound = liveness_bound_ms(&h);
        // Stuck below the floors for longer than the bound, then the
        // operator accepts the loss on a holder and a write follows 900 ms
        // later; the other phase has no act and counts from its start.
        let act = 10_000 + bound + 5_000;
        h.writes = vec![ack(act + 900), ack(70_300)];
        h.quiet_ms = vec![10_000, 70_000];
        h.operator = vec![crate::history::OperatorAct {
            at_ms: act,
            node: "n2".into(),
            acknowledged: 40,
        }];
        h.writers_stopped_ms = Some(90_000);
        assert_eq!(recoveries(&h), vec![(act, Some(900)), (70_000, Some(300))]);
        let c = liveness_after_quiet(&h);
        assert!(c.passed, "{c:?}");
        assert!(
            c.notes
                .iter()
                .any(|n| n.contains("operator accepted data loss 1 times")
                    && n.contains(&format!("n2 at {act} ms"))),
            "{c:?}"
        );
        // Without the act the same history fails: the act is what moved it.
        h.operator.clear();
        assert!(!liveness_after_quiet(&h).passed);
    }

    #[test]
    fn availability_counts_seconds_with_an_acknowledged_write() {
        let mut h = history(3);
        let mut w = vec![ack(100), ack(1_100), ack(3_900)];
        w.push(WriteOp {
            outcome: Outcome::Fail,
            ..ack(2_500)
        });
        h.writes = w;
        h.writers_stopped_ms = Some(4_095);
        // Buckets 0..4 from the first invoke (95 ms): hits in 0, 1 and 3.
        assert_eq!(availability(&h), Some(0.75));
    }
}
