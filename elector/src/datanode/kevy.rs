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
//! while the command is outstanding ([`super::stale_connect`]). Leaving
//! [`NOWHERE`], the thread is asleep in its reconnect backoff unless the
//! elector holds its connect there ([`super::nowhere_hold`]) and releases it.
//!
//! A kevy replica acknowledges a frame only if its last acknowledgement is
//! 100 ms old or more; otherwise it waits for the next frame or for the
//! primary's ping, sent once a second. The last writes of a burst therefore
//! wait up to a second for `WAIT`, and so does the first write a new primary
//! takes. While a replica lags, the primary's elector sends frames of its
//! own ([`super::ack_nudge`]: a `DEL` of a key that does not exist,
//! replicated like any write), paced so that `WAIT` answers within about
//! 100 ms + 20 ms of the replica's previous acknowledgement.
//!
//! kevy keeps each replica's acknowledged offset across its own promotions
//! (a new feed generation restarts offsets at 0), so `WAIT` would count
//! acknowledgements from a node's last primary term: a node that was a
//! primary a moment ago is promoted only once those have expired
//! ([`super::kevy_hold`]), and a primary whose lease lapsed is fenced with
//! the quiesce rather than demoted ([`super::kevy_quiesce`]).
//!
//! kevy's `INFO` offsets are not a replica's place in its current feed
//! (a process-lifetime maximum, refreshed at heartbeats); the offset we
//! report and vote with comes from `REPL.TOKEN` ([`super::kevy_stream`]).

use super::ack_nudge::{self, Shared as NudgeShared};
use super::client::{Credentials, RespClient};
use super::info::Upstream;
use super::kevy_hold::PromotionHold;
use super::kevy_pad::StaleAcks;
use super::kevy_quiesce::{Quiesce, QUIESCE_TIMEOUT_MS};
use super::kevy_stream::{self, StreamPosition, UpstreamAt};
use super::stale_connect::{abort_until_done, AbortTally};
use super::{resolve, DataNodeAdapter, DataNodeError, NowhereHold, ReplicationInfo, NOWHERE};
use crate::core::DataNodeTarget;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// How long one attempt to follow a new primary waits for its kevy to report
/// itself a primary; after that the attempt fails and the next poll tries
/// again. A kevy replica serves replicas of its own, in its *old* feed
/// generation: one that followed the new primary before its promotion
/// acknowledged old-generation offsets there, kevy keeps them through the
/// promotion (offsets restart at 0) and `WAIT` counts them (a switchover
/// whose target's promotion waited out the [`super::kevy_hold`] longer than
/// this: `tests/kevy_repromotion.rs`). So a replica never follows a kevy
/// that is not a primary.
const PROMOTION_WAIT: Duration = Duration::from_millis(1_000);
const PROMOTION_POLL: Duration = Duration::from_millis(20);

/// The `[replication] reconnect_window_ms` our configurations give kevy
/// (kevy's own default is 60 s): see [`super::kevy_hold`].
pub(crate) const DEFAULT_RECONNECT_WINDOW: Duration = Duration::from_millis(1_000);

/// What a `REPLICAOF` leaves behind that kevy's join would wait for, and
/// that we can cut short.
#[derive(Debug)]
enum Leaving {
    /// A primary's replication address: its connects may hang ([`super::stale_connect`]).
    HangingConnects((String, u16)),
    /// [`NOWHERE`], where we hold the thread's connects ([`super::nowhere_hold`]).
    HeldAtNowhere(NowhereHold),
}

