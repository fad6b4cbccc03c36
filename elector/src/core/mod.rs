//! The pure election core: `handle(now, event) -> Output` (docs/protocol.md).
//!
//! No sockets, no clock reads, no randomness of its own: time comes in with
//! every call and jitter comes from an RNG seeded by the caller, so the same
//! inputs always give the same outputs. The tokio shell and the deterministic
//! simulator drive the very same code.
//!
//! The rules are visible in the types: the role is a [`role::RoleState`]
//! whose variants own what only that role has; what we know of the epoch's
//! primary is a [`known_primary::KnownPrimary`]; the persist rule is the
//! shape of [`Output`] (fences first, gated actions typed so a fence cannot
//! be gated); majorities are counted by [`quorum`]. Split by concern:
//! [`election`] (candidacy and voting), [`primary`] (lease, resignation,
//! switchover), [`follow`] (heartbeats, announcements, epochs), [`data`]
//! (the data node's observations and targets), [`durability`] (writes).

mod config;
mod data;
mod durability;
mod election;
mod floor;
mod follow;
mod known_primary;
mod output;
mod peers;
mod preempt;
mod primary;
pub(crate) mod quorum;
mod rng;
mod role;
mod types;
mod vote;

pub use config::{
    default_fence_margin_ms, Backend, CoreConfig, Faults, Member, Preempt, Timings,
    MAX_CLOCK_RATE_ERROR,
};
pub use floor::{Proof, Unproven};
pub use output::{Action, Fence, FenceTarget, Gate, Gated, GrantTarget, Output, Persist};
pub use peers::PeerView;
pub use types::{
    DataNodeTarget, Floor, FloorHint, Millis, Notice, Observation, PersistedState, Reason,
    StreamId, StreamRecord, SwitchoverFailure,
};

use crate::protocol::{Message, NodeId, Role, MAX_EPOCH};
use data::{DataView, TargetState};
use known_primary::KnownPrimary;
use output::Outbox;
use peers::Peers;
use quorum::Quorum;
use rng::CoreRng;
use role::RoleState;
use vote::Offered;

/// How far beyond the highest epoch this node knows a message may reach
/// (§3.6). Epochs grow by one per election round; a million rounds is far
/// more than any partition can produce (a minority does not stand, §6.6).
pub(crate) const MAX_EPOCH_JUMP: u64 = 1_000_000;

/// Inputs to the core.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Time passed; the shell calls this at [`Core::next_wakeup`] at the latest.
    Tick,
    /// A message from peer `from` (the transport has authenticated the sender).
    Message { from: NodeId, msg: Message },
    /// The data-node adapter's latest observation.
    DataNode(Observation),
    /// The persist with this sequence number is durable.
    Persisted { seq: u64 },
    /// The persist with this sequence number failed.
    PersistFailed { seq: u64, error: String },
    /// An operator asked for a planned handover to `to`.
    SwitchoverRequested { to: NodeId, timeout_ms: u64 },
    /// An operator accepts losing whatever this node's data node lacks and
    /// asks it to stand regardless of its floor (§6.10).
    AcceptDataLoss,
}

/// The election state machine of one node.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Core {
    cfg: CoreConfig,
    rng: CoreRng,
    now: Millis,
    started_at: Millis,
    /// In-memory copy of what is (or is about to be) durable.
    state: PersistedState,
    role: RoleState,
    primary: KnownPrimary,
    peers: Peers,
    /// Highest epoch seen in any message (a hint for choosing the next epoch).
    max_seen_epoch: u64,
    /// A risen `led` not yet durable: the write that carries it, and the
    /// value before (§6.10). If that write fails the promotion it gated
    /// never happens, and `led` goes back: an OFFER saying more than the
    /// data node was told would keep this node from freeing the joins of
    /// those who set out to follow it (simulator seed 158: a new primary's
    /// disk failed as it was to promote).
    led_unconfirmed: Option<(u64, Option<u64>)>,
    /// When this node last voted (unknown after a restart: assume just now).
    voted_at: Millis,
    backoff_until: Millis,
    next_hb_at: Millis,
    /// Since when this node has been eligible without a break (`None`: not
    /// eligible now). Standing waits until peers have heard it (§5.1).
    eligible_since: Option<Millis>,
    data: DataView,
    target: TargetState,
    outbox: Outbox,
}

