//! Two data nodes and a witness (docs/protocol.md §4.5), with real kevy
//! 7.0.0 and redis-server processes and real electors on loopback.

mod support;

use std::time::Duration;
use support::{acked_write, wait_until, Backend, Cluster};

const WITNESS: usize = 2;

/// SET answered OK, then how many replicas `WAIT 1 300` counted (a refused
/// SET, say NOREPLICAS from Redis's own switch, is an error here).
fn set_then_wait(conn: &mut redis::Connection, key: &str) -> Result<i64, String> {
    redis::cmd("SET")
        .arg(key)
        .arg("v")
        .query::<String>(conn)
        .map_err(|e| format!("SET {key} refused: {e}"))?;
    redis::cmd("WAIT")
        .arg(1)
        .arg(300)
        .query::<i64>(conn)
        .map_err(|e| format!("WAIT failed: {e}"))
}

fn never_primary(cluster: &Cluster, i: usize) {
    if let Some(s) = cluster.status(i) {
        assert_ne!(s["role"], "primary", "the witness became primary: {s}");
        assert_eq!(s["data_node"]["kind"], "none", "{s}");
    }
}

/// Kill the primary of a 2 + 1 cluster: the other data node takes over with
/// the witness's vote, keeps every write acknowledged before (`WAIT 1`, the
/// data promise of 2 + 1), and takes writes alone (they cannot be
/// acknowledged until a replica is back: `WAIT 1` answers 0). The old node
/// rejoins as its replica and acknowledgements resume.
fn the_remaining_data_node_takes_over_with_the_witness_vote(backend: Backend) {
    let mut cluster = Cluster::start_with_witnesses(backend, 2, 1);
    let old = cluster.wait_primary(Duration::from_secs(15));
    assert_ne!(old, WITNESS);
    cluster.wait_replica_links(old);
    let mut conn = cluster.client(old);
    let acked: Vec<String> = (0..40)
        .map(|k| format!("before:{k}"))
        .filter(|key| acked_write(&mut conn, key))
        .collect();
    assert!(
        acked.len() >= 10,
        "only {} of 40 writes acknowledged before the kill",
        acked.len()
    );
    cluster.kill_node(old);
    let new = cluster.wait_primary(Duration::from_secs(15));
    assert!(new != old && new != WITNESS, "n{} became primary", new + 1);
    never_primary(&cluster, WITNESS);
    let mut conn = cluster.client(new);
    for key in &acked {
        let v: Option<String> = redis::cmd("GET").arg(key).query(&mut conn).unwrap();
        assert!(v.is_some(), "acknowledged write {key} lost in the failover");
    }
    // Alone: writable (the witness keeps its lease), nothing acknowledged.
    assert_eq!(set_then_wait(&mut conn, "alone"), Ok(0));
    cluster.start_node(old);
    cluster.wait_replica_links(new);
    wait_until(
        Duration::from_secs(10),
        || acked_write(&mut conn, "after"),
        "an acknowledged write once the old primary follows",
    );
}

#[test]
fn kevy_the_remaining_data_node_takes_over_with_the_witness_vote() {
    the_remaining_data_node_takes_over_with_the_witness_vote(Backend::Kevy);
}

#[test]
fn redis_the_remaining_data_node_takes_over_with_the_witness_vote() {
    the_remaining_data_node_takes_over_with_the_witness_vote(Backend::Redis);
}

/// Kill the replica of a 2 + 1 cluster: the primary keeps its lease through
/// the witness and stays writable; `WAIT 1` reports that no replica holds
/// the writes (§4.5, "When the replica is gone"). Redis's own dead-man switch
/// counts data replicas only, so it does not refuse them either.
fn the_primary_stays_writable_without_its_replica(backend: Backend) {
    let mut cluster = Cluster::start_with_witnesses(backend, 2, 1);
    let primary = cluster.wait_primary(Duration::from_secs(15));
    cluster.wait_replica_links(primary);
    let mut conn = cluster.client(primary);
    wait_until(
        Duration::from_secs(10),
        || acked_write(&mut conn, "healthy"),
        "an acknowledged write in the healthy cluster",
    );
    let replica = 1 - primary;
    cluster.kill_node(replica);
    // Several leases and Redis's min-replicas-max-lag later, still the one
    // writable primary, writes answered OK and not acknowledged.
    std::thread::sleep(Duration::from_millis(3 * cluster.down_after_ms));
    assert_eq!(cluster.writable_primary(), Some(primary));
    for k in 0..5 {
        assert_eq!(set_then_wait(&mut conn, &format!("alone:{k}")), Ok(0));
    }
    never_primary(&cluster, WITNESS);
}

#[test]
fn kevy_the_primary_stays_writable_without_its_replica() {
    the_primary_stays_writable_without_its_replica(Backend::Kevy);
}

#[test]
fn redis_the_primary_stays_writable_without_its_replica() {
    the_primary_stays_writable_without_its_replica(Backend::Redis);
}
