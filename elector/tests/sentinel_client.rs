//! An unmodified Sentinel-aware client against a real cluster: the `redis`
//! crate's `SentinelClient` is given the electors' Sentinel-compatible
//! listeners (docs/interfaces.md, "Sentinel-compatible discovery"), writes
//! through whatever primary they name, and keeps writing across a SIGKILL of
//! that primary. Real redis-server data nodes and `elector` processes on
//! loopback; no stub anywhere.

mod support;

use redis::sentinel::{SentinelClient, SentinelServerType};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use support::{write_acked, Backend, Cluster};

/// Subscribes to `+switch-master` on one elector's listener and forwards
/// every payload (`name old_ip old_port new_ip new_port`).
fn watch_switch_master(port: u16, tx: mpsc::Sender<String>) {
    std::thread::spawn(move || {
        let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
        let Ok(mut conn) = client.get_connection() else {
            return;
        };
        let mut pubsub = conn.as_pubsub();
        if pubsub.subscribe("+switch-master").is_err() {
            return;
        }
        while let Ok(msg) = pubsub.get_message() {
            if let Ok(payload) = msg.get_payload::<String>() {
                if tx.send(payload).is_err() {
                    return;
                }
            }
        }
    });
}

#[test]
fn a_sentinel_client_keeps_writing_across_a_primary_kill_and_loses_no_acknowledged_write() {
    let mut cluster = Cluster::start(Backend::Redis, 3);
    let old = cluster.wait_primary(Duration::from_secs(15));
    cluster.wait_replica_links(old);
    let (tx, switches) = mpsc::channel();
    for node in &cluster.nodes {
        watch_switch_master(node.sentinel_port, tx.clone());
    }
    let sentinels: Vec<String> = cluster
        .nodes
        .iter()
        .map(|n| format!("redis://127.0.0.1:{}/", n.sentinel_port))
        .collect();
    let mut client = SentinelClient::build(
        sentinels,
        "mymaster".to_string(),
        None,
        SentinelServerType::Master,
    )
    .expect("a SentinelClient over the electors' listeners");

    let mut acked = Vec::new();
    let mut conn: Option<redis::Connection> = None;
    let mut killed_at: Option<Instant> = None;
    let mut first_ack_after_kill: Option<Duration> = None;
    let mut acked_after_kill = 0;
    let deadline = Instant::now() + Duration::from_secs(30);
    // Bounded in count and time: stop 50 acknowledged writes after the kill.
    for k in 0..20_000 {
        assert!(
            Instant::now() < deadline,
            "the client did not get 50 writes acknowledged after the kill within 30 s \
             ({} acknowledged in all)",
            acked.len()
        );
        if conn.is_none() {
            conn = client.get_connection().ok().inspect(|c| {
                c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            });
            if conn.is_none() {
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
        }
        let key = format!("sentinel-client:{k}");
        match write_acked(conn.as_mut().unwrap(), &key) {
            None => conn = None,
            Some(false) => {
                conn = None; // an unwritable node: ask the sentinels again
                std::thread::sleep(Duration::from_millis(20));
            }
            Some(true) => {
                acked.push(key);
                if let Some(at) = killed_at {
                    first_ack_after_kill.get_or_insert(at.elapsed());
                    acked_after_kill += 1;
                    if acked_after_kill == 50 {
                        break;
                    }
                }
            }
        }
        if killed_at.is_none() && acked.len() == 50 {
            cluster.kill_node(old);
            killed_at = Some(Instant::now());
        }
    }
    assert_eq!(acked_after_kill, 50);

    let new = cluster.wait_primary(Duration::from_secs(5));
    assert_ne!(new, old, "the killed node cannot be primary");
    // What the client writes to now is the new primary's data node.
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query(conn.as_mut().unwrap())
        .unwrap();
    assert!(
        info.contains(&format!("tcp_port:{}", cluster.nodes[new].data_port)),
        "the Sentinel client is not connected to the new primary"
    );
    let mut check = cluster.client(new);
    for key in &acked {
        let v: Option<String> = redis::cmd("GET").arg(key).query(&mut check).unwrap();
        assert!(v.is_some(), "acknowledged write {key} lost in the failover");
    }
    // Subscribers heard the switch with the old and the new address.
    let expected = format!(
        "mymaster 127.0.0.1 {} 127.0.0.1 {}",
        cluster.nodes[old].data_port, cluster.nodes[new].data_port
    );
    let mut heard: Vec<String> = Vec::new();
    let listen_until = Instant::now() + Duration::from_secs(3);
    while !heard.contains(&expected) && Instant::now() < listen_until {
        if let Ok(payload) = switches.recv_timeout(Duration::from_millis(100)) {
            heard.push(payload);
        }
    }
    assert!(
        heard.contains(&expected),
        "no +switch-master {expected:?} published; heard {heard:?}"
    );
    eprintln!(
        "sentinel client: {} acknowledged writes, none lost; kill -> first acknowledged \
         write through the Sentinel client {} ms",
        acked.len(),
        first_ack_after_kill.unwrap().as_millis()
    );
}
