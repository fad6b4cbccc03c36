//! Epochs never go backwards on a node (across its restarts), and no epoch has two
//! primaries.

use std::collections::{BTreeMap, BTreeSet};

use super::{CheckResult, Violation};
use crate::history::History;

const NOT_ELECTOR_MONO: &str = "epochs_monotonic";
const NOT_ELECTOR_ONE: &str = "one_primary_per_epoch";
/// Peers publish no epoch per node the harness can read the same way.
const NOT_APPLICABLE: &str = "not applicable: this target exposes no elector epochs";

pub fn epochs_monotonic(h: &History) -> CheckResult {
    if !h.has_electors() {
        return CheckResult::skipped(NOT_ELECTOR_MONO, NOT_APPLICABLE);
    }
    let mut violations = vec![];
    for (node, samples) in h.samples_by_node() {
        let mut last: Option<(u64, u64)> = None;
        for s in samples {
            let Some(e) = &s.elector else { continue };
            if let Some((epoch, at)) = last {
                if e.epoch < epoch {
                    violations.push(Violation::window(
                        format!(
                            "{node}: epoch went back from {epoch} (at {at} ms) to {} (at {} ms)",
                            e.epoch, s.at_ms
                        ),
                        at,
                        s.at_ms,
                        vec![node.to_string()],
                    ));
                }
            }
            last = Some((e.epoch, s.at_ms));
        }
    }
    CheckResult::new("epochs_monotonic", violations, vec![])
}

pub fn one_primary_per_epoch(h: &History) -> CheckResult {
    if !h.has_electors() {
        return CheckResult::skipped(NOT_ELECTOR_ONE, NOT_APPLICABLE);
    }
    let mut by_epoch: BTreeMap<u64, BTreeSet<&str>> = BTreeMap::new();
    for s in &h.samples {
        if let Some(e) = &s.elector {
            if e.role == "primary" {
                by_epoch.entry(e.epoch).or_default().insert(s.node.as_str());
            }
        }
    }
    let violations = by_epoch
        .iter()
        .filter(|(_, nodes)| nodes.len() > 1)
        .map(|(epoch, nodes)| Violation {
            message: format!(
                "epoch {epoch} had {} primaries: {}",
                nodes.len(),
                nodes.iter().copied().collect::<Vec<_>>().join(",")
            ),
            start_ms: None,
            end_ms: None,
            nodes: nodes.iter().map(|n| n.to_string()).collect(),
        })
        .collect();
    let notes = by_epoch
        .iter()
        .map(|(e, n)| {
            format!(
                "epoch {e}: {}",
                n.iter().copied().collect::<Vec<_>>().join(",")
            )
        })
        .collect();
    CheckResult::new("one_primary_per_epoch", violations, notes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::fixtures::*;

    #[test]
    fn rising_epochs_and_one_primary_each_pass() {
        let mut h = history(3);
        steady(&mut h, "n1", "primary", 1, 0, 1000);
        steady(&mut h, "n2", "replica", 1, 0, 1000);
        steady(&mut h, "n2", "primary", 2, 1000, 2000);
        steady(&mut h, "n1", "replica", 2, 1500, 2000);
        assert!(epochs_monotonic(&h).passed);
        assert!(one_primary_per_epoch(&h).passed);
    }

    #[test]
    fn an_epoch_that_goes_back_after_a_restart_fails() {
        let mut h = history(3);
        steady(&mut h, "n2", "replica", 3, 0, 1000);
        unreachable(&mut h, "n2", 1000, 1500);
        steady(&mut h, "n2", "replica", 2, 1500, 2000);
        let r = epochs_monotonic(&h);
        assert!(!r.passed);
        assert!(r.violations[0].message.contains("from 3"));
    }

    #[test]
    fn two_primaries_in_one_epoch_fail() {
        let mut h = history(3);
        steady(&mut h, "n1", "primary", 4, 0, 1000);
        steady(&mut h, "n3", "primary", 4, 500, 600);
        let r = one_primary_per_epoch(&h);
        assert!(!r.passed);
        assert_eq!(r.violations[0].nodes, vec!["n1", "n3"]);
    }

    #[test]
    fn epoch_checks_are_not_applicable_to_a_peer_and_say_so() {
        let mut h = history(3);
        steady(&mut h, "n1", "primary", 4, 0, 1000);
        steady(&mut h, "n3", "primary", 4, 500, 600);
        h.target = "redis-sentinel".into();
        for r in [one_primary_per_epoch(&h), epochs_monotonic(&h)] {
            assert!(r.skipped && r.passed);
            assert!(r.notes[0].contains("not applicable"));
        }
        h.target = "elector+redis".into();
        assert!(!one_primary_per_epoch(&h).passed);
    }
}
