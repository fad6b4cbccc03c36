//! How this node answers another's OFFER (docs/protocol.md §4.3, §5.2, §6.3,
//! §6.9): at most one vote per epoch, never against a live primary, never
//! for a candidate with less data than ours.

use super::role::RoleState;
use super::types::Reason;
use super::Core;
use crate::protocol::{Message, NodeId, RejectReason};

impl Core {
    /// The position offers are judged against (§4.3): the stream the data
    /// node may have joined, not only the one confirmed.
    pub(super) fn voting_position(&self) -> (u64, u64) {
        (
            self.state.data_epoch.max(self.state.data_epoch_seen),
            self.my_offset(),
        )
    }

    /// Brings the data target up to date, then says whether the data node is
    /// settled in it (so our position cannot move after we vote).
    fn data_settled_after_sync(&mut self) -> bool {
        self.sync_data_target();
        self.data_settled()
    }

    /// Whether a voter should still defend its primary (protocol §6.3).
    fn primary_fresh_for_voting(&self) -> bool {
        if self.primary.resigned.is_some() {
            return false;
        }
        if let Some(l) = self.role.leadership() {
            // A primary that lost its lease is not serving: it must not
            // keep a majority that can elect from doing so (§6.9).
            return !l.fenced_by_lease;
        }
        match self.primary.id.as_deref() {
            Some(p) if !self.is_me(p) => self.primary_fresh(),
            _ => false,
        }
    }

    /// The verdict on an offer for `epoch` from a candidate at `position`.
    fn judge_offer(&mut self, epoch: u64, position: (u64, u64)) -> Result<(), RejectReason> {
        let known = self.state.epoch.max(self.state.voted_epoch);
        let twice = self.cfg.faults.accept_twice_per_epoch
            && epoch == self.state.voted_epoch
            && epoch > self.state.epoch;
        if epoch <= known && !twice {
            Err(if epoch == self.state.voted_epoch {
                RejectReason::AlreadyVoted
            } else {
                RejectReason::StaleEpoch
            })
        } else if self.primary_fresh_for_voting() {
            Err(RejectReason::PrimaryAlive)
        } else if self.data.obs.offset.is_none() || !self.data_settled_after_sync() {
            Err(RejectReason::OwnOffsetUnknown)
        } else if position < self.voting_position() {
            Err(RejectReason::CandidateBehind)
        } else {
            Ok(())
        }
    }

    pub(super) fn on_offer(
        &mut self,
        from: NodeId,
        epoch: u64,
        candidate: NodeId,
        position: (u64, u64),
    ) {
        self.max_seen_epoch = self.max_seen_epoch.max(epoch);
        if candidate != from {
            return;
        }
        let known = self.state.epoch.max(self.state.voted_epoch);
        match self.judge_offer(epoch, position) {
            Ok(()) => self.vote_for(epoch, candidate),
            Err(reason) => {
                tracing::debug!(epoch, %candidate, reason = reason.as_str(), "refused offer");
                let msg = Message::Reject {
                    epoch,
                    voter: self.cfg.node_id.clone(),
                    reason,
                    max_epoch: known.max(self.max_seen_epoch),
                };
                self.send(candidate, msg);
            }
        }
    }

    /// Records the vote durably; the ACCEPT waits for the write (§5.2).
    fn vote_for(&mut self, epoch: u64, candidate: NodeId) {
        self.state.voted_epoch = epoch;
        self.state.voted_for = Some(candidate.clone());
        self.voted_at = self.now;
        // Give the candidate we voted for its election before standing
        // ourselves (it cannot win with us against it).
        self.backoff_until = self
            .backoff_until
            .max(self.now + self.cfg.timings.election_timeout_ms);
        self.outbox.persist();
        match self.role {
            RoleState::Candidate(_) => self.become_replica(Reason::LostElection),
            RoleState::Primary(_) => {
                // Only a primary that lost its lease votes (§6.9); by
                // voting it gives the role up.
                self.primary.resigned = Some(None);
                self.become_replica(Reason::QuorumLost);
            }
            RoleState::Replica { .. } => {}
        }
        tracing::info!(epoch, %candidate, "voted");
        let msg = Message::Accept {
            epoch,
            voter: self.cfg.node_id.clone(),
        };
        self.send(candidate, msg);
    }
}
