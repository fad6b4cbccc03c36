//! One fault vocabulary for the simulator (`elector/tests/sim`) and the
//! conformance suite (`conformance/`): the same fault has the same name in
//! both, so a schedule found by one can be read (and, where the fault exists
//! in both, replayed) by the other. Conformance scenario steps are spelled
//! with these names (`kill: primary`, `freeze_elector: n2`, ...) and fault
//! records carry them; the simulator traces and counts its faults by them.
//!
//! Which kinds each side can inject is data here ([`FaultKind::in_simulator`],
//! [`FaultKind::in_containers`]), so a test on either side can check that it
//! implements exactly what it claims.

#![forbid(unsafe_code)]

use serde::{Deserialize, Serialize};

/// One kind of fault. The serde name (snake_case) is the step name in a
/// scenario file and the `kind` of a recorded fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// The whole node dies at once (host crash, `docker kill`).
    Kill,
    /// A stopped node starts; a running one is stopped (SIGTERM) and started.
    Restart,
    /// The elector process alone is SIGKILLed.
    KillElector,
    /// The elector process alone is SIGSTOPped, then SIGCONTed: its data
    /// node and watchdog keep running.
    FreezeElector,
    /// The elector process alone gets SIGTERM (a clean stop).
    StopElector,
    /// The data node alone dies.
    KillData,
    /// The data node alone dies and comes back under its running elector,
    /// after a gap of 0 ms or more, with its files, empty, or from files older
    /// than what it acknowledged since (an AOF or snapshot copied earlier).
    RestartData,
    /// The data node alone is frozen (SIGSTOP: a stalled disk, a swapped-out
    /// process), possibly longer than the kevy quiesce limit, then resumes
    /// (SIGCONT) under its running elector.
    StallData,
    /// Every process of the node is frozen (`docker pause`, a VM stall).
    Pause,
    /// Nodes cut from every other node, both ways.
    Isolate,
    /// The cluster cut into sides (majority / minority).
    Split,
    /// Two sides that cannot talk and one middle node that sees both.
    Bridge,
    /// Traffic one way only.
    OneWay,
    /// Packet loss (and delay) on the nodes' network.
    Netem,
    /// The elector's state directory stops accepting writes.
    ReadOnlyState,
    /// An operator lifts the fence on a data node by hand.
    LiftFence,
    /// A planned handover of the primary role (protocol §8).
    Switchover,
    /// Every network fault removed.
    Heal,
}

impl FaultKind {
    pub const ALL: [FaultKind; 18] = [
        FaultKind::Kill,
        FaultKind::Restart,
        FaultKind::KillElector,
        FaultKind::FreezeElector,
        FaultKind::StopElector,
        FaultKind::KillData,
        FaultKind::RestartData,
        FaultKind::StallData,
        FaultKind::Pause,
        FaultKind::Isolate,
        FaultKind::Split,
        FaultKind::Bridge,
        FaultKind::OneWay,
        FaultKind::Netem,
        FaultKind::ReadOnlyState,
        FaultKind::LiftFence,
        FaultKind::Switchover,
        FaultKind::Heal,
    ];

    /// The name in scenario files, fault records, traces and reports.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Kill => "kill",
            FaultKind::Restart => "restart",
            FaultKind::KillElector => "kill_elector",
            FaultKind::FreezeElector => "freeze_elector",
            FaultKind::StopElector => "stop_elector",
            FaultKind::KillData => "kill_data",
            FaultKind::RestartData => "restart_data",
            FaultKind::StallData => "stall_data",
            FaultKind::Pause => "pause",
            FaultKind::Isolate => "isolate",
            FaultKind::Split => "split",
            FaultKind::Bridge => "bridge",
            FaultKind::OneWay => "one_way",
            FaultKind::Netem => "netem",
            FaultKind::ReadOnlyState => "read_only_state",
            FaultKind::LiftFence => "lift_fence",
            FaultKind::Switchover => "switchover",
            FaultKind::Heal => "heal",
        }
    }

    pub fn from_name(name: &str) -> Option<FaultKind> {
        FaultKind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// The simulator injects this kind (`elector/tests/simulation.rs`).
    /// It has no packet loss (its network drops or delivers) and no SIGTERM
    /// of the elector alone; it models a data node dying alone only as one
    /// that comes back (`restart_data`).
    pub fn in_simulator(self) -> bool {
        !matches!(
            self,
            FaultKind::Netem | FaultKind::StopElector | FaultKind::KillData
        )
    }

    /// The conformance runner injects this kind in real containers.
    pub fn in_containers(self) -> bool {
        true
    }

    /// A network fault: `heal` ends it.
    pub fn is_network(self) -> bool {
        matches!(
            self,
            FaultKind::Isolate
                | FaultKind::Split
                | FaultKind::Bridge
                | FaultKind::OneWay
                | FaultKind::Netem
        )
    }
}

impl std::fmt::Display for FaultKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_serialises_as_its_name_and_back() {
        for k in FaultKind::ALL {
            let text = serde_yaml::to_string(&k).unwrap();
            assert_eq!(text.trim(), k.name());
            let back: FaultKind = serde_yaml::from_str(&text).unwrap();
            assert_eq!(back, k);
            assert_eq!(FaultKind::from_name(k.name()), Some(k));
        }
    }

    #[test]
    fn names_are_unique_and_all_lists_every_kind_once() {
        let mut names: Vec<&str> = FaultKind::ALL.iter().map(|k| k.name()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), FaultKind::ALL.len());
        assert_eq!(FaultKind::from_name("explode"), None);
    }
}
