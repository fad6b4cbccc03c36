//! YAML configuration (docs/interfaces.md §Config): loading, lookup order,
//! and validation with one precise message per problem.

use crate::core::{Backend, CoreConfig, Faults, Member, Preempt, Timings};
use crate::hooks::HooksConfig;
use crate::net::auth::AuthConfig;
use crate::protocol::valid_node_id;
use crate::vip::{Vip, VipConfig, VipConfigError};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use thiserror::Error;

mod check;
mod data_node_tls;
mod ports_tls;
mod prescan;
pub use check::check_cluster;
pub mod reference;
mod render;
mod secret_file;
pub(crate) use data_node_tls::expiry_warnings;
pub use data_node_tls::{DataNodeTlsConfig, EXPIRY_WARNING_DAYS};
pub use ports_tls::{PeerTlsConfig, ServerTlsConfig, TlsConfig};
pub use prescan::{prescan, PrescanError, MAX_BYTES};
pub use render::{BackendArg, RenderArgs, RenderError};
pub use secret_file::{read_secret_file, SecretFileError};

/// Where `elector run` looks when `--config` is not given.
pub const ENV_VAR: &str = "ELECTOR_CONFIG";
pub const DEFAULT_PATH: &str = "/etc/elector/elector.yaml";

/// One node's configuration file (`/etc/elector/elector.yaml`). Unknown keys
/// are refused, with their line and column.
#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// This node's id: at most 32 ASCII bytes, unique in the cluster, and
    /// listed in `peers`.
    pub node_id: String,
    /// The name Sentinel-aware clients ask for (`SENTINEL
    /// get-master-addr-by-name`).
    #[serde(default = "default_cluster_name")]
    pub cluster_name: String,
    /// Where this elector listens.
    pub listen: Listen,
    /// The durable epoch and vote (`state.json`, protocol §5.2), written
    /// with fsync before any vote leaves. The packaged unit may write only
    /// under /var/lib/elector.
    #[serde(default = "default_data_dir")]
    pub data_dir: PathBuf,
    /// Election priority: 0 never stands; sent in heartbeats and used by
    /// `preempt`.
    #[serde(default = "default_priority")]
    pub priority: u32,
    /// A replica further behind its primary than this is not electable, in
    /// the data node's offset unit: bytes on Redis, replicated commands on
    /// kevy 7.0.0.
    #[serde(default = "default_max_lag")]
    pub max_lag_bytes: u64,
    /// This node's data node; absent on a witness (protocol §4.5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_node: Option<DataNodeConfig>,
    /// Every member of the cluster, this node included; the same list on
    /// every node (part of the fingerprint, protocol §3.7).
    pub peers: Vec<PeerConfig>,
    /// Heartbeat, detection and election timings; the same on every node.
    #[serde(default)]
    pub timings: TimingsConfig,
    /// Authentication of election messages and of API writes.
    #[serde(default)]
    pub auth: AuthConfig,
    /// TLS on the elector's own ports: the HTTP API, the Sentinel-compatible
    /// listener and the election transport (docs/security.md). Off by
    /// default; independent of `data_node.tls`.
    #[serde(default, skip_serializing_if = "TlsConfig::is_empty")]
    pub tls: TlsConfig,
    /// Scripts run on transitions, with the event in their environment.
    #[serde(default)]
    pub hooks: HooksConfig,
    /// Priority preemption (protocol §8.1); off by default.
    #[serde(default, skip_serializing_if = "PreemptConfig::is_default")]
    pub preempt: PreemptConfig,
    /// A virtual IP that follows the writable primary (docs/vip.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vip: Option<VipConfig>,
    /// Deliberate bugs for conformance testing; honoured only by a binary
    /// built with the `test-faults` feature (`elector-faulty`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unsafe_test_faults: Vec<String>,
    /// How `elector run` and `elector watchdog` write their log: `text`
    /// (default) or `json` (one object per line, for a log shipper).
    /// `--log-format` on the command line wins.
    #[serde(default, skip_serializing_if = "LogFormat::is_text")]
    #[schemars(extend("default" = "text"))]
    pub log_format: LogFormat,
}

