//! Transition hooks: operator scripts run on promote, demote, follow, fence
//! and fault.
//!
//! The protocol must never wait for a script, so [`HookRunner::fire`] only
//! enqueues and returns. One worker task runs the queue in order, one script
//! at a time: a node's hooks then observe its transitions in the order they
//! happened (a `demote` never overtakes the `promote` before it). Each script
//! runs in its own process group and the whole group is killed with SIGKILL
//! at `timeout_ms`, so a script that forked a `sleep` cannot outlive its
//! budget or block the queue. Outcomes are logged and counted under
//! `elector_hooks_run_total{event,outcome}`.
//!
//! A script's stdout and stderr are captured (the first 4 KiB of each is
//! logged). A script that leaves a background child holding those pipes open
//! is treated as still running until the timeout; redirect a daemon's output
//! if a hook must start one.
//!
//! The queue is bounded: if it is full (hooks far slower than transitions),
//! further events are dropped and counted as `dropped` rather than growing
//! memory without limit.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use serde::Deserialize;
use tokio::sync::{mpsc, oneshot};

use crate::api::metrics::{HookOutcome, Metrics};
use crate::api::status::Role;

/// Default per-script budget.
pub const DEFAULT_HOOK_TIMEOUT_MS: u64 = 5_000;
/// Pending events beyond which new ones are dropped.
const QUEUE_DEPTH: usize = 256;
/// Bytes of each output stream kept for the log.
const OUTPUT_LOG_LIMIT: usize = 4096;

/// The `hooks:` section of the config.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HooksConfig {
    /// Run when this node becomes the primary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_promote: Option<PathBuf>,
    /// Run when this node stops being the primary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_demote: Option<PathBuf>,
    /// Run when this node follows a (new) primary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_follow: Option<PathBuf>,
    /// Run when writes on this node's data node are fenced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_fence: Option<PathBuf>,
    /// Run on a fault (a data node unreachable, a failed VIP move, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_fault: Option<PathBuf>,
    /// A hook still running after this long is killed.
    #[serde(default = "default_timeout")]
    pub timeout_ms: u64,
}

fn default_timeout() -> u64 {
    DEFAULT_HOOK_TIMEOUT_MS
}

impl Default for HooksConfig {
    fn default() -> Self {
        HooksConfig {
            on_promote: None,
            on_demote: None,
            on_follow: None,
            on_fence: None,
            on_fault: None,
            timeout_ms: DEFAULT_HOOK_TIMEOUT_MS,
        }
    }
}

impl HooksConfig {
    /// The script configured for `kind`, if any.
    pub fn script(&self, kind: HookKind) -> Option<&PathBuf> {
        match kind {
            HookKind::Promote => self.on_promote.as_ref(),
            HookKind::Demote => self.on_demote.as_ref(),
            HookKind::Follow => self.on_follow.as_ref(),
            HookKind::Fence => self.on_fence.as_ref(),
            HookKind::Fault => self.on_fault.as_ref(),
        }
    }

    /// Problems `elector check-config` should report as errors: scripts that
    /// do not exist or are not executable, a zero timeout.
    pub fn validate(&self) -> Vec<String> {
        use std::os::unix::fs::PermissionsExt;
        let mut errors = Vec::new();
        if self.timeout_ms == 0 {
            errors.push("hooks.timeout_ms must be greater than 0".to_string());
        }
        for kind in HookKind::ALL {
            if let Some(path) = self.script(kind) {
                match std::fs::metadata(path) {
                    Err(e) => errors.push(format!(
                        "hooks.{}: {}: {e}",
                        kind.config_key(),
                        path.display()
                    )),
                    Ok(m) if !m.is_file() || m.permissions().mode() & 0o111 == 0 => {
                        errors.push(format!(
                            "hooks.{}: {} is not an executable file",
                            kind.config_key(),
                            path.display()
                        ))
                    }
                    Ok(_) => {}
                }
            }
        }
        errors
    }
}

/// Which hook to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookKind {
    Promote,
    Demote,
    Follow,
    Fence,
    Fault,
}

impl HookKind {
    pub const ALL: [HookKind; 5] = [
        HookKind::Promote,
        HookKind::Demote,
        HookKind::Follow,
        HookKind::Fence,
        HookKind::Fault,
    ];

