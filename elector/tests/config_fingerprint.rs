//! A peer whose HELLO carries another configuration fingerprint (members,
//! lease timings) is refused and counted (docs/protocol.md §3.7). Real
//! sockets on loopback against the real transport.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use elector::api::metrics::Metrics;
use elector::core::Timings;
use elector::net::auth::{AuthConfig, Authenticator};
use elector::net::codec;
use elector::net::fingerprint::Fingerprint;
use elector::net::transport::{self, Inbound};
use elector::protocol::{Heartbeat, Message, Role};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

const MEMBERS: [&str; 3] = ["n1", "n2", "n3"];

fn timings(down_after_ms: u64) -> Timings {
    Timings {
        down_after_ms,
        ..Timings::default()
    }
}

/// n1's transport; returns its address, metrics and inbound queue.
async fn start_n1() -> (String, Arc<Metrics>, mpsc::Receiver<Inbound>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let auth = Authenticator::new(&AuthConfig::default(), "n1", 1).unwrap();
    let metrics = Arc::new(Metrics::new());
    let (tx, rx) = mpsc::channel(16);
    // Peers' election addresses where nothing listens: n1 only receives here.
    let peers = vec![
        ("n2".to_string(), "127.0.0.1:9".to_string()),
        ("n3".to_string(), "127.0.0.1:9".to_string()),
    ];
    let _sender = transport::start(
        transport::LocalIdentity {
            node_id: "n1".into(),
            fingerprint: Fingerprint::new(MEMBERS, &timings(3000)),
        },
        listener,
        peers,
        Arc::new(Mutex::new(auth)),
        Arc::clone(&metrics),
        transport::LinkTimings::from_timings(200, 3000),
        tx,
    );
    (addr, metrics, rx)
}

fn frame(msg: &Message) -> Vec<u8> {
    codec::encode_owned(&msg.to_fields())
}

fn heartbeat_from_n2() -> Message {
    Message::Hb(Heartbeat {
        epoch: 1,
        node_id: "n2".into(),
        role: Role::Replica,
        offset: 0,
        max_epoch: 1,
        primary: None,
        eligible: true,
        fenced: false,
        lease_lost: false,
        data_epoch: 0,
        stamp: 1,
        echo: 0,
        priority: 100,
        floor: None,
        unled: false,
    })
}

/// Sends HELLO (with `fingerprint`) and one HB as n2; returns whether n1
/// passed the HB on, and whether n1 closed the connection.
async fn hello_then_heartbeat(fingerprint: Option<String>) -> (bool, bool, Arc<Metrics>) {
    let (addr, metrics, mut rx) = start_n1().await;
    let mut s = TcpStream::connect(&addr).await.unwrap();
    let hello = Message::Hello {
        node_id: "n2".into(),
        fingerprint,
    };
    s.write_all(&frame(&hello)).await.unwrap();
    s.write_all(&frame(&heartbeat_from_n2())).await.unwrap();
    let delivered = tokio::time::timeout(Duration::from_millis(500), rx.recv())
        .await
        .ok()
        .flatten()
        .is_some();
    let mut buf = [0u8; 16];
    let closed = matches!(
        tokio::time::timeout(Duration::from_millis(500), s.read(&mut buf)).await,
        Ok(Ok(0)) | Ok(Err(_))
    );
    (delivered, closed, metrics)
}

#[tokio::test]
async fn a_peer_with_the_same_members_and_timings_is_let_in() {
    let same = Fingerprint::new(["n3", "n2", "n1"], &timings(3000));
    let (delivered, closed, metrics) = hello_then_heartbeat(Some(same.to_string())).await;
    assert!(delivered && !closed);
    assert_eq!(metrics.rejected_counts().get("config_mismatch"), Some(&0));
}

#[tokio::test]
async fn a_peer_with_another_down_after_is_refused_and_counted() {
    let other = Fingerprint::new(MEMBERS, &timings(5000));
    let (delivered, closed, metrics) = hello_then_heartbeat(Some(other.to_string())).await;
    assert!(
        !delivered,
        "a heartbeat from a mismatched peer reached the core"
    );
    assert!(closed, "the connection stayed open");
    assert_eq!(metrics.rejected_counts().get("config_mismatch"), Some(&1));
}

#[tokio::test]
async fn a_peer_with_another_member_list_is_refused() {
    let other = Fingerprint::new(["n1", "n2", "n3", "n4", "n5"], &timings(3000));
    let (delivered, closed, metrics) = hello_then_heartbeat(Some(other.to_string())).await;
    assert!(!delivered && closed);
    assert_eq!(metrics.rejected_counts().get("config_mismatch"), Some(&1));
}

#[tokio::test]
async fn a_malformed_fingerprint_is_refused() {
    let (delivered, closed, metrics) = hello_then_heartbeat(Some("m00/1/2/3".into())).await;
    assert!(!delivered && closed);
    assert_eq!(metrics.rejected_counts().get("config_mismatch"), Some(&1));
}

#[tokio::test]
async fn an_elector_from_before_the_fingerprint_is_let_in_for_rolling_upgrades() {
    let (delivered, closed, _) = hello_then_heartbeat(None).await;
    assert!(delivered && !closed);
}
