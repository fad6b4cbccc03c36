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

/// Why a replica detaches the moment its replication link drops: kevy's
/// `REPLICAOF` waits for the old replication thread, and once that thread
/// is inside a connect to a host that died (no RST) it takes up to kevy's
/// fixed 5 s connect timeout; meanwhile the whole server stalls, and with it
/// the detach of §6.2 and the promotion of whoever wins. The thread redials
/// 250 ms after a drop, so a detach sent within that window (the next poll)
/// stops it before the hanging connect starts. The node stays detached for
/// `hold` (the core's `down_after`) unless the target changes; if the
/// primary was fine after all, it is followed again after the hold (a full
/// resync on kevy 7). Detaching never makes anything writable.
#[derive(Debug, Default)]
struct LinkWatch {
    /// The link to the current upstream has been up since we followed it.
    seen_up: bool,
    /// We detached from this primary (configured address) at this instant.
    detached: Option<(String, Instant)>,
}

pub struct KevyNode {
    client: RespClient,
    replication_port_offset: u16,
    /// Resolved replication address of the primary we were last told to follow.
    following: Upstream,
    link: LinkWatch,
    /// How long a replica stays detached after its link dropped.
    hold: Duration,
    /// Whether a quiesce we set may still be in force (`None`: unknown, e.g.
    /// after our own restart; treated as "maybe").
    quiesced: Option<bool>,
    /// When we last sent `FAILOVER ABORT`.
    aborted_at: Option<Instant>,
}

impl KevyNode {
    /// `hold`: how long a replica whose replication link dropped stays
    /// detached from that primary ([`LinkWatch`]); zero turns the early
    /// detach off.
    pub fn new(
        address: &str,
        password: Option<&str>,
        replication_port_offset: u16,
        hold: Duration,
    ) -> KevyNode {
        KevyNode {
            client: RespClient::new(address, password),
            replication_port_offset,
            following: Upstream::default(),
            link: LinkWatch::default(),
            hold,
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

    /// Detached from `primary_addr` after its link dropped, and still within
    /// the hold: the Follow target counts as carried out, so the runner does
    /// not redial a primary that may be dead ([`LinkWatch`]).
    fn holding_off(&self, primary_addr: &str, info: &ReplicationInfo) -> bool {
        self.link.detached.as_ref().is_some_and(|(addr, at)| {
            addr == primary_addr && at.elapsed() < self.hold && info.follows(NOWHERE.0, NOWHERE.1)
        })
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
        let info = self.client.replication_info().await?;
        let Some((addr, host, port)) = self.following.get().cloned() else {
            return Ok(info);
        };
        if self.hold.is_zero() || !info.follows(&host, port) {
            return Ok(info);
        }
        if info.link_up {
            self.link.seen_up = true;
            return Ok(info);
        }
        if !self.link.seen_up {
            // Still connecting or syncing after our REPLICAOF: not a drop.
            return Ok(info);
        }
        tracing::info!(primary = %addr, "replication link dropped: detaching before kevy redials (it could stall every command behind a connect to a dead host)");
        self.client.replicaof(NOWHERE.0, NOWHERE.1).await?;
        self.link = LinkWatch {
            seen_up: false,
            detached: Some((addr, Instant::now())),
        };
        self.client.replication_info().await
    }

    async fn apply(&mut self, target: &DataNodeTarget) -> Result<(), DataNodeError> {
        // Any command of ours ends an early detach's hold.
        self.link = LinkWatch::default();
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
                self.following.satisfies(primary_addr, info) || self.holding_off(primary_addr, info)
            }
        }
    }
}