/// The log's line format (`log_format`, `--log-format`).
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Deserialize,
    Serialize,
    clap::ValueEnum,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable `key=value` lines.
    #[default]
    Text,
    /// One JSON object per line: `timestamp`, `level`, `fields.message`
    /// and every field as a JSON value.
    Json,
}

impl LogFormat {
    fn is_text(&self) -> bool {
        *self == LogFormat::Text
    }
}

#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Listen {
    /// The election transport (TCP, RESP2 frames): `IP:PORT`, or `:PORT`
    /// for every interface (dual-stack).
    pub election: String,
    /// The HTTP API (`/status`, health checks, `/metrics`, `/switchover`);
    /// loopback by default. `:PORT` = every interface, `IP:PORT` = exactly that.
    #[serde(default = "default_api")]
    pub api: String,
    /// An optional Sentinel-compatible RESP listener for Sentinel-aware
    /// clients.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sentinel: Option<String>,
}

/// The data node's software.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DataNodeKind {
    /// kevy 7.0.0.
    Kevy,
    /// Redis 7.
    Redis,
}

impl DataNodeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            DataNodeKind::Kevy => "kevy",
            DataNodeKind::Redis => "redis",
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DataNodeConfig {
    /// `kevy` or `redis`.
    pub kind: DataNodeKind,
    /// How this elector reaches its own data node (its client port).
    pub address: String,
    /// Replicas dial a member's replication gate at its client port + this
    /// (both backends; protocol §6.10).
    #[serde(default = "default_repl_offset")]
    pub replication_port_offset: u16,
    /// A Redis ACL user (`AUTH username password`); unset: `AUTH password`
    /// as the `default` user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    /// Sent as a typed field, never spliced into a URL: any characters.
    /// Inline, it is for labs (a warning says so); prefer `password_file`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
    /// A file holding the password (its trailing newline is not part of
    /// it), readable by the elector's user alone (mode 0600 or 0400): a
    /// file its group or others can read is refused. Not with `password`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_file: Option<PathBuf>,
    /// The password read from `password_file` when the config was loaded.
    #[serde(skip)]
    #[schemars(skip)]
    pub(crate) password_from_file: Option<crate::net::auth::Secret>,
    /// TLS for every connection to the data node (Redis only; kevy 7.0.0
    /// has no TLS). Unset: plain TCP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<DataNodeTlsConfig>,
    /// `tls` read and checked when the config was loaded.
    #[serde(skip)]
    #[schemars(skip)]
    pub(crate) tls_loaded: Option<crate::datanode::tls::DataNodeTls>,
    /// kevy: abort this host's hanging connects to the primary a replica
    /// leaves (`ss -K`, needs CAP_NET_ADMIN), so kevy's `REPLICAOF` does
    /// not wait out its 5 s connect timeout; and hold the node's connects
    /// at [`crate::datanode::NOWHERE`] (needs CAP_NET_BIND_SERVICE), so
    /// leaving it does not wait out kevy's 250 ms reconnect backoff
    /// (docs/architecture.md §kevy).
    #[serde(default = "default_abort_stale_connects")]
    pub abort_stale_connects: bool,
    /// kevy: while this node is the primary and a replica lags, send a
    /// no-op frame (`DEL __elector_ack_nudge__`, at most every 20 ms) so the
    /// replica acknowledges at its 100 ms mark instead of at kevy's 1 s
    /// ping; `WAIT` answers that much sooner (docs/architecture.md §kevy).
    #[serde(default = "default_ack_nudge")]
    pub ack_nudge: bool,
    /// kevy: the node's `[replication] reconnect_window_ms` (set it in
    /// kevy's configuration too; kevy's default is 60 s). kevy keeps a
    /// replica's acknowledgements across its own promotions until this long
    /// after it last heard from it, and `WAIT` counts them, so a node that
    /// was a primary less than this (plus 250 ms) ago is promoted only after
    /// (docs/architecture.md §kevy).
    #[serde(default = "default_kevy_reconnect_window_ms")]
    pub kevy_reconnect_window_ms: u64,
    /// kevy: how long a primary whose lease lapsed stays fenced by kevy's
    /// quiesce (writes refused, still a primary, its replicas streaming)
    /// before the elector demotes it to a replica of nowhere. kevy lifts a
    /// quiesce on its own after its `FAILOVER` timeout, so the fence must
    /// not rest on one for long; a demoted primary that regains its lease
    /// is promoted again only under a new epoch (protocol §6.10). Shorter
    /// costs an election after a long quorum loss; longer keeps a flapping
    /// quorum from costing one. 1000..=120000 (docs/architecture.md §kevy).
    #[serde(default = "default_kevy_quiesce_fence_limit_ms")]
    pub kevy_quiesce_fence_limit_ms: u64,
    /// Replicas reach this data node only through the elector's replication
    /// gate, listening on the data port + `replication_port_offset`
    /// (protocol §6.10): it forwards a replica only to the data-node
    /// process the elector validated as a serving primary, so replicas never
    /// sync from a data node that restarted (empty, or from older files) at
    /// any gap. Turn it off only where nothing can restart the data node by
    /// itself; `check-config` warns.
    #[serde(default = "default_replication_gate")]
    pub replication_gate: bool,
    /// kevy, with the gate on: where kevy's own replication listener is, as
    /// an offset from the client port (kevy's `[replication]
    /// listen_port_base` = client port + this): only the gate dials it.
    #[serde(default = "default_local_repl_offset")]
    pub local_replication_port_offset: u16,
}

