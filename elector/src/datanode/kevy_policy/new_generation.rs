//! The feed generation a promotion starts, and the tick before kevy names
//! it (docs/architecture.md §kevy, "The tick after a promotion").
//!
//! kevy 7.0.0 answers `REPLICAOF NO ONE` at once but bumps the shard's feed
//! generation on its next tick (`1000 / [expiry] hz` ms later). A reading in
//! between is a master whose `REPL.TOKEN` still names the generation the
//! process had before: its startup one, never seen as a replica, whose
//! token names the upstream's. Claimed as the epoch's stream, that name is
//! left at the next reading, and the core resigns the new primary
//! (`tests/kevy_repromotion.rs`, CI at ecdbef4: "the data node left the
//! stream it started in this epoch"). So after a promotion of ours the
//! generation is not reported (no stream, no link: the core claims
//! nothing) until a reading names a different generation than the first
//! one seen as master, or [`NAMING_WINDOW_MS`] has passed.

use super::super::kevy_stream::Reading;
use crate::core::Millis;

/// Longer than kevy's slowest tick that still ticks (`hz = 1`: 1 s) plus a
/// poll. With `hz = 0` kevy never ticks, never bumps the generation, and a
/// promoted node serves its old generation: kevy's rules, not ours.
pub const NAMING_WINDOW_MS: Millis = 1_100;

/// A promotion of ours whose new generation is not named yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unnamed {
    since: Millis,
    /// The generation of the first master reading after the promotion
    /// (`Some(None)`: read, with no token).
    first: Option<Option<u64>>,
}

impl Unnamed {
    /// Our `REPLICAOF NO ONE` was answered at `now`.
    pub fn promoted(now: Millis) -> Unnamed {
        Unnamed {
            since: now,
            first: None,
        }
    }

    /// Whether `reading` (taken at `now`) may still name the old
    /// generation; `false` ends the wait for good.
    pub fn still_unnamed(&mut self, reading: &Reading, now: Millis) -> bool {
        let Reading::Primary { generation, .. } = *reading else {
            return false;
        };
        if now.saturating_sub(self.since) >= NAMING_WINDOW_MS {
            return false;
        }
        match self.first {
            None => {
                self.first = Some(generation);
                true
            }
            Some(first) => first == generation,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn primary(generation: u64) -> Reading {
        Reading::Primary {
            generation: Some(generation),
            offset: 0,
        }
    }

    #[test]
    fn the_first_generation_read_after_a_promotion_is_not_taken_as_the_new_one() {
        let mut u = Unnamed::promoted(1_000);
        assert!(u.still_unnamed(&primary(7), 1_000));
        assert!(u.still_unnamed(&primary(7), 1_050));
    }

    #[test]
    fn a_generation_that_changes_after_the_promotion_is_the_new_one() {
        let mut u = Unnamed::promoted(1_000);
        assert!(u.still_unnamed(&primary(7), 1_000));
        assert!(!u.still_unnamed(&primary(9), 1_010));
    }

    #[test]
    fn a_generation_unchanged_for_a_whole_window_is_the_new_one() {
        let mut u = Unnamed::promoted(1_000);
        assert!(u.still_unnamed(&primary(9), 1_000));
        assert!(!u.still_unnamed(&primary(9), 1_000 + NAMING_WINDOW_MS));
    }

    #[test]
    fn a_node_read_as_a_replica_ends_the_wait() {
        let mut u = Unnamed::promoted(1_000);
        let replica = Reading::Replica {
            generation: 3,
            offset: 0,
            syncing: false,
            follows_someone: true,
        };
        assert!(!u.still_unnamed(&replica, 1_001));
    }
}
