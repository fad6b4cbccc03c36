//! Liveness and listener hardening (docs/protocol.md §3.2, §3.3) on real
//! loopback sockets: real time, because the kernel's sockets are involved.

use super::listener::{accept_loop, Admission};
use super::*;
use crate::net::auth::{unix_ms_now, AuthConfig, AuthMode, Authenticator, Secret};
use crate::net::fingerprint::Fingerprint;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn quick() -> LinkTimings {
    LinkTimings {
        liveness: Duration::from_millis(300),
        handshake: Duration::from_millis(200),
        write_deadline: Duration::from_millis(300),
        connect_timeout: Duration::from_millis(100),
        redial_max: Duration::from_millis(50),
        pending_total: 64,
        pending_per_source: 8,
    }
}

fn shared(timings: LinkTimings) -> Arc<Shared> {
    shared_as("n1", &["n2", "n3"], &AuthConfig::default(), timings)
}

fn shared_as(me: &str, known: &[&str], auth: &AuthConfig, timings: LinkTimings) -> Arc<Shared> {
    let auth = Authenticator::new(auth, me, unix_ms_now()).unwrap();
    let mut members: Vec<&str> = known.to_vec();
    members.push(me);
    Arc::new(Shared::new(
        me.into(),
        Fingerprint::new(members, &crate::core::Timings::default()),
        known.iter().map(|k| k.to_string()).collect(),
        Arc::new(Mutex::new(auth)),
        Arc::new(Metrics::new()),
        timings,
    ))
}

/// Starts an acceptor for `shared` on an ephemeral loopback port.
async fn listen(shared: &Arc<Shared>) -> (SocketAddr, mpsc::Receiver<Inbound>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = mpsc::channel(64);
    tokio::spawn(accept_loop(listener, Arc::clone(shared), tx));
    (addr, rx)
}

/// A listener standing in for peer `n2`, which `shared`'s dialer connects to.
async fn dialed_peer(shared: &Arc<Shared>) -> TcpListener {
    let peer = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = peer.local_addr().unwrap().to_string();
    let outbox = Arc::new(Outbox::default());
    tokio::spawn(super::dialer::dial_loop(
        Arc::clone(shared),
        "n2".into(),
        addr,
        outbox,
    ));
    peer
}

/// A listener with `timings` and one connection to it.
async fn connected(timings: LinkTimings) -> (Arc<Shared>, TcpStream, mpsc::Receiver<Inbound>) {
    let shared = shared(timings);
    let (addr, rx) = listen(&shared).await;
    let stream = TcpStream::connect(addr).await.unwrap();
    (shared, stream, rx)
}

fn hello(id: &str) -> Vec<u8> {
    let msg = Message::Hello {
        node_id: id.into(),
        fingerprint: None,
    };
    codec::encode_owned(&msg.to_fields())
}

/// How long until the other side closes `stream` (reads and discards).
async fn time_to_close(stream: &mut TcpStream, within: Duration) -> Option<Duration> {
    let start = Instant::now();
    let mut buf = [0u8; 256];
    loop {
        match tokio::time::timeout_at(start + within, stream.read(&mut buf)).await {
            Err(_) => return None,
            Ok(Ok(0)) | Ok(Err(_)) => return Some(start.elapsed()),
            Ok(Ok(_)) => {}
        }
    }
}

/// Asserts that the other side closes `stream` between `lo_ms` and `hi_ms`
/// from now, and says when.
async fn closed_between(stream: &mut TcpStream, lo_ms: u64, hi_ms: u64) -> Duration {
    let took = time_to_close(stream, Duration::from_millis(3 * hi_ms))
        .await
        .expect("closed");
    assert!(
        took >= Duration::from_millis(lo_ms) && took < Duration::from_millis(hi_ms),
        "closed after {took:?}"
    );
    took
}

fn closed(shared: &Shared, reason: &'static str) -> u64 {
    shared.metrics.closed_count(reason)
}

