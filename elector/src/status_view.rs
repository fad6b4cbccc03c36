//! Builds what operators see (`/status`, `/metrics`, the Sentinel view) from
//! the core's state plus the shell's records (transitions, switchover, the
//! last data-node report). Every role or fence change keeps its reason.

use crate::api::metrics::Metrics;
use crate::api::sentinel::{ClusterView, NodeAddr};
use crate::api::status::{
    DataNodeStatus, LastVote, PeerStatus, StatusSnapshot, SwitchoverPhase, SwitchoverState,
    TransitionRecord,
};
use crate::config::Config;
use crate::core::{Core, Reason};
use crate::datanode::DataNodeReport;
use crate::protocol::Role;
use std::collections::VecDeque;

/// How many transitions `/status` keeps.
const TRANSITIONS_KEPT: usize = 50;

/// The shell's records, in wall-clock milliseconds.
pub struct StatusBook {
    transitions: VecDeque<TransitionRecord>,
    switchover: Option<SwitchoverState>,
    report: Option<DataNodeReport>,
    data_kind: &'static str,
    /// The highest epoch a successful write of the state held (or the one
    /// loaded at start): the core's epoch can run ahead of it, and a
    /// restart comes back at it (`durable_epoch` in `/status`).
    durable_epoch: u64,
    /// This process's auth boot id, so readers of `/status` see restarts.
    boot_id: u64,
}

impl StatusBook {
    /// `durable_epoch` is the epoch of the state loaded at start (written
    /// before the loop runs); `boot_id` this process's auth boot id.
    pub fn new(config: &Config, durable_epoch: u64, boot_id: u64) -> StatusBook {
        StatusBook {
            transitions: VecDeque::new(),
            switchover: None,
            report: None,
            durable_epoch,
            boot_id,
            data_kind: config
                .data_node
                .as_ref()
                .map_or("none", |dn| dn.kind.as_str()),
        }
    }

    /// A write of the state holding `epoch` succeeded. Writes complete in
    /// order, but the maximum keeps the field monotonic whatever happens.
    pub fn persisted(&mut self, epoch: u64) {
        self.durable_epoch = self.durable_epoch.max(epoch);
    }

    pub fn set_report(&mut self, report: DataNodeReport) {
        self.report = Some(report);
    }

    pub fn transition(&mut self, from: Role, to: Role, epoch: u64, reason: Reason, now: u64) {
        self.push(from, to, epoch, reason, None, now);
    }

    /// Fence changes on a primary are transitions primary -> primary with
    /// their own reason (quorum_lost, quorum_regained, switchover ...) and
    /// the new fence state.
    pub fn fence(&mut self, fenced: bool, epoch: u64, reason: Reason, now: u64) {
        self.push(
            Role::Primary,
            Role::Primary,
            epoch,
            reason,
            Some(fenced),
            now,
        );
    }

    fn push(
        &mut self,
        from: Role,
        to: Role,
        epoch: u64,
        reason: Reason,
        fenced: Option<bool>,
        now: u64,
    ) {
        let record = TransitionRecord {
            at_unix_ms: now,
            from,
            to,
            epoch,
            reason: reason.as_str().to_string(),
            fenced,
        };
        if self.transitions.len() == TRANSITIONS_KEPT {
            self.transitions.pop_front();
        }
        self.transitions.push_back(record);
    }

    pub fn switchover_started(&mut self, to: &str, now: u64, timeout_ms: u64) {
        self.switchover = Some(SwitchoverState {
            to: to.to_string(),
            phase: SwitchoverPhase::CatchingUp,
            started_at_unix_ms: now,
            deadline_unix_ms: now + timeout_ms,
            primary_offset: None,
            target_offset: None,
            write_pause_ms: None,
            error: None,
        });
    }

    pub fn switchover_finished(&mut self, result: &Result<u64, String>, pause_ms: u64) {
        if let Some(s) = self.switchover.as_mut() {
            match result {
                Ok(_) => {
                    s.phase = SwitchoverPhase::Completed;
                    s.write_pause_ms = Some(pause_ms);
                }
                Err(why) => {
                    s.phase = SwitchoverPhase::RolledBack;
                    s.error = Some(why.clone());
                }
            }
        }
    }

