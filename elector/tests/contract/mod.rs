//! The adapter contract (docs/protocol.md §6.11): what the core takes from
//! a data node's adapter, checked the same way against every target that
//! plays one: real Redis and real kevy through `elector::datanode::Adapter`
//! (`real.rs`), and the simulator's Redis-like and kevy models through the
//! code its electors run (`sim_target.rs`). openraft's storage suite is the
//! model: one list of checks, each a sentence, each on a fresh target.
//!
//! Besides each check's own assertions, every reading is held to three
//! rules the core's safety argument reads (§6.2.1 "truthful positions",
//! §6.8, §6.10), by [`Contract::read`]:
//! - **truthful**: a reading that places a node at or past an acknowledged
//!   write's position in that write's stream means the node holds it;
//! - **monotonic**: within one process and one named stream, a node's
//!   offset never goes back;
//! - **process names are for good**: a name a reading gives its process
//!   is never given by another process (a restart, another node).

pub mod real;
pub mod sim_target;

use elector::core::DataNodeTarget;
use elector::datanode::{ReplicationInfo, NOWHERE};
use std::collections::HashMap;
use std::fmt::Debug;

/// How long each target's kevy adapter lets a lapsed lease's quiesce fence
/// its primary before it demotes it (`data_node.kevy_quiesce_fence_limit_ms`,
/// 60 s by default): short, so the suite reaches it. Redis has no such
/// limit; its fence simply stays.
pub const QUIESCE_FENCE_LIMIT_MS: u64 = crate::sim::alone::QUIESCE_FENCE_LIMIT_MS;

/// Two data nodes, each behind its own adapter, and a client.
pub trait Target {
    /// What a client's write leaves behind to look for later.
    type Write: Clone + Debug;
    /// For failure messages: the backend and the kind of target.
    fn name(&self) -> String;
    /// Whether a lapsed lease's fence gives way to demotion after
    /// [`QUIESCE_FENCE_LIMIT_MS`] (kevy's quiesce) rather than staying.
    fn fence_gives_way_to_demotion(&self) -> bool;
    /// The address a replica of node `i` is told to follow.
    fn address(&self, i: usize) -> String;
    /// Node `i`'s adapter applies `target` once.
    fn apply(&mut self, i: usize, target: &DataNodeTarget) -> Result<(), String>;
    /// One reading of node `i` through its adapter.
    fn observe(&mut self, i: usize) -> Result<ReplicationInfo, String>;
    /// Whether node `i`'s adapter takes `info` as `target` carried out.
    fn satisfies(&self, i: usize, info: &ReplicationInfo, target: &DataNodeTarget) -> bool;
    /// A client writes one new key to node `i` (`SET`); `Err` if refused.
    fn write(&mut self, i: usize) -> Result<Self::Write, String>;
    /// A write on node `i` that `replicas` replicas acknowledged (`SET`
    /// then `WAIT replicas`); `Err` if refused or not acknowledged in time.
    fn write_acknowledged(&mut self, i: usize, replicas: u64) -> Result<Self::Write, String>;
    /// Whether node `i`'s data node holds the write (a client's `GET`);
    /// `None` when it could not be asked (not answering, restarting).
    fn holds(&mut self, i: usize, write: &Self::Write) -> Option<bool>;
    /// Lets `ms` pass (replication, kevy's ticks and reconnects).
    fn pass(&mut self, ms: u64) -> Result<(), String>;
    /// Node `i`'s data-node process dies and a new one starts at once
    /// under the same adapter, with its files or empty, as its
    /// configuration starts it (a replica of nowhere).
    fn restart(&mut self, i: usize, keep_data: bool);
    /// Node `i`'s data-node process stops (`paused`: SIGSTOP, a stalled
    /// disk or a hung host) or resumes (SIGCONT), under its adapter.
    fn pause(&mut self, i: usize, paused: bool);
}

/// An acknowledged write and where its primary stood right after it.
#[derive(Clone, Debug)]
struct Acked<W> {
    write: W,
    stream: String,
    offset: u64,
}

