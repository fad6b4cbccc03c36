//! The data node as the core sees it: what the adapter last observed, and
//! the target the core wants it in (docs/protocol.md §4.3, §5.2.1, §6.8).

use super::floor::{Proof, Unproven};
use super::output::{Action, Fence, Split};
use super::role::RoleState;
use super::types::{DataNodeTarget, Millis, Notice, Observation, Reason, StreamId};
use super::Core;
use crate::protocol::Role;

/// What the adapter has told us about the data node.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct DataView {
    pub(crate) obs: Observation,
    /// The data node's generation as last reported by the adapter (§6.8).
    pub(crate) generation: u64,
    /// The adapter's count of demotions by someone else, as last reported.
    pub(crate) overridden: u64,
    pub(crate) down_since: Option<Millis>,
    /// Whether the reading describes the data node's content (§6.10).
    pub(crate) proof: Proof,
    /// The floor rose and is not on disk yet; when it was last written.
    pub(crate) floor_dirty: bool,
    pub(crate) floor_written_at: Option<Millis>,
    /// What the last "below floor" log line said (to log changes only).
    pub(crate) below_floor_reported: bool,
    /// The stream this node's data node started as primary in an epoch
    /// (§6.10): `(epoch, stream)`, set at the promotion's claim.
    pub(crate) serving: Option<(u64, Option<StreamId>)>,
    /// When an operator accepted the loss of what the data node may lack
    /// (`elector accept-data-loss`, §6.10): it stands at the next chance.
    pub(crate) forced_at: Option<Millis>,
    /// Candidacies stood on the operator's request so far.
    pub(crate) forced_tries: u32,
    /// This elector started with a join written and not claimed (§6.10):
    /// its predecessor died in the claim window, so what the data node
    /// took meanwhile is unknown. A join made by this process is watched
    /// (the claim follows the readings), so this clears at the next join.
    pub(crate) inherited_join: bool,
    /// An unclaimed join whose epoch's primary said, in a heartbeat of that
    /// epoch, that it never told its data node to take writes there
    /// (§6.10): the joined stream never began, so the join places nothing.
    pub(crate) void_join: Option<u64>,
    /// The process the unclaimed join was set out from (`joining_process`)
    /// is gone or unknown: the data node restarted since, a reading named
    /// only other processes, or this elector started with the join and no
    /// reading has named that process yet (§6.10, "A join whose process is
    /// gone"). While that process runs, its readings say what it received
    /// in the join.
    pub(crate) joining_process_gone: bool,
    /// The stream this node's data node served as primary was ended by
    /// someone else (an operator's `REPLICAOF`, the watchdog) on a backend
    /// whose runner token then names no feed (kevy): the offset the feed
    /// reached was never read, so the reading (the adapter's last poll of
    /// the primary) is a lower bound of what it holds there. Proven for
    /// standing (the same process holds at least that), not for voting
    /// (§6.10, "An old primary's tail"). The data epoch of that stream.
    pub(crate) served_tail_unread: Option<u64>,
    /// The adapter's count of runners someone else ended, as last reported.
    pub(crate) runners_ended_by_others: u64,
}

impl Default for DataView {
    fn default() -> Self {
        DataView {
            obs: Observation::default(),
            generation: 0,
            overridden: 0,
            down_since: None,
            proof: Proof::Proven,
            floor_dirty: false,
            floor_written_at: None,
            below_floor_reported: false,
            serving: None,
            forced_at: None,
            forced_tries: 0,
            inherited_join: false,
            void_join: None,
            joining_process_gone: false,
            served_tail_unread: None,
            runners_ended_by_others: 0,
        }
    }
}

/// The target the core wants the data node in.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct TargetState {
    pub(crate) current: DataNodeTarget,
    pub(crate) seq: u64,
    /// The current target must be issued again (with a new seq): it never
    /// reached the adapter (a failed persist dropped it) or the adapter
    /// no longer applies it (a restart, a demotion by someone else).
    pub(crate) reissue: bool,
    /// `(target seq, epoch)`: once the data node has applied that target and
    /// reports its link up, its data is part of `epoch`'s stream.
    pub(crate) stream_claim: Option<(u64, u64)>,
}

