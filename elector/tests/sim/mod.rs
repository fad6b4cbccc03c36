//! Deterministic discrete-event simulator over the pure core
//! (docs/protocol.md §9). Everything random comes from one seeded RNG, so a
//! seed replays exactly: `SIM_SEED=<n> cargo test -p elector --test simulation`.

mod adapter;
pub mod alone;
pub mod datalayer;
mod faults;
pub mod invariants;
mod kevy;
mod replication;
mod world;

pub use world::{sim_timings, World};

use datalayer::{AckedWrite, DataNode, PendingWrite};
use elector::core::{
    Action, Backend, Core, CoreConfig, DataNodeTarget, Event, Faults, Fence, Gate, Member, Millis,
    Notice, Output, PersistedState, Preempt, Timings,
};
use elector::datanode::driver::{Command, Driver, Outcome};
use elector::net::fingerprint::Fingerprint;
use elector::protocol::{Message, Role};
use invariants::Invariants;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

#[derive(Debug)]
enum Ev {
    Tick {
        node: usize,
        generation: u64,
    },
    Deliver {
        from: usize,
        to: usize,
        msg: Message,
        incarnation: u64,
    },
    PersistDone {
        node: usize,
        seq: u64,
        state: PersistedState,
        ok: bool,
        gates: bool,
        incarnation: u64,
    },
    DataStep,
    /// The adapter's poll timer.
    Poll {
        node: usize,
    },
    /// A command the adapter sent its data node completes.
    DataCommand {
        node: usize,
        incarnation: u64,
        command: Command,
        /// When the adapter sent it, and to which data-node process: a
        /// command outlives a frozen sender, never the process it was sent to.
        sent_at: Millis,
        process: u64,
    },
    /// Its answer reaches an adapter that was frozen with its elector.
    DataAnswer {
        node: usize,
        incarnation: u64,
        outcome: Outcome,
    },
    /// A command of the kevy policy reaches its kevy (`sim/kevy.rs`).
    KevyCommand {
        node: usize,
        incarnation: u64,
        command: elector::datanode::kevy_policy::KevyCommand,
        sent_at: Millis,
        process: u64,
    },
    /// Its answer reaches a policy that was frozen with its elector.
    KevyAnswer {
        node: usize,
        incarnation: u64,
        outcome: elector::datanode::kevy_policy::KevyOutcome,
    },
}

/// The seeds a seeded test runs: `SIM_SEED=<n>` replays one; otherwise
/// `0..count`, `count` from the environment variable `count_var` (the
/// test's own) or `default`.
pub fn seeds_from_env(count_var: &str, default: u64) -> Vec<u64> {
    if let Ok(one) = std::env::var("SIM_SEED") {
        return vec![one.parse().expect("SIM_SEED is a number")];
    }
    let count: u64 = std::env::var(count_var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    // `SIM_SEED_FROM=n` starts the range at n: a run can look past a seed
    // already known to fail (the search stops at its first failure).
    let from: u64 = std::env::var("SIM_SEED_FROM")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    (from..from + count).collect()
}

struct Queued {
    at: Millis,
    order: u64,
    ev: Ev,
}
impl PartialEq for Queued {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.order) == (o.at, o.order)
    }
}
impl Eq for Queued {}
impl PartialOrd for Queued {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Queued {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.order).cmp(&(o.at, o.order))
    }
}