/// A target under the suite, with what the three rules remember.
pub struct Contract<T: Target> {
    pub t: T,
    /// Per node, how many times the suite restarted its data node.
    incarnation: Vec<u64>,
    /// Per (node, incarnation, stream): the last offset read.
    offsets: HashMap<(usize, u64, String), u64>,
    /// Per process name: the (node, incarnation) that gave it.
    names: HashMap<String, (usize, u64)>,
    /// Every stream any reading named, in order.
    pub streams: Vec<String>,
    acked: Vec<Acked<T::Write>>,
    pub readings: u64,
}

/// A check, named as the sentence it checks.
pub type Check<T> = (&'static str, fn(&mut Contract<T>) -> Result<(), String>);

impl<T: Target> Contract<T> {
    pub fn new(t: T) -> Contract<T> {
        Contract {
            t,
            incarnation: vec![0; 2],
            offsets: HashMap::new(),
            names: HashMap::new(),
            streams: Vec::new(),
            acked: Vec::new(),
            readings: 0,
        }
    }

    fn id(i: usize) -> String {
        format!("n{}", i + 1)
    }

    /// Follow node `upstream`, as the core says it.
    pub fn follow(&self, upstream: usize) -> DataNodeTarget {
        DataNodeTarget::Follow {
            primary: Self::id(upstream),
            primary_addr: self.t.address(upstream),
        }
    }

    /// One reading of node `i`, held to the three rules.
    pub fn read(&mut self, i: usize) -> Result<ReplicationInfo, String> {
        // Held before and after the reading: a write the node gains or
        // loses while the reading is in flight is not taken for a lie.
        // Only a definite "no" (a `GET` answered nil) counts against it.
        let before: Vec<Option<bool>> = self
            .acked_writes()
            .iter()
            .map(|w| self.t.holds(i, w))
            .collect();
        let info = self.t.observe(i)?;
        self.readings += 1;
        if std::env::var_os("CONTRACT_TRACE").is_some() {
            eprintln!(
                "n{} [{}] {} ({:?}, {}) link_up={} names={:?}",
                i + 1,
                self.incarnation[i],
                info.role,
                info.stream,
                info.offset,
                info.link_up,
                info.process_names
            );
        }
        let inc = self.incarnation[i];
        if let Some(stream) = &info.stream {
            if !self.streams.contains(stream) {
                self.streams.push(stream.clone());
            }
            let last = self.offsets.entry((i, inc, stream.clone())).or_insert(0);
            if info.offset < *last {
                return Err(format!(
                    "monotonic: n{} went back in stream {stream} from {} to {} within one process",
                    i + 1,
                    *last,
                    info.offset
                ));
            }
            *last = info.offset;
            for (k, a) in self.acked.clone().iter().enumerate() {
                if a.stream == *stream
                    && info.offset >= a.offset
                    && before[k] == Some(false)
                    && self.t.holds(i, &a.write) == Some(false)
                {
                    return Err(format!(
                        "truthful: n{} reads ({stream}, {}), at or past acknowledged write {:?} at ({}, {}), and does not hold it; reading {info:?}",
                        i + 1,
                        info.offset,
                        a.write,
                        a.stream,
                        a.offset
                    ));
                }
            }
        }
        for name in &info.process_names {
            match self.names.insert(name.clone(), (i, inc)) {
                Some(was) if was != (i, inc) => {
                    return Err(format!(
                        "process names: {name} named n{} process {} and now n{} process {inc}",
                        was.0 + 1,
                        was.1,
                        i + 1
                    ))
                }
                _ => {}
            }
        }
        Ok(info)
    }

    fn acked_writes(&self) -> Vec<T::Write> {
        self.acked.iter().map(|a| a.write.clone()).collect()
    }

    /// Reads node `i` until `done` holds of a reading, for up to `ms`.
    pub fn read_until(
        &mut self,
        i: usize,
        ms: u64,
        what: &str,
        done: impl Fn(&ReplicationInfo) -> bool,
    ) -> Result<ReplicationInfo, String> {
        let mut waited = 0;
        loop {
            let read = self.read(i);
            match read {
                Ok(info) if done(&info) => return Ok(info),
                Err(e) if is_breach(&e) => return Err(e),
                last if waited >= ms => {
                    return Err(format!(
                        "n{} not {what} within {ms} ms; last reading {last:?}",
                        i + 1
                    ))
                }
                _ => {}
            }
            self.t.pass(50)?;
            waited += 50;
        }
    }

    /// Applies `target` to node `i` until its adapter takes a reading as
    /// carried out (as the runtime re-applies each poll), for up to 10 s.
    pub fn reach(&mut self, i: usize, target: &DataNodeTarget) -> Result<ReplicationInfo, String> {
        let mut last_error = None;
        for _ in 0..200 {
            match self.read(i) {
                Ok(info) if self.t.satisfies(i, &info, target) => return Ok(info),
                Err(e) if is_breach(&e) => return Err(e),
                _ => {}
            }
            if let Err(e) = self.t.apply(i, target) {
                last_error = Some(e);
            }
            self.t.pass(50)?;
        }
        Err(format!(
            "n{} never reached {target:?}; last apply error {last_error:?}, last reading {:?}",
            i + 1,
            self.t.observe(i)
        ))
    }

    /// A write on `primary` that `replicas` acknowledged, remembered with
    /// where `primary` stood right after it (no other writer runs).
    pub fn acknowledged_write(
        &mut self,
        primary: usize,
        replicas: u64,
    ) -> Result<T::Write, String> {
        let write = self.t.write_acknowledged(primary, replicas)?;
        // A kevy primary names its feed a tick after its promotion.
        let at = self.read_until(primary, 2_000, "naming its stream", |r| r.stream.is_some())?;
        let stream = at.stream.clone().expect("named");
        self.acked.push(Acked {
            write: write.clone(),
            stream,
            offset: at.offset,
        });
        Ok(write)
    }

    /// The suite restarts node `i`'s data node.
    pub fn restart(&mut self, i: usize, keep_data: bool) {
        self.t.restart(i, keep_data);
        self.incarnation[i] += 1;
    }
}

/// Runs every check, each on a fresh target from `make`; the first failure
/// names the target and the check.
pub fn run_all<T: Target>(make: impl Fn() -> T) -> Result<u64, String> {
    let mut readings = 0;
    for (name, check) in checks::<T>() {
        let mut c = Contract::new(make());
        let label = c.t.name();
        check(&mut c).map_err(|e| format!("{label}: {name}: {e}"))?;
        readings += c.readings;
    }
    Ok(readings)
}

/// Runs the check called `name` alone on a target from `make`.
pub fn run_one<T: Target>(name: &str, make: impl Fn() -> T) -> Result<u64, String> {
    let (_, check) = checks::<T>()
        .into_iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("no check {name}"));
    let mut c = Contract::new(make());
    let label = c.t.name();
    check(&mut c).map_err(|e| format!("{label}: {name}: {e}"))?;
    Ok(c.readings)
}

