//! Plain data the core consumes and produces. No I/O, no clocks.

use crate::protocol::{NodeId, Role};
use serde::{Deserialize, Serialize};
use std::fmt;
use thiserror::Error;

/// Monotonic milliseconds, supplied by the caller (the shell's `Instant`, or
/// the simulator's virtual clock). The core never reads a clock itself.
pub type Millis = u64;

/// What must survive a restart (protocol §5.2). The shell writes it with
/// write-temp, fsync, rename, fsync-dir before any message that depends on it
/// leaves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Hash)]
pub struct PersistedState {
    /// Highest committed epoch this node has learned (ANNOUNCE or primary HB).
    pub epoch: u64,
    /// Highest epoch in which this node has cast a vote (its own candidacy
    /// included). A node never votes in an epoch `<= voted_epoch` again.
    pub voted_epoch: u64,
    /// Whom it voted for in `voted_epoch` (for operators; not needed for safety).
    pub(crate) voted_for: Option<NodeId>,
    /// Epoch of the replication stream the data node last joined (§4.3).
    /// Durable so that a restarted elector neither undersells its data when
    /// voting (which could elect a candidate missing acknowledged writes)
    /// nor has to rediscover it.
    #[serde(default)]
    pub(crate) data_epoch: u64,
    /// Highest stream epoch the data node *may* hold data from: set as soon
    /// as it is pointed at that stream, before the link is seen up. Voters
    /// judge candidates against this (an under-reported position could vote
    /// for a candidate missing acknowledged writes); candidates advertise
    /// only the confirmed `data_epoch`.
    #[serde(default)]
    pub(crate) data_epoch_seen: u64,
    /// Which stream `data_epoch` is, in the backend's own terms (Redis
    /// `master_replid`, kevy's feed generation), as read when the stream was
    /// claimed (§4.3, §6.10). After a restart of the elector or of the data
    /// node, a reading in this stream proves where the data node stands; any
    /// other reading proves nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) stream: Option<StreamRecord>,
    /// The highest position the data node held while it followed a primary
    /// with its link up: what it may have acknowledged (§6.10). A node whose
    /// data node comes back below it neither stands nor votes for anyone
    /// below it, whatever happened to its memory or its data meanwhile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) floor: Option<Floor>,
    /// The highest position the data node held as this node's primary: the
    /// writes it took, acknowledged or not (§6.10). Like the floor it keeps
    /// this node from standing, or voting, below what its data node held;
    /// unlike the floor it is never advertised to witnesses, since its
    /// unacknowledged tail must not stop a successor that holds every
    /// acknowledged write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) held: Option<Floor>,
    /// The newest epoch whose primary this node pointed its data node at,
    /// written before the data node is told to (§6.10). Until a claim in
    /// that epoch is recorded, the data node may hold (and have
    /// acknowledged) that stream's writes under a name no record of ours
    /// carries: a reading in another stream then counts as a position in
    /// this epoch when voting. Without it, an elector that died between its
    /// data node linking up and the claim being written would come back
    /// voting with the older stream's position.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub(crate) joining: u64,
    /// Whom this node set out to follow in `joining` (§6.10): that epoch's
    /// primary, the only node whose data node could have started the
    /// joined stream. `None` in a record written before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) joining_primary: Option<NodeId>,
    /// The data-node process this node set out to join `joining` from: a
    /// name unique to it (`Observation::process_names`), read before the
    /// join was written (§6.10, "A join outlives its elector"). Found in
    /// the process after a restart of this elector, it says the data node
    /// is still that process, whose readings say what it received since;
    /// `None`: none was read, and such a join is unproven after a restart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) joining_process: Option<String>,
    /// The newest epoch in which this node told its data node to take
    /// writes, written before the data node is told (§6.10). Its OFFER
    /// carries it: a voter whose unclaimed join of a newer epoch was this
    /// node's learns that the joined stream never began, so its reading
    /// guards nothing of it. `None` in a record written before it was kept
    /// (such a node may have led anything: it offers no `led`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) led: Option<u64>,
    /// This state replaced one that was lost (`elector run --reset-state`,
    /// §5.2): the floor, the stream record and `led` it held are gone, while
    /// the data node may still hold writes it acknowledged. Until the data
    /// node joins a primary's stream again (a claim), the node neither
    /// stands nor votes, except for an operator's forced candidacy (§6.10).
    #[serde(default, skip_serializing_if = "is_false")]
    pub(crate) floor_unknown: bool,
    /// This node's data node followed the stream of this data epoch as a
    /// replica until someone else ended its kevy runner between two polls
    /// (an operator's `REPLICAOF`): what it acknowledged there may exceed
    /// its floor, the last reading, so it votes as if it held the whole
    /// stream until it joins the stream again (§6.10, "A replica's tail").
    /// Durable: an elector restarted meanwhile would otherwise vote with
    /// its floor again (simulator seed 41 of
    /// `a_kevy_replica_redirected_by_hand_across_its_electors_restart_loses_no_acknowledged_write`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) tail_unread: Option<u64>,
}

