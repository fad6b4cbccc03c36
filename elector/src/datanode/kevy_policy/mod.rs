//! kevy 7.0.0's rules as a pure policy (docs/architecture.md §kevy;
//! protocol §6.4, §6.10): readings in (`INFO`, `REPL.TOKEN`, the watchdog's
//! clamp count, the shared position file, the clock), commands or a typed
//! refusal out. `KevyNode` (`kevy.rs`) only carries the commands out, and the
//! simulator runs this very policy against its kevy server model, so the
//! rules that bit us run under the seeds, not only against real kevy.
//!
//! Each operation on the node (a target to apply, the blind fence, the
//! watchdog's clamp) is a step machine: [`KevyPolicy::apply`] (and its
//! siblings) return the first [`KevyStep`], [`KevyPolicy::resume`] takes the
//! outcome of each command and returns the next, until `Done`. What the
//! rules are, in one place:
//! - **promotion** (`REPLICAOF NO ONE`) waits out the acknowledgement records
//!   of the node's last primary term ([`super::kevy_hold`]), then lifts any
//!   quiesce; the node is then the writable primary we made;
//! - **a lapsed lease** keeps a primary a primary, quiesced, so its feed
//!   generation survives a quorum flap ([`super::kevy_quiesce`]); the
//!   quiesce gives way to demotion once its oldest handover thread is 60 s
//!   old (the core then resigns: a promotion is a new stream, §6.10);
//! - **a handover** quiesces a primary, never demotes it;
//! - **following** reads the node first (a primary our quiesce does not
//!   fence, a fence lifted by hand, is demoted before anything else), then
//!   waits until the upstream reports itself a primary, and reads where its
//!   feed was (the join floor of [`super::kevy_stream`]);
//! - **every `REPLICAOF`** reads the runner's position in the same pipeline
//!   and releases what kevy's join would wait for (a hanging connect to the
//!   upstream it leaves, or our hold at nowhere);
//! - **observations** report the runner's own position (`REPL.TOKEN`), the
//!   feed generation as the stream, pad past acknowledgements kept from an
//!   earlier generation, and arm the acknowledgement nudger.

mod new_generation;
mod observe;
mod watch;

use super::kevy_hold::PromotionHold;
pub use super::kevy_mark::MarkStep;
use super::kevy_mark::{is_sha, ProcessMarks};
use super::kevy_quiesce::Quiesce;
use super::kevy_stream::{FileHeld, StreamPosition, UpstreamAt};
use super::{DataNodeError, ReplicationInfo, NOWHERE};
use crate::core::{DataNodeTarget, Millis};
use new_generation::Unnamed;
use watch::{WatchFile, Watched};

pub use observe::{KevyReading, KevyView, NudgeView};

/// How long one attempt to follow a new primary waits for its kevy to
/// report itself a primary (a replica of a kevy replica acknowledges
/// offsets of its old feed generation, which `WAIT` would count once it is
/// promoted: `tests/kevy_repromotion.rs`).
pub const PROMOTION_WAIT_MS: Millis = 1_000;

/// The clocks the policy reads: the executor's monotonic milliseconds, and
/// the wall clock it shares with the watchdog (another process) through the
/// position file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Clock {
    pub mono: Millis,
    pub wall: u64,
}

/// What a `REPLICAOF` must cut short for kevy to answer without waiting on
/// its replication thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Release {
    Nothing,
    /// Hanging connects to the upstream the node leaves ([`super::stale_connect`]).
    HangingConnects {
        host: String,
        port: u16,
    },
    /// Our hold of its connects at [`NOWHERE`] ([`super::nowhere_hold`]).
    HeldAtNowhere,
}

