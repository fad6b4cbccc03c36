//! The parts of a node fail alone (docs/protocol.md §6.4.1, §6.8): real
//! kevy 7 and redis-server data nodes and real electors on loopback, where
//! the data node, the elector or a fence fails without the rest of its node.

mod support;

use std::time::{Duration, Instant};
use support::{wait_until, Backend, Cluster};

fn set_refused(cluster: &Cluster, i: usize, key: &str) -> bool {
    let Some(mut conn) = support::try_connect(
        "127.0.0.1",
        cluster.nodes[i].data_port,
        Duration::from_millis(500),
    ) else {
        return true;
    };
    redis::cmd("SET")
        .arg(key)
        .arg("x")
        .query::<String>(&mut conn)
        .is_err()
}

fn assert_all_present(cluster: &Cluster, i: usize, keys: &[String]) {
    let mut conn = cluster.client(i);
    for key in keys {
        let v: Option<String> = redis::cmd("GET").arg(key).query(&mut conn).unwrap();
        assert!(
            v.is_some(),
            "acknowledged write {key} missing on {}",
            cluster.nodes[i].id
        );
    }
}

/// §6.8 (finding 1): the primary's data node is SIGKILLed and comes back
/// empty while its elector keeps running. Before the fix the elector made
/// it writable again in the same epoch and every replica full-synced the
/// empty dataset. Now it resigns, a replica holding the data wins, and the
/// emptied node follows it.
fn a_primary_data_node_restarted_empty_is_not_made_writable_again(backend: Backend) {
    let mut cluster = Cluster::start(backend, 3);
    let old = cluster.wait_primary(Duration::from_secs(15));
    cluster.wait_replica_links(old);
    let keys = cluster.acked_keys(old, "before", 20);
    let epoch_before = cluster.status(old).unwrap()["epoch"].as_u64().unwrap();
    cluster.kill_data(old);
    std::thread::sleep(Duration::from_millis(300));
    cluster.restart_data(old, false);
    let deadline = Instant::now() + Duration::from_secs(20);
    let new = loop {
        // The emptied node must refuse writes until a new election made
        // someone else the primary (its /status may still say primary while
        // its data node is down: that is reporting, not a writable node).
        let epoch = cluster
            .status(old)
            .and_then(|s| s["epoch"].as_u64())
            .unwrap_or(0);
        if epoch <= epoch_before {
            assert!(
                set_refused(&cluster, old, "probe"),
                "the emptied node took a write in epoch {epoch}"
            );
        }
        if let Some(p) = cluster.writable_primary() {
            if p != old {
                break p;
            }
        }
        assert!(Instant::now() < deadline, "no new primary");
        std::thread::sleep(Duration::from_millis(25));
    };
    assert_all_present(&cluster, new, &keys);
    let new_id = cluster.nodes[new].id.clone();
    wait_until(
        Duration::from_secs(20),
        || {
            cluster.status(old).is_some_and(|s| {
                s["primary"] == new_id.as_str() && s["data_node"]["link_up"] == true
            })
        },
        "the emptied node to follow the new primary",
    );
    // kevy answers -LOADING during the full snapshot; give it a moment.
    wait_until(
        Duration::from_secs(20),
        || {
            let mut c = cluster.client(old);
            keys.iter().all(|k| {
                redis::cmd("GET")
                    .arg(k)
                    .query::<Option<String>>(&mut c)
                    .is_ok_and(|v| v.is_some())
            })
        },
        "the emptied node to receive every acknowledged write again",
    );
}

#[test]
fn a_redis_primary_restarted_empty_under_its_elector_is_not_made_writable_again() {
    a_primary_data_node_restarted_empty_is_not_made_writable_again(Backend::Redis);
}

#[test]
fn a_kevy_primary_restarted_empty_under_its_elector_is_not_made_writable_again() {
    a_primary_data_node_restarted_empty_is_not_made_writable_again(Backend::Kevy);
}

/// §6.4.1 (finding 3): the primary's elector is frozen with SIGSTOP while
/// its data node keeps serving. The watchdog fences the data node within
/// about a lease (300 ms here) plus a probe, the others elect, and after
/// SIGCONT the old primary follows the new one.
fn a_stopped_primary_elector_gets_its_data_node_fenced(backend: Backend) {
    let mut cluster = Cluster::start(backend, 3);
    for i in 0..3 {
        cluster.start_watchdog(i);
    }
    let old = cluster.wait_primary(Duration::from_secs(15));
    cluster.wait_replica_links(old);
    let keys = cluster.acked_keys(old, "before", 10);
    cluster.signal_elector(old, "STOP");
    let stopped = Instant::now();
    wait_until(
        Duration::from_secs(3),
        || set_refused(&cluster, old, "during-stop"),
        "the stopped elector's data node to refuse writes",
    );
    let fenced_after = stopped.elapsed();
    eprintln!(
        "{backend:?}: data node refused writes {fenced_after:?} after SIGSTOP of its elector"
    );
    let new = cluster.wait_primary(Duration::from_secs(15));
    assert_ne!(new, old);
    assert_all_present(&cluster, new, &keys);
    assert!(
        set_refused(&cluster, old, "still-stopped"),
        "old primary writable again while stopped"
    );
    cluster.signal_elector(old, "CONT");
    let new_id = cluster.nodes[new].id.clone();
    wait_until(
        Duration::from_secs(10),
        || {
            cluster
                .status(old)
                .is_some_and(|s| s["primary"] == new_id.as_str() && s["role"] == "replica")
        },
        "the thawed old primary to follow",
    );
    assert_eq!(cluster.writable_primary(), Some(new));
}

