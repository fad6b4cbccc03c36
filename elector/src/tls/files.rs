//! The PEM files every TLS setting of the elector reads: certificates,
//! trust anchors, and a private key checked to belong to its certificate.
//! One reader for `data_node.tls`, `tls.api`, `tls.sentinel` and
//! `tls.election`, so each is refused the same way, naming its key.

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use thiserror::Error;

/// Why a TLS setting cannot be used. Each names the key and the file.
#[derive(Debug, Error)]
pub enum TlsFileError {
    #[error("{key} {path}: cannot read it: {source}")]
    Read {
        key: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{key} {path}: no PEM certificate in it ({detail})")]
    NoCertificate {
        key: &'static str,
        path: PathBuf,
        detail: String,
    },
    #[error("{key} {path}: a certificate in it is unusable: {detail}")]
    BadCertificate {
        key: &'static str,
        path: PathBuf,
        detail: String,
    },
    #[error("{key} {path}: no PEM private key in it ({detail})")]
    NoKey {
        key: &'static str,
        path: PathBuf,
        detail: String,
    },
    #[error("{key_key} {key} does not belong to {cert_key} {cert}: {detail}")]
    KeyMismatch {
        cert_key: &'static str,
        cert: PathBuf,
        key_key: &'static str,
        key: PathBuf,
        detail: String,
    },
    #[error(transparent)]
    Secret(#[from] crate::config::SecretFileError),
    #[error("data_node.tls.server_name {0:?} is not a DNS name or an IP address")]
    ServerName(String),
    #[error("{0}")]
    Setup(String),
}

/// The names of a certificate/key pair's config keys, for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct IdentityKeys {
    pub(crate) cert: &'static str,
    pub(crate) key: &'static str,
}

/// The one crypto provider: ring, already in the tree.
pub(crate) fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read(key: &'static str, path: &Path) -> Result<Vec<u8>, TlsFileError> {
    std::fs::read(path).map_err(|source| TlsFileError::Read {
        key,
        path: path.to_path_buf(),
        source,
    })
}

/// Every PEM certificate in `path`, at least one.
pub(crate) fn read_certificates(
    key: &'static str,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, TlsFileError> {
    let bytes = read(key, path)?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsFileError::NoCertificate {
            key,
            path: path.to_path_buf(),
            detail: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(TlsFileError::NoCertificate {
            key,
            path: path.to_path_buf(),
            detail: "no -----BEGIN CERTIFICATE----- block".into(),
        });
    }
    Ok(certs)
}

/// The trust anchors in `path` (a CA file), at least one.
pub(crate) fn read_roots(
    key: &'static str,
    path: &Path,
) -> Result<rustls::RootCertStore, TlsFileError> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in read_certificates(key, path)? {
        roots.add(cert).map_err(|e| TlsFileError::BadCertificate {
            key,
            path: path.to_path_buf(),
            detail: e.to_string(),
        })?;
    }
    Ok(roots)
}

/// A certificate chain and its private key, checked to belong together;
/// the key file is a secret (mode 0600/0400, `config::read_secret_file`).
pub(crate) fn read_identity(
    keys: IdentityKeys,
    cert_file: &Path,
    key_file: &Path,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), TlsFileError> {
    let certs = read_certificates(keys.cert, cert_file)?;
    let pem = crate::config::read_secret_file(keys.key, key_file)?;
    let key = PrivateKeyDer::from_pem_slice(pem.as_bytes()).map_err(|e| TlsFileError::NoKey {
        key: keys.key,
        path: key_file.to_path_buf(),
        detail: e.to_string(),
    })?;
    let mismatch = |detail: String| TlsFileError::KeyMismatch {
        cert_key: keys.cert,
        cert: cert_file.to_path_buf(),
        key_key: keys.key,
        key: key_file.to_path_buf(),
        detail,
    };
    let signer = provider()
        .key_provider
        .load_private_key(key.clone_key())
        .map_err(|e| mismatch(format!("the key is not usable: {e}")))?;
    CertifiedKey::new(certs.clone(), signer)
        .keys_match()
        .map_err(|e| mismatch(e.to_string()))?;
    Ok((certs, key))
}

/// The DNS names (subject alternative names) of a DER certificate: what
/// the election transport compares with a member id (docs/security.md).
pub(crate) fn dns_names(cert: &CertificateDer<'_>) -> Vec<String> {
    use x509_parser::extensions::GeneralName;
    let Ok((_, parsed)) = x509_parser::parse_x509_certificate(cert.as_ref()) else {
        return Vec::new();
    };
    let Ok(Some(san)) = parsed.subject_alternative_name() else {
        return Vec::new();
    };
    san.value
        .general_names
        .iter()
        .filter_map(|n| match n {
            GeneralName::DNSName(d) => Some(d.to_string()),
            _ => None,
        })
        .collect()
}