    /// Value of `ELECTOR_EVENT` and of the `event` metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            HookKind::Promote => "promote",
            HookKind::Demote => "demote",
            HookKind::Follow => "follow",
            HookKind::Fence => "fence",
            HookKind::Fault => "fault",
        }
    }

    fn config_key(self) -> &'static str {
        match self {
            HookKind::Promote => "on_promote",
            HookKind::Demote => "on_demote",
            HookKind::Follow => "on_follow",
            HookKind::Fence => "on_fence",
            HookKind::Fault => "on_fault",
        }
    }
}

/// Context handed to a script through `ELECTOR_*` environment variables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookEvent {
    pub event: HookKind,
    pub node_id: String,
    pub epoch: u64,
    /// Node id of the new primary, when there is one (`ELECTOR_NEW_PRIMARY`,
    /// empty otherwise).
    pub new_primary: Option<String>,
    pub previous_role: Role,
    pub role: Role,
    /// Machine-readable cause (a transition reason, or a fault description).
    pub reason: String,
}

impl HookEvent {
    fn env(&self) -> [(&'static str, String); 7] {
        [
            ("ELECTOR_EVENT", self.event.as_str().to_string()),
            ("ELECTOR_NODE_ID", self.node_id.clone()),
            ("ELECTOR_EPOCH", self.epoch.to_string()),
            (
                "ELECTOR_NEW_PRIMARY",
                self.new_primary.clone().unwrap_or_default(),
            ),
            (
                "ELECTOR_PREVIOUS_ROLE",
                self.previous_role.as_str().to_string(),
            ),
            ("ELECTOR_ROLE", self.role.as_str().to_string()),
            ("ELECTOR_REASON", self.reason.clone()),
        ]
    }
}

enum Job {
    Run(HookEvent),
    Flush(oneshot::Sender<()>),
}

/// Runs hook scripts in order on a background task. Cheap to clone.
#[derive(Clone, Debug)]
pub struct HookRunner {
    queue: mpsc::Sender<Job>,
    metrics: Arc<Metrics>,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Job::Run(e) => write!(f, "Run({:?})", e.event),
            Job::Flush(_) => f.write_str("Flush"),
        }
    }
}

impl HookRunner {
    /// Starts the worker. Must be called inside a tokio runtime. The worker
    /// ends when every clone of the runner is dropped and the queue is empty.
    pub fn new(config: HooksConfig, metrics: Arc<Metrics>) -> Self {
        let (tx, rx) = mpsc::channel(QUEUE_DEPTH);
        tokio::spawn(worker(config, Arc::clone(&metrics), rx));
        HookRunner { queue: tx, metrics }
    }

    /// Queues `event` and returns at once. Events with no configured script
    /// are skipped by the worker (in order, at no cost).
    pub fn fire(&self, event: HookEvent) {
        let kind = event.event;
        if let Err(e) = self.queue.try_send(Job::Run(event)) {
            let why = match e {
                mpsc::error::TrySendError::Full(_) => "queue full",
                mpsc::error::TrySendError::Closed(_) => "runner stopped",
            };
            tracing::warn!(event = kind.as_str(), why, "hook dropped");
            self.metrics.hook_run(kind.as_str(), HookOutcome::Dropped);
        }
    }

    /// Waits until every event queued before this call has finished. For
    /// graceful shutdown (so a final `demote`/`fence` hook runs) and tests.
    pub async fn flush(&self) {
        let (tx, rx) = oneshot::channel();
        if self.queue.send(Job::Flush(tx)).await.is_ok() {
            let _ = rx.await;
        }
    }
}

async fn worker(config: HooksConfig, metrics: Arc<Metrics>, mut rx: mpsc::Receiver<Job>) {
    let timeout = Duration::from_millis(config.timeout_ms.max(1));
    while let Some(job) = rx.recv().await {
        match job {
            Job::Flush(done) => {
                let _ = done.send(());
            }
            Job::Run(event) => {
                let Some(script) = config.script(event.event) else {
                    continue;
                };
                let outcome = run_one(script, &event, timeout).await;
                metrics.hook_run(event.event.as_str(), outcome);
            }
        }
    }
}

