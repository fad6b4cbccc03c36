//! kevy 3.17.3: `REPLICAOF host port` takes the primary's *replication*
//! port (client port + `replication_port_offset`); there is no CLIENT PAUSE
//! and no CONFIG SET for replica settings, so the fence is demotion: a
//! fenced or isolated kevy is a read-only replica of an address where
//! nothing listens (it keeps its data; `REPLICAOF NO ONE` makes it writable
//! again). Run kevy with `threads = 1`: with several shards its INFO offset
//! is per shard (docs/architecture.md §kevy).

use super::info::{RespClient, Upstream};
use super::{resolve, DataNodeAdapter, DataNodeError, ReplicationInfo, NOWHERE};
use crate::core::DataNodeTarget;

pub struct KevyNode {
    client: RespClient,
    replication_port_offset: u16,
    /// Resolved replication address of the primary we were last told to follow.
    following: Upstream,
}

impl KevyNode {
    pub fn new(address: &str, password: Option<&str>, replication_port_offset: u16) -> KevyNode {
        KevyNode {
            client: RespClient::new(address, password),
            replication_port_offset,
            following: Upstream::default(),
        }
    }
}

impl DataNodeAdapter for KevyNode {
    fn kind(&self) -> &'static str {
        "kevy"
    }

    async fn observe(&mut self) -> Result<ReplicationInfo, DataNodeError> {
        self.client.replication_info().await
    }

    async fn apply(&mut self, target: &DataNodeTarget) -> Result<(), DataNodeError> {
        match target {
            DataNodeTarget::Primary => {
                self.following.clear();
                self.client.promote().await?;
            }
            DataNodeTarget::FencedPrimary | DataNodeTarget::Isolated => {
                self.following.clear();
                self.client.replicaof(NOWHERE.0, NOWHERE.1).await?;
            }
            DataNodeTarget::Follow { primary_addr, .. } => {
                let (host, client_port) = resolve(primary_addr).await?;
                let port = client_port.saturating_add(self.replication_port_offset);
                self.client.replicaof(&host, port).await?;
                self.following.set(primary_addr, host, port);
            }
        }
        Ok(())
    }

    fn satisfies(&self, info: &ReplicationInfo, target: &DataNodeTarget) -> bool {
        match target {
            DataNodeTarget::Primary => info.is_master(),
            DataNodeTarget::FencedPrimary | DataNodeTarget::Isolated => {
                info.follows(NOWHERE.0, NOWHERE.1)
            }
            DataNodeTarget::Follow { primary_addr, .. } => {
                self.following.satisfies(primary_addr, info)
            }
        }
    }
}
