//! Heartbeats, announcements and epochs: how a node learns and follows the
//! primary of the newest committed epoch (docs/protocol.md §3.1, §5.3, §6.2).

use super::role::RoleState;
use super::types::{Notice, Reason};
use super::Core;
use crate::protocol::{Heartbeat, Message, NodeId, Role};

impl Core {
    pub(super) fn on_heartbeat(&mut self, from: NodeId, hb: Heartbeat) {
        self.max_seen_epoch = self.max_seen_epoch.max(hb.max_epoch).max(hb.epoch);
        self.peers.record_heartbeat(&from, hb.clone(), self.now);
        self.note_void_join(&from, &hb);
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
        if self.primary.is(&from) {
            if hb.role == Role::Primary {
                let fresh_ms = self.cfg.timings.voter_fresh_ms();
                if self.primary.resigned.is_none()
                    && !self.primary.stays_fenced(hb.lease_lost, self.now, fresh_ms)
                {
                    self.primary.heard_at = Some(self.now);
                    self.primary.stamp = self.primary.stamp.max(hb.stamp);
                }
            } else if self.primary.resigned.is_none() {
                // Our primary says it no longer is one: it resigned.
                self.primary.resigned = Some(None);
            }
        } else if self.primary.id.is_none()
            && hb.role == Role::Primary
            && hb.primary.as_deref() == Some(&from)
        {
            // We restarted into epoch `hb.epoch` without knowing its primary.
            self.learn_primary(hb.epoch, from, Reason::NewerEpoch);
        } else if hb.primary.as_deref() == Some(self.cfg.node_id.as_str())
            && self.role() != Role::Primary
            && self.primary.id.is_none()
        {
            // Peers still think we are the primary of this epoch, but we lost
            // the role in a restart: record it as resigned so nobody waits.
            self.primary.id = Some(self.cfg.node_id.clone());
            self.primary.resigned = Some(None);
        }
    }

    pub(super) fn on_announce(&mut self, from: NodeId, epoch: u64, primary: NodeId, stamp: u64) {
        self.max_seen_epoch = self.max_seen_epoch.max(epoch);
        if primary != from || !self.cfg.is_member(&primary) {
            return;
        }
        if epoch > self.state.epoch {
            let reason = if self.role() == Role::Candidate {
                Reason::LostElection
            } else {
                Reason::NewerEpoch
            };
            self.learn_primary(epoch, primary, reason);
            self.primary.stamp = stamp;
            // Echo the new primary's stamp at once: its lease starts with it.
            self.next_hb_at = self.now;
        } else if epoch == self.state.epoch
            && self.primary.is(&primary)
            && self.primary.resigned.is_none()
        {
            self.primary.heard_at = Some(self.now);
            self.primary.stamp = self.primary.stamp.max(stamp);
        }
    }

    /// Adopts `primary` as the primary of committed `epoch`.
    pub(super) fn learn_primary(&mut self, epoch: u64, primary: NodeId, reason: Reason) {
        self.enter_epoch(epoch);
        // A primary elected elsewhere makes an operator's forced candidacy
        // here moot (§6.10).
        self.data.forced_at = None;
        self.primary.heard_at = Some(self.now);
        self.finish_switchover_on_new_primary(&primary, epoch);
        let me = self.is_me(&primary);
        self.primary.id = Some(primary.clone());
        if me {
            // Only possible after a restart that lost the role: not ours.
            self.primary.resigned = Some(None);
        }
        if self.role() != Role::Replica {
            self.become_replica(reason);
        }
        if !me {
            self.notify(Notice::Following {
                primary,
                epoch,
                reason,
            });
        }
    }