/// One command for the executor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KevyCommand {
    /// `INFO replication` (and `INFO server`'s identity), fresh.
    ReadRole,
    /// Resolve a member's configured data address (`host:port`).
    Resolve { addr: String },
    /// Probe the upstream at its client address until it reports itself a
    /// primary (`within` ms at most), then read its feed (`REPL.TOKEN`).
    AwaitPrimary { addr: String, within: Millis },
    /// `INFO server`, `INFO replication`, `REPL.TOKEN` and `REPLICAOF` in one
    /// pipeline (`to: None`: `NO ONE`), releasing `release` meanwhile; with
    /// our process mark checked, or loaded, on the same connection first
    /// ([`super::kevy_mark`]). `unvouch_first`: strip the mark from the
    /// shared position file before sending (the node may take another
    /// stream's data after this command).
    ReplicaOf {
        to: Option<(String, u16)>,
        release: Release,
        mark: Option<MarkStep>,
        unvouch_first: bool,
    },
    /// `FAILOVER <nowhere> TIMEOUT <QUIESCE_TIMEOUT_MS>`: writes refused.
    Quiesce,
    /// `FAILOVER ABORT`.
    LiftQuiesce,
    /// Wait this long before the next command.
    Sleep(Millis),
}

/// What the pipeline of a `REPLICAOF` read before it (raw replies).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PipelineRead {
    pub server: Option<String>,
    pub replication: Option<String>,
    pub token: Option<redis::Value>,
    /// `INFO replication` read again after the token: a role changed by
    /// someone else between the two readings pairs the token with the
    /// wrong role, and the position is then not read (as in a poll,
    /// [`KevyReading::info_after`]). `None`: not read (the old shape).
    pub replication_after: Option<String>,
    /// `SCRIPT EXISTS <mark>`'s answer when the command asked
    /// (`None`: not asked, or unreadable).
    pub mark_present: Option<bool>,
    /// `SCRIPT LOAD`'s answer (the mark's sha) when the command loaded one.
    pub mark_loaded: Option<String>,
}

/// The outcome of the last command.
#[derive(Debug)]
pub enum KevyOutcome {
    Role(Result<ReplicationInfo, DataNodeError>),
    Resolved(Result<(String, u16), DataNodeError>),
    /// `None`: the upstream did not become a primary in time.
    Upstream(Option<UpstreamAt>),
    Replicated(Result<PipelineRead, DataNodeError>),
    Quiesced(Result<(), DataNodeError>),
    Lifted(Result<(), DataNodeError>),
    Slept,
}

/// What the executor does next.
#[derive(Debug)]
pub enum KevyStep {
    Run(KevyCommand),
    Done(Result<(), DataNodeError>),
}

/// The operation in progress and where it stands.
#[derive(Debug)]
enum Op {
    /// `REPLICAOF NO ONE`, then lift any quiesce.
    Promote,
    /// Read the role; wait for old handover threads; quiesce.
    HandOver,
    /// A lapsed lease's fence: the quiesce, or demotion.
    FencePrimary,
    /// Demotion to a replica of nowhere, then lift any quiesce.
    Isolate,
    /// Resolve; read our own node (a writable primary is demoted first:
    /// `FenceBeforeFollow`); await the upstream's promotion; `REPLICAOF`;
    /// lift.
    Follow {
        addr: String,
        at: Option<(String, u16)>,
        upstream: UpstreamAt,
    },
    /// Our node reads as a primary not fenced by our quiesce while it is to
    /// follow `addr` (a fence lifted by hand, §6.4): demoted to nowhere
    /// before the wait for `addr`'s promotion, so no wait ever runs with our
    /// own node writable and unread.
    FenceBeforeFollow {
        addr: String,
        at: Option<(String, u16)>,
    },
    /// `REPLICAOF` nowhere, nothing read first.
    FenceBlind,
    /// The watchdog: read the role; a replica of nowhere is left as it is.
    WatchdogClamp,
}

