//! The data-node server under each elector, Redis-flavoured: a write log,
//! what the server is configured as, its replication stream (a promotion
//! starts a new stream that continues the old, like Redis's
//! `master_replid2`), and replication from its upstream as one model action.
//!
//! Kept to what the properties need (the simulator's `tests/sim/datalayer.rs`
//! is the fuller model; this one is small so that states stay few). Every
//! write id is unique, so "is a prefix of" compares ids.

use elector::core::DataNodeTarget;
use elector::datanode::{DataNodeError, ReplicationInfo, NOWHERE};

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Server {
    pub log: Vec<u64>,
    pub applied: DataNodeTarget,
    pub link_up: bool,
    pub stream: u64,
    pub stream_prev: Option<u64>,
    /// Which process answers: a data-node restart starts a new one (the
    /// adapter's tether sees it replaced).
    pub process: u64,
    /// kevy (`Backend::promotion_restarts_stream`): a promotion starts a
    /// stream whose offsets begin again at 0, not continuing the old one.
    pub restarts_stream: bool,
    /// Where the offsets of the current stream begin in `log`.
    pub base: usize,
}

impl Server {
    pub fn new(restarts_stream: bool) -> Server {
        Server {
            log: Vec::new(),
            applied: DataNodeTarget::Isolated,
            link_up: false,
            stream: 0,
            stream_prev: None,
            process: 1,
            restarts_stream,
            base: 0,
        }
    }

    pub fn writable(&self) -> bool {
        self.applied.writable()
    }

    /// A kevy server (`restarts_stream`) fenced by a lapsed lease is
    /// demoted, the fence kevy cannot always keep as a write quiesce
    /// (§6.4.1; every lease fence before commit 1cf2df0): made writable
    /// again, it starts a new stream in the same epoch unless the core
    /// resigns first (§6.10).
    pub fn is_master(&self) -> bool {
        match self.applied {
            DataNodeTarget::Primary | DataNodeTarget::HandingOver => true,
            DataNodeTarget::FencedPrimary => !self.restarts_stream,
            _ => false,
        }
    }

    /// `INFO replication` as the adapter reads it.
    pub fn info(&self) -> ReplicationInfo {
        let (master_host, master_port) = match &self.applied {
            DataNodeTarget::Follow { primary, .. } => (Some(primary.clone()), Some(6379)),
            DataNodeTarget::Isolated => (Some(NOWHERE.0.to_string()), Some(NOWHERE.1)),
            _ => (None, None),
        };
        ReplicationInfo {
            role: if self.is_master() { "master" } else { "slave" }.into(),
            offset: (self.log.len() - self.base) as u64,
            master_host,
            master_port,
            link_up: self.link_up,
            identity: Some(format!("process:{}", self.process)),
            stream: Some(format!("s{}", self.stream)),
            stream_prev: self.stream_prev.map(|s| format!("s{s}")),
            ..ReplicationInfo::default()
        }
    }

    /// `REPLICAOF` and the fence: `fresh_stream` names the stream a
    /// promotion starts. Returns whether the server became writable.
    pub fn apply(
        &mut self,
        target: DataNodeTarget,
        fresh_stream: &mut u64,
    ) -> Result<bool, DataNodeError> {
        if self.applied != target {
            self.link_up = false;
        }
        let was_master = self.is_master();
        let was_writable = self.writable();
        self.applied = target;
        if !was_master && self.is_master() {
            *fresh_stream += 1;
            if self.restarts_stream {
                // kevy: a new feed generation from offset 0.
                self.stream_prev = None;
                self.base = self.log.len();
            } else {
                self.stream_prev = Some(self.stream);
            }
            self.stream = *fresh_stream;
        }
        Ok(!was_writable && self.writable())
    }

    /// The data node restarts as a new process (the simulator's
    /// `restart_data`): with its files (`keep_files`, the log survives) or
    /// empty. Either way it comes back isolated, unlinked and in a stream of
    /// its own: an AOF restart of Redis and a crashed kevy do not keep their
    /// replication id, so the elector must prove the position again (§6.10).
    pub fn restart(&mut self, keep_files: bool, fresh_stream: &mut u64) {
        if !keep_files {
            self.log.clear();
        }
        self.applied = DataNodeTarget::Isolated;
        self.link_up = false;
        self.process += 1;
        *fresh_stream += 1;
        self.stream = *fresh_stream;
        self.stream_prev = None;
        self.base = if self.restarts_stream {
            self.log.len()
        } else {
            0
        };
    }

    /// Replicates from `upstream`: extends a prefix, full-syncs otherwise.
    pub fn sync_from(&mut self, upstream: &Server) {
        let prefix = upstream.log.starts_with(&self.log);
        if prefix {
            self.log = upstream.log.clone();
            self.stream_prev = upstream.stream_prev;
        } else {
            self.log = upstream.log.clone();
            self.stream_prev = None;
        }
        self.stream = upstream.stream;
        self.base = upstream.base;
    }
}
