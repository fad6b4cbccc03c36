//! TLS to the data node (`data_node.tls`, docs/security.md "TLS to the
//! data node"): the trust anchors, the optional client certificate, and the
//! one dial every connection the elector makes to its data node goes
//! through (the adapter's client, the tether, the watchdog's adapter).
//!
//! Why rustls through `tokio-rustls` and not the `redis` crate's
//! `tls-rustls` feature: the crate (0.27) checks the certificate against the
//! host it dials and has no separate server name, while a data node is
//! usually dialled at `127.0.0.1` with a certificate naming its host; and it
//! would re-read the PEM files at every reconnect, where here they are
//! parsed once, at load, so a broken file stops `elector run` at start and
//! not at the first failover. The stream is handed to the crate's own
//! multiplexed connection, so `AUTH` and every command are the crate's.
//!
//! The replication gate (`gate.rs`) is a byte pump: a replica's TLS
//! session with the primary's Redis (`tls-replication yes`) passes through
//! it end to end, and the gate needs no certificate.

use super::DataNodeError;
use crate::config::DataNodeTlsConfig;
use redis::aio::MultiplexedConnection;
use rustls::pki_types::ServerName;
use std::pin::Pin;
use std::sync::{Arc, RwLock};
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_rustls::TlsConnector;

pub(crate) use crate::tls::files::read_certificates;
pub use crate::tls::files::TlsFileError;
use crate::tls::files::{provider, read_identity, read_roots, IdentityKeys};

const CLIENT_KEYS: IdentityKeys = IdentityKeys {
    cert: "data_node.tls.cert_file",
    key: "data_node.tls.key_file",
};

/// The loaded `data_node.tls`: ready to dial with. Clones share one
/// [`Dial`], which a reload replaces ([`crate::tls::Reloader`], as for our
/// own ports): each new connection to the data node takes the newest
/// files; open connections keep their sessions.
#[derive(Clone)]
pub(crate) struct DataNodeTls {
    current: Arc<RwLock<Dial>>,
    /// What it was loaded from (for equality, `Debug` and reloads).
    source: DataNodeTlsConfig,
}

/// What one dial needs: the connector and the name to expect.
#[derive(Clone)]
struct Dial {
    connector: TlsConnector,
    server_name: Option<ServerName<'static>>,
}

impl std::fmt::Debug for DataNodeTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataNodeTls")
            .field("source", &self.source)
            .finish()
    }
}

impl PartialEq for DataNodeTls {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}
impl Eq for DataNodeTls {}

impl DataNodeTls {
    fn dial(&self) -> Dial {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl crate::tls::Reloadable for DataNodeTls {
    fn section(&self) -> &'static str {
        "data_node.tls"
    }

    fn files(&self) -> Vec<std::path::PathBuf> {
        let s = &self.source;
        let mut files = vec![s.ca_file.clone()];
        files.extend(s.cert_file.clone());
        files.extend(s.key_file.clone());
        files
    }

    fn reload(&self) -> Result<(), TlsFileError> {
        let fresh = build(&self.source)?;
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = fresh;
        Ok(())
    }
}

/// Reads and checks every file of `cfg` and builds the connector.
pub(crate) fn load(cfg: &DataNodeTlsConfig) -> Result<DataNodeTls, TlsFileError> {
    Ok(DataNodeTls {
        current: Arc::new(RwLock::new(build(cfg)?)),
        source: cfg.clone(),
    })
}

fn build(cfg: &DataNodeTlsConfig) -> Result<Dial, TlsFileError> {
    let roots = read_roots("data_node.tls.ca_file", &cfg.ca_file)?;
    let server_name = cfg
        .server_name
        .as_ref()
        .map(|n| ServerName::try_from(n.clone()).map_err(|_| TlsFileError::ServerName(n.clone())))
        .transpose()?;
    let builder = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsFileError::Setup(format!("data_node.tls: {e}")))?
        .with_root_certificates(roots);
    let config = match (&cfg.cert_file, &cfg.key_file) {
        (Some(cert), Some(key)) => {
            let (certs, key) = read_identity(CLIENT_KEYS, cert, key)?;
            builder
                .with_client_auth_cert(certs, key)
                .map_err(|e| TlsFileError::Setup(format!("data_node.tls: {e}")))?
        }
        _ => builder.with_no_client_auth(),
    };
    Ok(Dial {
        connector: TlsConnector::from(Arc::new(config)),
        server_name,
    })
}