/// The checks, each a sentence.
pub fn checks<T: Target>() -> Vec<Check<T>> {
    vec![
        (
            "a_primary_says_master_takes_writes_and_satisfies_only_its_target",
            a_primary_says_master_takes_writes_and_satisfies_only_its_target,
        ),
        (
            "a_fenced_primary_refuses_writes_stays_a_primary_and_keeps_its_data",
            a_fenced_primary_refuses_writes_stays_a_primary_and_keeps_its_data,
        ),
        (
            "a_fence_held_past_the_quiesce_limit_refuses_writes_throughout_and_keeps_every_write",
            a_fence_held_past_the_quiesce_limit_refuses_writes_throughout_and_keeps_every_write,
        ),
        (
            "a_primary_handing_over_refuses_writes_and_keeps_its_replica_streaming",
            a_primary_handing_over_refuses_writes_and_keeps_its_replica_streaming,
        ),
        (
            "an_isolated_node_refuses_writes_follows_nowhere_and_keeps_its_data",
            an_isolated_node_refuses_writes_follows_nowhere_and_keeps_its_data,
        ),
        (
            "a_replica_joins_its_primary_stream_and_holds_what_it_acknowledged",
            a_replica_joins_its_primary_stream_and_holds_what_it_acknowledged,
        ),
        (
            "a_promotion_starts_a_stream_no_reading_named_before",
            a_promotion_starts_a_stream_no_reading_named_before,
        ),
        (
            "every_process_is_named_and_a_restart_never_reuses_a_name",
            every_process_is_named_and_a_restart_never_reuses_a_name,
        ),
        (
            "a_primary_restarted_empty_leaves_no_reading_that_claims_what_it_lost",
            a_primary_restarted_empty_leaves_no_reading_that_claims_what_it_lost,
        ),
        (
            "a_primary_restarted_with_its_files_leaves_no_reading_that_claims_what_it_lacks",
            a_primary_restarted_with_its_files_leaves_no_reading_that_claims_what_it_lacks,
        ),
        (
            "a_stalled_primary_resumes_in_its_stream_with_its_data_and_its_replica",
            a_stalled_primary_resumes_in_its_stream_with_its_data_and_its_replica,
        ),
        (
            "a_stalled_replica_catches_up_without_claiming_what_it_missed",
            a_stalled_replica_catches_up_without_claiming_what_it_missed,
        ),
    ]
}