/// The policy's settings (from `data_node`).
#[derive(Debug, Clone)]
pub struct KevySettings {
    /// Added to a member's client port to reach where its replicas dial
    /// (its replication gate, §6.10).
    pub replication_port_offset: u16,
    pub abort_stale_connects: bool,
    /// The elector holds this node's connects at [`NOWHERE`].
    pub nowhere_hold: bool,
    pub ack_nudge: bool,
    /// kevy's `[replication] reconnect_window_ms`.
    pub reconnect_window_ms: Millis,
    /// How long a lapsed lease's quiesce may fence the primary before it
    /// gives way to demotion (`data_node.kevy_quiesce_fence_limit_ms`,
    /// [`super::kevy_quiesce`]).
    pub quiesce_fence_limit_ms: Millis,
    /// A test-only switch: report the first master reading after a
    /// promotion at once, as the policy did before "the tick after a
    /// promotion" (`new_generation.rs`), so the simulator can show the
    /// mistake (`false` everywhere else).
    pub report_before_naming: bool,
    /// A test-only switch: believe the offset a replica brings over when
    /// it moves to another feed generation by itself, as the adapter did
    /// before the contract found it (`kevy_stream::ResyncedByItself`), so
    /// the simulator can show the mistake (`false` everywhere else).
    pub believe_a_resync_by_itself: bool,
    /// Random, drawn once per adapter instance: the seed of the process
    /// marks this adapter loads ([`super::kevy_mark`]); `None`: no marks
    /// (a position held before our restart is then never trusted).
    pub mark_seed: Option<u128>,
}

/// The policy's memory of one kevy process (and of its own commands).
#[derive(Debug)]
pub struct KevyPolicy {
    settings: KevySettings,
    hold: PromotionHold,
    quiesce: Quiesce,
    stream: StreamPosition,
    /// The member address we last told it to follow, and where that is.
    following: Option<(String, String, u16)>,
    /// The replication address kevy itself reported following last.
    upstream_seen: Option<(String, u16)>,
    /// A reading since our last `REPLICAOF` showed the node following the
    /// upstream we set (`following`): a later one that shows it elsewhere
    /// is a runner someone else ended, counted once.
    following_seen: bool,
    /// Runners we set that someone else ended (§6.10, "A replica's tail").
    runners_ended_by_others: u64,
    /// The watch an earlier elector kept (`watch`), until a reading of
    /// the node is checked against it or a command of ours moves it.
    resumed: Option<Watched>,
    /// A runner we set was ended by someone else and the node has not
    /// joined an upstream we set since (`watch`: kept in the file).
    ended_unread: bool,
    /// The watch file's text as last written or read; `None`: this policy
    /// keeps no watch file (the watchdog's, a test's).
    watch_file: Option<Option<String>>,
    /// The last target we applied made it the writable primary.
    writable_applied: bool,
    /// The watchdog's clamp count at our last reading, and when.
    watchdog_clamps_seen: Option<u64>,
    watchdog_clamps_read_at: Option<Millis>,
    /// Since when the node has been armed for the nudger without a break.
    nudge_armed_since: Option<Millis>,
    /// Stale acknowledgements logged (once per occurrence), and too far.
    stale_logged: bool,
    stale_far_logged: bool,
    /// Our last promotion, until kevy names its new feed generation.
    unnamed: Option<Unnamed>,
    /// The process marks we load and check ([`super::kevy_mark`]).
    marks: Option<ProcessMarks>,
    /// The mark of the process the core set out to join from (its durable
    /// `joining_process`, §6.10 "A join outlives its elector"), asked about
    /// in every poll so a reading can say the process is still that one.
    joining_process: Option<String>,
    op: Option<Op>,
}

impl KevyPolicy {
    /// A policy whose shared-file positions count from `started_wall`.
    pub fn new(settings: KevySettings, started_wall: u64) -> KevyPolicy {
        let believe_a_resync_by_itself = settings.believe_a_resync_by_itself;
        KevyPolicy {
            hold: PromotionHold::new(settings.reconnect_window_ms),
            marks: settings.mark_seed.map(ProcessMarks::new),
            quiesce: Quiesce::with_limit(settings.quiesce_fence_limit_ms),
            settings,
            stream: StreamPosition::since(started_wall)
                .believing_a_resync_by_itself(believe_a_resync_by_itself),
            following: None,
            upstream_seen: None,
            following_seen: false,
            runners_ended_by_others: 0,
            resumed: None,
            ended_unread: false,
            watch_file: None,
            writable_applied: false,
            watchdog_clamps_seen: None,
            watchdog_clamps_read_at: None,
            nudge_armed_since: None,
            stale_logged: false,
            stale_far_logged: false,
            unnamed: None,
            joining_process: None,
            op: None,
        }
    }

