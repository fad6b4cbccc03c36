//! How this node answers another's OFFER (docs/protocol.md §4.3, §5.2, §6.3,
//! §6.9): at most one vote per epoch, never against a live primary, never
//! for a candidate with less data than ours.

use super::role::RoleState;
use super::types::{Notice, Reason};
use super::Core;
use crate::protocol::{Message, NodeId, RejectReason};

/// What an OFFER says of its candidate besides the epoch (§4.3, §6.10).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Offered {
    /// `(data_epoch, offset)`.
    pub(super) position: (u64, u64),
    /// An operator accepted losing whatever the candidate lacks.
    pub(super) forced: bool,
    /// The newest epoch the candidate told its data node to take writes in.
    pub(super) led: Option<u64>,
}

impl Core {
    /// The position offers are judged against (§4.3, §6.10): the stream the
    /// data node may have joined, not only the one confirmed, and never
    /// less than the floor. An unproven reading counts for nothing: the
    /// floor alone speaks for what this node may have acknowledged.
    pub(super) fn voting_position(&self) -> (u64, u64) {
        self.voting_position_against(false)
    }

    /// [`Core::voting_position`] against a candidate that disowned this
    /// node's unclaimed join (`disowned`, [`Core::join_disowned_by`]): what
    /// the data node read during that join places nothing in its epoch.
    fn voting_position_against(&self, disowned: bool) -> (u64, u64) {
        let stream = self.state.data_epoch.max(self.state.data_epoch_seen);
        if self.cfg.faults.ignore_floor {
            return (stream, self.my_offset());
        }
        let fresh = match self.proven_position() {
            Some(_) => (stream, self.my_offset()),
            // Unproven in a stream it served as primary, where an old
            // primary's tail guards nothing (2 nodes, 2 + 1, 3 + 2): the
            // stream's acknowledged writes are on replicas, whose floors
            // and claims speak for them. Counting the stream itself would
            // refuse a survivor that never got a write of it (kevy model,
            // two nodes: the primary died before its replica linked up).
            None if self.served_unguarded(stream) => (0, 0),
            None => (stream, 0),
        };
        // Not a shortcut: an unclaimed join's floor of a newer epoch still
        // counts above it (kevy with loading, seed 2752, when it was one).
        let fresh = if self.tail_unknown_in_served_stream(stream)
            || self.state.tail_unread == Some(stream)
        {
            (stream, u64::MAX)
        } else {
            fresh
        };
        let unplaced = self.unplaced_reading().filter(|_| !disowned);
        let fresh = unplaced.map_or(fresh, |at| fresh.max(at));
        self.must_hold_when_voting(!disowned)
            .map_or(fresh, |f| fresh.max(f.pair()))
    }

    /// Whether `candidate`'s own word frees this node from its inherited
    /// unclaimed join (§6.10): the candidate is the primary this node set
    /// out to follow in that epoch, the only node whose data node could
    /// have started the joined stream, and its durable `led` says it never
    /// told its data node to take writes in that epoch or since. Then the
    /// stream never began, no write of it was acknowledged, and the
    /// readings that join left unplaced are in an older stream (seed 1071,
    /// two nodes: the new primary's elector died before it promoted, and
    /// its follower, counting its reading in the joined epoch, refused it
    /// for ever). An OFFER without `led` (an older elector, a record from
    /// before it) frees nothing.
    fn join_disowned_by(&self, candidate: &str, led: Option<u64>) -> bool {
        let Some(joined) = self.inherited_unclaimed_join() else {
            return false;
        };
        self.state.joining_primary.as_deref() == Some(candidate)
            && led.is_some_and(|led| led < joined)
    }

    /// Whether `candidate` is the joined epoch's primary offering a position
    /// in the joined epoch's own stream, on a backend whose every promotion
    /// and every data-node restart starts a new stream (kevy, §6.10 "The
    /// joined stream's source"). Only the process that started that stream
    /// can be read in it, and it stands only proven there and not below
    /// what it held as primary: its live offset is the most any replica
    /// holds of that stream, so what this node read during the unclaimed
    /// join (an unplaced reading, the watchdog's unplaced hint, a join
    /// whose process is gone) places nothing above it. Counted, kevy's
    /// `INFO` offset (a lifetime maximum over every stream the process
    /// followed) refused the very source of the joined stream for ever
    /// (simulator, two kevy nodes, seed 373). Not on Redis: a Redis
    /// restarted from an older RDB is read in its old stream again, so a
    /// joined primary there may offer less than a replica acknowledged.
    fn joined_source_offers(&self, candidate: &str, position: (u64, u64)) -> bool {
        let Some(joined) = self.inherited_unclaimed_join() else {
            return false;
        };
        self.cfg.backend.promotion_restarts_stream
            && !self
                .cfg
                .faults
                .count_the_joined_sources_offer_against_the_join
            && self.state.joining_primary.as_deref() == Some(candidate)
            && position.0 == joined
    }

