//! Holding the link kevy dials towards [`NOWHERE`], so that leaving it does
//! not wait out kevy's reconnect backoff (docs/architecture.md §kevy,
//! "leaving NOWHERE waits out a backoff").
//!
//! A detached or fenced kevy replicates from [`NOWHERE`]. With nothing
//! listening there, its replication thread's connect is refused at once and
//! the thread sleeps its 250 ms reconnect backoff, again and again. A
//! `REPLICAOF` that moves the node on (an election winner's promotion, a
//! replica's retarget to it) joins that thread, so it waits out the rest of
//! the sleep: up to 250 ms, once per node on the failover's path. The sleep
//! cannot be cut short; a connect that is still in progress can.
//!
//! So the elector listens on [`NOWHERE`] itself and keeps its own data
//! node's replication connects open there without ever answering them: the
//! thread waits in its handshake read (kevy gives up after its 5 s
//! handshake timeout, sleeps its backoff and dials again). When a `REPLICAOF` leaves [`NOWHERE`], the
//! adapter releases those connects once kevy has had the command for
//! [`FIRST_RELEASE_AFTER`]: the handshake fails, the thread, already told
//! to stop, exits without sleeping, and the command answers. A release that
//! comes too early costs what we had before (the thread sleeps once); one
//! that comes while the thread sleeps anyway changes nothing.
//!
//! The hold never answers: the node stays a replica that follows nobody (no
//! `+ACK`, no data), exactly as with nothing listening. Anything else that
//! connects (another node's thread on a shared loopback, the probe of
//! kevy's `FAILOVER` behind our quiesce, a secure link's handshake, any
//! stray client) is closed as soon as its first frame shows it is not our
//! node's plain replication handshake: to it, [`NOWHERE`] is as dead as it
//! was. Port 1 is privileged, so that no other unprivileged process can
//! serve a fenced node there: the elector needs `CAP_NET_BIND_SERVICE` (or
//! root) to hold it. Without that, or with the port taken, the hold is off
//! and failovers are only slower (logged once at start).
//!
//! A held connect keeps any `REPLICAOF` waiting until it is released (kevy
//! restarts its thread even towards the address it follows), and only this
//! elector can release it. So the adapter releases whenever the thread may
//! be at [`NOWHERE`]; the watchdog, standing in for an elector that may be
//! frozen, leaves a replica of [`NOWHERE`] as it is; and the hold is off
//! where several members' data nodes share one loopback (one listener would
//! catch every node's connects, and a stopped elector would stall them all).

use super::NOWHERE;
use crate::config::{Config, DataNodeKind};
use crate::net::codec;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// How long after our `REPLICAOF` went out the first release comes: long
/// enough for kevy to have read the command and told the thread to stop
/// (released before that, the thread sleeps its backoff once, as without
/// the hold), short enough to be lost in the failover's noise.
pub(crate) const FIRST_RELEASE_AFTER: Duration = Duration::from_millis(20);
/// Further releases while the command is outstanding: a connect that was
/// under way at the first release is held by now.
pub(crate) const RELEASE_AGAIN_EVERY: Duration = Duration::from_millis(50);
/// Releases per command at most (about the command's own timeout).
pub(crate) const MAX_RELEASES: u32 = 20;
/// A connection must show its first frame within this long, or it is closed.
const FIRST_FRAME_WITHIN: Duration = Duration::from_secs(1);
/// kevy's handshake is one short frame; anything longer is not it.
const FIRST_FRAME_MAX: usize = 512;
/// Held connections at most: one per shard of our node is all there is.
const MAX_HELD: usize = 16;

/// The handle the kevy adapter keeps: what is held, and the release.
/// Public for `tests/kevy_nowhere_hold.rs`, which drives real kevy with it.
#[derive(Clone, Debug)]
pub struct NowhereHold {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// Bumped by each release; every held connection waits for a bump.
    release: watch::Sender<u64>,
    held: Arc<AtomicUsize>,
    accept_loop: tokio::task::AbortHandle,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.accept_loop.abort();
    }
}

impl NowhereHold {
    /// Listens on [`NOWHERE`] and holds the replication connects of the
    /// kevy whose client port is `data_port`. Fails as `bind` does (no
    /// privilege for port 1, or the port taken).
    pub async fn start(data_port: u16) -> std::io::Result<NowhereHold> {
        let listener = TcpListener::bind((NOWHERE.0, NOWHERE.1)).await?;
        Ok(NowhereHold::on(listener, data_port))
    }