/// A fresh state (no file yet): a node that never led anything says so,
/// `led` 0 (§6.10). A file written before `led` was kept reads as `None`
/// (serde's default): such a node may have led anything.
impl Default for PersistedState {
    fn default() -> Self {
        PersistedState {
            epoch: 0,
            voted_epoch: 0,
            voted_for: None,
            data_epoch: 0,
            data_epoch_seen: 0,
            stream: None,
            floor: None,
            held: None,
            joining: 0,
            joining_primary: None,
            joining_process: None,
            led: Some(0),
            floor_unknown: false,
            tail_unread: None,
        }
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl PersistedState {
    /// The state an operator starts from after the old one was lost
    /// (`--reset-state`, §5.2): no votes, no floor, and for what it did
    /// before, the most it may have done: `led` unknown (it may have led any
    /// epoch: a voter's unclaimed join must not be freed by its word) and its
    /// floor unknown (it sits out elections until its data node joins a
    /// primary's stream).
    pub fn after_state_loss() -> PersistedState {
        PersistedState {
            led: None,
            floor_unknown: true,
            ..PersistedState::default()
        }
    }

    /// The epoch whose stream this node last set out to join (§6.10); the
    /// watchdog tags its floor hints with it.
    pub fn joining(&self) -> u64 {
        self.joining
    }

    /// The data-node process an unclaimed join was set out from (§6.10):
    /// the adapter asks the process about it after a restart.
    pub fn joining_process(&self) -> Option<&str> {
        self.joining_process.as_deref()
    }
}

/// A data node's place in a replication stream: the stream's epoch (the
/// election that started it, §4.3) and the offset within it. Ordered
/// lexicographically, as candidates are ranked.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct Floor {
    pub data_epoch: u64,
    pub offset: u64,
}

impl Floor {
    pub fn new(data_epoch: u64, offset: u64) -> Floor {
        Floor { data_epoch, offset }
    }

    /// `(data_epoch, offset)`, the form positions take on the wire.
    pub fn pair(self) -> (u64, u64) {
        (self.data_epoch, self.offset)
    }
}

/// A replication stream as the data node names it: Redis's `master_replid`,
/// kevy's feed generation. Opaque to the core: it is only ever compared.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct StreamId(pub String);

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The durable record of which backend stream `data_epoch` names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Hash)]
pub struct StreamRecord {
    pub data_epoch: u64,
    pub id: StreamId,
}

/// What the data node should be. The shell's adapter drives the real server
/// towards the latest target and keeps retrying; it reports what it sees back
/// as an [`Observation`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum DataNodeTarget {
    /// Accept writes: `REPLICAOF NO ONE` and no fence.
    Primary,
    /// A primary that must not accept writes right now (quorum lost, or
    /// elected and waiting for its first lease). Keeps its data.
    FencedPrimary,
    /// A primary draining for a planned handover (protocol §8): refuses
    /// writes but stays a primary, so its replicas keep streaming and its
    /// offset stays readable until the successor has caught up. A backend
    /// that cannot keep a fenced node a primary must fail to apply this
    /// (the switchover then rolls back) rather than fall back to demotion.
    HandingOver,
    /// Replicate from `primary` (whose data address is `primary_addr`).
    Follow {
        primary: NodeId,
        primary_addr: String,
    },
    /// Read-only with no upstream: the start-up clamp and the state between
    /// losing a primary and learning the next.
    Isolated,
}

impl DataNodeTarget {
    /// True when the data node accepts writes in this target.
    pub fn writable(&self) -> bool {
        matches!(self, DataNodeTarget::Primary)
    }

    /// True when reaching this target only takes authority away (writes
    /// refused, no new upstream): such a target never waits behind a
    /// persist (protocol §5.2), so a node whose disk fails still fences.
    /// `Follow` is not one: which stream the data node joins is part of the
    /// durable state (§4.3) and must be recorded first.
    pub fn fences(&self) -> bool {
        matches!(
            self,
            DataNodeTarget::FencedPrimary | DataNodeTarget::HandingOver | DataNodeTarget::Isolated
        )
    }
}

