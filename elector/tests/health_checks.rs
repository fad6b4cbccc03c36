//! The health checks (`docs/interfaces.md`, "Health checks") against real
//! kevy 7.0.0 and redis-server data nodes on loopback, three electors with
//! the short test timings.
//!
//! A replica is made to lag for real: iptables drops what the primary's data
//! node sends on that replica's replication connections, so the primary's
//! offset (carried by its heartbeats) moves on while the replica's stands.
//! That needs a private network namespace (root); elsewhere the test says so
//! and passes (support/netns.rs). A real haproxy (Debian package, installed
//! by scripts/install-deps.sh) checks the same replicas with the read
//! backend of `examples/haproxy.cfg` and is shown to route reads away.

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

/// Drops what the primary `p`'s data node sends on replica `r`'s replication
/// connections and writes 300 keys on `p`: `r`'s offset stands still while
/// the primary's moves on. Returns the iptables rules to delete.
fn hold_back_replication(cluster: &Cluster, p: usize, r: usize) -> Vec<String> {
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
    rules
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
    let rules = hold_back_replication(&cluster, p, r);
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

/// The haproxy configuration of `examples/haproxy.cfg`'s read backend over
/// this cluster's replicas: reads on 127.0.0.1:`reads` (a port reserved
/// like the nodes' own: a fixed one once fell in their range and haproxy
/// could not bind it), checked with `/replica?lag=100`, and a stats socket
/// to read haproxy's own view.
fn haproxy_config(
    cluster: &Cluster,
    replicas: &[usize],
    socket: &std::path::Path,
    reads: u16,
) -> String {
    let servers: String = replicas
        .iter()
        .map(|&i| {
            let n = &cluster.nodes[i];
            format!(
                "    server {} 127.0.0.1:{} check port {}\n",
                n.id, n.data_port, n.api_port
            )
        })
        .collect();
    format!(
        "global\n    stats socket {} level admin\n\
         defaults\n    mode tcp\n    timeout connect 1s\n    timeout client 5s\n    timeout server 5s\n\
         frontend reads\n    bind 127.0.0.1:{reads}\n    default_backend replicas\n\
         backend replicas\n    balance roundrobin\n    option httpchk\n\
         \x20   http-check send meth GET uri /replica?lag=100\n    http-check expect status 200\n\
         \x20   default-server inter 200ms fall 1 rise 1\n{servers}",
        socket.display()
    )
}

/// `(status, total sessions)` of each server of backend `replicas`, from
/// haproxy's `show stat` CSV (columns: pxname, svname, ..., stot 8th,
/// status 18th).
fn haproxy_servers(socket: &std::path::Path) -> Vec<(String, String, u64)> {
    use std::io::{Read, Write};
    let Ok(mut s) = std::os::unix::net::UnixStream::connect(socket) else {
        return Vec::new();
    };
    s.write_all(b"show stat\n")
        .expect("write to the stats socket");
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.lines()
        .filter(|l| l.starts_with("replicas,") && !l.starts_with("replicas,BACKEND"))
        .filter_map(|l| {
            let cols: Vec<&str> = l.split(',').collect();
            Some((
                cols.get(1)?.to_string(),
                cols.get(17)?.to_string(),
                cols.get(7)?.parse().ok()?,
            ))
        })
        .collect()
}

/// A real haproxy routes reads by `/replica?lag=100`: while one replica is
/// held back it is marked down and every read goes to the other; once it
/// catches up it takes reads again.
fn haproxy_routes_reads_away_from_a_lagging_replica(backend: Backend) {
    let cluster = Cluster::start(backend, 3);
    let p = cluster.wait_primary(Duration::from_secs(15));
    cluster.wait_replica_links(p);
    let replicas: Vec<usize> = (0..3).filter(|&i| i != p).collect();
    let (r, other) = (replicas[0], replicas[1]);
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = dir.path().join("haproxy.sock");
    let cfg = dir.path().join("haproxy.cfg");
    let reads = support::NodePorts::reserve();
    std::fs::write(
        &cfg,
        haproxy_config(&cluster, &replicas, &socket, reads.data),
    )
    .unwrap();
    let mut haproxy = std::process::Command::new("haproxy")
        .args(["-db", "-f"])
        .arg(&cfg)
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("start haproxy");
    let up = |id: &str| {
        haproxy_servers(&socket)
            .iter()
            .any(|(name, status, _)| name == id && status == "UP")
    };
    let (r_id, other_id) = (cluster.nodes[r].id.clone(), cluster.nodes[other].id.clone());
    let sessions = |id: &str| {
        haproxy_servers(&socket)
            .into_iter()
            .find(|(name, _, _)| name == id)
            .map_or(0, |(_, _, stot)| stot)
    };
    let read_through_haproxy = |n: usize| {
        for _ in 0..n {
            let mut c = support::redis_client(reads.data);
            let pong: String = redis::cmd("PING")
                .query(&mut c)
                .expect("a read through haproxy");
            assert_eq!(pong, "PONG");
        }
    };
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        wait_until(
            Duration::from_secs(10),
            || up(&r_id) && up(&other_id),
            "haproxy to see both replicas up",
        );
        read_through_haproxy(4);
        assert!(sessions(&r_id) >= 1, "round robin reached r");

        let rules = hold_back_replication(&cluster, p, r);
        wait_until(
            Duration::from_secs(10),
            || !up(&r_id) && up(&other_id),
            "haproxy to mark the lagging replica down",
        );
        let (r_before, other_before) = (sessions(&r_id), sessions(&other_id));
        read_through_haproxy(6);
        assert_eq!(
            sessions(&r_id),
            r_before,
            "a read went to the lagging replica"
        );
        assert_eq!(sessions(&other_id), other_before + 6);

        for rule in &rules {
            sh(&format!("iptables -D {rule}"));
        }
        wait_until(
            Duration::from_secs(15),
            || up(&r_id),
            "haproxy to take the caught-up replica back",
        );
    }));
    let _ = haproxy.kill();
    let _ = haproxy.wait();
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

#[test]
fn the_example_haproxy_config_is_valid() {
    support::require("haproxy");
    let cfg = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/haproxy.cfg");
    let out = std::process::Command::new("haproxy")
        .args(["-c", "-f"])
        .arg(&cfg)
        .output()
        .expect("haproxy -c");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn haproxy_routes_reads_away_from_a_lagging_replica_on_kevy() {
    support::require("kevy");
    support::require("haproxy");
    if inside_private_netns("haproxy_routes_reads_away_from_a_lagging_replica_on_kevy") {
        haproxy_routes_reads_away_from_a_lagging_replica(Backend::Kevy);
    }
}

#[test]
fn haproxy_routes_reads_away_from_a_lagging_replica_on_redis() {
    support::require("redis-server");
    support::require("haproxy");
    if inside_private_netns("haproxy_routes_reads_away_from_a_lagging_replica_on_redis") {
        haproxy_routes_reads_away_from_a_lagging_replica(Backend::Redis);
    }
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
