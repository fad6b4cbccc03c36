//! The data-node adapter (docs/architecture.md §Data node): drives a
//! Redis-compatible server towards the core's [`DataNodeTarget`] with
//! ordinary commands and reports what it observes.
//!
//! It runs in its own task: a data node that is down or slow delays only its
//! own observations, never the protocol (every command has a timeout).

mod info;
mod kevy;
mod redis_node;
pub mod stale_connect;

pub use info::{RedisSettings, ReplicationInfo};
pub use kevy::KevyNode;
pub use redis_node::RedisNode;

use crate::core::{DataNodeTarget, Observation};
use std::future::Future;
use std::time::{Duration, Instant};
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
    #[error("data node not running: {0}")]
    Gone(String),
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
    /// Reads `INFO server` and `INFO replication` (and, for Redis, the
    /// fence settings), fresh from the server.
    fn observe(&mut self) -> impl Future<Output = Result<ReplicationInfo, DataNodeError>> + Send;
    /// Makes the node what `target` says (idempotent).
    fn apply(
        &mut self,
        target: &DataNodeTarget,
    ) -> impl Future<Output = Result<(), DataNodeError>> + Send;
    /// Refuses writes without reading anything first: the fence tried when
    /// `INFO` itself fails (a timeout, `maxclients`), protocol §6.4.1.
    fn fence_blind(&mut self) -> impl Future<Output = Result<(), DataNodeError>> + Send;
    /// Whether what we observe already is `target` (else it is re-applied).
    fn satisfies(&self, info: &ReplicationInfo, target: &DataNodeTarget) -> bool;
    /// Hanging replication connects aborted since the last call, and the
    /// last reason one could not be (kevy only).
    fn take_aborts(&mut self) -> stale_connect::AbortTally {
        stale_connect::AbortTally::default()
    }
    /// Acknowledgement nudges sent since the last call (kevy only).
    fn take_ack_nudges(&mut self) -> u64 {
        0
    }
}

/// What the adapter task reports to the runtime.
#[derive(Debug, Clone, Default)]
pub struct DataNodeReport {
    pub obs: Observation,
    pub info: Option<ReplicationInfo>,
    pub error: Option<String>,
    /// A fence target was applied in this round: how long after it was
    /// issued (exported as `elector_fence_apply_seconds`, protocol §6.2.1).
    pub fence_applied_after: Option<Duration>,
    /// Hanging replication connects aborted in this round (kevy), and why
    /// one could not be.
    pub aborts: stale_connect::AbortTally,
    /// Acknowledgement nudges sent to lagging replicas in this round (kevy).
    pub ack_nudges: u64,
}

/// The adapter's memory of the data node between polls.
#[derive(Default)]
struct Tracker {
    applied_seq: u64,
    offset_at_apply: Option<u64>,
    identity: Option<String>,
    generation: u64,
    /// The last target applied was writable (a primary's data node does not
    /// turn into a replica by itself: if it does, it restarted).
    applied_writable: bool,
    /// When the newest target was first seen (for the fence latency).
    target_seen: Option<(u64, Instant)>,
    /// A writable target with a sequence number at or below this is not
    /// applied again: the node was demoted by someone else while it held
    /// it, and only a target the core issues afterwards may undo that.
    hold_writable_through: u64,
    /// How many such demotions were seen (reported to the core).
    overridden: u64,
    /// The node may take writes: nothing non-writable has been applied
    /// since we last tried a writable target, or since start. Only then
    /// must a fence go out before anything is read; on a node already
    /// fenced a read first spares a redundant command (on kevy, a
    /// `REPLICAOF` that restarts its replication thread).
    may_be_writable: bool,
}

/// What a poll learns about who changed the data node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Change {
    None,
    /// Another process answers, or a writable node turned replica and we
    /// cannot tell whether it is the same process: its data is not trusted.
    Restarted,
    /// The same process, writable when we left it, is a replica now: the
    /// watchdog's clamp or an operator. Its data is intact.
    DemotedByOthers,
}

impl Tracker {
    /// Decides from `info` whether the data node restarted or was demoted
    /// under us.
    fn classify(&mut self, info: &ReplicationInfo, seq: u64) -> Change {
        // `None`: one side's identity is unknown, so a demotion cannot be
        // told apart from a restart.
        let same_process = match (&self.identity, &info.identity) {
            (Some(old), Some(new)) => Some(old == new),
            _ => None,
        };
        if info.identity.is_some() {
            self.identity = info.identity.clone();
        }
        let demoted = self.applied_writable && self.applied_seq == seq && !info.is_master();
        let change = match same_process {
            Some(false) => Change::Restarted,
            Some(true) if demoted => Change::DemotedByOthers,
            None if demoted => Change::Restarted,
            _ => return Change::None,
        };
        self.applied_writable = false;
        if change == Change::Restarted {
            self.generation += 1;
        } else {
            self.hold_writable_through = seq;
            self.overridden += 1;
        }
        change
    }
}

