//! Standing for election and counting votes (docs/protocol.md §4, §5.1, §6.5,
//! §6.6). How this node votes on others' offers is in `vote.rs`.

use super::quorum::VoteResult;
use super::role::{Candidacy, Leadership, RoleState};
use super::types::{Notice, Reason};
use super::Core;
use crate::protocol::{Message, NodeId, RejectReason, Role};
use rand::Rng;

/// How long an operator's `accept-data-loss` keeps a node standing again
/// after lost elections: a few elections' worth (§6.10).
pub(crate) fn forced_window_ms(t: &super::Timings) -> u64 {
    5 * (t.election_timeout_ms + t.backoff_max_ms).max(t.down_after_ms)
}

impl Core {
    /// Whether this node may stand right now (protocol §6.5): a data member
    /// (a witness never stands, §4.5), priority above zero, a reachable data
    /// node, and not too far behind.
    pub(super) fn eligible(&self) -> bool {
        if self.cfg.i_am_witness()
            || self.cfg.priority == 0
            || !self.data.obs.reachable
            || self.data.down_since.is_some()
            || self.below_floor()
        {
            return false;
        }
        self.lag().is_none_or(|lag| lag <= self.cfg.max_lag)
    }

    /// Bytes behind the best reference we have: the live primary's last
    /// heartbeat, or else the best live peer (the one that would win).
    pub(crate) fn lag(&self) -> Option<u64> {
        if self.role() == Role::Primary {
            return Some(0);
        }
        let now = self.now;
        let down = self.cfg.timings.down_after_ms;
        let reference = match (self.primary(), self.primary.heard_at) {
            (Some(p), Some(heard)) if !self.is_me(p) && now.saturating_sub(heard) < down => self
                .peers
                .get(p)
                .and_then(|v| v.last_hb.as_ref())
                .map(|hb| (hb.data_epoch, hb.offset)),
            _ => self
                .peers
                .iter()
                .filter(|v| v.alive(now, down))
                .filter_map(|v| v.last_hb.as_ref())
                .filter(|hb| hb.eligible)
                .map(|hb| (hb.data_epoch, hb.offset))
                .max(),
        }?;
        // Offsets of different streams are not comparable; the candidate
        // rule ranks those by stream epoch instead.
        (reference.0 == self.state.data_epoch).then(|| reference.1.saturating_sub(self.my_offset()))
    }

    /// Why the primary counts as gone, or None while it is alive.
    fn primary_gone(&self) -> Option<Reason> {
        let t = &self.cfg.timings;
        if self.primary.resigned.is_some() {
            return Some(Reason::PrimaryResigned);
        }
        match (self.primary.id.as_deref(), self.primary.heard_at) {
            (None, _) => {
                (self.now >= self.started_at + t.startup_grace_ms()).then_some(Reason::Startup)
            }
            (Some(p), _) if self.is_me(p) => None,
            (Some(_), Some(heard)) if self.now.saturating_sub(heard) < t.down_after_ms => None,
            (Some(_), _) if self.primary.withdrawn => Some(Reason::PrimaryFenced),
            (Some(_), _) => Some(Reason::PeerTimeout),
        }
    }

    /// Candidate selection (protocol §4.2): among live, eligible peers nobody
    /// has a higher offset, or the same offset and a lower node id.
    fn is_best_candidate(&self) -> bool {
        let mine = (
            self.position(),
            std::cmp::Reverse(self.cfg.node_id.as_str()),
        );
        let down = self.cfg.timings.down_after_ms;
        self.peers.iter_named().all(|(id, view)| {
            let Some(hb) = view.last_hb.as_ref() else {
                return true;
            };
            // A primary does not stand: one we no longer count as alive
            // (fenced too long, §6.9) must not be deferred to either.
            if !view.alive(self.now, down) || !hb.eligible || hb.role == Role::Primary {
                return true;
            }
            // Never defer to a peer we would refuse to vote for (§4.3: we
            // may hold data of a later stream than it advertises); it
            // cannot win without us, and deferring to it would leave
            // nobody standing.
            if (hb.data_epoch, hb.offset) < self.voting_position() {
                return true;
            }
            ((hb.data_epoch, hb.offset), std::cmp::Reverse(id)) < mine
        })
    }

    /// Notes when this node became eligible. A node whose eligibility was
    /// interrupted (its data node stalled, say) must not stand the instant
    /// it recovers: every peer still believes it ineligible, and a peer that
    /// recovered at the same moment (both were stalled by the same dead
    /// primary) would stand too, splitting the vote. Waiting until its
    /// heartbeats have announced the eligibility lets the better-ranked of
    /// the two be seen and the other defer (§5.1).
    pub(super) fn track_eligibility(&mut self) {
        match (self.eligible(), self.eligible_since) {
            (true, None) => self.eligible_since = Some(self.now),
            (false, Some(_)) => self.eligible_since = None,
            _ => {}
        }
    }

