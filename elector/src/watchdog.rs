//! The data node's dead-man switch (protocol §6.4.1): a small process of its
//! own, beside the data node and the elector, that fences the data node when
//! the elector stops answering for longer than the lease.
//!
//! Why a separate process: the elector's lease fences a primary that loses
//! its quorum, but only while the elector runs. A stopped (`SIGSTOP`),
//! wedged or killed elector leaves its data node as it was; if that was a
//! writable primary it would keep accepting writes while the others elect a
//! successor. A frozen elector cannot notice its own freeze, so the check
//! has to live outside it. The watchdog only ever takes authority away: it
//! applies the start-up clamp (a read-only replica of nowhere, and for Redis
//! `min-replicas-to-write` beyond the cluster), so a primary stops taking
//! writes and a replica stops acknowledging them; when the elector answers
//! again it re-applies whatever its core decides.
//!
//! Redis has a second, in-process layer: an unfenced Redis primary refuses
//! writes once fewer than quorum − 1 replicas acknowledge it (its
//! replicas' electors detach them from a primary they no longer hear).

use crate::config::Config;
use crate::datanode::{AnyNode, DataNodeAdapter, DataNodeError};
use std::time::{Duration, Instant};

/// What the watchdog decides after each probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The elector answered within the lease.
    Healthy,
    /// Silent for longer than the lease: fence (again).
    Fence,
}

/// The `User-Agent` of the watchdog's probe.
pub const WATCHDOG_USER_AGENT: &str = concat!("elector-watchdog/", env!("CARGO_PKG_VERSION"));

/// One probe of the elector's `/healthz`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe {
    /// No answer in time, or a stalled loop (`503`).
    Silent,
    /// The elector answers; its data node may stay writable until then
    /// (its lease's end, measured from when the probe was sent), or not at
    /// all.
    Answered { writable_until: Option<Instant> },
}

/// The pure part: when to fence, given the elector's answers.
///
/// Two rules (protocol §6.4.1): an elector silent for longer than a lease
/// gets its data node fenced (a replica must stop acknowledging, nobody
/// vouches for its primary any more); and a primary's data node is fenced
/// at the end of the lease the elector last reported, if no answer has
/// moved it since. The second matters when a primary is cut off from its
/// quorum and then freezes: counted from the freeze, a lease of silence
/// could outlast its real lease, and the majority's successor with it.
#[derive(Debug, Clone)]
pub struct DeadManSwitch {
    lease: Duration,
    last_answer: Instant,
    writable_until: Option<Instant>,
    fenced: bool,
}

impl DeadManSwitch {
    pub fn new(lease: Duration, now: Instant) -> DeadManSwitch {
        DeadManSwitch {
            lease,
            last_answer: now,
            writable_until: None,
            fenced: false,
        }
    }

    /// When to probe next: at the next tick, or at the reported end of the
    /// lease if that comes first.
    pub fn next_probe(&self, tick: Instant) -> Instant {
        self.writable_until.filter(|u| *u < tick).unwrap_or(tick)
    }

    /// Records one probe's outcome at `now`.
    pub fn probe(&mut self, probe: Probe, now: Instant) -> Verdict {
        if let Probe::Answered { writable_until } = probe {
            if self.fenced {
                tracing::info!(
                    "watchdog: the elector answers again; it decides the data node's state"
                );
            }
            self.last_answer = now;
            self.writable_until = writable_until;
            self.fenced = false;
            return Verdict::Healthy;
        }
        let silent = now.duration_since(self.last_answer);
        let lease_over = self.writable_until.is_some_and(|u| now >= u);
        if lease_over {
            // Used up: from now on the ordinary ticks re-fence while silent.
            self.writable_until = None;
        }
        if silent <= self.lease && !lease_over && !self.fenced {
            return Verdict::Healthy;
        }
        if !self.fenced {
            tracing::warn!(
                silent_ms = silent.as_millis() as u64,
                lease_over,
                "watchdog: the elector is silent past its lease; fencing the data node"
            );
        }
        self.fenced = true;
        Verdict::Fence
    }
}

/// The elector's health URL on this host (its API, reached over loopback
/// when it listens on every address; `https` when it serves `tls.api`).
pub fn health_url(api_listen: &str, tls: bool) -> String {
    format!("{}/healthz", local_api_base(api_listen, tls))
}

/// `scheme://host:port` of this node's own API as a local client reaches
/// it: a wildcard listen address is reached on loopback, an IPv6 host is
/// bracketed (the watchdog's probe and the CLI's defaults share it).
pub fn local_api_base(api_listen: &str, tls: bool) -> String {
    let (host, port) = api_listen.rsplit_once(':').unwrap_or(("127.0.0.1", "9300"));
    let host = match host.trim_matches(|c| c == '[' || c == ']') {
        "" | "0.0.0.0" | "::" => "127.0.0.1".to_string(),
        h if h.contains(':') => format!("[{h}]"),
        h => h.to_string(),
    };
    let scheme = if tls { "https" } else { "http" };
    format!("{scheme}://{host}:{port}")
}

