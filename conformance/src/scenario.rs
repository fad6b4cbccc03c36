//! Scenarios as data: the YAML model, its parsing and validation.
//!
//! A scenario names a topology (number of nodes), an optional backend, the elector
//! timings, a workload, a list of steps the runner plays in order, and the outcome it
//! expects. Node targets in steps are symbolic and resolved when the step runs:
//!
//! | token | meaning |
//! |---|---|
//! | `primary` | the current primary (from the electors' `/status`) |
//! | `old_primary` | the primary just before the first fault of the run |
//! | `replica`, `replica1`, `replica2`, ... | the n-th replica (seeded order) |
//! | `replicas` | every node but the current primary |
//! | `others` | every node not named elsewhere in the same step |
//! | `down` | every node the runner has killed or stopped and not restarted |
//! | `all` | every node |
//! | `n1` .. `nN` | a literal node id |

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

mod step;
pub use step::*;

/// Elector timings passed to every node (entrypoint env vars). These are
/// the suite's fast timings, not the elector's defaults; what a scenario
/// leaves unset here (`fence_margin_ms`) the elector derives itself
/// (`default_fence_margin_ms`: a fifth of down_after), so there is one
/// default per timing and it is the elector's.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Timings {
    pub hb_interval_ms: u64,
    pub down_after_ms: u64,
    pub election_timeout_ms: u64,
    pub backoff_min_ms: u64,
    pub backoff_max_ms: u64,
    /// `timings.fence_margin_ms`; unset: the elector's default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fence_margin_ms: Option<u64>,
}

impl Default for Timings {
    fn default() -> Self {
        Timings {
            hb_interval_ms: 100,
            down_after_ms: 1500,
            election_timeout_ms: 1000,
            backoff_min_ms: 200,
            backoff_max_ms: 800,
            fence_margin_ms: None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Workload {
    pub writers: u32,
    pub readers: u32,
    /// Timeout of `WAIT quorum-1 <ms>` after every SET.
    pub wait_timeout_ms: u64,
    /// Client-side timeout of one command.
    pub op_timeout_ms: u64,
    /// Pause between two writes of one writer.
    pub think_ms: u64,
    /// Bound on the number of writes per writer.
    pub max_ops_per_writer: u64,
    /// Bound on how long writers run.
    pub max_duration_s: u64,
}

impl Default for Workload {
    fn default() -> Self {
        Workload {
            writers: 3,
            readers: 1,
            wait_timeout_ms: 500,
            op_timeout_ms: 1000,
            think_ms: 10,
            max_ops_per_writer: 20_000,
            max_duration_s: 300,
        }
    }
}

/// Expected outcome.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct Expect {
    /// `true`: a new primary must be elected after the first primary-removing fault;
    /// `false`: the primary must never change; absent: not checked.
    pub failover: Option<bool>,
    /// Extra bound beyond `down_after_ms` for the election (default
    /// `election_timeout_ms + backoff_max_ms + 1000`).
    pub election_bound_ms: Option<u64>,
    /// Tolerated overlap of two writable primaries (default `down_after_ms`).
    pub lease_ms: Option<u64>,
    /// Negative control: the checkers are expected to FAIL (a deliberately broken elector).
    pub violation: bool,
}

/// One scenario file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub tags: Vec<String>,
    pub nodes: usize,
    /// How many of the `nodes` are witnesses (the last ones): electors with no
    /// data node that vote and never become primary (docs/protocol.md §4.5).
    #[serde(default)]
    pub witnesses: usize,
    /// Pins the backend (`kevy` | `redis`); otherwise the command line decides.
    #[serde(default)]
    pub backend: Option<String>,
    #[serde(default)]
    pub timings: Timings,
    #[serde(default)]
    pub workload: Workload,
    /// `elector` (default) or `elector-faulty`.
    #[serde(default)]
    pub elector_bin: Option<String>,
    /// YAML appended to every node's generated config (`ELECTOR_EXTRA_YAML`).
    #[serde(default)]
    pub extra_yaml: Option<String>,
    /// Extra entrypoint environment for every node (`DATA_NODE_RESTART: "1"`).
    #[serde(default)]
    pub env: std::collections::BTreeMap<String, String>,
    /// The runner plays the operator of protocol §6.10 (chaos runs): when a
    /// quiet phase or the end finds no primary and nodes below their floors,
    /// it runs `elector accept-data-loss` on the data member that holds every
    /// acknowledged write, if one does, and records it (`runner/operator.rs`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub operator: bool,
    /// Steps are written `- kill: primary` (one-key maps) or `- heal`.
    #[serde(with = "serde_yaml::with::singleton_map_recursive")]
    pub steps: Vec<Step>,
    #[serde(default)]
    pub expect: Expect,
}

impl Scenario {
    /// The longest its steps can take by their own bounds: sleeps, pauses
    /// and the waits' timeouts. The runner's per-scenario limit is at least
    /// this plus a margin, so a long scenario is not cut off by a default
    /// meant for short ones.
    pub fn planned_ms(&self) -> u64 {
        self.steps
            .iter()
            .map(|s| match s {
                Step::Sleep(d)
                | Step::WaitPrimary(d)
                | Step::WaitNewPrimary(d)
                | Step::MeshRestoredWithin(d)
                | Step::NoPrimaryFor(d)
                | Step::Quiet(d) => d.ms(),
                Step::Pause(p)
                | Step::FreezeElector(p)
                | Step::ReadOnlyState(p)
                | Step::StallData(p) => p.duration.map_or(0, |d| d.ms()),
                Step::LoadData(l) => l.budget().as_millis() as u64,
                _ => 0,
            })
            .sum()
    }