pub struct SimNode {
    /// A witness: an elector with no data node (§4.5).
    pub witness: bool,
    pub core: Option<Core>,
    pub disk: PersistedState,
    pub incarnation: u64,
    pub tick_generation: u64,
    pub paused_until: Option<Millis>,
    /// The pause holds the data node too (`docker pause`), or only the
    /// elector process (`kill -STOP` of the elector).
    pub pause_data_too: bool,
    pub data: DataNode,
    /// Writes to one disk complete in order, like the shell's single writer.
    pub disk_free_at: Millis,
    /// Until then every write to this disk fails (read-only or full disk).
    pub disk_broken_until: Millis,
    /// Since when the elector has not answered (dead or stopped): what the
    /// watchdog measures.
    pub elector_silent_since: Option<Millis>,
    /// The end of the lease the elector last reported to its watchdog
    /// (real time), which fences by it if the elector goes quiet (§6.4.1).
    pub watchdog_deadline: Option<Millis>,
    /// This node's clock rate relative to real time.
    pub clock_rate: f64,
    /// The last target the elector issued, with the data-node generation it
    /// was chosen for (the shell's watch channel to its adapter).
    pub last_target: Option<(u64, u64, DataNodeTarget)>,
    /// The real adapter's rules, alive as long as the elector process.
    pub driver: Option<Driver>,
    /// The data-node process this elector's tether is connected to (§6.8);
    /// `None` before its first read.
    pub tether: Option<u64>,
    /// kevy: the real kevy policy of this elector incarnation, and the
    /// driver command its operation in progress carries out.
    pub kevy_policy: Option<elector::datanode::kevy_policy::KevyPolicy>,
    pub kevy_op: Option<kevy::KevyOp>,
    /// kevy: the watchdog's own policy (another process beside the data
    /// node, alive across the elector's restarts, §6.4.1) and the kevy
    /// process it last spoke to.
    pub kevy_watchdog: Option<(elector::datanode::kevy_policy::KevyPolicy, u64)>,
    /// The watchdog has clamped in the elector's current silence (the real
    /// one tells its policy when a silence begins).
    pub watchdog_clamped_in_silence: bool,
    /// The target of the adapter's round in progress (seq, generation).
    pub round: Option<(u64, u64, DataNodeTarget)>,
    /// A newer target arrived while a round was running: the adapter
    /// starts the next round as soon as this one ends.
    pub target_changed: bool,
    /// Someone lifted the fence by hand at this time.
    pub tampered_at: Option<Millis>,
    /// Every fence on this node's data node takes this long (a command
    /// running into its timeout, kevy's blocking `REPLICAOF`).
    pub slow_fence_ms: Option<u64>,
    /// This node's elector runs with other timings than the cluster's (a
    /// rolling configuration change in progress).
    pub timings_override: Option<Timings>,
    /// What its `HELLO` would carry (§3.7), kept current by `reconfigure`.
    pub fingerprint: Fingerprint,
    /// Actions waiting for a durable write, as the shell holds them (§5.2).
    pub gate: Gate,
}

