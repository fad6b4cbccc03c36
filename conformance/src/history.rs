//! The recorded history of one run, and views derived from it.
//!
//! Every timestamp is milliseconds since the start of the run, read from a monotonic
//! clock. Checkers are pure functions over a [`History`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::scenario::Timings;

pub type Ms = u64;

/// Outcome of one write (`SET` then `WAIT quorum-1 <timeout>`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// SET ok and WAIT returned >= quorum-1: acknowledged, must survive.
    Ok,
    /// SET ok but WAIT reported too few replicas: applied, not acknowledged.
    NotAcked,
    /// Definitely not applied (error reply, connection refused).
    Fail,
    /// Unknown (timeout, connection lost after sending).
    Unknown,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriteOp {
    pub writer: u32,
    pub key: String,
    pub value: String,
    /// Node the write was sent to.
    pub node: String,
    pub invoke_ms: Ms,
    pub complete_ms: Ms,
    /// When the `SET` was answered OK, before its `WAIT` (`None`: not
    /// answered OK, or a history from before this field): on a new
    /// primary, the first such is when a client had found it and it took
    /// writes, which `complete_ms` (after the `WAIT`) is not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set_ok_ms: Option<Ms>,
    pub outcome: Outcome,
    /// What WAIT returned, when it returned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadOp {
    pub node: String,
    pub key: String,
    pub invoke_ms: Ms,
    pub complete_ms: Ms,
    /// Some(true) found with the written value, Some(false) missing or different, None error.
    pub found: Option<bool>,
}

/// What `INFO replication` said about a data node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataObs {
    /// `master` or `slave`.
    pub role: String,
    #[serde(default)]
    pub offset: Option<i64>,
    #[serde(default)]
    pub master_host: Option<String>,
    #[serde(default)]
    pub link_up: Option<bool>,
    /// What a probe write got, when one was tried: on peer targets (a kevy
    /// primary that lost its quorum still reports `role:master` but refuses
    /// writes) and on a master whose elector did not answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_probe: Option<WriteProbe>,
}

/// The answer to a probe write (`SET` of the probe key) on a master.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WriteProbe {
    /// The data node took the write.
    Accepted,
    /// It answered with an error: a fence (`NOREPLICAS`, `READONLY`, kevy's
    /// quorum fence).
    Refused,
    /// No answer within the poll timeout. Says nothing either way: a Redis
    /// that got SIGTERM pauses writes while it waits for its replicas before
    /// shutting down (up to `shutdown-timeout`), answering `INFO` but
    /// holding every write; a lost packet looks the same. Found by a chaos
    /// run (seed 2111, Redis, 5 nodes) where such a node was counted as a
    /// writable primary for 4.5 s (`a_probe_write_without_an_answer_...`).
    NoAnswer,
}

/// What an elector's `/status` said.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ElectorObs {
    /// `primary`, `replica` or `candidate`.
    pub role: String,
    /// The epoch the elector works in (in memory).
    pub epoch: u64,
    /// The highest epoch its state file is known to hold; a restart comes
    /// back at it. None from electors (and histories) that predate it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub durable_epoch: Option<u64>,
    /// The process's boot id: a change marks a restart. None from electors
    /// (and histories) that predate it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<u64>,
    #[serde(default)]
    pub primary: Option<String>,
    pub fenced: bool,
}

/// One poll of one node. `None` = not reachable from the client side at that moment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sample {
    pub at_ms: Ms,
    pub node: String,
    pub data: Option<DataObs>,
    pub elector: Option<ElectorObs>,
}

impl Sample {
    /// Writable primary: data node is a master, its elector does not say it is
    /// fenced, and a probe write (when one was tried) was accepted.
    pub fn writable(&self) -> bool {
        match &self.data {
            Some(d)
                if d.role == "master"
                    && d.write_probe.is_none_or(|p| p == WriteProbe::Accepted) =>
            {
                !self.elector.as_ref().is_some_and(|e| e.fenced)
            }
            _ => false,
        }
    }

