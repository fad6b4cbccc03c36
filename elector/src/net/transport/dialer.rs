//! Outbound connections (docs/protocol.md §3.2): one per peer, redialled as
//! soon as it is found dead rather than when TCP gives up on it.
//!
//! A connection is dead when the peer has sent nothing on *its* connection
//! to us for `liveness` (heartbeats flow both ways every `hb_interval`, so
//! silence means a broken path or a frozen peer), or when one frame cannot
//! enter the socket within `write_deadline`. A write into a dead path
//! usually still "succeeds" into the kernel's send buffer, so the silence
//! rule is the one that fires after a partition; the write deadline covers
//! a peer that still talks to us but does not read.

use super::{encode, Close, Outbox, Shared};
use crate::protocol::Message;
use crate::tls::peer::{identity_mismatch, presented_names, PeerTls};
use rustls::pki_types::ServerName;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{sleep, sleep_until, timeout, Instant};

/// Longest pause between connections that the peer closes soon after we
/// open them (it refuses our HELLO: an unknown id, a different key). Such a
/// peer is there and says no; asking again every heartbeat would only fill
/// both logs.
const REFUSED_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// Keeps a connection to one peer and drains its outbox into it.
pub(super) async fn dial_loop(
    shared: Arc<Shared>,
    peer: String,
    addr: String,
    outbox: Arc<Outbox>,
) {
    let t = shared.timings;
    let first = Duration::from_millis(20).min(t.redial_max);
    let mut backoff = first;
    loop {
        let mut cap = t.redial_max;
        match timeout(t.connect_timeout, TcpStream::connect(&addr)).await {
            Ok(Ok(stream)) => {
                let _ = stream.set_nodelay(true);
                tracing::debug!(%peer, %addr, "connected");
                let connected = Instant::now();
                let why = match &shared.tls {
                    None => serve(&shared, &peer, stream, &outbox).await,
                    Some(tls) => match secure(&shared, tls, &peer, stream).await {
                        Ok(stream) => serve(&shared, &peer, stream, &outbox).await,
                        Err(why) => why,
                    },
                };
                shared.closed(&peer, "outbound", &why);
                match why {
                    Close::Shutdown => return,
                    // A dead path is replaced at once: the point is to be
                    // heard again within a heartbeat or two of a heal.
                    Close::PeerSilent | Close::WriteStalled => {
                        backoff = first;
                        continue;
                    }
                    _ if connected.elapsed() >= t.liveness => backoff = first,
                    _ => cap = REFUSED_BACKOFF_MAX.max(t.redial_max),
                }
            }
            Ok(Err(e)) => tracing::trace!(%peer, %addr, error = %e, "connect failed"),
            Err(_) => tracing::trace!(%peer, %addr, "connect timed out"),
        }
        sleep(backoff).await;
        backoff = (backoff * 2).min(cap);
    }
}

/// The TLS handshake with `peer` (`tls.election`), within the handshake
/// deadline, and the identity rule: its certificate must carry its id.
async fn secure(
    shared: &Shared,
    tls: &PeerTls,
    peer: &str,
    tcp: TcpStream,
) -> Result<tokio_rustls::client::TlsStream<TcpStream>, Close> {
    // Checked by `Config::check`: every member id is a DNS name.
    let name = ServerName::try_from(peer.to_string()).map_err(|_| Close::Rejected {
        label: "tls_identity",
        detail: format!("member id {peer:?} is not a DNS name"),
    })?;
    let stream = match timeout(shared.timings.handshake, tls.connector().connect(name, tcp)).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => return Err(super::tls_refused(shared, peer, &e)),
        Err(_) => return Err(Close::HandshakeTimeout),
    };
    let presented = presented_names(stream.get_ref().1);
    if let Some(why) = identity_mismatch(peer, &presented) {
        shared.metrics.message_rejected("tls_identity");
        return Err(Close::Rejected {
            label: "tls_identity",
            detail: format!("dialled {peer}: {why}"),
        });
    }
    Ok(stream)
}

/// Writes one frame within the write deadline.
pub(super) async fn write_frame<S: AsyncWrite + Unpin>(
    stream: &mut S,
    bytes: &[u8],
    deadline: Duration,
) -> Result<(), Close> {
    match timeout(deadline, stream.write_all(bytes)).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(_)) => Err(Close::PeerClosed),
        Err(_) => Err(Close::WriteStalled),
    }
}

/// Sends `HELLO`, then the outbox, until the connection is found dead.
///
/// Redialling is safe (§3.2): every connection starts with a `HELLO` sealed
/// with a fresh sequence number, frames are sealed when they are written, so
/// a frame is never sent twice (a frame lost with a dead connection is lost,
/// as the protocol tolerates), and the receiver's replay window accepts the
/// new connection's higher sequence numbers.
async fn serve<S: AsyncRead + AsyncWrite + Unpin>(
    shared: &Shared,
    peer: &str,
    mut stream: S,
    outbox: &Outbox,
) -> Close {
    let t = shared.timings;
    let hello = Message::Hello {
        node_id: shared.me.clone(),
        fingerprint: shared.hello_fingerprint_for(peer),
    };
    if let Err(why) =
        write_frame(&mut stream, &encode(&hello, peer, shared), t.write_deadline).await
    {
        return why;
    }
    let connected = Instant::now();
    let mut probe = [0u8; 64];
    loop {
        while let Some(msg) = outbox.pop() {
            let bytes = encode(&msg, peer, shared);
            if let Err(why) = write_frame(&mut stream, &bytes, t.write_deadline).await {
                return why;
            }
            shared.metrics.message_out(msg.kind());
        }
        let heard = shared
            .heard
            .last(peer)
            .map_or(connected, |h| h.max(connected));
        let dead_at = heard + t.liveness;
        if Instant::now() >= dead_at {
            return Close::PeerSilent;
        }
        // Wait for more to send, noticing meanwhile if the peer hung up or
        // went silent.
        tokio::select! {
            _ = outbox.ready.notified() => {}
            r = stream.read(&mut probe) => match r {
                Ok(0) | Err(_) => return Close::PeerClosed,
                Ok(_) => {} // peers never write on our connection; ignore
            },
            _ = sleep_until(dead_at) => {}
        }
    }
}