pub struct KevyNode {
    address: String,
    client: RespClient,
    credentials: Credentials,
    /// A client of the primary we were last told to follow (its client
    /// port), to see it promoted before we follow it.
    upstream_probe: Option<(String, RespClient)>,
    replication_port_offset: u16,
    /// Resolved replication address of the primary we were last told to follow.
    following: Upstream,
    /// The quiesce we set or lifted, and the handover threads it may have
    /// left running ([`super::kevy_quiesce`]).
    quiesce: Quiesce,
    /// Abort hanging connects to the upstream a `REPLICAOF` leaves.
    abort_stale_connects: bool,
    /// The elector's listener on [`NOWHERE`], holding the node's connects
    /// there (the elector's own adapter only, when it could bind it).
    nowhere_hold: Option<NowhereHold>,
    /// The replication address kevy itself reported following on the last
    /// poll: what its thread dials, even after our own restart.
    upstream_seen: Option<(String, u16)>,
    /// What the aborts did since the last report.
    aborts: AbortTally,
    /// Nudge lagging replicas into acknowledging (`data_node.ack_nudge`).
    ack_nudge: bool,
    /// The last target we applied made the node a writable primary.
    writable_applied: bool,
    /// The nudger task's shared state, once started (first observation).
    nudger: Option<Arc<NudgeShared>>,
    /// Since when the nudger has been armed without interruption.
    nudger_armed_since: Option<Instant>,
    /// Promotions wait out kevy's acknowledgement records from the node's
    /// last primary term.
    hold: PromotionHold,
    /// This host's watchdog clamp counter (`watchdog_clamps_path`), and its
    /// value at our last observation.
    watchdog_clamps_file: Option<std::path::PathBuf>,
    watchdog_clamps_seen: Option<u64>,
    /// When we read that value: a clamp counted later was sent after it.
    watchdog_clamps_read_at: Option<Instant>,
    /// Acknowledgements kept from an earlier feed generation: logged, and
    /// padded past on the writable primary we made.
    stale_acks: StaleAcks,
    /// The offset to offer and vote with ([`super::kevy_stream`]).
    stream: StreamPosition,
}

impl Drop for KevyNode {
    fn drop(&mut self) {
        if let Some(n) = &self.nudger {
            n.disarm();
            n.closed.store(true, Ordering::SeqCst);
            n.wake.notify_one();
        }
    }
}

impl KevyNode {
    pub(crate) fn new(
        address: &str,
        credentials: &Credentials,
        replication_port_offset: u16,
    ) -> KevyNode {
        KevyNode {
            address: address.to_string(),
            client: RespClient::new(address, credentials),
            credentials: credentials.clone(),
            upstream_probe: None,
            replication_port_offset,
            following: Upstream::default(),
            quiesce: Quiesce::default(),
            abort_stale_connects: true,
            nowhere_hold: None,
            upstream_seen: None,
            aborts: AbortTally::default(),
            ack_nudge: false,
            writable_applied: false,
            nudger: None,
            nudger_armed_since: None,
            hold: PromotionHold::new(DEFAULT_RECONNECT_WINDOW),
            stale_acks: StaleAcks::default(),
            stream: StreamPosition::default(),
            watchdog_clamps_file: None,
            watchdog_clamps_seen: None,
            watchdog_clamps_read_at: None,
        }
    }

    /// Where this host's watchdog counts its clamps: its quiesce is
    /// invisible in `INFO`, so the count tells us it happened.
    pub(crate) fn with_watchdog_clamps(mut self, path: std::path::PathBuf) -> KevyNode {
        self.watchdog_clamps_file = Some(path);
        self
    }

    /// Reads the watchdog's clamp count; after an increase, a quiesce may be
    /// in force that we did not set ([`KevyNode::watchdog_clamp`]).
    fn note_watchdog_clamps(&mut self, info: &mut ReplicationInfo) {
        let Some(path) = &self.watchdog_clamps_file else {
            return;
        };
        // A missing file is a watchdog that never clamped: 0.
        let count = crate::api::metrics::limits::read_count(path);
        let now = Instant::now();
        if self.watchdog_clamps_seen.is_some_and(|seen| count > seen) {
            // The watchdog counts after its clamp: the quiesce it sent, and
            // the thread that came with it, are younger than our last read
            // (less the moment between its command and its count).
            let read_at = self.watchdog_clamps_read_at.unwrap_or(now);
            let not_before = read_at
                .checked_sub(Duration::from_secs(1))
                .unwrap_or(read_at);
            self.quiesce.set_elsewhere(not_before);
        }
        self.watchdog_clamps_seen = Some(count);
        self.watchdog_clamps_read_at = Some(now);
        info.watchdog_clamps = Some(count);
    }

