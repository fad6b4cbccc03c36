//! One elector process as the model sees it: the real `Core`, the real
//! data-node `Driver` and the real `Gate`, held in the model's state.
//!
//! All three are `Clone + Eq + Hash` (derived for this), so a state keeps
//! the process itself: two states whose processes are equal are one state,
//! whatever history led to them (the checker merges them, which is what
//! makes deeper searches affordable; protocol §9.4).

use elector::core::{Action, Core, CoreConfig, Event, Gate, Millis, Output, PersistedState};
use elector::datanode::driver::{Driver, Observed, Outcome, Step};
use elector::datanode::tether::TetherCheck;
use elector::datanode::{DataNodeError, ReplicationInfo};

use elector::core::DataNodeTarget;

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
    /// One adapter round for target `seq`, run against the data node.
    Round {
        now: Millis,
        seq: u64,
        generation: u64,
        target: DataNodeTarget,
    },
}

/// What a step produced for the world: the core's outputs (the gated part
/// is already held in the gate) and what the gate released.
#[derive(Default)]
pub struct Effects {
    pub outputs: Vec<Output>,
    pub released: Vec<Action>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Proc {
    pub core: Core,
    pub driver: Driver,
    pub gate: Gate,
}

impl Proc {
    /// A fresh incarnation from the durable state `disk` and its start-up
    /// output (the clamp).
    pub fn boot(cfg: CoreConfig, disk: PersistedState, now: Millis) -> (Proc, Output) {
        let mut core = Core::new(cfg, disk, now);
        let out = core.start(now);
        let mut proc = Proc {
            core,
            driver: Driver::new("model"),
            gate: Gate::default(),
        };
        proc.gate.hold(out.gated.clone());
        (proc, out)
    }

    fn handle(&mut self, now: Millis, event: Event, fx: &mut Effects) {
        let out = self.core.handle(now, event);
        self.gate.hold(out.gated.clone());
        fx.outputs.push(out);
    }

    /// Feeds one input; a `Round` runs the driver to its end, `execute`
    /// carrying out each command against the data node.
    pub fn feed(
        &mut self,
        input: &Input,
        mut execute: impl FnMut(&elector::datanode::driver::Command, Option<&DataNodeTarget>) -> Answer,
    ) -> Effects {
        let mut fx = Effects::default();
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
            } => {
                let mut step = self.driver.begin(*seq, *generation, target.clone(), *now);
                let report = loop {
                    match step {
                        Step::Run(command) => {
                            let answer = execute(&command, self.driver.target());
                            step = self.driver.next(answer.outcome(), *now);
                        }
                        Step::Done(report) => break report,
                    }
                };
                self.handle(*now, Event::DataNode(report.obs), &mut fx);
            }
        }
        fx
    }
}
