//! The data-node adapter's decisions as a pure state machine (docs/protocol.md
//! §6.4.1, §6.8): observation in, command out. The tokio adapter task and
//! the simulator both run it, so the simulator exercises the very rules the
//! real adapter follows instead of a model of them.
//!
//! One poll round, for the newest target:
//! 1. a new fence goes out *before* anything is read while the node may be
//!    writable (reading first would add a command, and its timeout, to the
//!    fence's latency);
//! 2. the node is read; another process answering (or a writable node turned
//!    replica when we cannot tell) is a restart: a new generation, the
//!    start-up clamp at once, and nothing else until the core re-issues a
//!    target for the new generation; the same process demoted by someone
//!    else (the watchdog, an operator) keeps its data, but a writable target
//!    it was demoted from is never applied again;
//! 3. the target is applied unless the node already satisfies it;
//! 4. a node that cannot be read but must not take writes gets a blind fence;
//! 5. after a change the node is read again, so the reported offset is the
//!    one after the apply.

pub use super::tether::TetherCheck;
use super::{DataNodeError, ReplicationInfo};
use crate::core::{DataNodeTarget, Millis, Observation, StreamId};

/// What the executor must do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Make the node what the target says (idempotent).
    Apply(DataNodeTarget),
    /// Read `INFO` (and the backend's fence settings), fresh.
    Observe,
    /// Refuse writes without reading anything first.
    FenceBlind,
}

/// A read of the node, with whether it already is the round's target
/// (backend-specific: the executor asks its adapter, `satisfies`), and what
/// the tether said of the process (§6.8, `tether.rs`).
#[derive(Debug, Clone)]
pub struct Observed {
    pub info: ReplicationInfo,
    pub satisfies: bool,
    pub tether: TetherCheck,
}

/// The result of the last command.
// One outcome lives per data-node command and is consumed at once; boxing
// the read would only add an allocation per poll.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Outcome {
    Applied(Result<(), DataNodeError>),
    Observed(Result<Observed, DataNodeError>),
    /// A read that failed, with what the tether said right after it (an
    /// executor without a tether answers `Observed(Err(..))`: nothing
    /// known of the process).
    Unread {
        error: DataNodeError,
        tether: TetherCheck,
    },
    BlindFenced(Result<(), DataNodeError>),
}

// A `Step` lives for one data-node command and is never stored in bulk;
// boxing the report would only add an allocation per round.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Step {
    Run(Command),
    Done(RoundReport),
}

/// What one round found, for the core (`obs`) and for operators.
#[derive(Debug, Clone, Default)]
pub struct RoundReport {
    pub obs: Observation,
    pub(crate) info: Option<ReplicationInfo>,
    pub(crate) error: Option<String>,
    /// A fence target was applied in this round, this long after it was
    /// first seen (`elector_fence_apply_seconds`, §6.2.1).
    pub(crate) fence_applied_after_ms: Option<Millis>,
    /// A fence target was refused or not answered in this round: the data
    /// node may still take writes it should not (`elector_fence_failures`).
    pub(crate) fence_failed: bool,
}

/// The driver's memory of the data node between rounds.
#[derive(Debug, Default, Clone, PartialEq, Eq, Hash)]
struct Tracker {
    applied_seq: u64,
    offset_at_apply: Option<u64>,
    identity: Option<String>,
    /// The watchdog's clamp count at the last read (kevy: its quiesce does
    /// not show in `INFO`, the count does).
    watchdog_clamps: Option<u64>,
    generation: u64,
    /// The last target applied was writable (a primary's data node does not
    /// turn into a replica by itself: if it does, it restarted).
    applied_writable: bool,
    /// When the newest target was first seen (for the fence latency).
    target_seen: Option<(u64, Millis)>,
    /// A writable target with a sequence number at or below this is not
    /// applied again: the node was demoted by someone else while it held
    /// it, and only a target the core issues afterwards may undo that.
    hold_writable_through: u64,
    /// How many such demotions were seen (reported to the core).
    overridden: u64,
    /// The node may take writes: nothing non-writable has been applied since
    /// we last tried a writable target, or since start. Only then must a
    /// fence go out before anything is read; on a node already fenced a
    /// read first spares a redundant command (on kevy, a `REPLICAOF` that
    /// restarts its replication thread).
    may_be_writable: bool,
}

/// What a read learns about who changed the data node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Change {
    None,
    /// Another process answers, or a writable node turned replica and we
    /// cannot tell whether it is the same process: its data is not trusted.
    Restarted,
    /// The same process, writable when we left it, is a replica now: the
    /// watchdog's clamp or an operator. Its data is intact.
    DemotedByOthers,
}

