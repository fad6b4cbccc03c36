//! When the acknowledgement nudger sends a frame: its rules, without I/O or
//! a clock of its own ([`super::ack_nudge`] runs them;
//! docs/architecture.md §kevy, "Acknowledgement nudge").
//!
//! Two rules. A replica lagging behind a *client's* write is nudged at most
//! every [`NUDGE_EVERY`] until it acknowledges. A replica lagging only
//! behind the nudger's own frames is not nudged: no client waits on them,
//! kevy's 1 s ping gets them acknowledged, and nudging them is what kept a
//! loaded host nudging an idle cluster. A kevy replica acknowledges the
//! first frame that reaches it 100 ms or more after its last
//! acknowledgement; when that acknowledgement came back after the nudger's
//! next check (10 ms), the check still saw lag, the next nudge reached the
//! replica inside its closed 100 ms window and went unanswered, and so on:
//! CI saw 14 and 36 nudges in 2 s of idleness.
//!
//! Telling the two apart takes two positions in the primary's feed (kevy's
//! `REPL.TOKEN`, read fresh around every check and nudge):
//! - *the clients' end*: the highest position a client's frame may end at.
//!   Any movement of the feed the nudger did not make itself moves it. A
//!   nudge is read as a bracket (`REPL.TOKEN`, `DEL`, `REPL.TOKEN`); when
//!   the bracket grew by more than the smallest nudge seen, a client wrote
//!   inside it, and the clients' end moves to its close;
//! - *what every replica acknowledged*, from the adapter's `INFO` view
//!   (`None` unless trusted: every connected replica online, this node our
//!   writable primary for a while; a view a tick old is lower, never
//!   higher, so it can only make the nudger nudge more).
//!
//! The lag is only ours when every replica acknowledged the clients' end.
//! Anything unknown (a position not read, a view not trusted) counts as a
//! client's lag: the nudger then nudges as it did before it told them
//! apart.
//!
//! What it knows of the feed holds for one feed generation (`REPL.TOKEN`'s
//! first number; a promotion starts a new one), not for one stretch of
//! being armed: every apply disarms the nudger for its duration, a re-apply
//! of the same target and a lease flap included, and a check can time out
//! on a loaded host. Forgetting the feed there made the first lag after it,
//! our own last nudge still unacknowledged, a client's: a few nudges into
//! an idle cluster (CI, `tests/kevy_ack_nudge.rs`: 3 in 2 s).

use std::time::{Duration, Instant};

/// How often the fresh lag check runs while the nudger is awake.
pub(crate) const CHECK_EVERY: Duration = Duration::from_millis(10);
/// At most one nudge per this long: a replica answers the first frame past
/// its 100 ms mark, so this is what a `WAIT` can wait beyond the floor.
pub(crate) const NUDGE_EVERY: Duration = Duration::from_millis(20);
/// How long the nudger stays awake after it last saw a client's lag.
pub(crate) const HOT_FOR: Duration = Duration::from_millis(1_000);

/// One fresh lag check on the primary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Check {
    /// A replica has not acknowledged everything (`WAIT 0 0` below the
    /// replicas the adapter counted).
    pub(crate) lagging: bool,
    /// The feed's position (`REPL.TOKEN`'s offset), if read.
    pub(crate) position: Option<u64>,
    /// The feed's generation (`REPL.TOKEN`'s first number), if read.
    pub(crate) generation: Option<u64>,
}

/// The positions around one nudge (`REPL.TOKEN` just before and just after
/// its `DEL`, in one pipeline), if read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bracket {
    pub(crate) before: u64,
    pub(crate) after: u64,
}

/// What to do after one fresh lag check.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Next {
    /// Send a nudge, then check again after [`CHECK_EVERY`].
    Nudge,
    /// Check again after [`CHECK_EVERY`].
    Check,
    /// No client's lag for [`HOT_FOR`] (or the node is no longer armed):
    /// sleep until woken.
    Sleep,
}

/// The nudger's memory.
#[derive(Debug, Default)]
pub(crate) struct Pacer {
    hot_until: Option<Instant>,
    last_nudge: Option<Instant>,
    /// Where the feed stood right after the last nudge, if read.
    our_end: Option<u64>,
    /// The highest position a client's frame may end at (`None`: unknown,
    /// so any lag is a client's).
    clients_end: Option<u64>,
    /// The smallest growth of the feed one nudge was seen to make (kevy's
    /// framing: it holds across feeds).
    nudge_len: Option<u64>,
    /// The feed generation the positions above are in.
    feed: Option<u64>,
}

impl Pacer {
    /// The adapter saw lag: stay awake at least [`HOT_FOR`] from `now`.
    pub(crate) fn woken(&mut self, now: Instant) {
        self.hot_until = Some(now + HOT_FOR);
    }