    /// Where the elector and the watchdog keep this kevy's position
    /// ([`super::kevy_stream`]).
    pub(crate) fn with_position_file(mut self, path: std::path::PathBuf) -> KevyNode {
        self.stream = std::mem::take(&mut self.stream).with_file(path);
        self
    }

    /// kevy's `[replication] reconnect_window_ms` on this node
    /// (`data_node.kevy_reconnect_window_ms`): how long a promotion of a node
    /// that was a primary a moment ago waits ([`super::kevy_hold`]).
    pub(crate) fn with_reconnect_window(mut self, window: Duration) -> KevyNode {
        self.hold = PromotionHold::new(window);
        self
    }

    /// Whether to nudge lagging replicas into acknowledging while this node
    /// is the writable primary (`data_node.ack_nudge`; off unless set).
    pub(crate) fn with_ack_nudge(mut self, on: bool) -> KevyNode {
        self.ack_nudge = on;
        self
    }

    /// This node is the writable primary we made and still one: the only
    /// node the nudger may send frames to.
    fn nudge_armed(&self, info: &ReplicationInfo) -> bool {
        self.ack_nudge && self.writable_applied && self.quiesce.is_lifted() && info.is_master()
    }

    /// The nudger is to wake: armed, and a replica has not acknowledged all
    /// the node holds (by the INFO view; the nudger then checks fresh):
    /// an online one behind the feed, or a connected one not online yet
    /// while the feed holds anything. kevy lists a replica as `syncing`
    /// from its handshake until its first acknowledgement, and a replica
    /// acknowledges a frame only 100 ms after its handshake or on the 1 s
    /// ping: without a frame after its snapshot, the first writes of a new
    /// primary waited for that ping (a trace of conformance `primary-kill`
    /// at 500 ms: the first `WAIT` ran out its 500 ms with the nudger asleep
    /// throughout; docs/architecture.md §kevy, "A replica that has not
    /// acknowledged yet").
    fn nudge_due(&self, info: &ReplicationInfo) -> bool {
        let online_behind = info
            .slowest_replica_ack
            .is_some_and(|acked| acked < info.offset);
        let not_online_yet = info
            .connected_replicas
            .is_some_and(|connected| connected > info.online_replicas);
        self.nudge_armed(info) && (online_behind || (not_online_yet && info.offset > 0))
    }

    /// Hands the poll's reading to the nudger (started on first use, in
    /// the adapter's runtime), waking it when a replica lags.
    fn feed_nudger(&mut self, info: &ReplicationInfo) {
        if !self.ack_nudge {
            return;
        }
        let (armed, due) = (self.nudge_armed(info), self.nudge_due(info));
        tracing::trace!(
            armed,
            due,
            offset = info.offset,
            slowest_ack = ?info.slowest_replica_ack,
            online = info.online_replicas,
            connected = ?info.connected_replicas,
            "acknowledgement nudger fed"
        );
        let shared = self.nudger.get_or_insert_with(|| {
            let shared = Arc::new(NudgeShared::default());
            ack_nudge::spawn(&self.address, &self.credentials, shared.clone());
            shared
        });
        shared
            .replicas
            .store(info.connected_replicas.unwrap_or(0), Ordering::SeqCst);
        let now = Instant::now();
        self.nudger_armed_since = armed.then(|| self.nudger_armed_since.unwrap_or(now));
        let view_trusted = self
            .nudger_armed_since
            .is_some_and(|since| now.duration_since(since) >= ack_nudge::VIEW_TRUSTED_AFTER);
        shared.set_acked_by_all(ack_nudge::acked_by_all(info).filter(|_| view_trusted));
        shared.armed.store(armed, Ordering::SeqCst);
        if due {
            shared.wake.notify_one();
        }
    }

