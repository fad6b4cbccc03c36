//! The field encoding of election messages: [`Message::to_fields`] and the
//! total decoder [`Message::from_fields`] (docs/protocol.md §3). Every
//! malformed field list becomes a [`MessageError`], never a panic; numbers
//! are strict decimals within the protocol's ranges (§3.6).

use thiserror::Error;

use super::{
    valid_node_id, Heartbeat, Message, NodeId, RejectReason, Role, MAX_EPOCH, MAX_WIRE_NUMBER,
};

/// The heartbeat flag of an elector that reads the floor fields (§3.8).
const READS_FLOORS: char = 'F';
/// The heartbeat flag of an elector that reads an OFFER's `led` (§3.8).
const READS_LED: char = 'P';
/// The heartbeat flag "I never told my data node to take writes in this
/// heartbeat's epoch" (§6.10); older electors read flags by letter and
/// ignore it.
const UNLED: char = 'u';
/// The most fields an elector before floors accepts in a heartbeat (`HB`,
/// ten fields and the priority) and in an OFFER.
const LEGACY_HB_FIELDS: usize = 12;
const LEGACY_OFFER_FIELDS: usize = 5;
/// An OFFER with `forced`, the most an elector before `led` accepts.
const FLOORS_OFFER_FIELDS: usize = 6;

/// Which of the fields added since the seed a peer reads (§3.8), as its
/// latest heartbeat's flags say; ordered, each form reading all that the
/// ones before it read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum PeerForm {
    /// Neither floors nor `forced` nor `led`: an elector before §6.10.
    Legacy,
    /// Floors and `forced`, not an OFFER's `led`.
    Floors,
    /// Everything this version sends.
    Full,
}

/// The form a decoded heartbeat frame's sender reads (§3.8); `None` for
/// any other frame. The transport sends a peer whose latest heartbeat
/// reads less the matching short form.
pub fn heartbeat_form(fields: &[Vec<u8>]) -> Option<PeerForm> {
    match fields {
        [name, args @ ..] if name.as_slice() == b"HB" => {
            let flags = args.get(6).map(Vec::as_slice).unwrap_or(b"");
            let has = |flag: char| flags.contains(&(flag as u8));
            Some(if has(READS_FLOORS) && has(READS_LED) {
                PeerForm::Full
            } else if has(READS_FLOORS) {
                PeerForm::Floors
            } else {
                PeerForm::Legacy
            })
        }
        _ => None,
    }
}

impl Message {
    /// The message as RESP2 bulk-string fields, the seed's order first and
    /// our extensions appended.
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
                if hb.unled {
                    flags.push(UNLED);
                }
                // "I read the floor fields" (§3.8): an elector before them
                // ignores an unknown flag but drops a frame with more
                // fields than it knows, so peers send it the short form.
                flags.push(READS_FLOORS);
                flags.push(READS_LED);
                let mut frame = vec![
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
                ];
                // Priority 0 (never preferred, and what a node without
                // preemption announces) is the absent field: the frame stays
                // the ten fields an elector before §8.1 decodes, unless a
                // floor (§6.10) follows it.
                if hb.priority > 0 || hb.floor.is_some() {
                    frame.push(n(hb.priority));
                }
                if let Some((epoch, offset)) = hb.floor {
                    frame.push(n(epoch));
                    frame.push(n(offset));
                }
                frame
            }
            Message::Offer {
                epoch,
                candidate,
                offset,
                data_epoch,
                forced,
                led,
            } => {
                let mut frame = vec![
                    s("OFFER"),
                    n(*epoch),
                    s(candidate),
                    n(*offset),
                    n(*data_epoch),
                ];
                if *forced || led.is_some() {
                    frame.push(s(if *forced { "forced" } else { "-" }));
                }
                if let Some(led) = led {
                    frame.push(n(*led));
                }
                frame
            }
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

    /// The fields for a peer that reads `form` (§3.8): for an elector
    /// before floors, a heartbeat without its floor and an OFFER without
    /// `forced`; for one before `led`, an OFFER without it. Either would
    /// otherwise refuse the frame as a whole (and close the connection
    /// over it).
    pub fn to_fields_for(&self, form: PeerForm) -> Vec<Vec<u8>> {
        let mut fields = self.to_fields();
        match (self, form) {
            (_, PeerForm::Full) => {}
            // HB, its ten fields and the priority.
            (Message::Hb(_), PeerForm::Legacy) => fields.truncate(LEGACY_HB_FIELDS),
            (Message::Offer { .. }, PeerForm::Legacy) => fields.truncate(LEGACY_OFFER_FIELDS),
            (Message::Offer { forced, .. }, PeerForm::Floors) => fields.truncate(if *forced {
                FLOORS_OFFER_FIELDS
            } else {
                LEGACY_OFFER_FIELDS
            }),
            _ => {}
        }
        fields
    }

    /// Decodes a frame's fields; total (any input gives a message or an error).
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
                arity(4, 13)?;
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
                    unled: flags.contains(&(UNLED as u8)),
                    data_epoch: optional_epoch(args, 7)?,
                    stamp: optional_number(args, 8)?,
                    echo: optional_number(args, 9)?,
                    priority: optional_number(args, 10)?,
                    floor: match (args.get(11), args.get(12)) {
                        (Some(e), Some(o)) => Some((self::epoch(e)?, number(o)?)),
                        (None, None) => None,
                        _ => {
                            return Err(MessageError::Arity {
                                kind: "HB".into(),
                                got: args.len(),
                            })
                        }
                    },
                }))
            }
            b"OFFER" => {
                arity(3, 6)?;
                let forced = match args.get(4).map(Vec::as_slice) {
                    None | Some(b"-") => false,
                    Some(b"forced") => true,
                    Some(_) => return Err(MessageError::BadFlag),
                };
                Ok(Message::Offer {
                    epoch: epoch(&args[0])?,
                    candidate: node_id(&args[1])?,
                    offset: number(&args[2])?,
                    data_epoch: optional_epoch(args, 3)?,
                    forced,
                    led: args.get(5).map(|v| epoch(v)).transpose()?,
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
    #[error("unknown flag")]
    BadFlag,
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
            MessageError::BadFlag => "bad_flag",
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

fn node_id(bytes: &[u8]) -> Result<NodeId, MessageError> {
    let id = std::str::from_utf8(bytes).map_err(|_| MessageError::BadNodeId)?;
    if valid_node_id(id) && id != "-" {
        Ok(id.to_string())
    } else {
        Err(MessageError::BadNodeId)
    }
}