#[test]
fn the_liveness_bound_is_four_heartbeats_at_least_half_a_second_and_at_most_down_after_3_2() {
    let lab = LinkTimings::from_timings(200, 3000);
    assert_eq!(lab.liveness, Duration::from_millis(800));
    assert_eq!(lab.handshake, Duration::from_millis(800));
    assert_eq!(lab.connect_timeout, Duration::from_millis(400));
    assert_eq!(lab.redial_max, Duration::from_millis(200));
    let tests = LinkTimings::from_timings(50, 600);
    assert_eq!(tests.liveness, Duration::from_millis(500));
    let slow = LinkTimings::from_timings(1000, 3000);
    assert_eq!(slow.liveness, Duration::from_millis(3000));
    assert_eq!(slow.handshake, Duration::from_secs(2));
    let tight = LinkTimings::from_timings(100, 400);
    assert_eq!(tight.liveness, Duration::from_millis(400));
}

#[test]
fn pending_connections_are_capped_in_total_and_per_source_and_a_ticket_frees_its_slot_3_3() {
    let admission = Admission::new(3, 2);
    let a = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
    let b = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
    let a1 = admission.admit(a).unwrap();
    let _a2 = admission.admit(a).unwrap();
    assert_eq!(admission.admit(a).err(), Some(Close::PerSourceCap));
    // The same source seen through a dual-stack socket counts as itself.
    assert_eq!(
        admission
            .admit(IpAddr::V6(Ipv4Addr::new(10, 0, 0, 1).to_ipv6_mapped()))
            .err(),
        Some(Close::PerSourceCap)
    );
    let _b1 = admission.admit(b).unwrap();
    assert_eq!(admission.admit(b).err(), Some(Close::PendingCap));
    drop(a1);
    assert_eq!(admission.pending(), 2);
    assert!(admission.admit(b).is_ok());
}

#[tokio::test]
async fn a_connection_that_sends_half_a_hello_is_closed_at_the_handshake_deadline_3_3() {
    let (shared, mut s, _rx) = connected(quick()).await;
    let frame = hello("n2");
    s.write_all(&frame[..frame.len() / 2]).await.unwrap();
    closed_between(&mut s, 150, 1000).await;
    assert_eq!(closed(&shared, "handshake_timeout"), 1);
}

#[tokio::test]
async fn a_trickle_of_bytes_does_not_stretch_the_handshake_deadline_3_3() {
    let (shared, mut s, _rx) = connected(quick()).await;
    let frame = hello("n2");
    let start = Instant::now();
    for byte in &frame[..frame.len() - 1] {
        if s.write_all(&[*byte]).await.is_err() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(40)).await;
        if start.elapsed() > Duration::from_millis(600) {
            break;
        }
    }
    let took = start.elapsed()
        + time_to_close(&mut s, Duration::from_secs(3))
            .await
            .expect("closed");
    assert!(took < Duration::from_millis(1000), "closed after {took:?}");
    assert_eq!(closed(&shared, "handshake_timeout"), 1);
}

#[tokio::test]
async fn an_authenticated_connection_on_which_nothing_arrives_is_closed_as_idle_3_2() {
    let (shared, mut s, _rx) = connected(quick()).await;
    s.write_all(&hello("n2")).await.unwrap();
    closed_between(&mut s, 250, 1200).await;
    assert_eq!(closed(&shared, "idle"), 1);
    assert_eq!(closed(&shared, "handshake_timeout"), 0);
}

#[tokio::test]
async fn a_connection_that_keeps_sending_frames_stays_open_past_the_idle_bound_3_2() {
    let (shared, mut s, mut rx) = connected(quick()).await;
    s.write_all(&hello("n2")).await.unwrap();
    for _ in 0..12 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        s.write_all(&hello("n2")).await.unwrap();
        assert_eq!(rx.recv().await.unwrap().from, "n2");
    }
    assert_eq!(closed(&shared, "idle"), 0);
    assert!(shared.heard.last("n2").is_some());
}

#[tokio::test]
async fn connections_beyond_the_per_source_cap_are_closed_at_once_and_counted_3_3() {
    let mut timings = quick();
    timings.handshake = Duration::from_secs(5);
    timings.pending_per_source = 2;
    let shared = shared(timings);
    let (addr, _rx) = listen(&shared).await;
    let mut held = Vec::new();
    for _ in 0..2 {
        held.push(TcpStream::connect(addr).await.unwrap());
    }
    let mut third = TcpStream::connect(addr).await.unwrap();
    let took = time_to_close(&mut third, Duration::from_secs(1))
        .await
        .expect("the third is closed");
    assert!(took < Duration::from_millis(200), "closed after {took:?}");
    for s in &mut held {
        assert_eq!(time_to_close(s, Duration::from_millis(200)).await, None);
    }
    assert_eq!(closed(&shared, "per_source_cap"), 1);
    // A pending slot is freed by a completed HELLO.
    held[0].write_all(&hello("n2")).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut fourth = TcpStream::connect(addr).await.unwrap();
    assert_eq!(
        time_to_close(&mut fourth, Duration::from_millis(200)).await,
        None
    );
}