    /// Stops nudging before a command that may change the node's role.
    fn disarm_nudger(&mut self) {
        self.writable_applied = false;
        self.nudger_armed_since = None;
        if let Some(n) = &self.nudger {
            n.disarm();
        }
    }

    /// Waits, [`PROMOTION_WAIT`] at most, until the kevy at `primary_addr`
    /// (its client address) reports itself a primary, and returns where its
    /// feed is then (our replica has joined once it reaches that);
    /// `UpstreamNotPrimary` if it does not become one.
    async fn await_promotion(&mut self, primary_addr: &str) -> Result<UpstreamAt, DataNodeError> {
        if self
            .upstream_probe
            .as_ref()
            .is_none_or(|(a, _)| a != primary_addr)
        {
            let client = RespClient::new(primary_addr, &self.credentials);
            self.upstream_probe = Some((primary_addr.to_string(), client));
        }
        let Some((_, probe)) = self.upstream_probe.as_mut() else {
            return Err(DataNodeError::UpstreamNotPrimary(primary_addr.to_string()));
        };
        let deadline = tokio::time::Instant::now() + PROMOTION_WAIT;
        loop {
            let info = tokio::time::timeout_at(deadline, probe.replication_info()).await;
            match info {
                Ok(Ok(info)) if info.is_master() => return Ok(feed_position(probe, &info).await),
                Err(_) => break,
                Ok(_) => {}
            }
            if tokio::time::Instant::now() + PROMOTION_POLL >= deadline {
                break;
            }
            tokio::time::sleep(PROMOTION_POLL).await;
        }
        Err(DataNodeError::UpstreamNotPrimary(primary_addr.to_string()))
    }

    /// Whether to abort hanging connects on a retarget (`data_node.abort_stale_connects`).
    pub(crate) fn with_abort_stale_connects(mut self, on: bool) -> KevyNode {
        self.abort_stale_connects = on;
        self
    }

    /// Holds the node's replication connects at [`NOWHERE`], released when
    /// a `REPLICAOF` leaves it (`data_node.abort_stale_connects` too).
    pub(crate) fn with_nowhere_hold(mut self, hold: NowhereHold) -> KevyNode {
        self.nowhere_hold = Some(hold);
        self
    }

    /// What a `REPLICAOF` towards `to` (`None`: no one) must cut short for
    /// kevy to answer without waiting on its replication thread. kevy
    /// restarts the thread even towards the address it follows, so a
    /// connect we hold is released whenever the thread may be at
    /// [`NOWHERE`] (also when we cannot tell, as in a blind fence): held,
    /// it would keep that restart waiting for kevy's 5 s timeout.
    fn leaving(&self, to: Option<(&str, u16)>) -> Option<Leaving> {
        if !self.abort_stale_connects {
            return None;
        }
        let from = self
            .upstream_seen
            .clone()
            .or_else(|| self.following.address());
        let at_nowhere = from.as_ref().is_none_or(|f| (f.0.as_str(), f.1) == NOWHERE);
        match (from, &self.nowhere_hold) {
            (_, Some(hold)) if at_nowhere => Some(Leaving::HeldAtNowhere(hold.clone())),
            (Some(from), _) if !at_nowhere => {
                let staying = to.is_some_and(|(h, p)| (h, p) == (from.0.as_str(), from.1));
                (!staying).then_some(Leaving::HangingConnects(from))
            }
            _ => None,
        }
    }

