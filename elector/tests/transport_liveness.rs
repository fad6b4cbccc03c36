//! Transport liveness and listener hardening with real processes on
//! loopback (docs/protocol.md §3.2, §3.3): three electors over
//! redis-server, each under `ulimit -n 1024`, short timings (hb 50 ms,
//! down_after 600 ms, so the liveness bound is 500 ms and the HELLO
//! deadline 500 ms).
//!
//! A true partition (packets silently dropped by iptables) needs root: that
//! test re-runs itself in a private network namespace and is skipped where
//! it cannot. Freezing an elector with SIGSTOP exercises the same reconnect
//! path without privileges: its peers stop hearing it, find their
//! connections to it dead and redial.

mod support;

use serde_json::Value;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::netns::{inside_private_netns, sh};
use support::{Backend, Cluster, SHORT_TIMINGS};

fn status(api_port: u16) -> Option<Value> {
    ureq::get(&format!("http://127.0.0.1:{api_port}/status"))
        .timeout(Duration::from_millis(500))
        .call()
        .ok()?
        .into_json()
        .ok()
}

/// `(role, epoch, primary)` of a node, or a string saying why not.
fn summary(s: &Value) -> String {
    format!(
        "{} epoch {} primary {}",
        s["role"], s["epoch"], s["primary"]
    )
}

/// Whether `peer` is alive and heard within `fresh_ms` in `s`.
fn hears(s: &Value, peer: &str, fresh_ms: u64) -> bool {
    s["peers"].as_array().is_some_and(|peers| {
        peers.iter().any(|p| {
            p["id"] == peer
                && p["alive"] == true
                && p["last_seen_ms"].as_u64().is_some_and(|ms| ms <= fresh_ms)
        })
    })
}

/// Whether the server closed `s` (EOF or reset), without blocking.
fn closed_by_server(s: &TcpStream) -> bool {
    s.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 64];
    let mut reader = s;
    loop {
        match reader.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return false,
            Err(_) => return true,
        }
    }
}

/// A connection to `target` from source address 127.0.0.(1 + k): Linux
/// answers for all of 127/8, so one machine can be many sources.
fn connect_from(k: usize, target: SocketAddr) -> std::io::Result<TcpStream> {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::IPV4, Type::STREAM, None)?;
    let source: SocketAddr = format!("127.0.0.{}:0", 1 + k).parse().unwrap();
    socket.bind(&source.into())?;
    socket.connect_timeout(&target.into(), Duration::from_secs(1))?;
    Ok(socket.into())
}

