//! A kevy 7.0.0 server model, driven by the real kevy policy
//! (`elector::datanode::kevy_policy`), as the shell's `KevyNode` drives real
//! kevy (docs/architecture.md §kevy, protocol §9).
//!
//! The behaviours that bit us (issue 34), each modelled:
//! - every promotion (and every unclean restart) starts a new feed
//!   generation whose offsets begin at 0; `REPL.TOKEN` reads the feed
//!   (primary) or the runner (replica); `INFO`'s replica offset is a
//!   lifetime maximum over generations;
//! - a replica's runner reconnects by itself to whatever process holds its
//!   upstream's address, and every new link is a full resync from it; a
//!   kevy serves syncs in any role, a restarted "replica of nowhere"
//!   included, unless the elector's replication gate refuses (§6.10);
//! - the quiesce (`FAILOVER` towards nowhere) refuses writes and keeps the
//!   node a primary in its generation;
//! - in a container kevy is process 1 at every start: `INFO`'s identity
//!   never changes, only the tether sees a restart.
//!
//! Not modelled: `WAIT` counting acknowledgements kept from an earlier
//! generation (the hold and the padding keep our commands from creating
//! them; the model's `WAIT` counts only replicas holding the write).

use super::datalayer::KevyState;
use super::{Ev, Sim};
use elector::core::{DataNodeTarget, Millis};
use elector::datanode::driver::{Command, Observed, Outcome};
use elector::datanode::kevy_policy::{
    Clock, KevyCommand, KevyOutcome, KevyPolicy, KevyReading, KevySettings, KevyStep, MarkStep,
    PipelineRead,
};
use elector::datanode::kevy_stream::{unvouched, UpstreamAt};
use elector::datanode::{DataNodeError, ReplicationInfo, NOWHERE};
use rand::Rng;

/// The replication port offset the model's members use (the gate's).
const REPLICATION_OFFSET: u16 = 10_000;

/// How long an observation in flight may have begun before a role change
/// (one adapter poll).
const MID_CHANGE_MS: Millis = 50;

/// kevy's tick at its default `[expiry] hz = 10`.
const KEVY_TICK_MS: Millis = 100;

/// How long a replica's token may keep an offset from before a move to
/// another generation by itself: kevy's acknowledgement tick (seen on real
/// kevy: about a second).
const KEVY_ACK_TICK_MS: Millis = 1_000;

/// A fresh policy for an elector incarnation (as `KevyNode::new`);
/// `report_before_naming` switches "the tick after a promotion" off.
/// `started`: the node's clock at the elector's start (the shared file's
/// positions from before it count only under a process mark).
pub(super) fn policy(knobs: PolicyKnobs, mark_seed: Option<u128>, started: Millis) -> KevyPolicy {
    KevyPolicy::new(
        KevySettings {
            replication_port_offset: REPLICATION_OFFSET,
            abort_stale_connects: false,
            nowhere_hold: false,
            ack_nudge: false,
            reconnect_window_ms: 1_000,
            quiesce_fence_limit_ms: knobs.quiesce_fence_limit_ms,
            report_before_naming: knobs.report_before_naming,
            believe_a_resync_by_itself: knobs.believe_a_resync_by_itself,
            mark_seed,
        },
        started,
    )
}

/// The kevy policy's settings a simulation varies: two test-only controls
/// and the quiesce fence's limit (60 s as configured by default, which a
/// 30 s schedule never reaches; a few seconds where a test sets it so).
#[derive(Debug, Clone, Copy)]
pub(crate) struct PolicyKnobs {
    pub report_before_naming: bool,
    pub believe_a_resync_by_itself: bool,
    pub quiesce_fence_limit_ms: Millis,
}

/// The sha kevy's `SCRIPT LOAD` answers for `source` (a stand-in for
/// sha1: 40 hex digits, the same for the same source).
fn script_sha(source: &str) -> String {
    use std::hash::{Hash, Hasher};
    let mut parts = [0u64; 3];
    for (k, part) in parts.iter_mut().enumerate() {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (k, source).hash(&mut h);
        *part = h.finish();
    }
    format!("{:016x}{:016x}{:08x}", parts[0], parts[1], parts[2] as u32)
}