impl Default for TargetState {
    fn default() -> Self {
        TargetState {
            current: DataNodeTarget::Isolated,
            seq: 0,
            reissue: false,
            stream_claim: None,
        }
    }
}

impl Core {
    pub(super) fn on_observation(&mut self, obs: Observation) {
        if obs.generation != self.data.generation {
            self.data.generation = obs.generation;
            self.on_data_node_restarted();
        }
        if obs.overridden != self.data.overridden {
            self.data.overridden = obs.overridden;
            self.on_data_node_overridden();
        }
        // Only a reading carries the count (an unreachable round reports 0).
        if obs.reachable && obs.runners_ended_by_others > self.data.runners_ended_by_others {
            self.data.runners_ended_by_others = obs.runners_ended_by_others;
            self.on_runner_ended_by_others();
        }
        if obs.reachable {
            if self.data.down_since.take().is_some() {
                tracing::info!("data node reachable again");
            }
        } else if self.data.down_since.is_none() {
            self.data.down_since = Some(self.now);
            self.notify(Notice::Fault {
                what: "data node unreachable".into(),
            });
        }
        // An unreachable observation carries no offset; keep the last known one.
        let offset = obs.offset.or(self.data.obs.offset);
        self.data.obs = Observation {
            offset,
            ..obs.clone()
        };
        self.note_joining_process(&obs);
        self.claim_stream(&obs);
        self.disprove_on_another_stream(&obs);
        self.prove_from_reading(&obs);
        self.prove_by_joining_process(&obs);
        self.absorb_floor_hint(&obs);
        self.raise_floor(&obs);
        self.read_the_replicas_tail_again(&obs);
        self.check_primary_stream(&obs);
        self.note_below_floor_change();
        self.sync_floor(false);
    }

    /// On a backend whose every promotion starts a new stream (kevy), the
    /// primary's data node must serve the stream it started in this epoch
    /// until the epoch ends: demoted (by a fence the backend could not keep
    /// as a quiesce, by the watchdog, by an operator) or promoted anew, it
    /// resigns instead of being made writable again, and a new election
    /// starts the next stream under a new epoch (§6.10). Otherwise two
    /// streams whose offsets both start at 0 would share one `data_epoch`,
    /// and a replica holding the first one's larger offset would outrank
    /// the holder of the second one's acknowledged writes.
    fn check_primary_stream(&mut self, obs: &Observation) {
        if !self.cfg.backend.promotion_restarts_stream || self.cfg.faults.repromote_in_epoch {
            return;
        }
        let epoch = self.state.epoch;
        let Some((serving_epoch, stream)) = self.data.serving.clone() else {
            return;
        };
        if serving_epoch != epoch || self.role.leadership().is_none() || !obs.reachable {
            return;
        }
        let left = !obs.master
            || matches!((&stream, &obs.stream), (Some(s), Some(_)) if !obs.in_stream(s));
        if left {
            tracing::warn!(
                epoch, master = obs.master, stream = ?obs.stream, started = ?stream,
                "the data node left the stream it started in this epoch: resigning (a new stream needs a new epoch)"
            );
            // Someone else ended the feed (our own demotions come after a
            // resignation, read in the `REPLICAOF`'s pipeline): the offset
            // it reached was never read (§6.10, "An old primary's tail").
            tracing::info!(
                data_epoch = self.state.data_epoch,
                "the feed ended where no reading of ours saw: the last reading is a lower bound there, and this node votes as if it held the whole stream"
            );
            self.data.served_tail_unread = Some(self.state.data_epoch);
            self.data.serving = None;
            self.role.take_switchover();
            self.resign(None, Reason::StreamEnded);
        }
    }

    /// Someone else ended the kevy runner this node's data node followed
    /// its primary with (an operator's `REPLICAOF`): how far it got, the
    /// most it acknowledged, was last read a poll ago, so the floor may
    /// trail it (§6.10, "A replica's tail"). Until the node joins that
    /// stream again it votes as if it held all of it.
    fn on_runner_ended_by_others(&mut self) {
        self.notify(Notice::Fault {
            what: "data node moved off its primary by someone else (operator)".into(),
        });
        if self.cfg.faults.trust_the_replicas_last_poll || self.role.leadership().is_some() {
            return;
        }
        let Some(record) = self.state.stream.as_ref() else {
            return;
        };
        if record.data_epoch != self.state.data_epoch
            || self
                .state
                .held
                .is_some_and(|h| h.data_epoch >= record.data_epoch)
        {
            return;
        }
        tracing::warn!(
            data_epoch = record.data_epoch, floor = ?self.state.floor,
            "a replica's runner ended unread: what it acknowledged may exceed its last reading, so this node votes as if it held the whole stream until it joins it again"
        );
        self.state.tail_unread = Some(record.data_epoch);
        // Durable at once: an elector restarted before its floor's next
        // write would vote by its last reading again.
        self.data.floor_dirty = true;
        self.sync_floor(true);
    }