/// A reading that broke one of the three rules, as opposed to one that
/// could not be taken (a node restarting, a timeout).
fn is_breach(e: &str) -> bool {
    ["truthful", "monotonic", "process names"]
        .iter()
        .any(|rule| e.starts_with(rule))
}

fn ensure(ok: bool, what: impl FnOnce() -> String) -> Result<(), String> {
    if ok {
        Ok(())
    } else {
        Err(what())
    }
}

fn a_primary_says_master_takes_writes_and_satisfies_only_its_target<T: Target>(
    c: &mut Contract<T>,
) -> Result<(), String> {
    let info = c.reach(0, &DataNodeTarget::Primary)?;
    ensure(info.role == "master", || format!("role {}", info.role))?;
    c.t.write(0)
        .map_err(|e| format!("a primary refused a write: {e}"))?;
    let info = c.read(0)?;
    for other in [DataNodeTarget::Isolated, c.follow(1)] {
        ensure(!c.t.satisfies(0, &info, &other), || {
            format!("a primary's reading satisfies {other:?}: {info:?}")
        })?;
    }
    Ok(())
}

fn a_fenced_primary_refuses_writes_stays_a_primary_and_keeps_its_data<T: Target>(
    c: &mut Contract<T>,
) -> Result<(), String> {
    c.reach(0, &DataNodeTarget::Primary)?;
    let w = c.t.write(0)?;
    let info = c.reach(0, &DataNodeTarget::FencedPrimary)?;
    ensure(info.role == "master", || {
        format!("fenced: role {}", info.role)
    })?;
    ensure(c.t.write(0).is_err(), || {
        "a fenced primary took a write".into()
    })?;
    ensure(c.t.holds(0, &w) == Some(true), || {
        "a fenced primary lost a write".into()
    })?;
    ensure(!c.t.satisfies(0, &info, &DataNodeTarget::Primary), || {
        format!("a fenced primary's reading satisfies Primary: {info:?}")
    })
}

/// A lapsed lease's fence held past kevy's quiesce limit (issue 34 (b),
/// §6.10): re-applied each poll as the runtime does, it refuses every write
/// throughout (on kevy it gives way to demotion at the limit, never to a
/// writable node), both nodes keep the acknowledged write, and when the node
/// is made the primary again and its replica follows it anew, a write is
/// acknowledged with every reading truthful and monotonic; a kevy primary
/// demoted at the limit names a stream no reading named before.
fn a_fence_held_past_the_quiesce_limit_refuses_writes_throughout_and_keeps_every_write<
    T: Target,