impl Core {
    /// Builds the core from its config and the state recovered from disk.
    /// Call [`Core::start`] next: it emits the start-up clamp.
    pub fn new(cfg: CoreConfig, recovered: PersistedState, now: Millis) -> Core {
        let mut core = Core {
            rng: CoreRng::seed_from_u64(cfg.seed),
            peers: Peers::new(cfg.peer_ids().map(str::to_string)),
            max_seen_epoch: recovered.epoch.max(recovered.voted_epoch),
            led_unconfirmed: None,
            state: recovered,
            role: RoleState::replica(),
            primary: KnownPrimary {
                handover_learned_at: now,
                ..KnownPrimary::default()
            },
            started_at: now,
            voted_at: now,
            backoff_until: now,
            next_hb_at: now,
            eligible_since: None,
            data: DataView::default(),
            target: TargetState::default(),
            outbox: Outbox::default(),
            now,
            cfg,
        };
        if core.cfg.i_am_witness() {
            // A witness has no data node, so no floor to have lost.
            core.state.floor_unknown = false;
        }
        core.data.proof = core.initial_proof();
        core.data.inherited_join = core.unclaimed_join().is_some();
        // Which process the data node is now, nobody has read yet (§6.10).
        core.data.joining_process_gone = core.data.inherited_join;
        core.data.below_floor_reported = core.below_floor();
        core.outbox.fence_waits = core.cfg.faults.fences_wait_for_persist;
        core
    }

    /// The restart clamp (protocol §6.4): before anything else the data node
    /// is made read-only with no upstream. It stays so until this elector has
    /// won or learned an election.
    pub fn start(&mut self, now: Millis) -> Output {
        self.now = now;
        self.target.seq += 1;
        self.outbox.fence(Fence::Apply {
            seq: self.target.seq,
            target: FenceTarget::Isolated,
        });
        self.notify(Notice::RoleChanged {
            from: Role::Replica,
            to: Role::Replica,
            epoch: self.state.epoch,
            primary: None,
            reason: Reason::Startup,
        });
        self.outbox.take(&self.state)
    }

    /// Feeds one event; returns what the shell must do, in the order the
    /// [`Output`] fields give.
    pub fn handle(&mut self, now: Millis, event: Event) -> Output {
        self.now = now.max(self.now);
        // A candidate past its deadline must not count a late ACCEPT (after a
        // stall, say): voters rely on candidacies ending on time (§6.2).
        self.check_candidacy_timeout();
        match event {
            Event::Tick => {}
            Event::Message { from, msg } => self.on_message(from, msg),
            Event::DataNode(obs) => self.on_observation(obs),
            Event::Persisted { seq } => self.on_persisted(seq),
            Event::PersistFailed { seq, error } => self.on_persist_failed(seq, error),
            Event::SwitchoverRequested { to, timeout_ms } => {
                self.on_switchover_request(to, timeout_ms)
            }
            Event::AcceptDataLoss => self.on_accept_data_loss(),
        }
        self.evaluate();
        self.outbox.take(&self.state)
    }

