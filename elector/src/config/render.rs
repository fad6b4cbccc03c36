//! `elector render-config`: writes a node's config from a compact cluster
//! description, through the elector's own types.
//!
//! The schema used to be written five times in three languages (the lab
//! entrypoint echoing YAML, the Ansible template and its Python validator,
//! conformance's copy of the timings, `config.rs`). Here the flags fill a
//! [`Config`], the optional `--extra` YAML is merged over it, and the result
//! is read back with the same `deny_unknown_fields` deserializer and
//! [`Config::check`] as `elector run` uses: a key the elector does not know,
//! or a value it would refuse, fails the render, not the start.

use super::{Config, DataNodeConfig, DataNodeKind, Listen, PeerConfig, TimingsConfig, MAX_BYTES};
use crate::hooks::HooksConfig;
use crate::net::auth::AuthConfig;
use serde_yaml::Value;
use std::path::PathBuf;
use thiserror::Error;

/// The cluster as the lab and the Ansible role describe it: peers by host,
/// fixed ports, data ports by position.
#[derive(Debug, Clone, clap::Args)]
pub struct RenderArgs {
    /// This node's id (one of --peers).
    #[arg(long)]
    pub node_id: String,
    /// Every member, this one included, in order: ID=HOST,ID=HOST,...
    #[arg(long, value_delimiter = ',', required = true)]
    pub peers: Vec<String>,
    /// Members that are witnesses (no data node, protocol §4.5).
    #[arg(long, value_delimiter = ',')]
    pub witnesses: Vec<String>,
    /// The data nodes' kind.
    #[arg(long, value_enum, default_value = "kevy")]
    pub backend: BackendArg,
    /// `cluster_name`: the name Sentinel-aware clients ask for.
    #[arg(long, default_value = "mymaster")]
    pub cluster_name: String,
    /// Election port of every member.
    #[arg(long, default_value_t = 7400)]
    pub election_port: u16,
    /// API port of every member.
    #[arg(long, default_value_t = 9300)]
    pub api_port: u16,
    /// Port of this node's Sentinel-compatible listener (0: none).
    #[arg(long, default_value_t = 0)]
    pub sentinel_port: u16,
    /// This node's election listener (default 0.0.0.0:ELECTION_PORT).
    #[arg(long)]
    pub listen_election: Option<String>,
    /// This node's API listener (default :API_PORT, every interface).
    #[arg(long)]
    pub listen_api: Option<String>,
    /// Data port of the first member; member k's is base + k × step.
    #[arg(long, default_value_t = 6379)]
    pub data_port_base: u16,
    /// 1: one data port per member (kevy 7 tells replicas apart by client
    /// port only); 0: every member on the base port.
    #[arg(long, default_value_t = 1)]
    pub data_port_step: u16,
    /// How this node's elector reaches its own data node (default
    /// 127.0.0.1:<its data port>).
    #[arg(long)]
    pub data_address: Option<String>,
    /// `data_dir`: the durable epoch and vote.
    #[arg(long, default_value = "/var/lib/elector")]
    pub data_dir: PathBuf,
    /// `timings.hb_interval_ms` (default: the protocol's, 200).
    #[arg(long)]
    pub hb_interval_ms: Option<u64>,
    /// `timings.down_after_ms` (default 5000).
    #[arg(long)]
    pub down_after_ms: Option<u64>,
    /// `timings.election_timeout_ms` (default 3000).
    #[arg(long)]
    pub election_timeout_ms: Option<u64>,
    /// `timings.backoff_min_ms` (default 1000).
    #[arg(long)]
    pub backoff_min_ms: Option<u64>,
    /// `timings.backoff_max_ms` (default 5000).
    #[arg(long)]
    pub backoff_max_ms: Option<u64>,
    /// `timings.data_poll_ms` (default 100).
    #[arg(long)]
    pub data_poll_ms: Option<u64>,
    /// `timings.fence_margin_ms` (default: a fifth of down_after_ms, at
    /// least one heartbeat, at most 1000).
    #[arg(long)]
    pub fence_margin_ms: Option<u64>,
    /// A YAML file merged over the result (maps key by key, anything else
    /// replaced): auth, hooks, priority, data_node.password, ...
    #[arg(long)]
    pub extra: Option<PathBuf>,
    /// Write here (atomically, via FILE.tmp) instead of stdout.
    #[arg(long, short)]
    pub output: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendArg {
    Kevy,
    Redis,
}

#[derive(Debug, Error)]
pub enum RenderError {
    #[error("--peers entry {0:?} is not ID=HOST")]
    BadPeer(String),
    #[error("--peers does not list --node-id {0:?}")]
    SelfMissing(String),
    #[error("--witnesses names {0:?}, which is not in --peers")]
    UnknownWitness(String),
    #[error("data port of member {index} overflows (base {base} + {index} × {step})")]
    PortOverflow { index: usize, base: u16, step: u16 },
    #[error("--extra {path}: {message}")]
    Extra { path: PathBuf, message: String },
    #[error("the rendered config is refused: {0}")]
    Invalid(String),
    #[error("writing {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// `host:port`, bracketing an IPv6 literal.
fn host_port(host: &str, port: u16) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

impl RenderArgs {
    fn data_port(&self, index: usize) -> Result<u16, RenderError> {
        u16::try_from(index)
            .ok()
            .and_then(|k| k.checked_mul(self.data_port_step))
            .and_then(|off| self.data_port_base.checked_add(off))
            .ok_or(RenderError::PortOverflow {
                index,
                base: self.data_port_base,
                step: self.data_port_step,
            })
    }

