//! Election messages and their RESP2 field encoding (docs/protocol.md §3).
//!
//! The four seed messages (HB, OFFER, ACCEPT, ANNOUNCE) keep their seed field
//! order; our extensions only *append* fields or add message types, so a frame
//! from a seed-compatible peer still decodes. Decoding is total: every malformed
//! field list becomes a [`MessageError`], never a panic.

use std::fmt;
use thiserror::Error;

/// Operator-chosen node identity: ASCII, at most 32 bytes (protocol §2).
pub type NodeId = String;

/// Longest node id the protocol accepts.
pub const MAX_NODE_ID_LEN: usize = 32;
/// The largest epoch any message may carry (§3.6): far beyond what elections
/// can reach (one per round), far below where `epoch + 1` could wrap.
pub const MAX_EPOCH: u64 = 1 << 48;
/// The largest number any field may carry (offsets, stamps, echoes):
/// arithmetic on them (`echo + lease`) can never overflow.
pub const MAX_WIRE_NUMBER: u64 = 1 << 62;

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
    pub const ALL: [Role; 3] = [Role::Primary, Role::Replica, Role::Candidate];

    pub fn as_str(self) -> &'static str {
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
    pub fn as_str(self) -> &'static str {
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
#[derive(Debug, Clone, PartialEq, Eq)]
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
}

