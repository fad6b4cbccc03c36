//! The floor and the proof of a data node's position (docs/protocol.md
//! §6.10): what a node may have acknowledged survives its memory and its
//! data node, and a node below it neither stands nor votes below it.

use super::*;
use crate::protocol::{Heartbeat, RejectReason};

pub(super) fn stream(id: &str) -> Option<StreamId> {
    Some(StreamId(id.into()))
}

/// A reading of the data node in `stream` at `offset`, settled in target
/// `applied_seq`, for data-node process `generation`.
pub(super) fn reading(
    offset: u64,
    applied_seq: u64,
    link_up: bool,
    stream_id: Option<StreamId>,
    generation: u64,
) -> Event {
    Event::DataNode(Observation {
        reachable: true,
        offset: Some(offset),
        link_up,
        applied_seq,
        offset_at_apply: Some(0),
        generation,
        stream: stream_id,
        ..Observation::default()
    })
}

pub(super) fn primary_says(from: &str, epoch: u64, offset: u64, stamp: u64) -> Event {
    Event::Message {
        from: from.into(),
        msg: Message::Hb(Heartbeat {
            epoch,
            node_id: from.into(),
            role: Role::Primary,
            offset,
            max_epoch: epoch,
            primary: Some(from.into()),
            eligible: true,
            fenced: false,
            lease_lost: false,
            data_epoch: epoch,
            stamp,
            echo: 0,
            priority: 100,
            floor: None,
            unled: false,
        }),
    }
}

/// n2 following n1's epoch-1 stream "s1" with its link up at `offset`;
/// every write made durable.
pub(super) fn follower_at(offset: u64) -> Node {
    let mut n = node("n2");
    n.handle(100, primary_says("n1", 1, offset, 100));
    let seq = n.core.target.seq;
    assert!(matches!(
        n.core.target.current,
        DataNodeTarget::Follow { .. }
    ));
    n.settle_writes(101);
    n.handle(102, reading(offset, seq, true, stream("s1"), 0));
    n.settle_writes(103);
    n
}

impl Node {
    /// Makes every outstanding write durable.
    fn settle_writes(&mut self, t: Millis) {
        let ob = &self.core.outbox;
        if ob.persist_seq > ob.durable_seq {
            let seq = ob.persist_seq;
            self.handle(t, Event::Persisted { seq });
        }
    }
}

#[test]
fn a_follower_raises_its_floor_with_its_link_up_and_writes_it_at_most_once_a_heartbeat() {
    let mut n = follower_at(500);
    assert_eq!(n.core.floor(), Some(Floor::new(1, 500)));
    assert_eq!(n.core.persisted().floor, Some(Floor::new(1, 500)));
    let seq = n.core.target.seq;
    let step = n.handle(120, reading(600, seq, true, stream("s1"), 0));
    assert_eq!(
        n.core.floor(),
        Some(Floor::new(1, 600)),
        "in memory at once"
    );
    assert!(step.persist.is_none(), "not written within a heartbeat");
    let step = n.handle(250, reading(650, seq, true, stream("s1"), 0));
    assert_eq!(
        step.persist.map(|p| p.state.floor),
        Some(Some(Floor::new(1, 650))),
        "written once a heartbeat passed"
    );
}

#[test]
fn the_floor_is_written_at_once_when_the_node_stops_following() {
    // §6.10: once it stops following, what it holds is final.
    let mut n = follower_at(500);
    let seq = n.core.target.seq;
    n.handle(110, reading(700, seq, true, stream("s1"), 0));
    // n1 goes quiet: n2 stops vouching and detaches (§6.2).
    let step = n.handle(1_000, Event::Tick);
    assert_eq!(n.core.target.current, DataNodeTarget::Isolated);
    assert_eq!(
        step.persist.map(|p| p.state.floor),
        Some(Some(Floor::new(1, 700)))
    );
}

#[test]
fn a_replica_whose_data_node_restarted_neither_stands_nor_votes_below_its_floor() {
    // §6.10, issue 34 (c): its data came back older (or empty); it must not
    // stand, and it judges offers by what it held.
    let mut n = follower_at(500);
    n.handle(200, reading(3, 0, false, stream("fresh"), 1));
    assert!(n.core.below_floor());
    assert_eq!(n.core.proof(), Proof::Unproven(Unproven::DataNodeRestarted));
    // n1 is gone; the node is detached and settled; it does not stand.
    for t in (1_200..4_000).step_by(100) {
        n.handle(t, Event::Tick);
        let seq = n.core.target.seq;
        n.handle(t, reading(3, seq, false, stream("fresh"), 1));
        assert_ne!(
            n.core.role(),
            Role::Candidate,
            "stood below its floor at {t}"
        );
    }
    let step = n.handle(4_000, offer(2, "n3", 499));
    assert_eq!(reject_reason(&step), Some(RejectReason::CandidateBehind));
    let mut n = follower_at(500);
    n.handle(200, reading(3, 0, false, stream("fresh"), 1));
    n.handle(3_900, Event::Tick);
    let seq = n.core.target.seq;
    n.handle(3_950, reading(3, seq, false, stream("fresh"), 1));
    let step = n.handle(4_000, offer_at(2, "n3", 1, 500));
    assert!(
        step.persist.is_some(),
        "a candidate at the floor gets the vote: {step:?}"
    );
}

#[test]
fn a_restarted_elector_votes_with_its_durable_floor_and_does_not_stand() {
    // §6.10, issue 34 (c): C's elector restarted with its data node, which
    // came back from older files; its memory is gone, its floor is not.
    let durable = follower_at(800).core.persisted().clone();
    let mut n = Node {
        core: Core::new(config("n2"), durable, 5_000),
        gate: Gate::default(),
    };
    n.start(5_000);
    assert_eq!(n.core.proof(), Proof::Unproven(Unproven::ElectorStarted));
    n.handle(5_001, reading(100, 1, false, stream("other"), 0));
    assert!(n.core.below_floor());
    assert!(!n.core.eligible());
    let step = n.handle(9_000, offer_at(2, "n3", 1, 700));
    assert_eq!(reject_reason(&step), Some(RejectReason::CandidateBehind));
}

