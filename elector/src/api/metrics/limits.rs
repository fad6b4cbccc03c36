//! What the alert rules compare the live series with
//! (`deploy/prometheus/elector-rules.yml`): the configured fence budget and
//! lag bound, and the watchdog's clamp count.
//!
//! The bounds are exported as gauges rather than written into the rules so
//! one rule file serves clusters with different timings. The watchdog is a
//! separate process with no listener of its own (it must stay small, and
//! it acts exactly when the elector may not answer); it counts its clamps
//! in a file in the node's `data_dir`, and the elector reads that file at
//! scrape time. A stalled elector still answers `/metrics` (only its loop
//! is stuck), so the count shows while the clamp is in force; a killed one
//! shows it once it is back.
//!
//! Whether the watchdog runs at all is seen from this side: it polls
//! `/healthz` every heartbeat, and the elector stamps the last such poll
//! ([`WatchdogProbes`]). A dead or never-started watchdog leaves the stamp
//! old (or 0), which `ElectorWatchdogMissing` alerts on.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

/// The file, in `data_dir`, where the watchdog counts its clamps (one
/// decimal number).
pub fn watchdog_clamps_path(data_dir: &Path) -> PathBuf {
    data_dir.join("watchdog-clamps")
}

/// The configured bounds, exported as gauges.
#[derive(Debug, Clone)]
pub struct Limits {
    /// `timings.fence_margin_ms`: a fence slower than this eats the margin.
    pub fence_budget: Duration,
    /// `max_lag_bytes` (bytes on Redis, commands on kevy).
    pub max_lag: u64,
    /// [`watchdog_clamps_path`] of this node, if it has a data node.
    pub watchdog_clamps: Option<PathBuf>,
}

/// When the watchdog last polled `/healthz`, in Unix milliseconds (0: never).
///
/// The watchdog is recognised by its HTTP client's `User-Agent`
/// ([`is_watchdog_agent`]): Docker's and Ansible's health checks poll the
/// same endpoint, and counting them would hide a dead watchdog.
#[derive(Debug, Default)]
pub struct WatchdogProbes {
    last_unix_ms: AtomicU64,
}

/// A watchdog that has not polled for this long is reported missing in
/// `/status`, as `ElectorWatchdogMissing` alerts after the same 30 s (it
/// polls every heartbeat; a restart by its supervisor takes about 1 s).
pub const WATCHDOG_MISSING_AFTER_MS: u64 = 30_000;

/// The dead-man switch as `/status` shows it (docs/interfaces.md), on nodes
/// with a data node.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WatchdogStatus {
    /// Polled `/healthz` within [`WATCHDOG_MISSING_AFTER_MS`]: the data node
    /// has a live dead-man switch. `false` on a node whose watchdog died,
    /// never started, or is turned off (`WATCHDOG=0`).
    pub live: bool,
    /// Milliseconds since its last poll; `null` when none came since this
    /// elector started.
    pub last_probe_ms_ago: Option<u64>,
    /// Times it fenced the data node because the elector was silent past its
    /// lease (the `elector_watchdog_clamps_total` counter).
    pub clamps: u64,
}

impl WatchdogProbes {
    /// Stamps a probe at `unix_ms`.
    pub fn probed(&self, unix_ms: u64) {
        self.last_unix_ms.fetch_max(unix_ms, Ordering::Relaxed);
    }

    /// What `/status` shows at `now_unix_ms`, with the clamp count in
    /// `clamps_file`.
    pub fn status(&self, now_unix_ms: u64, clamps_file: &Path) -> WatchdogStatus {
        let last = self.last_unix_ms.load(Ordering::Relaxed);
        let ago = (last > 0).then(|| now_unix_ms.saturating_sub(last));
        WatchdogStatus {
            live: ago.is_some_and(|a| a <= WATCHDOG_MISSING_AFTER_MS),
            last_probe_ms_ago: ago,
            clamps: read_count(clamps_file),
        }
    }

