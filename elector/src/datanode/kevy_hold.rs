//! kevy 7.0.0 keeps each replica's acknowledged offset across its own
//! promotions, and `WAIT` counts it: the hold below keeps that from ever
//! acknowledging a write no replica has (docs/architecture.md §kevy).
//!
//! A kevy primary records, per replica id (`kevy-replica-<client port>#s`,
//! the same on every reconnect), the highest offset the replica has
//! acknowledged, and only ever raises it. Promotion (`REPLICAOF NO ONE` on a
//! node that was a replica) starts a new feed generation whose offsets
//! restart at 0, but the old records stay. A node that was a primary at
//! offset 5000, demoted and promoted again, therefore counts a replica that
//! acknowledged 5000 in the old generation as having every one of its first
//! 5000 new writes: `WAIT 1` answers 1 while the replica is frozen
//! (`scripts/repro/kevy-wait-after-repromotion.sh`; chaos seed 2126 lost
//! acknowledged writes this way).
//!
//! kevy forgets a record once its replica has not been heard from for
//! `[replication] reconnect_window_ms` (default 60 s; our configurations set
//! 1 s), and a demoted kevy hears from no replica. So a node is promoted only
//! after it has been a replica, by our own observation, for longer than
//! that window plus one kevy tick: every record from its last primary term is
//! gone by then, and the new generation's records start from what the
//! replicas really acknowledge. A node that stayed a primary (quiesced for a
//! handover) keeps its generation and needs no hold; a long-standing replica
//! is promoted at once, so a failover is held only when the candidate was the
//! primary a moment ago (a quorum flap, a quick switchover back).

use crate::core::Millis;

/// kevy drops expired records from its shard tick (10 per second); this
/// also covers an acknowledgement already in flight when the node was
/// demoted.
pub(crate) const TICK_MARGIN: Millis = 250;

/// What the adapter knows of the node's role over time.
#[derive(Debug, Clone)]
pub(crate) struct PromotionHold {
    /// kevy's `[replication] reconnect_window_ms` on this node.
    window: Millis,
    /// The last role observed or applied: `Some(true)` a primary.
    primary: Option<bool>,
    /// Since when the node has been a replica without interruption, as far
    /// as we know (`None`: a primary now, or never seen).
    replica_since: Option<Millis>,
}

impl PromotionHold {
    pub(crate) fn new(window: Millis) -> PromotionHold {
        PromotionHold {
            window,
            primary: None,
            replica_since: None,
        }
    }

    /// A read of the node's role at `now`. A replica seen for the first time
    /// counts from `now`: it may have been demoted (by the watchdog, say) an
    /// instant before.
    pub(crate) fn observed(&mut self, primary: bool, now: Millis) {
        self.primary = Some(primary);
        if primary {
            self.replica_since = None;
        } else if self.replica_since.is_none() {
            self.replica_since = Some(now);
        }
    }

    /// We made the node a replica (a fence, a follow) at `now`.
    pub(crate) fn demoted(&mut self, now: Millis) {
        self.observed(false, now);
    }

    /// kevy's `reconnect_window_ms` this hold waits out.
    pub(crate) fn window(&self) -> Millis {
        self.window
    }

    /// The last role we saw or made was a primary.
    pub(crate) fn was_primary(&self) -> bool {
        self.primary == Some(true)
    }

    /// How much longer a promotion must wait at `now` (`None`: it may go).
    /// A node that is a primary already starts no new generation; a node
    /// never seen is held the whole window.
    pub(crate) fn remaining(&self, now: Millis) -> Option<Millis> {
        if self.primary == Some(true) {
            return None;
        }
        let since = self.replica_since.unwrap_or(now);
        let until = since + self.window + TICK_MARGIN;
        until.checked_sub(now).filter(|d| *d > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WINDOW: Millis = 1000;

    fn ms(n: u64) -> Millis {
        n
    }

    #[test]
    fn a_node_demoted_a_moment_ago_is_promoted_only_after_the_window_and_a_tick() {
        let t0: Millis = 1_000_000;
        let mut hold = PromotionHold::new(WINDOW);
        hold.observed(true, t0);
        hold.demoted(t0 + ms(100));
        assert_eq!(hold.remaining(t0 + ms(300)), Some(ms(1050)));
        assert_eq!(hold.remaining(t0 + ms(1349)), Some(ms(1)));
        assert_eq!(hold.remaining(t0 + ms(1350)), None);
    }

    #[test]
    fn a_long_standing_replica_is_promoted_at_once() {
        let t0: Millis = 1_000_000;
        let mut hold = PromotionHold::new(WINDOW);
        hold.observed(false, t0);
        hold.observed(false, t0 + ms(5000));
        assert_eq!(hold.remaining(t0 + ms(5000)), None);
    }

    #[test]
    fn a_node_that_is_still_a_primary_needs_no_hold() {
        let t0: Millis = 1_000_000;
        let mut hold = PromotionHold::new(WINDOW);
        hold.observed(true, t0);
        assert_eq!(hold.remaining(t0), None);
    }

    #[test]
    fn a_node_never_seen_is_held_the_whole_window() {
        let t0: Millis = 1_000_000;
        let hold = PromotionHold::new(WINDOW);
        assert_eq!(hold.remaining(t0), Some(WINDOW + TICK_MARGIN));
    }

    #[test]
    fn a_demotion_by_someone_else_counts_from_when_we_first_see_the_replica() {
        // The watchdog demoted the node while our elector was frozen: the
        // last thing we saw was a primary, the next a replica.
        let t0: Millis = 1_000_000;
        let mut hold = PromotionHold::new(WINDOW);
        hold.observed(true, t0);
        hold.observed(false, t0 + ms(3000));
        assert_eq!(hold.remaining(t0 + ms(3000)), Some(WINDOW + TICK_MARGIN));
    }

    #[test]
    fn being_a_primary_again_restarts_the_count_at_the_next_demotion() {
        let t0: Millis = 1_000_000;
        let mut hold = PromotionHold::new(WINDOW);
        hold.observed(false, t0);
        hold.observed(true, t0 + ms(5000));
        hold.demoted(t0 + ms(5100));
        assert_eq!(hold.remaining(t0 + ms(5100)), Some(WINDOW + TICK_MARGIN));
        // A second demotion (fence, then follow) does not push it further.
        hold.demoted(t0 + ms(5600));
        assert_eq!(hold.remaining(t0 + ms(5600)), Some(ms(750)));
    }
}