    /// The config the flags describe, before `--extra`.
    pub fn config(&self) -> Result<Config, RenderError> {
        let mut peers = Vec::new();
        let mut own_port = None;
        for (index, entry) in self.peers.iter().map(|p| p.trim()).enumerate() {
            let (id, host) = entry
                .split_once('=')
                .filter(|(id, host)| !id.is_empty() && !host.is_empty())
                .ok_or_else(|| RenderError::BadPeer(entry.to_string()))?;
            let witness = self.witnesses.iter().any(|w| w == id);
            let port = self.data_port(index)?;
            if id == self.node_id {
                own_port = Some(port);
            }
            peers.push(PeerConfig {
                id: id.to_string(),
                election: host_port(host, self.election_port),
                data: (!witness).then(|| host_port(host, port)),
                api: Some(host_port(host, self.api_port)),
                sentinel: (self.sentinel_port > 0).then(|| host_port(host, self.sentinel_port)),
                witness,
            });
        }
        let own_port = own_port.ok_or_else(|| RenderError::SelfMissing(self.node_id.clone()))?;
        if let Some(w) = self
            .witnesses
            .iter()
            .find(|w| !peers.iter().any(|p| &p.id == *w))
        {
            return Err(RenderError::UnknownWitness(w.clone()));
        }
        let defaults = TimingsConfig::default();
        let kind = match self.backend {
            BackendArg::Kevy => DataNodeKind::Kevy,
            BackendArg::Redis => DataNodeKind::Redis,
        };
        let is_witness = self.witnesses.contains(&self.node_id);
        Ok(Config {
            node_id: self.node_id.clone(),
            cluster_name: self.cluster_name.clone(),
            listen: Listen {
                election: self
                    .listen_election
                    .clone()
                    .unwrap_or_else(|| format!("0.0.0.0:{}", self.election_port)),
                api: self
                    .listen_api
                    .clone()
                    .unwrap_or_else(|| format!(":{}", self.api_port)),
                sentinel: (self.sentinel_port > 0).then(|| format!(":{}", self.sentinel_port)),
            },
            data_dir: self.data_dir.clone(),
            priority: super::default_priority(),
            max_lag_bytes: super::default_max_lag(),
            vip: None,
            tls: super::TlsConfig::default(),
            log_format: super::LogFormat::Text,
            data_node: (!is_witness).then(|| DataNodeConfig {
                kind,
                address: self
                    .data_address
                    .clone()
                    .unwrap_or_else(|| format!("127.0.0.1:{own_port}")),
                replication_port_offset: super::default_repl_offset(),
                username: None,
                password: None,
                password_file: None,
                password_from_file: None,
                tls: None,
                tls_loaded: None,
                abort_stale_connects: super::default_abort_stale_connects(),
                ack_nudge: super::default_ack_nudge(),
                kevy_reconnect_window_ms: super::default_kevy_reconnect_window_ms(),
                kevy_quiesce_fence_limit_ms: super::default_kevy_quiesce_fence_limit_ms(),
                replication_gate: super::default_replication_gate(),
                local_replication_port_offset: super::default_local_repl_offset(),
            }),
            peers,
            timings: TimingsConfig {
                hb_interval_ms: self.hb_interval_ms.unwrap_or(defaults.hb_interval_ms),
                down_after_ms: self.down_after_ms.unwrap_or(defaults.down_after_ms),
                election_timeout_ms: self
                    .election_timeout_ms
                    .unwrap_or(defaults.election_timeout_ms),
                backoff_min_ms: self.backoff_min_ms.unwrap_or(defaults.backoff_min_ms),
                backoff_max_ms: self.backoff_max_ms.unwrap_or(defaults.backoff_max_ms),
                data_poll_ms: self.data_poll_ms.unwrap_or(defaults.data_poll_ms),
                fence_margin_ms: self.fence_margin_ms,
            },
            auth: AuthConfig::default(),
            hooks: HooksConfig::default(),
            preempt: super::PreemptConfig::default(),
            unsafe_test_faults: Vec::new(),
        })
    }

