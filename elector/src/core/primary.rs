//! The primary's duties: the quorum lease, stepping down when its data node
//! is gone, and planned switchover (docs/protocol.md §6.2, §6.7, §8).

use super::output::Fence;
use super::role::{RoleState, Switchover};
use super::types::{Millis, Notice, Reason, SwitchoverFailure};
use super::Core;
use crate::protocol::{Message, NodeId};

impl Core {
    /// Quorum lease (protocol §6.2): the primary accepts writes only while a
    /// majority (itself included) has echoed one of its heartbeat stamps
    /// within the lease. Echoes prove the peers hear *us* (a one-way
    /// partition that only lets their messages in does not count), and a
    /// peer that echoed a stamp refuses other candidates for longer than the
    /// lease lasts.
    pub(super) fn check_lease(&mut self) {
        if self.cfg.faults.no_lease_fencing {
            return;
        }
        let (now, epoch) = (self.now, self.state.epoch);
        let supporters = self.lease_ends().filter(|end| *end > now).count();
        let held = self.quorum().is_reached(1 + supporters);
        let Some(l) = self.role.leadership_mut() else {
            return;
        };
        if !held && !l.fenced_by_lease {
            l.fenced_by_lease = true;
            l.fenced_since = Some(now);
            tracing::warn!(epoch, supporters, "quorum lost: fencing writes");
            self.outbox.fence(Fence::Notify {
                epoch,
                reason: Reason::QuorumLost,
            });
        } else if held && l.fenced_by_lease {
            l.fenced_by_lease = false;
            l.fenced_since = None;
            // An operator's forced candidacy (§6.10) is done once the node
            // serves; until then (a failed persist, a lost lease) it stands.
            self.data.forced_at = None;
            let reason = if l.lease_held_once {
                Reason::QuorumRegained
            } else {
                l.won_as
            };
            l.lease_held_once = true;
            tracing::info!(epoch, reason = %reason, "lease held: writes allowed");
            if l.switchover.is_none() {
                self.notify(Notice::Unfenced { epoch, reason });
            }
        } else if held {
            l.lease_held_once = true;
        }
        self.give_up_a_lease_lost_too_long();
    }

    /// A primary fenced for [`Timings::fenced_give_up_ms`] resigns (§6.9).
    /// Its voters withdrew long ago and froze their echoes, so its lease
    /// cannot come back; if no other member can stand (below its floor),
    /// holding on would leave the cluster without a primary for good (the
    /// simulator found it, kevy seeds 1566 and 2024: a fenced primary, a
    /// replica below its floor and a witness, after the final heal). Once
    /// resigned it stands like any node, with its proven position.
    fn give_up_a_lease_lost_too_long(&mut self) {
        if self.cfg.faults.hold_a_lost_lease {
            return;
        }
        let give_up = self.cfg.timings.fenced_give_up_ms();
        let Some(l) = self.role.leadership() else {
            return;
        };
        let too_long = l
            .fenced_since
            .is_some_and(|s| self.now.saturating_sub(s) >= give_up);
        if !l.fenced_by_lease || !too_long || l.switchover.is_some() {
            return;
        }
        tracing::warn!(
            epoch = self.state.epoch,
            fenced_ms = give_up,
            "fenced by a lost lease for too long: resigning to stand again"
        );
        self.resign(None, Reason::FencedTooLong);
    }

