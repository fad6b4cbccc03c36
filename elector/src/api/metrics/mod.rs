//! Counters and the Prometheus text exposition behind `GET /metrics`.
//!
//! A handful of plain atomics and small label maps is all an elector needs;
//! the `prometheus` crate would add a registry, macros and a dependency tree
//! for no gain. Gauges are not stored here at all: they are derived from the
//! current [`StatusSnapshot`] at scrape time, so `/metrics` and `/status` can
//! never disagree.
//!
//! Counter updates take a short mutex only for labelled series; they are
//! called from the runtime loop at message rate (a few hundred per second at
//! most), far below where contention would matter.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use super::status::{Role, StatusSnapshot};

/// Rejection reasons that always appear (as 0) so alerts can be written
/// against series that exist before the first rejection.
pub const KNOWN_REJECT_REASONS: &[&str] = &[
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
pub const KNOWN_CLOSE_REASONS: &[&str] = &[
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
pub enum HookOutcome {
    Ok,
    Failed,
    TimedOut,
    /// The hook queue was full; the event was not run.
    Dropped,
}

impl HookOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            HookOutcome::Ok => "ok",
            HookOutcome::Failed => "failed",
            HookOutcome::TimedOut => "timed_out",
            HookOutcome::Dropped => "dropped",
        }
    }
}

type Labelled = Mutex<BTreeMap<String, u64>>;

/// Process-wide counters. Share it as `Arc<Metrics>`.
#[derive(Debug, Default)]
pub struct Metrics {
    elections_started: AtomicU64,
    elections_won: AtomicU64,
    elections_lost: AtomicU64,
    data_node_errors: AtomicU64,
    /// kevy: hanging replication connects aborted on a retarget, and the
    /// aborts that could not be made (no `ss`, no CAP_NET_ADMIN).
    stale_connects_aborted: AtomicU64,
    stale_connect_abort_failures: AtomicU64,
    /// kevy: frames sent to make lagging replicas acknowledge.
    ack_nudges: AtomicU64,
    /// Fence applies on the data node (protocol §6.2.1): count, total and
    /// worst time in microseconds, from the core's decision to the
    /// server's OK.
    fence_applies: AtomicU64,
    fence_apply_us_sum: AtomicU64,
    fence_apply_us_max: AtomicU64,
    messages_in: Labelled,
    messages_out: Labelled,
    messages_rejected: Labelled,
    transitions: Labelled,
    connections_closed: Labelled,
    /// Keyed by (event, outcome).
    hooks_run: Mutex<BTreeMap<(String, String), u64>>,
}

fn bump(map: &Labelled, key: &str) {
    // A poisoned lock only means another thread panicked mid-increment; the
    // map itself is still valid, so keep counting rather than propagate.
    let mut m = map.lock().unwrap_or_else(|e| e.into_inner());
    match m.get_mut(key) {
        Some(v) => *v += 1,
        None => {
            m.insert(key.to_string(), 1);
        }
    }
}

