//! A model of the data nodes under the electors: each holds a write log with
//! a hash chain (so "is a prefix of" is O(1)), applies the elector's targets
//! after a delay, replicates from its upstream while the network allows, and
//! accepts client writes only while it is a writable primary.
//!
//! A write is *acknowledged* (like `WAIT quorum-1`) once the primary and
//! quorum-1 replicas hold it; acknowledged writes must survive every failover.

use elector::core::{DataNodeTarget, Millis, Observation};

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
    pub applied: DataNodeTarget,
    pub applied_seq: u64,
    pub pending: Option<(Millis, u64, DataNodeTarget)>,
    pub link_up: bool,
    pub offset_at_apply: Option<u64>,
    /// Bumped on every data-node restart, as the real adapter does when
    /// another process answers (protocol §6.8).
    pub generation: u64,
    /// The real adapter's answer to a demotion by someone else (the
    /// watchdog's clamp) of a node it had made writable: it counts it and
    /// makes the node writable again only for a target issued afterwards.
    pub overridden: u64,
    pub hold_writable_through: u64,
}

impl DataNode {
    pub fn new() -> DataNode {
        DataNode {
            up: true,
            log: Vec::new(),
            applied: DataNodeTarget::Isolated,
            applied_seq: 0,
            pending: None,
            link_up: false,
            offset_at_apply: None,
            generation: 0,
            overridden: 0,
            hold_writable_through: 0,
        }
    }

    pub fn writable(&self) -> bool {
        self.up && self.applied.writable()
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

    pub fn observe(&self) -> Observation {
        Observation {
            reachable: self.up,
            offset: self.up.then_some(self.log.len() as u64),
            link_up: self.up && (self.is_master() || self.link_up),
            applied_seq: self.applied_seq,
            offset_at_apply: self.offset_at_apply,
            generation: self.generation,
            gone: !self.up,
            overridden: self.overridden,
        }
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
    /// theirs, full-syncs (replaces) otherwise, as Redis and kevy do.
    pub fn sync_from(&mut self, upstream: &[Entry]) {
        let prefix = match self.log.last() {
            None => true,
            Some(last) => upstream
                .get(self.log.len() - 1)
                .is_some_and(|e| e.chain == last.chain),
        };
        if prefix {
            if upstream.len() > self.log.len() {
                self.log.extend_from_slice(&upstream[self.log.len()..]);
            }
        } else {
            self.log = upstream.to_vec();
        }
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