    pub fn quorum(&self) -> usize {
        self.nodes / 2 + 1
    }

    /// The witnesses' ids: the last `witnesses` nodes.
    pub fn witness_ids(&self) -> Vec<String> {
        (self.nodes - self.witnesses + 1..=self.nodes)
            .map(|i| format!("n{i}"))
            .collect()
    }

    pub fn is_witness(&self, id: &str) -> bool {
        self.witness_ids().iter().any(|w| w == id)
    }

    /// How many replicas a write must reach (`WAIT` this many) to count as
    /// acknowledged: `quorum − 1`, or with witnesses the cluster's data
    /// promise `d − max(1, q − w)` (docs/protocol.md §4.5).
    pub fn wait_replicas(&self) -> usize {
        if self.witnesses == 0 {
            return self.quorum() - 1;
        }
        let data = self.nodes - self.witnesses;
        let in_election = self.quorum().saturating_sub(self.witnesses).max(1);
        data.saturating_sub(in_election)
    }

    pub fn lease_ms(&self) -> u64 {
        self.expect.lease_ms.unwrap_or(self.timings.down_after_ms)
    }

    pub fn election_bound_ms(&self) -> u64 {
        self.timings.down_after_ms
            + self
                .expect
                .election_bound_ms
                .unwrap_or(self.timings.election_timeout_ms + self.timings.backoff_max_ms + 1000)
    }

    pub fn node_ids(&self) -> Vec<String> {
        (1..=self.nodes).map(|i| format!("n{i}")).collect()
    }

    pub fn has_tag(&self, tag: &str) -> bool {
        self.tags.iter().any(|t| t == tag)
    }

    /// The entrypoint restarts a data node that dies under a running elector
    /// (`env: { DATA_NODE_RESTART: "1" }`): its container stays up.
    pub fn data_node_restarts(&self) -> bool {
        self.env.get("DATA_NODE_RESTART").map(String::as_str) == Some("1")
    }

    /// Parses and validates one scenario from YAML text.
    pub fn parse(file: &str, text: &str) -> Result<Scenario> {
        let s: Scenario = serde_yaml::from_str(text).map_err(|e| Error::Scenario {
            file: file.to_string(),
            message: e.to_string(),
        })?;
        s.validate().map_err(|message| Error::Scenario {
            file: file.to_string(),
            message,
        })?;
        Ok(s)
    }

