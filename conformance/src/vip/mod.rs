//! The virtual IP scenarios (issue 20, docs/vip.md): a cluster whose electors
//! move one address to the writable primary, clients that know only that
//! address, and what the checkers need to judge it.
//!
//! A scenario with a `vip:` block gets the address `<run subnet>.100` on every
//! node (entrypoint `VIP`, `VIP_PORT`), its writers go through `VIP:port` only
//! ([`clients`]), one long-lived monitor client watches whether the old
//! holder's connections are cut, and a sampler reads every container's
//! addresses through the run ([`sampler`]). The checkers over all of it are in
//! `checkers::vip`.

pub mod clients;
pub mod sampler;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::checkers::vip;
use crate::history::{History, Ms};
use crate::report::RunResult;
use crate::scenario::Scenario;

/// The last octet of the VIP in the run's /24 (nodes get low addresses from
/// Docker's IPAM, .2 upwards; the gateway is .1).
pub const VIP_HOST: u8 = 100;

/// What a scenario tagged `vip` gets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VipSpec {
    /// The port clients use on the VIP (DNAT to each node's own data port).
    pub port: u16,
    /// How often every container's addresses are read.
    pub sample_ms: u64,
    /// The node that must hold the VIP at the end: with preemption on, the
    /// node of highest priority in the scenario's `PRIORITIES` (protocol §8.1).
    pub final_holder: Option<String>,
}

impl VipSpec {
    /// The VIP parts of a scenario: `Some` when it is tagged `vip`.
    pub fn of(scn: &Scenario) -> Option<VipSpec> {
        if !scn.has_tag(TAG) {
            return None;
        }
        let preempts = scn
            .extra_yaml
            .as_deref()
            .is_some_and(|y| y.contains("preempt"));
        let final_holder = scn
            .env
            .get("PRIORITIES")
            .filter(|_| preempts)
            .and_then(|p| preferred(p));
        Some(VipSpec {
            port: 6379,
            sample_ms: 250,
            final_holder,
        })
    }
}

/// The scenario tag that turns the VIP on.
pub const TAG: &str = "vip";

/// The node of highest priority in `ID=PRIORITY,...` (ties: the lowest id,
/// as preemption picks, protocol §8.1).
pub fn preferred(priorities: &str) -> Option<String> {
    priorities
        .split(',')
        .filter_map(|e| {
            let (id, p) = e.trim().split_once('=')?;
            Some((p.trim().parse::<u32>().ok()?, id.trim().to_string()))
        })
        .max_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)))
        .map(|(_, id)| id)
}

/// The VIP of a run on `subnet` (`10.213.7.0/24` -> `10.213.7.100`).
pub fn vip_address(subnet: &str) -> Option<String> {
    let net = subnet.strip_suffix(".0/24")?;
    Some(format!("{net}.{VIP_HOST}"))
}

/// Who held the VIP in one sampling round of one node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HolderSample {
    pub at_ms: Ms,
    pub node: String,
    /// `None`: the container could not be asked (paused).
    pub holds: Option<bool>,
}

/// What the long-lived monitor client saw on one command.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MonitorKind {
    /// The write was taken.
    Ok,
    /// An error reply (`READONLY`, `NOREPLICAS`, ...) on an open connection.
    ErrorReply,
    /// The connection was closed or reset under the client.
    Closed,
    /// No answer in time (the connection is kept: a dead peer's is reset
    /// once the new holder answers for the address).
    Timeout,
    /// A new connection through the VIP could not be made.
    ConnectFailed,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MonitorEvent {
    pub at_ms: Ms,
    /// Which connection (counts up from 1 per reconnect).
    pub conn: u32,
    /// The node that connection reached (by its data port).
    pub node: Option<String>,
    pub kind: MonitorKind,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

/// Everything the VIP parts of a run record; saved as `<run>.vip.json`.
#[derive(Default, Debug, Serialize, Deserialize)]
pub struct VipRecord {
    pub address: String,
    pub port: u16,
    pub holders: Vec<HolderSample>,
    pub monitor: Vec<MonitorEvent>,
    /// Fault to first write through the VIP on the new primary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub figures: Option<vip::VipFigures>,
}

/// The shared recorder of the VIP tasks.
#[derive(Default)]
pub struct VipObs {
    pub address: String,
    pub port: u16,
    pub holders: Mutex<Vec<HolderSample>>,
    pub monitor: Mutex<Vec<MonitorEvent>>,
    stop: AtomicBool,
}

impl VipObs {
    pub fn new(address: String, port: u16) -> Self {
        VipObs {
            address,
            port,
            ..Default::default()
        }
    }

    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }

    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    pub fn record(&self) -> VipRecord {
        VipRecord {
            address: self.address.clone(),
            port: self.port,
            holders: self.holders.lock().expect("lock").clone(),
            monitor: self.monitor.lock().expect("lock").clone(),
            figures: None,
        }
    }
}

/// Adds the VIP checks to a finished run, gives the verdict again, and saves
/// what the VIP parts recorded (with the figures) as `<run>.vip.json`.
pub fn judge(
    result: &mut RunResult,
    scn: &Scenario,
    spec: &VipSpec,
    h: &History,
    mut record: VipRecord,
    out_dir: &Path,
) {
    let lease = scn.lease_ms();
    record.figures = vip::vip_figures(h);
    result.checks.extend([
        vip::vip_single_holder(&record, lease),
        vip::vip_clients_disconnected(&record, lease),
        vip::vip_final_holder(&record, spec.final_holder.as_deref()),
        vip::vip_writes_resume(record.figures.as_ref()),
    ]);
    let (checks_passed, passed) = RunResult::verdict(
        &result.checks,
        scn.expect.violation,
        result.error.as_deref(),
    );
    result.checks_passed = checks_passed;
    result.passed = passed;
    let path = out_dir.join(format!("{}.vip.json", result.id()));
    if let Err(e) = serde_json::to_vec_pretty(&record)
        .map_err(std::io::Error::other)
        .and_then(|json| std::fs::write(&path, json))
    {
        tracing::warn!(path = %path.display(), "could not save the vip record: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vip_is_host_100_of_the_run_subnet() {
        assert_eq!(
            vip_address("10.213.7.0/24").as_deref(),
            Some("10.213.7.100")
        );
        assert_eq!(vip_address("10.213.7.0/16"), None);
    }

    #[test]
    fn the_preferred_node_has_the_highest_priority_and_ties_go_to_the_lowest_id() {
        assert_eq!(preferred("n1=200,n2=100,n3=100").as_deref(), Some("n1"));
        assert_eq!(preferred("n1=100, n2=300 ,n3=300").as_deref(), Some("n2"));
        assert_eq!(preferred("garbage"), None);
    }
}
