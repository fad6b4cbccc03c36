//! A Stateright model of a cluster of electors driving the *real* core
//! (`elector::core::Core`), the real data-node driver and the real gate,
//! over Redis-flavoured data servers (docs/protocol.md §9).
//!
//! The world, as model actions (each one an atomic step):
//! * `Deliver(k)` / `Duplicate(k)`: a message in flight reaches its peer
//!   (any one of them: the network reorders), `Duplicate` leaving a copy
//!   behind. A message never delivered is a lost one; at most
//!   `Cluster::channel_cap` messages wait per directed link, older ones
//!   are lost.
//! * `Advance`: time moves to the earliest timer of any running elector and
//!   every elector due then handles its `Tick` (in id order: the ticks of
//!   different nodes commute, what they send waits in the network). Only
//!   allowed when no adapter has a target left to carry out, i.e. electors
//!   and fences run on time (the lease argument of §6.2 assumes it; clocks
//!   do not drift here).
//! * `Persist(i)` / `PersistFail(i)`: node `i`'s oldest pending write
//!   becomes durable (the gate releases what waited for it) or fails.
//! * `Round(i)`: node `i`'s adapter carries out its target and reports.
//! * `Sync(i)`: replica `i` replicates from its upstream (link up).
//! * `Write(i)`: a client writes on the writable data node `i`; a write is
//!   acknowledged (`WAIT quorum-1`) as soon as quorum-1 linked replicas of
//!   that node hold it, the earliest moment a client could see it.
//! * `Crash(i)` / `Restart(i)`: the elector process dies (its pending
//!   writes, gate, connections and adapter with it; the watchdog fences its
//!   data node, §6.4.1) and starts again from its durable state.
//! * `DataRestartKept(i)` / `DataRestartEmpty(i)`: node `i`'s data node
//!   restarts as a new process, with its files or empty (the simulator's
//!   `restart_data`), isolated and in a stream of its own; its elector runs
//!   on and finds out on its next round (the tether).
//!
//! Ghost variables record what the properties need: every primary per
//! epoch, every vote sent, the acknowledged writes, and violations found
//! at the step they happened.

pub mod process;
pub mod server;

use elector::core::{
    Action, Backend, CoreConfig, DataNodeTarget, Event, Faults, Fence, Member, Millis, Notice,
    Output, PersistedState, Preempt, Timings,
};
use elector::datanode::driver::Command;
use elector::datanode::tether::TetherCheck;
use elector::protocol::{Message, Role};
use process::{Answer, Input, Proc};
use server::Server;
use stateright::{Expectation, Model, Property};
use std::collections::BTreeMap;

/// Timings with the seed's ratios, scaled so that a failover needs few
/// heartbeats: voter_fresh = 300 ms, lease = 100 ms.
pub fn model_timings() -> Timings {
    Timings {
        hb_interval_ms: 100,
        down_after_ms: 500,
        election_timeout_ms: 300,
        backoff_min_ms: 100,
        backoff_max_ms: 200,
        fence_margin_ms: 100,
    }
}

/// The bounds and switches of one model.
#[derive(Clone, Debug)]
pub struct Cluster {
    pub nodes: usize,
    /// The last `witnesses` members have no data node (§4.5).
    pub witnesses: usize,
    pub timings: Timings,
    pub faults: Faults,
    pub max_crashes: u32,
    /// Data-node restarts (with files or empty) per search.
    pub max_data_restarts: u32,
    pub max_duplicates: u32,
    pub max_persist_failures: u32,
    pub max_writes: u64,
    /// Messages waiting per directed link; a newer one pushes the oldest
    /// out (with 1, messages between two nodes arrive in order or not at
    /// all; across links they still reorder).
    pub channel_cap: usize,
    /// Time never advances beyond this (ms after the warm start).
    pub horizon_ms: Millis,
    /// The liveness variant (§5.1, §6.2): `Some((k, ms))` adds the action
    /// `Calm` ("faults stop"), taken at the latest after `k` steps; after
    /// it only progress actions remain (no loss, no duplicate, no crash or
    /// restart, no failed write, no client write, time advancing only once
    /// every message, write and round due has happened: timely and in
    /// order), and time is bounded by `ms` after the calm. Every path then
    /// ends in a terminal state, where Stateright judges `eventually`.
    pub liveness: Option<(u32, Millis)>,
    /// Members configured with priority 0 (never stand, §5.1): the liveness
    /// control.
    pub never_stand: Vec<usize>,
    /// The data node's kind (§6.10): kevy's promotions restart the stream.
    pub backend: Backend,
}

impl Cluster {
    pub fn three() -> Cluster {
        Cluster {
            nodes: 3,
            witnesses: 0,
            timings: model_timings(),
            faults: Faults::default(),
            max_crashes: 1,
            max_data_restarts: 0,
            max_duplicates: 1,
            max_persist_failures: 0,
            max_writes: 1,
            channel_cap: 2,
            horizon_ms: 1_500,
            liveness: None,
            never_stand: Vec::new(),
            backend: Backend::default(),
        }
    }

    /// The bounds `cargo test` runs with (`MODEL_FULL=1` or `just
    /// model-check` use [`Cluster::three`]): no duplicates, so that a
    /// useful depth fits in seconds. `MODEL_CAP` sets the messages per link
    /// (with 1, heartbeats push OFFERs and ACCEPTs out and no election
    /// completes).
    pub fn three_quick() -> Cluster {
        Cluster {
            max_duplicates: 0,
            channel_cap: std::env::var("MODEL_CAP")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(2),
            ..Cluster::three()
        }
    }

