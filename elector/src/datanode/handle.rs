//! The data-node adapter as the runtime builds it, for code outside the
//! elector's loop: the adapter contract suite (`tests/adapter_contract.rs`)
//! drives real kevy and real Redis through exactly this, and the simulator's
//! models through the same checks (docs/protocol.md §6.11). The runtime's
//! adapter task, its stop fence and the watchdog build the same adapter
//! (`AnyNode`); this type only opens it to callers outside the crate,
//! without the task's timers and channels.

use super::{AnyNode, DataNodeAdapter, DataNodeError, ReplicationInfo};
use crate::config::Config;
use crate::core::DataNodeTarget;

/// One data node's adapter (kevy or Redis, as the configuration says).
pub struct Adapter {
    node: AnyNode,
}

impl Adapter {
    /// The adapter `config` describes; `None` on a witness (no data node).
    pub fn from_config(config: &Config) -> Option<Adapter> {
        AnyNode::from_config(config).map(|node| Adapter { node })
    }

    /// The adapter as the elector's own task builds it: on kevy it also
    /// keeps the runner it watches across restarts of the elector
    /// (`<data_dir>/kevy-upstream`, protocol §6.10 "A replica's tail").
    pub fn of_the_elector(config: &Config) -> Option<Adapter> {
        AnyNode::with_hold(config, None).map(|node| Adapter { node })
    }

    /// Reads the data node, fresh, as every poll of the runtime does.
    pub async fn observe(&mut self) -> Result<ReplicationInfo, DataNodeError> {
        self.node.observe().await
    }

    /// Makes the data node what `target` says (idempotent).
    pub async fn apply(&mut self, target: &DataNodeTarget) -> Result<(), DataNodeError> {
        self.node.apply(target).await
    }

    /// Whether `info` (a reading of this adapter) already is `target`.
    pub fn satisfies(&self, info: &ReplicationInfo, target: &DataNodeTarget) -> bool {
        self.node.satisfies(info, target)
    }

    /// Another data-node process answers now (what the runtime's tether
    /// tells the adapter, §6.8): what it remembers of the old one is void.
    pub fn new_incarnation(&mut self) {
        self.node.new_incarnation();
    }
}