    /// Whether this node was the primary of `stream`, the data promise needs
    /// its tail (3, 4 or 5 nodes, 4 + 1), and its reading no longer says how
    /// far that tail went (§6.10, "An old primary's tail"): unproven (its
    /// data node demoted by someone else, restarted, or its elector
    /// restarted), proven below what it held there (back from older
    /// files), or proven by a reading taken before someone else ended the
    /// feed ([`super::data::DataView::served_tail_unread`]). `held` is its
    /// last poll as primary; a write of the poll
    /// after can be acknowledged by a replica outside the voters, so it
    /// votes as if it held the whole stream: only a newer stream's
    /// candidate passes, and the stream's replicas elect among themselves
    /// (kevy focused schedule, seed 6257: an old primary demoted by hand
    /// voted with its last poll, 150, for a replica at 153, and write 154,
    /// acknowledged by the third node, was lost).
    fn tail_unknown_in_served_stream(&self, stream: u64) -> bool {
        if self.cfg.faults.trust_the_held_tail || !self.cfg.held_guards_the_promise() {
            return false;
        }
        let Some(held) = self.state.held.filter(|h| h.data_epoch >= stream) else {
            return false;
        };
        self.data.served_tail_unread == Some(held.data_epoch)
            || self.proven_position().is_none_or(|at| at < held)
    }

    /// `stream` is one this node's data node held as its primary, and the
    /// data promise needs no old primary's tail (§6.10).
    fn served_unguarded(&self, stream: u64) -> bool {
        !self.cfg.held_guards_the_promise()
            && self.state.held.is_some_and(|h| h.data_epoch >= stream)
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

    /// The verdict on an offer for `epoch` from a candidate at `position`;
    /// `forced` when an operator accepted the loss of what it lacks (§6.10).
    fn judge_offer(
        &mut self,
        epoch: u64,
        candidate: &str,
        offered: Offered,
    ) -> Result<(), RejectReason> {
        let Offered {
            position,
            forced,
            led,
        } = offered;
        let known = self.state.epoch.max(self.state.voted_epoch);
        if self.cfg.is_witness(candidate) {
            // A witness never stands (§4.5); an offer in its name is a bug
            // or a lie, and it has no data to be primary with.
            return Err(RejectReason::CandidateBehind);
        }
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
        } else if self
            .handover_successor_pending()
            .is_some_and(|to| to != candidate)
        {
            // A node that stood because it saw the resignation before the
            // HANDOVER (lost or reordered) must not win in the successor's
            // place: the handover would turn into an election (§8).
            Err(RejectReason::PrimaryAlive)
        } else if forced {
            // The operator's choice (§6.10): no data comparison. The vote
            // still detaches this node's data node (a vote is pending).
            Ok(())
        } else if self.cfg.i_am_witness() {
            self.witness_judges(position)
        } else if self.state.floor_unknown {
            // Its state was reset (§5.2): what its data node acknowledged
            // before is unknown, so no candidate can be shown to hold it.
            Err(RejectReason::OwnOffsetUnknown)
        } else if self.data.obs.offset.is_none() || !self.data_settled_after_sync() {
            Err(RejectReason::OwnOffsetUnknown)
        } else {
            let never_led = self.join_disowned_by(candidate, led);
            let source = self.joined_source_offers(candidate, position);
            let disowned = never_led || source;
            if position < self.voting_position_against(disowned) {
                return Err(RejectReason::CandidateBehind);
            }
            if source && !never_led && position < self.voting_position() {
                tracing::info!(
                    epoch, %candidate, ?position, joining = self.state.joining,
                    "the joined stream's source offers its live position there: what the unclaimed join read places nothing above it"
                );
            }
            if !disowned && self.unproven_join_refuses(candidate, position) {
                tracing::info!(
                    epoch, %candidate, ?position, joining = self.state.joining,
                    "refused: what this node acknowledged in its unproven join is unknown, and only the joined primary holds all of it"
                );
                return Err(RejectReason::CandidateBehind);
            }
            if never_led && position < self.voting_position() {
                tracing::info!(
                    epoch, %candidate, ?position, ?led, joining = self.state.joining,
                    "the joined epoch's primary never led it: the unclaimed join's reading places nothing there"
                );
            }
            Ok(())
        }
    }