    /// Asks every poll about `mark` too: the process the core's durable
    /// state says a join was set out from (§6.10, "A join outlives its
    /// elector"); found, it is among the reading's process names.
    pub fn ask_about_joining_process(&mut self, mark: Option<String>) {
        self.joining_process = mark.filter(|m| is_sha(m));
    }

    /// Resumes the watch an earlier elector kept in `file` (the text of
    /// `<data_dir>/kevy-upstream`, `watch`), given the watchdog's clamp
    /// count now; from then on [`KevyPolicy::take_watch_write`] says what
    /// to write there. A clamp since the watch was taken voids it: the
    /// watchdog read the runner's position as it detached it.
    pub fn resume_watch(&mut self, file: Option<&str>, clamps_now: Option<u64>) {
        self.watch_file = Some(file.map(str::to_string));
        let file = WatchFile::parse(file.unwrap_or(""));
        if file.unread {
            tracing::warn!(
                "kevy: an earlier elector counted a runner someone else ended, and the node has not joined since: the elector votes as if it held the whole stream until it joins it again"
            );
            self.count_runner_ended_by_others();
        }
        let Some(watched) = file.watched else {
            return;
        };
        if watched.clamped_since(clamps_now) {
            tracing::info!(
                upstream = %watched.host, port = watched.port,
                "kevy: the watchdog clamped this node while no elector ran; the runner it ended was read as it detached it"
            );
            return;
        }
        self.resumed = Some(watched);
    }

    /// The watch file's new text when it changed (`Some(None)`: remove
    /// it); `None` when unchanged or when this policy keeps none.
    pub fn take_watch_write(&mut self) -> Option<Option<String>> {
        let written = self.watch_file.as_mut()?;
        let watched = match (&self.following, &self.resumed) {
            (Some((_, host, port)), _) if self.following_seen => Some(Watched {
                host: host.clone(),
                port: *port,
                clamps: self.watchdog_clamps_seen,
            }),
            (_, resumed) => resumed.clone(),
        };
        let now = WatchFile {
            watched,
            unread: self.ended_unread,
        }
        .render();
        if *written == now {
            return None;
        }
        *written = now.clone();
        Some(now)
    }

    /// The tether says another process answers (§6.8): forget everything
    /// about the old one (its position, its upstream, its quiesce, its
    /// role's history). Its id may be the same (process 1 in a container).
    pub fn new_incarnation(&mut self, clock: Clock) {
        self.stream.new_incarnation(clock.wall);
        self.hold = PromotionHold::new(self.settings.reconnect_window_ms);
        self.quiesce.forget();
        self.following = None;
        self.resumed = None;
        self.upstream_seen = None;
        self.writable_applied = false;
        self.nudge_armed_since = None;
        self.unnamed = None;
        if let Some(marks) = &mut self.marks {
            marks.forget();
        }
        self.op = None;
    }

    /// The shas a poll asks `SCRIPT EXISTS` about, given the shared
    /// position file's text: our mark and the file's ([`super::kevy_mark`]).
    pub fn marks_to_check(&self, position_file: Option<&str>) -> Vec<String> {
        let Some(marks) = &self.marks else {
            return Vec::new();
        };
        let file = position_file.and_then(FileHeld::parse);
        let mut asked = marks.to_check(file.as_ref().and_then(FileHeld::mark));
        if let Some(joining) = &self.joining_process {
            if !asked.contains(joining) {
                asked.push(joining.clone());
            }
        }
        asked
    }

    /// `SCRIPT LOAD` of the source a view asked for answered `sha`.
    pub fn mark_loaded(&mut self, sha: &str) {
        if let Some(marks) = &mut self.marks {
            marks.loaded(sha);
        }
    }

