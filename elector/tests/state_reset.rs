//! A node whose elector state was lost, started again with `elector run
//! --reset-state` (docs/protocol.md §5.2), real kevy and redis-server on
//! loopback. Its data node may still hold writes it acknowledged while the
//! record of them (the floor) is gone, so it sits out elections until its
//! data node follows a primary: with the primary down it helps elect
//! nobody (a fresh state voted for anyone, `(0, 0)` outranking nothing),
//! until an operator accepts the loss; with a primary to follow it rejoins
//! and counts again (issue 34 (f)).

mod support;

use std::time::{Duration, Instant};
use support::{wait_until, Backend, Cluster};

/// How long the test watches for an election that must not happen.
const NO_ELECTION_FOR: Duration = Duration::from_secs(6);

/// Stops node `i`'s elector cleanly, deletes its `state.json` and starts it
/// with `--reset-state`.
fn reset_elector(c: &mut Cluster, i: usize) {
    c.signal_elector(i, "TERM");
    c.wait_elector_exit(i, Duration::from_secs(10));
    let state = c.nodes[i].dir.join("elector").join("state.json");
    std::fs::remove_file(&state).expect("state.json existed");
    c.start_elector_with(i, &["--reset-state"]);
}

fn proof(c: &Cluster, i: usize) -> String {
    c.status(i)
        .map(|s| s["data_node"]["proof"].as_str().unwrap_or("").to_string())
        .unwrap_or_default()
}

fn a_reset_replica_with_its_primary_down_elects_nobody_until_an_operator_accepts(backend: Backend) {
    let mut c = Cluster::start(backend, 3);
    let p = c.wait_primary(Duration::from_secs(20));
    c.wait_replica_links(p);
    c.acked_keys(p, "before-reset", 20);
    let (r, q) = ((p + 1) % 3, (p + 2) % 3);
    c.kill_node(p);
    reset_elector(&mut c, r);
    let watched = Instant::now();
    while watched.elapsed() < NO_ELECTION_FOR {
        assert_eq!(
            c.writable_primary(),
            None,
            "elected with a reset node's vote while its floor is unknown"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        proof(&c, r),
        "unproven_after_state_reset",
        "the reset node says why it sits out"
    );
    // The operator's explicit choice still gets the reset node's vote, and
    // then it follows the new primary and counts again.
    c.accept_data_loss(q);
    wait_until(
        Duration::from_secs(15),
        || c.writable_primary() == Some(q),
        "the operator's forced candidate to win",
    );
    wait_until(
        Duration::from_secs(15),
        || proof(&c, r) == "proven",
        "the reset node to follow and prove its position",
    );
}

fn a_reset_replica_rejoins_and_counts_again_with_every_acknowledged_write(backend: Backend) {
    let mut c = Cluster::start(backend, 3);
    let p = c.wait_primary(Duration::from_secs(20));
    c.wait_replica_links(p);
    let keys = c.acked_keys(p, "before-reset", 20);
    let r = (p + 1) % 3;
    reset_elector(&mut c, r);
    wait_until(
        Duration::from_secs(15),
        || proof(&c, r) == "proven",
        "the reset node to follow its primary and prove its position",
    );
    let status = c.status(r).expect("status");
    assert_eq!(status["data_node"]["below_floor"], false, "{status}");
    let after = c.acked_keys(p, "after-reset", 20);
    c.kill_node(p);
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut elected = None;
    while elected.is_none() && Instant::now() < deadline {
        elected = c.writable_primary().filter(|&n| n != p);
        std::thread::sleep(Duration::from_millis(100));
    }
    let elected = elected.expect("the two survivors elect one of them");
    let all: Vec<String> = keys.into_iter().chain(after).collect();
    let missing = c.missing_keys(elected, &all);
    assert!(missing.is_empty(), "lost: {missing:?}");
}

#[test]
fn a_reset_redis_replica_with_its_primary_down_elects_nobody_until_an_operator_accepts() {
    a_reset_replica_with_its_primary_down_elects_nobody_until_an_operator_accepts(Backend::Redis);
}

#[test]
fn a_reset_kevy_replica_with_its_primary_down_elects_nobody_until_an_operator_accepts() {
    a_reset_replica_with_its_primary_down_elects_nobody_until_an_operator_accepts(Backend::Kevy);
}

#[test]
fn a_reset_redis_replica_rejoins_and_counts_again_with_every_acknowledged_write() {
    a_reset_replica_rejoins_and_counts_again_with_every_acknowledged_write(Backend::Redis);
}

#[test]
fn a_reset_kevy_replica_rejoins_and_counts_again_with_every_acknowledged_write() {
    a_reset_replica_rejoins_and_counts_again_with_every_acknowledged_write(Backend::Kevy);
}