    /// A witness has no data of its own to compare (§4.5): it judges the
    /// candidate by what it last heard from the data nodes. It never helps
    /// elect a candidate behind a data node it hears (alive, eligible, not
    /// the primary: the peers a candidate defers to, §4.2), nor one further
    /// behind the epoch's primary, as last heard, than `max_lag_bytes`.
    /// The refusal is `candidate_behind` on the wire; the log says which.
    fn witness_judges(&self, position: (u64, u64)) -> Result<(), RejectReason> {
        if let Some(acked) = self.acknowledged_floor() {
            if position < acked {
                tracing::info!(
                    ?position,
                    ?acked,
                    "witness: the candidate is below what the data promise says is acknowledged"
                );
                return Err(RejectReason::CandidateBehind);
            }
        }
        let down = self.cfg.timings.down_after_ms;
        let ahead = self.peers.iter_named().find(|(id, view)| {
            let Some(hb) = view.last_hb.as_ref() else {
                return false;
            };
            !self.cfg.is_witness(id)
                && view.alive(self.now, down)
                && hb.eligible
                && hb.role != crate::protocol::Role::Primary
                && (hb.data_epoch, hb.offset) > position
        });
        if let Some((id, _)) = ahead {
            tracing::info!(
                ahead = id,
                ?position,
                "witness: the candidate is behind a data node it hears"
            );
            return Err(RejectReason::CandidateBehind);
        }
        let primary = self.primary.id.as_deref().and_then(|p| {
            let hb = self.peers.get(p)?.last_hb.as_ref()?;
            (hb.epoch == self.state.epoch).then_some((hb.data_epoch, hb.offset))
        });
        if let Some((stream, offset)) = primary {
            let lag = match position.0.cmp(&stream) {
                std::cmp::Ordering::Less => u64::MAX,
                std::cmp::Ordering::Equal => offset.saturating_sub(position.1),
                std::cmp::Ordering::Greater => 0,
            };
            if lag > self.cfg.max_lag {
                tracing::info!(
                    lag,
                    max_lag = self.cfg.max_lag,
                    "witness: the candidate lags the primary it replaces too far"
                );
                return Err(RejectReason::CandidateBehind);
            }
        }
        Ok(())
    }

    /// What a witness knows is acknowledged (§6.10): the `k`-th highest
    /// floor among the data members' latest heartbeats, `k` the data
    /// promise. An acknowledged write is held by `k` replicas, whose floors
    /// are at least its position, so a candidate below this lacks one. A
    /// floor heard from a node that is down still counts (its last word);
    /// a lowered floor (an operator accepted a loss there) replaces it.
    fn acknowledged_floor(&self) -> Option<(u64, u64)> {
        if self.cfg.faults.ignore_floor {
            return None;
        }
        let k = self.cfg.data_promise();
        let mut floors: Vec<(u64, u64)> = self
            .peers
            .iter_named()
            .filter(|(id, _)| !self.cfg.is_witness(id))
            .filter_map(|(_, view)| view.last_hb.as_ref()?.floor)
            .collect();
        floors.sort_unstable_by(|a, b| b.cmp(a));
        k.checked_sub(1).and_then(|i| floors.get(i).copied())
    }

    pub(super) fn on_offer(
        &mut self,
        from: NodeId,
        epoch: u64,
        candidate: NodeId,
        offered: Offered,
    ) {
        self.max_seen_epoch = self.max_seen_epoch.max(epoch);
        if candidate != from {
            return;
        }
        let known = self.state.epoch.max(self.state.voted_epoch);
        let Offered {
            position, forced, ..
        } = offered;
        match self.judge_offer(epoch, &candidate, offered) {
            Ok(()) if forced => {
                tracing::warn!(
                    epoch, %candidate, ?position, ours = ?self.voting_position(),
                    "voting for an operator-forced candidacy: whatever it lacks is lost by the operator's choice"
                );
                self.notify(Notice::DataLossAccepted {
                    epoch,
                    candidate: candidate.clone(),
                    position,
                    floor: self.voting_position(),
                });
                self.vote_for(epoch, candidate)
            }
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
