//! Failover time on loopback with real processes (ignored by default; run
//! `cargo test -p elector --release --test failover_bench -- --ignored --nocapture`).
//! Prints, per backend and timing set, the median and spread of
//! SIGKILL-of-the-primary to (a) the first SET accepted by the new primary and
//! (b) the first SET acknowledged by a replica (WAIT 1).
//!
//! `election_tls_against_plain_side_by_side` measures the cost of mutual
//! TLS on the election transport (`tls.election`) in one run: the electors'
//! CPU over a steady window, then durable failover, each with and without,
//! alternating (env `BENCH_RUNS`, default 5; `BENCH_CPU_SECS`, default 10).
//!
//! `sentinel_and_elector_failover_side_by_side` measures the elector and a
//! real Redis Sentinel deployment (3 redis-server + 3 redis-sentinel) the same
//! way in one run: SIGKILL of the primary to the first SET accepted by the
//! primary that `SENTINEL get-master-addr-by-name` names (env `BENCH_RUNS`,
//! default 5; `BENCH_DOWN_AFTER_MS`, default 1000).

mod support;

use std::time::{Duration, Instant};
use support::pki::{election_tls, Pki};
use support::sentinel_peer::{SentinelPeer, MASTER_NAME};
use support::{acked_write, try_connect, Backend, Cluster, DEFAULT_TIMINGS, SHORT_TIMINGS};

fn one_run(backend: Backend, timings: (&str, u64)) -> (u64, u64) {
    kill_and_time(&mut Cluster::start_with(backend, 3, timings))
}