    /// `REPLICAOF host port`, or `REPLICAOF NO ONE` for `None`, aborting
    /// meanwhile any connect kevy's replication thread has hanging towards
    /// the upstream it leaves (kevy joins that thread before it answers).
    async fn replicate_from(&mut self, to: Option<(&str, u16)>) -> Result<(), DataNodeError> {
        let leaving = self.leaving(to);
        let port = to.map(|(_, p)| p.to_string());
        let replicaof: Vec<&str> = match (to, &port) {
            (Some((host, _)), Some(port)) => vec!["REPLICAOF", host, port],
            _ => vec!["REPLICAOF", "NO", "ONE"],
        };
        // The runner's position is read in the same pipeline, just before
        // the `REPLICAOF` replaces it (its offset restarts at 0).
        let command = async {
            self.stream
                .read_then(&mut self.client, Some(&replicaof))
                .await
                .map(drop)
        };
        let Some(leaving) = leaving else {
            return command.await;
        };
        let (done_tx, done_rx) = watch::channel(false);
        let command = async {
            let result = command.await;
            let _ = done_tx.send(true);
            result
        };
        match leaving {
            Leaving::HangingConnects((host, port)) => {
                let (result, tally) = tokio::join!(command, abort_until_done(host, port, done_rx));
                self.aborts.aborted += tally.aborted;
                if tally.error.is_some() {
                    self.aborts.error = tally.error;
                }
                result
            }
            Leaving::HeldAtNowhere(hold) => {
                let (result, released) = tokio::join!(command, hold.release_until_done(done_rx));
                self.aborts.released += released;
                result
            }
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
        if let Some(wait) = self.quiesce.wait_for_threads(Instant::now()) {
            tokio::time::sleep(wait).await;
        }
        self.send_quiesce().await
    }

    /// `FAILOVER` towards [`NOWHERE`]: writes answer `-QUIESCED` from the
    /// reply on (kevy refuses it on a replica: `Refused`).
    async fn send_quiesce(&mut self) -> Result<(), DataNodeError> {
        let (host, port) = (NOWHERE.0, NOWHERE.1.to_string());
        let timeout = QUIESCE_TIMEOUT_MS.to_string();
        // Before the command: kevy starts the thread before it answers.
        let sent_at = Instant::now();
        self.client
            .call::<String>(&["FAILOVER", host, &port, "TIMEOUT", &timeout])
            .await?;
        self.quiesce.sent(sent_at);
        Ok(())
    }

    /// The fence of a primary whose lease lapsed (or not yet granted): on a
    /// node that is a primary, the quiesce, so it stays a primary in the
    /// same feed generation and a quorum flap re-opens it without a
    /// promotion (kevy would count its replicas' acknowledgements from
    /// before a promotion: [`super::kevy_hold`]), also right after a lift
    /// (a thread that missed the lift counts towards the quiesce's age).
    /// Demotion, as before, on a replica, or once the oldest handover thread
    /// that may still run is [`super::kevy_quiesce::FENCE_QUIESCE_MAX`] old.
    async fn fence_primary(&mut self) -> Result<(), DataNodeError> {
        let outlived = self.quiesce.outlived(Instant::now());
        if self.quiesce.is_set() && !outlived {
            self.following.clear();
            return Ok(());
        }
        if self.hold.was_primary() && !outlived {
            match self.send_quiesce().await {
                Ok(()) => {
                    self.following.clear();
                    return Ok(());
                }
                Err(DataNodeError::Refused { .. }) => {} // a replica after all
                Err(e) => return Err(e),
            }
        }
        self.isolate().await
    }

    /// Demotes to a replica of [`NOWHERE`] (the node keeps its data and
    /// takes no writes), then lifts any quiesce: the `Isolated` target, and
    /// the fence of a primary the quiesce cannot hold.
    async fn isolate(&mut self) -> Result<(), DataNodeError> {
        self.replicate_from(Some(NOWHERE)).await?;
        self.hold.demoted(Instant::now());
        self.following.clear();
        self.lift_quiesce().await
    }

    /// Lifts a quiesce we may have set (harmless when there is none).
    async fn lift_quiesce(&mut self) -> Result<(), DataNodeError> {
        if self.quiesce.is_lifted() {
            return Ok(());
        }
        self.client.call::<String>(&["FAILOVER", "ABORT"]).await?;
        self.quiesce.lifted(Instant::now());
        Ok(())
    }
}

/// Where a primary's feed is now: its `REPL.TOKEN`, live (`INFO`'s
/// `master_repl_offset` is published once per tick, and in the first tick
/// after a promotion still describes the previous primary term's feed: a
/// replica given that as the offset to reach would not count as joined
/// until the new feed passed it). `INFO`'s if the token cannot be read.
async fn feed_position(probe: &mut RespClient, info: &ReplicationInfo) -> UpstreamAt {
    let token = probe.pipeline(&[&["REPL.TOKEN"]]).await.ok();
    UpstreamAt::of_primary(info, token.as_ref().and_then(|t| t.first()))
}

impl DataNodeAdapter for KevyNode {
    fn kind(&self) -> &'static str {
        "kevy"
    }

