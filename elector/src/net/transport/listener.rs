//! Inbound connections (docs/protocol.md §3.2, §3.3): admission caps, the
//! `HELLO` deadline and the idle deadline.
//!
//! A connection is *pending* from accept until its `HELLO` is accepted. The
//! number of pending connections is capped in total and per source address,
//! and each has `handshake` to finish its `HELLO`; so a flood of half-open or
//! trickling connections costs a bounded number of sockets for a bounded
//! time, and never file descriptors the established peers need. Excess
//! connections are closed at once, before a byte is read.

use super::{Close, Inbound, Shared};
use crate::net::auth::unix_ms_now;
use crate::net::codec::{self, Limits};
use crate::net::fingerprint::{Fingerprint, FingerprintForm};
use crate::protocol::{heartbeat_form, Message, NodeId};
use crate::tls::peer::{identity_mismatch, presented_names};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tokio::time::{timeout, timeout_at, Instant};

/// Largest read buffer for one inbound connection. The codec refuses any
/// length prefix above its limits before allocating, so this is also the
/// most memory one connection can hold.
const MAX_BUFFERED: usize = 64 * 1024;

/// Counts pending connections, in total and per source address.
pub(crate) struct Admission {
    total_cap: usize,
    per_source_cap: usize,
    pending: Mutex<(usize, HashMap<IpAddr, usize>)>,
}

/// A pending connection's slot; dropping it frees the slot.
pub(crate) struct Ticket {
    admission: Arc<Admission>,
    source: IpAddr,
}

impl Admission {
    pub(crate) fn new(total_cap: usize, per_source_cap: usize) -> Arc<Self> {
        Arc::new(Admission {
            total_cap,
            per_source_cap,
            pending: Mutex::new((0, HashMap::new())),
        })
    }

    /// A slot for a new connection from `source`, or why there is none.
    pub(crate) fn admit(self: &Arc<Self>, source: IpAddr) -> Result<Ticket, Close> {
        // IPv4 clients of a dual-stack listener show up as ::ffff:a.b.c.d.
        let source = source.to_canonical();
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        if p.0 >= self.total_cap {
            return Err(Close::PendingCap);
        }
        let from_source = p.1.entry(source).or_insert(0);
        if *from_source >= self.per_source_cap {
            return Err(Close::PerSourceCap);
        }
        *from_source += 1;
        p.0 += 1;
        Ok(Ticket {
            admission: Arc::clone(self),
            source,
        })
    }

    #[cfg(test)]
    pub(crate) fn pending(&self) -> usize {
        self.pending.lock().unwrap_or_else(|e| e.into_inner()).0
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut p = self
            .admission
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        p.0 -= 1;
        if let Some(n) = p.1.get_mut(&self.source) {
            *n -= 1;
            if *n == 0 {
                p.1.remove(&self.source);
            }
        }
    }
}

