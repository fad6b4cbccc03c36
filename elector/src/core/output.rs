//! What one step of the core asks the shell to do, shaped by the persist rule
//! (docs/protocol.md §5.2, §5.2.1).
//!
//! The rule used to live inside one function that held "everything after a
//! `Persist`" and let fences slip through by a pattern match; a fence once
//! ended up waiting behind a failed write that way. Here the rule is the
//! type: an [`Output`] has a field for what takes authority away (leaves
//! first, never waits), one for what may leave now, the durable write, and
//! what waits for it. A gated [`Action`] cannot carry a fence at all, because
//! its data-node target is a [`GrantTarget`]:
//!
//! ```compile_fail
//! use elector::core::{Action, FenceTarget};
//! // A fence cannot be put behind a persist: `Action::Apply` takes a grant.
//! let _ = Action::Apply { seq: 1, target: FenceTarget::Isolated };
//! ```

use super::types::{DataNodeTarget, Notice, PersistedState, Reason};
use crate::protocol::{Message, NodeId};
use std::collections::VecDeque;

/// A data-node target that only takes authority away: writes refused, no new
/// upstream. Never waits for a durable write (§5.2.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FenceTarget {
    FencedPrimary,
    HandingOver,
    Isolated,
}

/// A data-node target that gives authority: writes, or a new upstream whose
/// stream becomes part of the durable state (§4.3). Recorded on disk first.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum GrantTarget {
    Primary,
    Follow {
        primary: NodeId,
        primary_addr: String,
    },
}

impl From<FenceTarget> for DataNodeTarget {
    fn from(t: FenceTarget) -> Self {
        match t {
            FenceTarget::FencedPrimary => DataNodeTarget::FencedPrimary,
            FenceTarget::HandingOver => DataNodeTarget::HandingOver,
            FenceTarget::Isolated => DataNodeTarget::Isolated,
        }
    }
}

impl From<GrantTarget> for DataNodeTarget {
    fn from(t: GrantTarget) -> Self {
        match t {
            GrantTarget::Primary => DataNodeTarget::Primary,
            GrantTarget::Follow {
                primary,
                primary_addr,
            } => DataNodeTarget::Follow {
                primary,
                primary_addr,
            },
        }
    }
}

/// A target is either a fence or a grant; nothing else.
pub(crate) enum Split {
    Fence(FenceTarget),
    Grant(GrantTarget),
}

impl DataNodeTarget {
    pub(crate) fn split(self) -> Split {
        match self {
            DataNodeTarget::FencedPrimary => Split::Fence(FenceTarget::FencedPrimary),
            DataNodeTarget::HandingOver => Split::Fence(FenceTarget::HandingOver),
            DataNodeTarget::Isolated => Split::Fence(FenceTarget::Isolated),
            DataNodeTarget::Primary => Split::Grant(GrantTarget::Primary),
            DataNodeTarget::Follow {
                primary,
                primary_addr,
            } => Split::Grant(GrantTarget::Follow {
                primary,
                primary_addr,
            }),
        }
    }
}

/// Something that takes authority away, carried out before anything else.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Fence {
    /// Drive the data node to `target` (report success via `applied_seq`).
    Apply { seq: u64, target: FenceTarget },
    /// Writes stopped while this node stays primary (operators, `on_fence`).
    Notify { epoch: u64, reason: Reason },
}

/// An output that may have to wait for a durable write.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Action {
    Send {
        to: NodeId,
        msg: Message,
    },
    /// Drive the data node to `target` (report success via `applied_seq`).
    Apply {
        seq: u64,
        target: GrantTarget,
    },
    Notify(Notice),
}

/// Write `state` durably, then report [`super::Event::Persisted`] for `seq`.
/// Writes are carried out one at a time, in `seq` order.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Persist {
    pub seq: u64,
    pub state: PersistedState,
    /// Later actions wait for this write ([`Gated`]). A write that only
    /// records a risen floor (§6.10) gates nothing: no message depends on
    /// it, and a failure is counted and retried rather than silencing the
    /// node; the shell must not drop held actions when it fails.
    pub gates: bool,
}

/// Actions that leave only once write `after` (and every earlier one) is
/// durable; dropped if a write fails.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Gated {
    pub(crate) after: u64,
    pub(crate) actions: Vec<Action>,
}

/// One step's outputs, in the order the shell carries them out: `fences`,
/// then `now`, then `persist`; `gated` is held (see [`Gate`]).
#[must_use]
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Output {
    pub fences: Vec<Fence>,
    pub now: Vec<Action>,
    pub persist: Option<Persist>,
    pub gated: Option<Gated>,
}

/// The shell's side of the gate: holds gated actions until their write is
/// durable. The tokio shell and the simulator both use it, so they release
/// in the same order.
#[derive(Debug, Default, Clone, PartialEq, Eq, Hash)]
pub struct Gate {
    held: VecDeque<Gated>,
}

impl Gate {
    pub fn hold(&mut self, gated: Option<Gated>) {
        if let Some(g) = gated.filter(|g| !g.actions.is_empty()) {
            self.held.push_back(g);
        }
    }

