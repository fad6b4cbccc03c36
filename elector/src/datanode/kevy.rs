//! kevy 7.0.0: the executor of [`KevyPolicy`] (docs/architecture.md §kevy).
//!
//! Every decision about the node (when it may be promoted, how it is fenced,
//! whom it follows and when it counts as joined, what position and stream
//! it reports, when frames of ours are written) is the pure policy's
//! (`kevy_policy/`), which the simulator runs as well. This file carries its
//! commands out against the real server and owns the I/O:
//! - the client connection and the pipelines (`REPLICAOF` with the position
//!   read just before it, the quiesce, its lift, probes of an upstream);
//! - what a `REPLICAOF` must cut short while it is outstanding: hanging
//!   connects to the upstream it leaves ([`super::stale_connect`]) or our
//!   hold at nowhere ([`super::nowhere_hold`]);
//! - the files shared with the watchdog: its clamp count and the held
//!   position;
//! - the acknowledgement nudger's task ([`super::ack_nudge`]) and the
//!   padding frames the policy asks for ([`super::kevy_pad`]).
//!
//! Run kevy with `threads = 1`: with several shards its offsets are per
//! shard.

use super::ack_nudge::{self, Shared as NudgeShared, ACK_NUDGE};
use super::client::{Credentials, RespClient};
use super::info::parse_identity;
use super::kevy_mark::{exists_flags, MarkStep};
use super::kevy_pad::FRAMES_PER_BATCH;
use super::kevy_policy::{
    Clock, KevyCommand, KevyOutcome, KevyPolicy, KevyReading, KevySettings, KevyStep, PipelineRead,
    Release,
};
use super::kevy_quiesce::QUIESCE_TIMEOUT_MS;
use super::kevy_stream::{unvouched, UpstreamAt};
use super::stale_connect::{abort_until_done, AbortTally};
use super::{resolve, DataNodeAdapter, DataNodeError, NowhereHold, ReplicationInfo, NOWHERE};
use crate::core::{DataNodeTarget, Millis};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::watch;

/// The `[replication] reconnect_window_ms` our configurations give kevy
/// (kevy's own default is 60 s): see [`super::kevy_hold`].
pub(crate) const DEFAULT_RECONNECT_WINDOW: Duration = Duration::from_millis(1_000);

/// How often an upstream is probed while we wait for its promotion.
const PROMOTION_POLL: Duration = Duration::from_millis(20);

/// Where this kevy's shared files are (`<data_dir>`): the watchdog's clamp
/// count and the held position.
#[derive(Debug, Clone, Default)]
pub(crate) struct SharedFiles {
    pub(crate) watchdog_clamps: Option<PathBuf>,
    pub(crate) position: Option<PathBuf>,
}

pub struct KevyNode {
    address: String,
    client: RespClient,
    credentials: Credentials,
    /// A client of the upstream we wait for (its client address).
    upstream_probe: Option<(String, RespClient)>,
    policy: KevyPolicy,
    nowhere_hold: Option<NowhereHold>,
    files: SharedFiles,
    ack_nudge: bool,
    nudger: Option<Arc<NudgeShared>>,
    aborts: AbortTally,
    padded_frames: u64,
    started: Instant,
}

impl Drop for KevyNode {
    fn drop(&mut self) {
        if let Some(n) = &self.nudger {
            n.disarm();
            n.closed.store(true, Ordering::SeqCst);
            n.wake.notify_one();
        }
    }
}

fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl KevyNode {
    pub(crate) fn new(
        address: &str,
        credentials: &Credentials,
        settings: KevySettings,
        files: SharedFiles,
    ) -> KevyNode {
        KevyNode {
            address: address.to_string(),
            client: RespClient::new(address, credentials),
            credentials: credentials.clone(),
            upstream_probe: None,
            ack_nudge: settings.ack_nudge,
            policy: KevyPolicy::new(settings, wall_ms()),
            nowhere_hold: None,
            files,
            nudger: None,
            aborts: AbortTally::default(),
            padded_frames: 0,
            started: Instant::now(),
        }
    }

    /// Holds the node's replication connects at [`NOWHERE`], released when
    /// a `REPLICAOF` leaves it. The policy is told at construction
    /// (`KevySettings::nowhere_hold`).
    pub(crate) fn with_nowhere_hold(mut self, hold: NowhereHold) -> KevyNode {
        self.nowhere_hold = Some(hold);
        self
    }

    /// Polls ask about the process mark an unclaimed join was set out from
    /// (the core's durable `joining_process`, §6.10).
    pub(crate) fn asking_about_joining_process(mut self, mark: Option<String>) -> KevyNode {
        self.policy.ask_about_joining_process(mark);
        self
    }

    fn clock(&self) -> Clock {
        Clock {
            mono: self.started.elapsed().as_millis() as Millis,
            wall: wall_ms(),
        }
    }

    /// Runs the policy's steps from `step` until it is done.
    async fn run(&mut self, mut step: KevyStep) -> Result<(), DataNodeError> {
        loop {
            match step {
                KevyStep::Done(result) => {
                    self.write_position();
                    return result;
                }
                KevyStep::Run(command) => {
                    let outcome = self.execute(command).await;
                    step = self.policy.resume(outcome, self.clock());
                }
            }
        }
    }

    async fn execute(&mut self, command: KevyCommand) -> KevyOutcome {
        match command {
            KevyCommand::ReadRole => KevyOutcome::Role(self.client.replication_info().await),
            KevyCommand::Resolve { addr } => KevyOutcome::Resolved(resolve(&addr).await),
            KevyCommand::AwaitPrimary { addr, within } => {
                KevyOutcome::Upstream(self.await_promotion(&addr, within).await)
            }
            KevyCommand::ReplicaOf {
                to,
                release,
                mark,
                unvouch_first,
            } => {
                if unvouch_first {
                    self.unvouch_position_file();
                }
                KevyOutcome::Replicated(self.replicaof(to, release, mark).await)
            }
            KevyCommand::Quiesce => {
                let (host, port) = (NOWHERE.0, NOWHERE.1.to_string());
                let timeout = QUIESCE_TIMEOUT_MS.to_string();
                let args = ["FAILOVER", host, &port, "TIMEOUT", &timeout];
                KevyOutcome::Quiesced(self.client.call::<String>(&args).await.map(drop))
            }
            KevyCommand::LiftQuiesce => KevyOutcome::Lifted(
                self.client
                    .call::<String>(&["FAILOVER", "ABORT"])
                    .await
                    .map(drop),
            ),
            KevyCommand::Sleep(ms) => {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                KevyOutcome::Slept
            }
        }
    }

    /// Probes the kevy at `addr` (its client address) until it reports
    /// itself a primary, `within` ms at most; then where its feed is.
    async fn await_promotion(&mut self, addr: &str, within: Millis) -> Option<UpstreamAt> {
        if self.upstream_probe.as_ref().is_none_or(|(a, _)| a != addr) {
            self.upstream_probe =
                Some((addr.to_string(), RespClient::new(addr, &self.credentials)));
        }
        let (_, probe) = self.upstream_probe.as_mut()?;
        let deadline = tokio::time::Instant::now() + Duration::from_millis(within);
        loop {
            match tokio::time::timeout_at(deadline, probe.replication_info()).await {
                Ok(Ok(info)) if info.is_master() => {
                    let token = probe.pipeline(&[&["REPL.TOKEN"]]).await.ok();
                    return Some(UpstreamAt::of_primary(
                        &info,
                        token.as_ref().and_then(|t| t.first()),
                    ));
                }
                Err(_) => return None,
                Ok(_) => {}
            }
            if tokio::time::Instant::now() + PROMOTION_POLL >= deadline {
                return None;
            }
            tokio::time::sleep(PROMOTION_POLL).await;
        }
    }

    /// The `REPLICAOF` pipeline (the runner's position read just before
    /// it), cutting short what the policy said kevy's join waits for.
    async fn replicaof(
        &mut self,
        to: Option<(String, u16)>,
        release: Release,
        mark: Option<MarkStep>,
    ) -> Result<PipelineRead, DataNodeError> {
        let port = to.as_ref().map(|(_, p)| p.to_string());
        let replicaof: Vec<&str> = match (&to, &port) {
            (Some((host, _)), Some(port)) => vec!["REPLICAOF", host, port],
            _ => vec!["REPLICAOF", "NO", "ONE"],
        };
        // The token between two readings of the role, as in `observe`;
        // our process mark checked on the same connection (`kevy_mark`).
        let marking: Vec<&str> = match &mark {
            Some(MarkStep::Check(sha)) => vec!["SCRIPT", "EXISTS", sha],
            Some(MarkStep::Load(source)) => vec!["SCRIPT", "LOAD", source],
            None => vec!["PING"],
        };
        let commands: [&[&str]; 6] = [
            &marking,
            &["INFO", "server"],
            &["INFO", "replication"],
            &["REPL.TOKEN"],
            &["INFO", "replication"],
            &replicaof,
        ];
        let (done_tx, done_rx) = watch::channel(false);
        let command = async {
            let replies = self.client.pipeline(&commands).await;
            let _ = done_tx.send(true);
            replies
        };
        let replies = match (release, &self.nowhere_hold) {
            (Release::HangingConnects { host, port }, _) => {
                let (replies, tally) = tokio::join!(command, abort_until_done(host, port, done_rx));
                self.aborts.aborted += tally.aborted;
                if tally.error.is_some() {
                    self.aborts.error = tally.error;
                }
                replies
            }
            (Release::HeldAtNowhere, Some(hold)) => {
                let hold = hold.clone();
                let (replies, released) = tokio::join!(command, hold.release_until_done(done_rx));
                self.aborts.released += released;
                replies
            }
            _ => command.await,
        }?;
        if let Some(e) = replies
            .get(5)
            .and_then(|r| refused(&replicaof.join(" "), r))
        {
            return Err(e);
        }
        let (mark_present, mark_loaded) = match &mark {
            Some(MarkStep::Check(_)) => (
                replies
                    .first()
                    .and_then(exists_flags)
                    .and_then(|flags| flags.first().copied()),
                None,
            ),
            Some(MarkStep::Load(_)) => (None, reply_text(&replies, 0, "SCRIPT LOAD").ok()),
            None => (None, None),
        };
        tracing::debug!(
            ?mark_present,
            ?mark_loaded,
            "kevy: the process mark in the REPLICAOF pipeline"
        );
        Ok(PipelineRead {
            server: reply_text(&replies, 1, "INFO server").ok(),
            replication: reply_text(&replies, 2, "INFO replication").ok(),
            token: replies.get(3).cloned(),
            replication_after: reply_text(&replies, 4, "INFO replication").ok(),
            mark_present,
            mark_loaded,
        })
    }

    /// Strips the process mark from the shared position file before a
    /// `REPLICAOF` towards anyone (`kevy_mark`): from then on the node may
    /// take another stream's data, and the entry must not vouch for it
    /// across a restart. A failed write is said: the entry then still
    /// vouches, so it is retried by the next such command.
    fn unvouch_position_file(&mut self) {
        let Some(path) = &self.files.position else {
            return;
        };
        let Some(text) = Self::read_file(Some(path)).and_then(|t| unvouched(&t)) else {
            return;
        };
        let tmp = path.with_extension("tmp");
        let result = std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, path));
        if let Err(e) = result {
            tracing::warn!(path = %path.display(), error = %e, "kevy: stripping the process mark from the held position failed");
        }
    }

    /// Loads the process mark the policy asked for (`kevy_mark`).
    async fn load_mark(&mut self, source: &str) {
        match self
            .client
            .call::<String>(&["SCRIPT", "LOAD", source])
            .await
        {
            Ok(sha) => {
                tracing::debug!(mark = %sha, "kevy: process mark loaded");
                self.policy.mark_loaded(&sha);
            }
            Err(e) => {
                tracing::warn!(error = %e, "kevy: loading the process mark failed; a position held now will not count across an elector restart")
            }
        }
    }

    /// Writes the held position the policy asks for, for the watchdog (or
    /// the elector, when the watchdog wrote it). Best effort: a failed
    /// write leaves the file older than the policy's memory, which it
    /// prefers anyway.
    fn write_position(&mut self) {
        let (Some(text), Some(path)) = (self.policy.take_position_write(), &self.files.position)
        else {
            return;
        };
        let tmp = path.with_extension("tmp");
        let result = std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, path));
        if let Err(e) = result {
            tracing::warn!(path = %path.display(), error = %e, "kevy: writing the held position failed");
        }
    }

    /// Writes the padding frames the policy asked for, in batches.
    async fn pad(&mut self, frames: u64) {
        let mut left = frames;
        while left > 0 {
            let batch = left.min(FRAMES_PER_BATCH);
            if let Err(e) = self.client.repeat(&ACK_NUDGE, batch).await {
                tracing::warn!(error = %e, "padding past stale acknowledgements failed");
                return;
            }
            self.padded_frames += batch;
            left -= batch;
        }
        tracing::warn!(
            frames,
            "padded the replication feed past replica acknowledgements kevy kept from an earlier \
             feed generation, so WAIT counts only acknowledgements of what was written since"
        );
    }

    /// Hands the poll's view to the nudger (started on first use).
    fn feed_nudger(&mut self, view: super::kevy_policy::NudgeView, offset: u64) {
        if !self.ack_nudge {
            return;
        }
        tracing::trace!(
            armed = view.armed,
            due = view.due,
            offset,
            replicas = view.replicas,
            "acknowledgement nudger fed"
        );
        let shared = self.nudger.get_or_insert_with(|| {
            let shared = Arc::new(NudgeShared::default());
            ack_nudge::spawn(&self.address, &self.credentials, shared.clone());
            shared
        });
        shared.replicas.store(view.replicas, Ordering::SeqCst);
        shared.set_acked_by_all(view.acked_by_all);
        shared.armed.store(view.armed, Ordering::SeqCst);
        if view.due {
            shared.wake.notify_one();
        }
    }

    fn disarm_nudger(&self) {
        if let Some(n) = &self.nudger {
            n.disarm();
        }
    }

    fn read_file(path: Option<&PathBuf>) -> Option<String> {
        std::fs::read_to_string(path?).ok()
    }
}