    /// A reading joined to the stream whose tail was unread (§6.10, "A
    /// replica's tail"), taken after the runner was ended: a new runner's
    /// full sync of that stream's primary, begun after the old runner
    /// ended, holds all the old one received; the floor rises to it and
    /// the node judges offers by its readings again. A newer stream makes
    /// the old one's tail moot (positions rank by stream first).
    fn read_the_replicas_tail_again(&mut self, obs: &Observation) {
        let Some(epoch) = self.state.tail_unread else {
            return;
        };
        let rejoined = obs.reachable
            && !obs.master
            && obs.link_up
            && self.data.proof == Proof::Proven
            && self.state.stream.as_ref().is_some_and(|r| {
                r.data_epoch == epoch && self.state.data_epoch == epoch && obs.in_stream(&r.id)
            });
        if rejoined || self.state.data_epoch > epoch {
            tracing::info!(
                data_epoch = epoch, rejoined, floor = ?self.state.floor,
                "the replica reads its stream again: it votes by its readings"
            );
            self.state.tail_unread = None;
            self.data.floor_dirty = true;
        }
    }

    /// Records which stream the data node has joined (§4.3), durably.
    fn claim_stream(&mut self, obs: &Observation) {
        let Some((seq, epoch)) = self.target.stream_claim else {
            return;
        };
        if !obs.reachable || obs.applied_seq < seq {
            return;
        }
        let mut changed = false;
        let moved = obs.offset.is_some() && obs.offset != obs.offset_at_apply;
        if (moved || obs.link_up) && epoch > self.state.data_epoch_seen {
            self.state.data_epoch_seen = epoch;
            changed = true;
        }
        // Joined: the link is up, or data arrived from the upstream since
        // the target was applied (a replica's offset moves only by what its
        // upstream sends). A replica can full-sync, acknowledge writes and
        // lose its primary between two polls, the link never seen up; its
        // data is the stream's all the same (tests/data_safety.rs, Redis,
        // a demotion by hand: 30 acknowledged writes lost when only the
        // link counted).
        // A replica's only: a primary's offset moves with its own writes,
        // and kevy names a promoted node's new feed generation a tick after
        // its offset moves (a claim then would record the old generation,
        // and the next reading would resign the new primary).
        let arrived = !obs.master
            && obs
                .offset_at_apply
                .is_some_and(|at| obs.offset.is_some_and(|o| o != at));
        let joined = obs.link_up || arrived;
        if joined && epoch > self.state.data_epoch {
            self.state.data_epoch = epoch;
            changed = true;
        }
        if changed {
            self.outbox.persist();
        }
        // On a backend whose every promotion restarts the stream (kevy), a
        // reading of another stream under an epoch whose stream is recorded
        // is no claim: one epoch names one stream (§6.10). Redis continues
        // its offsets across a promotion, and a replica that full-synced
        // from a primary re-promoted in its epoch carries the new replid
        // without the old one (`master_replid2` is cleared by a full sync):
        // it is in the epoch's stream all the same, and refusing its claim
        // would leave what it acknowledges out of its floor.
        let other_stream = self.cfg.backend.promotion_restarts_stream
            && self.state.stream.as_ref().is_some_and(|r| {
                r.data_epoch == epoch && obs.stream.is_some() && !obs.in_stream(&r.id)
            });
        if joined && epoch >= self.state.data_epoch && !other_stream {
            self.prove_by_claim(epoch, obs);
            if obs.master && self.role.leadership().is_some() && epoch == self.state.epoch {
                let started = self.data.serving.as_ref().filter(|(e, _)| *e == epoch);
                if started.is_none() {
                    self.data.serving = Some((epoch, obs.stream.clone()));
                } else if let Some((_, s)) = self.data.serving.as_mut() {
                    // A backend that continues its stream across a
                    // promotion (Redis) names the continuation: follow it.
                    if obs.stream.is_some() && s.as_ref().is_none_or(|old| obs.in_stream(old)) {
                        *s = obs.stream.clone();
                    }
                }
            }
        }
    }