impl Tracker {
    /// Decides from `info` and the tether whether the data node restarted
    /// or was demoted under us.
    fn classify(&mut self, info: &ReplicationInfo, tether: TetherCheck, seq: u64) -> Change {
        // `None`: one side's identity is unknown, so a demotion cannot be
        // told apart from a restart. The tether is the identity that never
        // lies (a process id is reused, a kevy in its own PID namespace is
        // process 1 again): a replaced tether is a restart, whatever the
        // id says; a live one is the same process.
        let same_process = match (tether, &self.identity, &info.identity) {
            (TetherCheck::Replaced(_), _, _) => Some(false),
            (_, Some(old), Some(new)) if old != new => Some(false),
            (TetherCheck::Same(_), _, _) => Some(true),
            (_, Some(old), Some(new)) => Some(old == new),
            _ => None,
        };
        if info.identity.is_some() {
            self.identity = info.identity.clone();
        }
        // The watchdog clamped since the last read: on kevy a quiesce, which
        // leaves the node a master, so only its count says it happened.
        let clamped = self.watchdog_clamps.is_some() && info.watchdog_clamps > self.watchdog_clamps;
        if info.watchdog_clamps.is_some() {
            self.watchdog_clamps = info.watchdog_clamps;
        }
        let demoted =
            self.applied_writable && self.applied_seq == seq && (!info.is_master() || clamped);
        let change = match same_process {
            Some(false) => Change::Restarted,
            Some(true) if demoted => Change::DemotedByOthers,
            None if demoted => Change::Restarted,
            _ => return Change::None,
        };
        self.applied_writable = false;
        if change == Change::Restarted {
            self.generation += 1;
        } else {
            self.hold_writable_through = seq;
            self.overridden += 1;
        }
        change
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Phase {
    FenceFirst,
    ObserveBefore,
    RestartClamp,
    Apply,
    BlindFence,
    ObserveAfter,
}

/// One round in progress.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Round {
    seq: u64,
    generation: u64,
    target: DataNodeTarget,
    phase: Phase,
    before: Option<Result<ReplicationInfo, DataNodeError>>,
    restarted: bool,
    needs_apply: bool,
    error: Option<String>,
    fence_applied_after_ms: Option<Millis>,
    fence_failed: bool,
    /// The tether's answer after this round's first read, when it failed.
    unread_tether: Option<TetherCheck>,
}

/// What a round does next: a command, or end with this read (boxed: a read is
/// ten times the size of a command, and rounds pass `Progress` by value).
enum Progress {
    Run(Command),
    Finish(Box<Result<ReplicationInfo, DataNodeError>>),
}

impl Round {
    /// Moves the round on by one command's outcome.
    fn advance(
        &mut self,
        t: &mut Tracker,
        backend: &str,
        outcome: Outcome,
        now: Millis,
    ) -> Progress {
        match (self.phase, outcome) {
            (Phase::FenceFirst, Outcome::Applied(result)) => {
                match result {
                    Ok(()) => {
                        tracing::info!(target = ?self.target, seq = self.seq, backend, "data node fenced");
                        t.applied_seq = self.seq;
                        t.applied_writable = false;
                        t.may_be_writable = false;
                        self.fence_applied_after_ms = t.fence_latency(now);
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, target = ?self.target, backend, "fencing the data node failed");
                        self.error = Some(e.to_string());
                        self.fence_failed = true;
                    }
                }
                self.run(Phase::ObserveBefore, Command::Observe)
            }
            (Phase::ObserveBefore, Outcome::Observed(result)) => {
                self.read_before(t, backend, result)
            }
            (Phase::ObserveBefore, Outcome::Unread { error, tether }) => {
                self.unread_tether = Some(tether);
                self.read_before(t, backend, Err(error))
            }
            (Phase::RestartClamp, Outcome::Applied(result)) => {
                if let Err(e) = result {
                    self.error = Some(e.to_string());
                }
                self.apply_if_needed(t)
            }
            (Phase::Apply, Outcome::Applied(result)) => {
                self.applied(t, backend, result, now);
                self.blind_fence_if_unread(t)
            }
            (Phase::BlindFence, Outcome::BlindFenced(result)) => {
                if let Err(e) = result {
                    tracing::debug!(error = %e, "blind fence failed too");
                }
                self.read_after_if_changed()
            }
            (Phase::ObserveAfter, Outcome::Observed(read)) => {
                self.read_after(t, read.map(|o| o.info))
            }
            (Phase::ObserveAfter, Outcome::Unread { error, .. }) => self.read_after(t, Err(error)),
            (phase, outcome) => {
                // An executor that answers out of turn: end the round with
                // what is known rather than act on a mismatched result.
                tracing::error!(?phase, ?outcome, "data-node driver: unexpected outcome");
                Progress::Finish(Box::new(self.take_before()))
            }
        }
    }

