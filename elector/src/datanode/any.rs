//! One constructor for the data-node adapter: the runtime's adapter task,
//! its clean-stop fence and the watchdog all build it here, from the same
//! configuration, so they cannot disagree on the fence they apply.

use super::kevy::SharedFiles;
use super::kevy_policy::KevySettings;
use super::{
    stale_connect, DataNodeAdapter, DataNodeError, KevyNode, NowhereHold, RedisNode,
    ReplicationInfo,
};
use crate::config::{Config, DataNodeKind};
use crate::core::DataNodeTarget;

/// The adapter of either backend (boxed: one lives per process, and the
/// kevy adapter carries much more state than the Redis one).
pub(crate) enum AnyNode {
    Kevy(Box<KevyNode>),
    Redis(Box<RedisNode>),
}

impl AnyNode {
    /// This node's adapter, or `None` on a witness (no data node, §4.5).
    pub(crate) fn from_config(config: &Config) -> Option<AnyNode> {
        AnyNode::build(config, false, false)
    }

    /// The elector's own adapter of a kevy node that holds its connects at
    /// nowhere (`hold`): its adapter task and its stop fence.
    pub(crate) fn with_hold(config: &Config, hold: Option<NowhereHold>) -> Option<AnyNode> {
        match (AnyNode::build(config, hold.is_some(), true)?, hold) {
            (AnyNode::Kevy(node), Some(hold)) => {
                Some(AnyNode::Kevy(Box::new((*node).with_nowhere_hold(hold))))
            }
            (node, _) => Some(node),
        }
    }

    /// Its polls ask whether the data node is still the process `process`
    /// (the core's durable `joining_process`, §6.10 "A join outlives its
    /// elector"); Redis names its process in every `INFO` (`run_id`).
    pub(crate) fn asking_about_joining_process(self, process: Option<String>) -> AnyNode {
        match self {
            AnyNode::Kevy(node) => {
                AnyNode::Kevy(Box::new((*node).asking_about_joining_process(process)))
            }
            node => node,
        }
    }

    /// `elector`: one of the elector's own adapters (its task, its stop
    /// fence), which keep the watched runner across restarts
    /// (`kevy_policy::watch`); the watchdog's does not.
    fn build(config: &Config, hold: bool, elector: bool) -> Option<AnyNode> {
        let dn = config.data_node.as_ref()?;
        let credentials = dn.credentials();
        Some(match dn.kind {
            DataNodeKind::Kevy => AnyNode::Kevy(Box::new(KevyNode::new(
                &dn.address,
                &credentials,
                KevySettings {
                    replication_port_offset: dn.replication_port_offset,
                    abort_stale_connects: dn.abort_stale_connects,
                    // Only the elector's own adapters hold nowhere (see
                    // `with_nowhere_hold`); the policy releases what is held.
                    nowhere_hold: hold,
                    ack_nudge: dn.ack_nudge,
                    reconnect_window_ms: dn.kevy_reconnect_window_ms,
                    quiesce_fence_limit_ms: dn.kevy_quiesce_fence_limit_ms,
                    report_before_naming: false,
                    believe_a_resync_by_itself: false,
                    // Fresh for every adapter instance: a mark is never
                    // offered to two processes (`kevy_mark`).
                    mark_seed: Some(rand::random()),
                },
                SharedFiles {
                    watchdog_clamps: Some(crate::api::metrics::watchdog_clamps_path(
                        &config.data_dir,
                    )),
                    position: Some(super::kevy_stream::position_path(&config.data_dir)),
                    upstream: elector.then(|| config.data_dir.join("kevy-upstream")),
                },
            ))),
            DataNodeKind::Redis => AnyNode::Redis(Box::new(
                RedisNode::new(
                    &dn.address,
                    &credentials,
                    write_quorum(config),
                    config.timings().lease_ms() / 1000,
                )
                // Replicas dial their upstream's replication gate (§6.10).
                .with_upstream_port_offset(if dn.replication_gate {
                    dn.replication_port_offset
                } else {
                    0
                }),
            )),
        })
    }
}

/// The data node's own dead-man switch (protocol §6.4.1, §4.5): an
/// unfenced Redis primary refuses writes once fewer data replicas than this
/// have acknowledged within about a lease (its replicas detach from a
/// primary they no longer vouch for). Data replicas only: as many as a
/// primary holding its lease has even when every witness supports it, so
/// a legitimate primary is never fenced by it.
pub(crate) fn write_quorum(config: &Config) -> u64 {
    config.core_config(0).dead_man_replicas() as u64
}

impl DataNodeAdapter for AnyNode {
    fn kind(&self) -> &'static str {
        match self {
            AnyNode::Kevy(n) => n.kind(),
            AnyNode::Redis(n) => n.kind(),
        }
    }

    async fn observe(&mut self) -> Result<ReplicationInfo, DataNodeError> {
        match self {
            AnyNode::Kevy(n) => n.observe().await,
            AnyNode::Redis(n) => n.observe().await,
        }
    }

    async fn apply(&mut self, target: &DataNodeTarget) -> Result<(), DataNodeError> {
        match self {
            AnyNode::Kevy(n) => n.apply(target).await,
            AnyNode::Redis(n) => n.apply(target).await,
        }
    }

    async fn fence_blind(&mut self) -> Result<(), DataNodeError> {
        match self {
            AnyNode::Kevy(n) => n.fence_blind().await,
            AnyNode::Redis(n) => n.fence_blind().await,
        }
    }

    fn satisfies(&self, info: &ReplicationInfo, target: &DataNodeTarget) -> bool {
        match self {
            AnyNode::Kevy(n) => n.satisfies(info, target),
            AnyNode::Redis(n) => n.satisfies(info, target),
        }
    }

    async fn watchdog_clamp(&mut self) -> Result<(), DataNodeError> {
        match self {
            AnyNode::Kevy(n) => n.watchdog_clamp().await,
            AnyNode::Redis(n) => n.watchdog_clamp().await,
        }
    }

    fn watchdog_silence_began(&mut self) {
        match self {
            AnyNode::Kevy(n) => n.watchdog_silence_began(),
            AnyNode::Redis(n) => n.watchdog_silence_began(),
        }
    }

    fn take_aborts(&mut self) -> stale_connect::AbortTally {
        match self {
            AnyNode::Kevy(n) => n.take_aborts(),
            AnyNode::Redis(n) => n.take_aborts(),
        }
    }

    fn new_incarnation(&mut self) {
        match self {
            AnyNode::Kevy(n) => n.new_incarnation(),
            AnyNode::Redis(n) => n.new_incarnation(),
        }
    }

    fn take_ack_nudges(&mut self) -> u64 {
        match self {
            AnyNode::Kevy(n) => n.take_ack_nudges(),
            AnyNode::Redis(n) => n.take_ack_nudges(),
        }
    }

    fn take_padded_frames(&mut self) -> u64 {
        match self {
            AnyNode::Kevy(n) => n.take_padded_frames(),
            AnyNode::Redis(n) => n.take_padded_frames(),
        }
    }
}
