//! Election transport (docs/protocol.md §3): one TCP connection per ordered
//! pair of nodes — we dial every peer and send on that connection; peers dial
//! us and we only read from theirs. Every connection starts with `HELLO`,
//! which names the sender; every later message must name the same sender.
//!
//! Bad input never reaches the core: a frame that does not decode, fails
//! authentication or names another sender is counted and logged, and only
//! that connection is dropped.
//!
//! Liveness (§3.2): heartbeats flow every `hb_interval` in both directions,
//! so a connection on which nothing arrives for [`LinkTimings::liveness`] is
//! dead, whatever TCP believes. The `listener` closes such inbound
//! connections; the `dialer` closes and redials its outbound connection when
//! the peer has been silent on *its* connection to us for as long, or when a
//! write makes no progress. Without this a connection that outlived a
//! partition stayed up until TCP's backed-off retransmission timer next fired,
//! and peers heard each other again only 13–47 s after the heal.

mod dialer;
mod listener;

use crate::api::metrics::Metrics;
use crate::net::auth::Authenticator;
use crate::net::codec;
use crate::net::fingerprint::{Fingerprint, FingerprintForm};
use crate::protocol::{Message, NodeId, PeerForm};
use crate::tls::peer::PeerTls;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch, Notify};
use tokio::time::Instant;

/// Most frames an outbound queue holds; heartbeats go first when it is full.
const OUTBOX_CAP: usize = 256;

/// A message from an authenticated peer.
#[derive(Debug)]
pub struct Inbound {
    pub(crate) from: NodeId,
    pub(crate) msg: Message,
}

/// Deadlines and caps of the transport, derived from the election timings
/// (docs/protocol.md §3.2 says why each value).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkTimings {
    /// Silence after which a connection is dead: `min(max(4·hb, 500 ms),
    /// down_after)`.
    pub(crate) liveness: Duration,
    /// Time a new inbound connection has to deliver its `HELLO`:
    /// `min(liveness, 2 s)`.
    pub(crate) handshake: Duration,
    /// Time one frame may take to enter the socket: `liveness`.
    pub(crate) write_deadline: Duration,
    /// Time one connect attempt may take: `min(max(2·hb, 100 ms), liveness)`.
    pub(crate) connect_timeout: Duration,
    /// Largest pause between failed connect attempts: `hb`.
    pub(crate) redial_max: Duration,
    /// Inbound connections that have not completed `HELLO` yet, in total.
    pub(crate) pending_total: usize,
    /// The same, per source IP address.
    pub(crate) pending_per_source: usize,
}

impl LinkTimings {
    pub fn from_timings(hb_interval_ms: u64, down_after_ms: u64) -> Self {
        let hb = Duration::from_millis(hb_interval_ms.max(1));
        let down_after = Duration::from_millis(down_after_ms.max(1));
        let liveness = (4 * hb).max(Duration::from_millis(500)).min(down_after);
        LinkTimings {
            liveness,
            handshake: liveness.min(Duration::from_secs(2)),
            write_deadline: liveness,
            connect_timeout: (2 * hb).max(Duration::from_millis(100)).min(liveness),
            redial_max: hb,
            pending_total: 64,
            pending_per_source: 8,
        }
    }
}

/// Why a connection was closed: the label of
/// `elector_connections_closed_total{reason}` and of the log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Close {
    /// Inbound: no complete frame for `liveness`.
    Idle,
    /// Outbound: the peer sent nothing on its own connection for `liveness`.
    PeerSilent,
    /// Outbound: a frame did not enter the socket within `write_deadline`.
    WriteStalled,
    /// Inbound: no `HELLO` within `handshake`.
    HandshakeTimeout,
    /// Inbound: too many connections without `HELLO` yet.
    PendingCap,
    /// Inbound: too many such connections from this source address.
    PerSourceCap,
    /// Inbound: a bad frame (its own reason is in `messages_rejected`).
    Rejected { label: &'static str, detail: String },
    /// Inbound: the same peer completed a `HELLO` on a newer connection.
    Superseded,
    /// The other side closed or reset the connection.
    PeerClosed,
    /// We are shutting down.
    Shutdown,
}

impl Close {
    pub(crate) fn label(&self) -> &'static str {
        match self {
            Close::Idle => "idle",
            Close::PeerSilent => "peer_silent",
            Close::WriteStalled => "write_stalled",
            Close::HandshakeTimeout => "handshake_timeout",
            Close::PendingCap => "pending_cap",
            Close::PerSourceCap => "per_source_cap",
            Close::Rejected { .. } => "rejected",
            Close::Superseded => "superseded",
            Close::PeerClosed => "peer_closed",
            Close::Shutdown => "shutdown",
        }
    }
}

/// When each peer last sent us a valid frame on its own connection. The
/// listener writes it, the dialer of the same peer reads it: a peer that we
/// do not hear gets a fresh outbound connection (§3.2).
#[derive(Default)]
pub(crate) struct Heard(Mutex<HashMap<NodeId, Instant>>);