    /// The last probe, in Unix seconds (0 when none came).
    pub fn last_seconds(&self) -> f64 {
        self.last_unix_ms.load(Ordering::Relaxed) as f64 / 1000.0
    }
}

/// True for the `User-Agent` of `elector watchdog`'s probe:
/// `elector-watchdog/<version>` (`watchdog::WATCHDOG_USER_AGENT`). A
/// watchdog of an older release sends ureq's default, `ureq/<version>`,
/// accepted too so a rolling upgrade does not page "watchdog missing";
/// nothing else in the project polls `/healthz` with ureq.
pub fn is_watchdog_agent(agent: &str) -> bool {
    agent.starts_with("ureq/") || agent.starts_with("elector-watchdog/")
}

impl Limits {
    pub(super) fn register(&self, r: &mut Registry, probes: &WatchdogProbes) {
        r.register(
            "elector_fence_budget_seconds",
            "timings.fence_margin_ms: a fence apply slower than this eats the lease's margin",
            ConstGauge::new(self.fence_budget.as_secs_f64()),
        );
        r.register(
            "elector_max_lag_bytes",
            "max_lag_bytes: a replica further behind is not electable (commands on kevy)",
            ConstGauge::new(self.max_lag as i64),
        );
        if let Some(path) = &self.watchdog_clamps {
            r.register(
                "elector_watchdog_clamps",
                "Times the watchdog fenced the data node because the elector was silent past its lease",
                ConstCounter::new(read_count(path)),
            );
            r.register(
                "elector_watchdog_last_probe_timestamp_seconds",
                "When the watchdog last polled /healthz, in Unix seconds (0: not since this elector started)",
                ConstGauge::new(probes.last_seconds()),
            );
        }
    }
}

/// The count in `path`; 0 when the file is missing or unreadable (the
/// watchdog never clamped, or never ran).
pub(crate) fn read_count(path: &Path) -> u64 {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

/// Adds one to the count in `path` (written to a temporary file and renamed,
/// so a scrape never reads half a number). Returns the new count.
pub(crate) fn add_one(path: &Path) -> std::io::Result<u64> {
    let next = read_count(path) + 1;
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, format!("{next}\n"))?;
    std::fs::rename(&tmp, path)?;
    Ok(next)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watchdog_is_live_until_its_polls_stop_for_thirty_seconds() {
        let dir = tempfile::tempdir().unwrap();
        let clamps = watchdog_clamps_path(dir.path());
        let probes = WatchdogProbes::default();
        let never = probes.status(1_000_000, &clamps);
        assert!(!never.live, "no poll since start: missing");
        assert_eq!(never.last_probe_ms_ago, None);
        probes.probed(1_000_000);
        add_one(&clamps).unwrap();
        let fresh = probes.status(1_000_250, &clamps);
        assert_eq!(
            fresh,
            WatchdogStatus {
                live: true,
                last_probe_ms_ago: Some(250),
                clamps: 1
            }
        );
        assert!(
            probes
                .status(1_000_000 + WATCHDOG_MISSING_AFTER_MS, &clamps)
                .live
        );
        let gone = probes.status(1_000_001 + WATCHDOG_MISSING_AFTER_MS, &clamps);
        assert!(!gone.live, "silent past the bound: missing");
    }

    #[test]
    fn the_clamp_count_starts_at_zero_and_counts_up_across_rereads() {
        let dir = tempfile::tempdir().unwrap();
        let path = watchdog_clamps_path(dir.path());
        assert_eq!(read_count(&path), 0, "no file yet");
        assert_eq!(add_one(&path).unwrap(), 1);
        assert_eq!(add_one(&path).unwrap(), 2);
        assert_eq!(read_count(&path), 2);
        std::fs::write(&path, "garbage").unwrap();
        assert_eq!(read_count(&path), 0, "an unreadable count is not a panic");
    }
}