    /// Write `durable` is done: what waited for it (or an earlier one), in order.
    pub fn release(&mut self, durable: u64) -> Vec<Action> {
        let mut out = Vec::new();
        while self.held.front().is_some_and(|g| g.after <= durable) {
            out.extend(self.held.pop_front().into_iter().flat_map(|g| g.actions));
        }
        out
    }

    /// A write failed: nothing that waited may happen.
    pub fn drop_all(&mut self) {
        self.held.clear();
    }

    /// Actions held (for tests).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.held.iter().map(|g| g.actions.len()).sum()
    }
}

/// The core's side: sorts each output into its place as it is produced.
#[derive(Debug, Default, Clone, PartialEq, Eq, Hash)]
pub(super) struct Outbox {
    out: Output,
    /// The newest write asked for (possibly in an earlier step).
    pub(super) persist_seq: u64,
    /// The newest write that later actions wait for.
    pub(super) gate_seq: u64,
    /// This step records a risen floor only: a write that gates nothing.
    background: bool,
    /// Background writes not yet durable (their failures are not the
    /// protocol's).
    background_pending: Vec<u64>,
    /// The newest write known durable.
    pub(super) durable_seq: u64,
    /// This step changed the state: one write at the end carries it all.
    dirty: bool,
    /// A grant target is waiting behind this write; if the write fails the
    /// target never reaches the adapter and must be issued again.
    pub(super) grant_waiting: Option<u64>,
    /// This step gated a grant that no fence has overtaken since.
    step_gated_grant: bool,
    /// After a failed write: when to try persisting again.
    pub(super) retry_at: Option<u64>,
    /// The model checker's control (issue 39, `Faults::fences_wait_for_persist`):
    /// a fence issued while a write is pending waits for that write, the
    /// defect §5.2.1 removed. Never set outside tests.
    pub(super) fence_waits: bool,
    /// Fences held under that switch: (the write they wait for, the fence).
    waiting_fences: Vec<(u64, Fence)>,
}

impl Outbox {
    fn write_pending(&self) -> bool {
        self.dirty || self.gate_seq > self.durable_seq
    }

    /// Queues a write that gates nothing (a risen floor, §6.10): it rides
    /// along with a gating write of the same step if there is one.
    pub(super) fn persist_background(&mut self) {
        self.background = true;
    }

    /// Whether write `seq` is a background one not yet durable (tests
    /// play the shell, which knows it from the write itself).
    #[cfg(test)]
    pub(crate) fn background_pending_has(&self, seq: u64) -> bool {
        self.background_pending.contains(&seq)
    }

    /// Whether write `seq` was a background one (and forget it).
    pub(super) fn take_background(&mut self, seq: u64) -> bool {
        let found = self.background_pending.contains(&seq);
        self.background_pending.retain(|s| *s != seq);
        found
    }

    /// This step already writes the state (anything else changed rides along).
    pub(super) fn writing(&self) -> bool {
        self.dirty
    }

    /// Queues a durable write of the state as it is at the end of the step;
    /// every later action of this step waits for it.
    pub(super) fn persist(&mut self) {
        if !self.dirty {
            self.dirty = true;
            self.persist_seq += 1;
            self.gate_seq = self.persist_seq;
        }
    }

    pub(super) fn fence(&mut self, fence: Fence) {
        if matches!(fence, Fence::Apply { .. }) {
            // A fence supersedes any grant still waiting: the shell applies
            // targets in sequence order only, so the older grant is ignored.
            self.grant_waiting = None;
            self.step_gated_grant = false;
        }
        if self.fence_waits && self.write_pending() {
            let after = if self.dirty {
                self.persist_seq
            } else {
                self.gate_seq
            };
            self.waiting_fences.push((after, fence));
            return;
        }
        self.out.fences.push(fence);
    }

    pub(super) fn push(&mut self, action: Action) {
        if !self.write_pending() {
            self.out.now.push(action);
            return;
        }
        if matches!(action, Action::Apply { .. }) {
            self.step_gated_grant = true;
        }
        let after = self.persist_seq;
        self.out
            .gated
            .get_or_insert_with(|| Gated {
                after,
                actions: Vec::new(),
            })
            .actions
            .push(action);
    }

    /// Write `seq` is durable.
    pub(super) fn persisted(&mut self, seq: u64) {
        self.durable_seq = self.durable_seq.max(seq);
        self.background_pending.retain(|s| *s > seq);
        if self.grant_waiting.is_some_and(|w| w <= self.durable_seq) {
            self.grant_waiting = None;
        }
        let (durable, out) = (self.durable_seq, &mut self.out);
        self.waiting_fences.retain(|(after, fence)| {
            let ready = *after <= durable;
            if ready {
                out.fences.push(fence.clone());
            }
            !ready
        });
    }

