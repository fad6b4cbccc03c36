//! The pure election core: `handle(now, event) -> actions` (docs/protocol.md).
//!
//! No sockets, no clock reads, no randomness of its own: time comes in with
//! every call and jitter comes from an RNG seeded by the caller, so the same
//! inputs always give the same outputs. The tokio shell and the deterministic
//! simulator drive the very same code.
//!
//! Split by concern: [`election`] (candidacy and voting), [`primary`] (lease,
//! resignation, switchover), [`peers`] (what we know of each peer); this file
//! holds the state, the event dispatch and the persist gate.

mod config;
mod election;
mod peers;
mod primary;
mod types;

pub use config::{CoreConfig, Faults, Member, Timings, MAX_CLOCK_RATE_ERROR};
pub use peers::PeerView;
pub use types::{Action, DataNodeTarget, Millis, Notice, Observation, PersistedState, Reason};

use crate::protocol::{Heartbeat, Message, NodeId, Role, MAX_EPOCH};
use peers::Peers;
use rand::rngs::StdRng;
use rand::SeedableRng;

/// How far beyond the highest epoch this node knows a message may reach
/// (§3.6). Epochs grow by one per election round; a million rounds is far
/// more than any partition can produce (a minority does not stand, §6.6).
pub const MAX_EPOCH_JUMP: u64 = 1_000_000;

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
}

/// A candidacy in progress.
#[derive(Debug, Clone)]
struct Candidacy {
    epoch: u64,
    votes: std::collections::BTreeSet<NodeId>,
    rejects: std::collections::BTreeSet<NodeId>,
    deadline: Millis,
}

/// A planned handover in progress on the primary.
#[derive(Debug, Clone)]
struct Switchover {
    to: NodeId,
    deadline: Millis,
    /// `Some(seq)` while draining (waiting for the fence `seq` to apply and
    /// the target to catch up); `None` once this node has resigned.
    draining_fence_seq: Option<u64>,
}

/// The election state machine of one node.
pub struct Core {
    cfg: CoreConfig,
    rng: StdRng,
    /// In-memory copy of what is (or is about to be) durable.
    state: PersistedState,
    role: Role,
    /// The primary of `state.epoch` as far as we know (may be us).
    primary: Option<NodeId>,
    /// When the primary last proved it is alive (HB as primary, ANNOUNCE).
    primary_heard_at: Option<Millis>,
    /// The primary's clock stamp in its latest HB/ANNOUNCE (echoed back).
    primary_stamp: u64,
    /// The primary of `state.epoch` has given up the role (switchover, data
    /// node down, or a restart); `Some(Some(id))` names its chosen successor.
    primary_resigned: Option<Option<NodeId>>,
    /// When we learned of the handover in `primary_resigned` (others defer
    /// to the named successor only for a bounded time, §8).
    handover_learned_at: Millis,
    /// Since when our primary's heartbeats have said it lost its lease
    /// (§6.9): a primary fenced for longer than the freshness window no
    /// longer counts as alive, so a majority that hears it can still elect.
    primary_fenced_since: Option<Millis>,
    /// We stopped vouching for a primary that stayed fenced (§6.9).
    primary_withdrawn: bool,
    /// The data node's generation as last reported by the adapter (§6.8).
    data_generation: u64,
    /// The adapter's count of demotions by someone else, as last reported.
    data_overridden: u64,
    peers: Peers,
    /// Highest epoch seen in any message (a hint for choosing the next epoch).
    max_seen_epoch: u64,
    started_at: Millis,
    /// When this node last voted (unknown after a restart: assume just now).
    voted_at: Millis,
    candidacy: Option<Candidacy>,
    backoff_until: Millis,
    next_hb_at: Millis,
    obs: Observation,
    data_down_since: Option<Millis>,
    /// Since when this node has been eligible without a break (`None`: not
    /// eligible now). Standing waits until peers have heard it (§5.1).
    eligible_since: Option<Millis>,
    target: DataNodeTarget,
    target_seq: u64,
    /// The action carrying `target` was dropped by a failed persist.
    target_dropped: bool,
    /// `(target seq, epoch)`: once the data node has applied that target and
    /// reports its link up, its data is part of `epoch`'s stream.
    stream_claim: Option<(u64, u64)>,
    fenced_by_lease: bool,
    /// Whether this primary has held its lease at least once in its epoch
    /// (the first unfence after winning is reason won_election).
    lease_held_once: bool,
    switchover: Option<Switchover>,
    persist_seq: u64,
    durable_seq: u64,
    /// After a failed write: when to try persisting again.
    persist_retry_at: Option<Millis>,
    /// Actions waiting for a persist: `(required durable seq, action)`.
    held: Vec<(u64, Action)>,
    out: Vec<Action>,
    now: Millis,
}

