//! Planned switchover (docs/protocol.md §8): refusals and outcomes are typed.

use super::*;
use crate::protocol::RejectReason;

fn request(to: &str) -> Event {
    Event::SwitchoverRequested {
        to: to.into(),
        timeout_ms: 500,
    }
}

fn outcome(step: &Step) -> Option<Result<u64, SwitchoverFailure>> {
    step.notices().iter().find_map(|n| match n {
        Notice::SwitchoverFinished { result, .. } => Some(result.clone()),
        _ => None,
    })
}

#[test]
fn a_switchover_asked_of_a_replica_is_refused_as_not_primary() {
    let mut n = node("n2");
    let step = n.handle(100, request("n3"));
    assert_eq!(outcome(&step), Some(Err(SwitchoverFailure::NotPrimary)));
}

#[test]
fn a_switchover_to_itself_or_a_stranger_is_refused_with_the_reason() {
    let mut n = serving_primary();
    let step = n.handle(420, request("n1"));
    assert_eq!(
        outcome(&step),
        Some(Err(SwitchoverFailure::TargetIsPrimary))
    );
    let step = n.handle(421, request("n9"));
    assert_eq!(outcome(&step), Some(Err(SwitchoverFailure::NotMember)));
    // n3 never spoke: not alive.
    let step = n.handle(422, request("n3"));
    assert_eq!(
        outcome(&step),
        Some(Err(SwitchoverFailure::TargetNotEligible))
    );
}

#[test]
fn a_switchover_whose_target_never_catches_up_rolls_back_and_unfences() {
    // §8: draining fences at once; at the deadline the primary resumes.
    let mut n = serving_primary();
    let step = n.handle(420, request("n2"));
    assert!(step.fences.contains(&Fence::Notify {
        epoch: 1,
        reason: Reason::Switchover
    }));
    assert!(step
        .targets()
        .iter()
        .any(|(_, t)| *t == DataNodeTarget::HandingOver));
    // n2 keeps echoing (the lease holds) but reports a smaller offset.
    let mut rolled = None;
    for t in (430..1_000).step_by(50) {
        let mut hb = heartbeat("n2", 1, Some("n1"), t - 10);
        if let Event::Message {
            msg: Message::Hb(h),
            ..
        } = &mut hb
        {
            h.offset = 5;
        }
        let step = n.handle(t, hb);
        if let Some(r) = outcome(&step) {
            assert!(step.notices().iter().any(|n| matches!(
                n,
                Notice::Unfenced {
                    reason: Reason::SwitchoverRollback,
                    ..
                }
            )));
            rolled = Some(r);
            break;
        }
    }
    assert_eq!(rolled, Some(Err(SwitchoverFailure::DidNotCatchUp)));
    assert_eq!(n.core.role(), Role::Primary);
}

#[test]
fn a_target_heard_only_before_the_drain_fence_applied_is_never_handed_the_cluster() {
    // Chaos seed 2126, 5 nodes: the target's last heartbeat showed a high
    // offset (kevy's INFO keeps an old generation's), then a bridge cut it
    // off; the primary handed over on that old report and a node without
    // the last writes won. Only a report that arrived after the fence counts.
    let mut n = serving_primary();
    let mut hb = heartbeat("n2", 1, Some("n1"), 410);
    if let Event::Message {
        msg: Message::Hb(h),
        ..
    } = &mut hb
    {
        h.offset = 1_000_000;
    }
    n.handle(415, hb);
    n.handle(420, request("n2"));
    let seq = n.core.target.seq;
    let mut rolled = None;
    for t in (425..1_000).step_by(25) {
        let step = n.handle(t, observation(10, seq));
        assert!(
            !step
                .sends()
                .iter()
                .any(|(_, m)| matches!(m, Message::Handover { .. })),
            "handed over at {t} on a heartbeat from before the fence"
        );
        if let Some(r) = outcome(&step) {
            rolled = Some(r);
            break;
        }
    }
    assert_eq!(rolled, Some(Err(SwitchoverFailure::DidNotCatchUp)));
    assert_eq!(n.core.role(), Role::Primary);
}