    /// Ends the step: the outputs, with the write of `state` if it changed.
    pub(super) fn take(&mut self, state: &PersistedState) -> Output {
        let background = std::mem::take(&mut self.background);
        if std::mem::take(&mut self.dirty) {
            self.out.persist = Some(Persist {
                seq: self.persist_seq,
                state: state.clone(),
                gates: true,
            });
        } else if background {
            self.persist_seq += 1;
            self.background_pending.push(self.persist_seq);
            self.out.persist = Some(Persist {
                seq: self.persist_seq,
                state: state.clone(),
                gates: false,
            });
        }
        if let Some(g) = self.out.gated.as_mut() {
            // Everything gated in this step waits for the newest write.
            g.after = self.persist_seq;
        }
        if std::mem::take(&mut self.step_gated_grant) {
            self.grant_waiting = Some(self.persist_seq);
        }
        std::mem::take(&mut self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send(to: &str) -> Action {
        Action::Send {
            to: to.into(),
            msg: Message::Hello {
                node_id: "n1".into(),
                fingerprint: None,
            },
        }
    }

    #[test]
    fn with_nothing_to_write_every_action_leaves_now() {
        let mut o = Outbox::default();
        o.push(send("n2"));
        let out = o.take(&PersistedState::default());
        assert_eq!((out.now.len(), out.persist, out.gated), (1, None, None));
    }

    #[test]
    fn actions_after_a_write_wait_for_it_and_fences_never_do() {
        // §5.2 and §5.2.1.
        let mut o = Outbox::default();
        o.push(send("n2"));
        o.persist();
        o.push(send("n3"));
        o.fence(Fence::Apply {
            seq: 4,
            target: FenceTarget::Isolated,
        });
        let out = o.take(&PersistedState::default());
        assert_eq!(out.fences.len(), 1);
        assert_eq!(out.now, vec![send("n2")]);
        assert_eq!(out.persist.as_ref().map(|p| p.seq), Some(1));
        assert_eq!(
            out.gated.as_ref().map(|g| (g.after, g.actions.len())),
            Some((1, 1))
        );
    }

    #[test]
    fn two_writes_in_one_step_are_one_write_of_the_final_state() {
        let mut o = Outbox::default();
        o.persist();
        o.push(send("n2"));
        o.persist();
        let state = PersistedState {
            epoch: 9,
            ..Default::default()
        };
        let out = o.take(&state);
        assert_eq!(
            out.persist,
            Some(Persist {
                seq: 1,
                state,
                gates: true
            })
        );
    }

    #[test]
    fn a_background_write_gates_nothing_and_rides_along_with_a_gating_one() {
        // §6.10: a risen floor is written without holding anything back.
        let mut o = Outbox::default();
        o.persist_background();
        o.push(send("n2"));
        let out = o.take(&PersistedState::default());
        assert_eq!(out.now, vec![send("n2")]);
        assert_eq!(
            out.persist.as_ref().map(|p| (p.seq, p.gates)),
            Some((1, false))
        );
        o.push(send("n3"));
        assert_eq!(o.take(&PersistedState::default()).now, vec![send("n3")]);
        assert!(o.take_background(1));
        o.persist_background();
        o.persist();
        let out = o.take(&PersistedState::default());
        assert_eq!(out.persist.map(|p| (p.seq, p.gates)), Some((2, true)));
    }

    #[test]
    fn a_later_step_waits_for_a_write_still_outstanding() {
        let mut o = Outbox::default();
        o.persist();
        let _ = o.take(&PersistedState::default());
        o.push(send("n2"));
        let out = o.take(&PersistedState::default());
        assert_eq!(out.gated.map(|g| g.after), Some(1));
        o.persisted(1);
        o.push(send("n3"));
        assert_eq!(o.take(&PersistedState::default()).now, vec![send("n3")]);
    }

    #[test]
    fn the_gate_releases_in_order_up_to_the_durable_write_and_drops_on_failure() {
        let mut gate = Gate::default();
        gate.hold(Some(Gated {
            after: 1,
            actions: vec![send("n2")],
        }));
        gate.hold(Some(Gated {
            after: 2,
            actions: vec![send("n3")],
        }));
        assert_eq!(gate.release(1), vec![send("n2")]);
        assert_eq!(gate.len(), 1);
        gate.drop_all();
        assert!(gate.release(2).is_empty());
    }

    #[test]
    fn a_fence_cancels_the_record_of_a_waiting_grant() {
        let mut o = Outbox::default();
        o.persist();
        o.push(Action::Apply {
            seq: 2,
            target: GrantTarget::Primary,
        });
        o.fence(Fence::Apply {
            seq: 3,
            target: FenceTarget::FencedPrimary,
        });
        let _ = o.take(&PersistedState::default());
        assert_eq!(o.grant_waiting, None);
    }

    #[test]
    fn a_grant_waiting_for_a_write_is_remembered_until_the_write_is_durable() {
        let mut o = Outbox::default();
        o.persist();
        o.push(Action::Apply {
            seq: 2,
            target: GrantTarget::Primary,
        });
        let _ = o.take(&PersistedState::default());
        assert_eq!(o.grant_waiting, Some(1));
        o.persisted(1);
        assert_eq!(o.grant_waiting, None);
    }
}
