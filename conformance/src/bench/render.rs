//! `docs/benchmarks.md`: the table, the settings, the machine and the evidence,
//! rendered from the runs alone so the page is regenerated, never edited.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::{stats, Machine, Plan, Stats, FAILOVER_SCENARIOS, SOAK_SCENARIO};
use crate::history::{History, Ms, Outcome};
use crate::report::{timeline_svg, RunResult};
use crate::target::TargetKind;
use crate::usage::ProcUsage;

/// File name of the chart, next to the page.
pub const CHART_FILE: &str = "benchmarks-failover.svg";
/// Directory (next to the page) of the timelines quoted as evidence.
pub const EVIDENCE_DIR: &str = "benchmarks";

/// The page, and the extra files it links (path relative to the page's dir, content).
pub struct Page {
    pub markdown: String,
    pub files: Vec<(String, String)>,
}

fn ms(v: Ms) -> String {
    format!("{v} ms")
}

fn median_f(v: &mut [f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    Some(v[(v.len() - 1) / 2])
}

/// Ratio of a peer's median to ours, as text.
pub fn ratio(peer: Option<Ms>, ours: Option<Ms>) -> String {
    match (peer, ours) {
        (Some(p), Some(o)) if o > 0 => format!("{:.2}", p as f64 / o as f64),
        _ => "-".into(),
    }
}

fn failover_table(s: &mut String, st: &BTreeMap<(String, TargetKind), Stats>, plan: &Plan) {
    let _ = writeln!(
        s,
        "| scenario | target | runs | median | p95 | min–max | peer median / ours | write unavailability (median of max gaps) | lost acknowledged writes | windows with two writable primaries | runner errors |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|---|---|");
    for scn in FAILOVER_SCENARIOS {
        for &t in &plan.targets {
            let Some(x) = st.get(&(scn.to_string(), t)) else {
                continue;
            };
            let sum = x.summary();
            let ours = st
                .get(&(scn.to_string(), t.ours_for()))
                .and_then(|o| o.summary())
                .map(|v| v.0);
            let rel = if t.is_elector() {
                "(ours)".to_string()
            } else {
                ratio(sum.map(|v| v.0), ours)
            };
            let gap = crate::metrics::median_p95(&x.write_gap).map(|v| v.0);
            let missing = x.runs - x.failover.len();
            let _ = writeln!(
                s,
                "| {scn} | {t} | {}{} | {} | {} | {} | {rel} | {} | {} | {} | {} |",
                x.runs,
                if missing > 0 {
                    format!(" ({missing} without an acknowledged write after the fault)")
                } else {
                    String::new()
                },
                sum.map_or("-".into(), |v| ms(v.0)),
                sum.map_or("-".into(), |v| ms(v.1)),
                sum.map_or("-".into(), |v| format!("{}–{} ms", v.2, v.3)),
                gap.map_or("-".into(), ms),
                x.lost,
                x.split_windows,
                if x.not_started > 0 {
                    format!(
                        "{} (+{} clusters that never started, not counted)",
                        x.errors, x.not_started
                    )
                } else {
                    x.errors.to_string()
                },
            );
        }
    }
}

/// Every checker that failed, per scenario and target, with its run count: the
/// conformance verdicts behind the figures.
fn failed_checks_table(s: &mut String, runs: &[(RunResult, History)], plan: &Plan) {
    let mut m: BTreeMap<(&str, usize, &str), usize> = BTreeMap::new();
    for (r, _) in runs {
        let t = plan
            .targets
            .iter()
            .position(|t| t.name() == r.target)
            .unwrap_or(usize::MAX);
        for c in r.checks.iter().filter(|c| !c.passed) {
            *m.entry((r.scenario.as_str(), t, c.name.as_str()))
                .or_default() += 1;
        }
    }
    let _ = writeln!(s, "Checkers that failed (runs), per scenario and target:\n");
    if m.is_empty() {
        let _ = writeln!(s, "none.\n");
        return;
    }
    let _ = writeln!(s, "| scenario | target | checker | runs |");
    let _ = writeln!(s, "|---|---|---|---|");
    for ((scn, t, check), n) in m {
        let name = plan.targets.get(t).map_or("?", |k| k.name());
        let _ = writeln!(s, "| {scn} | {name} | {check} | {n} |");
    }
    let _ = writeln!(s);
}

fn usage_table(s: &mut String, runs: &[(RunResult, History)], plan: &Plan) {
    let _ = writeln!(
        s,
        "| target | process | instances measured | resident memory, median (max) | CPU, median share of one core over its life |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|");
    for &t in &plan.targets {
        let procs = t.target().control_processes();
        if procs.is_empty() {
            let _ = writeln!(
                s,
                "| {t} | (none: the election is a thread inside kevy) | - | in the data node's own memory | - |"
            );
            continue;
        }
        let mine: Vec<&ProcUsage> = runs
            .iter()
            .filter(|(r, _)| r.target == t.name())
            .flat_map(|(r, _)| r.usage.iter())
            .collect();
        for p in procs {
            let of: Vec<&&ProcUsage> = mine.iter().filter(|u| u.process == *p).collect();
            let mut rss: Vec<f64> = of.iter().map(|u| u.rss_kib as f64 / 1024.0).collect();
            let max = rss.iter().copied().fold(0.0, f64::max);
            let mut cpu: Vec<f64> = of.iter().map(|u| u.cpu_pct()).collect();
            let _ = writeln!(
                s,
                "| {t} | {p} | {} | {} | {} |",
                of.len(),
                median_f(&mut rss).map_or("-".into(), |m| format!("{m:.1} MiB ({max:.1} MiB)")),
                median_f(&mut cpu).map_or("-".into(), |c| format!("{c:.2} %")),
            );
        }
    }
}

/// Checks whose violations the page quotes (the others repeat them).
const QUOTED: [&str; 3] = [
    "single_writable_primary",
    "minority_never_elects",
    "no_lost_acknowledged_writes",
];

/// History lines that show the problem: for a window with two writable
/// primaries, the writes each node accepted in it (acknowledged first); for lost
/// writes, the acknowledgements that did not survive.
pub fn excerpt(r: &RunResult, h: &History) -> Vec<String> {
    let mut out = vec![];
    for c in r
        .checks
        .iter()
        .filter(|c| !c.passed && QUOTED.contains(&c.name.as_str()))
    {
        for v in &c.violations {
            out.push(format!("{}: {}", c.name, v.message));
            let (Some(a), Some(b)) = (v.start_ms, v.end_ms) else {
                continue;
            };
            if c.name != "single_writable_primary" {
                continue;
            }
            for node in &v.nodes {
                let mut inside: Vec<_> = h
                    .writes
                    .iter()
                    .filter(|w| &w.node == node && w.complete_ms >= a && w.invoke_ms <= b)
                    .filter(|w| matches!(w.outcome, Outcome::Ok | Outcome::NotAcked))
                    .collect();
                inside.sort_by_key(|w| (w.outcome != Outcome::Ok, w.invoke_ms));
                let shown = inside.len().min(3);
                for w in &inside[..shown] {
                    out.push(format!(
                        "  {node} accepted {} [{}..{} ms]: {:?} (WAIT -> {:?})",
                        w.key, w.invoke_ms, w.complete_ms, w.outcome, w.replicas
                    ));
                }
                if inside.is_empty() {
                    out.push(format!(
                        "  {node}: no client write in the window (writable by its INFO role and the probe)"
                    ));
                } else if inside.len() > shown {
                    out.push(format!(
                        "  {node}: ... {} more writes accepted in the window",
                        inside.len() - shown
                    ));
                }
            }
        }
    }
    let lost = crate::checkers::lost_keys(h);
    for w in h
        .writes
        .iter()
        .filter(|w| w.outcome == Outcome::Ok && lost.contains(&w.key))
        .take(6)
    {
        out.push(format!(
            "  lost: {} acknowledged by {} at {} ms (WAIT -> {:?}), missing on the final primary {}",
            w.key,
            w.node,
            w.complete_ms,
            w.replicas,
            h.final_primary.as_deref().unwrap_or("?")
        ));
    }
    out
}

/// Renders the whole page.
pub fn page(runs: &[(RunResult, History)], plan: &Plan, machine: &Machine, command: &str) -> Page {
    let st = stats(runs);
    let mut s = String::new();
    let mut files = vec![];
    let _ = writeln!(s, "# Failover benchmarks: our elector and its peers\n");
    let _ = writeln!(
        s,
        "Generated by `BENCH_RUNS={} BENCH_SOAK_RUNS={} BENCH_DOWN_AFTER_MS={} BENCH_TARGETS={} {command}`; regenerate it with the same command, do not edit it by hand.\n",
        plan.runs,
        plan.soak_runs,
        plan.down_after_ms,
        plan.targets.iter().map(|t| t.name()).collect::<Vec<_>>().join(","),
    );
    let _ = writeln!(s, "{}", machine.line());
    let _ = writeln!(
        s,
        "- Runs: {} per target for each of {}, {} per target of `{SOAK_SCENARIO}`; targets interleaved within each seed (A s1, B s1, ..., A s2, ...).",
        plan.runs,
        FAILOVER_SCENARIOS.map(|n| format!("`{n}`")).join(" and "),
        plan.soak_runs
    );
    let _ = writeln!(
        s,
        "- Equal detection: every target runs with a {} ms failure-detection time (kevy's built-in election has 5000 ms compiled in, so the whole comparison runs at 5000 ms unless the command says otherwise); our electors' heartbeat {} ms (100 ms, or a tenth of the detection time when that is shorter, as `bench-detection` sets it).",
        plan.down_after_ms,
        plan.hb_interval_ms()
    );
    let _ = writeln!(
        s,
        "- Workload: the conformance writers (`SET` then `WAIT quorum-1`), each finding the primary the way the target's clients do. Durable failover = fault to the first write a replica acknowledged on another node.\n\
         - Two writable primaries: the poller (every 100 ms) saw two nodes whose `INFO replication` says `role:master` and that accept writes (a probe write on kevy-builtin, whose quorum fence is invisible in INFO; our electors' `/status` fence on ours), for longer than the lease ({} ms), or clients' writes succeeded on both.\n\
         - kevy's acknowledgement cadence: a kevy replica acknowledges a frame only 100 ms after its last acknowledgement, else at the next frame or the primary's 1 s ping, so the last write of a burst can wait a second for `WAIT`. On kevy-builtin the poller's probe write (one `SET` every 100 ms on each master) is such a stream of frames, and its replicas acknowledge promptly; our elector sends its kevy primary a no-op frame while a replica lags (`data_node.ack_nudge`, docs/architecture.md §kevy). Both kevy targets thus get prompt acknowledgements; without either, about half the writes on kevy time out their `WAIT`.\n",
        plan.down_after_ms
    );
    let _ = writeln!(s, "## Durable failover\n");
    failover_table(&mut s, &st, plan);
    let _ = writeln!(s, "\n![durable failover per target]({CHART_FILE})\n");
    failed_checks_table(&mut s, runs, plan);
    let _ = writeln!(s, "## False failovers in the loss soak\n");
    let _ = writeln!(
        s,
        "`{SOAK_SCENARIO}`: 20 s of 2 % packet loss on every node (and 20±10 ms delay where the kernel has netem); no failover should happen.\n"
    );
    let _ = writeln!(
        s,
        "| target | runs | runs with a failover | lost acknowledged writes |"
    );
    let _ = writeln!(s, "|---|---|---|---|");
    for &t in &plan.targets {
        if let Some(x) = st.get(&(SOAK_SCENARIO.to_string(), t)) {
            let _ = writeln!(s, "| {t} | {} | {} | {} |", x.runs, x.failovers, x.lost);
        }
    }
    let _ = writeln!(s, "\n## Control processes: memory and CPU\n");
    let _ = writeln!(
        s,
        "Read from `/proc/PID/status` (VmRSS) and `/proc/PID/stat` (utime+stime over the process's life) inside every container at the end of each run. Our figures include the watchdog, a second `elector` process per node.\n"
    );
    usage_table(&mut s, runs, plan);
    let _ = writeln!(s, "\n## Settings each target ran with\n");
    for &t in &plan.targets {
        if let Some((r, _)) = runs.iter().find(|(r, _)| r.target == t.name()) {
            let list: Vec<String> = r
                .settings
                .iter()
                .map(|x| format!("{} = {}", x.name, x.value))
                .collect();
            let _ = writeln!(s, "- **{t}**: {}", list.join("; "));
        }
    }
    let evidence: Vec<&(RunResult, History)> = runs
        .iter()
        .filter(|(r, _)| r.metrics.lost_acknowledged > 0 || super::split_windows(r) > 0)
        .collect();
    let _ = writeln!(s, "\n## Evidence\n");
    if evidence.is_empty() {
        let _ = writeln!(
            s,
            "No run lost an acknowledged write or showed two writable primaries beyond the lease."
        );
    }
    for (r, h) in evidence {
        let file = format!("{EVIDENCE_DIR}/{}.svg", r.id());
        let _ = writeln!(
            s,
            "### {} ({} lost acknowledged writes, {} windows with two writable primaries)\n",
            r.id(),
            r.metrics.lost_acknowledged,
            super::split_windows(r)
        );
        let _ = writeln!(s, "```text\n{}\n```\n", excerpt(r, h).join("\n"));
        let _ = writeln!(s, "![timeline of {}]({file})\n", r.id());
        files.push((file, timeline_svg(r, h)));
    }
    files.push((
        CHART_FILE.to_string(),
        super::chart::failover_svg(&st, plan),
    ));
    Page { markdown: s, files }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::sample_run;

    fn plan() -> Plan {
        Plan {
            targets: vec![TargetKind::ElectorKevy, TargetKind::KevyBuiltin],
            runs: 1,
            soak_runs: 0,
            down_after_ms: 5000,
        }
    }

    #[test]
    fn a_peer_row_carries_its_ratio_to_our_median_on_the_same_data_node() {
        let (mut ours, h) = sample_run();
        ours.metrics.failover_ms = Some(4000);
        let mut peer = ours.clone();
        peer.target = "kevy-builtin".into();
        peer.metrics.failover_ms = Some(6000);
        let p = page(
            &[(ours, h.clone()), (peer, h)],
            &plan(),
            &Machine::default(),
            "just bench-failover",
        );
        assert!(
            p.markdown
                .contains("| primary-kill | kevy-builtin | 1 | 6000 ms |"),
            "{}",
            p.markdown
        );
        assert!(p.markdown.contains("| 1.50 |"), "{}", p.markdown);
        assert!(p
            .markdown
            .contains("| primary-kill | elector+kevy | 1 | 4000 ms |"));
        assert!(p
            .markdown
            .contains("(none: the election is a thread inside kevy)"));
        assert!(p.files.iter().any(|(f, _)| f == CHART_FILE));
    }

    #[test]
    fn a_run_that_lost_a_write_is_quoted_with_its_timeline() {
        let (mut r, h) = sample_run();
        r.target = "kevy-builtin".into();
        r.metrics.lost_acknowledged = 1;
        let p = page(&[(r.clone(), h)], &plan(), &Machine::default(), "x");
        assert!(p.markdown.contains(&format!("### {}", r.id())));
        assert!(p
            .files
            .iter()
            .any(|(f, _)| f == &format!("benchmarks/{}.svg", r.id())));
    }

    #[test]
    fn ratios_need_both_medians() {
        assert_eq!(ratio(Some(3000), Some(2000)), "1.50");
        assert_eq!(ratio(None, Some(2000)), "-");
        assert_eq!(ratio(Some(1), Some(0)), "-");
    }
}