/// SIGKILL of `cluster`'s primary to (a) the first SET a survivor accepts
/// and (b) the first one a replica acknowledges (WAIT 1), in ms.
fn kill_and_time(cluster: &mut Cluster) -> (u64, u64) {
    let old = cluster.wait_primary(Duration::from_secs(30));
    std::thread::sleep(Duration::from_millis(500));
    let t0 = Instant::now();
    cluster.kill_node(old);
    let others: Vec<usize> = (0..3).filter(|&i| i != old).collect();
    let mut first_set = None;
    let mut n = 0;
    while t0.elapsed() < Duration::from_secs(60) {
        for &i in &others {
            let port = cluster.nodes[i].data_port;
            let Some(mut c) = try_connect("127.0.0.1", port, Duration::from_millis(1500)) else {
                continue;
            };
            n += 1;
            let key = format!("probe:{n}");
            let set: redis::RedisResult<String> =
                redis::cmd("SET").arg(&key).arg("v").query(&mut c);
            if set.is_ok() && first_set.is_none() {
                first_set = Some(t0.elapsed().as_millis() as u64);
            }
            if set.is_ok() && acked_write(&mut c, &format!("{key}:acked")) {
                return (first_set.unwrap(), t0.elapsed().as_millis() as u64);
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    panic!("no failover within 60 s");
}

/// `(median, min, max)` of a non-empty sample; the upper middle value for an
/// even count.
fn spread(v: &[u64]) -> (u64, u64, u64) {
    let mut sorted = v.to_vec();
    sorted.sort_unstable();
    (
        sorted[sorted.len() / 2],
        sorted[0],
        sorted[sorted.len() - 1],
    )
}

fn summary(name: &str, v: Vec<u64>) {
    let (median, min, max) = spread(&v);
    println!("{name}: median {median} ms, min {min} ms, max {max} ms, runs {v:?}");
}

#[test]
#[ignore = "measurement, not a check: run explicitly"]
fn measure_failover_times() {
    let runs: usize = env_or("BENCH_RUNS", 5);
    for backend in [Backend::Kevy, Backend::Redis] {
        for (label, timings) in [
            ("short (down_after 600 ms)", SHORT_TIMINGS),
            ("default (down_after 5000 ms)", DEFAULT_TIMINGS),
        ] {
            let results: Vec<(u64, u64)> = (0..runs).map(|_| one_run(backend, timings)).collect();
            summary(
                &format!("{backend:?} {label} kill -> first SET"),
                results.iter().map(|r| r.0).collect(),
            );
            summary(
                &format!("{backend:?} {label} kill -> first SET+WAIT 1"),
                results.iter().map(|r| r.1).collect(),
            );
        }
    }
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// `SENTINEL get-master-addr-by-name mymaster` on the listener at `port`.
fn discover(port: u16) -> Option<(String, u16)> {
    let mut c = try_connect("127.0.0.1", port, Duration::from_millis(500))?;
    let addr: Option<Vec<String>> = redis::cmd("SENTINEL")
        .arg("get-master-addr-by-name")
        .arg(MASTER_NAME)
        .query(&mut c)
        .ok()?;
    let addr = addr?;
    Some((addr.first()?.clone(), addr.get(1)?.parse().ok()?))
}

fn set_ok(host: &str, port: u16, key: &str) -> bool {
    let Some(mut c) = try_connect(host, port, Duration::from_millis(500)) else {
        return false;
    };
    let set: redis::RedisResult<String> = redis::cmd("SET").arg(key).arg("v").query(&mut c);
    set.is_ok()
}

/// Every 10 ms, bounded to 30 s: asks each live discovery listener in turn
/// for the primary and SETs there; ms from `t0` to the first SET accepted.
fn kill_to_discovered_set(t0: Instant, discovery: &[u16]) -> Option<u64> {
    let mut n = 0u64;
    while t0.elapsed() < Duration::from_secs(30) {
        let mut tried: Vec<(String, u16)> = Vec::new();
        for &port in discovery {
            let Some(addr) = discover(port) else {
                continue;
            };
            if tried.contains(&addr) {
                continue;
            }
            n += 1;
            if set_ok(&addr.0, addr.1, &format!("side-by-side:{n}")) {
                return Some(t0.elapsed().as_millis() as u64);
            }
            tried.push(addr);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    None
}

/// Waits until every listener in `discovery` names `port` as the primary.
fn wait_discovery_names(discovery: &[u16], port: u16) {
    support::wait_until(
        Duration::from_secs(15),
        || {
            discovery
                .iter()
                .all(|&d| discover(d).is_some_and(|a| a.1 == port))
        },
        "every discovery listener to name the primary",
    );
}

fn elector_side_by_side_run(down_after_ms: u64) -> u64 {
    let yaml = format!(
        "{{ hb_interval_ms: 100, down_after_ms: {down_after_ms}, election_timeout_ms: 1000, \
         backoff_min_ms: 100, backoff_max_ms: 300, data_poll_ms: 50 }}"
    );
    let mut cluster = Cluster::start_with(Backend::Redis, 3, (&yaml, down_after_ms));
    let old = cluster.wait_primary(Duration::from_secs(30));
    cluster.wait_replica_links(old);
    let all: Vec<u16> = cluster.nodes.iter().map(|n| n.sentinel_port).collect();
    wait_discovery_names(&all, cluster.nodes[old].data_port);
    std::thread::sleep(Duration::from_millis(500));
    let t0 = Instant::now();
    cluster.kill_node(old);
    let live: Vec<u16> = (0..cluster.nodes.len())
        .filter(|&i| i != old)
        .map(|i| cluster.nodes[i].sentinel_port)
        .collect();
    kill_to_discovered_set(t0, &live)
        .expect("elector: no SET accepted by a discovered primary within 30 s")
}

fn sentinel_side_by_side_run(down_after_ms: u64) -> u64 {
    let mut peer = SentinelPeer::start(down_after_ms);
    wait_discovery_names(&peer.sentinel_ports, peer.redis_ports[0]);
    std::thread::sleep(Duration::from_millis(500));
    let t0 = Instant::now();
    peer.kill_redis(0);
    let sentinels = peer.sentinel_ports.clone();
    kill_to_discovered_set(t0, &sentinels)
        .expect("redis-sentinel: no SET accepted by a discovered primary within 30 s")
}

#[test]
#[ignore = "measurement, not a check: run explicitly"]
fn sentinel_and_elector_failover_side_by_side() {
    let runs: usize = env_or("BENCH_RUNS", 5).clamp(1, 50);
    let down_after_ms: u64 = env_or("BENCH_DOWN_AFTER_MS", 1000);
    let mut elector = Vec::with_capacity(runs);
    let mut sentinel = Vec::with_capacity(runs);
    // Interleaved, so that machine load falls on both alike.
    for r in 1..=runs {
        let e = elector_side_by_side_run(down_after_ms);
        eprintln!("run {r}/{runs}: elector {e} ms");
        elector.push(e);
        let s = sentinel_side_by_side_run(down_after_ms);
        eprintln!("run {r}/{runs}: redis-sentinel {s} ms");
        sentinel.push(s);
    }
    println!(
        "\nSIGKILL of the primary -> first SET accepted by the primary named by \
         SENTINEL get-master-addr-by-name (loopback, 3 nodes, fresh deployment per run, \
         poll every 10 ms)"
    );
    println!(
        "{:<16} {:>10} {:>5} {:>9} {:>9} {:>9}  raw (ms, in run order)",
        "system", "down_after", "runs", "median", "min", "max"
    );
    for (name, raw) in [("elector", &elector), ("redis-sentinel", &sentinel)] {
        let (median, min, max) = spread(raw);
        println!(
            "{:<16} {:>7} ms {:>5} {:>6} ms {:>6} ms {:>6} ms  {:?}",
            name,
            down_after_ms,
            raw.len(),
            median,
            min,
            max,
            raw
        );
    }
    println!(
        "ratio of medians elector / redis-sentinel: {:.2}",
        spread(&elector).0 as f64 / spread(&sentinel).0 as f64
    );
}

/// User plus system CPU time of process `pid` so far, in ms (`/proc`).
fn cpu_ms(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("the elector runs");
    // Fields after the command (in parentheses, which may hold spaces).
    let rest = &stat[stat.rfind(')').expect("stat") + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
    let hz = 100; // USER_HZ on Linux
    ticks * 1000 / hz
}

/// The three electors' CPU over `secs` of steady state (a primary, two
/// replicas, heartbeats every 50 ms), in ms, then a durable failover.
fn tls_or_plain_run(tls: Option<&Pki>, secs: u64) -> (u64, u64) {
    let mut cluster = match tls {
        Some(pki) => Cluster::start_with_node_extra(Backend::Redis, 3, SHORT_TIMINGS, &|id| {
            format!("tls:\n{}", election_tls(pki, id))
        }),
        None => Cluster::start_with(Backend::Redis, 3, SHORT_TIMINGS),
    };
    cluster.wait_primary(Duration::from_secs(30));
    std::thread::sleep(Duration::from_secs(1));
    let pids: Vec<u32> = cluster
        .nodes
        .iter()
        .map(|n| n.elector.as_ref().expect("running").id())
        .collect();
    let before: u64 = pids.iter().map(|p| cpu_ms(*p)).sum();
    std::thread::sleep(Duration::from_secs(secs));
    let cpu = pids.iter().map(|p| cpu_ms(*p)).sum::<u64>() - before;
    (cpu, kill_and_time(&mut cluster).1)
}

#[test]
#[ignore = "measurement, not a check: run explicitly"]
fn election_tls_against_plain_side_by_side() {
    support::require("redis-server");
    let runs: usize = env_or("BENCH_RUNS", 5);
    let secs: u64 = env_or("BENCH_CPU_SECS", 10);
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path());
    for id in ["n1", "n2", "n3"] {
        pki.issue(id, &[id], id);
    }
    let (mut plain, mut tls) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        plain.push(tls_or_plain_run(None, secs));
        tls.push(tls_or_plain_run(Some(&pki), secs));
    }
    for (name, v) in [("plain", &plain), ("tls.election", &tls)] {
        summary(
            &format!("{name}: 3 electors' CPU over {secs} s steady"),
            v.iter().map(|r| r.0).collect(),
        );
        summary(
            &format!("{name}: kill -> first SET+WAIT 1"),
            v.iter().map(|r| r.1).collect(),
        );
    }
}