/// Which driver command a kevy operation carries out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KevyOp {
    Apply,
    FenceBlind,
}

fn node_of(addr: &str) -> Option<usize> {
    let (host, _) = addr.rsplit_once(':').unwrap_or((addr, ""));
    host.strip_prefix('n')?
        .parse::<usize>()
        .ok()?
        .checked_sub(1)
}

impl Sim {
    fn kstate(&self, i: usize) -> &KevyState {
        self.nodes[i].data.kevy.as_ref().expect("a kevy node")
    }

    fn kstate_mut(&mut self, i: usize) -> &mut KevyState {
        self.nodes[i].data.kevy.as_mut().expect("a kevy node")
    }

    /// The policy's clock for node `i` (its own rate; the wall clock is
    /// the same numbers: the model has one clock per node).
    pub(super) fn kevy_clock(&self, i: usize) -> Clock {
        let now = self.clock(i);
        Clock {
            mono: now,
            wall: now,
        }
    }

    /// The feed offset of a primary: writes since its generation began.
    fn feed_offset(&self, i: usize) -> u64 {
        (self.nodes[i].data.log.len() - self.kstate(i).gen_base) as u64
    }

    /// `INFO replication` (with `INFO server`'s identity) and `REPL.TOKEN`,
    /// as kevy 7.0.0 answers them.
    pub(super) fn kevy_read(
        &self,
        i: usize,
    ) -> Result<(ReplicationInfo, redis::Value), DataNodeError> {
        let d = &self.nodes[i].data;
        if !d.up {
            return Err(DataNodeError::Gone("connection refused".into()));
        }
        let k = self.kstate(i);
        let int = |v: u64| redis::Value::Int(v as i64);
        let mut info = ReplicationInfo {
            identity: Some("process_id:1".into()),
            ..ReplicationInfo::default()
        };
        let token;
        if d.is_master() {
            info.role = "master".into();
            info.offset = self.feed_offset(i);
            let generation = if self.now < k.named_at {
                k.unnamed_generation
            } else {
                k.generation
            };
            token = redis::Value::Array(vec![int(generation), int(info.offset)]);
        } else {
            info.role = "slave".into();
            info.offset = k.info_offset_max;
            info.link_up = d.link_up;
            let (host, port) = match &d.applied {
                DataNodeTarget::Follow { primary, .. } => {
                    (primary.clone(), 6379 + REPLICATION_OFFSET)
                }
                _ => (NOWHERE.0.to_string(), NOWHERE.1),
            };
            info.master_host = Some(host);
            info.master_port = Some(port);
            token = match k.runner {
                Some((generation, _))
                    if k.stale_token
                        .is_some_and(|(g, _, until)| g == generation && self.now < until) =>
                {
                    let (_, stale, _) = k.stale_token.expect("checked");
                    redis::Value::Array(vec![int(generation), int(stale)])
                }
                Some((generation, base)) => {
                    redis::Value::Array(vec![int(generation), int((d.log.len() - base) as u64)])
                }
                None => redis::Value::Array(vec![int(0), int(0)]),
            };
        }
        Ok((info, token))
    }

    /// `INFO replication` as text (what a `REPLICAOF` pipeline reads).
    fn kevy_info_text(info: &ReplicationInfo) -> String {
        if info.is_master() {
            return format!("role:master\r\nmaster_repl_offset:{}\r\n", info.offset);
        }
        format!(
            "role:slave\r\nmaster_host:{}\r\nmaster_port:{}\r\nmaster_link_status:{}\r\nslave_repl_offset:{}\r\n",
            info.master_host.as_deref().unwrap_or(""),
            info.master_port.unwrap_or(0),
            if info.link_up { "up" } else { "down" },
            info.offset
        )
    }