/// Runs the watchdog until the process is stopped.
pub async fn run(config: Config) {
    let t = config.timings();
    let lease = Duration::from_millis(t.lease_ms());
    let every = Duration::from_millis(t.hb_interval_ms);
    let health = HealthProbe::new(&config);
    tracing::info!(url = %health.url, lease_ms = t.lease_ms(), "watchdog: watching the elector");
    let clamps = crate::api::metrics::watchdog_clamps_path(&config.data_dir);
    let vip = config.vip().ok().flatten();
    let hint = crate::datanode::floor_hint::path(&config.data_dir);
    match AnyNode::from_config(&config) {
        Some(node) => watch(node, health, lease, every, (clamps, hint), vip).await,
        None => {
            tracing::info!("watchdog: this node is a witness: no data node to fence; nothing to do")
        }
    }
}

async fn watch<A: DataNodeAdapter>(
    mut node: A,
    mut health: HealthProbe,
    lease: Duration,
    every: Duration,
    (clamps, hint): (std::path::PathBuf, std::path::PathBuf),
    vip: Option<crate::vip::Vip>,
) {
    // Said at start, with its cause: a watchdog that cannot reach or log
    // in to its data node would otherwise be found out only when it must
    // fence (the fence is still tried then).
    match node.observe().await {
        Ok(_) => tracing::info!(backend = node.kind(), "watchdog: data node reachable"),
        Err(e) => tracing::warn!(cause = %e, backend = node.kind(),
            "watchdog: cannot use the data node now; it will still try to fence it when needed"),
    }
    let mut switch = DeadManSwitch::new(lease, Instant::now());
    let mut clamped = false;
    let timeout = every.max(Duration::from_millis(100));
    let mut tick = Instant::now();
    loop {
        tick += every;
        let at = switch.next_probe(tick);
        // At the lease's end the elector should answer at once: a short
        // wait, so a frozen one is fenced within the fence margin.
        let wait = if at < tick {
            Duration::from_millis(50)
        } else {
            timeout
        };
        tokio::time::sleep_until(at.into()).await;
        if at < tick {
            tick = at;
        }
        let probe = health.probe(wait).await;
        let verdict = switch.probe(probe, Instant::now());
        let first_of_silence = verdict == Verdict::Fence && !clamped;
        clamped = verdict == Verdict::Fence;
        if verdict == Verdict::Fence {
            // The start-up clamp: no writes and no upstream (on kevy a
            // primary is quiesced instead, keeping its feed generation:
            // docs/architecture.md §kevy). A replica stops acknowledging
            // too, since nobody vouches for its primary any more (§6.2); the
            // blind fence is the fallback when the node cannot be read. The
            // VIP goes with the fence (docs/vip.md): the frozen elector
            // cannot remove it.
            if let Some(vip) = &vip {
                if let Err(e) = crate::vip::VipHandle::remove_now(vip).await {
                    tracing::warn!(error = %e, "watchdog: removing the vip failed");
                }
            }
            if first_of_silence {
                node.watchdog_silence_began();
            }
            if let Err(e) = clamp(&mut node).await {
                tracing::warn!(error = %e, "watchdog: fencing the data node failed; retrying");
            } else {
                record_floor_hint(&mut node, &hint).await;
            }
        }
        if first_of_silence {
            // Counted once per silence, for `elector_watchdog_clamps_total`
            // (the elector reads the file at scrape time), and after the
            // clamp: the elector's adapter takes a count that moved as a
            // fence in force that it did not set (kevy's quiesce does not
            // show in INFO).
            match crate::api::metrics::limits::add_one(&clamps) {
                Ok(n) => tracing::warn!(
                    clamps = n,
                    reason = "elector_silent",
                    "watchdog: clamp counted"
                ),
                Err(e) => {
                    tracing::warn!(error = %e, path = %clamps.display(), "watchdog: could not count the clamp")
                }
            }
        }
    }
}