    /// The held position to write to the shared file, once.
    pub fn take_position_write(&mut self) -> Option<String> {
        self.stream.take_write().map(|f| f.render())
    }

    /// This node is the writable primary we made, not quiesced: the only
    /// state in which frames of ours (nudges, padding) may be written.
    pub fn ours_and_writable(&self) -> bool {
        self.writable_applied && self.quiesce.is_lifted()
    }

    /// Starts applying `target`.
    pub fn apply(&mut self, target: &DataNodeTarget, clock: Clock) -> KevyStep {
        // Demotions come before lifting a quiesce, so a draining primary is
        // never writable in between; nothing of ours is written meanwhile.
        self.writable_applied = false;
        self.nudge_armed_since = None;
        let now = clock.mono;
        match target {
            DataNodeTarget::Primary => {
                if let Some(left) = self.hold.remaining(now) {
                    return self.done(Err(DataNodeError::PromotionHeld {
                        remaining_ms: left,
                        window_ms: self.hold.window(),
                    }));
                }
                let command = self.replicaof(None);
                self.start(Op::Promote, command)
            }
            DataNodeTarget::HandingOver => {
                self.following = None;
                self.start(Op::HandOver, KevyCommand::ReadRole)
            }
            DataNodeTarget::FencedPrimary => self.fence_primary(now),
            DataNodeTarget::Isolated => self.isolate(),
            DataNodeTarget::Follow { primary_addr, .. } => self.start(
                Op::Follow {
                    addr: primary_addr.clone(),
                    at: None,
                    upstream: UpstreamAt::NONE,
                },
                KevyCommand::Resolve {
                    addr: primary_addr.clone(),
                },
            ),
        }
    }

    /// Refuses writes without reading anything first (`INFO` fails):
    /// demotion, kevy's only general fence.
    pub fn fence_blind(&mut self) -> KevyStep {
        self.writable_applied = false;
        self.nudge_armed_since = None;
        let command = self.replicaof(Some(nowhere()));
        self.start(Op::FenceBlind, command)
    }

    /// The watchdog's fence (another process, its own policy): the lapsed
    /// lease's, after reading the role (it has not been polling).
    pub fn watchdog_clamp(&mut self) -> KevyStep {
        self.writable_applied = false;
        self.start(Op::WatchdogClamp, KevyCommand::ReadRole)
    }

    /// A new silence of the elector begins (the watchdog): a quiesce set in
    /// an earlier one may since have been lifted or replaced.
    pub fn watchdog_silence_began(&mut self) {
        self.quiesce.forget();
    }

    /// Whether a reading of the node already is `target`.
    pub fn satisfies(&self, info: &ReplicationInfo, target: &DataNodeTarget, now: Millis) -> bool {
        let follows_nowhere = info.follows(NOWHERE.0, NOWHERE.1);
        match target {
            DataNodeTarget::Primary => info.is_master() && self.quiesce.is_lifted(),
            DataNodeTarget::HandingOver => info.is_master() && self.quiesce.is_set(),
            DataNodeTarget::FencedPrimary => {
                (info.is_master() && self.quiesce.fences(now)) || follows_nowhere
            }
            DataNodeTarget::Isolated => follows_nowhere,
            DataNodeTarget::Follow { primary_addr, .. } => self
                .following
                .as_ref()
                .is_some_and(|(a, h, p)| a == primary_addr && info.follows(h, *p)),
        }
    }

