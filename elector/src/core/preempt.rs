//! Priority preemption (docs/protocol.md §8.1, keepalived's `preempt`): a
//! primary hands over to a member of higher priority once that member has
//! been ready for `preempt.delay_ms`, through the planned switchover (§8),
//! never through an election, so no acknowledged write is lost.
//!
//! "Ready" is what the primary can see in the member's latest heartbeat:
//! alive, eligible (data node reachable, lag within `max_lag`), following
//! this primary in this epoch and vouching for its lease (an echo), in this
//! primary's replication stream (`data_epoch`), and not fenced by a lease
//! of its own. The wait restarts whenever one of these breaks and after
//! every preemption that did not complete, so a member that keeps failing
//! never drags the primary role back and forth.

use super::role::Leadership;
use super::types::{Millis, Reason};
use super::Core;
use crate::protocol::NodeId;

impl Core {
    /// Tracks which members of higher priority are ready and, when the best
    /// of them has been ready for the delay, starts the handover.
    pub(super) fn check_preemption(&mut self) {
        if !self.cfg.preempt.enabled {
            return;
        }
        let ready = self.preempt_candidates();
        let (now, delay) = (self.now, self.cfg.preempt.delay_ms);
        let Some(l) = self.role.leadership_mut() else {
            return;
        };
        if l.switchover.is_some() {
            return;
        }
        if l.fenced_by_lease || !l.lease_held_once {
            // Not a primary that could hand over now; whoever waited, waits
            // again once the lease is back.
            l.preempt_ready.clear();
            return;
        }
        l.preempt_ready
            .retain(|id, _| ready.iter().any(|(r, _)| r == id));
        for (id, _) in &ready {
            l.preempt_ready.entry(id.clone()).or_insert(now);
        }
        let Some(to) = best_due(l, &ready, now, delay) else {
            return;
        };
        if self.switchover_refusal(&to).is_some() {
            return;
        }
        if let Some(l) = self.role.leadership_mut() {
            l.preempt_ready.clear();
        }
        tracing::info!(%to, delay, "preemption: a member of higher priority is ready");
        // The handover has as long as an operator's default switchover.
        let timeout = self.cfg.timings.down_after_ms.max(delay).max(1_000);
        self.begin_switchover(to, timeout, Reason::Preemption);
    }

    /// When the next waiting member's delay ends (for `next_wakeup`).
    pub(super) fn preemption_due_at(&self) -> Option<Millis> {
        if !self.cfg.preempt.enabled {
            return None;
        }
        let l = self.role.leadership()?;
        l.preempt_ready
            .values()
            .min()
            .map(|since| since.saturating_add(self.cfg.preempt.delay_ms))
    }

    /// Members of higher priority than this node that are ready now, with
    /// their priority (§8.1).
    fn preempt_candidates(&self) -> Vec<(NodeId, u64)> {
        let (epoch, data_epoch) = (self.state.epoch, self.state.data_epoch);
        let mine = u64::from(self.cfg.priority);
        let me = self.cfg.node_id.as_str();
        self.peers
            .iter_named()
            .filter(|(_, v)| self.peer_alive(v))
            .filter_map(|(id, v)| Some((id, v.last_hb.as_ref()?)))
            .filter(|(_, hb)| {
                hb.priority > mine
                    && hb.eligible
                    && !hb.lease_lost
                    && hb.epoch == epoch
                    && hb.primary.as_deref() == Some(me)
                    && hb.echo > 0
                    && hb.data_epoch == data_epoch
            })
            .map(|(id, hb)| (id.to_string(), hb.priority))
            .collect()
    }
}

/// The ready member whose delay is over with the highest priority (ties:
/// the lowest id, as candidate selection breaks them, §4.2).
fn best_due(l: &Leadership, ready: &[(NodeId, u64)], now: Millis, delay: u64) -> Option<NodeId> {
    ready
        .iter()
        .filter(|(id, _)| {
            l.preempt_ready
                .get(id)
                .is_some_and(|since| now.saturating_sub(*since) >= delay)
        })
        .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(&a.0)))
        .map(|(id, _)| id.clone())
}
