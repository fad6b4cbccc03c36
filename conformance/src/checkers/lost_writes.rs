//! No acknowledged write is lost: after the final heal every acknowledged key is read
//! back from the final primary (lost writes) and from each of its replicas (convergence).

use super::{CheckResult, Violation};
use crate::history::History;

const SHOW: usize = 10;

fn missing_on(h: &History, node: &str) -> Option<Vec<String>> {
    let reads = h.final_reads.get(node)?;
    Some(
        h.acknowledged()
            .into_iter()
            .filter(|w| reads.get(&w.key).and_then(|v| v.as_deref()) != Some(w.value.as_str()))
            .map(|w| w.key.clone())
            .collect(),
    )
}

fn summarize(keys: &[String]) -> String {
    let mut s = keys
        .iter()
        .take(SHOW)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if keys.len() > SHOW {
        s.push_str(&format!(", ... ({} more)", keys.len() - SHOW));
    }
    s
}

/// Every acknowledged write is present, with its value, on the final primary.
pub fn acknowledged_writes_survive(h: &History) -> CheckResult {
    const NAME: &str = "no_lost_acknowledged_writes";
    let acked = h.acknowledged().len();
    let Some(primary) = &h.final_primary else {
        if acked == 0 {
            return CheckResult::skipped(NAME, "no acknowledged writes");
        }
        return CheckResult::new(
            NAME,
            vec![Violation::msg(format!(
                "no final primary to read {acked} acknowledged writes back from"
            ))],
            vec![],
        );
    };
    match missing_on(h, primary) {
        None => CheckResult::new(
            NAME,
            vec![Violation::msg(format!(
                "final primary {primary} was not read back ({})",
                h.final_read_errors
                    .get(primary)
                    .map(String::as_str)
                    .unwrap_or("no reads recorded")
            ))],
            vec![],
        ),
        Some(missing) if missing.is_empty() => CheckResult::new(
            NAME,
            vec![],
            vec![format!(
                "{acked} acknowledged writes all present on {primary}"
            )],
        ),
        Some(missing) => CheckResult::new(
            NAME,
            vec![Violation {
                message: format!(
                    "{} of {acked} acknowledged writes lost on final primary {primary}: {}",
                    missing.len(),
                    summarize(&missing)
                ),
                start_ms: None,
                end_ms: None,
                nodes: vec![primary.clone()],
            }],
            vec![],
        ),
    }
}

/// Number of acknowledged writes missing on the final primary (0 when it was not read).
pub fn lost_count(h: &History) -> usize {
    lost_keys(h).len()
}

/// Keys of the acknowledged writes missing on the final primary (none when it was
/// not read).
pub fn lost_keys(h: &History) -> Vec<String> {
    h.final_primary
        .as_deref()
        .and_then(|p| missing_on(h, p))
        .unwrap_or_default()
}

/// The writers got at least one acknowledgement (otherwise the durability checks above
/// would pass vacuously: nothing was ever promised).
pub fn writes_acknowledged(h: &History) -> CheckResult {
    const NAME: &str = "writes_acknowledged";
    if h.writes.is_empty() {
        return CheckResult::skipped(NAME, "no writes attempted");
    }
    let acked = h.acknowledged().len();
    if acked == 0 {
        return CheckResult::new(
            NAME,
            vec![Violation::msg(format!(
                "none of {} writes was acknowledged (SET ok and WAIT >= {})",
                h.writes.len(),
                h.quorum.saturating_sub(1)
            ))],
            vec![],
        );
    }
    CheckResult::new(
        NAME,
        vec![],
        vec![format!("{acked} of {} acknowledged", h.writes.len())],
    )
}

/// Every replica read back at the end holds every acknowledged write too.
pub fn replicas_converge(h: &History) -> CheckResult {
    const NAME: &str = "replicas_converge";
    if h.acknowledged().is_empty() {
        return CheckResult::skipped(NAME, "no acknowledged writes");
    }
    let mut violations = vec![];
    let mut notes = vec![];
    for node in &h.nodes {
        // A witness has no data node to hold anything (docs/protocol.md §4.5).
        if Some(node) == h.final_primary.as_ref() || h.witnesses.contains(node) {
            continue;
        }
        match missing_on(h, node) {
            None => violations.push(Violation::msg(format!(
                "replica {node} was not read back ({})",
                h.final_read_errors
                    .get(node)
                    .map(String::as_str)
                    .unwrap_or("no reads recorded")
            ))),
            Some(m) if m.is_empty() => notes.push(format!("{node} holds every acknowledged write")),
            Some(m) => violations.push(Violation {
                message: format!(
                    "{} acknowledged writes missing on replica {node}: {}",
                    m.len(),
                    summarize(&m)
                ),
                start_ms: None,
                end_ms: None,
                nodes: vec![node.clone()],
            }),
        }
    }
    CheckResult::new(NAME, violations, notes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::fixtures::*;
    use crate::history::Outcome;

    fn with_writes() -> History {
        let mut h = history(3);
        h.writes.push(write("n1", "w:0:0", 10, Outcome::Ok));
        h.writes.push(write("n1", "w:0:1", 20, Outcome::Ok));
        // Not acknowledged: may be lost without blame.
        h.writes.push(write("n1", "w:0:2", 30, Outcome::NotAcked));
        h.final_primary = Some("n2".into());
        for n in ["n1", "n2", "n3"] {
            let reads = h.final_reads.entry(n.into()).or_default();
            reads.insert("w:0:0".into(), Some("v-w:0:0".into()));
            reads.insert("w:0:1".into(), Some("v-w:0:1".into()));
        }
        h
    }

    #[test]
    fn all_acknowledged_keys_present_passes() {
        let h = with_writes();
        assert!(acknowledged_writes_survive(&h).passed);
        assert!(replicas_converge(&h).passed);
        assert_eq!(lost_count(&h), 0);
    }

    #[test]
    fn a_missing_or_changed_acknowledged_key_on_the_primary_fails() {
        let mut h = with_writes();
        h.final_reads
            .get_mut("n2")
            .unwrap()
            .insert("w:0:1".into(), None);
        let r = acknowledged_writes_survive(&h);
        assert!(!r.passed);
        assert!(r.violations[0].message.contains("w:0:1"));
        assert_eq!(lost_count(&h), 1);
        let mut h = with_writes();
        h.final_reads
            .get_mut("n2")
            .unwrap()
            .insert("w:0:0".into(), Some("other".into()));
        assert!(!acknowledged_writes_survive(&h).passed);
    }

    #[test]
    fn a_replica_missing_a_key_or_not_read_fails_convergence() {
        let mut h = with_writes();
        h.final_reads.get_mut("n3").unwrap().remove("w:0:0");
        assert!(acknowledged_writes_survive(&h).passed);
        assert!(!replicas_converge(&h).passed);
        let mut h = with_writes();
        h.final_reads.remove("n1");
        assert!(!replicas_converge(&h).passed);
    }

    #[test]
    fn a_run_without_any_acknowledged_write_fails() {
        let mut h = history(5);
        h.writes.push(write("n1", "w:0:0", 10, Outcome::NotAcked));
        assert!(!writes_acknowledged(&h).passed);
        assert!(writes_acknowledged(&with_writes()).passed);
        assert!(writes_acknowledged(&history(3)).skipped);
    }

    #[test]
    fn no_final_primary_with_acknowledged_writes_fails() {
        let mut h = with_writes();
        h.final_primary = None;
        assert!(!acknowledged_writes_survive(&h).passed);
    }
}