>(
    c: &mut Contract<T>,
) -> Result<(), String> {
    let (w, _) = replicate(c)?;
    c.reach(0, &DataNodeTarget::FencedPrimary)?;
    let mut demoted = false;
    for _ in 0..(QUIESCE_FENCE_LIMIT_MS + 2_000) / 250 {
        let info = c.read(0).or_else(ignore_unreachable)?;
        demoted |= info.role == "slave";
        if !c.t.satisfies(0, &info, &DataNodeTarget::FencedPrimary) {
            c.t.apply(0, &DataNodeTarget::FencedPrimary).ok();
        }
        ensure(c.t.write(0).is_err(), || {
            format!("a fenced primary took a write; reading {info:?}")
        })?;
        c.read(1).or_else(ignore_unreachable)?;
        c.t.pass(250)?;
    }
    ensure(demoted == c.t.fence_gives_way_to_demotion(), || {
        format!("past the quiesce limit the fenced primary was demoted: {demoted}")
    })?;
    ensure(
        c.t.holds(0, &w) == Some(true) && c.t.holds(1, &w) == Some(true),
        || "a write was lost under a long fence".into(),
    )?;
    let named_before = c.streams.clone();
    let info = c.reach(0, &DataNodeTarget::Primary)?;
    let info = match info.stream {
        Some(_) => info,
        None => c.read_until(0, 2_000, "naming its stream", |r| r.stream.is_some())?,
    };
    let stream = info.stream.clone().expect("named");
    ensure(!demoted || !named_before.contains(&stream), || {
        format!("demoted at the limit, then promoted into {stream}, a stream read before")
    })?;
    let follow = c.follow(0);
    c.reach(1, &follow)?;
    let w2 = c.acknowledged_write(0, 1)?;
    ensure(
        c.t.holds(1, &w) == Some(true) && c.t.holds(1, &w2) == Some(true),
        || "the replica lacks an acknowledged write after the long fence".into(),
    )
}

/// A planned handover's drain (§8): no writes, still a primary, and its
/// replica keeps its stream and position, so the successor can catch up.
fn a_primary_handing_over_refuses_writes_and_keeps_its_replica_streaming<T: Target>(
    c: &mut Contract<T>,
) -> Result<(), String> {
    let (w, before) = replicate(c)?;
    let info = c.reach(0, &DataNodeTarget::HandingOver)?;
    ensure(info.role == "master", || {
        format!("handing over: role {}", info.role)
    })?;
    ensure(c.t.write(0).is_err(), || {
        "a primary handing over took a write".into()
    })?;
    ensure(!c.t.satisfies(0, &info, &DataNodeTarget::Primary), || {
        format!("a primary handing over satisfies Primary: {info:?}")
    })?;
    let stream = before.stream.clone();
    let replica = c.read_until(1, 2_000, "still in its primary's stream", |r| {
        r.stream == stream && r.offset >= before.offset
    })?;
    ensure(c.t.holds(1, &w) == Some(true), || {
        format!("the replica of a primary handing over lost a write: {replica:?}")
    })
}

fn an_isolated_node_refuses_writes_follows_nowhere_and_keeps_its_data<T: Target>(
    c: &mut Contract<T>,
) -> Result<(), String> {
    c.reach(0, &DataNodeTarget::Primary)?;
    let w = c.t.write(0)?;
    let info = c.reach(0, &DataNodeTarget::Isolated)?;
    ensure(info.role != "master", || {
        format!("isolated: role {}", info.role)
    })?;
    let upstream = (info.master_host.as_deref(), info.master_port);
    ensure(upstream == (Some(NOWHERE.0), Some(NOWHERE.1)), || {
        format!("an isolated node follows {upstream:?}")
    })?;
    ensure(c.t.write(0).is_err(), || {
        "an isolated node took a write".into()
    })?;
    ensure(c.t.holds(0, &w) == Some(true), || {
        "an isolated node lost a write".into()
    })
}