pub struct Sim {
    /// Members `0..data` have a data node; the rest are witnesses.
    data: usize,
    pub seed: u64,
    pub now: Millis,
    pub rng: StdRng,
    pub world: World,
    pub timings: Timings,
    pub nodes: Vec<SimNode>,
    pub ids: Vec<String>,
    /// `blocked[a][b]`: messages from a to b are dropped.
    pub blocked: Vec<Vec<bool>>,
    queue: BinaryHeap<Reverse<Queued>>,
    order: u64,
    next_write: u64,
    pub pending_writes: Vec<PendingWrite>,
    pub acked: Vec<AckedWrite>,
    pub inv: Invariants,
    pub faults: Faults,
    pub events_handled: u64,
    /// The faults the schedule injected, in order, by their shared name.
    pub injected: Vec<::faults::FaultKind>,
    /// Count a write acknowledged at this many replica copies instead of
    /// the cluster's data promise (only to show the promise is needed).
    pub ack_copies_override: Option<usize>,
    /// The executor reports a failed read without the tether's answer, as
    /// the real adapter did before issue 35 (a control: a loading kevy
    /// replica is then fenced blind and full-syncs again).
    pub unread_without_tether: bool,
    /// kevy replicas load each full resync's snapshot for a while, reads
    /// timing out meanwhile (`sim/kevy.rs`, `load_ms`). Off by default so
    /// the kept regression seeds replay the schedules they were found in.
    pub kevy_loads_snapshots: bool,
    /// The random schedules also stall data nodes alone (`stall_data`).
    /// Off by default so the kept regression seeds replay the schedules they
    /// were found in.
    pub draws_data_stalls: bool,
    /// Every kevy policy reports a promoted node's first master reading at
    /// once (a control: the tick after a promotion switched off).
    pub kevy_report_before_naming: bool,
    /// The kevy policy believes the offset a replica brings over when it
    /// moves to another feed generation by itself (a test-only switch:
    /// the adapter before the contract found it, protocol §6.11).
    pub kevy_believes_a_resync_by_itself: bool,
    /// How long a lapsed lease's quiesce fences a kevy primary before its
    /// policy demotes it (`data_node.kevy_quiesce_fence_limit_ms`; 60 s by
    /// default, which no 30 s schedule reaches; set it before the first
    /// `run_until`, as a configuration is set before the start).
    pub kevy_quiesce_fence_limit_ms: Millis,
    /// Every kevy observation reads `INFO replication` once, before the
    /// token, as the adapter did before `KevyReading::info_after` (a
    /// control: a role changed by someone else mid-read is then read as
    /// a stream).
    pub kevy_reads_role_once: bool,
    /// The kevy policies load and check no process marks (the rules
    /// before `datanode::kevy_mark`): a control, so the model shows
    /// what the marks are for.
    pub kevy_without_marks: bool,
    /// A control: electors keep no watch file (`kevy_policy::watch`), as
    /// before a restarted elector resumed the runner it watched.
    pub kevy_without_watch: bool,
    /// `lose_state_and_reset` starts the node from a fresh state, as
    /// `--reset-state` did before `PersistedState::after_state_loss`: a
    /// control, so the model shows what the unknown floor is for.
    pub reset_as_fresh: bool,
    /// Clients write to every writable data node (off when the adapter
    /// contract suite is the only writer, `sim/alone.rs`).
    pub clients_write: bool,
    /// The next node to become primary finds its disk broken at once: its
    /// first persist as primary (the stream epoch) fails (finding 2).
    pub break_disk_on_promotion: Option<u64>,
    /// Each node's `priority` and the cluster's preemption setting (§8.1);
    /// all 100 and off unless a test calls [`Sim::prefer`].
    pub priorities: Vec<u32>,
    pub preempt: Preempt,
    /// The last stream id handed out (§6.10): each promotion and each
    /// restart that loses its stream gets a new one.
    streams: u64,
    /// How many times the schedule had to play the operator who accepts a
    /// data loss (`elector accept-data-loss`, §6.10).
    pub operator_interventions: u64,
    /// The data node kind the electors are told they drive (§6.10).
    pub backend: Backend,
}

impl Sim {
    pub fn new(seed: u64, n: usize, world: World, faults: Faults) -> Sim {
        Sim::with_witnesses(seed, n, 0, world, faults)
    }

    /// `data` data members then `witnesses` witnesses (no data node, §4.5).
    pub fn with_witnesses(
        seed: u64,
        data: usize,
        witnesses: usize,
        world: World,
        faults: Faults,
    ) -> Sim {
        Sim::build(seed, data, witnesses, world, faults, false)
    }

    /// `n` kevy 7.0.0 data nodes, each driven by the real kevy policy
    /// (`sim/kevy.rs`), their electors told their backend restarts its
    /// stream at every promotion (§6.10).
    #[allow(dead_code)] // used by tests/simulation.rs, not tests/preemption.rs
    pub fn kevy(seed: u64, data: usize, witnesses: usize, world: World, faults: Faults) -> Sim {
        Sim::build(seed, data, witnesses, world, faults, true)
    }

