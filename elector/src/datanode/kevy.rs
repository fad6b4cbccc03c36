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
//!
//! Every `REPLICAOF` makes kevy join its replication thread, which may be
//! stuck in a 5 s connect to a primary that is gone: we abort that connect
//! while the command is outstanding ([`super::stale_connect`]).
//!
//! A kevy replica acknowledges a frame only if its last acknowledgement is
//! 100 ms old or more; otherwise it waits for the next frame or for the
//! primary's ping, sent once a second. The last writes of a burst therefore
//! wait up to a second for `WAIT`, and so does the first write a new primary
//! takes. While a replica lags, the primary's elector sends a frame of its
//! own ([`ACK_NUDGE`]: a `DEL` of a key that does not exist, replicated like
//! any write), so the acknowledgement follows within a poll or two.

use super::client::{Credentials, RespClient};
use super::info::Upstream;
use super::stale_connect::{abort_until_done, AbortTally};
use super::{resolve, DataNodeAdapter, DataNodeError, ReplicationInfo, NOWHERE};
use crate::core::DataNodeTarget;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// How long a replica waits for its new primary's kevy to report itself a
/// primary before following it anyway. kevy bumps its feed generation on
/// promotion; a replica that connected a moment before streams the old
/// generation until the next upstream ping (1 s) tells it to re-handshake
/// and take a second snapshot. Following only a promoted node saves that.
const PROMOTION_WAIT: Duration = Duration::from_millis(1_000);
const PROMOTION_POLL: Duration = Duration::from_millis(20);

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

/// The nudge: deletes a key reserved for it, which never exists, so it
/// changes no data; kevy replicates it all the same (one frame).
pub(crate) const ACK_NUDGE: [&str; 2] = ["DEL", "__elector_ack_nudge__"];

/// At most one nudge per this long: a replica acknowledges a frame only
/// 100 ms after its last acknowledgement, and the primary's INFO shows an
/// acknowledgement up to one 100 ms tick late, so nudging on every 100 ms
/// poll would mostly nudge again for a lag already being answered.
const ACK_NUDGE_GAP: Duration = Duration::from_millis(150);

pub struct KevyNode {
    client: RespClient,
    credentials: Credentials,
    /// A client of the primary we were last told to follow (its client
    /// port), to see it promoted before we follow it.
    upstream_probe: Option<(String, RespClient)>,
    replication_port_offset: u16,
    /// Resolved replication address of the primary we were last told to follow.
    following: Upstream,
    /// Whether a quiesce we set may still be in force (`None`: unknown, e.g.
    /// after our own restart; treated as "maybe").
    quiesced: Option<bool>,
    /// When we last sent `FAILOVER ABORT`.
    aborted_at: Option<Instant>,
    /// Abort hanging connects to the upstream a `REPLICAOF` leaves.
    abort_stale_connects: bool,
    /// The replication address kevy itself reported following on the last
    /// poll: what its thread dials, even after our own restart.
    upstream_seen: Option<(String, u16)>,
    /// What the aborts did since the last report.
    aborts: AbortTally,
    /// Nudge lagging replicas into acknowledging (`data_node.ack_nudge`).
    ack_nudge: bool,
    /// The last target we applied made the node a writable primary.
    writable_applied: bool,
    last_nudge: Option<Instant>,
    /// Nudges sent since the last report.
    ack_nudges: u64,
}

impl KevyNode {
    pub(crate) fn new(
        address: &str,
        credentials: &Credentials,
        replication_port_offset: u16,
    ) -> KevyNode {
        KevyNode {
            client: RespClient::new(address, credentials),
            credentials: credentials.clone(),
            upstream_probe: None,
            replication_port_offset,
            following: Upstream::default(),
            quiesced: None,
            aborted_at: None,
            abort_stale_connects: true,
            upstream_seen: None,
            aborts: AbortTally::default(),
            ack_nudge: false,
            writable_applied: false,
            last_nudge: None,
            ack_nudges: 0,
        }
    }

    /// Whether to nudge lagging replicas into acknowledging while this node
    /// is the writable primary (`data_node.ack_nudge`; off unless set).
    pub(crate) fn with_ack_nudge(mut self, on: bool) -> KevyNode {
        self.ack_nudge = on;
        self
    }

    /// A nudge is due: we made this node the writable primary, it still is
    /// one, an online replica has not acknowledged all it holds, and the
    /// last nudge is [`ACK_NUDGE_GAP`] old.
    fn nudge_due(&self, info: &ReplicationInfo, now: Instant) -> bool {
        self.ack_nudge
            && self.writable_applied
            && self.quiesced == Some(false)
            && info.is_master()
            && info
                .slowest_replica_ack
                .is_some_and(|acked| acked < info.offset)
            && self
                .last_nudge
                .is_none_or(|at| now.duration_since(at) >= ACK_NUDGE_GAP)
    }