/// n1 primary, n2 its replica, one write acknowledged by n2 and read there.
fn replicate<T: Target>(c: &mut Contract<T>) -> Result<(T::Write, ReplicationInfo), String> {
    c.reach(0, &DataNodeTarget::Primary)?;
    let follow = c.follow(0);
    c.reach(1, &follow)?;
    let w = c.acknowledged_write(0, 1)?;
    let at = c.read(0)?;
    let stream = at.stream.clone();
    let offset = at.offset;
    let replica = c.read_until(1, 5_000, "in its primary's stream at its offset", |r| {
        r.stream == stream && r.offset >= offset
    })?;
    ensure(c.t.holds(1, &w) == Some(true), || {
        "the replica lacks an acknowledged write".into()
    })?;
    Ok((w, replica))
}

fn a_replica_joins_its_primary_stream_and_holds_what_it_acknowledged<T: Target>(
    c: &mut Contract<T>,
) -> Result<(), String> {
    let (_, replica) = replicate(c)?;
    ensure(replica.role != "master", || "a replica says master".into())?;
    let follow = c.follow(0);
    ensure(c.t.satisfies(1, &replica, &follow), || {
        format!("a replica's reading does not satisfy its follow: {replica:?}")
    })?;
    ensure(
        !c.t.satisfies(1, &replica, &DataNodeTarget::Primary),
        || format!("a replica's reading satisfies Primary: {replica:?}"),
    )?;
    ensure(c.t.write(1).is_err(), || "a replica took a write".into())
}

fn a_promotion_starts_a_stream_no_reading_named_before<T: Target>(
    c: &mut Contract<T>,
) -> Result<(), String> {
    let (w, replica) = replicate(c)?;
    let old = replica.stream.clone();
    c.reach(0, &DataNodeTarget::Isolated)?;
    let named_before = c.streams.clone();
    let info = c.reach(1, &DataNodeTarget::Primary)?;
    // A primary names its stream (kevy: a tick after its promotion).
    let info = match info.stream {
        Some(_) => info,
        None => c.read_until(1, 2_000, "naming its stream", |r| r.stream.is_some())?,
    };
    let stream = info.stream.clone().expect("named");
    ensure(!named_before.contains(&stream), || {
        format!("the promoted node names {stream}, a stream read before ({named_before:?})")
    })?;
    ensure(
        info.stream_prev.is_none() || info.stream_prev == old,
        || {
            format!(
                "the new stream says it continues {:?}, not {old:?}",
                info.stream_prev
            )
        },
    )?;
    ensure(c.t.holds(1, &w) == Some(true), || {
        "the promoted node lost a write".into()
    })?;
    // The old primary follows the new one and gets what it acknowledges.
    let follow = c.follow(1);
    c.reach(0, &follow)?;
    let w2 = c.acknowledged_write(1, 1)?;
    ensure(
        c.t.holds(0, &w2) == Some(true) && c.t.holds(0, &w) == Some(true),
        || "the old primary, following, lacks an acknowledged write".into(),
    )
}

fn every_process_is_named_and_a_restart_never_reuses_a_name<T: Target>(
    c: &mut Contract<T>,
) -> Result<(), String> {
    c.reach(0, &DataNodeTarget::Primary)?;
    c.t.write(0)?;
    c.read_until(0, 3_000, "naming its process", |r| {
        !r.process_names.is_empty()
    })?;
    for keep_data in [true, false] {
        c.restart(0, keep_data);
        c.reach(0, &DataNodeTarget::Isolated)?;
        c.read_until(0, 3_000, "naming its new process", |r| {
            !r.process_names.is_empty()
        })?;
        c.reach(0, &DataNodeTarget::Primary)?;
        c.read_until(0, 3_000, "naming its process as a primary", |r| {
            !r.process_names.is_empty()
        })?;
    }
    Ok(())
}

fn a_primary_restarted_empty_leaves_no_reading_that_claims_what_it_lost<T: Target>(
    c: &mut Contract<T>,
) -> Result<(), String> {
    replicate(c)?;
    c.acknowledged_write(0, 1)?;
    c.acknowledged_write(0, 1)?;
    // At once, under adapters that still hold their targets: the replica's
    // data node may reconnect by itself (kevy does, in ~250 ms) and take
    // whatever the new process serves. Every reading of either node from
    // here is held to the rules, the truthful one above all.
    c.restart(0, false);
    read_both_for_three_seconds(c)
}

