//! The steps a scenario plays, the durations and node targets they take, and
//! the fault specs (pause, bridge, one-way cut, netem, exec) they carry.

use std::fmt;

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
    /// SIGKILL the nodes, keep them down `for D` (none: start at once), and
    /// start them with a new IP address under the same name, as a
    /// rescheduled Kubernetes pod comes back: the peers must resolve the
    /// name again when they redial (issue 24).
    Readdress(PauseSpec),
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
    /// The elector alone stopped (SIGTERM, or SIGKILL with `kill: true`) and
    /// started again by its supervisor after `gap_ms`, the data node and the
    /// watchdog left running: `systemctl restart elector` on a host, an
    /// upgrade, a timing change (protocol §3.7), or a crash the unit's
    /// `Restart=` brings back. On `all` at once, every elector restarts with
    /// the data nodes running (issue 34; `elector/tests/restart_every_elector.rs`).
    RestartElector(RestartElectorSpec),
    /// The data node SIGKILLed under its running elector and started again
    /// by the supervisor (needs `env: { DATA_NODE_RESTART: "1" }`), with its
    /// files, wiped, or from the copy `copy_data` kept (older than what it
    /// acknowledged since), after the container's gap or this step's own.
    RestartData(RestartDataSpec),
    /// The data node alone SIGSTOPped under its running elector (a stalled
    /// disk, a swapped-out process), then SIGCONTed after `for D`, or by
    /// `thaw` or the end phase.
    StallData(PauseSpec),
    /// Copies each target's data directory aside, for a later
    /// `restart_data { older: true }`: files older than every write the node
    /// acknowledges after this step (issue 34 (c)). Not a fault.
    CopyData(Targets),
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
    /// Loads a data set into the current primary (keys `load:<i>`), bounded
    /// by [`crate::load::LoadSpec::budget`], and waits until every replica
    /// acknowledged it all (issue 35).
    LoadData(crate::load::LoadSpec),
    /// Ends `freeze_elector` and `read_only_state` on the targets (SIGCONT,
    /// state directory writable again); harmless where neither is in force.
    Thaw(Targets),
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RestartDataSpec {
    pub on: Targets,
    /// Come back empty (the files wiped).
    #[serde(default)]
    pub lose_data: bool,
    /// Come back from the files the last `copy_data` kept (with its files
    /// when no copy was made).
    #[serde(default)]
    pub older: bool,
    /// How long the data node stays dead, overriding the container's
    /// `DATA_NODE_RESTART_GAP_MS` for this restart only (0: at once).
    #[serde(default)]
    pub gap_ms: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RestartElectorSpec {
    pub on: Targets,
    /// SIGKILL instead of SIGTERM: no stop fence runs, so the data node is
    /// left as it was until the watchdog finds the elector silent.
    #[serde(default)]
    pub kill: bool,
    /// How long the elector stays down before the supervisor starts it again.
    #[serde(default)]
    pub gap_ms: u64,
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
            Step::Readdress(p) => pause_label("readdress", p),
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
            Step::RestartElector(r) => format!(
                "restart_elector {} ({}, back after {} ms)",
                r.on.tokens().join(","),
                if r.kill { "SIGKILL" } else { "SIGTERM" },
                r.gap_ms
            ),
            Step::RestartData(r) => format!(
                "restart_data {}{}{}",
                r.on.tokens().join(","),
                if r.lose_data {
                    " (empty)"
                } else if r.older {
                    " (older files)"
                } else {
                    ""
                },
                r.gap_ms.map_or(String::new(), |g| format!(" after {g} ms"))
            ),
            Step::StallData(p) => pause_label("stall_data", p),
            Step::CopyData(t) => format!("copy_data {}", t.tokens().join(",")),
            Step::ReadOnlyState(p) => pause_label("read_only_state", p),
            Step::LiftFence(t) => format!("lift_fence {}", t.tokens().join(",")),
            Step::Switchover(s) => format!("switchover to {}", s.to),
            Step::Thaw(t) => format!("thaw {}", t.tokens().join(",")),
            Step::Quiet(d) => format!("quiet {d}"),
            Step::LoadData(l) => format!("load_data {} MB ({} B values)", l.mb, l.value_bytes),
        }
    }

    /// The fault this step injects, in the vocabulary the simulator shares;
    /// `None` for the steps that wait, observe, drive clients or undo.
    pub fn fault_kind(&self) -> Option<FaultKind> {
        Some(match self {
            Step::Kill(_) => FaultKind::Kill,
            Step::Restart(_) => FaultKind::Restart,
            Step::Readdress(_) => FaultKind::Kill,
            Step::KillElector(_) => FaultKind::KillElector,
            Step::FreezeElector(_) => FaultKind::FreezeElector,
            Step::StopElector(_) => FaultKind::StopElector,
            Step::RestartElector(r) if r.kill => FaultKind::KillElector,
            Step::RestartElector(_) => FaultKind::StopElector,
            Step::KillData(_) => FaultKind::KillData,
            Step::RestartData(_) => FaultKind::RestartData,
            Step::StallData(_) => FaultKind::StallData,
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

    pub(crate) fn all_tokens(&self) -> Vec<String> {
        match self {
            Step::Kill(t)
            | Step::StopElector(t)
            | Step::LiftFence(t)
            | Step::Thaw(t)
            | Step::KillElector(t)
            | Step::KillData(t)
            | Step::Restart(t)
            | Step::Unpause(t)
            | Step::CopyData(t)
            | Step::Isolate(t) => t.tokens(),
            Step::Pause(p)
            | Step::StallData(p)
            | Step::FreezeElector(p)
            | Step::ReadOnlyState(p)
            | Step::Readdress(p) => p.targets.tokens(),
            Step::RestartData(r) => r.on.tokens(),
            Step::RestartElector(r) => r.on.tokens(),
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