#[test]
fn a_reading_in_the_recorded_stream_proves_the_position_after_an_elector_restart() {
    // §6.10: the data node kept running (or came back with its stream's
    // position, Redis from an RDB): its reading in the recorded stream is
    // real, and at the floor it may stand again.
    let durable = follower_at(800).core.persisted().clone();
    let mut n = Node {
        core: Core::new(config("n2"), durable.clone(), 5_000),
        gate: Gate::default(),
    };
    n.start(5_000);
    n.handle(5_001, reading(800, 1, false, stream("s1"), 0));
    assert_eq!(n.core.proof(), Proof::Proven);
    assert!(!n.core.below_floor());
    let mut behind = Node {
        core: Core::new(config("n2"), durable, 5_000),
        gate: Gate::default(),
    };
    behind.start(5_000);
    behind.handle(5_001, reading(300, 1, false, stream("s1"), 0));
    assert_eq!(behind.core.proof(), Proof::Proven);
    assert!(behind.core.below_floor(), "proven, but below the floor");
}

#[test]
fn a_redis_reading_that_continues_the_recorded_stream_proves_it() {
    // §6.10: Redis keeps offsets across a promotion; `master_replid2` names
    // the stream the new one continues.
    let durable = follower_at(800).core.persisted().clone();
    let mut n = Node {
        core: Core::new(config("n2"), durable, 5_000),
        gate: Gate::default(),
    };
    n.start(5_000);
    n.handle(
        5_001,
        Event::DataNode(Observation {
            reachable: true,
            offset: Some(900),
            applied_seq: 1,
            stream: stream("s1-continued"),
            stream_prev: stream("s1"),
            ..Observation::default()
        }),
    );
    assert_eq!(n.core.proof(), Proof::Proven);
    assert!(!n.core.below_floor());
}

#[test]
fn joining_a_primary_again_proves_the_position_and_raises_the_floor() {
    let mut n = follower_at(500);
    n.handle(200, reading(0, 0, false, None, 1));
    assert!(n.core.below_floor());
    let seq = n.core.target.seq;
    n.handle(300, primary_says("n1", 1, 900, 300));
    n.handle(310, reading(900, seq, true, stream("s1"), 1));
    assert!(
        !n.core.below_floor(),
        "a full resync from the primary holds the floor"
    );
    assert_eq!(n.core.floor(), Some(Floor::new(1, 900)));
}

pub(super) fn offer_at(epoch: u64, candidate: &str, data_epoch: u64, offset: u64) -> Event {
    offer_led(epoch, candidate, (data_epoch, offset), None)
}

pub(super) fn reject_reason(step: &Step) -> Option<RejectReason> {
    step.sends().iter().find_map(|(_, m)| match m {
        Message::Reject { reason, .. } => Some(*reason),
        _ => None,
    })
}

/// A writable kevy primary (n1, epoch 1) whose data node serves stream "g1".
fn kevy_primary() -> Node {
    kevy_primary_of(config("n1"))
}

/// As [`kevy_primary`], in the cluster `cfg` describes (n2 votes for it).
fn kevy_primary_of(mut cfg: CoreConfig) -> Node {
    cfg.backend.promotion_restarts_stream = true;
    let mut n = Node {
        core: Core::new(cfg, PersistedState::default(), 0),
        gate: Gate::default(),
    };
    n.start(0);
    n.handle(1, reading(10, 1, false, None, 0));
    n.handle(100, heartbeat("n2", 0, None, 0));
    let stood = n.handle(400, Event::Tick);
    n.persist_done(401, &stood);
    let won = n.handle(
        402,
        Event::Message {
            from: "n2".into(),
            msg: Message::Accept {
                epoch: 1,
                voter: "n2".into(),
            },
        },
    );
    n.persist_done(403, &won);
    n.handle(410, heartbeat("n2", 1, Some("n1"), 402));
    assert!(!n.core.fenced());
    n.settle_writes(411);
    let seq = n.core.target.seq;
    n.handle(420, primary_reading(0, seq, "g1"));
    n
}

#[test]
fn a_kevy_primary_demoted_in_its_epoch_resigns_instead_of_starting_a_second_stream() {
    // §6.10, issue 34 (b): a kevy promotion restarts offsets at 0; two
    // promotions under one epoch would make offsets of two streams look
    // comparable.
    let mut n = kevy_primary();
    let seq = n.core.target.seq;
    let step = n.handle(
        500,
        Event::DataNode(Observation {
            reachable: true,
            offset: Some(40),
            link_up: false,
            master: false,
            applied_seq: seq,
            stream: stream("g1"),
            ..Observation::default()
        }),
    );
    let released = n.persist_done(501, &step);
    let notes: Vec<_> = step
        .notices()
        .into_iter()
        .cloned()
        .chain(
            released
                .iter()
                .flat_map(|r| r.notices().into_iter().cloned()),
        )
        .collect();
    assert!(
        notes.iter().any(|x| matches!(
            x,
            Notice::RoleChanged {
                from: Role::Primary,
                reason: Reason::StreamEnded,
                epoch: 1,
                ..
            }
        )),
        "{notes:?}"
    );
    assert!(
        step.targets().iter().all(|(_, t)| !t.writable()),
        "made writable again in the same epoch: {step:?}"
    );
    assert!(n.core.role() != Role::Primary || n.core.epoch() > 1);
}

#[test]
fn a_kevy_primary_whose_stream_changed_under_it_resigns() {
    let mut n = kevy_primary();
    let seq = n.core.target.seq;
    let step = n.handle(500, primary_reading(0, seq, "g2"));
    let released = n.release_writes(501);
    assert!(
        step.role_change(Reason::StreamEnded)
            || released.iter().any(|r| r.role_change(Reason::StreamEnded)),
        "{step:?}"
    );
    assert_eq!(
        n.core.persisted().stream.as_ref().map(|r| r.id.0.as_str()),
        Some("g1"),
        "another stream under the same epoch is never recorded as its stream"
    );
}

#[test]
fn a_primary_on_a_backend_that_continues_its_stream_is_not_resigned_by_a_demotion() {
    // Redis keeps offsets across a promotion: the watchdog's false alarm
    // costs no election there (§6.4.1).
    let mut n = writable_primary();
    let seq = n.core.target.seq;
    let step = n.handle(
        500,
        Event::DataNode(Observation {
            reachable: true,
            offset: Some(10),
            applied_seq: seq,
            master: false,
            ..Observation::default()
        }),
    );
    assert_eq!(n.core.role(), Role::Primary);
    assert!(!step.role_change(Reason::StreamEnded));
}