    /// Decides after one check. `check` is `None` when it failed (e.g. the
    /// node became a replica, which refuses `WAIT`); `acked_by_all` is the
    /// adapter's trusted view of what every replica acknowledged.
    pub(crate) fn next(
        &mut self,
        now: Instant,
        armed: bool,
        check: Option<Check>,
        acked_by_all: Option<u64>,
    ) -> Next {
        let Some(check) = check.filter(|_| armed) else {
            // Not our writable primary now (an apply under way, a lost
            // lease, a demotion), or the check failed: sleep until woken.
            // What we know of the feed waits for the next check's
            // generation to say whether it still holds.
            self.hot_until = None;
            return Next::Sleep;
        };
        if check.generation.is_none() || check.generation != self.feed {
            // Another feed (a new term), or one we cannot name: its
            // positions mean nothing from before.
            self.our_end = None;
            self.clients_end = None;
            self.feed = check.generation;
        }
        match check.position {
            Some(p) if self.our_end == Some(p) => {}
            // The feed moved since our last nudge, or we cannot tell.
            p => self.clients_end = p,
        }
        if check.lagging && !self.only_ours_lag(acked_by_all) {
            self.hot_until = Some(now + HOT_FOR);
            if self
                .last_nudge
                .is_none_or(|at| now.duration_since(at) >= NUDGE_EVERY)
            {
                self.last_nudge = Some(now);
                return Next::Nudge;
            }
            return Next::Check;
        }
        match self.hot_until {
            Some(until) if now < until => Next::Check,
            _ => {
                self.hot_until = None;
                Next::Sleep
            }
        }
    }

    /// Records the positions around a nudge just sent (`None`: not read, so
    /// the next check cannot tell our frames from a client's).
    pub(crate) fn nudged(&mut self, bracket: Option<Bracket>) {
        let Some(Bracket { before, after }) = bracket else {
            self.our_end = None;
            return;
        };
        if self.our_end != Some(before) {
            // A client wrote between the check and the nudge.
            self.clients_end = Some(before);
        }
        let grew = after.saturating_sub(before);
        if self.nudge_len != Some(grew) {
            // Not one nudge's frame as seen before (or the first nudge,
            // whose length is not known yet): a client may have written
            // inside the bracket.
            self.clients_end = Some(after);
        }
        if grew > 0 {
            self.nudge_len = Some(self.nudge_len.map_or(grew, |n| n.min(grew)));
        }
        self.our_end = Some(after);
    }