    /// The read after a change ends the round; its offset is the one
    /// reported with the applied target.
    fn read_after(
        &mut self,
        t: &mut Tracker,
        after: Result<ReplicationInfo, DataNodeError>,
    ) -> Progress {
        if self.needs_apply && self.error.is_none() {
            t.offset_at_apply = after.as_ref().ok().map(|i| i.offset);
        }
        Progress::Finish(Box::new(after))
    }

    fn run(&mut self, phase: Phase, command: Command) -> Progress {
        self.phase = phase;
        Progress::Run(command)
    }

    fn take_before(&mut self) -> Result<ReplicationInfo, DataNodeError> {
        self.before
            .take()
            .unwrap_or_else(|| Err(DataNodeError::Unreachable("no read this round".into())))
    }

    /// The first read: restart or demotion by others, then what to apply.
    fn read_before(
        &mut self,
        t: &mut Tracker,
        backend: &str,
        result: Result<Observed, DataNodeError>,
    ) -> Progress {
        let satisfied = result.as_ref().is_ok_and(|o| o.satisfies);
        let tether = result.as_ref().map_or(TetherCheck::Down, |o| o.tether);
        let before = result.map(|o| o.info);
        if let Ok(info) = &before {
            match t.classify(info, tether, self.seq) {
                Change::None => {}
                Change::Restarted => {
                    self.restarted = true;
                    t.may_be_writable = true;
                    tracing::warn!(generation = t.generation, identity = ?info.identity, backend,
                        "data node restarted under us: clamping it until the elector decides again");
                }
                Change::DemotedByOthers => {
                    tracing::warn!(seq = self.seq, backend,
                        "data node demoted by someone else (watchdog or operator), same process: writable again only when the elector decides so anew");
                }
            }
        }
        // A new target the node already satisfies (kevy: fenced primary and
        // isolated are the same command) needs no command at all.
        let current = self.generation == t.generation;
        if current && satisfied && self.seq > t.applied_seq {
            t.applied_seq = self.seq;
            t.applied_writable = self.target.writable();
            t.may_be_writable = self.target.writable();
            t.offset_at_apply = before.as_ref().ok().map(|i| i.offset);
        }
        // A writable target the node was demoted from by someone else is
        // stale: the core re-decides (its lease first) and issues a new one.
        let held = self.target.writable() && self.seq <= t.hold_writable_through;
        self.needs_apply = current && !self.restarted && !held && before.is_ok() && !satisfied;
        self.before = Some(before);
        if self.restarted {
            return self.run(
                Phase::RestartClamp,
                Command::Apply(DataNodeTarget::Isolated),
            );
        }
        self.apply_if_needed(t)
    }

    fn apply_if_needed(&mut self, t: &mut Tracker) -> Progress {
        if !self.needs_apply {
            return self.blind_fence_if_unread(t);
        }
        if self.target.writable() {
            t.may_be_writable = true;
        }
        let command = Command::Apply(self.target.clone());
        self.run(Phase::Apply, command)
    }

    fn applied(
        &mut self,
        t: &mut Tracker,
        backend: &str,
        result: Result<(), DataNodeError>,
        now: Millis,
    ) {
        let writable = self.target.writable();
        match result {
            Ok(()) => {
                if !writable {
                    t.may_be_writable = false;
                }
                if self.seq > t.applied_seq {
                    tracing::info!(target = ?self.target, seq = self.seq, backend, "data node updated");
                    if !writable && self.fence_applied_after_ms.is_none() {
                        self.fence_applied_after_ms = t.fence_latency(now);
                    }
                } else {
                    tracing::warn!(target = ?self.target, backend, "data node drifted; re-applied");
                }
                t.applied_seq = self.seq;
                t.applied_writable = writable;
            }
            Err(e) => {
                tracing::warn!(error = %e, target = ?self.target, "applying data node target failed");
                self.error = Some(e.to_string());
                self.fence_failed |= !writable;
            }
        }
    }

    /// Cannot read the node, but it must not take writes: fence blind,
    /// unless it is known fenced already.
    fn blind_fence_if_unread(&mut self, t: &Tracker) -> Progress {
        let unread = self.before.as_ref().is_none_or(|b| b.is_err());
        if unread && !self.target.writable() && !self.known_fenced(t) {
            return self.run(Phase::BlindFence, Command::FenceBlind);
        }
        self.read_after_if_changed()
    }

    /// The process that failed to answer the read is, by the tether, the
    /// one this driver last left non-writable (its last applied target was
    /// not writable and nothing writable was tried since): it takes no
    /// writes unless someone else lifts the fence, which the next read
    /// sees and puts back (§6.8). A blind fence would only cost: on kevy a
    /// `REPLICAOF` that restarts a replica's sync. A kevy replica busy
    /// loading a 400 MB snapshot answered no read in time, was fenced
    /// blind, and full-synced again: three full syncs for one failover
    /// (issue 35). A stalled or unknown process (tether unanswered, down
    /// or replaced) is still fenced blind.
    fn known_fenced(&self, t: &Tracker) -> bool {
        matches!(self.unread_tether, Some(TetherCheck::Same(_))) && !t.may_be_writable
    }

