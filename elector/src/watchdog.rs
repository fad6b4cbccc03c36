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

use crate::config::{Config, DataNodeKind};
use crate::core::DataNodeTarget;
use crate::datanode::{DataNodeAdapter, DataNodeError, KevyNode, RedisNode};
use std::time::{Duration, Instant};

/// What the watchdog decides after each probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The elector answered within the lease.
    Healthy,
    /// Silent for longer than the lease: fence (again).
    Fence,
}

/// The pure part: when to fence, given when the elector last answered.
#[derive(Debug, Clone)]
pub struct DeadManSwitch {
    lease: Duration,
    last_answer: Instant,
    fenced: bool,
}

impl DeadManSwitch {
    pub fn new(lease: Duration, now: Instant) -> DeadManSwitch {
        DeadManSwitch {
            lease,
            last_answer: now,
            fenced: false,
        }
    }

    /// Records one probe's outcome at `now`.
    pub fn probe(&mut self, answered: bool, now: Instant) -> Verdict {
        if answered {
            if self.fenced {
                tracing::info!(
                    "watchdog: the elector answers again; it decides the data node's state"
                );
            }
            self.last_answer = now;
            self.fenced = false;
            return Verdict::Healthy;
        }
        if now.duration_since(self.last_answer) > self.lease {
            if !self.fenced {
                tracing::warn!(
                    silent_ms = now.duration_since(self.last_answer).as_millis() as u64,
                    "watchdog: the elector is silent for longer than the lease; fencing the data node"
                );
            }
            self.fenced = true;
            return Verdict::Fence;
        }
        Verdict::Healthy
    }
}

/// The elector's health URL on this host (its API, reached over loopback
/// when it listens on every address).
pub fn health_url(api_listen: &str) -> String {
    let (host, port) = api_listen.rsplit_once(':').unwrap_or(("127.0.0.1", "9300"));
    let host = match host.trim_matches(|c| c == '[' || c == ']') {
        "" | "0.0.0.0" | "::" => "127.0.0.1".to_string(),
        h if h.contains(':') => format!("[{h}]"),
        h => h.to_string(),
    };
    format!("http://{host}:{port}/healthz")
}

/// Runs the watchdog until the process is stopped.
pub async fn run(config: Config) {
    let t = config.timings();
    let lease = Duration::from_millis(t.lease_ms());
    let every = Duration::from_millis(t.hb_interval_ms);
    let url = health_url(&config.listen.api);
    tracing::info!(%url, lease_ms = t.lease_ms(), "watchdog: watching the elector");
    let dn = &config.data_node;
    let write_quorum = (config.peers.len() / 2) as u64;
    match dn.kind {
        DataNodeKind::Kevy => {
            let node = KevyNode::new(
                &dn.address,
                dn.password.as_deref(),
                dn.replication_port_offset,
            )
            .with_abort_stale_connects(dn.abort_stale_connects);
            watch(node, url, lease, every).await
        }
        DataNodeKind::Redis => {
            let node = RedisNode::new(
                &dn.address,
                dn.password.as_deref(),
                write_quorum,
                t.lease_ms() / 1000,
            );
            watch(node, url, lease, every).await
        }
    }
}

async fn watch<A: DataNodeAdapter>(mut node: A, url: String, lease: Duration, every: Duration) {
    let mut switch = DeadManSwitch::new(lease, Instant::now());
    let agent = ureq::AgentBuilder::new()
        .timeout(every.max(Duration::from_millis(100)))
        .build();
    let mut ticker = tokio::time::interval(every);
    loop {
        ticker.tick().await;
        let (a, u) = (agent.clone(), url.clone());
        let answered = tokio::task::spawn_blocking(move || a.get(&u).call().is_ok())
            .await
            .unwrap_or(false);
        if switch.probe(answered, Instant::now()) == Verdict::Fence {
            // The start-up clamp: no writes and no upstream. A replica
            // stops acknowledging too, since nobody vouches for its primary
            // any more (§6.2); the blind fence is the fallback when the
            // node cannot be read.
            if let Err(e) = clamp(&mut node).await {
                tracing::warn!(error = %e, "watchdog: fencing the data node failed; retrying");
            }
        }
    }
}

/// The start-up clamp; the blind fence only when the clamp itself failed
/// (a node that cannot be read or refused the command), never on top of a
/// clamp that worked: on kevy it would restart the replication thread again.
async fn clamp<A: DataNodeAdapter>(node: &mut A) -> Result<(), DataNodeError> {
    match node.apply(&DataNodeTarget::Isolated).await {
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

    #[test]
    fn a_silent_elector_is_fenced_only_after_the_lease() {
        let start = Instant::now();
        let mut s = DeadManSwitch::new(Duration::from_millis(500), start);
        assert_eq!(
            s.probe(false, start + Duration::from_millis(400)),
            Verdict::Healthy
        );
        assert_eq!(
            s.probe(false, start + Duration::from_millis(501)),
            Verdict::Fence
        );
        assert_eq!(
            s.probe(false, start + Duration::from_millis(900)),
            Verdict::Fence
        );
        assert_eq!(
            s.probe(true, start + Duration::from_millis(950)),
            Verdict::Healthy
        );
        assert_eq!(
            s.probe(false, start + Duration::from_millis(1200)),
            Verdict::Healthy
        );
    }

    #[test]
    fn the_health_url_reaches_a_wildcard_listener_over_loopback() {
        assert_eq!(health_url("0.0.0.0:9300"), "http://127.0.0.1:9300/healthz");
        assert_eq!(health_url("[::]:9301"), "http://127.0.0.1:9301/healthz");
        assert_eq!(health_url("[::1]:9302"), "http://[::1]:9302/healthz");
        assert_eq!(health_url("10.1.2.3:9303"), "http://10.1.2.3:9303/healthz");
    }
}