    /// A promotion: a new feed generation from offset 0 (§6.10, issue 34
    /// (b)); the node keeps its data. kevy names the new generation on its
    /// next tick (every [`KEVY_TICK_MS`], in phase with the simulation's
    /// clock): until then its token names the one before.
    pub(super) fn kevy_promote(&mut self, i: usize) {
        let fresh = self.fresh_stream();
        let len = self.nodes[i].data.log.len();
        let named_at = (self.now / KEVY_TICK_MS + 1) * KEVY_TICK_MS;
        let k = self.kstate_mut(i);
        k.unnamed_generation = k.generation;
        k.named_at = named_at;
        k.generation = fresh;
        k.gen_base = len;
        k.runner = None;
        self.nodes[i].data.applied = DataNodeTarget::Primary;
        self.nodes[i].data.link_up = false;
    }

    /// Carries out one command of the policy against node `i`'s kevy.
    pub(super) fn kevy_serve(
        &mut self,
        i: usize,
        command: &KevyCommand,
        sent_at: Millis,
    ) -> KevyOutcome {
        let gone = || DataNodeError::Gone("connection refused".into());
        if !self.nodes[i].data.up {
            return match command {
                KevyCommand::ReadRole => KevyOutcome::Role(Err(gone())),
                KevyCommand::ReplicaOf { .. } => KevyOutcome::Replicated(Err(gone())),
                KevyCommand::Quiesce => KevyOutcome::Quiesced(Err(gone())),
                KevyCommand::LiftQuiesce => KevyOutcome::Lifted(Err(gone())),
                KevyCommand::Resolve { addr } => KevyOutcome::Resolved(
                    node_of(addr)
                        .map(|n| (format!("n{}", n + 1), 6379))
                        .ok_or_else(|| DataNodeError::Resolve(addr.clone())),
                ),
                KevyCommand::AwaitPrimary { .. } => KevyOutcome::Upstream(None),
                KevyCommand::Sleep(_) => KevyOutcome::Slept,
            };
        }
        match command {
            KevyCommand::ReadRole => KevyOutcome::Role(self.kevy_read(i).map(|(info, _)| info)),
            KevyCommand::Resolve { addr } => KevyOutcome::Resolved(
                node_of(addr)
                    .map(|n| (format!("n{}", n + 1), 6379))
                    .ok_or_else(|| DataNodeError::Resolve(addr.clone())),
            ),
            KevyCommand::AwaitPrimary { addr, .. } => KevyOutcome::Upstream(
                node_of(addr)
                    .filter(|&u| self.nodes[u].data.up && self.nodes[u].data.is_master())
                    .map(|u| UpstreamAt {
                        offset: self.feed_offset(u),
                        generation: Some(self.kstate(u).generation),
                    }),
            ),
            KevyCommand::ReplicaOf {
                to,
                mark,
                unvouch_first,
                ..
            } => {
                let was_writable = self.nodes[i].data.writable();
                let (info, token) = self.kevy_read(i).expect("up");
                // The executor strips the file's mark before sending; the
                // model applies it as the command lands (nothing reads the
                // file in between that the node's data could contradict).
                let k = self.kstate_mut(i);
                if *unvouch_first {
                    if let Some(text) = k.position_file.as_deref().and_then(unvouched) {
                        k.position_file = Some(text);
                    }
                }
                let (mark_present, mark_loaded) = match mark {
                    Some(MarkStep::Check(sha)) => (Some(k.marks.contains(sha)), None),
                    Some(MarkStep::Load(source)) => {
                        let sha = script_sha(source);
                        k.marks.push(sha.clone());
                        (None, Some(sha))
                    }
                    None => (None, None),
                };
                // A pipeline sent just before someone else's role change
                // read its first `INFO` before it, as a poll would.
                let before = self.kevy_read_mid_change(i).unwrap_or_else(|| info.clone());
                let read = PipelineRead {
                    server: Some("kevy_version:7.0.0\r\nprocess_id:1\r\n".into()),
                    replication: Some(Self::kevy_info_text(&before)),
                    token: Some(token),
                    replication_after: (!self.kevy_reads_role_once)
                        .then(|| Self::kevy_info_text(&info)),
                    mark_present,
                    mark_loaded,
                };
                match to {
                    None if !self.nodes[i].data.is_master() => self.kevy_promote(i),
                    None => {}
                    Some((host, port)) if (host.as_str(), *port) == NOWHERE => {
                        let d = &mut self.nodes[i].data;
                        d.applied = DataNodeTarget::Isolated;
                        d.link_up = false;
                        self.kstate_mut(i).runner = None;
                    }
                    Some((host, _)) => {
                        let d = &mut self.nodes[i].data;
                        d.applied = DataNodeTarget::Follow {
                            primary: host.clone(),
                            primary_addr: format!("{host}:6379"),
                        };
                        d.link_up = false;
                        self.kstate_mut(i).runner = None;
                    }
                }
                self.note_if_promoted(i, was_writable, sent_at);
                KevyOutcome::Replicated(Ok(read))
            }
            KevyCommand::Quiesce => {
                if !self.nodes[i].data.is_master() {
                    return KevyOutcome::Quiesced(Err(DataNodeError::Refused {
                        command: "FAILOVER".into(),
                        message: "ERR not a primary".into(),
                    }));
                }
                self.kstate_mut(i).quiesced = true;
                KevyOutcome::Quiesced(Ok(()))
            }
            KevyCommand::LiftQuiesce => {
                let was_writable = self.nodes[i].data.writable();
                self.kstate_mut(i).quiesced = false;
                self.note_if_promoted(i, was_writable, sent_at);
                KevyOutcome::Lifted(Ok(()))
            }
            KevyCommand::Sleep(_) => KevyOutcome::Slept,
        }
    }