    /// Takes the outcome of the last command; returns the next step.
    pub fn resume(&mut self, outcome: KevyOutcome, clock: Clock) -> KevyStep {
        let now = clock.mono;
        let Some(op) = self.op.take() else {
            return KevyStep::Done(Err(DataNodeError::Unreachable(
                "no kevy operation in progress".into(),
            )));
        };
        match (op, outcome) {
            (Op::Promote, KevyOutcome::Replicated(read)) => {
                match self.replaced(read, None, clock) {
                    Err(e) => self.done(Err(e)),
                    Ok(()) => {
                        self.hold.observed(true, now);
                        self.following = None;
                        self.unnamed =
                            (!self.settings.report_before_naming).then(|| Unnamed::promoted(now));
                        self.lift_then_done(Op::Promote)
                    }
                }
            }
            (Op::HandOver, KevyOutcome::Role(Err(e))) => self.done(Err(e)),
            (Op::HandOver, KevyOutcome::Role(Ok(info))) if !info.is_master() => {
                self.done(Err(DataNodeError::Refused {
                    command: "FAILOVER (quiesce)".into(),
                    message: "the node is not a primary; a handover cannot drain it".into(),
                }))
            }
            (Op::HandOver, KevyOutcome::Role(Ok(_))) => match self.quiesce.wait_for_threads(now) {
                Some(ms) => self.start(Op::HandOver, KevyCommand::Sleep(ms)),
                None => self.start(Op::HandOver, KevyCommand::Quiesce),
            },
            (Op::HandOver, KevyOutcome::Slept) => self.start(Op::HandOver, KevyCommand::Quiesce),
            (Op::HandOver, KevyOutcome::Quiesced(r)) => {
                if r.is_ok() {
                    self.quiesce.sent(now);
                }
                self.done(r)
            }
            (Op::FencePrimary, KevyOutcome::Quiesced(Ok(()))) => {
                self.quiesce.sent(now);
                self.following = None;
                self.done(Ok(()))
            }
            // A replica after all: demote.
            (Op::FencePrimary, KevyOutcome::Quiesced(Err(DataNodeError::Refused { .. }))) => {
                self.isolate()
            }
            (Op::FencePrimary, KevyOutcome::Quiesced(Err(e))) => self.done(Err(e)),
            (Op::Isolate, KevyOutcome::Replicated(read)) => {
                match self.left_for_nowhere(read, clock) {
                    Err(e) => self.done(Err(e)),
                    Ok(()) => self.lift_then_done(Op::Isolate),
                }
            }
            (op @ (Op::Promote | Op::Isolate | Op::Follow { .. }), KevyOutcome::Lifted(r)) => {
                if r.is_ok() {
                    self.quiesce.lifted(now);
                    self.writable_applied = matches!(op, Op::Promote);
                }
                self.done(r)
            }
            (Op::Follow { addr, .. }, KevyOutcome::Resolved(Ok((host, client_port)))) => {
                let port = client_port.saturating_add(self.settings.replication_port_offset);
                let at = Some((host, port));
                // Re-applied to the same primary: no new floor to reach.
                if self.following.as_ref().is_some_and(|(a, _, _)| *a == addr) {
                    let to = at.clone();
                    let upstream = UpstreamAt::NONE;
                    let command = self.replicaof(to);
                    return self.start(Op::Follow { addr, at, upstream }, command);
                }
                // Our own node first: a wait of up to PROMOTION_WAIT_MS with
                // it unread would leave a fence lifted by hand in place for
                // each failed wait in a row (simulator seed 1091).
                let upstream = UpstreamAt::NONE;
                self.start(Op::Follow { addr, at, upstream }, KevyCommand::ReadRole)
            }
            (Op::Follow { .. }, KevyOutcome::Resolved(Err(e))) => self.done(Err(e)),
            (Op::Follow { .. }, KevyOutcome::Role(Err(e))) => self.done(Err(e)),
            (Op::Follow { addr, at, .. }, KevyOutcome::Role(Ok(info))) => {
                self.hold.observed(info.is_master(), now);
                if info.is_master() && !self.quiesce.fences(now) {
                    let command = self.replicaof(Some(nowhere()));
                    return self.start(Op::FenceBeforeFollow { addr, at }, command);
                }
                self.await_upstream(addr, at)
            }
            (Op::FenceBeforeFollow { addr, at }, KevyOutcome::Replicated(read)) => {
                match self.left_for_nowhere(read, clock) {
                    Err(e) => self.done(Err(e)),
                    Ok(()) => self.await_upstream(addr, at),
                }
            }
            (Op::Follow { addr, .. }, KevyOutcome::Upstream(None)) => {
                self.done(Err(DataNodeError::UpstreamNotPrimary(addr)))
            }
            (Op::Follow { addr, at, .. }, KevyOutcome::Upstream(Some(upstream))) => {
                let command = self.replicaof(at.clone());
                self.start(Op::Follow { addr, at, upstream }, command)
            }
            (Op::Follow { addr, at, upstream }, KevyOutcome::Replicated(read)) => {
                match self.replaced(read, at.clone(), clock) {
                    Err(e) => self.done(Err(e)),
                    Ok(()) => {
                        self.stream.following(upstream);
                        self.hold.demoted(now);
                        if let Some((host, port)) = at.clone() {
                            self.following = Some((addr.clone(), host, port));
                            self.following_seen = false;
                        }
                        self.lift_then_done(Op::Follow { addr, at, upstream })
                    }
                }
            }
            (Op::FenceBlind, KevyOutcome::Replicated(read)) => {
                let result = self.replaced(read, Some(nowhere()), clock);
                if result.is_ok() {
                    self.hold.demoted(now);
                }
                self.following = None;
                self.done(result)
            }
            (Op::WatchdogClamp, KevyOutcome::Role(read)) => {
                if let Ok(info) = &read {
                    self.hold.observed(info.is_master(), now);
                    // Already fenced: a `REPLICAOF` would only restart kevy's
                    // thread, whose connect the silent elector may hold at
                    // nowhere and could not release.
                    if !info.is_master() && info.follows(NOWHERE.0, NOWHERE.1) {
                        self.following = None;
                        return self.done(Ok(()));
                    }
                }
                self.fence_primary(now)
            }
            (op, outcome) => {
                tracing::error!(?op, ?outcome, "kevy policy: an outcome out of turn");
                self.done(Err(DataNodeError::Unreachable(
                    "kevy executor answered out of turn".into(),
                )))
            }
        }
    }