impl DataNodeConfig {
    /// How the elector and its watchdog log in to the data node: the inline
    /// password, or the one read from `password_file` at load.
    pub(crate) fn credentials(&self) -> crate::datanode::Credentials {
        crate::datanode::Credentials {
            username: self.username.clone(),
            password: self.password.clone().or_else(|| {
                self.password_from_file
                    .as_ref()
                    .map(|s| String::from_utf8_lossy(s.expose()).into_owned())
            }),
            tls: self.tls_loaded.clone(),
        }
    }

    /// Reads `password_file` into the config (after [`Config::check`]
    /// accepted it).
    fn resolve_secrets(&mut self) -> Result<(), SecretFileError> {
        if let Some(path) = &self.password_file {
            self.password_from_file = Some(crate::net::auth::Secret::from_string(
                read_secret_file("data_node.password_file", path)?,
            ));
        }
        Ok(())
    }

    /// Reads and checks the `tls` files into the config (after
    /// [`Config::check`] accepted them).
    fn resolve_tls(&mut self) -> Result<(), crate::datanode::tls::TlsFileError> {
        if let Some(tls) = &self.tls {
            self.tls_loaded = Some(crate::datanode::tls::load(tls)?);
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PeerConfig {
    /// The member's `node_id`.
    pub id: String,
    /// Its election transport address, as this node dials it.
    pub election: String,
    /// Its data node's client address; absent on a witness.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<String>,
    /// Its HTTP API, for `elector status` (each peer's own view) and for
    /// forwarding a switchover to the primary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api: Option<String>,
    /// Its elector's Sentinel-compatible listener as clients reach it. The
    /// listener lists the other members' in `SENTINEL sentinels` and counts
    /// them in `num-other-sentinels`, as real Sentinel does with the
    /// sentinels it hears: clients given one sentinel learn the others, and
    /// redis-py's `min_other_sentinels` finds them (docs/clients.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sentinel: Option<String>,
    /// A member with no data node that votes and echoes but never stands
    /// (protocol §4.5).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub witness: bool,
}

/// `preempt: { enabled, delay_ms }` (protocol §8.1). Set it alike on every
/// node: the primary's own setting decides whether it hands over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct PreemptConfig {
    /// The primary hands over (a planned switchover) to a higher-priority
    /// member once it has been ready for `delay_ms`.
    pub enabled: bool,
    /// How long the higher-priority member must be ready without a break.
    pub delay_ms: u64,
}

impl PreemptConfig {
    fn is_default(&self) -> bool {
        *self == PreemptConfig::default()
    }
}

impl Default for PreemptConfig {
    fn default() -> Self {
        let p = Preempt::default();
        PreemptConfig {
            enabled: p.enabled,
            delay_ms: p.delay_ms,
        }
    }
}

#[derive(Debug, Clone, Copy, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct TimingsConfig {
    /// Heartbeat interval.
    pub hb_interval_ms: u64,
    /// A member not heard for this long is down; a primary that has not
    /// heard a quorum for this long fences (its lease).
    pub down_after_ms: u64,
    /// How long a candidate waits for votes.
    pub election_timeout_ms: u64,
    /// The shortest random wait before standing again after a lost election.
    pub backoff_min_ms: u64,
    /// The longest such wait.
    pub backoff_max_ms: u64,
    /// How often the elector reads its data node (`INFO replication`).
    pub data_poll_ms: u64,
    /// The lease's safety margin (protocol §6.2.1). Unset: a fifth of
    /// `down_after`, at least one heartbeat and at most 1000 ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fence_margin_ms: Option<u64>,
}

impl TimingsConfig {
    /// The configured margin, or the default derived from `down_after`.
    pub fn fence_margin_ms(&self) -> u64 {
        self.fence_margin_ms.unwrap_or_else(|| {
            crate::core::default_fence_margin_ms(self.hb_interval_ms, self.down_after_ms)
        })
    }
}

impl Default for TimingsConfig {
    fn default() -> Self {
        let t = Timings::default();
        TimingsConfig {
            hb_interval_ms: t.hb_interval_ms,
            down_after_ms: t.down_after_ms,
            election_timeout_ms: t.election_timeout_ms,
            backoff_min_ms: t.backoff_min_ms,
            backoff_max_ms: t.backoff_max_ms,
            data_poll_ms: 100,
            fence_margin_ms: None,
        }
    }
}

fn default_cluster_name() -> String {
    "mymaster".into()
}
fn default_data_dir() -> PathBuf {
    PathBuf::from("/var/lib/elector")
}
fn default_priority() -> u32 {
    100
}
fn default_max_lag() -> u64 {
    1024 * 1024
}
/// Whether a listen address binds loopback only (`:PORT` is every
/// interface); parsed as the listener itself parses it.
fn listens_on_loopback_only(spec: &str) -> bool {
    matches!(
        crate::api::listen::parse_listen_spec(spec),
        Ok(crate::api::listen::ListenSpec::Exact(addr)) if addr.ip().is_loopback()
    )
}

/// Loopback unless configured: the API can start a switchover, and with
/// `auth.mode: none` nothing else stands between it and the network.
fn default_api() -> String {
    "127.0.0.1:9300".into()
}
fn default_repl_offset() -> u16 {
    10_000
}

pub(crate) fn default_replication_gate() -> bool {
    true
}

pub(crate) fn default_local_repl_offset() -> u16 {
    11_000
}

fn default_abort_stale_connects() -> bool {
    true
}

fn default_ack_nudge() -> bool {
    true
}

pub(crate) fn default_kevy_reconnect_window_ms() -> u64 {
    crate::datanode::KEVY_DEFAULT_RECONNECT_WINDOW.as_millis() as u64
}

pub(crate) fn default_kevy_quiesce_fence_limit_ms() -> u64 {
    crate::datanode::KEVY_DEFAULT_QUIESCE_FENCE_LIMIT
}

#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: refused before parsing: {source}")]
    Limit { path: PathBuf, source: PrescanError },
    #[error("{path}: {source}")]
    Parse {
        path: PathBuf,
        source: serde_yaml::Error,
    },
    #[error("{path}: {} problem(s):\n  - {}", .problems.len(), .problems.join("\n  - "))]
    Invalid {
        path: PathBuf,
        problems: Vec<String>,
    },
    #[error("no config: pass --config FILE, set {ENV_VAR}, or create {DEFAULT_PATH}")]
    NotFound,
}