    async fn observe(&mut self) -> Result<ReplicationInfo, DataNodeError> {
        let mut info = self.client.replication_info().await?;
        self.note_watchdog_clamps(&mut info);
        self.stream.identify(info.identity.as_deref());
        // Raw, so that `-LOADING` (a full resync) is a reading, not a failure.
        let token = self.client.pipeline(&[&["REPL.TOKEN"]]).await?;
        if let Some(reading) = token
            .first()
            .and_then(|t| kevy_stream::parse_reading(&info, t))
        {
            let reported = self.stream.observe(&reading, info.offset);
            info.offset = reported.offset;
            info.link_up &= reported.link_joined;
            info.stream = reported.generation.map(|g| format!("kevy-feed-{g}"));
        }
        self.upstream_seen = match (&info.master_host, info.master_port) {
            (Some(host), Some(port)) if !info.is_master() => Some((host.clone(), port)),
            _ => None,
        };
        self.hold.observed(info.is_master(), Instant::now());
        let may_pad = self.writable_applied && self.quiesce.is_lifted();
        self.stale_acks
            .handle(&mut self.client, &info, may_pad, self.hold.window())
            .await;
        self.feed_nudger(&info);
        Ok(info)
    }

    fn take_aborts(&mut self) -> AbortTally {
        std::mem::take(&mut self.aborts)
    }

    fn take_ack_nudges(&mut self) -> u64 {
        self.nudger
            .as_ref()
            .map_or(0, |n| n.sent.swap(0, Ordering::Relaxed))
    }

    fn take_padded_frames(&mut self) -> u64 {
        self.stale_acks.take_padded_frames()
    }

    async fn apply(&mut self, target: &DataNodeTarget) -> Result<(), DataNodeError> {
        // Demotions come before lifting a quiesce, so a draining primary is
        // never writable in between.
        self.disarm_nudger();
        match target {
            DataNodeTarget::Primary => {
                if let Some(left) = self.hold.remaining(Instant::now()) {
                    return Err(DataNodeError::PromotionHeld {
                        remaining_ms: left.as_millis() as u64,
                        window_ms: self.hold.window().as_millis() as u64,
                    });
                }
                self.replicate_from(None).await?;
                self.hold.observed(true, Instant::now());
                self.following.clear();
                self.lift_quiesce().await?;
                self.writable_applied = true;
            }
            DataNodeTarget::HandingOver => {
                self.following.clear();
                self.quiesce().await?;
            }
            DataNodeTarget::FencedPrimary => self.fence_primary().await?,
            DataNodeTarget::Isolated => self.isolate().await?,
            DataNodeTarget::Follow { primary_addr, .. } => {
                let (host, client_port) = resolve(primary_addr).await?;
                let port = client_port.saturating_add(self.replication_port_offset);
                // Re-applied to the same primary: no new floor to reach.
                let upstream = if self.following.is_following(primary_addr) {
                    UpstreamAt::NONE
                } else {
                    self.await_promotion(primary_addr).await?
                };
                self.replicate_from(Some((&host, port))).await?;
                self.stream.following(upstream);
                self.hold.demoted(Instant::now());
                self.following.set(primary_addr, host, port);
                self.lift_quiesce().await?;
            }
        }
        Ok(())
    }