/// Drives `adapter`: applies the latest target, polls every `poll`, and
/// sends a report after each poll.
///
/// Safety rules (protocol §6.4.1, §6.8): a fence target is applied before
/// anything is read while the node may be writable; when the node cannot be read, a non-writable target is
/// still enforced with a blind fence; a data node that restarted (another
/// process answers, or a primary turned replica by itself) gets the
/// start-up clamp at once and nothing else until the core has re-issued a
/// target, so whatever came back is never made writable without the core
/// deciding again.
pub async fn run<A: DataNodeAdapter>(
    mut adapter: A,
    mut targets: watch::Receiver<(u64, u64, DataNodeTarget)>,
    reports: mpsc::Sender<DataNodeReport>,
    poll: Duration,
) {
    let mut t = Tracker {
        may_be_writable: true,
        ..Tracker::default()
    };
    let mut ticker = tokio::time::interval(poll);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            changed = targets.changed() => if changed.is_err() { return },
        }
        // `generation`: the data-node generation the core knew when it chose
        // this target. A target chosen before the core learned of a restart
        // is never applied to what came back.
        let (seq, generation, target) = targets.borrow_and_update().clone();
        if t.target_seen.is_none_or(|(s, _)| s != seq) {
            t.target_seen = Some((seq, Instant::now()));
        }
        let mut error = None;
        let mut fence_applied_after = None;
        let mut restarted = false;
        // A new fence goes out before anything is read (unless the node is
        // fenced already, see `may_be_writable`): reading first would
        // add a command (and its timeout) to the fence's latency.
        if target.fences() && seq > t.applied_seq && generation == t.generation && t.may_be_writable
        {
            match adapter.apply(&target).await {
                Ok(()) => {
                    tracing::info!(target = ?target, seq, backend = adapter.kind(), "data node fenced");
                    t.applied_seq = seq;
                    t.applied_writable = false;
                    t.may_be_writable = false;
                    fence_applied_after = t.target_seen.map(|(_, at)| at.elapsed());
                }
                Err(e) => error = Some(e.to_string()),
            }
        }
        let before = adapter.observe().await;
        if let Ok(info) = &before {
            match t.classify(info, seq) {
                Change::None => {}
                Change::Restarted => {
                    restarted = true;
                    t.may_be_writable = true;
                    tracing::warn!(generation = t.generation, identity = ?info.identity, backend = adapter.kind(),
                        "data node restarted under us: clamping it until the elector decides again");
                    if let Err(e) = adapter.apply(&DataNodeTarget::Isolated).await {
                        error = Some(e.to_string());
                    }
                }
                Change::DemotedByOthers => {
                    tracing::warn!(seq, backend = adapter.kind(),
                        "data node demoted by someone else (watchdog or operator), same process: writable again only when the elector decides so anew");
                }
            }
        }
        let current = generation == t.generation;
        // A new target the node already satisfies (kevy: fenced primary and
        // isolated are the same command) needs no command at all.
        let satisfied = before
            .as_ref()
            .is_ok_and(|info| adapter.satisfies(info, &target));
        if current && satisfied && seq > t.applied_seq {
            t.applied_seq = seq;
            t.applied_writable = target.writable();
            t.may_be_writable = target.writable();
            t.offset_at_apply = before.as_ref().ok().map(|i| i.offset);
        }
        // A writable target the node was demoted from by someone else is
        // stale: the core re-decides (its lease first) and issues a new one.
        let held = target.writable() && seq <= t.hold_writable_through;
        let needs_apply = current && !restarted && !held && before.is_ok() && !satisfied;
        if needs_apply {
            if target.writable() {
                t.may_be_writable = true;
            }
            match adapter.apply(&target).await {
                Ok(()) => {
                    if !target.writable() {
                        t.may_be_writable = false;
                    }
                    if seq > t.applied_seq {
                        tracing::info!(target = ?target, seq, backend = adapter.kind(), "data node updated");
                    } else {
                        tracing::warn!(target = ?target, backend = adapter.kind(), "data node drifted; re-applied");
                    }
                    if !target.writable() && fence_applied_after.is_none() && seq > t.applied_seq {
                        fence_applied_after = t.target_seen.map(|(_, at)| at.elapsed());
                    }
                    t.applied_seq = seq;
                    t.applied_writable = target.writable();
                }
                Err(e) => {
                    tracing::warn!(error = %e, target = ?target, "applying data node target failed");
                    error = Some(e.to_string());
                }
            }
        }
        if before.is_err() && !target.writable() {
            // Cannot read the node, but it must not take writes: fence blind.
            if let Err(e) = adapter.fence_blind().await {
                tracing::debug!(error = %e, "blind fence failed too");
            }
        }
        let aborts = adapter.take_aborts();
        let ack_nudges = adapter.take_ack_nudges();
        if aborts.aborted > 0 {
            tracing::info!(aborted = aborts.aborted, backend = adapter.kind(),
                "aborted hanging connects to the primary the data node left (its REPLICAOF waits for them)");
        }
        if let Some(e) = &aborts.error {
            tracing::warn!(error = %e, backend = adapter.kind(),
                "could not abort the data node's hanging replication connects: this retarget may wait out kevy's 5 s connect timeout");
        }
        // The offset reported with `applied_seq` is read after the apply.
        let after = if needs_apply || restarted {
            adapter.observe().await
        } else {
            before
        };
        if needs_apply && error.is_none() {
            t.offset_at_apply = after.as_ref().ok().map(|i| i.offset);
        }
        let report = match after {
            Ok(info) => DataNodeReport {
                obs: Observation {
                    reachable: true,
                    offset: Some(info.offset),
                    link_up: info.is_master() || info.link_up,
                    applied_seq: t.applied_seq,
                    offset_at_apply: t.offset_at_apply,
                    generation: t.generation,
                    gone: false,
                    overridden: t.overridden,
                },
                info: Some(info),
                error,
                fence_applied_after,
                aborts,
                ack_nudges,
            },
            Err(e) => DataNodeReport {
                obs: Observation {
                    reachable: false,
                    offset: None,
                    link_up: false,
                    applied_seq: t.applied_seq,
                    offset_at_apply: t.offset_at_apply,
                    generation: t.generation,
                    gone: matches!(e, DataNodeError::Gone(_)),
                    overridden: t.overridden,
                },
                info: None,
                error: Some(e.to_string()),
                fence_applied_after,
                aborts,
                ack_nudges,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn info(role: &str, identity: Option<&str>) -> ReplicationInfo {
        ReplicationInfo {
            role: role.into(),
            identity: identity.map(str::to_string),
            ..Default::default()
        }
    }

    /// A tracker that has applied writable target `seq` to process `id`.
    fn writable_at(seq: u64, id: Option<&str>) -> Tracker {
        let mut t = Tracker::default();
        assert_eq!(t.classify(&info("master", id), seq), Change::None);
        t.applied_seq = seq;
        t.applied_writable = true;
        t
    }

    #[test]
    fn another_process_answering_is_a_restart_and_a_new_generation() {
        let mut t = writable_at(3, Some("run_id:a"));
        assert_eq!(
            t.classify(&info("master", Some("run_id:b")), 3),
            Change::Restarted
        );
        assert_eq!((t.generation, t.overridden), (1, 0));
    }

    #[test]
    fn the_same_process_demoted_by_someone_else_is_held_not_restarted() {
        let mut t = writable_at(3, Some("run_id:a"));
        assert_eq!(
            t.classify(&info("slave", Some("run_id:a")), 3),
            Change::DemotedByOthers
        );
        assert_eq!(
            (t.generation, t.overridden, t.hold_writable_through),
            (0, 1, 3)
        );
        // Seen once: the next poll of the still-demoted node is no new event.
        assert_eq!(
            t.classify(&info("slave", Some("run_id:a")), 3),
            Change::None
        );
        assert_eq!(t.overridden, 1);
    }

    #[test]
    fn a_demotion_we_cannot_attribute_to_the_same_process_counts_as_a_restart() {
        let mut t = writable_at(3, None);
        assert_eq!(t.classify(&info("slave", None), 3), Change::Restarted);
        assert_eq!(t.generation, 1);
    }

    #[test]
    fn a_replica_by_our_own_newer_target_is_no_demotion() {
        let mut t = writable_at(3, Some("run_id:a"));
        // Target 4 (a fence) is newer than what was applied writable.
        assert_eq!(
            t.classify(&info("slave", Some("run_id:a")), 4),
            Change::None
        );
        assert_eq!((t.generation, t.overridden), (0, 0));
    }
}