    pub fn snapshot(
        &self,
        core: &Core,
        config: &Config,
        metrics: &Metrics,
        now: u64,
    ) -> StatusSnapshot {
        let info = self.report.as_ref().and_then(|r| r.info.as_ref());
        let obs = core.observation();
        let mut switchover = self.switchover.clone();
        if let Some(s) = switchover.as_mut() {
            if s.phase == SwitchoverPhase::CatchingUp {
                s.primary_offset = obs.offset;
                s.target_offset = core
                    .peer_views()
                    .find(|(id, _)| *id == s.to)
                    .and_then(|(_, v)| v.last_hb.as_ref().map(|hb| hb.offset));
                if core.role() != Role::Primary {
                    s.phase = SwitchoverPhase::HandingOver;
                }
            }
        }
        let state = core.persisted();
        StatusSnapshot {
            node_id: config.node_id.clone(),
            role: core.role(),
            epoch: core.epoch(),
            durable_epoch: self.durable_epoch,
            boot_id: self.boot_id,
            primary: core.primary().map(str::to_string),
            fenced: core.fenced(),
            quorum: core.config().quorum().size(),
            cluster_size: config.peers.len(),
            data_node: DataNodeStatus {
                kind: self.data_kind.to_string(),
                address: config
                    .data_node
                    .as_ref()
                    .map(|dn| dn.address.clone())
                    .unwrap_or_default(),
                reachable: obs.reachable,
                role: info.map(|i| i.role.clone()),
                offset: obs.offset,
                lag: core.lag(),
                link_up: info.map(|i| i.is_master() || i.link_up),
                proof: (!core.config().i_am_witness()).then(|| core.proof().as_str().to_string()),
                floor: core.floor().map(|f| f.pair()),
                must_hold: core.must_hold().map(|f| f.pair()),
                below_floor: core.below_floor(),
            },
            peers: core
                .peer_views()
                .map(|(id, view)| {
                    let hb = view.last_hb.as_ref();
                    PeerStatus {
                        id: id.to_string(),
                        alive: core.peer_alive(view),
                        role: hb.map(|h| h.role),
                        epoch: hb.map(|h| h.epoch),
                        offset: hb.map(|h| h.offset),
                        last_seen_ms: view.last_heard.map(|t| now.saturating_sub(t)),
                        eligible: hb.map(|h| h.eligible),
                        api: config.peer(id).and_then(|p| p.api.clone()),
                    }
                })
                .collect(),
            transitions: self.transitions.iter().cloned().collect(),
            rejected: metrics.rejected_counts(),
            switchover,
            last_vote: state.voted_for.as_ref().map(|f| LastVote {
                epoch: state.voted_epoch,
                for_node: f.clone(),
            }),
            vip: None,
            // Filled when `/status` is read (`api::http::status`): the
            // watchdog's stamp moves between snapshots.
            watchdog: None,
        }
    }
}

fn node_addr(id: &str, data: &str) -> NodeAddr {
    let (host, port) = data.rsplit_once(':').unwrap_or((data, "6379"));
    NodeAddr {
        id: id.to_string(),
        host: host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string(),
        port: port.parse().unwrap_or(6379),
    }
}

/// The other members' Sentinel-compatible listeners (`peers[].sentinel`), for
/// `SENTINEL sentinels` and `num-other-sentinels`; members without one are
/// left out rather than guessed.
fn other_sentinels(config: &Config) -> Vec<NodeAddr> {
    config
        .peers
        .iter()
        .filter(|p| p.id != config.node_id)
        .filter_map(|p| Some(node_addr(&p.id, p.sentinel.as_deref()?)))
        .collect()
}

/// What the Sentinel-compatible listener tells clients.
pub fn cluster_view(core: &Core, config: &Config) -> ClusterView {
    let primary_id = core.primary();
    let primary = primary_id
        .and_then(|id| config.peer(id))
        .and_then(|p| Some(node_addr(&p.id, p.data.as_deref()?)));
    // Witnesses have no data node: never a replica clients are sent to.
    let replicas = config
        .peers
        .iter()
        .filter(|p| Some(p.id.as_str()) != primary_id)
        .filter_map(|p| {
            let up = p.id == config.node_id
                || core
                    .peer_views()
                    .any(|(id, v)| id == p.id && core.peer_alive(v));
            Some((node_addr(&p.id, p.data.as_deref()?), up))
        })
        .collect();
    ClusterView {
        master_name: config.cluster_name.clone(),
        epoch: core.epoch(),
        primary,
        replicas,
        sentinels: other_sentinels(config),
        quorum: core.config().quorum().size(),
        down_after_ms: config.timings.down_after_ms,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `SENTINEL sentinels` / `num-other-sentinels` (docs/clients.md): the
    /// other members' listeners from `peers[].sentinel`, never this node's
    /// own, and no guess for a member that names none.
    #[test]
    fn the_other_members_sentinel_listeners_are_listed_and_this_nodes_is_not() {
        let yaml = r#"
node_id: n1
listen: { election: "127.0.0.1:7401", api: "127.0.0.1:9301", sentinel: ":26401" }
data_node: { kind: redis, address: "127.0.0.1:6001" }
peers:
  - { id: n1, election: "10.0.0.1:7400", data: "10.0.0.1:6379", sentinel: "10.0.0.1:26379" }
  - { id: n2, election: "10.0.0.2:7400", data: "10.0.0.2:6380", sentinel: "10.0.0.2:26379" }
  - { id: n3, election: "10.0.0.3:7400", data: "10.0.0.3:6381" }
"#;
        let config = crate::config::parse(yaml, std::path::Path::new("t.yaml"))
            .unwrap()
            .config;
        let listed = other_sentinels(&config);
        assert_eq!(
            listed,
            [NodeAddr {
                id: "n2".into(),
                host: "10.0.0.2".into(),
                port: 26379
            }]
        );
    }
}