#[test]
fn an_operator_makes_a_node_below_its_floor_stand_and_voters_waive_their_floors() {
    // §6.10: the explicit, logged and counted way out.
    let mut n = follower_at(500);
    n.handle(200, reading(0, 0, false, None, 1));
    n.handle(1_200, Event::Tick);
    let seq = n.core.target.seq;
    n.handle(1_200, reading(0, seq, false, None, 1));
    n.handle(1_250, heartbeat("n3", 1, Some("n1"), 0));
    let step = n.handle(1_300, Event::AcceptDataLoss);
    assert_eq!(n.core.role(), Role::Candidate, "{step:?}");
    assert!(step
        .notices()
        .iter()
        .any(|x| matches!(x, Notice::DataLossAccepted { .. })));
    let released = n
        .persist_done(1_301, &step)
        .expect("the self-vote is written");
    let offers: Vec<_> = step
        .left
        .iter()
        .chain(released.left.iter())
        .filter_map(|a| match a {
            Action::Send {
                msg: Message::Offer { forced, .. },
                ..
            } => Some(*forced),
            _ => None,
        })
        .collect();
    assert!(
        !offers.is_empty() && offers.iter().all(|f| *f),
        "{offers:?}"
    );
    // A voter holding more votes for a forced offer, and says so.
    let mut voter = follower_at(900);
    voter.handle(1_200, Event::Tick);
    let seq = voter.core.target.seq;
    voter.handle(1_200, reading(900, seq, false, stream("s1"), 0));
    let forced = Event::Message {
        from: "n3".into(),
        msg: Message::Offer {
            epoch: 2,
            candidate: "n3".into(),
            offset: 0,
            data_epoch: 0,
            forced: true,
            led: None,
        },
    };
    let step = voter.handle(1_300, forced);
    assert!(
        step.persist.is_some(),
        "the forced offer got no vote: {step:?}"
    );
    assert!(step
        .notices()
        .iter()
        .any(|x| matches!(x, Notice::DataLossAccepted { .. })));
}

#[test]
fn a_forced_offer_never_deposes_a_live_primary() {
    let mut voter = follower_at(900);
    let forced = Event::Message {
        from: "n3".into(),
        msg: Message::Offer {
            epoch: 2,
            candidate: "n3".into(),
            offset: 0,
            data_epoch: 0,
            forced: true,
            led: None,
        },
    };
    let step = voter.handle(200, forced);
    assert_eq!(reject_reason(&step), Some(RejectReason::PrimaryAlive));
}

fn witness_of_two() -> Node {
    let members = ["n1", "n2"]
        .iter()
        .map(|id| Member {
            id: id.to_string(),
            data_addr: Some(format!("{id}:6379")),
        })
        .chain(std::iter::once(Member {
            id: "n3".into(),
            data_addr: None,
        }))
        .collect();
    let cfg = CoreConfig {
        members,
        ..config("n3")
    };
    let mut n = Node {
        core: Core::new(cfg, PersistedState::default(), 0),
        gate: Gate::default(),
    };
    n.start(0);
    n
}

fn replica_says(from: &str, epoch: u64, position: (u64, u64), floor: Option<(u64, u64)>) -> Event {
    Event::Message {
        from: from.into(),
        msg: Message::Hb(Heartbeat {
            epoch,
            node_id: from.into(),
            role: Role::Replica,
            offset: position.1,
            max_epoch: epoch,
            primary: Some("n1".into()),
            eligible: false,
            fenced: true,
            lease_lost: false,
            data_epoch: position.0,
            stamp: 0,
            echo: 0,
            priority: 100,
            floor,
            unled: false,
        }),
    }
}

#[test]
fn a_witness_never_elects_a_candidate_below_the_floor_the_data_promise_acknowledges() {
    // §6.10, issue 34 (c), 2 + 1: B acknowledged up to 1 200; its data node
    // came back with 40. A is down. The witness must not elect B.
    let mut w = witness_of_two();
    w.handle(100, primary_says("n1", 1, 1_250, 100));
    w.settle_writes(101);
    w.handle(150, replica_says("n2", 1, (1, 1_200), Some((1, 1_200))));
    w.handle(2_000, replica_says("n2", 1, (1, 40), Some((1, 1_200))));
    let step = w.handle(2_050, offer_at(2, "n2", 1, 40));
    assert_eq!(
        reject_reason(&step),
        Some(RejectReason::CandidateBehind),
        "{step:?} {}",
        w.core.diagnostics()
    );
    // The same replica at its floor, lagging the dead primary a little, is
    // elected: the primary's own unacknowledged tail does not count.
    let mut w = witness_of_two();
    w.handle(100, primary_says("n1", 1, 1_250, 100));
    w.settle_writes(101);
    w.handle(2_000, replica_says("n2", 1, (1, 1_200), Some((1, 1_200))));
    let step = w.handle(2_050, offer_at(2, "n2", 1, 1_200));
    assert!(step.persist.is_some(), "{step:?}");
}

#[test]
fn a_redis_replica_that_full_synced_a_primary_re_promoted_in_its_epoch_claims_its_stream() {
    // §6.10: Redis clears master_replid2 on a full sync; the replica is in
    // the epoch's stream all the same, and its floor must follow what it
    // acknowledges (loopback `data_safety`, the demotion by hand on Redis:
    // the floor stayed behind and the replica voted for one lacking writes).
    let mut n = follower_at(500);
    n.handle(200, reading(0, 0, false, None, 1));
    n.handle(300, primary_says("n1", 1, 900, 300));
    let seq = n.core.target.seq;
    n.handle(310, reading(900, seq, true, stream("s1-repromoted"), 1));
    assert!(!n.core.below_floor());
    assert_eq!(n.core.floor(), Some(Floor::new(1, 900)));
    // kevy: another stream under the same epoch is never its stream.
    let mut cfg = config("n2");
    cfg.backend.promotion_restarts_stream = true;
    let mut k = Node {
        core: Core::new(cfg, PersistedState::default(), 0),
        gate: Gate::default(),
    };
    k.start(0);
    k.handle(1, reading(0, 1, false, None, 0));
    k.handle(100, primary_says("n1", 1, 500, 100));
    let seq = k.core.target.seq;
    k.settle_writes(101);
    k.handle(102, reading(500, seq, true, stream("g1"), 0));
    k.settle_writes(103);
    k.handle(200, reading(0, 0, false, None, 1));
    let seq = k.core.target.seq;
    k.handle(310, reading(40, seq, true, stream("g2"), 1));
    assert!(k.core.below_floor(), "g2 is not epoch 1's stream");
}

