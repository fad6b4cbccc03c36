//! Result assembly: what a run recorded becomes a [`History`] (checked by the
//! checkers) and a [`RunResult`] (verdict, metrics, steps, target settings).
//! Pure: no Docker, no clock.

use std::collections::BTreeMap;

use super::POLL_INTERVAL_MS;
use crate::checkers::check_all;
use crate::history::{FaultEvent, History, Ms, PartitionRecord};
use crate::metrics;
use crate::report::{RunResult, StepLog};
use crate::scenario::Scenario;
use crate::target::Target;
use crate::workload::Recorder;

/// What the runner kept besides the recorder's writes, reads and samples.
#[derive(Clone, Debug, Default)]
pub struct Recorded {
    pub faults: Vec<FaultEvent>,
    pub partitions: Vec<PartitionRecord>,
    pub initial_primary: Option<String>,
    pub final_primary: Option<String>,
    pub final_reads: BTreeMap<String, BTreeMap<String, Option<String>>>,
    pub final_read_errors: BTreeMap<String, String>,
    pub writers_stopped_ms: Option<Ms>,
    pub quiet_ms: Vec<Ms>,
    pub operator: Vec<crate::history::OperatorAct>,
    pub steps: Vec<StepLog>,
}

/// A result with the run's identity and no outcome yet.
pub fn blank_result(scn: &Scenario, target: &dyn Target, seed: u64) -> RunResult {
    let kind = target.kind();
    RunResult {
        scenario: scn.name.clone(),
        backend: kind.backend().to_string(),
        target: kind.name().to_string(),
        seed,
        nodes: scn.nodes,
        elector_bin: if kind.is_elector() {
            scn.elector_bin.clone().unwrap_or_else(|| "elector".into())
        } else {
            "none".into()
        },
        detection_ms: target.detection_ms(&scn.timings),
        settings: target.settings(&scn.timings),
        expect_violation: scn.expect.violation,
        expect_failover: scn.expect.failover == Some(true),
        checks_passed: false,
        passed: false,
        error: None,
        duration_ms: 0,
        metrics: Default::default(),
        checks: vec![],
        steps: vec![],
        faults: vec![],
        usage: vec![],
        void: false,
        earlier_void_runs: vec![],
    }
}

/// The history's fixed part: nodes, quorum, timings and the bounds checkers use.
/// A target's own mechanics widen the election bound (see `Target::election_slack_ms`).
pub fn empty_history(scn: &Scenario, target: &dyn Target) -> History {
    let detection = target.detection_ms(&scn.timings);
    let extra_detection = detection.saturating_sub(scn.timings.down_after_ms);
    History {
        nodes: scn.node_ids(),
        witnesses: scn.witness_ids(),
        quorum: scn.quorum(),
        timings: scn.timings.clone(),
        lease_ms: scn.lease_ms(),
        election_bound_ms: scn.election_bound_ms() + extra_detection + target.election_slack_ms(),
        poll_interval_ms: POLL_INTERVAL_MS,
        target: target.kind().name().to_string(),
        ..Default::default()
    }
}

/// The whole history of a run, taking the recorder's writes, reads and samples.
pub fn history(scn: &Scenario, target: &dyn Target, rec: &Recorder, r: Recorded) -> History {
    let mut samples = std::mem::take(&mut *rec.samples.lock().expect("lock"));
    samples.sort_by_key(|s| s.at_ms);
    History {
        writes: std::mem::take(&mut *rec.writes.lock().expect("lock")),
        reads: std::mem::take(&mut *rec.reads.lock().expect("lock")),
        samples,
        faults: r.faults,
        partitions: r.partitions,
        initial_primary: r.initial_primary,
        final_primary: r.final_primary,
        final_reads: r.final_reads,
        final_read_errors: r.final_read_errors,
        writers_stopped_ms: r.writers_stopped_ms,
        quiet_ms: r.quiet_ms,
        operator: r.operator,
        end_ms: rec.now_ms(),
        start_unix_ms: rec.start_unix_ms,
        ..empty_history(scn, target)
    }
}

