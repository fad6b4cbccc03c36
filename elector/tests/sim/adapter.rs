//! Each elector's data-node adapter: the real
//! `elector::datanode::driver::Driver`, its commands carried out against the
//! model server with the world's delays (docs/protocol.md §6.4.1, §6.8).

use super::{Ev, Sim};
use elector::core::{DataNodeTarget, Event, Millis};
use elector::datanode::driver::{Command, Observed, Outcome, Step, TetherCheck};
use elector::datanode::DataNodeError;
use rand::Rng;

impl Sim {
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

    /// Hands a target to the data node; only a newer one than the last
    /// counts (the shell applies targets in sequence order, §5.2.1).
    pub(super) fn apply_target(&mut self, i: usize, seq: u64, target: DataNodeTarget) {
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
        self.nodes[i].last_target = Some((seq, generation, target));
        // The adapter wakes on a new target (or right after its round).
        match self.nodes[i].driver.as_ref() {
            Some(d) if d.in_round() => self.nodes[i].target_changed = true,
            Some(_) => self.begin_round(i),
            None => {}
        }
    }

    /// The adapter starts a round for the newest target.
    pub(super) fn begin_round(&mut self, i: usize) {
        let Some((seq, generation, target)) = self.nodes[i].last_target.clone() else {
            return;
        };
        let now = self.clock(i);
        self.nodes[i].target_changed = false;
        self.nodes[i].round = Some((seq, generation, target.clone()));
        let Some(driver) = self.nodes[i].driver.as_mut() else {
            return;
        };
        let step = driver.begin(seq, generation, target, now);
        self.follow_step(i, step);
    }

    /// Sends the driver's next command, or hands its report to the core.
    fn follow_step(&mut self, i: usize, step: Step) {
        match step {
            // kevy: the policy carries an apply or a blind fence out as
            // commands of its own (`sim/kevy.rs`).
            Step::Run(command)
                if self.nodes[i].kevy_policy.is_some() && command != Command::Observe =>
            {
                self.kevy_begin(i, &command);
            }
            Step::Run(command) => {
                let delay = match &command {
                    Command::Apply(t) => self.apply_delay(i, t),
                    Command::FenceBlind => self.apply_delay(i, &DataNodeTarget::Isolated),
                    Command::Observe => 1,
                };
                let incarnation = self.nodes[i].incarnation;
                let (sent_at, process) = (self.now, self.nodes[i].data.process_id);
                self.push(
                    delay,
                    Ev::DataCommand {
                        node: i,
                        incarnation,
                        command,
                        sent_at,
                        process,
                    },
                );
            }
            Step::Done(report) => {
                self.update_gate(i, &report.obs);
                self.feed(i, Event::DataNode(report.obs));
                if self.nodes[i].target_changed && !self.elector_stopped(i) {
                    self.begin_round(i);
                }
            }
        }
    }

    /// A command the adapter sent reaches the data node. The server carries
    /// it out even if the elector (and its adapter) has frozen or died since
    /// it was sent, and a whole-node freeze (`docker pause`) holds it in the
    /// socket until the thaw; only the answer waits for the adapter. A data
    /// node that restarted meanwhile never sees it: the connection died with
    /// the process it was sent to.
    pub(super) fn complete_command(
        &mut self,
        i: usize,
        incarnation: u64,
        command: Command,
        (sent_at, process): (Millis, u64),
    ) {
        // A stalled data node holds a command in its socket too; a read
        // times out instead (below).
        let stalled = self.data_stalled(i);
        if self.frozen(i) || (stalled && !matches!(command, Command::Observe)) {
            self.push(
                10,
                Ev::DataCommand {
                    node: i,
                    incarnation,
                    command,
                    sent_at,
                    process,
                },
            );
            return;
        }
        if self.nodes[i].data.process_id != process {
            let gone = || DataNodeError::Gone("connection reset".into());
            let outcome = match command {
                Command::Apply(_) => Outcome::Applied(Err(gone())),
                Command::FenceBlind => Outcome::BlindFenced(Err(gone())),
                Command::Observe => Outcome::Observed(Err(gone())),
            };
            self.answer_adapter(i, incarnation, outcome);
            return;
        }
        let outcome = match command {
            Command::Apply(target) => Outcome::Applied(self.server_apply(i, target, sent_at)),
            Command::FenceBlind => {
                Outcome::BlindFenced(self.server_apply(i, DataNodeTarget::Isolated, sent_at))
            }
            Command::Observe if stalled => Outcome::Unread {
                error: DataNodeError::Unreachable("read timed out (stalled)".into()),
                tether: TetherCheck::Unanswered,
            },
            Command::Observe if self.kevy_loading(i) => {
                let tether = self.check_tether(i);
                let error = DataNodeError::Unreachable("REPL.TOKEN timed out (loading)".into());
                if self.unread_without_tether {
                    Outcome::Observed(Err(error))
                } else {
                    Outcome::Unread { error, tether }
                }
            }
            Command::Observe if self.nodes[i].kevy_policy.is_some() => {
                let tether = self.check_tether(i);
                self.kevy_observe(i, tether)
            }
            Command::Observe => {
                let tether = self.check_tether(i);
                let d = &self.nodes[i].data;
                let target = self.nodes[i].driver.as_ref().and_then(|dr| dr.target());
                let satisfies = target.is_some_and(|t| d.satisfies(t));
                Outcome::Observed(d.info().map(|info| Observed {
                    info,
                    satisfies,
                    tether,
                }))
            }
        };
        self.answer_adapter(i, incarnation, outcome);
    }

