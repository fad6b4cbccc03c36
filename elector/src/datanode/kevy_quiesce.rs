//! kevy's quiesce as a fence, and the handover threads it leaves behind.
//!
//! `FAILOVER host port TIMEOUT ms` makes kevy refuse writes (`-QUIESCED`)
//! and starts a background thread that waits for `host:port` to drain.
//! Towards [`super::NOWHERE`] it never drains, so the thread does one thing
//! only: at its deadline (`ms` after it started) it lifts *whatever quiesce
//! is then in force*. `FAILOVER ABORT` lifts the quiesce; each thread
//! notices at its next look (every 250 ms) and exits, unless a new quiesce
//! was set before that look, in which case it lives on with its old
//! deadline.
//!
//! So a quiesce is safe to rely on as long as no thread that may still run
//! is near its deadline. This type keeps when the oldest such thread may
//! have started, and a fence that leans on the quiesce gives way to
//! demotion once that is [`FENCE_QUIESCE_MAX`] old, far inside kevy's
//! [`QUIESCE_TIMEOUT_MS`]. A quiesce set again right after a lift therefore
//! needs no demotion: it inherits the age of the thread that may have
//! missed the lift (docs/architecture.md §kevy, "The quiesce and its
//! threads").

use crate::core::Millis;

/// How long kevy keeps a quiesce on its own if we never lift it: longer than
/// the longest switchover the API accepts (120 s), so it never lifts while a
/// handover still needs it; short enough that a node left quiesced by a
/// crashed elector does not stay unwritable for ever.
pub(crate) const QUIESCE_TIMEOUT_MS: u64 = 600_000;

/// kevy's handover thread notices an abort within one probe interval
/// (250 ms after a refused connection): after this, every thread started
/// before the abort has exited, if no quiesce was set meanwhile.
pub(crate) const QUIESCE_THREAD_EXIT: Millis = 300;

/// How long a lapsed lease's quiesce may fence a primary by default
/// (`data_node.kevy_quiesce_fence_limit_ms`), counted from the start of the
/// oldest handover thread that may still run, before it gives way to
/// demotion: far inside [`QUIESCE_TIMEOUT_MS`] (the chain this process
/// cannot see, a watchdog's window while the elector is frozen, adds at
/// most another such span), long enough for a quorum flap (a few
/// `down_after`) to end without a promotion.
pub(crate) const FENCE_QUIESCE_MAX: Millis = 60_000;

/// The longest fence limit the configuration accepts: twice this (the
/// chain above) stays far inside [`QUIESCE_TIMEOUT_MS`].
pub(crate) const FENCE_QUIESCE_LIMIT_RANGE: std::ops::RangeInclusive<Millis> = 1_000..=120_000;

/// What one process knows of the quiesce on its kevy.
#[derive(Debug, Clone)]
pub(crate) struct Quiesce {
    /// How old the oldest thread may be before a fence resting on the
    /// quiesce gives way to demotion ([`FENCE_QUIESCE_MAX`] by default).
    limit: Millis,
    /// Whether a quiesce may be in force: `Some(true)` we set one,
    /// `Some(false)` we lifted it, `None` unknown (our own start, another
    /// process's clamp).
    in_force: Option<bool>,
    /// The start of the oldest handover thread that may still run.
    oldest_thread: Option<Millis>,
    /// When we last sent `FAILOVER ABORT`.
    lifted_at: Option<Millis>,
}

impl Default for Quiesce {
    fn default() -> Quiesce {
        Quiesce::with_limit(FENCE_QUIESCE_MAX)
    }
}

impl Quiesce {
    /// Nothing known yet; a fence rests on the quiesce for `limit` at most.
    pub(crate) fn with_limit(limit: Millis) -> Quiesce {
        Quiesce {
            limit,
            in_force: None,
            oldest_thread: None,
            lifted_at: None,
        }
    }

    /// We set a quiesce and are sure it is in force.
    pub(crate) fn is_set(&self) -> bool {
        self.in_force == Some(true)
    }

    /// We lifted the last quiesce and nobody set one since, as far as we know.
    pub(crate) fn is_lifted(&self) -> bool {
        self.in_force == Some(false)
    }

    /// Our `FAILOVER` was answered at `now`: a new thread runs, and the
    /// quiesce is in force.
    pub(crate) fn sent(&mut self, now: Millis) {
        if self.threads_gone(now) {
            self.oldest_thread = None;
        }
        self.oldest_thread.get_or_insert(now);
        self.in_force = Some(true);
    }

    /// Our `FAILOVER ABORT` was answered at `now`.
    pub(crate) fn lifted(&mut self, now: Millis) {
        self.in_force = Some(false);
        self.lifted_at = Some(now);
    }

    /// Another process (this host's watchdog) may have quiesced the node
    /// after `not_before`; its thread counts from then.
    pub(crate) fn set_elsewhere(&mut self, not_before: Millis) {
        self.in_force = None;
        self.oldest_thread = Some(self.oldest_thread.map_or(not_before, |t| t.min(not_before)));
    }

    /// Forget what we set: the watchdog at the start of a silence, when the
    /// elector may have lifted or replaced its last quiesce meanwhile. Its
    /// own old threads are the elector's to count (it saw the clamp) while
    /// the elector runs; this window adds at most the limit.
    pub(crate) fn forget(&mut self) {
        *self = Quiesce::with_limit(self.limit);
    }

