//! Planned switchover (docs/protocol.md §8): refusals and outcomes are typed.

use super::*;

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
    let mut n = writable_primary();
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
    let mut n = writable_primary();
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