    pub fn id(&self, i: usize) -> String {
        format!("n{}", i + 1)
    }

    fn index(&self, id: &str) -> usize {
        id[1..].parse::<usize>().expect("model id") - 1
    }

    pub fn is_witness(&self, i: usize) -> bool {
        i >= self.nodes - self.witnesses
    }

    /// Two data members, quorum 2, acknowledgement `WAIT 1` (§4.5).
    pub fn two_quick() -> Cluster {
        Cluster {
            nodes: 2,
            ..Cluster::three_quick()
        }
    }

    /// Two data members and a witness (§4.5).
    pub fn two_and_witness_quick() -> Cluster {
        Cluster {
            witnesses: 1,
            ..Cluster::three_quick()
        }
    }

    pub fn config(&self, i: usize, incarnation: u64) -> CoreConfig {
        CoreConfig {
            node_id: self.id(i),
            members: (0..self.nodes)
                .map(|k| Member {
                    id: self.id(k),
                    data_addr: (!self.is_witness(k)).then(|| format!("{}:6379", self.id(k))),
                })
                .collect(),
            timings: self.timings,
            priority: if self.never_stand.contains(&i) {
                0
            } else {
                100
            },
            max_lag: u64::MAX,
            seed: 7 * i as u64 + incarnation,
            faults: self.faults,
            preempt: Preempt::default(),
            backend: self.backend,
        }
    }
}

/// One node: its elector process (`None` while dead), what the shell
/// holds for it, and its data server.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Node {
    pub proc: Option<Proc>,
    pub disk: PersistedState,
    /// Writes handed to the disk, oldest first: (seq, state).
    pub persists: Vec<(u64, PersistedState)>,
    /// The newest target the core issued: (seq, generation, target).
    pub target: Option<(u64, u64, DataNodeTarget)>,
    /// The adapter has not carried out `target` yet.
    pub round_due: bool,
    /// The data-node process the adapter's tether last saw.
    pub tether: Option<u64>,
    /// What the last round reported of the server (a new round is only
    /// worth running when the server changed).
    pub reported: Option<Server>,
    pub server: Server,
    pub incarnation: u64,
}

impl Node {
    /// The elector's next wake-up, if it runs.
    pub fn wake(&self) -> Option<Millis> {
        self.proc.as_ref().map(|p| p.core.next_wakeup())
    }

    pub fn running(&self) -> bool {
        self.proc.is_some()
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct InFlight {
    pub from: usize,
    pub to: usize,
    pub msg: Message,
}

/// What the properties read; set at the step a rule broke.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Ghost {
    /// epoch -> the node that became primary in it.
    pub primaries: BTreeMap<u64, usize>,
    /// (voter, epoch) -> the candidate it voted for (a candidate votes for
    /// itself with its OFFER).
    pub votes: BTreeMap<(usize, u64), usize>,
    /// Per node, the highest epoch its running core reported.
    pub epoch_seen: Vec<u64>,
    pub acked: Vec<u64>,
    pub pending_writes: Vec<(usize, u64)>,
    pub two_primaries_in_epoch: Option<String>,
    pub double_vote: Option<String>,
    pub epoch_went_back: Option<String>,
    pub acked_write_lost: Option<String>,
    pub two_writable: Option<String>,
    pub promotions: u32,
    pub promotions_with_acked: u32,
}

impl Ghost {
    /// The first broken rule, if any.
    pub fn violation(&self) -> Option<&String> {
        [
            &self.two_primaries_in_epoch,
            &self.double_vote,
            &self.epoch_went_back,
            &self.acked_write_lost,
            &self.two_writable,
        ]
        .into_iter()
        .flatten()
        .next()
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    pub now: Millis,
    pub nodes: Vec<Node>,
    pub net: Vec<InFlight>,
    pub streams: u64,
    pub next_write: u64,
    pub crashes: u32,
    pub data_restarts: u32,
    pub duplicates: u32,
    pub persist_failures: u32,
    /// Liveness variant: steps taken before the calm, and when it came.
    pub steps: u32,
    pub calm_at: Option<Millis>,
    pub ghost: Ghost,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Act {
    Deliver(usize),
    Duplicate(usize),
    Advance,
    Persist(usize),
    PersistFail(usize),
    Round(usize),
    Sync(usize),
    Write(usize),
    Crash(usize),
    Restart(usize),
    DataRestartKept(usize),
    DataRestartEmpty(usize),
    /// Liveness variant: faults stop from here on.
    Calm,
}

pub struct ClusterModel {
    pub cluster: Cluster,
    pub init: State,
}

/// Where the exhaustive search starts: a state reached by a fixed,
/// deterministic schedule, so that the bounded search spends its depth on
/// the interleavings that matter (an election needs a dozen steps of
/// heartbeats and timers before anything can go wrong).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Start {
    /// Every elector just booted, nothing else happened.
    Boot,
    /// One primary elected, writable, both replicas linked and in sync.
    Settled,
    /// Settled, a write acknowledged, then the primary's elector dies; the
    /// search starts a few steps before the first OFFER of its successor.
    PrimaryCrashed,
    /// As `PrimaryCrashed`, the search starting right at the crash (for
    /// liveness: the whole way to a successor, or to none).
    PrimaryJustCrashed,
    /// As `PrimaryCrashed`, but the primary took a second write that no
    /// replica holds (an unacknowledged tail), and its elector read it and
    /// a heartbeat passed, before the elector died.
    PrimaryCrashedWithTail,
    /// As `PrimaryCrashedWithTail`, then the old primary's data node
    /// restarts with its files (a new process: its tail is unproven) and its
    /// elector starts again: the case of §4.5's "whether an old primary's
    /// tail guards the promise" (with two nodes nobody can stand before).
    PrimaryBackWithTail,
    /// Settled, a write acknowledged by one replica only (the others lag),
    /// whose elector notes it; then that replica's data node restarts
    /// empty and the primary's elector dies: the only copy left is the
    /// floor the replica's elector keeps (§6.10).
    ReplicaRestartedEmpty,
    /// Settled, a write acknowledged, then the primary is cut off (nothing
    /// it sends or is sent arrives) until a replica stands; the search
    /// starts a few steps before that OFFER, every held message deliverable.
    PrimaryIsolated,
    /// As `PrimaryIsolated`, but the search starts a few steps before the
    /// successor is elected (for the checks that must reach what follows).
    SuccessorElected,
}

/// How many steps before the first OFFER the election searches start.
pub const STEPS_BEFORE_OFFER: usize = 1;

impl ClusterModel {
    pub fn new(cluster: Cluster, start: Start) -> ClusterModel {
        // The fixed schedule never calms (it takes no fault anyway).
        let liveness = cluster.liveness;
        let mut model = ClusterModel::build(
            Cluster {
                liveness: None,
                ..cluster
            },
            start,
        );
        model.cluster.liveness = liveness;
        model
    }