/// §3.3: 2000 connections (override with `FLOOD=n`) from ten source
/// addresses (the total cap is hit; the slow writers, from one address,
/// hit the per-source cap) that each send half a
/// HELLO and stay open, plus slow writers trickling a HELLO a byte at a
/// time, against the primary's election port: no node changes role, epoch
/// or primary, every node keeps hearing every other, and every pending
/// connection is closed by the handshake deadline or a cap.
#[test]
fn a_flood_of_half_hellos_and_slow_writers_against_the_primary_moves_nothing_3_3() {
    let cluster = Cluster::start_limited(Backend::Redis, 3, SHORT_TIMINGS, Some(1024));
    let p = cluster.wait_primary(Duration::from_secs(15));
    cluster.wait_replica_links(p);
    std::thread::sleep(Duration::from_secs(1));
    let ports: Vec<u16> = cluster.nodes.iter().map(|n| n.api_port).collect();
    let ids: Vec<String> = cluster.nodes.iter().map(|n| n.id.clone()).collect();
    let before: Vec<String> = ports
        .iter()
        .map(|&port| summary(&status(port).expect("status")))
        .collect();

    let stop = Arc::new(AtomicBool::new(false));
    let changes = Arc::new(Mutex::new(Vec::<String>::new()));
    let watcher = {
        let (stop, changes, before, ports, ids) = (
            Arc::clone(&stop),
            Arc::clone(&changes),
            before.clone(),
            ports.clone(),
            ids.clone(),
        );
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                for (i, &port) in ports.iter().enumerate() {
                    let Some(s) = status(port) else {
                        changes
                            .lock()
                            .unwrap()
                            .push(format!("{} did not answer", ids[i]));
                        continue;
                    };
                    if summary(&s) != before[i] {
                        changes.lock().unwrap().push(format!(
                            "{}: {} -> {}",
                            ids[i],
                            before[i],
                            summary(&s)
                        ));
                    }
                    for peer in ids.iter().filter(|id| **id != ids[i]) {
                        if !hears(&s, peer, 600) {
                            changes
                                .lock()
                                .unwrap()
                                .push(format!("{} lost {peer}", ids[i]));
                        }
                    }
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };

    let target: SocketAddr = format!("127.0.0.1:{}", cluster.nodes[p].election_port)
        .parse()
        .unwrap();
    let slow_stop = Arc::new(AtomicBool::new(false));
    // The slow writers (20 from one address: beyond the per-source cap of
    // 8) connect before the flood, so they meet that cap and not the total
    // one, whatever the machine's load.
    let (connected_tx, connected_rx) = std::sync::mpsc::channel();
    let slow = {
        let slow_stop = Arc::clone(&slow_stop);
        std::thread::spawn(move || {
            let hello = b"*2\r\n$5\r\nHELLO\r\n$2\r\nn2\r\n";
            let mut writers: Vec<TcpStream> = (0..20)
                .filter_map(|_| TcpStream::connect_timeout(&target, Duration::from_secs(1)).ok())
                .collect();
            let _ = connected_tx.send(());
            let mut sent = 0;
            while !slow_stop.load(Ordering::Relaxed) && sent < hello.len() - 1 {
                for w in &mut writers {
                    let _ = w.write_all(&hello[sent..sent + 1]);
                }
                sent += 1;
                std::thread::sleep(Duration::from_millis(100));
            }
            writers
        })
    };

    connected_rx
        .recv_timeout(Duration::from_secs(25))
        .expect("the slow writers connect");
    let flood: usize = std::env::var("FLOOD")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let started = Instant::now();
    let mut held = Vec::with_capacity(flood);
    let mut connect_failed = 0;
    for k in 0..flood {
        match connect_from(k % 10, target) {
            Ok(mut s) => {
                let _ = s.write_all(b"*2\r\n$5\r\nHEL");
                held.push(s);
            }
            Err(_) => connect_failed += 1,
        }
    }
    let flood_took = started.elapsed();
    // The HELLO deadline is 500 ms; leave room for a loaded machine.
    std::thread::sleep(Duration::from_millis(1500));
    let still_open = held.iter().filter(|s| !closed_by_server(s)).count();
    slow_stop.store(true, Ordering::Relaxed);
    let writers = slow.join().unwrap();
    let slow_open = writers.iter().filter(|s| !closed_by_server(s)).count();
    std::thread::sleep(Duration::from_secs(1));
    stop.store(true, Ordering::Relaxed);
    watcher.join().unwrap();

    let by_reason = |r: &str| cluster.connections_closed(p, r);
    let (caps, per_source, handshake) = (
        by_reason("pending_cap"),
        by_reason("per_source_cap"),
        by_reason("handshake_timeout"),
    );
    eprintln!(
        "flood: {} connections opened in {flood_took:?} ({connect_failed} connects failed); \
         closed by the target: per_source_cap {per_source}, pending_cap {caps}, \
         handshake_timeout {handshake}; still open after 1.5 s: {still_open} flood, {slow_open} slow",
        held.len()
    );
    let changes = changes.lock().unwrap();
    assert!(
        changes.is_empty(),
        "the flood moved the cluster: {changes:?}"
    );
    assert_eq!(
        still_open, 0,
        "pending connections outlived the HELLO deadline"
    );
    assert_eq!(slow_open, 0, "slow writers outlived the HELLO deadline");
    assert!(
        per_source + caps + handshake >= held.len() as u64,
        "not every flood connection was counted as closed"
    );
    assert!(per_source > 0 && caps > 0, "both caps should have been hit");
    assert_eq!(cluster.writable_primary(), Some(p));
}

/// §3.2: an elector frozen (SIGSTOP) for longer than down_after is heard
/// again by the primary, and hears it, within 2 s of SIGCONT (measured and
/// printed; the path is redialled, not left to TCP's retransmission timer).
#[test]
fn a_peer_frozen_past_the_liveness_bound_is_heard_again_within_two_seconds_of_sigcont_3_2() {
    let cluster = Cluster::start_limited(Backend::Redis, 3, SHORT_TIMINGS, Some(1024));
    let p = cluster.wait_primary(Duration::from_secs(15));
    cluster.wait_replica_links(p);
    let r = (p + 1) % 3;
    let (pid, rid) = (cluster.nodes[p].id.clone(), cluster.nodes[r].id.clone());
    let (papi, rapi) = (cluster.nodes[p].api_port, cluster.nodes[r].api_port);
    std::thread::sleep(Duration::from_millis(500));

    cluster.signal_elector(r, "STOP");
    std::thread::sleep(Duration::from_millis(3000));
    let lost = status(papi).is_some_and(|s| !hears(&s, &rid, 600));
    cluster.signal_elector(r, "CONT");
    let resumed = Instant::now();
    let mut primary_hears = None;
    let mut replica_hears = None;
    while resumed.elapsed() < Duration::from_secs(10)
        && (primary_hears.is_none() || replica_hears.is_none())
    {
        if primary_hears.is_none() && status(papi).is_some_and(|s| hears(&s, &rid, 100)) {
            primary_hears = Some(resumed.elapsed());
        }
        if replica_hears.is_none() && status(rapi).is_some_and(|s| hears(&s, &pid, 100)) {
            replica_hears = Some(resumed.elapsed());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let closed =
        cluster.connections_closed(p, "peer_silent") + cluster.connections_closed(p, "idle");
    eprintln!(
        "after SIGCONT of {rid}: {pid} hears it after {primary_hears:?}, it hears {pid} after \
         {replica_hears:?}; {pid} closed {closed} connections as idle/peer_silent"
    );
    assert!(lost, "{pid} still heard {rid} while it was frozen");
    let within = Duration::from_secs(2);
    assert!(
        primary_hears.is_some_and(|d| d < within),
        "{pid} did not hear {rid} again in time"
    );
    assert!(
        replica_hears.is_some_and(|d| d < within),
        "{rid} did not hear {pid} again in time"
    );
    assert!(closed >= 1, "no dead connection was closed");
}

const PARTITION_TEST: &str = "a_partition_of_every_election_port_heals_within_two_seconds_3_2";

/// §3.2, a true partition: every election port's packets are dropped
/// (iptables) for 8 s, far longer than down_after, so the connections established
/// before the cut survive it in TCP's eyes; after the heal every node hears
/// every other again within 2 s (measured and printed; with the liveness
/// rules disabled it took 5.1 s here, and 13–47 s in the lab). iptables must not touch the host's own rules, so the test
/// re-runs itself in a private network namespace (`unshare -n`, which
/// needs root); where that is not allowed it says so and passes.
#[test]
fn a_partition_of_every_election_port_heals_within_two_seconds_3_2() {
    if !inside_private_netns(PARTITION_TEST) {
        return;
    }
    let cluster = Cluster::start_limited(Backend::Redis, 3, SHORT_TIMINGS, Some(1024));
    let p = cluster.wait_primary(Duration::from_secs(15));
    cluster.wait_replica_links(p);
    std::thread::sleep(Duration::from_millis(500));
    let ids: Vec<String> = cluster.nodes.iter().map(|n| n.id.clone()).collect();
    let all_hear = |fresh_ms: u64| {
        (0..3).all(|i| {
            status(cluster.nodes[i].api_port).is_some_and(|s| {
                ids.iter()
                    .filter(|id| **id != ids[i])
                    .all(|peer| hears(&s, peer, fresh_ms))
            })
        })
    };
    assert!(all_hear(300), "the cluster is not whole before the cut");

    for n in &cluster.nodes {
        let e = n.election_port;
        sh(&format!(
            "iptables -A INPUT -p tcp --dport {e} -j DROP && iptables -A INPUT -p tcp --sport {e} -j DROP"
        ));
    }
    // Long enough for TCP's retransmission timer (200 ms doubling on
    // loopback) to back off to several seconds.
    std::thread::sleep(Duration::from_millis(8000));
    let lost = (0..3).all(|i| {
        status(cluster.nodes[i].api_port).is_some_and(|s| {
            ids.iter()
                .filter(|id| **id != ids[i])
                .all(|peer| !hears(&s, peer, 600))
        })
    });
    sh("iptables -F INPUT");
    let healed = Instant::now();
    let mut whole = None;
    while healed.elapsed() < Duration::from_secs(30) {
        if all_hear(100) {
            whole = Some(healed.elapsed());
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let closed: Vec<String> = ["peer_silent", "idle"]
        .iter()
        .map(|r| format!("{r} {}", cluster.connections_closed(p, r)))
        .collect();
    eprintln!(
        "partition of 8 s healed: every node hears every other after {whole:?}; \
         the primary {} closed connections: {}",
        ids[p],
        closed.join(", ")
    );
    assert!(lost, "some node still heard a peer through the partition");
    assert!(
        whole.is_some_and(|d| d < Duration::from_secs(2)),
        "the cluster was not whole again within 2 s of the heal"
    );
}