    /// The gate after a round, as the shell sets it (§6.10): open to the
    /// tether's process once it carries out a target that serves replicas,
    /// chosen for its generation.
    fn update_gate(&mut self, i: usize, obs: &elector::core::Observation) {
        let Some((seq, generation, target)) = self.nodes[i].round.take() else {
            return;
        };
        let open = elector::datanode::gate::opens(&target, seq, generation, obs);
        self.nodes[i].data.gate_open = self.nodes[i].tether.filter(|_| open);
    }

    /// Whether replicas may reach node `u`'s data node now: through its
    /// elector's gate (§6.10), open to its current process and its elector
    /// running; or directly, in a world without the gate (the rules before).
    pub(super) fn gate_admits(&self, u: usize) -> bool {
        !self.world.gate
            || (self.nodes[u].data.gate_open == Some(self.nodes[u].data.process_id)
                && !self.elector_stopped(u))
    }

    /// The network lets a replica `i` and its upstream `u` talk, and
    /// neither data node is frozen or stalled.
    pub(super) fn link_allowed(&self, i: usize, u: usize) -> bool {
        !self.blocked[u][i] && !self.blocked[i][u] && !self.data_frozen(i) && !self.data_frozen(u)
    }

    /// The adapter's tether (§6.8): a connection to one data-node process,
    /// dead once that process is; a new one is a new incarnation.
    pub(super) fn check_tether(&mut self, i: usize) -> TetherCheck {
        let d = &self.nodes[i].data;
        if !d.up {
            return TetherCheck::Down;
        }
        let pid = d.process_id;
        match self.nodes[i].tether {
            None => {
                self.nodes[i].tether = Some(pid);
                TetherCheck::First(pid)
            }
            Some(p) if p == pid => TetherCheck::Same(pid),
            Some(_) => {
                self.nodes[i].tether = Some(pid);
                let clock = self.kevy_clock(i);
                if let Some(policy) = self.nodes[i].kevy_policy.as_mut() {
                    policy.new_incarnation(clock);
                }
                TetherCheck::Replaced(pid)
            }
        }
    }

    /// The adapter gets a command's answer (when its process runs).
    pub(super) fn answer_adapter(&mut self, i: usize, incarnation: u64, outcome: Outcome) {
        if self.nodes[i].incarnation != incarnation {
            return; // the adapter died with its elector
        }
        if let Some(until) = self.nodes[i].paused_until.filter(|u| *u > self.now) {
            self.push(
                until - self.now,
                Ev::DataAnswer {
                    node: i,
                    incarnation,
                    outcome,
                },
            );
            return;
        }
        let now = self.clock(i);
        let Some(driver) = self.nodes[i].driver.as_mut() else {
            return;
        };
        let step = driver.next(outcome, now);
        self.follow_step(i, step);
    }

    /// The data node carries out `REPLICAOF` & co., sent at `sent_at`.
    pub(super) fn server_apply(
        &mut self,
        i: usize,
        target: DataNodeTarget,
        sent_at: Millis,
    ) -> Result<(), DataNodeError> {
        let d = &mut self.nodes[i].data;
        if !d.up {
            return Err(DataNodeError::Gone("connection refused".into()));
        }
        if std::env::var_os("SIM_TRACE").is_some() {
            eprintln!("{:>6} n{} APPLIED {target:?}", self.now, i + 1);
        }
        if d.applied != target {
            d.link_up = false;
        }
        let was_master = d.is_master();
        d.applied = target;
        if !was_master && d.is_master() {
            let new_stream = self.fresh_stream();
            self.nodes[i].data.promote(new_stream);
        }
        let d = &mut self.nodes[i].data;
        if d.applied.writable() {
            self.inv
                .on_data_promoted(i, &self.nodes[i].data, &self.acked, sent_at, self.now);
        }
        Ok(())
    }
}
