//! `tls`: TLS on the elector's own ports (docs/security.md "TLS on our
//! ports"): the HTTP API and the Sentinel-compatible listener with one
//! shape ([`ServerTlsConfig`]), the election transport with mutual TLS
//! ([`PeerTlsConfig`]). Each is optional and off by default; none touches
//! the data node, so a kevy cluster can turn them on as well.

use super::Config;
use crate::tls::{files::IdentityKeys, peer, server};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// TLS on the elector's own listeners. Each entry turns TLS on for its port
/// alone; a port without one stays plain text.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// The HTTP API (`listen.api`) over HTTPS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api: Option<ServerTlsConfig>,
    /// The Sentinel-compatible listener (`listen.sentinel`) over TLS
    /// (`redis-cli --tls`, a Sentinel client's TLS option).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sentinel: Option<ServerTlsConfig>,
    /// The election transport with mutual TLS: every member presents a
    /// certificate carrying its own `node_id` as a DNS name and checks its
    /// peers' the same way. Set it on every member or on none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub election: Option<PeerTlsConfig>,
}

impl TlsConfig {
    pub(super) fn is_empty(&self) -> bool {
        *self == TlsConfig::default()
    }
}

/// A server's TLS: its certificate and key, and optionally the CA its
/// clients' certificates must chain to.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ServerTlsConfig {
    /// PEM certificate (chain) the port presents.
    pub cert_file: PathBuf,
    /// PEM private key of `cert_file`, readable by the elector's user
    /// alone (mode 0600 or 0400).
    pub key_file: PathBuf,
    /// PEM CA certificate(s): when set, a client must present a
    /// certificate that chains to one of them, or the handshake fails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_ca_file: Option<PathBuf>,
}

/// The election transport's mutual TLS: one CA for every member.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PeerTlsConfig {
    /// PEM CA certificate(s) every member's certificate chains to.
    pub ca_file: PathBuf,
    /// This member's PEM certificate (chain), presented both when it dials
    /// and when it is dialled; it must carry `node_id` as a DNS name
    /// (subject alternative name).
    pub cert_file: PathBuf,
    /// PEM private key of `cert_file` (mode 0600 or 0400).
    pub key_file: PathBuf,
}

/// What `check-config` and `elector run` say about `tls`: unusable files
/// and missing listeners in `errors`, near expiries in `warnings`.
pub(super) fn check(config: &Config, errors: &mut Vec<String>, warnings: &mut Vec<String>) {
    let tls = &config.tls;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let servers = [
        (&tls.api, server::API_KEYS, true),
        (
            &tls.sentinel,
            server::SENTINEL_KEYS,
            config.listen.sentinel.is_some(),
        ),
    ];
    for (section, keys, listening) in servers {
        let Some(cfg) = section else { continue };
        if !listening {
            errors.push(format!(
                "{}: there is no listen.sentinel to serve over TLS; remove it or set listen.sentinel",
                keys.section
            ));
            continue;
        }
        match server::ServerTls::load(cfg, keys) {
            Err(e) => errors.push(e.to_string()),
            Ok(_) => {
                warnings.extend(super::expiry_warnings(keys.cert, &cfg.cert_file, now));
                if let Some(ca) = &cfg.client_ca_file {
                    warnings.extend(super::expiry_warnings(keys.client_ca, ca, now));
                }
                if keys.section == server::API_KEYS.section {
                    if let Some(why) = crate::tls::pinned::watchdog_refusal(cfg) {
                        warnings.push(format!(
                            "tls.api.cert_file is not a client certificate tls.api.client_ca_file accepts ({why}): the watchdog presents it to poll its elector and would be refused, then fence the data node (docs/security.md \"The watchdog over TLS\")"
                        ));
                    }
                }
            }
        }
    }
    let Some(cfg) = &tls.election else { return };
    for p in &config.peers {
        if !peer::valid_id(&p.id) {
            errors.push(format!(
                "tls.election: member id {:?} is not a DNS name, so no certificate can carry it (docs/security.md: the identity rule); use letters, digits, '-' and '.'",
                p.id
            ));
        }
    }
    match peer::PeerTls::load(cfg, &config.node_id) {
        Err(e) => errors.push(e.to_string()),
        Ok(_) => {
            let keys: IdentityKeys = peer::KEYS;
            warnings.extend(super::expiry_warnings(keys.cert, &cfg.cert_file, now));
            warnings.extend(super::expiry_warnings(
                "tls.election.ca_file",
                &cfg.ca_file,
                now,
            ));
        }
    }
}