impl Core {
    /// Builds the core from its config and the state recovered from disk.
    /// Call [`Core::start`] next: it emits the start-up clamp.
    pub fn new(cfg: CoreConfig, recovered: PersistedState, now: Millis) -> Core {
        let peers = Peers::new(cfg.peer_ids().map(str::to_string));
        Core {
            rng: StdRng::seed_from_u64(cfg.seed),
            max_seen_epoch: recovered.epoch.max(recovered.voted_epoch),
            state: recovered,
            role: Role::Replica,
            primary: None,
            primary_heard_at: None,
            primary_stamp: 0,
            primary_resigned: None,
            handover_learned_at: now,
            primary_fenced_since: None,
            primary_withdrawn: false,
            data_generation: 0,
            data_overridden: 0,
            peers,
            started_at: now,
            voted_at: now,
            candidacy: None,
            backoff_until: now,
            next_hb_at: now,
            obs: Observation::default(),
            data_down_since: None,
            eligible_since: None,
            target: DataNodeTarget::Isolated,
            target_seq: 0,
            target_dropped: false,
            stream_claim: None,
            fenced_by_lease: false,
            lease_held_once: false,
            switchover: None,
            persist_seq: 0,
            durable_seq: 0,
            persist_retry_at: None,
            held: Vec::new(),
            out: Vec::new(),
            now,
            cfg,
        }
    }

    /// The restart clamp (protocol §6.4): before anything else the data node
    /// is made read-only with no upstream. It stays so until this elector has
    /// won or learned an election.
    pub fn start(&mut self, now: Millis) -> Vec<Action> {
        self.now = now;
        self.target_seq += 1;
        self.emit(Action::ApplyDataNode {
            seq: self.target_seq,
            target: DataNodeTarget::Isolated,
        });
        self.emit(Action::Notify(Notice::RoleChanged {
            from: Role::Replica,
            to: Role::Replica,
            epoch: self.state.epoch,
            primary: None,
            reason: Reason::Startup,
        }));
        std::mem::take(&mut self.out)
    }

