//! Deterministic discrete-event simulator over the pure core
//! (docs/protocol.md §9). Everything random comes from one seeded RNG, so a
//! seed replays exactly: `SIM_SEED=<n> cargo test -p elector --test simulation`.

pub mod datalayer;
pub mod invariants;

use datalayer::{AckedWrite, DataNode, PendingWrite};
use elector::core::{
    Action, Core, CoreConfig, DataNodeTarget, Event, Faults, Fence, Gate, Member, Millis, Notice,
    Output, PersistedState, Timings,
};
use elector::net::fingerprint::Fingerprint;
use elector::protocol::{Message, Role};
use invariants::Invariants;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Timings used in simulation: seed ratios, scaled down to keep runs short.
/// The fence margin covers the world's slowest fence (protocol §6.2.1); a
/// world with slow fences gets a longer `down_after` so a lease is left.
pub fn sim_timings(world: &World) -> Timings {
    let margin = world.margin_override.unwrap_or(world.fence_ms.1 + 20);
    let down_after = if margin > 200 { 2_000 } else { 1_000 };
    Timings {
        hb_interval_ms: 100,
        down_after_ms: down_after,
        election_timeout_ms: 600,
        backoff_min_ms: 200,
        backoff_max_ms: 800,
        fence_margin_ms: margin,
    }
}

/// How hostile the simulated world is.
#[derive(Clone, Debug)]
pub struct World {
    pub loss: f64,
    pub duplicate: f64,
    pub latency_ms: (u64, u64),
    pub persist_ms: (u64, u64),
    pub persist_fail: f64,
    pub apply_ms: (u64, u64),
    /// How long a fence target takes to reach the data node (protocol
    /// §6.2.1: slow fences, a command running into its timeout).
    pub fence_ms: (u64, u64),
    /// Each node's clock runs at a rate within this of real time (§6.2.1).
    pub clock_drift: f64,
    /// The data node's dead-man switch (watchdog process, §6.4.1).
    pub watchdog: bool,
    /// A fence margin other than the one that covers `fence_ms` (for
    /// proving that a too-small margin is caught).
    pub margin_override: Option<u64>,
    /// Nodes whose configurations disagree (members or lease timings) do
    /// not talk: the real transport refuses a `HELLO` whose fingerprint
    /// differs from its own (issue 10 finding 6, protocol §3). Off only to
    /// show what the check prevents.
    pub fingerprint_check: bool,
}

impl World {
    pub fn random(rng: &mut StdRng) -> World {
        World {
            loss: [0.0, 0.01, 0.05, 0.2][rng.gen_range(0..4)],
            duplicate: [0.0, 0.02][rng.gen_range(0..2)],
            latency_ms: (1, [5, 20, 60][rng.gen_range(0..3)]),
            persist_ms: (0, 5),
            persist_fail: [0.0, 0.0, 0.01][rng.gen_range(0..3)],
            apply_ms: (1, 30),
            fence_ms: (1, [30, 30, 500][rng.gen_range(0..3)]),
            clock_drift: [0.0, 0.01][rng.gen_range(0..2)],
            watchdog: true,
            margin_override: None,
            fingerprint_check: true,
        }
    }
}

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
        incarnation: u64,
    },
    DataStep,
    Observe {
        node: usize,
    },
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
    /// This node's clock rate relative to real time.
    pub clock_rate: f64,
    /// The last target the elector issued, with the data-node generation it
    /// was chosen for: the adapter re-applies it when the node drifts.
    pub last_target: Option<(u64, u64, DataNodeTarget)>,
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
    /// The next node to become primary finds its disk broken at once: its
    /// first persist as primary (the stream epoch) fails (finding 2).
    pub break_disk_on_promotion: Option<u64>,
}

