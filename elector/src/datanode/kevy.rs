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
//!   position ([`super::kevy_files`]);
//! - the acknowledgement nudger's task ([`super::ack_nudge`]) and the
//!   padding frames the policy asks for ([`super::kevy_pad`]).
//!
//! What the pipelines ask and how their replies are read is data
//! ([`super::kevy_pipeline`]); this file only sends them.
//!
//! Run kevy with `threads = 1`: with several shards its offsets are per
//! shard.

use super::ack_nudge::{Nudger, ACK_NUDGE};
use super::client::{Credentials, RespClient};
pub(crate) use super::kevy_files::SharedFiles;
use super::kevy_mark::MarkStep;
use super::kevy_pad::FRAMES_PER_BATCH;
use super::kevy_pipeline::{self as pipeline, Commands};
use super::kevy_policy::{
    Clock, KevyCommand, KevyOutcome, KevyPolicy, KevySettings, KevyStep, PipelineRead, Release,
};
use super::kevy_quiesce::QUIESCE_TIMEOUT_MS;
use super::kevy_stream::UpstreamAt;
use super::stale_connect::{abort_until_done, AbortTally};
use super::{resolve, DataNodeAdapter, DataNodeError, NowhereHold, ReplicationInfo, NOWHERE};
use crate::core::{DataNodeTarget, Millis};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::watch;

/// The `[replication] reconnect_window_ms` our configurations give kevy
/// (kevy's own default is 60 s): see [`super::kevy_hold`].
pub(crate) const DEFAULT_RECONNECT_WINDOW: Duration = Duration::from_millis(1_000);

/// How often an upstream is probed while we wait for its promotion.
const PROMOTION_POLL: Duration = Duration::from_millis(20);

pub struct KevyNode {
    client: RespClient,
    credentials: Credentials,
    /// A client of the upstream we wait for (its client address).
    upstream_probe: Option<(String, RespClient)>,
    policy: KevyPolicy,
    nowhere_hold: Option<NowhereHold>,
    files: SharedFiles,
    nudger: Nudger,
    aborts: AbortTally,
    padded_frames: u64,
    started: Instant,
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
        let nudger = Nudger::new(address, credentials, settings.ack_nudge);
        let mut policy = KevyPolicy::new(settings, wall_ms());
        // The elector's adapters resume the watch an earlier elector kept
        // (`kevy_policy::watch`); the watchdog's keeps none.
        if files.upstream.is_some() {
            policy.resume_watch(files.read_watch().as_deref(), files.watchdog_clamps());
        }
        KevyNode {
            client: RespClient::new(address, credentials),
            credentials: credentials.clone(),
            upstream_probe: None,
            nudger,
            policy,
            nowhere_hold: None,
            files,
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

    /// Writes the watch file when the policy's watch changed.
    fn write_watch(&mut self) {
        if let Some(text) = self.policy.take_watch_write() {
            self.files.write_watch(text.as_deref());
        }
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
                    if let Some(text) = self.policy.take_position_write() {
                        self.files.write_position(&text);
                    }
                    self.write_watch();
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
                    self.files.unvouch_position();
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

    /// The `REPLICAOF` pipeline ([`pipeline::replicaof`]), cutting short
    /// what the policy said kevy's join waits for.
    async fn replicaof(
        &mut self,
        to: Option<(String, u16)>,
        release: Release,
        mark: Option<MarkStep>,
    ) -> Result<PipelineRead, DataNodeError> {
        let commands = pipeline::replicaof(to.as_ref(), mark.as_ref());
        let (done_tx, done_rx) = watch::channel(false);
        let command = async {
            let replies = send(&mut self.client, &commands).await;
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
        pipeline::replicated(&commands, &replies, mark.as_ref())
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
}

/// Sends an owned pipeline.
async fn send(
    client: &mut RespClient,
    commands: &Commands,
) -> Result<Vec<redis::Value>, DataNodeError> {
    let words: Vec<Vec<&str>> = commands
        .iter()
        .map(|c| c.iter().map(String::as_str).collect())
        .collect();
    let refs: Vec<&[&str]> = words.iter().map(Vec::as_slice).collect();
    client.pipeline(&refs).await
}

impl DataNodeAdapter for KevyNode {
    fn kind(&self) -> &'static str {
        "kevy"
    }

    async fn observe(&mut self) -> Result<ReplicationInfo, DataNodeError> {
        // The position file is read first, so that the same pipeline asks
        // whether its process mark is in this process (`kevy_mark`).
        let position_file = self.files.read_position();
        let marks_asked = self.policy.marks_to_check(position_file.as_deref());
        let replies = send(&mut self.client, &pipeline::observe(&marks_asked)).await?;
        let clamps = self.files.watchdog_clamps();
        let reading = pipeline::observed(&replies, position_file, clamps, marks_asked)?;
        let view = self.policy.observed(reading, self.clock());
        self.write_watch();
        if let Some(source) = &view.load_mark {
            self.load_mark(source).await;
        }
        if view.pad_frames > 0 {
            self.pad(view.pad_frames).await;
        }
        self.nudger.feed(view.nudge, view.info.offset);
        Ok(view.info)
    }

    async fn apply(&mut self, target: &DataNodeTarget) -> Result<(), DataNodeError> {
        self.nudger.disarm();
        let step = self.policy.apply(target, self.clock());
        self.run(step).await
    }

    async fn watchdog_clamp(&mut self) -> Result<(), DataNodeError> {
        self.nudger.disarm();
        let step = self.policy.watchdog_clamp();
        self.run(step).await
    }

    fn watchdog_silence_began(&mut self) {
        self.policy.watchdog_silence_began();
    }

    async fn fence_blind(&mut self) -> Result<(), DataNodeError> {
        self.nudger.disarm();
        let step = self.policy.fence_blind();
        self.run(step).await
    }

    fn satisfies(&self, info: &ReplicationInfo, target: &DataNodeTarget) -> bool {
        self.policy.satisfies(info, target, self.clock().mono)
    }

    fn new_incarnation(&mut self) {
        self.nudger.disarm();
        let clock = self.clock();
        self.policy.new_incarnation(clock);
    }

    fn take_aborts(&mut self) -> AbortTally {
        std::mem::take(&mut self.aborts)
    }

    fn take_ack_nudges(&mut self) -> u64 {
        self.nudger.take_sent()
    }

    fn take_padded_frames(&mut self) -> u64 {
        std::mem::take(&mut self.padded_frames)
    }
}
