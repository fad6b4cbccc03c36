//! The data nodes between elector decisions: replication from each
//! upstream while the network allows, client writes on every writable node,
//! and `WAIT`-like acknowledgements.

use super::datalayer::{AckedWrite, PendingWrite};
use super::Sim;
use rand::Rng;

impl Sim {
    /// Applies due targets, replicates, writes and acknowledges.
    pub(super) fn data_step(&mut self) {
        let n = self.nodes.len();
        for i in 0..n {
            let upstream = match &self.nodes[i].data.applied {
                elector::core::DataNodeTarget::Follow { primary, .. } => {
                    self.ids.iter().position(|id| id == primary)
                }
                _ => None,
            };
            if self.nodes[i].data.kevy.is_some() {
                self.kevy_replicate(i, upstream);
                continue;
            }
            let linked = upstream.is_some_and(|u| {
                self.nodes[i].data.up
                    && self.nodes[u].data.is_master()
                    && self.link_allowed(i, u)
                    && self.gate_admits(u)
            });
            self.nodes[i].data.link_up = linked;
            if let (true, Some(u)) = (linked, upstream) {
                if u != i {
                    let (a, b) = self.nodes.split_at_mut(i.max(u));
                    let (dst, src) = if i < u {
                        (&mut a[i], &b[0])
                    } else {
                        (&mut b[0], &a[u])
                    };
                    dst.data.sync_from(&src.data);
                }
            }
        }
        // Clients write to every node that accepts writes.
        for i in 0..n {
            if self.clients_write
                && self.nodes[i].data.writable()
                && !self.data_frozen(i)
                && self.rng.gen_bool(0.5)
            {
                let write_id = self.next_write;
                self.next_write += 1;
                let (index, chain) = self.nodes[i].data.append(write_id);
                self.pending_writes.push(PendingWrite {
                    node: i,
                    write_id,
                    index,
                    chain,
                    at: self.now,
                });
            }
        }
        // Like `WAIT k` with the cluster's data promise (§4.5): without
        // witnesses, quorum − 1 replicas.
        let promise = self
            .ack_copies_override
            .unwrap_or_else(|| self.config(0).data_promise());
        let now = self.now;
        let nodes = &self.nodes;
        let mut acked = Vec::new();
        self.pending_writes.retain(|w| {
            if !nodes[w.node].data.holds(w.index, w.chain) {
                return false; // the primary itself lost it before the ack: unknown, not acked
            }
            // Like WAIT: only replicas linked to this primary acknowledge.
            let writer = format!("n{}", w.node + 1);
            let copies = (0..n)
                .filter(|&j| j != w.node && nodes[j].data.up && nodes[j].data.link_up)
                .filter(|&j| {
                    matches!(&nodes[j].data.applied,
                        elector::core::DataNodeTarget::Follow { primary, .. } if *primary == writer)
                })
                .filter(|&j| nodes[j].data.holds(w.index, w.chain))
                .count();
            if copies >= promise.max(1) {
                acked.push(AckedWrite {
                    write_id: w.write_id,
                    index: w.index,
                    chain: w.chain,
                    at: now,
                });
                return false;
            }
            now - w.at < 1_000 // WAIT timed out: the client saw a failure
        });
        self.acked.extend(acked);
    }
}
