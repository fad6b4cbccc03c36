//! kevy 7.0.0: `REPLICAOF host port` takes the primary's *replication*
//! port (client port + `replication_port_offset`); there is no CLIENT PAUSE
//! and no CONFIG SET for replica settings, so the general fence is demotion:
//! a fenced or isolated kevy is a read-only replica of an address where
//! nothing listens (it keeps its data; `REPLICAOF NO ONE` makes it writable
//! again). Run kevy with `threads = 1`: with several shards its INFO offset
//! is per shard (docs/architecture.md §kevy).
//!
//! A planned handover needs more than demotion: the primary must refuse
//! writes while staying a primary, so its offset stays readable and its
//! replicas keep streaming until the successor has everything (protocol §8).
//! kevy's `FAILOVER host port TIMEOUT ms` does exactly that first step
//! (writes answer `-QUIESCED`) and then waits in a background thread for
//! `host:port` to report a drained replication link before promoting it. We
//! use only the quiesce: the target is [`NOWHERE`], which never answers, so
//! kevy's own handover can never promote anything, and we lift the quiesce
//! with `FAILOVER ABORT` once the elector's handover has moved on.

use super::info::{RespClient, Upstream};
use super::{resolve, DataNodeAdapter, DataNodeError, ReplicationInfo, NOWHERE};
use crate::core::DataNodeTarget;
use std::time::{Duration, Instant};

/// How long kevy keeps a quiesce on its own if we never lift it: longer than
/// the longest switchover the API accepts (120 s), so it never lifts while a
/// handover still needs it; short enough that a node left quiesced by a
/// crashed elector does not stay unwritable for ever.
const QUIESCE_TIMEOUT_MS: u64 = 600_000;

/// kevy's handover thread notices an abort within one probe interval
/// (250 ms after a refused connection). A new quiesce set before it has
/// noticed would be lifted by that old thread at its old deadline, so a
/// new quiesce waits this long after an abort.
const QUIESCE_THREAD_EXIT: Duration = Duration::from_millis(300);

pub struct KevyNode {
    client: RespClient,
    replication_port_offset: u16,
    /// Resolved replication address of the primary we were last told to follow.
    following: Upstream,
    /// Whether a quiesce we set may still be in force (`None`: unknown, e.g.
    /// after our own restart; treated as "maybe").
    quiesced: Option<bool>,
    /// When we last sent `FAILOVER ABORT`.
    aborted_at: Option<Instant>,
}

impl KevyNode {
    pub fn new(address: &str, password: Option<&str>, replication_port_offset: u16) -> KevyNode {
        KevyNode {
            client: RespClient::new(address, password),
            replication_port_offset,
            following: Upstream::default(),
            quiesced: None,
            aborted_at: None,
        }
    }

    /// Refuses writes while staying a primary. Fails on a replica: quiescing
    /// is only meaningful on a primary, and demoting instead would hide the
    /// offset a handover must compare.
    async fn quiesce(&mut self) -> Result<(), DataNodeError> {
        let info = self.client.replication_info().await?;
        if !info.is_master() {
            return Err(DataNodeError::Refused {
                command: "FAILOVER (quiesce)".into(),
                message: "the node is not a primary; a handover cannot drain it".into(),
            });
        }
        if let Some(at) = self.aborted_at {
            if let Some(wait) = QUIESCE_THREAD_EXIT.checked_sub(at.elapsed()) {
                tokio::time::sleep(wait).await;
            }
        }
        let (host, port) = (NOWHERE.0, NOWHERE.1.to_string());
        let timeout = QUIESCE_TIMEOUT_MS.to_string();
        self.client
            .call::<String>(&["FAILOVER", host, &port, "TIMEOUT", &timeout])
            .await?;
        self.quiesced = Some(true);
        Ok(())
    }

    /// Lifts a quiesce we may have set (harmless when there is none).
    async fn lift_quiesce(&mut self) -> Result<(), DataNodeError> {
        if self.quiesced == Some(false) {
            return Ok(());
        }
        self.client.call::<String>(&["FAILOVER", "ABORT"]).await?;
        self.quiesced = Some(false);
        self.aborted_at = Some(Instant::now());
        Ok(())
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
        // Demotions come before lifting a quiesce, so a draining primary is
        // never writable in between.
        match target {
            DataNodeTarget::Primary => {
                self.following.clear();
                self.client.promote().await?;
                self.lift_quiesce().await?;
            }
            DataNodeTarget::HandingOver => {
                self.following.clear();
                self.quiesce().await?;
            }
            DataNodeTarget::FencedPrimary | DataNodeTarget::Isolated => {
                self.following.clear();
                self.client.replicaof(NOWHERE.0, NOWHERE.1).await?;
                self.lift_quiesce().await?;
            }
            DataNodeTarget::Follow { primary_addr, .. } => {
                let (host, client_port) = resolve(primary_addr).await?;
                let port = client_port.saturating_add(self.replication_port_offset);
                self.client.replicaof(&host, port).await?;
                self.following.set(primary_addr, host, port);
                self.lift_quiesce().await?;
            }
        }
        Ok(())
    }

    /// kevy's only general fence is demotion (no `min-replicas-*`, no
    /// `replica-read-only` in its `CONFIG SET`).
    async fn fence_blind(&mut self) -> Result<(), DataNodeError> {
        self.following.clear();
        self.client.replicaof(NOWHERE.0, NOWHERE.1).await
    }

    fn satisfies(&self, info: &ReplicationInfo, target: &DataNodeTarget) -> bool {
        match target {
            DataNodeTarget::Primary => info.is_master() && self.quiesced == Some(false),
            DataNodeTarget::HandingOver => info.is_master() && self.quiesced == Some(true),
            DataNodeTarget::FencedPrimary | DataNodeTarget::Isolated => {
                info.follows(NOWHERE.0, NOWHERE.1)
            }
            DataNodeTarget::Follow { primary_addr, .. } => {
                self.following.satisfies(primary_addr, info)
            }
        }
    }
}
