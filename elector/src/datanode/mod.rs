//! The data-node adapter (docs/architecture.md §Data node): drives a
//! Redis-compatible server towards the core's [`DataNodeTarget`] with
//! ordinary commands and reports what it observes.
//!
//! It runs in its own task: a data node that is down or slow delays only its
//! own observations, never the protocol (every command has a timeout).

mod info;
mod kevy;
mod redis_node;

pub use info::ReplicationInfo;
pub use kevy::KevyNode;
pub use redis_node::RedisNode;

use crate::core::{DataNodeTarget, Observation};
use std::future::Future;
use std::time::Duration;
use thiserror::Error;
use tokio::sync::{mpsc, watch};

/// Per-command timeout: a data node slower than this counts as unreachable.
pub const COMMAND_TIMEOUT: Duration = Duration::from_millis(1_000);
/// The address a fenced or isolated node "replicates" from: nothing listens
/// there, so the node stays a read-only replica and keeps its data.
pub const NOWHERE: (&str, u16) = ("127.0.0.1", 1);

#[derive(Debug, Error)]
pub enum DataNodeError {
    #[error("data node unreachable: {0}")]
    Unreachable(String),
    #[error("data node refused {command}: {message}")]
    Refused { command: String, message: String },
    #[error("cannot resolve {0}")]
    Resolve(String),
    #[error("unexpected INFO reply: {0}")]
    BadInfo(String),
}

/// One backend (kevy or Redis).
pub trait DataNodeAdapter: Send + 'static {
    fn kind(&self) -> &'static str;
    /// Reads `INFO replication`.
    fn observe(&mut self) -> impl Future<Output = Result<ReplicationInfo, DataNodeError>> + Send;
    /// Makes the node what `target` says (idempotent).
    fn apply(
        &mut self,
        target: &DataNodeTarget,
    ) -> impl Future<Output = Result<(), DataNodeError>> + Send;
    /// Whether what we observe already is `target` (else it is re-applied:
    /// a restarted data node comes back as its config file says).
    fn satisfies(&self, info: &ReplicationInfo, target: &DataNodeTarget) -> bool;
}

/// What the adapter task reports to the runtime.
#[derive(Debug, Clone, Default)]
pub struct DataNodeReport {
    pub obs: Observation,
    pub info: Option<ReplicationInfo>,
    pub error: Option<String>,
}

/// Drives `adapter`: applies the latest target, polls every `poll`, and
/// sends a report after each poll.
pub async fn run<A: DataNodeAdapter>(
    mut adapter: A,
    mut targets: watch::Receiver<(u64, DataNodeTarget)>,
    reports: mpsc::Sender<DataNodeReport>,
    poll: Duration,
) {
    let mut applied_seq = 0u64;
    let mut offset_at_apply = None;
    let mut ticker = tokio::time::interval(poll);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            changed = targets.changed() => if changed.is_err() { return },
        }
        let (seq, target) = targets.borrow_and_update().clone();
        let mut error = None;
        // Observe first: re-apply only when the node drifted or the target is new.
        let before = adapter.observe().await;
        // A new target the node already satisfies (kevy: fenced primary and
        // isolated are the same command) needs no command at all.
        let satisfied = before
            .as_ref()
            .is_ok_and(|info| adapter.satisfies(info, &target));
        if satisfied && seq > applied_seq {
            applied_seq = seq;
            offset_at_apply = before.as_ref().ok().map(|i| i.offset);
        }
        let needs_apply = before.is_ok() && !satisfied;
        if needs_apply {
            match adapter.apply(&target).await {
                Ok(()) => {
                    if seq > applied_seq {
                        tracing::info!(target = ?target, seq, backend = adapter.kind(), "data node updated");
                    } else {
                        tracing::warn!(target = ?target, backend = adapter.kind(), "data node drifted; re-applied");
                    }
                    applied_seq = seq;
                }
                Err(e) => {
                    tracing::warn!(error = %e, target = ?target, "applying data node target failed");
                    error = Some(e.to_string());
                }
            }
        }
        // The offset reported with `applied_seq` is read after the apply.
        let after = if needs_apply {
            adapter.observe().await
        } else {
            before
        };
        if needs_apply && error.is_none() {
            offset_at_apply = after.as_ref().ok().map(|i| i.offset);
        }
        let report = match after {
            Ok(info) => DataNodeReport {
                obs: Observation {
                    reachable: true,
                    offset: Some(info.offset),
                    link_up: info.is_master() || info.link_up,
                    applied_seq,
                    offset_at_apply,
                },
                info: Some(info),
                error,
            },
            Err(e) => DataNodeReport {
                obs: Observation {
                    reachable: false,
                    offset: None,
                    link_up: false,
                    applied_seq,
                    offset_at_apply,
                },
                info: None,
                error: Some(e.to_string()),
            },
        };
        if reports.send(report).await.is_err() {
            return;
        }
    }
}

/// Resolves `host:port` to an IP (kevy's REPLICAOF wants an address).
pub async fn resolve(addr: &str) -> Result<(String, u16), DataNodeError> {
    let mut found = tokio::net::lookup_host(addr)
        .await
        .map_err(|_| DataNodeError::Resolve(addr.to_string()))?;
    let sock = found
        .next()
        .ok_or_else(|| DataNodeError::Resolve(addr.to_string()))?;
    Ok((sock.ip().to_string(), sock.port()))
}