#[test]
fn a_stopped_redis_primary_elector_gets_its_data_node_fenced_by_the_watchdog() {
    a_stopped_primary_elector_gets_its_data_node_fenced(Backend::Redis);
}

#[test]
fn a_stopped_kevy_primary_elector_gets_its_data_node_fenced_by_the_watchdog() {
    a_stopped_primary_elector_gets_its_data_node_fenced(Backend::Kevy);
}

/// §6.4.1: a clean stop (SIGTERM) fences the data node before exiting.
fn a_clean_elector_stop_fences_first(backend: Backend) {
    let mut cluster = Cluster::start(backend, 3);
    let p = cluster.wait_primary(Duration::from_secs(15));
    wait_until(
        Duration::from_secs(5),
        || !set_refused(&cluster, p, "before-stop"),
        "the primary's data node to take writes",
    );
    cluster.signal_elector(p, "TERM");
    cluster.wait_elector_exit(p, Duration::from_secs(5));
    assert!(
        set_refused(&cluster, p, "after-stop"),
        "data node writable after its elector stopped"
    );
}

#[test]
fn a_clean_redis_elector_stop_fences_its_data_node_first() {
    a_clean_elector_stop_fences_first(Backend::Redis);
}

#[test]
fn a_clean_kevy_elector_stop_fences_its_data_node_first() {
    a_clean_elector_stop_fences_first(Backend::Kevy);
}

/// §6.4.1 (finding 4): fence settings undone by hand on Redis are read back
/// and put back on the next poll.
#[test]
fn redis_fence_settings_undone_by_hand_are_put_back() {
    let cluster = Cluster::start(Backend::Redis, 3);
    let p = cluster.wait_primary(Duration::from_secs(15));
    let replica = (p + 1) % 3;
    let mut conn = cluster.client(replica);
    let _: () = redis::cmd("CONFIG")
        .arg(&[
            "SET",
            "replica-read-only",
            "no",
            "min-replicas-to-write",
            "0",
            "min-replicas-max-lag",
            "0",
        ])
        .query(&mut conn)
        .unwrap();
    wait_until(
        Duration::from_secs(2),
        || {
            let v: Vec<String> = redis::cmd("CONFIG")
                .arg(&["GET", "replica-read-only"])
                .query(&mut conn)
                .unwrap();
            let m: Vec<String> = redis::cmd("CONFIG")
                .arg(&["GET", "min-replicas-max-lag"])
                .query(&mut conn)
                .unwrap();
            v.get(1).map(String::as_str) == Some("yes") && m.get(1).map(String::as_str) != Some("0")
        },
        "the elector to restore replica-read-only and the lag check",
    );
    // The primary's data-node dead-man switch: quorum − 1 = 1 replica.
    let mut pc = cluster.client(p);
    let v: Vec<String> = redis::cmd("CONFIG")
        .arg(&["GET", "min-replicas-to-write"])
        .query(&mut pc)
        .unwrap();
    assert_eq!(v.get(1).map(String::as_str), Some("1"));
}

/// The writable primary once a replica has acknowledged a write through it
/// and it is still the writable primary a second later. This binary's
/// tests start their clusters side by side (two cores, a debug build in
/// `just test`), and the first election can be followed by a second: in a
/// CI rehearsal of ecb0bd2 the primary read here lost its quorum to the
/// load, the replica the test then promoted by hand had just been elected
/// in its place, and nothing was left to put back.
fn settled_primary(cluster: &Cluster) -> usize {
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let p = cluster.wait_primary(Duration::from_secs(15));
        cluster.wait_replica_links(p);
        let acked = support::acked_write(&mut cluster.client(p), "settled");
        std::thread::sleep(Duration::from_secs(1));
        if acked && cluster.writable_primary() == Some(p) {
            return p;
        }
        assert!(Instant::now() < deadline, "no primary settled within 40 s");
    }
}

/// §6.4.1 (finding 4): a kevy replica promoted by hand is seen on the next
/// poll and made a replica of the primary again.
#[test]
fn a_kevy_replica_promoted_by_hand_is_put_back() {
    let cluster = Cluster::start(Backend::Kevy, 3);
    let p = settled_primary(&cluster);
    let replica = (p + 1) % 3;
    let mut conn = cluster.client(replica);
    let _: String = redis::cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query(&mut conn)
        .unwrap();
    wait_until(
        Duration::from_secs(8),
        || set_refused(&cluster, replica, "by-hand"),
        "the hand-promoted replica to be demoted again",
    );
    assert_eq!(cluster.writable_primary(), Some(p));
}
