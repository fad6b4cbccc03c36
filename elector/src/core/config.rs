//! The core's view of configuration: ids, membership, timings, eligibility.

use super::quorum::Quorum;
use crate::protocol::NodeId;

/// Protocol timings in milliseconds (protocol §7; defaults from the seed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Timings {
    pub hb_interval_ms: u64,
    pub down_after_ms: u64,
    pub election_timeout_ms: u64,
    pub backoff_min_ms: u64,
    pub backoff_max_ms: u64,
    /// Safety margin between the end of a primary's lease and the earliest
    /// moment a voter that vouched for it may vote again (protocol §6.2.1).
    /// It must cover the time a fence takes to apply on the data node plus
    /// the clock-rate error over a lease; `check-config` enforces that the
    /// lease left over is still several heartbeats long.
    pub fence_margin_ms: u64,
}

/// The clock-rate error the safety argument assumes (protocol §6.2.1): two
/// nodes' monotonic clocks advance at rates within 1 % of each other.
pub const MAX_CLOCK_RATE_ERROR: f64 = 0.01;

/// The lease's margin when the config leaves `fence_margin_ms` unset: a
/// fifth of `down_after`, at least one heartbeat, at most a second. The one
/// place this default lives (config, render-config and `Timings::default`).
pub fn default_fence_margin_ms(hb_interval_ms: u64, down_after_ms: u64) -> u64 {
    (down_after_ms / 5).max(hb_interval_ms).min(1_000)
}

impl Default for Timings {
    fn default() -> Self {
        let (hb_interval_ms, down_after_ms) = (200, 5_000);
        Timings {
            hb_interval_ms,
            down_after_ms,
            election_timeout_ms: 3_000,
            backoff_min_ms: 1_000,
            backoff_max_ms: 5_000,
            fence_margin_ms: default_fence_margin_ms(hb_interval_ms, down_after_ms),
        }
    }
}

impl Timings {
    /// How long an echoed heartbeat stamp keeps a primary writable
    /// (protocol §6.2). A replica that echoed stamp `s` refuses other
    /// candidates until at least `s + voter_fresh`; the lease ends one
    /// heartbeat plus the fence margin before that, so the old primary's
    /// fence is in force before any voter can help elect a successor, even
    /// with a slow fence and clocks that drift within the stated bound.
    pub fn lease_ms(&self) -> u64 {
        self.voter_fresh_ms()
            .saturating_sub(self.hb_interval_ms)
            .saturating_sub(self.fence_margin_ms)
            .max(1)
    }

    /// The margin the lease actually leaves for a fence to apply once the
    /// clock-rate error is paid for (protocol §6.2.1): a fence slower than
    /// this can overlap a successor's writes.
    pub(crate) fn fence_budget_ms(&self) -> u64 {
        let drift = MAX_CLOCK_RATE_ERROR * (self.lease_ms() + self.voter_fresh_ms()) as f64;
        self.fence_margin_ms
            .saturating_add(self.hb_interval_ms)
            .saturating_sub(drift.ceil() as u64)
    }

    /// How recently a voter must have heard the primary to refuse an OFFER
    /// (protocol §6.3). Two heartbeats shorter than `down_after`, so a voter
    /// whose view lags the candidate's by a heartbeat or two does not turn down
    /// a legitimate election, while a primary that heartbeats normally (every
    /// `hb_interval`) is always "fresh".
    /// How long a primary stays fenced by a lost lease before it resigns
    /// (§6.9): its voters stop vouching for it after `voter_fresh`, their
    /// own detection takes `down_after`, and an election of one of them
    /// `election_timeout`. Past that, nobody else could be elected (every
    /// other member is below its floor, or partitioned away), and the
    /// primary's own data may be the one that holds the acknowledged
    /// writes: it resigns and stands like any other node.
    pub fn fenced_give_up_ms(&self) -> u64 {
        self.voter_fresh_ms() + self.down_after_ms + self.election_timeout_ms
    }

    pub fn voter_fresh_ms(&self) -> u64 {
        self.down_after_ms
            .saturating_sub(2 * self.hb_interval_ms)
            .max(self.hb_interval_ms)
    }

