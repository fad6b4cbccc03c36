//! The role as a type (docs/protocol.md §5): each variant owns what only that
//! role has, and [`RoleState::transition`] is the one place a role changes.
//!
//! What a role owns goes when the role goes: a candidacy's votes cannot
//! outlive the candidacy, a primary's lease flags cannot be read by a
//! replica. One thing crosses a role change on purpose: a planned
//! switchover (§8) starts on the primary and, once it has resigned in favour
//! of its successor, waits on the replica it became until the successor
//! announces itself or the deadline passes.

use super::types::{Millis, Notice, Reason};
use crate::protocol::{NodeId, Role};
use std::collections::{BTreeMap, BTreeSet};

/// A candidacy in progress (§5.1).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct Candidacy {
    pub(crate) epoch: u64,
    pub(crate) votes: BTreeSet<NodeId>,
    pub(crate) rejects: BTreeSet<NodeId>,
    pub(crate) deadline: Millis,
    /// Why it stands (an ordinary election, a handover to it, an operator's
    /// `accept-data-loss`): the role change of a won candidacy says so.
    pub(crate) reason: Reason,
}

impl Candidacy {
    /// The reason a primary this candidacy makes carries (§5, issue 36): a
    /// planned handover's successor says `switchover` (HANDOVER does not
    /// tell a switchover from a preemption; the old primary's own change
    /// does), a forced candidacy `data_loss_accepted`, any other
    /// `won_election`.
    pub(crate) fn won_as(&self) -> Reason {
        match self.reason {
            Reason::Switchover | Reason::Preemption => Reason::Switchover,
            Reason::DataLossAccepted => Reason::DataLossAccepted,
            _ => Reason::WonElection,
        }
    }
}

/// A planned handover (§8): draining on the primary, then waiting for the
/// successor on the replica the old primary became.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct Switchover {
    pub(crate) to: NodeId,
    pub(crate) deadline: Millis,
    /// `Some(seq)` while draining (waiting for the fence `seq` to apply and
    /// the target to catch up); `None` once this node has resigned.
    pub(crate) draining_fence_seq: Option<u64>,
    /// When this node first saw the draining fence applied: only a target
    /// heartbeat that arrived since then can show the target caught up.
    pub(crate) fence_applied_at: Option<Millis>,
    /// `switchover` when an operator asked, `preemption` when the primary
    /// hands over to a member of higher priority (§8.1): the fence and the
    /// resignation carry it.
    pub(crate) reason: Reason,
}

/// What only a primary has: its lease (§6.2) and a switchover it drains.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct Leadership {
    /// How this node came to lead ([`Candidacy::won_as`]): the first
    /// unfence of the epoch carries it too.
    pub(crate) won_as: Reason,
    /// No majority has echoed a stamp within the lease: writes refused.
    pub(crate) fenced_by_lease: bool,
    /// Since when, without a break, the lease has been lost.
    pub(crate) fenced_since: Option<Millis>,
    /// The lease was held at least once in this epoch (the first unfence
    /// after winning has reason [`Leadership::won_as`], later ones
    /// `quorum_regained`).
    pub(crate) lease_held_once: bool,
    pub(crate) switchover: Option<Switchover>,
    /// Preemption (§8.1): since when each member of higher priority has
    /// been ready without a break, as this primary saw it. Dropped with the
    /// role, and cleared when a preemption starts, so a target that fails
    /// waits its whole delay again.
    pub(crate) preempt_ready: BTreeMap<NodeId, Millis>,
}