/// The data node's state as last observed by the adapter.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Observation {
    pub(crate) reachable: bool,
    /// Replication offset (primary: master offset; replica: applied offset).
    pub(crate) offset: Option<u64>,
    /// Replica: the link to its upstream is up. Primary: always true.
    pub(crate) link_up: bool,
    /// Sequence number of the last [`Action::ApplyDataNode`] the adapter has
    /// carried out successfully (0 before any).
    pub(crate) applied_seq: u64,
    /// The offset read right after that apply: if the offset moves away from
    /// it, data from the new upstream may have arrived (§4.3).
    pub(crate) offset_at_apply: Option<u64>,
    /// How many times the adapter has seen the data node come back as a
    /// different process (Redis `run_id`, kevy `process_id`) or with its
    /// position gone backwards. Each increase tells the core that whatever
    /// the data node held or was told before may be gone (§6.8); the adapter
    /// applies nothing but the start-up clamp until the core issues a new
    /// target.
    pub(crate) generation: u64,
    /// The data node's process is not there at all (connection refused):
    /// unlike a slow node, whatever answers next may be a new process with
    /// other data, and replicas reconnecting to it on their own would copy
    /// that (kevy serves a full snapshot from an empty restarted node), so
    /// a primary in this state resigns at once (§6.8).
    pub(crate) gone: bool,
    /// How many times the adapter found the node it had made writable
    /// demoted by someone else, the same process still answering (the
    /// watchdog's clamp, an operator's `REPLICAOF`). Its data is intact, so
    /// this is no restart; but the adapter makes it writable again only for
    /// a target issued after the demotion, so the core re-decides (lease
    /// first) instead of the adapter replaying a decision from before it
    /// (§6.4.1).
    pub(crate) overridden: u64,
    /// The data node says it is a primary (Redis/kevy `role:master`).
    pub(crate) master: bool,
    /// The stream `offset` belongs to, as the backend names it (§6.10):
    /// `None` when the data node cannot say (a kevy that follows nobody and
    /// whose position this adapter did not read before it left its stream).
    pub(crate) stream: Option<StreamId>,
    /// The stream this one continues, when the backend keeps offsets across
    /// a promotion (Redis `master_replid2`): a reading in `stream` is then
    /// also a reading in `stream_prev`. kevy never continues a stream.
    pub(crate) stream_prev: Option<StreamId>,
    /// What the watchdog read of the data node when it detached it
    /// (`<data_dir>/floor-hint`, §6.10): per stream, the highest offset it
    /// held. A replica whose elector was dead kept acknowledging until
    /// then, and nothing else records that; in the stream this node's
    /// record names, it raises the floor.
    pub(crate) floor_hint: Vec<FloorHint>,
    /// Names unique to the data-node process that answered (Redis
    /// `run_id`, kevy's process marks): the one a join was set out from,
    /// found again after this elector restarted, says the data node is
    /// still that process (§6.10, "A join outlives its elector").
    pub(crate) process_names: Vec<String>,
    /// How many times the adapter found the upstream it set on this replica
    /// replaced by someone else while its runner's position was unread
    /// (kevy, §6.10 "A replica's tail"). Each increase says the floor, the
    /// last reading, may trail what the node acknowledged in its stream.
    pub(crate) runners_ended_by_others: u64,
}

/// One of the watchdog's floor hints (§6.10): the highest offset the data
/// node held in `stream` when the watchdog detached it, and the epoch this
/// node was joining then (its durable `joining`, 0 for none).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FloorHint {
    pub stream: StreamId,
    pub offset: u64,
    pub joining: u64,
}

impl Observation {
    /// Whether this reading is in stream `id` (itself, or one it continues).
    pub(crate) fn in_stream(&self, id: &StreamId) -> bool {
        self.stream.as_ref() == Some(id) || self.stream_prev.as_ref() == Some(id)
    }
}