    /// How long a kevy command takes.
    fn kevy_delay(&mut self, i: usize, command: &KevyCommand) -> Millis {
        let fence = |sim: &mut Sim| {
            sim.nodes[i].slow_fence_ms.unwrap_or_else(|| {
                let (lo, hi) = sim.world.fence_ms;
                sim.rng.gen_range(lo..=hi)
            })
        };
        match command {
            KevyCommand::Resolve { .. } => 0,
            KevyCommand::ReadRole => 1,
            KevyCommand::Sleep(ms) => *ms,
            KevyCommand::AwaitPrimary { addr, within } => {
                let ready = node_of(addr).is_some_and(|u| self.nodes[u].data.is_master());
                if ready {
                    1
                } else {
                    *within
                }
            }
            KevyCommand::Quiesce | KevyCommand::LiftQuiesce => fence(self),
            KevyCommand::ReplicaOf { to, .. } => match to {
                Some((h, p)) if (h.as_str(), *p) == NOWHERE => fence(self),
                _ => {
                    let (lo, hi) = self.world.apply_ms;
                    self.rng.gen_range(lo..=hi)
                }
            },
        }
    }

    /// The adapter starts an operation of the policy for a driver command.
    pub(super) fn kevy_begin(&mut self, i: usize, command: &Command) {
        let clock = self.kevy_clock(i);
        let Some(policy) = self.nodes[i].kevy_policy.as_mut() else {
            return;
        };
        let (op, step) = match command {
            Command::Apply(target) => (KevyOp::Apply, policy.apply(target, clock)),
            Command::FenceBlind => (KevyOp::FenceBlind, policy.fence_blind()),
            Command::Observe => unreachable!("an observation is a read, not an operation"),
        };
        self.nodes[i].kevy_op = Some(op);
        self.kevy_follow(i, step);
    }

    /// Sends the policy's next command, or hands the operation's result to
    /// the driver.
    fn kevy_follow(&mut self, i: usize, step: KevyStep) {
        match step {
            KevyStep::Run(command) => {
                let delay = self.kevy_delay(i, &command);
                self.trace(i, &format!("KEVY {command:?} in {delay} ms"));
                let incarnation = self.nodes[i].incarnation;
                let (sent_at, process) = (self.now, self.nodes[i].data.process_id);
                self.push(
                    delay,
                    Ev::KevyCommand {
                        node: i,
                        incarnation,
                        command,
                        sent_at,
                        process,
                    },
                );
            }
            KevyStep::Done(result) => {
                self.trace(i, &format!("KEVY DONE {result:?}"));
                if let Some(text) = self.nodes[i]
                    .kevy_policy
                    .as_mut()
                    .and_then(|p| p.take_position_write())
                {
                    self.kstate_mut(i).position_file = Some(text);
                }
                if let Some(text) = self.nodes[i]
                    .kevy_policy
                    .as_mut()
                    .and_then(|p| p.take_watch_write())
                {
                    self.kstate_mut(i).watch_file = text;
                }
                let outcome = match self.nodes[i].kevy_op.take() {
                    Some(KevyOp::FenceBlind) => Outcome::BlindFenced(result),
                    _ => Outcome::Applied(result),
                };
                let incarnation = self.nodes[i].incarnation;
                self.answer_adapter(i, incarnation, outcome);
            }
        }
    }

