//! Election messages and their RESP2 field encoding (docs/protocol.md §3).
//!
//! The four seed messages (HB, OFFER, ACCEPT, ANNOUNCE) keep their seed field
//! order; our extensions only *append* fields or add message types, so a frame
//! from a seed-compatible peer still decodes. Decoding is total: every malformed
//! field list becomes a [`MessageError`], never a panic.

mod wire;

use std::fmt;

pub use self::wire::{heartbeat_form, MessageError, PeerForm};

/// Operator-chosen node identity: ASCII, at most 32 bytes (protocol §2).
pub(crate) type NodeId = String;

/// Longest node id the protocol accepts.
pub(crate) const MAX_NODE_ID_LEN: usize = 32;
/// The largest epoch any message may carry (§3.6): far beyond what elections
/// can reach (one per round), far below where `epoch + 1` could wrap.
pub const MAX_EPOCH: u64 = 1 << 48;
/// The largest number any field may carry (offsets, stamps, echoes):
/// arithmetic on them (`echo + lease`) can never overflow.
pub(crate) const MAX_WIRE_NUMBER: u64 = 1 << 62;

/// A node's self-perceived role, as carried in heartbeats and `/status`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Replica,
    Candidate,
    Primary,
}

impl Role {
    /// All roles, in the order metrics list them.
    pub(crate) const ALL: [Role; 3] = [Role::Primary, Role::Replica, Role::Candidate];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Role::Replica => "replica",
            Role::Candidate => "candidate",
            Role::Primary => "primary",
        }
    }

    fn parse(bytes: &[u8]) -> Option<Role> {
        match bytes {
            b"replica" => Some(Role::Replica),
            b"candidate" => Some(Role::Candidate),
            b"primary" => Some(Role::Primary),
            _ => None,
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a voter turned an OFFER down (extension `REJECT`, protocol §3.5).
/// Sending the reason lets a candidate give up early and lets operators see
/// why an election did not go through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RejectReason {
    /// The offer's epoch is not above the highest epoch this voter knows.
    StaleEpoch,
    /// The voter already voted in this epoch.
    AlreadyVoted,
    /// The voter still hears a live primary (no disruptive elections).
    PrimaryAlive,
    /// The voter's data node is ahead of the candidate's.
    CandidateBehind,
    /// The voter has not yet observed its own data node (just restarted),
    /// so it cannot tell whether the candidate is behind it.
    OwnOffsetUnknown,
}

impl RejectReason {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            RejectReason::StaleEpoch => "stale_epoch",
            RejectReason::AlreadyVoted => "already_voted",
            RejectReason::PrimaryAlive => "primary_alive",
            RejectReason::CandidateBehind => "candidate_behind",
            RejectReason::OwnOffsetUnknown => "own_offset_unknown",
        }
    }

    fn parse(bytes: &[u8]) -> Option<RejectReason> {
        [
            RejectReason::StaleEpoch,
            RejectReason::AlreadyVoted,
            RejectReason::PrimaryAlive,
            RejectReason::CandidateBehind,
            RejectReason::OwnOffsetUnknown,
        ]
        .into_iter()
        .find(|r| r.as_str().as_bytes() == bytes)
    }
}

/// Heartbeat (protocol §3.1). The first five fields are the seed's; the rest
/// are optional extensions.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Heartbeat {
    /// The committed epoch the sender follows (the epoch of its primary).
    pub epoch: u64,
    pub node_id: NodeId,
    pub role: Role,
    pub offset: u64,
    /// Highest epoch the sender has seen or voted in; candidates start above it
    /// so that one round is enough after a partition pushed someone's vote up.
    pub max_epoch: u64,
    /// Who the sender follows in `epoch` (None when it knows no primary).
    pub primary: Option<NodeId>,
    /// Whether the sender could be elected right now (priority, lag, data node).
    pub eligible: bool,
    /// Whether the sender's data node is fenced (not writable).
    pub fenced: bool,
    /// A primary that lost its quorum lease (flag `l`, §6.9): unlike a
    /// switchover drain or a fresh primary awaiting its first echoes, this
    /// fence lasts as long as the fault, and peers stop vouching for it.
    pub lease_lost: bool,
    /// Epoch of the replication stream `offset` belongs to (protocol §4.3):
    /// offsets are only comparable within one primary's stream.
    pub data_epoch: u64,
    /// Sender's monotonic clock in ms when sent (primary lease, §6.2).
    pub stamp: u64,
    /// The latest `stamp` this sender received from the primary it follows
    /// (0 when it follows none, or has voted in a later epoch).
    pub echo: u64,
    /// The sender's configured `priority` (protocol §8.1, preemption; 0
    /// from a peer older than the extension, which is never preferred).
    pub priority: u64,
    /// The sender's floor (protocol §6.10): the highest `(data_epoch,
    /// offset)` its data node held while following a primary with its link
    /// up, so the most it may have acknowledged. Witnesses refuse a
    /// candidate below what the data promise says is acknowledged. `None`
    /// from a node that never followed (or an elector older than §6.10).
    pub floor: Option<(u64, u64)>,
    /// The sender never told its data node to take writes in `epoch` (its
    /// `led` is below it, flag `u`, §6.10): a node whose unclaimed join of
    /// that epoch followed the sender learns the joined stream never began.
    /// Absent from electors before it, which say nothing.
    pub unled: bool,
}