/// One election message (protocol §3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// `HELLO <node_id> [<fingerprint>]`: first frame on every connection;
    /// names the sender and what it believes the membership and the lease
    /// timings are (§3.7; absent from electors older than the extension).
    Hello {
        node_id: NodeId,
        fingerprint: Option<String>,
    },
    Hb(Heartbeat),
    /// `OFFER <epoch> <candidate> <offset> [<data_epoch>]`.
    Offer {
        epoch: u64,
        candidate: NodeId,
        offset: u64,
        data_epoch: u64,
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
    pub fn kind(&self) -> &'static str {
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
    pub fn claimed_sender(&self) -> Option<&str> {
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
    pub fn highest_epoch(&self) -> u64 {
        match self {
            Message::Hello { .. } => 0,
            Message::Hb(hb) => hb.epoch.max(hb.max_epoch).max(hb.data_epoch),
            Message::Offer {
                epoch, data_epoch, ..
            } => (*epoch).max(*data_epoch),
            Message::Accept { epoch, .. }
            | Message::Announce { epoch, .. }
            | Message::Handover { epoch, .. } => *epoch,
            Message::Reject {
                epoch, max_epoch, ..
            } => (*epoch).max(*max_epoch),
        }
    }

    /// Messages an outbound queue must never drop in favour of heartbeats.
    pub fn is_election_critical(&self) -> bool {
        !matches!(self, Message::Hb(_))
    }

    pub fn to_fields(&self) -> Vec<Vec<u8>> {
        fn n(v: u64) -> Vec<u8> {
            v.to_string().into_bytes()
        }
        fn s(v: &str) -> Vec<u8> {
            v.as_bytes().to_vec()
        }
        match self {
            Message::Hello {
                node_id,
                fingerprint,
            } => {
                let mut v = vec![s("HELLO"), s(node_id)];
                if let Some(fp) = fingerprint {
                    v.push(s(fp));
                }
                v
            }
            Message::Hb(hb) => {
                let mut flags = String::new();
                if hb.eligible {
                    flags.push('e');
                }
                if hb.fenced {
                    flags.push('f');
                }
                if hb.lease_lost {
                    flags.push('l');
                }
                if flags.is_empty() {
                    flags.push('-');
                }
                vec![
                    s("HB"),
                    n(hb.epoch),
                    s(&hb.node_id),
                    s(hb.role.as_str()),
                    n(hb.offset),
                    n(hb.max_epoch),
                    s(hb.primary.as_deref().unwrap_or("-")),
                    s(&flags),
                    n(hb.data_epoch),
                    n(hb.stamp),
                    n(hb.echo),
                ]
            }
            Message::Offer {
                epoch,
                candidate,
                offset,
                data_epoch,
            } => vec![
                s("OFFER"),
                n(*epoch),
                s(candidate),
                n(*offset),
                n(*data_epoch),
            ],
            Message::Accept { epoch, voter } => vec![s("ACCEPT"), n(*epoch), s(voter)],
            Message::Reject {
                epoch,
                voter,
                reason,
                max_epoch,
            } => vec![
                s("REJECT"),
                n(*epoch),
                s(voter),
                s(reason.as_str()),
                n(*max_epoch),
            ],
            Message::Announce {
                epoch,
                primary,
                primary_addr,
                stamp,
            } => vec![
                s("ANNOUNCE"),
                n(*epoch),
                s(primary),
                s(primary_addr),
                n(*stamp),
            ],
            Message::Handover { epoch, from, to } => {
                vec![s("HANDOVER"), n(*epoch), s(from), s(to)]
            }
        }
    }

    pub fn from_fields(fields: &[Vec<u8>]) -> Result<Message, MessageError> {
        let (name, args) = fields.split_first().ok_or(MessageError::Empty)?;
        let arity = |lo: usize, hi: usize| {
            if args.len() < lo || args.len() > hi {
                Err(MessageError::Arity {
                    kind: String::from_utf8_lossy(name).into_owned(),
                    got: args.len(),
                })
            } else {
                Ok(())
            }
        };
        match name.as_slice() {
            b"HELLO" => {
                arity(1, 2)?;
                let fingerprint = match args.get(1) {
                    None => None,
                    Some(v) => {
                        let fp = std::str::from_utf8(v).map_err(|_| MessageError::NotAscii)?;
                        if fp.len() > crate::net::fingerprint::MAX_FINGERPRINT_LEN
                            || !fp.bytes().all(|b| b.is_ascii_graphic())
                        {
                            return Err(MessageError::NotAscii);
                        }
                        Some(fp.to_string())
                    }
                };
                Ok(Message::Hello {
                    node_id: node_id(&args[0])?,
                    fingerprint,
                })
            }
            b"HB" => {
                arity(4, 10)?;
                let epoch = self::epoch(&args[0])?;
                let primary = match args.get(5).map(Vec::as_slice) {
                    None | Some(b"-") => None,
                    Some(id) => Some(node_id(id)?),
                };
                let flags = args.get(6).map(Vec::as_slice).unwrap_or(b"e");
                Ok(Message::Hb(Heartbeat {
                    epoch,
                    node_id: node_id(&args[1])?,
                    role: Role::parse(&args[2]).ok_or(MessageError::BadRole)?,
                    offset: number(&args[3])?,
                    max_epoch: args
                        .get(4)
                        .map(|v| self::epoch(v))
                        .transpose()?
                        .unwrap_or(epoch),
                    primary,
                    eligible: flags.contains(&b'e'),
                    fenced: flags.contains(&b'f'),
                    lease_lost: flags.contains(&b'l'),
                    data_epoch: optional_epoch(args, 7)?,
                    stamp: optional_number(args, 8)?,
                    echo: optional_number(args, 9)?,
                }))
            }
            b"OFFER" => {
                arity(3, 4)?;
                Ok(Message::Offer {
                    epoch: epoch(&args[0])?,
                    candidate: node_id(&args[1])?,
                    offset: number(&args[2])?,
                    data_epoch: optional_epoch(args, 3)?,
                })
            }
            b"ACCEPT" => {
                arity(2, 2)?;
                Ok(Message::Accept {
                    epoch: epoch(&args[0])?,
                    voter: node_id(&args[1])?,
                })
            }
            b"REJECT" => {
                arity(4, 4)?;
                Ok(Message::Reject {
                    epoch: epoch(&args[0])?,
                    voter: node_id(&args[1])?,
                    reason: RejectReason::parse(&args[2]).ok_or(MessageError::BadReason)?,
                    max_epoch: epoch(&args[3])?,
                })
            }
            b"ANNOUNCE" => {
                arity(3, 4)?;
                Ok(Message::Announce {
                    epoch: epoch(&args[0])?,
                    primary: node_id(&args[1])?,
                    primary_addr: String::from_utf8(args[2].clone())
                        .map_err(|_| MessageError::NotAscii)?,
                    stamp: optional_number(args, 3)?,
                })
            }
            b"HANDOVER" => {
                arity(3, 3)?;
                Ok(Message::Handover {
                    epoch: epoch(&args[0])?,
                    from: node_id(&args[1])?,
                    to: node_id(&args[2])?,
                })
            }
            _ => Err(MessageError::UnknownKind(
                String::from_utf8_lossy(&name[..name.len().min(16)]).into_owned(),
            )),
        }
    }
}

/// Why a decoded frame is not a valid election message.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MessageError {
    #[error("empty frame")]
    Empty,
    #[error("unknown message type {0:?}")]
    UnknownKind(String),
    #[error("{kind} with {got} arguments")]
    Arity { kind: String, got: usize },
    #[error("field is not a decimal u64")]
    BadNumber,
    #[error("unknown role")]
    BadRole,
    #[error("unknown reject reason")]
    BadReason,
    #[error("node id is empty, longer than 32 bytes or not printable ASCII")]
    BadNodeId,
    #[error("field is not ASCII")]
    NotAscii,
    #[error("number out of the protocol's range")]
    OutOfRange,
}