    // ----- the rules' building blocks -----

    fn start(&mut self, op: Op, command: KevyCommand) -> KevyStep {
        self.op = Some(op);
        KevyStep::Run(command)
    }

    fn done(&mut self, result: Result<(), DataNodeError>) -> KevyStep {
        self.op = None;
        KevyStep::Done(result)
    }

    /// Lifts a quiesce we may have set, then ends `op`; a promotion makes
    /// the node the writable primary we made once nothing is quiesced.
    fn lift_then_done(&mut self, op: Op) -> KevyStep {
        if self.quiesce.is_lifted() {
            self.writable_applied = matches!(op, Op::Promote);
            return self.done(Ok(()));
        }
        self.start(op, KevyCommand::LiftQuiesce)
    }

    /// The lapsed lease's fence (see the module doc).
    fn fence_primary(&mut self, now: Millis) -> KevyStep {
        let outlived = self.quiesce.outlived(now);
        if self.quiesce.fences(now) {
            self.following = None;
            return self.done(Ok(()));
        }
        if self.hold.was_primary() && !outlived {
            return self.start(Op::FencePrimary, KevyCommand::Quiesce);
        }
        self.isolate()
    }

    /// A `REPLICAOF` towards nowhere came back: the node is a replica we
    /// made, following nobody.
    fn left_for_nowhere(
        &mut self,
        read: Result<PipelineRead, DataNodeError>,
        clock: Clock,
    ) -> Result<(), DataNodeError> {
        self.replaced(read, Some(nowhere()), clock)?;
        self.hold.demoted(clock.mono);
        self.following = None;
        Ok(())
    }

    /// Waits for `addr` to report itself a primary, then follows it.
    fn await_upstream(&mut self, addr: String, at: Option<(String, u16)>) -> KevyStep {
        let command = KevyCommand::AwaitPrimary {
            addr: addr.clone(),
            within: PROMOTION_WAIT_MS,
        };
        let upstream = UpstreamAt::NONE;
        self.start(Op::Follow { addr, at, upstream }, command)
    }