/// After a clamp, nothing the node holds can be acknowledged any more: what
/// it holds now is what it may have acknowledged while the elector was
/// silent. Recorded for the elector's floor (`floor_hint`, protocol §6.10),
/// beside what earlier clamps recorded in other streams.
async fn record_floor_hint<A: DataNodeAdapter>(node: &mut A, path: &std::path::Path) {
    let Ok(info) = node.observe().await else {
        return;
    };
    // A primary's position includes what no replica acknowledged: its
    // elector's held position covers it, and a floor must not (a witness
    // would refuse a successor that holds every acknowledged write). A Redis
    // primary the clamp demoted reads as a replica here: its elector ignores
    // hints in a stream it served as primary.
    if info.is_master() {
        return;
    }
    let Some(stream) = info.stream else {
        return;
    };
    // The join the elector had under way (protocol §6.10): a stream its
    // record does not name counts as that epoch's only for the same join.
    // Unreadable: 0, so the entry counts only in a recorded stream.
    let joining = path
        .parent()
        .and_then(|dir| crate::persist::StateFile::new(dir).load(false).ok())
        .map_or(0, |state| state.joining());
    match crate::datanode::floor_hint::record(path, &stream, info.offset, joining) {
        Ok(_) => {
            tracing::debug!(%stream, offset = info.offset, "watchdog: recorded what the data node held for the elector's floor")
        }
        Err(e) => {
            tracing::warn!(error = %e, path = %path.display(), "watchdog: could not record the floor hint")
        }
    }
}

/// How the watchdog reaches its elector's `/healthz`: plain HTTP, or TLS
/// trusting exactly the API's own certificate (`tls::pinned`).
pub(crate) struct HealthProbe {
    url: String,
    api_tls: Option<crate::config::ServerTlsConfig>,
    /// Built from the files on first use and again after a failed probe,
    /// so a certificate rotated under the elector is pinned anew.
    tls: Option<std::sync::Arc<rustls::ClientConfig>>,
}

impl HealthProbe {
    pub(crate) fn new(config: &Config) -> HealthProbe {
        let api_tls = config.tls.api.clone();
        HealthProbe {
            url: health_url(&config.listen.api, api_tls.is_some()),
            api_tls,
            tls: None,
        }
    }

    /// Asks `/healthz` once; see [`probe_health`].
    pub(crate) async fn probe(&mut self, timeout: Duration) -> Probe {
        let mut builder = ureq::AgentBuilder::new()
            .timeout(timeout)
            .user_agent(WATCHDOG_USER_AGENT);
        if let Some(api) = &self.api_tls {
            if self.tls.is_none() {
                match crate::tls::pinned::client_for_own_api(api) {
                    Ok(c) => self.tls = Some(std::sync::Arc::new(c)),
                    Err(e) => {
                        tracing::warn!(error = %e, "watchdog: cannot read the API's TLS files; the elector counts as silent");
                        return Probe::Silent;
                    }
                }
            }
            if let Some(tls) = &self.tls {
                builder = builder.tls_connector(crate::cli::client::connector(tls.clone()));
            }
        }
        let probe = probe_health(builder.build(), &self.url).await;
        if probe == Probe::Silent {
            self.tls = None;
        }
        probe
    }
}

/// Asks the elector's `/healthz`; an answer carries how long its data node
/// may stay writable, counted from when the question was sent.
async fn probe_health(agent: ureq::Agent, url: &str) -> Probe {
    // The agent is named (`WATCHDOG_USER_AGENT`), so the API can tell its
    // probe from anyone else's and exempt it from per-client limits
    // (`api/metrics/limits.rs`).
    let url = url.to_string();
    let sent = Instant::now();
    let answer = tokio::task::spawn_blocking(move || match agent.get(&url).call() {
        Ok(resp) => Some(
            resp.header(crate::api::WRITABLE_MS_HEADER)
                .and_then(|ms| ms.parse::<u64>().ok())
                .map(Duration::from_millis),
        ),
        Err(_) => None,
    })
    .await
    .unwrap_or(None);
    match answer {
        Some(writable_for) => Probe::Answered {
            writable_until: writable_for.map(|d| sent + d),
        },
        None => Probe::Silent,
    }
}