/// The config file to use: `--config`, then `$ELECTOR_CONFIG`, then the default path.
pub fn locate(cli: Option<&Path>) -> Result<PathBuf, ConfigError> {
    if let Some(p) = cli {
        return Ok(p.to_path_buf());
    }
    if let Some(p) = std::env::var_os(ENV_VAR).filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    let default = PathBuf::from(DEFAULT_PATH);
    if default.exists() {
        Ok(default)
    } else {
        Err(ConfigError::NotFound)
    }
}

/// A validated config plus its warnings.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub config: Config,
    pub warnings: Vec<String>,
}

pub fn load(path: &Path) -> Result<Loaded, ConfigError> {
    let text = read_bounded(path)?;
    parse(&text, path)
}

/// Reads at most one byte more than [`MAX_BYTES`]: a huge file (or a device
/// that never ends) is refused without reading it all.
fn read_bounded(path: &Path) -> Result<String, ConfigError> {
    use std::io::Read as _;
    let read_error = |source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(read_error)?;
    let mut bytes = Vec::new();
    file.take(MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(read_error)?;
    if bytes.len() as u64 > MAX_BYTES {
        return Err(ConfigError::Limit {
            path: path.to_path_buf(),
            source: PrescanError::TooLarge,
        });
    }
    String::from_utf8(bytes)
        .map_err(|e| read_error(std::io::Error::new(std::io::ErrorKind::InvalidData, e)))
}

/// Validates `text` as the config file `path` (named in errors): the
/// pre-scan's limits, the YAML, then every rule of [`Config::check`].
pub fn parse(text: &str, path: &Path) -> Result<Loaded, ConfigError> {
    prescan(text).map_err(|source| ConfigError::Limit {
        path: path.to_path_buf(),
        source,
    })?;
    let mut config: Config = serde_yaml::from_str(text).map_err(|source| ConfigError::Parse {
        path: path.to_path_buf(),
        source,
    })?;
    let (mut problems, warnings) = config.check();
    if problems.is_empty() {
        if let Some(dn) = config.data_node.as_mut() {
            // Checked a moment ago; a file changed since is refused here.
            if let Err(e) = dn.resolve_secrets() {
                problems.push(e.to_string());
            }
            if let Err(e) = dn.resolve_tls() {
                problems.push(e.to_string());
            }
        }
    }
    if problems.is_empty() {
        Ok(Loaded { config, warnings })
    } else {
        Err(ConfigError::Invalid {
            path: path.to_path_buf(),
            problems,
        })
    }
}

/// `host:port` with a non-empty host and a port in 1..=65535 (IPv6 in brackets).
pub fn valid_address(addr: &str) -> bool {
    let Some((host, port)) = addr.rsplit_once(':') else {
        return false;
    };
    let host_ok = if let Some(inner) = host.strip_prefix('[') {
        inner
            .strip_suffix(']')
            .is_some_and(|ip| ip.parse::<std::net::Ipv6Addr>().is_ok())
    } else {
        !host.is_empty() && !host.contains(':') && !host.contains(char::is_whitespace)
    };
    host_ok && port.parse::<u16>().is_ok_and(|p| p > 0)
}

/// A listen spec: `host:port`, `:port`, or `[v6]:port`.
fn valid_listen(spec: &str) -> bool {
    match spec.strip_prefix(':') {
        Some(port) => port.parse::<u16>().is_ok(),
        None => {
            valid_address(spec) || spec.ends_with(":0") && valid_address(&spec.replace(":0", ":1"))
        }
    }
}

impl Config {
    pub fn timings(&self) -> Timings {
        let t = &self.timings;
        Timings {
            hb_interval_ms: t.hb_interval_ms,
            down_after_ms: t.down_after_ms,
            election_timeout_ms: t.election_timeout_ms,
            backoff_min_ms: t.backoff_min_ms,
            backoff_max_ms: t.backoff_max_ms,
            fence_margin_ms: t.fence_margin_ms(),
        }
    }

    /// The loaded `data_node.tls` as a section the TLS reloader watches;
    /// every clone of it (in [`DataNodeConfig::credentials`]) takes what a
    /// reload reads.
    pub(crate) fn data_node_tls_section(
        &self,
    ) -> Option<std::sync::Arc<dyn crate::tls::Reloadable>> {
        let tls = self.data_node.as_ref()?.tls_loaded.clone()?;
        Some(std::sync::Arc::new(tls))
    }

    /// Re-reads `data_node.tls` on `SIGHUP` and when its files change, for
    /// a process that serves none of our ports (the watchdog); `elector
    /// run` watches it with its ports' TLS. Returns at once without it.
    pub fn data_node_tls_reloader(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        crate::tls::Reloader::new(self.data_node_tls_section().into_iter().collect()).run()
    }

    /// This node is a witness (its own peer entry says so).
    pub fn is_witness(&self) -> bool {
        self.peer(&self.node_id).is_some_and(|p| p.witness)
    }

    pub fn faults(&self) -> Faults {
        let has = |f: &str| self.unsafe_test_faults.iter().any(|x| x == f);
        Faults {
            accept_twice_per_epoch: has("accept_twice_per_epoch"),
            promote_without_quorum: has("promote_without_quorum"),
            no_lease_fencing: has("no_lease_fencing"),
            ignore_floor: has("ignore_floor"),
            repromote_in_epoch: has("repromote_in_epoch"),
            trust_another_stream: has("trust_another_stream"),
            hold_a_lost_lease: has("hold_a_lost_lease"),
            fences_wait_for_persist: has("fences_wait_for_persist"),
            count_an_unproven_join_from_zero: has("count_an_unproven_join_from_zero"),
            trust_a_fresh_start_during_a_join: has("trust_a_fresh_start_during_a_join"),
            trust_a_recorded_reading_during_a_join: has("trust_a_recorded_reading_during_a_join"),
            count_the_joined_sources_offer_against_the_join: has(
                "count_the_joined_sources_offer_against_the_join",
            ),
            doubt_the_joining_process: has("doubt_the_joining_process"),
            trust_the_held_tail: has("trust_the_held_tail"),
            trust_the_replicas_last_poll: has("trust_the_replicas_last_poll"),
        }
    }

    /// The core's configuration (`seed` feeds election backoff jitter).
    pub fn core_config(&self, seed: u64) -> CoreConfig {
        CoreConfig {
            node_id: self.node_id.clone(),
            members: self
                .peers
                .iter()
                .map(|p| Member {
                    id: p.id.clone(),
                    data_addr: p.data.clone(),
                })
                .collect(),
            timings: self.timings(),
            priority: self.priority,
            max_lag: self.max_lag_bytes,
            seed,
            faults: self.faults(),
            backend: Backend {
                promotion_restarts_stream: self
                    .data_node
                    .as_ref()
                    .is_some_and(|d| d.kind == DataNodeKind::Kevy),
            },
            preempt: Preempt {
                enabled: self.preempt.enabled,
                delay_ms: self.preempt.delay_ms,
            },
        }
    }

    /// The local data node's client port (`data_node.address`), if any.
    pub fn data_port(&self) -> Option<u16> {
        let (_, port) = self.data_node.as_ref()?.address.rsplit_once(':')?;
        port.parse().ok()
    }

    /// Where this node's replication gate listens (protocol §6.10): every
    /// address, on the data port + `replication_port_offset` (the address
    /// its peers' data nodes are told to replicate from). `None` without a
    /// data node or with the gate off.
    pub fn gate_listen(&self) -> Option<String> {
        let dn = self.data_node.as_ref().filter(|d| d.replication_gate)?;
        let port = self.data_port()?.checked_add(dn.replication_port_offset)?;
        let any = if dn.address.starts_with('[') {
            "[::]"
        } else {
            "0.0.0.0"
        };
        Some(format!("{any}:{port}"))
    }

    /// Where the gate forwards replicas to: kevy's own replication listener
    /// (client port + `local_replication_port_offset`), or the Redis client
    /// port itself.
    pub fn gate_forward(&self) -> Option<String> {
        let dn = self.data_node.as_ref().filter(|d| d.replication_gate)?;
        match dn.kind {
            DataNodeKind::Redis => Some(dn.address.clone()),
            DataNodeKind::Kevy => {
                let (host, _) = dn.address.rsplit_once(':')?;
                let port = self
                    .data_port()?
                    .checked_add(dn.local_replication_port_offset)?;
                Some(format!("{host}:{port}"))
            }
        }
    }

    /// The checked VIP, if one is configured (docs/vip.md).
    pub fn vip(&self) -> Result<Option<Vip>, VipConfigError> {
        let data_port = self.data_port();
        self.vip
            .as_ref()
            .map(|v| Vip::new(v, data_port))
            .transpose()
    }

    /// What this node's peers must share with it (protocol §3.7): sent in
    /// HELLO, and compared across files by `check-config` on a cluster.
    pub fn fingerprint(&self) -> crate::net::fingerprint::Fingerprint {
        crate::net::fingerprint::Fingerprint::of(
            self.peers.iter().map(|p| (p.id.as_str(), p.witness)),
            &self.timings(),
        )
    }

    pub fn peer(&self, id: &str) -> Option<&PeerConfig> {
        self.peers.iter().find(|p| p.id == id)
    }
}

#[cfg(test)]
mod tests;
