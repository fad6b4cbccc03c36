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

use std::fmt;
use std::path::Path;

use faults::FaultKind;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::{Error, Result};

/// A duration in milliseconds, written `500ms`, `2s`, `1.5s` or as a bare number (ms).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Dur(pub u64);

impl Dur {
    pub fn ms(self) -> u64 {
        self.0
    }
    pub fn as_duration(self) -> std::time::Duration {
        std::time::Duration::from_millis(self.0)
    }
}

impl std::str::FromStr for Dur {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        let t = s.trim();
        let bad = || Error::Duration(s.to_string());
        let (num, mult) = if let Some(n) = t.strip_suffix("ms") {
            (n, 1.0)
        } else if let Some(n) = t.strip_suffix('s') {
            (n, 1000.0)
        } else if let Some(n) = t.strip_suffix('m') {
            (n, 60_000.0)
        } else {
            (t, 1.0)
        };
        let v: f64 = num.trim().parse().map_err(|_| bad())?;
        if !v.is_finite() || v < 0.0 {
            return Err(bad());
        }
        Ok(Dur((v * mult).round() as u64))
    }
}

impl fmt::Display for Dur {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_multiple_of(1000) {
            write!(f, "{}s", self.0 / 1000)
        } else {
            write!(f, "{}ms", self.0)
        }
    }
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Repr {
            Num(u64),
            Str(String),
        }
        match Repr::deserialize(d)? {
            Repr::Num(n) => Ok(Dur(n)),
            Repr::Str(s) => s.parse().map_err(serde::de::Error::custom),
        }
    }
}

impl Serialize for Dur {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

/// One target or a list of targets (`kill: primary`, `kill: [primary, replica1]`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Targets {
    One(String),
    Many(Vec<String>),
}

impl Targets {
    pub fn tokens(&self) -> Vec<String> {
        match self {
            Targets::One(s) => vec![s.clone()],
            Targets::Many(v) => v.clone(),
        }
    }
}

impl Default for Targets {
    fn default() -> Self {
        Targets::One("all".into())
    }
}

/// `pause: primary` or `pause: primary for 2s` (pause, wait, unpause).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PauseSpec {
    pub targets: Targets,
    pub duration: Option<Dur>,
}

impl<'de> Deserialize<'de> for PauseSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let t = Targets::deserialize(d)?;
        match t {
            Targets::One(s) => {
                if let Some((who, dur)) = s.split_once(" for ") {
                    let dur: Dur = dur.parse().map_err(serde::de::Error::custom)?;
                    Ok(PauseSpec {
                        targets: Targets::One(who.trim().to_string()),
                        duration: Some(dur),
                    })
                } else {
                    Ok(PauseSpec {
                        targets: Targets::One(s),
                        duration: None,
                    })
                }
            }
            many => Ok(PauseSpec {
                targets: many,
                duration: None,
            }),
        }
    }
}