    /// Sends one nudge. A refusal (the node was fenced meanwhile) or a
    /// timeout only costs this nudge; the poll's reading stands.
    async fn nudge(&mut self, now: Instant) {
        self.last_nudge = Some(now);
        match self.client.call::<i64>(&ACK_NUDGE).await {
            Ok(_) => self.ack_nudges += 1,
            Err(e) => tracing::debug!(error = %e, "acknowledgement nudge not taken"),
        }
    }

    /// Waits, [`PROMOTION_WAIT`] at most, until the kevy at `primary_addr`
    /// (its client address) reports itself a primary.
    async fn await_promotion(&mut self, primary_addr: &str) {
        if self
            .upstream_probe
            .as_ref()
            .is_none_or(|(a, _)| a != primary_addr)
        {
            let client = RespClient::new(primary_addr, &self.credentials);
            self.upstream_probe = Some((primary_addr.to_string(), client));
        }
        let Some((_, probe)) = self.upstream_probe.as_mut() else {
            return;
        };
        let deadline = tokio::time::Instant::now() + PROMOTION_WAIT;
        loop {
            let info = tokio::time::timeout_at(deadline, probe.replication_info()).await;
            match info {
                Ok(Ok(info)) if info.is_master() => return,
                Err(_) => break,
                Ok(_) => {}
            }
            if tokio::time::Instant::now() + PROMOTION_POLL >= deadline {
                break;
            }
            tokio::time::sleep(PROMOTION_POLL).await;
        }
        tracing::debug!(
            primary_addr,
            "new primary's kevy not promoted yet; following it anyway"
        );
    }

    /// Whether to abort hanging connects on a retarget (`data_node.abort_stale_connects`).
    pub(crate) fn with_abort_stale_connects(mut self, on: bool) -> KevyNode {
        self.abort_stale_connects = on;
        self
    }

    /// The replication address a `REPLICAOF` towards `to` (`None`: no one)
    /// leaves, if its thread could be dialling somewhere that hangs.
    fn leaving(&self, to: Option<(&str, u16)>) -> Option<(String, u16)> {
        let from = self
            .upstream_seen
            .clone()
            .or_else(|| self.following.address())?;
        let pointless = (from.0.as_str(), from.1) == NOWHERE
            || to.is_some_and(|(h, p)| (h, p) == (from.0.as_str(), from.1));
        (self.abort_stale_connects && !pointless).then_some(from)
    }

    /// `REPLICAOF host port`, or `REPLICAOF NO ONE` for `None`, aborting
    /// meanwhile any connect kevy's replication thread has hanging towards
    /// the upstream it leaves (kevy joins that thread before it answers).
    async fn replicate_from(&mut self, to: Option<(&str, u16)>) -> Result<(), DataNodeError> {
        let leaving = self.leaving(to);
        let command = async {
            match to {
                Some((host, port)) => self.client.replicaof(host, port).await,
                None => self.client.promote().await,
            }
        };
        let Some((host, port)) = leaving else {
            return command.await;
        };
        let (done_tx, done_rx) = watch::channel(false);
        let command = async {
            let result = command.await;
            let _ = done_tx.send(true);
            result
        };
        let (result, tally) = tokio::join!(command, abort_until_done(host, port, done_rx));
        self.aborts.aborted += tally.aborted;
        if tally.error.is_some() {
            self.aborts.error = tally.error;
        }
        result
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
        let info = self.client.replication_info().await?;
        self.upstream_seen = match (&info.master_host, info.master_port) {
            (Some(host), Some(port)) if !info.is_master() => Some((host.clone(), port)),
            _ => None,
        };
        let now = Instant::now();
        if self.nudge_due(&info, now) {
            self.nudge(now).await;
        }
        Ok(info)
    }

    fn take_aborts(&mut self) -> AbortTally {
        std::mem::take(&mut self.aborts)
    }

    fn take_ack_nudges(&mut self) -> u64 {
        std::mem::take(&mut self.ack_nudges)
    }

    async fn apply(&mut self, target: &DataNodeTarget) -> Result<(), DataNodeError> {
        // Demotions come before lifting a quiesce, so a draining primary is
        // never writable in between.
        self.writable_applied = false;
        match target {
            DataNodeTarget::Primary => {
                self.replicate_from(None).await?;
                self.following.clear();
                self.lift_quiesce().await?;
                self.writable_applied = true;
            }
            DataNodeTarget::HandingOver => {
                self.following.clear();
                self.quiesce().await?;
            }
            DataNodeTarget::FencedPrimary | DataNodeTarget::Isolated => {
                self.replicate_from(Some(NOWHERE)).await?;
                self.following.clear();
                self.lift_quiesce().await?;
            }
            DataNodeTarget::Follow { primary_addr, .. } => {
                let (host, client_port) = resolve(primary_addr).await?;
                let port = client_port.saturating_add(self.replication_port_offset);
                if !self.following.is_following(primary_addr) {
                    self.await_promotion(primary_addr).await;
                }
                self.replicate_from(Some((&host, port))).await?;
                self.following.set(primary_addr, host, port);
                self.lift_quiesce().await?;
            }
        }
        Ok(())
    }

