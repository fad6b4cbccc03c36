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
    /// PEM CA certificate(s) `cert_file` chains to: what this port's
    /// clients should trust. Not used to serve. In `tls.api`, the CLI
    /// given this config (`status`, `switchover`, `accept-data-loss`
    /// `--config`) trusts it in place of --ca-file. `check-config` refuses
    /// it missing or without a PEM certificate, and warns when `cert_file`
    /// does not chain to it. Distinct from `client_ca_file`, which
    /// verifies the clients.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<PathBuf>,
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
                if let Some(ca) = &cfg.ca_file {
                    match server::chain_problem(cfg, ca, keys) {
                        Err(e) => errors.push(e.to_string()),
                        Ok(Some(why)) => warnings.push(format!(
                            "{} does not chain to {} ({why}): clients that trust it would refuse this port",
                            keys.cert, keys.ca
                        )),
                        Ok(None) => warnings.extend(super::expiry_warnings(keys.ca, ca, now)),
                    }
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

/// What `check-config` on a whole cluster's files says about `tls`, none
/// of which the fingerprint carries (protocol §3.7 leaves transport
/// security out of it): `tls.election` on some members and not on others
/// is a problem (each side fails the other's handshake: the TLS side logs
/// `tls_handshake`, the plain side a garbled frame), and so is a member's
/// certificate that another member's `ca_file` does not accept; `tls.api`
/// on some members only is a warning (`elector status` and a switchover
/// redirect reach the others with the asked node's scheme).
pub(super) fn check_cluster(
    configs: &[(std::path::PathBuf, Config)],
    problems: &mut Vec<String>,
    warnings: &mut Vec<String>,
) {
    let split = |on: &dyn Fn(&Config) -> bool| {
        let (with, without): (Vec<_>, Vec<_>) = configs.iter().partition(|(_, c)| on(c));
        let names = |v: &[&(std::path::PathBuf, Config)]| {
            v.iter()
                .map(|(p, c)| format!("{} ({})", c.node_id, p.display()))
                .collect::<Vec<_>>()
                .join(", ")
        };
        (!with.is_empty() && !without.is_empty()).then(|| (names(&with), names(&without)))
    };
    if let Some((with, without)) = split(&|c| c.tls.election.is_some()) {
        problems.push(format!(
            "tls.election is set on {with} but not on {without}: a member with mutual TLS and one without refuse each other's connections at the handshake, and the fingerprint does not carry TLS to say so; set it on every member or on none"
        ));
    }
    if let Some((with, without)) = split(&|c| c.tls.api.is_some()) {
        warnings.push(format!(
            "tls.api is set on {with} but not on {without}: `elector status` and a switchover redirect reach every member with the asked node's scheme, so the others look unreachable (docs/security.md \"The CLI over TLS\"); serve it on every member or on none"
        ));
    }
    for (path, c) in configs {
        let Some(ours) = &c.tls.election else {
            continue;
        };
        let Ok(roots) = crate::tls::files::read_roots("tls.election.ca_file", &ours.ca_file) else {
            continue; // refused by that file's own check
        };
        for (other_path, other) in configs {
            let Some(theirs) = other
                .tls
                .election
                .as_ref()
                .filter(|_| other.node_id != c.node_id)
            else {
                continue;
            };
            if let Some(why) = peer::chain_problem(&roots, &theirs.cert_file) {
                problems.push(format!(
                    "{}'s tls.election.cert_file ({}) does not chain to {}'s tls.election.ca_file ({}): {why}; {} would refuse {} at the handshake",
                    other.node_id,
                    other_path.display(),
                    c.node_id,
                    path.display(),
                    c.node_id,
                    other.node_id
                ));
            }
        }
    }
}
