//! One elector process as the model sees it: the real `Core`, the real
//! data-node `Driver` and the real `Gate`, rebuilt from what they were fed.
//!
//! None of the three is `Clone` (nor `Hash`), and a model checker must copy
//! and compare states. So a model state keeps each process as its *inputs*
//! since boot ([`Boot`] and a list of [`Input`]); [`Proc::replay`] rebuilds
//! the process by feeding them again. The core is a pure function of its
//! inputs (time and randomness come from outside), so the rebuilt process is
//! the one that was running. Two states are equal only if every process saw
//! the same inputs: exact, never merging different cores, at the price of
//! keeping apart states that differ only in history.

use elector::core::{Action, Core, CoreConfig, Event, Gate, Millis, Output, PersistedState};
use elector::datanode::driver::{Driver, Observed, Outcome, Step};
use elector::datanode::tether::TetherCheck;
use elector::datanode::{DataNodeError, ReplicationInfo};

use elector::core::DataNodeTarget;

/// How an incarnation started.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Boot {
    pub disk: PersistedState,
    pub now: Millis,
    pub incarnation: u64,
}

/// A data-node command's answer, in a form that can be stored and compared
/// (the driver's `Outcome` is neither `Clone` nor `Eq`). Like `Outcome`,
/// its read is not boxed: answers are few per round.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    Applied(Result<(), String>),
    Observed(Result<(ReplicationInfo, bool, TetherCheck), String>),
    BlindFenced(Result<(), String>),
}

impl Answer {
    fn outcome(&self) -> Outcome {
        let err = |e: &String| DataNodeError::Gone(e.clone());
        match self {
            Answer::Applied(r) => Outcome::Applied(r.as_ref().map(|_| ()).map_err(err)),
            Answer::BlindFenced(r) => Outcome::BlindFenced(r.as_ref().map(|_| ()).map_err(err)),
            Answer::Observed(r) => Outcome::Observed(
                r.as_ref()
                    .map(|(info, satisfies, tether)| Observed {
                        info: info.clone(),
                        satisfies: *satisfies,
                        tether: *tether,
                    })
                    .map_err(err),
            ),
        }
    }
}

/// One step of the process, as fed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    Handle {
        now: Millis,
        event: Event,
    },
    /// Write `seq` finished: the gate releases, the core hears of it.
    Persisted {
        now: Millis,
        seq: u64,
        ok: bool,
    },
    /// One adapter round for target `seq`, with the data node's answers.
    Round {
        now: Millis,
        seq: u64,
        generation: u64,
        target: DataNodeTarget,
        answers: Vec<Answer>,
    },
}

/// What a step produced for the world: the core's outputs (the gated part
/// is already held in the gate) and what the gate released.
#[derive(Default)]
pub struct Effects {
    pub outputs: Vec<Output>,
    pub released: Vec<Action>,
}

pub struct Proc {
    pub core: Core,
    pub driver: Driver,
    pub gate: Gate,
}

impl Proc {
    /// A fresh incarnation and its start-up output (the clamp).
    pub fn boot(cfg: CoreConfig, boot: &Boot) -> (Proc, Output) {
        let mut core = Core::new(cfg, boot.disk.clone(), boot.now);
        let out = core.start(boot.now);
        let mut proc = Proc {
            core,
            driver: Driver::new("model"),
            gate: Gate::default(),
        };
        proc.gate.hold(out.gated.clone());
        (proc, out)
    }

    /// The process after `inputs`.
    pub fn replay<'a>(
        cfg: CoreConfig,
        boot: &Boot,
        inputs: impl Iterator<Item = &'a Input>,
    ) -> Proc {
        let (mut proc, _) = Proc::boot(cfg, boot);
        for input in inputs {
            let _ = proc.feed(input, |_, _| {
                unreachable!("replayed rounds carry their answers")
            });
        }
        proc
    }

    fn handle(&mut self, now: Millis, event: Event, fx: &mut Effects) {
        let out = self.core.handle(now, event);
        self.gate.hold(out.gated.clone());
        fx.outputs.push(out);
    }

    /// Feeds one input. A `Round` whose `answers` are empty is run live:
    /// `execute` carries out each command against the data node and the
    /// answers are recorded into the returned input, so it replays.
    pub fn feed(
        &mut self,
        input: &Input,
        mut execute: impl FnMut(&elector::datanode::driver::Command, Option<&DataNodeTarget>) -> Answer,
    ) -> (Effects, Input) {
        let mut fx = Effects::default();
        let mut recorded = input.clone();
        match input {
            Input::Handle { now, event } => self.handle(*now, event.clone(), &mut fx),
            Input::Persisted { now, seq, ok } => {
                if *ok {
                    fx.released = self.gate.release(*seq);
                    self.handle(*now, Event::Persisted { seq: *seq }, &mut fx);
                } else {
                    self.gate.drop_all();
                    let error = "model: write failed".to_string();
                    self.handle(*now, Event::PersistFailed { seq: *seq, error }, &mut fx);
                }
            }
            Input::Round {
                now,
                seq,
                generation,
                target,
                answers,
            } => {
                let live = answers.is_empty();
                let mut got = Vec::new();
                let mut step = self.driver.begin(*seq, *generation, target.clone(), *now);
                let mut k = 0;
                let report = loop {
                    match step {
                        Step::Run(command) => {
                            let answer = if live {
                                execute(&command, self.driver.target())
                            } else {
                                answers[k].clone()
                            };
                            k += 1;
                            step = self.driver.next(answer.outcome(), *now);
                            got.push(answer);
                        }
                        Step::Done(report) => break report,
                    }
                };
                self.handle(*now, Event::DataNode(report.obs), &mut fx);
                if live {
                    recorded = Input::Round {
                        now: *now,
                        seq: *seq,
                        generation: *generation,
                        target: target.clone(),
                        answers: got,
                    };
                }
            }
        }
        (fx, recorded)
    }
}
