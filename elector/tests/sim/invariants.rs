//! Safety invariants, checked after every simulated event
//! (docs/protocol.md §9.2).

use super::datalayer::{AckedWrite, DataNode};
use super::SimNode;
use elector::core::{Millis, PersistedState, Timings};
use elector::protocol::Message;
use std::collections::{BTreeMap, BTreeSet};

pub struct Invariants {
    n: usize,
    timings: Timings,
    /// epoch -> the node that became primary in it.
    primaries: BTreeMap<u64, usize>,
    /// (voter, epoch) -> candidate it voted for (itself for a candidacy).
    votes: BTreeMap<(usize, u64), usize>,
    /// (epoch, candidate) -> voters whose ACCEPT was sent.
    accepts: BTreeMap<(u64, usize), BTreeSet<usize>>,
    durable: Vec<PersistedState>,
    /// Since when two or more data nodes have accepted writes at once.
    overlap_since: Option<Millis>,
    pub longest_overlap_ms: u64,
    pub violations: Vec<String>,
    /// How long a fence lifted by hand may stay lifted: one adapter poll
    /// and the slowest fence apply (§6.4.1).
    pub tamper_grace_ms: u64,
    pub overlap_bound_ms: u64,
    /// Liveness during faults (§9.2): when set, a majority that can talk
    /// must have a writable primary within this long.
    pub liveness_bound_ms: Option<u64>,
    /// Since when the current healthy majority has existed, and who it is.
    healthy_since: Option<(Millis, Vec<usize>)>,
}

impl Invariants {
    pub fn new(n: usize, timings: Timings) -> Invariants {
        Invariants {
            n,
            timings,
            primaries: BTreeMap::new(),
            votes: BTreeMap::new(),
            accepts: BTreeMap::new(),
            durable: vec![PersistedState::default(); n],
            overlap_since: None,
            longest_overlap_ms: 0,
            violations: Vec::new(),
            tamper_grace_ms: 100,
            overlap_bound_ms: 50,
            liveness_bound_ms: None,
            healthy_since: None,
        }
    }

    /// The longest time two data nodes may both accept writes: a fence needs
    /// a tick, an apply (the world's slowest fence) and a data step (10 ms).
    pub fn overlap_bound_ms(&self) -> u64 {
        self.overlap_bound_ms
    }

    pub fn on_boot(&mut self, i: usize, disk: &PersistedState) {
        if disk != &self.durable[i] {
            self.violations.push(format!(
                "n{}: booted from a disk that is not the last durable state",
                i + 1
            ));
        }
    }

    /// An operator replaced node `i`'s lost state (`--reset-state`, §5.2):
    /// the one way durable state may go back, taken on the operator's word
    /// that the node missed the cluster's latest elections.
    pub fn on_state_reset(&mut self, i: usize, disk: &PersistedState) {
        self.durable[i] = disk.clone();
    }

    /// Durable state never goes backwards (epochs monotonic across restarts).
    pub fn on_durable(&mut self, i: usize, disk: &PersistedState) {
        let old = &self.durable[i];
        if disk.epoch < old.epoch || disk.voted_epoch < old.voted_epoch {
            self.violations.push(format!(
                "n{}: durable state went backwards: {old:?} -> {disk:?}",
                i + 1
            ));
        }
        self.durable[i] = disk.clone();
    }

    /// Every message leaves only after what it depends on is durable, and
    /// no node votes twice in one epoch (across restarts).
    pub fn on_send(&mut self, i: usize, to: usize, msg: &Message, disk: &PersistedState) {
        let node = i + 1;
        match msg {
            Message::Offer { epoch, .. } => {
                if disk.voted_epoch < *epoch {
                    self.violations.push(format!(
                        "n{node}: OFFER {epoch} sent before its self-vote was durable"
                    ));
                }
                self.record_vote(i, *epoch, i);
            }
            Message::Accept { epoch, .. } => {
                if disk.voted_epoch < *epoch {
                    self.violations.push(format!(
                        "n{node}: ACCEPT {epoch} sent before the vote was durable"
                    ));
                }
                self.record_vote(i, *epoch, to);
                self.accepts.entry((*epoch, to)).or_default().insert(i);
            }
            Message::Announce { epoch, .. } if disk.epoch < *epoch => {
                self.violations.push(format!(
                    "n{node}: ANNOUNCE {epoch} sent before the epoch was durable"
                ));
            }
            Message::Hb(hb) if hb.epoch > disk.epoch => {
                self.violations.push(format!(
                    "n{node}: HB advertises epoch {} beyond durable {}",
                    hb.epoch, disk.epoch
                ));
            }
            _ => {}
        }
    }

    fn record_vote(&mut self, voter: usize, epoch: u64, candidate: usize) {
        if let Some(&prev) = self.votes.get(&(voter, epoch)) {
            if prev != candidate {
                self.violations.push(format!(
                    "n{} voted twice in epoch {epoch}: for n{} and for n{}",
                    voter + 1,
                    prev + 1,
                    candidate + 1
                ));
            }
        }
        self.votes.insert((voter, epoch), candidate);
    }

    /// At most one primary per epoch, and never without a quorum of votes.
    pub fn on_promoted(&mut self, i: usize, epoch: u64) {
        if let Some(&other) = self.primaries.get(&epoch) {
            if other != i {
                self.violations.push(format!(
                    "two primaries in epoch {epoch}: n{} and n{}",
                    other + 1,
                    i + 1
                ));
            }
        }
        self.primaries.insert(epoch, i);
        let votes = 1 + self.accepts.get(&(epoch, i)).map_or(0, |v| v.len());
        if votes < self.n / 2 + 1 {
            self.violations.push(format!(
                "n{} became primary of epoch {epoch} with {votes} votes",
                i + 1
            ));
        }
    }