    /// The latest time by which [`Event::Tick`] must be delivered for timers
    /// to fire on time.
    pub fn next_wakeup(&self) -> Millis {
        let t = &self.cfg.timings;
        let mut at = self.next_hb_at;
        let mut consider = |deadline: Option<Millis>| {
            if let Some(d) = deadline.filter(|d| *d > self.now) {
                at = at.min(d);
            }
        };
        consider(self.role.candidacy().map(|c| c.deadline));
        consider(self.role.switchover().map(|s| s.deadline));
        consider(Some(self.backoff_until));
        consider(self.outbox.retry_at);
        consider(Some(
            self.voted_at + t.election_timeout_ms + t.hb_interval_ms,
        ));
        consider(Some(self.started_at + t.startup_grace_ms()));
        consider(self.primary.heard_at.map(|h| h + t.down_after_ms));
        consider(self.primary.heard_at.map(|h| h + t.voter_fresh_ms()));
        consider(self.data.down_since.map(|d| d + t.down_after_ms));
        consider(self.eligible_since.map(|e| e + t.eligibility_announce_ms()));
        consider(Some(self.primary.handover_learned_at + t.down_after_ms));
        consider(Some(self.primary.handover_learned_at + t.hb_interval_ms));
        consider(self.preemption_due_at());
        consider(
            self.data
                .forced_at
                .filter(|_| self.forced_candidacy_pending())
                .map(|_| self.backoff_until),
        );
        consider(
            self.data
                .floor_written_at
                .filter(|_| self.data.floor_dirty)
                .map(|at| at + floor::floor_sync_ms(t.hb_interval_ms)),
        );
        for view in self.peers.iter() {
            consider(
                view.last_hb
                    .as_ref()
                    .filter(|hb| hb.echo > 0)
                    .map(|hb| hb.echo.saturating_add(t.lease_ms())),
            );
            consider(view.last_heard.map(|h| h + t.down_after_ms));
        }
        at.max(self.now + 1)
    }

    // ----- read-only accessors for the shell's /status -----

    pub(crate) fn config(&self) -> &CoreConfig {
        &self.cfg
    }
    pub fn role(&self) -> Role {
        self.role.role()
    }
    pub fn epoch(&self) -> u64 {
        self.state.epoch
    }
    pub(crate) fn persisted(&self) -> &PersistedState {
        &self.state
    }
    /// The primary this node recognises right now (None while it knows none,
    /// or while the known one has resigned).
    pub fn primary(&self) -> Option<&str> {
        self.primary.recognised()
    }
    pub fn fenced(&self) -> bool {
        !self.target.current.writable()
    }
    pub(crate) fn peer_views(&self) -> impl Iterator<Item = (&str, &PeerView)> {
        self.peers.iter_named()
    }
    pub(crate) fn peer_alive(&self, view: &PeerView) -> bool {
        view.alive(self.now, self.cfg.timings.down_after_ms)
    }
    pub(crate) fn observation(&self) -> &Observation {
        &self.data.obs
    }
    /// The data-node generation the core has taken into account (§6.8):
    /// the shell tags every target with it, and the adapter applies a
    /// target only to the generation it was chosen for.
    pub fn data_generation(&self) -> u64 {
        self.data.generation
    }
    /// The cluster's majority (§6.1).
    pub(crate) fn quorum(&self) -> Quorum {
        self.cfg.quorum()
    }

    /// The timers and gates that decide whether this node stands or votes,
    /// in one line: what a simulator failure report needs to explain a stall.
    pub fn diagnostics(&self) -> String {
        format!(
            "candidacy={:?} backoff_until={} eligible={} eligible_since={:?} settled={} \
             resigned={:?} switchover={:?} vote_pending={} persist_seq={} durable_seq={} \
             target={:?} target_seq={} applied_seq={} proof={} floor={:?} below_floor={}",
            self.role.candidacy().map(|c| c.epoch),
            self.backoff_until,
            self.eligible(),
            self.eligible_since,
            self.data_settled(),
            self.primary.resigned,
            self.role.switchover().map(|s| (&s.to, s.deadline)),
            self.vote_pending(),
            self.outbox.persist_seq,
            self.outbox.durable_seq,
            self.target.current,
            self.target.seq,
            self.data.obs.applied_seq,
            self.data.proof.as_str(),
            self.state.floor,
            self.below_floor(),
        )
    }

    // ----- event dispatch -----