    /// A kevy command reaches the server (see `complete_command` for the
    /// freeze and restart rules it follows too).
    pub(super) fn kevy_command_arrives(
        &mut self,
        i: usize,
        incarnation: u64,
        command: KevyCommand,
        (sent_at, process): (Millis, u64),
    ) {
        // A loading kevy runs no command until its snapshot is in: ours
        // wait in the socket, as in a freeze.
        if self.data_frozen(i) || self.kevy_loading(i) {
            self.push(
                10,
                Ev::KevyCommand {
                    node: i,
                    incarnation,
                    command,
                    sent_at,
                    process,
                },
            );
            return;
        }
        let outcome = if self.nodes[i].data.process_id != process {
            let gone = || DataNodeError::Gone("connection reset".into());
            match command {
                KevyCommand::ReadRole => KevyOutcome::Role(Err(gone())),
                KevyCommand::ReplicaOf { .. } => KevyOutcome::Replicated(Err(gone())),
                KevyCommand::Quiesce => KevyOutcome::Quiesced(Err(gone())),
                KevyCommand::LiftQuiesce => KevyOutcome::Lifted(Err(gone())),
                other => self.kevy_serve(i, &other, sent_at),
            }
        } else {
            self.kevy_serve(i, &command, sent_at)
        };
        self.kevy_answer(i, incarnation, outcome);
    }

    /// Tells the invariants when a command made node `i`'s data node
    /// writable (it was not before): it must hold every acknowledged write.
    fn note_if_promoted(&mut self, i: usize, was_writable: bool, sent_at: Millis) {
        if !was_writable && self.nodes[i].data.writable() {
            self.inv
                .on_data_promoted(i, &self.nodes[i].data, &self.acked, sent_at, self.now);
        }
    }

    /// The policy gets a command's answer (when its elector runs).
    pub(super) fn kevy_answer(&mut self, i: usize, incarnation: u64, outcome: KevyOutcome) {
        if self.nodes[i].incarnation != incarnation {
            return; // the policy died with its elector
        }
        if let Some(until) = self.nodes[i].paused_until.filter(|u| *u > self.now) {
            self.push(
                until - self.now,
                Ev::KevyAnswer {
                    node: i,
                    incarnation,
                    outcome,
                },
            );
            return;
        }
        let clock = self.kevy_clock(i);
        let Some(policy) = self.nodes[i].kevy_policy.as_mut() else {
            return;
        };
        let step = policy.resume(outcome, clock);
        self.kevy_follow(i, step);
    }

    /// Someone else is about to change node `i`'s role: an observation in
    /// flight may have read `INFO replication` just before (half the
    /// time, by a hash of the time, so that the random schedules draw
    /// nothing more and their kept seeds replay).
    pub(super) fn kevy_role_changing(&mut self, i: usize, surely: bool) {
        let drawn = (self.now ^ (i as u64 * 0x9e37)).is_multiple_of(2);
        if self.nodes[i].data.kevy.is_none() || !(surely || drawn) {
            return;
        }
        if let Ok((info, _)) = self.kevy_read(i) {
            let now = self.now;
            if let Some(k) = self.nodes[i].data.kevy.as_mut() {
                k.read_mid_change = Some((info, now));
            }
        }
    }

