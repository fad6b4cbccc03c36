//! Where a durable failover's time goes: from the fault to the first
//! acknowledged write, split at what the electors logged (issue 22 item 2).
//!
//! The phases are read from the containers' logs the runner saves next to
//! each run (`<run id>.<node>.log`), whose lines start with the elector's
//! UTC timestamp, placed on the history's time line by its wall-clock start
//! (`History::start_unix_ms`). Each phase is the first such line after the
//! fault on a node that survived it:
//! - `election started`: the primary's silence noticed (`down_after`) plus
//!   the candidate's backoff;
//! - `role change ... to=primary` (the core's one line per transition; older
//!   electors also logged `role changed`): the election won;
//! - `data node updated target=Primary`: the promotion applied (`REPLICAOF
//!   NO ONE` answered);
//! - `data node updated target=Follow`: a replica's retarget applied (its
//!   `REPLICAOF` answered; on kevy after the replication thread's join);
//! - `replication link up`: the replica streams (on kevy: the full snapshot
//!   every retarget takes is loaded), as its elector's next poll saw it;
//! - the first write a replica acknowledged (the history's durable failover).

use std::collections::BTreeMap;
use std::path::Path;

use crate::history::{History, Ms};
use crate::report::RunResult;

/// Milliseconds after the fault, per phase (`None`: not seen).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Phases {
    pub election_started: Option<Ms>,
    pub elected: Option<Ms>,
    pub promoted: Option<Ms>,
    /// The last surviving replica's retarget applied.
    pub retargeted: Option<Ms>,
    /// The last surviving replica's link up.
    pub link_up: Option<Ms>,
    pub first_acked: Option<Ms>,
}

/// The phase names, in order, for tables.
pub const PHASES: [&str; 6] = [
    "election started",
    "election won",
    "promotion applied",
    "replica retarget applied",
    "replica streaming (snapshot loaded)",
    "first acknowledged write",
];

impl Phases {
    pub fn values(&self) -> [Option<Ms>; 6] {
        [
            self.election_started,
            self.elected,
            self.promoted,
            self.retargeted,
            self.link_up,
            self.first_acked,
        ]
    }
}

/// The Unix time in ms of a log line that starts with an RFC 3339 stamp.
pub(crate) fn stamp(line: &str) -> Option<u64> {
    let first = line.split_whitespace().next()?;
    let t = chrono::DateTime::parse_from_rfc3339(first).ok()?;
    u64::try_from(t.timestamp_millis()).ok()
}

/// The first line at or after `from_unix` containing every needle.
fn first_after(log: &str, from_unix: u64, needles: &[&str]) -> Option<u64> {
    log.lines()
        .filter(|l| needles.iter().all(|n| l.contains(n)))
        .filter_map(stamp)
        .find(|&t| t >= from_unix)
}

/// A run's phases from its nodes' logs (`logs`: node id -> log text).
pub fn phases(r: &RunResult, h: &History, logs: &BTreeMap<String, String>) -> Option<Phases> {
    if h.start_unix_ms == 0 {
        return None;
    }
    let fault = h.faults.iter().find(|f| f.removes_primary)?;
    let at = h.start_unix_ms + fault.at_ms;
    // A partition names every node it touches: the survivors are its
    // majority side. A kill names the nodes it removes.
    let survived = |n: &String| match fault.majority.is_empty() {
        true => !fault.nodes.contains(n),
        false => fault.majority.contains(n),
    };
    let survivors: Vec<(&String, &String)> = logs.iter().filter(|(n, _)| survived(n)).collect();
    let rel = |t: u64| t.saturating_sub(at);
    let earliest = |needles: &[&str]| {
        survivors
            .iter()
            .filter_map(|(_, log)| first_after(log, at, needles))
            .min()
    };
    let elected_needles = ["role change", "to=primary"];
    let new_primary = survivors
        .iter()
        .filter_map(|(n, log)| Some((first_after(log, at, &elected_needles)?, *n)))
        .min()
        .map(|(_, n)| n);
    let replicas: Vec<&String> = survivors
        .iter()
        .map(|(n, _)| *n)
        .filter(|n| Some(*n) != new_primary)
        .collect();
    // The last replica's time, if every replica logged it.
    let last_replica = |needles: &[&str]| -> Option<u64> {
        replicas
            .iter()
            .map(|n| first_after(&logs[*n], at, needles))
            .collect::<Option<Vec<u64>>>()?
            .into_iter()
            .max()
    };
    Some(Phases {
        election_started: earliest(&["election started"]).map(rel),
        elected: earliest(&elected_needles).map(rel),
        promoted: earliest(&["data node updated", "target=Primary"]).map(rel),
        retargeted: last_replica(&["data node updated", "target=Follow"]).map(rel),
        link_up: last_replica(&["replication link up"]).map(rel),
        first_acked: r.metrics.failover_ms,
    })
}

/// Phases of every run in `runs`, reading `<dir>/<run id>.<node>.log`.
pub fn load(dir: &Path, runs: &[(RunResult, History)]) -> Vec<(RunResult, Phases)> {
    runs.iter()
        .filter_map(|(r, h)| {
            let logs: BTreeMap<String, String> = h
                .nodes
                .iter()
                .filter_map(|n| {
                    let text =
                        std::fs::read_to_string(dir.join(format!("{}.{n}.log", r.id()))).ok()?;
                    Some((n.clone(), text))
                })
                .collect();
            Some((r.clone(), phases(r, h, &logs)?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::fixtures::primary_kill;

    #[test]
    fn phases_are_read_from_the_survivors_logs_after_the_fault() {
        let (mut r, _) = crate::report::tests::sample_run();
        r.metrics.failover_ms = Some(5600);
        let mut h = History {
            nodes: vec!["n1".into(), "n2".into(), "n3".into()],
            start_unix_ms: 1_764_042_660_000, // 2025-11-25T03:51:00Z
            faults: vec![primary_kill(1000)],
            ..History::default()
        };
        h.initial_primary = Some("n1".into());
        let logs = BTreeMap::from([
            (
                "n1".to_string(),
                "2025-11-25T03:51:01.500000Z  INFO election started epoch=9\n".to_string(),
            ),
            (
                "n2".to_string(),
                "2025-11-25T03:51:00.900000Z  INFO election started epoch=1\n\
                 2025-11-25T03:51:06.200000Z  INFO election started epoch=2\n\
                 2025-11-25T03:51:06.300000Z  INFO role changed from=candidate to=primary epoch=2\n\
                 2025-11-25T03:51:06.400000Z  INFO data node updated target=Primary seq=4 backend=\"kevy\"\n"
                    .to_string(),
            ),
            (
                "n3".to_string(),
                "2025-11-25T03:51:06.700000Z  INFO data node updated target=Follow { primary_addr: \"n2:6379\" } seq=5\n\
                 2025-11-25T03:51:06.850000Z  INFO replication link up primary_host=\"10.0.0.3\"\n"
                    .to_string(),
            ),
        ]);
        let p = phases(&r, &h, &logs).unwrap();
        assert_eq!(
            p,
            Phases {
                election_started: Some(5200),
                elected: Some(5300),
                promoted: Some(5400),
                retargeted: Some(5700),
                link_up: Some(5850),
                first_acked: Some(5600),
            },
            "n1's own line is the killed node's; n2's first election predates the fault"
        );
        // The same run as a partition that isolates n1: the fault names every
        // node, its majority side the survivors.
        h.faults[0].kind = "partition".into();
        h.faults[0].nodes = vec!["n1".into(), "n2".into(), "n3".into()];
        assert_eq!(phases(&r, &h, &logs).unwrap(), p);
    }
}