impl Serialize for PauseSpec {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match (&self.targets, self.duration) {
            (Targets::One(t), Some(d)) => s.serialize_str(&format!("{t} for {d}")),
            (t, _) => t.serialize(s),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BridgeSpec {
    pub left: Targets,
    pub middle: String,
    pub right: Targets,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OneWaySpec {
    /// Packets from these nodes ...
    pub from: Targets,
    /// ... do not reach these nodes (on connections the `from` side opens).
    pub to: Targets,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetemSpec {
    #[serde(default)]
    pub targets: Targets,
    #[serde(default)]
    pub delay_ms: u64,
    #[serde(default)]
    pub jitter_ms: u64,
    #[serde(default)]
    pub loss_pct: f64,
}

/// One step of a scenario.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// Wait until exactly one unfenced primary is visible (fails the run after the timeout).
    WaitPrimary(Dur),
    /// Wait until a primary other than the one the last primary-removing fault
    /// took away (or, without one, the one before the last fault) is visible.
    WaitNewPrimary(Dur),
    StartWriters,
    StopWriters,
    Sleep(Dur),
    /// SIGKILL the whole container (node crash).
    Kill(Targets),
    /// SIGKILL only the elector process; the entrypoint then stops the container (see docs).
    KillElector(Targets),
    /// SIGKILL only the data node process (kevy / redis-server).
    KillData(Targets),
    /// Run a shell command inside the target nodes: a part failing alone
    /// (`pkill -STOP -x elector`, a fence lifted by hand, a read-only data
    /// dir, a forged election message). The node stays up.
    Exec(ExecSpec),
    /// Start stopped nodes; stop (SIGTERM) and start running ones.
    Restart(Targets),
    Pause(PauseSpec),
    Unpause(Targets),
    /// Cut one or more nodes from every other node.
    Isolate(Targets),
    /// Cut the cluster into sides that cannot talk to each other.
    Split(Vec<Targets>),
    /// Two sides that cannot talk, and one middle node that sees both.
    Bridge(BridgeSpec),
    /// Traffic from `from` to `to` dropped; `to` still reaches `from`.
    OneWay(OneWaySpec),
    /// Remove every partition and netem rule.
    Heal,
    /// Fails unless, within the bound, every elector hears every peer
    /// (a message within 3 heartbeats), all agree on one primary, and every
    /// other data node is linked to it (issue 9: whole again after a heal).
    MeshRestoredWithin(Dur),
    /// Fails if a writable primary appears within this long: a cluster that
    /// must not elect (a witness refusing a lagging replica, §4.5).
    NoPrimaryFor(Dur),
    Netem(NetemSpec),
    ClearNetem,
    /// SIGSTOP of the elector process alone (data node and watchdog run on).
    /// `for D`: SIGCONT after D; otherwise `thaw` or the end phase sends it.
    FreezeElector(PauseSpec),
    /// SIGTERM of the elector alone: a clean stop fences the data node, then
    /// the entrypoint stops the node (`restart` brings it back).
    StopElector(Targets),
    /// The data node SIGKILLed under its running elector and started again
    /// by the supervisor (needs `env: { DATA_NODE_RESTART: "1" }`), with its
    /// files or wiped.
    RestartData(RestartDataSpec),
    /// The elector's state directory made unwritable (the elector runs as its
    /// own user, so this is a real write failure). `for D` as `pause`;
    /// otherwise `thaw` or the end phase makes it writable again.
    ReadOnlyState(PauseSpec),
    /// An operator lifts the fence by hand on the data node:
    /// `min-replicas-to-write 0`, `replica-read-only no`, `REPLICAOF NO ONE`.
    LiftFence(Targets),
    /// A planned switchover (`POST /switchover` to the primary's elector).
    Switchover(SwitchoverSpec),
    /// Ends every fault (unpause, thaw, restart what is down, heal), then
    /// lets the cluster run undisturbed this long. The liveness checker
    /// measures from the start of each quiet phase.
    Quiet(Dur),
    /// Ends `freeze_elector` and `read_only_state` on the targets (SIGCONT,
    /// state directory writable again); harmless where neither is in force.
    Thaw(Targets),
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RestartDataSpec {
    pub on: Targets,
    #[serde(default)]
    pub lose_data: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwitchoverSpec {
    /// The node to hand over to (a symbolic token such as `replica1`).
    pub to: String,
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

impl Step {
    /// Short label for reports.
    pub fn label(&self) -> String {
        match self {
            Step::WaitPrimary(d) => format!("wait_primary {d}"),
            Step::WaitNewPrimary(d) => format!("wait_new_primary {d}"),
            Step::StartWriters => "start_writers".into(),
            Step::StopWriters => "stop_writers".into(),
            Step::Sleep(d) => format!("sleep {d}"),
            Step::Kill(t) => format!("kill {}", t.tokens().join(",")),
            Step::KillElector(t) => format!("kill_elector {}", t.tokens().join(",")),
            Step::KillData(t) => format!("kill_data {}", t.tokens().join(",")),
            Step::Exec(e) => format!("exec {}: {}", e.on.tokens().join(","), e.label()),
            Step::Restart(t) => format!("restart {}", t.tokens().join(",")),
            Step::Pause(p) => match p.duration {
                Some(d) => format!("pause {} for {d}", p.targets.tokens().join(",")),
                None => format!("pause {}", p.targets.tokens().join(",")),
            },
            Step::Unpause(t) => format!("unpause {}", t.tokens().join(",")),
            Step::Isolate(t) => format!("isolate {}", t.tokens().join(",")),
            Step::Split(s) => format!(
                "split {}",
                s.iter()
                    .map(|t| format!("[{}]", t.tokens().join(",")))
                    .collect::<Vec<_>>()
                    .join(" | ")
            ),
            Step::Bridge(b) => format!(
                "bridge [{}] <{}> [{}]",
                b.left.tokens().join(","),
                b.middle,
                b.right.tokens().join(",")
            ),
            Step::OneWay(o) => format!(
                "one_way {} -x-> {}",
                o.from.tokens().join(","),
                o.to.tokens().join(",")
            ),
            Step::Heal => "heal".into(),
            Step::MeshRestoredWithin(d) => format!("mesh_restored_within {d}"),
            Step::NoPrimaryFor(d) => format!("no_primary_for {d}"),
            Step::Netem(n) => format!(
                "netem {} delay {}ms jitter {}ms loss {}%",
                n.targets.tokens().join(","),
                n.delay_ms,
                n.jitter_ms,
                n.loss_pct
            ),
            Step::ClearNetem => "clear_netem".into(),
            Step::FreezeElector(p) => pause_label("freeze_elector", p),
            Step::StopElector(t) => format!("stop_elector {}", t.tokens().join(",")),
            Step::RestartData(r) => format!(
                "restart_data {}{}",
                r.on.tokens().join(","),
                if r.lose_data { " (empty)" } else { "" }
            ),
            Step::ReadOnlyState(p) => pause_label("read_only_state", p),
            Step::LiftFence(t) => format!("lift_fence {}", t.tokens().join(",")),
            Step::Switchover(s) => format!("switchover to {}", s.to),
            Step::Thaw(t) => format!("thaw {}", t.tokens().join(",")),
            Step::Quiet(d) => format!("quiet {d}"),
        }
    }

    /// The fault this step injects, in the vocabulary the simulator shares;
    /// `None` for the steps that wait, observe, drive clients or undo.
    pub fn fault_kind(&self) -> Option<FaultKind> {
        Some(match self {
            Step::Kill(_) => FaultKind::Kill,
            Step::Restart(_) => FaultKind::Restart,
            Step::KillElector(_) => FaultKind::KillElector,
            Step::FreezeElector(_) => FaultKind::FreezeElector,
            Step::StopElector(_) => FaultKind::StopElector,
            Step::KillData(_) => FaultKind::KillData,
            Step::RestartData(_) => FaultKind::RestartData,
            Step::Pause(_) => FaultKind::Pause,
            Step::Isolate(_) => FaultKind::Isolate,
            Step::Split(_) => FaultKind::Split,
            Step::Bridge(_) => FaultKind::Bridge,
            Step::OneWay(_) => FaultKind::OneWay,
            Step::Netem(_) => FaultKind::Netem,
            Step::ReadOnlyState(_) => FaultKind::ReadOnlyState,
            Step::LiftFence(_) => FaultKind::LiftFence,
            Step::Switchover(_) => FaultKind::Switchover,
            Step::Heal => FaultKind::Heal,
            _ => return None,
        })
    }

    fn all_tokens(&self) -> Vec<String> {
        match self {
            Step::Kill(t)
            | Step::StopElector(t)
            | Step::LiftFence(t)
            | Step::Thaw(t)
            | Step::KillElector(t)
            | Step::KillData(t)
            | Step::Restart(t)
            | Step::Unpause(t)
            | Step::Isolate(t) => t.tokens(),
            Step::Pause(p) | Step::FreezeElector(p) | Step::ReadOnlyState(p) => p.targets.tokens(),
            Step::RestartData(r) => r.on.tokens(),
            Step::Switchover(s) => vec![s.to.clone()],
            Step::Exec(e) => e.on.tokens(),
            Step::Split(s) => s.iter().flat_map(|t| t.tokens()).collect(),
            Step::Bridge(b) => {
                let mut v = b.left.tokens();
                v.push(b.middle.clone());
                v.extend(b.right.tokens());
                v
            }
            Step::OneWay(o) => {
                let mut v = o.from.tokens();
                v.extend(o.to.tokens());
                v
            }
            Step::Netem(n) => n.targets.tokens(),
            _ => vec![],
        }
    }
}

fn pause_label(name: &str, p: &PauseSpec) -> String {
    match p.duration {
        Some(d) => format!("{name} {} for {d}", p.targets.tokens().join(",")),
        None => format!("{name} {}", p.targets.tokens().join(",")),
    }
}

/// `exec: { on: primary, run: "pkill -STOP -x elector", removes_primary: true }`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecSpec {
    pub on: Targets,
    /// `sh -c` script run inside each target container.
    pub run: String,
    /// Short name for reports (defaults to the script).
    #[serde(default)]
    pub name: Option<String>,
    /// The command takes the primary out of service (a later
    /// `wait_new_primary` must find another node).
    #[serde(default)]
    pub removes_primary: bool,
    /// The command undoes an earlier `exec` on these nodes (`pkill -CONT`):
    /// their open exec faults end here.
    #[serde(default)]
    pub ends_fault: bool,
    /// The script is a check: a non-zero exit on any target fails the step.
    #[serde(default)]
    pub check: bool,
    /// Script the end phase runs on the same nodes before it reads writes
    /// back, whatever happened in between (`pkill -CONT -x elector`).
    #[serde(default)]
    pub undo: Option<String>,
}

impl ExecSpec {
    pub fn label(&self) -> String {
        self.name.clone().unwrap_or_else(|| self.run.clone())
    }
}

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
                Step::Pause(p) | Step::FreezeElector(p) | Step::ReadOnlyState(p) => {
                    p.duration.map_or(0, |d| d.ms())
                }
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
            if matches!(step, Step::RestartData(_))
                && self.env.get("DATA_NODE_RESTART").map(String::as_str) != Some("1")
            {
                return Err(format!(
                    "step {}: restart_data needs env DATA_NODE_RESTART: \"1\" (the supervisor brings the data node back)",
                    i + 1
                ));
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
mod tests {
    use super::*;

    const GOOD: &str = r#"
name: primary-kill
tags: [quick]
nodes: 3
timings: { down_after_ms: 1500 }
steps:
  - wait_primary: 30s
  - start_writers
  - sleep: 2s
  - kill: primary
  - pause: replica1 for 1.5s
  - split: [[primary], others]
  - bridge: { left: [primary], middle: replica1, right: [replica2] }
  - one_way: { from: primary, to: replicas }
  - netem: { targets: all, delay_ms: 20, jitter_ms: 10, loss_pct: 2.5 }
  - heal
  - restart: down
  - sleep: 500
expect: { failover: true }
"#;

    #[test]
    fn a_full_scenario_parses_with_every_step_kind() {
        let s = Scenario::parse("t", GOOD).unwrap();
        assert_eq!(s.name, "primary-kill");
        assert_eq!(s.quorum(), 2);
        assert_eq!(s.steps[0], Step::WaitPrimary(Dur(30_000)));
        assert_eq!(s.steps[1], Step::StartWriters);
        assert_eq!(s.steps[3], Step::Kill(Targets::One("primary".into())));
        assert_eq!(
            s.steps[4],
            Step::Pause(PauseSpec {
                targets: Targets::One("replica1".into()),
                duration: Some(Dur(1500))
            })
        );
        assert!(matches!(&s.steps[5], Step::Split(v) if v.len() == 2));
        assert_eq!(s.steps[9], Step::Heal);
        assert_eq!(s.steps[11], Step::Sleep(Dur(500)));
        assert_eq!(s.expect.failover, Some(true));
        assert_eq!(s.timings.down_after_ms, 1500);
        assert_eq!(s.timings.hb_interval_ms, 100);
    }

    #[test]
    fn every_fault_of_the_shared_vocabulary_is_a_step_of_the_same_name() {
        let samples = [
            "kill: primary",
            "restart: down",
            "kill_elector: primary",
            "freeze_elector: primary for 2s",
            "stop_elector: replica1",
            "kill_data: primary",
            "restart_data: { on: primary, lose_data: true }",
            "pause: primary",
            "isolate: primary",
            "split: [[primary], others]",
            "bridge: { left: [n1], middle: n2, right: [n3] }",
            "one_way: { from: primary, to: replicas }",
            "netem: { targets: all, loss_pct: 2 }",
            "read_only_state: primary",
            "lift_fence: old_primary",
            "switchover: { to: replica1 }",
            "heal",
        ];
        let mut seen = vec![];
        for text in samples {
            let yaml = format!(
                "name: x\nnodes: 3\nenv: {{ DATA_NODE_RESTART: \"1\" }}\nsteps:\n  - {text}\n"
            );
            let s = Scenario::parse("f", &yaml).unwrap_or_else(|e| panic!("{text}: {e}"));
            let kind = s.steps[0].fault_kind().expect(text);
            assert!(text.starts_with(kind.name()), "{text} is {kind}");
            seen.push(kind);
        }
        let containers: Vec<FaultKind> = FaultKind::ALL
            .into_iter()
            .filter(|k| k.in_containers())
            .collect();
        assert_eq!(seen, containers);
    }

    #[test]
    fn restart_data_without_a_supervisor_that_restarts_is_rejected() {
        let text = "name: x\nnodes: 3\nsteps:\n  - restart_data: { on: primary }\n";
        let err = Scenario::parse("f", text).unwrap_err().to_string();
        assert!(err.contains("DATA_NODE_RESTART"), "{err}");
    }

    #[test]
    fn durations_accept_units_and_reject_garbage() {
        assert_eq!("500ms".parse::<Dur>().unwrap(), Dur(500));
        assert_eq!("2s".parse::<Dur>().unwrap(), Dur(2000));
        assert_eq!("1.5s".parse::<Dur>().unwrap(), Dur(1500));
        assert_eq!("250".parse::<Dur>().unwrap(), Dur(250));
        assert!("soon".parse::<Dur>().is_err());
        assert!("-1s".parse::<Dur>().is_err());
    }

    #[test]
    fn an_unknown_target_is_rejected_with_the_step_named() {
        let text = "name: x\nnodes: 3\nsteps:\n  - kill: n4\n";
        let err = Scenario::parse("f.yaml", text).unwrap_err().to_string();
        assert!(err.contains("n4"), "{err}");
        let text = "name: x\nnodes: 3\nsteps:\n  - kill: replica3\n";
        assert!(Scenario::parse("f.yaml", text).is_err());
    }

    #[test]
    fn an_unknown_step_or_field_is_rejected() {
        assert!(Scenario::parse("f", "name: x\nnodes: 3\nsteps:\n  - explode: primary\n").is_err());
        assert!(Scenario::parse("f", "name: x\nnodes: 3\nbogus: 1\nsteps:\n  - heal\n").is_err());
    }

    #[test]
    fn a_split_with_one_side_is_rejected() {
        let text = "name: x\nnodes: 3\nsteps:\n  - split: [[n1, n2, n3]]\n";
        assert!(Scenario::parse("f", text).is_err());
    }

    #[test]
    fn the_planned_duration_adds_up_sleeps_pauses_and_wait_bounds() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
        let s = Scenario::load(&dir.join("heal-replica-5m.yaml")).unwrap();
        // wait_primary 60 s + sleep 3 s + sleep 300 s + mesh 4 s + sleep 2 s.
        assert_eq!(s.planned_ms(), 369_000);
    }

    #[test]
    fn defaults_give_lease_and_election_bound_from_timings() {
        let s = Scenario::parse("f", "name: x\nnodes: 5\nsteps:\n  - heal\n").unwrap();
        assert_eq!(s.quorum(), 3);
        assert_eq!(s.lease_ms(), 1500);
        assert_eq!(s.election_bound_ms(), 1500 + 1000 + 800 + 1000);
    }

    #[test]
    fn every_shipped_scenario_file_parses() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
        let all = Scenario::load_dir(&dir).unwrap();
        assert!(all.len() >= 15, "only {} scenarios", all.len());
        let quick = all.iter().filter(|s| s.has_tag("quick")).count();
        assert!((4..=7).contains(&quick), "quick suite has {quick}");
        assert!(all.iter().any(|s| s.expect.violation));
    }
}