/// n1, the writable primary of epoch 1, after it resigned for n2 with
/// HANDOVER (§8 step 3), and the time it did.
fn resigned_for_n2() -> (Node, Millis) {
    let handed_over = |s: &Step| {
        s.sends()
            .iter()
            .any(|(_, m)| matches!(m, Message::Handover { to, .. } if to == "n2"))
    };
    let mut n = serving_primary();
    n.handle(420, request("n2"));
    // The drain's fence applies; n2 already showed our offset (10) and
    // echoes, so n1 resigns on this observation or a heartbeat after it.
    let seq = n.core.target.seq;
    if handed_over(&n.handle(425, observation(10, seq))) {
        return (n, 425);
    }
    for t in (430..1_000).step_by(50) {
        if handed_over(&n.handle(t, follower_at("n2", 1, t - 10, 1, 10))) {
            return (n, t);
        }
    }
    panic!("n1 never handed over to n2");
}

fn rejected(step: &Step, reason: RejectReason) -> bool {
    step.sends()
        .iter()
        .any(|(_, m)| matches!(m, Message::Reject { reason: r, .. } if *r == reason))
}

#[test]
fn while_the_named_successor_is_alive_voters_refuse_any_other_candidate() {
    // §8: a node that saw the resignation before the HANDOVER stood on its
    // own; it must not win in the successor's place (seed 740 of
    // tests/preemption.rs turned every preemption into an election).
    let (mut n, at) = resigned_for_n2();
    n.handle(at + 20, heartbeat("n2", 1, None, 0));
    let step = n.handle(at + 40, offer(2, "n3", 10));
    assert!(rejected(&step, RejectReason::PrimaryAlive), "{step:?}");
    // The successor itself gets the vote.
    let step = n.handle(at + 60, offer_led(2, "n2", (1, 10), None));
    let accepted = n.persist_done(at + 61, &step).expect("vote persisted");
    assert!(accepted
        .sends()
        .iter()
        .any(|(to, m)| *to == "n2" && matches!(m, Message::Accept { epoch: 2, .. })));
}

#[test]
fn the_deference_to_a_successor_ends_after_down_after() {
    let (mut n, at) = resigned_for_n2();
    // n2 stays alive but never stands; once down_after has passed since the
    // HANDOVER, an ordinary election may proceed.
    let late = at + T.down_after_ms + 1;
    n.handle(late - 1, heartbeat("n2", 1, None, 0));
    let step = n.handle(late, offer(2, "n3", 10));
    assert!(!rejected(&step, RejectReason::PrimaryAlive), "{step:?}");
}

#[test]
fn a_resigned_primary_repeats_the_handover_with_every_heartbeat_of_its_switchover() {
    // §8: a lost or overtaken HANDOVER would leave the voters to an
    // ordinary election; the repeat does not restart their deference.
    let (mut n, at) = resigned_for_n2();
    let next_heartbeat = at + T.hb_interval_ms;
    let step = n.handle(next_heartbeat, Event::Tick);
    assert!(step
        .sends()
        .iter()
        .any(|(_, m)| matches!(m, Message::Handover { epoch: 1, to, .. } if to == "n2")));
}

/// A heartbeat of replica `from` following n1 in `epoch`, echoing `echo`,
/// reporting `(data_epoch, offset)`.
fn follower_at(from: &str, epoch: u64, echo: u64, data_epoch: u64, offset: u64) -> Event {
    let mut hb = heartbeat(from, epoch, Some("n1"), echo);
    if let Event::Message {
        msg: Message::Hb(h),
        ..
    } = &mut hb
    {
        h.data_epoch = data_epoch;
        h.offset = offset;
    }
    hb
}

