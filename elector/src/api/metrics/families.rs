//! The counter families: what the elector counts over its lifetime.
//!
//! One field per family, one line per family in [`Counters::register`]. To add
//! a counter: a field here, its registration below, a recording method on
//! [`super::Metrics`], and a row in the tests' `EXPOSED_FAMILIES` table (the
//! operator interface it becomes).
//!
//! prometheus-client appends `_total` to a counter's name and a full stop to
//! its help text, so names here end without `_total` and help without `.`.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// A counter of seconds (fractions kept), stored as `f64` bits.
pub(super) type SecondsCounter = Counter<f64, AtomicU64>;
/// A gauge of seconds, stored as `f64` bits.
pub(super) type SecondsGauge = Gauge<f64, AtomicU64>;

/// `{type="HB"}`: an election message kind.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(super) struct ByType {
    pub(super) r#type: &'static str,
}

/// `{reason="replay"}`: why something was dropped, closed or changed.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(super) struct ByReason {
    pub(super) reason: &'static str,
}

/// `{event="promote",outcome="ok"}`: one hook run.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(super) struct ByHook {
    pub(super) event: &'static str,
    pub(super) outcome: &'static str,
}

/// Every counter the elector keeps. Each field is a handle on shared atomic
/// storage, so registering a clone in a scrape's registry exposes the live
/// value.
#[derive(Debug, Default)]
pub(super) struct Counters {
    pub(super) elections_started: Counter,
    pub(super) elections_won: Counter,
    pub(super) elections_lost: Counter,
    /// Forced candidacies (protocol §6.10) this node stood in or voted for.
    pub(super) data_loss_accepted: Counter,
    /// Replicas the replication gate let through and turned away (§6.10).
    pub(super) gate: std::sync::Arc<crate::datanode::GateCounts>,
    pub(super) data_node_errors: Counter,
    /// kevy: hanging replication connects aborted on a retarget, and the
    /// aborts that could not be made (no `ss`, no CAP_NET_ADMIN).
    pub(super) stale_connects_aborted: Counter,
    pub(super) stale_connect_abort_failures: Counter,
    /// kevy: the data node's connects held at NOWHERE, released on a
    /// retarget (`datanode/nowhere_hold.rs`).
    pub(super) nowhere_connects_released: Counter,
    /// kevy: frames sent to make lagging replicas acknowledge.
    pub(super) ack_nudges: Counter,
    /// kevy: frames written past acknowledgements from an earlier feed
    /// generation (`datanode/kevy_pad.rs`).
    pub(super) stale_ack_pad_frames: Counter,
    /// VIP adds or removes whose required step failed (docs/vip.md).
    pub(super) vip_move_failures: Counter,
    /// Fence applies on the data node (protocol §6.2.1): count, total and
    /// worst time, from the core's decision to the server's OK.
    pub(super) fence_applies: Counter,
    pub(super) fence_apply_seconds: SecondsCounter,
    /// A gauge among the counters: it only ever rises, like them, and is
    /// kept beside the two series it summarises.
    pub(super) fence_apply_max_seconds: SecondsGauge,
    /// Fence targets the data node refused or did not answer.
    pub(super) fence_failures: Counter,
    pub(super) messages_in: Family<ByType, Counter>,
    pub(super) messages_out: Family<ByType, Counter>,
    pub(super) messages_rejected: Family<ByReason, Counter>,
    pub(super) connections_closed: Family<ByReason, Counter>,
    pub(super) transitions: Family<ByReason, Counter>,
    pub(super) hooks_run: Family<ByHook, Counter>,
}

impl Counters {
    /// Adds a handle on every family to `registry`, in exposition order.
    pub(super) fn register(&self, r: &mut Registry) {
        r.register(
            "elector_elections_started",
            "Elections this node started as candidate",
            self.elections_started.clone(),
        );
        r.register(
            "elector_elections_won",
            "Elections this node won",
            self.elections_won.clone(),
        );
        r.register(
            "elector_elections_lost",
            "Elections this node lost or abandoned",
            self.elections_lost.clone(),
        );
        r.register(
            "elector_replication_gate_forwarded",
            "Replica connections the replication gate forwarded to the validated data node (protocol 6.10)",
            self.gate.forwarded.clone(),
        );
        r.register(
            "elector_replication_gate_refused",
            "Replica connections the replication gate closed: the data node was not a validated serving primary (protocol 6.10)",
            self.gate.refused.clone(),
        );
        r.register(
            "elector_data_loss_accepted",
            "Operator-accepted data losses (protocol 6.10): forced candidacies this node stood in or voted for",
            self.data_loss_accepted.clone(),
        );
        r.register(
            "elector_data_node_errors",
            "Failed commands or polls against the local data node",
            self.data_node_errors.clone(),
        );
        r.register(
            "elector_stale_connects_aborted",
            "kevy: the data node's hanging connects to a primary it left, aborted so REPLICAOF need not wait for them",
            self.stale_connects_aborted.clone(),
        );
        r.register(
            "elector_stale_connect_abort_failures",
            "kevy: retargets whose hanging connects could not be aborted (no ss, no CAP_NET_ADMIN); see the log",
            self.stale_connect_abort_failures.clone(),
        );
        r.register(
            "elector_nowhere_connects_released",
            "kevy: the data node's replication connects held at nowhere (127.0.0.1:1), released so REPLICAOF need not wait out kevy's reconnect backoff",
            self.nowhere_connects_released.clone(),
        );
        r.register(
            "elector_ack_nudges",
            "kevy: no-op frames the primary's elector sent so lagging replicas acknowledge (data_node.ack_nudge)",
            self.ack_nudges.clone(),
        );
        r.register(
            "elector_stale_ack_pad_frames",
            "kevy: no-op frames the primary's elector wrote to take its offset past replica acknowledgements kept from an earlier feed generation (WAIT would count them); see the log",
            self.stale_ack_pad_frames.clone(),
        );
        r.register(
            "elector_vip_move_failures",
            "Virtual IP adds or removes that failed (each ran on_fault); see the log",
            self.vip_move_failures.clone(),
        );
        r.register(
            "elector_fence_applies",
            "Fences applied on the data node (protocol 6.2.1)",
            self.fence_applies.clone(),
        );
        r.register(
            "elector_fence_apply_seconds",
            "Time from each decision to fence to the data node's OK, summed",
            self.fence_apply_seconds.clone(),
        );
        r.register(
            "elector_fence_apply_max_seconds",
            "Slowest fence apply since start: keep it below timings.fence_margin_ms",
            self.fence_apply_max_seconds.clone(),
        );
        r.register(
            "elector_fence_failures",
            "Fences the data node refused or did not answer: it may still take writes (see the log)",
            self.fence_failures.clone(),
        );
        r.register(
            "elector_messages_in",
            "Valid election messages received, by type",
            self.messages_in.clone(),
        );
        r.register(
            "elector_messages_out",
            "Election messages sent, by type",
            self.messages_out.clone(),
        );
        r.register(
            "elector_messages_rejected",
            "Election messages dropped, by reason",
            self.messages_rejected.clone(),
        );
        r.register(
            "elector_connections_closed",
            "Election connections closed, by reason (protocol 3.2)",
            self.connections_closed.clone(),
        );
        r.register(
            "elector_transitions",
            "Role transitions, by reason",
            self.transitions.clone(),
        );
        r.register(
            "elector_hooks_run",
            "Hook scripts run, by event and outcome",
            self.hooks_run.clone(),
        );
    }
}
