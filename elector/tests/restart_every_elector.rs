//! Every elector of a running cluster stopped and started again at once,
//! the data nodes left running with their data: what a fingerprinted timing
//! change (docs/protocol.md §3.7) or an upgrade of every host at once does.
//! The cluster must elect again, with every acknowledged write.
//!
//! On Redis it does (a restarted elector proves its data node's position by
//! its replication id and offset). On kevy it does not yet: kevy 7.0.0 gives
//! no run id, a restarted elector's position is `unproven_after_elector_start`
//! until its node joins a feed (protocol §6.2.1, "truthful positions"), and
//! with every elector restarted nobody can stand, so the cluster waits for
//! `elector accept-data-loss` although nothing was lost (found by the Ansible
//! rehearsal; issue 34). The kevy test is ignored until that is fixed; run it
//! with `--ignored` to see it.

mod support;

use std::time::{Duration, Instant};
use support::{Backend, Cluster};

/// How long the cluster gets to elect again after the restart.
const ELECT_AGAIN_WITHIN: Duration = Duration::from_secs(15);

fn every_elector_restarted_at_once_elects_again_with_every_acknowledged_write(backend: Backend) {
    let mut c = Cluster::start(backend, 3);
    let p = c.wait_primary(Duration::from_secs(20));
    c.wait_replica_links(p);
    let keys = c.acked_keys(p, "before-restart", 20);
    for i in 0..3 {
        c.signal_elector(i, "TERM");
    }
    for i in 0..3 {
        c.wait_elector_exit(i, Duration::from_secs(10));
        c.keep_elector_log(i);
    }
    for i in 0..3 {
        c.start_elector(i);
    }
    let started = Instant::now();
    let mut primary = None;
    while primary.is_none() && started.elapsed() < ELECT_AGAIN_WITHIN {
        primary = c.writable_primary();
        std::thread::sleep(Duration::from_millis(100));
    }
    let Some(primary) = primary else {
        c.dump_logs();
        let proofs: Vec<String> = (0..3)
            .map(|i| {
                c.status(i).map_or("no answer".into(), |s| {
                    format!("n{}: {} {}", i + 1, s["role"], s["data_node"]["proof"])
                })
            })
            .collect();
        panic!(
            "no writable primary {ELECT_AGAIN_WITHIN:?} after every elector restarted: {proofs:?}"
        );
    };
    let missing = c.missing_keys(primary, &keys);
    assert!(
        missing.is_empty(),
        "n{} was elected without {} acknowledged writes: {missing:?}",
        primary + 1,
        missing.len()
    );
}

#[test]
fn every_redis_elector_restarted_at_once_elects_again_with_every_acknowledged_write() {
    every_elector_restarted_at_once_elects_again_with_every_acknowledged_write(Backend::Redis);
}

#[test]
#[ignore = "issue 34: a kevy cluster whose electors all restart at once waits for accept-data-loss"]
fn every_kevy_elector_restarted_at_once_elects_again_with_every_acknowledged_write() {
    every_elector_restarted_at_once_elects_again_with_every_acknowledged_write(Backend::Kevy);
}
