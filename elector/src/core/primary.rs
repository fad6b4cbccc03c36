//! The primary's duties: the quorum lease, stepping down when its data node
//! is gone, and planned switchover (docs/protocol.md §6.2, §8).

use super::{Core, Notice, Reason, Switchover};
use crate::protocol::{Message, NodeId, Role};

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
        let me = self.cfg.node_id.as_str();
        let lease = self.cfg.timings.lease_ms();
        let (now, epoch) = (self.now, self.state.epoch);
        let supporters = self
            .peers
            .iter()
            .filter_map(|v| v.last_hb.as_ref())
            .filter(|hb| hb.epoch == epoch && hb.primary.as_deref() == Some(me) && hb.echo > 0)
            .filter(|hb| hb.echo.saturating_add(lease) > now)
            .count();
        let ok = 1 + supporters >= self.cfg.quorum();
        if !ok && !self.fenced_by_lease {
            self.fenced_by_lease = true;
            tracing::warn!(epoch, supporters, "quorum lost: fencing writes");
            self.emit_fence(true, Reason::QuorumLost);
        } else if ok && self.fenced_by_lease {
            self.fenced_by_lease = false;
            let reason = if self.lease_held_once {
                Reason::QuorumRegained
            } else {
                Reason::WonElection
            };
            self.lease_held_once = true;
            tracing::info!(epoch, reason = %reason, "lease held: writes allowed");
            if self.switchover.is_none() {
                self.emit_fence(false, reason);
            }
        } else if ok {
            self.lease_held_once = true;
        }
    }

    fn emit_fence(&mut self, fenced: bool, reason: Reason) {
        self.emit(super::Action::Notify(Notice::FenceChanged {
            fenced,
            epoch: self.state.epoch,
            reason,
        }));
    }

    /// A primary whose data node has been unreachable for `down_after` gives
    /// up the role so a healthy replica can take over (reason data_node_down).
    ///
    /// A data node whose process is gone (connection refused) gets no grace
    /// (§6.8): its replicas would reconnect to whatever starts there next
    /// and copy it, so the primary resigns at once and they detach.
    pub(super) fn check_data_node_on_primary(&mut self) {
        let Some(since) = self.data_down_since else {
            return;
        };
        if !self.obs.gone && self.now.saturating_sub(since) < self.cfg.timings.down_after_ms {
            return;
        }
        self.resign(None, Reason::DataNodeDown);
    }

    /// Gives up the primary role; peers see it in the next heartbeat (role
    /// replica, primary = us) and elect without waiting for `down_after`.
    pub(super) fn resign(&mut self, successor: Option<NodeId>, reason: Reason) {
        self.primary_resigned = Some(successor.clone());
        self.handover_learned_at = self.now;
        self.set_role(Role::Replica, reason);
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

    pub(super) fn on_handover(&mut self, epoch: u64, from: NodeId, to: NodeId) {
        if epoch != self.state.epoch || self.primary.as_deref() != Some(from.as_str()) {
            return;
        }
        tracing::info!(epoch, %from, %to, "primary hands over");
        self.primary_resigned = Some(Some(to));
        self.handover_learned_at = self.now;
        // `maybe_stand` (run next by `evaluate`) starts the target's candidacy.
        self.backoff_until = self.backoff_until.min(self.now);
    }

    pub(super) fn on_switchover_request(&mut self, to: NodeId, timeout_ms: u64) {
        let refuse = |why: &str| Notice::SwitchoverFinished {
            to: to.clone(),
            result: Err(why.to_string()),
        };
        let problem = if self.role != Role::Primary {
            Some("this node is not the primary")
        } else if self.switchover.is_some() {
            Some("a switchover is already in progress")
        } else if to == self.cfg.node_id {
            Some("the target is already the primary")
        } else if !self.cfg.is_member(&to) {
            Some("the target is not a member of this cluster")
        } else if self.fenced_by_lease {
            Some("the primary has lost its quorum")
        } else {
            match self.peers.get(&to) {
                Some(v)
                    if self.peer_alive(v) && v.last_hb.as_ref().is_some_and(|hb| hb.eligible) =>
                {
                    None
                }
                _ => Some("the target is not alive or not eligible"),
            }
        };
        if let Some(why) = problem {
            self.emit(super::Action::Notify(refuse(why)));
            return;
        }
        tracing::info!(%to, timeout_ms, "switchover: fencing writes and waiting for the target");
        self.switchover = Some(Switchover {
            to,
            deadline: self.now + timeout_ms,
            draining_fence_seq: Some(self.target_seq + 1),
        });
        self.sync_data_target();
        self.emit_fence(true, Reason::Switchover);
    }

    /// Draining: once the fence is in effect and the target's heartbeat shows
    /// an offset at least ours, resign in its favour (protocol §8).
    pub(super) fn progress_switchover(&mut self) {
        let Some(sw) = self.switchover.as_ref() else {
            return;
        };
        let Some(fence_seq) = sw.draining_fence_seq else {
            return;
        };
        if self.obs.applied_seq < fence_seq || !self.obs.reachable {
            return;
        }
        let mine = self.position();
        let caught_up = self
            .peers
            .get(&sw.to)
            .and_then(|v| v.last_hb.as_ref())
            .is_some_and(|hb| (hb.data_epoch, hb.offset) >= mine);
        if !caught_up {
            return;
        }
        let to = sw.to.clone();
        tracing::info!(%to, offset = mine.1, "switchover: target caught up, handing over");
        if let Some(sw) = self.switchover.as_mut() {
            sw.draining_fence_seq = None;
        }
        self.resign(Some(to), Reason::Switchover);
    }

    /// A switchover that does not finish in time rolls back: while still
    /// draining the primary simply lifts its fence; after resigning, the
    /// normal election (any node, this one included) takes over.
    pub(super) fn check_switchover_deadline(&mut self) {
        let Some(sw) = self.switchover.as_ref() else {
            return;
        };
        if self.now < sw.deadline {
            return;
        }
        let to = sw.to.clone();
        let draining = sw.draining_fence_seq.is_some();
        self.switchover = None;
        let why = if draining && self.role == Role::Primary {
            if !self.fenced_by_lease {
                self.emit_fence(false, Reason::SwitchoverRollback);
            }
            "the target did not catch up in time; the primary resumed writes"
        } else {
            "the handover election did not complete in time; a regular election follows"
        };
        tracing::warn!(%to, why, "switchover rolled back");
        self.emit(super::Action::Notify(Notice::SwitchoverFinished {
            to,
            result: Err(why.to_string()),
        }));
    }

    /// Called when a new primary is learned: ends a switchover we started.
    pub(super) fn finish_switchover_on_new_primary(&mut self, primary: &str, epoch: u64) {
        let Some(sw) = self.switchover.take() else {
            return;
        };
        let result = if sw.to == primary {
            Ok(epoch)
        } else {
            Err(format!("{primary} was elected instead of {}", sw.to))
        };
        self.emit(super::Action::Notify(Notice::SwitchoverFinished {
            to: sw.to,
            result,
        }));
    }
}
