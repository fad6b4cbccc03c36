//! Elections: a majority elects within the bound, a minority never does, the primary
//! stays put when no failover is expected, and a 2-node cluster never fails over.

use super::{CheckResult, Violation};
use crate::history::{History, Interval, Ms};
use crate::scenario::Expect;

fn intersect(list: &[Interval], from: Ms, to: Ms) -> Vec<Interval> {
    list.iter()
        .filter(|i| i.end > from && i.start < to)
        .map(|i| Interval {
            start: i.start.max(from),
            end: i.end.min(to),
        })
        .collect()
}

/// After the first fault that takes the primary away from a majority, some node of that
/// majority must be a writable primary within `election_bound_ms` (down_after + bound).
/// A majority member whose state directory is read-only then can neither vote nor stand
/// (a vote is durable first, protocol §5.2): the bound counts from its disk's return.
pub fn majority_elects(h: &History, expect: &Expect) -> CheckResult {
    const NAME: &str = "majority_elects_within_bound";
    if expect.failover != Some(true) {
        return CheckResult::skipped(NAME, "scenario does not expect a failover");
    }
    let Some(f) = h.first_primary_fault() else {
        return CheckResult::new(
            NAME,
            vec![Violation::msg(
                "a failover was expected but no fault removed the primary",
            )],
            vec![],
        );
    };
    let old = f.primary_before.clone().unwrap_or_default();
    let candidates: Vec<&String> = if f.majority.is_empty() {
        h.nodes.iter().filter(|n| **n != old).collect()
    } else {
        f.majority.iter().filter(|n| **n != old).collect()
    };
    let from = disks_back(h, f.at_ms, &candidates);
    let sampled = h.sampled_primary_intervals();
    let first = candidates
        .iter()
        .filter_map(|n| {
            sampled.get(n.as_str()).and_then(|list| {
                list.iter()
                    .filter(|i| i.end > f.at_ms)
                    .map(|i| (i.start.max(f.at_ms), n.to_string()))
                    .next()
            })
        })
        .min();
    match first {
        None => CheckResult::new(
            NAME,
            vec![Violation::window(
                format!(
                    "no new primary among {} after `{}` (old primary {old})",
                    candidates
                        .iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(","),
                    f.label
                ),
                f.at_ms,
                h.end_ms,
                vec![],
            )],
            vec![],
        ),
        Some((t, node)) => {
            let took = t.saturating_sub(from);
            let mut note = format!(
                "{node} became primary {} ms after `{}`",
                t - f.at_ms,
                f.label
            );
            if from > f.at_ms {
                note += &format!(
                    ", {took} ms after the majority's state directories were writable again"
                );
            }
            if took > h.election_bound_ms {
                CheckResult::new(
                    NAME,
                    vec![Violation::window(
                        format!("{note}: later than the {} ms bound", h.election_bound_ms),
                        f.at_ms,
                        t,
                        vec![node],
                    )],
                    vec![],
                )
            } else {
                CheckResult::new(NAME, vec![], vec![note])
            }
        }
    }
}

/// When the last `read_only_state` fault on one of `members` that was in force at `at`
/// ended (`at` if none was).
fn disks_back(h: &History, at: Ms, members: &[&String]) -> Ms {
    h.faults
        .iter()
        .filter(|f| f.kind == "read_only_state" && f.at_ms <= at)
        .filter(|f| f.nodes.iter().any(|n| members.contains(&n)))
        .filter_map(|f| match f.end_ms {
            Some(end) if end > at => Some(end),
            Some(_) => None,
            None => Some(h.end_ms),
        })
        .fold(at, Ms::max)
}