    /// kevy's only general fence is demotion (no `min-replicas-*`, no
    /// `replica-read-only` in its `CONFIG SET`).
    async fn fence_blind(&mut self) -> Result<(), DataNodeError> {
        self.writable_applied = false;
        let result = self.replicate_from(Some(NOWHERE)).await;
        self.following.clear();
        result
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

#[cfg(test)]
mod tests {
    use super::*;

    fn replica_of(host: &str, port: u16) -> KevyNode {
        let mut node = KevyNode::new("127.0.0.1:1", &Credentials::default(), 10_000);
        node.upstream_seen = Some((host.to_string(), port));
        node
    }

    #[test]
    fn a_retarget_aborts_connects_to_the_upstream_kevy_last_reported() {
        let node = replica_of("10.0.0.2", 16379);
        assert_eq!(
            node.leaving(Some(("10.0.0.3", 16380))),
            Some(("10.0.0.2".to_string(), 16379))
        );
        // A promotion leaves the old upstream too.
        assert_eq!(node.leaving(None), Some(("10.0.0.2".to_string(), 16379)));
    }

    #[test]
    fn nothing_is_aborted_towards_nowhere_the_same_upstream_or_when_switched_off() {
        let node = replica_of(NOWHERE.0, NOWHERE.1);
        assert_eq!(node.leaving(Some(("10.0.0.3", 16380))), None);
        let node = replica_of("10.0.0.2", 16379);
        assert_eq!(node.leaving(Some(("10.0.0.2", 16379))), None);
        let node = replica_of("10.0.0.2", 16379).with_abort_stale_connects(false);
        assert_eq!(node.leaving(None), None);
    }

    /// A primary at offset 20 whose slowest online replica acknowledged `acked`.
    fn primary_info(acked: Option<u64>) -> ReplicationInfo {
        ReplicationInfo {
            role: "master".into(),
            offset: 20,
            slowest_replica_ack: acked,
            ..ReplicationInfo::default()
        }
    }

    fn writable_primary() -> KevyNode {
        let mut node =
            KevyNode::new("127.0.0.1:1", &Credentials::default(), 10_000).with_ack_nudge(true);
        node.writable_applied = true;
        node.quiesced = Some(false);
        node
    }

    #[test]
    fn a_writable_primary_nudges_a_lagging_replica_at_most_every_gap() {
        let mut node = writable_primary();
        let t0 = Instant::now();
        assert!(node.nudge_due(&primary_info(Some(18)), t0));
        node.last_nudge = Some(t0);
        assert!(!node.nudge_due(&primary_info(Some(18)), t0 + Duration::from_millis(100)));
        assert!(node.nudge_due(&primary_info(Some(18)), t0 + ACK_NUDGE_GAP));
    }

    #[test]
    fn nothing_is_nudged_without_lag_a_replica_or_a_writable_primary_of_ours() {
        let t0 = Instant::now();
        let node = writable_primary();
        assert!(
            !node.nudge_due(&primary_info(Some(20)), t0),
            "all acknowledged"
        );
        assert!(
            !node.nudge_due(&primary_info(None), t0),
            "no online replica"
        );
        let mut replica = primary_info(Some(18));
        replica.role = "slave".into();
        assert!(!node.nudge_due(&replica, t0), "demoted by someone else");
        let mut fenced = writable_primary();
        fenced.writable_applied = false;
        assert!(!fenced.nudge_due(&primary_info(Some(18)), t0));
        let mut draining = writable_primary();
        draining.quiesced = Some(true);
        assert!(
            !draining.nudge_due(&primary_info(Some(18)), t0),
            "handing over"
        );
        let off = writable_primary().with_ack_nudge(false);
        assert!(!off.nudge_due(&primary_info(Some(18)), t0));
    }

    #[test]
    fn without_an_observation_the_address_we_last_gave_is_the_one_left() {
        let mut node = KevyNode::new("127.0.0.1:1", &Credentials::default(), 10_000);
        assert_eq!(node.leaving(None), None);
        node.following.set("n1:6379", "10.0.0.2".into(), 16379);
        assert_eq!(node.leaving(None), Some(("10.0.0.2".to_string(), 16379)));
    }
}
