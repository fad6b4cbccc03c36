//! Counters and the Prometheus exposition behind `GET /metrics`.
//!
//! Storage and exposition are the maintained `prometheus-client` crate's
//! (escaping, `# HELP`/`# TYPE`, the text format 0.0.4 the endpoint has always
//! served). The families live in two places, each a list a reader can scan:
//! [`families::Counters`], one field per counter family, kept for the life of
//! the process; and [`status_gauges`], gauges read from the current
//! [`StatusSnapshot`] at scrape time, so `/metrics` and `/status` can never
//! disagree. Each scrape builds a small [`Registry`] with the `node` label,
//! registers the gauges and handles on the counters, and encodes it.
//!
//! Counter updates are atomic adds (labelled ones take the family's read lock
//! after the first time a label is seen); they are called from the runtime
//! loop at message rate (a few hundred per second at most), far below where
//! contention would matter.

mod build_info;
mod families;
pub(crate) mod limits;
mod status_gauges;

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;
use std::sync::Mutex;

use prometheus_client::encoding::prometheus_text;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use self::families::{ByHook, ByReason, ByType, Counters};
pub use self::limits::{
    is_watchdog_agent, watchdog_clamps_path, Limits, WatchdogProbes, WatchdogStatus,
    WATCHDOG_MISSING_AFTER_MS,
};
use super::status::{StatusSnapshot, TRANSITION_REASONS};

/// Rejection reasons that always appear (as 0) so alerts can be written
/// against series that exist before the first rejection.
pub(crate) const KNOWN_REJECT_REASONS: &[&str] = &[
    "bad_tag",
    "missing_tag",
    "replay",
    "expired",
    "malformed",
    "unexpected_tag",
    "stale_epoch",
    "out_of_range",
    "epoch_jump",
    "config_mismatch",
];

/// Why election connections were closed (docs/protocol.md §3.2), always
/// present (as 0) under `elector_connections_closed_total{reason}`.
pub(crate) const KNOWN_CLOSE_REASONS: &[&str] = &[
    "idle",
    "peer_silent",
    "write_stalled",
    "handshake_timeout",
    "pending_cap",
    "per_source_cap",
    "rejected",
    "superseded",
    "peer_closed",
];

/// Hook outcomes counted under `elector_hooks_run_total{event,outcome}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HookOutcome {
    Ok,
    Failed,
    TimedOut,
    /// The hook queue was full; the event was not run.
    Dropped,
}

impl HookOutcome {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            HookOutcome::Ok => "ok",
            HookOutcome::Failed => "failed",
            HookOutcome::TimedOut => "timed_out",
            HookOutcome::Dropped => "dropped",
        }
    }
}

/// Process-wide counters. Share it as `Arc<Metrics>`.
#[derive(Debug)]
pub struct Metrics {
    counters: Counters,
    /// Every rejection reason ever counted. prometheus-client's `Family` can
    /// be read by label but not listed, and `/status` lists rejections by
    /// reason, the unforeseen ones (`api_unauthorized`) included.
    rejected_reasons: Mutex<BTreeSet<&'static str>>,
    /// The configuration's bounds (fence budget, max lag) and where the
    /// watchdog counts its clamps; exported once the runtime sets them.
    limits: std::sync::OnceLock<Limits>,
    /// The watchdog's last `/healthz` poll (exported beside the limits).
    watchdog_probes: WatchdogProbes,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Counters at 0, with the known reasons' series already present so
    /// alerts can be written against series that exist from the start.
    pub fn new() -> Self {
        let counters = Counters::default();
        let seed = |family: &Family<ByReason, Counter>, reasons: &[&'static str]| {
            for &reason in reasons {
                let _ = family.get_or_create(&ByReason { reason });
            }
        };
        seed(&counters.messages_rejected, KNOWN_REJECT_REASONS);
        seed(&counters.connections_closed, KNOWN_CLOSE_REASONS);
        seed(&counters.transitions, TRANSITION_REASONS);
        Metrics {
            counters,
            rejected_reasons: Mutex::new(KNOWN_REJECT_REASONS.iter().copied().collect()),
            limits: std::sync::OnceLock::new(),
            watchdog_probes: WatchdogProbes::default(),
        }
    }

    pub(crate) fn election_started(&self) {
        self.counters.elections_started.inc();
    }

    pub(crate) fn election_won(&self) {
        self.counters.elections_won.inc();
    }

    pub(crate) fn election_lost(&self) {
        self.counters.elections_lost.inc();
    }

    /// The replication gate's counters (§6.10), shared with the gate task.
    pub(crate) fn gate_counts(&self) -> std::sync::Arc<crate::datanode::GateCounts> {
        std::sync::Arc::clone(&self.counters.gate)
    }

    pub(crate) fn data_loss_accepted(&self) {
        self.counters.data_loss_accepted.inc();
    }

    pub(crate) fn data_node_error(&self) {
        self.counters.data_node_errors.inc();
    }

    /// kevy: `aborted` hanging connects were cut on a retarget; `failed` when
    /// the abort itself could not be made.
    pub(crate) fn stale_connects(&self, aborted: usize, released: usize, failed: bool) {
        self.counters.stale_connects_aborted.inc_by(aborted as u64);
        self.counters
            .nowhere_connects_released
            .inc_by(released as u64);
        if failed {
            self.counters.stale_connect_abort_failures.inc();
        }
    }

    pub(crate) fn ack_nudges(&self, sent: u64) {
        self.counters.ack_nudges.inc_by(sent);
    }