    /// The `INFO replication` a read in flight took just before someone
    /// else's role change (one poll ago at most), once.
    fn kevy_read_mid_change(&mut self, i: usize) -> Option<ReplicationInfo> {
        let now = self.now;
        self.nodes[i]
            .data
            .kevy
            .as_mut()?
            .read_mid_change
            .take()
            .filter(|(_, at)| now.saturating_sub(*at) <= MID_CHANGE_MS)
            .map(|(info, _)| info)
    }

    /// An observation through the policy: what the driver is told.
    pub(super) fn kevy_observe(
        &mut self,
        i: usize,
        tether: elector::datanode::driver::TetherCheck,
    ) -> Outcome {
        let read = self.kevy_read(i);
        let clock = self.kevy_clock(i);
        // An observation that began before someone else's role change (one
        // poll ago at most) read `INFO` before it and the token after.
        let mid_change = read.is_ok().then(|| self.kevy_read_mid_change(i)).flatten();
        let reads_role_once = self.kevy_reads_role_once;
        let k = self.nodes[i].data.kevy.clone().unwrap_or_default();
        let target = self.nodes[i]
            .driver
            .as_ref()
            .and_then(|d| d.target())
            .cloned();
        let hint = self.nodes[i].data.floor_hint.clone();
        let Some(policy) = self.nodes[i].kevy_policy.as_mut() else {
            return Outcome::Observed(Err(DataNodeError::Unreachable("no adapter".into())));
        };
        // The position file is read first; the pipeline asks whether its
        // mark (and ours) is in this process.
        let marks_asked = policy.marks_to_check(k.position_file.as_deref());
        let marks_answer = (!marks_asked.is_empty())
            .then(|| marks_asked.iter().map(|m| k.marks.contains(m)).collect());
        let (info_now, token) = match read {
            Ok(r) => r,
            Err(e) => return Outcome::Observed(Err(e)),
        };
        let (mut info, info_after) = match mid_change {
            Some(before) => (before, Some(info_now)),
            None => (info_now.clone(), Some(info_now)),
        };
        let info_after = info_after.filter(|_| !reads_role_once);
        info.floor_hint = hint;
        let floor_hint = info.floor_hint.clone();
        let mut view = policy.observed(
            KevyReading {
                info,
                token: Some(token),
                info_after,
                watchdog_clamps: Some(k.watchdog_clamps),
                position_file: k.position_file.clone(),
                marks_asked,
                marks_answer,
            },
            clock,
        );
        let loaded = view.load_mark.take().map(|source| {
            let sha = script_sha(&source);
            policy.mark_loaded(&sha);
            sha
        });
        view.info.floor_hint = floor_hint;
        let satisfies = target.is_some_and(|t| policy.satisfies(&view.info, &t, clock.mono));
        let watch = policy.take_watch_write();
        if let Some(sha) = loaded {
            self.kstate_mut(i).marks.push(sha);
        }
        if let Some(text) = watch {
            self.kstate_mut(i).watch_file = text;
        }
        for _ in 0..view.pad_frames.min(10_000) {
            let write_id = u64::MAX; // a no-op frame of ours
            self.nodes[i].data.append(write_id);
        }
        Outcome::Observed(Ok(Observed {
            info: view.info,
            satisfies,
            tether,
        }))
    }

