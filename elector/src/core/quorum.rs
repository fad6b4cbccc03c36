//! Quorum arithmetic (docs/protocol.md §6.1), in one place and pure: how many
//! of the configured members make a majority, and what a vote count means.

/// Where a candidacy stands after counting (raft-rs's `VoteResult`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum VoteResult {
    /// A majority granted its vote.
    Won,
    /// Refusals and silent peers leave fewer than a majority able to grant:
    /// waiting for the deadline cannot help (§5.1).
    Lost,
    /// Neither yet.
    Pending,
}

/// The majority of a fixed membership: `N/2 + 1` of every configured member,
/// this node included (§6.1). N = 2 needs both, so it never fails over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Quorum {
    members: usize,
}

impl Quorum {
    pub(crate) fn of(members: usize) -> Quorum {
        Quorum { members }
    }

    /// How many members make a majority.
    pub fn size(self) -> usize {
        self.members / 2 + 1
    }

    /// Whether `count` members (this node included) are a majority: enough
    /// to stand (§6.6) or to hold a lease (§6.2).
    pub(crate) fn is_reached(self, count: usize) -> bool {
        count >= self.size()
    }

    /// A candidacy's standing: `granted` votes (its own included), `refused`
    /// refusals, and `silent` peers that neither refused nor were heard within
    /// `down_after` (they will not vote in time).
    pub(crate) fn vote_result(self, granted: usize, refused: usize, silent: usize) -> VoteResult {
        if self.is_reached(granted) {
            VoteResult::Won
        } else if !self.is_reached(self.members.saturating_sub(refused).saturating_sub(silent)) {
            VoteResult::Lost
        } else {
            VoteResult::Pending
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_majority_is_more_than_half_of_every_member() {
        // §6.1
        for (members, size) in [(1, 1), (2, 2), (3, 2), (4, 3), (5, 3), (6, 4), (7, 4)] {
            assert_eq!(Quorum::of(members).size(), size, "{members} members");
        }
    }

    #[test]
    fn vote_counts_are_won_lost_or_pending() {
        // §5.1: (members, granted, refused, silent) -> result
        use VoteResult::*;
        let table = [
            (3, 2, 0, 0, Won),
            (3, 1, 0, 0, Pending),
            (3, 1, 1, 0, Pending),
            (3, 1, 1, 1, Lost),
            (3, 1, 2, 0, Lost),
            (5, 2, 1, 0, Pending),
            (5, 2, 2, 0, Pending),
            (5, 2, 2, 1, Lost),
            (5, 3, 2, 0, Won),
            (2, 1, 0, 0, Pending),
            (2, 1, 1, 0, Lost),
            (2, 2, 0, 0, Won),
            (3, 1, 5, 5, Lost),
        ];
        for (members, granted, refused, silent, want) in table {
            assert_eq!(
                Quorum::of(members).vote_result(granted, refused, silent),
                want,
                "{members} members, {granted} granted, {refused} refused, {silent} silent"
            );
        }
    }

    #[test]
    fn a_lease_or_a_candidacy_needs_a_majority_including_itself() {
        // §6.2, §6.6
        assert!(!Quorum::of(3).is_reached(1));
        assert!(Quorum::of(3).is_reached(2));
        assert!(!Quorum::of(2).is_reached(1));
        assert!(!Quorum::of(5).is_reached(2));
    }
}