    fn isolate(&mut self) -> KevyStep {
        let command = self.replicaof(Some(nowhere()));
        self.start(Op::Isolate, command)
    }

    /// A `REPLICAOF` towards `to` (`None`: no one), with what to release;
    /// our process mark checked (or, with none, loaded) in the same
    /// pipeline, and the shared file's stripped first unless the node goes
    /// nowhere (`kevy_mark`).
    fn replicaof(&mut self, to: Option<(String, u16)>) -> KevyCommand {
        let release = self.leaving(to.as_ref());
        let unvouch_first = to.as_ref().is_none_or(|t| (t.0.as_str(), t.1) != NOWHERE);
        let mark = self.marks.as_mut().and_then(ProcessMarks::step);
        KevyCommand::ReplicaOf {
            to,
            release,
            mark,
            unvouch_first,
        }
    }

    fn own_mark(&self) -> Option<String> {
        self.marks
            .as_ref()
            .and_then(|m| m.own().map(str::to_string))
    }

    /// What a `REPLICAOF` towards `to` must cut short (see the executor's
    /// [`Release`]): kevy restarts its thread even towards the address it
    /// follows, so a connect we hold is released whenever the thread may be
    /// at [`NOWHERE`] (also when we cannot tell).
    pub(crate) fn leaving(&self, to: Option<&(String, u16)>) -> Release {
        if !self.settings.abort_stale_connects {
            return Release::Nothing;
        }
        let from = self.upstream_seen.clone().or_else(|| {
            self.following
                .as_ref()
                .map(|(_, host, port)| (host.clone(), *port))
        });
        let at_nowhere = from.as_ref().is_none_or(|f| (f.0.as_str(), f.1) == NOWHERE);
        match from {
            _ if at_nowhere && self.settings.nowhere_hold => Release::HeldAtNowhere,
            Some(from) if !at_nowhere => {
                if to.is_some_and(|t| *t == from) {
                    Release::Nothing
                } else {
                    Release::HangingConnects {
                        host: from.0,
                        port: from.1,
                    }
                }
            }
            _ => Release::Nothing,
        }
    }

    /// A `REPLICAOF`'s pipeline came back: the runner's position read
    /// before it is held; the node now follows `to`.
    fn replaced(
        &mut self,
        read: Result<PipelineRead, DataNodeError>,
        to: Option<(String, u16)>,
        clock: Clock,
    ) -> Result<(), DataNodeError> {
        let read = read?;
        let before = read.replication_after.as_deref();
        self.check_resumed_before_our_move(before.or(read.replication.as_deref()));
        // Our mark, asked in the same pipeline: the position it read is
        // then this very process's (`kevy_mark`).
        // The pipeline asks about our own mark only: at most that one is
        // confirmed, and it is the one the position file's entry carries.
        let own = self.own_mark();
        let confirmed = match (&mut self.marks, own, &read.mark_loaded) {
            // Loaded on this connection: in this very process.
            (Some(marks), _, Some(sha)) => {
                marks.loaded(sha);
                marks.own().map(str::to_string)
            }
            (Some(marks), Some(own), None) => {
                let asked = [own];
                let answer = read.mark_present.map(|p| vec![p]);
                marks.answered(&asked, answer.as_deref()).into_iter().next()
            }
            _ => None,
        };
        self.stream
            .marks_confirmed(confirmed.iter().cloned().collect());
        self.stream.read_in_pipeline(
            read.server.as_deref(),
            read.replication.as_deref(),
            read.token.as_ref(),
            read.replication_after.as_deref(),
            confirmed.as_deref(),
            clock.wall,
        );
        self.upstream_seen = to.filter(|t| (t.0.as_str(), t.1) != NOWHERE);
        Ok(())
    }
}

fn nowhere() -> (String, u16) {
    (NOWHERE.0.to_string(), NOWHERE.1)
}

#[cfg(test)]
mod tests;
