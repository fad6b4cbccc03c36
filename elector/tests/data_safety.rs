//! No acknowledged write is lost when a data node restarts, comes back with
//! less, or its stream restarts (docs/protocol.md §6.8, §6.10; issue 34):
//! real kevy 7 and redis-server data nodes and real electors on loopback.
//!
//! - (a) the primary's data node restarted by something other than its
//!   elector, empty or from older files, at gaps of 0, 30 and 100 ms, with a
//!   new PID or in a PID namespace of its own (process 1 before and after);
//! - (b) a primary's data node demoted under its running elector (an
//!   operator's `REPLICAOF`; the quiesce limit does the same after 60 s)
//!   while a replica's data node is stalled, then the primary killed;
//! - (c) the only holder of acknowledged writes out of reach while the
//!   others' data went back: 2 data nodes + a witness with the primary
//!   crashed or frozen, and 3 nodes with the acknowledging replica restarted
//!   from older files. No election while only nodes below their floor can
//!   vote; the operator's `accept-data-loss` is the way out.
//!
//! `ELECTOR_TEST_BIN=<older elector> ELECTOR_TEST_LEGACY=1` runs the same
//! tests against a build from before §6.10 (they fail there).

mod support;

use std::time::{Duration, Instant};
use support::{acked_value_by, wait_until, Backend, Cluster, DataRestart};

/// `n` keys acknowledged by `replicas` replicas on `primary` (bounded in
/// count and time); the keys the client was told are safe.
fn acknowledged_keys(
    cluster: &Cluster,
    primary: usize,
    prefix: &str,
    n: usize,
    replicas: u64,
) -> Vec<String> {
    cluster.acked_keys_by(primary, prefix, n, replicas)
}

/// The acknowledged keys node `i` does not hold.
fn missing(cluster: &Cluster, i: usize, keys: &[String]) -> Vec<String> {
    let mut conn = cluster.client(i);
    keys.iter()
        .filter(|k| {
            let v: redis::RedisResult<Option<String>> = redis::cmd("GET").arg(*k).query(&mut conn);
            !matches!(v, Ok(Some(_)))
        })
        .cloned()
        .collect()
}

/// A writable primary in an epoch after `after`.
fn wait_primary_after(cluster: &Cluster, after: u64, within: Duration) -> usize {
    let mut found = None;
    wait_until(
        within,
        || {
            found = cluster.writable_primary().filter(|&p| {
                cluster
                    .status(p)
                    .is_some_and(|s| s["epoch"].as_u64().unwrap_or(0) > after)
            });
            found.is_some()
        },
        "a writable primary of a later epoch",
    );
    found.unwrap()
}

fn epoch_of(cluster: &Cluster, i: usize) -> u64 {
    cluster.status(i).expect("elector answers")["epoch"]
        .as_u64()
        .unwrap()
}

/// Waits for a writable primary of an epoch after `after`, then for every
/// data node to hold every acknowledged key (replicas resync from it);
/// panics naming what is lost.
fn assert_nothing_lost(cluster: &Cluster, keys: &[String], after: u64, within: Duration) -> usize {
    let p = wait_primary_after(cluster, after, within);
    let lost = missing(cluster, p, keys);
    assert!(
        lost.is_empty(),
        "{} of {} acknowledged writes lost on the new primary {} (first: {:?})",
        lost.len(),
        keys.len(),
        cluster.nodes[p].id,
        lost.first()
    );
    for i in (0..cluster.nodes.len()).filter(|&i| !cluster.nodes[i].witness && i != p) {
        if cluster.nodes[i].data.is_some() && cluster.nodes[i].elector.is_some() {
            wait_until(
                Duration::from_secs(20),
                || missing(cluster, i, keys).is_empty(),
                &format!("{} to hold every acknowledged write", cluster.nodes[i].id),
            );
        }
    }
    p
}