impl Heard {
    pub(crate) fn mark(&self, peer: &str) {
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match m.get_mut(peer) {
            Some(t) => *t = Instant::now(),
            None => {
                m.insert(peer.to_string(), Instant::now());
            }
        }
    }

    pub(crate) fn last(&self, peer: &str) -> Option<Instant> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(peer)
            .copied()
    }
}

/// What the dialers and the listener share.
pub(crate) struct Shared {
    pub(crate) me: NodeId,
    /// Members and lease timings this node runs with; HELLO carries it and a
    /// peer with another one is refused (§3.7).
    pub(crate) fingerprint: Fingerprint,
    pub(crate) known: Vec<NodeId>,
    pub(crate) auth: Arc<Mutex<Authenticator>>,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) heard: Heard,
    /// Per peer, how many inbound connections completed `HELLO`: each peer
    /// keeps one outbound connection, so only its newest is read (§3.3).
    pub(crate) newest: HashMap<NodeId, watch::Sender<u64>>,
    pub(crate) timings: LinkTimings,
    /// Peers whose latest heartbeat said they do not read every field this
    /// version sends (an elector from before them, during a binary
    /// upgrade), and the form they read (protocol §3.8).
    pub(crate) short_form: Mutex<HashMap<NodeId, PeerForm>>,
    /// Peers whose latest `HELLO` carried a shorter fingerprint than ours
    /// (or none), and the form our `HELLO` to them takes (§3.7, §3.8).
    pub(crate) hello_form: Mutex<HashMap<NodeId, FingerprintForm>>,
    /// Mutual TLS on every connection (`tls.election`), or plain TCP.
    pub(crate) tls: Option<Arc<PeerTls>>,
}

impl Shared {
    pub(crate) fn new(
        me: NodeId,
        fingerprint: Fingerprint,
        known: Vec<NodeId>,
        auth: Arc<Mutex<Authenticator>>,
        metrics: Arc<Metrics>,
        timings: LinkTimings,
    ) -> Self {
        let newest = known
            .iter()
            .map(|id| (id.clone(), watch::channel(0).0))
            .collect();
        Shared {
            me,
            fingerprint,
            known,
            auth,
            metrics,
            heard: Heard::default(),
            newest,
            timings,
            short_form: Mutex::default(),
            hello_form: Mutex::default(),
            tls: None,
        }
    }

    /// Notes which form `peer`'s latest heartbeat says it reads.
    pub(crate) fn peer_reads(&self, peer: &str, form: PeerForm) {
        if set_form(&self.short_form, peer, form, PeerForm::Full) {
            tracing::info!(
                %peer, ?form,
                "peer's elector version changed: sending it the form it reads (protocol §3.8)"
            );
        }
    }

    /// Records the fingerprint form `peer`'s `HELLO` showed (§3.8).
    pub(crate) fn peer_hello(&self, peer: &str, form: FingerprintForm) {
        if set_form(&self.hello_form, peer, form, FingerprintForm::Full) {
            tracing::info!(
                %peer, ?form,
                "peer's HELLO shows another fingerprint form: ours to it takes that form (protocol §3.8)"
            );
        }
    }

    /// The fingerprint our `HELLO` to `peer` carries: the full one until
    /// its own `HELLO` shows it reads less (an older elector refuses our
    /// first one and dials us meanwhile, so the next dial is understood).
    pub(crate) fn hello_fingerprint_for(&self, peer: &str) -> Option<String> {
        let form = form_of(&self.hello_form, peer, FingerprintForm::Full);
        self.fingerprint.wire_for(form)
    }

    /// The form `peer` gets: until its first heartbeat says otherwise, the
    /// full one (§3.8).
    fn form_for(&self, peer: &str) -> PeerForm {
        form_of(&self.short_form, peer, PeerForm::Full)
    }
}

/// Records `form` for `peer` in a per-peer table that keeps only peers
/// reading less than `full` (§3.8); true when it changed.
fn set_form<F: Copy + PartialEq>(
    table: &Mutex<HashMap<NodeId, F>>,
    peer: &str,
    form: F,
    full: F,
) -> bool {
    let mut table = table.lock().unwrap_or_else(|e| e.into_inner());
    let before = table.get(peer).copied().unwrap_or(full);
    if form == full {
        table.remove(peer);
    } else {
        table.insert(peer.to_string(), form);
    }
    before != form
}

/// `peer`'s entry in such a table, `full` when it has none.
fn form_of<F: Copy>(table: &Mutex<HashMap<NodeId, F>>, peer: &str, full: F) -> F {
    table
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(peer)
        .copied()
        .unwrap_or(full)
}