/// Runs the checkers and fills in the verdict, metrics, steps and faults.
pub fn finish(
    result: &mut RunResult,
    scn: &Scenario,
    h: &History,
    steps: Vec<StepLog>,
    error: Option<String>,
) {
    let checks = check_all(h, &scn.expect);
    let failed = !checks.iter().all(|c| c.passed) && !scn.expect.violation;
    let void = failed
        .then(|| freeze_overran(h, scn, result.detection_ms))
        .flatten();
    let error = error.or_else(|| void.as_ref().map(|why| format!("void run: {why}")));
    result.void = void.is_some();
    let (checks_passed, passed) =
        RunResult::verdict(&checks, scn.expect.violation, error.as_deref());
    result.metrics = metrics::compute(h, &checks);
    result.checks = checks;
    result.checks_passed = checks_passed;
    result.passed = passed;
    result.error = error;
    result.steps = steps;
    result.faults = h.faults.clone();
}

/// Why a failed no-failover run cannot judge the product, if it cannot: one
/// of its timed freezes may have lasted as long as the detection time.
///
/// A scenario such as `primary-pause-short` freezes the primary for less than
/// down_after and expects no election. But `docker pause` and `docker unpause`
/// themselves take time, hundreds of ms on a loaded 2-core host, and the
/// runner only knows the freeze lay inside [pause call, unpause returned].
/// When that span reaches the detection time less one heartbeat (detection
/// runs from the last heartbeat heard), an election may have been the right
/// answer, so a failed check there says nothing about the elector. The run
/// is void (the suite repeats it), never passed.
pub fn freeze_overran(h: &History, scn: &Scenario, detection_ms: u64) -> Option<String> {
    if scn.expect.failover != Some(false) {
        return None;
    }
    let limit = detection_ms.saturating_sub(scn.timings.hb_interval_ms);
    h.faults.iter().filter(|f| f.kind == "pause").find_map(|f| {
        let span = f.end_ms.unwrap_or(h.end_ms).saturating_sub(f.at_ms);
        (span >= limit).then(|| {
            format!(
                "`{}` froze {} for up to {span} ms ({} to {} ms, Docker's pause and unpause included), \
                 not clearly shorter than detection {detection_ms} ms less one heartbeat; \
                 an election may have been right, so 'no failover' cannot be judged",
                f.label,
                f.nodes.join(","),
                f.at_ms,
                f.at_ms + span
            )
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::TargetKind;

    fn scenario() -> Scenario {
        Scenario::parse(
            "t.yaml",
            "name: t\nnodes: 3\nsteps:\n  - wait_primary: 10s\nexpect: { failover: true }\n",
        )
        .unwrap()
    }

    #[test]
    fn a_peer_result_names_its_target_and_runs_without_an_elector() {
        let scn = scenario();
        let r = blank_result(&scn, TargetKind::RedisSentinel.target().as_ref(), 2);
        assert_eq!(
            (r.target.as_str(), r.backend.as_str()),
            ("redis-sentinel", "redis")
        );
        assert_eq!(r.elector_bin, "none");
        assert_eq!(r.id(), "t-redis-sentinel-s2");
        assert!(r
            .settings
            .iter()
            .any(|s| s.name == "down-after-milliseconds" && s.value == "1500"));
        let ours = blank_result(&scn, TargetKind::ElectorKevy.target().as_ref(), 2);
        assert_eq!(ours.id(), "t-kevy-s2");
    }

    fn pause_scenario() -> Scenario {
        Scenario::parse(
            "p.yaml",
            "name: p\nnodes: 3\nsteps:\n  - wait_primary: 10s\n  - pause: primary for 700ms\n\
             expect: { failover: false }\n",
        )
        .unwrap()
    }

    /// n1 primary throughout; n1 frozen over `[at, end)`; n2 takes over at
    /// `takeover` when given (a failover the scenario did not expect).
    fn paused_history(at: Ms, end: Ms, takeover: Option<Ms>) -> History {
        use crate::history::fixtures::{history, steady};
        let mut h = history(3);
        h.initial_primary = Some("n1".into());
        h.end_ms = 8000;
        h.faults.push(FaultEvent {
            at_ms: at,
            end_ms: Some(end),
            kind: "pause".into(),
            label: "pause: primary for 700ms".into(),
            nodes: vec!["n1".into()],
            primary_before: Some("n1".into()),
            removes_primary: true,
            majority: vec!["n2".into(), "n3".into()],
        });
        steady(&mut h, "n1", "primary", 1, 0, takeover.unwrap_or(8000));
        steady(&mut h, "n3", "replica", 1, 0, 8000);
        match takeover {
            Some(t) => {
                steady(&mut h, "n2", "replica", 1, 0, t);
                steady(&mut h, "n2", "primary", 2, t, 8000);
            }
            None => steady(&mut h, "n2", "replica", 1, 0, 8000),
        }
        h
    }

    fn finished(h: &History) -> RunResult {
        let scn = pause_scenario();
        let mut r = blank_result(&scn, TargetKind::ElectorRedis.target().as_ref(), 3);
        finish(&mut r, &scn, h, vec![], None);
        r
    }

    #[test]
    fn a_failover_after_a_short_freeze_that_docker_stretched_past_detection_is_a_void_run() {
        // Planned 700 ms; Docker's pause and unpause made it 1994 ms (seen in a
        // real kevy run) against 1500 ms detection.
        let r = finished(&paused_history(3000, 4994, Some(4700)));
        assert!(r.void && !r.passed, "{:?}", r.error);
        let why = r.error.unwrap();
        assert!(
            why.starts_with("void run:") && why.contains("up to 1994 ms"),
            "{why}"
        );
    }

    #[test]
    fn a_failover_after_a_freeze_clearly_shorter_than_detection_fails_the_run() {
        let r = finished(&paused_history(3000, 3800, Some(3900)));
        assert!(!r.void && !r.passed && r.error.is_none());
        assert!(r.failed_checks().contains(&"primary_unchanged"));
    }

    #[test]
    fn a_run_without_a_failover_passes_however_long_docker_took() {
        let r = finished(&paused_history(3000, 4994, None));
        assert!(r.passed && !r.void, "{:?} {:?}", r.error, r.failed_checks());
    }

    #[test]
    fn only_no_failover_scenarios_can_be_void() {
        let h = paused_history(3000, 6000, Some(4700));
        assert!(freeze_overran(&h, &scenario(), 1500).is_none());
        assert!(freeze_overran(&h, &pause_scenario(), 1500).is_some());
        // Detection counts from the last heartbeat: 1400 ms of a 1500 ms
        // detection (100 ms heartbeats) is already too long to judge.
        let edge = paused_history(3000, 4400, Some(4500));
        assert!(freeze_overran(&edge, &pause_scenario(), 1500).is_some());
        let under = paused_history(3000, 4399, Some(4500));
        assert!(freeze_overran(&under, &pause_scenario(), 1500).is_none());
    }

    #[test]
    fn kevy_builtin_gets_its_longer_detection_time_in_the_election_bound() {
        let scn = scenario();
        let ours = empty_history(&scn, TargetKind::ElectorKevy.target().as_ref());
        let peer = empty_history(&scn, TargetKind::KevyBuiltin.target().as_ref());
        // 5000 ms compiled-in detection instead of the scenario's 1500 ms.
        assert!(peer.election_bound_ms >= ours.election_bound_ms + 3500);
        assert_eq!(peer.target, "kevy-builtin");
        assert!(!peer.has_electors() && ours.has_electors());
    }
}