    /// A data node that starts accepting writes holds every write
    /// acknowledged before its elector sent the promotion. A promotion that
    /// a whole-node freeze held in the data node's socket is carried out at
    /// the thaw, after writes a newer primary took meanwhile: that node is
    /// then a primary resuming from a stall (docs/protocol.md §6.2), and the
    /// overlap check in `check` bounds how long it stays writable.
    pub fn on_data_promoted(
        &mut self,
        i: usize,
        data: &DataNode,
        acked: &[AckedWrite],
        sent_at: Millis,
        now: Millis,
    ) {
        let due = acked.iter().filter(|w| w.at <= sent_at);
        if let Some(lost) = due.into_iter().find(|w| !data.holds(w.index, w.chain)) {
            self.violations.push(format!(
                "at {now} ms n{} accepts writes without acknowledged write {} (acked at {} ms)",
                i + 1,
                lost.write_id,
                lost.at
            ));
        }
    }

    /// Checks that need the whole cluster: writable overlap.
    pub fn check(
        &mut self,
        now: Millis,
        nodes: &[SimNode],
        _acked: &[AckedWrite],
        blocked: &[Vec<bool>],
    ) -> Result<(), String> {
        let grace = self.tamper_grace_ms;
        let writable = nodes
            .iter()
            .filter(|n| {
                // A frozen node, or a data node stalled alone, takes no write
                // until it resumes; from then the overlap is bounded as for
                // any primary resuming from a stall (§6.2): the fence its
                // elector sent meanwhile waits in its socket.
                n.data.writable()
                    && !(n.pause_data_too && n.paused_until.is_some_and(|u| now < u))
                    && now >= n.data.stalled_until
                    && n.tampered_at.is_none_or(|t| now > t + grace)
            })
            .count();
        if writable >= 2 {
            let since = *self.overlap_since.get_or_insert(now);
            self.longest_overlap_ms = self.longest_overlap_ms.max(now - since);
            if now - since > self.overlap_bound_ms() {
                self.violations.push(format!(
                    "{writable} data nodes writable for {} ms (since {since} ms)",
                    now - since
                ));
            }
        } else {
            self.overlap_since = None;
        }
        let _ = self.timings;
        if let Some(bound) = self.liveness_bound_ms {
            self.check_liveness(now, nodes, blocked, bound);
        }
        match self.violations.first() {
            Some(v) => Err(v.clone()),
            None => Ok(()),
        }
    }
}

impl Invariants {
    /// Liveness during faults (§9.2): whenever some majority of nodes is
    /// healthy (elector and data node up, not stopped, disk writable) and
    /// every pair of them can talk both ways, one of them must be a
    /// writable primary within `bound` of that majority forming, for as
    /// long as the fault lasts, not only after the final heal.
    fn check_liveness(
        &mut self,
        now: Millis,
        nodes: &[SimNode],
        blocked: &[Vec<bool>],
        bound: u64,
    ) {
        let healthy: Vec<usize> = (0..nodes.len())
            .filter(|&i| {
                let n = &nodes[i];
                // A node whose data node may lack what it acknowledged
                // (§6.10) has no working data part: the protocol waits for
                // one that holds the floor, or for an operator.
                n.core.as_ref().is_some_and(|c| !c.below_floor())
                    && (n.witness || n.data.up)
                    && n.paused_until.is_none_or(|u| now >= u)
                    && now >= n.disk_broken_until
            })
            .collect();
        let quorum = self.n / 2 + 1;
        // The largest group of healthy nodes that all hear each other (n ≤ 5:
        // every subset is cheap to try).
        let mut best: Vec<usize> = Vec::new();
        for mask in 1u32..(1 << healthy.len()) {
            let group: Vec<usize> = healthy
                .iter()
                .enumerate()
                .filter(|(k, _)| mask & (1 << k) != 0)
                .map(|(_, &i)| i)
                .collect();
            let connected = group.iter().all(|&a| {
                group
                    .iter()
                    .all(|&b| a == b || (!blocked[a][b] && !blocked[b][a]))
            });
            if connected && group.len() > best.len() {
                best = group;
            }
        }
        // Only a group with a data node can have a primary (§4.5).
        if best.len() < quorum || best.iter().all(|&i| nodes[i].witness) {
            self.healthy_since = None;
            return;
        }
        let since = match &self.healthy_since {
            Some((t, group)) if *group == best => *t,
            _ => {
                self.healthy_since = Some((now, best.clone()));
                now
            }
        };
        // Served: some node is a writable primary (one outside the group
        // holds a lease only while a majority echoes it, so it serves too).
        let served = (0..nodes.len()).any(|i| {
            nodes[i].data.writable()
                && nodes[i]
                    .core
                    .as_ref()
                    .is_some_and(|c| c.role() == elector::protocol::Role::Primary && !c.fenced())
        });
        if served {
            self.healthy_since = Some((now, best));
        } else if now - since > bound {
            self.violations.push(format!(
                "liveness: nodes {:?} are healthy and connected since {since} ms but no writable primary among them after {} ms",
                best.iter().map(|i| format!("n{}", i + 1)).collect::<Vec<_>>(),
                now - since
            ));
        }
    }
}