    /// The watchdog's fence (its own adapter, another process): the same
    /// as a lapsed lease's, quiesce on a primary, so an elector that was
    /// frozen and comes back to its quorum re-opens the node without a
    /// promotion. It reads the role first: it has not been polling. It
    /// counts the clamp after this returns, so the elector, seeing the count
    /// move, knows the quiesce is already in force.
    async fn watchdog_clamp(&mut self) -> Result<(), DataNodeError> {
        self.disarm_nudger();
        if let Ok(info) = self.client.replication_info().await {
            self.hold.observed(info.is_master(), Instant::now());
            // Already fenced: a `REPLICAOF` would only restart kevy's thread,
            // and the elector it stands in for (silent, perhaps frozen)
            // could not release a connect it holds at NOWHERE, so kevy
            // would stall until its 5 s handshake timeout.
            if !info.is_master() && info.follows(NOWHERE.0, NOWHERE.1) {
                self.following.clear();
                return Ok(());
            }
        }
        self.fence_primary().await
    }

    /// A quiesce this watchdog set in an earlier silence was lifted by the
    /// elector when it came back (or replaced by its own): send it again.
    fn watchdog_silence_began(&mut self) {
        self.quiesce.forget();
    }

    /// kevy's only general fence is demotion (no `min-replicas-*`, no
    /// `replica-read-only` in its `CONFIG SET`).
    async fn fence_blind(&mut self) -> Result<(), DataNodeError> {
        self.disarm_nudger();
        let result = self.replicate_from(Some(NOWHERE)).await;
        if result.is_ok() {
            self.hold.demoted(Instant::now());
        }
        self.following.clear();
        result
    }