    fn build(
        seed: u64,
        data: usize,
        witnesses: usize,
        world: World,
        faults: Faults,
        kevy: bool,
    ) -> Sim {
        let n = data + witnesses;
        let ids: Vec<String> = (1..=n).map(|i| format!("n{i}")).collect();
        let timings = sim_timings(&world);
        let mut sim = Sim {
            seed,
            now: 0,
            rng: StdRng::seed_from_u64(seed ^ 0x5eed),
            world,
            timings,
            nodes: Vec::new(),
            blocked: vec![vec![false; n]; n],
            queue: BinaryHeap::new(),
            order: 0,
            next_write: 1,
            pending_writes: Vec::new(),
            acked: Vec::new(),
            inv: Invariants::new(n, timings),
            faults,
            events_handled: 0,
            injected: Vec::new(),
            break_disk_on_promotion: None,
            ack_copies_override: None,
            unread_without_tether: false,
            kevy_loads_snapshots: false,
            draws_data_stalls: false,
            kevy_report_before_naming: false,
            kevy_believes_a_resync_by_itself: false,
            kevy_quiesce_fence_limit_ms: 60_000,
            kevy_reads_role_once: false,
            kevy_without_marks: false,
            kevy_without_watch: false,
            reset_as_fresh: false,
            clients_write: true,
            priorities: vec![100; n],
            preempt: Preempt::default(),
            backend: Backend {
                promotion_restarts_stream: kevy,
            },
            streams: 0,
            operator_interventions: 0,
            ids,
            data,
        };
        let fingerprint = sim.fingerprint(&timings, data);
        for i in 0..n {
            let drift = sim.world.clock_drift;
            let clock_rate = if drift > 0.0 {
                1.0 + sim.rng.gen_range(-drift..=drift)
            } else {
                1.0
            };
            let witness = i >= data;
            let mut data_node = DataNode::new();
            data_node.up = !witness;
            // Process ids unique across nodes as well as restarts, as Redis's
            // `run_id` is: a name the model gives a process is never given to
            // another (the adapter contract, protocol §6.11).
            data_node.process_id = 1 + i as u64 * 1_000_000;
            if kevy && !witness {
                sim.streams += 1;
                data_node.kevy = Some(datalayer::KevyState {
                    generation: sim.streams,
                    ..datalayer::KevyState::default()
                });
            }
            sim.nodes.push(SimNode {
                witness,
                core: None,
                disk: PersistedState::default(),
                incarnation: 0,
                tick_generation: 0,
                paused_until: None,
                pause_data_too: true,
                data: data_node,
                disk_free_at: 0,
                disk_broken_until: 0,
                elector_silent_since: None,
                watchdog_deadline: None,
                clock_rate,
                last_target: None,
                driver: None,
                tether: None,
                kevy_policy: None,
                kevy_op: None,
                kevy_watchdog: None,
                watchdog_clamped_in_silence: false,
                round: None,
                target_changed: false,
                tampered_at: None,
                slow_fence_ms: None,
                timings_override: None,
                fingerprint: fingerprint.clone(),
                gate: Gate::default(),
            });
            sim.boot(i);
            let first = sim.rng.gen_range(0..50);
            sim.push(first, Ev::Poll { node: i });
        }
        sim.push(10, Ev::DataStep);
        // A fence lifted by hand lasts until the next adapter poll (50 ms)
        // has re-applied the fence (one data step, the slowest fence).
        sim.inv.tamper_grace_ms = 50 + 10 + sim.world.fence_ms.1 + 10;
        if kevy {
            // kevy: an adapter waiting for a new upstream's promotion (up
            // to PROMOTION_WAIT_MS) reads its own node again only after
            // that wait, and before the next one (protocol §6.4: a fence
            // lifted by hand then lasts one wait longer, never two), and
            // re-applies a follow as a `REPLICAOF` and a lift of the
            // quiesce.
            sim.inv.tamper_grace_ms += elector::datanode::kevy_policy::PROMOTION_WAIT_MS
                + sim.world.apply_ms.1
                + sim.world.fence_ms.1;
        }
        // A node resuming from a stall (or a fault that only its own
        // elector sees) is writable until its fence applies (§6.2).
        sim.inv.overlap_bound_ms = 50 + sim.world.fence_ms.1;
        sim
    }

    /// The kevy policy's test-only switches, as this simulation sets them.
    /// Every kevy policy's quiesce fences a primary for `ms` at most (set
    /// at the start, as a configuration is: the policies are built again).
    pub fn with_kevy_quiesce_fence_limit(mut self, ms: Millis) -> Sim {
        self.kevy_quiesce_fence_limit_ms = ms;
        for i in 0..self.nodes.len() {
            self.nodes[i].kevy_policy = self.fresh_kevy_policy(i);
        }
        self
    }

