//! Every elector of a running cluster stopped and started again at once,
//! the data nodes left running with their data: what a fingerprinted timing
//! change (docs/protocol.md §3.7) or an upgrade of every host at once does.
//! The cluster must elect again, with every acknowledged write.
//!
//! On Redis a restarted elector proves its data node's position by its
//! replication id and offset. kevy 7.0.0 gives no run id: the position its
//! elector held when it fenced the node on stop is proven by the process
//! mark the same pipeline confirmed (`datanode/kevy_mark.rs`, protocol
//! §6.10). Before the mark, every kevy node stayed
//! `unproven_after_elector_start`, nobody could stand, and the cluster
//! waited for `elector accept-data-loss` although nothing was lost (found by
//! the Ansible rehearsal; issue 34).
//!
//! The mark must prove nothing for a kevy that is not the process it was
//! loaded into: the second pair of tests restarts the old primary's data
//! node empty while every elector is down, and the cluster must still elect
//! a node holding every acknowledged write.
//!
//! The same four tests run with the electors SIGKILLed instead, a watchdog
//! beside each (`Stop::KilledWithWatchdogs`): no stop fence runs, so what a
//! restarted kevy elector can prove is only what its watchdog's clamp wrote
//! under the watchdog's own mark. The simulator draws the same two schedules
//! (`tests/simulation.rs`, `every_elector_killed_*`).

mod support;

use std::time::{Duration, Instant};
use support::{wait_until, Backend, Cluster};

/// How long the cluster gets to elect again after the restart.
const ELECT_AGAIN_WITHIN: Duration = Duration::from_secs(15);

/// How the electors go down.
#[derive(Debug, Clone, Copy)]
enum Stop {
    /// SIGTERM: each fences its data node on the way out and (kevy) writes
    /// the position it fenced at, under its process mark.
    Clean,
    /// SIGKILL with a watchdog beside every elector: nothing runs on the way
    /// out; each watchdog finds its elector silent past the lease, clamps
    /// the data node, and (kevy) its own `REPLICAOF` pipeline writes the
    /// position under the watchdog's mark (protocol §6.4.1, §9.1).
    KilledWithWatchdogs,
}

/// How long the watchdogs get to clamp after every elector was killed
/// (a lease of about 330 ms here, and a probe).
const WATCHDOGS_CLAMP_WITHIN: Duration = Duration::from_secs(10);

fn every_elector_restarted_at_once_elects_again_with_every_acknowledged_write(backend: Backend) {
    restart_every_elector(backend, Stop::Clean, false);
}

/// Every elector stopped (`how`); with `empty_old_primary`, the old
/// primary's data node is then restarted with an emptied data directory
/// before the electors start again: whatever its elector (or watchdog) held
/// for it describes another process. The cluster must elect a node that
/// holds every acknowledged write.
fn restart_every_elector(backend: Backend, how: Stop, empty_old_primary: bool) {
    let mut c = Cluster::start(backend, 3);
    if matches!(how, Stop::KilledWithWatchdogs) {
        for i in 0..3 {
            c.start_watchdog(i);
        }
    }
    let p = c.wait_primary(Duration::from_secs(20));
    c.wait_replica_links(p);
    let keys = c.acked_keys(p, "before-restart", 20);
    let signal = match how {
        Stop::Clean => "TERM",
        Stop::KilledWithWatchdogs => "KILL",
    };
    for i in 0..3 {
        c.signal_elector(i, signal);
    }
    for i in 0..3 {
        c.wait_elector_exit(i, Duration::from_secs(10));
        c.keep_elector_log(i);
    }
    if matches!(how, Stop::KilledWithWatchdogs) {
        wait_every_watchdog_clamped(&c);
    }
    if empty_old_primary {
        c.kill_data(p);
        c.restart_data(p, false);
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

/// Waits until every node's watchdog counted a clamp
/// (`<data_dir>/watchdog-clamps`, counted after the clamp itself).
fn wait_every_watchdog_clamped(c: &Cluster) {
    let clamps = |i: usize| {
        std::fs::read_to_string(c.nodes[i].dir.join("elector").join("watchdog-clamps"))
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    wait_until(
        WATCHDOGS_CLAMP_WITHIN,
        || (0..3).all(|i| clamps(i) >= 1),
        "every watchdog to clamp its data node after its elector was killed",
    );
}

#[test]
fn every_redis_elector_restarted_at_once_elects_again_with_every_acknowledged_write() {
    every_elector_restarted_at_once_elects_again_with_every_acknowledged_write(Backend::Redis);
}

#[test]
fn every_kevy_elector_restarted_at_once_elects_again_with_every_acknowledged_write() {
    every_elector_restarted_at_once_elects_again_with_every_acknowledged_write(Backend::Kevy);
}

#[test]
fn every_redis_elector_restarted_with_the_old_primarys_data_node_emptied_meanwhile_elects_a_holder_of_every_acknowledged_write(
) {
    restart_every_elector(Backend::Redis, Stop::Clean, true);
}

#[test]
fn every_kevy_elector_restarted_with_the_old_primarys_data_node_emptied_meanwhile_elects_a_holder_of_every_acknowledged_write(
) {
    restart_every_elector(Backend::Kevy, Stop::Clean, true);
}

#[test]
fn every_redis_elector_killed_until_the_watchdogs_clamped_then_started_elects_again_with_every_acknowledged_write(
) {
    restart_every_elector(Backend::Redis, Stop::KilledWithWatchdogs, false);
}

#[test]
fn every_kevy_elector_killed_until_the_watchdogs_clamped_then_started_elects_again_with_every_acknowledged_write(
) {
    restart_every_elector(Backend::Kevy, Stop::KilledWithWatchdogs, false);
}

#[test]
fn every_redis_elector_killed_with_the_old_primarys_data_node_emptied_meanwhile_elects_a_replica_its_watchdog_clamped(
) {
    restart_every_elector(Backend::Redis, Stop::KilledWithWatchdogs, true);
}

#[test]
fn every_kevy_elector_killed_with_the_old_primarys_data_node_emptied_meanwhile_elects_a_replica_its_watchdog_clamped(
) {
    restart_every_elector(Backend::Kevy, Stop::KilledWithWatchdogs, true);
}
