//! §6.10, "A replica's tail": a kevy replica whose runner someone else
//! ended (an operator's `REPLICAOF`) may have acknowledged more of its
//! stream than its last reading, its floor; until it joins that stream
//! again it votes as if it held all of it (kevy focused schedule
//! `replica_redirected_then_primary_lost`, seed 16).

use super::floor::{follower_at, offer_at, reject_reason, restarted, stream};
use super::*;
use crate::protocol::RejectReason;

/// A reading of n2's data node after the elector's upstream was replaced:
/// the adapter reports the last position it read, no feed named and the
/// link down, with its count of runners someone else ended.
fn moved_by_hand(offset: u64, applied_seq: u64, runners_ended_by_others: u64) -> Event {
    Event::DataNode(Observation {
        reachable: true,
        offset: Some(offset),
        link_up: false,
        applied_seq,
        offset_at_apply: Some(0),
        runners_ended_by_others,
        ..Observation::default()
    })
}

/// n2, replica of n1's epoch-1 stream "s1" read at 500, then read once
/// more at 500 with `ended` runners ended by others; n3 then offers epoch 2
/// at 520 of that stream, the primary silent for seconds.
/// (Read again just before the offer, settled in the isolation the
/// primary's silence set: a stale reading votes for no one.)
fn replica_judging_a_candidate_after(ended: u64, faults: Faults) -> (Node, Step) {
    let mut n = follower_at(500);
    n.core.cfg.faults = faults;
    let seq = n.core.target.seq;
    n.handle(200, moved_by_hand(500, seq, ended));
    n.handle(4_990, moved_by_hand(500, seq, ended));
    let seq = n.core.target.seq;
    n.handle(4_995, moved_by_hand(500, seq, ended));
    let step = n.handle(5_000, offer_at(2, "n3", 1, 520));
    (n, step)
}

#[test]
fn a_replica_moved_off_its_primary_by_hand_refuses_every_candidate_of_its_stream() {
    let (n, step) = replica_judging_a_candidate_after(1, Faults::default());
    assert_eq!(
        reject_reason(&step),
        Some(RejectReason::CandidateBehind),
        "it may have acknowledged past 520 before the runner ended: {step:?}"
    );
    assert_eq!(n.core.state.tail_unread, Some(1));
}

#[test]
fn a_replica_moved_off_its_primary_by_hand_reports_it() {
    let mut n = follower_at(500);
    let seq = n.core.target.seq;
    let step = n.handle(200, moved_by_hand(500, seq, 1));
    assert!(
        step.notices()
            .iter()
            .any(|notice| matches!(notice, Notice::Fault { .. })),
        "the operator's move is reported: {step:?}"
    );
}

#[test]
fn a_replica_whose_upstream_no_one_else_replaced_votes_by_its_last_reading() {
    let (n, step) = replica_judging_a_candidate_after(0, Faults::default());
    assert_eq!(reject_reason(&step), None, "520 covers 500: {step:?}");
    assert_eq!(n.core.state.tail_unread, None);
}

#[test]
fn trusting_a_replicas_last_poll_votes_for_a_candidate_above_it() {
    let trusting = Faults {
        trust_the_replicas_last_poll: true,
        ..Faults::default()
    };
    let (_, step) = replica_judging_a_candidate_after(1, trusting);
    assert_eq!(reject_reason(&step), None, "the control: {step:?}");
}

#[test]
fn a_replica_that_joins_its_stream_again_votes_by_its_readings() {
    let mut n = follower_at(500);
    let seq = n.core.target.seq;
    n.handle(200, moved_by_hand(500, seq, 1));
    assert_eq!(n.core.state.tail_unread, Some(1));
    // The elector sets its upstream again; a new runner's full sync of
    // the primary, begun after the old one ended, reads 600.
    n.handle(300, floor::reading(600, seq, true, stream("s1"), 0));
    assert_eq!(n.core.state.tail_unread, None, "rejoined");
    assert_eq!(
        n.core.state.floor,
        Some(Floor::new(1, 600)),
        "the floor rose"
    );
    n.handle(4_990, floor::reading(600, seq, true, stream("s1"), 0));
    let seq = n.core.target.seq;
    n.handle(4_995, floor::reading(600, seq, false, stream("s1"), 0));
    let step = n.handle(5_000, offer_at(2, "n3", 1, 620));
    assert_eq!(reject_reason(&step), None, "620 covers 600: {step:?}");
}

#[test]
fn a_count_reported_again_by_an_unchanged_adapter_is_counted_once() {
    let mut n = follower_at(500);
    let seq = n.core.target.seq;
    n.handle(200, moved_by_hand(500, seq, 1));
    n.handle(300, floor::reading(600, seq, true, stream("s1"), 0));
    n.handle(400, moved_by_hand(600, seq, 1));
    assert_eq!(
        n.core.state.tail_unread, None,
        "the same count is no new runner ended"
    );
}

/// The note is written at once, not with the floor's next batch: an
/// elector restarted before that would vote by its last reading again
/// (kevy focused schedule `replica_redirected_across_an_elector_restart`,
/// seed 41), its adapter's count starting from 0.
#[test]
fn the_note_of_an_unread_tail_is_written_at_once_and_outlives_the_elector() {
    let mut n = follower_at(500);
    let seq = n.core.target.seq;
    let step = n.handle(200, moved_by_hand(500, seq, 1));
    let durable = step.persist.map(|p| p.state).expect("written at once");
    assert_eq!(durable.tail_unread, Some(1));
    let mut r = restarted(durable);
    let seq = r.core.target.seq;
    r.handle(9_990, moved_by_hand(500, seq, 0));
    let seq = r.core.target.seq;
    r.handle(9_995, moved_by_hand(500, seq, 0));
    let step = r.handle(10_000, offer_at(2, "n3", 1, 520));
    assert_eq!(
        reject_reason(&step),
        Some(RejectReason::CandidateBehind),
        "the restarted node still votes as if it held the whole stream: {step:?}"
    );
}