    /// Moves to committed `epoch` (persisting it if it is newer; equal epochs
    /// happen after a restart, when we learn the primary of the epoch we
    /// already had on disk) and forgets what belonged to the old one: a
    /// resignation, the old primary's stamp, our lease fence. Callers then
    /// become replicas, which ends any candidacy.
    pub(super) fn enter_epoch(&mut self, epoch: u64) {
        if epoch > self.state.epoch {
            self.state.epoch = epoch;
            self.outbox.persist();
        }
        self.max_seen_epoch = self.max_seen_epoch.max(epoch);
        if let RoleState::Primary(l) = &mut self.role {
            l.fenced_by_lease = false;
        }
        self.primary.new_epoch();
    }

    /// A peer is in a newer committed epoch but does not know its primary
    /// (it restarted since). Our own epoch is over all the same: a primary of
    /// an older epoch that stayed would be deferred to as the best-ranked
    /// node and never stand, while the others wait for it (found by the
    /// simulator, seed 3152). Join the epoch as a replica with no known
    /// primary, as a restarted node does; the ordinary election follows.
    pub(super) fn adopt_epoch_without_primary(&mut self, epoch: u64) {
        self.enter_epoch(epoch);
        self.primary.id = None;
        self.primary.heard_at = None;
        if let Some(sw) = self.role.take_switchover() {
            self.notify(Notice::SwitchoverFinished {
                to: sw.to,
                result: Err(super::SwitchoverFailure::EpochBeganElsewhere { epoch }),
            });
        }
        if self.role() != Role::Replica {
            self.become_replica(Reason::NewerEpoch);
        }
    }

    pub(super) fn broadcast_heartbeat(&mut self) {
        let hb = Heartbeat {
            epoch: self.state.epoch,
            node_id: self.cfg.node_id.clone(),
            role: self.role(),
            offset: self.my_offset(),
            max_epoch: self.state.voted_epoch.max(self.state.epoch),
            primary: self.primary.id.clone(),
            eligible: self.eligible() && !self.resigned_myself(),
            fenced: self.fenced(),
            lease_lost: self.role.fenced_by_lease(),
            data_epoch: self.state.data_epoch,
            stamp: self.now,
            echo: self.echo(),
            // Announced only with preemption on (§8.1), so that a cluster
            // that does not use it keeps the heartbeat older electors read
            // and can be upgraded one node at a time.
            priority: if self.cfg.preempt.enabled {
                u64::from(self.cfg.priority)
            } else {
                0
            },
            floor: self.state.floor.map(|f| f.pair()),
            // In memory `led` is never below what is durable (a raise is
            // undone only when its write fails), so this never says more
            // than the disk.
            unled: self.state.led.is_some_and(|led| led < self.state.epoch),
        };
        self.broadcast(Message::Hb(hb));
        self.repeat_handover();
    }

    /// The primary stamp we vouch for: only while we follow a live primary
    /// and no vote of ours in a later epoch can still elect a successor (a
    /// candidacy lasts `election_timeout` at most, counted from before our
    /// vote), so that vote must not also extend the old primary's lease.
    fn echo(&self) -> u64 {
        let following = self.role() == Role::Replica
            && self.primary.resigned.is_none()
            && self.primary.id.as_deref().is_some_and(|p| !self.is_me(p))
            && !self.vote_pending();
        if following {
            self.primary.stamp
        } else {
            0
        }
    }

    /// We heard our (other) primary recently enough to vouch for it.
    pub(super) fn primary_fresh(&self) -> bool {
        self.primary
            .heard_within(self.now, self.cfg.timings.voter_fresh_ms())
    }

    /// We voted in an epoch above the committed one and that election may
    /// still produce a primary (a candidacy lasts at most `election_timeout`,
    /// counted from before our vote).
    pub(super) fn vote_pending(&self) -> bool {
        let t = &self.cfg.timings;
        self.state.voted_epoch > self.state.epoch
            && self.now < self.voted_at + t.election_timeout_ms + t.hb_interval_ms
    }

    /// We were the primary of our epoch and gave the role up.
    pub(super) fn resigned_myself(&self) -> bool {
        self.primary.is(&self.cfg.node_id) && self.primary.resigned.is_some()
    }
}