fn read(map: &Labelled) -> BTreeMap<String, u64> {
    map.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// `map`'s counts with every `known` label present, at 0 if never counted,
/// so alerts can be written against series that exist from the start.
fn with_known(known: &[&str], map: &Labelled) -> BTreeMap<String, u64> {
    let mut out: BTreeMap<String, u64> = known.iter().map(|r| (r.to_string(), 0)).collect();
    out.extend(read(map));
    out
}

impl Metrics {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn election_started(&self) {
        self.elections_started.fetch_add(1, Ordering::Relaxed);
    }

    pub fn election_won(&self) {
        self.elections_won.fetch_add(1, Ordering::Relaxed);
    }

    pub fn election_lost(&self) {
        self.elections_lost.fetch_add(1, Ordering::Relaxed);
    }

    pub fn data_node_error(&self) {
        self.data_node_errors.fetch_add(1, Ordering::Relaxed);
    }

    /// A fence reached the data node `after` it was decided.
    pub fn stale_connects(&self, aborted: usize, failed: bool) {
        self.stale_connects_aborted
            .fetch_add(aborted as u64, Ordering::Relaxed);
        if failed {
            self.stale_connect_abort_failures
                .fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn ack_nudges(&self, sent: u64) {
        self.ack_nudges.fetch_add(sent, Ordering::Relaxed);
    }

    pub fn fence_applied(&self, after: std::time::Duration) {
        let us = after.as_micros().min(u64::MAX as u128) as u64;
        self.fence_applies.fetch_add(1, Ordering::Relaxed);
        self.fence_apply_us_sum.fetch_add(us, Ordering::Relaxed);
        self.fence_apply_us_max.fetch_max(us, Ordering::Relaxed);
    }

    /// A valid message of `kind` (`HB`, `OFFER`, ...) was received.
    pub fn message_in(&self, kind: &str) {
        bump(&self.messages_in, kind);
    }

    /// A message of `kind` was sent.
    pub fn message_out(&self, kind: &str) {
        bump(&self.messages_out, kind);
    }

    /// A message was dropped; `reason` is snake case (`bad_tag`, `replay`, ...).
    pub fn message_rejected(&self, reason: &str) {
        bump(&self.messages_rejected, reason);
    }

    /// An election connection was closed for `reason` (see
    /// [`KNOWN_CLOSE_REASONS`]).
    pub fn connection_closed(&self, reason: &str) {
        bump(&self.connections_closed, reason);
    }

    /// Closed connections by reason, known reasons included at 0.
    pub fn closed_counts(&self) -> BTreeMap<String, u64> {
        with_known(KNOWN_CLOSE_REASONS, &self.connections_closed)
    }

    /// A role transition happened for `reason` (see `status::TRANSITION_REASONS`).
    pub fn transition(&self, reason: &str) {
        bump(&self.transitions, reason);
    }

    pub fn hook_run(&self, event: &str, outcome: HookOutcome) {
        let mut m = self.hooks_run.lock().unwrap_or_else(|e| e.into_inner());
        *m.entry((event.to_string(), outcome.as_str().to_string()))
            .or_insert(0) += 1;
    }

    /// Rejections by reason, known reasons included at 0. The runtime copies
    /// this into `StatusSnapshot::rejected`; the API also merges it in, so the
    /// two views agree even if the runtime forgets.
    pub fn rejected_counts(&self) -> BTreeMap<String, u64> {
        with_known(KNOWN_REJECT_REASONS, &self.messages_rejected)
    }

    /// Count of hook runs for (event, outcome); for tests and the CLI.
    pub fn hook_count(&self, event: &str, outcome: HookOutcome) -> u64 {
        let m = self.hooks_run.lock().unwrap_or_else(|e| e.into_inner());
        m.get(&(event.to_string(), outcome.as_str().to_string()))
            .copied()
            .unwrap_or(0)
    }

    pub fn elections(&self) -> (u64, u64, u64) {
        (
            self.elections_started.load(Ordering::Relaxed),
            self.elections_won.load(Ordering::Relaxed),
            self.elections_lost.load(Ordering::Relaxed),
        )
    }

    /// Prometheus text exposition format 0.0.4 of every counter plus gauges
    /// derived from `status`.
    pub fn render(&self, status: &StatusSnapshot) -> String {
        let mut out = String::with_capacity(4096);
        let node = [("node", status.node_id.as_str())];

        // Gauges from the snapshot.
        header(
            &mut out,
            "elector_role",
            "gauge",
            "1 for the role this node currently holds, 0 for the others.",
        );
        for role in Role::ALL {
            sample(
                &mut out,
                "elector_role",
                &[node[0], ("role", role.as_str())],
                u64::from(status.role == role),
            );
        }
        gauge(
            &mut out,
            "elector_epoch",
            "Current election epoch.",
            &node,
            status.epoch,
        );
        gauge(
            &mut out,
            "elector_fenced",
            "1 while writes on the local data node are fenced.",
            &node,
            u64::from(status.fenced),
        );
        gauge(
            &mut out,
            "elector_quorum_ok",
            "1 while this node hears a quorum of nodes, itself included.",
            &node,
            u64::from(status.quorum_ok()),
        );
        gauge(
            &mut out,
            "elector_quorum",
            "Votes needed to win an election.",
            &node,
            status.quorum as u64,
        );
        gauge(
            &mut out,
            "elector_cluster_size",
            "Configured number of nodes.",
            &node,
            status.cluster_size as u64,
        );
        gauge(
            &mut out,
            "elector_data_node_reachable",
            "1 while the local data node answers.",
            &node,
            u64::from(status.data_node.reachable),
        );
        if let Some(offset) = status.data_node.offset {
            gauge(
                &mut out,
                "elector_data_node_offset",
                "Replication offset of the local data node.",
                &node,
                offset,
            );
        }
        if let Some(lag) = status.data_node.lag {
            gauge(
                &mut out,
                "elector_data_node_lag_bytes",
                "Bytes the local data node is behind its primary.",
                &node,
                lag,
            );
        }
        gauge(
            &mut out,
            "elector_switchover_in_progress",
            "1 while a planned switchover is running.",
            &node,
            u64::from(status.switchover.as_ref().is_some_and(|s| {
                matches!(
                    s.phase,
                    super::status::SwitchoverPhase::CatchingUp
                        | super::status::SwitchoverPhase::HandingOver
                )
            })),
        );
        header(
            &mut out,
            "elector_peer_alive",
            "gauge",
            "1 while the peer is heard within down_after.",
        );
        for p in &status.peers {
            sample(
                &mut out,
                "elector_peer_alive",
                &[node[0], ("peer", p.id.as_str())],
                u64::from(p.alive),
            );
        }
        header(
            &mut out,
            "elector_peer_last_seen_milliseconds",
            "gauge",
            "Milliseconds since the last valid message from the peer.",
        );
        for p in &status.peers {
            if let Some(ms) = p.last_seen_ms {
                sample(
                    &mut out,
                    "elector_peer_last_seen_milliseconds",
                    &[node[0], ("peer", p.id.as_str())],
                    ms,
                );
            }
        }

        // Counters.
        let (started, won, lost) = self.elections();
        counter(
            &mut out,
            "elector_elections_started_total",
            "Elections this node started as candidate.",
            &node,
            started,
        );
        counter(
            &mut out,
            "elector_elections_won_total",
            "Elections this node won.",
            &node,
            won,
        );
        counter(
            &mut out,
            "elector_elections_lost_total",
            "Elections this node lost or abandoned.",
            &node,
            lost,
        );
        counter(
            &mut out,
            "elector_data_node_errors_total",
            "Failed commands or polls against the local data node.",
            &node,
            self.data_node_errors.load(Ordering::Relaxed),
        );
        counter(
            &mut out,
            "elector_stale_connects_aborted_total",
            "kevy: the data node's hanging connects to a primary it left, aborted so REPLICAOF need not wait for them.",
            &node,
            self.stale_connects_aborted.load(Ordering::Relaxed),
        );
        counter(
            &mut out,
            "elector_stale_connect_abort_failures_total",
            "kevy: retargets whose hanging connects could not be aborted (no ss, no CAP_NET_ADMIN); see the log.",
            &node,
            self.stale_connect_abort_failures.load(Ordering::Relaxed),
        );
        counter(
            &mut out,
            "elector_ack_nudges_total",
            "kevy: no-op frames the primary's elector sent so lagging replicas acknowledge (data_node.ack_nudge).",
            &node,
            self.ack_nudges.load(Ordering::Relaxed),
        );
        let secs = |a: &AtomicU64| a.load(Ordering::Relaxed) as f64 / 1e6;
        let node_id = node[0].1;
        out.push_str(&format!(
            "# HELP elector_fence_applies_total Fences applied on the data node (protocol 6.2.1).\n\
             # TYPE elector_fence_applies_total counter\n\
             elector_fence_applies_total{{node=\"{node_id}\"}} {}\n\
             # HELP elector_fence_apply_seconds_total Time from each decision to fence to the data node's OK, summed.\n\
             # TYPE elector_fence_apply_seconds_total counter\n\
             elector_fence_apply_seconds_total{{node=\"{node_id}\"}} {}\n\
             # HELP elector_fence_apply_max_seconds Slowest fence apply since start: keep it below timings.fence_margin_ms.\n\
             # TYPE elector_fence_apply_max_seconds gauge\n\
             elector_fence_apply_max_seconds{{node=\"{node_id}\"}} {}\n",
            self.fence_applies.load(Ordering::Relaxed),
            secs(&self.fence_apply_us_sum),
            secs(&self.fence_apply_us_max),
        ));
        labelled_counter(
            &mut out,
            "elector_messages_in_total",
            "Valid election messages received, by type.",
            &node,
            "type",
            &read(&self.messages_in),
        );
        labelled_counter(
            &mut out,
            "elector_messages_out_total",
            "Election messages sent, by type.",
            &node,
            "type",
            &read(&self.messages_out),
        );
        labelled_counter(
            &mut out,
            "elector_messages_rejected_total",
            "Election messages dropped, by reason.",
            &node,
            "reason",
            &self.rejected_counts(),
        );
        labelled_counter(
            &mut out,
            "elector_connections_closed_total",
            "Election connections closed, by reason (protocol 3.2).",
            &node,
            "reason",
            &self.closed_counts(),
        );
        let transitions = with_known(super::status::TRANSITION_REASONS, &self.transitions);
        labelled_counter(
            &mut out,
            "elector_transitions_total",
            "Role transitions, by reason.",
            &node,
            "reason",
            &transitions,
        );
        header(
            &mut out,
            "elector_hooks_run_total",
            "counter",
            "Hook scripts run, by event and outcome.",
        );
        let hooks = self
            .hooks_run
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        for ((event, outcome), v) in &hooks {
            sample(
                &mut out,
                "elector_hooks_run_total",
                &[
                    node[0],
                    ("event", event.as_str()),
                    ("outcome", outcome.as_str()),
                ],
                *v,
            );
        }
        out
    }
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {}", escape_help(help));
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn sample(out: &mut String, name: &str, labels: &[(&str, &str)], value: u64) {
    out.push_str(name);
    if !labels.is_empty() {
        out.push('{');
        for (i, (k, v)) in labels.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let _ = write!(out, "{k}=\"{}\"", escape_label(v));
        }
        out.push('}');
    }
    let _ = writeln!(out, " {value}");
}

fn gauge(out: &mut String, name: &str, help: &str, labels: &[(&str, &str)], value: u64) {
    header(out, name, "gauge", help);
    sample(out, name, labels, value);
}

fn counter(out: &mut String, name: &str, help: &str, labels: &[(&str, &str)], value: u64) {
    header(out, name, "counter", help);
    sample(out, name, labels, value);
}

fn labelled_counter(
    out: &mut String,
    name: &str,
    help: &str,
    base: &[(&str, &str)],
    label: &str,
    values: &BTreeMap<String, u64>,
) {
    header(out, name, "counter", help);
    for (k, v) in values {
        let mut labels = base.to_vec();
        labels.push((label, k.as_str()));
        sample(out, name, &labels, *v);
    }
}

/// Label values escape backslash, double quote and newline.
fn escape_label(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

/// HELP text escapes backslash and newline.
fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

#[cfg(test)]
mod tests;