    /// A sample that shows nothing about writability: a master whose probe
    /// write got no answer. The intervals skip it, so the sample before it
    /// holds for its usual validity and the next conclusive one decides:
    /// neither a false writable window nor a gap in a real one.
    pub fn inconclusive(&self) -> bool {
        self.data
            .as_ref()
            .is_some_and(|d| d.role == "master" && d.write_probe == Some(WriteProbe::NoAnswer))
    }
}

/// A fault the runner injected (or lifted).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultEvent {
    pub at_ms: Ms,
    /// When the fault ended (heal, unpause, restart), if it did.
    #[serde(default)]
    pub end_ms: Option<Ms>,
    /// `kill`, `kill_elector`, `kill_data`, `restart`, `pause`, `partition`, `netem`, ...
    pub kind: String,
    pub label: String,
    pub nodes: Vec<String>,
    /// The primary just before the fault.
    #[serde(default)]
    pub primary_before: Option<String>,
    /// The fault takes the primary away from a majority of the cluster.
    #[serde(default)]
    pub removes_primary: bool,
    /// Nodes expected to elect the replacement (the healthy majority), if any.
    #[serde(default)]
    pub majority: Vec<String>,
}

/// A partition as it was in force between `start_ms` and `end_ms`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionRecord {
    pub start_ms: Ms,
    #[serde(default)]
    pub end_ms: Option<Ms>,
    pub label: String,
    /// Nodes that cannot reach a quorum (counting themselves) while the partition lasts.
    pub minority: Vec<String>,
}

/// Everything recorded in one run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct History {
    pub nodes: Vec<String>,
    /// The nodes that are witnesses (no data node, docs/protocol.md §4.5).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub witnesses: Vec<String>,
    pub quorum: usize,
    pub timings: Timings,
    pub lease_ms: u64,
    pub election_bound_ms: u64,
    pub poll_interval_ms: u64,
    pub writes: Vec<WriteOp>,
    pub reads: Vec<ReadOp>,
    pub samples: Vec<Sample>,
    pub faults: Vec<FaultEvent>,
    pub partitions: Vec<PartitionRecord>,
    pub initial_primary: Option<String>,
    pub final_primary: Option<String>,
    /// After the final heal: node -> acknowledged key -> value read back (None = missing).
    pub final_reads: BTreeMap<String, BTreeMap<String, Option<String>>>,
    /// Nodes that could not be read at the end, with the reason.
    #[serde(default)]
    pub final_read_errors: BTreeMap<String, String>,
    /// When the writers were told to stop.
    #[serde(default)]
    pub writers_stopped_ms: Option<Ms>,
    /// When each quiet phase began (every fault healed; chaos runs): the
    /// liveness checker's starting points.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub quiet_ms: Vec<Ms>,
    /// What the runner did as the operator of §6.10 (chaos runs): the
    /// liveness checker measures a quiet phase's recovery from the last act
    /// in it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub operator: Vec<OperatorAct>,
    pub end_ms: Ms,
    /// Wall clock at the history's 0 ms, in ms since the Unix epoch (0 in
    /// histories recorded before it was kept).
    #[serde(default)]
    pub start_unix_ms: u64,
    /// The target that ran (`elector+kevy`, `redis-sentinel`, ...); empty in
    /// histories recorded before targets existed (= our elector).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub target: String,
}

/// The operator accepted the loss of whatever node `node` lacks
/// (`elector accept-data-loss`, §6.10) at `at_ms`: chosen because it held
/// every write acknowledged until then.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperatorAct {
    pub at_ms: Ms,
    pub node: String,
    /// Acknowledged writes it was checked to hold.
    pub acknowledged: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Interval {
    pub start: Ms,
    pub end: Ms,
}