/// A replica's reading at `offset` in `stream_id` (data-node process
/// `generation`, target `applied_seq`) carrying the watchdog's hint that it
/// held `hint` in `hint_stream` while joining `joining` (§6.10).
fn hinted(
    offset: u64,
    applied_seq: u64,
    stream_id: &str,
    generation: u64,
    (hint_stream, hint, joining): (&str, u64, u64),
) -> Event {
    Event::DataNode(Observation {
        reachable: true,
        offset: Some(offset),
        applied_seq,
        generation,
        stream: stream(stream_id),
        floor_hint: vec![FloorHint {
            stream: StreamId(hint_stream.into()),
            offset: hint,
            joining,
        }],
        ..Observation::default()
    })
}

/// n2 restarted (elector alone) from `durable`, at 5 000 ms.
pub(super) fn restarted(durable: PersistedState) -> Node {
    let mut n = Node {
        core: Core::new(config("n2"), durable, 5_000),
        gate: Gate::default(),
    };
    n.start(5_000);
    n
}

/// n2 following n1's epoch-1 stream at 500, then told of n3's epoch-2
/// primary: its elector dies once the join is written, before any claim.
fn died_while_joining() -> PersistedState {
    let mut n = follower_at(500);
    let step = n.handle(200, primary_says("n3", 2, 900, 200));
    assert!(
        matches!(n.core.target.current, DataNodeTarget::Follow { .. }),
        "follows the newer epoch"
    );
    assert_eq!(
        step.persist.map(|p| p.state.joining()),
        Some(2),
        "the join is written before the data node is told"
    );
    n.settle_writes(201);
    n.core.persisted().clone()
}

#[test]
fn an_elector_that_died_before_claiming_a_join_votes_with_what_its_data_node_may_have_acknowledged()
{
    // §6.10, the claim window: the data node linked up to n3's epoch-2
    // stream and acknowledged up to 700 there; no claim was recorded.
    let durable = died_while_joining();
    assert_eq!(durable.stream.as_ref().map(|r| r.data_epoch), Some(1));
    let mut n = restarted(durable.clone());
    n.handle(5_001, reading(700, 1, false, stream("s3"), 0));
    let step = n.handle(9_000, offer_at(3, "n1", 1, 800));
    assert_eq!(
        reject_reason(&step),
        Some(RejectReason::CandidateBehind),
        "epoch 1 at 800 is behind what epoch 2 may have acknowledged"
    );
    let mut n = restarted(durable.clone());
    n.handle(5_001, reading(700, 1, false, stream("s3"), 0));
    let step = n.handle(9_000, offer_led(3, "n3", (2, 700), Some(2)));
    assert!(
        step.persist.is_some(),
        "the joined primary holding the joined stream's 700 gets the vote: {step:?}"
    );
    // An unproven reading is not the most the node acknowledged (its data
    // node may have come back from older files while the elector was down):
    // another holder of epoch 2's stream at 700 may lack what it did
    // (§6.10, "An unproven join").
    let mut n = restarted(durable);
    n.handle(5_001, reading(700, 1, false, stream("s3"), 0));
    let step = n.handle(9_000, offer_led(3, "n1", (2, 700), Some(1)));
    assert_eq!(reject_reason(&step), Some(RejectReason::CandidateBehind));
}

#[test]
fn an_unproven_reading_of_zero_during_an_unclaimed_join_still_places_the_joined_epoch() {
    // §6.10, simulator kevy seed 111: back after its host crashed, the data
    // node reads 0 in no named stream (kevy's `INFO` offset restarts with
    // the process) while its files may hold epoch 2's writes.
    let durable = died_while_joining();
    let mut n = restarted(durable.clone());
    n.handle(5_001, reading(0, 1, false, None, 0));
    assert_ne!(n.core.proof(), Proof::Proven);
    let step = n.handle(9_000, offer_at(3, "n1", 1, 800));
    assert_eq!(
        reject_reason(&step),
        Some(RejectReason::CandidateBehind),
        "epoch 1 at 800 is behind what the joined epoch may hold"
    );
}

#[test]
fn an_unproven_join_votes_in_the_joined_epoch_only_for_the_joined_primary() {
    // §6.10, "An unproven join" (simulator, kevy with loading, five nodes,
    // seed 1937): `(2, 0)` is the least the node holds in epoch 2's
    // stream, not the most it acknowledged there; another replica that
    // claimed that stream at some offset may lack what it acknowledged.
    let durable = died_while_joining();
    assert_eq!(durable.joining_primary.as_deref(), Some("n3"));
    let vote = |candidate: &str, position: (u64, u64), led: Option<u64>| {
        let mut n = restarted(durable.clone());
        n.handle(5_001, reading(0, 1, false, None, 0));
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
        "the joined primary, the stream's source, holds all of it"
    );
    assert_eq!(
        vote("n1", (3, 0), Some(3)),
        None,
        "a later epoch's stream was elected past the floors of its own voters"
    );
}

#[test]
fn the_joined_epochs_own_primary_frees_an_unclaimed_join_by_saying_it_never_led_that_epoch() {
    // §6.10 (simulator, two nodes, seed 1071): n3 won epoch 2 and its
    // elector died before it promoted its data node, so epoch 2's stream
    // never began; n2 had set out to follow it and read 700 in a stream no
    // record names. Counted as epoch 2's, that reading refused n3 for ever.
    let durable = died_while_joining();
    assert_eq!(durable.joining_primary.as_deref(), Some("n3"));
    let vote = |candidate: &str, led: Option<u64>| {
        let mut n = restarted(durable.clone());
        n.handle(5_001, reading(700, 1, false, stream("s3"), 0));
        let step = n.handle(9_000, offer_led(3, candidate, (1, 800), led));
        reject_reason(&step)
    };
    assert_eq!(
        vote("n3", Some(1)),
        None,
        "the primary that never led epoch 2"
    );
    assert_eq!(
        vote("n3", None),
        Some(RejectReason::CandidateBehind),
        "an offer that cannot say what it led frees nothing"
    );
    assert_eq!(
        vote("n3", Some(2)),
        Some(RejectReason::CandidateBehind),
        "a primary that told its data node to take writes in epoch 2"
    );
    assert_eq!(
        vote("n1", Some(1)),
        Some(RejectReason::CandidateBehind),
        "only the joined epoch's primary can say its stream never began"
    );
}

