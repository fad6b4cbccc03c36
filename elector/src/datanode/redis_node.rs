//! Redis 7: `REPLICAOF` takes the client port. The fence keeps a primary a
//! primary (so its replicas keep streaming, which a switchover needs) but
//! makes it refuse writes: `min-replicas-to-write` set beyond the cluster
//! size makes every write fail with NOREPLICAS until it is lifted.

use super::info::{RespClient, Upstream};
use super::{resolve, DataNodeAdapter, DataNodeError, ReplicationInfo, NOWHERE};
use crate::core::DataNodeTarget;

/// More replicas than any cluster has: writes are refused.
const FENCE_MIN_REPLICAS: &str = "1000";

pub struct RedisNode {
    client: RespClient,
    following: Upstream,
    fenced: Option<bool>,
}

impl RedisNode {
    pub fn new(address: &str, password: Option<&str>) -> RedisNode {
        RedisNode {
            client: RespClient::new(address, password),
            following: Upstream::default(),
            fenced: None,
        }
    }

    async fn set_fence(&mut self, on: bool) -> Result<(), DataNodeError> {
        let value = if on { FENCE_MIN_REPLICAS } else { "0" };
        self.client
            .call::<String>(&["CONFIG", "SET", "min-replicas-to-write", value])
            .await?;
        self.fenced = Some(on);
        Ok(())
    }
}

impl DataNodeAdapter for RedisNode {
    fn kind(&self) -> &'static str {
        "redis"
    }

    async fn observe(&mut self) -> Result<ReplicationInfo, DataNodeError> {
        let info = self.client.replication_info().await?;
        if info.is_master() && self.fenced.is_none() {
            // Learn the fence after a restart of ours: ask rather than assume.
            let v: Vec<String> = self
                .client
                .call(&["CONFIG", "GET", "min-replicas-to-write"])
                .await?;
            self.fenced = Some(v.get(1).is_some_and(|n| n != "0"));
        }
        Ok(info)
    }

    async fn apply(&mut self, target: &DataNodeTarget) -> Result<(), DataNodeError> {
        match target {
            DataNodeTarget::Primary => {
                // Promote while still fenced, then lift the fence.
                self.set_fence(true).await?;
                self.client.promote().await?;
                self.following.clear();
                self.set_fence(false).await?;
            }
            DataNodeTarget::FencedPrimary | DataNodeTarget::HandingOver => {
                self.set_fence(true).await?;
                self.client.promote().await?;
                self.following.clear();
            }
            DataNodeTarget::Isolated => {
                self.set_fence(true).await?;
                self.client.replicaof(NOWHERE.0, NOWHERE.1).await?;
                self.following.clear();
            }
            DataNodeTarget::Follow { primary_addr, .. } => {
                self.set_fence(true).await?;
                let (host, port) = resolve(primary_addr).await?;
                self.client.replicaof(&host, port).await?;
                self.following.set(primary_addr, host, port);
            }
        }
        Ok(())
    }

    fn satisfies(&self, info: &ReplicationInfo, target: &DataNodeTarget) -> bool {
        match target {
            DataNodeTarget::Primary => info.is_master() && self.fenced == Some(false),
            DataNodeTarget::FencedPrimary | DataNodeTarget::HandingOver => {
                info.is_master() && self.fenced == Some(true)
            }
            DataNodeTarget::Isolated => info.follows(NOWHERE.0, NOWHERE.1),
            DataNodeTarget::Follow { primary_addr, .. } => {
                self.following.satisfies(primary_addr, info)
            }
        }
    }
}
