//! At most one writable primary among the nodes clients can reach, outside the lease.

use std::collections::BTreeMap;

use super::{CheckResult, Violation};
use crate::history::{History, Interval, Ms};

/// Every maximal window in which two or more nodes were writable primaries at once,
/// with the nodes involved. Windows longer than `lease_ms` are violations.
pub fn overlap_windows(h: &History) -> Vec<(Interval, Vec<String>)> {
    let iv = h.writable_intervals();
    // Sweep over start/end events.
    let mut events: Vec<(Ms, i32, &str)> = vec![];
    for (node, list) in &iv {
        for i in list {
            events.push((i.start, 1, node));
            events.push((i.end, -1, node));
        }
    }
    // Ends before starts at the same instant: touching intervals do not overlap.
    events.sort_by_key(|(t, d, n)| (*t, *d, n.to_string()));
    let mut active: BTreeMap<&str, i32> = BTreeMap::new();
    let mut out: Vec<(Interval, Vec<String>)> = vec![];
    let mut open: Option<(Ms, Vec<String>)> = None;
    for (t, d, node) in events {
        *active.entry(node).or_default() += d;
        let live: Vec<String> = active
            .iter()
            .filter(|(_, c)| **c > 0)
            .map(|(n, _)| n.to_string())
            .collect();
        match (&mut open, live.len() >= 2) {
            (None, true) => open = Some((t, live)),
            (Some((_, nodes)), true) => {
                for n in live {
                    if !nodes.contains(&n) {
                        nodes.push(n);
                    }
                }
            }
            (Some((start, nodes)), false) => {
                out.push((
                    Interval {
                        start: *start,
                        end: t,
                    },
                    std::mem::take(nodes),
                ));
                open = None;
            }
            (None, false) => {}
        }
    }
    out
}

pub fn single_writable_primary(h: &History) -> CheckResult {
    let mut violations = vec![];
    let mut notes = vec![];
    for (w, nodes) in overlap_windows(h) {
        let text = format!(
            "{} writable at once from {} ms to {} ms ({} ms)",
            nodes.join("+"),
            w.start,
            w.end,
            w.len()
        );
        if w.len() > h.lease_ms {
            violations.push(Violation::window(
                format!(
                    "split brain: {text}, longer than the {} ms lease",
                    h.lease_ms
                ),
                w.start,
                w.end,
                nodes,
            ));
        } else {
            notes.push(format!("tolerated (within lease): {text}"));
        }
    }
    CheckResult::new("single_writable_primary", violations, notes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::fixtures::*;
    use crate::history::Outcome;

    #[test]
    fn a_clean_handover_passes() {
        let mut h = history(3);
        steady(&mut h, "n1", "primary", 1, 0, 2000);
        unreachable(&mut h, "n1", 2000, 6000);
        steady(&mut h, "n2", "replica", 1, 0, 3500);
        steady(&mut h, "n2", "primary", 2, 3500, 6000);
        steady(&mut h, "n3", "replica", 2, 0, 6000);
        let r = single_writable_primary(&h);
        assert!(r.passed, "{r:?}");
    }

    #[test]
    fn two_writable_primaries_for_longer_than_the_lease_fail_with_the_window() {
        let mut h = history(3);
        steady(&mut h, "n1", "primary", 1, 0, 6000);
        steady(&mut h, "n2", "replica", 1, 0, 2000);
        steady(&mut h, "n2", "primary", 2, 2000, 6000);
        let r = single_writable_primary(&h);
        assert!(!r.passed);
        assert_eq!(r.violations.len(), 1);
        let v = &r.violations[0];
        assert_eq!(v.start_ms, Some(2000));
        assert!(v.end_ms.unwrap() >= 6000);
        assert_eq!(v.nodes, vec!["n1".to_string(), "n2".to_string()]);
    }

    #[test]
    fn an_overlap_within_the_lease_is_only_noted() {
        let mut h = history(3);
        steady(&mut h, "n1", "primary", 1, 0, 2200);
        unreachable(&mut h, "n1", 2200, 4000);
        steady(&mut h, "n2", "replica", 1, 0, 2000);
        steady(&mut h, "n2", "primary", 2, 2000, 4000);
        let r = single_writable_primary(&h);
        assert!(r.passed, "{r:?}");
        assert_eq!(r.notes.len(), 1);
    }

    #[test]
    fn a_write_that_succeeded_on_a_fenced_node_counts_as_writable() {
        let mut h = history(3);
        steady(&mut h, "n2", "primary", 2, 0, 5000);
        // n1 claims to be fenced but keeps accepting writes for 3 s.
        let mut t = 0;
        while t < 5000 {
            h.samples.push(sample(t, "n1", "primary", 1, true));
            t += 100;
        }
        for i in 0..30 {
            h.writes.push(write(
                "n1",
                &format!("k{i}"),
                1000 + i * 100,
                Outcome::NotAcked,
            ));
        }
        let r = single_writable_primary(&h);
        assert!(!r.passed, "{r:?}");
    }
}
