//! The acknowledgement nudger (kevy, `data_node.ack_nudge`;
//! docs/architecture.md §kevy, "Acknowledgement nudge").
//!
//! A kevy 7.0.0 replica acknowledges only on a frame that arrives 100 ms or
//! more after its last acknowledgement, or on the primary's 1 s ping
//! (`replica_runner_events.rs`, `maybe_ack`). A client that writes and then
//! `WAIT`s sends no further frame, so without help its `WAIT` lasts until the
//! ping. The floor is the 100 ms cadence; what our side added on top of it
//! was *when* we noticed the lag and *when* the no-op frame landed:
//! `INFO replication` on the primary is refreshed once per kevy tick
//! (100 ms, `hz = 10`), the adapter polls every `data_poll_ms` (100 ms), and
//! a nudge landing 60 ms after the replica's last acknowledgement is ignored,
//! so the next one (150 ms later) was the one answered: about 200 ms.
//!
//! So the nudger is its own task with its own connection, woken by the
//! adapter's poll when `INFO` shows a lagging replica. It then reads the lag
//! fresh with `WAIT 0 0` (kevy answers it at once with the number of live
//! replicas that acknowledged everything: its ack slots, not the tick-old
//! INFO view) every [`CHECK_EVERY`], and while a replica lags sends the
//! no-op frame at most every [`NUDGE_EVERY`]: the first frame past the
//! replica's 100 ms mark is acknowledged at once, so `WAIT` answers within
//! 100 ms + [`NUDGE_EVERY`] of the previous acknowledgement. It stops
//! nudging the moment the fresh check shows no lag (the frame that was
//! acknowledged is the last one it sent), and goes back to sleep
//! [`HOT_FOR`] after the last lag: an idle cluster gets no frames and no
//! extra reads. It nudges only while the adapter says this node is the
//! writable primary it made ([`Shared::armed`]); a nudge racing a demotion
//! reaches a replica or a quiesced primary, which refuses it.

use super::client::{Credentials, RespClient};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// The nudge: deletes a key reserved for it, which never exists, so it
/// changes no data; kevy replicates it all the same (one frame).
pub(crate) const ACK_NUDGE: [&str; 2] = ["DEL", "__elector_ack_nudge__"];

/// How often the fresh lag check runs while the nudger is awake.
pub(crate) const CHECK_EVERY: Duration = Duration::from_millis(10);
/// At most one nudge per this long: a replica answers the first frame past
/// its 100 ms mark, so this is what a `WAIT` can wait beyond the floor.
pub(crate) const NUDGE_EVERY: Duration = Duration::from_millis(20);
/// How long the nudger stays awake after it last saw a lagging replica.
pub(crate) const HOT_FOR: Duration = Duration::from_millis(1_000);

/// What the adapter and the nudger task share.
#[derive(Default)]
pub(crate) struct Shared {
    /// This node is the writable primary the adapter made it, and it has
    /// replicas to nudge.
    pub(crate) armed: AtomicBool,
    /// Replicas the last `INFO` listed: `WAIT 0 0` below this is lag.
    pub(crate) replicas: AtomicU64,
    /// Nudges sent, taken by the adapter's report.
    pub(crate) sent: AtomicU64,
    pub(crate) wake: Notify,
    /// The adapter is gone: the task ends.
    pub(crate) closed: AtomicBool,
}

impl Shared {
    /// Disarms the nudger (before any command that changes the node's role).
    pub(crate) fn disarm(&self) {
        self.armed.store(false, Ordering::SeqCst);
    }
}

/// The nudger's decisions, without I/O or a clock of its own.
#[derive(Debug, Default)]
pub(crate) struct Pacer {
    hot_until: Option<Instant>,
    last_nudge: Option<Instant>,
}

/// What to do after one fresh lag check.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Next {
    /// Send a nudge, then check again after [`CHECK_EVERY`].
    Nudge,
    /// Check again after [`CHECK_EVERY`].
    Check,
    /// Nothing lagged for [`HOT_FOR`] (or the node is no longer armed):
    /// sleep until woken.
    Sleep,
}