fn clip(bytes: &[u8]) -> String {
    let s = String::from_utf8_lossy(&bytes[..bytes.len().min(OUTPUT_LOG_LIMIT)]);
    s.trim_end().to_string()
}

/// Runs one script to completion or timeout.
async fn run_one(script: &PathBuf, event: &HookEvent, timeout: Duration) -> HookOutcome {
    let started = Instant::now();
    let mut cmd = tokio::process::Command::new(script);
    cmd.envs(event.env())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Own process group, so the timeout can kill everything it started.
        .process_group(0)
        .kill_on_drop(true);
    let child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(event = event.event.as_str(), script = %script.display(), error = %e, "hook could not start");
            return HookOutcome::Failed;
        }
    };
    let pgid = child.id();
    let wait = child.wait_with_output();
    tokio::pin!(wait);
    tokio::select! {
        done = &mut wait => match done {
            Ok(out) => {
                let ms = started.elapsed().as_millis() as u64;
                let stdout = clip(&out.stdout);
                let stderr = clip(&out.stderr);
                if out.status.success() {
                    tracing::info!(event = event.event.as_str(), script = %script.display(), ms, %stdout, %stderr, "hook ok");
                    HookOutcome::Ok
                } else {
                    tracing::warn!(event = event.event.as_str(), script = %script.display(), ms, status = %out.status, %stdout, %stderr, "hook failed");
                    HookOutcome::Failed
                }
            }
            Err(e) => {
                tracing::warn!(event = event.event.as_str(), script = %script.display(), error = %e, "hook wait failed");
                HookOutcome::Failed
            }
        },
        _ = tokio::time::sleep(timeout) => {
            // Kill the whole group while the leader is not yet reaped (its pid
            // is still ours); dropping `wait` then reaps the leader
            // (kill_on_drop) in the background.
            if let Some(pid) = pgid.and_then(|p| i32::try_from(p).ok()) {
                if let Err(e) = killpg(Pid::from_raw(pid), Signal::SIGKILL) {
                    if e != nix::errno::Errno::ESRCH {
                        tracing::warn!(event = event.event.as_str(), error = %e, "could not kill hook process group");
                    }
                }
            }
            tracing::warn!(event = event.event.as_str(), script = %script.display(), timeout_ms = timeout.as_millis() as u64, "hook timed out and was killed");
            HookOutcome::TimedOut
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::path::Path;

    fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).expect("write script");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        path
    }

    fn event(kind: HookKind, reason: &str) -> HookEvent {
        HookEvent {
            event: kind,
            node_id: "n1".into(),
            epoch: 7,
            new_primary: Some("n1".into()),
            previous_role: Role::Candidate,
            role: Role::Primary,
            reason: reason.into(),
        }
    }

    #[tokio::test]
    async fn the_script_receives_the_event_context_in_its_environment() {
        let dir = tempfile::tempdir().expect("tempdir");
        let out = dir.path().join("env.txt");
        let s = script(
            dir.path(),
            "promote.sh",
            &format!("env | grep '^ELECTOR_' | sort > {}", out.display()),
        );
        let metrics = Arc::new(Metrics::new());
        let runner = HookRunner::new(
            HooksConfig {
                on_promote: Some(s),
                ..HooksConfig::default()
            },
            Arc::clone(&metrics),
        );
        runner.fire(event(HookKind::Promote, "won_election"));
        runner.flush().await;
        let env = std::fs::read_to_string(&out).expect("hook wrote its env");
        assert_eq!(
            env,
            "ELECTOR_EPOCH=7\nELECTOR_EVENT=promote\nELECTOR_NEW_PRIMARY=n1\nELECTOR_NODE_ID=n1\n\
             ELECTOR_PREVIOUS_ROLE=candidate\nELECTOR_REASON=won_election\nELECTOR_ROLE=primary\n"
        );
        assert_eq!(metrics.hook_count("promote", HookOutcome::Ok), 1);
    }

    #[tokio::test]
    async fn a_failing_hook_is_counted_as_failed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = script(dir.path(), "fence.sh", "echo nope >&2; exit 3");
        let metrics = Arc::new(Metrics::new());
        let runner = HookRunner::new(
            HooksConfig {
                on_fence: Some(s),
                ..HooksConfig::default()
            },
            Arc::clone(&metrics),
        );
        runner.fire(event(HookKind::Fence, "quorum_lost"));
        runner.flush().await;
        assert_eq!(metrics.hook_count("fence", HookOutcome::Failed), 1);
        assert_eq!(metrics.hook_count("fence", HookOutcome::Ok), 0);
    }

    #[tokio::test]
    async fn a_missing_script_is_counted_as_failed() {
        let metrics = Arc::new(Metrics::new());
        let runner = HookRunner::new(
            HooksConfig {
                on_fault: Some(PathBuf::from("/nonexistent/elector-hook")),
                ..HooksConfig::default()
            },
            Arc::clone(&metrics),
        );
        runner.fire(event(HookKind::Fault, "data_node_down"));
        runner.flush().await;
        assert_eq!(metrics.hook_count("fault", HookOutcome::Failed), 1);
    }

    #[tokio::test]
    async fn hanging_hook_is_killed_at_the_timeout_and_the_next_hook_still_runs() {
        let dir = tempfile::tempdir().expect("tempdir");
        let marker = dir.path().join("child-survived");
        // The script forks a grandchild that would write the marker after 2 s:
        // killing the process group must take it down too.
        let hang = script(
            dir.path(),
            "demote.sh",
            &format!("(sleep 2; touch {}) &\nsleep 60", marker.display()),
        );
        let after = dir.path().join("follow-ran");
        let follow = script(
            dir.path(),
            "follow.sh",
            &format!("touch {}", after.display()),
        );
        let metrics = Arc::new(Metrics::new());
        let runner = HookRunner::new(
            HooksConfig {
                on_demote: Some(hang),
                on_follow: Some(follow),
                timeout_ms: 300,
                ..HooksConfig::default()
            },
            Arc::clone(&metrics),
        );
        let started = Instant::now();
        runner.fire(event(HookKind::Demote, "newer_epoch"));
        runner.fire(event(HookKind::Follow, "newer_epoch"));
        assert!(
            started.elapsed() < Duration::from_millis(50),
            "fire must not block"
        );
        runner.flush().await;
        let took = started.elapsed();
        assert!(took < Duration::from_secs(5), "queue stalled for {took:?}");
        assert_eq!(metrics.hook_count("demote", HookOutcome::TimedOut), 1);
        assert_eq!(metrics.hook_count("follow", HookOutcome::Ok), 1);
        assert!(after.exists(), "the hook after the hanging one ran");
        tokio::time::sleep(Duration::from_millis(2500)).await;
        assert!(
            !marker.exists(),
            "the hanging hook's child outlived the timeout"
        );
    }

    #[tokio::test]
    async fn hooks_run_one_at_a_time_in_the_order_fired() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("order.txt");
        let s = script(
            dir.path(),
            "any.sh",
            &format!(
                "echo start $ELECTOR_EVENT >> {0}; sleep 0.05; echo end $ELECTOR_EVENT >> {0}",
                log.display()
            ),
        );
        let metrics = Arc::new(Metrics::new());
        let runner = HookRunner::new(
            HooksConfig {
                on_promote: Some(s.clone()),
                on_demote: Some(s.clone()),
                on_fence: Some(s),
                ..HooksConfig::default()
            },
            Arc::clone(&metrics),
        );
        runner.fire(event(HookKind::Fence, "a"));
        runner.fire(event(HookKind::Promote, "b"));
        runner.fire(event(HookKind::Demote, "c"));
        runner.flush().await;
        let text = std::fs::read_to_string(&log).expect("log");
        assert_eq!(
            text,
            "start fence\nend fence\nstart promote\nend promote\nstart demote\nend demote\n"
        );
    }

    #[test]
    fn hooks_config_parses_the_contract_yaml_and_validates_scripts() {
        let c: HooksConfig =
            serde_yaml::from_str("on_promote: /path/to/script\ntimeout_ms: 5000\n").expect("yaml");
        assert_eq!(c.on_promote, Some(PathBuf::from("/path/to/script")));
        assert_eq!(c.timeout_ms, 5000);
        let d: HooksConfig = serde_yaml::from_str("{}").expect("yaml");
        assert_eq!(d, HooksConfig::default());
        assert!(serde_yaml::from_str::<HooksConfig>("on_backup: /x\n").is_err());
        let errors = c.validate();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].starts_with("hooks.on_promote"));
    }
}