/// A heartbeat of `from`, a replica in `epoch` that knows no primary,
/// saying whether it ever told its data node to take writes there (§6.10).
fn unled_says(from: &str, epoch: u64, unled: bool) -> Event {
    let mut event = replica_says(from, epoch, (1, 800), None);
    if let Event::Message {
        msg: Message::Hb(hb),
        ..
    } = &mut event
    {
        hb.primary = None;
        hb.unled = unled;
    }
    event
}

#[test]
fn the_joined_epochs_primary_saying_it_never_led_that_epoch_frees_the_join_for_every_candidate() {
    // §6.10 (simulator seed 7951): the new primary's disk failed before it
    // promoted, so it could not stand; its heartbeat still says the joined
    // stream never began, and then any candidate holding the older stream
    // can be elected.
    let durable = died_while_joining();
    let vote = |heard: Event| {
        let mut n = restarted(durable.clone());
        n.handle(5_001, reading(700, 1, false, stream("s3"), 0));
        n.handle(5_100, heard);
        n.settle_writes(5_101);
        let step = n.handle(9_000, offer_led(4, "n1", (1, 800), Some(0)));
        (step.persist.is_some(), reject_reason(&step))
    };
    assert_eq!(
        vote(unled_says("n3", 2, true)),
        (true, None),
        "n3 never led epoch 2: the vote is written"
    );
    assert_eq!(
        vote(unled_says("n3", 2, false)),
        (false, Some(RejectReason::CandidateBehind)),
        "a heartbeat without the flag says nothing"
    );
    assert_eq!(
        vote(unled_says("n1", 2, true)),
        (false, Some(RejectReason::CandidateBehind)),
        "only the joined epoch's primary can say its stream never began"
    );
    assert_eq!(
        vote(unled_says("n3", 3, true)),
        (false, Some(RejectReason::CandidateBehind)),
        "never leading epoch 3 says nothing of epoch 2"
    );
    let mut fenced_primary = unled_says("n3", 2, true);
    if let Event::Message {
        msg: Message::Hb(hb),
        ..
    } = &mut fenced_primary
    {
        hb.role = Role::Primary;
        hb.primary = Some("n3".into());
    }
    assert!(
        matches!(vote(fenced_primary), (false, Some(_))),
        "a primary of epoch 2 awaiting its lease may still promote"
    );
}

#[test]
fn a_node_records_the_epoch_it_leads_before_its_data_node_takes_writes() {
    // §6.10: the grant that makes the data node writable waits for the
    // write that records `led` (at a win with the lease in hand, the
    // epoch's own write; here the lease comes a heartbeat later).
    let mut n = elected_primary();
    assert_eq!(
        n.core.state.led,
        Some(0),
        "won, fenced, not yet told to take writes"
    );
    let is_promotion =
        |a: &Action| matches!(a, Action::Apply { target, .. } if *target == GrantTarget::Primary);
    let leased = n.handle(410, heartbeat("n2", 1, Some("n1"), 402));
    assert_eq!(leased.persist.as_ref().and_then(|p| p.state.led), Some(1));
    assert!(
        !leased.left.iter().any(is_promotion),
        "made writable before `led` was durable: {leased:?}"
    );
    let released = n.persist_done(411, &leased).expect("a write was asked");
    assert!(
        released.left.iter().any(is_promotion),
        "made writable once `led` is durable: {released:?}"
    );
}

#[test]
fn a_promotion_whose_led_write_fails_leaves_led_as_it_was() {
    // §6.10 (simulator seed 158): the disk failed as the new primary was to
    // promote; its data node was never told, so its OFFER must not say it
    // led the epoch, or the joins of those who set out to follow it could
    // never be freed.
    let mut n = elected_primary();
    let leased = n.handle(410, heartbeat("n2", 1, Some("n1"), 402));
    let seq = leased.persist.as_ref().expect("`led` is written").seq;
    assert_eq!(n.core.state.led, Some(1));
    n.handle(
        415,
        Event::PersistFailed {
            seq,
            error: "EIO".into(),
        },
    );
    assert_eq!(n.core.state.led, Some(0));
}

#[test]
fn the_watchdogs_hint_under_an_unclaimed_join_holds_a_restarted_elector_to_it() {
    // §6.10, the floor hint: the data node, detached by the watchdog while
    // the elector was down, held 650 of the stream it was joining; then it
    // restarted empty. Nothing but the hint remembers the 650.
    let mut n = restarted(died_while_joining());
    n.handle(5_001, hinted(0, 1, "fresh", 1, ("s3", 650, 2)));
    assert_eq!(n.core.must_hold(), Some(Floor::new(2, 650)));
    assert!(n.core.below_floor());
    let step = n.handle(9_000, offer_at(3, "n1", 2, 600));
    assert!(reject_reason(&step).is_some(), "voted for 600: {step:?}");
}

#[test]
fn the_watchdogs_hint_in_the_recorded_stream_raises_the_floor() {
    // §6.10: the replica kept acknowledging while its elector was down;
    // the watchdog read 1 200 when it detached it.
    let mut n = restarted(follower_at(500).core.persisted().clone());
    n.handle(5_001, hinted(900, 1, "s1", 0, ("s1", 1_200, 0)));
    assert_eq!(n.core.floor(), Some(Floor::new(1, 1_200)));
    assert!(
        n.core.below_floor(),
        "900 is below what it may have acknowledged"
    );
}

#[test]
fn a_primarys_own_tail_in_the_watchdogs_hint_is_not_a_floor() {
    // §6.10 (simulator, 2+1 seed 2942): a primary's data node demoted by
    // the watchdog holds its own unacknowledged tail; as a floor it would
    // stop every successor that holds all acknowledged writes.
    let mut n = kevy_primary();
    let before = n.core.floor();
    assert!(n.core.state.held.is_some(), "it held its stream as primary");
    n.handle(
        500,
        hinted(5_000, n.core.target.seq, "g1", 0, ("g1", 5_000, 0)),
    );
    assert_eq!(n.core.floor(), before);
}

