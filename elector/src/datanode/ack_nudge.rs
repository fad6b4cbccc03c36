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
//! acknowledged is the last one it sent) or shows that what lags is only
//! its own frames ([`super::ack_nudge_pacer`]: a late acknowledgement used
//! to look like lag and keep a loaded host nudging an idle cluster), and
//! goes back to sleep [`HOT_FOR`] after the last lag: an idle cluster gets
//! no frames and no extra reads. It nudges only while the adapter says this
//! node is the writable primary it made ([`Shared::armed`]); a nudge racing
//! a demotion reaches a replica or a quiesced primary, which refuses it.

use super::ack_nudge_pacer::{Bracket, Check, Next, Pacer, CHECK_EVERY};
#[cfg(doc)]
use super::ack_nudge_pacer::{HOT_FOR, NUDGE_EVERY};
use super::client::{Credentials, RespClient};
use super::kevy_policy::NudgeView;
use super::kevy_stream::{primary_feed_generation, primary_feed_offset};
use super::ReplicationInfo;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// The nudge: deletes a key reserved for it, which never exists, so it
/// changes no data; kevy replicates it all the same (one frame).
pub(crate) const ACK_NUDGE: [&str; 2] = ["DEL", "__elector_ack_nudge__"];

/// How long the node must have been our writable primary before the
/// adapter's `INFO` view of what its replicas acknowledged is handed to the
/// nudger: for a tick after a promotion the view can describe the node's
/// previous role (ten kevy ticks of margin).
pub(crate) const VIEW_TRUSTED_AFTER: Duration = Duration::from_millis(1_000);

/// What every replica has acknowledged by a primary's `INFO` view, when the
/// view speaks for every replica: each connected one online (kevy: it has
/// acknowledged on every stream) and none acknowledged past the feed's
/// position (a record kept from an earlier feed, see `kevy_hold`).
pub(crate) fn acked_by_all(info: &ReplicationInfo) -> Option<u64> {
    let replicas = info.connected_replicas?;
    let every_one_online = replicas > 0 && info.online_replicas == replicas;
    let one_feed = info.highest_replica_ack.is_none_or(|h| h <= info.offset);
    info.slowest_replica_ack
        .filter(|_| info.is_master() && every_one_online && one_feed)
}