    /// Every handover thread we know of has exited: the last quiesce was
    /// lifted [`QUIESCE_THREAD_EXIT`] ago and none was set since.
    fn threads_gone(&self, now: Millis) -> bool {
        self.is_lifted()
            && self
                .lifted_at
                .is_none_or(|at| now.saturating_sub(at) >= QUIESCE_THREAD_EXIT)
    }

    /// Our quiesce is in force and young enough to fence the node (a write
    /// refused as long as no handover thread nears its deadline).
    pub(crate) fn fences(&self, now: Millis) -> bool {
        self.is_set() && !self.outlived(now)
    }

    /// A fence resting on the quiesce must give way to demotion: the oldest
    /// thread that may still run is as old as the limit.
    pub(crate) fn outlived(&self, now: Millis) -> bool {
        !self.threads_gone(now)
            && self
                .oldest_thread
                .is_some_and(|t| now.saturating_sub(t) >= self.limit)
    }

    /// How long a handover's quiesce waits after a lift so that it starts
    /// no chain of its own (a switchover may hold it up to 120 s).
    pub(crate) fn wait_for_threads(&self, now: Millis) -> Option<Millis> {
        let at = self.lifted_at?;
        QUIESCE_THREAD_EXIT
            .checked_sub(now.saturating_sub(at))
            .filter(|d| *d > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Millis {
        n
    }

    #[test]
    fn a_quiesce_set_again_right_after_a_lift_inherits_the_age_of_the_thread_that_may_have_missed_it(
    ) {
        let t0: Millis = 1_000_000;
        let mut q = Quiesce::default();
        q.sent(t0);
        q.lifted(t0 + ms(59_000));
        q.sent(t0 + ms(59_016));
        assert!(q.is_set());
        assert!(!q.outlived(t0 + ms(59_900)));
        assert!(
            q.outlived(t0 + FENCE_QUIESCE_MAX),
            "counted from the first thread, which may still run"
        );
    }

    #[test]
    fn a_quiesce_set_once_the_lift_has_settled_counts_from_its_own_start() {
        let t0: Millis = 1_000_000;
        let mut q = Quiesce::default();
        q.sent(t0);
        q.lifted(t0 + ms(59_000));
        let again = t0 + ms(59_000) + QUIESCE_THREAD_EXIT;
        q.sent(again);
        assert!(!q.outlived(t0 + FENCE_QUIESCE_MAX + ms(1_000)));
        assert!(q.outlived(again + FENCE_QUIESCE_MAX));
    }

    #[test]
    fn nothing_is_outlived_once_every_thread_has_seen_the_lift() {
        let t0: Millis = 1_000_000;
        let mut q = Quiesce::default();
        q.sent(t0);
        q.lifted(t0 + ms(10));
        assert!(!q.outlived(t0 + FENCE_QUIESCE_MAX));
        assert!(q.is_lifted());
    }

    #[test]
    fn a_clamp_by_another_process_counts_from_before_it_was_seen_and_leaves_the_state_unknown() {
        let t0: Millis = 1_000_000;
        let mut q = Quiesce::default();
        q.sent(t0 + ms(30_000));
        q.set_elsewhere(t0);
        assert!(!q.is_set() && !q.is_lifted());
        assert!(q.outlived(t0 + FENCE_QUIESCE_MAX));
        let mut fresh = Quiesce::default();
        fresh.set_elsewhere(t0);
        fresh.sent(t0 + ms(2_000));
        assert!(
            fresh.outlived(t0 + FENCE_QUIESCE_MAX),
            "the other thread is older"
        );
    }

    #[test]
    fn a_forgotten_state_is_unknown_and_starts_a_new_count() {
        let t0: Millis = 1_000_000;
        let mut q = Quiesce::default();
        q.sent(t0);
        q.forget();
        assert!(!q.is_set() && !q.is_lifted());
        q.sent(t0 + ms(50_000));
        assert!(!q.outlived(t0 + FENCE_QUIESCE_MAX));
    }

    #[test]
    fn a_configured_limit_decides_when_the_fence_gives_way_and_outlives_a_forget() {
        let t0: Millis = 1_000_000;
        let mut q = Quiesce::with_limit(ms(2_000));
        q.sent(t0);
        assert!(q.fences(t0 + ms(1_999)));
        assert!(q.outlived(t0 + ms(2_000)) && !q.fences(t0 + ms(2_000)));
        q.forget();
        q.sent(t0 + ms(10_000));
        assert!(!q.outlived(t0 + ms(11_999)));
        assert!(q.outlived(t0 + ms(12_000)), "the limit survives a forget");
    }

    #[test]
    fn a_handover_quiesce_waits_out_the_threads_of_a_recent_lift() {
        let t0: Millis = 1_000_000;
        let mut q = Quiesce::default();
        assert_eq!(q.wait_for_threads(t0), None);
        q.lifted(t0);
        assert_eq!(q.wait_for_threads(t0 + ms(100)), Some(ms(200)));
        assert_eq!(q.wait_for_threads(t0 + QUIESCE_THREAD_EXIT), None);
    }
}