/// §6.10, `Unproven::LeftStream` (kevy seed 919): a kevy node read in
/// another stream than the one its data epoch records counts its offset in
/// that stream; it must neither stand on it nor vote with it.
#[test]
fn a_kevy_node_read_in_another_stream_than_its_data_epochs_neither_stands_nor_offers_that_offset() {
    let mut n = kevy_primary();
    let seq = n.core.target.seq;
    n.handle(
        500,
        Event::DataNode(Observation {
            reachable: true,
            offset: Some(367),
            link_up: false,
            master: false,
            applied_seq: seq,
            stream: stream("g7"),
            ..Observation::default()
        }),
    );
    n.release_writes(501);
    assert_eq!(
        n.core.proof(),
        super::super::floor::Proof::Unproven(super::super::floor::Unproven::LeftStream)
    );
    assert_eq!(n.core.proven_position(), None, "367 is g7's, not epoch 1's");
    assert!(n.core.below_floor(), "it does not stand");
}

/// §6.9, `Reason::FencedTooLong` (kevy seeds 1566, 2024): a primary whose
/// voters are gone stays fenced until it has given them and an election of
/// another member their time, then resigns to stand like any node.
#[test]
fn a_primary_fenced_longer_than_its_voters_and_an_election_take_resigns_to_stand_again() {
    let mut n = kevy_primary();
    let give_up = n.core.cfg.timings.fenced_give_up_ms();
    let mut fenced_at = None;
    let mut resigned_at = None;
    let mut t = 500;
    while t < 500 + 4 * give_up && resigned_at.is_none() {
        let step = n.handle(t, Event::Tick);
        let released = n.release_writes(t);
        if fenced_at.is_none() && n.core.fenced() {
            fenced_at = Some(t);
        }
        if step.role_change(Reason::FencedTooLong)
            || released
                .iter()
                .any(|r| r.role_change(Reason::FencedTooLong))
        {
            resigned_at = Some(t);
        }
        t += 25;
    }
    let fenced_at = fenced_at.expect("the lease runs out without echoes");
    let resigned_at = resigned_at.expect("the fenced primary resigns");
    assert!(
        resigned_at >= fenced_at + give_up,
        "resigned {} ms after the fence, before {give_up} ms",
        resigned_at - fenced_at
    );
    assert_ne!(n.core.role(), Role::Primary);
}

/// The config of `me` in a cluster of the first `members` of n1, n2, n3.
fn config_of(me: &str, members: usize) -> CoreConfig {
    let mut cfg = config(me);
    cfg.members.truncate(members);
    cfg
}

/// n1, primary of epoch 1 in a cluster of `members`, whose data node held
/// 900 of its stream (its own tail: n2 had 500), restarted with its data
/// node: the new process names no stream, so n1 is unproven and does not
/// stand. n2 then offers epoch 2 at 500.
fn old_primary_back_unproven_judging_the_survivor(members: usize) -> Step {
    let mut n = kevy_primary_of(config_of("n1", members));
    let seq = n.core.target.seq;
    n.handle(450, primary_reading(900, seq, "g1"));
    n.release_writes(451);
    assert_eq!(
        n.core.state.held,
        Some(Floor::new(1, 900)),
        "its tail as primary"
    );
    let mut cfg = config_of("n1", members);
    cfg.backend.promotion_restarts_stream = true;
    let mut back = Node {
        core: Core::new(cfg, n.core.persisted().clone(), 20_000),
        gate: Gate::default(),
    };
    back.start(20_000);
    back.handle(20_001, reading(0, 1, false, None, 0));
    assert!(
        back.core.below_floor(),
        "it cannot prove its data: no standing"
    );
    back.handle(25_000, offer_at(2, "n2", 1, 500))
}

/// §4.5, §6.10 (conformance `n2-primary-kill` on kevy, which failed now and
/// then): with two data nodes every acknowledged write (`WAIT 1`) is on the
/// survivor, so the old primary's unacknowledged tail must not make it
/// refuse its successor; nothing else can be elected.
#[test]
fn an_old_primary_of_two_nodes_back_unproven_votes_for_the_survivor_despite_its_tail() {
    let step = old_primary_back_unproven_judging_the_survivor(2);
    assert_eq!(reject_reason(&step), None, "refused: {step:?}");
    assert!(step.persist.is_some(), "the vote is written: {step:?}");
}

/// §6.10: with three nodes, the replica that acknowledged the tail may be
/// the one missing; the old primary's held position is then the only
/// guard, and the survivor below it is refused.
#[test]
fn an_old_primary_of_three_nodes_back_unproven_refuses_a_survivor_below_its_tail() {
    let step = old_primary_back_unproven_judging_the_survivor(3);
    assert_eq!(reject_reason(&step), Some(RejectReason::CandidateBehind));
}

/// A reading at `offset` in no named stream, of the data-node process
/// named `process` (its Redis `run_id`, or a kevy process mark).
fn process_reads(offset: u64, applied_seq: u64, process: &str) -> Event {
    process_reads_in_stream(offset, applied_seq, None, process)
}

/// A fresh n2 (nothing durable) whose data node reads as process `a`, told
/// of n3's epoch-1 primary: its first data will be the joined stream, and
/// its elector dies once the join is written.
fn died_in_its_first_join() -> PersistedState {
    let mut n = node("n2");
    n.handle(50, process_reads(0, 1, "run_id:a"));
    n.handle(100, primary_says("n3", 1, 0, 100));
    assert!(matches!(
        n.core.target.current,
        DataNodeTarget::Follow { .. }
    ));
    n.settle_writes(101);
    n.core.persisted().clone()
}

#[test]
fn a_join_is_written_with_the_data_node_process_it_was_set_out_from() {
    let durable = died_in_its_first_join();
    assert_eq!(durable.joining(), 1);
    assert_eq!(durable.joining_process(), Some("run_id:a"));
    assert!(durable.stream.is_none() && durable.floor.is_none());
}

