//! What this node knows of each peer: when it last heard from it and the
//! peer's last heartbeat.

use super::types::Millis;
use crate::protocol::{Heartbeat, NodeId};
use std::collections::BTreeMap;

/// One peer as seen from here.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct PeerView {
    /// Last time any valid message arrived from this peer.
    pub(crate) last_heard: Option<Millis>,
    /// The peer's last heartbeat.
    pub(crate) last_hb: Option<Heartbeat>,
    /// When that heartbeat arrived.
    pub(crate) last_hb_at: Option<Millis>,
}

impl PeerView {
    /// Alive = heard within `down_after` (protocol §4, DOWN detection).
    pub(crate) fn alive(&self, now: Millis, down_after_ms: u64) -> bool {
        self.heard_within(now, down_after_ms)
    }

    pub(crate) fn heard_within(&self, now: Millis, window_ms: u64) -> bool {
        self.last_heard
            .is_some_and(|t| now.saturating_sub(t) < window_ms)
    }
}

/// All peers, in node-id order (deterministic iteration for the simulator).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub(crate) struct Peers {
    views: BTreeMap<NodeId, PeerView>,
}

impl Peers {
    pub(crate) fn new(ids: impl Iterator<Item = NodeId>) -> Peers {
        Peers {
            views: ids.map(|id| (id, PeerView::default())).collect(),
        }
    }

    pub(crate) fn heard(&mut self, id: &str, now: Millis) {
        if let Some(v) = self.views.get_mut(id) {
            v.last_heard = Some(now);
        }
    }

    pub(crate) fn record_heartbeat(&mut self, id: &str, hb: Heartbeat, now: Millis) {
        if let Some(v) = self.views.get_mut(id) {
            v.last_hb = Some(hb);
            v.last_hb_at = Some(now);
        }
    }

    pub(crate) fn get(&self, id: &str) -> Option<&PeerView> {
        self.views.get(id)
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &PeerView> {
        self.views.values()
    }

    pub(crate) fn iter_named(&self) -> impl Iterator<Item = (&str, &PeerView)> {
        self.views.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Peers heard within `window_ms`.
    pub(crate) fn count_heard_within(&self, now: Millis, window_ms: u64) -> usize {
        self.views
            .values()
            .filter(|v| v.heard_within(now, window_ms))
            .count()
    }
}
