//! Election transport (docs/protocol.md §3): one TCP connection per ordered
//! pair of nodes — we dial every peer and send on that connection; peers dial
//! us and we only read from theirs. Every connection starts with `HELLO`,
//! which names the sender; every later message must name the same sender.
//!
//! Bad input never reaches the core: a frame that does not decode, fails
//! authentication or names another sender is counted and logged, and only
//! that connection is dropped.

use crate::codec::{self, Limits};
use crate::fingerprint::Fingerprint;
use crate::ops::auth::{unix_ms_now, Authenticator};
use crate::ops::metrics::Metrics;
use crate::protocol::{Message, NodeId};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Notify};

/// Most frames an outbound queue holds; heartbeats go first when it is full.
const OUTBOX_CAP: usize = 256;
/// Largest read buffer for one inbound connection.
const MAX_BUFFERED: usize = 64 * 1024;

/// A message from an authenticated peer.
#[derive(Debug)]
pub struct Inbound {
    pub from: NodeId,
    pub msg: Message,
}

/// One peer's outbound queue. Only the newest heartbeat matters, so a new
/// one replaces any queued one; election messages (OFFER, ACCEPT, REJECT,
/// ANNOUNCE, HANDOVER) are never dropped in favour of heartbeats.
#[derive(Default)]
struct Outbox {
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
    pub fn send(&self, to: &str, msg: Message) {
        if let Some((_, outbox)) = self.outboxes.iter().find(|(id, _)| id == to) {
            outbox.push(msg, &self.metrics);
        }
    }
}

/// Starts the dialers (one per peer) and the acceptor.
pub fn start(
    me: NodeId,
    fingerprint: Fingerprint,
    listener: TcpListener,
    peers: Vec<(NodeId, String)>,
    auth: Arc<Mutex<Authenticator>>,
    metrics: Arc<Metrics>,
    inbound: mpsc::Sender<Inbound>,
) -> Transport {
    let mut outboxes = Vec::new();
    for (id, addr) in peers {
        let outbox = Arc::new(Outbox::default());
        outboxes.push((id.clone(), Arc::clone(&outbox)));
        tokio::spawn(dial_loop(
            Message::Hello {
                node_id: me.clone(),
                fingerprint: Some(fingerprint.to_string()),
            },
            id,
            addr,
            outbox,
            Arc::clone(&auth),
            Arc::clone(&metrics),
        ));
    }
    let known: Vec<NodeId> = outboxes.iter().map(|(id, _)| id.clone()).collect();
    tokio::spawn(accept_loop(
        listener,
        Arc::new(Admission { known, fingerprint }),
        auth,
        Arc::clone(&metrics),
        inbound,
    ));
    Transport {
        outboxes: Arc::new(outboxes),
        metrics,
    }
}

fn encode(msg: &Message, to: &str, auth: &Mutex<Authenticator>) -> Vec<u8> {
    let fields = auth.lock().expect("auth lock").seal(to, msg.to_fields());
    codec::encode_owned(&fields)
}

/// Keeps a connection to one peer and drains its outbox into it.
async fn dial_loop(
    hello: Message,
    peer: NodeId,
    addr: String,
    outbox: Arc<Outbox>,
    auth: Arc<Mutex<Authenticator>>,
    metrics: Arc<Metrics>,
) {
    let mut backoff = Duration::from_millis(50);
    loop {
        match TcpStream::connect(&addr).await {
            Ok(mut stream) => {
                let _ = stream.set_nodelay(true);
                backoff = Duration::from_millis(50);
                tracing::debug!(%peer, %addr, "connected");
                let hello = encode(&hello, &peer, &auth);
                if stream.write_all(&hello).await.is_ok() {
                    if let Err(e) = drain(&mut stream, &peer, &outbox, &auth, &metrics).await {
                        tracing::debug!(%peer, error = %e, "connection lost");
                    }
                }
            }
            Err(e) => tracing::trace!(%peer, %addr, error = %e, "connect failed"),
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(1));
    }
}

async fn drain(
    stream: &mut TcpStream,
    peer: &str,
    outbox: &Outbox,
    auth: &Mutex<Authenticator>,
    metrics: &Metrics,
) -> std::io::Result<()> {
    let mut probe = [0u8; 1];
    loop {
        while let Some(msg) = outbox.pop() {
            let bytes = encode(&msg, peer, auth);
            stream.write_all(&bytes).await?;
            metrics.message_out(msg.kind());
        }
        // Wait for more to send, noticing meanwhile if the peer hung up.
        tokio::select! {
            _ = outbox.ready.notified() => {}
            r = stream.read(&mut probe) => {
                match r {
                    Ok(0) | Err(_) => return Err(std::io::ErrorKind::ConnectionReset.into()),
                    Ok(_) => {} // peers never write on our connection; ignore
                }
            }
        }
    }
}