/// What the adapter and the nudger task share.
#[derive(Default)]
pub(crate) struct Shared {
    /// This node is the writable primary the adapter made it, and it has
    /// replicas to nudge.
    pub(crate) armed: AtomicBool,
    /// Replicas the last `INFO` listed: `WAIT 0 0` below this is lag.
    pub(crate) replicas: AtomicU64,
    /// What every replica acknowledged by the adapter's last `INFO`, when
    /// that view is trusted (see `Nudger::feed`).
    acked_by_all: Mutex<Option<u64>>,
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
        self.set_acked_by_all(None);
    }

    /// Hands the nudger the adapter's trusted view (`None`: not trusted).
    pub(crate) fn set_acked_by_all(&self, acked: Option<u64>) {
        *self.acked_by_all.lock().unwrap_or_else(|e| e.into_inner()) = acked;
    }

    fn acked_by_all(&self) -> Option<u64> {
        *self.acked_by_all.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Starts the nudger on its own connection to the data node.
pub(crate) fn spawn(address: &str, credentials: &Credentials, shared: Arc<Shared>) {
    let client = RespClient::new(address, credentials);
    tokio::spawn(run(client, shared));
}

/// The nudger as its adapter holds it: started on the first view it is fed
/// (when `data_node.ack_nudge` is on), disarmed before every command that
/// changes the node's role, and ended with the adapter.
pub(crate) struct Nudger {
    address: String,
    credentials: Credentials,
    enabled: bool,
    shared: Option<Arc<Shared>>,
}

impl Nudger {
    pub(crate) fn new(address: &str, credentials: &Credentials, enabled: bool) -> Nudger {
        Nudger {
            address: address.to_string(),
            credentials: credentials.clone(),
            enabled,
            shared: None,
        }
    }

    /// Hands the poll's view to the nudger (started on first use).
    pub(crate) fn feed(&mut self, view: NudgeView, offset: u64) {
        if !self.enabled {
            return;
        }
        tracing::trace!(
            armed = view.armed,
            due = view.due,
            offset,
            replicas = view.replicas,
            "acknowledgement nudger fed"
        );
        let shared = self.shared.get_or_insert_with(|| {
            let shared = Arc::new(Shared::default());
            spawn(&self.address, &self.credentials, shared.clone());
            shared
        });
        shared.replicas.store(view.replicas, Ordering::SeqCst);
        shared.set_acked_by_all(view.acked_by_all);
        shared.armed.store(view.armed, Ordering::SeqCst);
        if view.due {
            shared.wake.notify_one();
        }
    }

    pub(crate) fn disarm(&self) {
        if let Some(shared) = &self.shared {
            shared.disarm();
        }
    }

    /// Nudges sent since the last call.
    pub(crate) fn take_sent(&self) -> u64 {
        self.shared
            .as_ref()
            .map_or(0, |s| s.sent.swap(0, Ordering::Relaxed))
    }
}

impl Drop for Nudger {
    fn drop(&mut self) {
        if let Some(shared) = &self.shared {
            shared.disarm();
            shared.closed.store(true, Ordering::SeqCst);
            shared.wake.notify_one();
        }
    }
}

/// The fresh lag check, in one round trip: `WAIT 0 0` answers at once with
/// the replicas whose acknowledgement covers the current offset, and
/// `REPL.TOKEN` with that offset. `None` when the node does not answer
/// `WAIT` (a replica refuses it).
async fn check(client: &mut RespClient, replicas: u64) -> Option<Check> {
    let replies = client
        .pipeline(&[&["WAIT", "0", "0"], &["REPL.TOKEN"]])
        .await
        .ok()?;
    let acked = match replies.first()? {
        redis::Value::Int(n) => u64::try_from(*n).unwrap_or(0),
        _ => return None,
    };
    let token = replies.get(1);
    Some(Check {
        lagging: acked < replicas,
        position: token.and_then(primary_feed_offset),
        generation: token.and_then(primary_feed_generation),
    })
}

/// Sends one nudge between two reads of the feed's position, in one round
/// trip; the bracket is `None` when a position was not read. `Err` when the
/// nudge itself was not taken.
async fn nudge(client: &mut RespClient) -> Result<Option<Bracket>, String> {
    let replies = client
        .pipeline(&[&["REPL.TOKEN"], &ACK_NUDGE, &["REPL.TOKEN"]])
        .await
        .map_err(|e| e.to_string())?;
    match replies.get(1) {
        Some(redis::Value::Int(_)) => {}
        other => return Err(format!("{other:?}")),
    }
    let before = replies.first().and_then(primary_feed_offset);
    let after = replies.get(2).and_then(primary_feed_offset);
    Ok(before
        .zip(after)
        .map(|(before, after)| Bracket { before, after }))
}

async fn run(mut client: RespClient, shared: Arc<Shared>) {
    let mut pacer = Pacer::default();
    loop {
        shared.wake.notified().await;
        if shared.closed.load(Ordering::SeqCst) {
            return;
        }
        pacer.woken(Instant::now());
        tracing::trace!("acknowledgement nudger woken");
        while !shared.closed.load(Ordering::SeqCst) {
            let lag = match shared.armed.load(Ordering::SeqCst) {
                true => check(&mut client, shared.replicas.load(Ordering::SeqCst)).await,
                false => None,
            };
            let armed = shared.armed.load(Ordering::SeqCst);
            match pacer.next(Instant::now(), armed, lag, shared.acked_by_all()) {
                Next::Sleep => {
                    tracing::trace!(armed, ?lag, "acknowledgement nudger sleeps");
                    break;
                }
                Next::Check => {}
                Next::Nudge => match nudge(&mut client).await {
                    Ok(bracket) => {
                        tracing::trace!(?lag, ?bracket, "acknowledgement nudge sent");
                        shared.sent.fetch_add(1, Ordering::Relaxed);
                        pacer.nudged(bracket);
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, "acknowledgement nudge not taken");
                        pacer.nudged(None);
                    }
                },
            }
            tokio::time::sleep(CHECK_EVERY).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn primary(text: &str) -> ReplicationInfo {
        ReplicationInfo::parse(&format!("role:master\r\n{text}")).unwrap()
    }

    #[test]
    fn the_view_speaks_for_every_replica_only_when_each_is_online_in_one_feed() {
        let both = primary(
            "connected_slaves:2\r\n\
             slave0:ip=a,port=1,state=online,offset=90\r\n\
             slave1:ip=b,port=2,state=online,offset=70\r\n\
             master_repl_offset:100\r\n",
        );
        assert_eq!(acked_by_all(&both), Some(70), "the slowest one");
        let syncing = primary(
            "connected_slaves:2\r\n\
             slave0:ip=a,port=1,state=online,offset=90\r\n\
             slave1:ip=b,port=2,state=syncing,offset=0\r\n\
             master_repl_offset:100\r\n",
        );
        assert_eq!(acked_by_all(&syncing), None, "one has not acknowledged yet");
        let kept = primary(
            "connected_slaves:1\r\n\
             slave0:ip=a,port=1,state=online,offset=302\r\n\
             master_repl_offset:100\r\n",
        );
        assert_eq!(acked_by_all(&kept), None, "a record from an earlier feed");
        let alone = primary("connected_slaves:0\r\nmaster_repl_offset:100\r\n");
        assert_eq!(acked_by_all(&alone), None);
    }
}
