//! One client connection: read requests, answer every complete one already
//! buffered (pipelining), deliver subscribed events, give up on a client that
//! does not take its replies.

use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::watch;

use super::commands::{self, Session};
use super::reply::Reply;
use super::Shared;
use crate::net::codec;

/// A client that does not take its replies within this time is dropped.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves one client (a TCP stream, or a TLS session over one: `tls.sentinel`)
/// until it quits, closes, sends a frame the decoder refuses, or the
/// listener stops.
pub(super) async fn serve<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    shared: &Shared,
    mut stop: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let mut session = Session::new(shared.next_client_id.fetch_add(1, Ordering::Relaxed));
    let limits = codec::Limits::default();
    let mut buf: Vec<u8> = Vec::with_capacity(1024);
    loop {
        let mut out = Vec::new();
        let mut quit = false;
        loop {
            match codec::decode(&buf, &limits) {
                Ok(Some((fields, used))) => {
                    buf.drain(..used);
                    let answer = commands::execute(&fields, shared, &mut session);
                    for r in answer.replies {
                        r.encode(&mut out, session.proto);
                    }
                    if answer.close {
                        quit = true;
                        break;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    Reply::err(format!("ERR Protocol error: {e}")).encode(&mut out, session.proto);
                    write(&mut stream, &out).await?;
                    return Ok(());
                }
            }
        }
        if !out.is_empty() {
            write(&mut stream, &out).await?;
        }
        if quit {
            return Ok(());
        }
        tokio::select! {
            n = stream.read_buf(&mut buf) => {
                if n? == 0 {
                    return Ok(());
                }
            }
            ev = session.subs.next_event() => {
                let Some(ev) = ev else { return Ok(()) };
                let mut out = Vec::new();
                for r in session.subs.deliveries(&ev) {
                    r.encode(&mut out, session.proto);
                }
                if !out.is_empty() {
                    write(&mut stream, &out).await?;
                }
            }
            _ = stop.changed() => return Ok(()),
        }
    }
}

async fn write<S: AsyncWrite + Unpin>(stream: &mut S, bytes: &[u8]) -> std::io::Result<()> {
    match tokio::time::timeout(WRITE_TIMEOUT, stream.write_all(bytes)).await {
        Ok(r) => r,
        Err(_) => Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "client is not reading its replies",
        )),
    }
}