    fn build(cluster: Cluster, start: Start) -> ClusterModel {
        let mut world = World::new(&cluster);
        // The fixed schedule runs as long as it needs; the bound on time
        // applies from the start of the search.
        world.cluster.horizon_ms = Millis::MAX;
        let s = world.boot_all();
        if start == Start::Boot {
            world.cluster.horizon_ms = cluster.horizon_ms;
            return ClusterModel {
                cluster: world.cluster,
                init: s,
            };
        }
        let s = world
            .run(s, |_, _| false, |w, s| w.settled(s))
            .pop()
            .expect("settled");
        let init = match start {
            Start::Boot | Start::Settled => s,
            Start::PrimaryCrashed
            | Start::PrimaryJustCrashed
            | Start::PrimaryCrashedWithTail
            | Start::PrimaryBackWithTail
            | Start::ReplicaRestartedEmpty
            | Start::PrimaryIsolated
            | Start::SuccessorElected => {
                let p = (0..s.nodes.len())
                    .find(|&i| s.nodes[i].server.writable())
                    .expect("a writable primary");
                // The replica that acknowledges (the first data member
                // after the primary); with `ReplicaRestartedEmpty` the
                // others lag (their syncs never run before the crash).
                let r = (1..s.nodes.len())
                    .map(|k| (p + k) % s.nodes.len())
                    .find(|&k| !world.cluster.is_witness(k))
                    .expect("a replica");
                let lagging = move |_: &State, a: &Act| {
                    start == Start::ReplicaRestartedEmpty && matches!(a, Act::Sync(j) if *j != r)
                };
                let s = world.step(&s, Act::Write(p)).expect("write");
                let s = world
                    .run(s, lagging, |_, s: &State| !s.ghost.acked.is_empty())
                    .pop()
                    .expect("acknowledged");
                let s = if start == Start::ReplicaRestartedEmpty {
                    // The acknowledging replica's elector has read the
                    // write and a heartbeat passed (the floor is durable,
                    // §6.10's bound), then its data node comes back empty.
                    let noted = read_and_kept(&world, &s, r);
                    let s = world.run(s, lagging, noted).pop().expect("floor noted");
                    world
                        .step(&s, Act::DataRestartEmpty(r))
                        .expect("data restart")
                } else {
                    s
                };
                let with_tail = matches!(
                    start,
                    Start::PrimaryCrashedWithTail | Start::PrimaryBackWithTail
                );
                let s = if with_tail {
                    // The primary's elector reads its tail (its held
                    // position, §6.10) before it dies; no replica syncs it.
                    let s = world.step(&s, Act::Write(p)).expect("tail");
                    let no_sync = |_: &State, a: &Act| matches!(a, Act::Sync(_));
                    let held = read_and_kept(&world, &s, p);
                    world.run(s, no_sync, held).pop().expect("tail read")
                } else {
                    s
                };
                let crashed = matches!(
                    start,
                    Start::PrimaryCrashed
                        | Start::PrimaryJustCrashed
                        | Start::PrimaryCrashedWithTail
                        | Start::PrimaryBackWithTail
                        | Start::ReplicaRestartedEmpty
                );
                let s = if crashed {
                    world.step(&s, Act::Crash(p)).expect("crash")
                } else {
                    s
                };
                if start == Start::PrimaryJustCrashed {
                    let mut s = s;
                    s.ghost.promotions = 0;
                    world.cluster.horizon_ms = s.now + cluster.horizon_ms;
                    return ClusterModel {
                        cluster: world.cluster,
                        init: s,
                    };
                }
                let s = if start == Start::PrimaryBackWithTail {
                    let s = world
                        .step(&s, Act::DataRestartKept(p))
                        .expect("data restart");
                    world.step(&s, Act::Restart(p)).expect("restart")
                } else {
                    s
                };
                let cut = move |s: &State, a: &Act| {
                    !crashed
                        && matches!(a, Act::Deliver(k) if s.net[*k].from == p || s.net[*k].to == p)
                };
                let base = s.ghost.primaries.keys().max().copied().unwrap_or(0);
                let offered = move |_: &World, s: &State| {
                    s.ghost.votes.iter().any(|(&(v, e), &c)| c == v && e > base)
                };
                let mut history = world.run(s, cut, offered);
                let at = history.len().saturating_sub(1 + STEPS_BEFORE_OFFER);
                history.swap_remove(at)
            }
        };
        let mut init = init;
        init.ghost.promotions = 0;
        world.cluster.horizon_ms = init.now + cluster.horizon_ms;
        ClusterModel {
            cluster: world.cluster,
            init,
        }
    }
}

impl ClusterModel {
    /// Re-executes `schedule` (a counterexample the search printed, e.g.
    /// `[Deliver(0), Advance, Round(1)]`) from the start state, refusing an
    /// action the search could not have taken there. Every step is
    /// deterministic (the core's time and randomness come from the model),
    /// so the last state is the one the search reported.
    pub fn replay(&self, schedule: &[Act]) -> Result<State, String> {
        let mut world = World::new(&self.cluster);
        let mut s = self.init.clone();
        for (n, act) in schedule.iter().enumerate() {
            let mut enabled = Vec::new();
            world.actions(&s, &mut enabled);
            if !enabled.contains(act) {
                return Err(format!(
                    "step {n}: {act:?} is not enabled (enabled: {enabled:?})"
                ));
            }
            s = world
                .step(&s, act.clone())
                .ok_or_else(|| format!("step {n}: {act:?} led nowhere"))?;
        }
        Ok(s)
    }

