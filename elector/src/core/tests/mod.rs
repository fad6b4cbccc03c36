//! Unit tests of the core: exact outputs for the protocol's rules, one file
//! per event or concern, each test naming the docs/protocol.md section it
//! checks. [`Node`] plays the shell: it carries out a step's outputs in the
//! order [`Output`] gives and holds gated actions in a [`Gate`] until their
//! write is durable, so the tests see what would really leave the node.

mod data_node;
mod durability;
mod floor;
mod lease;
mod preempt;
mod replica_tail;
mod state_reset;
mod switchover;
mod vote;
mod witness;

use super::*;

pub(super) const T: Timings = Timings {
    hb_interval_ms: 100,
    down_after_ms: 1_000,
    election_timeout_ms: 600,
    backoff_min_ms: 200,
    backoff_max_ms: 800,
    fence_margin_ms: 0,
};

pub(super) fn config(me: &str) -> CoreConfig {
    CoreConfig {
        node_id: me.into(),
        members: ["n1", "n2", "n3"]
            .iter()
            .map(|id| Member {
                id: id.to_string(),
                data_addr: Some(format!("{id}:6379")),
            })
            .collect(),
        timings: T,
        priority: 100,
        max_lag: u64::MAX,
        seed: 7,
        faults: Faults::default(),
        preempt: Preempt::default(),
        backend: Backend::default(),
    }
}

/// One node as the shell runs it.
pub(super) struct Node {
    pub(crate) core: Core,
    gate: Gate,
}

/// What left the node in one step, in order: fences, actions that left at
/// once or were released by a durable write, and the write it asked for.
#[derive(Debug)]
pub(super) struct Step {
    pub(crate) fences: Vec<Fence>,
    pub(crate) left: Vec<Action>,
    pub(crate) persist: Option<Persist>,
}

impl Node {
    pub(crate) fn new(me: &str) -> Node {
        Node {
            core: Core::new(config(me), PersistedState::default(), 0),
            gate: Gate::default(),
        }
    }

    pub(crate) fn start(&mut self, t: Millis) -> Step {
        let out = self.core.start(t);
        self.carry_out(out, Vec::new())
    }

    pub(crate) fn handle(&mut self, t: Millis, event: Event) -> Step {
        let released = match &event {
            Event::Persisted { seq } => self.gate.release(*seq),
            Event::PersistFailed { seq, .. } => {
                if !self.core.outbox.background_pending_has(*seq) {
                    self.gate.drop_all();
                }
                Vec::new()
            }
            _ => Vec::new(),
        };
        let out = self.core.handle(t, event);
        self.carry_out(out, released)
    }

    fn carry_out(&mut self, out: Output, mut left: Vec<Action>) -> Step {
        left.extend(out.now);
        self.gate.hold(out.gated);
        Step {
            fences: out.fences,
            left,
            persist: out.persist,
        }
    }

    /// Acknowledges outstanding writes and reports the data node settled in
    /// the current target (offset 10), as the shell would.
    pub(crate) fn settle(&mut self, t: Millis) {
        let ob = &self.core.outbox;
        if ob.persist_seq > ob.durable_seq {
            let seq = ob.persist_seq;
            self.handle(t, Event::Persisted { seq });
        }
        let seq = self.core.target.seq;
        self.handle(t, observation(10, seq));
    }

    /// Makes every outstanding write durable (the step's, and one a
    /// background floor write holds back); what each release let out.
    pub(crate) fn release_writes(&mut self, t: Millis) -> Vec<Step> {
        let mut steps = Vec::new();
        for _ in 0..4 {
            let ob = &self.core.outbox;
            if ob.persist_seq <= ob.durable_seq {
                break;
            }
            let seq = ob.persist_seq;
            steps.push(self.handle(t, Event::Persisted { seq }));
        }
        steps
    }

    /// Makes the step's write durable, if it asked for one.
    pub(crate) fn persist_done(&mut self, t: Millis, step: &Step) -> Option<Step> {
        let seq = step.persist.as_ref()?.seq;
        Some(self.handle(t, Event::Persisted { seq }))
    }
}

impl Step {
    /// Messages that left (heartbeats aside).
    pub(crate) fn sends(&self) -> Vec<(&str, &Message)> {
        self.left
            .iter()
            .filter_map(|a| match a {
                Action::Send { to, msg } if !matches!(msg, Message::Hb(_)) => {
                    Some((to.as_str(), msg))
                }
                _ => None,
            })
            .collect()
    }

    /// Data-node targets handed to the adapter, fences first.
    pub(crate) fn targets(&self) -> Vec<(u64, DataNodeTarget)> {
        let fences = self.fences.iter().filter_map(|f| match f {
            Fence::Apply { seq, target } => Some((*seq, DataNodeTarget::from(*target))),
            Fence::Notify { .. } => None,
        });
        let grants = self.left.iter().filter_map(|a| match a {
            Action::Apply { seq, target } => Some((*seq, DataNodeTarget::from(target.clone()))),
            _ => None,
        });
        fences.chain(grants).collect()
    }

    pub(crate) fn notices(&self) -> Vec<&Notice> {
        self.left
            .iter()
            .filter_map(|a| match a {
                Action::Notify(n) => Some(n),
                _ => None,
            })
            .collect()
    }

    pub(crate) fn role_change(&self, reason: Reason) -> bool {
        self.notices()
            .iter()
            .any(|n| matches!(n, Notice::RoleChanged { reason: r, .. } if *r == reason))
    }
}

