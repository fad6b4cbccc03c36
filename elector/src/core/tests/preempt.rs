//! Priority preemption (docs/protocol.md §8.1): the primary hands over to a
//! member of higher priority that has been ready for the delay, through the
//! planned switchover, never by an election.

use super::*;

const DELAY: u64 = 1_000;

/// n1 (priority 100) as the writable primary of epoch 1, preemption on.
fn preempting_primary() -> Node {
    let mut n = serving_primary();
    n.core.cfg.preempt = Preempt {
        enabled: true,
        delay_ms: DELAY,
    };
    n
}

/// A heartbeat from `from` following n1 in epoch 1 (in its stream, at its
/// offset 10), echoing `echo`, with
/// `priority`; `eligible` as given.
fn hb(from: &str, priority: u64, echo: u64, eligible: bool) -> Event {
    let mut ev = heartbeat(from, 1, Some("n1"), echo);
    if let Event::Message {
        msg: Message::Hb(h),
        ..
    } = &mut ev
    {
        h.priority = priority;
        h.eligible = eligible;
        // Following n1 in epoch 1: in the stream n1's promotion claimed.
        h.data_epoch = 1;
    }
    ev
}

/// Feeds n2's heartbeats every 100 ms from `from` to `to` (exclusive);
/// returns the first time a step fenced for preemption.
fn feed(
    n: &mut Node,
    from: Millis,
    to: Millis,
    priority: u64,
    eligible: impl Fn(Millis) -> bool,
) -> Option<Millis> {
    (from..to).step_by(100).find(|t| {
        let step = n.handle(*t, hb("n2", priority, t - 5, eligible(*t)));
        step.fences.contains(&Fence::Notify {
            epoch: 1,
            reason: Reason::Preemption,
        })
    })
}

#[test]
fn a_ready_member_of_higher_priority_is_handed_the_primary_after_the_delay() {
    // §8.1: ready from 500 on; the drain starts once 1000 ms have passed.
    let mut n = preempting_primary();
    let started = feed(&mut n, 500, 3_000, 200, |_| true).expect("no preemption");
    assert_eq!(started, 500 + DELAY);
    assert!(n.core.fenced(), "the drain fences writes first (§8 step 1)");
    // The drain is the planned switchover: once the fence applied and a
    // heartbeat of n2 that arrived since shows our offset, n1 resigns with
    // HANDOVER, reason preemption.
    let seq = n.core.target.seq;
    let step = n.handle(started + 1, observation(10, seq));
    assert!(!step.role_change(Reason::Preemption), "{step:?}");
    let step = n.handle(started + 2, hb("n2", 200, started - 3, true));
    assert!(step.role_change(Reason::Preemption), "{step:?}");
    assert!(step.sends().iter().any(|(_, m)| matches!(
        m,
        Message::Handover { to, .. } if to == "n2"
    )));
}

#[test]
fn preemption_is_off_by_default() {
    let mut n = serving_primary();
    assert_eq!(feed(&mut n, 500, 5_000, 200, |_| true), None);
    assert_eq!(n.core.role(), Role::Primary);
}

#[test]
fn a_member_of_equal_or_lower_priority_never_preempts() {
    let mut n = preempting_primary();
    assert_eq!(feed(&mut n, 500, 5_000, 100, |_| true), None);
    assert_eq!(feed(&mut n, 5_000, 9_000, 50, |_| true), None);
}

#[test]
fn a_preferred_member_that_fails_again_waits_its_whole_delay_again() {
    // §8.1, no flapping: ineligible for one heartbeat at 1200 restarts the
    // wait, so the drain starts at 1300 + delay, not 500 + delay.
    let mut n = preempting_primary();
    let started = feed(&mut n, 500, 4_000, 200, |t| t != 1_200).expect("no preemption");
    assert_eq!(started, 1_300 + DELAY);
}

#[test]
fn a_preemption_that_does_not_complete_rolls_back_and_waits_the_delay_again() {
    // The target never catches up (offset 5 < 10): the drain rolls back at
    // its deadline, the primary resumes writes, and the next attempt waits
    // a full delay from the rollback.
    let mut n = preempting_primary();
    let started = feed(&mut n, 500, 3_000, 200, |_| true).expect("no preemption");
    let seq = n.core.target.seq;
    n.handle(started + 1, observation(20, seq));
    let mut rolled_back = None;
    for t in (started + 100..started + 10_000).step_by(100) {
        let mut ev = hb("n2", 200, t - 5, true);
        if let Event::Message {
            msg: Message::Hb(h),
            ..
        } = &mut ev
        {
            h.offset = 5;
        }
        let step = n.handle(t, ev);
        if step.notices().iter().any(|x| {
            matches!(
                x,
                Notice::Unfenced {
                    reason: Reason::SwitchoverRollback,
                    ..
                }
            )
        }) {
            rolled_back = Some(t);
            break;
        }
    }
    let rolled_back = rolled_back.expect("the drain never rolled back");
    assert!(!n.core.fenced());
    // The data node carries out the rollback's target (a primary again).
    let seq = n.core.target.seq;
    n.handle(rolled_back + 1, primary_reading(20, seq, "generation-1"));
    let again = feed(&mut n, rolled_back + 100, rolled_back + 5_000, 200, |_| {
        true
    })
    .expect("no second attempt");
    assert!(
        again >= rolled_back + DELAY,
        "retried at {again} after rollback at {rolled_back}"
    );
}

#[test]
fn a_member_that_does_not_vouch_for_the_primary_is_not_ready() {
    // In the mesh means both ways: without an echo of our stamps (n2 does
    // not hear us), n2 is not ready however long it heartbeats.
    let mut n = preempting_primary();
    // n3 keeps the lease; n2 never echoes.
    let got = (500..4_000).step_by(100).find(|t| {
        n.handle(*t, heartbeat("n3", 1, Some("n1"), t - 5));
        let step = n.handle(*t, hb("n2", 200, 0, true));
        step.fences.contains(&Fence::Notify {
            epoch: 1,
            reason: Reason::Preemption,
        })
    });
    assert_eq!(got, None);
}
