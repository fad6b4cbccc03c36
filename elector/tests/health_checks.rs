//! The health checks (`docs/interfaces.md`, "Health checks") against real
//! kevy 7.0.0 and redis-server data nodes on loopback, three electors with
//! the short test timings.
//!
//! A replica is made to lag for real: iptables drops what the primary's data
//! node sends on that replica's replication connections, so the primary's
//! offset (carried by its heartbeats) moves on while the replica's stands.
//! That needs a private network namespace (root); elsewhere the test says so
//! and passes (support/netns.rs).

mod support;

use std::time::Duration;
use support::netns::{inside_private_netns, sh};
use support::{wait_until, Backend, Cluster};

/// The HTTP status of `GET path` on node `i`'s API (0 if it did not answer).
fn code(cluster: &Cluster, i: usize, path: &str) -> u16 {
    let url = format!("http://127.0.0.1:{}{path}", cluster.nodes[i].api_port);
    match ureq::get(&url).timeout(Duration::from_millis(500)).call() {
        Ok(r) => r.status(),
        Err(ureq::Error::Status(c, _)) => c,
        Err(_) => 0,
    }
}

/// `(local port, peer port)` of the established TCP connections process
/// `pid` holds to any of `ports` on loopback. Redis replicates over the
/// primary's client port; kevy 7.0.0 over a replication port of its own.
fn connections_of(pid: u32, ports: &[u16]) -> Vec<(u16, u16)> {
    let out = std::process::Command::new("ss")
        .args(["-Htnp", "state", "established"])
        .output()
        .expect("ss");
    let owner = format!("pid={pid},");
    let port_of = |addr: &str| addr.rsplit_once(':').and_then(|(_, p)| p.parse().ok());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains(&owner))
        .filter_map(|l| {
            let mut cols = l.split_whitespace().skip(2);
            let local: u16 = port_of(cols.next()?)?;
            let peer: u16 = port_of(cols.next()?)?;
            ports.contains(&peer).then_some((local, peer))
        })
        .collect()
}

fn checks_follow_roles_data_nodes_and_lag(backend: Backend) {
    let mut cluster = Cluster::start(backend, 3);
    let p = cluster.wait_primary(Duration::from_secs(15));
    cluster.wait_replica_links(p);
    let replicas: Vec<usize> = (0..3).filter(|&i| i != p).collect();
    let (r, other) = (replicas[0], replicas[1]);

    wait_until(
        Duration::from_secs(5),
        || (0..3).all(|i| code(&cluster, i, "/readiness") == 200),
        "every member ready",
    );
    for i in 0..3 {
        let primary = if i == p { 200 } else { 503 };
        let replica = if i == p { 503 } else { 200 };
        assert_eq!(code(&cluster, i, "/read-write"), primary, "node {i}");
        assert_eq!(code(&cluster, i, "/primary"), primary, "node {i}");
        assert_eq!(code(&cluster, i, "/replica"), replica, "node {i}");
        assert_eq!(code(&cluster, i, "/read-only"), 200, "node {i}");
        assert_eq!(code(&cluster, i, "/liveness"), 200, "node {i}");
    }

    wait_until(
        Duration::from_secs(5),
        || {
            replicas
                .iter()
                .all(|&i| code(&cluster, i, "/replica?lag=100") == 200)
        },
        "both replicas within lag 100 of a quiet primary",
    );

    // Without its data node a member is alive but not ready (and the only
    // replication connections left to the primary are r's).
    cluster.kill_data(other);
    wait_until(
        Duration::from_secs(5),
        || code(&cluster, other, "/readiness") == 503,
        "a member without its data node not ready",
    );
    assert_eq!(
        code(&cluster, other, "/liveness"),
        200,
        "its loop still turns"
    );
    assert_eq!(code(&cluster, other, "/replica"), 503);
    assert_eq!(code(&cluster, other, "/read-only"), 503);

    // Hold back the replication stream to r: its offset stands still while
    // the primary's moves on with every write.
    let primary_port = cluster.nodes[p].data_port;
    let pid = cluster.nodes[r].data.as_ref().expect("r's data node").id();
    let links = connections_of(pid, &[primary_port, primary_port + 10_000]);
    assert!(!links.is_empty(), "r has no replication connection");
    let rules: Vec<String> = links
        .iter()
        .map(|(local, peer)| format!("INPUT -p tcp --sport {peer} --dport {local} -j DROP"))
        .collect();
    for rule in &rules {
        sh(&format!("iptables -A {rule}"));
    }
    let mut conn = cluster.client(p);
    for k in 0..300 {
        let _: () = redis::cmd("SET")
            .arg(format!("lag:{k}"))
            .arg("x")
            .query(&mut conn)
            .expect("a write on the primary");
    }
    wait_until(
        Duration::from_secs(5),
        || {
            cluster
                .status(r)
                .and_then(|s| s["data_node"]["lag"].as_u64())
                .is_some_and(|lag| lag >= 300)
        },
        "r to report a lag of at least 300 (commands on kevy, bytes on Redis)",
    );
    assert_eq!(
        code(&cluster, r, "/replica?lag=100"),
        503,
        "lagging replica"
    );
    assert_eq!(code(&cluster, r, "/read-only?lag=100"), 503);
    assert_eq!(
        code(&cluster, r, "/replica"),
        200,
        "no bound, link still up"
    );
    assert_eq!(
        code(&cluster, r, "/readiness"),
        200,
        "lagging is still ready"
    );
    assert_eq!(
        code(&cluster, r, "/replica?lag=1000000000"),
        200,
        "within a loose bound"
    );
    for rule in &rules {
        sh(&format!("iptables -D {rule}"));
    }
    wait_until(
        Duration::from_secs(15),
        || code(&cluster, r, "/replica?lag=100") == 200,
        "r to catch up and pass /replica?lag=100 again",
    );
}

#[test]
fn health_checks_follow_roles_data_nodes_and_lag_on_kevy() {
    support::require("kevy");
    if inside_private_netns("health_checks_follow_roles_data_nodes_and_lag_on_kevy") {
        checks_follow_roles_data_nodes_and_lag(Backend::Kevy);
    }
}

#[test]
fn health_checks_follow_roles_data_nodes_and_lag_on_redis() {
    support::require("redis-server");
    if inside_private_netns("health_checks_follow_roles_data_nodes_and_lag_on_redis") {
        checks_follow_roles_data_nodes_and_lag(Backend::Redis);
    }
}
