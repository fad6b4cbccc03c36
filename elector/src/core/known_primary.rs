//! What this node knows of the primary of its committed epoch: who it is,
//! when it last proved itself alive, the stamp a replica echoes, whether it
//! resigned, and whether it has stayed fenced too long to vouch for
//! (docs/protocol.md §6.2, §6.9, §8).
//!
//! A candidate and a replica both rely on this (a candidate still defends a
//! primary it hears); what belongs to one epoch is forgotten by
//! [`KnownPrimary::new_epoch`] when the epoch changes.

use super::types::Millis;
use crate::protocol::NodeId;

#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub(super) struct KnownPrimary {
    /// The primary of the committed epoch as far as we know (may be us).
    pub(crate) id: Option<NodeId>,
    /// When it last proved it is alive (HB as primary, ANNOUNCE).
    pub(crate) heard_at: Option<Millis>,
    /// Its clock stamp in its latest HB/ANNOUNCE (echoed back, §6.2).
    pub(crate) stamp: u64,
    /// It has given up the role (switchover, data node down, a restart);
    /// `Some(Some(id))` names its chosen successor.
    pub(crate) resigned: Option<Option<NodeId>>,
    /// When we learned of the handover in `resigned` (others defer to the
    /// named successor only for a bounded time, §8).
    pub(crate) handover_learned_at: Millis,
    /// Since when its heartbeats have said it lost its lease (§6.9).
    pub(crate) fenced_since: Option<Millis>,
    /// We stopped vouching for it: it stayed fenced past `voter_fresh`.
    pub(crate) withdrawn: bool,
}

impl KnownPrimary {
    /// A new committed epoch: its primary has not resigned, has no stamp
    /// and no lease history yet.
    pub(crate) fn new_epoch(&mut self) {
        self.resigned = None;
        self.stamp = 0;
        self.fenced_since = None;
        self.withdrawn = false;
    }

    pub(crate) fn is(&self, id: &str) -> bool {
        self.id.as_deref() == Some(id)
    }

    /// The primary we recognise: known and not resigned.
    pub(crate) fn recognised(&self) -> Option<&str> {
        if self.resigned.is_some() {
            return None;
        }
        self.id.as_deref()
    }

    /// Heard within `window_ms` of `now`.
    pub(crate) fn heard_within(&self, now: Millis, window_ms: u64) -> bool {
        self.heard_at
            .is_some_and(|h| now.saturating_sub(h) < window_ms)
    }

    /// Tracks how long our primary has said it lost its lease and decides
    /// whether its heartbeat still proves it alive (§6.9). A primary that
    /// can send but not receive loses its lease and fences, yet every peer
    /// keeps hearing it; counted as alive, it would block failover for as
    /// long as the fault lasts. After `voter_fresh` of continuous fencing we
    /// stop refreshing it: from then on our echo is frozen (so no lease can
    /// rest on it) and the ordinary timers let a majority elect.
    pub(crate) fn stays_fenced(
        &mut self,
        lease_lost: bool,
        now: Millis,
        voter_fresh_ms: u64,
    ) -> bool {
        if !lease_lost {
            self.fenced_since = None;
            if self.withdrawn {
                tracing::info!("primary holds its lease again");
            }
            self.withdrawn = false;
            return false;
        }
        let since = *self.fenced_since.get_or_insert(now);
        if !self.withdrawn && now.saturating_sub(since) >= voter_fresh_ms {
            self.withdrawn = true;
            tracing::warn!(
                primary = ?self.id,
                fenced_ms = now - since,
                "primary has been fenced too long: no longer vouching for it"
            );
        }
        self.withdrawn
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_primary_fenced_for_the_freshness_window_is_withdrawn_and_restored_by_its_lease() {
        // §6.9
        let mut p = KnownPrimary::default();
        assert!(!p.stays_fenced(true, 100, 500));
        assert!(!p.stays_fenced(true, 599, 500));
        assert!(p.stays_fenced(true, 600, 500));
        assert!(!p.stays_fenced(false, 700, 500));
        assert!(!p.withdrawn);
    }

    #[test]
    fn a_new_epoch_forgets_the_resignation_and_the_stamp_but_not_who_was_heard() {
        let mut p = KnownPrimary {
            id: Some("n1".into()),
            heard_at: Some(5),
            stamp: 9,
            resigned: Some(None),
            withdrawn: true,
            ..KnownPrimary::default()
        };
        p.new_epoch();
        assert_eq!((p.stamp, p.resigned.clone(), p.withdrawn), (0, None, false));
        assert_eq!((p.id.as_deref(), p.heard_at), (Some("n1"), Some(5)));
    }
}