    /// The whole render: flags, `--extra` merged over them, read back and
    /// checked as `elector run` would. Returns the YAML and the warnings.
    pub fn render(&self) -> Result<(String, Vec<String>), RenderError> {
        let config = self.config()?;
        let mut value =
            serde_yaml::to_value(&config).map_err(|e| RenderError::Invalid(e.to_string()))?;
        if let Some(path) = &self.extra {
            let extra_error = |message: String| RenderError::Extra {
                path: path.clone(),
                message,
            };
            let text = std::fs::read_to_string(path).map_err(|e| extra_error(e.to_string()))?;
            if text.len() as u64 > MAX_BYTES {
                return Err(extra_error(super::PrescanError::TooLarge.to_string()));
            }
            super::prescan(&text).map_err(|e| extra_error(e.to_string()))?;
            let extra: Value =
                serde_yaml::from_str(&text).map_err(|e| extra_error(e.to_string()))?;
            match extra {
                Value::Null => {}
                Value::Mapping(_) => merge(&mut value, extra),
                _ => return Err(extra_error("not a YAML map".into())),
            }
        }
        let yaml =
            serde_yaml::to_string(&value).map_err(|e| RenderError::Invalid(e.to_string()))?;
        let loaded = super::parse(&yaml, std::path::Path::new("rendered config"))
            .map_err(|e| RenderError::Invalid(e.to_string()))?;
        Ok((yaml, loaded.warnings))
    }
}

/// Merges `over` into `base`: maps key by key (recursively), anything else
/// replaced.
fn merge(base: &mut Value, over: Value) {
    match (base, over) {
        (Value::Mapping(base), Value::Mapping(over)) => {
            for (k, v) in over {
                match base.get_mut(&k) {
                    Some(slot) => merge(slot, v),
                    None => {
                        base.insert(k, v);
                    }
                }
            }
        }
        (slot, over) => *slot = over,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: RenderArgs,
    }

    fn args(flags: &[&str]) -> RenderArgs {
        let mut argv = vec!["render-config"];
        argv.extend_from_slice(flags);
        Cli::parse_from(argv).args
    }

    #[test]
    fn a_lab_node_is_rendered_with_one_data_port_per_member_and_passes_check() {
        let a = args(&[
            "--node-id",
            "n2",
            "--peers",
            "n1=h1,n2=h2,n3=h3",
            "--backend",
            "redis",
        ]);
        let (yaml, _) = a.render().unwrap();
        let config = super::super::parse(&yaml, std::path::Path::new("t"))
            .unwrap()
            .config;
        assert_eq!(config.data_node.unwrap().address, "127.0.0.1:6380");
        assert_eq!(config.peers[2].data.as_deref(), Some("h3:6381"));
        assert_eq!(config.peers[0].election, "h1:7400");
        assert_eq!(config.timings.fence_margin_ms, None);
        assert_eq!(
            config.auth.max_skew_ms,
            crate::net::auth::DEFAULT_MAX_SKEW_MS
        );
    }

    #[test]
    fn every_member_is_rendered_with_its_sentinel_listener_when_the_node_has_one() {
        let peers = "n1=h1,n2=h2,n3=h3";
        let with = args(&[
            "--node-id",
            "n1",
            "--peers",
            peers,
            "--sentinel-port",
            "26379",
        ]);
        let config = with.config().unwrap();
        let listed: Vec<_> = config.peers.iter().map(|p| p.sentinel.as_deref()).collect();
        assert_eq!(
            listed,
            [Some("h1:26379"), Some("h2:26379"), Some("h3:26379")]
        );
        with.render().unwrap();
        let without = args(&["--node-id", "n1", "--peers", peers])
            .config()
            .unwrap();
        assert!(without.peers.iter().all(|p| p.sentinel.is_none()));
    }

    #[test]
    fn a_witness_gets_no_data_node_and_its_peer_entry_says_witness() {
        let a = args(&[
            "--node-id",
            "n3",
            "--peers",
            "n1=h1,n2=h2,n3=h3",
            "--witnesses",
            "n3",
        ]);
        let config = a.config().unwrap();
        assert!(config.data_node.is_none());
        assert!(config.peers[2].witness && config.peers[2].data.is_none());
        a.render().unwrap();
    }

    #[test]
    fn extra_yaml_is_merged_key_by_key_and_read_back_with_the_real_schema() {
        let dir = tempfile::tempdir().unwrap();
        let extra = dir.path().join("extra.yaml");
        std::fs::write(
            &extra,
            "priority: 7\ntimings: { fence_margin_ms: 250 }\ndata_node: { kind: redis, password: 'p@ss:w/rd#1' }\n",
        )
        .unwrap();
        let mut a = args(&[
            "--node-id",
            "n1",
            "--peers",
            "n1=h1,n2=h2,n3=h3",
            "--hb-interval-ms",
            "100",
        ]);
        a.extra = Some(extra.clone());
        let (yaml, _) = a.render().unwrap();
        let config = super::super::parse(&yaml, std::path::Path::new("t"))
            .unwrap()
            .config;
        assert_eq!(config.priority, 7);
        assert_eq!(config.timings.fence_margin_ms, Some(250));
        assert_eq!(config.timings.hb_interval_ms, 100);
        let dn = config.data_node.unwrap();
        assert_eq!(dn.password.as_deref(), Some("p@ss:w/rd#1"));
        assert_eq!(dn.address, "127.0.0.1:6379");

        std::fs::write(&extra, "priorty: 7\n").unwrap();
        let err = a.render().unwrap_err().to_string();
        assert!(err.contains("unknown field `priorty`"), "{err}");
    }

    #[test]
    fn a_peer_list_without_this_node_or_with_a_stray_witness_is_refused() {
        let a = args(&["--node-id", "n9", "--peers", "n1=h1,n2=h2"]);
        assert!(matches!(a.config(), Err(RenderError::SelfMissing(_))));
        let a = args(&[
            "--node-id",
            "n1",
            "--peers",
            "n1=h1,n2=h2",
            "--witnesses",
            "n7",
        ]);
        assert!(matches!(a.config(), Err(RenderError::UnknownWitness(_))));
        let a = args(&["--node-id", "n1", "--peers", "n1=h1,n2"]);
        assert!(matches!(a.config(), Err(RenderError::BadPeer(_))));
    }
}
