//! A server's TLS (`tls.api`, `tls.sentinel`): its certificate, and when
//! `client_ca_file` is set, the CA its clients must present a certificate
//! from. Re-read on `SIGHUP` or when a file changes ([`super::Reloader`]):
//! each new connection takes the newest; open connections keep theirs.

use super::files::{provider, read_identity, read_roots, IdentityKeys, TlsFileError};
use crate::config::ServerTlsConfig;
use rustls::server::WebPkiClientVerifier;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use tokio_rustls::TlsAcceptor;

/// The config keys of one server's TLS section, for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ServerKeys {
    pub(crate) section: &'static str,
    pub(crate) cert: &'static str,
    pub(crate) key: &'static str,
    pub(crate) client_ca: &'static str,
    pub(crate) ca: &'static str,
    /// ALPN protocols offered (HTTP/1.1 for the API; none for RESP).
    pub(crate) alpn: &'static [&'static [u8]],
}

pub(crate) const API_KEYS: ServerKeys = ServerKeys {
    section: "tls.api",
    cert: "tls.api.cert_file",
    key: "tls.api.key_file",
    client_ca: "tls.api.client_ca_file",
    ca: "tls.api.ca_file",
    alpn: &[b"http/1.1"],
};

pub(crate) const SENTINEL_KEYS: ServerKeys = ServerKeys {
    section: "tls.sentinel",
    cert: "tls.sentinel.cert_file",
    key: "tls.sentinel.key_file",
    client_ca: "tls.sentinel.client_ca_file",
    ca: "tls.sentinel.ca_file",
    alpn: &[],
};

/// A loaded server TLS section; [`ServerTls::acceptor`] gives the newest.
pub(crate) struct ServerTls {
    source: ServerTlsConfig,
    keys: ServerKeys,
    current: RwLock<TlsAcceptor>,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls")
            .field("source", &self.source)
            .finish()
    }
}

fn build(cfg: &ServerTlsConfig, keys: ServerKeys) -> Result<TlsAcceptor, TlsFileError> {
    let setup = |e: rustls::Error| TlsFileError::Setup(format!("{}: {e}", keys.section));
    let identity = IdentityKeys {
        cert: keys.cert,
        key: keys.key,
    };
    let (certs, key) = read_identity(identity, &cfg.cert_file, &cfg.key_file)?;
    let builder = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(setup)?;
    let builder = match &cfg.client_ca_file {
        Some(ca) => {
            let roots = read_roots(keys.client_ca, ca)?;
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
                .build()
                .map_err(|e| TlsFileError::Setup(format!("{}: {e}", keys.client_ca)))?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_single_cert(certs, key).map_err(setup)?;
    config.alpn_protocols = keys.alpn.iter().map(|p| p.to_vec()).collect();
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// Why `cfg.cert_file` does not chain to `ca` (the `ca_file` its clients
/// are told to trust), names aside; `Ok(None)` when it does. An unreadable
/// or certificate-less `ca` is an error naming `keys.ca`.
pub(crate) fn chain_problem(
    cfg: &ServerTlsConfig,
    ca: &std::path::Path,
    keys: ServerKeys,
) -> Result<Option<String>, TlsFileError> {
    let roots = read_roots(keys.ca, ca)?;
    let certs = super::files::read_certificates(keys.cert, &cfg.cert_file)?;
    Ok(super::peer::chains_to(&roots, &certs).err())
}

impl ServerTls {
    /// Reads and checks every file of `cfg`.
    pub(crate) fn load(cfg: &ServerTlsConfig, keys: ServerKeys) -> Result<Arc<Self>, TlsFileError> {
        Ok(Arc::new(ServerTls {
            current: RwLock::new(build(cfg, keys)?),
            source: cfg.clone(),
            keys,
        }))
    }

    /// The acceptor for a new connection.
    pub(crate) fn acceptor(&self) -> TlsAcceptor {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl super::Reloadable for ServerTls {
    fn section(&self) -> &'static str {
        self.keys.section
    }

    fn files(&self) -> Vec<PathBuf> {
        let mut files = vec![self.source.cert_file.clone(), self.source.key_file.clone()];
        files.extend(self.source.client_ca_file.clone());
        files
    }

    fn reload(&self) -> Result<(), TlsFileError> {
        let fresh = build(&self.source, self.keys)?;
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = fresh;
        Ok(())
    }
}