    /// The data node came back as a new process, or with its data behind
    /// what it reported (§6.8). Nothing it held can be assumed any more: its
    /// old offset is forgotten, a candidacy offered with its old position is
    /// withdrawn, and a primary resigns rather than make whatever came back
    /// writable (an empty node made primary again would wipe every replica
    /// by full resync). A new election decides, and a node that came back
    /// with less data cannot win it.
    fn on_data_node_restarted(&mut self) {
        tracing::warn!(role = %self.role(), epoch = self.state.epoch, "data node restarted: its data is no longer trusted");
        self.notify(Notice::Fault {
            what: "data node restarted or went backwards".into(),
        });
        // Whatever it holds now is unproven (§6.10): it stands again only
        // once a reading ties it to its stream or it joins one, and until
        // then it votes with its floor, which it keeps: a holder of an
        // acknowledged write whose data went back must not help elect a
        // candidate without it (chaos seed 21: a restarted Redis said
        // offset 1, and its elector voted for a replica 928 KB behind).
        self.data.proof = Proof::Unproven(Unproven::DataNodeRestarted);
        self.data.joining_process_gone = true;
        if self.unclaimed_join().is_some() && !self.data.inherited_join {
            // Restarted in the claim window: the process that may have
            // acknowledged the joined stream's writes is gone, and the new
            // one may read an older stream from older files (§6.10, "A
            // join whose process is gone"), as after a host crash.
            tracing::info!(
                joining = self.state.joining,
                "data node restarted during a join no reading claimed: what it took there is unknown"
            );
            self.data.inherited_join = true;
        }
        self.data.serving = None;
        self.sync_floor(true);
        self.target.stream_claim = None;
        self.data.obs.offset = None;
        // The adapter applies nothing after a restart until it gets a
        // target issued after it: re-issue the current one.
        self.target.reissue = true;
        match self.role.role() {
            Role::Primary => {
                self.role.take_switchover();
                self.resign(None, Reason::DataNodeRestarted);
            }
            Role::Candidate => self.become_replica(Reason::DataNodeRestarted),
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
        tracing::warn!(role = %self.role(), epoch = self.state.epoch, "data node demoted by someone else: the elector re-issues its decision");
        self.notify(Notice::Fault {
            what: "data node demoted by someone else (watchdog or operator)".into(),
        });
        self.target.reissue = true;
    }

    /// What the data node should be now.
    fn wanted_target(&self) -> DataNodeTarget {
        let me = self.cfg.node_id.as_str();
        match &self.role {
            RoleState::Primary(l) if l.fenced_by_lease => DataNodeTarget::FencedPrimary,
            RoleState::Primary(l) if l.switchover.is_some() => DataNodeTarget::HandingOver,
            RoleState::Primary(_) => DataNodeTarget::Primary,
            // A vote (ours or for another) in a pending election declared
            // the old primary dead: stop taking its stream until the
            // election settles, so a primary resuming from a stall cannot
            // get writes acknowledged by us, and the position we voted with
            // stays true (§5.2).
            _ if self.vote_pending() => DataNodeTarget::Isolated,
            role => match (&self.primary.id, &self.primary.resigned) {
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
                (Some(p), Some(_)) if p == me && role.switchover().is_some() => {
                    DataNodeTarget::HandingOver
                }
                _ => DataNodeTarget::Isolated,
            },
        }
    }

    /// Recomputes what the data node should be and emits a change. A
    /// witness has no data node and issues nothing (§4.5).
    pub(super) fn sync_data_target(&mut self) {
        if self.cfg.i_am_witness() {
            return;
        }
        let target = self.wanted_target();
        // Following the same primary into a newer epoch is a new stream
        // (§4.3): the target is re-issued so the stream is claimed again from
        // a read taken in the new epoch, or this replica would advertise the
        // old stream for good and never count as caught up (the preemption
        // simulation found it, seed 1027: the preferred node was never ready).
        let new_stream = matches!(target, DataNodeTarget::Follow { .. })
            && self
                .target
                .stream_claim
                .is_some_and(|(_, epoch)| epoch < self.state.epoch);
        if target == self.target.current && !std::mem::take(&mut self.target.reissue) && !new_stream
        {
            return;
        }
        if matches!(self.target.current, DataNodeTarget::Follow { .. }) {
            // Leaving a stream: the floor is final here; write it now.
            self.sync_floor(true);
            // Leaving a join no reading claimed: the data node may have
            // linked up and acknowledged there while every read failed (a
            // kevy replica loading the snapshot, simulator kevy seed 23),
            // as unknown as after an elector restart (§6.10).
            if self.unclaimed_join().is_some() && !self.data.inherited_join {
                tracing::info!(
                    joining = self.state.joining,
                    "leaving a join no reading claimed: later readings in another stream count in the joined epoch"
                );
                self.data.inherited_join = true;
            }
        }
        if self.target.current.writable() && !target.fences() && !target.writable() {
            // From writable straight to following a new primary: the
            // follow waits for the new epoch to be durable, but writes
            // must stop now (§5.2.1), even if that persist never lands.
            self.target.seq += 1;
            let seq = self.target.seq;
            self.outbox.fence(Fence::Apply {
                seq,
                target: super::FenceTarget::Isolated,
            });
        }
        let joins = match &target {
            DataNodeTarget::Follow { primary, .. } if self.state.epoch > self.state.joining => {
                Some(primary.clone())
            }
            _ => None,
        };
        if let Some(primary) = joins {
            // Durable before the data node is told (the follow below waits
            // for this write): it may link up and acknowledge the new
            // primary's writes before we read it and record the claim, and
            // an elector that dies in between must come back knowing it
            // (§6.10). Whom it joined says whose word can free it (`led`).
            self.state.joining = self.state.epoch;
            self.state.joining_primary = Some(primary);
            // The process it is read as now: only that one, found again
            // after a restart of this elector, can say what it received
            // during the join (§6.10, "A join outlives its elector").
            self.state.joining_process = self
                .data
                .obs
                .process_names
                .first()
                .filter(|_| self.data.obs.reachable)
                .cloned();
            self.data.joining_process_gone = false;
            self.data.inherited_join = false;
            self.outbox.persist();
        }
        if target.writable() && self.state.led.is_none_or(|led| led < self.state.epoch) {
            // Durable before the data node is told (the grant waits for
            // this write; at a win it rides the epoch's own): an OFFER
            // then says truly that this node never started a newer
            // epoch's stream, which is what frees a voter whose unclaimed
            // join of that epoch was ours (§6.10).
            let before = self.state.led.replace(self.state.epoch);
            self.outbox.persist();
            self.led_unconfirmed = Some((self.outbox.persist_seq, before));
        }
        self.target.current = target.clone();
        self.target.seq += 1;
        let seq = self.target.seq;
        self.target.stream_claim = match target {
            DataNodeTarget::Primary | DataNodeTarget::Follow { .. } => {
                Some((seq, self.state.epoch))
            }
            // A primary fenced in its epoch (lease lost, draining for a
            // handover) still serves the stream its promotion started: a
            // claim not yet made stays open. Dropping it left a primary whose
            // switchover began before its promotion was applied at the last
            // epoch's position, so a target that had not joined its stream
            // counted as caught up, was handed the cluster while its kevy
            // still loaded that stream's snapshot, and could not stand
            // (kevy_repromotion, CI 2026-11-29); and any write of the
            // promotion's moment would have been compared across streams.
            DataNodeTarget::FencedPrimary | DataNodeTarget::HandingOver => self
                .target
                .stream_claim
                .filter(|(_, epoch)| *epoch == self.state.epoch),
            _ => None,
        };
        match target.split() {
            Split::Fence(target) => self.outbox.fence(Fence::Apply { seq, target }),
            Split::Grant(target) => self.outbox.push(Action::Apply { seq, target }),
        }
    }

    /// The data node has carried out the current target and been observed
    /// since: its reported position is final for voting and standing.
    pub(super) fn data_settled(&self) -> bool {
        self.data.obs.reachable && self.data.obs.applied_seq >= self.target.seq
    }
}