    /// The fault-free schedule the start states are built with (deliver in
    /// order, then the disk, the adapters, replication, time), from `from`
    /// for at most `steps` steps or until `stop`: the actions it took.
    pub fn fair_run(
        &self,
        from: &State,
        steps: usize,
        stop: impl Fn(&State) -> bool,
    ) -> (Vec<Act>, State) {
        let mut world = World::new(&self.cluster);
        let mut s = from.clone();
        let mut taken = Vec::new();
        while taken.len() < steps && !stop(&s) {
            let Some(act) = world.fair_pick(&s, |_, _| false) else {
                break;
            };
            s = world.step(&s, act.clone()).expect("an enabled action");
            taken.push(act);
        }
        (taken, s)
    }

    /// The same model, its search starting `steps` steps further along the
    /// fault-free schedule ([`ClusterModel::fair_run`]): for the controls,
    /// whose violations lie deeper than a minute's exhaustive search.
    pub fn skip_ahead(mut self, steps: usize) -> ClusterModel {
        let (_, init) = self.fair_run(&self.init, steps, |_| false);
        self.init = init;
        self
    }

    /// The same model, its search starting `before` steps before `stop` on
    /// the fault-free schedule that never takes an action `skip` names (a
    /// fault that lasts, such as a disk that stalls): for the controls whose
    /// violation lies heartbeats beyond every start state. The search's time
    /// bound moves with the start.
    pub fn skip_ahead_until(
        mut self,
        skip: impl Fn(&State, &Act) -> bool,
        stop: impl Fn(&State) -> bool,
        before: usize,
    ) -> ClusterModel {
        let span = self.cluster.horizon_ms.saturating_sub(self.init.now);
        let mut world = World::new(&Cluster {
            horizon_ms: Millis::MAX,
            ..self.cluster.clone()
        });
        let mut history = world.run_keeping(self.init.clone(), skip, |_, s| stop(s), before + 1);
        self.init = history.swap_remove(0);
        self.init.ghost.promotions = 0;
        self.cluster.horizon_ms = self.init.now + span;
        self
    }

    /// The names of the `always` properties `s` breaks.
    pub fn broken(&self, s: &State) -> Vec<&'static str> {
        self.properties()
            .into_iter()
            .filter(|p| p.expectation == Expectation::Always && !(p.condition)(self, s))
            .map(|p| p.name)
            .collect()
    }
}

/// The liveness property's name.
pub const LIVENESS: &str = "a primary is elected once faults stop";

/// A running primary, not fenced by its lease, on a writable data node.
pub fn has_primary(s: &State) -> bool {
    s.nodes.iter().any(|n| {
        n.proc
            .as_ref()
            .is_some_and(|p| p.core.role() == Role::Primary && !p.core.fenced())
            && n.server.writable()
    })
}

/// A stop condition for [`World::run`]: node `i`'s elector has read its
/// data node as it is now, nothing of it waits for the disk, and a
/// heartbeat has passed since `s` (what it read is durable: the floor and
/// the held position, §6.10).
fn read_and_kept(world: &World, s: &State, i: usize) -> impl Fn(&World, &State) -> bool {
    let until = s.now + world.cluster.timings.hb_interval_ms;
    move |_, s| {
        let n = &s.nodes[i];
        s.now >= until
            && !n.round_due
            && n.persists.is_empty()
            && n.reported.as_ref() == Some(&n.server)
    }
}

/// Rebuilds processes and carries out actions.
struct World {
    cluster: Cluster,
}

impl World {
    fn new(cluster: &Cluster) -> World {
        World {
            cluster: cluster.clone(),
        }
    }

