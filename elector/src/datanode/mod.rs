//! The data-node adapter (docs/architecture.md §Data node): drives a
//! Redis-compatible server towards the core's [`DataNodeTarget`] with
//! ordinary commands and reports what it observes.
//!
//! It runs in its own task: a data node that is down or slow delays only its
//! own observations, never the protocol (every command has a timeout).

mod ack_nudge;
mod ack_nudge_pacer;
mod any;
mod client;
pub mod driver;
mod error_log;
pub mod floor_hint;
pub mod gate;
mod handle;
mod info;
mod kevy;
mod kevy_files;
mod kevy_hold;
pub mod kevy_mark;
mod kevy_pad;
mod kevy_pipeline;
pub mod kevy_policy;
mod kevy_quiesce;
pub mod kevy_stream;
mod nowhere_hold;
mod redis_node;
pub(crate) mod stale_connect;
pub mod tether;
pub(crate) mod tls;
pub use nowhere_hold::NowhereHold;

pub(crate) use any::AnyNode;
pub(crate) use client::Credentials;
pub use gate::{GateCounts, GateState};
pub use handle::Adapter;
pub use info::{RedisSettings, ReplicationInfo};
pub use kevy::KevyNode;
pub(crate) use kevy::DEFAULT_RECONNECT_WINDOW as KEVY_DEFAULT_RECONNECT_WINDOW;
pub(crate) use kevy_quiesce::{
    FENCE_QUIESCE_LIMIT_RANGE as KEVY_QUIESCE_FENCE_LIMIT_RANGE,
    FENCE_QUIESCE_MAX as KEVY_DEFAULT_QUIESCE_FENCE_LIMIT,
};
pub use redis_node::RedisNode;
use tether::{Tether, TetherCheck};

use crate::core::{DataNodeTarget, Observation};
use driver::{Command, Driver, Observed, Outcome, Step};
use error_log::{ErrorLine, ErrorLog};
use std::future::Future;
use std::time::{Duration, Instant};
use thiserror::Error;
use tokio::sync::{mpsc, watch};

/// Per-command timeout: a data node slower than this counts as unreachable.
pub(crate) const COMMAND_TIMEOUT: Duration = Duration::from_millis(1_000);
/// The address a fenced or isolated node "replicates" from: nothing listens
/// there, so the node stays a read-only replica and keeps its data.
pub const NOWHERE: (&str, u16) = ("127.0.0.1", 1);

#[derive(Debug, Error, Clone, PartialEq, Eq, Hash)]
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
    /// kevy: a promotion waits until the node's acknowledgement records
    /// from its last primary term have expired (`kevy_hold`).
    #[error("promotion held {remaining_ms} ms more: this kevy was a primary {window_ms} ms + a tick ago or less, and until its replicas' old acknowledgements expire WAIT would count them")]
    PromotionHeld { remaining_ms: u64, window_ms: u64 },
    /// kevy: the node to follow does not report itself a primary yet; a
    /// replica of a kevy replica acknowledges offsets of its old feed
    /// generation, which `WAIT` would count once it is promoted.
    #[error("not following {0} yet: its kevy is not a primary (a replica of a replica acknowledges offsets WAIT would count after its promotion)")]
    UpstreamNotPrimary(String),
}

/// One backend (kevy or Redis).
pub(crate) trait DataNodeAdapter: Send + 'static {
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
    /// The watchdog's fence when the elector is silent past its lease: the
    /// start-up clamp, unless the backend has a better one (kevy: the
    /// quiesce on a primary, so it keeps its feed generation).
    fn watchdog_clamp(&mut self) -> impl Future<Output = Result<(), DataNodeError>> + Send {
        async move { self.apply(&DataNodeTarget::Isolated).await }
    }
    /// The watchdog starts fencing for a new silence of the elector: what
    /// the adapter set in an earlier one may since have been lifted or
    /// replaced by the elector, so it must not be taken as still in force.
    fn watchdog_silence_began(&mut self) {}
    /// Hanging replication connects aborted since the last call, and the
    /// last reason one could not be (kevy only).
    fn take_aborts(&mut self) -> stale_connect::AbortTally {
        stale_connect::AbortTally::default()
    }
    /// Acknowledgement nudges sent since the last call (kevy only).
    fn take_ack_nudges(&mut self) -> u64 {
        0
    }
    /// The tether found another data-node process answering (§6.8):
    /// whatever the adapter remembers of the old one is void.
    fn new_incarnation(&mut self) {}
    /// Frames written to pad past stale acknowledgements since the last
    /// call (kevy only, `kevy_pad`).
    fn take_padded_frames(&mut self) -> u64 {
        0
    }
}