async fn accept_loop(
    listener: TcpListener,
    known: Arc<Admission>,
    auth: Arc<Mutex<Authenticator>>,
    metrics: Arc<Metrics>,
    inbound: mpsc::Sender<Inbound>,
) {
    loop {
        match listener.accept().await {
            Ok((stream, remote)) => {
                let _ = stream.set_nodelay(true);
                let (known, auth, metrics, inbound) = (
                    Arc::clone(&known),
                    Arc::clone(&auth),
                    Arc::clone(&metrics),
                    inbound.clone(),
                );
                tokio::spawn(async move {
                    if let Err(why) =
                        read_connection(stream, &known, &auth, &metrics, &inbound).await
                    {
                        metrics.message_rejected(why.label);
                        tracing::warn!(%remote, reason = why.label, detail = %why.detail, "dropped inbound connection");
                    }
                });
            }
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Why an inbound connection was closed (label = metrics reason).
struct Rejection {
    label: &'static str,
    detail: String,
}

/// Who may open a connection to us: a configured peer whose HELLO agrees
/// with our membership and lease timings (protocol §3.7).
struct Admission {
    known: Vec<NodeId>,
    fingerprint: Fingerprint,
}

impl Admission {
    /// A peer that sends no fingerprint runs an elector from before the
    /// extension and is let in (a rolling upgrade must keep working); one
    /// that sends a different or malformed fingerprint is refused, and the
    /// refusal names what differs.
    fn check_fingerprint(&self, peer: &str, theirs: Option<&str>) -> Result<(), Rejection> {
        let Some(theirs) = theirs else {
            return Ok(());
        };
        let Some(parsed) = Fingerprint::parse(theirs) else {
            return Err(reject(
                "config_mismatch",
                format!("HELLO from {peer} with a malformed fingerprint {theirs:?}"),
            ));
        };
        let diff = self.fingerprint.differences(&parsed);
        if diff.is_empty() {
            return Ok(());
        }
        Err(reject(
            "config_mismatch",
            format!(
                "{peer} runs another configuration: {}; refusing its messages until the timings and members agree (protocol §3.7)",
                diff.join(", ")
            ),
        ))
    }
}

fn reject(label: &'static str, detail: impl ToString) -> Rejection {
    Rejection {
        label,
        detail: detail.to_string(),
    }
}

async fn read_connection(
    mut stream: TcpStream,
    known: &Admission,
    auth: &Mutex<Authenticator>,
    metrics: &Metrics,
    inbound: &mpsc::Sender<Inbound>,
) -> Result<(), Rejection> {
    let limits = Limits::default();
    let mut buf: Vec<u8> = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    let mut sender: Option<NodeId> = None;
    loop {
        // Decode every complete frame already buffered.
        loop {
            let (fields, used) = match codec::decode(&buf, &limits) {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                Err(e) => return Err(reject(e.label(), e)),
            };
            buf.drain(..used);
            let opened = auth
                .lock()
                .expect("auth lock")
                .open_verified(fields, unix_ms_now())
                .map_err(|e| reject(e.reason(), e))?;
            let msg = Message::from_fields(&opened.fields).map_err(|e| reject(e.label(), e))?;
            let claimed = msg.claimed_sender().unwrap_or_default().to_string();
            if let Some(authentic) = &opened.sender {
                if *authentic != claimed {
                    return Err(reject(
                        "sender_mismatch",
                        format!("{authentic} sent a message as {claimed}"),
                    ));
                }
            }
            match (&sender, &msg) {
                (
                    None,
                    Message::Hello {
                        node_id,
                        fingerprint,
                    },
                ) => {
                    if !known.known.contains(node_id) {
                        return Err(reject("unknown_peer", format!("HELLO from {node_id}")));
                    }
                    known.check_fingerprint(node_id, fingerprint.as_deref())?;
                    sender = Some(node_id.clone());
                }
                (None, _) => return Err(reject("no_hello", "first frame is not HELLO")),
                (Some(from), _) if *from != claimed => {
                    return Err(reject(
                        "sender_mismatch",
                        format!("{from} sent a message as {claimed}"),
                    ));
                }
                (Some(from), _) => {
                    metrics.message_in(msg.kind());
                    let item = Inbound {
                        from: from.clone(),
                        msg,
                    };
                    if inbound.send(item).await.is_err() {
                        return Ok(()); // shutting down
                    }
                }
            }
        }
        if buf.len() > MAX_BUFFERED {
            return Err(reject(
                "frame_too_large",
                format!("{} bytes buffered", buf.len()),
            ));
        }
        match stream.read(&mut chunk).await {
            Ok(0) => return Ok(()),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(_) => return Ok(()),
        }
    }
}