    /// kevy's replication between decisions: a replica's runner links to
    /// whatever process holds its upstream's address, if that process
    /// serves (any role) and its elector's gate admits it; every new link
    /// is a full resync, a generation change on the upstream too.
    pub(super) fn kevy_replicate(&mut self, i: usize, upstream: Option<usize>) {
        let linkable = upstream.is_some_and(|u| {
            self.nodes[i].data.up
                && self.nodes[u].data.up
                && self.link_allowed(i, u)
                && self.gate_admits(u)
        });
        let Some(u) = upstream.filter(|_| linkable) else {
            // The runner lives on, retrying: kevy 7.0.0's `REPL.TOKEN` still
            // answers its generation and applied offset after the upstream
            // died (checked by hand: a replica at 200 kept answering
            // `<gen> 200` with its primary killed). Only a `REPLICAOF` or a
            // restart ends it.
            self.nodes[i].data.link_up = false;
            return;
        };
        let (gen, base) = (self.kstate(u).generation, self.kstate(u).gen_base);
        let resync = !self.nodes[i].data.link_up || self.kstate(i).runner != Some((gen, base));
        if resync {
            // A runner that moves to another generation by itself keeps
            // the old one's applied offset in its token until its next
            // acknowledgement tick (kevy 7.0.0; the adapter contract,
            // protocol §6.11).
            let held = self.nodes[i].data.log.len();
            let now = self.now;
            self.kstate_mut(i).stale_token = match self.kstate(i).runner {
                Some((g, b)) if g != gen => {
                    Some((gen, held.saturating_sub(b) as u64, now + KEVY_ACK_TICK_MS))
                }
                _ => None,
            };
            let log = self.nodes[u].data.log.clone();
            let load_ms = load_ms(log.len());
            let loads = self.kevy_loads_snapshots;
            self.nodes[i].data.log = log;
            let now = self.now;
            let k = self.kstate_mut(i);
            k.runner = Some((gen, base));
            k.full_syncs += 1;
            if loads {
                k.loading_until = now + load_ms;
            }
        } else {
            let upstream_data = self.nodes[u].data.clone();
            self.nodes[i].data.sync_from(&upstream_data);
        }
        self.nodes[i].data.link_up = true;
        let applied = (self.nodes[i].data.log.len().saturating_sub(base)) as u64;
        let k = self.kstate_mut(i);
        k.info_offset_max = k.info_offset_max.max(applied);
    }

    /// What a replica's data node holds, as the watchdog reads it right
    /// after its clamp (§6.10): the stream and offset, for the elector's
    /// floor. `None` on a primary (its own tail is not acknowledged).
    pub(super) fn floor_hint_of(&self, i: usize) -> Option<(String, u64)> {
        let d = &self.nodes[i].data;
        if !d.up || d.is_master() {
            return None;
        }
        match &d.kevy {
            Some(k) => k.runner.map(|(generation, base)| {
                (
                    format!("kevy-feed-{generation}"),
                    (d.log.len() - base) as u64,
                )
            }),
            None => Some((format!("s{}", d.stream), d.log.len() as u64)),
        }
    }

    /// A kevy (re)started: a new process, a new feed generation (an unclean
    /// stop bumps it), a replica of nowhere by its config.
    pub(super) fn kevy_restarted(&mut self, i: usize) {
        let fresh = self.fresh_stream();
        let len = self.nodes[i].data.log.len();
        if let Some(k) = self.nodes[i].data.kevy.as_mut() {
            k.generation = fresh;
            k.gen_base = len;
            k.runner = None;
            k.quiesced = false;
            k.info_offset_max = 0;
            k.named_at = 0;
            k.loading_until = 0;
            k.marks.clear();
        }
    }

    /// The elector's clean stop (SIGTERM, `runtime.rs`): a fresh adapter
    /// fences the data node first, blind, on a connection of its own (its
    /// pipeline loads a process mark and writes the position it read for
    /// the next elector), and the process exits. Synchronous: the stop
    /// waits for its fence.
    pub fn stop_elector_fencing(&mut self, i: usize) {
        if self.nodes[i].core.is_none() || self.nodes[i].witness {
            return;
        }
        self.trace(i, "ELECTOR STOP (fencing first)");
        if self.nodes[i].data.kevy.is_some() && self.nodes[i].data.up {
            let early = self.kevy_switches();
            let seed = (!self.kevy_without_marks)
                .then(|| ((i as u128) << 64) | (1 << 63) | u128::from(self.nodes[i].incarnation));
            let mut stopping = policy(early, seed, self.clock(i));
            self.resume_kevy_watch(i, &mut stopping);
            let first = stopping.fence_blind();
            self.kevy_run_at_once(i, &mut stopping, first);
        } else if self.nodes[i].data.up {
            let d = &mut self.nodes[i].data;
            d.applied = DataNodeTarget::Isolated;
            d.link_up = false;
        }
        self.crash_elector(i);
    }

