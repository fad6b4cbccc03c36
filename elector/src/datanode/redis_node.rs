//! Redis 7: `REPLICAOF` takes the client port. The fence keeps a primary a
//! primary (so its replicas keep streaming, which a switchover needs) but
//! makes it refuse writes: `min-replicas-to-write` set beyond the cluster
//! size makes every write fail with NOREPLICAS until it is lifted.
//!
//! Unfenced, the same setting is the data node's own dead-man switch
//! (protocol §6.4.1): `min-replicas-to-write` is quorum − 1 and
//! `min-replicas-max-lag` a few seconds, so a primary whose replicas all
//! left it (they detach from a primary they no longer vouch for, §6.2)
//! refuses writes on its own, even if its elector is frozen or gone.
//!
//! Nothing is assumed: every poll reads the three settings back
//! (`CONFIG GET`), and a target counts as applied only when what the server
//! says matches it. A fence lifted by hand, a `CONFIG SET` that timed out
//! but ran, `replica-read-only no` or `min-replicas-max-lag 0` (which turns
//! the whole check off in Redis) are all seen and overridden.

use super::client::{Credentials, RespClient};
use super::info::{RedisSettings, Upstream};
use super::{resolve, DataNodeAdapter, DataNodeError, ReplicationInfo, NOWHERE};
use crate::core::DataNodeTarget;

/// More replicas than any cluster has: writes are refused.
const FENCE_MIN_REPLICAS: u64 = 1000;

pub struct RedisNode {
    client: RespClient,
    following: Upstream,
    /// `min-replicas-to-write` of an unfenced primary: quorum − 1.
    write_quorum: u64,
    /// `min-replicas-max-lag` in seconds (Redis counts whole seconds; 0
    /// disables the check, so it is at least 1).
    max_lag_s: u64,
    /// Added to an upstream's client port to reach its replication gate
    /// (protocol §6.10); 0 with the gate off.
    upstream_port_offset: u16,
}

impl RedisNode {
    pub(crate) fn new(
        address: &str,
        credentials: &Credentials,
        write_quorum: u64,
        max_lag_s: u64,
    ) -> RedisNode {
        RedisNode {
            client: RespClient::new(address, credentials),
            following: Upstream::default(),
            write_quorum,
            max_lag_s: max_lag_s.max(1),
            upstream_port_offset: 0,
        }
    }

    /// Replicate through the upstream's replication gate: its client port +
    /// `offset` (protocol §6.10).
    pub(crate) fn with_upstream_port_offset(mut self, offset: u16) -> RedisNode {
        self.upstream_port_offset = offset;
        self
    }

    fn wanted(&self, fenced: bool) -> RedisSettings {
        RedisSettings {
            min_replicas_to_write: if fenced {
                FENCE_MIN_REPLICAS
            } else {
                self.write_quorum
            },
            min_replicas_max_lag: self.max_lag_s,
            replica_read_only: true,
        }
    }

    /// One `CONFIG SET` with every setting the fence relies on.
    async fn set_fence(&mut self, on: bool) -> Result<(), DataNodeError> {
        let w = self.wanted(on);
        let (min, lag) = (
            w.min_replicas_to_write.to_string(),
            w.min_replicas_max_lag.to_string(),
        );
        self.client
            .call::<String>(&[
                "CONFIG",
                "SET",
                "min-replicas-to-write",
                &min,
                "min-replicas-max-lag",
                &lag,
                "replica-read-only",
                "yes",
            ])
            .await
            .map(drop)
    }

    fn settings_are(&self, info: &ReplicationInfo, fenced: bool) -> bool {
        info.redis_settings.as_ref() == Some(&self.wanted(fenced))
    }
}

impl DataNodeAdapter for RedisNode {
    fn kind(&self) -> &'static str {
        "redis"
    }

    async fn observe(&mut self) -> Result<ReplicationInfo, DataNodeError> {
        let mut info = self.client.replication_info().await?;
        let reply: Vec<String> = self
            .client
            .call(&[
                "CONFIG",
                "GET",
                "min-replicas-to-write",
                "min-replicas-max-lag",
                "replica-read-only",
            ])
            .await?;
        info.redis_settings = RedisSettings::parse(&reply);
        // A run_id is drawn at each start: it names this process alone.
        info.process_names = info
            .identity
            .iter()
            .filter(|i| i.starts_with("run_id:"))
            .cloned()
            .collect();
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
                let port = port.saturating_add(self.upstream_port_offset);
                self.client.replicaof(&host, port).await?;
                self.following.set(primary_addr, host, port);
            }
        }
        Ok(())
    }

    async fn fence_blind(&mut self) -> Result<(), DataNodeError> {
        self.set_fence(true).await
    }

    fn satisfies(&self, info: &ReplicationInfo, target: &DataNodeTarget) -> bool {
        let fenced = !target.writable();
        if !self.settings_are(info, fenced) {
            return false;
        }
        match target {
            DataNodeTarget::Primary
            | DataNodeTarget::FencedPrimary
            | DataNodeTarget::HandingOver => info.is_master(),
            DataNodeTarget::Isolated => info.follows(NOWHERE.0, NOWHERE.1),
            DataNodeTarget::Follow { primary_addr, .. } => {
                self.following.satisfies(primary_addr, info)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(role: &str, settings: RedisSettings) -> ReplicationInfo {
        ReplicationInfo {
            role: role.into(),
            redis_settings: Some(settings),
            ..ReplicationInfo::default()
        }
    }

    #[test]
    fn a_fence_lifted_by_hand_is_not_taken_for_applied() {
        let node = RedisNode::new("127.0.0.1:1", &Credentials::default(), 1, 2);
        let lifted = info("master", node.wanted(false));
        assert!(!node.satisfies(&lifted, &DataNodeTarget::FencedPrimary));
        assert!(node.satisfies(
            &info("master", node.wanted(true)),
            &DataNodeTarget::FencedPrimary
        ));
    }

    #[test]
    fn a_disabled_lag_check_or_a_writable_replica_setting_is_drift() {
        let node = RedisNode::new("127.0.0.1:1", &Credentials::default(), 1, 2);
        let mut no_lag = node.wanted(false);
        no_lag.min_replicas_max_lag = 0;
        assert!(!node.satisfies(&info("master", no_lag), &DataNodeTarget::Primary));
        let mut writable_replica = node.wanted(true);
        writable_replica.replica_read_only = false;
        let mut replica = info("slave", writable_replica);
        replica.master_host = Some(NOWHERE.0.into());
        replica.master_port = Some(NOWHERE.1);
        assert!(!node.satisfies(&replica, &DataNodeTarget::Isolated));
    }

    #[test]
    fn an_unfenced_primary_keeps_a_write_quorum_as_its_dead_man_switch() {
        let node = RedisNode::new("127.0.0.1:1", &Credentials::default(), 2, 0);
        let w = node.wanted(false);
        assert_eq!((w.min_replicas_to_write, w.min_replicas_max_lag), (2, 1));
    }
}
