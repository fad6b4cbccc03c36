//! The Markdown summary table of a suite run.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::RunResult;
use crate::metrics::median_p95;

fn opt(v: Option<u64>) -> String {
    v.map_or("-".into(), |x| x.to_string())
}

/// The target column: the target, or the backend for results recorded before targets.
fn target_of(r: &RunResult) -> &str {
    if r.target.is_empty() {
        &r.backend
    } else {
        &r.target
    }
}

/// One row per run, then failover figures per target, then the steps a target
/// could not express and every violation.
pub fn summary_markdown(runs: &[RunResult]) -> String {
    let mut s = String::new();
    let passed = runs.iter().filter(|r| r.passed).count();
    let _ = writeln!(s, "# Conformance summary\n");
    let _ = writeln!(
        s,
        "{passed} of {} runs met their expectation.\n",
        runs.len()
    );
    let _ = writeln!(
        s,
        "| scenario | target | seed | N | result | failover ms | election ms | max write gap ms | acked writes | lost acked | violations | failed checks |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|---|---|---|");
    for r in runs {
        let result = match (r.passed, r.expect_violation, &r.error) {
            _ if r.void => "VOID",
            (_, _, Some(_)) => "ERROR",
            (true, true, _) => "PASS (violation caught)",
            (true, false, _) => "PASS",
            (false, true, _) => "FAIL (violation missed)",
            (false, false, _) => "FAIL",
        };
        let failed = r.failed_checks().join(", ");
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.scenario,
            target_of(r),
            r.seed,
            r.nodes,
            result,
            opt(r.metrics.failover_ms),
            opt(r.metrics.election_ms),
            opt(r.metrics.max_write_gap_ms),
            r.metrics.acknowledged,
            r.metrics.lost_acknowledged,
            r.metrics.violations,
            if failed.is_empty() {
                "-".into()
            } else {
                failed
            }
        );
    }
    let mut per_backend: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for r in runs
        .iter()
        .filter(|r| !r.expect_violation && r.expect_failover)
    {
        if let Some(f) = r.metrics.failover_ms {
            per_backend.entry(target_of(r)).or_default().push(f);
        }
    }
    if !per_backend.is_empty() {
        let _ = writeln!(
            s,
            "\n## Failover time (fault to first acknowledged write on the new primary; \
             scenarios that expect a failover)\n"
        );
        let _ = writeln!(s, "| target | runs | median ms | p95 ms |");
        let _ = writeln!(s, "|---|---|---|---|");
        for (b, v) in &per_backend {
            if let Some((med, p95)) = median_p95(v) {
                let _ = writeln!(s, "| {b} | {} | {med} | {p95} |", v.len());
            }
        }
    }
    let mut first_writes: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for r in runs
        .iter()
        .filter(|r| !r.expect_violation && r.expect_failover)
    {
        if let Some(f) = r.metrics.first_write_ms {
            first_writes.entry(target_of(r)).or_default().push(f);
        }
    }
    if !first_writes.is_empty() {
        let _ = writeln!(
            s,
            "\n## First write on the new primary (fault to the first SET answered OK, \
             acknowledged or not: the figure for clusters with no replica left)\n"
        );
        let _ = writeln!(s, "| target | runs | median ms | p95 ms |");
        let _ = writeln!(s, "|---|---|---|---|");
        for (b, v) in &first_writes {
            if let Some((med, p95)) = median_p95(v) {
                let _ = writeln!(s, "| {b} | {} | {med} | {p95} |", v.len());
            }
        }
    }
    let skipped: Vec<(&RunResult, &super::StepLog)> = runs
        .iter()
        .flat_map(|r| r.not_applicable().into_iter().map(move |st| (r, st)))
        .collect();
    if !skipped.is_empty() {
        let _ = writeln!(s, "\n## Steps not applicable to the target\n");
        for (r, st) in skipped {
            let _ = writeln!(
                s,
                "- **{}** `{}`: not applicable: {}",
                r.id(),
                st.label,
                st.note
            );
        }
    }
    let errors: Vec<&RunResult> = runs.iter().filter(|r| r.error.is_some()).collect();
    let violations: Vec<&RunResult> = runs.iter().filter(|r| !r.checks_passed).collect();
    let repeated: Vec<&RunResult> = runs
        .iter()
        .filter(|r| !r.earlier_void_runs.is_empty())
        .collect();
    if !violations.is_empty() || !errors.is_empty() || !repeated.is_empty() {
        let _ = writeln!(s, "\n## Details\n");
        for r in repeated {
            for why in &r.earlier_void_runs {
                let _ = writeln!(s, "- **{}**: repeated after a void try: {why}", r.id());
            }
        }
        for r in errors {
            let _ = writeln!(
                s,
                "- **{}**: runner error: {}",
                r.id(),
                r.error.as_deref().unwrap_or("")
            );
        }
        for r in violations {
            for c in r.checks.iter().filter(|c| !c.passed) {
                for v in &c.violations {
                    let _ = writeln!(s, "- **{}** `{}`: {}", r.id(), c.name, v.message);
                }
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::sample_run;

    #[test]
    fn the_summary_has_a_row_per_run_and_failover_percentiles() {
        let (mut r, _) = sample_run();
        r.passed = true;
        r.checks_passed = true;
        let mut r2 = r.clone();
        r2.seed = 2;
        r2.metrics.failover_ms = Some(3000);
        let md = summary_markdown(&[r, r2]);
        assert!(
            md.contains("| primary-kill | elector+kevy | 1 | 3 | PASS |"),
            "{md}"
        );
        assert!(md.contains("| elector+kevy | 2 |"), "{md}");
        assert!(md.contains("2 of 2 runs"));
    }

    #[test]
    fn a_step_the_target_cannot_express_is_listed_as_not_applicable() {
        let (mut r, _) = sample_run();
        r.target = "redis-sentinel".into();
        r.steps.push(crate::report::StepLog {
            at_ms: 10,
            label: "kill_elector primary".into(),
            ok: true,
            note: "there is no elector process to kill".into(),
            not_applicable: true,
        });
        let md = summary_markdown(&[r]);
        assert!(
            md.contains("`kill_elector primary`: not applicable: there is no elector"),
            "{md}"
        );
    }

    #[test]
    fn failed_checks_and_their_violations_are_listed() {
        let (mut r, _) = sample_run();
        r.checks[0] = crate::checkers::CheckResult::new(
            "single_writable_primary",
            vec![crate::checkers::Violation::msg("split brain: n1+n2")],
            vec![],
        );
        r.checks_passed = false;
        let md = summary_markdown(&[r]);
        assert!(md.contains("FAIL"));
        assert!(md.contains("split brain: n1+n2"), "{md}");
    }

    #[test]
    fn a_void_run_and_the_void_tries_before_a_run_are_reported() {
        let (mut void, _) = sample_run();
        void.void = true;
        void.error = Some("void run: froze n1 for up to 1994 ms".into());
        let (mut repeated, _) = sample_run();
        repeated.seed = 2;
        repeated.earlier_void_runs = vec!["void run: froze n1 for up to 2100 ms".into()];
        let md = summary_markdown(&[void, repeated]);
        assert!(md.contains("| VOID |"), "{md}");
        assert!(
            md.contains("-s2**: repeated after a void try: void run: froze n1 for up to 2100 ms"),
            "{md}"
        );
    }
}