/// A peer that accepts our connection but never sends on its own: our
/// outbound connection must be replaced within the liveness bound.
#[tokio::test]
async fn an_outbound_connection_to_a_silent_peer_is_closed_and_redialled_within_the_bound_3_2() {
    let shared = shared(quick());
    let peer = dialed_peer(&shared).await;
    let (mut first, _) = peer.accept().await.unwrap();
    let accepted = Instant::now();
    closed_between(&mut first, 250, 700).await;
    let (_second, _) = tokio::time::timeout(Duration::from_secs(1), peer.accept())
        .await
        .expect("redialled")
        .unwrap();
    let redialled = accepted.elapsed();
    assert!(
        redialled < Duration::from_millis(700),
        "redialled after {redialled:?}"
    );
    assert_eq!(closed(&shared, "peer_silent"), 1);
}

/// The same peer, now talking to us on its own connection: our outbound
/// connection stays.
#[tokio::test]
async fn an_outbound_connection_stays_up_while_the_peer_is_heard_3_2() {
    let shared = shared(quick());
    let peer = dialed_peer(&shared).await;
    let (mut conn, _) = peer.accept().await.unwrap();
    for _ in 0..12 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        shared.heard.mark("n2");
    }
    assert_eq!(
        time_to_close(&mut conn, Duration::from_millis(50)).await,
        None
    );
    assert!(
        tokio::time::timeout(Duration::from_millis(50), peer.accept())
            .await
            .is_err(),
        "no second connection"
    );
    assert_eq!(closed(&shared, "peer_silent"), 0);
}

/// A peer that does not read: a frame that cannot enter the socket within
/// the write deadline closes the connection.
#[tokio::test]
async fn a_write_that_makes_no_progress_is_abandoned_at_the_write_deadline_3_2() {
    let peer = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let mut ours = TcpStream::connect(peer.local_addr().unwrap())
        .await
        .unwrap();
    let (_theirs, _) = peer.accept().await.unwrap();
    let huge = vec![0u8; 64 << 20];
    let start = Instant::now();
    let r = super::dialer::write_frame(&mut ours, &huge, Duration::from_millis(200)).await;
    assert_eq!(r, Err(Close::WriteStalled));
    assert!(start.elapsed() < Duration::from_secs(1));
}

/// §3.2: with `shared_key`, each redialled connection starts with a fresh
/// HELLO sealed with a higher sequence number, which the receiver's replay
/// window accepts: nothing is dropped as a replay and messages keep flowing
/// across the redials.
#[tokio::test]
async fn redialled_connections_pass_the_replay_window_with_a_shared_key_3_2() {
    let auth = AuthConfig {
        mode: AuthMode::SharedKey,
        key: Some(Secret::new("a test key of some length")),
        key_file: None,
        max_skew_ms: 30_000,
    };
    let receiver = shared_as("n2", &["n1"], &auth, quick());
    let (addr, mut rx) = listen(&receiver).await;
    let sender = shared_as("n1", &["n2"], &auth, quick());
    let outbox = Arc::new(Outbox::default());
    tokio::spawn(super::dialer::dial_loop(
        Arc::clone(&sender),
        "n2".into(),
        addr.to_string(),
        Arc::clone(&outbox),
    ));
    // n2 never dials n1, so n1 finds it silent and redials every 300 ms.
    let start = Instant::now();
    let (mut sent, mut got) = (0, 0);
    while start.elapsed() < Duration::from_millis(1100) {
        let hello = Message::Hello {
            node_id: "n1".into(),
            fingerprint: None,
        };
        outbox.push(hello, &sender.metrics);
        sent += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
        while let Ok(m) = rx.try_recv() {
            assert_eq!(m.from, "n1");
            got += 1;
        }
    }
    assert!(closed(&sender, "peer_silent") >= 2, "no redial happened");
    assert_eq!(receiver.metrics.rejected_counts()["replay"], 0);
    assert_eq!(closed(&receiver, "rejected"), 0);
    assert!(got >= sent - 4, "{got} of {sent} messages arrived");
}

