//! Sentinel's events: `+switch-master` when the primary's address changes and
//! `+new-epoch` when the epoch moves, published from the elector's view and
//! delivered to `SUBSCRIBE`/`PSUBSCRIBE` connections (Jedis' sentinel pool
//! follows failovers this way).

use std::collections::BTreeSet;
use std::sync::Arc;

use tokio::sync::{broadcast, watch};

use super::glob::glob_match;
use super::reply::Reply;
use super::Shared;

/// A pub/sub event (`+switch-master`, `+new-epoch`, ...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Event {
    pub(super) channel: String,
    pub(super) payload: String,
}

/// Publishes `+switch-master` when the primary's address changes (and
/// `+new-epoch` when the epoch moves), like Sentinel after a failover.
pub(super) async fn publish_changes(shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    let mut view = shared.view.clone();
    let mut epoch = view.borrow().epoch;
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            changed = view.changed() => if changed.is_err() { return },
        }
        let current = view.borrow_and_update().clone();
        if current.epoch != epoch {
            epoch = current.epoch;
            let _ = shared.events.send(Event {
                channel: "+new-epoch".into(),
                payload: epoch.to_string(),
            });
        }
        let Some(new) = current.primary else { continue };
        let old = shared.remember_primary(new.clone());
        match old {
            Some(old) if (old.host.as_str(), old.port) != (new.host.as_str(), new.port) => {
                let payload = format!(
                    "{} {} {} {} {}",
                    current.master_name, old.host, old.port, new.host, new.port
                );
                tracing::info!(%payload, "publishing +switch-master");
                let _ = shared.events.send(Event {
                    channel: "+switch-master".into(),
                    payload,
                });
            }
            _ => {}
        }
    }
}

/// One connection's subscriptions.
#[derive(Default)]
pub(super) struct Subscriptions {
    channels: BTreeSet<Vec<u8>>,
    patterns: BTreeSet<Vec<u8>>,
    rx: Option<broadcast::Receiver<Event>>,
}

/// `SUBSCRIBE` (channels) or `PSUBSCRIBE` (patterns).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Channel,
    Pattern,
}

impl Subscriptions {
    fn count(&self) -> i64 {
        (self.channels.len() + self.patterns.len()) as i64
    }

    /// Whether any subscription is open (RESP2 then restricts the commands).
    pub(super) fn active(&self) -> bool {
        self.count() > 0
    }

    fn set(&mut self, kind: Kind) -> &mut BTreeSet<Vec<u8>> {
        match kind {
            Kind::Channel => &mut self.channels,
            Kind::Pattern => &mut self.patterns,
        }
    }

    /// `(P)SUBSCRIBE targets...`: one confirmation per target, as `cmd` named it.
    pub(super) fn subscribe(
        &mut self,
        cmd: &str,
        kind: Kind,
        targets: &[Vec<u8>],
        events: &broadcast::Sender<Event>,
    ) -> Vec<Reply> {
        if self.rx.is_none() {
            self.rx = Some(events.subscribe());
        }
        let mut replies = Vec::new();
        for t in targets {
            self.set(kind).insert(t.clone());
            replies.push(Reply::Push(vec![
                Reply::bulk(cmd),
                Reply::Bulk(t.clone()),
                Reply::Int(self.count()),
            ]));
        }
        replies
    }

    /// `(P)UNSUBSCRIBE [targets...]`: every open one of `kind` when none are
    /// named; one confirmation per target (a nil one when there was none).
    pub(super) fn unsubscribe(&mut self, cmd: &str, kind: Kind, targets: &[Vec<u8>]) -> Vec<Reply> {
        let targets: Vec<Vec<u8>> = if targets.is_empty() {
            self.set(kind).iter().cloned().collect()
        } else {
            targets.to_vec()
        };
        let mut replies = Vec::new();
        for t in &targets {
            self.set(kind).remove(t);
            replies.push(Reply::Push(vec![
                Reply::bulk(cmd),
                Reply::Bulk(t.clone()),
                Reply::Int(self.count()),
            ]));
        }
        if targets.is_empty() {
            replies.push(Reply::Push(vec![
                Reply::bulk(cmd),
                Reply::Nil,
                Reply::Int(self.count()),
            ]));
        }
        if !self.active() {
            self.rx = None;
        }
        replies
    }

    /// The next event for this connection; never resolves while it has no
    /// subscription. `None` once the publisher is gone.
    pub(super) async fn next_event(&mut self) -> Option<Event> {
        let Some(rx) = self.rx.as_mut() else {
            return std::future::pending().await;
        };
        loop {
            match rx.recv().await {
                Ok(e) => return Some(e),
                // A slow subscriber misses events rather than stalling others.
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }

    /// Messages for `ev` on this connection: one per matching channel and pattern.
    pub(super) fn deliveries(&self, ev: &Event) -> Vec<Reply> {
        let mut out = Vec::new();
        if self.channels.contains(ev.channel.as_bytes()) {
            out.push(Reply::Push(vec![
                Reply::bulk("message"),
                Reply::bulk(&ev.channel),
                Reply::bulk(&ev.payload),
            ]));
        }
        for p in &self.patterns {
            if glob_match(p, ev.channel.as_bytes()) {
                out.push(Reply::Push(vec![
                    Reply::bulk("pmessage"),
                    Reply::bulk(p),
                    Reply::bulk(&ev.channel),
                    Reply::bulk(&ev.payload),
                ]));
            }
        }
        out
    }
}