impl Shared {
    /// Counts and logs a closed connection.
    pub(crate) fn closed(&self, peer: &str, direction: &str, why: &Close) {
        self.metrics.connection_closed(why.label());
        let reason = why.label();
        match why {
            Close::Rejected { detail, .. } => {
                tracing::warn!(%peer, direction, reason, %detail, "connection closed")
            }
            // A flood must not flood the log.
            Close::PendingCap | Close::PerSourceCap | Close::HandshakeTimeout => {
                tracing::debug!(%peer, direction, reason, "connection closed")
            }
            _ => tracing::info!(%peer, direction, reason, "connection closed"),
        }
    }
}

/// A failed TLS handshake on the election port (a plain-text peer, a
/// certificate from another CA, none at all), counted as
/// `elector_messages_rejected_total{reason="tls_handshake"}`.
pub(crate) fn tls_refused(shared: &Shared, peer: &str, e: &std::io::Error) -> Close {
    shared.metrics.message_rejected("tls_handshake");
    Close::Rejected {
        label: "tls_handshake",
        detail: format!("TLS with {peer} failed (tls.election): {e}"),
    }
}

/// One peer's outbound queue. Only the newest heartbeat matters, so a new
/// one replaces any queued one; election messages (OFFER, ACCEPT, REJECT,
/// ANNOUNCE, HANDOVER) are never dropped in favour of heartbeats.
#[derive(Default)]
pub(crate) struct Outbox {
    queue: Mutex<VecDeque<Message>>,
    ready: Notify,
}

impl Outbox {
    fn push(&self, msg: Message, metrics: &Metrics) {
        let mut q = self.queue.lock().expect("outbox lock");
        if !msg.is_election_critical() {
            q.retain(|m| m.is_election_critical());
        }
        q.push_back(msg);
        while q.len() > OUTBOX_CAP {
            // Only election messages are left to drop (a peer that has been
            // unreachable for a long time): the oldest is the stalest.
            q.pop_front();
            metrics.message_rejected("outbox_overflow");
        }
        drop(q);
        self.ready.notify_one();
    }

    fn pop(&self) -> Option<Message> {
        self.queue.lock().expect("outbox lock").pop_front()
    }
}

/// Handle the runtime uses to send.
#[derive(Clone)]
pub struct Transport {
    outboxes: Arc<Vec<(NodeId, Arc<Outbox>)>>,
    metrics: Arc<Metrics>,
}

impl Transport {
    /// Queues `msg` for `to`. Never blocks.
    pub(crate) fn send(&self, to: &str, msg: Message) {
        if let Some((_, outbox)) = self.outboxes.iter().find(|(id, _)| id == to) {
            outbox.push(msg, &self.metrics);
        }
    }
}

/// Who this node is on the wire: the id its HELLO names and the
/// configuration fingerprint it carries (§3.7).
#[derive(Debug, Clone)]
pub struct LocalIdentity {
    pub node_id: NodeId,
    pub fingerprint: Fingerprint,
}

/// Starts the dialers (one per peer) and the acceptor, in plain TCP.
pub fn start(
    local: LocalIdentity,
    listener: TcpListener,
    peers: Vec<(NodeId, String)>,
    auth: Arc<Mutex<Authenticator>>,
    metrics: Arc<Metrics>,
    timings: LinkTimings,
    inbound: mpsc::Sender<Inbound>,
) -> Transport {
    start_with_tls(
        local, listener, None, peers, auth, metrics, timings, inbound,
    )
}

/// [`start`], with mutual TLS on every connection when `tls` is set.
#[allow(clippy::too_many_arguments)] // each is a separate part of the runtime
pub(crate) fn start_with_tls(
    local: LocalIdentity,
    listener: TcpListener,
    tls: Option<Arc<PeerTls>>,
    peers: Vec<(NodeId, String)>,
    auth: Arc<Mutex<Authenticator>>,
    metrics: Arc<Metrics>,
    timings: LinkTimings,
    inbound: mpsc::Sender<Inbound>,
) -> Transport {
    let known = peers.iter().map(|(id, _)| id.clone()).collect();
    let mut shared = Shared::new(
        local.node_id,
        local.fingerprint,
        known,
        auth,
        Arc::clone(&metrics),
        timings,
    );
    shared.tls = tls;
    let shared = Arc::new(shared);
    let mut outboxes = Vec::new();
    for (id, addr) in peers {
        let outbox = Arc::new(Outbox::default());
        outboxes.push((id.clone(), Arc::clone(&outbox)));
        tokio::spawn(dialer::dial_loop(Arc::clone(&shared), id, addr, outbox));
    }
    tokio::spawn(listener::accept_loop(listener, shared, inbound));
    Transport {
        outboxes: Arc::new(outboxes),
        metrics,
    }
}

/// Seals `msg` for `to` (a fresh authentication sequence number) and frames
/// it, in the form `to` reads (§3.8).
fn encode(msg: &Message, to: &str, shared: &Shared) -> Vec<u8> {
    let fields = msg.to_fields_for(shared.form_for(to));
    let fields = shared.auth.lock().expect("auth lock").seal(to, fields);
    codec::encode_owned(&fields)
}

#[cfg(test)]
mod tests;