/// Reply `i` of a pipeline as text: a bulk string, else the server's
/// refusal of `command` or an unexpected reply.
fn reply_text(replies: &[redis::Value], i: usize, command: &str) -> Result<String, DataNodeError> {
    match replies.get(i) {
        Some(redis::Value::BulkString(b)) => Ok(String::from_utf8_lossy(b).into_owned()),
        reply => Err(reply
            .and_then(|r| refused(command, r))
            .unwrap_or_else(|| DataNodeError::BadInfo(format!("{reply:?}")))),
    }
}

/// `reply`, when it is the server's error reply to `command`, as ours.
fn refused(command: &str, reply: &redis::Value) -> Option<DataNodeError> {
    let redis::Value::ServerError(e) = reply else {
        return None;
    };
    Some(DataNodeError::Refused {
        command: command.to_string(),
        message: format!("{}: {}", e.code(), e.details().unwrap_or_default()),
    })
}

impl DataNodeAdapter for KevyNode {
    fn kind(&self) -> &'static str {
        "kevy"
    }

    async fn observe(&mut self) -> Result<ReplicationInfo, DataNodeError> {
        // One round trip, the token between two readings of the role (a
        // role change by another client in between is then seen, not read
        // as a stream: `KevyReading::info_after`). Raw replies, so that
        // `-LOADING` (a full resync) is a reading, not a failure. The
        // position file is read first, so that the same pipeline asks
        // whether its process mark is in this process (`kevy_mark`).
        let position_file = Self::read_file(self.files.position.as_ref());
        let marks_asked = self.policy.marks_to_check(position_file.as_deref());
        let mut exists = vec!["SCRIPT", "EXISTS"];
        exists.extend(marks_asked.iter().map(String::as_str));
        let exists: &[&str] = if marks_asked.is_empty() {
            &["PING"]
        } else {
            &exists
        };
        let replies = self
            .client
            .pipeline(&[
                &["INFO", "server"],
                &["INFO", "replication"],
                &["REPL.TOKEN"],
                &["INFO", "replication"],
                exists,
            ])
            .await?;
        let mut info = ReplicationInfo::parse(&reply_text(&replies, 1, "INFO replication")?)?;
        info.identity = parse_identity(&reply_text(&replies, 0, "INFO server")?);
        let info_after = reply_text(&replies, 3, "INFO replication")
            .ok()
            .and_then(|t| ReplicationInfo::parse(&t).ok());
        let reading = KevyReading {
            info,
            token: replies.get(2).cloned(),
            info_after,
            // A missing file is a watchdog that never clamped: 0.
            watchdog_clamps: self
                .files
                .watchdog_clamps
                .as_ref()
                .map(|p| crate::api::metrics::limits::read_count(p)),
            position_file,
            marks_answer: (!marks_asked.is_empty())
                .then(|| replies.get(4).and_then(exists_flags))
                .flatten(),
            marks_asked,
        };
        let view = self.policy.observed(reading, self.clock());
        if let Some(source) = &view.load_mark {
            self.load_mark(source).await;
        }
        if view.pad_frames > 0 {
            self.pad(view.pad_frames).await;
        }
        self.feed_nudger(view.nudge, view.info.offset);
        Ok(view.info)
    }

    async fn apply(&mut self, target: &DataNodeTarget) -> Result<(), DataNodeError> {
        self.disarm_nudger();
        let step = self.policy.apply(target, self.clock());
        self.run(step).await
    }

    async fn watchdog_clamp(&mut self) -> Result<(), DataNodeError> {
        self.disarm_nudger();
        let step = self.policy.watchdog_clamp();
        self.run(step).await
    }

    fn watchdog_silence_began(&mut self) {
        self.policy.watchdog_silence_began();
    }

    async fn fence_blind(&mut self) -> Result<(), DataNodeError> {
        self.disarm_nudger();
        let step = self.policy.fence_blind();
        self.run(step).await
    }

    fn satisfies(&self, info: &ReplicationInfo, target: &DataNodeTarget) -> bool {
        self.policy.satisfies(info, target, self.clock().mono)
    }

    fn new_incarnation(&mut self) {
        self.disarm_nudger();
        let clock = self.clock();
        self.policy.new_incarnation(clock);
    }

    fn take_aborts(&mut self) -> AbortTally {
        std::mem::take(&mut self.aborts)
    }

    fn take_ack_nudges(&mut self) -> u64 {
        self.nudger
            .as_ref()
            .map_or(0, |n| n.sent.swap(0, Ordering::Relaxed))
    }

    fn take_padded_frames(&mut self) -> u64 {
        std::mem::take(&mut self.padded_frames)
    }
}