    /// kevy: frames written to take the offset past stale acknowledgements.
    pub(crate) fn stale_ack_pads(&self, frames: u64) {
        self.counters.stale_ack_pad_frames.inc_by(frames);
    }

    /// A VIP add or remove failed (docs/vip.md).
    pub(crate) fn vip_failure(&self) {
        self.counters.vip_move_failures.inc();
    }

    /// A fence reached the data node `after` it was decided.
    pub(crate) fn fence_applied(&self, after: std::time::Duration) {
        let secs = after.as_secs_f64();
        let c = &self.counters;
        c.fence_applies.inc();
        c.fence_apply_seconds.inc_by(secs);
        // The gauge stores its f64 as bits; for non-negative floats the bits
        // order like the numbers, so an integer max is the float max.
        c.fence_apply_max_seconds
            .inner()
            .fetch_max(secs.to_bits(), Ordering::Relaxed);
    }

    /// A fence target failed to apply on the data node.
    pub(crate) fn fence_failed(&self) {
        self.counters.fence_failures.inc();
    }

    /// Stamps a `/healthz` poll by the watchdog at `unix_ms`.
    pub fn watchdog_probed(&self, unix_ms: u64) {
        self.watchdog_probes.probed(unix_ms);
    }

    /// The watchdog as `/status` shows it at `now_unix_ms`; `None` on a node
    /// without a data node (a witness), or before the runtime set the limits.
    pub fn watchdog_status(&self, now_unix_ms: u64) -> Option<WatchdogStatus> {
        let clamps = self.limits.get()?.watchdog_clamps.as_ref()?;
        Some(self.watchdog_probes.status(now_unix_ms, clamps))
    }

    /// The configured bounds the alert rules compare with; set once at start.
    pub fn set_limits(&self, limits: Limits) {
        let _ = self.limits.set(limits);
    }

    /// A valid message of `kind` (`HB`, `OFFER`, ...) was received.
    pub(crate) fn message_in(&self, kind: &'static str) {
        self.counters
            .messages_in
            .get_or_create(&ByType { r#type: kind })
            .inc();
    }

    /// A message of `kind` was sent.
    pub(crate) fn message_out(&self, kind: &'static str) {
        self.counters
            .messages_out
            .get_or_create(&ByType { r#type: kind })
            .inc();
    }

    /// A message was dropped; `reason` is snake case (`bad_tag`, `replay`, ...).
    pub(crate) fn message_rejected(&self, reason: &'static str) {
        self.rejected_reasons
            .lock()
            // A poisoned lock only means another thread panicked while
            // inserting; the set is still valid, so keep counting.
            .unwrap_or_else(|e| e.into_inner())
            .insert(reason);
        self.counters
            .messages_rejected
            .get_or_create(&ByReason { reason })
            .inc();
    }

    /// An election connection was closed for `reason` (see
    /// [`KNOWN_CLOSE_REASONS`]).
    pub(crate) fn connection_closed(&self, reason: &'static str) {
        self.counters
            .connections_closed
            .get_or_create(&ByReason { reason })
            .inc();
    }

    /// Election connections closed for `reason` so far (for tests).
    #[cfg(test)]
    pub(crate) fn closed_count(&self, reason: &'static str) -> u64 {
        self.counters
            .connections_closed
            .get(&ByReason { reason })
            .map_or(0, |c| c.get())
    }

    /// A role transition happened for `reason` (see `status::TRANSITION_REASONS`).
    pub(crate) fn transition(&self, reason: &'static str) {
        self.counters
            .transitions
            .get_or_create(&ByReason { reason })
            .inc();
    }

    pub(crate) fn hook_run(&self, event: &'static str, outcome: HookOutcome) {
        self.counters
            .hooks_run
            .get_or_create(&ByHook {
                event,
                outcome: outcome.as_str(),
            })
            .inc();
    }

    /// Count of hook runs for (event, outcome) (for tests).
    #[cfg(test)]
    pub(crate) fn hook_count(&self, event: &'static str, outcome: HookOutcome) -> u64 {
        self.counters
            .hooks_run
            .get(&ByHook {
                event,
                outcome: outcome.as_str(),
            })
            .map_or(0, |c| c.get())
    }

    /// Rejections by reason, known reasons included at 0. The runtime copies
    /// this into `StatusSnapshot::rejected`; the API also merges it in, so the
    /// two views agree even if the runtime forgets.
    pub fn rejected_counts(&self) -> BTreeMap<String, u64> {
        let reasons = self
            .rejected_reasons
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let family = &self.counters.messages_rejected;
        reasons
            .into_iter()
            .map(|reason| {
                let count = family.get(&ByReason { reason }).map_or(0, |c| c.get());
                (reason.to_string(), count)
            })
            .collect()
    }

    /// The Prometheus text exposition (format 0.0.4) of every counter and of
    /// the gauges `status` determines, each series labelled with the node.
    pub(crate) fn render(&self, status: &StatusSnapshot) -> String {
        let node = (Cow::Borrowed("node"), Cow::Owned(status.node_id.clone()));
        let mut registry = Registry::with_labels(std::iter::once(node));
        build_info::register(&mut registry);
        status_gauges::register(&mut registry, status);
        self.counters.register(&mut registry);
        if let Some(limits) = self.limits.get() {
            limits.register(&mut registry, &self.watchdog_probes);
        }
        let mut out = String::with_capacity(8192);
        // Writing into a String cannot fail; the encoder's own errors are
        // formatting errors from that writer.
        prometheus_text::encode(&mut out, &registry).expect("encoding into a String");
        out
    }
}

#[cfg(test)]
mod tests;