    fn boot_all(&mut self) -> State {
        let n = self.cluster.nodes;
        let mut s = State {
            now: 0,
            nodes: (0..n)
                .map(|_| Node {
                    proc: None,
                    disk: PersistedState::default(),
                    persists: Vec::new(),
                    target: None,
                    round_due: false,
                    tether: None,
                    reported: None,
                    server: Server::new(self.cluster.backend.promotion_restarts_stream),
                    incarnation: 0,
                })
                .collect(),
            net: Vec::new(),
            streams: 0,
            next_write: 1,
            crashes: 0,
            data_restarts: 0,
            duplicates: 0,
            persist_failures: 0,
            steps: 0,
            calm_at: None,
            ghost: Ghost {
                epoch_seen: vec![0; n],
                ..Ghost::default()
            },
        };
        for i in 0..n {
            self.restart(&mut s, i);
        }
        s
    }

    /// A fixed, fault-free schedule (deliver in order, then the disk, the
    /// adapters, replication, time; never an action `skip` names) from `s`
    /// until `stop`; returns the last states on the way.
    fn run(
        &mut self,
        s: State,
        skip: impl Fn(&State, &Act) -> bool,
        stop: impl Fn(&World, &State) -> bool,
    ) -> Vec<State> {
        self.run_keeping(s, skip, stop, STEPS_BEFORE_OFFER + 1)
    }

    /// [`World::run`], returning the last `keep` states.
    fn run_keeping(
        &mut self,
        mut s: State,
        skip: impl Fn(&State, &Act) -> bool,
        stop: impl Fn(&World, &State) -> bool,
        keep: usize,
    ) -> Vec<State> {
        let mut history = vec![s.clone()];
        for _ in 0..3_000 {
            if stop(self, &s) {
                return history;
            }
            let pick = self
                .fair_pick(&s, &skip)
                .expect("the fixed schedule can always proceed");
            s = self.step(&s, pick).expect("fixed schedule step");
            history.push(s.clone());
            if history.len() > keep {
                history.remove(0);
            }
        }
        panic!("the fixed schedule did not reach its goal:\n{s:#?}");
    }

    /// The fixed schedule's next action: deliver in order, then the disk,
    /// the adapters, replication, time (never a fault, never one `skip`
    /// names).
    fn fair_pick(&self, s: &State, skip: impl Fn(&State, &Act) -> bool) -> Option<Act> {
        let mut acts = Vec::new();
        self.actions(s, &mut acts);
        acts.retain(|a| !skip(s, a));
        let first = |f: &dyn Fn(&Act) -> bool| acts.iter().find(|a| f(a)).cloned();
        first(&|a| matches!(a, Act::Deliver(_)))
            .or_else(|| first(&|a| matches!(a, Act::Persist(_))))
            .or_else(|| first(&|a| matches!(a, Act::Round(_))))
            .or_else(|| first(&|a| matches!(a, Act::Sync(_))))
            .or_else(|| first(&|a| matches!(a, Act::Advance)))
    }

    /// One primary, writable, every other node following it with its link up.
    fn settled(&self, s: &State) -> bool {
        let writable: Vec<usize> = (0..s.nodes.len())
            .filter(|&i| s.nodes[i].server.writable())
            .collect();
        let [p] = writable[..] else { return false };
        let pid = self.cluster.id(p);
        s.net.is_empty()
            && s.nodes.iter().all(|n| n.persists.is_empty() && !n.round_due)
            && s.nodes.iter().enumerate().all(|(i, n)| {
                i == p
                    || self.cluster.is_witness(i)
                    || (n.server.link_up
                        && n.server.log == s.nodes[p].server.log
                        && matches!(&n.server.applied, DataNodeTarget::Follow { primary, .. } if *primary == pid))
            })
    }

    fn restart(&mut self, s: &mut State, i: usize) {
        let node = &mut s.nodes[i];
        node.incarnation += 1;
        let (proc, out) = Proc::boot(
            self.cluster.config(i, node.incarnation),
            node.disk.clone(),
            s.now,
        );
        node.persists.clear();
        node.target = None;
        node.round_due = false;
        node.tether = None;
        node.reported = None;
        s.ghost.epoch_seen[i] = s.nodes[i].disk.epoch;
        self.apply_output(s, i, &proc, out);
        self.refresh(s, i, &proc);
        s.nodes[i].proc = Some(proc);
    }

