//! Targets: what runs in the node containers and elects the primary.
//!
//! The suite measures our elector, and, in the same harness, the peers an operator
//! would otherwise pick: kevy's built-in `[cluster]` election and Redis Sentinel. A
//! target decides four things and nothing else, so the runner, the workload, the
//! history and the checkers stay the same for all of them:
//!
//! - how a node's container starts ([`Target::node_spec`]),
//! - how clients find the primary ([`Target::discovery`], played by [`discovery`]),
//! - which scenario steps it can express ([`Target::applies`]),
//! - which settings it ran with and which processes do its control work
//!   ([`Target::settings`], [`Target::control_processes`]).
//!
//! Peers start through a shell command the harness renders (see
//! [`sentinel::start_script`]): the image stays the one the elector runs in,
//! so the lead's `elector-node:latest` serves every target unchanged, and the
//! rendering is plain Rust that unit tests read without Docker.

pub mod discovery;
pub mod elector;
pub mod kevy_builtin;
pub mod sentinel;

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::scenario::{Step, Timings};

/// The targets the suite knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum TargetKind {
    /// Our elector driving kevy 7.0.0.
    #[serde(rename = "elector+kevy")]
    ElectorKevy,
    /// Our elector driving Redis 7.
    #[serde(rename = "elector+redis")]
    ElectorRedis,
    /// kevy 7.0.0 nodes running kevy's own `[cluster]` election, no elector.
    #[serde(rename = "kevy-builtin")]
    KevyBuiltin,
    /// Redis 7 nodes with one `redis-sentinel` beside each.
    #[serde(rename = "redis-sentinel")]
    RedisSentinel,
}

impl TargetKind {
    pub const ALL: [TargetKind; 4] = [
        TargetKind::ElectorKevy,
        TargetKind::ElectorRedis,
        TargetKind::KevyBuiltin,
        TargetKind::RedisSentinel,
    ];

    pub fn name(self) -> &'static str {
        match self {
            TargetKind::ElectorKevy => "elector+kevy",
            TargetKind::ElectorRedis => "elector+redis",
            TargetKind::KevyBuiltin => "kevy-builtin",
            TargetKind::RedisSentinel => "redis-sentinel",
        }
    }

    /// The data node it runs: `kevy` or `redis`.
    pub fn backend(self) -> &'static str {
        match self {
            TargetKind::ElectorKevy | TargetKind::KevyBuiltin => "kevy",
            TargetKind::ElectorRedis | TargetKind::RedisSentinel => "redis",
        }
    }

    /// The name used in run ids and file names. Our targets keep the backend
    /// alone (`kevy`, `redis`), as before targets existed, so earlier reports
    /// stay comparable.
    pub fn slug(self) -> &'static str {
        match self {
            TargetKind::ElectorKevy => "kevy",
            TargetKind::ElectorRedis => "redis",
            TargetKind::KevyBuiltin => "kevy-builtin",
            TargetKind::RedisSentinel => "redis-sentinel",
        }
    }

    pub fn is_elector(self) -> bool {
        matches!(self, TargetKind::ElectorKevy | TargetKind::ElectorRedis)
    }

    /// Our target on the same data node: what a peer's figures are compared with.
    pub fn ours_for(self) -> TargetKind {
        match self.backend() {
            "kevy" => TargetKind::ElectorKevy,
            _ => TargetKind::ElectorRedis,
        }
    }

    /// The target's behaviour.
    pub fn target(self) -> Box<dyn Target> {
        match self {
            TargetKind::ElectorKevy | TargetKind::ElectorRedis => {
                Box::new(elector::Elector { kind: self })
            }
            TargetKind::KevyBuiltin => Box::new(kevy_builtin::KevyBuiltin),
            TargetKind::RedisSentinel => Box::new(sentinel::Sentinel),
        }
    }

    /// The elector target for a `--backend` name.
    pub fn for_backend(backend: &str) -> Option<TargetKind> {
        match backend {
            "kevy" => Some(TargetKind::ElectorKevy),
            "redis" => Some(TargetKind::ElectorRedis),
            _ => None,
        }
    }
}

impl fmt::Display for TargetKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for TargetKind {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        TargetKind::ALL
            .into_iter()
            .find(|k| k.name() == s || k.slug() == s)
            .ok_or_else(|| Error::Target(format!("{s} (targets: {})", names())))
    }
}

/// `elector+kevy, elector+redis, ...` for messages.
pub fn names() -> String {
    TargetKind::ALL.map(|k| k.name()).join(", ")
}

/// Parses `all`, a target name, or a comma-separated list of them.
pub fn parse_list(s: &str) -> Result<Vec<TargetKind>, Error> {
    if s.trim() == "all" {
        return Ok(TargetKind::ALL.to_vec());
    }
    let mut out = vec![];
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let k: TargetKind = part.parse()?;
        if !out.contains(&k) {
            out.push(k);
        }
    }
    if out.is_empty() {
        return Err(Error::Target(format!("empty target list {s:?}")));
    }
    Ok(out)
}

/// One node as the other nodes of the cluster reach it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub id: String,
    /// Container name = host name on the cluster network.
    pub host: String,
    /// Data node client port inside the container (6379 + position).
    pub data_port: u16,
}

