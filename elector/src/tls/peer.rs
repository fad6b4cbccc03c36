//! The election transport's mutual TLS (`tls.election`, docs/security.md
//! "The identity rule"): every member presents a certificate from one CA,
//! both when it dials and when it is dialled, and a certificate counts as
//! member `id`'s only if it carries `id` as a DNS subject alternative name.
//!
//! rustls checks the chain on both sides; the name is checked here, after
//! the handshake, against the member the dialler meant to reach or the one
//! a `HELLO` claims ([`identity_mismatch`]), so a refusal names both the id
//! expected and the names presented, where a handshake error could not.

use super::files::{dns_names, provider, read_identity, read_roots, IdentityKeys, TlsFileError};
use crate::config::PeerTlsConfig;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::{ParsedCertificate, WebPkiClientVerifier};
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use tokio_rustls::{TlsAcceptor, TlsConnector};

pub(crate) const KEYS: IdentityKeys = IdentityKeys {
    cert: "tls.election.cert_file",
    key: "tls.election.key_file",
};
const CA_KEY: &str = "tls.election.ca_file";

/// A member id a certificate can carry: a DNS name (not an IP address).
pub(crate) fn valid_id(id: &str) -> bool {
    matches!(ServerName::try_from(id), Ok(ServerName::DnsName(_)))
}

/// Why the names a peer presented are not `expected`'s, or `None` when
/// they are (an exact, case-insensitive DNS name match; no wildcards).
pub(crate) fn identity_mismatch(expected: &str, presented: &[String]) -> Option<String> {
    if presented.iter().any(|n| n.eq_ignore_ascii_case(expected)) {
        return None;
    }
    Some(format!(
        "the peer is member {expected} but its certificate names {presented:?}: a member's certificate must carry its node_id as a DNS name (docs/security.md)"
    ))
}

/// The DNS names of the certificate the other end of `conn` presented.
pub(crate) fn presented_names(conn: &rustls::CommonState) -> Vec<String> {
    conn.peer_certificates()
        .and_then(|c| c.first())
        .map(dns_names)
        .unwrap_or_default()
}

/// What a server certificate is accepted for, its name aside (the caller
/// checks names where they matter): chaining to a CA (the election
/// transport: a member's name is checked against the member dialled, see
/// the module docs), or being one exact certificate (the watchdog's own
/// API, `tls::pinned`).
#[derive(Debug)]
pub(crate) enum Accept {
    ChainsTo(RootCertStore),
    Exactly(CertificateDer<'static>),
}

/// A server-certificate verifier by [`Accept`]; the handshake's signatures
/// are checked against the certificate either way.
#[derive(Debug)]
pub(crate) struct NamelessVerifier {
    pub(crate) accept: Accept,
    pub(crate) provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for NamelessVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match &self.accept {
            Accept::ChainsTo(roots) => {
                let cert = ParsedCertificate::try_from(end_entity)?;
                rustls::client::verify_server_cert_signed_by_trust_anchor(
                    &cert,
                    roots,
                    intermediates,
                    now,
                    self.provider.signature_verification_algorithms.all,
                )?;
            }
            Accept::Exactly(pinned) if pinned.as_ref() == end_entity.as_ref() => {}
            Accept::Exactly(_) => {
                return Err(rustls::Error::InvalidCertificate(
                    rustls::CertificateError::ApplicationVerificationFailure,
                ))
            }
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// Whether `certs` (a certificate and its chain) chain to `roots`, names
/// aside (the check a [`NamelessVerifier`] makes in a handshake), for
/// `check-config`; the reason when not.
pub(crate) fn chains_to(
    roots: &RootCertStore,
    certs: &[CertificateDer<'static>],
) -> Result<(), String> {
    let (first, rest) = certs.split_first().ok_or("no certificate")?;
    let cert = ParsedCertificate::try_from(first).map_err(|e| e.to_string())?;
    rustls::client::verify_server_cert_signed_by_trust_anchor(
        &cert,
        roots,
        rest,
        UnixTime::now(),
        provider().signature_verification_algorithms.all,
    )
    .map_err(|e| e.to_string())
}

/// Why the certificate in `cert_file` does not chain to `roots`, or `None`
/// when it does or cannot be read (its own config's check says so).
pub(crate) fn chain_problem(roots: &RootCertStore, cert_file: &std::path::Path) -> Option<String> {
    let certs = super::files::read_certificates(KEYS.cert, cert_file).ok()?;
    chains_to(roots, &certs).err()
}

/// Both ends of the transport's TLS, built from one set of files.
struct Ends {
    connector: TlsConnector,
    acceptor: TlsAcceptor,
}

fn build(cfg: &PeerTlsConfig, me: &str) -> Result<Ends, TlsFileError> {
    let setup = |e: rustls::Error| TlsFileError::Setup(format!("tls.election: {e}"));
    let roots = read_roots(CA_KEY, &cfg.ca_file)?;
    let (certs, key) = read_identity(KEYS, &cfg.cert_file, &cfg.key_file)?;
    if let Some(why) = identity_mismatch(me, &dns_names(&certs[0])) {
        return Err(TlsFileError::Setup(format!(
            "tls.election.cert_file {}: {why}",
            cfg.cert_file.display()
        )));
    }
    let client = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(setup)?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(NamelessVerifier {
            accept: Accept::ChainsTo(roots.clone()),
            provider: provider(),
        }))
        .with_client_auth_cert(certs.clone(), key.clone_key())
        .map_err(setup)?;
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
        .build()
        .map_err(|e| TlsFileError::Setup(format!("{CA_KEY}: {e}")))?;
    let server = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(setup)?
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs, key)
        .map_err(setup)?;
    Ok(Ends {
        connector: TlsConnector::from(Arc::new(client)),
        acceptor: TlsAcceptor::from(Arc::new(server)),
    })
}

/// The loaded `tls.election`; re-read by [`super::Reloader`].
pub(crate) struct PeerTls {
    source: PeerTlsConfig,
    me: String,
    current: RwLock<Ends>,
}

impl std::fmt::Debug for PeerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerTls")
            .field("source", &self.source)
            .finish()
    }
}

impl PeerTls {
    /// Reads and checks every file; `me`'s own certificate must carry `me`.
    pub(crate) fn load(cfg: &PeerTlsConfig, me: &str) -> Result<Arc<Self>, TlsFileError> {
        Ok(Arc::new(PeerTls {
            current: RwLock::new(build(cfg, me)?),
            source: cfg.clone(),
            me: me.to_string(),
        }))
    }

    pub(crate) fn connector(&self) -> TlsConnector {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .connector
            .clone()
    }

    pub(crate) fn acceptor(&self) -> TlsAcceptor {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .acceptor
            .clone()
    }
}

impl super::Reloadable for PeerTls {
    fn section(&self) -> &'static str {
        "tls.election"
    }

    fn files(&self) -> Vec<PathBuf> {
        vec![
            self.source.ca_file.clone(),
            self.source.cert_file.clone(),
            self.source.key_file.clone(),
        ]
    }

    fn reload(&self) -> Result<(), TlsFileError> {
        let fresh = build(&self.source, &self.me)?;
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = fresh;
        Ok(())
    }
}