    /// The elector's hold for its kevy data node (`data_node.kind: kevy`
    /// with `abort_stale_connects`), started here and shared by its
    /// adapters. Not the watchdog's: one listener per host, in the process
    /// that moves the node on. `None`, logged, when it cannot listen, or
    /// when other members' data nodes share this loopback: the kernel
    /// would queue every node's connects on the one listener, and while
    /// its elector stood still (stopped, starved) the others' `REPLICAOF`
    /// would wait for kevy's 5 s handshake timeout.
    pub(crate) async fn for_config(config: &Config) -> Option<NowhereHold> {
        let dn = config.data_node.as_ref()?;
        if dn.kind != DataNodeKind::Kevy || !dn.abort_stale_connects {
            return None;
        }
        let data_port = config.data_port()?;
        let nowhere = format!("{}:{}", NOWHERE.0, NOWHERE.1);
        if let Some(peer) = peer_on_this_loopback(config) {
            tracing::info!(%nowhere, peer,
                "not holding the data node's connects at nowhere: another member's data node \
                 is on this loopback (one listener would hold every node's)");
            return None;
        }
        match NowhereHold::start(data_port).await {
            Ok(hold) => {
                tracing::info!(%nowhere, data_port,
                    "holding the data node's replication connects at nowhere, released on a retarget");
                Some(hold)
            }
            Err(e) => {
                tracing::warn!(error = %e, %nowhere,
                    "cannot listen at nowhere: a detached kevy's promotion or retarget waits out \
                     its 250 ms reconnect backoff; grant the elector CAP_NET_BIND_SERVICE \
                     (docs/architecture.md §kevy)");
                None
            }
        }
    }

    /// The hold on a listener already bound (tests use any port).
    pub(super) fn on(listener: TcpListener, data_port: u16) -> NowhereHold {
        let (release, _) = watch::channel(0u64);
        let held = Arc::new(AtomicUsize::new(0));
        let accept_loop = tokio::spawn(accept_loop(
            listener,
            data_port,
            release.clone(),
            Arc::clone(&held),
        ))
        .abort_handle();
        NowhereHold {
            inner: Arc::new(Inner {
                release,
                held,
                accept_loop,
            }),
        }
    }

    /// Connects held now.
    pub fn held(&self) -> usize {
        self.inner.held.load(Ordering::SeqCst)
    }

    /// Closes every connect held now; returns how many there were.
    pub fn release(&self) -> usize {
        let held = self.held();
        self.inner.release.send_modify(|n| *n += 1);
        held
    }

    /// Releases after [`FIRST_RELEASE_AFTER`] and again every
    /// [`RELEASE_AGAIN_EVERY`] ([`MAX_RELEASES`] at most) until `done`
    /// turns true: the `REPLICAOF` leaving [`NOWHERE`] has answered.
    /// Returns how many held connects were closed.
    pub async fn release_until_done(&self, mut done: watch::Receiver<bool>) -> usize {
        let mut released = 0;
        let mut wait = FIRST_RELEASE_AFTER;
        for _ in 0..MAX_RELEASES {
            // `Err` from `wait_for`: the command's side is gone, so done too.
            if tokio::time::timeout(wait, done.wait_for(|d| *d))
                .await
                .is_ok()
            {
                break;
            }
            released += self.release();
            wait = RELEASE_AGAIN_EVERY;
        }
        released
    }
}

