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
    }
}

/// The history's fixed part: nodes, quorum, timings and the bounds checkers use.
/// A target's own mechanics widen the election bound (see `Target::election_slack_ms`).
pub fn empty_history(scn: &Scenario, target: &dyn Target) -> History {
    let detection = target.detection_ms(&scn.timings);
    let extra_detection = detection.saturating_sub(scn.timings.down_after_ms);
    History {
        nodes: scn.node_ids(),
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
        end_ms: rec.now_ms(),
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