impl MessageError {
    pub fn label(&self) -> &'static str {
        match self {
            MessageError::Empty => "empty",
            MessageError::UnknownKind(_) => "unknown_kind",
            MessageError::Arity { .. } => "bad_arity",
            MessageError::BadNumber => "bad_number",
            MessageError::BadRole => "bad_role",
            MessageError::BadReason => "bad_reason",
            MessageError::BadNodeId => "bad_node_id",
            MessageError::NotAscii => "not_ascii",
            MessageError::OutOfRange => "out_of_range",
        }
    }
}

/// An appended epoch extension field: absent means 0.
fn optional_epoch(args: &[Vec<u8>], index: usize) -> Result<u64, MessageError> {
    args.get(index)
        .map(|v| epoch(v))
        .transpose()
        .map(|v| v.unwrap_or(0))
}

/// An appended extension field: absent means 0 (a seed-format peer).
fn optional_number(args: &[Vec<u8>], index: usize) -> Result<u64, MessageError> {
    args.get(index)
        .map(|v| number(v))
        .transpose()
        .map(|v| v.unwrap_or(0))
}

fn number(bytes: &[u8]) -> Result<u64, MessageError> {
    if bytes.is_empty() || bytes.len() > 20 || !bytes.iter().all(u8::is_ascii_digit) {
        return Err(MessageError::BadNumber);
    }
    let value: u64 = std::str::from_utf8(bytes)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or(MessageError::BadNumber)?;
    if value > MAX_WIRE_NUMBER {
        return Err(MessageError::OutOfRange);
    }
    Ok(value)
}

/// An epoch field: at most [`MAX_EPOCH`] (§3.6).
fn epoch(bytes: &[u8]) -> Result<u64, MessageError> {
    let value = number(bytes)?;
    if value > MAX_EPOCH {
        return Err(MessageError::OutOfRange);
    }
    Ok(value)
}

/// Validates a node id (protocol §2): 1..=32 printable ASCII bytes, no spaces.
pub fn valid_node_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= MAX_NODE_ID_LEN && id.bytes().all(|b| b.is_ascii_graphic())
}