impl Interval {
    pub fn len(&self) -> Ms {
        self.end.saturating_sub(self.start)
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Merges overlapping or touching intervals (input in any order).
pub fn merge(mut v: Vec<Interval>) -> Vec<Interval> {
    v.sort_by_key(|i| (i.start, i.end));
    let mut out: Vec<Interval> = Vec::with_capacity(v.len());
    for i in v {
        match out.last_mut() {
            Some(last) if i.start <= last.end => last.end = last.end.max(i.end),
            _ => out.push(i),
        }
    }
    out
}

impl History {
    /// How long one sample is taken to stay true when no newer sample follows.
    pub fn sample_validity_ms(&self) -> Ms {
        (self.poll_interval_ms * 3).max(300)
    }

    /// Samples grouped per node, in time order.
    pub fn samples_by_node(&self) -> BTreeMap<&str, Vec<&Sample>> {
        let mut m: BTreeMap<&str, Vec<&Sample>> = BTreeMap::new();
        for s in &self.samples {
            m.entry(s.node.as_str()).or_default().push(s);
        }
        for v in m.values_mut() {
            v.sort_by_key(|s| s.at_ms);
        }
        m
    }

    /// Per node, the intervals in which it was a writable primary reachable by clients:
    /// from samples (a sample holds until the next one, at most `sample_validity_ms`),
    /// plus every write that succeeded there. A write proves only that the node took
    /// it at some moment between invoke and completion, so it counts from its invoke
    /// on: its completion may come long after (a `WAIT` that times out, 1.5 s after a
    /// `SET` the node took at once), and counting it to there made a fenced old primary
    /// look writable past its lease (vip-isolate-primary, kevy and Redis, 2026-11-25).
    pub fn writable_intervals(&self) -> BTreeMap<String, Vec<Interval>> {
        let validity = self.sample_validity_ms();
        let mut m = self.sampled_primary_intervals();
        // Successful writes on one node close together (gap <= validity) show that the
        // node stayed writable in between.
        let mut by_node: BTreeMap<String, Vec<Interval>> = BTreeMap::new();
        for w in &self.writes {
            if matches!(w.outcome, Outcome::Ok | Outcome::NotAcked) {
                by_node.entry(w.node.clone()).or_default().push(Interval {
                    start: w.invoke_ms,
                    end: w.invoke_ms + 1,
                });
            }
        }
        for (node, list) in by_node {
            let widened: Vec<Interval> = list
                .into_iter()
                .map(|i| Interval {
                    start: i.start,
                    end: i.end + validity,
                })
                .collect();
            let joined = merge(widened).into_iter().map(|i| Interval {
                start: i.start,
                end: i.end - validity,
            });
            m.entry(node).or_default().extend(joined);
        }
        m.into_iter().map(|(k, v)| (k, merge(v))).collect()
    }

    /// Per node, the intervals in which samples alone show it as a writable primary
    /// (no write evidence; used for election timing).
    /// Inconclusive samples ([`Sample::inconclusive`]) are left out.
    pub fn sampled_primary_intervals(&self) -> BTreeMap<String, Vec<Interval>> {
        let validity = self.sample_validity_ms();
        let mut m: BTreeMap<String, Vec<Interval>> = BTreeMap::new();
        for (node, mut samples) in self.samples_by_node() {
            samples.retain(|s| !s.inconclusive());
            for (i, s) in samples.iter().enumerate() {
                if s.writable() {
                    let cap = s.at_ms + validity;
                    let end = samples.get(i + 1).map_or(cap, |n| n.at_ms.min(cap));
                    m.entry(node.to_string()).or_default().push(Interval {
                        start: s.at_ms,
                        end: end.max(s.at_ms + 1),
                    });
                }
            }
        }
        m.into_iter().map(|(k, v)| (k, merge(v))).collect()
    }

    /// Whether electors were observed (our targets): the epoch and `/status`
    /// checks need them.
    pub fn has_electors(&self) -> bool {
        self.target.is_empty() || self.target.starts_with("elector")
    }

    /// The fault a failover is measured from: the first that takes the
    /// primary away from a majority. One that leaves no majority anywhere
    /// (every node cut off alone, or too many down) cannot be followed by
    /// an election, so a later one that leaves a majority is taken; if none
    /// does, the first primary-removing fault.
    pub fn first_primary_fault(&self) -> Option<&FaultEvent> {
        let mut removing = self.faults.iter().filter(|f| f.removes_primary);
        self.faults
            .iter()
            .find(|f| f.removes_primary && !f.majority.is_empty())
            .or_else(|| removing.next())
    }

    /// When each acknowledged write completed, in order.
    pub fn ack_times(&self) -> Vec<Ms> {
        let mut acks: Vec<Ms> = self
            .writes
            .iter()
            .filter(|w| w.outcome == Outcome::Ok)
            .map(|w| w.complete_ms)
            .collect();
        acks.sort_unstable();
        acks
    }

    /// Keys of acknowledged writes with their values.
    pub fn acknowledged(&self) -> Vec<&WriteOp> {
        self.writes
            .iter()
            .filter(|w| w.outcome == Outcome::Ok)
            .collect()
    }
}

#[cfg(test)]
pub(crate) mod fixtures {
    //! Small builders for crafted histories used by checker tests.
    use super::*;

    pub fn history(nodes: usize) -> History {
        History {
            nodes: (1..=nodes).map(|i| format!("n{i}")).collect(),
            quorum: nodes / 2 + 1,
            timings: Timings::default(),
            lease_ms: 1500,
            election_bound_ms: 4300,
            poll_interval_ms: 100,
            ..Default::default()
        }
    }

    pub fn sample(at: Ms, node: &str, role: &str, epoch: u64, fenced: bool) -> Sample {
        let data_role = if role == "primary" { "master" } else { "slave" };
        Sample {
            at_ms: at,
            node: node.into(),
            data: Some(DataObs {
                role: data_role.into(),
                offset: Some(0),
                master_host: None,
                link_up: Some(true),
                write_probe: None,
            }),
            elector: Some(ElectorObs {
                role: role.into(),
                epoch,
                durable_epoch: None,
                boot_id: None,
                primary: None,
                fenced,
            }),
        }
    }

    /// Samples every 100 ms over `[from, to)` for one node in one role.
    pub fn steady(h: &mut History, node: &str, role: &str, epoch: u64, from: Ms, to: Ms) {
        let mut t = from;
        while t < to {
            let mut s = sample(t, node, role, epoch, false);
            if role != "primary" {
                if let Some(e) = s.elector.as_mut() {
                    e.primary = None;
                }
            }
            h.samples.push(s);
            t += 100;
        }
    }

    /// Samples every 100 ms over `[from, to)` of a master whose elector does
    /// not answer (killed, frozen), with what its probe writes got.
    pub fn headless_master(h: &mut History, node: &str, probe: WriteProbe, from: Ms, to: Ms) {
        let mut t = from;
        while t < to {
            let mut s = sample(t, node, "primary", 0, false);
            s.elector = None;
            s.data.as_mut().expect("data").write_probe = Some(probe);
            h.samples.push(s);
            t += 100;
        }
    }

    pub fn unreachable(h: &mut History, node: &str, from: Ms, to: Ms) {
        let mut t = from;
        while t < to {
            h.samples.push(Sample {
                at_ms: t,
                node: node.into(),
                data: None,
                elector: None,
            });
            t += 100;
        }
    }

    /// The primary n1 killed at `at`, n2 and n3 left as the majority.
    pub fn primary_kill(at: Ms) -> FaultEvent {
        FaultEvent {
            at_ms: at,
            end_ms: None,
            kind: "kill".into(),
            label: "kill primary".into(),
            nodes: vec!["n1".into()],
            primary_before: Some("n1".into()),
            removes_primary: true,
            majority: vec!["n2".into(), "n3".into()],
        }
    }

    pub fn write(node: &str, key: &str, at: Ms, outcome: Outcome) -> WriteOp {
        WriteOp {
            writer: 0,
            key: key.into(),
            value: format!("v-{key}"),
            node: node.into(),
            invoke_ms: at,
            complete_ms: at + 5,
            set_ok_ms: None,
            outcome,
            replicas: None,
            error: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::*;
    use super::*;

    #[test]
    fn merging_joins_overlapping_and_touching_intervals() {
        let v = merge(vec![
            Interval { start: 10, end: 20 },
            Interval { start: 0, end: 5 },
            Interval { start: 20, end: 30 },
            Interval { start: 25, end: 27 },
        ]);
        assert_eq!(
            v,
            vec![
                Interval { start: 0, end: 5 },
                Interval { start: 10, end: 30 }
            ]
        );
    }

    #[test]
    fn a_fenced_master_is_not_writable_and_an_unreachable_node_never_is() {
        let mut s = sample(0, "n1", "primary", 1, true);
        assert!(!s.writable());
        s.elector.as_mut().unwrap().fenced = false;
        assert!(s.writable());
        s.data = None;
        assert!(!s.writable());
    }

    #[test]
    fn a_probe_write_without_an_answer_is_neither_writable_nor_a_gap_in_a_writable_run() {
        // Chaos seed 2111 (Redis, 5 nodes): n1 fenced itself, then its elector
        // was killed; the entrypoint's SIGTERM put Redis into its shutdown
        // write pause: INFO said master, every probe SET hung.
        let mut h = history(3);
        steady(&mut h, "n1", "replica", 1, 0, 1000);
        headless_master(&mut h, "n1", WriteProbe::NoAnswer, 1000, 5500);
        assert!(!h.samples.last().unwrap().writable());
        assert!(!h.writable_intervals().contains_key("n1"));
        // A master taking the probe writes is writable, and one probe in
        // the middle that got no answer does not cut the run in two.
        headless_master(&mut h, "n2", WriteProbe::Accepted, 0, 600);
        headless_master(&mut h, "n2", WriteProbe::NoAnswer, 600, 700);
        headless_master(&mut h, "n2", WriteProbe::Accepted, 700, 1000);
        assert_eq!(
            h.writable_intervals()["n2"],
            vec![Interval {
                start: 0,
                end: 900 + 300
            }]
        );
        // A refusal (a fence) is conclusive: not writable.
        headless_master(&mut h, "n3", WriteProbe::Refused, 0, 1000);
        assert!(!h.writable_intervals().contains_key("n3"));
    }

    #[test]
    fn a_write_whose_wait_times_out_proves_writability_only_at_its_invoke() {
        // vip-isolate-primary: SET taken at 4564 ms, WAIT gave up at 6066 ms, while
        // every sample from 5501 ms on showed n1 fenced.
        let mut h = history(3);
        let mut slow = write("n1", "w:0:23", 4_564, Outcome::NotAcked);
        slow.complete_ms = 6_066;
        h.writes.push(slow);
        assert_eq!(
            h.writable_intervals()["n1"],
            vec![Interval {
                start: 4_564,
                end: 4_565
            }]
        );
        // Writes close together still make one run, up to the last invoke.
        h.writes.push(write("n1", "w:0:24", 4_700, Outcome::Ok));
        assert_eq!(
            h.writable_intervals()["n1"],
            vec![Interval {
                start: 4_564,
                end: 4_701
            }]
        );
    }

    #[test]
    fn a_sample_stops_counting_after_its_validity_when_the_node_goes_silent() {
        let mut h = history(3);
        steady(&mut h, "n1", "primary", 1, 0, 1000);
        let iv = h.writable_intervals();
        assert_eq!(
            iv["n1"],
            vec![Interval {
                start: 0,
                end: 900 + 300
            }]
        );
    }
}