    /// Every replica acknowledged everything a client wrote: what lags is
    /// our own nudges.
    fn only_ours_lag(&self, acked_by_all: Option<u64>) -> bool {
        matches!((self.clients_end, acked_by_all), (Some(c), Some(a)) if a >= c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The feed generation of the tests' term.
    const FEED: Option<u64> = Some(7);

    fn lag_at(position: u64) -> Option<Check> {
        Some(Check {
            lagging: true,
            position: Some(position),
            generation: FEED,
        })
    }

    fn quiet_at(position: u64) -> Option<Check> {
        Some(Check {
            lagging: false,
            position: Some(position),
            generation: FEED,
        })
    }

    fn bracket(before: u64, after: u64) -> Option<Bracket> {
        Some(Bracket { before, after })
    }

    /// A woken pacer whose first nudge, for a client's lag at 100, moved
    /// the feed to 130.
    fn nudged_once_at_100() -> (Pacer, Instant) {
        let mut p = Pacer::default();
        let t0 = Instant::now();
        p.woken(t0);
        assert_eq!(p.next(t0, true, lag_at(100), None), Next::Nudge);
        p.nudged(bracket(100, 130));
        (p, t0)
    }

    #[test]
    fn a_lagging_replica_is_nudged_at_most_every_nudge_interval() {
        let (mut p, t0) = nudged_once_at_100();
        assert_eq!(
            p.next(t0 + CHECK_EVERY, true, lag_at(130), None),
            Next::Check
        );
        assert_eq!(
            p.next(t0 + NUDGE_EVERY, true, lag_at(130), None),
            Next::Nudge
        );
    }

    #[test]
    fn no_lag_means_no_nudge_and_sleep_after_the_hot_window() {
        let mut p = Pacer::default();
        let t0 = Instant::now();
        p.woken(t0);
        assert_eq!(p.next(t0, true, quiet_at(5), None), Next::Check);
        assert_eq!(
            p.next(t0 + HOT_FOR / 2, true, quiet_at(5), None),
            Next::Check
        );
        assert_eq!(p.next(t0 + HOT_FOR, true, quiet_at(5), None), Next::Sleep);
    }

    #[test]
    fn lag_keeps_the_nudger_awake() {
        let mut p = Pacer::default();
        let t0 = Instant::now();
        p.woken(t0);
        assert_eq!(p.next(t0 + HOT_FOR / 2, true, lag_at(9), None), Next::Nudge);
        assert_eq!(p.next(t0 + HOT_FOR, true, quiet_at(9), None), Next::Check);
        let later = t0 + HOT_FOR / 2 + HOT_FOR;
        assert_eq!(p.next(later, true, quiet_at(9), None), Next::Sleep);
    }

    #[test]
    fn a_node_that_is_not_our_writable_primary_is_never_nudged() {
        let mut p = Pacer::default();
        let t0 = Instant::now();
        p.woken(t0);
        assert_eq!(p.next(t0, false, lag_at(1), None), Next::Sleep);
        p.woken(t0);
        assert_eq!(
            p.next(t0, true, None, None),
            Next::Sleep,
            "WAIT refused: a replica"
        );
    }

    /// The loop CI saw: every replica acknowledged the client's write (up
    /// to 100), the acknowledgement of the nudge that got it is still in
    /// flight, and the check sees lag. Nudging again would land in the
    /// replica's closed window; the lag is ours alone, so nothing is sent.
    #[test]
    fn lag_behind_our_own_nudges_only_is_not_nudged() {
        let mut p = Pacer::default();
        let t0 = Instant::now();
        p.woken(t0);
        // An earlier round taught the nudger how long its frame is.
        assert_eq!(p.next(t0, true, lag_at(40), None), Next::Nudge);
        p.nudged(bracket(40, 70));
        let t = t0 + NUDGE_EVERY;
        assert_eq!(p.next(t, true, lag_at(100), None), Next::Nudge);
        p.nudged(bracket(100, 130));
        let t = t + NUDGE_EVERY;
        assert_eq!(p.next(t, true, lag_at(130), Some(100)), Next::Check);
        assert_eq!(
            p.next(t + HOT_FOR, true, lag_at(130), Some(100)),
            Next::Sleep
        );
    }

    #[test]
    fn a_client_write_after_our_nudge_is_nudged_again() {
        let (mut p, t0) = nudged_once_at_100();
        assert_eq!(
            p.next(t0 + NUDGE_EVERY, true, lag_at(180), Some(130)),
            Next::Nudge
        );
    }

    #[test]
    fn a_client_write_inside_a_nudges_bracket_counts_as_the_clients() {
        let (mut p, t0) = nudged_once_at_100();
        assert_eq!(
            p.next(t0 + NUDGE_EVERY, true, lag_at(130), None),
            Next::Nudge
        );
        p.nudged(bracket(130, 190)); // 30 of ours, 30 of a client's
        let t = t0 + 2 * NUDGE_EVERY;
        assert_eq!(p.next(t, true, lag_at(190), Some(130)), Next::Nudge);
        p.nudged(bracket(190, 220));
        let t = t + NUDGE_EVERY;
        assert_eq!(p.next(t, true, lag_at(220), Some(190)), Next::Check);
    }

    #[test]
    fn the_first_nudge_of_unknown_length_counts_as_a_clients_write() {
        let (mut p, t0) = nudged_once_at_100();
        assert_eq!(
            p.next(t0 + NUDGE_EVERY, true, lag_at(130), Some(100)),
            Next::Nudge
        );
    }

    #[test]
    fn without_a_trusted_view_or_a_position_every_lag_is_a_clients() {
        let (mut p, t0) = nudged_once_at_100();
        p.nudged(bracket(130, 160));
        let unread = Some(Check {
            lagging: true,
            position: None,
            generation: FEED,
        });
        assert_eq!(
            p.next(t0 + NUDGE_EVERY, true, unread, Some(1_000)),
            Next::Nudge
        );
        p.nudged(None);
        let t = t0 + 2 * NUDGE_EVERY;
        assert_eq!(
            p.next(t, true, lag_at(190), Some(1_000)),
            Next::Check,
            "all acked"
        );
        assert_eq!(
            p.next(t + NUDGE_EVERY, true, lag_at(190), None),
            Next::Nudge
        );
    }

    #[test]
    fn a_new_or_unnamed_feed_generation_forgets_the_feed() {
        // A new term names another generation; an unread token names none.
        // Everything up to our nudges is acknowledged: in the same feed the
        // lag would be ours alone (Check).
        for generation in [Some(8), None] {
            let (mut p, t0) = nudged_once_at_100();
            p.nudged(bracket(130, 160));
            assert_eq!(p.next(t0, false, lag_at(160), Some(130)), Next::Sleep);
            p.woken(t0 + HOT_FOR);
            let other = Some(Check {
                generation,
                ..lag_at(160).unwrap()
            });
            let t = t0 + HOT_FOR;
            assert_eq!(
                p.next(t, true, other, Some(130)),
                Next::Nudge,
                "{generation:?}"
            );
        }
    }

    /// What CI saw (3 nudges in 2 s of idleness): the node was disarmed
    /// for a moment (every apply does it; a check can also time out) while
    /// our last nudge was still unacknowledged. The feed is the same, so
    /// that lag is still ours.
    #[test]
    fn a_moment_disarmed_in_the_same_feed_keeps_our_own_lag_ours() {
        let (mut p, t0) = nudged_once_at_100();
        p.nudged(bracket(130, 131));
        p.nudged(bracket(131, 132));
        assert_eq!(p.next(t0, false, lag_at(132), Some(131)), Next::Sleep);
        p.woken(t0);
        assert_eq!(
            p.next(t0, true, None, Some(131)),
            Next::Sleep,
            "a check timed out"
        );
        let t = t0 + HOT_FOR;
        p.woken(t);
        assert_eq!(p.next(t, true, lag_at(132), Some(131)), Next::Check);
        assert_eq!(
            p.next(t + NUDGE_EVERY, true, lag_at(140), Some(132)),
            Next::Nudge,
            "a client's write after it is still nudged"
        );
    }
}
