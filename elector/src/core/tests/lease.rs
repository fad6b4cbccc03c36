//! The quorum lease (docs/protocol.md §6.2).

use super::*;

#[test]
fn a_new_primary_stays_fenced_until_a_quorum_echoes_its_stamp() {
    // §6.2: the lease starts with the first echo, not with the votes.
    let mut n = elected_primary();
    assert_eq!(n.core.role(), Role::Primary);
    assert!(n.core.fenced());
    let leased = n.handle(410, heartbeat("n2", 1, Some("n1"), 402));
    assert!(!n.core.fenced());
    // The data node is told once `led` is durable (§6.10).
    let step = n.persist_done(410, &leased).expect("`led` is written");
    assert!(
        step.targets()
            .iter()
            .any(|(_, t)| *t == DataNodeTarget::Primary),
        "{step:?}"
    );
    assert!(leased.notices().iter().any(|n| matches!(
        n,
        Notice::Unfenced {
            reason: Reason::WonElection,
            ..
        }
    )));
}

#[test]
fn a_primary_whose_echoes_stop_fences_itself_when_the_lease_ends() {
    // §6.2: lease = down_after - 3 hb = 700 ms after the last echoed stamp.
    let mut n = writable_primary();
    // n2 keeps talking but echoes nothing new (it no longer hears us).
    n.handle(900, heartbeat("n2", 1, Some("n1"), 402));
    assert!(!n.core.fenced());
    let step = n.handle(402 + 700, Event::Tick);
    assert!(n.core.fenced(), "still writable after the lease");
    assert!(step.fences.contains(&Fence::Notify {
        epoch: 1,
        reason: Reason::QuorumLost
    }));
    assert!(step.fences.iter().any(|f| matches!(
        f,
        Fence::Apply {
            target: FenceTarget::FencedPrimary,
            ..
        }
    )));
}

#[test]
fn a_writable_primary_reports_when_its_lease_ends() {
    // §6.2, §6.4.1: the watchdog fences by this when the elector goes quiet.
    let mut n = writable_primary();
    // n2 echoed stamp 402: the lease (700 ms) ends at 1102.
    assert_eq!(n.core.writable_until(), Some(402 + 700));
    n.handle(600, heartbeat("n2", 1, Some("n1"), 590));
    assert_eq!(n.core.writable_until(), Some(590 + 700));
    // A replica, or a fenced primary, reports none.
    assert_eq!(node("n2").core.writable_until(), None);
    n.handle(590 + 700, Event::Tick);
    assert!(n.core.fenced());
    assert_eq!(n.core.writable_until(), None);
}