/// What a target needs to start a node.
#[derive(Clone, Debug)]
pub struct Topology {
    pub members: Vec<Member>,
    pub timings: Timings,
}

impl Topology {
    pub fn quorum(&self) -> usize {
        self.members.len() / 2 + 1
    }
}

/// How a node's container starts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeSpec {
    /// `sh -c` script that replaces the image's entrypoint, if any.
    pub script: Option<String>,
    /// Port inside the container the harness publishes as the node's control
    /// port (elector API, Sentinel), if any.
    pub control_port: Option<u16>,
}

/// How clients find the primary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Discovery {
    /// The electors' `/status`: the unfenced primary with the highest epoch.
    ElectorStatus,
    /// `SENTINEL get-master-addr-by-name <master>` on any reachable sentinel.
    Sentinel { master: String },
    /// The node whose `INFO replication` says `role:master` (kevy's clients).
    DataRole,
}

/// Whether a target can play a step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Applicability {
    Applies,
    /// The step has no meaning for the target; the report says why.
    NotApplicable(String),
}

/// One setting a target ran with, for the report.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Setting {
    pub name: String,
    pub value: String,
}

impl Setting {
    pub fn new(name: &str, value: impl fmt::Display) -> Setting {
        Setting {
            name: name.to_string(),
            value: value.to_string(),
        }
    }
}

/// The one interface the runner talks to.
pub trait Target: Send + Sync {
    fn kind(&self) -> TargetKind;
    /// How node `index` (0-based, in `topo.members` order) starts.
    fn node_spec(&self, topo: &Topology, index: usize) -> NodeSpec;
    fn discovery(&self) -> Discovery;
    fn applies(&self, step: &Step) -> Applicability;
    /// Settings it runs with for these scenario timings.
    fn settings(&self, timings: &Timings) -> Vec<Setting>;
    /// Process names (`comm`) doing the failover work, measured from /proc.
    fn control_processes(&self) -> &'static [&'static str];
    /// Time the target's own mechanics add to the checkers' election bound
    /// beyond `down_after + election_timeout + backoff`, with the reason.
    fn election_slack_ms(&self) -> u64;
    /// The detection time it runs with, whatever the scenario asks (kevy's is fixed).
    fn detection_ms(&self, timings: &Timings) -> u64 {
        timings.down_after_ms
    }
}

/// Steps that only exist with an elector: its process, its API, its scripts.
pub fn elector_only(step: &Step) -> Option<&'static str> {
    match step {
        Step::KillElector(_) => Some("there is no elector process to kill"),
        Step::MeshRestoredWithin(_) => {
            Some("reads the electors' /status, which this target has no equivalent of")
        }
        Step::Exec(_) => Some("runs a script written against the elector's processes and files"),
        Step::FreezeElector(_) | Step::StopElector(_) | Step::Thaw(_) => {
            Some("there is no elector process to signal")
        }
        Step::RestartElector(_) => Some("there is no elector process to restart"),
        Step::ReadOnlyState(_) => Some("there is no elector state directory"),
        Step::Switchover(_) => Some("uses the elector's POST /switchover"),
        Step::LiftFence(_) => Some("lifts the fence the elector sets on its data node"),
        Step::RestartData(_) => {
            Some("relies on the elector image's supervisor restarting the data node")
        }
        _ => None,
    }
}

/// A peer plays every step but the elector's own.
pub fn peer_applies(step: &Step) -> Applicability {
    match elector_only(step) {
        Some(why) => Applicability::NotApplicable(why.to_string()),
        None => Applicability::Applies,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_target_name_parses_back_to_itself() {
        for k in TargetKind::ALL {
            assert_eq!(k.name().parse::<TargetKind>().unwrap(), k);
            assert_eq!(k.slug().parse::<TargetKind>().unwrap(), k);
        }
        assert!("sentinel".parse::<TargetKind>().is_err());
    }

    #[test]
    fn a_target_list_accepts_all_and_drops_repeats() {
        assert_eq!(parse_list("all").unwrap(), TargetKind::ALL.to_vec());
        assert_eq!(
            parse_list("redis-sentinel, elector+redis,redis-sentinel").unwrap(),
            vec![TargetKind::RedisSentinel, TargetKind::ElectorRedis]
        );
        assert!(parse_list(" , ").is_err());
    }

    #[test]
    fn each_peer_is_compared_with_our_elector_on_its_own_data_node() {
        assert_eq!(TargetKind::KevyBuiltin.ours_for(), TargetKind::ElectorKevy);
        assert_eq!(
            TargetKind::RedisSentinel.ours_for(),
            TargetKind::ElectorRedis
        );
    }

    #[test]
    fn elector_steps_are_not_applicable_to_peers_and_faults_are() {
        let kill_elector = Step::KillElector(crate::scenario::Targets::One("primary".into()));
        let kill = Step::Kill(crate::scenario::Targets::One("primary".into()));
        for k in [TargetKind::KevyBuiltin, TargetKind::RedisSentinel] {
            let t = k.target();
            assert!(matches!(
                t.applies(&kill_elector),
                Applicability::NotApplicable(_)
            ));
            assert_eq!(t.applies(&kill), Applicability::Applies);
        }
        assert_eq!(
            TargetKind::ElectorKevy.target().applies(&kill_elector),
            Applicability::Applies
        );
    }
}