    /// Feeds `input` to node `i`'s process and carries out what it produced.
    fn feed(&mut self, s: &mut State, i: usize, input: Input) {
        let Some(mut proc) = s.nodes[i].proc.take() else {
            return;
        };
        let streams = &mut s.streams;
        let node = &mut s.nodes[i];
        let (server, tether) = (&mut node.server, &mut node.tether);
        let mut became_writable = false;
        let fx = proc.feed(&input, |command, round_target| match command {
            Command::Apply(t) => {
                became_writable |= server.apply(t.clone(), streams).unwrap_or(false);
                Answer::Applied(Ok(()))
            }
            Command::FenceBlind => {
                let _ = server.apply(DataNodeTarget::Isolated, streams);
                Answer::BlindFenced(Ok(()))
            }
            Command::Observe => {
                let check = match tether.replace(server.process) {
                    None => TetherCheck::First(server.process),
                    Some(p) if p == server.process => TetherCheck::Same(server.process),
                    Some(_) => TetherCheck::Replaced(server.process),
                };
                let satisfies = round_target.is_some_and(|t| *t == server.applied);
                Answer::Observed(Ok((server.info(), satisfies, check)))
            }
        });
        if matches!(input, Input::Round { .. }) {
            node.reported = Some(node.server.clone());
            node.round_due = false;
        }
        if became_writable {
            self.on_writable(s, i);
        }
        let mut outputs = fx.outputs.into_iter();
        if !fx.released.is_empty() {
            // What the gate released leaves first (the shell does so before
            // it tells the core the write is durable).
            self.run_actions(s, i, &proc, fx.released);
        }
        for out in outputs.by_ref() {
            self.apply_output(s, i, &proc, out);
        }
        self.refresh(s, i, &proc);
        s.nodes[i].proc = Some(proc);
    }

    fn apply_output(&mut self, s: &mut State, i: usize, proc: &Proc, out: Output) {
        for fence in out.fences {
            if let Fence::Apply { seq, target } = fence {
                self.set_target(s, i, proc, seq, target.into());
            }
        }
        self.run_actions(s, i, proc, out.now);
        if let Some(p) = out.persist {
            s.nodes[i].persists.push((p.seq, p.state));
        }
        // `out.gated` is held in the process's gate (replayed with it).
    }

    fn set_target(
        &mut self,
        s: &mut State,
        i: usize,
        proc: &Proc,
        seq: u64,
        target: DataNodeTarget,
    ) {
        if self.cluster.is_witness(i) {
            return; // no data node, no adapter (§4.5)
        }
        let node = &mut s.nodes[i];
        if node
            .target
            .as_ref()
            .is_some_and(|(last, _, _)| seq <= *last)
        {
            return;
        }
        node.target = Some((seq, proc.core.data_generation(), target));
        node.round_due = true;
    }

    fn run_actions(&mut self, s: &mut State, i: usize, proc: &Proc, actions: Vec<Action>) {
        for action in actions {
            match action {
                Action::Send { to, msg } => {
                    let to = self.cluster.index(&to);
                    self.on_send(s, i, to, &msg);
                    let same: Vec<usize> = (0..s.net.len())
                        .filter(|&k| s.net[k].from == i && s.net[k].to == to)
                        .collect();
                    if same.len() >= self.cluster.channel_cap {
                        s.net.remove(same[0]);
                    }
                    s.net.push(InFlight { from: i, to, msg });
                }
                Action::Apply { seq, target } => self.set_target(s, i, proc, seq, target.into()),
                Action::Notify(Notice::RoleChanged {
                    to: Role::Primary,
                    epoch,
                    ..
                }) => {
                    let g = &mut s.ghost;
                    g.promotions += 1;
                    if let Some(&other) = g.primaries.get(&epoch) {
                        if other != i && g.two_primaries_in_epoch.is_none() {
                            g.two_primaries_in_epoch = Some(format!(
                                "n{} and n{} both primary in epoch {epoch}",
                                other + 1,
                                i + 1
                            ));
                        }
                    }
                    g.primaries.entry(epoch).or_insert(i);
                }
                Action::Notify(_) => {}
            }
        }
    }

    /// §5.2: a vote is given once per epoch; a candidate's own OFFER is its vote.
    fn on_send(&mut self, s: &mut State, from: usize, to: usize, msg: &Message) {
        let (voter, epoch, candidate) = match msg {
            Message::Accept { epoch, voter } => (self.cluster.index(voter), *epoch, to),
            Message::Offer {
                epoch, candidate, ..
            } => {
                let c = self.cluster.index(candidate);
                (c, *epoch, c)
            }
            _ => return,
        };
        let _ = from;
        let g = &mut s.ghost;
        match g.votes.get(&(voter, epoch)) {
            Some(&c) if c != candidate => {
                if g.double_vote.is_none() {
                    g.double_vote = Some(format!(
                        "n{} voted for n{} and n{} in epoch {epoch}",
                        voter + 1,
                        c + 1,
                        candidate + 1
                    ));
                }
            }
            _ => {
                g.votes.insert((voter, epoch), candidate);
            }
        }
    }

    /// §6.10: a data node made writable holds every acknowledged write.
    fn on_writable(&mut self, s: &mut State, i: usize) {
        let log = &s.nodes[i].server.log;
        let g = &mut s.ghost;
        if !g.acked.is_empty() {
            g.promotions_with_acked += 1;
        }
        if let Some(w) = g.acked.iter().find(|w| !log.contains(w)) {
            if g.acked_write_lost.is_none() {
                g.acked_write_lost = Some(format!(
                    "n{} made writable without acknowledged write {w} (log {log:?})",
                    i + 1
                ));
            }
        }
    }

    /// After every step: caches, the epoch rule, the writable count, acks.
    fn refresh(&mut self, s: &mut State, i: usize, proc: &Proc) {
        let epoch = proc.core.epoch();
        let g = &mut s.ghost;
        if epoch < g.epoch_seen[i] && g.epoch_went_back.is_none() {
            g.epoch_went_back = Some(format!(
                "n{} went from epoch {} to {epoch}",
                i + 1,
                g.epoch_seen[i]
            ));
        }
        g.epoch_seen[i] = g.epoch_seen[i].max(epoch);
    }

