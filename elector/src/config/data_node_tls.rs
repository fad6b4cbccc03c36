//! `data_node.tls`: the section, its rules, and what `check-config` says
//! about its files (they exist, parse, the key matches the certificate, and
//! none expires within [`EXPIRY_WARNING_DAYS`]).

use super::{DataNodeConfig, DataNodeKind};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// A certificate that expires sooner than this is warned about.
pub const EXPIRY_WARNING_DAYS: i64 = 30;

/// TLS for every connection the elector (and its watchdog) makes to its
/// Redis data node. Redis only: kevy 7.0.0 has no TLS.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DataNodeTlsConfig {
    /// PEM file of the CA certificate(s) the data node's certificate must
    /// chain to (Redis's `tls-ca-cert-file`, usually).
    pub ca_file: PathBuf,
    /// PEM client certificate (chain), for a Redis with `tls-auth-clients
    /// yes` (the default there). With `key_file`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert_file: Option<PathBuf>,
    /// PEM private key of `cert_file`, readable by the elector's user alone
    /// (mode 0600 or 0400), as `password_file`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_file: Option<PathBuf>,
    /// The name the data node's certificate must carry; unset: the host of
    /// `data_node.address` (an IP address then needs an IP SAN).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_name: Option<String>,
}

/// The rules of `data_node.tls` and its files: problems in `errors`, near
/// expiries in `warnings`.
pub(super) fn check(dn: &DataNodeConfig, errors: &mut Vec<String>, warnings: &mut Vec<String>) {
    let Some(tls) = &dn.tls else {
        return;
    };
    if dn.kind == DataNodeKind::Kevy {
        errors.push(
            "data_node.tls: kevy 7.0.0 has no TLS; remove data_node.tls (to encrypt kevy's links, put a TLS terminator in front of it: docs/security.md)"
                .into(),
        );
        return;
    }
    if tls.cert_file.is_some() != tls.key_file.is_some() {
        errors.push(
            "data_node.tls: cert_file and key_file go together (a client certificate and its key)"
                .into(),
        );
        return;
    }
    if let Err(e) = crate::datanode::tls::load(tls) {
        errors.push(e.to_string());
        return;
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let files = [
        ("data_node.tls.ca_file", Some(&tls.ca_file)),
        ("data_node.tls.cert_file", tls.cert_file.as_ref()),
    ];
    for (key, path) in files {
        if let Some(path) = path {
            warnings.extend(expiry_warnings(key, path, now));
        }
    }
}

/// A warning for each certificate in `path` that expired or expires within
/// [`EXPIRY_WARNING_DAYS`] of `now` (Unix seconds).
pub(crate) fn expiry_warnings(key: &'static str, path: &Path, now: i64) -> Vec<String> {
    let Ok(certs) = crate::datanode::tls::read_certificates(key, path) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for der in certs {
        let Ok((_, cert)) = x509_parser::parse_x509_certificate(der.as_ref()) else {
            out.push(format!(
                "{key} {}: a certificate does not parse as X.509",
                path.display()
            ));
            continue;
        };
        let not_after = cert.validity().not_after;
        let left = not_after.timestamp() - now;
        let subject = cert.subject().to_string();
        if left <= 0 {
            out.push(format!(
                "{key} {}: the certificate for {subject:?} expired on {not_after}: renew it (a data node refuses it)",
                path.display()
            ));
        } else if left < EXPIRY_WARNING_DAYS * 86_400 {
            out.push(format!(
                "{key} {}: the certificate for {subject:?} expires on {not_after}, in {} day(s): renew it",
                path.display(),
                left / 86_400
            ));
        }
    }
    out
}
