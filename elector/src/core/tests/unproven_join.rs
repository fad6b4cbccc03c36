//! An unproven join (docs/protocol.md §6.10, "An unproven join"): a node
//! that set out to follow a new primary and cannot show what its data node
//! took there, because its elector or its data node restarted before any
//! reading claimed the join, counts as holding `[joined epoch, 0]`, even
//! when its data node reads the recorded (older) stream: it may have
//! acknowledged the joined stream's writes and come back from older files.

use super::floor::{
    died_while_joining, follower_at, offer_at, primary_says, reading, reject_reason, restarted,
    stream,
};
use super::*;
use crate::protocol::RejectReason;

#[test]
fn a_restarted_replica_back_in_its_recorded_stream_during_an_unclaimed_join_refuses_an_older_epochs_candidate(
) {
    // Simulator, kevy with snapshot loading, seed 1588: n2 joined n3's
    // epoch-2 stream and acknowledged a write there; its host crashed
    // before a reading claimed the join, and its data node came back from
    // files older than the write, reading the recorded stream s1 at 28.
    let mut n = restarted(died_while_joining());
    n.handle(5_001, reading(28, 1, false, stream("s1"), 0));
    assert_eq!(n.core.unproven_join(), Some(Floor::new(2, 0)));
    assert!(
        n.core.below_floor(),
        "a node that may have lost acknowledged writes does not stand"
    );
    let step = n.handle(9_000, offer_at(3, "n1", 1, 800));
    assert_eq!(
        reject_reason(&step),
        Some(RejectReason::CandidateBehind),
        "epoch 1 at 800 may lack the joined epoch's acknowledged writes"
    );
}

#[test]
fn only_the_joined_primary_of_the_joined_epoch_gets_an_unproven_joins_vote() {
    // Simulator, kevy with loading, five nodes, seed 1937: what the node
    // acknowledged in epoch 2's stream is unknown, so another replica that
    // claimed that stream at some offset may lack it; the joined primary,
    // the stream's source, does not.
    let vote = |candidate: &str, position: (u64, u64), led: Option<u64>| {
        let mut n = restarted(died_while_joining());
        n.handle(5_001, reading(28, 1, false, stream("s1"), 0));
        let step = n.handle(9_000, offer_led(3, candidate, position, led));
        reject_reason(&step)
    };
    assert_eq!(
        vote("n1", (2, 78), Some(1)),
        Some(RejectReason::CandidateBehind),
        "another holder of epoch 2's stream may be behind what this node acknowledged"
    );
    assert_eq!(
        vote("n3", (2, 900), Some(2)),
        None,
        "the joined primary holds its whole stream"
    );
    assert_eq!(
        vote("n1", (3, 0), Some(1)),
        None,
        "a later epoch's stream was elected past the floors of its own voters"
    );
}

#[test]
fn the_joined_epochs_primary_that_never_led_it_frees_an_unproven_join() {
    let mut n = restarted(died_while_joining());
    n.handle(5_001, reading(28, 1, false, stream("s1"), 0));
    let step = n.handle(9_000, offer_led(3, "n3", (1, 800), Some(1)));
    assert_eq!(
        reject_reason(&step),
        None,
        "n3 never told its data node to take writes in epoch 2: nothing to lose"
    );
}

#[test]
fn a_data_node_restarted_during_a_join_no_reading_claimed_makes_the_join_unproven() {
    // The same loss with the elector running: only the data node restarts
    // (generation 1) and comes back in the recorded stream below the write.
    let mut n = follower_at(500);
    n.handle(200, primary_says("n3", 2, 900, 200));
    n.settle_writes(201);
    assert_eq!(n.core.unproven_join(), None, "a join this process watches");
    n.handle(300, reading(28, n.core.target.seq, false, stream("s1"), 1));
    assert_eq!(n.core.unproven_join(), Some(Floor::new(2, 0)));
    // The follow is re-issued to what came back; settled there, with no
    // link up yet, the node still reads the recorded stream.
    n.settle_writes(301);
    let seq = n.core.target.seq;
    n.handle(302, unlinked_reading(28, seq, "s1", 1));
    assert!(n.core.below_floor());
    // n3 falls silent; the node settles in the target that follows.
    n.handle(8_000, Event::Tick);
    n.settle_writes(8_001);
    let seq = n.core.target.seq;
    n.handle(8_002, unlinked_reading(28, seq, "s1", 1));
    assert_eq!(n.core.unproven_join(), Some(Floor::new(2, 0)));
    let step = n.handle(9_000, offer_at(3, "n1", 1, 800));
    assert_eq!(
        reject_reason(&step),
        Some(RejectReason::CandidateBehind),
        "the restart may have taken writes the join acknowledged"
    );
}

#[test]
fn a_join_whose_data_node_ran_throughout_places_a_recorded_stream_reading_where_it_reads() {
    // The data node was told to follow n3 by this very process and has not
    // restarted since: a reading in the recorded stream is true (no sync
    // replaced its content), so it places nothing in epoch 2.
    let mut n = follower_at(500);
    n.handle(200, primary_says("n3", 2, 900, 200));
    n.settle_writes(201);
    n.handle(300, reading(500, n.core.target.seq, false, stream("s1"), 0));
    assert_eq!(n.core.unproven_join(), None);
    let step = n.handle(9_000, offer_at(3, "n1", 1, 800));
    assert_eq!(
        reject_reason(&step),
        None,
        "epoch 1 at 800 is ahead of all this node holds"
    );
}

#[test]
fn a_claim_ends_an_unproven_join() {
    let mut n = restarted(died_while_joining());
    n.handle(5_001, reading(28, 1, false, stream("s1"), 0));
    assert!(n.core.unproven_join().is_some());
    // n3, epoch 2's primary, is heard; the node follows it again and its
    // data node links up in n3's stream.
    n.handle(5_100, primary_says("n3", 2, 900, 5_100));
    n.settle_writes(5_101);
    let seq = n.core.target.seq;
    n.handle(5_200, reading(900, seq, true, stream("s3"), 0));
    n.settle_writes(5_201);
    assert_eq!(n.core.unproven_join(), None, "the join is claimed");
    assert!(!n.core.below_floor());
}

/// A replica's settled reading in `stream` with nothing received since the
/// apply (its offset where the apply left it) and the link down.
fn unlinked_reading(offset: u64, applied_seq: u64, stream_id: &str, generation: u64) -> Event {
    Event::DataNode(Observation {
        reachable: true,
        offset: Some(offset),
        offset_at_apply: Some(offset),
        applied_seq,
        generation,
        stream: stream(stream_id),
        ..Observation::default()
    })
}
