//! kevy: padding a primary's feed past acknowledgements it kept from an
//! earlier feed generation (docs/architecture.md §kevy, "WAIT across a
//! promotion").
//!
//! kevy 7.0.0 keeps, per replica id, the highest offset the replica ever
//! acknowledged, and a promotion restarts the feed's offsets at 0 without
//! dropping those records. While a live replica's record is above the
//! primary's `master_repl_offset`, `WAIT` counts that replica for every
//! write up to the record: writes are acknowledged that no replica has. The
//! promotion hold ([`super::kevy_hold`]) and following only promoted nodes
//! keep our own commands from creating such records; an operator's
//! `REPLICAOF` on a primary with replicas attached still does, and so could
//! a path we have not seen.
//!
//! The records only ever rise, and nothing but their expiry (a replica away
//! for the whole reconnect window) removes them. What does end the
//! over-count is the primary's offset passing them: a write at an offset
//! above every record needs a real acknowledgement. So when the primary's
//! elector sees a record above the offset, it writes frames of its own (the
//! nudger's `DEL` of a key that never exists: no data changes, one frame
//! each) until the offset is past it. kevy's offsets count frames, not
//! bytes, so the gap is a number of commands; it is bounded per poll so one
//! poll never takes long, and the next poll finishes the job, and bounded in
//! all ([`MAX_GAP`]) so a record from a long-lived term does not flood the
//! replicas and the disks.
//!
//! What remains: a client write that lands between the record's arrival and
//! the end of the padding (at most a poll and the padding's own time) can
//! still be counted. Only kevy can close that (drop the records on a
//! generation bump); the elector logs every occurrence as an error.

use super::ReplicationInfo;

/// The most frames one poll writes: a few hundred milliseconds of pipelined
/// `DEL`s on a loaded host; a larger gap takes several polls.
pub(crate) const MAX_FRAMES_PER_POLL: u64 = 100_000;

/// The largest gap we pad: about 40 MB of stream (and of each node's AOF).
/// A record further ahead (a long-lived primary demoted by hand and promoted
/// again) is left to the error line: padding it would flood the replicas
/// and the disks, and restarting the primary's kevy (its records live in
/// memory) is the operator's cleaner way out.
pub(crate) const MAX_GAP: u64 = 1_000_000;

/// Frames per pipeline round trip.
pub(crate) const FRAMES_PER_BATCH: u64 = 5_000;

/// What to do about the acknowledgements a primary's live replicas report.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Padding {
    /// None is above the offset (or the node is a replica).
    NotNeeded,
    /// Write this many frames now ([`MAX_FRAMES_PER_POLL`] at most).
    Frames(u64),
    /// The gap is above [`MAX_GAP`]: leave it to the operator.
    TooFar { gap: u64 },
}

/// How many frames take the offset past every acknowledgement a live
/// replica reports.
pub(crate) fn padding(info: &ReplicationInfo) -> Padding {
    let stale = info
        .highest_replica_ack
        .filter(|&acked| info.is_master() && acked > info.offset);
    let Some(acked) = stale else {
        return Padding::NotNeeded;
    };
    let gap = acked - info.offset;
    if gap > MAX_GAP {
        return Padding::TooFar { gap };
    }
    Padding::Frames((gap + 1).min(MAX_FRAMES_PER_POLL))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn primary(offset: u64, acked: Option<u64>) -> ReplicationInfo {
        ReplicationInfo {
            role: "master".into(),
            offset,
            highest_replica_ack: acked,
            ..ReplicationInfo::default()
        }
    }

    #[test]
    fn an_acknowledgement_above_the_offset_is_padded_one_frame_past() {
        assert_eq!(
            padding(&primary(1_900, Some(3_173))),
            Padding::Frames(1_274)
        );
    }

    #[test]
    fn acknowledgements_at_or_below_the_offset_need_nothing() {
        assert_eq!(padding(&primary(500, Some(500))), Padding::NotNeeded);
        assert_eq!(padding(&primary(500, Some(12))), Padding::NotNeeded);
        assert_eq!(padding(&primary(500, None)), Padding::NotNeeded);
    }

    #[test]
    fn a_large_gap_is_padded_a_bounded_share_per_poll() {
        assert_eq!(
            padding(&primary(0, Some(MAX_GAP))),
            Padding::Frames(MAX_FRAMES_PER_POLL)
        );
    }

    #[test]
    fn a_gap_beyond_the_limit_is_left_to_the_operator() {
        assert_eq!(
            padding(&primary(0, Some(u64::MAX))),
            Padding::TooFar { gap: u64::MAX }
        );
    }

    #[test]
    fn a_replica_pads_nothing() {
        let mut info = primary(0, Some(10));
        info.role = "slave".into();
        assert_eq!(padding(&info), Padding::NotNeeded);
    }
}