fn node_id(bytes: &[u8]) -> Result<NodeId, MessageError> {
    let id = std::str::from_utf8(bytes).map_err(|_| MessageError::BadNodeId)?;
    if valid_node_id(id) && id != "-" {
        Ok(id.to_string())
    } else {
        Err(MessageError::BadNodeId)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn hb() -> Heartbeat {
        Heartbeat {
            epoch: 4,
            node_id: "n2".into(),
            role: Role::Replica,
            offset: 99,
            max_epoch: 6,
            primary: Some("n1".into()),
            eligible: true,
            fenced: false,
            lease_lost: false,
            data_epoch: 3,
            stamp: 1234,
            echo: 1200,
        }
    }

    #[test]
    fn a_huge_epoch_on_the_wire_is_rejected_as_out_of_range() {
        // §3.6 (finding 8): `max_epoch = 2^64-1` would wrap `epoch + 1`.
        let mut fields = Message::Hb(hb()).to_fields();
        fields[5] = u64::MAX.to_string().into_bytes();
        assert_eq!(Message::from_fields(&fields), Err(MessageError::OutOfRange));
        let mut fields = Message::Hb(hb()).to_fields();
        fields[1] = (MAX_EPOCH + 1).to_string().into_bytes();
        assert_eq!(Message::from_fields(&fields), Err(MessageError::OutOfRange));
        let mut fields = Message::Hb(hb()).to_fields();
        fields[10] = (MAX_WIRE_NUMBER + 1).to_string().into_bytes();
        assert_eq!(Message::from_fields(&fields), Err(MessageError::OutOfRange));
    }

    #[test]
    fn the_lease_lost_flag_round_trips() {
        let lost = Heartbeat {
            lease_lost: true,
            fenced: true,
            ..hb()
        };
        assert_eq!(
            Message::from_fields(&Message::Hb(lost.clone()).to_fields()),
            Ok(Message::Hb(lost))
        );
    }

    #[test]
    fn every_message_round_trips_through_fields() {
        let messages = vec![
            Message::Hello {
                node_id: "n1".into(),
                fingerprint: None,
            },
            Message::Hello {
                node_id: "n1".into(),
                fingerprint: Some("m0123456789abcdef/200/3000/600".into()),
            },
            Message::Hb(hb()),
            Message::Offer {
                epoch: 5,
                candidate: "n2".into(),
                offset: 10,
                data_epoch: 4,
            },
            Message::Accept {
                epoch: 5,
                voter: "n3".into(),
            },
            Message::Reject {
                epoch: 5,
                voter: "n3".into(),
                reason: RejectReason::PrimaryAlive,
                max_epoch: 7,
            },
            Message::Announce {
                epoch: 5,
                primary: "n2".into(),
                primary_addr: "10.0.0.2:6379".into(),
                stamp: 9,
            },
            Message::Handover {
                epoch: 5,
                from: "n2".into(),
                to: "n1".into(),
            },
        ];
        for m in messages {
            assert_eq!(Message::from_fields(&m.to_fields()), Ok(m.clone()), "{m:?}");
        }
    }

    #[test]
    fn a_seed_format_heartbeat_with_five_fields_still_decodes() {
        // protocol §3.1: `HB <epoch> <node_id> <role> <repl_offset>`.
        let fields: Vec<Vec<u8>> = ["HB", "3", "n1", "primary", "42"]
            .iter()
            .map(|s| s.as_bytes().to_vec())
            .collect();
        let Message::Hb(hb) = Message::from_fields(&fields).unwrap() else {
            panic!()
        };
        assert_eq!(
            (hb.epoch, hb.max_epoch, hb.offset, hb.role),
            (3, 3, 42, Role::Primary)
        );
        assert!(hb.eligible && hb.primary.is_none());
    }

    #[test]
    fn node_ids_longer_than_32_bytes_are_refused() {
        let long = "x".repeat(33);
        let fields = vec![b"ACCEPT".to_vec(), b"1".to_vec(), long.into_bytes()];
        assert_eq!(Message::from_fields(&fields), Err(MessageError::BadNodeId));
    }

    #[test]
    fn numbers_with_signs_or_overflow_are_refused() {
        for bad in ["-1", "+1", "18446744073709551616", "", "1 "] {
            let fields = vec![b"ACCEPT".to_vec(), bad.as_bytes().to_vec(), b"n1".to_vec()];
            assert_eq!(
                Message::from_fields(&fields),
                Err(MessageError::BadNumber),
                "{bad:?}"
            );
        }
    }

    proptest! {
        #[test]
        fn arbitrary_fields_never_panic(fields in proptest::collection::vec(
            proptest::collection::vec(any::<u8>(), 0..40), 0..10), kind in 0usize..8) {
            let names = ["HELLO", "HB", "OFFER", "ACCEPT", "REJECT", "ANNOUNCE", "HANDOVER", "X"];
            let mut all = vec![names[kind].as_bytes().to_vec()];
            all.extend(fields);
            let _ = Message::from_fields(&all);
        }
    }
}