/// The same with the primary's files kept (its AOF): the new process may
/// serve what it loaded, in a new stream or its old one, and its replica
/// (kevy) may move to it by itself; nothing read may claim more than the
/// node holds.
fn a_primary_restarted_with_its_files_leaves_no_reading_that_claims_what_it_lacks<T: Target>(
    c: &mut Contract<T>,
) -> Result<(), String> {
    replicate(c)?;
    c.acknowledged_write(0, 1)?;
    c.restart(0, true);
    read_both_for_three_seconds(c)
}

/// How long a stall lasts: past kevy's reconnect window (1 s in the real
/// target's configuration) and its replicas' own reconnects, so whatever a
/// data node does about a silent peer, it has done.
const STALL_MS: u64 = 3_000;

/// A data node stalled (SIGSTOP) under its adapter (issue 34: parts fail
/// alone): its readings fail while it is stopped (no breach), its replica's
/// readings stay truthful and monotonic, and once it resumes it is the
/// primary it was, in the stream it was, with everything it held, and its
/// replica acknowledges its next write in that stream.
fn a_stalled_primary_resumes_in_its_stream_with_its_data_and_its_replica<T: Target>(
    c: &mut Contract<T>,
) -> Result<(), String> {
    let (w, before) = replicate(c)?;
    c.t.pause(0, true);
    for _ in 0..STALL_MS / 100 {
        c.read(1).or_else(ignore_unreachable)?;
        c.t.pass(100)?;
    }
    c.t.pause(0, false);
    let info = c.reach(0, &DataNodeTarget::Primary)?;
    ensure(c.t.holds(0, &w) == Some(true), || {
        "a primary lost a write in a stall".into()
    })?;
    let w2 = c.acknowledged_write(0, 1)?;
    let stream = c.read(0)?.stream;
    ensure(info.stream.is_none() || stream == before.stream, || {
        format!(
            "a stall moved the primary from {:?} to {stream:?}",
            before.stream
        )
    })?;
    ensure(
        c.t.holds(1, &w) == Some(true) && c.t.holds(1, &w2) == Some(true),
        || "the replica of a stalled primary lacks an acknowledged write".into(),
    )
}

/// The replica stalls while its primary takes writes: once it resumes, no
/// reading places it at or past a write before it holds it (the truthful
/// rule, on every reading), and it catches up in its primary's stream.
fn a_stalled_replica_catches_up_without_claiming_what_it_missed<T: Target>(
    c: &mut Contract<T>,
) -> Result<(), String> {
    replicate(c)?;
    c.t.pause(1, true);
    let mut missed = Vec::new();
    for _ in 0..3 {
        // `WAIT 0`: the primary's own position is what the rule compares.
        missed.push(c.acknowledged_write(0, 0)?);
        c.t.pass(STALL_MS / 3)?;
    }
    c.t.pause(1, false);
    let at = c.read(0)?;
    let (stream, offset) = (at.stream.clone(), at.offset);
    c.read_until(1, 10_000, "caught up in its primary's stream", |r| {
        r.stream == stream && r.offset >= offset
    })?;
    for w in &missed {
        ensure(c.t.holds(1, w) == Some(true), || {
            format!("the resumed replica lacks {w:?}")
        })?;
    }
    Ok(())
}

/// Reads both nodes every 100 ms for 3 s, each reading held to the rules;
/// a reading that could not be taken (a node restarting) is no breach.
fn read_both_for_three_seconds<T: Target>(c: &mut Contract<T>) -> Result<(), String> {
    for _ in 0..30 {
        c.read(1).or_else(ignore_unreachable)?;
        c.read(0).or_else(ignore_unreachable)?;
        c.t.pass(100)?;
    }
    Ok(())
}

/// A reading that failed (the node restarting) is no breach of the rules.
fn ignore_unreachable(e: String) -> Result<ReplicationInfo, String> {
    if is_breach(&e) {
        Err(e)
    } else {
        Ok(ReplicationInfo::default())
    }
}
