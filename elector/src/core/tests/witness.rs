//! Witnesses (docs/protocol.md §4.5): members with no data node that vote,
//! echo the primary's stamps and never stand.

use super::*;
use crate::protocol::RejectReason;

/// A node of a cluster whose data members are `data` and whose witnesses
/// are `witnesses`.
fn member_of(me: &str, data: &[&str], witnesses: &[&str], max_lag: u64) -> Node {
    let members = data
        .iter()
        .map(|id| Member {
            id: id.to_string(),
            data_addr: Some(format!("{id}:6379")),
        })
        .chain(witnesses.iter().map(|id| Member {
            id: id.to_string(),
            data_addr: None,
        }))
        .collect();
    let cfg = CoreConfig {
        members,
        max_lag,
        ..config(me)
    };
    let mut n = Node {
        core: Core::new(cfg, PersistedState::default(), 0),
        gate: Gate::default(),
    };
    n.start(0);
    n
}

/// The witness n3 of a 2+1 cluster.
fn witness() -> Node {
    member_of("n3", &["n1", "n2"], &["n3"], 1_000)
}

fn primary_hb(from: &str, epoch: u64, offset: u64, stamp: u64) -> Event {
    Event::Message {
        from: from.into(),
        msg: Message::Hb(crate::protocol::Heartbeat {
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

fn data_hb(from: &str, epoch: u64, offset: u64, primary: Option<&str>) -> Event {
    Event::Message {
        from: from.into(),
        msg: Message::Hb(crate::protocol::Heartbeat {
            epoch,
            node_id: from.into(),
            role: Role::Replica,
            offset,
            max_epoch: epoch,
            primary: primary.map(str::to_string),
            eligible: true,
            fenced: true,
            lease_lost: false,
            data_epoch: epoch,
            stamp: 0,
            echo: 0,
            priority: 100,
            floor: None,
            unled: false,
        }),
    }
}

fn offer_at(epoch: u64, candidate: &str, data_epoch: u64, offset: u64) -> Event {
    offer_led(epoch, candidate, (data_epoch, offset), None)
}

fn reject_reason(step: &Step) -> Option<RejectReason> {
    step.sends().iter().find_map(|(_, m)| match m {
        Message::Reject { reason, .. } => Some(*reason),
        _ => None,
    })
}

/// The witness has followed n1 as primary of epoch 1 (offset 500) and heard
/// n2 at offset 490; then n1 goes silent.
fn witness_after_primary_died() -> Node {
    let mut w = witness();
    let step = w.handle(100, primary_hb("n1", 1, 500, 100));
    w.persist_done(101, &step);
    w.handle(150, data_hb("n2", 1, 490, Some("n1")));
    w
}

#[test]
fn a_witness_never_stands_and_issues_no_data_node_target() {
    // §4.5: no data node, so nothing to be primary with and nothing to drive.
    let mut w = witness();
    for t in (100..6_000).step_by(100) {
        let step = w.handle(t, Event::Tick);
        assert!(step.persist.is_none(), "stood at {t}");
        assert!(step.targets().is_empty(), "a data-node target at {t}");
    }
    assert_eq!(w.core.role(), Role::Replica);
}

#[test]
fn a_witness_echoes_its_primary_and_refuses_disruptive_candidates() {
    // §4.5, §6.2, §6.3: exactly like a replica that hears the primary.
    let mut w = witness();
    let step = w.handle(100, primary_hb("n1", 1, 500, 100));
    w.persist_done(101, &step);
    let step = w.handle(300, primary_hb("n1", 1, 500, 300));
    let echoed = step.left.iter().any(|a| {
        matches!(a, Action::Send { msg: Message::Hb(hb), .. } if hb.echo == 300 && !hb.eligible)
    });
    assert!(
        echoed,
        "the witness did not echo the primary's stamp: {step:?}"
    );
    let step = w.handle(400, offer_at(2, "n2", 1, 500));
    assert_eq!(reject_reason(&step), Some(RejectReason::PrimaryAlive));
}

#[test]
fn a_witness_votes_for_the_remaining_data_node_once_the_primary_is_gone() {
    // §4.5: the 2+1 failover; the witness has no offset of its own to wait for.
    let mut w = witness_after_primary_died();
    let step = w.handle(1_200, offer_at(2, "n2", 1, 495));
    assert!(step.persist.is_some(), "the witness did not vote: {step:?}");
    let released = w.persist_done(1_201, &step).expect("vote persisted");
    assert!(matches!(
        released.sends()[..],
        [(_, Message::Accept { epoch: 2, .. })]
    ));
}

#[test]
fn a_witness_refuses_a_candidate_that_lags_the_dead_primary_beyond_max_lag() {
    // §4.5, seed 001: the witness bounds the candidate's lag by the primary's
    // last heartbeat (500); 400 is 100 behind, max_lag_bytes is 50.
    let mut w = member_of("n3", &["n1", "n2"], &["n3"], 50);
    let step = w.handle(100, primary_hb("n1", 1, 500, 100));
    w.persist_done(101, &step);
    let step = w.handle(1_200, offer_at(2, "n2", 1, 400));
    assert_eq!(reject_reason(&step), Some(RejectReason::CandidateBehind));
    // A candidate of an older stream than the primary's cannot be bounded.
    let step = w.handle(1_300, offer_at(3, "n2", 0, 500));
    assert_eq!(reject_reason(&step), Some(RejectReason::CandidateBehind));
}

#[test]
fn a_witness_refuses_a_candidate_behind_a_data_node_it_hears() {
    // §4.5: 3 data nodes + 2 witnesses; n2 (offset 700) is ahead of n3 (650):
    // the witnesses' votes must not elect n3 without n2's data.
    let mut w = member_of("n4", &["n1", "n2", "n3"], &["n4", "n5"], u64::MAX);
    let step = w.handle(100, primary_hb("n1", 1, 700, 100));
    w.persist_done(101, &step);
    w.handle(1_150, data_hb("n2", 1, 700, Some("n1")));
    let step = w.handle(1_200, offer_at(2, "n3", 1, 650));
    assert_eq!(reject_reason(&step), Some(RejectReason::CandidateBehind));
    let step = w.handle(1_210, offer_at(3, "n2", 1, 700));
    assert!(
        step.persist.is_some(),
        "the best data node was refused: {step:?}"
    );
}

#[test]
fn an_offer_in_a_witness_name_is_refused() {
    let mut n = member_of("n1", &["n1", "n2"], &["n3"], u64::MAX);
    n.handle(1, observation(10, 1));
    let step = n.handle(2_000, offer_at(1, "n3", 0, 10));
    assert_eq!(reject_reason(&step), Some(RejectReason::CandidateBehind));
}