    /// Eligible long enough for peers to have heard it (see above).
    fn eligibility_announced(&self) -> bool {
        self.eligible_since
            .is_some_and(|since| self.now >= since + self.cfg.timings.eligibility_announce_ms())
    }

    /// The successor a handover named, while this node still defers to it
    /// (§8): learned within `down_after` and alive to us, or ourselves.
    /// The deference is bounded by `down_after`: a successor that restarted
    /// in between no longer knows it was chosen, and would itself defer to a
    /// better-ranked node that defers to it (found by the simulator, seed 882
    /// with switchovers).
    pub(super) fn handover_successor_pending(&self) -> Option<&str> {
        let to = self.primary.resigned.as_ref()?.as_deref()?;
        let recent = self.now < self.primary.handover_learned_at + self.cfg.timings.down_after_ms;
        let alive = self.is_me(to) || self.peers.get(to).is_some_and(|v| self.peer_alive(v));
        (recent && alive).then_some(to)
    }

    /// An operator accepted losing whatever this node's data node lacks
    /// (§6.10): it stands at the next chance, within `down_after`, whatever
    /// its floor, its lag or its peers' positions, and its offer says so.
    pub(super) fn on_accept_data_loss(&mut self) {
        if self.cfg.i_am_witness() || self.cfg.priority == 0 {
            tracing::warn!(
                "accept-data-loss refused: this node cannot be primary (witness or priority 0)"
            );
            return;
        }
        tracing::warn!(
            floor = ?self.state.floor, position = ?self.proven_position(), proof = self.data.proof.as_str(),
            "operator accepts data loss: standing regardless of the floor"
        );
        self.data.forced_at = Some(self.now);
        self.data.forced_tries = 0;
    }

    /// The operator's request still stands: until this node wins, another
    /// primary is learned, or [`forced_window_ms`] has passed (a request
    /// must not act by surprise much later).
    pub(crate) fn forced_candidacy_pending(&self) -> bool {
        self.data
            .forced_at
            .is_some_and(|at| self.now < at + forced_window_ms(&self.cfg.timings))
    }

    /// Stands for an operator who accepted the loss, once the rules that
    /// protect a live primary and the vote allow: the primary is gone, a
    /// majority is heard, the data node answers and holds its target.
    fn maybe_stand_forced(&mut self) -> bool {
        if !self.forced_candidacy_pending() {
            return false;
        }
        let reachable = 1 + self
            .peers
            .count_heard_within(self.now, self.cfg.timings.down_after_ms);
        let ready = self.primary_gone().is_some()
            && self.role.switchover().is_none()
            && self.data.obs.reachable
            && self.data_settled()
            && self.quorum().is_reached(reachable);
        // The first try goes at once; after a lost election (a lost
        // message, a split vote) the ordinary backoff applies.
        if !ready || (self.data.forced_tries > 0 && self.now < self.backoff_until) {
            return false;
        }
        self.data.forced_tries += 1;
        let position = self.position();
        self.notify(Notice::DataLossAccepted {
            epoch: self.highest_epoch() + 1,
            candidate: self.cfg.node_id.clone(),
            position,
            floor: self.state.floor.map_or(position, |f| f.pair()),
        });
        self.start_candidacy(Reason::DataLossAccepted, true);
        true
    }

    /// Stands for election when the rules allow (protocol §5.1). Called on
    /// a replica only.
    pub(super) fn maybe_stand(&mut self) {
        if self.maybe_stand_forced() {
            return;
        }
        // Eligibility is what peers see (§4.2); settling (§6.5) only delays
        // standing, so peers defer to a best node that is still detaching
        // instead of standing against it.
        if self.now < self.backoff_until || !self.eligible() || !self.data_settled() {
            return;
        }
        let Some(reason) = self.primary_gone() else {
            return;
        };
        let handover_to = self.primary.resigned.as_ref().and_then(|t| t.as_deref());
        let handover_to_me = handover_to.is_some_and(|to| self.is_me(to));
        // During a handover only the chosen successor stands (§8): the old
        // primary until its switchover deadline, the others while they
        // still hear the successor.
        if self.role.switchover().is_some() {
            return;
        }
        // The chosen successor gives the voters one heartbeat to fence
        // their data nodes after the HANDOVER: a voter still applying
        // that fence answers `own_offset_unknown`, and a handover
        // election that fails falls back to an ordinary one (§8; found
        // by the preemption simulation, where it repeated every delay).
        let settle = self.primary.handover_learned_at + self.cfg.timings.hb_interval_ms;
        if handover_to_me && self.now < settle {
            return;
        }
        if !handover_to_me && self.handover_successor_pending().is_some() {
            return;
        }
        // Pre-check (protocol §6.6): a node that cannot hear a majority would
        // only push epochs up for nothing.
        let reachable = 1 + self
            .peers
            .count_heard_within(self.now, self.cfg.timings.down_after_ms);
        if !self.quorum().is_reached(reachable) && !self.cfg.faults.promote_without_quorum {
            return;
        }
        if !handover_to_me && (!self.eligibility_announced() || !self.is_best_candidate()) {
            return;
        }
        self.start_candidacy(
            if handover_to_me {
                Reason::Switchover
            } else {
                reason
            },
            false,
        );
    }