impl Pacer {
    /// The adapter saw lag: stay awake at least [`HOT_FOR`] from `now`.
    pub(crate) fn woken(&mut self, now: Instant) {
        self.hot_until = Some(now + HOT_FOR);
    }

    /// `lagging`: the fresh check found a replica behind (`None`: the check
    /// failed, e.g. the node became a replica).
    pub(crate) fn next(&mut self, now: Instant, armed: bool, lagging: Option<bool>) -> Next {
        if !armed || lagging.is_none() {
            self.hot_until = None;
            return Next::Sleep;
        }
        if lagging == Some(true) {
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
}

/// Starts the nudger on its own connection to the data node.
pub(crate) fn spawn(address: &str, credentials: &Credentials, shared: Arc<Shared>) {
    let client = RespClient::new(address, credentials);
    tokio::spawn(run(client, shared));
}

/// Whether a replica has not acknowledged everything: `WAIT 0 0` answers
/// at once with the replicas whose acknowledgement covers the current
/// offset. `None` when the node does not answer it (a replica refuses WAIT).
async fn lagging(client: &mut RespClient, replicas: u64) -> Option<bool> {
    let acked: i64 = client.call(&["WAIT", "0", "0"]).await.ok()?;
    Some(u64::try_from(acked).unwrap_or(0) < replicas)
}

async fn run(mut client: RespClient, shared: Arc<Shared>) {
    let mut pacer = Pacer::default();
    loop {
        shared.wake.notified().await;
        if shared.closed.load(Ordering::SeqCst) {
            return;
        }
        pacer.woken(Instant::now());
        while !shared.closed.load(Ordering::SeqCst) {
            let armed = shared.armed.load(Ordering::SeqCst);
            let lag = match armed {
                true => lagging(&mut client, shared.replicas.load(Ordering::SeqCst)).await,
                false => None,
            };
            match pacer.next(Instant::now(), shared.armed.load(Ordering::SeqCst), lag) {
                Next::Sleep => break,
                Next::Check => {}
                Next::Nudge => match client.call::<i64>(&ACK_NUDGE).await {
                    Ok(_) => {
                        shared.sent.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => tracing::debug!(error = %e, "acknowledgement nudge not taken"),
                },
            }
            tokio::time::sleep(CHECK_EVERY).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lagging_replica_is_nudged_at_most_every_nudge_interval() {
        let mut p = Pacer::default();
        let t0 = Instant::now();
        p.woken(t0);
        assert_eq!(p.next(t0, true, Some(true)), Next::Nudge);
        assert_eq!(p.next(t0 + CHECK_EVERY, true, Some(true)), Next::Check);
        assert_eq!(p.next(t0 + NUDGE_EVERY, true, Some(true)), Next::Nudge);
    }

    #[test]
    fn no_lag_means_no_nudge_and_sleep_after_the_hot_window() {
        let mut p = Pacer::default();
        let t0 = Instant::now();
        p.woken(t0);
        assert_eq!(p.next(t0, true, Some(false)), Next::Check);
        assert_eq!(p.next(t0 + HOT_FOR / 2, true, Some(false)), Next::Check);
        assert_eq!(p.next(t0 + HOT_FOR, true, Some(false)), Next::Sleep);
    }

    #[test]
    fn lag_keeps_the_nudger_awake() {
        let mut p = Pacer::default();
        let t0 = Instant::now();
        p.woken(t0);
        assert_eq!(p.next(t0 + HOT_FOR / 2, true, Some(true)), Next::Nudge);
        assert_eq!(p.next(t0 + HOT_FOR, true, Some(false)), Next::Check);
        assert_eq!(
            p.next(t0 + HOT_FOR / 2 + HOT_FOR, true, Some(false)),
            Next::Sleep
        );
    }

    #[test]
    fn a_node_that_is_not_our_writable_primary_is_never_nudged() {
        let mut p = Pacer::default();
        let t0 = Instant::now();
        p.woken(t0);
        assert_eq!(p.next(t0, false, Some(true)), Next::Sleep);
        p.woken(t0);
        assert_eq!(
            p.next(t0, true, None),
            Next::Sleep,
            "WAIT refused: a replica"
        );
    }
}