    /// How long a freshly started node listens before it may stand: long
    /// enough to hear every live peer's heartbeat (and so its offset) twice.
    pub(crate) fn startup_grace_ms(&self) -> u64 {
        (3 * self.hb_interval_ms).min(self.down_after_ms)
    }

    /// How long a node must have been eligible before it stands: two
    /// heartbeats, so every live peer has heard it eligible (§5.1).
    pub(crate) fn eligibility_announce_ms(&self) -> u64 {
        2 * self.hb_interval_ms
    }
}

/// One member of the cluster as the core needs it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Member {
    pub id: NodeId,
    /// Data-node client address peers replicate from and clients are told;
    /// `None` for a witness, which has no data node (protocol §4.5).
    pub data_addr: Option<String>,
}

impl Member {
    pub(crate) fn is_witness(&self) -> bool {
        self.data_addr.is_none()
    }
}

/// Priority preemption (protocol §8.1, keepalived's `preempt`): the primary
/// hands over, by the planned switchover, to a member of higher priority
/// that has been ready for `delay_ms`. Off by default: a failover then
/// leaves the primary where it is, as before.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Preempt {
    pub enabled: bool,
    /// How long a preferred member must have been ready without a break
    /// (healthy, in the mesh, caught up) before the primary hands over. A
    /// member that stops being ready starts this wait again: no flapping.
    pub delay_ms: u64,
}

impl Default for Preempt {
    fn default() -> Self {
        Preempt {
            enabled: false,
            delay_ms: 10_000,
        }
    }
}

/// Deliberate protocol violations, compiled into `elector-faulty` only, so the
/// conformance suite can prove its checkers catch real bugs. The last two
/// bring back the rules before §6.10, for the simulator's controls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Faults {
    pub accept_twice_per_epoch: bool,
    pub promote_without_quorum: bool,
    pub no_lease_fencing: bool,
    /// No floor: a node stands and votes with whatever its data node reads.
    pub ignore_floor: bool,
    /// A kevy primary demoted in its epoch is promoted again in the same
    /// epoch (a second stream under one `data_epoch`).
    pub repromote_in_epoch: bool,
    /// A kevy reading in another stream than the data epoch's keeps the
    /// position proven (kevy seed 919, §6.10 "A reading in another stream").
    pub trust_another_stream: bool,
    /// A primary fenced by a lost lease holds on for ever (kevy seeds 1566
    /// and 2024, §6.9).
    pub hold_a_lost_lease: bool,
    /// A fence issued while a durable write is pending waits for that
    /// write (§5.2.1's defect, issue 10 finding 2): a primary whose disk
    /// stalls keeps its data node writable past its lease. The model
    /// checker's control (issue 39).
    pub fences_wait_for_persist: bool,
    /// An inherited unclaimed join read unproven counts only as
    /// `(joined, 0)`, so it votes for another replica that claimed the
    /// joined stream (kevy with loading, five nodes, seed 1937, §6.10).
    pub count_an_unproven_join_from_zero: bool,
    /// A node with no stream record and no floor starts proven even with
    /// an unclaimed join, whatever process its data node is now (kevy with
    /// loading, three nodes, seed 5700, §6.10 "A join outlives its
    /// elector").
    pub trust_a_fresh_start_during_a_join: bool,
    /// An inherited unclaimed join is trusted once a reading proves the
    /// position in the recorded stream, whatever process the data node is
    /// now: a data node back from files older than the join votes for a
    /// candidate without what it acknowledged there (kevy with loading,
    /// seed 1588's shape, §6.10 "A join whose process is gone").
    pub trust_a_recorded_reading_during_a_join: bool,
    /// The joined primary's offer in its own stream is judged against what
    /// the unclaimed join read, as before §6.10 "The joined stream's
    /// source": kevy's lifetime-maximum `INFO` offset then refuses it for
    /// ever (two kevy nodes, seed 373: a liveness control).
    pub count_the_joined_sources_offer_against_the_join: bool,
    /// An inherited unclaimed join read from the very process it was set
    /// out from counts as unproven, as before §6.10's "A join outlives its
    /// elector" covered it: a 0 there refuses every replica that claimed
    /// the joined stream (kevy chaos, five nodes, seed 7: a liveness
    /// control).
    pub doubt_the_joining_process: bool,
    /// An old primary whose reading of the stream it served is unproven,
    /// proven below what it held there, or taken before someone else ended
    /// its kevy feed, votes with its held position,
    /// its last poll as primary, as before §6.10's "An old primary's tail":
    /// a write of the poll after, acknowledged by a replica outside the
    /// voters, is lost (kevy focused schedule, seed 6257).
    pub trust_the_held_tail: bool,
    /// A replica whose kevy runner someone else ended votes with its last
    /// reading, as before §6.10's "A replica's tail": a write of the poll
    /// after, which it acknowledged and the other voters lack, is lost.
    pub trust_the_replicas_last_poll: bool,
}