    fn start_candidacy(&mut self, reason: Reason, forced: bool) {
        let highest = self.highest_epoch();
        // Never wraps (§3.6): at the top of the range the node stops standing.
        if highest >= crate::protocol::MAX_EPOCH {
            tracing::error!(highest, "epoch range exhausted: not standing");
            return;
        }
        let epoch = highest + 1;
        self.state.voted_epoch = epoch;
        self.state.voted_for = Some(self.cfg.node_id.clone());
        self.voted_at = self.now;
        self.max_seen_epoch = epoch;
        self.outbox.persist();
        let candidacy = Candidacy {
            epoch,
            votes: [self.cfg.node_id.clone()].into_iter().collect(),
            rejects: Default::default(),
            deadline: self.now + self.cfg.timings.election_timeout_ms,
            reason,
        };
        tracing::info!(epoch, reason = %reason, offset = self.my_offset(), "standing for election");
        self.set_role(RoleState::Candidate(candidacy), reason);
        self.notify(Notice::ElectionStarted { epoch });
        let (data_epoch, offset) = self.position();
        self.broadcast(Message::Offer {
            epoch,
            candidate: self.cfg.node_id.clone(),
            offset,
            data_epoch,
            forced,
            led: self.state.led,
        });
        self.check_won();
    }

    pub(super) fn on_accept(&mut self, epoch: u64, voter: NodeId) {
        if !self.cfg.is_member(&voter) {
            return;
        }
        let RoleState::Candidate(c) = &mut self.role else {
            return;
        };
        if c.epoch != epoch {
            return;
        }
        c.votes.insert(voter);
        self.check_won();
    }

    pub(super) fn on_reject(
        &mut self,
        epoch: u64,
        voter: NodeId,
        reason: RejectReason,
        max_epoch: u64,
    ) {
        self.max_seen_epoch = self.max_seen_epoch.max(max_epoch);
        let (now, down) = (self.now, self.cfg.timings.down_after_ms);
        let quorum = self.quorum();
        let RoleState::Candidate(c) = &mut self.role else {
            return;
        };
        if c.epoch != epoch {
            return;
        }
        c.rejects.insert(voter.clone());
        tracing::info!(epoch, %voter, reason = reason.as_str(), "offer refused");
        // Voters that refused, and peers we have not heard for down_after,
        // will not make up a quorum: give up now instead of waiting for the
        // election timeout (a split vote with the primary dead would
        // otherwise always cost a whole election timeout).
        let silent = self
            .peers
            .iter_named()
            .filter(|(id, view)| !c.rejects.contains(*id) && !view.alive(now, down))
            .count();
        if quorum.vote_result(c.votes.len(), c.rejects.len(), silent) == VoteResult::Lost {
            self.abandon_candidacy(Reason::LostElection);
        }
    }

    pub(super) fn check_candidacy_timeout(&mut self) {
        if self
            .role
            .candidacy()
            .is_some_and(|c| self.now >= c.deadline)
        {
            self.abandon_candidacy(Reason::ElectionTimeout);
        }
    }

    fn abandon_candidacy(&mut self, reason: Reason) {
        let t = self.cfg.timings;
        let jitter = self
            .rng
            .gen_range(t.backoff_min_ms..=t.backoff_max_ms.max(t.backoff_min_ms));
        self.backoff_until = self.now + jitter;
        self.become_replica(reason);
    }

    fn check_won(&mut self) {
        let Some(c) = self.role.candidacy() else {
            return;
        };
        let won = self.quorum().vote_result(c.votes.len(), 0, 0) == VoteResult::Won;
        if !won && !self.cfg.faults.promote_without_quorum {
            return;
        }
        let epoch = c.epoch;
        let won_as = c.won_as();
        self.state.epoch = epoch;
        self.outbox.persist();
        self.primary.id = Some(self.cfg.node_id.clone());
        self.primary.resigned = None;
        self.primary.heard_at = Some(self.now);
        // Writable only once a quorum echoes our stamps (protocol §6.2): the
        // voters' ACCEPTs do not stop them voting again in a later epoch.
        let fenced = !self.cfg.faults.no_lease_fencing && !self.cfg.faults.promote_without_quorum;
        let leadership = Leadership {
            won_as,
            fenced_by_lease: fenced,
            fenced_since: fenced.then_some(self.now),
            ..Leadership::default()
        };
        self.set_role(RoleState::Primary(leadership), won_as);
        self.sync_data_target();
        let addr = self
            .cfg
            .data_addr_of(&self.cfg.node_id)
            .unwrap_or_default()
            .to_string();
        self.broadcast(Message::Announce {
            epoch,
            primary: self.cfg.node_id.clone(),
            primary_addr: addr,
            stamp: self.now,
        });
        self.check_lease();
    }
}