    pub fn load(path: &Path) -> Result<Scenario> {
        let text = std::fs::read_to_string(path)?;
        Scenario::parse(&path.display().to_string(), &text)
    }

    /// Every `*.yaml` in a directory, sorted by file name.
    pub fn load_dir(dir: &Path) -> Result<Vec<Scenario>> {
        let mut paths: Vec<_> = std::fs::read_dir(dir)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
            .collect();
        paths.sort();
        let scenarios = paths
            .iter()
            .map(|p| Scenario::load(p))
            .collect::<Result<Vec<_>>>()?;
        let mut names = std::collections::BTreeSet::new();
        for s in &scenarios {
            if !names.insert(s.name.clone()) {
                return Err(Error::Scenario {
                    file: dir.display().to_string(),
                    message: format!("duplicate scenario name {}", s.name),
                });
            }
        }
        Ok(scenarios)
    }

    fn validate(&self) -> std::result::Result<(), String> {
        if self.name.is_empty()
            || !self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(format!("name {:?} must be [A-Za-z0-9_-]+", self.name));
        }
        if !(2..=7).contains(&self.nodes) {
            return Err(format!("nodes must be 2..=7, got {}", self.nodes));
        }
        if self.witnesses > 0 && self.nodes - self.witnesses.min(self.nodes) < 2 {
            return Err("witnesses: at least two nodes must have a data node".into());
        }
        if let Some(b) = &self.backend {
            if b != "kevy" && b != "redis" {
                return Err(format!("backend must be kevy or redis, got {b}"));
            }
        }
        if let Some(b) = &self.elector_bin {
            if b != "elector" && b != "elector-faulty" {
                return Err(format!(
                    "elector_bin must be elector or elector-faulty, got {b}"
                ));
            }
        }
        if self.steps.is_empty() {
            return Err("no steps".into());
        }
        let t = &self.timings;
        if t.hb_interval_ms == 0 || t.down_after_ms <= t.hb_interval_ms {
            return Err("timings: need 0 < hb_interval_ms < down_after_ms".into());
        }
        if t.backoff_min_ms > t.backoff_max_ms {
            return Err("timings: backoff_min_ms > backoff_max_ms".into());
        }
        for (i, step) in self.steps.iter().enumerate() {
            for tok in step.all_tokens() {
                validate_token(&tok, self.nodes)
                    .map_err(|e| format!("step {} ({}): {e}", i + 1, step.label()))?;
            }
            if let Step::Split(sides) = step {
                if sides.len() < 2 {
                    return Err(format!("step {}: split needs at least two sides", i + 1));
                }
            }
            if matches!(step, Step::RestartData(_)) && !self.data_node_restarts() {
                return Err(format!(
                    "step {}: restart_data needs env DATA_NODE_RESTART: \"1\" (the supervisor brings the data node back)",
                    i + 1
                ));
            }
            if let Step::RestartData(r) = step {
                if r.lose_data && r.older {
                    return Err(format!(
                        "step {}: restart_data: lose_data and older exclude each other",
                        i + 1
                    ));
                }
            }
            if let Step::Netem(n) = step {
                if !(0.0..=100.0).contains(&n.loss_pct) {
                    return Err(format!("step {}: loss_pct out of range", i + 1));
                }
            }
        }
        Ok(())
    }
}

/// Checks one symbolic target token against the topology.
pub fn validate_token(tok: &str, nodes: usize) -> std::result::Result<(), String> {
    match tok {
        "primary" | "old_primary" | "replica" | "replicas" | "others" | "down" | "all"
        | "witness" => Ok(()),
        t if t.starts_with("replica") => match t["replica".len()..].parse::<usize>() {
            Ok(k) if k >= 1 && k < nodes => Ok(()),
            _ => Err(format!("unknown target {t:?}")),
        },
        t if t.starts_with('n') => match t[1..].parse::<usize>() {
            Ok(k) if k >= 1 && k <= nodes => Ok(()),
            _ => Err(format!("unknown node {t:?}")),
        },
        t => Err(format!("unknown target {t:?}")),
    }
}

#[cfg(test)]
mod tests;