    /// When each peer's latest echo of our stamps stops counting for the
    /// lease (§6.2): echo + lease, for the peers that echo us in our epoch.
    fn lease_ends(&self) -> impl Iterator<Item = Millis> + '_ {
        let me = self.cfg.node_id.as_str();
        let (lease, epoch) = (self.cfg.timings.lease_ms(), self.state.epoch);
        self.peers
            .iter()
            .filter_map(|v| v.last_hb.as_ref())
            .filter(move |hb| hb.epoch == epoch && hb.primary.as_deref() == Some(me) && hb.echo > 0)
            .map(move |hb| hb.echo.saturating_add(lease))
    }

    /// Until when, on this node's clock, the data node may stay writable
    /// without hearing more echoes: the moment the lease this primary holds
    /// ends (§6.2). `None` while the data node's target is not writable, or
    /// in a one-member cluster, which has no lease. The watchdog fences by
    /// it when the elector goes silent before that moment (§6.4.1): a
    /// primary cut off from its quorum and then frozen must not stay
    /// writable for a whole lease after the freeze.
    pub fn writable_until(&self) -> Option<Millis> {
        if !self.target.current.writable() || self.cfg.faults.no_lease_fencing {
            return None;
        }
        let needed = self.quorum().size().checked_sub(1).filter(|n| *n > 0)?;
        let mut ends: Vec<Millis> = self.lease_ends().collect();
        ends.sort_unstable_by(|a, b| b.cmp(a));
        ends.get(needed - 1).copied()
    }

    /// A primary whose data node has been unreachable for `down_after` gives
    /// up the role so a healthy replica can take over (reason data_node_down).
    ///
    /// A data node whose process is gone (connection refused) gets no grace
    /// (§6.8): its replicas would reconnect to whatever starts there next
    /// and copy it, so the primary resigns at once and they detach.
    pub(super) fn check_data_node_on_primary(&mut self) {
        let Some(since) = self.data.down_since else {
            return;
        };
        if !self.data.obs.gone && self.now.saturating_sub(since) < self.cfg.timings.down_after_ms {
            return;
        }
        self.resign(None, Reason::DataNodeDown);
    }

    /// Gives up the primary role; peers see it in the next heartbeat (role
    /// replica, primary = us) and elect without waiting for `down_after`.
    pub(super) fn resign(&mut self, successor: Option<NodeId>, reason: Reason) {
        self.primary.resigned = Some(successor.clone());
        self.primary.handover_learned_at = self.now;
        self.become_replica(reason);
        if let Some(to) = successor {
            self.broadcast(Message::Handover {
                epoch: self.state.epoch,
                from: self.cfg.node_id.clone(),
                to,
            });
        }
        // Tell peers at once rather than at the next heartbeat tick.
        self.next_hb_at = self.now;
    }

    /// While its switchover lasts, a primary that resigned for a successor
    /// repeats the HANDOVER with every heartbeat: one lost, or overtaken by
    /// the heartbeat that shows the resignation, would otherwise leave the
    /// voters to an ordinary election that may pick another node (§8; the
    /// preemption simulation found it, seed 740).
    pub(super) fn repeat_handover(&mut self) {
        let Some(Some(to)) = self.primary.resigned.clone() else {
            return;
        };
        if self.primary.is(&self.cfg.node_id) && self.role.switchover().is_some() {
            self.broadcast(Message::Handover {
                epoch: self.state.epoch,
                from: self.cfg.node_id.clone(),
                to,
            });
        }
    }

    pub(super) fn on_handover(&mut self, epoch: u64, from: NodeId, to: NodeId) {
        if epoch != self.state.epoch || !self.primary.is(&from) {
            return;
        }
        if self.primary.resigned.as_ref() == Some(&Some(to.clone())) {
            return; // a repeat: the deference still counts from the first
        }
        tracing::info!(epoch, %from, %to, "primary hands over");
        self.primary.resigned = Some(Some(to));
        self.primary.handover_learned_at = self.now;
        // `maybe_stand` (run next by `evaluate`) starts the target's candidacy.
        self.backoff_until = self.backoff_until.min(self.now);
    }

    /// Why a switchover to `to` cannot start now, if it cannot.
    pub(super) fn switchover_refusal(&self, to: &str) -> Option<SwitchoverFailure> {
        let Some(l) = self.role.leadership() else {
            return Some(SwitchoverFailure::NotPrimary);
        };
        if l.switchover.is_some() {
            Some(SwitchoverFailure::InProgress)
        } else if self.is_me(to) {
            Some(SwitchoverFailure::TargetIsPrimary)
        } else if !self.cfg.is_member(to) {
            Some(SwitchoverFailure::NotMember)
        } else if l.fenced_by_lease {
            Some(SwitchoverFailure::QuorumLost)
        } else if !self.data_settled() {
            // Elected a moment ago: its data node may not be a primary yet
            // (kevy's promotion hold, an apply in flight), and a handover
            // cannot drain what is not serving; the target would wait for
            // a primary that never appears until the timeout (CI,
            // tests/kevy_repromotion.rs: a switchover asked 10 ms after
            // the election).
            Some(SwitchoverFailure::DataNodeNotServing)
        } else {
            match self.peers.get(to) {
                Some(v)
                    if self.peer_alive(v) && v.last_hb.as_ref().is_some_and(|hb| hb.eligible) =>
                {
                    None
                }
                _ => Some(SwitchoverFailure::TargetNotEligible),
            }
        }
    }

    pub(super) fn on_switchover_request(&mut self, to: NodeId, timeout_ms: u64) {
        if let Some(why) = self.switchover_refusal(&to) {
            self.notify(Notice::SwitchoverFinished {
                to,
                result: Err(why),
            });
            return;
        }
        self.begin_switchover(to, timeout_ms, Reason::Switchover);
    }

    /// Starts draining for a handover to `to` (§8 step 1); `reason` is
    /// `switchover` or `preemption` (§8.1). The caller has checked
    /// [`Core::switchover_refusal`].
    pub(super) fn begin_switchover(&mut self, to: NodeId, timeout_ms: u64, reason: Reason) {
        tracing::info!(%to, timeout_ms, reason = %reason, "switchover: fencing writes and waiting for the target");
        let switchover = Switchover {
            to,
            deadline: self.now + timeout_ms,
            draining_fence_seq: Some(self.target.seq + 1),
            fence_applied_at: None,
            reason,
        };
        if let Some(l) = self.role.leadership_mut() {
            l.switchover = Some(switchover);
        }
        self.sync_data_target();
        self.outbox.fence(Fence::Notify {
            epoch: self.state.epoch,
            reason,
        });
    }

    /// Draining: once the fence is in effect and a heartbeat of the target
    /// that arrived since shows an offset at least ours, resign in its
    /// favour (protocol §8). A heartbeat from before the fence is not
    /// enough: a target cut off since then would be handed a cluster it
    /// cannot lead, on numbers it reported before the last writes (chaos
    /// seed 2126, 5 nodes: a switchover to a node behind a bridge).
    pub(super) fn progress_switchover(&mut self) {
        let now = self.now;
        let applied = self.data.obs.reachable.then_some(self.data.obs.applied_seq);
        let Some(sw) = self
            .role
            .leadership_mut()
            .and_then(|l| l.switchover.as_mut())
        else {
            return;
        };
        let Some(fence_seq) = sw.draining_fence_seq else {
            return;
        };
        if applied.is_none_or(|seq| seq < fence_seq) {
            return;
        }
        let fence_applied_at = *sw.fence_applied_at.get_or_insert(now);
        let (to, reason) = (sw.to.clone(), sw.reason);
        let mine = self.position();
        let caught_up = self
            .peers
            .get(&to)
            .filter(|v| v.last_hb_at.is_some_and(|at| at >= fence_applied_at))
            .and_then(|v| v.last_hb.as_ref())
            .is_some_and(|hb| (hb.data_epoch, hb.offset) >= mine);
        if !caught_up {
            return;
        }
        tracing::info!(%to, offset = mine.1, reason = %reason, "switchover: target caught up, handing over");
        if let Some(sw) = self.role.switchover_mut() {
            sw.draining_fence_seq = None;
        }
        self.resign(Some(to), reason);
    }

    /// A switchover that does not finish in time rolls back: while still
    /// draining the primary simply lifts its fence; after resigning, the
    /// normal election (any node, this one included) takes over.
    pub(super) fn check_switchover_deadline(&mut self) {
        if self
            .role
            .switchover()
            .is_none_or(|sw| self.now < sw.deadline)
        {
            return;
        }
        let Some(sw) = self.role.take_switchover() else {
            return;
        };
        let draining = sw.draining_fence_seq.is_some();
        let why = match &self.role {
            RoleState::Primary(l) if draining => {
                if !l.fenced_by_lease {
                    self.notify(Notice::Unfenced {
                        epoch: self.state.epoch,
                        reason: Reason::SwitchoverRollback,
                    });
                }
                SwitchoverFailure::DidNotCatchUp
            }
            _ => SwitchoverFailure::HandoverTimedOut,
        };
        tracing::warn!(to = %sw.to, why = %why, "switchover rolled back");
        self.notify(Notice::SwitchoverFinished {
            to: sw.to,
            result: Err(why),
        });
    }

    /// Called when a new primary is learned: ends a switchover we started.
    pub(super) fn finish_switchover_on_new_primary(&mut self, primary: &str, epoch: u64) {
        let Some(sw) = self.role.take_switchover() else {
            return;
        };
        let result = if sw.to == primary {
            Ok(epoch)
        } else {
            Err(SwitchoverFailure::OtherElected {
                elected: primary.to_string(),
                to: sw.to.clone(),
            })
        };
        self.notify(Notice::SwitchoverFinished { to: sw.to, result });
    }
}
