//! The faults the simulator injects (docs/protocol.md §9, §9.1): whole
//! nodes, the elector alone, the data node alone, the disk, the fence, and
//! the watchdog's answer to a silent elector.

use super::{Millis, Sim, Timings};
use elector::core::{DataNodeTarget, Event, PersistedState, Preempt};
use elector::protocol::Role;

impl Sim {
    /// A rolling configuration change reaches node `i`: its elector
    /// restarts with `timings`; the data node keeps running.
    pub fn reconfigure(&mut self, i: usize, timings: Timings) {
        self.trace(
            i,
            &format!("RECONFIGURE down_after={}", timings.down_after_ms),
        );
        self.nodes[i].timings_override = Some(timings);
        self.nodes[i].fingerprint = self.fingerprint(&timings, self.data_members());
        self.nodes[i].core = None;
        self.boot(i);
    }

    /// Gives the nodes these priorities and turns preemption on (§8.1):
    /// every elector restarts with the new configuration, the data nodes
    /// keep running (a rolling configuration change).
    #[allow(dead_code)] // used by tests/preemption.rs, not tests/simulation.rs
    pub fn prefer(&mut self, priorities: &[u32], preempt: Preempt) {
        self.priorities = priorities.to_vec();
        self.preempt = preempt;
        for (i, p) in priorities.iter().enumerate() {
            self.trace(i, &format!("PRIORITY {p}"));
            self.nodes[i].core = None;
            self.boot(i);
        }
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
        self.nodes[i].driver = None;
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
        if !self.nodes[i].data.up && !self.nodes[i].witness {
            // A data node comes back with its (persisted) log, read-only with
            // its last configured upstream, as kevy/Redis do with AOF.
            let d = &mut self.nodes[i].data;
            d.up = true;
            d.process_id += 1;
            d.stalled_until = 0;
            // It restarts from its config file: read-only, upstream nowhere.
            d.applied = DataNodeTarget::Isolated;
            self.stream_after_restart(i);
            self.kevy_restarted(i);
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
        self.nodes[i].data.gate_open = None;
        self.nodes[i].core = None;
        self.nodes[i].driver = None;
        self.nodes[i].incarnation += 1;
        self.nodes[i].elector_silent_since.get_or_insert(self.now);
    }

    /// Node `i`'s elector dies with its state file, and the operator starts
    /// it with `--reset-state` (§5.2); its data node keeps running with
    /// whatever it acknowledged.
    #[allow(dead_code)] // used by tests/simulation.rs, not tests/preemption.rs
    pub fn lose_state_and_reset(&mut self, i: usize) {
        self.trace(i, "STATE LOST, RESET");
        self.crash_elector(i);
        let disk = if self.reset_as_fresh {
            PersistedState::default()
        } else {
            PersistedState::after_state_loss()
        };
        self.nodes[i].disk = disk.clone();
        self.inv.on_state_reset(i, &disk);
        self.restart(i);
    }

    /// The data node process dies and comes back at once, with its data
    /// (AOF) or empty, under a running elector: as its config starts it,
    /// a read-only replica of nowhere. The adapter sees a new process.
    pub fn restart_data(&mut self, i: usize, lose_data: bool) {
        if self.nodes[i].witness {
            return;
        }
        self.trace(i, &format!("DATA RESTART lose_data={lose_data}"));
        let d = &mut self.nodes[i].data;
        if lose_data {
            d.log.clear();
        }
        d.up = true;
        d.link_up = false;
        d.process_id += 1;
        d.stalled_until = 0;
        d.applied = DataNodeTarget::Isolated;
        if lose_data {
            let fresh = self.fresh_stream();
            let d = &mut self.nodes[i].data;
            d.stream = fresh;
            d.stream_prev = None;
        } else {
            self.stream_after_restart(i);
        }
        self.kevy_restarted(i);
    }

    /// Node `i`'s data node alone stops for `for_ms` (SIGSTOP, then
    /// SIGCONT) under its running elector: its reads time out and the
    /// tether's `PING` goes unanswered, commands (ours, the watchdog's, an
    /// operator's) wait in their sockets, it neither takes nor serves
    /// writes or replication (issue 34: a long stall).
    pub fn stall_data(&mut self, i: usize, for_ms: u64) {
        if self.nodes[i].witness || !self.nodes[i].data.up {
            return;
        }
        self.trace(i, &format!("DATA STALL {for_ms} ms"));
        let until = self.now + for_ms;
        let d = &mut self.nodes[i].data;
        d.stalled_until = d.stalled_until.max(until);
    }

    /// An operator demotes node `i`'s data node by hand (`REPLICAOF` to
    /// nowhere) behind its running elector (issue 34 (b)).
    #[allow(dead_code)] // used by tests/simulation.rs, not tests/preemption.rs
    pub fn demote_by_hand(&mut self, i: usize) {
        self.demote_by_hand_read(i, false);
    }

    /// [`Self::demote_by_hand`] while the elector's observation is reading
    /// (`surely`; otherwise half the time): its `INFO` says `master`, its
    /// token is already the replica's (a CI rehearsal of 0b44f29, protocol
    /// §9).
    pub fn demote_by_hand_read(&mut self, i: usize, surely: bool) {
        let d = &mut self.nodes[i].data;
        if d.up && d.is_master() {
            self.trace(i, "DEMOTED BY HAND");
            self.detach_by_hand(i, surely);
            if let Some(k) = self.nodes[i].data.kevy.as_mut() {
                k.quiesced = false;
            }
        }
    }

    /// Node `i`'s data node sent to nowhere by someone else's `REPLICAOF`
    /// (read mid-change as [`Self::demote_by_hand_read`] says): on kevy its
    /// runner, and the token that said how far it got, end.
    fn detach_by_hand(&mut self, i: usize, surely: bool) {
        self.kevy_role_changing(i, surely);
        let d = &mut self.nodes[i].data;
        d.applied = DataNodeTarget::Isolated;
        d.link_up = false;
        if let Some(k) = d.kevy.as_mut() {
            k.runner = None;
        }
    }

    /// An operator points node `i`'s replica elsewhere by hand (`REPLICAOF`
    /// to an address nobody serves) behind its running elector, while the
    /// elector's observation may be reading (`surely`; otherwise half the
    /// time): on kevy its runner ends, and with it the only token that said
    /// how far it got (§6.10, "A replica's tail").
    #[allow(dead_code)] // used by tests/kevy_simulation.rs
    pub fn redirect_replica_by_hand(&mut self, i: usize, surely: bool) {
        let d = &self.nodes[i].data;
        if !d.up || d.is_master() || self.nodes[i].witness {
            return;
        }
        self.trace(i, "REPLICA REDIRECTED BY HAND");
        self.detach_by_hand(i, surely);
    }

    /// The state the protocol leaves to an operator (§6.10): no primary, and
    /// data nodes below their floors (they may lack what they acknowledged,
    /// and nothing proves otherwise). The operator who knows which node's
    /// files survived runs `elector accept-data-loss` there: here, on the
    /// data member that holds every acknowledged write (the schedules lose
    /// no data, so one does). Returns whether it acted.
    pub fn play_the_operator(&mut self) -> bool {
        let nobody_leads = (0..self.nodes.len()).all(|i| self.role_of(i) != Some(Role::Primary));
        let stuck = self
            .nodes
            .iter()
            .any(|n| !n.witness && n.core.as_ref().is_some_and(|c| c.below_floor()));
        if !nobody_leads || !stuck {
            return false;
        }
        let holder = (0..self.data_members())
            .filter(|&i| {
                let d = &self.nodes[i].data;
                self.acked.iter().all(|w| d.holds(w.index, w.chain))
            })
            .max_by_key(|&i| self.nodes[i].data.log.len());
        match holder {
            Some(i) => {
                self.accept_data_loss(i);
                true
            }
            None => false,
        }
    }

    /// The operator who accepts a data loss (§6.10): asks node `i` to stand
    /// whatever its floor. The schedules call it only in the state the
    /// protocol leaves to an operator (no primary, nodes below their
    /// floors), on a node that holds every acknowledged write.
    pub fn accept_data_loss(&mut self, i: usize) {
        self.trace(i, "OPERATOR ACCEPTS DATA LOSS");
        self.operator_interventions += 1;
        self.feed(i, Event::AcceptDataLoss);
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
        // A kevy loading a snapshot runs no command, the operator's
        // neither: the lift waits, and lands like one made after the load.
        if self.elector_stopped(i) || self.kevy_loading(i) || self.data_stalled(i) {
            return;
        }
        let d = &mut self.nodes[i].data;
        if d.up && !d.applied.writable() {
            self.trace(i, "FENCE LIFTED BY HAND");
            if self.nodes[i].data.kevy.is_some() {
                // kevy: every promotion starts a feed generation.
                if !self.nodes[i].data.is_master() {
                    self.kevy_promote(i);
                }
            } else if !self.nodes[i].data.is_master() {
                let fresh = self.fresh_stream();
                self.nodes[i].data.promote(fresh);
            }
            let d = &mut self.nodes[i].data;
            d.applied = DataNodeTarget::Primary;
            d.link_up = false;
            self.nodes[i].tampered_at = Some(self.now);
        }
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

    /// Cuts node `i` off from every other node, both ways.
    #[allow(dead_code)] // used by tests/kevy_simulation.rs
    pub fn isolate(&mut self, i: usize) {
        self.trace(i, "ISOLATED");
        for j in (0..self.nodes.len()).filter(|&j| j != i) {
            self.blocked[i][j] = true;
            self.blocked[j][i] = true;
        }
    }

    /// Lets node `i` talk to every other node again (other cuts stay).
    #[allow(dead_code)] // used by tests/kevy_simulation.rs
    pub fn unisolate(&mut self, i: usize) {
        self.trace(i, "REJOINED");
        for j in (0..self.nodes.len()).filter(|&j| j != i) {
            self.blocked[i][j] = false;
            self.blocked[j][i] = false;
        }
    }

    pub fn heal(&mut self) {
        if std::env::var_os("SIM_TRACE").is_some() {
            eprintln!("{:>6} HEAL", self.now);
        }
        for row in &mut self.blocked {
            row.iter_mut().for_each(|b| *b = false);
        }
    }

    /// The watchdog beside the data node (§6.4.1): an elector silent for
    /// longer than the lease (plus one probe) gets its data node fenced.
    pub(super) fn watchdog(&mut self, i: usize) {
        // A stalled data node runs the clamp when it resumes: this check
        // repeats every step.
        if !self.world.watchdog || self.data_frozen(i) || self.nodes[i].witness {
            return;
        }
        let Some(since) = self.nodes[i].elector_silent_since else {
            self.nodes[i].watchdog_clamped_in_silence = false;
            if !self.world.watchdog_knows_lease {
                return;
            }
            // The elector answers its probe: with the end of its lease, on
            // the real clock (the watchdog measures from its own probe).
            let rate = self.nodes[i].clock_rate;
            self.nodes[i].watchdog_deadline = self.nodes[i]
                .core
                .as_ref()
                .and_then(|c| c.writable_until())
                .map(|u| (u as f64 / rate) as Millis);
            return;
        };
        let bound = self.timings.lease_ms() + self.timings.hb_interval_ms;
        let lease_over = self.nodes[i]
            .watchdog_deadline
            .is_some_and(|u| self.now >= u);
        if self.now.saturating_sub(since) > bound || lease_over {
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
        // What a replica held when detached, for its elector's floor
        // (§6.10): nothing it holds can be acknowledged after the clamp.
        if let Some((stream, offset)) = self.floor_hint_of(i) {
            // As the watchdog does: merged with earlier entries, tagged
            // with the join the elector's durable state names.
            let joining = self.nodes[i].disk.joining();
            elector::datanode::floor_hint::merge(
                &mut self.nodes[i].data.floor_hint,
                &stream,
                offset,
                joining,
            );
        }
        // kevy: the watchdog's own policy, as the real one runs it.
        if self.nodes[i].data.kevy.is_some() {
            self.kevy_watchdog_clamp(i);
            return;
        }
        let d = &mut self.nodes[i].data;
        if d.up && d.applied != DataNodeTarget::Isolated {
            self.kevy_role_changing(i, false);
            let d = &mut self.nodes[i].data;
            d.applied = DataNodeTarget::Isolated;
            d.link_up = false;
            self.trace(i, "WATCHDOG CLAMP");
        }
    }
}