#[test]
fn an_elector_restarted_in_its_first_join_is_proven_only_by_the_process_it_set_out_from() {
    // §6.10, "A join outlives its elector" (simulator, kevy with loading,
    // three nodes, seed 5700): no record and no floor, yet the join may
    // have brought writes it acknowledged; a new process reads 0 over
    // files that hold them.
    let durable = died_in_its_first_join();
    let mut n = restarted(durable.clone());
    assert_ne!(n.core.proof(), Proof::Proven, "unproven at start");
    n.handle(5_001, process_reads(0, 1, "run_id:b"));
    assert_ne!(
        n.core.proof(),
        Proof::Proven,
        "another process proves nothing"
    );
    let step = n.handle(9_000, offer_at(2, "n1", 0, 0));
    assert_eq!(
        reject_reason(&step),
        Some(RejectReason::CandidateBehind),
        "a node with nothing may lack what the join brought"
    );
    // The very process the join was set out from has run since: its 0 is
    // what it received (nothing), and the node votes as before its restart.
    let mut n = restarted(durable);
    n.handle(5_001, process_reads(0, 1, "run_id:a"));
    assert_eq!(n.core.proof(), Proof::Proven);
    let step = n.handle(9_000, offer_at(2, "n1", 0, 0));
    assert_eq!(reject_reason(&step), None, "{step:?}");
}

/// A reading of data-node process `process` in `stream_id` at `offset`.
fn process_reads_in(offset: u64, applied_seq: u64, stream_id: &str, process: &str) -> Event {
    process_reads_in_stream(offset, applied_seq, stream(stream_id), process)
}

/// A reading of data-node process `process` in `stream_id` (or in no named
/// stream) at `offset`, its link down.
fn process_reads_in_stream(
    offset: u64,
    applied_seq: u64,
    stream_id: Option<StreamId>,
    process: &str,
) -> Event {
    Event::DataNode(Observation {
        reachable: true,
        offset: Some(offset),
        applied_seq,
        offset_at_apply: Some(0),
        stream: stream_id,
        process_names: vec![process.into()],
        ..Observation::default()
    })
}

/// n2's data node, process `run_id:a`, follows n1's epoch-1 stream "s1" at
/// 500; then n2 is told of n3's epoch-2 primary and sets out to join it (the
/// join written with process `a`), and no reading claims the join.
fn joining_from_process_a() -> Node {
    let mut n = node("n2");
    n.handle(50, process_reads_in(0, 0, "s1", "run_id:a"));
    n.handle(100, primary_says("n1", 1, 500, 100));
    let seq = n.core.target.seq;
    n.settle_writes(101);
    n.handle(
        102,
        Event::DataNode(Observation {
            reachable: true,
            offset: Some(500),
            link_up: true,
            applied_seq: seq,
            offset_at_apply: Some(0),
            stream: stream("s1"),
            process_names: vec!["run_id:a".into()],
            ..Observation::default()
        }),
    );
    n.settle_writes(103);
    n.handle(200, primary_says("n3", 2, 900, 200));
    n.settle_writes(201);
    assert_eq!(n.core.persisted().joining(), 2);
    assert_eq!(n.core.persisted().joining_process(), Some("run_id:a"));
    n
}

#[test]
fn a_join_whose_process_is_gone_is_not_proven_by_a_reading_in_the_older_recorded_stream() {
    // §6.10, "A join whose process is gone" (simulator, kevy with loading,
    // seed 1588's shape): the process the join was set out from may have
    // acknowledged epoch 2's writes; back from older files after its host
    // crashed, another process reads the *recorded* epoch-1 stream, which
    // proves a position that lacks them.
    let durable = joining_from_process_a().core.persisted().clone();
    let mut n = restarted(durable.clone());
    n.handle(5_001, process_reads_in(500, 1, "s1", "run_id:b"));
    assert!(
        n.core.below_floor(),
        "it may lack what it acknowledged in epoch 2: no standing"
    );
    let step = n.handle(9_000, offer_led(3, "n1", (1, 500), Some(1)));
    assert_eq!(
        reject_reason(&step),
        Some(RejectReason::CandidateBehind),
        "epoch 1's stream lacks whatever epoch 2 took"
    );
    let step = n.handle(9_100, offer_led(4, "n3", (2, 900), Some(2)));
    assert!(
        step.persist.is_some(),
        "the joined primary, the stream's source, gets the vote: {step:?}"
    );
    // The process the join was set out from has run since and still reads
    // the old stream: it never took epoch 2's data (a sync replaces the
    // stream), and the node votes as before its restart.
    let mut n = restarted(durable);
    n.handle(5_001, process_reads_in(500, 1, "s1", "run_id:a"));
    assert!(!n.core.below_floor());
    let step = n.handle(9_000, offer_led(3, "n1", (1, 500), Some(1)));
    assert_eq!(reject_reason(&step), None, "{step:?}");
}

#[test]
fn a_data_node_restarted_during_a_join_no_reading_claimed_votes_as_after_a_host_crash() {
    // §6.10, "A join whose process is gone": the elector ran throughout,
    // but the process that may have acknowledged epoch 2's writes while
    // every read failed (a kevy loading the snapshot) is gone.
    let mut n = joining_from_process_a();
    let seq = n.core.target.seq;
    n.handle(
        300,
        Event::DataNode(Observation {
            reachable: true,
            offset: Some(500),
            applied_seq: seq,
            offset_at_apply: Some(0),
            generation: 1,
            stream: stream("s1"),
            process_names: vec!["run_id:b".into()],
            ..Observation::default()
        }),
    );
    assert!(n.core.below_floor());
    // n3 goes quiet: n2 detaches, and its data node settles there.
    n.handle(3_000, Event::Tick);
    let read = |seq| {
        Event::DataNode(Observation {
            reachable: true,
            offset: Some(500),
            applied_seq: seq,
            offset_at_apply: Some(500),
            generation: 1,
            stream: stream("s1"),
            process_names: vec!["run_id:b".into()],
            ..Observation::default()
        })
    };
    n.handle(3_050, read(n.core.target.seq));
    assert!(n.core.below_floor(), "it never stands meanwhile");
    let step = n.handle(3_100, offer_led(3, "n1", (1, 500), Some(1)));
    assert_eq!(reject_reason(&step), Some(RejectReason::CandidateBehind));
}

#[test]
fn trusting_a_recorded_reading_during_a_join_votes_for_the_older_stream() {
    // The control of the rule above: with it switched off, the restarted
    // node proven in its recorded stream votes for epoch 1 at 500.
    let durable = joining_from_process_a().core.persisted().clone();
    let mut cfg = config("n2");
    cfg.faults.trust_a_recorded_reading_during_a_join = true;
    let mut n = Node {
        core: Core::new(cfg, durable, 5_000),
        gate: Gate::default(),
    };
    n.start(5_000);
    n.handle(5_001, process_reads_in(500, 1, "s1", "run_id:b"));
    let step = n.handle(9_000, offer_led(3, "n1", (1, 500), Some(1)));
    assert_eq!(reject_reason(&step), None, "{step:?}");
}