/// While a partition lasts, no node on a minority side is a writable primary; a minority
/// node that was the primary when the partition began must stop within the lease.
pub fn minority_never_elects(h: &History) -> CheckResult {
    const NAME: &str = "minority_never_elects";
    if h.partitions.iter().all(|p| p.minority.is_empty()) {
        return CheckResult::skipped(NAME, "no partition with a minority side");
    }
    let writable = h.writable_intervals();
    let sampled = h.sampled_primary_intervals();
    let mut violations = vec![];
    for p in &h.partitions {
        let end = p.end_ms.unwrap_or(h.end_ms);
        for m in &p.minority {
            // The epoch the node last claimed primary in before the
            // partition. A node frozen (docker pause) when the partition
            // began has no fresh sample then, but it did not elect: waking
            // up, it still claims that old epoch until it learns better
            // (found by a chaos run: pause the primary, then split it off).
            let held_epoch = h
                .samples
                .iter()
                .filter(|s| &s.node == m && s.at_ms < p.start_ms)
                .filter_map(|s| s.elector.as_ref())
                .filter(|e| e.role == "primary")
                .map(|e| e.epoch)
                .next_back();
            let was_primary = sampled.get(m).is_some_and(|l| {
                l.iter()
                    .any(|i| i.start <= p.start_ms && i.end > p.start_ms)
            }) || (held_epoch.is_some()
                && h.samples
                    .iter()
                    .rfind(|s| &s.node == m && s.at_ms < p.start_ms && s.elector.is_some())
                    .and_then(|s| s.elector.as_ref())
                    .is_some_and(|e| e.role == "primary"));
            // A minority old primary gets the lease plus one sample's validity (the
            // poller's granularity) to fence itself.
            let from = if was_primary {
                p.start_ms + h.lease_ms + h.sample_validity_ms()
            } else {
                p.start_ms
            };
            // Electing at all on a minority side is a violation, fenced or not.
            if !was_primary {
                let claim = h.samples.iter().find(|s| {
                    &s.node == m
                        && s.at_ms >= p.start_ms
                        && s.at_ms < end
                        && s.elector.as_ref().is_some_and(|e| {
                            e.role == "primary" && held_epoch.is_none_or(|held| e.epoch > held)
                        })
                });
                if let Some(s) = claim {
                    let epoch = s.elector.as_ref().map_or(0, |e| e.epoch);
                    violations.push(Violation::window(
                        format!(
                            "{m} on the minority side of `{}` claimed primary (epoch {epoch}) at {} ms",
                            p.label, s.at_ms
                        ),
                        s.at_ms,
                        s.at_ms,
                        vec![m.clone()],
                    ));
                }
            }
            if from >= end {
                continue;
            }
            let list = writable.get(m).map(|v| v.as_slice()).unwrap_or(&[]);
            for i in intersect(list, from, end) {
                let what = if was_primary {
                    "stayed a writable primary past the lease"
                } else {
                    "became a writable primary"
                };
                violations.push(Violation::window(
                    format!(
                        "{m} on the minority side of `{}` {what} ({} ms to {} ms)",
                        p.label, i.start, i.end
                    ),
                    i.start,
                    i.end,
                    vec![m.clone()],
                ));
            }
        }
    }
    CheckResult::new(NAME, violations, vec![])
}

fn others_writable(h: &History, name: &str, why: &str) -> CheckResult {
    let Some(initial) = &h.initial_primary else {
        return CheckResult::new(name, vec![Violation::msg("no initial primary")], vec![]);
    };
    let mut violations = vec![];
    for (node, list) in h.writable_intervals() {
        if &node == initial {
            continue;
        }
        for i in list {
            violations.push(Violation::window(
                format!(
                    "{node} was a writable primary from {} ms to {} ms ({why}; primary was {initial})",
                    i.start, i.end
                ),
                i.start,
                i.end,
                vec![node.clone()],
            ));
        }
    }
    CheckResult::new(name, violations, vec![])
}

/// When no failover is expected, only the initial primary is ever writable.
pub fn primary_stable(h: &History, expect: &Expect) -> CheckResult {
    const NAME: &str = "primary_unchanged";
    if expect.failover != Some(false) {
        return CheckResult::skipped(NAME, "scenario allows a failover");
    }
    others_writable(h, NAME, "no failover expected")
}

