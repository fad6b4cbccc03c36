//! The watchdog's TLS to its own elector's API (`tls.api`, docs/security.md
//! "The watchdog over TLS").
//!
//! The watchdog runs beside the elector and reads the same config, so it
//! knows the exact certificate the API presents (`tls.api.cert_file`): it
//! trusts that certificate and nothing else, whatever the names in it. A CA
//! and a host name would not do: the watchdog dials loopback, which an
//! API certificate for the host's DNS name does not cover, and without a
//! TLS answer the watchdog takes the elector for silent and fences its data
//! node every lease. The files are read for each probe, so a certificate
//! rotated under `SIGHUP` is pinned again at once. An API that requires
//! client certificates (`client_ca_file`) is shown the API's own
//! certificate and key: it must chain to that CA.

use std::sync::Arc;

use rustls::ClientConfig;

use super::files::{provider, read_certificates, read_identity, IdentityKeys, TlsFileError};
use super::peer::{Accept, NamelessVerifier};
use crate::config::ServerTlsConfig;

const API_KEYS: IdentityKeys = IdentityKeys {
    cert: "tls.api.cert_file",
    key: "tls.api.key_file",
};

/// A client that trusts only the API's own certificate (the first in
/// `tls.api.cert_file`) and, when the API asks for client certificates,
/// presents that certificate and its key.
pub(crate) fn client_for_own_api(api: &ServerTlsConfig) -> Result<ClientConfig, TlsFileError> {
    let provider = provider();
    let cert = read_certificates(API_KEYS.cert, &api.cert_file)?
        .into_iter()
        .next()
        .expect("read_certificates returns at least one");
    let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsFileError::Setup(e.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(NamelessVerifier {
            accept: Accept::Exactly(cert),
            provider,
        }));
    let mut config = match &api.client_ca_file {
        Some(_) => {
            let (certs, key) = read_identity(API_KEYS, &api.cert_file, &api.key_file)?;
            builder
                .with_client_auth_cert(certs, key)
                .map_err(|e| TlsFileError::Setup(e.to_string()))?
        }
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// Why the API would refuse the watchdog's client certificate (its own,
/// see [`client_for_own_api`]) when it requires client certificates; `None`
/// when it would accept it or requires none. `check-config` warns with it.
pub(crate) fn watchdog_refusal(api: &ServerTlsConfig) -> Option<String> {
    let client_ca = api.client_ca_file.as_ref()?;
    let roots = super::files::read_roots("tls.api.client_ca_file", client_ca).ok()?;
    let certs = read_certificates(API_KEYS.cert, &api.cert_file).ok()?;
    let verifier =
        rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
            .build()
            .ok()?;
    let now = rustls::pki_types::UnixTime::now();
    verifier
        .verify_client_cert(&certs[0], &certs[1..], now)
        .err()
        .map(|e| e.to_string())
}