    fn after_step(&mut self, s: &mut State) {
        let writable: Vec<usize> = (0..s.nodes.len())
            .filter(|&i| s.nodes[i].server.writable())
            .collect();
        if writable.len() > 1 && s.ghost.two_writable.is_none() {
            s.ghost.two_writable = Some(format!("writable at once: {writable:?} at {}", s.now));
        }
        // WAIT with the cluster's data promise (§4.5; quorum-1 without
        // witnesses): replicas linked to the writer hold the write.
        let need = self.cluster.config(0, 0).data_promise().max(1);
        let nodes = &s.nodes;
        let ids: Vec<String> = (0..nodes.len()).map(|k| self.cluster.id(k)).collect();
        let mut acked = Vec::new();
        s.ghost.pending_writes.retain(|&(writer, w)| {
            if !nodes[writer].server.log.contains(&w) {
                return false;
            }
            let copies = (0..nodes.len())
                .filter(|&j| j != writer && nodes[j].server.link_up)
                .filter(|&j| matches!(&nodes[j].server.applied, DataNodeTarget::Follow { primary, .. } if *primary == ids[writer]))
                .filter(|&j| nodes[j].server.log.contains(&w))
                .count();
            if copies >= need {
                acked.push(w);
                false
            } else {
                true
            }
        });
        s.ghost.acked.extend(acked);
    }

    fn urgent(&self, s: &State) -> bool {
        s.nodes.iter().any(|n| n.running() && n.round_due)
    }

    fn upstream(&self, s: &State, i: usize) -> Option<usize> {
        match &s.nodes[i].server.applied {
            DataNodeTarget::Follow { primary, .. } => Some(self.cluster.index(primary)),
            _ => None,
        }
    }

    /// What `Sync(i)` would make of replica `i`'s server, if it changes it.
    fn synced(&self, s: &State, i: usize) -> Option<Server> {
        let mut next = s.nodes[i].server.clone();
        match self.upstream(s, i) {
            Some(u) if u != i && s.nodes[u].server.is_master() => {
                next.link_up = true;
                next.sync_from(&s.nodes[u].server);
            }
            _ => next.link_up = false,
        }
        (next != s.nodes[i].server).then_some(next)
    }

    /// Time never goes beyond this: the search's horizon, or, once calm,
    /// the liveness bound after the calm.
    fn horizon(&self, s: &State) -> Millis {
        match (s.calm_at, self.cluster.liveness) {
            (Some(at), Some((_, ms))) => at + ms,
            _ => self.cluster.horizon_ms,
        }
    }

    /// A majority of electors run (the calm is a stable majority).
    fn majority_runs(&self, s: &State) -> bool {
        let quorum = self.cluster.nodes / 2 + 1;
        s.nodes.iter().filter(|n| n.running()).count() >= quorum
    }

    fn actions(&self, s: &State, acts: &mut Vec<Act>) {
        let c = &self.cluster;
        let calm = s.calm_at.is_some();
        if let Some((k, _)) = c.liveness {
            if !calm && self.majority_runs(s) {
                acts.push(Act::Calm);
                if s.steps >= k {
                    return;
                }
            }
        }
        let faults = !calm;
        for (k, m) in s.net.iter().enumerate() {
            if s.nodes[m.to].running() {
                acts.push(Act::Deliver(k));
                if faults && s.duplicates < c.max_duplicates {
                    acts.push(Act::Duplicate(k));
                }
            }
        }
        for i in 0..s.nodes.len() {
            let n = &s.nodes[i];
            if n.running() {
                if !n.persists.is_empty() {
                    acts.push(Act::Persist(i));
                    if faults && s.persist_failures < c.max_persist_failures {
                        acts.push(Act::PersistFail(i));
                    }
                }
                if n.target.is_some() && (n.round_due || n.reported.as_ref() != Some(&n.server)) {
                    acts.push(Act::Round(i));
                }
                if faults && s.crashes < c.max_crashes {
                    acts.push(Act::Crash(i));
                }
            } else if faults {
                acts.push(Act::Restart(i));
            }
            if faults && !c.is_witness(i) && s.data_restarts < c.max_data_restarts {
                acts.push(Act::DataRestartKept(i));
                acts.push(Act::DataRestartEmpty(i));
            }
            if self.synced(s, i).is_some() {
                acts.push(Act::Sync(i));
            }
            if faults && n.server.writable() && s.next_write <= c.max_writes {
                acts.push(Act::Write(i));
            }
        }
        // Once calm, time waits for everything due (nothing is lost or late).
        let quiet = !calm || !acts.iter().any(|a| !matches!(a, Act::Calm));
        if !self.urgent(s) && quiet {
            let next = s
                .nodes
                .iter()
                .filter(|n| n.running())
                .filter_map(|n| n.wake())
                .min();
            if next.is_some_and(|t| t <= self.horizon(s)) {
                acts.push(Act::Advance);
            }
        }
    }