pub(super) fn observation(offset: u64, applied_seq: u64) -> Event {
    Event::DataNode(Observation {
        reachable: true,
        offset: Some(offset),
        link_up: false,
        applied_seq,
        offset_at_apply: Some(offset),
        generation: 0,
        gone: false,
        overridden: 0,
        ..Observation::default()
    })
}

/// A reading of a primary's data node (a primary's link is always up) at
/// `offset` in stream `stream`, settled in target `applied_seq`.
pub(super) fn primary_reading(offset: u64, applied_seq: u64, stream: &str) -> Event {
    Event::DataNode(Observation {
        reachable: true,
        offset: Some(offset),
        link_up: true,
        master: true,
        applied_seq,
        stream: Some(StreamId(stream.into())),
        ..Observation::default()
    })
}

/// A started node that has observed its data node (offset 10).
pub(super) fn node(me: &str) -> Node {
    let mut n = Node::new(me);
    n.start(0);
    n.handle(1, observation(10, 1));
    n
}

pub(super) fn offer(epoch: u64, candidate: &str, offset: u64) -> Event {
    offer_led(epoch, candidate, (0, offset), None)
}

/// An OFFER from `candidate` at `(data_epoch, offset)` saying it last told
/// its data node to take writes in epoch `led` (§6.10).
pub(super) fn offer_led(
    epoch: u64,
    candidate: &str,
    (data_epoch, offset): (u64, u64),
    led: Option<u64>,
) -> Event {
    Event::Message {
        from: candidate.into(),
        msg: Message::Offer {
            epoch,
            candidate: candidate.into(),
            offset,
            data_epoch,
            forced: false,
            led,
        },
    }
}

pub(super) fn heartbeat(from: &str, epoch: u64, primary: Option<&str>, echo: u64) -> Event {
    Event::Message {
        from: from.into(),
        msg: Message::Hb(crate::protocol::Heartbeat {
            epoch,
            node_id: from.into(),
            role: Role::Replica,
            offset: 10,
            max_epoch: epoch,
            primary: primary.map(str::to_string),
            eligible: true,
            fenced: true,
            lease_lost: false,
            data_epoch: 0,
            stamp: 0,
            echo,
            priority: 100,
            floor: None,
            unled: false,
        }),
    }
}

/// Drives n1 through winning epoch 1 with n2's vote.
pub(super) fn elected_primary() -> Node {
    let mut n = node("n1");
    n.handle(100, heartbeat("n2", 0, None, 0));
    let stood = n.handle(400, Event::Tick);
    assert!(stood.persist.is_some(), "n1 did not stand: {stood:?}");
    n.persist_done(401, &stood);
    let won = n.handle(
        402,
        Event::Message {
            from: "n2".into(),
            msg: Message::Accept {
                epoch: 1,
                voter: "n2".into(),
            },
        },
    );
    n.persist_done(403, &won);
    n
}

/// A writable primary (n1, epoch 1) that holds its lease.
pub(super) fn writable_primary() -> Node {
    let mut n = elected_primary();
    let leased = n.handle(410, heartbeat("n2", 1, Some("n1"), 402));
    assert!(!n.core.fenced());
    // The promotion waits for the write that records `led` (§6.10).
    n.persist_done(410, &leased);
    n
}

/// [`writable_primary`] whose data node has carried out its promotion (a
/// primary reading in the epoch's stream): one a switchover may start from
/// (§8).
pub(super) fn serving_primary() -> Node {
    let mut n = writable_primary();
    let seq = n.core.target.seq;
    let claimed = n.handle(412, primary_reading(10, seq, "generation-1"));
    n.persist_done(413, &claimed);
    n
}

#[test]
fn start_clamps_the_data_node_before_anything_else() {
    // §6.4: the first output of a fresh elector fences its data node.
    let mut n = Node::new("n1");
    let step = n.start(0);
    assert_eq!(
        step.fences,
        vec![Fence::Apply {
            seq: 1,
            target: FenceTarget::Isolated
        }]
    );
    assert!(step.role_change(Reason::Startup));
    assert_eq!((step.left.len(), step.persist.is_none()), (1, true));
}

#[test]
fn an_epoch_far_beyond_anything_known_is_dropped_and_never_persisted() {
    // §3.6 (finding 8): an ANNOUNCE claiming a huge epoch.
    let mut n = node("n2");
    let step = n.handle(
        100,
        Event::Message {
            from: "n1".into(),
            msg: Message::Announce {
                epoch: crate::protocol::MAX_EPOCH,
                primary: "n1".into(),
                primary_addr: "n1:6379".into(),
                stamp: 1,
            },
        },
    );
    assert!(step.persist.is_none());
    assert_eq!(n.core.epoch(), 0);
    assert!(step.notices().iter().any(|a| matches!(
        a,
        Notice::MessageDropped {
            reason: "epoch_jump",
            ..
        }
    )));
}

#[test]
fn a_node_that_cannot_hear_a_majority_never_stands() {
    // §6.6: a minority never elects and does not climb epochs.
    let mut n = node("n1");
    for t in (100..5_000).step_by(100) {
        let step = n.handle(t, Event::Tick);
        assert!(step.persist.is_none(), "stood alone at {t}");
    }
    assert_eq!(n.core.role(), Role::Replica);
}