    fn satisfies(&self, info: &ReplicationInfo, target: &DataNodeTarget) -> bool {
        match target {
            DataNodeTarget::Primary => info.is_master() && self.quiesce.is_lifted(),
            DataNodeTarget::HandingOver => info.is_master() && self.quiesce.is_set(),
            DataNodeTarget::FencedPrimary => {
                (info.is_master()
                    && self.quiesce.is_set()
                    && !self.quiesce.outlived(Instant::now()))
                    || info.follows(NOWHERE.0, NOWHERE.1)
            }
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

    fn replica_of(host: &str, port: u16) -> KevyNode {
        let mut node = KevyNode::new("127.0.0.1:1", &Credentials::default(), 10_000);
        node.upstream_seen = Some((host.to_string(), port));
        node
    }

    /// The upstream whose hanging connects a `REPLICAOF` towards `to` aborts.
    fn aborted_on(node: &KevyNode, to: Option<(&str, u16)>) -> Option<(String, u16)> {
        match node.leaving(to) {
            Some(Leaving::HangingConnects(upstream)) => Some(upstream),
            _ => None,
        }
    }

    #[test]
    fn a_retarget_aborts_connects_to_the_upstream_kevy_last_reported() {
        let node = replica_of("10.0.0.2", 16379);
        assert_eq!(
            aborted_on(&node, Some(("10.0.0.3", 16380))),
            Some(("10.0.0.2".to_string(), 16379))
        );
        // A promotion leaves the old upstream too.
        assert_eq!(
            aborted_on(&node, None),
            Some(("10.0.0.2".to_string(), 16379))
        );
    }

    #[tokio::test]
    async fn leaving_nowhere_releases_the_held_connects_unless_switched_off() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let hold = NowhereHold::on(listener, 6379);
        let node = replica_of(NOWHERE.0, NOWHERE.1).with_nowhere_hold(hold);
        assert!(matches!(
            node.leaving(None),
            Some(Leaving::HeldAtNowhere(_))
        ));
        let retarget = node.leaving(Some(("10.0.0.3", 16380)));
        assert!(matches!(retarget, Some(Leaving::HeldAtNowhere(_))));
        // kevy restarts its thread towards the same address too.
        assert!(matches!(
            node.leaving(Some(NOWHERE)),
            Some(Leaving::HeldAtNowhere(_))
        ));
        let mut blind = KevyNode::new("127.0.0.1:6379", &Credentials::default(), 10_000)
            .with_nowhere_hold(node.nowhere_hold.clone().unwrap());
        assert!(matches!(
            blind.leaving(Some(NOWHERE)),
            Some(Leaving::HeldAtNowhere(_))
        ));
        blind.upstream_seen = Some(("10.0.0.2".into(), 16379));
        assert!(matches!(
            blind.leaving(None),
            Some(Leaving::HangingConnects(_))
        ));
        let off = node.with_abort_stale_connects(false);
        assert!(off.leaving(None).is_none());
    }

    #[test]
    fn nothing_is_aborted_towards_nowhere_the_same_upstream_or_when_switched_off() {
        let node = replica_of(NOWHERE.0, NOWHERE.1);
        assert_eq!(aborted_on(&node, Some(("10.0.0.3", 16380))), None);
        let node = replica_of("10.0.0.2", 16379);
        assert_eq!(aborted_on(&node, Some(("10.0.0.2", 16379))), None);
        let node = replica_of("10.0.0.2", 16379).with_abort_stale_connects(false);
        assert_eq!(aborted_on(&node, None), None);
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
        node.quiesce.lifted(Instant::now());
        node
    }

    #[test]
    fn a_writable_primary_wakes_the_nudger_while_a_replica_lags() {
        let node = writable_primary();
        assert!(node.nudge_due(&primary_info(Some(18))));
        assert!(node.nudge_armed(&primary_info(Some(20))));
    }

    #[test]
    fn a_replica_not_online_yet_wakes_the_nudger_once_the_feed_holds_a_write() {
        let node = writable_primary();
        let mut syncing = primary_info(None);
        syncing.connected_replicas = Some(1);
        assert!(
            node.nudge_due(&syncing),
            "snapshot loaded, no acknowledgement yet"
        );
        let mut one_of_two = primary_info(Some(20));
        one_of_two.connected_replicas = Some(2);
        one_of_two.online_replicas = 1;
        assert!(node.nudge_due(&one_of_two), "the other replica is syncing");
        syncing.offset = 0;
        assert!(!node.nudge_due(&syncing), "a new feed with nothing in it");
        let mut fenced = writable_primary();
        fenced.writable_applied = false;
        syncing.offset = 20;
        assert!(!fenced.nudge_due(&syncing), "not our writable primary");
    }

    #[test]
    fn nothing_is_nudged_without_lag_a_replica_or_a_writable_primary_of_ours() {
        let node = writable_primary();
        assert!(!node.nudge_due(&primary_info(Some(20))), "all acknowledged");
        assert!(!node.nudge_due(&primary_info(None)), "no online replica");
        let mut replica = primary_info(Some(18));
        replica.role = "slave".into();
        assert!(!node.nudge_due(&replica), "demoted by someone else");
        let mut fenced = writable_primary();
        fenced.writable_applied = false;
        assert!(!fenced.nudge_due(&primary_info(Some(18))));
        let mut draining = writable_primary();
        draining.quiesce.sent(Instant::now());
        assert!(!draining.nudge_due(&primary_info(Some(18))), "handing over");
        let off = writable_primary().with_ack_nudge(false);
        assert!(!off.nudge_due(&primary_info(Some(18))));
    }

    #[test]
    fn without_an_observation_the_address_we_last_gave_is_the_one_left() {
        let mut node = KevyNode::new("127.0.0.1:1", &Credentials::default(), 10_000);
        assert_eq!(aborted_on(&node, None), None);
        node.following.set("n1:6379", "10.0.0.2".into(), 16379);
        assert_eq!(
            aborted_on(&node, None),
            Some(("10.0.0.2".to_string(), 16379))
        );
    }
}