    pub(crate) fn kevy_switches(&self) -> kevy::PolicyKnobs {
        kevy::PolicyKnobs {
            report_before_naming: self.kevy_report_before_naming,
            believe_a_resync_by_itself: self.kevy_believes_a_resync_by_itself,
            quiesce_fence_limit_ms: self.kevy_quiesce_fence_limit_ms,
        }
    }

    /// A stream id never used before (§6.10).
    pub fn fresh_stream(&mut self) -> u64 {
        self.streams += 1;
        self.streams
    }

    /// A data node started again with its files: it comes back in its
    /// stream only if the server persisted it (`World::restart_keeps_stream`).
    pub(crate) fn stream_after_restart(&mut self, i: usize) {
        if !self.rng.gen_bool(self.world.restart_keeps_stream) {
            let fresh = self.fresh_stream();
            let d = &mut self.nodes[i].data;
            d.stream = fresh;
            d.stream_prev = None;
        }
    }

    /// The node that believes it is primary, if exactly one does.
    /// The `HELLO` fingerprint of this membership with `timings` (§3.7):
    /// the first `data` ids are data members, the rest witnesses.
    fn fingerprint(&self, timings: &Timings, data: usize) -> Fingerprint {
        let members = self
            .ids
            .iter()
            .enumerate()
            .map(|(i, id)| (id.as_str(), i >= data));
        Fingerprint::of(members, timings)
    }

    /// How many members have a data node (the first ones; the rest are
    /// witnesses).
    pub fn data_members(&self) -> usize {
        self.data
    }

    /// How many acknowledged writes node `i`'s data node lacks.
    #[allow(dead_code)] // used by tests/kevy_simulation.rs and tests/join_process_gone.rs
    pub fn acknowledged_writes_missing_on(&self, i: usize) -> usize {
        let data = &self.nodes[i].data;
        self.acked
            .iter()
            .filter(|w| !data.holds(w.index, w.chain))
            .count()
    }

