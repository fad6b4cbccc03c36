//! Integration tests with real processes on loopback (no containers):
//! kevy 7.0.0 and redis-server data nodes, one `elector` binary each, short
//! timings (down_after 600 ms). docs/protocol.md §10 lists what they prove.

mod support;

use std::time::Duration;
use support::{acked_write, wait_until, Backend, Cluster};

/// Kill the primary (elector + data node); a new primary is elected and
/// takes acknowledged writes, the other replica follows it, nothing
/// acknowledged before the kill is lost, and the old node rejoins as a
/// read-only replica of the new primary.
fn primary_kill_fails_over_and_the_old_primary_rejoins_read_only(backend: Backend) {
    let mut cluster = Cluster::start(backend, 3);
    let old = cluster.wait_primary(Duration::from_secs(15));
    cluster.wait_replica_links(old);
    let mut conn = cluster.client(old);
    // Only writes acknowledged by a replica (WAIT 1) are promised to survive.
    let acked: Vec<String> = (0..50)
        .map(|k| format!("before:{k}"))
        .filter(|key| acked_write(&mut conn, key))
        .collect();
    assert!(
        acked.len() >= 10, // kevy's WAIT is unreliable (README, Known limits)
        "only {} of 50 writes were acknowledged before the kill",
        acked.len()
    );
    cluster.kill_node(old);

    let new = cluster.wait_primary(Duration::from_secs(15));
    assert_ne!(new, old);
    let mut conn = cluster.client(new);
    wait_until(
        Duration::from_secs(10),
        || acked_write(&mut conn, "after"),
        "an acknowledged write on the new primary",
    );
    for key in &acked {
        let v: Option<String> = redis::cmd("GET").arg(key).query(&mut conn).unwrap();
        assert!(v.is_some(), "acknowledged write {key} lost in the failover");
    }
    let other = (0..3).find(|&i| i != old && i != new).unwrap();
    let new_id = cluster.nodes[new].id.clone();
    wait_until(
        Duration::from_secs(5),
        || {
            cluster
                .status(other)
                .is_some_and(|s| s["primary"] == new_id.as_str())
        },
        "the other replica to follow the new primary",
    );

    cluster.start_node(old);
    wait_until(
        Duration::from_secs(10),
        || {
            cluster.status(old).is_some_and(|s| {
                s["role"] == "replica"
                    && s["primary"] == new_id.as_str()
                    && s["data_node"]["link_up"] == true
            })
        },
        "the old primary to rejoin as a replica",
    );
    let mut old_conn = cluster.client(old);
    let refused: redis::RedisResult<String> = redis::cmd("SET")
        .arg("on-old")
        .arg("x")
        .query(&mut old_conn);
    assert!(
        refused.is_err(),
        "the rejoined old primary accepted a write"
    );
    assert_eq!(
        cluster.writable_primary(),
        Some(new),
        "exactly one writable primary after the rejoin"
    );
}

#[test]
fn kevy_cluster_fails_over_when_the_primary_is_killed_and_the_old_primary_rejoins_read_only() {
    primary_kill_fails_over_and_the_old_primary_rejoins_read_only(Backend::Kevy);
}

#[test]
fn redis_cluster_fails_over_when_the_primary_is_killed_and_the_old_primary_rejoins_read_only() {
    primary_kill_fails_over_and_the_old_primary_rejoins_read_only(Backend::Redis);
}

/// N=2: quorum is 2, so losing the primary must never promote the survivor.
fn two_nodes_never_fail_over(backend: Backend) {
    let mut cluster = Cluster::start(backend, 2);
    let old = cluster.wait_primary(Duration::from_secs(15));
    cluster.kill_node(old);
    let survivor = 1 - old;
    std::thread::sleep(Duration::from_millis(4 * cluster.down_after_ms + 1_000));
    let status = cluster.status(survivor).expect("survivor answers");
    assert_ne!(status["role"], "primary", "N=2 failed over: {status}");
    let mut conn = cluster.client(survivor);
    let refused: redis::RedisResult<String> = redis::cmd("SET").arg("k").arg("v").query(&mut conn);
    assert!(
        refused.is_err(),
        "the survivor of a 2-node cluster accepted a write"
    );
}

#[test]
fn a_two_node_kevy_cluster_never_fails_over() {
    two_nodes_never_fail_over(Backend::Kevy);
}

#[test]
fn a_two_node_redis_cluster_never_fails_over() {
    two_nodes_never_fail_over(Backend::Redis);
}

/// A planned switchover under write load (docs/protocol.md §8): the target
/// becomes primary and no write the primary answered OK is lost (stronger
/// than WAIT: the fence precedes the catch-up, so even writes no replica
/// had acknowledged yet survive). The write pause is reported.
fn switchover_under_load_loses_no_acknowledged_write(backend: Backend) {
    let cluster = Cluster::start(backend, 3);
    let old = cluster.wait_primary(Duration::from_secs(15));
    cluster.wait_replica_links(old);
    let target = (0..3).find(|&i| i != old).unwrap();
    let target_id = cluster.nodes[target].id.clone();
    let ports: Vec<u16> = cluster.nodes.iter().map(|n| n.data_port).collect();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut acked = Vec::new();
            let mut n = 0;
            let start = std::time::Instant::now();
            while !stop.load(std::sync::atomic::Ordering::Relaxed)
                && start.elapsed() < Duration::from_secs(30)
            {
                for &port in &ports {
                    let mut c = support::redis_client(port);
                    let key = format!("sw:{n}");
                    n += 1;
                    let ok: redis::RedisResult<String> =
                        redis::cmd("SET").arg(&key).arg("v").query(&mut c);
                    if ok.is_ok() {
                        acked.push(key);
                    }
                }
            }
            acked
        })
    };
    std::thread::sleep(Duration::from_millis(500));
    let reply = cluster.request_switchover(old, target);
    assert_eq!(reply["to"], target_id.as_str());
    wait_until(
        Duration::from_secs(10),
        || cluster.writable_primary() == Some(target),
        "the target to be the writable primary",
    );
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let acked = writer.join().unwrap();
    assert!(
        acked.len() > 10,
        "too few acknowledged writes ({}) to prove anything",
        acked.len()
    );
    let lost = cluster.missing_keys(target, &acked);
    assert!(
        lost.is_empty(),
        "{} acknowledged writes lost in the switchover: {:?}",
        lost.len(),
        &lost[..lost.len().min(5)]
    );
}

#[test]
fn a_redis_switchover_under_write_load_loses_no_acknowledged_write() {
    switchover_under_load_loses_no_acknowledged_write(Backend::Redis);
}

/// kevy drains through its write quiesce (`FAILOVER` towards nowhere,
/// docs/protocol.md §8): the primary stays a primary, so the catch-up is
/// verified against its real offset.
#[test]
fn a_kevy_switchover_under_write_load_loses_no_acknowledged_write() {
    switchover_under_load_loses_no_acknowledged_write(Backend::Kevy);
}