/// No node becomes a writable primary for `how_long` (the floor rule).
fn assert_no_primary_for(cluster: &Cluster, how_long: Duration, why: &str) {
    let deadline = Instant::now() + how_long;
    while Instant::now() < deadline {
        if let Some(p) = cluster.writable_primary() {
            panic!(
                "{} was elected while {why}: it may lack acknowledged writes",
                cluster.nodes[p].id
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

// ----- (a) the primary's data node restarted fast -----

fn primary_data_node_restarted(backend: Backend, what: &str, gap_ms: u64, own_pid_ns: bool) {
    let mut cluster = Cluster::start(backend, 3);
    let p = cluster.wait_primary(Duration::from_secs(15));
    cluster.wait_replica_links(p);
    let older = cluster.copy_data(p, "before");
    let keys = acknowledged_keys(&cluster, p, "a", 100, 2);
    let epoch = epoch_of(&cluster, p);
    let restart = match what {
        "empty" => DataRestart::Emptied,
        _ => DataRestart::From(older),
    };
    cluster.restart_data_after(p, restart, Duration::from_millis(gap_ms), own_pid_ns);
    let q = assert_nothing_lost(&cluster, &keys, epoch, Duration::from_secs(20));
    eprintln!(
        "{backend:?}: primary {}'s data node restarted {what} after {gap_ms} ms (own PID namespace: {own_pid_ns}); {} acknowledged writes kept, new primary {}",
        cluster.nodes[p].id,
        keys.len(),
        cluster.nodes[q].id
    );
}

#[test]
fn a_kevy_primary_restarted_empty_at_once_loses_no_acknowledged_write() {
    primary_data_node_restarted(Backend::Kevy, "empty", 0, false);
}

#[test]
fn a_kevy_primary_restarted_empty_after_30_ms_loses_no_acknowledged_write() {
    primary_data_node_restarted(Backend::Kevy, "empty", 30, false);
}

#[test]
fn a_kevy_primary_restarted_empty_after_100_ms_loses_no_acknowledged_write() {
    primary_data_node_restarted(Backend::Kevy, "empty", 100, false);
}

#[test]
fn a_kevy_primary_restarted_empty_as_process_1_again_loses_no_acknowledged_write() {
    for gap in [0, 30, 100] {
        primary_data_node_restarted(Backend::Kevy, "empty", gap, true);
    }
}

#[test]
fn a_kevy_primary_restarted_from_older_files_loses_no_acknowledged_write() {
    primary_data_node_restarted(Backend::Kevy, "older", 30, false);
}

#[test]
fn a_redis_primary_restarted_empty_at_any_gap_loses_no_acknowledged_write() {
    for gap in [0, 30, 100] {
        primary_data_node_restarted(Backend::Redis, "empty", gap, false);
    }
}

#[test]
fn a_redis_primary_restarted_empty_as_process_1_again_loses_no_acknowledged_write() {
    for gap in [0, 30, 100] {
        primary_data_node_restarted(Backend::Redis, "empty", gap, true);
    }
}

#[test]
fn a_redis_primary_restarted_from_older_files_loses_no_acknowledged_write() {
    primary_data_node_restarted(Backend::Redis, "older", 30, false);
}

// ----- (b) a second stream inside one epoch -----

fn primary_demoted_by_hand_with_a_replica_stalled(backend: Backend) {
    let mut cluster = Cluster::start(backend, 3);
    let p = cluster.wait_primary(Duration::from_secs(15));
    cluster.wait_replica_links(p);
    let mut keys = acknowledged_keys(&cluster, p, "b0", 20, 2);
    let epoch = epoch_of(&cluster, p);
    let others: Vec<usize> = (0..3).filter(|&i| i != p).collect();
    let (ahead, behind) = (others[0], others[1]);
    // `behind` stalls with what it had; `ahead` acknowledges more of the
    // first stream, then stalls too.
    let older = cluster.copy_data(behind, "before");
    cluster.signal_data(behind, "STOP");
    keys.extend(acknowledged_keys(&cluster, p, "b1", 100, 1));
    cluster.signal_data(ahead, "STOP");
    // An operator demotes the primary's data node behind its elector;
    // `behind` comes back from its older files.
    let _: redis::RedisResult<String> = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(1)
        .query(&mut cluster.client(p));
    cluster.restart_data_after(
        behind,
        DataRestart::From(older),
        Duration::from_millis(30),
        false,
    );
    // Whoever leads now (the same node again, in the same epoch under the
    // old rules: a second stream from offset 0), `behind` acknowledges it.
    let q = cluster.wait_primary(Duration::from_secs(20));
    keys.extend(acknowledged_keys(&cluster, q, "b2", 30, 1));
    let epoch = epoch_of(&cluster, q).max(epoch);
    cluster.signal_data(ahead, "CONT");
    cluster.kill_node(q);
    let r = assert_nothing_lost(&cluster, &keys, epoch, Duration::from_secs(20));
    eprintln!(
        "{backend:?}: after a demotion by hand and the kill of {}, {} holds all {} acknowledged writes",
        cluster.nodes[q].id,
        cluster.nodes[r].id,
        keys.len()
    );
}

#[test]
fn a_kevy_primary_demoted_by_hand_never_starts_a_second_stream_in_its_epoch() {
    primary_demoted_by_hand_with_a_replica_stalled(Backend::Kevy);
}

#[test]
fn a_redis_primary_demoted_by_hand_loses_no_acknowledged_write_either() {
    primary_demoted_by_hand_with_a_replica_stalled(Backend::Redis);
}

// ----- (c) the holder out of reach, the others went back -----

/// 2 data nodes + a witness: B acknowledged every write; A (the primary) is
/// crashed or frozen; B's data node comes back with less.
fn two_and_a_witness(backend: Backend, primary_fault: &str, what: &str) {
    let mut cluster = Cluster::start_with_witnesses(backend, 2, 1);
    let a = cluster.wait_primary(Duration::from_secs(15));
    let b = 1 - a;
    cluster.wait_replica_links(a);
    let older = cluster.copy_data(b, "before");
    let keys = acknowledged_keys(&cluster, a, "c1", 200, 1);
    let epoch = epoch_of(&cluster, a);
    match primary_fault {
        "crash" => cluster.kill_node(a),
        _ => {
            cluster.start_watchdog(a);
            std::thread::sleep(Duration::from_millis(300));
            cluster.signal_elector(a, "STOP");
        }
    }
    let restart = match what {
        "empty" => DataRestart::Emptied,
        _ => DataRestart::From(older),
    };
    cluster.restart_data_after(b, restart, Duration::from_millis(30), false);
    assert_no_primary_for(
        &cluster,
        Duration::from_secs(6),
        "the only holder of acknowledged writes was out of reach",
    );
    match primary_fault {
        "crash" => {
            // A's host comes back: its data node from its files, its elector
            // fresh. Nothing proves what its data node holds (an AOF restart
            // names a new stream), so nothing is elected until an operator
            // says which node's data to trust.
            cluster.start_node(a);
            assert_no_primary_for(
                &cluster,
                Duration::from_secs(4),
                "every data node was below its floor",
            );
            let answer = cluster.accept_data_loss(a);
            eprintln!("accept-data-loss on {}: {answer}", cluster.nodes[a].id);
        }
        _ => cluster.signal_elector(a, "CONT"),
    }
    // A frozen holder comes back in its own epoch (its lease regained).
    let after = if primary_fault == "crash" {
        epoch
    } else {
        epoch - 1
    };
    let p = assert_nothing_lost(&cluster, &keys, after, Duration::from_secs(20));
    assert_eq!(p, a, "the holder of the acknowledged writes leads");
}

#[test]
fn two_kevy_nodes_and_a_witness_wait_for_the_crashed_holder_when_the_replica_came_back_empty() {
    two_and_a_witness(Backend::Kevy, "crash", "empty");
}

#[test]
fn two_redis_nodes_and_a_witness_wait_for_the_crashed_holder_when_the_replica_came_back_empty() {
    two_and_a_witness(Backend::Redis, "crash", "empty");
}

#[test]
fn two_kevy_nodes_and_a_witness_wait_for_the_holder_when_the_replica_came_back_older() {
    two_and_a_witness(Backend::Kevy, "crash", "older");
}

#[test]
fn two_redis_nodes_and_a_witness_wait_for_the_holder_when_the_replica_came_back_older() {
    two_and_a_witness(Backend::Redis, "crash", "older");
}

#[test]
fn two_kevy_nodes_and_a_witness_wait_for_a_frozen_holder_when_the_replica_came_back_empty() {
    two_and_a_witness(Backend::Kevy, "freeze", "empty");
}

#[test]
fn two_redis_nodes_and_a_witness_wait_for_a_frozen_holder_when_the_replica_came_back_empty() {
    two_and_a_witness(Backend::Redis, "freeze", "empty");
}

/// 3 nodes: B lags (its data node stalled), C acknowledged every write; A
/// (the primary) crashes; C's data node comes back from files older than
/// those writes, with its elector restarted too (a reboot) or running.
fn three_with_the_acknowledging_replica_gone_back(backend: Backend, reboot: bool) {
    let mut cluster = Cluster::start(backend, 3);
    let a = cluster.wait_primary(Duration::from_secs(15));
    cluster.wait_replica_links(a);
    let (b, c) = match a {
        0 => (1, 2),
        1 => (0, 2),
        _ => (0, 1),
    };
    acknowledged_keys(&cluster, a, "c2-old", 20, 2);
    let older = cluster.copy_data(c, "before");
    // B stalls; C acknowledges the writes. A stalled Redis still takes in
    // what fits in its socket buffers (and applies it when it resumes), so
    // on Redis the writes are 1 MB each, 24 MB in all. On kevy 7.0.0 a
    // replica whose socket is full stalls the feed to the other replicas
    // too (nothing was acknowledged with 1 MB values), and with small ones
    // the resumed replica lags without help.
    cluster.signal_data(b, "STOP");
    let (count, value) = match backend {
        Backend::Redis => (24, "x".repeat(1 << 20)),
        Backend::Kevy => (100, "v".to_string()),
    };
    let mut conn = cluster.client(a);
    let keys: Vec<String> = (0..count)
        .map(|k| format!("c2:{k}"))
        .filter(|k| acked_value_by(&mut conn, k, &value, 1))
        .collect();
    assert!(
        keys.len() >= count * 4 / 5,
        "only {} of {count} writes acknowledged",
        keys.len()
    );
    // Faults a poll apart: C's elector has read (and written) its floor.
    std::thread::sleep(Duration::from_millis(300));
    let epoch = epoch_of(&cluster, a);
    cluster.kill_node(a);
    cluster.signal_data(b, "CONT");
    if reboot {
        cluster.kill_node(c);
        let dir = cluster.nodes[c].dir.join("data");
        let _ = std::fs::remove_dir_all(&dir);
        assert!(std::process::Command::new("cp")
            .arg("-a")
            .arg(&older)
            .arg(&dir)
            .status()
            .unwrap()
            .success());
        cluster.start_node(c);
    } else {
        cluster.restart_data_after(
            c,
            DataRestart::From(older),
            Duration::from_millis(30),
            false,
        );
    }
    assert_no_primary_for(
        &cluster,
        Duration::from_secs(6),
        "the acknowledging replica's data went back and the primary was down",
    );
    cluster.start_node(a);
    assert_no_primary_for(
        &cluster,
        Duration::from_secs(4),
        "the returning primary could not prove its data",
    );
    cluster.accept_data_loss(a);
    let p = assert_nothing_lost(&cluster, &keys, epoch, Duration::from_secs(20));
    assert_eq!(p, a);
}

#[test]
fn three_kevy_nodes_never_elect_the_lagging_replica_when_the_acknowledging_one_rebooted_older() {
    three_with_the_acknowledging_replica_gone_back(Backend::Kevy, true);
}

#[test]
fn three_redis_nodes_never_elect_the_lagging_replica_when_the_acknowledging_one_rebooted_older() {
    three_with_the_acknowledging_replica_gone_back(Backend::Redis, true);
}

#[test]
fn three_kevy_nodes_never_elect_the_lagging_replica_when_the_acknowledging_data_node_went_back() {
    three_with_the_acknowledging_replica_gone_back(Backend::Kevy, false);
}

#[test]
fn three_redis_nodes_never_elect_the_lagging_replica_when_the_acknowledging_data_node_went_back() {
    three_with_the_acknowledging_replica_gone_back(Backend::Redis, false);
}