    pub fn primary(&self) -> Option<usize> {
        let p: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| self.role_of(i) == Some(Role::Primary))
            .collect();
        (p.len() == 1).then(|| p[0])
    }

    fn config(&self, i: usize) -> CoreConfig {
        CoreConfig {
            node_id: self.ids[i].clone(),
            members: self
                .ids
                .iter()
                .enumerate()
                .map(|(k, id)| Member {
                    id: id.clone(),
                    data_addr: (k < self.data).then(|| format!("{id}:6379")),
                })
                .collect(),
            timings: self.timings_of(i),
            priority: self.priorities.get(i).copied().unwrap_or(100),
            max_lag: u64::MAX,
            seed: self
                .seed
                .wrapping_mul(31)
                .wrapping_add(i as u64 * 7 + self.nodes[i].incarnation),
            faults: self.faults,
            preempt: self.preempt,
            backend: self.backend,
        }
    }

    /// Delivers `msg` to node `to` as sent by node `from`, `after` ms from
    /// now, unless `to` restarts meanwhile. `transmit` uses it for the
    /// network's messages; tests use it directly for frames forged in a
    /// peer's name with auth off (issue 10 finding 8).
    pub fn deliver_after(&mut self, from: usize, to: usize, msg: Message, after: u64) {
        let incarnation = self.nodes[to].incarnation;
        self.push(
            after,
            Ev::Deliver {
                from,
                to,
                msg,
                incarnation,
            },
        );
    }

    /// The timings node `i`'s elector was started with.
    pub fn timings_of(&self, i: usize) -> Timings {
        self.nodes[i].timings_override.unwrap_or(self.timings)
    }

    /// Starts (or restarts) node `i`'s elector from what its disk holds.
    pub fn boot(&mut self, i: usize) {
        self.nodes[i].incarnation += 1;
        let now = self.clock(i);
        let mut core = Core::new(self.config(i), self.nodes[i].disk.clone(), now);
        let output = core.start(now);
        self.nodes[i].gate = Gate::default();
        self.inv.on_boot(i, &self.nodes[i].disk);
        self.nodes[i].core = Some(core);
        self.nodes[i].paused_until = None;
        self.nodes[i].elector_silent_since = None;
        // The adapter lives in the elector process: a new one starts
        // afresh (generations, applied targets, demotions).
        self.nodes[i].driver = (!self.nodes[i].witness).then(|| Driver::new("sim"));
        self.nodes[i].tether = None;
        self.nodes[i].kevy_policy = self.fresh_kevy_policy(i);
        self.nodes[i].kevy_op = None;
        self.nodes[i].round = None;
        // The gate lives in the elector process (§6.10): a new one starts
        // closed, until its adapter validates the data node again.
        self.nodes[i].data.gate_open = None;
        self.nodes[i].target_changed = false;
        self.nodes[i].last_target = None;
        self.execute(i, output);
        self.schedule_tick(i);
    }

    /// The kevy policy a new elector incarnation of node `i` starts with
    /// (`None` on Redis and on a witness).
    fn fresh_kevy_policy(&self, i: usize) -> Option<elector::datanode::kevy_policy::KevyPolicy> {
        self.nodes[i].data.kevy.as_ref()?;
        // One seed per elector incarnation, as `rand::random` per adapter
        // in the shell; drawn from nothing random, so seeds replay.
        let mark_seed = (!self.kevy_without_marks)
            .then(|| ((i as u128) << 64) | u128::from(self.nodes[i].incarnation));
        let mut policy = kevy::policy(self.kevy_switches(), mark_seed, self.clock(i));
        // As the shell does: its polls ask about the process the durable
        // state's unclaimed join was set out from (§6.10).
        policy.ask_about_joining_process(self.nodes[i].disk.joining_process().map(str::to_string));
        self.resume_kevy_watch(i, &mut policy);
        Some(policy)
    }

    fn trace(&self, i: usize, what: &str) {
        if std::env::var_os("SIM_TRACE").is_some() {
            eprintln!("{:>6} {} {what}", self.now, self.ids[i]);
        }
    }

    /// Node `i`'s clock (monotonic, at its own rate).
    pub fn clock(&self, i: usize) -> Millis {
        (self.now as f64 * self.nodes[i].clock_rate) as Millis
    }

    fn push(&mut self, delay: Millis, ev: Ev) {
        self.order += 1;
        self.queue.push(Reverse(Queued {
            at: self.now + delay,
            order: self.order,
            ev,
        }));
    }

    fn schedule_tick(&mut self, i: usize) {
        let Some(core) = self.nodes[i].core.as_ref() else {
            return;
        };
        let wake = core.next_wakeup();
        let rate = self.nodes[i].clock_rate;
        let at = ((wake as f64 / rate).ceil() as Millis).max(self.now + 1);
        self.nodes[i].tick_generation += 1;
        let generation = self.nodes[i].tick_generation;
        self.order += 1;
        self.queue.push(Reverse(Queued {
            at,
            order: self.order,
            ev: Ev::Tick {
                node: i,
                generation,
            },
        }));
    }

    /// Runs until `until`, checking every invariant after every event.
    pub fn run_until(&mut self, until: Millis) -> Result<(), String> {
        while let Some(Reverse(q)) = self.queue.peek() {
            if q.at > until {
                break;
            }
            let Reverse(q) = self.queue.pop().expect("peeked");
            self.now = q.at;
            self.step(q.ev);
            self.events_handled += 1;
            self.inv
                .check(self.now, &self.nodes, &self.acked, &self.blocked)?;
        }
        self.now = until;
        Ok(())
    }

    fn step(&mut self, ev: Ev) {
        match ev {
            Ev::Tick { node, generation } => {
                if generation == self.nodes[node].tick_generation {
                    self.feed(node, Event::Tick);
                }
            }
            Ev::Deliver {
                from,
                to,
                msg,
                incarnation,
            } => {
                if self.nodes[to].incarnation != incarnation {
                    return; // the connection died with the old incarnation
                }
                if let Some(until) = self.nodes[to].paused_until {
                    if self.now < until {
                        // Stalled process: the bytes wait in the socket buffer.
                        let delay = until - self.now;
                        self.push(
                            delay,
                            Ev::Deliver {
                                from,
                                to,
                                msg,
                                incarnation,
                            },
                        );
                        return;
                    }
                }
                let from_id = self.ids[from].clone();
                self.feed(to, Event::Message { from: from_id, msg });
            }
            Ev::PersistDone {
                node,
                seq,
                state,
                ok,
                gates,
                incarnation,
            } => {
                if self.nodes[node].incarnation != incarnation {
                    return; // crashed before the write finished: nothing on disk
                }
                if ok {
                    self.nodes[node].disk = state;
                    self.inv.on_durable(node, &self.nodes[node].disk);
                    if !self.elector_paused(node) {
                        let released = self.nodes[node].gate.release(seq);
                        self.run_actions(node, released);
                    }
                    self.feed(node, Event::Persisted { seq });
                } else {
                    if gates && !self.elector_paused(node) {
                        self.nodes[node].gate.drop_all();
                    }
                    self.feed(
                        node,
                        Event::PersistFailed {
                            seq,
                            error: "simulated EIO".into(),
                        },
                    );
                }
            }
            Ev::Poll { node } => {
                self.watchdog(node);
                let idle = self.nodes[node]
                    .driver
                    .as_ref()
                    .is_some_and(|d| !d.in_round());
                if idle && !self.elector_stopped(node) {
                    self.begin_round(node);
                }
                self.push(50, Ev::Poll { node });
            }
            Ev::DataCommand {
                node,
                incarnation,
                command,
                sent_at,
                process,
            } => self.complete_command(node, incarnation, command, (sent_at, process)),
            Ev::DataAnswer {
                node,
                incarnation,
                outcome,
            } => self.answer_adapter(node, incarnation, outcome),
            Ev::KevyCommand {
                node,
                incarnation,
                command,
                sent_at,
                process,
            } => self.kevy_command_arrives(node, incarnation, command, (sent_at, process)),
            Ev::KevyAnswer {
                node,
                incarnation,
                outcome,
            } => self.kevy_answer(node, incarnation, outcome),
            Ev::DataStep => {
                self.data_step();
                self.push(10, Ev::DataStep);
            }
        }
    }

    /// The elector process is stopped (its events wait or are lost).
    fn elector_paused(&self, i: usize) -> bool {
        self.nodes[i].paused_until.is_some_and(|u| self.now < u)
    }

    /// The elector is dead or stopped.
    fn elector_stopped(&self, i: usize) -> bool {
        self.nodes[i].core.is_none() || self.nodes[i].paused_until.is_some_and(|u| self.now < u)
    }

    fn feed(&mut self, i: usize, event: Event) {
        if self.nodes[i].paused_until.is_some_and(|u| self.now < u) {
            if let Event::Tick = event {
                self.schedule_tick(i);
            }
            return;
        }
        if self.nodes[i].paused_until.take().is_some() && self.nodes[i].core.is_some() {
            self.nodes[i].elector_silent_since = None;
        }
        let now = self.clock(i);
        let Some(core) = self.nodes[i].core.as_mut() else {
            return;
        };
        let output = core.handle(now, event);
        self.execute(i, output);
        self.schedule_tick(i);
    }

    /// Carries out one step's outputs as the shell does: fences, what may
    /// leave now, the write; gated actions wait in the node's gate.
    fn execute(&mut self, i: usize, output: Output) {
        for fence in output.fences {
            match fence {
                Fence::Apply { seq, target } => self.apply_target(i, seq, target.into()),
                Fence::Notify { epoch, reason } => {
                    self.trace(i, &format!("FENCED epoch={epoch} reason={reason}"))
                }
            }
        }
        self.run_actions(i, output.now);
        if let Some(p) = output.persist {
            self.start_write(i, p.seq, p.state, p.gates);
        }
        self.nodes[i].gate.hold(output.gated);
    }

    fn start_write(&mut self, i: usize, seq: u64, state: PersistedState, gates: bool) {
        let busy = self.nodes[i].disk_free_at.saturating_sub(self.now);
        let delay = busy
            + self
                .rng
                .gen_range(self.world.persist_ms.0..=self.world.persist_ms.1);
        self.nodes[i].disk_free_at = self.now + delay;
        let ok = !self.rng.gen_bool(self.world.persist_fail)
            && self.now >= self.nodes[i].disk_broken_until;
        let incarnation = self.nodes[i].incarnation;
        self.push(
            delay,
            Ev::PersistDone {
                node: i,
                seq,
                state,
                ok,
                gates,
                incarnation,
            },
        );
    }

    fn run_actions(&mut self, i: usize, actions: Vec<Action>) {
        for action in actions {
            match action {
                Action::Send { to, msg } => {
                    let to = self
                        .ids
                        .iter()
                        .position(|id| *id == to)
                        .expect("known peer");
                    self.inv.on_send(i, to, &msg, &self.nodes[i].disk);
                    if std::env::var_os("SIM_TRACE_MSGS").is_some()
                        && !matches!(msg, elector::protocol::Message::Hb(_))
                    {
                        eprintln!(
                            "{:>6} {} -> {} {:?}",
                            self.now, self.ids[i], self.ids[to], msg
                        );
                    }
                    self.transmit(i, to, msg);
                }
                Action::Apply { seq, target } => self.apply_target(i, seq, target.into()),
                Action::Notify(notice) => {
                    if std::env::var_os("SIM_TRACE").is_some() {
                        eprintln!(
                            "{:>6} {} {:?} pos={:?}",
                            self.now,
                            self.ids[i],
                            notice,
                            self.nodes[i].core.as_ref().map(|c| c.position())
                        );
                    }
                    if let Notice::RoleChanged {
                        to: Role::Primary,
                        epoch,
                        ..
                    } = &notice
                    {
                        self.inv.on_promoted(i, *epoch);
                        if let Some(ms) = self.break_disk_on_promotion.take() {
                            self.break_disk(i, ms);
                        }
                    }
                }
            }
        }
    }

    fn transmit(&mut self, from: usize, to: usize, msg: Message) {
        if self.blocked[from][to] || self.rng.gen_bool(self.world.loss) {
            return;
        }
        if self.world.fingerprint_check
            && self.nodes[from].fingerprint != self.nodes[to].fingerprint
        {
            return; // the HELLO was refused: no connection between them
        }
        let copies = if self.rng.gen_bool(self.world.duplicate) {
            2
        } else {
            1
        };
        for _ in 0..copies {
            let latency = self
                .rng
                .gen_range(self.world.latency_ms.0..=self.world.latency_ms.1);
            self.deliver_after(from, to, msg.clone(), latency);
        }
    }

    /// A node paused whole (data node too), like `docker pause`.
    pub fn frozen(&self, i: usize) -> bool {
        self.nodes[i].pause_data_too && self.nodes[i].paused_until.is_some_and(|u| self.now < u)
    }

    /// Node `i`'s data node alone is stopped (`stall_data`).
    pub fn data_stalled(&self, i: usize) -> bool {
        let d = &self.nodes[i].data;
        d.up && self.now < d.stalled_until
    }

    /// Node `i`'s data node does nothing now: paused with its node, or
    /// stalled alone.
    pub fn data_frozen(&self, i: usize) -> bool {
        self.frozen(i) || self.data_stalled(i)
    }

    /// Lets node `i` of the config see whether a core exists (for the final check).
    pub fn role_of(&self, i: usize) -> Option<Role> {
        self.nodes[i].core.as_ref().map(|c| c.role())
    }

    pub fn describe(&self) -> String {
        let mut s = String::new();
        for (i, node) in self.nodes.iter().enumerate() {
            match &node.core {
                Some(c) => s.push_str(&format!(
                    "{}: role={} epoch={} primary={:?} fenced={} data={:?} log={} disk={:?}\n    {}\n",
                    self.ids[i],
                    c.role(),
                    c.epoch(),
                    c.primary(),
                    c.fenced(),
                    node.data.applied,
                    node.data.log.len(),
                    node.disk,
                    c.diagnostics()
                )),
                None => s.push_str(&format!("{}: down\n", self.ids[i])),
            }
        }
        s
    }
}