    /// The watchdog's clamp on kevy (§6.4.1), carried out by its own real
    /// policy, synchronously (the watchdog is a process of its own, with
    /// its own process marks): a primary is quiesced (it keeps its feed
    /// generation), a replica detached by a `REPLICAOF` whose pipeline
    /// writes the position it read to the shared file under the watchdog's
    /// mark, as the real one does; a restarted elector may count it only
    /// while that mark is still in the process. The clamp is counted once
    /// per change, in the file the elector reads.
    pub(super) fn kevy_watchdog_clamp(&mut self, i: usize) {
        let d = &self.nodes[i].data;
        let Some(k) = d.kevy.as_ref() else { return };
        if !d.up {
            return;
        }
        let changes = if d.is_master() {
            !k.quiesced
        } else {
            d.applied != DataNodeTarget::Isolated
        };
        if changes && !d.is_master() {
            self.kevy_role_changing(i, false);
        }
        let process = self.nodes[i].data.process_id;
        let clock = self.kevy_clock(i);
        let (mut watchdog, spoke_to) = self.nodes[i].kevy_watchdog.take().unwrap_or_else(|| {
            // Its own seed, apart from every elector incarnation's (bit 62)
            // and the stop's fence (bit 63); drawn from nothing random.
            let seed = (!self.kevy_without_marks).then_some(((i as u128) << 64) | (1 << 62));
            (policy(self.kevy_switches(), seed, clock.wall), process)
        });
        if spoke_to != process {
            watchdog.new_incarnation(clock);
        }
        if !self.nodes[i].watchdog_clamped_in_silence {
            watchdog.watchdog_silence_began();
        }
        let first = watchdog.watchdog_clamp();
        let step = self.kevy_run_at_once(i, &mut watchdog, first);
        self.nodes[i].kevy_watchdog = Some((watchdog, process));
        self.nodes[i].watchdog_clamped_in_silence = true;
        if changes {
            self.kstate_mut(i).watchdog_clamps += 1;
            let what = if self.nodes[i].data.is_master() {
                "WATCHDOG QUIESCE"
            } else {
                "WATCHDOG CLAMP"
            };
            self.trace(i, &format!("{what} ({step:?})"));
        }
    }

    /// Runs an operation of a policy outside the elector's adapter (the
    /// stop's fence, the watchdog) to its end against node `i`'s kevy, with
    /// no delay, and writes the position its pipeline read to the shared
    /// file, as the real executor does.
    fn kevy_run_at_once(&mut self, i: usize, policy: &mut KevyPolicy, first: KevyStep) -> KevyStep {
        let mut step = first;
        while let KevyStep::Run(command) = step {
            let outcome = self.kevy_serve(i, &command, self.now);
            step = policy.resume(outcome, self.kevy_clock(i));
        }
        if let Some(text) = policy.take_position_write() {
            self.kstate_mut(i).position_file = Some(text);
        }
        if let Some(text) = policy.take_watch_write() {
            self.kstate_mut(i).watch_file = text;
        }
        step
    }

    /// An elector's adapter (its task's, its stop fence's) resumes the
    /// watch the last one kept, as `KevyNode::new` does (`kevy_policy::watch`).
    pub(super) fn resume_kevy_watch(&self, i: usize, policy: &mut KevyPolicy) {
        let Some(k) = self.nodes[i].data.kevy.as_ref() else {
            return;
        };
        if !self.kevy_without_watch {
            policy.resume_watch(k.watch_file.as_deref(), Some(k.watchdog_clamps));
        }
    }

    /// A kevy replica loading a full resync's snapshot (issue 35): reads
    /// time out, the process lives.
    pub(super) fn kevy_loading(&self, i: usize) -> bool {
        let d = &self.nodes[i].data;
        d.up && d.kevy.as_ref().is_some_and(|k| self.now < k.loading_until)
    }
}

/// How long a replica loads a snapshot of `entries` log entries: longer
/// than a data poll and a read's timeout for any but the smallest, as a
/// few hundred MB are for kevy 7.0.0; no random draw, so the seeds'
/// schedules stay what they were.
fn load_ms(entries: usize) -> Millis {
    (150 + 4 * entries as Millis).min(1_500)
}