/// A 2-node cluster (quorum 2) never fails over: while a fault lasts, no node but the
/// primary from before the fault is a writable primary. (Once both nodes are back, an
/// ordinary election may pick either.)
pub fn n2_never_fails_over(h: &History) -> CheckResult {
    const NAME: &str = "n2_never_fails_over";
    if h.nodes.len() != 2 {
        return CheckResult::skipped(NAME, "not a 2-node cluster");
    }
    let writable = h.sampled_primary_intervals();
    let mut violations = vec![];
    for f in &h.faults {
        let Some(before) = f.primary_before.as_deref().or(h.initial_primary.as_deref()) else {
            continue;
        };
        let end = f.end_ms.unwrap_or(h.end_ms);
        for (node, list) in &writable {
            if node == before {
                continue;
            }
            for i in intersect(list, f.at_ms, end) {
                violations.push(Violation::window(
                    format!(
                        "{node} became a writable primary during `{}` ({} ms to {} ms): N=2 must not fail over",
                        f.label, i.start, i.end
                    ),
                    i.start,
                    i.end,
                    vec![node.clone()],
                ));
            }
        }
    }
    CheckResult::new(NAME, violations, vec![])
}

/// A witness never becomes primary (docs/protocol.md §4.5): no sample ever
/// shows a witness's elector claiming the role.
pub fn witness_never_primary(h: &History) -> CheckResult {
    const NAME: &str = "witness_never_primary";
    if h.witnesses.is_empty() {
        return CheckResult::skipped(NAME, "no witnesses");
    }
    let violations: Vec<Violation> = h
        .samples
        .iter()
        .filter(|s| h.witnesses.contains(&s.node))
        .filter(|s| s.elector.as_ref().is_some_and(|e| e.role == "primary"))
        .take(1)
        .map(|s| {
            Violation::window(
                format!("witness {} claimed the primary role", s.node),
                s.at_ms,
                s.at_ms,
                vec![s.node.clone()],
            )
        })
        .collect();
    CheckResult::new(NAME, violations, vec![])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::fixtures::*;
    use crate::history::{FaultEvent, PartitionRecord, WriteProbe};

    fn expect(failover: bool) -> Expect {
        Expect {
            failover: Some(failover),
            ..Default::default()
        }
    }

    #[test]
    fn a_timely_election_passes_and_is_measured() {
        let mut h = history(3);
        h.initial_primary = Some("n1".into());
        steady(&mut h, "n1", "primary", 1, 0, 1000);
        unreachable(&mut h, "n1", 1000, 6000);
        steady(&mut h, "n2", "replica", 1, 0, 3000);
        steady(&mut h, "n2", "primary", 2, 3000, 6000);
        h.faults.push(primary_kill(1000));
        h.end_ms = 6000;
        let r = majority_elects(&h, &expect(true));
        assert!(r.passed, "{r:?}");
        assert!(r.notes[0].contains("2000 ms"), "{:?}", r.notes);
    }

    #[test]
    fn a_cut_that_leaves_no_majority_is_not_what_the_election_bound_counts_from() {
        let mut h = history(3);
        h.initial_primary = Some("n1".into());
        steady(&mut h, "n1", "primary", 1, 0, 12000);
        unreachable(&mut h, "n1", 12000, 20000);
        steady(&mut h, "n3", "replica", 1, 0, 14000);
        steady(&mut h, "n3", "primary", 3, 14000, 20000);
        h.faults.push(FaultEvent {
            label: "split [n1] | [n2] | [n3]".into(),
            kind: "partition".into(),
            nodes: vec!["n1".into(), "n2".into(), "n3".into()],
            majority: vec![],
            end_ms: Some(6000),
            ..primary_kill(1000)
        });
        h.faults.push(primary_kill(12000));
        h.end_ms = 20000;
        let r = majority_elects(&h, &expect(true));
        assert!(r.passed, "{r:?}");
        assert!(
            r.notes[0].contains("2000 ms after `kill primary`"),
            "{:?}",
            r.notes
        );
    }

    #[test]
    fn no_election_or_a_late_one_fails() {
        let mut h = history(3);
        steady(&mut h, "n1", "primary", 1, 0, 1000);
        steady(&mut h, "n2", "replica", 1, 0, 20000);
        h.faults.push(primary_kill(1000));
        h.end_ms = 20000;
        assert!(!majority_elects(&h, &expect(true)).passed);
        steady(&mut h, "n3", "primary", 2, 15000, 20000);
        let r = majority_elects(&h, &expect(true));
        assert!(!r.passed);
        assert!(r.violations[0].message.contains("later than"));
    }

    #[test]
    fn the_bound_counts_from_when_a_majority_members_read_only_disk_is_writable_again() {
        // data-restart-voter-forgets-offset: n3 can neither vote nor stand until its
        // state directory is back; the election after that is on time.
        let mut h = history(3);
        steady(&mut h, "n1", "primary", 1, 0, 1000);
        steady(&mut h, "n2", "replica", 1, 0, 20000);
        steady(&mut h, "n3", "replica", 1, 0, 11000);
        steady(&mut h, "n3", "primary", 2, 11000, 20000);
        h.faults.push(FaultEvent {
            at_ms: 500,
            end_ms: Some(10000),
            kind: "read_only_state".into(),
            label: "read_only_state n3".into(),
            nodes: vec!["n3".into()],
            primary_before: Some("n1".into()),
            removes_primary: false,
            majority: vec![],
        });
        h.faults.push(primary_kill(1000));
        h.end_ms = 20000;
        let r = majority_elects(&h, &expect(true));
        assert!(r.passed, "{r:?}");
        assert!(
            r.notes[0].contains("1000 ms after the majority's state"),
            "{:?}",
            r.notes
        );
        // Without the disk fault the same election is late.
        h.faults.remove(0);
        assert!(!majority_elects(&h, &expect(true)).passed);
    }

    fn isolate_n3(h: &mut History) {
        h.partitions.push(PartitionRecord {
            start_ms: 1000,
            end_ms: Some(5000),
            label: "isolate n3".into(),
            minority: vec!["n3".into()],
        });
        h.end_ms = 6000;
    }

    #[test]
    fn an_isolated_replica_that_stays_a_replica_passes() {
        let mut h = history(3);
        steady(&mut h, "n1", "primary", 1, 0, 6000);
        steady(&mut h, "n3", "replica", 1, 0, 6000);
        isolate_n3(&mut h);
        assert!(minority_never_elects(&h).passed);
    }

    #[test]
    fn a_primary_frozen_before_the_split_that_wakes_in_its_old_epoch_did_not_elect() {
        // Chaos seed 2111 (kevy, 3 nodes): n3 primary in epoch 20 is paused,
        // then split off; no sample while frozen; on waking its elector still
        // says primary in epoch 20 (its data node already a fenced replica).
        let mut h = history(3);
        steady(&mut h, "n3", "primary", 20, 0, 200);
        steady(&mut h, "n1", "replica", 20, 0, 6000);
        h.samples.push(sample(2500, "n3", "primary", 20, true));
        isolate_n3(&mut h);
        let r = minority_never_elects(&h);
        assert!(r.passed, "{r:?}");
        // A claim in a later epoch is an election on the minority side.
        h.samples.push(sample(3000, "n3", "primary", 21, false));
        assert!(!minority_never_elects(&h).passed);
    }

    #[test]
    fn an_isolated_replica_that_promotes_itself_fails() {
        let mut h = history(3);
        steady(&mut h, "n1", "primary", 1, 0, 6000);
        steady(&mut h, "n3", "replica", 1, 0, 2500);
        steady(&mut h, "n3", "primary", 2, 2500, 6000);
        isolate_n3(&mut h);
        let r = minority_never_elects(&h);
        assert!(!r.passed);
        assert!(r
            .violations
            .iter()
            .any(|v| v.start_ms == Some(2500) && v.end_ms == Some(5000)));
    }

    #[test]
    fn an_isolated_replica_that_claims_primary_while_fenced_still_fails() {
        let mut h = history(3);
        steady(&mut h, "n1", "primary", 1, 0, 6000);
        steady(&mut h, "n3", "replica", 1, 0, 2500);
        let mut t = 2500;
        while t < 6000 {
            h.samples.push(sample(t, "n3", "primary", 2, true));
            t += 100;
        }
        isolate_n3(&mut h);
        let r = minority_never_elects(&h);
        assert!(!r.passed);
        assert!(r.violations[0]
            .message
            .contains("claimed primary (epoch 2)"));
    }

    #[test]
    fn an_isolated_old_primary_whose_writes_hang_in_a_shutdown_pause_is_not_writable() {
        // Chaos seed 2111 (Redis, 5 nodes): n3, the isolated old primary,
        // fenced itself within the lease; then its elector was killed and
        // the entrypoint's SIGTERM left Redis in its shutdown write pause
        // (INFO: master; every probe SET unanswered) for 4.5 s.
        let mut h = history(3);
        steady(&mut h, "n3", "primary", 1, 0, 1800);
        let mut t = 1800;
        while t < 2500 {
            h.samples.push(sample(t, "n3", "primary", 1, true));
            t += 100;
        }
        headless_master(&mut h, "n3", WriteProbe::NoAnswer, 2500, 5000);
        steady(&mut h, "n1", "replica", 1, 0, 3000);
        steady(&mut h, "n1", "primary", 2, 3000, 6000);
        isolate_n3(&mut h);
        let r = minority_never_elects(&h);
        assert!(r.passed, "{r:?}");
        let r = crate::checkers::split_brain::single_writable_primary(&h);
        assert!(r.passed, "{r:?}");
        // Had those probe writes gone through, it would have been writable.
        let mut h2 = history(3);
        h2.samples = h
            .samples
            .iter()
            .filter(|s| s.elector.is_some())
            .cloned()
            .collect();
        headless_master(&mut h2, "n3", WriteProbe::Accepted, 2500, 5000);
        isolate_n3(&mut h2);
        assert!(!minority_never_elects(&h2).passed);
        assert!(!crate::checkers::split_brain::single_writable_primary(&h2).passed);
    }

    #[test]
    fn an_isolated_old_primary_must_stop_within_the_lease() {
        let mut h = history(3);
        // n3 is the primary and gets isolated; it fences after 1 s: fine.
        steady(&mut h, "n3", "primary", 1, 0, 2000);
        steady(&mut h, "n3", "replica", 1, 2000, 6000);
        isolate_n3(&mut h);
        assert!(minority_never_elects(&h).passed);
        // It never fences: violation.
        let mut h = history(3);
        steady(&mut h, "n3", "primary", 1, 0, 6000);
        isolate_n3(&mut h);
        assert!(!minority_never_elects(&h).passed);
    }

    #[test]
    fn a_changed_primary_fails_when_no_failover_is_expected() {
        let mut h = history(3);
        h.initial_primary = Some("n1".into());
        steady(&mut h, "n1", "primary", 1, 0, 6000);
        steady(&mut h, "n2", "replica", 1, 0, 6000);
        assert!(primary_stable(&h, &expect(false)).passed);
        assert!(primary_stable(&h, &expect(true)).skipped);
        steady(&mut h, "n2", "primary", 2, 6000, 7000);
        assert!(!primary_stable(&h, &expect(false)).passed);
    }

    #[test]
    fn a_two_node_cluster_that_fails_over_while_a_node_is_down_fails() {
        let mut h = history(2);
        h.initial_primary = Some("n1".into());
        steady(&mut h, "n1", "primary", 1, 0, 1000);
        unreachable(&mut h, "n1", 1000, 6000);
        steady(&mut h, "n2", "replica", 1, 0, 6000);
        let mut f = primary_kill(1000);
        f.end_ms = Some(6000);
        h.faults.push(f);
        h.end_ms = 8000;
        assert!(n2_never_fails_over(&h).passed);
        // After both are back, an election may pick n2: allowed.
        steady(&mut h, "n2", "primary", 2, 7000, 8000);
        assert!(n2_never_fails_over(&h).passed);
        // While n1 is down, n2 promotes itself: violation.
        steady(&mut h, "n2", "primary", 2, 3000, 3500);
        assert!(!n2_never_fails_over(&h).passed);
        assert!(n2_never_fails_over(&history(3)).skipped);
    }
}
