//! Writes and the persist rule (docs/protocol.md §5.2, §5.2.1).

use super::*;

#[test]
fn a_fence_leaves_at_once_even_while_a_persist_is_outstanding() {
    // §5.2.1 (finding 2): a persist is in flight (and will fail); the lease
    // runs out meanwhile. The fence must not wait behind the disk.
    let mut n = writable_primary();
    let step = n.handle(500, offer(5, "n3", 10));
    assert!(
        step.persist.is_none(),
        "a primary holding its lease refuses offers: {step:?}"
    );
    // An outstanding write (as a vote would make); the lease ends with no
    // echo since 402: the fence is decided at 1102.
    n.core.state.voted_epoch = 9;
    n.core.outbox.persist();
    let outstanding = n.core.outbox.persist_seq;
    let step = n.handle(402 + 700, Event::Tick);
    assert!(n.core.fenced());
    assert!(
        step.targets()
            .iter()
            .any(|(_, t)| *t == DataNodeTarget::FencedPrimary),
        "the fence waited behind persist {outstanding}: {step:?}"
    );
    let failed = n.handle(
        1_200,
        Event::PersistFailed {
            seq: outstanding,
            error: "EROFS".into(),
        },
    );
    assert!(failed.targets().iter().all(|(_, t)| !t.writable()));
}

#[test]
fn a_grant_that_waited_for_a_failed_write_is_issued_again() {
    // §5.2: the new primary's Primary target waits for its epoch on disk;
    // if that write fails the target never reached the adapter, and a later
    // decision must issue it afresh (simulator seed 145 with switchovers).
    let mut n = node("n2");
    let announce = Message::Announce {
        epoch: 1,
        primary: "n1".into(),
        primary_addr: "n1:6379".into(),
        stamp: 100,
    };
    let step = n.handle(
        100,
        Event::Message {
            from: "n1".into(),
            msg: announce,
        },
    );
    let seq = step.persist.as_ref().expect("epoch persisted").seq;
    assert!(
        step.targets().is_empty(),
        "the follow left before the epoch was durable: {step:?}"
    );
    let first = n.core.target.seq;
    n.handle(
        101,
        Event::PersistFailed {
            seq,
            error: "EIO".into(),
        },
    );
    // The retry (a heartbeat later) writes again; once it is durable a
    // follow issued after the failure reaches the adapter.
    let retry = n.handle(250, Event::Tick);
    let released = n
        .persist_done(251, &retry)
        .expect("the state is written again");
    assert!(
        released.targets().iter().any(|(s, t)| *s > first
            && matches!(t, DataNodeTarget::Follow { primary, .. } if primary == "n1")),
        "the dropped follow was never issued again: {released:?}"
    );
}

#[test]
fn every_target_issued_has_a_larger_sequence_number_than_the_one_before() {
    // The shell applies targets in sequence order only (§5.2.1): a fence
    // released before a gated grant with a lower number must win.
    let mut n = writable_primary();
    let mut last = 0;
    for t in (420..3_000).step_by(37) {
        let step = n.handle(t, heartbeat("n2", 1, Some("n1"), t.saturating_sub(300)));
        for (seq, _) in step.targets() {
            assert!(seq > last, "target {seq} after {last}");
            last = seq;
        }
    }
}
