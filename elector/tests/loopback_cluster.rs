//! Integration tests with real processes on loopback (no containers):
//! kevy 3.17.3 and redis-server data nodes, one `elector` binary each, short
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
    for i in (0..3).filter(|&i| i != old) {
        wait_until(
            Duration::from_secs(10),
            || {
                cluster
                    .status(i)
                    .is_some_and(|s| s["data_node"]["link_up"] == true)
            },
            "replica links",
        );
    }
    let mut conn = cluster.client(old);
    // Only writes acknowledged by a replica (WAIT 1) are promised to survive.
    let acked: Vec<String> = (0..50)
        .map(|k| format!("before:{k}"))
        .filter(|key| acked_write(&mut conn, key))
        .collect();
    assert!(
        acked.len() >= 25,
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
