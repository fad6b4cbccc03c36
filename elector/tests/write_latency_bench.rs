//! Durable write latency on loopback with real processes (ignored by default:
//! `just bench-writes`, or `cargo test -p elector --release --test
//! write_latency_bench -- --ignored --nocapture`). docs/benchmarks.md
//! §"Durable write latency" quotes what it prints.
//!
//! A 3-node cluster (kevy 7.0.0 or redis-server, one elector each, the
//! default timings: `data_poll_ms` 100) and `clients` writers on the
//! primary, each looping `SET` then `WAIT quorum-1 1000` (`WAIT 1`) for
//! `BENCH_WRITE_SECS` seconds (default 10). Printed per backend and client
//! count: p50 and p99 of the round trip, acknowledged writes per second, and
//! writes `WAIT` did not see acknowledged. `BENCH_WRITE_EXTRA` adds
//! `data_node` settings (e.g. `ack_nudge: false` for the control).

mod support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::{Backend, Cluster, DEFAULT_TIMINGS};

/// What one writer measured.
#[derive(Default)]
struct Tally {
    /// Round trip of every acknowledged `SET` + `WAIT`, in microseconds.
    acked_us: Vec<u64>,
    not_acked: u64,
}

/// One writer: `SET` + `WAIT 1 1000` in a loop until `until`.
fn writer(port: u16, id: usize, until: Instant, tally: Arc<Mutex<Tally>>) {
    let mut c = support::redis_client(port);
    let mut mine = Tally::default();
    let mut n = 0u64;
    while Instant::now() < until {
        n += 1;
        let t = Instant::now();
        let _: () = redis::cmd("SET")
            .arg(format!("lat:{id}:{n}"))
            .arg(n)
            .query(&mut c)
            .expect("the primary takes writes");
        let acks: i64 = redis::cmd("WAIT")
            .arg(1)
            .arg(1000)
            .query(&mut c)
            .expect("WAIT answers");
        if acks >= 1 {
            mine.acked_us.push(t.elapsed().as_micros() as u64);
        } else {
            mine.not_acked += 1;
        }
    }
    let mut all = tally.lock().unwrap();
    all.acked_us.extend(mine.acked_us);
    all.not_acked += mine.not_acked;
}

/// The value at quantile `q` of a sorted, non-empty sample (nearest rank).
fn quantile(sorted: &[u64], q: f64) -> u64 {
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn measure(backend: Backend, clients: usize, secs: u64, extra: &str) {
    let cluster = Cluster::start_configured(backend, 3, DEFAULT_TIMINGS, extra);
    let p = cluster.wait_primary(Duration::from_secs(30));
    cluster.wait_replica_links(p);
    // Let the replicas' first snapshot and the election settle.
    std::thread::sleep(Duration::from_secs(2));
    let port = cluster.nodes[p].data_port;
    let tally = Arc::new(Mutex::new(Tally::default()));
    let until = Instant::now() + Duration::from_secs(secs);
    let started = Instant::now();
    let threads: Vec<_> = (0..clients)
        .map(|id| {
            let tally = tally.clone();
            std::thread::spawn(move || writer(port, id, until, tally))
        })
        .collect();
    for t in threads {
        t.join().expect("writer");
    }
    let elapsed = started.elapsed().as_secs_f64();
    let nudges = cluster.metric(p, "elector_ack_nudges_total");
    let mut all = std::mem::take(&mut *tally.lock().unwrap());
    all.acked_us.sort_unstable();
    let ms = |us: u64| us as f64 / 1000.0;
    if all.acked_us.is_empty() {
        println!("{backend:?} clients={clients}: no write acknowledged");
        return;
    }
    println!(
        "{backend:?} clients={clients} secs={secs}{extra}: p50 {:.1} ms, p99 {:.1} ms, \
         {:.1} acknowledged writes/s, {} not acknowledged, {nudges} nudges",
        ms(quantile(&all.acked_us, 0.5)),
        ms(quantile(&all.acked_us, 0.99)),
        all.acked_us.len() as f64 / elapsed,
        all.not_acked,
        extra = if extra.is_empty() {
            String::new()
        } else {
            format!(" [{extra}]")
        },
    );
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
#[ignore = "measurement, not a check: run explicitly"]
fn measure_durable_write_latency() {
    let secs: u64 = env_or("BENCH_WRITE_SECS", 10);
    let extra: String = env_or("BENCH_WRITE_EXTRA", String::new());
    let backends: String = env_or("BENCH_WRITE_BACKENDS", "kevy,redis".to_string());
    for backend in [Backend::Kevy, Backend::Redis] {
        let name = format!("{backend:?}").to_lowercase();
        if !backends.split(',').any(|b| b == name) {
            continue;
        }
        support::require(if backend == Backend::Kevy {
            "kevy"
        } else {
            "redis-server"
        });
        for clients in [1, 16] {
            measure(backend, clients, secs, &extra);
        }
    }
}

#[test]
fn the_quantile_is_the_nearest_rank() {
    let v: Vec<u64> = (1..=100).collect();
    assert_eq!(quantile(&v, 0.5), 50);
    assert_eq!(quantile(&v, 0.99), 99);
    assert_eq!(quantile(&[7], 0.99), 7);
}