    /// Feeds one event; returns the actions to carry out, in order.
    pub fn handle(&mut self, now: Millis, event: Event) -> Vec<Action> {
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
        }
        self.evaluate();
        std::mem::take(&mut self.out)
    }

    /// The latest time by which [`Event::Tick`] must be delivered for timers
    /// to fire on time.
    pub fn next_wakeup(&self) -> Millis {
        let t = &self.cfg.timings;
        let mut at = self.next_hb_at;
        let mut consider = |deadline: Option<Millis>| {
            if let Some(d) = deadline {
                if d > self.now {
                    at = at.min(d);
                }
            }
        };
        consider(self.candidacy.as_ref().map(|c| c.deadline));
        consider(self.switchover.as_ref().map(|s| s.deadline));
        consider(Some(self.backoff_until));
        consider(self.persist_retry_at);
        consider(Some(
            self.voted_at + t.election_timeout_ms + t.hb_interval_ms,
        ));
        consider(Some(self.started_at + t.startup_grace_ms()));
        consider(self.primary_heard_at.map(|h| h + t.down_after_ms));
        consider(self.primary_heard_at.map(|h| h + t.voter_fresh_ms()));
        consider(self.data_down_since.map(|d| d + t.down_after_ms));
        consider(self.eligible_since.map(|e| e + t.eligibility_announce_ms()));
        consider(Some(self.handover_learned_at + t.down_after_ms));
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

    pub fn node_id(&self) -> &str {
        &self.cfg.node_id
    }
    pub fn config(&self) -> &CoreConfig {
        &self.cfg
    }
    pub fn role(&self) -> Role {
        self.role
    }
    pub fn epoch(&self) -> u64 {
        self.state.epoch
    }
    pub fn persisted(&self) -> &PersistedState {
        &self.state
    }
    /// The primary this node recognises right now (None while it knows none,
    /// or while the known one has resigned).
    pub fn primary(&self) -> Option<&str> {
        if self.primary_resigned.is_some() {
            return None;
        }
        self.primary.as_deref()
    }
    pub fn fenced(&self) -> bool {
        !self.target.writable()
    }
    pub fn data_target(&self) -> &DataNodeTarget {
        &self.target
    }
    pub fn peer_views(&self) -> impl Iterator<Item = (&str, &PeerView)> {
        self.peers.iter_named()
    }
    pub fn peer_alive(&self, view: &PeerView) -> bool {
        view.alive(self.now, self.cfg.timings.down_after_ms)
    }
    pub fn observation(&self) -> &Observation {
        &self.obs
    }
    /// The data-node generation the core has taken into account (§6.8):
    /// the shell tags every target with it, and the adapter applies a
    /// target only to the generation it was chosen for.
    pub fn data_generation(&self) -> u64 {
        self.data_generation
    }
    /// The timers and gates that decide whether this node stands or votes,
    /// in one line: what a simulator failure report needs to explain a stall.
    pub fn diagnostics(&self) -> String {
        format!(
            "candidacy={:?} backoff_until={} eligible={} eligible_since={:?} settled={} \
             resigned={:?} switchover={:?} vote_pending={} held={} persist_seq={} durable_seq={} \
             target={:?} target_seq={} applied_seq={}",
            self.candidacy.as_ref().map(|c| c.epoch),
            self.backoff_until,
            self.eligible(),
            self.eligible_since,
            self.data_settled(),
            self.primary_resigned,
            self.switchover.as_ref().map(|s| (&s.to, s.deadline)),
            self.vote_pending(),
            self.held.len(),
            self.persist_seq,
            self.durable_seq,
            self.target,
            self.target_seq,
            self.obs.applied_seq,
        )
    }

    pub fn switchover_target(&self) -> Option<&str> {
        self.switchover.as_ref().map(|s| s.to.as_str())
    }

    // ----- event handlers -----

    fn on_message(&mut self, from: NodeId, msg: Message) {
        if from == self.cfg.node_id || !self.cfg.is_member(&from) {
            return;
        }
        // Bounds on wire integers (§3.6): epochs advance by one per
        // election, so a message claiming an epoch far beyond anything this
        // node knows is a bug or an attack; believing it could wedge the
        // cluster at the top of the range (and persist the wedge).
        let highest = self
            .state
            .epoch
            .max(self.state.voted_epoch)
            .max(self.max_seen_epoch);
        let limit = highest.saturating_add(MAX_EPOCH_JUMP).min(MAX_EPOCH);
        if msg.highest_epoch() > limit {
            tracing::warn!(%from, epoch = msg.highest_epoch(), limit, "message epoch out of range: dropped");
            self.emit(Action::Notify(Notice::MessageDropped {
                from: from.clone(),
                reason: "epoch_jump",
                detail: format!(
                    "{} with epoch {} (limit {limit})",
                    msg.kind(),
                    msg.highest_epoch()
                ),
            }));
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
            } => self.on_offer(from, epoch, candidate, (data_epoch, offset)),
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

    fn on_heartbeat(&mut self, from: NodeId, hb: Heartbeat) {
        self.max_seen_epoch = self.max_seen_epoch.max(hb.max_epoch).max(hb.epoch);
        self.peers.record_heartbeat(&from, hb.clone());
        let me = self.cfg.node_id.clone();
        if hb.epoch > self.state.epoch {
            // Protocol §5.3: a newer committed epoch wins; follow its primary.
            match hb.primary.clone() {
                Some(p) => self.learn_primary(hb.epoch, p, Reason::NewerEpoch),
                None => self.adopt_epoch_without_primary(hb.epoch),
            }
            return;
        }
        if hb.epoch < self.state.epoch {
            return;
        }
        // Same epoch.
        if self.primary.as_deref() == Some(from.as_str()) {
            if hb.role == Role::Primary {
                if self.primary_resigned.is_none() && !self.primary_stays_fenced(hb.lease_lost) {
                    self.primary_heard_at = Some(self.now);
                    self.primary_stamp = self.primary_stamp.max(hb.stamp);
                }
            } else if self.primary_resigned.is_none() {
                // Our primary says it no longer is one: it resigned.
                self.primary_resigned = Some(None);
            }
        } else if self.primary.is_none()
            && hb.role == Role::Primary
            && hb.primary.as_deref() == Some(&from)
        {
            // We restarted into epoch `hb.epoch` without knowing its primary.
            self.learn_primary(hb.epoch, from, Reason::NewerEpoch);
        } else if hb.primary.as_deref() == Some(me.as_str())
            && self.role != Role::Primary
            && self.primary.is_none()
        {
            // Peers still think we are the primary of this epoch, but we lost
            // the role in a restart: record it as resigned so nobody waits.
            self.primary = Some(me);
            self.primary_resigned = Some(None);
        }
    }

    fn on_announce(&mut self, from: NodeId, epoch: u64, primary: NodeId, stamp: u64) {
        self.max_seen_epoch = self.max_seen_epoch.max(epoch);
        if primary != from || !self.cfg.is_member(&primary) {
            return;
        }
        if epoch > self.state.epoch {
            let reason = if self.role == Role::Candidate {
                Reason::LostElection
            } else {
                Reason::NewerEpoch
            };
            self.learn_primary(epoch, primary, reason);
            self.primary_stamp = stamp;
            // Echo the new primary's stamp at once: its lease starts with it.
            self.next_hb_at = self.now;
        } else if epoch == self.state.epoch
            && self.primary.as_deref() == Some(primary.as_str())
            && self.primary_resigned.is_none()
        {
            self.primary_heard_at = Some(self.now);
            self.primary_stamp = self.primary_stamp.max(stamp);
        }
    }

    fn on_observation(&mut self, obs: Observation) {
        if obs.generation != self.data_generation {
            self.data_generation = obs.generation;
            self.on_data_node_restarted();
        }
        if obs.overridden != self.data_overridden {
            self.data_overridden = obs.overridden;
            self.on_data_node_overridden();
        }
        if obs.reachable {
            if self.data_down_since.take().is_some() {
                tracing::info!("data node reachable again");
            }
        } else if self.data_down_since.is_none() {
            self.data_down_since = Some(self.now);
            self.emit(Action::Notify(Notice::Fault {
                what: "data node unreachable".into(),
            }));
        }
        if let Some((seq, epoch)) = self.stream_claim {
            if obs.reachable && obs.applied_seq >= seq {
                let mut changed = false;
                let moved = obs.offset.is_some() && obs.offset != obs.offset_at_apply;
                if (moved || obs.link_up) && epoch > self.state.data_epoch_seen {
                    self.state.data_epoch_seen = epoch;
                    changed = true;
                }
                if obs.link_up && epoch > self.state.data_epoch {
                    self.state.data_epoch = epoch;
                    changed = true;
                }
                if changed {
                    self.persist();
                }
            }
        }
        // An unreachable observation carries no offset; keep the last known one.
        let offset = obs.offset.or(self.obs.offset);
        self.obs = Observation { offset, ..obs };
    }

    fn on_persisted(&mut self, seq: u64) {
        self.durable_seq = self.durable_seq.max(seq);
        let durable = self.durable_seq;
        let split = self
            .held
            .iter()
            .position(|(need, _)| *need > durable)
            .unwrap_or(self.held.len());
        let ready: Vec<(u64, Action)> = self.held.drain(..split).collect();
        self.out.extend(ready.into_iter().map(|(_, a)| a));
    }

    fn on_persist_failed(&mut self, seq: u64, error: String) {
        // Whatever waited for this write must not happen: drop it. The
        // in-memory state stays as it is (conservative: it only ever records
        // *more* votes than the disk). Until a retry succeeds every action
        // stays held, so the node is silent and its data node keeps the
        // fence we apply here; peers see it as down, which it is.
        tracing::error!(seq, %error, "persisting the election state failed");
        // A dropped data-node target must be issued again (with a new seq):
        // `sync_data_target` only emits on change, and a target that never
        // reaches the adapter never settles, so the node could never vote or
        // stand again (found by the simulator, seed 145 with switchovers).
        if self
            .held
            .iter()
            .any(|(_, a)| matches!(a, Action::ApplyDataNode { .. }))
        {
            self.target_dropped = true;
        }
        self.held.clear();
        self.persist_retry_at = Some(self.now + self.cfg.timings.hb_interval_ms);
        self.candidacy = None;
        if self.role != Role::Replica {
            self.set_role(Role::Replica, Reason::PersistFailed);
        }
        if self.primary.as_deref() == Some(self.cfg.node_id.as_str()) {
            self.primary_resigned = Some(None);
        }
        self.backoff_until = self.now + self.cfg.timings.backoff_min_ms;
        self.emit(Action::Notify(Notice::Fault {
            what: format!("persist failed: {error}"),
        }));
    }

    /// Runs every timer-driven rule; called after every event.
    fn evaluate(&mut self) {
        if self.persist_retry_at.is_some_and(|at| self.now >= at) {
            self.persist_retry_at = None;
            self.persist();
        }
        self.check_candidacy_timeout();
        self.track_eligibility();
        if self.role == Role::Primary {
            self.check_data_node_on_primary();
        }
        if self.role == Role::Primary {
            self.check_lease();
            self.progress_switchover();
        }
        self.check_switchover_deadline();
        if self.role == Role::Replica {
            self.maybe_stand();
        }
        self.sync_data_target();
        if self.now >= self.next_hb_at {
            self.broadcast_heartbeat();
            self.next_hb_at = self.now + self.cfg.timings.hb_interval_ms;
        }
    }

    // ----- shared helpers -----

    /// Adopts `primary` as the primary of committed `epoch`.
    fn learn_primary(&mut self, epoch: u64, primary: NodeId, reason: Reason) {
        self.enter_epoch(epoch);
        self.primary_heard_at = Some(self.now);
        self.finish_switchover_on_new_primary(&primary, epoch);
        let me = primary == self.cfg.node_id;
        self.primary = Some(primary.clone());
        if me {
            // Only possible after a restart that lost the role: not ours.
            self.primary_resigned = Some(None);
            if self.role != Role::Replica {
                self.set_role(Role::Replica, reason);
            }
            return;
        }
        if self.role != Role::Replica {
            self.set_role(Role::Replica, reason);
        }
        self.emit(Action::Notify(Notice::Following {
            primary,
            epoch,
            reason,
        }));
    }

    /// Moves to committed `epoch` (persisting it if it is newer; equal epochs
    /// happen after a restart, when we learn the primary of the epoch we
    /// already had on disk) and forgets what belonged to the old one: any
    /// candidacy, a resignation, the old primary's stamp, our lease fence.
    fn enter_epoch(&mut self, epoch: u64) {
        if epoch > self.state.epoch {
            self.state.epoch = epoch;
            self.persist();
        }
        self.max_seen_epoch = self.max_seen_epoch.max(epoch);
        self.candidacy = None;
        self.primary_resigned = None;
        self.primary_stamp = 0;
        self.fenced_by_lease = false;
        self.primary_fenced_since = None;
        self.primary_withdrawn = false;
    }

    /// Tracks how long our primary has said it lost its lease, and decides
    /// whether its heartbeat still proves it alive (§6.9). A primary that
    /// can send but not receive loses its lease and fences, yet every peer
    /// keeps hearing it; counted as alive, it would block failover for as
    /// long as the fault lasts. After `voter_fresh` of continuous fencing we
    /// stop refreshing it: from then on our echo is frozen (so no lease can
    /// rest on it) and the ordinary timers let a majority elect.
    fn primary_stays_fenced(&mut self, lease_lost: bool) -> bool {
        if !lease_lost {
            self.primary_fenced_since = None;
            if self.primary_withdrawn {
                tracing::info!("primary holds its lease again");
            }
            self.primary_withdrawn = false;
            return false;
        }
        let since = *self.primary_fenced_since.get_or_insert(self.now);
        if !self.primary_withdrawn
            && self.now.saturating_sub(since) >= self.cfg.timings.voter_fresh_ms()
        {
            self.primary_withdrawn = true;
            tracing::warn!(
                primary = ?self.primary,
                fenced_ms = self.now - since,
                "primary has been fenced too long: no longer vouching for it"
            );
        }
        self.primary_withdrawn
    }

    /// The data node came back as a new process, or with its data behind
    /// what it reported (§6.8). Nothing it held can be assumed any more: its
    /// old offset is forgotten, a candidacy offered with its old position is
    /// withdrawn, and a primary resigns rather than make whatever came back
    /// writable (an empty node made primary again would wipe every replica
    /// by full resync). A new election decides, and a node that came back
    /// with less data cannot win it.
    fn on_data_node_restarted(&mut self) {
        tracing::warn!(role = %self.role, epoch = self.state.epoch, "data node restarted: its data is no longer trusted");
        self.emit(Action::Notify(Notice::Fault {
            what: "data node restarted or went backwards".into(),
        }));
        // Its position is whatever it reports now (an empty node reports
        // offset 0): never the offset it had before. Voters judge offers
        // against their own fresh offset, so every holder of an
        // acknowledged write still refuses a candidate that lacks it.
        self.stream_claim = None;
        self.obs.offset = None;
        // The adapter applies nothing after a restart until it gets a
        // target issued after it: re-issue the current one.
        self.target_dropped = true;
        match self.role {
            Role::Primary => {
                self.switchover = None;
                self.resign(None, Reason::DataNodeRestarted);
            }
            Role::Candidate => {
                self.candidacy = None;
                self.set_role(Role::Replica, Reason::DataNodeRestarted);
            }
            Role::Replica => {}
        }
    }

    /// Someone else (the watchdog after a stall of this process, an
    /// operator) demoted the data node we had made writable; the same
    /// process still holds its data. Unlike a restart this costs no
    /// election: the current target is re-issued, so the adapter makes the
    /// node writable again only on this decision, taken now, after the lease
    /// was checked against this moment's clock (§6.4.1). A primary whose
    /// lease lapsed meanwhile re-issues a fence instead.
    fn on_data_node_overridden(&mut self) {
        tracing::warn!(role = %self.role, epoch = self.state.epoch, "data node demoted by someone else: the elector re-issues its decision");
        self.emit(Action::Notify(Notice::Fault {
            what: "data node demoted by someone else (watchdog or operator)".into(),
        }));
        self.target_dropped = true;
    }

    /// A peer is in a newer committed epoch but does not know its primary
    /// (it restarted since). Our own epoch is over all the same: a primary of
    /// an older epoch that stayed would be deferred to as the best-ranked
    /// node and never stand, while the others wait for it (found by the
    /// simulator, seed 3152). Join the epoch as a replica with no known
    /// primary, as a restarted node does; the ordinary election follows.
    fn adopt_epoch_without_primary(&mut self, epoch: u64) {
        self.enter_epoch(epoch);
        self.primary = None;
        self.primary_heard_at = None;
        if let Some(sw) = self.switchover.take() {
            self.emit(Action::Notify(Notice::SwitchoverFinished {
                to: sw.to,
                result: Err(format!("epoch {epoch} began elsewhere")),
            }));
        }
        if self.role != Role::Replica {
            self.set_role(Role::Replica, Reason::NewerEpoch);
        }
    }

    fn set_role(&mut self, to: Role, reason: Reason) {
        let from = self.role;
        self.role = to;
        let primary = self.primary().map(str::to_string);
        tracing::info!(from = %from, to = %to, epoch = self.state.epoch, reason = %reason, "role change");
        self.emit(Action::Notify(Notice::RoleChanged {
            from,
            to,
            epoch: self.state.epoch,
            primary,
            reason,
        }));
    }

    /// Recomputes what the data node should be and emits a change.
    fn sync_data_target(&mut self) {
        let me = self.cfg.node_id.as_str();
        let target = match self.role {
            Role::Primary if self.fenced_by_lease => DataNodeTarget::FencedPrimary,
            Role::Primary if self.switchover.is_some() => DataNodeTarget::HandingOver,
            Role::Primary => DataNodeTarget::Primary,
            // A vote (ours or for another) in a pending election declared
            // the old primary dead: stop taking its stream until the
            // election settles, so a primary resuming from a stall cannot
            // get writes acknowledged by us, and the position we voted with
            // stays true (§5.2).
            _ if self.vote_pending() => DataNodeTarget::Isolated,
            _ => match (&self.primary, &self.primary_resigned) {
                // Replicate only while we vouch for the primary (the window
                // in which we echo its lease, §6.2): a primary we no longer
                // hear may be a stalled zombie, and writes it gets
                // acknowledged through us after that could be lost.
                (Some(p), None) if p != me && self.primary_fresh() => DataNodeTarget::Follow {
                    primary: p.clone(),
                    primary_addr: self.cfg.data_addr_of(p).unwrap_or_default().to_string(),
                },
                // A primary that resigned for a handover stays a fenced
                // primary so its replicas keep streaming until the successor
                // announces itself.
                (Some(p), Some(_)) if p == me && self.switchover.is_some() => {
                    DataNodeTarget::HandingOver
                }
                _ => DataNodeTarget::Isolated,
            },
        };
        if target != self.target || std::mem::take(&mut self.target_dropped) {
            if self.target.writable() && !target.fences() && !target.writable() {
                // From writable straight to following a new primary: the
                // follow waits for the new epoch to be durable, but writes
                // must stop now (§5.2.1), even if that persist never lands.
                self.target_seq += 1;
                self.emit(Action::ApplyDataNode {
                    seq: self.target_seq,
                    target: DataNodeTarget::Isolated,
                });
            }
            self.target = target.clone();
            self.target_seq += 1;
            self.stream_claim = match target {
                DataNodeTarget::Primary | DataNodeTarget::Follow { .. } => {
                    Some((self.target_seq, self.state.epoch))
                }
                _ => None,
            };
            self.emit(Action::ApplyDataNode {
                seq: self.target_seq,
                target,
            });
        }
    }

    fn broadcast_heartbeat(&mut self) {
        let hb = Heartbeat {
            epoch: self.state.epoch,
            node_id: self.cfg.node_id.clone(),
            role: self.role,
            offset: self.my_offset(),
            max_epoch: self.state.voted_epoch.max(self.state.epoch),
            primary: self.primary.clone(),
            eligible: self.eligible() && self.primary_resigned_by_me().is_none(),
            fenced: self.fenced(),
            lease_lost: self.role == Role::Primary && self.fenced_by_lease,
            data_epoch: self.state.data_epoch,
            stamp: self.now,
            echo: self.echo(),
        };
        self.broadcast(Message::Hb(hb));
    }

    /// The primary stamp we vouch for: only while we follow a live primary
    /// and no vote of ours in a later epoch can still elect a successor (a
    /// candidacy lasts `election_timeout` at most, counted from before our
    /// vote), so that vote must not also extend the old primary's lease.
    fn echo(&self) -> u64 {
        let vote_settled = !self.vote_pending();
        let following = self.role == Role::Replica
            && self.primary_resigned.is_none()
            && self
                .primary
                .as_deref()
                .is_some_and(|p| p != self.cfg.node_id)
            && vote_settled;
        if following {
            self.primary_stamp
        } else {
            0
        }
    }

    /// We heard our (other) primary recently enough to vouch for it.
    fn primary_fresh(&self) -> bool {
        self.primary_heard_at
            .is_some_and(|h| self.now.saturating_sub(h) < self.cfg.timings.voter_fresh_ms())
    }

    /// The data node has carried out the current target and been observed
    /// since: its reported position is final for voting and standing.
    fn data_settled(&self) -> bool {
        self.obs.reachable && self.obs.applied_seq >= self.target_seq
    }

    /// We voted in an epoch above the committed one and that election may
    /// still produce a primary (a candidacy lasts at most `election_timeout`,
    /// counted from before our vote).
    fn vote_pending(&self) -> bool {
        let t = &self.cfg.timings;
        self.state.voted_epoch > self.state.epoch
            && self.now < self.voted_at + t.election_timeout_ms + t.hb_interval_ms
    }

    fn primary_resigned_by_me(&self) -> Option<()> {
        (self.primary.as_deref() == Some(self.cfg.node_id.as_str())
            && self.primary_resigned.is_some())
        .then_some(())
    }

    fn broadcast(&mut self, msg: Message) {
        let peers: Vec<NodeId> = self.cfg.peer_ids().map(str::to_string).collect();
        for to in peers {
            self.emit(Action::Send {
                to,
                msg: msg.clone(),
            });
        }
    }

    fn my_offset(&self) -> u64 {
        self.obs.offset.unwrap_or(0)
    }

    /// How fresh our data is: `(stream epoch, offset)`, compared
    /// lexicographically (protocol §4.3).
    pub fn position(&self) -> (u64, u64) {
        (self.state.data_epoch, self.my_offset())
    }

    /// Queues a durable write of the current state; later actions wait for it.
    fn persist(&mut self) {
        self.persist_seq += 1;
        self.out.push(Action::Persist {
            seq: self.persist_seq,
            state: self.state.clone(),
        });
    }

    /// Emits an action, holding it back while a persist is in flight
    /// (protocol §5.2: messages that depend on a vote leave only after it is
    /// durable).
    ///
    /// A target that only takes authority away (a fence, §5.2.1) never
    /// waits: a primary whose disk fails must still fence. It supersedes any
    /// target still held, so a held writable target can never be applied
    /// after it.
    fn emit(&mut self, action: Action) {
        if self.persist_seq <= self.durable_seq {
            self.out.push(action);
            return;
        }
        let bypasses = match &action {
            Action::ApplyDataNode { target, .. } => target.fences(),
            Action::Notify(Notice::FenceChanged { fenced, .. }) => *fenced,
            _ => false,
        };
        if bypasses {
            if matches!(action, Action::ApplyDataNode { .. }) {
                self.held
                    .retain(|(_, a)| !matches!(a, Action::ApplyDataNode { .. }));
            }
            self.out.push(action);
        } else {
            self.held.push((self.persist_seq, action));
        }
    }
}

#[cfg(test)]
mod tests;
