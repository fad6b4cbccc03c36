//! A node whose state was lost and reset by the operator (`elector run
//! --reset-state`, docs/protocol.md §5.2): its floor, stream record and
//! `led` are gone while its data node may still hold writes it
//! acknowledged. It sits out elections until its data node follows a
//! primary again, and says why (issue 34 (f)).

use super::floor::{offer_at, primary_says, reading, reject_reason, stream};
use super::*;
use crate::protocol::RejectReason;

/// n2 started from the state an operator's reset leaves, its data node
/// read at 900 in a stream no record names (what it held before).
fn reset_node() -> Node {
    let mut n = Node {
        core: Core::new(config("n2"), PersistedState::after_state_loss(), 0),
        gate: Gate::default(),
    };
    n.start(0);
    n.handle(1, reading(900, 1, false, stream("before-the-reset"), 0));
    n
}

fn forced_offer(epoch: u64, candidate: &str) -> Event {
    Event::Message {
        from: candidate.into(),
        msg: Message::Offer {
            epoch,
            candidate: candidate.into(),
            offset: 0,
            data_epoch: 0,
            forced: true,
            led: None,
        },
    }
}

#[test]
fn a_node_whose_state_was_reset_neither_stands_nor_votes_while_no_primary_is_followed() {
    let mut n = reset_node();
    assert_eq!(n.core.proof(), Proof::Unproven(Unproven::StateReset));
    assert_eq!(n.core.proof().as_str(), "unproven_after_state_reset");
    assert!(n.core.below_floor(), "shown as below its floor in /status");
    assert!(!n.core.eligible());
    for t in (100..4_000).step_by(100) {
        n.handle(t, Event::Tick);
        let seq = n.core.target.seq;
        n.handle(t, reading(900, seq, false, stream("before-the-reset"), 0));
        assert_ne!(n.core.role(), Role::Candidate, "stood at {t}");
    }
    // With a fresh state it would have voted for anyone: (0, 0) outranks
    // nothing. Its data node may hold writes n3 lacks.
    let step = n.handle(4_000, offer_at(1, "n3", 0, 10));
    assert_eq!(reject_reason(&step), Some(RejectReason::OwnOffsetUnknown));
    assert!(step.persist.is_none(), "no vote recorded: {step:?}");
}

#[test]
fn a_reset_node_still_votes_for_a_candidacy_whose_loss_an_operator_accepted() {
    let mut n = reset_node();
    n.handle(3_000, Event::Tick);
    let seq = n.core.target.seq;
    n.handle(
        3_000,
        reading(900, seq, false, stream("before-the-reset"), 0),
    );
    let step = n.handle(3_100, forced_offer(1, "n3"));
    assert!(
        step.persist
            .as_ref()
            .is_some_and(|p| p.state.voted_epoch == 1),
        "the forced offer got no vote: {step:?}"
    );
}

#[test]
fn a_reset_node_stands_and_votes_again_once_its_data_node_joined_a_primarys_stream() {
    let mut n = reset_node();
    n.handle(100, primary_says("n1", 3, 950, 100));
    assert!(matches!(
        n.core.target.current,
        DataNodeTarget::Follow { .. }
    ));
    n.release_writes(101);
    let seq = n.core.target.seq;
    let step = n.handle(102, reading(950, seq, true, stream("s3"), 0));
    assert!(!n.core.persisted().floor_unknown, "the claim ends it");
    assert!(
        step.persist
            .as_ref()
            .is_some_and(|p| !p.state.floor_unknown),
        "and it is written: {step:?}"
    );
    assert_eq!(n.core.proof(), Proof::Proven);
    n.release_writes(103);
    // From here the ordinary rules: n1 gone, it may stand again, and a
    // candidate below what it held in n1's stream is refused.
    n.handle(1_500, Event::Tick);
    let seq = n.core.target.seq;
    n.handle(1_500, reading(950, seq, false, stream("s3"), 0));
    assert!(!n.core.below_floor());
    assert!(n.core.eligible());
    let step = n.handle(1_600, offer_at(4, "n3", 3, 900));
    assert_eq!(reject_reason(&step), Some(RejectReason::CandidateBehind));
}

#[test]
fn a_reset_witness_has_no_floor_to_have_lost() {
    let mut cfg = config("n3");
    cfg.members.push(Member {
        id: "w1".into(),
        data_addr: None,
    });
    cfg.node_id = "w1".into();
    let core = Core::new(cfg, PersistedState::after_state_loss(), 0);
    assert!(!core.persisted().floor_unknown);
}