/// What the core must know of its data node's kind (§6.10).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Backend {
    /// Every promotion starts a stream whose offsets begin again (kevy 7: a
    /// new feed generation from offset 0), so offsets of two promotions are
    /// not comparable: the node is promoted at most once per epoch. Redis
    /// continues its offsets across a promotion (`master_replid2`): false.
    pub promotion_restarts_stream: bool,
}

/// Everything the core is constructed with.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CoreConfig {
    pub node_id: NodeId,
    /// Every member, this node included (protocol §6.1: quorum counts them all).
    pub members: Vec<Member>,
    pub timings: Timings,
    /// 0 = never a candidate.
    pub priority: u32,
    /// A replica further behind than this (in replication-offset bytes) is
    /// not electable (seed 001).
    pub max_lag: u64,
    /// Seeds the core's RNG (election backoff jitter).
    pub seed: u64,
    pub faults: Faults,
    pub preempt: Preempt,
    pub backend: Backend,
}

impl CoreConfig {
    /// The majority of every member, witnesses included (§6.1).
    pub fn quorum(&self) -> Quorum {
        Quorum::of(self.members.len())
    }

    pub(crate) fn data_addr_of(&self, id: &str) -> Option<&str> {
        self.members
            .iter()
            .find(|m| m.id == id)
            .and_then(|m| m.data_addr.as_deref())
    }

    pub(crate) fn is_witness(&self, id: &str) -> bool {
        self.members.iter().any(|m| m.id == id && m.is_witness())
    }

    /// This node is a witness: it votes and echoes, never stands, and has
    /// no data node (§4.5).
    pub(crate) fn i_am_witness(&self) -> bool {
        self.is_witness(&self.node_id)
    }

    pub fn witnesses(&self) -> usize {
        self.members.iter().filter(|m| m.is_witness()).count()
    }

    pub fn data_members(&self) -> usize {
        self.members.len() - self.witnesses()
    }

    /// The data promise (§4.5): how many data replicas must hold a write
    /// (`WAIT` this many) for every primary a quorum can elect to hold it.
    /// An election set of `q` members contains at least `max(1, q − w)` data
    /// nodes (the candidate at least), and those must meet the replicas that
    /// acknowledged: `k + max(1, q − w) > d − 1`. Without witnesses this is
    /// `n − q`, at most the usual `quorum − 1`; and never below one replica
    /// where there is one. Two data nodes without a witness would get
    /// `n − q = 0`, a promise only the old primary's own tail could keep
    /// (every election needs it), so an old primary that came back unable
    /// to prove its data would block its successor for ever; with `WAIT 1`
    /// the successor holds every acknowledged write (§4.5, §6.10).
    pub fn data_promise(&self) -> usize {
        let d = self.data_members();
        let formula = d.saturating_sub(self.min_data_in_election());
        formula.max(1).min(d.saturating_sub(1))
    }

    /// An election set of `q` members holds at least this many data nodes,
    /// the candidate at least (§4.5).
    fn min_data_in_election(&self) -> usize {
        let q = self.quorum().size();
        q.saturating_sub(self.witnesses()).max(1)
    }

