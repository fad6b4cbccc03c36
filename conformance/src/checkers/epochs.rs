//! Epochs never go backwards on a node, and no epoch has two primaries.
//!
//! "Never backwards" has two parts (docs/interfaces.md, `/status`): the
//! *durable* epoch (what the state file holds) never goes back, restarts
//! included; the in-memory epoch never goes back within one process (one
//! `boot_id`). Across a restart the in-memory epoch may fall back to the
//! durable one: an epoch learned while the state directory refused writes
//! was never acted on (nothing that depends on a write leaves before it,
//! protocol §5.2) and is rightly forgotten. The old check compared every
//! sample with the last one and called that a defect (Redis, 3 nodes,
//! seed 2127: a node at 21 in memory, 20 on disk, back at 20 after a
//! restart). A restart must still come back at least at the durable epoch
//! last seen. Histories without boot ids (older electors) keep the strict
//! check: every sample is taken to be the same process.

use std::collections::{BTreeMap, BTreeSet};

use super::{CheckResult, Violation};
use crate::history::{History, Ms};

const NOT_ELECTOR_MONO: &str = "epochs_monotonic";
const NOT_ELECTOR_ONE: &str = "one_primary_per_epoch";
/// Peers publish no epoch per node the harness can read the same way.
const NOT_APPLICABLE: &str = "not applicable: this target exposes no elector epochs";

/// The last sample of one node the checker compares the next with.
struct Last {
    epoch: u64,
    boot: Option<u64>,
    at: Ms,
}

pub fn epochs_monotonic(h: &History) -> CheckResult {
    if !h.has_electors() {
        return CheckResult::skipped(NOT_ELECTOR_MONO, NOT_APPLICABLE);
    }
    let mut violations = vec![];
    let mut restarts = 0usize;
    for (node, samples) in h.samples_by_node() {
        let nodes = || vec![node.to_string()];
        let mut last: Option<Last> = None;
        // The highest durable epoch seen so far, and when.
        let mut durable: Option<(u64, Ms)> = None;
        for s in samples {
            let Some(e) = &s.elector else { continue };
            if let (Some(d), Some((was, at))) = (e.durable_epoch, durable) {
                if d < was {
                    violations.push(Violation::window(
                        format!(
                            "{node}: durable epoch went back from {was} (at {at} ms) to {d} (at {} ms)",
                            s.at_ms
                        ),
                        at,
                        s.at_ms,
                        nodes(),
                    ));
                }
            }
            if let Some(prev) = &last {
                let same_process = match (prev.boot, e.boot_id) {
                    (Some(a), Some(b)) => a == b,
                    _ => true,
                };
                if same_process && e.epoch < prev.epoch {
                    violations.push(Violation::window(
                        format!(
                            "{node}: epoch went back from {} (at {} ms) to {} (at {} ms){}",
                            prev.epoch,
                            prev.at,
                            e.epoch,
                            s.at_ms,
                            e.boot_id
                                .map(|b| format!(" within one process (boot {b})"))
                                .unwrap_or_default()
                        ),
                        prev.at,
                        s.at_ms,
                        nodes(),
                    ));
                }
                if !same_process {
                    restarts += 1;
                    if let Some((d, at)) = durable.filter(|(d, _)| e.epoch < *d) {
                        violations.push(Violation::window(
                            format!(
                                "{node}: restarted at epoch {} (at {} ms), below the durable epoch {d} it had (at {at} ms)",
                                e.epoch, s.at_ms
                            ),
                            at,
                            s.at_ms,
                            nodes(),
                        ));
                    }
                }
            }
            if let Some(d) = e.durable_epoch {
                if durable.is_none_or(|(was, _)| d >= was) {
                    durable = Some((d, s.at_ms));
                }
            }
            last = Some(Last {
                epoch: e.epoch,
                boot: e.boot_id,
                at: s.at_ms,
            });
        }
    }
    let notes = if restarts > 0 {
        vec![format!(
            "{restarts} elector restarts seen (boot id changed): the in-memory epoch compared within each process, the durable one across them"
        )]
    } else {
        vec![]
    };
    CheckResult::new("epochs_monotonic", violations, notes)
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

    /// `steady` samples of one process of `node`: in memory `epoch`, on
    /// disk `durable`, boot id `boot`.
    fn process(
        h: &mut History,
        node: &str,
        (epoch, durable, boot): (u64, u64, u64),
        from: Ms,
        to: Ms,
    ) {
        let first = h.samples.len();
        steady(h, node, "replica", epoch, from, to);
        for s in &mut h.samples[first..] {
            let e = s.elector.as_mut().expect("elector");
            e.durable_epoch = Some(durable);
            e.boot_id = Some(boot);
        }
    }

    #[test]
    fn an_epoch_never_written_and_forgotten_by_a_restart_passes() {
        // Seed 2127 (Redis, 3 nodes): n2 learned epoch 21 while its state
        // directory was read-only, never wrote it, and came back at its
        // durable 20 after a restart.
        let mut h = history(3);
        steady(&mut h, "n1", "primary", 21, 0, 3000);
        process(&mut h, "n2", (20, 20, 100), 0, 1000);
        process(&mut h, "n2", (21, 20, 100), 1000, 2000);
        unreachable(&mut h, "n2", 2000, 2500);
        process(&mut h, "n2", (20, 20, 200), 2500, 3000);
        process(&mut h, "n2", (21, 21, 200), 3000, 3500);
        let r = epochs_monotonic(&h);
        assert!(r.passed, "{:?}", r.violations);
        assert!(r.notes[0].contains("1 elector restarts"), "{:?}", r.notes);
    }

    #[test]
    fn the_seeds_history_without_boot_ids_still_fails_as_before() {
        // What the checker saw of seed 2127 before electors reported their
        // durable epoch and boot id: no way to tell the restart apart.
        let mut h = history(3);
        steady(&mut h, "n2", "replica", 21, 1000, 2000);
        unreachable(&mut h, "n2", 2000, 2500);
        steady(&mut h, "n2", "replica", 20, 2500, 3000);
        let r = epochs_monotonic(&h);
        assert!(!r.passed);
        assert!(r.violations[0].message.contains("from 21"));
    }

    #[test]
    fn an_epoch_that_goes_back_within_one_process_fails() {
        let mut h = history(3);
        process(&mut h, "n2", (21, 21, 100), 0, 1000);
        process(&mut h, "n2", (20, 21, 100), 1000, 1500);
        let r = epochs_monotonic(&h);
        assert!(!r.passed);
        assert!(
            r.violations[0].message.contains("within one process"),
            "{:?}",
            r.violations
        );
    }

    #[test]
    fn a_durable_epoch_that_goes_back_across_a_restart_fails() {
        let mut h = history(3);
        process(&mut h, "n2", (21, 21, 100), 0, 1000);
        unreachable(&mut h, "n2", 1000, 1500);
        process(&mut h, "n2", (20, 20, 200), 1500, 2000);
        let r = epochs_monotonic(&h);
        assert!(!r.passed);
        let text: Vec<&str> = r.violations.iter().map(|v| v.message.as_str()).collect();
        assert!(
            text.iter()
                .any(|m| m.contains("durable epoch went back from 21")),
            "{text:?}"
        );
        assert!(
            text.iter()
                .any(|m| m.contains("restarted at epoch 20") && m.contains("durable epoch 21")),
            "{text:?}"
        );
    }

    #[test]
    fn an_epoch_that_goes_back_with_no_boot_id_to_show_a_restart_fails() {
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