    fn on_message(&mut self, from: NodeId, msg: Message) {
        if from == self.cfg.node_id || !self.cfg.is_member(&from) {
            return;
        }
        // Bounds on wire integers (§3.6): epochs advance by one per
        // election, so a message claiming an epoch far beyond anything this
        // node knows is a bug or an attack; believing it could wedge the
        // cluster at the top of the range (and persist the wedge).
        let limit = self
            .highest_epoch()
            .saturating_add(MAX_EPOCH_JUMP)
            .min(MAX_EPOCH);
        if msg.highest_epoch() > limit {
            tracing::warn!(%from, epoch = msg.highest_epoch(), limit, "message epoch out of range: dropped");
            self.notify(Notice::MessageDropped {
                from: from.clone(),
                reason: "epoch_jump",
                detail: format!(
                    "{} with epoch {} (limit {limit})",
                    msg.kind(),
                    msg.highest_epoch()
                ),
            });
            return;
        }
        self.peers.heard(&from, self.now);
        match msg {
            Message::Hello { .. } => {}
            Message::Hb(hb) => self.on_heartbeat(from, hb),
            Message::Offer {
                epoch,
                candidate,
                offset,
                data_epoch,
                forced,
                led,
            } => self.on_offer(
                from,
                epoch,
                candidate,
                Offered {
                    position: (data_epoch, offset),
                    forced,
                    led,
                },
            ),
            Message::Accept { epoch, voter } => self.on_accept(epoch, voter),
            Message::Reject {
                epoch,
                voter,
                reason,
                max_epoch,
            } => self.on_reject(epoch, voter, reason, max_epoch),
            Message::Announce {
                epoch,
                primary,
                stamp,
                ..
            } => self.on_announce(from, epoch, primary, stamp),
            Message::Handover {
                epoch,
                from: old,
                to,
            } => self.on_handover(epoch, old, to),
        }
    }

    /// Runs every timer-driven rule; called after every event.
    fn evaluate(&mut self) {
        self.retry_persist_when_due();
        self.check_candidacy_timeout();
        self.track_eligibility();
        if self.role.leadership().is_some() {
            self.check_data_node_on_primary();
        }
        if self.role.leadership().is_some() {
            self.check_lease();
            self.check_preemption();
            self.progress_switchover();
        }
        self.check_switchover_deadline();
        if matches!(self.role, RoleState::Replica { .. }) {
            self.maybe_stand();
        }
        self.sync_data_target();
        if self.now >= self.next_hb_at {
            self.broadcast_heartbeat();
            self.next_hb_at = self.now + self.cfg.timings.hb_interval_ms;
        }
    }

    // ----- shared helpers -----

    /// The highest epoch this node has committed to, voted in or seen.
    fn highest_epoch(&self) -> u64 {
        self.state
            .epoch
            .max(self.state.voted_epoch)
            .max(self.max_seen_epoch)
    }

    /// Changes the role (through the one transition) and reports it.
    fn set_role(&mut self, next: RoleState, reason: Reason) {
        let primary = self.primary().map(str::to_string);
        let notice = self
            .role
            .transition(next, self.state.epoch, primary, reason);
        self.notify(notice);
    }

    /// Becomes a replica; a switchover in progress stays with it (§8).
    fn become_replica(&mut self, reason: Reason) {
        let next = self.role.demoted();
        self.set_role(next, reason);
    }

    fn is_me(&self, id: &str) -> bool {
        id == self.cfg.node_id
    }

    fn notify(&mut self, notice: Notice) {
        self.outbox.push(output::Action::Notify(notice));
    }

    fn send(&mut self, to: NodeId, msg: Message) {
        self.outbox.push(output::Action::Send { to, msg });
    }

    fn broadcast(&mut self, msg: Message) {
        let peers: Vec<NodeId> = self.cfg.peer_ids().map(str::to_string).collect();
        for to in peers {
            self.send(to, msg.clone());
        }
    }

    fn my_offset(&self) -> u64 {
        self.data.obs.offset.unwrap_or(0)
    }

    /// How fresh our data is: `(stream epoch, offset)`, compared
    /// lexicographically (protocol §4.3).
    pub fn position(&self) -> (u64, u64) {
        (self.state.data_epoch, self.my_offset())
    }
}

#[cfg(test)]
mod tests;