    fn step(&mut self, last: &State, act: Act) -> Option<State> {
        let mut s = last.clone();
        if s.calm_at.is_none() && self.cluster.liveness.is_some() {
            s.steps += 1;
        }
        match act {
            Act::Calm => s.calm_at = Some(s.now),
            Act::Deliver(k) | Act::Duplicate(k) => {
                let m = if matches!(act, Act::Duplicate(_)) {
                    s.duplicates += 1;
                    s.net[k].clone()
                } else {
                    s.net.remove(k)
                };
                let from = self.cluster.id(m.from);
                let now = s.now;
                self.feed(
                    &mut s,
                    m.to,
                    Input::Handle {
                        now,
                        event: Event::Message { from, msg: m.msg },
                    },
                );
            }
            Act::Advance => {
                s.now = s
                    .nodes
                    .iter()
                    .filter(|n| n.running())
                    .filter_map(|n| n.wake())
                    .min()?;
                let now = s.now;
                for i in 0..s.nodes.len() {
                    let due = s.nodes[i].wake().is_some_and(|w| w <= now);
                    if due {
                        self.feed(
                            &mut s,
                            i,
                            Input::Handle {
                                now,
                                event: Event::Tick,
                            },
                        );
                    }
                }
            }
            Act::Persist(i) | Act::PersistFail(i) => {
                let ok = matches!(act, Act::Persist(_));
                let (seq, state) = s.nodes[i].persists.remove(0);
                if ok {
                    let disk = &s.nodes[i].disk;
                    if (state.epoch < disk.epoch || state.voted_epoch < disk.voted_epoch)
                        && s.ghost.epoch_went_back.is_none()
                    {
                        s.ghost.epoch_went_back = Some(format!(
                            "n{} wrote epoch {}/{} over {}/{}",
                            i + 1,
                            state.epoch,
                            state.voted_epoch,
                            disk.epoch,
                            disk.voted_epoch
                        ));
                    }
                    s.nodes[i].disk = state;
                } else {
                    s.persist_failures += 1;
                }
                let now = s.now;
                self.feed(&mut s, i, Input::Persisted { now, seq, ok });
            }
            Act::Round(i) => {
                let (seq, generation, target) = s.nodes[i].target.clone()?;
                let now = s.now;
                self.feed(
                    &mut s,
                    i,
                    Input::Round {
                        now,
                        seq,
                        generation,
                        target,
                    },
                );
            }
            Act::Sync(i) => s.nodes[i].server = self.synced(&s, i)?,
            Act::Write(i) => {
                let w = s.next_write;
                s.next_write += 1;
                s.nodes[i].server.log.push(w);
                s.ghost.pending_writes.push((i, w));
            }
            Act::Crash(i) => {
                s.crashes += 1;
                let node = &mut s.nodes[i];
                node.proc = None;
                node.persists.clear();
                node.round_due = false;
                // The watchdog fences a data node whose elector is gone.
                if node.server.writable() {
                    let _ = node.server.apply(DataNodeTarget::Isolated, &mut s.streams);
                }
                s.net.retain(|m| m.to != i);
            }
            Act::Restart(i) => {
                // Connections died with the old process.
                s.net.retain(|m| m.to != i);
                self.restart(&mut s, i)
            }
            Act::DataRestartKept(i) | Act::DataRestartEmpty(i) => {
                s.data_restarts += 1;
                let keep = matches!(act, Act::DataRestartKept(_));
                s.nodes[i].server.restart(keep, &mut s.streams);
            }
        }
        self.after_step(&mut s);
        Some(s)
    }
}

impl Model for ClusterModel {
    type State = State;
    type Action = Act;

    fn init_states(&self) -> Vec<State> {
        vec![self.init.clone()]
    }

    fn actions(&self, s: &State, acts: &mut Vec<Act>) {
        World::new(&self.cluster).actions(s, acts);
    }

    fn next_state(&self, s: &State, act: Act) -> Option<State> {
        World::new(&self.cluster).step(s, act)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut properties = vec![
            // §5.3: a primary needs a majority of votes in its epoch.
            Property::always("at most one primary per epoch", |_, s: &State| {
                s.ghost.two_primaries_in_epoch.is_none()
            }),
            // §5.2: the vote is durable before it leaves, and given once.
            Property::always("a vote is never given twice in an epoch", |_, s: &State| {
                s.ghost.double_vote.is_none()
            }),
            // §3.6, §5.2: epochs only grow, in memory and on disk.
            Property::always("epochs never go back on a node", |_, s: &State| {
                s.ghost.epoch_went_back.is_none()
            }),
            // §4.3, §6.10: the data promise.
            Property::always(
                "every acknowledged write is on every later primary",
                |_, s: &State| s.ghost.acked_write_lost.is_none(),
            ),
            // §6.2: the lease fences the old primary before a successor.
            Property::always("at most one writable data node", |_, s: &State| {
                s.ghost.two_writable.is_none()
            }),
            // Not vacuous: the search reaches failovers and acknowledged writes.
            Property::sometimes("a write is acknowledged", |_, s: &State| {
                !s.ghost.acked.is_empty()
            }),
            Property::sometimes("a new primary is elected", |_, s: &State| {
                s.ghost.promotions > 0
            }),
        ];
        if self.cluster.liveness.is_some() {
            // §5.1, §6.2, §9.2's liveness: once faults stop with a majority
            // running, a primary holds its lease on a writable data node
            // within the bound (judged where every path ends: the bound).
            properties.push(Property::eventually(LIVENESS, |_, s: &State| {
                s.calm_at.is_some() && has_primary(s)
            }));
        }
        properties
    }

    fn within_boundary(&self, s: &State) -> bool {
        s.now <= World::new(&self.cluster).horizon(s)
    }
}
