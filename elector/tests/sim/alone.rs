#![allow(dead_code)] // only tests/adapter_contract.rs drives the data nodes alone
//! The data nodes alone, with their adapters and no electors: what the
//! adapter contract suite (`tests/contract`, docs/protocol.md §6.11) drives
//! in place of the cores. Each operation goes through the code the
//! simulator's electors use: a Redis-like server takes `REPLICAOF` & co. as
//! `server_apply` carries them out; a kevy server through the real kevy
//! policy, its commands delivered with the world's delays
//! (`sim/kevy.rs`), its readings through the policy's `observed`.

use super::datalayer::Entry;
use super::world::World;
use super::Sim;
use elector::core::{DataNodeTarget, Faults};
use elector::datanode::driver::{Command, Outcome};
use elector::datanode::{DataNodeError, ReplicationInfo};
use rand::rngs::StdRng;
use rand::SeedableRng;

/// How long a kevy operation may take in the model before the suite calls
/// it stuck (the policy's longest wait is a promotion's, 1 s).
const OPERATION_BOUND_MS: u64 = 10_000;

/// Long enough for the commands the cores sent at their start to finish
/// (the world's slowest apply is well under a second).
const SETTLE_MS: u64 = 5_000;

/// The kevy adapters' quiesce fence limit, as the contract's real targets
/// configure theirs (`tests/contract/mod.rs`, `QUIESCE_FENCE_LIMIT_MS`).
pub const QUIESCE_FENCE_LIMIT_MS: u64 = 2_000;

impl Sim {
    /// `n` data nodes with their adapters and no electors: every node starts
    /// as its configuration starts it (a replica of nowhere), nothing writes
    /// but the suite, no watchdog, and no replication gate (the gate belongs
    /// to the elector's shell, not to the adapter: §6.10).
    pub fn data_nodes_alone(seed: u64, n: usize, kevy: bool) -> Sim {
        let world = World {
            loss: 0.0,
            duplicate: 0.0,
            persist_fail: 0.0,
            clock_drift: 0.0,
            watchdog: false,
            gate: false,
            ..World::random(&mut StdRng::seed_from_u64(seed ^ 0xc0_7a_c7))
        };
        let mut sim = if kevy {
            Sim::kevy(seed, n, 0, world, Faults::default())
                .with_kevy_quiesce_fence_limit(QUIESCE_FENCE_LIMIT_MS)
        } else {
            Sim::new(seed, n, world, Faults::default())
        };
        for node in &mut sim.nodes {
            node.core = None;
        }
        sim.clients_write = false;
        // What the cores set going at their start (the start-up clamp)
        // finishes before the suite takes over.
        sim.run_until(SETTLE_MS).unwrap_or_else(|e| {
            panic!("seed {seed}: the data nodes alone broke an invariant: {e}")
        });
        sim
    }

    /// Every kevy adapter believes the offset a replica brings over when it
    /// moves to another feed generation by itself, as before the contract
    /// found it (the control of `tests/adapter_contract.rs`).
    pub fn kevy_believing_a_resync_by_itself(&mut self) {
        self.kevy_believes_a_resync_by_itself = true;
        for i in 0..self.nodes.len() {
            if self.nodes[i].kevy_policy.is_some() {
                let started = self.clock(i);
                let seed = Some(((i as u128) << 64) | 0xc0_7a_c7);
                self.nodes[i].kevy_policy =
                    Some(super::kevy::policy(self.kevy_switches(), seed, started));
            }
        }
    }

    /// Node `i`'s adapter makes its data node what `target` says, and the
    /// call returns when the adapter has its answer.
    pub fn adapter_apply(
        &mut self,
        i: usize,
        target: &DataNodeTarget,
    ) -> Result<(), DataNodeError> {
        if self.nodes[i].kevy_policy.is_none() {
            if self.data_frozen(i) {
                // A real adapter's command times out; the suite applies
                // nothing to a stopped node, so none is left queued.
                return Err(DataNodeError::Unreachable("timed out (stalled)".into()));
            }
            let now = self.now;
            return self.server_apply(i, target.clone(), now);
        }
        self.kevy_begin(i, &Command::Apply(target.clone()));
        let until = self.now + OPERATION_BOUND_MS;
        while self.nodes[i].kevy_op.is_some() && self.now < until {
            let next = self.now + 5;
            self.run_until(next)
                .map_err(|e| DataNodeError::Unreachable(format!("simulator invariant: {e}")))?;
        }
        match self.nodes[i].kevy_op {
            None => Ok(()),
            Some(_) => Err(DataNodeError::Unreachable(format!(
                "a kevy operation still running after {OPERATION_BOUND_MS} ms"
            ))),
        }
    }

    /// A reading of node `i`'s data node through its adapter (and its
    /// tether, which tells the kevy policy of a new process, §6.8).
    pub fn adapter_observe(&mut self, i: usize) -> Result<ReplicationInfo, DataNodeError> {
        let tether = self.check_tether(i);
        if self.nodes[i].kevy_policy.is_none() {
            if self.data_frozen(i) {
                return Err(DataNodeError::Unreachable(
                    "read timed out (stalled)".into(),
                ));
            }
            return self.nodes[i].data.info();
        }
        match self.kevy_observe(i, tether) {
            Outcome::Observed(read) => read.map(|o| o.info),
            other => Err(DataNodeError::Unreachable(format!("{other:?}"))),
        }
    }

    /// Whether node `i`'s adapter takes `info` as `target` carried out:
    /// the kevy policy's rule; the Redis-like model knows its state exactly.
    pub fn adapter_satisfies(
        &self,
        i: usize,
        info: &ReplicationInfo,
        target: &DataNodeTarget,
    ) -> bool {
        match self.nodes[i].kevy_policy.as_ref() {
            Some(policy) => policy.satisfies(info, target, self.kevy_clock(i).mono),
            None => self.nodes[i].data.satisfies(target),
        }
    }

    /// A client's write on node `i`, refused unless it is a writable
    /// primary: where it landed in the log.
    pub fn client_write(&mut self, i: usize) -> Option<(usize, Entry)> {
        if !self.nodes[i].data.writable() || self.data_frozen(i) {
            return None;
        }
        let write_id = self.next_write;
        self.next_write += 1;
        let (index, chain) = self.nodes[i].data.append(write_id);
        Some((index, Entry { write_id, chain }))
    }

    /// How many replicas of node `i` (linked to it) hold `(index, entry)`:
    /// what `WAIT` counts.
    pub fn replicas_holding(&self, i: usize, index: usize, entry: &Entry) -> usize {
        let writer = &self.ids[i];
        (0..self.nodes.len())
            .filter(|&j| j != i && self.nodes[j].data.up && self.nodes[j].data.link_up)
            .filter(|&j| {
                matches!(&self.nodes[j].data.applied,
                    DataNodeTarget::Follow { primary, .. } if primary == writer)
            })
            .filter(|&j| self.nodes[j].data.holds(index, entry.chain))
            .count()
    }
}