/// The start-up clamp; the blind fence only when the clamp itself failed
/// (a node that cannot be read or refused the command), never on top of a
/// clamp that worked: on kevy it would restart the replication thread again.
async fn clamp<A: DataNodeAdapter>(node: &mut A) -> Result<(), DataNodeError> {
    match node.watchdog_clamp().await {
        Ok(()) => Ok(()),
        Err(e) => {
            tracing::warn!(error = %e, "watchdog: clamp failed; fencing blind");
            node.fence_blind().await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_api_recognises_the_watchdogs_probe_by_its_user_agent() {
        assert!(WATCHDOG_USER_AGENT.starts_with("elector-watchdog/"));
        assert!(crate::api::metrics::is_watchdog_agent(WATCHDOG_USER_AGENT));
        assert!(!crate::api::metrics::is_watchdog_agent("curl/7.88.1"));
    }
    use crate::core::DataNodeTarget;
    use crate::datanode::ReplicationInfo;

    /// Records what the watchdog asks of its data node (no server: this
    /// checks the order of the watchdog's own calls).
    #[derive(Default)]
    struct Recorder {
        apply_fails: bool,
        calls: Vec<&'static str>,
    }

    impl DataNodeAdapter for Recorder {
        fn kind(&self) -> &'static str {
            "recorder"
        }
        async fn observe(&mut self) -> Result<ReplicationInfo, DataNodeError> {
            self.calls.push("observe");
            Ok(ReplicationInfo::default())
        }
        async fn apply(&mut self, _: &DataNodeTarget) -> Result<(), DataNodeError> {
            self.calls.push("apply");
            if self.apply_fails {
                return Err(DataNodeError::Unreachable("timeout".into()));
            }
            Ok(())
        }
        async fn fence_blind(&mut self) -> Result<(), DataNodeError> {
            self.calls.push("fence_blind");
            Ok(())
        }
        fn satisfies(&self, _: &ReplicationInfo, _: &DataNodeTarget) -> bool {
            false
        }
    }

    #[tokio::test]
    async fn a_clamp_that_worked_is_not_followed_by_a_blind_fence() {
        // §6.4.1: the blind fence is the fallback, not a second command.
        let mut node = Recorder::default();
        clamp(&mut node).await.unwrap();
        assert_eq!(node.calls, vec!["apply"]);
    }

    #[tokio::test]
    async fn a_clamp_that_failed_falls_back_to_the_blind_fence() {
        let mut node = Recorder {
            apply_fails: true,
            ..Recorder::default()
        };
        clamp(&mut node).await.unwrap();
        assert_eq!(node.calls, vec!["apply", "fence_blind"]);
    }

    fn answered(until: Option<Instant>) -> Probe {
        Probe::Answered {
            writable_until: until,
        }
    }

    #[test]
    fn a_silent_elector_is_fenced_only_after_the_lease() {
        let start = Instant::now();
        let ms = |n| start + Duration::from_millis(n);
        let mut s = DeadManSwitch::new(Duration::from_millis(500), start);
        assert_eq!(s.probe(Probe::Silent, ms(400)), Verdict::Healthy);
        assert_eq!(s.probe(Probe::Silent, ms(501)), Verdict::Fence);
        assert_eq!(s.probe(Probe::Silent, ms(900)), Verdict::Fence);
        assert_eq!(s.probe(answered(None), ms(950)), Verdict::Healthy);
        assert_eq!(s.probe(Probe::Silent, ms(1200)), Verdict::Healthy);
    }

    #[test]
    fn a_primary_that_goes_quiet_is_fenced_when_its_reported_lease_ends() {
        // §6.4.1: cut off from its quorum at 0 (lease reported to end at
        // 300), frozen at 200: fenced at 300, not at 200 + a lease.
        let start = Instant::now();
        let ms = |n| start + Duration::from_millis(n);
        let mut s = DeadManSwitch::new(Duration::from_millis(500), start);
        assert_eq!(s.probe(answered(Some(ms(300))), ms(200)), Verdict::Healthy);
        assert_eq!(s.next_probe(ms(400)), ms(300));
        assert_eq!(s.probe(Probe::Silent, ms(299)), Verdict::Healthy);
        assert_eq!(s.probe(Probe::Silent, ms(300)), Verdict::Fence);
        // Then at the ordinary ticks, fenced again while it stays silent.
        assert_eq!(s.next_probe(ms(400)), ms(400));
        assert_eq!(s.probe(Probe::Silent, ms(400)), Verdict::Fence);
        assert_eq!(s.probe(answered(None), ms(450)), Verdict::Healthy);
    }

    #[test]
    fn a_primary_that_keeps_answering_moves_its_deadline_and_is_never_fenced() {
        let start = Instant::now();
        let ms = |n| start + Duration::from_millis(n);
        let mut s = DeadManSwitch::new(Duration::from_millis(500), start);
        for t in (0..3_000).step_by(100) {
            assert_eq!(
                s.probe(answered(Some(ms(t + 300))), ms(t)),
                Verdict::Healthy
            );
            assert_eq!(s.next_probe(ms(t + 100)), ms(t + 100));
        }
        // A replica (no lease) that answers is never fenced either.
        assert_eq!(s.probe(answered(None), ms(3_000)), Verdict::Healthy);
        assert_eq!(s.probe(Probe::Silent, ms(3_400)), Verdict::Healthy);
    }

    #[test]
    fn the_health_url_reaches_a_wildcard_listener_over_loopback() {
        assert_eq!(
            health_url("0.0.0.0:9300", false),
            "http://127.0.0.1:9300/healthz"
        );
        assert_eq!(
            health_url("[::]:9301", false),
            "http://127.0.0.1:9301/healthz"
        );
        assert_eq!(health_url("[::1]:9302", false), "http://[::1]:9302/healthz");
        assert_eq!(
            health_url("10.1.2.3:9303", false),
            "http://10.1.2.3:9303/healthz"
        );
        assert_eq!(
            health_url("0.0.0.0:9300", true),
            "https://127.0.0.1:9300/healthz"
        );
    }
}
