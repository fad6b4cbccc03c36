//! docs/architecture.md §kevy, "REPLICAOF waits for a hanging connect":
//! when a kevy primary's host is gone, each replica's replication thread
//! hangs in a 5 s connect to it, and kevy's `REPLICAOF` (also `NO ONE`)
//! joins that thread first. Every retarget of the failover would stall
//! until the connect times out; the elector aborts the connect instead.
//!
//! A host that is gone answers nothing: here every packet to the killed
//! primary's replication port is dropped (iptables, in a private network
//! namespace, see `support::netns`). Real kevy 7.0.0 processes and real
//! electors on loopback, down_after 600 ms.

mod support;

use std::time::{Duration, Instant};
use support::netns::{inside_private_netns, sh};
use support::{Backend, Cluster, SHORT_TIMINGS};

const WITH_ABORT: &str =
    "after_a_kevy_primary_host_vanishes_the_first_acknowledged_write_does_not_wait_out_kevys_connect_timeout";
const WITHOUT_ABORT: &str =
    "without_the_abort_the_same_failover_waits_out_kevys_five_second_connect";

/// kevy's replication connect timeout (kevy-replicate `ConnectOptions`).
const KEVY_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Kills the primary after dropping everything sent to its replication
/// port, then measures the time until a write on the new primary is
/// acknowledged by a replica (`SET` + `WAIT 1`). Returns that time and the
/// survivors' `elector_stale_connects_aborted_total`.
fn fail_over_from_a_vanished_kevy_host(data_node_extra: &str) -> (Duration, u64) {
    support::require("kevy");
    let mut cluster = Cluster::start_configured(Backend::Kevy, 3, SHORT_TIMINGS, data_node_extra);
    let p = cluster.wait_primary(Duration::from_secs(15));
    cluster.wait_replica_links(p);
    let replication_port = cluster.nodes[p].data_port + 10_000;
    sh(&format!(
        "iptables -A INPUT -p tcp --dport {replication_port} -j DROP"
    ));
    let killed = Instant::now();
    cluster.kill_node(p);

    let mut acknowledged = None;
    let mut n = 0;
    while killed.elapsed() < Duration::from_secs(20) {
        if let Some(q) = cluster.writable_primary() {
            n += 1;
            let mut c = cluster.client(q);
            let set: redis::RedisResult<()> =
                redis::cmd("SET").arg(format!("k{n}")).arg(n).query(&mut c);
            let acks: redis::RedisResult<i64> = redis::cmd("WAIT").arg(1).arg(200).query(&mut c);
            if set.is_ok() && acks.is_ok_and(|a| a >= 1) {
                acknowledged = Some(killed.elapsed());
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let aborted = (0..3)
        .filter(|&i| i != p)
        .map(|i| cluster.metric(i, "elector_stale_connects_aborted_total"))
        .sum();
    sh("iptables -F INPUT");
    let took = acknowledged.expect("no write acknowledged by a replica within 20 s of the kill");
    eprintln!("kill -> first SET + WAIT 1 acknowledged: {took:?}; connects aborted: {aborted}");
    (took, aborted)
}

#[test]
fn after_a_kevy_primary_host_vanishes_the_first_acknowledged_write_does_not_wait_out_kevys_connect_timeout(
) {
    if !inside_private_netns(WITH_ABORT) {
        return;
    }
    let (took, aborted) = fail_over_from_a_vanished_kevy_host("");
    assert!(aborted >= 1, "no hanging connect was aborted");
    // Detection (600 ms) and election, then two retargets that no longer
    // wait for a connect: well inside kevy's connect timeout.
    assert!(
        took < KEVY_CONNECT_TIMEOUT - Duration::from_millis(1500),
        "the failover still waited for kevy's connect: {took:?}"
    );
}

/// The control: the same fault with the abort switched off waits out the
/// connect, so the test above measures the abort and nothing else.
#[test]
fn without_the_abort_the_same_failover_waits_out_kevys_five_second_connect() {
    if !inside_private_netns(WITHOUT_ABORT) {
        return;
    }
    let (took, aborted) = fail_over_from_a_vanished_kevy_host("abort_stale_connects: false");
    assert_eq!(aborted, 0);
    assert!(
        took >= KEVY_CONNECT_TIMEOUT - Duration::from_millis(500),
        "without the abort the failover did not wait for the connect ({took:?}): the test above proves nothing"
    );
}
