//! Our elector beside kevy or Redis: the image's own entrypoint starts both
//! (docs/interfaces.md, "image environment"), clients follow the electors'
//! `/status`, and every scenario step applies.

use super::{Applicability, Discovery, NodeSpec, Setting, Target, TargetKind, Topology};
use crate::scenario::{Step, Timings};

/// Elector API port inside the container.
pub const API_PORT: u16 = 9300;

pub struct Elector {
    pub kind: TargetKind,
}

/// Time a backend adds to every election after a node dies, whatever the
/// elector does. kevy 7.0.0: `REPLICAOF` blocks the whole server until its
/// replication thread's current connect attempt ends, and that connect has a
/// fixed 5 s timeout (`kevy_replicate::replica::ConnectOptions` default, used
/// by kevy's replica runner). After a host dies without a RST, the survivors'
/// detach and promotion wait for it; the containers' neighbour-cache sysctls
/// cut it to about 3.3 s (README, Known limits).
pub fn backend_election_floor_ms(backend: &str) -> u64 {
    match backend {
        "kevy" => 3_500,
        _ => 0,
    }
}

impl Target for Elector {
    fn kind(&self) -> TargetKind {
        self.kind
    }

    fn node_spec(&self, _topo: &Topology, _index: usize) -> NodeSpec {
        NodeSpec {
            script: None,
            control_port: Some(API_PORT),
        }
    }

    fn discovery(&self) -> Discovery {
        Discovery::ElectorStatus
    }

    fn applies(&self, _step: &Step) -> Applicability {
        Applicability::Applies
    }

    fn settings(&self, t: &Timings) -> Vec<Setting> {
        vec![
            Setting::new("hb_interval_ms", t.hb_interval_ms),
            Setting::new("down_after_ms", t.down_after_ms),
            Setting::new("election_timeout_ms", t.election_timeout_ms),
            Setting::new(
                "backoff_ms",
                format!("{}-{}", t.backoff_min_ms, t.backoff_max_ms),
            ),
            Setting::new("writes acknowledged by", "WAIT quorum-1"),
        ]
    }

    fn control_processes(&self) -> &'static [&'static str] {
        // `elector run` and `elector watchdog` (same binary name).
        &["elector"]
    }

    fn election_slack_ms(&self) -> u64 {
        backend_election_floor_ms(self.kind.backend())
    }
}
