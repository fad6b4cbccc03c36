//! OFFER handling (docs/protocol.md §4.3, §5.2, §6.3, §6.9).

use super::*;
use crate::protocol::RejectReason;

#[test]
fn an_accept_leaves_only_after_the_vote_is_durable() {
    // §5.2: the vote is persisted first; the ACCEPT waits for Persisted.
    let mut n = node("n2");
    let step = n.handle(2_000, offer(1, "n1", 10));
    let persist = step.persist.clone().expect("vote persisted");
    assert_eq!(
        (
            persist.state.voted_epoch,
            persist.state.voted_for.as_deref()
        ),
        (1, Some("n1"))
    );
    assert!(
        step.sends().is_empty(),
        "ACCEPT sent before the vote was durable: {step:?}"
    );
    let released = n.handle(2_001, Event::Persisted { seq: persist.seq });
    assert_eq!(
        released.sends(),
        vec![(
            "n1",
            &Message::Accept {
                epoch: 1,
                voter: "n2".into()
            }
        )]
    );
}

#[test]
fn an_accept_whose_vote_could_not_be_written_never_leaves() {
    // §5.2: a failed write drops what waited for it.
    let mut n = node("n2");
    let step = n.handle(2_000, offer(1, "n1", 10));
    let seq = step.persist.expect("vote persisted").seq;
    let failed = n.handle(
        2_001,
        Event::PersistFailed {
            seq,
            error: "EIO".into(),
        },
    );
    assert!(failed.sends().is_empty(), "{failed:?}");
    let later = n.handle(2_002, Event::Persisted { seq });
    assert!(later.sends().is_empty(), "{later:?}");
}

#[test]
fn a_second_offer_in_the_same_epoch_is_refused() {
    // §5.2: at most one vote per epoch.
    let mut n = node("n2");
    let step = n.handle(2_000, offer(1, "n1", 10));
    n.persist_done(2_001, &step).expect("vote persisted");
    let step = n.handle(2_002, offer(1, "n3", 10));
    assert_eq!(
        step.sends(),
        vec![(
            "n3",
            &Message::Reject {
                epoch: 1,
                voter: "n2".into(),
                reason: RejectReason::AlreadyVoted,
                max_epoch: 1
            }
        )]
    );
}

#[test]
fn a_candidate_behind_the_voter_is_refused() {
    // §4.3: the voter's data is ahead of the candidate's.
    let mut n = node("n2");
    let step = n.handle(2_000, offer(1, "n1", 9));
    assert!(matches!(
        step.sends()[0].1,
        Message::Reject {
            reason: RejectReason::CandidateBehind,
            ..
        }
    ));
}

#[test]
fn a_voter_that_hears_its_primary_refuses_an_offer() {
    // §6.3: no disruptive elections.
    let mut n = node("n2");
    let announce = Message::Announce {
        epoch: 3,
        primary: "n1".into(),
        primary_addr: "n1:6379".into(),
        stamp: 500,
    };
    let step = n.handle(
        500,
        Event::Message {
            from: "n1".into(),
            msg: announce,
        },
    );
    n.persist_done(501, &step);
    let step = n.handle(700, offer(9, "n3", 10));
    assert!(
        matches!(
            step.sends()[0].1,
            Message::Reject {
                reason: RejectReason::PrimaryAlive,
                ..
            }
        ),
        "{step:?}"
    );
    assert_eq!(
        n.core.persisted().voted_epoch,
        0,
        "a refused offer must not change state"
    );
}

#[test]
fn peers_stop_vouching_for_a_primary_that_stays_fenced() {
    // §6.9 (finding 5): n2 keeps hearing n1 as primary, but n1 says it lost
    // its lease. After voter_fresh of that, n2 no longer refreshes it, so
    // the ordinary timers let it stand.
    let mut n = node("n2");
    let hb = |t: u64, lease_lost: bool| Event::Message {
        from: "n1".into(),
        msg: Message::Hb(crate::protocol::Heartbeat {
            epoch: 1,
            node_id: "n1".into(),
            role: Role::Primary,
            offset: 10,
            max_epoch: 1,
            primary: Some("n1".into()),
            eligible: true,
            fenced: lease_lost,
            lease_lost,
            data_epoch: 1,
            stamp: t,
            echo: 0,
            priority: 100,
            floor: None,
            unled: false,
        }),
    };
    n.handle(100, hb(100, false));
    assert_eq!(n.core.primary(), Some("n1"));
    let mut t = 200;
    while t <= 3_000 {
        n.handle(t, hb(t, true));
        n.handle(t, heartbeat("n3", 1, Some("n1"), 0));
        n.settle(t);
        t += 100;
    }
    // Withdrawn at 200 + voter_fresh (800) = 1000; gone 1000 ms later.
    assert!(
        n.core.role() == Role::Candidate || n.core.persisted().voted_epoch > 1,
        "n2 never stood while its primary stayed fenced: {}",
        n.core.diagnostics()
    );
}

#[test]
fn a_primary_that_lost_its_lease_votes_and_gives_up_the_role() {
    // §6.9: a fenced primary does not defend itself with primary_alive.
    let mut n = writable_primary();
    n.handle(402 + 700, Event::Tick);
    assert!(n.core.fenced());
    n.settle(1_500);
    let step = n.handle(2_000, offer(2, "n2", 10));
    assert!(
        step.persist.is_some(),
        "the fenced primary refused: {step:?}"
    );
    assert!(step.role_change(Reason::QuorumLost) || n.core.role() == Role::Replica);
    assert_eq!(n.core.role(), Role::Replica);
}
