//! A model of the data-node *servers* under the electors: each holds a write
//! log with a hash chain (so "is a prefix of" is O(1)), is configured as a
//! primary, a fenced primary or a replica of some upstream, replicates from
//! its upstream while the network allows, and accepts client writes only
//! while it is a writable primary.
//!
//! The adapter's rules are not modelled here: every elector runs the real
//! `elector::datanode::driver::Driver` against this server (see `sim/mod.rs`),
//! so the simulator proves the code the shell runs, not a copy of it.
//!
//! A write is *acknowledged* (like `WAIT quorum-1`) once the primary and
//! quorum-1 replicas hold it; acknowledged writes must survive every failover.

use elector::core::{DataNodeTarget, Millis};
use elector::datanode::{DataNodeError, ReplicationInfo, NOWHERE};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    pub write_id: u64,
    /// Hash of this entry and everything before it.
    pub chain: u64,
}

#[derive(Clone, Debug)]
pub struct DataNode {
    pub up: bool,
    pub log: Vec<Entry>,
    /// What the server is configured as (its role, fence and upstream).
    pub applied: DataNodeTarget,
    pub link_up: bool,
    /// Which process answers (Redis `run_id`, kevy `process_id`): a new one
    /// at every start of the data node.
    pub process_id: u64,
    /// The replication stream its log is in, as the server names it (Redis
    /// `master_replid`, §6.10): a promotion starts a new one that continues
    /// the old (`stream_prev`, Redis `master_replid2`); a replica takes its
    /// upstream's; a restart keeps it only when the server persisted it.
    pub stream: u64,
    pub stream_prev: Option<u64>,
    /// kevy 7.0.0's behaviours (`sim/kevy.rs`) instead of Redis's.
    pub kevy: Option<KevyState>,
    /// The process the elector's replication gate admits replicas to
    /// (§6.10), `None`: closed. Set by the simulated shell after each round.
    pub gate_open: Option<u64>,
    /// The watchdog's floor hint file beside the elector's state (§6.10):
    /// per stream, what this replica held when the watchdog detached it.
    pub floor_hint: Vec<elector::datanode::floor_hint::Hint>,
    /// Until this time the process is stopped (SIGSTOP: a stalled disk, a
    /// swapped-out process) under its running elector: it reads, writes,
    /// replicates and runs commands nothing, its connections stay open and
    /// silent. A restart of the process ends it.
    pub stalled_until: Millis,
}

/// What a kevy 7.0.0 server holds beyond the log (docs/architecture.md
/// §kevy): its feed generation (a new one at every promotion and at a
/// restart, offsets from 0), where that feed began in the log, the runner
/// of a replica (its upstream's generation and where that feed began), the
/// quiesce, `INFO`'s offset (a lifetime maximum over generations), the
/// watchdog's clamp count and the position file beside it; and, for the
/// tick after a promotion, the generation its token still names.
#[derive(Clone, Debug, Default)]
pub struct KevyState {
    pub generation: u64,
    /// Until this time (the simulation's), a primary's `REPL.TOKEN` names
    /// `unnamed_generation`: kevy bumps the generation on its next tick.
    pub named_at: Millis,
    pub unnamed_generation: u64,
    pub gen_base: usize,
    pub runner: Option<(u64, usize)>,
    pub quiesced: bool,
    pub info_offset_max: u64,
    pub watchdog_clamps: u64,
    pub position_file: Option<String>,
    /// The elector's `<data_dir>/kevy-upstream` (`kevy_policy::watch`):
    /// the elector's file, so a kevy restart leaves it as it was.
    pub watch_file: Option<String>,
    /// After a full resync, a replica loads the snapshot until this time:
    /// its reads time out while `PING` on the tether still answers (issue
    /// 35: 400 MB kept a kevy replica from answering `REPL.TOKEN` in time).
    pub loading_until: Millis,
    /// Full resyncs this server took, over its processes.
    pub full_syncs: u64,
    /// Someone else changed the role (a hand demotion, the watchdog's
    /// detach) while an observation was reading: its `INFO replication`
    /// was read before the change, at this time, its token and second
    /// `INFO` after (`KevyReading::info_after`).
    pub read_mid_change: Option<(ReplicationInfo, Millis)>,
    /// The process marks loaded into this process's script cache
    /// (`SCRIPT LOAD`; `datanode::kevy_mark`): gone with the process.
    pub marks: Vec<String>,
    /// After a move to another generation by itself (its upstream's
    /// process replaced, no `REPLICAOF`): the generation, the old applied
    /// offset its token keeps naming, and until when (`sim/kevy.rs`).
    pub stale_token: Option<(u64, u64, Millis)>,
}

