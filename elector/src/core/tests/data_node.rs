//! Observations of the data node (docs/protocol.md §6.4.1, §6.8).

use super::*;

#[test]
fn a_primary_whose_data_node_restarted_resigns_instead_of_making_it_writable_again() {
    // §6.8 (finding 1): the adapter reports a new generation; the primary
    // must not re-apply Primary to whatever came back.
    let mut n = writable_primary();
    let step = n.handle(
        450,
        Event::DataNode(Observation {
            reachable: true,
            offset: Some(0),
            link_up: true,
            applied_seq: 3,
            offset_at_apply: Some(0),
            generation: 1,
            gone: false,
            overridden: 0,
            ..Observation::default()
        }),
    );
    assert_eq!(n.core.role(), Role::Replica);
    assert_eq!(n.core.data_generation(), 1);
    assert!(
        step.targets().iter().all(|(_, t)| !t.writable()),
        "a restarted data node was given a writable target: {step:?}"
    );
    assert!(step.role_change(Reason::DataNodeRestarted));
    // Its old offset is forgotten: it advertises what the node holds now.
    assert_eq!(n.core.position().1, 0);
}

// A voter whose data node restarted with its files (chaos seed 21) is
// covered with its durable floor in `floor.rs`
// (`a_replica_whose_data_node_restarted_neither_stands_nor_votes_below_its_floor`).

fn overridden_observation(applied_seq: u64, overridden: u64) -> Event {
    Event::DataNode(Observation {
        reachable: true,
        offset: Some(10),
        link_up: false,
        applied_seq,
        offset_at_apply: Some(10),
        generation: 0,
        gone: false,
        overridden,
        ..Observation::default()
    })
}

#[test]
fn a_primary_whose_data_node_the_watchdog_demoted_reissues_its_target_without_an_election() {
    // §6.4.1: the watchdog clamped a healthy primary's data node (its probe
    // of /healthz timed out); the same process holds the same data. The
    // primary keeps its role and re-issues Primary under a new sequence
    // number, the only one the adapter will make writable again.
    let mut n = writable_primary();
    let seq = n.core.target.seq;
    let step = n.handle(450, overridden_observation(seq, 1));
    assert_eq!(n.core.role(), Role::Primary);
    assert_eq!(n.core.data_generation(), 0);
    assert!(
        step.targets()
            .iter()
            .any(|(s, t)| *t == DataNodeTarget::Primary && *s > seq),
        "no fresh writable target after the demotion: {step:?}"
    );
    // The same count again is no new demotion: nothing is re-issued.
    let again = n.handle(460, overridden_observation(n.core.target.seq, 1));
    assert!(again.targets().is_empty(), "{again:?}");
}

#[test]
fn a_primary_whose_lease_lapsed_while_the_watchdog_demoted_it_reissues_a_fence() {
    // After a real stall (the reason the watchdog acts) the echoes are old:
    // the decision taken now is a fence, never the writable target from
    // before the stall.
    let mut n = writable_primary();
    let seq = n.core.target.seq;
    let late = 402 + n.core.cfg.timings.lease_ms() + 50;
    let step = n.handle(late, overridden_observation(seq, 1));
    let targets = step.targets();
    assert!(
        !targets.is_empty() && targets.iter().all(|(_, t)| !t.writable()),
        "a primary without its lease made its data node writable: {step:?}"
    );
}

/// n1 announces itself primary of `epoch` to `n`; the epoch is made
/// durable; returns the follow targets issued.
fn follow_announced(n: &mut Node, t: Millis, epoch: u64) -> Vec<(u64, DataNodeTarget)> {
    let announce = Message::Announce {
        epoch,
        primary: "n1".into(),
        primary_addr: "n1:6379".into(),
        stamp: t,
    };
    let step = n.handle(
        t,
        Event::Message {
            from: "n1".into(),
            msg: announce,
        },
    );
    let mut targets = step.targets();
    if let Some(released) = n.persist_done(t + 1, &step) {
        targets.extend(released.targets());
    }
    targets
        .into_iter()
        .filter(|(_, t)| matches!(t, DataNodeTarget::Follow { primary, .. } if primary == "n1"))
        .collect()
}

#[test]
fn following_the_same_primary_into_a_newer_epoch_issues_the_follow_again() {
    // §4.3: the primary's new epoch is a new stream; the replica claims it
    // only from a read after a target issued in that epoch, or it would
    // advertise the old stream for good and never count as caught up for a
    // preemption (tests/preemption.rs, seed 1027).
    let mut n = node("n3");
    let first = follow_announced(&mut n, 100, 1);
    assert_eq!(first.len(), 1, "{first:?}");
    n.settle(150);
    let again = follow_announced(&mut n, 200, 2);
    assert!(
        again.iter().any(|(seq, _)| *seq > first[0].0),
        "no follow issued in epoch 2: {again:?}"
    );
}