/// What the adapter task reports to the runtime.
#[derive(Debug, Clone, Default)]
pub struct DataNodeReport {
    pub obs: Observation,
    pub(crate) info: Option<ReplicationInfo>,
    pub(crate) error: Option<String>,
    /// A fence target was applied in this round: how long after it was
    /// issued (exported as `elector_fence_apply_seconds`, protocol §6.2.1).
    pub(crate) fence_applied_after: Option<Duration>,
    /// A fence target failed to apply in this round.
    pub(crate) fence_failed: bool,
    /// Hanging replication connects aborted in this round (kevy), and why
    /// one could not be.
    pub(crate) aborts: stale_connect::AbortTally,
    /// Acknowledgement nudges sent to lagging replicas in this round (kevy).
    pub(crate) ack_nudges: u64,
    /// Frames written past stale acknowledgements in this round (kevy).
    pub(crate) padded_frames: u64,
}

/// What the data node task hears and says.
pub(crate) struct Channels {
    /// The latest target: (sequence, generation, target).
    pub(crate) targets: watch::Receiver<(u64, u64, DataNodeTarget)>,
    pub(crate) reports: mpsc::Sender<DataNodeReport>,
    /// Set when the elector stops: the task ends after the command it runs,
    /// before the stop's own fence (which a later command would undo).
    pub(crate) stop: watch::Receiver<bool>,
}