/// The name the data node's certificate must carry: `server_name`, else
/// the host of `address` (an IP address then needs an IP SAN).
fn expected_name(tls: &Dial, address: &str) -> Result<ServerName<'static>, DataNodeError> {
    if let Some(name) = &tls.server_name {
        return Ok(name.clone());
    }
    let (host, _) = address
        .rsplit_once(':')
        .ok_or_else(|| DataNodeError::Resolve(address.into()))?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    ServerName::try_from(host.to_string()).map_err(|_| DataNodeError::Resolve(address.into()))
}

/// A failed TLS handshake or a session the data node ended, in words an
/// operator acts on.
pub(crate) fn explain(address: &str, e: &dyn std::fmt::Display) -> String {
    let text = e.to_string();
    let hint = if text.contains("UnknownIssuer") || text.contains("BadSignature") {
        "the data node's certificate is not signed by a CA in data_node.tls.ca_file"
    } else if text.contains("NotValidForName") {
        "the data node's certificate does not carry the name dialled; set data_node.tls.server_name to a name it carries"
    } else if text.contains("Expired") {
        "a certificate has expired"
    } else if text.contains("CertificateRequired") {
        "the data node requires a client certificate (tls-auth-clients): set data_node.tls.cert_file and key_file"
    } else if text.contains("UnknownCA")
        || text.contains("BadCertificate")
        || text.contains("DecryptError")
    {
        "the data node refused our client certificate (data_node.tls.cert_file): is it signed by the CA in its tls-ca-cert-file?"
    } else if text.contains("InvalidContentType") || text.contains("CorruptMessage") {
        "the data node does not speak TLS on this port (data_node.address must be its tls-port)"
    } else {
        "TLS to the data node failed"
    };
    format!("TLS with {address}: {hint} ({text})")
}

/// Dials `address` over TLS and logs in as `redis` says: one multiplexed
/// connection, its driver spawned. A refused TCP connect is
/// [`DataNodeError::Gone`], as without TLS (restart detection, §6.8).
pub(crate) async fn connect(
    address: &str,
    tls: &DataNodeTls,
    redis: &redis::RedisConnectionInfo,
) -> Result<MultiplexedConnection, DataNodeError> {
    let tls = tls.dial();
    let name = expected_name(&tls, address)?;
    let tcp = tokio::net::TcpStream::connect(address)
        .await
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::ConnectionRefused => {
                DataNodeError::Gone(format!("connection refused ({e})"))
            }
            _ => DataNodeError::Unreachable(format!("connect to {address}: {e}")),
        })?;
    let _ = tcp.set_nodelay(true);
    let stream = tls
        .connector
        .connect(name, tcp)
        .await
        .map_err(|e| DataNodeError::Unreachable(explain(address, &e)))?;
    let failure = Arc::new(std::sync::Mutex::new(None));
    let watched = Watched {
        inner: stream,
        failure: failure.clone(),
    };
    let (conn, driver) = MultiplexedConnection::new(redis, watched)
        .await
        .map_err(|e| {
            // With TLS 1.3 a data node refuses our client certificate after
            // the handshake: its alert ends the crate's first read, and the
            // crate reports only that its driver stopped.
            match failure.lock().ok().and_then(|mut f| f.take()) {
                Some(cause) => DataNodeError::Unreachable(explain(address, &cause)),
                None => super::client::connect_error(e),
            }
        })?;
    tokio::spawn(driver);
    Ok(conn)
}

/// A stream that keeps its last I/O error (a TLS alert, say) for
/// [`connect`] to report, where the `redis` crate's driver drops it.
struct Watched<S> {
    inner: S,
    failure: Arc<std::sync::Mutex<Option<String>>>,
}

impl<S> Watched<S> {
    fn note<T>(&self, r: Poll<std::io::Result<T>>) -> Poll<std::io::Result<T>> {
        if let Poll::Ready(Err(e)) = &r {
            if let Ok(mut f) = self.failure.lock() {
                *f = Some(e.to_string());
            }
        }
        r
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        self.note(r)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.note(r)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let r = Pin::new(&mut self.inner).poll_flush(cx);
        self.note(r)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let r = Pin::new(&mut self.inner).poll_shutdown(cx);
        self.note(r)
    }
}

#[cfg(test)]
#[path = "tls_tests.rs"]
mod tests;
