//! How hostile the simulated world is, and the timings it runs with.

use elector::core::Timings;
use rand::rngs::StdRng;
use rand::Rng;

/// Timings used in simulation: seed ratios, scaled down to keep runs short.
/// The fence margin covers the world's slowest fence (protocol §6.2.1); a
/// world with slow fences gets a longer `down_after` so a lease is left.
pub fn sim_timings(world: &World) -> Timings {
    let margin = world.margin_override.unwrap_or(world.fence_ms.1 + 20);
    let down_after = if margin > 200 { 2_000 } else { 1_000 };
    Timings {
        hb_interval_ms: 100,
        down_after_ms: down_after,
        election_timeout_ms: 600,
        backoff_min_ms: 200,
        backoff_max_ms: 800,
        fence_margin_ms: margin,
    }
}

/// How hostile the simulated world is.
#[derive(Clone, Debug)]
pub struct World {
    pub loss: f64,
    pub duplicate: f64,
    pub latency_ms: (u64, u64),
    pub persist_ms: (u64, u64),
    pub persist_fail: f64,
    pub apply_ms: (u64, u64),
    /// How long a fence target takes to reach the data node (protocol
    /// §6.2.1: slow fences, a command running into its timeout).
    pub fence_ms: (u64, u64),
    /// Each node's clock runs at a rate within this of real time (§6.2.1).
    pub clock_drift: f64,
    /// The data node's dead-man switch (watchdog process, §6.4.1).
    pub watchdog: bool,
    /// The watchdog fences at the end of the lease the elector last
    /// reported (§6.4.1). Off only to show what that rule prevents.
    pub watchdog_knows_lease: bool,
    /// A fence margin other than the one that covers `fence_ms` (for
    /// proving that a too-small margin is caught).
    pub margin_override: Option<u64>,
    /// Nodes whose configurations disagree (members or lease timings) do
    /// not talk: the real transport refuses a `HELLO` whose fingerprint
    /// differs from its own (issue 10 finding 6, protocol §3). Off only to
    /// show what the check prevents.
    pub fingerprint_check: bool,
    /// How often a data node restarted with its files comes back in the
    /// stream it was in (Redis from an RDB with its replication id; kevy's
    /// clean shutdown) rather than in a new one (Redis from its AOF, kevy
    /// after a crash): only the former can prove its position (§6.10).
    pub restart_keeps_stream: f64,
    /// Replicas reach a data node only through its elector's replication
    /// gate (§6.10). Off only to show what the gate prevents.
    pub gate: bool,
}

impl World {
    pub fn random(rng: &mut StdRng) -> World {
        World {
            loss: [0.0, 0.01, 0.05, 0.2][rng.gen_range(0..4)],
            duplicate: [0.0, 0.02][rng.gen_range(0..2)],
            latency_ms: (1, [5, 20, 60][rng.gen_range(0..3)]),
            persist_ms: (0, 5),
            persist_fail: [0.0, 0.0, 0.01][rng.gen_range(0..3)],
            apply_ms: (1, 30),
            fence_ms: (1, [30, 30, 500][rng.gen_range(0..3)]),
            clock_drift: [0.0, 0.01][rng.gen_range(0..2)],
            watchdog: true,
            watchdog_knows_lease: true,
            margin_override: None,
            fingerprint_check: true,
            restart_keeps_stream: [0.0, 0.5, 1.0][rng.gen_range(0..3)],
            gate: true,
        }
    }
}