#[test]
fn a_switchover_asked_before_the_promotion_applied_is_refused_as_not_ready_then_waits_for_the_target_to_join_the_new_stream(
) {
    // CI 2026-11-29 (kevy_repromotion), twice. First: a switchover reached
    // the new primary 3 ms after it won, before its data node was
    // promoted; the drain's target replaced the promotion's stream claim,
    // the target, reporting the last epoch's position, counted as caught
    // up. Then: the drain's target replaced the promotion itself, kevy
    // refused to quiesce a replica, and the switchover stalled its whole
    // timeout. Now a primary whose data node has not carried out its
    // promotion refuses (`not_ready`, asked again by the CLI).
    let mut n = writable_primary();
    let step = n.handle(420, request("n2"));
    assert_eq!(
        outcome(&step),
        Some(Err(SwitchoverFailure::DataNodeNotServing))
    );
    assert!(!n.core.fenced(), "a refused switchover fences nothing");
    // The data node carries out the promotion: a primary in the new stream.
    let seq = n.core.target.seq;
    let claimed = n.handle(425, primary_reading(0, seq, "generation-2"));
    n.persist_done(426, &claimed);
    assert_eq!(
        n.core.position(),
        (1, 0),
        "the primary claims its epoch's stream"
    );
    let step = n.handle(427, request("n2"));
    assert_eq!(outcome(&step), None, "accepted, draining");
    let handed_over = |s: &Step| {
        s.sends()
            .iter()
            .any(|(_, m)| matches!(m, Message::Handover { to, .. } if to == "n2"))
    };
    let seq = n.core.target.seq;
    n.handle(428, primary_reading(0, seq, "generation-2"));
    // n2 still reports the position it held before this epoch.
    let step = n.handle(430, follower_at("n2", 1, 428, 0, 10));
    assert!(
        !handed_over(&step),
        "handed over to a target outside the new stream"
    );
    // n2 joined the stream of epoch 1 and holds all of it.
    let step = n.handle(440, follower_at("n2", 1, 435, 1, 0));
    assert!(
        handed_over(&step),
        "the target caught up and was not handed over to"
    );
}

#[test]
fn the_successor_of_a_planned_handover_becomes_primary_with_reason_switchover() {
    // §5, §8 (issue 36): an operator reading `/status`, the metrics or a
    // promote hook must see the new primary came from a switchover, not
    // from an election after a failure.
    let mut n = node("n2");
    let announce = Event::Message {
        from: "n1".into(),
        msg: Message::Announce {
            epoch: 1,
            primary: "n1".into(),
            primary_addr: "127.0.0.1:7001".into(),
            stamp: 50,
        },
    };
    n.handle(50, announce);
    n.settle(60);
    n.handle(100, follower_at("n3", 1, 90, 1, 10));
    let handover = Event::Message {
        from: "n1".into(),
        msg: Message::Handover {
            epoch: 1,
            from: "n1".into(),
            to: "n2".into(),
        },
    };
    n.handle(120, handover);
    let mut stood = None;
    'time: for t in (130..=120 + T.down_after_ms).step_by(10) {
        // The data node carries out whatever the handover asked of it.
        let seq = n.core.target.seq;
        for event in [observation(10, seq), Event::Tick] {
            let step = n.handle(t, event);
            if step.persist.is_some() && n.core.role() == Role::Candidate {
                stood = Some((t, step));
                break 'time;
            }
        }
    }
    let (t, stood) = stood.expect("n2 never stood for the handover");
    // The self-vote is durable before the candidacy shows (§5.2).
    let standing = n
        .persist_done(t + 1, &stood)
        .expect("the self-vote is written");
    assert!(standing.role_change(Reason::Switchover), "{standing:?}");
    let won = n.handle(
        t + 2,
        Event::Message {
            from: "n1".into(),
            msg: Message::Accept {
                epoch: 2,
                voter: "n1".into(),
            },
        },
    );
    assert_eq!(n.core.role(), Role::Primary);
    let leading = n.persist_done(t + 3, &won).expect("the epoch is written");
    assert!(leading.role_change(Reason::Switchover), "{leading:?}");
    assert!(!leading.role_change(Reason::WonElection), "{leading:?}");
    let leased = n.handle(t + 10, heartbeat("n1", 2, Some("n2"), t + 2));
    assert!(!n.core.fenced(), "the successor never held its lease");
    assert!(
        leased.notices().iter().any(|x| matches!(
            x,
            Notice::Unfenced {
                reason: Reason::Switchover,
                ..
            }
        )),
        "{leased:?}"
    );
}