pub(super) async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    inbound: mpsc::Sender<Inbound>,
) {
    let t = shared.timings;
    let admission = Admission::new(t.pending_total, t.pending_per_source);
    loop {
        match listener.accept().await {
            Ok((stream, remote)) => {
                let ticket = match admission.admit(remote.ip()) {
                    Ok(ticket) => ticket,
                    Err(why) => {
                        drop(stream);
                        shared.closed(&remote.to_string(), "inbound", &why);
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let (shared, inbound) = (Arc::clone(&shared), inbound.clone());
                tokio::spawn(async move {
                    let why = match shared.tls.clone() {
                        None => read_connection(stream, None, ticket, &shared, &inbound).await,
                        Some(tls) => {
                            let source = remote.to_string();
                            let accept = tls.acceptor().accept(stream);
                            match timeout(t.handshake, accept).await {
                                Ok(Ok(stream)) => {
                                    let names = presented_names(stream.get_ref().1);
                                    read_connection(stream, Some(names), ticket, &shared, &inbound)
                                        .await
                                }
                                Ok(Err(e)) => super::tls_refused(&shared, &source, &e),
                                Err(_) => Close::HandshakeTimeout,
                            }
                        }
                    };
                    shared.closed(&remote.to_string(), "inbound", &why);
                });
            }
            Err(e) => {
                // Out of file descriptors, most likely: established
                // connections keep working; try again shortly.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// A peer that sends no fingerprint runs an elector from before the
/// extension and is let in (a rolling upgrade must keep working); one that
/// sends a different or malformed fingerprint is refused, and the refusal
/// names what differs (§3.7). What it let in says which form the peer
/// reads (§3.8).
fn fingerprint_mismatch(
    shared: &Shared,
    peer: &str,
    theirs: Option<&str>,
) -> Result<FingerprintForm, String> {
    let Some(theirs) = theirs else {
        return Ok(FingerprintForm::Absent);
    };
    let Some(parsed) = Fingerprint::parse(theirs) else {
        return Err(format!(
            "HELLO from {peer} with a malformed fingerprint {theirs:?}"
        ));
    };
    let diff = shared.fingerprint.differences(&parsed);
    if diff.is_empty() {
        return Ok(FingerprintForm::of(Some(&parsed)));
    }
    Err(format!(
        "{peer} runs another configuration: {}; refusing its messages until the timings and members agree (protocol §3.7)",
        diff.join(", ")
    ))
}

/// A decode error, named for what it most likely is when the bytes open a
/// TLS record (a handshake, `0x16 0x03`): a member with `tls.election`
/// dialling this plain-text one. The fingerprint does not carry TLS, so
/// without this the plain side would log only a bad byte.
fn plain_text_hint(buf: &[u8], e: codec::DecodeError) -> String {
    if buf.starts_with(&[0x16, 0x03]) {
        format!("{e}: the peer speaks TLS (tls.election is set there and not here); set tls.election on every member or on none")
    } else {
        e.to_string()
    }
}

fn reject(shared: &Shared, label: &'static str, detail: impl ToString) -> Close {
    shared.metrics.message_rejected(label);
    Close::Rejected {
        label,
        detail: detail.to_string(),
    }
}

/// Reads one inbound connection until it is closed, and says why.
/// `presented`: with `tls.election`, the DNS names of the peer's
/// certificate, which must include the id its `HELLO` claims.
pub(super) async fn read_connection<S: AsyncRead + Unpin>(
    mut stream: S,
    presented: Option<Vec<String>>,
    ticket: Ticket,
    shared: &Shared,
    inbound: &mpsc::Sender<Inbound>,
) -> Close {
    let t = shared.timings;
    let limits = Limits::default();
    let handshake_by = Instant::now() + t.handshake;
    let mut ticket = Some(ticket);
    let mut last_frame = Instant::now();
    let mut buf: Vec<u8> = Vec::with_capacity(512);
    let mut chunk = [0u8; 4096];
    let mut sender: Option<NodeId> = None;
    let mut generation = 0;
    let mut newest: Option<watch::Receiver<u64>> = None;
    loop {
        // Decode every complete frame already buffered.
        loop {
            let (fields, used) = match codec::decode(&buf, &limits) {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                Err(e) => return reject(shared, e.label(), plain_text_hint(&buf, e)),
            };
            buf.drain(..used);
            let opened = match shared
                .auth
                .lock()
                .expect("auth lock")
                .open_verified(fields, unix_ms_now())
            {
                Ok(opened) => opened,
                Err(e) => return reject(shared, e.reason(), e),
            };
            let msg = match Message::from_fields(&opened.fields) {
                Ok(msg) => msg,
                Err(e) => return reject(shared, e.label(), e),
            };
            let claimed = msg.claimed_sender().unwrap_or_default().to_string();
            if let Some(authentic) = &opened.sender {
                if *authentic != claimed {
                    return reject(
                        shared,
                        "sender_mismatch",
                        format!("{authentic} sent a message as {claimed}"),
                    );
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
                    if !shared.known.contains(node_id) {
                        return reject(shared, "unknown_peer", format!("HELLO from {node_id}"));
                    }
                    if let Some(why) = presented
                        .as_deref()
                        .and_then(|names| identity_mismatch(node_id, names))
                    {
                        return reject(
                            shared,
                            "tls_identity",
                            format!("HELLO claims {node_id}: {why}"),
                        );
                    }
                    match fingerprint_mismatch(shared, node_id, fingerprint.as_deref()) {
                        Ok(form) => shared.peer_hello(node_id, form),
                        Err(detail) => return reject(shared, "config_mismatch", detail),
                    }
                    sender = Some(node_id.clone());
                    ticket = None; // no longer pending
                    if let Some(tx) = shared.newest.get(node_id) {
                        tx.send_modify(|g| {
                            *g += 1;
                            generation = *g;
                        });
                        newest = Some(tx.subscribe());
                    }
                }
                (None, _) => return reject(shared, "no_hello", "first frame is not HELLO"),
                (Some(from), _) if *from != claimed => {
                    return reject(
                        shared,
                        "sender_mismatch",
                        format!("{from} sent a message as {claimed}"),
                    );
                }
                (Some(from), _) => {
                    if let Some(form) = heartbeat_form(&opened.fields) {
                        shared.peer_reads(from, form);
                    }
                    shared.metrics.message_in(msg.kind());
                    let item = Inbound {
                        from: from.clone(),
                        msg,
                    };
                    if inbound.send(item).await.is_err() {
                        return Close::Shutdown;
                    }
                }
            }
            if let Some(from) = &sender {
                shared.heard.mark(from);
            }
            last_frame = Instant::now();
        }
        if buf.len() > MAX_BUFFERED {
            return reject(
                shared,
                "frame_too_large",
                format!("{} bytes buffered", buf.len()),
            );
        }
        // Before HELLO the handshake deadline applies, after it the idle
        // one; both count whole frames, so a trickle of bytes does not
        // keep a connection alive.
        let (until, why) = match &ticket {
            Some(_) => (handshake_by, Close::HandshakeTimeout),
            None => (last_frame + t.liveness, Close::Idle),
        };
        let superseded = async {
            match newest.as_mut() {
                Some(rx) => {
                    let _ = rx.wait_for(|g| *g != generation).await;
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            r = timeout_at(until, stream.read(&mut chunk)) => match r {
                Err(_) => return why,
                Ok(Ok(0)) | Ok(Err(_)) => return Close::PeerClosed,
                Ok(Ok(n)) => buf.extend_from_slice(&chunk[..n]),
            },
            _ = superseded => return Close::Superseded,
        }
    }
}