/// Drives `adapter` with the pure [`Driver`]: applies the latest target,
/// polls every `poll`, and sends a report after each round. The rules (fence
/// before read, blind fence, restart vs demotion) are the driver's; this
/// task only carries out its commands, with the backend's timeouts. It ends
/// when told to stop, never in the middle of a command (§6.4.1).
pub(crate) async fn run<A: DataNodeAdapter>(
    mut adapter: A,
    channels: Channels,
    poll: Duration,
    tether: std::sync::Arc<Tether>,
    gate: Option<watch::Sender<GateState>>,
    floor_hint: Option<std::path::PathBuf>,
) {
    let mut driver = Driver::new(adapter.kind());
    let mut errors = ErrorLog::default();
    let started = Instant::now();
    let ms = || started.elapsed().as_millis() as u64;
    let mut ticker = tokio::time::interval(poll);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut link_up = false;
    let Channels {
        mut targets,
        reports,
        mut stop,
    } = channels;
    let stopping = |stop: &watch::Receiver<bool>| *stop.borrow();
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            changed = targets.changed() => if changed.is_err() { return },
            changed = stop.changed() => if changed.is_err() { return },
        }
        if stopping(&stop) {
            return;
        }
        let (seq, generation, target) = targets.borrow_and_update().clone();
        let round_target = target.clone();
        let mut incarnation = None;
        let mut step = driver.begin(seq, generation, target, ms());
        let round = loop {
            if stopping(&stop) && !matches!(step, Step::Done(_)) {
                tracing::debug!("data node task stopped between commands");
                return;
            }
            let outcome = match step {
                Step::Done(round) => break round,
                Step::Run(Command::Apply(t)) => Outcome::Applied(adapter.apply(&t).await),
                Step::Run(Command::FenceBlind) => Outcome::BlindFenced(adapter.fence_blind().await),
                Step::Run(Command::Observe) => {
                    let read = adapter.observe().await.map(|mut info| {
                        info.floor_hint = floor_hint
                            .as_deref()
                            .map(floor_hint::read)
                            .unwrap_or_default();
                        info
                    });
                    // After the read: a live tether then proves the read
                    // came from the process it holds (§6.8).
                    let check = tether.check().await;
                    incarnation = check.incarnation();
                    if matches!(check, TetherCheck::Replaced(_)) {
                        adapter.new_incarnation();
                    }
                    match read {
                        Ok(info) => Outcome::Observed(Ok(Observed {
                            satisfies: driver.target().is_some_and(|t| adapter.satisfies(&info, t)),
                            info,
                            tether: check,
                        })),
                        Err(error) => Outcome::Unread {
                            error,
                            tether: check,
                        },
                    }
                }
            };
            step = driver.next(outcome, ms());
        };
        if let Some(gate) = &gate {
            // Open to the incarnation just read, once it carries out a
            // target that serves replicas, chosen for its generation
            // (a restarted node's target is not applied: closed).
            let open = gate::opens(&round_target, seq, generation, &round.obs);
            let state = incarnation.filter(|_| open);
            gate.send_if_modified(|s| std::mem::replace(s, state) != state);
        }
        link_up = log_link_change(link_up, round.info.as_ref(), adapter.kind());
        match errors.note(round.error.as_deref(), Instant::now()) {
            Some(ErrorLine::Failing { cause, repeat }) => tracing::warn!(
                %cause, backend = adapter.kind(), repeat,
                "data node unusable; the elector keeps trying every poll"
            ),
            Some(ErrorLine::Recovered) => {
                tracing::info!(backend = adapter.kind(), "data node answers again")
            }
            None => {}
        }
        let aborts = adapter.take_aborts();
        if aborts.aborted > 0 {
            tracing::info!(aborted = aborts.aborted, backend = adapter.kind(),
                "aborted hanging connects to the primary the data node left (its REPLICAOF waits for them)");
        }
        if aborts.released > 0 {
            tracing::debug!(
                released = aborts.released,
                backend = adapter.kind(),
                "released the data node's connects held at nowhere (its REPLICAOF waits for them)"
            );
        }
        if let Some(e) = &aborts.error {
            tracing::warn!(error = %e, backend = adapter.kind(),
                "could not abort the data node's hanging replication connects: this retarget may wait out kevy's 5 s connect timeout");
        }
        let report = DataNodeReport {
            obs: round.obs,
            info: round.info,
            error: round.error,
            fence_applied_after: round.fence_applied_after_ms.map(Duration::from_millis),
            fence_failed: round.fence_failed,
            aborts,
            ack_nudges: adapter.take_ack_nudges(),
            padded_frames: adapter.take_padded_frames(),
        };
        if reports.send(report).await.is_err() {
            return;
        }
    }
}

/// Logs a replica's replication link coming up (on kevy: its snapshot is
/// loaded and it streams) or going down, as first observed: the retarget
/// phase of a failover ends there (README §Measured, the kevy breakdown).
/// Returns the link state now.
fn log_link_change(was_up: bool, info: Option<&ReplicationInfo>, backend: &str) -> bool {
    let Some(info) = info else {
        return was_up;
    };
    let up = !info.is_master() && info.link_up;
    if up && !was_up {
        tracing::info!(
            primary_host = info.master_host.as_deref().unwrap_or(""),
            primary_port = info.master_port.unwrap_or(0),
            offset = info.offset,
            backend,
            "replication link up"
        );
    } else if was_up && !up {
        tracing::info!(backend, "replication link down");
    }
    up
}

/// Resolves `host:port` to an IP (kevy's REPLICAOF wants an address).
pub(crate) async fn resolve(addr: &str) -> Result<(String, u16), DataNodeError> {
    let mut found = tokio::net::lookup_host(addr)
        .await
        .map_err(|_| DataNodeError::Resolve(addr.to_string()))?;
    let sock = found
        .next()
        .ok_or_else(|| DataNodeError::Resolve(addr.to_string()))?;
    Ok((sock.ip().to_string(), sock.port()))
}

#[cfg(test)]
#[path = "task_tests.rs"]
mod task_tests;