impl DataNode {
    pub fn new() -> DataNode {
        DataNode {
            up: true,
            log: Vec::new(),
            applied: DataNodeTarget::Isolated,
            link_up: false,
            process_id: 1,
            stream: 0,
            stream_prev: None,
            kevy: None,
            gate_open: None,
            floor_hint: Vec::new(),
            stalled_until: 0,
        }
    }

    /// A promotion (from a replica to a primary): a new stream that
    /// continues the one the node was in, as Redis does (§6.10).
    pub fn promote(&mut self, new_stream: u64) {
        self.stream_prev = Some(self.stream);
        self.stream = new_stream;
    }

    pub fn writable(&self) -> bool {
        self.up && self.applied.writable() && !self.kevy.as_ref().is_some_and(|k| k.quiesced)
    }

    pub fn is_master(&self) -> bool {
        self.up
            && matches!(
                self.applied,
                DataNodeTarget::Primary
                    | DataNodeTarget::FencedPrimary
                    | DataNodeTarget::HandingOver
            )
    }

    /// `INFO replication` as the adapter reads it (Redis; kevy's is in
    /// `sim/kevy.rs`).
    pub fn info(&self) -> Result<ReplicationInfo, DataNodeError> {
        if !self.up {
            return Err(DataNodeError::Gone("connection refused".into()));
        }
        let (master_host, master_port) = match &self.applied {
            DataNodeTarget::Follow { primary, .. } => (Some(primary.clone()), Some(6379)),
            DataNodeTarget::Isolated => (Some(NOWHERE.0.to_string()), Some(NOWHERE.1)),
            _ => (None, None),
        };
        Ok(ReplicationInfo {
            role: if self.is_master() { "master" } else { "slave" }.into(),
            offset: self.log.len() as u64,
            master_host,
            master_port,
            link_up: self.link_up,
            identity: Some(format!("process:{}", self.process_id)),
            stream: Some(format!("s{}", self.stream)),
            stream_prev: self.stream_prev.map(|s| format!("s{s}")),
            floor_hint: self.floor_hint.clone(),
            // Redis's run_id: drawn at each start (no two processes share one).
            process_names: vec![format!("run_id:{}", self.process_id)],
            ..ReplicationInfo::default()
        })
    }

    /// Whether the server already is `target` (what a backend's
    /// `satisfies` reads from `INFO`; the model knows it exactly).
    pub fn satisfies(&self, target: &DataNodeTarget) -> bool {
        self.up && self.applied == *target
    }

    /// Whether `(index, chain)` (an acknowledged write) is in this log.
    pub fn holds(&self, index: usize, chain: u64) -> bool {
        self.log.get(index).is_some_and(|e| e.chain == chain)
    }

    pub fn append(&mut self, write_id: u64) -> (usize, u64) {
        let prev = self.log.last().map_or(0x9e37_79b9_7f4a_7c15, |e| e.chain);
        let chain = mix(prev ^ write_id.wrapping_mul(0x100_0000_01b3));
        self.log.push(Entry { write_id, chain });
        (self.log.len() - 1, chain)
    }

    /// Replicates from `upstream`: extends when our log is a prefix of
    /// theirs, full-syncs (replaces) otherwise, as Redis and kevy do; either
    /// way the replica is in its upstream's stream afterwards.
    pub fn sync_from(&mut self, upstream: &DataNode) {
        let prefix = match self.log.last() {
            None => true,
            Some(last) => upstream
                .log
                .get(self.log.len() - 1)
                .is_some_and(|e| e.chain == last.chain),
        };
        if prefix {
            if upstream.log.len() > self.log.len() {
                self.log.extend_from_slice(&upstream.log[self.log.len()..]);
            }
            self.stream_prev = upstream.stream_prev;
        } else {
            self.log = upstream.log.clone();
            self.stream_prev = None;
        }
        self.stream = upstream.stream;
    }
}

fn mix(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

/// A client write that reached quorum copies.
#[derive(Clone, Copy, Debug)]
pub struct AckedWrite {
    pub write_id: u64,
    pub index: usize,
    pub chain: u64,
    pub at: Millis,
}

/// A write in flight on a primary, waiting for replica copies.
#[derive(Clone, Copy, Debug)]
pub struct PendingWrite {
    pub node: usize,
    pub write_id: u64,
    pub index: usize,
    pub chain: u64,
    pub at: Millis,
}