/// A peer that closes every connection as soon as it is open (it refuses
/// our HELLO) is asked again with a growing pause, not in a tight loop.
#[tokio::test]
async fn a_peer_that_refuses_every_connection_is_redialled_with_growing_backoff_3_2() {
    let shared = shared(quick());
    let peer = dialed_peer(&shared).await;
    let start = Instant::now();
    let mut accepted = 0;
    while let Ok(Ok((conn, _))) =
        tokio::time::timeout_at(start + Duration::from_millis(1500), peer.accept()).await
    {
        drop(conn);
        accepted += 1;
    }
    // 20, 40, 80, ... ms up to 1 s: about seven attempts in 1.5 s.
    assert!(
        (3..=12).contains(&accepted),
        "{accepted} connections in 1.5 s"
    );
}

/// §3.3: a peer keeps one outbound connection, so when it completes a
/// `HELLO` on a new one the old inbound connection is closed: stale frames
/// are not read after fresh ones, and HELLOs cannot pile up connections.
#[tokio::test]
async fn a_newer_connection_from_the_same_peer_supersedes_the_older_one_3_3() {
    let (shared, mut old, _rx) = connected(quick()).await;
    old.write_all(&hello("n2")).await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let (addr, _rx2) = listen(&shared).await;
    let mut new = TcpStream::connect(addr).await.unwrap();
    new.write_all(&hello("n2")).await.unwrap();
    closed_between(&mut old, 0, 150).await;
    assert_eq!(closed(&shared, "superseded"), 1);
    new.write_all(&hello("n2")).await.unwrap();
    assert_eq!(
        time_to_close(&mut new, Duration::from_millis(100)).await,
        None
    );
}

/// The fingerprint field of the `HELLO` that opens `conn` (auth off: the
/// frame is the message's fields).
async fn hello_fingerprint(conn: &mut TcpStream) -> Option<String> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 256];
    loop {
        if let Ok(Some((fields, _))) = codec::decode(&buf, &codec::Limits::default()) {
            return match Message::from_fields(&fields).expect("a message") {
                Message::Hello { fingerprint, .. } => fingerprint,
                other => panic!("not a HELLO: {other:?}"),
            };
        }
        let n = tokio::time::timeout(Duration::from_secs(2), conn.read(&mut chunk))
            .await
            .expect("a HELLO within 2 s")
            .unwrap();
        assert!(n > 0, "closed before a whole HELLO");
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// §3.8: an elector from before `election_timeout` joined the fingerprint
/// refuses a five-field one as malformed (the mixed-version test saw a
/// rolling upgrade from such a build never settle). Its own `HELLO` shows
/// four fields; from then on ours to it carries four, and one from before
/// the fingerprint gets none.
#[tokio::test]
async fn a_peer_whose_hello_shows_a_shorter_fingerprint_is_sent_that_form_3_8() {
    let shared = shared(quick());
    let (addr, _rx) = listen(&shared).await;
    let peer = dialed_peer(&shared).await;
    let full = shared.fingerprint.to_string();
    let four = full.rsplit_once('/').unwrap().0.to_string();
    let (mut first, _) = peer.accept().await.unwrap();
    assert_eq!(hello_fingerprint(&mut first).await, Some(full.clone()));
    for (theirs, expected) in [
        (Some(four.clone()), Some(four)),
        (None, None),
        (Some(full.clone()), Some(full)),
    ] {
        // The old peer dials us with its own HELLO, and refuses ours.
        let mut inbound = TcpStream::connect(addr).await.unwrap();
        let msg = Message::Hello {
            node_id: "n2".into(),
            fingerprint: theirs.clone(),
        };
        inbound
            .write_all(&codec::encode_owned(&msg.to_fields()))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        drop(first);
        let (mut next, _) = peer.accept().await.unwrap();
        assert_eq!(
            hello_fingerprint(&mut next).await,
            expected,
            "after a HELLO with {theirs:?}"
        );
        first = next;
    }
    assert_eq!(closed(&shared, "rejected"), 0, "every HELLO was let in");
}