    /// The offset reported with `applied_seq` is read after a change.
    fn read_after_if_changed(&mut self) -> Progress {
        if self.needs_apply || self.restarted {
            return self.run(Phase::ObserveAfter, Command::Observe);
        }
        Progress::Finish(Box::new(self.take_before()))
    }
}

impl Tracker {
    fn fence_latency(&self, now: Millis) -> Option<Millis> {
        self.target_seen.map(|(_, at)| now.saturating_sub(at))
    }

    fn report(
        &self,
        read: Result<ReplicationInfo, DataNodeError>,
        mut error: Option<String>,
        fence_applied_after_ms: Option<Millis>,
    ) -> RoundReport {
        let mut obs = Observation {
            applied_seq: self.applied_seq,
            offset_at_apply: self.offset_at_apply,
            generation: self.generation,
            overridden: self.overridden,
            ..Observation::default()
        };
        let info = match read {
            Ok(info) => {
                obs.reachable = true;
                obs.offset = Some(info.offset);
                obs.link_up = info.is_master() || info.link_up;
                obs.master = info.is_master();
                obs.stream = info.stream.clone().map(StreamId);
                obs.stream_prev = info.stream_prev.clone().map(StreamId);
                obs.floor_hint = info
                    .floor_hint
                    .iter()
                    .map(|h| crate::core::FloorHint {
                        stream: StreamId(h.stream.clone()),
                        offset: h.offset,
                        joining: h.joining,
                    })
                    .collect();
                obs.process_names = info.process_names.clone();
                obs.runners_ended_by_others = info.runners_ended_by_others;
                Some(info)
            }
            Err(e) => {
                obs.gone = matches!(e, DataNodeError::Gone(_));
                error = Some(e.to_string());
                None
            }
        };
        RoundReport {
            obs,
            info,
            error,
            fence_applied_after_ms,
            fence_failed: false,
        }
    }
}

/// The adapter's rules for one data node, living as long as the elector
/// process: a new process starts with a fresh driver, as the real one does.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Driver {
    backend: &'static str,
    t: Tracker,
    round: Option<Round>,
}

impl Driver {
    pub fn new(backend: &'static str) -> Driver {
        Driver {
            backend,
            t: Tracker {
                may_be_writable: true,
                ..Tracker::default()
            },
            round: None,
        }
    }

    /// The target of the round in progress (for the executor's `satisfies`).
    pub fn target(&self) -> Option<&DataNodeTarget> {
        self.round.as_ref().map(|r| &r.target)
    }

    pub fn in_round(&self) -> bool {
        self.round.is_some()
    }

    /// Starts a round for the newest target: `seq`, chosen by the core for
    /// data-node `generation` (a target chosen before the core learned of a
    /// restart is never applied to what came back).
    pub fn begin(
        &mut self,
        seq: u64,
        generation: u64,
        target: DataNodeTarget,
        now: Millis,
    ) -> Step {
        if self.t.target_seen.is_none_or(|(s, _)| s != seq) {
            self.t.target_seen = Some((seq, now));
        }
        let fence_first = target.fences()
            && seq > self.t.applied_seq
            && generation == self.t.generation
            && self.t.may_be_writable;
        let (phase, first) = if fence_first {
            (Phase::FenceFirst, Command::Apply(target.clone()))
        } else {
            (Phase::ObserveBefore, Command::Observe)
        };
        self.round = Some(Round {
            seq,
            generation,
            target,
            phase,
            before: None,
            restarted: false,
            needs_apply: false,
            error: None,
            fence_applied_after_ms: None,
            fence_failed: false,
            unread_tether: None,
        });
        Step::Run(first)
    }

    /// Feeds the result of the last command; returns the next step. An
    /// outcome with no round in progress ends an empty round.
    pub fn next(&mut self, outcome: Outcome, now: Millis) -> Step {
        let Some(round) = self.round.as_mut() else {
            let none = Err(DataNodeError::Unreachable("no round in progress".into()));
            return Step::Done(self.t.report(none, None, None));
        };
        match round.advance(&mut self.t, self.backend, outcome, now) {
            Progress::Run(command) => Step::Run(command),
            Progress::Finish(read) => {
                let round = self.round.take().expect("a round in progress");
                Step::Done(RoundReport {
                    fence_failed: round.fence_failed,
                    ..self
                        .t
                        .report(*read, round.error, round.fence_applied_after_ms)
                })
            }
        }
    }
}

#[cfg(test)]
mod tests;
