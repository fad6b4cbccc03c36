//! A healed old primary demotes and follows the new one.

use super::{CheckResult, Violation};
use crate::history::History;

/// At the end of the run, after a failover, the initial primary is a replica that
/// follows the final primary (elector says so, data node is a slave with its link up).
pub fn old_primary_follows(h: &History) -> CheckResult {
    const NAME: &str = "old_primary_demotes_and_follows";
    let (Some(old), Some(new)) = (&h.initial_primary, &h.final_primary) else {
        return CheckResult::skipped(NAME, "no initial or final primary");
    };
    if old == new {
        return CheckResult::skipped(NAME, "no failover happened");
    }
    let by_node = h.samples_by_node();
    let last = by_node.get(old.as_str()).and_then(|v| {
        v.iter()
            .rev()
            .find(|s| s.data.is_some() || s.elector.is_some())
    });
    let Some(s) = last else {
        return CheckResult::new(
            NAME,
            vec![Violation::msg(format!(
                "old primary {old} never reachable at the end"
            ))],
            vec![],
        );
    };
    let mut problems = vec![];
    match &s.elector {
        // Peers have no elector to ask: the data node's role below is the test.
        None if !h.has_electors() => {}
        Some(e) if e.role == "replica" && e.primary.as_deref() == Some(new.as_str()) => {}
        Some(e) => problems.push(format!(
            "elector role {} following {:?}",
            e.role,
            e.primary.as_deref().unwrap_or("nobody")
        )),
        None => problems.push("elector unreachable".into()),
    }
    match &s.data {
        Some(d) if d.role == "slave" && d.link_up != Some(false) => {}
        Some(d) => problems.push(format!("data node role {} link_up {:?}", d.role, d.link_up)),
        None => problems.push("data node unreachable".into()),
    }
    if problems.is_empty() {
        CheckResult::new(NAME, vec![], vec![format!("{old} follows {new}")])
    } else {
        CheckResult::new(
            NAME,
            vec![Violation::window(
                format!(
                    "old primary {old} does not follow {new} at {} ms: {}",
                    s.at_ms,
                    problems.join("; ")
                ),
                s.at_ms,
                s.at_ms,
                vec![old.clone()],
            )],
            vec![],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::fixtures::*;

    fn failed_over() -> crate::history::History {
        let mut h = history(3);
        h.initial_primary = Some("n1".into());
        h.final_primary = Some("n2".into());
        steady(&mut h, "n1", "primary", 1, 0, 1000);
        h
    }

    #[test]
    fn an_old_primary_following_the_new_one_passes() {
        let mut h = failed_over();
        let mut s = sample(5000, "n1", "replica", 2, false);
        s.elector.as_mut().unwrap().primary = Some("n2".into());
        h.samples.push(s);
        assert!(old_primary_follows(&h).passed);
    }

    #[test]
    fn an_old_primary_still_master_at_the_end_fails() {
        let mut h = failed_over();
        h.samples.push(sample(5000, "n1", "primary", 1, false));
        let r = old_primary_follows(&h);
        assert!(!r.passed);
        assert!(r.violations[0].message.contains("role primary"));
    }

    #[test]
    fn no_failover_means_nothing_to_check() {
        let mut h = failed_over();
        h.final_primary = Some("n1".into());
        assert!(old_primary_follows(&h).skipped);
    }

    #[test]
    fn a_peer_old_primary_is_judged_by_its_data_node_alone() {
        let mut h = failed_over();
        h.target = "kevy-builtin".into();
        let mut s = sample(5000, "n1", "replica", 0, false);
        s.elector = None;
        h.samples.push(s.clone());
        assert!(old_primary_follows(&h).passed);
        s.at_ms = 6000;
        s.data.as_mut().unwrap().role = "master".into();
        h.samples.push(s);
        assert!(!old_primary_follows(&h).passed);
    }
}
