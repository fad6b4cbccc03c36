//! Failover time on loopback with real processes (ignored by default; run
//! `cargo test -p elector --release --test failover_bench -- --ignored --nocapture`).
//! Prints, per backend and timing set, the median and spread of
//! SIGKILL-of-the-primary to (a) the first SET accepted by the new primary and
//! (b) the first SET acknowledged by a replica (WAIT 1).

mod support;

use std::time::{Duration, Instant};
use support::{acked_write, Backend, Cluster, DEFAULT_TIMINGS, SHORT_TIMINGS};

fn one_run(backend: Backend, timings: (&str, u64)) -> (u64, u64) {
    let mut cluster = Cluster::start_with(backend, 3, timings);
    let old = cluster.wait_primary(Duration::from_secs(30));
    std::thread::sleep(Duration::from_millis(500));
    let t0 = Instant::now();
    cluster.kill_node(old);
    let others: Vec<usize> = (0..3).filter(|&i| i != old).collect();
    let mut first_set = None;
    let mut n = 0;
    while t0.elapsed() < Duration::from_secs(60) {
        for &i in &others {
            let client =
                redis::Client::open(format!("redis://127.0.0.1:{}/", cluster.nodes[i].data_port))
                    .unwrap();
            let Ok(mut c) = client.get_connection_with_timeout(Duration::from_millis(200)) else {
                continue;
            };
            let _ = c.set_read_timeout(Some(Duration::from_millis(1500)));
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

fn summary(name: &str, mut v: Vec<u64>) {
    v.sort_unstable();
    println!(
        "{name}: median {} ms, min {} ms, max {} ms, runs {:?}",
        v[v.len() / 2],
        v[0],
        v[v.len() - 1],
        v
    );
}

#[test]
#[ignore = "measurement, not a check: run explicitly"]
fn measure_failover_times() {
    let runs: usize = std::env::var("BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
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
