//! The gauges: read from the [`StatusSnapshot`] at scrape time, never stored,
//! so `/metrics` and `/status` can never disagree.
//!
//! To add a gauge: one `r.register(..)` below from a snapshot field, and a row
//! in the tests' `EXPOSED_FAMILIES` table. An optional field is registered only
//! when present, so an unknown value is absent rather than a false 0.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::super::status::{Role, StatusSnapshot, SwitchoverPhase};

/// Offsets and epochs are `u64` on the wire; a gauge of `u64` keeps them exact.
type U64Gauge = Gauge<u64, AtomicU64>;

/// `{role="primary"}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ByRole {
    role: &'static str,
}

/// `{peer="n2"}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ByPeer {
    peer: String,
}

/// A gauge holding `value`.
fn gauge(value: u64) -> U64Gauge {
    let g = U64Gauge::default();
    g.set(value);
    g
}

/// Registers every gauge `status` determines, in exposition order.
pub(super) fn register(r: &mut Registry, status: &StatusSnapshot) {
    let roles = Family::<ByRole, U64Gauge>::default();
    for role in Role::ALL {
        roles
            .get_or_create(&ByRole {
                role: role.as_str(),
            })
            .set(u64::from(status.role == role));
    }
    r.register(
        "elector_role",
        "1 for the role this node currently holds, 0 for the others",
        roles,
    );
    r.register(
        "elector_epoch",
        "Current election epoch",
        gauge(status.epoch),
    );
    r.register(
        "elector_fenced",
        "1 while writes on the local data node are fenced",
        gauge(status.fenced.into()),
    );
    r.register(
        "elector_quorum_ok",
        "1 while this node hears a quorum of nodes, itself included",
        gauge(status.quorum_ok().into()),
    );
    r.register(
        "elector_quorum",
        "Votes needed to win an election",
        gauge(status.quorum as u64),
    );
    r.register(
        "elector_cluster_size",
        "Configured number of nodes",
        gauge(status.cluster_size as u64),
    );
    r.register(
        "elector_data_node_reachable",
        "1 while the local data node answers",
        gauge(status.data_node.reachable.into()),
    );
    r.register(
        "elector_data_below_floor",
        "1 while the local data node may lack what it acknowledged (protocol 6.10): the node does not stand",
        gauge(status.data_node.below_floor.into()),
    );
    if let Some(offset) = status.data_node.offset {
        r.register(
            "elector_data_node_offset",
            "Replication offset of the local data node",
            gauge(offset),
        );
    }
    if let Some(lag) = status.data_node.lag {
        r.register(
            "elector_data_node_lag_bytes",
            "Bytes the local data node is behind its primary",
            gauge(lag),
        );
    }
    let switching = status.switchover.as_ref().is_some_and(|s| {
        matches!(
            s.phase,
            SwitchoverPhase::CatchingUp | SwitchoverPhase::HandingOver
        )
    });
    r.register(
        "elector_switchover_in_progress",
        "1 while a planned switchover is running",
        gauge(switching.into()),
    );
    if let Some(vip) = &status.vip {
        r.register(
            "elector_vip_held",
            "1 while the virtual IP is on this node (docs/vip.md)",
            gauge(vip.held.into()),
        );
    }
    let alive = Family::<ByPeer, U64Gauge>::default();
    let last_seen = Family::<ByPeer, U64Gauge>::default();
    for p in &status.peers {
        let peer = ByPeer { peer: p.id.clone() };
        alive.get_or_create(&peer).set(p.alive.into());
        if let Some(ms) = p.last_seen_ms {
            last_seen.get_or_create(&peer).set(ms);
        }
    }
    r.register(
        "elector_peer_alive",
        "1 while the peer is heard within down_after",
        alive,
    );
    r.register(
        "elector_peer_last_seen_milliseconds",
        "Milliseconds since the last valid message from the peer",
        last_seen,
    );
}