impl Default for Leadership {
    fn default() -> Leadership {
        Leadership {
            won_as: Reason::WonElection,
            fenced_by_lease: false,
            fenced_since: None,
            lease_held_once: false,
            switchover: None,
            preempt_ready: BTreeMap::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) enum RoleState {
    Replica { switchover: Option<Switchover> },
    Candidate(Candidacy),
    Primary(Leadership),
}

impl RoleState {
    pub(crate) fn replica() -> RoleState {
        RoleState::Replica { switchover: None }
    }

    pub(crate) fn role(&self) -> Role {
        match self {
            RoleState::Replica { .. } => Role::Replica,
            RoleState::Candidate(_) => Role::Candidate,
            RoleState::Primary(_) => Role::Primary,
        }
    }

    pub(crate) fn candidacy(&self) -> Option<&Candidacy> {
        match self {
            RoleState::Candidate(c) => Some(c),
            _ => None,
        }
    }

    pub(crate) fn leadership(&self) -> Option<&Leadership> {
        match self {
            RoleState::Primary(l) => Some(l),
            _ => None,
        }
    }

    pub(crate) fn leadership_mut(&mut self) -> Option<&mut Leadership> {
        match self {
            RoleState::Primary(l) => Some(l),
            _ => None,
        }
    }

    /// A primary whose lease lapsed (§6.2).
    pub(crate) fn fenced_by_lease(&self) -> bool {
        self.leadership().is_some_and(|l| l.fenced_by_lease)
    }

    /// The switchover in progress, on the primary or after it resigned.
    pub(crate) fn switchover(&self) -> Option<&Switchover> {
        match self {
            RoleState::Replica { switchover } => switchover.as_ref(),
            RoleState::Primary(l) => l.switchover.as_ref(),
            RoleState::Candidate(_) => None,
        }
    }

    pub(crate) fn switchover_mut(&mut self) -> Option<&mut Switchover> {
        match self {
            RoleState::Replica { switchover } => switchover.as_mut(),
            RoleState::Primary(l) => l.switchover.as_mut(),
            RoleState::Candidate(_) => None,
        }
    }

    pub(crate) fn take_switchover(&mut self) -> Option<Switchover> {
        match self {
            RoleState::Replica { switchover } => switchover.take(),
            RoleState::Primary(l) => l.switchover.take(),
            RoleState::Candidate(_) => None,
        }
    }

    /// The replica this role becomes: a switchover in progress goes with it.
    pub(crate) fn demoted(&mut self) -> RoleState {
        RoleState::Replica {
            switchover: self.take_switchover(),
        }
    }

    /// The only place a role changes: swaps in `next` and returns the notice
    /// that says so, with its machine-readable reason.
    pub(crate) fn transition(
        &mut self,
        next: RoleState,
        epoch: u64,
        primary: Option<NodeId>,
        reason: Reason,
    ) -> Notice {
        let from = self.role();
        *self = next;
        let to = self.role();
        tracing::info!(
            from = %from, to = %to, epoch, primary = primary.as_deref().unwrap_or(""),
            reason = %reason, "role change"
        );
        Notice::RoleChanged {
            from,
            to,
            epoch,
            primary,
            reason,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn switchover() -> Switchover {
        Switchover {
            to: "n2".into(),
            deadline: 10,
            draining_fence_seq: None,
            fence_applied_at: None,
            reason: Reason::Switchover,
        }
    }

    #[test]
    fn a_transition_reports_both_roles_and_its_reason() {
        let mut role = RoleState::replica();
        let notice = role.transition(
            RoleState::Primary(Leadership::default()),
            3,
            Some("n1".into()),
            Reason::WonElection,
        );
        assert_eq!(role.role(), Role::Primary);
        assert_eq!(
            notice,
            Notice::RoleChanged {
                from: Role::Replica,
                to: Role::Primary,
                epoch: 3,
                primary: Some("n1".into()),
                reason: Reason::WonElection
            }
        );
    }

    #[test]
    fn a_demoted_primary_keeps_the_switchover_it_resigned_for() {
        // §8: the old primary waits for its successor as a replica.
        let mut role = RoleState::Primary(Leadership {
            switchover: Some(switchover()),
            ..Leadership::default()
        });
        let next = role.demoted();
        role.transition(next, 1, None, Reason::Switchover);
        assert_eq!(role.switchover().map(|s| s.to.as_str()), Some("n2"));
        assert!(!role.fenced_by_lease());
    }

    #[test]
    fn a_candidacy_ends_with_the_candidate_role() {
        let mut role = RoleState::Candidate(Candidacy {
            epoch: 2,
            votes: BTreeSet::new(),
            rejects: BTreeSet::new(),
            deadline: 5,
            reason: Reason::PeerTimeout,
        });
        let next = role.demoted();
        role.transition(next, 1, None, Reason::ElectionTimeout);
        assert!(role.candidacy().is_none());
        assert!(role.switchover().is_none());
    }
}