    /// Whether a voter's *held position* (what its data node held as its
    /// primary, acknowledged or not) must count in its vote (§6.10): only
    /// where the acknowledging replicas can miss every data node of an
    /// election set but the old primary. A candidate other than the old
    /// primary is a replica, and an election set holds at least
    /// `max(1, m − 1)` data nodes besides the old primary (`m` its data
    /// nodes); when `k + max(1, m − 1) > d − 1` those always meet the `k`
    /// replicas that acknowledged, so the old primary's tail beyond them
    /// is unacknowledged and must not stop a successor (2 nodes, 2 + 1,
    /// 3 + 2). With 3, 4 or 5 nodes, or 4 + 1, it must count.
    pub(crate) fn held_guards_the_promise(&self) -> bool {
        let others = self.min_data_in_election().saturating_sub(1).max(1);
        self.data_promise() + others <= self.data_members().saturating_sub(1)
    }

    /// How many data replicas the data node's own dead-man switch (Redis
    /// `min-replicas-to-write`, §6.4.1) may demand: those a primary that
    /// holds its lease has even when every witness supports it,
    /// `max(0, q − 1 − w)`. More would fence a legitimate primary (a healthy
    /// 2+1 cluster whose only replica is down keeps its lease by the
    /// witness); without witnesses this is the usual `quorum − 1`.
    pub(crate) fn dead_man_replicas(&self) -> usize {
        (self.quorum().size() - 1).saturating_sub(self.witnesses())
    }

    pub(crate) fn is_member(&self, id: &str) -> bool {
        self.members.iter().any(|m| m.id == id)
    }

    /// Every member but this node.
    pub(crate) fn peer_ids(&self) -> impl Iterator<Item = &str> {
        self.members
            .iter()
            .map(|m| m.id.as_str())
            .filter(move |id| *id != self.node_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(data: usize, witnesses: usize) -> CoreConfig {
        let members = (0..data + witnesses)
            .map(|i| Member {
                id: format!("n{}", i + 1),
                data_addr: (i < data).then(|| format!("n{}:6379", i + 1)),
            })
            .collect();
        CoreConfig {
            node_id: "n1".into(),
            members,
            timings: Timings::default(),
            priority: 100,
            max_lag: 0,
            seed: 0,
            faults: Faults::default(),
            preempt: Preempt::default(),
            backend: Backend::default(),
        }
    }

    #[test]
    fn the_data_promise_and_the_dead_man_switch_count_data_replicas_only() {
        // §4.5: (data, witnesses) -> (quorum, WAIT, min-replicas-to-write)
        let table = [
            ((2, 0), (2, 1, 1)),
            ((3, 0), (2, 1, 1)),
            ((5, 0), (3, 2, 2)),
            ((4, 0), (3, 1, 2)),
            ((2, 1), (2, 1, 0)),
            ((3, 2), (3, 2, 0)),
            ((4, 1), (3, 2, 1)),
            ((2, 2), (3, 1, 0)),
            ((2, 3), (3, 1, 0)),
        ];
        for ((d, w), (q, wait, switch)) in table {
            let c = cluster(d, w);
            assert_eq!(
                (c.quorum().size(), c.data_promise(), c.dead_man_replicas()),
                (q, wait, switch),
                "{d} data nodes + {w} witnesses"
            );
            assert!(c.data_promise() < d, "{d}+{w}: more replicas than exist");
        }
    }

    #[test]
    fn an_old_primarys_tail_counts_in_its_vote_only_where_the_promise_needs_it() {
        // §6.10: (data, witnesses) -> the held position guards the promise
        let table = [
            ((2, 0), false),
            ((3, 0), true),
            ((4, 0), true),
            ((5, 0), true),
            ((2, 1), false),
            ((3, 2), false),
            ((4, 1), true),
            ((2, 2), false),
        ];
        for ((d, w), needed) in table {
            assert_eq!(
                cluster(d, w).held_guards_the_promise(),
                needed,
                "{d} data nodes + {w} witnesses"
            );
        }
    }
}
