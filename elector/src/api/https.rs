//! The HTTP API and the Sentinel-compatible listener over TLS (`tls.api`,
//! `tls.sentinel`; docs/security.md "TLS on our ports"). axum 0.7 serves a
//! plain `TcpListener` only, so over TLS each connection is accepted here,
//! its handshake done with the newest certificates, and the session handed
//! to hyper with the same router as the plain API.

use super::http::{router, ApiState};
use crate::tls::server::ServerTls;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

/// Time a client has to complete its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The server side of a TLS handshake within [`HANDSHAKE_TIMEOUT`]. A
/// client refused (no certificate when one is required, one from another
/// CA, or plain text) ends here with rustls's reason.
pub(crate) async fn handshake(
    acceptor: &TlsAcceptor,
    tcp: TcpStream,
) -> std::io::Result<TlsStream<TcpStream>> {
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
        Ok(Ok(stream)) => Ok(stream),
        Ok(Err(e)) => Err(std::io::Error::new(
            e.kind(),
            format!("TLS handshake refused: {e}"),
        )),
        Err(_) => Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "no TLS handshake within 10 s",
        )),
    }
}

/// Serves the API over TLS on `listener` until `shutdown` completes.
pub(crate) async fn serve_tls(
    listener: tokio::net::TcpListener,
    state: ApiState,
    tls: Arc<ServerTls>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    if let Ok(addr) = listener.local_addr() {
        tracing::info!(%addr, "HTTP API listening (TLS)");
    }
    let app = router(state);
    tokio::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            _ = &mut shutdown => return Ok(()),
            a = listener.accept() => match a {
                Ok(a) => a,
                Err(e) => {
                    // Usually EMFILE; back off instead of spinning.
                    tracing::warn!(error = %e, "API accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let _ = tcp.set_nodelay(true);
        let acceptor = tls.acceptor();
        let service = TowerToHyperService::new(app.clone());
        tokio::spawn(async move {
            let stream = match handshake(&acceptor, tcp).await {
                Ok(s) => s,
                Err(e) => {
                    tracing::debug!(%peer, error = %e, "API client refused");
                    return;
                }
            };
            let served = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
            if let Err(e) = served {
                tracing::debug!(%peer, error = %e, "API connection ended");
            }
        });
    }
}