/// Machine-readable cause of a role change or fence change (issue 3 §1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    Startup,
    PeerTimeout,
    WonElection,
    LostElection,
    ElectionTimeout,
    NewerEpoch,
    QuorumLost,
    QuorumRegained,
    Switchover,
    SwitchoverRollback,
    DataNodeDown,
    DataNodeRecovered,
    PersistFailed,
    PrimaryResigned,
    /// The data node restarted or its data went backwards (§6.8).
    DataNodeRestarted,
    /// Our primary has reported itself fenced for longer than the
    /// freshness window: peers treat it as absent for voting (§6.9).
    PrimaryFenced,
    /// The primary hands over to a member of higher priority (§8.1).
    Preemption,
    /// The primary's data node left the stream it started in this epoch
    /// (demoted, or promoted anew by someone else) on a backend whose every
    /// promotion starts a new stream (kevy): it is never made writable again
    /// in the same epoch; a new election decides (§6.10).
    StreamEnded,
    /// An operator accepted losing what this node's data node may lack and
    /// made it stand (§6.10, `elector accept-data-loss`).
    DataLossAccepted,
    /// The primary was fenced by a lost lease for longer than its voters
    /// and an election of another member take (§6.9): it resigns to stand.
    FencedTooLong,
}

impl Reason {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Reason::Startup => "startup",
            Reason::PeerTimeout => "peer_timeout",
            Reason::WonElection => "won_election",
            Reason::LostElection => "lost_election",
            Reason::ElectionTimeout => "election_timeout",
            Reason::NewerEpoch => "newer_epoch",
            Reason::QuorumLost => "quorum_lost",
            Reason::QuorumRegained => "quorum_regained",
            Reason::Switchover => "switchover",
            Reason::SwitchoverRollback => "switchover_rollback",
            Reason::DataNodeDown => "data_node_down",
            Reason::DataNodeRecovered => "data_node_recovered",
            Reason::PersistFailed => "persist_failed",
            Reason::PrimaryResigned => "primary_resigned",
            Reason::DataNodeRestarted => "data_node_restarted",
            Reason::PrimaryFenced => "primary_fenced",
            Reason::Preemption => "preemption",
            Reason::StreamEnded => "stream_ended",
            Reason::DataLossAccepted => "data_loss_accepted",
            Reason::FencedTooLong => "fenced_too_long",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Something an operator should be told about (logs, `/status`, hooks, metrics).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Notice {
    RoleChanged {
        from: Role,
        to: Role,
        epoch: u64,
        primary: Option<NodeId>,
        reason: Reason,
    },
    /// The data node resumed accepting writes while this node stayed
    /// primary. (Stopping them is a [`super::Fence::Notify`]: it never waits
    /// behind a persist.)
    Unfenced {
        epoch: u64,
        reason: Reason,
    },
    /// A replica starts following a (new) primary.
    Following {
        primary: NodeId,
        epoch: u64,
        reason: Reason,
    },
    ElectionStarted {
        epoch: u64,
    },
    /// A switchover ended: `Ok` with the new primary's epoch or `Err` with why.
    SwitchoverFinished {
        to: NodeId,
        result: Result<u64, SwitchoverFailure>,
    },
    /// A peer's message the core refused before it changed anything
    /// (protocol §3.6: an epoch far beyond anything known). Counted like the
    /// transport's rejections, under `reason`.
    MessageDropped {
        from: NodeId,
        reason: &'static str,
        detail: String,
    },
    /// A fault worth a hook (`on_fault`): persist failure, data node trouble.
    Fault {
        what: String,
    },
    /// An operator accepted losing what `candidate` may lack (§6.10): this
    /// node stood with `position` below its floor (`candidate` is itself),
    /// or voted for such a candidacy while holding `floor`. Counted and
    /// logged; the hook `on_fault` fires.
    DataLossAccepted {
        epoch: u64,
        candidate: NodeId,
        position: (u64, u64),
        floor: (u64, u64),
    },
}

/// Why a planned switchover was refused or did not finish (§8). The shell
/// maps each to its API answer; the text is what operators read.
#[derive(Debug, Clone, PartialEq, Eq, Error, Hash)]
pub enum SwitchoverFailure {
    #[error("this node is not the primary")]
    NotPrimary,
    #[error("a switchover is already in progress")]
    InProgress,
    #[error("the target is already the primary")]
    TargetIsPrimary,
    #[error("the target is not a member of this cluster")]
    NotMember,
    #[error("the primary has lost its quorum")]
    QuorumLost,
    #[error("the target is not alive or not eligible")]
    TargetNotEligible,
    #[error("this primary's data node has not carried out its promotion yet (or cannot be read); ask again shortly")]
    DataNodeNotServing,
    #[error("the target did not catch up in time; the primary resumed writes")]
    DidNotCatchUp,
    #[error("the handover election did not complete in time; a regular election follows")]
    HandoverTimedOut,
    #[error("epoch {epoch} began elsewhere")]
    EpochBeganElsewhere { epoch: u64 },
    #[error("{elected} was elected instead of {to}")]
    OtherElected { elected: NodeId, to: NodeId },
}