async fn accept_loop(
    listener: TcpListener,
    data_port: u16,
    release: watch::Sender<u64>,
    held: Arc<AtomicUsize>,
) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                tokio::spawn(hold_if_ours(
                    stream,
                    data_port,
                    release.subscribe(),
                    Arc::clone(&held),
                ));
            }
            Err(e) => {
                // Out of file descriptors and the like: nothing is held
                // meanwhile, which only makes retargets slower.
                tracing::debug!(error = %e, "nowhere hold: accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Holds `stream` until the next release if its first frame is our node's
/// plain replication handshake; closes it otherwise, or when the other end
/// goes away.
async fn hold_if_ours(
    mut stream: TcpStream,
    data_port: u16,
    mut release: watch::Receiver<u64>,
    held: Arc<AtomicUsize>,
) {
    let first = tokio::time::timeout(FIRST_FRAME_WITHIN, first_frame(&mut stream)).await;
    let Ok(Some(fields)) = first else { return };
    if !is_our_replication_handshake(&fields, data_port) {
        return;
    }
    let _count = match HeldCount::take(&held) {
        Some(count) => count,
        None => return,
    };
    // A release from before this point is not ours to obey.
    release.borrow_and_update();
    let mut scratch = [0u8; 64];
    tokio::select! {
        _ = release.changed() => {}
        _ = async {
            // Returns when kevy closes its end (its timeout, a restart).
            while matches!(stream.read(&mut scratch).await, Ok(n) if n > 0) {}
        } => {}
    }
}

/// Another member whose data node is on a loopback address (so, sharing
/// this host's `127.0.0.1:1` with ours), by id.
pub(crate) fn peer_on_this_loopback(config: &Config) -> Option<&str> {
    let on_loopback = |address: &str| {
        let host = address.rsplit_once(':').map_or(address, |(h, _)| h);
        let host = host.trim_start_matches('[').trim_end_matches(']');
        host.eq_ignore_ascii_case("localhost")
            || host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    };
    config
        .peers
        .iter()
        .filter(|p| p.id != config.node_id)
        .find(|p| p.data.as_deref().is_some_and(on_loopback))
        .map(|p| p.id.as_str())
}

/// One held connect, counted while it lives.
struct HeldCount<'a>(&'a AtomicUsize);

impl<'a> HeldCount<'a> {
    fn take(held: &'a AtomicUsize) -> Option<HeldCount<'a>> {
        let before = held.fetch_add(1, Ordering::SeqCst);
        if before >= MAX_HELD {
            held.fetch_sub(1, Ordering::SeqCst);
            return None;
        }
        Some(HeldCount(held))
    }
}

impl Drop for HeldCount<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The fields of the first RESP frame on `stream`, or `None` when the peer
/// sends something else, too much, or closes.
async fn first_frame(stream: &mut TcpStream) -> Option<Vec<Vec<u8>>> {
    let limits = codec::Limits {
        max_array_len: 8,
        max_bulk_len: 128,
    };
    let mut buf = Vec::with_capacity(128);
    let mut chunk = [0u8; 128];
    loop {
        match codec::decode(&buf, &limits) {
            Ok(Some((fields, _))) => return Some(fields),
            Ok(None) if buf.len() < FIRST_FRAME_MAX => {}
            _ => return None,
        }
        match stream.read(&mut chunk).await {
            Ok(n) if n > 0 => buf.extend_from_slice(&chunk[..n]),
            _ => return None,
        }
    }
}

/// Whether `fields` are the handshake kevy 7's replication thread sends
/// first on a plain link: `REPLICATE FROM <generation> <offset> ID
/// kevy-replica-<client port>#<stream>`, from the node whose client port is
/// `data_port` (kevy names its threads after its client port).
pub(crate) fn is_our_replication_handshake(fields: &[Vec<u8>], data_port: u16) -> bool {
    let [verb, from, _generation, _offset, id, name] = fields else {
        return false;
    };
    let ours = format!("kevy-replica-{data_port}#");
    verb.eq_ignore_ascii_case(b"REPLICATE")
        && from.eq_ignore_ascii_case(b"FROM")
        && id.eq_ignore_ascii_case(b"ID")
        && name.starts_with(ours.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(words: &[&str]) -> Vec<Vec<u8>> {
        words.iter().map(|w| w.as_bytes().to_vec()).collect()
    }

    #[test]
    fn our_nodes_replication_handshake_is_recognised_by_its_client_port() {
        let ours = fields(&[
            "REPLICATE",
            "FROM",
            "3",
            "1042",
            "ID",
            "kevy-replica-6379#0",
        ]);
        assert!(is_our_replication_handshake(&ours, 6379));
        let routed = fields(&["REPLICATE", "FROM", "0", "0", "ID", "kevy-replica-6379#s"]);
        assert!(is_our_replication_handshake(&routed, 6379));
    }

    fn config_with_peers(datas: &[Option<&str>]) -> Config {
        let peers: String = datas
            .iter()
            .enumerate()
            .map(|(i, data)| match data {
                Some(d) => {
                    format!("  - {{ id: n{i}, election: \"10.0.0.{i}:7000\", data: \"{d}\" }}\n")
                }
                None => {
                    format!("  - {{ id: n{i}, election: \"10.0.0.{i}:7000\", witness: true }}\n")
                }
            })
            .collect();
        let yaml = format!(
            "node_id: n0\nlisten: {{ election: \"0.0.0.0:7000\", api: \"127.0.0.1:9000\" }}\n\
             data_dir: /tmp/x\ndata_node: {{ kind: kevy, address: \"127.0.0.1:6379\" }}\npeers:\n{peers}"
        );
        serde_yaml::from_str(&yaml).unwrap()
    }

    #[test]
    fn members_on_a_shared_loopback_are_found_and_separate_hosts_are_not() {
        let separate = config_with_peers(&[Some("127.0.0.1:6379"), Some("10.0.0.2:6379"), None]);
        assert_eq!(
            peer_on_this_loopback(&separate),
            None,
            "our own entry is ours"
        );
        let shared = config_with_peers(&[Some("127.0.0.1:6379"), Some("127.0.0.1:6380")]);
        assert_eq!(peer_on_this_loopback(&shared), Some("n1"));
        let named = config_with_peers(&[Some("127.0.0.1:6379"), Some("localhost:6380")]);
        assert_eq!(peer_on_this_loopback(&named), Some("n1"));
        let v6 = config_with_peers(&[Some("127.0.0.1:6379"), Some("[::1]:6380")]);
        assert_eq!(peer_on_this_loopback(&v6), Some("n1"));
    }

    #[test]
    fn another_nodes_thread_or_any_other_client_is_not_held() {
        let other = fields(&[
            "REPLICATE",
            "FROM",
            "3",
            "1042",
            "ID",
            "kevy-replica-6380#0",
        ]);
        assert!(!is_our_replication_handshake(&other, 6379));
        let prefix = fields(&[
            "REPLICATE",
            "FROM",
            "3",
            "1042",
            "ID",
            "kevy-replica-63790#0",
        ]);
        assert!(!is_our_replication_handshake(&prefix, 6379));
        // The probe of kevy's FAILOVER handover thread (our quiesce).
        assert!(!is_our_replication_handshake(
            &fields(&["INFO", "replication"]),
            6379
        ));
        // A Redis replica's first command.
        assert!(!is_our_replication_handshake(&fields(&["PING"]), 6379));
    }

    /// Connects to a hold on an ephemeral port (the test cannot count on
    /// port 1) and sends `frame`.
    async fn connect_and_send(addr: std::net::SocketAddr, frame: &[u8]) -> TcpStream {
        use tokio::io::AsyncWriteExt;
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(frame).await.unwrap();
        s
    }

    /// A hold like [`NowhereHold::start`]'s, on an ephemeral loopback port.
    async fn hold_on_ephemeral_port(data_port: u16) -> (NowhereHold, std::net::SocketAddr) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        (NowhereHold::on(listener, data_port), addr)
    }

    async fn until(what: impl Fn() -> bool) {
        for _ in 0..200 {
            if what() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("condition not reached within 1 s");
    }

    const HANDSHAKE: &[u8] =
        b"*6\r\n$9\r\nREPLICATE\r\n$4\r\nFROM\r\n$1\r\n0\r\n$1\r\n0\r\n$2\r\nID\r\n$19\r\nkevy-replica-6379#0\r\n";

    #[tokio::test]
    async fn a_held_handshake_gets_no_answer_until_the_release_closes_it() {
        let (hold, addr) = hold_on_ephemeral_port(6379).await;
        let mut s = connect_and_send(addr, HANDSHAKE).await;
        until(|| hold.held() == 1).await;
        let mut buf = [0u8; 16];
        let early = tokio::time::timeout(Duration::from_millis(100), s.read(&mut buf)).await;
        assert!(early.is_err(), "the hold answered or closed: {early:?}");
        assert_eq!(hold.release(), 1);
        let n = tokio::time::timeout(Duration::from_secs(1), s.read(&mut buf))
            .await
            .expect("the release closes the connect");
        assert!(matches!(n, Ok(0) | Err(_)), "no byte is ever sent: {n:?}");
        until(|| hold.held() == 0).await;
    }

    #[tokio::test]
    async fn anything_but_our_handshake_is_closed_at_once_and_never_counted() {
        let (hold, addr) = hold_on_ephemeral_port(6380).await;
        let mut s = connect_and_send(addr, HANDSHAKE).await;
        let mut buf = [0u8; 16];
        let n = tokio::time::timeout(Duration::from_secs(1), s.read(&mut buf))
            .await
            .expect("closed at once");
        assert!(matches!(n, Ok(0) | Err(_)));
        let mut probe = connect_and_send(addr, b"*2\r\n$4\r\nINFO\r\n$11\r\nreplication\r\n").await;
        let n = tokio::time::timeout(Duration::from_secs(1), probe.read(&mut buf))
            .await
            .expect("closed at once");
        assert!(matches!(n, Ok(0) | Err(_)));
        assert_eq!(hold.held(), 0);
    }

    #[tokio::test]
    async fn a_connect_held_after_a_release_waits_for_the_next_one() {
        let (hold, addr) = hold_on_ephemeral_port(6379).await;
        assert_eq!(hold.release(), 0);
        let _s = connect_and_send(addr, HANDSHAKE).await;
        until(|| hold.held() == 1).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(hold.held(), 1, "an earlier release does not close it");
        assert_eq!(hold.release(), 1);
        until(|| hold.held() == 0).await;
    }

    #[tokio::test]
    async fn a_connect_kevy_closes_is_no_longer_counted() {
        let (hold, addr) = hold_on_ephemeral_port(6379).await;
        let s = connect_and_send(addr, HANDSHAKE).await;
        until(|| hold.held() == 1).await;
        drop(s);
        until(|| hold.held() == 0).await;
    }
}