impl Sim {
    pub fn new(seed: u64, n: usize, world: World, faults: Faults) -> Sim {
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
            break_disk_on_promotion: None,
            ids,
        };
        let fingerprint = Fingerprint::new(sim.ids.iter().map(String::as_str), &timings);
        for i in 0..n {
            let drift = sim.world.clock_drift;
            let clock_rate = if drift > 0.0 {
                1.0 + sim.rng.gen_range(-drift..=drift)
            } else {
                1.0
            };
            sim.nodes.push(SimNode {
                core: None,
                disk: PersistedState::default(),
                incarnation: 0,
                tick_generation: 0,
                paused_until: None,
                pause_data_too: true,
                data: DataNode::new(),
                disk_free_at: 0,
                disk_broken_until: 0,
                elector_silent_since: None,
                clock_rate,
                last_target: None,
                tampered_at: None,
                slow_fence_ms: None,
                timings_override: None,
                fingerprint: fingerprint.clone(),
                gate: Gate::default(),
            });
            sim.boot(i);
            let first = sim.rng.gen_range(0..50);
            sim.push(first, Ev::Observe { node: i });
        }
        sim.push(10, Ev::DataStep);
        // A fence lifted by hand lasts until the next adapter poll (50 ms)
        // has re-applied the fence (one data step, the slowest fence).
        sim.inv.tamper_grace_ms = 50 + 10 + sim.world.fence_ms.1 + 10;
        // A node resuming from a stall (or a fault that only its own
        // elector sees) is writable until its fence applies (§6.2).
        sim.inv.overlap_bound_ms = 50 + sim.world.fence_ms.1;
        sim
    }

    /// The node that believes it is primary, if exactly one does.
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
                .map(|id| Member {
                    id: id.clone(),
                    data_addr: format!("{id}:6379"),
                })
                .collect(),
            timings: self.timings_of(i),
            priority: 100,
            max_lag: u64::MAX,
            seed: self
                .seed
                .wrapping_mul(31)
                .wrapping_add(i as u64 * 7 + self.nodes[i].incarnation),
            faults: self.faults,
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

    /// A rolling configuration change reaches node `i`: its elector
    /// restarts with `timings`; the data node keeps running.
    pub fn reconfigure(&mut self, i: usize, timings: Timings) {
        self.trace(
            i,
            &format!("RECONFIGURE down_after={}", timings.down_after_ms),
        );
        self.nodes[i].timings_override = Some(timings);
        self.nodes[i].fingerprint = Fingerprint::new(self.ids.iter().map(String::as_str), &timings);
        self.nodes[i].core = None;
        self.boot(i);
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
        // counting data-node generations afresh.
        self.nodes[i].data.generation = 0;
        self.nodes[i].last_target = None;
        self.execute(i, output);
        self.schedule_tick(i);
    }

    /// Kills node `i`'s elector. The node supervisor (container entrypoint,
    /// systemd `BindsTo=`) stops the data node with it: a data node left
    /// writable without its elector would have no lease to fence it
    /// (docs/protocol.md §6.4), so `with_data` only says whether the data
    /// node loses its unpersisted tail (never here: AOF) — both stop.
    pub fn crash(&mut self, i: usize, with_data: bool) {
        let _ = with_data;
        self.nodes[i].elector_silent_since.get_or_insert(self.now);
        if std::env::var_os("SIM_TRACE").is_some() {
            eprintln!(
                "{:>6} {} CRASH with_data={with_data} log={}",
                self.now,
                self.ids[i],
                self.nodes[i].data.log.len()
            );
        }
        self.nodes[i].core = None;
        self.nodes[i].incarnation += 1;
        self.nodes[i].data.up = false;
        self.nodes[i].data.link_up = false;
    }

    pub fn restart(&mut self, i: usize) {
        if std::env::var_os("SIM_TRACE").is_some() {
            eprintln!(
                "{:>6} {} RESTART log={}",
                self.now,
                self.ids[i],
                self.nodes[i].data.log.len()
            );
        }
        if !self.nodes[i].data.up {
            // A data node comes back with its (persisted) log, read-only with
            // its last configured upstream, as kevy/Redis do with AOF.
            let d = &mut self.nodes[i].data;
            d.up = true;
            d.pending = None;
            // It restarts from its config file: read-only, upstream nowhere.
            d.applied = elector::core::DataNodeTarget::Isolated;
            d.applied_seq = 0;
            d.offset_at_apply = None;
        }
        if self.nodes[i].core.is_none() {
            self.boot(i);
        }
    }

    pub fn pause(&mut self, i: usize, for_ms: u64) {
        if self.nodes[i].core.is_some() {
            self.nodes[i].paused_until = Some(self.now + for_ms);
            self.nodes[i].pause_data_too = true;
            self.nodes[i].elector_silent_since.get_or_insert(self.now);
        }
    }

    /// `kill -STOP` of the elector alone: its data node keeps serving.
    pub fn pause_elector(&mut self, i: usize, for_ms: u64) {
        if self.nodes[i].core.is_some() {
            self.trace(i, &format!("ELECTOR STOP {for_ms} ms"));
            self.nodes[i].paused_until = Some(self.now + for_ms);
            self.nodes[i].pause_data_too = false;
            self.nodes[i].elector_silent_since.get_or_insert(self.now);
        }
    }

    /// The elector process dies; the data node keeps running as it was
    /// (parts fail alone, §6.4.1). `restart` boots the elector again.
    pub fn crash_elector(&mut self, i: usize) {
        self.trace(i, "ELECTOR CRASH");
        self.nodes[i].core = None;
        self.nodes[i].incarnation += 1;
        self.nodes[i].elector_silent_since.get_or_insert(self.now);
    }

    /// The data node process dies and comes back at once, with its data
    /// (AOF) or empty, under a running elector: as its config starts it,
    /// a read-only replica of nowhere. The adapter sees a new process.
    pub fn restart_data(&mut self, i: usize, lose_data: bool) {
        self.trace(i, &format!("DATA RESTART lose_data={lose_data}"));
        let elector_runs = self.nodes[i].core.is_some();
        let d = &mut self.nodes[i].data;
        if lose_data {
            d.log.clear();
        }
        d.up = true;
        d.link_up = false;
        d.pending = None;
        d.applied = DataNodeTarget::Isolated;
        d.offset_at_apply = None;
        if elector_runs {
            d.generation += 1;
        }
    }

    /// The disk under node `i`'s elector fails every write for `for_ms`.
    pub fn break_disk(&mut self, i: usize, for_ms: u64) {
        self.trace(i, &format!("DISK BROKEN {for_ms} ms"));
        self.nodes[i].disk_broken_until = self.now + for_ms;
    }

    /// Someone lifts the fence by hand (`CONFIG SET min-replicas-to-write
    /// 0`, `REPLICAOF NO ONE`): the data node takes writes behind the
    /// elector's back until the adapter sees the drift.
    /// Only under a running elector: with the elector stopped as well, two
    /// parts failed and the watchdog's lease bound applies instead.
    pub fn lift_fence_by_hand(&mut self, i: usize) {
        if self.elector_stopped(i) {
            return;
        }
        let d = &mut self.nodes[i].data;
        if d.up && !d.applied.writable() {
            self.trace(i, "FENCE LIFTED BY HAND");
            let d = &mut self.nodes[i].data;
            d.applied = DataNodeTarget::Primary;
            d.link_up = false;
            self.nodes[i].tampered_at = Some(self.now);
        }
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

    /// An operator asks whichever node believes it is primary for a planned
    /// handover to `to` (protocol §8); nothing happens if there is none.
    pub fn request_switchover(&mut self, to: usize, timeout_ms: u64) {
        let Some(from) = (0..self.nodes.len()).find(|&i| self.role_of(i) == Some(Role::Primary))
        else {
            return;
        };
        if std::env::var_os("SIM_TRACE").is_some() {
            eprintln!(
                "{:>6} SWITCHOVER {} -> {}",
                self.now, self.ids[from], self.ids[to]
            );
        }
        let to = self.ids[to].clone();
        self.feed(from, Event::SwitchoverRequested { to, timeout_ms });
    }

    pub fn heal(&mut self) {
        if std::env::var_os("SIM_TRACE").is_some() {
            eprintln!("{:>6} HEAL", self.now);
        }
        for row in &mut self.blocked {
            row.iter_mut().for_each(|b| *b = false);
        }
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
                    if !self.elector_paused(node) {
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
            Ev::Observe { node } => {
                self.watchdog(node);
                if !self.elector_stopped(node) {
                    self.readapply_drift(node);
                }
                let obs = self.nodes[node].data.observe();
                self.feed(node, Event::DataNode(obs));
                self.push(50, Ev::Observe { node });
            }
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

    /// The watchdog beside the data node (§6.4.1): an elector silent for
    /// longer than the lease (plus one probe) gets its data node fenced.
    fn watchdog(&mut self, i: usize) {
        if !self.world.watchdog || self.frozen(i) {
            return;
        }
        let Some(since) = self.nodes[i].elector_silent_since else {
            return;
        };
        let bound = self.timings.lease_ms() + self.timings.hb_interval_ms;
        if self.now.saturating_sub(since) > bound {
            self.watchdog_clamp(i);
        }
    }

    /// The clamp, as the elector's start-up applies it: no writes and no
    /// upstream. A replica must stop acknowledging too: nobody vouches for
    /// its primary any more (§6.2), and a stream it keeps following into a
    /// later epoch would not be on its elector's disk. Tests call it directly
    /// for a false alarm: a probe that failed although the elector runs (a
    /// loaded host, a slow loopback).
    pub fn watchdog_clamp(&mut self, i: usize) {
        let d = &mut self.nodes[i].data;
        if d.up && d.applied != DataNodeTarget::Isolated {
            if d.applied.writable() {
                d.overridden += 1;
                d.hold_writable_through = d.applied_seq;
            }
            d.applied = DataNodeTarget::Isolated;
            d.link_up = false;
            d.pending = None;
            self.trace(i, "WATCHDOG CLAMP");
        }
    }

    /// The adapter reads the node back every poll and re-applies the
    /// current target when the node no longer matches it (a fence lifted
    /// by hand, a watchdog fence after the elector came back).
    fn readapply_drift(&mut self, i: usize) {
        let Some((seq, generation, target)) = self.nodes[i].last_target.clone() else {
            return;
        };
        let d = &self.nodes[i].data;
        if !d.up || d.pending.is_some() || generation != d.generation || d.applied == target {
            return;
        }
        // Demoted from this very target by the watchdog: only a target the
        // elector issues afterwards may make the node writable again.
        if target.writable() && seq <= d.hold_writable_through {
            return;
        }
        let delay = self.apply_delay(i, &target);
        self.nodes[i].data.pending = Some((self.now + delay, seq, target));
    }

    fn apply_delay(&mut self, i: usize, target: &DataNodeTarget) -> Millis {
        if let (true, Some(ms)) = (target.fences(), self.nodes[i].slow_fence_ms) {
            return ms;
        }
        let (lo, hi) = if target.fences() {
            self.world.fence_ms
        } else {
            self.world.apply_ms
        };
        self.rng.gen_range(lo..=hi)
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
            self.start_write(i, p.seq, p.state);
        }
        self.nodes[i].gate.hold(output.gated);
    }

    fn start_write(&mut self, i: usize, seq: u64, state: PersistedState) {
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
                incarnation,
            },
        );
    }

    /// Hands a target to the data node; only a newer one than the last
    /// counts (the shell applies targets in sequence order, §5.2.1).
    fn apply_target(&mut self, i: usize, seq: u64, target: DataNodeTarget) {
        if self.nodes[i]
            .last_target
            .as_ref()
            .is_some_and(|(last, _, _)| seq <= *last)
        {
            return;
        }
        self.trace(i, &format!("APPLY seq={seq} {target:?}"));
        // The shell tags the target with the data-node generation the core
        // knew (§6.8); the adapter applies it only to that generation.
        let generation = self.nodes[i]
            .core
            .as_ref()
            .map_or(0, |c| c.data_generation());
        self.nodes[i].last_target = Some((seq, generation, target.clone()));
        if generation == self.nodes[i].data.generation {
            let delay = self.apply_delay(i, &target);
            self.nodes[i].data.pending = Some((self.now + delay, seq, target));
        }
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

    /// Applies due targets, replicates, writes and acknowledges.
    fn data_step(&mut self) {
        let n = self.nodes.len();
        for i in 0..n {
            let frozen = self.frozen(i);
            let d = &mut self.nodes[i].data;
            if let Some((at, seq, target)) = d.pending.clone() {
                if d.up && at <= self.now && !frozen {
                    if std::env::var_os("SIM_TRACE").is_some() {
                        eprintln!("{:>6} n{} APPLIED seq={seq} {target:?}", self.now, i + 1);
                    }
                    d.applied = target;
                    d.applied_seq = seq;
                    d.offset_at_apply = Some(d.log.len() as u64);
                    d.pending = None;
                    if d.applied.writable() {
                        self.inv
                            .on_data_promoted(i, &self.nodes[i].data, &self.acked, self.now);
                    }
                }
            }
        }
        for i in 0..n {
            let upstream = match &self.nodes[i].data.applied {
                elector::core::DataNodeTarget::Follow { primary, .. } => {
                    self.ids.iter().position(|id| id == primary)
                }
                _ => None,
            };
            let linked = upstream.is_some_and(|u| {
                self.nodes[i].data.up
                    && self.nodes[u].data.is_master()
                    && !self.blocked[u][i]
                    && !self.blocked[i][u]
                    && !self.frozen(i)
                    && !self.frozen(u)
            });
            self.nodes[i].data.link_up = linked;
            if let (true, Some(u)) = (linked, upstream) {
                if u != i {
                    let (a, b) = self.nodes.split_at_mut(i.max(u));
                    let (dst, src) = if i < u {
                        (&mut a[i], &b[0])
                    } else {
                        (&mut b[0], &a[u])
                    };
                    dst.data.sync_from(&src.data.log);
                }
            }
        }
        // Clients write to every node that accepts writes.
        for i in 0..n {
            if self.nodes[i].data.writable() && !self.frozen(i) && self.rng.gen_bool(0.5) {
                let write_id = self.next_write;
                self.next_write += 1;
                let (index, chain) = self.nodes[i].data.append(write_id);
                self.pending_writes.push(PendingWrite {
                    node: i,
                    write_id,
                    index,
                    chain,
                    at: self.now,
                });
            }
        }
        let quorum = n / 2 + 1;
        let now = self.now;
        let nodes = &self.nodes;
        let mut acked = Vec::new();
        self.pending_writes.retain(|w| {
            if !nodes[w.node].data.holds(w.index, w.chain) {
                return false; // the primary itself lost it before the ack: unknown, not acked
            }
            // Like WAIT: only replicas linked to this primary acknowledge.
            let writer = format!("n{}", w.node + 1);
            let copies = (0..n)
                .filter(|&j| j != w.node && nodes[j].data.up && nodes[j].data.link_up)
                .filter(|&j| {
                    matches!(&nodes[j].data.applied,
                        elector::core::DataNodeTarget::Follow { primary, .. } if *primary == writer)
                })
                .filter(|&j| nodes[j].data.holds(w.index, w.chain))
                .count();
            if copies + 1 >= quorum {
                acked.push(AckedWrite {
                    write_id: w.write_id,
                    index: w.index,
                    chain: w.chain,
                    at: now,
                });
                return false;
            }
            now - w.at < 1_000 // WAIT timed out: the client saw a failure
        });
        self.acked.extend(acked);
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
