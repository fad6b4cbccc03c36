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

impl WatchdogProbes {
    /// Stamps a probe at `unix_ms`.
    pub fn probed(&self, unix_ms: u64) {
        self.last_unix_ms.fetch_max(unix_ms, Ordering::Relaxed);
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