#[test]
fn on_kevy_the_joined_streams_source_gets_the_vote_whatever_the_join_read() {
    // §6.10, "The joined stream's source" (simulator, two kevy nodes, seed
    // 373): the unplaced reading is kevy's `INFO` offset, a lifetime
    // maximum over every stream the process followed, while the joined
    // primary's live offset in its own stream is the most any replica holds
    // there: counted against it, the join refused its own source for ever.
    let durable = died_while_joining();
    let vote = |promotion_restarts_stream: bool, candidate: &str, position: (u64, u64)| {
        let mut cfg = config("n2");
        cfg.backend.promotion_restarts_stream = promotion_restarts_stream;
        let mut n = Node {
            core: Core::new(cfg, durable.clone(), 5_000),
            gate: Gate::default(),
        };
        n.start(5_000);
        n.handle(5_001, reading(700, 1, false, None, 0));
        let step = n.handle(9_000, offer_led(3, candidate, position, Some(2)));
        reject_reason(&step)
    };
    assert_eq!(
        vote(true, "n3", (2, 23)),
        None,
        "kevy: the source of epoch 2's stream, proven there"
    );
    assert_eq!(
        vote(true, "n1", (2, 800)),
        Some(RejectReason::CandidateBehind),
        "another holder of epoch 2's stream is still judged by what the join read"
    );
    assert_eq!(
        vote(true, "n3", (1, 900)),
        Some(RejectReason::CandidateBehind),
        "the joined primary offering an older stream is not the source of the joined one"
    );
    assert_eq!(
        vote(false, "n3", (2, 23)),
        Some(RejectReason::CandidateBehind),
        "Redis: a primary restarted from an older RDB reads its old stream again"
    );
}

#[test]
fn the_joining_process_reading_nothing_in_the_joined_stream_votes_for_a_replica_that_claimed_it() {
    // §6.10, "A join outlives its elector" (kevy chaos, five nodes, seed 7):
    // n2's elector restarted during its join while its data node, the very
    // process the join was set out from, ran on and read 0 in the joined
    // stream: it never took a frame there, so a replica that claimed epoch 2
    // at 47 holds all it could have acknowledged. Counted unproven, n2
    // refused it for ever.
    let durable = joining_from_process_a().core.persisted().clone();
    let vote_for_a_claimer = |process: &str, offset: u64, faults: Faults| {
        let mut cfg = config("n2");
        cfg.faults = faults;
        let mut n = Node {
            core: Core::new(cfg, durable.clone(), 5_000),
            gate: Gate::default(),
        };
        n.start(5_000);
        n.handle(5_001, process_reads_in(offset, 1, "s3", process));
        let step = n.handle(9_000, offer_led(3, "n1", (2, 47), Some(1)));
        reject_reason(&step)
    };
    assert_eq!(
        vote_for_a_claimer("run_id:a", 0, Faults::default()),
        None,
        "the joining process read nothing of epoch 2"
    );
    assert_eq!(
        vote_for_a_claimer("run_id:a", 40, Faults::default()),
        None,
        "the joining process holds at most 40 of epoch 2: 47 covers it"
    );
    assert_eq!(
        vote_for_a_claimer("run_id:a", 60, Faults::default()),
        Some(RejectReason::CandidateBehind),
        "it may have acknowledged up to 60 of epoch 2"
    );
    assert_eq!(
        vote_for_a_claimer("run_id:b", 0, Faults::default()),
        Some(RejectReason::CandidateBehind),
        "another process's 0 says nothing of what its files hold"
    );
    let doubting = Faults {
        doubt_the_joining_process: true,
        ..Faults::default()
    };
    assert_eq!(
        vote_for_a_claimer("run_id:a", 0, doubting),
        Some(RejectReason::CandidateBehind),
        "the control: counted unproven, the join refuses every claimer"
    );
}

/// n1, kevy primary of epoch 1 among three, last read at 900 of its feed
/// (`g1`); then someone else's `REPLICAOF` ends the feed, and the adapter
/// goes on reporting that last reading (the same process, following
/// nobody). n2 offers epoch 3 at `(1, 950)`.
fn old_primary_demoted_by_hand_judging(faults: Faults) -> (Node, Step) {
    let mut cfg = config_of("n1", 3);
    cfg.faults = faults;
    let mut n = kevy_primary_of(cfg);
    let seq = n.core.target.seq;
    n.handle(450, primary_reading(900, seq, "g1"));
    n.release_writes(451);
    let demoted = |seq| {
        Event::DataNode(Observation {
            reachable: true,
            offset: Some(900),
            master: false,
            applied_seq: seq,
            stream: stream("g1"),
            ..Observation::default()
        })
    };
    let step = n.handle(500, demoted(seq));
    n.persist_done(501, &step);
    assert_ne!(n.core.role(), Role::Primary, "it resigned: stream ended");
    n.settle_writes(502);
    let seq = n.core.target.seq;
    n.handle(510, demoted(seq));
    // It stood for epoch 2 itself (it may: see below); n2 offers epoch 3.
    let step = n.handle(520, offer_at(3, "n2", 1, 950));
    (n, step)
}

/// §6.10, "An old primary's tail" (kevy focused schedule, seed 6257): its
/// last reading as primary trails its feed by up to a poll, and a write of
/// that poll may be acknowledged by the replica that is not voting. It
/// still stands (its data node holds at least that much), but it helps
/// elect no candidate of the stream it served.
#[test]
fn an_old_primary_unable_to_say_how_far_its_stream_went_refuses_every_candidate_of_it() {
    let (n, step) = old_primary_demoted_by_hand_judging(Faults::default());
    assert_eq!(reject_reason(&step), Some(RejectReason::CandidateBehind));
    assert!(
        !n.core.below_floor(),
        "the same process holds at least its last reading: it may stand"
    );
    let trusting = Faults {
        trust_the_held_tail: true,
        ..Faults::default()
    };
    let (_, step) = old_primary_demoted_by_hand_judging(trusting);
    assert_eq!(
        reject_reason(&step),
        None,
        "the control: judged by its last reading, 950 passes"
    );
}