/// One election message (protocol §3).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Message {
    /// `HELLO <node_id> [<fingerprint>]`: first frame on every connection;
    /// names the sender and what it believes the membership and the lease
    /// timings are (§3.7; absent from electors older than the extension).
    Hello {
        node_id: NodeId,
        fingerprint: Option<String>,
    },
    Hb(Heartbeat),
    /// `OFFER <epoch> <candidate> <offset> [<data_epoch> [forced|- [<led>|-]]]`.
    Offer {
        epoch: u64,
        candidate: NodeId,
        offset: u64,
        data_epoch: u64,
        /// An operator accepted losing whatever the candidate lacks
        /// (§6.10, `elector accept-data-loss`): voters waive the data checks
        /// (never the epoch, vote-once and live-primary rules) and log it.
        forced: bool,
        /// The newest epoch in which the candidate told its data node to
        /// take writes (§6.10, its durable `led`); `None` when it cannot
        /// say (a record from before it was kept, or an elector before the
        /// field). A voter whose unclaimed join of a newer epoch was this
        /// candidate's learns that the joined stream never began.
        led: Option<u64>,
    },
    /// `ACCEPT <epoch> <voter>`.
    Accept {
        epoch: u64,
        voter: NodeId,
    },
    /// `REJECT <epoch> <voter> <reason> <voter_max_epoch>` (extension).
    Reject {
        epoch: u64,
        voter: NodeId,
        reason: RejectReason,
        max_epoch: u64,
    },
    /// `ANNOUNCE <epoch> <primary> <primary_addr> [<stamp>]`.
    Announce {
        epoch: u64,
        primary: NodeId,
        primary_addr: String,
        stamp: u64,
    },
    /// `HANDOVER <epoch> <from> <to>` (extension, planned switchover): the
    /// primary of `epoch` has fenced itself, `to` has caught up, and the primary
    /// resigns in `to`'s favour.
    Handover {
        epoch: u64,
        from: NodeId,
        to: NodeId,
    },
}

impl Message {
    /// Message type name, for logs and metrics labels.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Message::Hello { .. } => "hello",
            Message::Hb(_) => "hb",
            Message::Offer { .. } => "offer",
            Message::Accept { .. } => "accept",
            Message::Reject { .. } => "reject",
            Message::Announce { .. } => "announce",
            Message::Handover { .. } => "handover",
        }
    }

    /// The node this message claims to come from, when it names one. The
    /// transport checks it against the connection's HELLO so a peer cannot
    /// speak for another.
    pub(crate) fn claimed_sender(&self) -> Option<&str> {
        match self {
            Message::Hello { node_id, .. } => Some(node_id),
            Message::Hb(hb) => Some(&hb.node_id),
            Message::Offer { candidate, .. } => Some(candidate),
            Message::Accept { voter, .. } | Message::Reject { voter, .. } => Some(voter),
            Message::Announce { primary, .. } => Some(primary),
            Message::Handover { from, .. } => Some(from),
        }
    }

    /// The highest epoch the message claims (any epoch field), for the
    /// core's bound on epoch jumps (§3.6).
    pub(crate) fn highest_epoch(&self) -> u64 {
        match self {
            Message::Hello { .. } => 0,
            Message::Hb(hb) => hb
                .epoch
                .max(hb.max_epoch)
                .max(hb.data_epoch)
                .max(hb.floor.map_or(0, |f| f.0)),
            Message::Offer {
                epoch,
                data_epoch,
                led,
                ..
            } => (*epoch).max(*data_epoch).max(led.unwrap_or(0)),
            Message::Accept { epoch, .. }
            | Message::Announce { epoch, .. }
            | Message::Handover { epoch, .. } => *epoch,
            Message::Reject {
                epoch, max_epoch, ..
            } => (*epoch).max(*max_epoch),
        }
    }

    /// Messages an outbound queue must never drop in favour of heartbeats.
    pub(crate) fn is_election_critical(&self) -> bool {
        !matches!(self, Message::Hb(_))
    }
}

/// Validates a node id (protocol §2): 1..=32 printable ASCII bytes, no spaces.
pub(crate) fn valid_node_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= MAX_NODE_ID_LEN && id.bytes().all(|b| b.is_ascii_graphic())
}

#[cfg(test)]
mod tests;
