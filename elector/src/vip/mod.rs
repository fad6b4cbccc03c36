//! The virtual IP that follows the writable primary (issue 20, docs/vip.md).
//!
//! The core says when (its role, its fence and the adapter's applied target);
//! this shell module does it. `Shell` calls [`VipHandle::want`] with `hold =
//! false` *before* handing any fence to the adapter, and with `hold = true`
//! only once the adapter reports the writable target applied. A task of its
//! own runs the commands ([`plan`]) with a timeout each, so a slow `ip` or
//! `iptables` never blocks an election; a failed move is retried every
//! second, counted, and reported for `on_fault`.
//!
//! Why commands and not netlink: the address could go through the
//! `rtnetlink` crate, but the announcement (gratuitous ARP) needs a raw
//! packet socket, which this crate's `forbid(unsafe_code)` rules out without
//! a further dependency, and the port map needs iptables either way; so all
//! of it uses the tools the node image already carries (iproute2, iptables)
//! plus `arping` (iputils-arping), each step visible in the logs as the
//! operator would type it. Moving the address to `rtnetlink` is a contained
//! follow-up (docs/vip.md).

pub mod plan;

pub use plan::{Vip, VipConfig, VipConfigError};

use plan::Step;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::process::Command;
use tokio::sync::watch;

/// Each command gets this long; a hanging one is killed.
const STEP_TIMEOUT: Duration = Duration::from_secs(2);
/// A lasting announcement (three gratuitous ARPs a second apart: about
/// 3 s) gets this long.
const LASTING_TIMEOUT: Duration = Duration::from_secs(5);
/// A failed add (or remove) is retried this often while still wanted.
const RETRY: Duration = Duration::from_secs(1);

/// What `/status` and the metrics show (shared with the VIP task).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct VipStatus {
    pub address: String,
    /// The address is on this node's interface now.
    pub held: bool,
    /// Unix ms of the last move (add or remove) that succeeded.
    pub since_unix_ms: Option<u64>,
    /// Why the last move was made (`writable_primary`, or the fence's reason).
    pub reason: Option<String>,
    /// Moves whose required step failed (each also ran `on_fault`).
    pub failures: u64,
    /// Announcements or client kills that failed (counted, not retried).
    pub announce_failures: u64,
    /// Gratuitous-ARP announcements run to their end (three ARPs each).
    #[serde(default)]
    pub announcements: u64,
    /// Announcements stopped before their end because the VIP moved again
    /// (an old holder never announces an address it gave up).
    #[serde(default)]
    pub announcements_cut: u64,
    /// The last error, if the last attempt failed.
    pub last_error: Option<String>,
}

/// The protocol task's side: says what it wants, reads what happened.
#[derive(Clone)]
pub struct VipHandle {
    want: watch::Sender<(bool, String)>,
    status: Arc<Mutex<VipStatus>>,
    faults: Arc<Mutex<Vec<String>>>,
    vip: Vip,
}

impl VipHandle {
    /// Starts the task; the VIP is not held at start (and is removed, in
    /// case a previous incarnation left it behind).
    pub fn start(vip: Vip) -> VipHandle {
        let (want, rx) = watch::channel((false, "startup".to_string()));
        let status = Arc::new(Mutex::new(VipStatus {
            address: format!("{}/{}", vip.ip, vip.prefix),
            ..VipStatus::default()
        }));
        let faults = Arc::new(Mutex::new(Vec::new()));
        let handle = VipHandle {
            want,
            status,
            faults,
            vip,
        };
        tokio::spawn(reconcile(handle.clone(), rx));
        handle
    }

    /// Asks for the VIP held or released, with the reason of the move.
    pub fn want(&self, hold: bool, reason: &str) {
        self.want.send_if_modified(|cur| {
            if cur.0 == hold {
                return false;
            }
            *cur = (hold, reason.to_string());
            true
        });
    }

    pub fn status(&self) -> VipStatus {
        self.status.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Faults since the last call (for `on_fault` and the log).
    pub fn take_faults(&self) -> Vec<String> {
        self.faults
            .lock()
            .map(|mut f| std::mem::take(&mut *f))
            .unwrap_or_default()
    }

    /// Removes the VIP now and waits (a clean stop, the watchdog's clamp).
    pub async fn remove_now(vip: &Vip) -> Result<(), String> {
        run_plan(&vip.remove()).await.map(|_| ())
    }
}

async fn reconcile(h: VipHandle, mut rx: watch::Receiver<(bool, String)>) {
    // Whatever an earlier incarnation left: start without the address.
    let mut held = None;
    let mut announcing: Option<tokio::task::JoinHandle<()>> = None;
    loop {
        let (hold, reason) = rx.borrow_and_update().clone();
        if held != Some(hold) {
            h.stop_announcing(announcing.take()).await;
            let (lasting, steps): (Vec<Step>, Vec<Step>) =
                if hold { h.vip.add() } else { h.vip.remove() }
                    .into_iter()
                    .partition(|s| s.lasting);
            let result = run_plan(&steps).await;
            if h.record(hold, &reason, result) {
                held = Some(hold);
                if !lasting.is_empty() {
                    announcing = Some(tokio::spawn(h.clone().announce(lasting)));
                }
            } else {
                // Retry while still wanted (a change wakes us sooner).
                let _ = tokio::time::timeout(RETRY, rx.changed()).await;
                continue;
            }
        }
        if rx.changed().await.is_err() {
            return;
        }
    }
}

impl VipHandle {
    /// Runs the lasting announcements of a move that succeeded, counting
    /// each one's end.
    async fn announce(self, steps: Vec<Step>) {
        for step in &steps {
            let result = run_step_within(step, LASTING_TIMEOUT).await;
            let mut s = self.status.lock().unwrap_or_else(|e| e.into_inner());
            match result {
                Ok(()) => s.announcements += 1,
                Err(e) => {
                    s.announce_failures += 1;
                    tracing::warn!(error = %e, "vip: announcement failed");
                }
            }
        }
    }

    /// Stops an announcement still running before the next move (its
    /// child process is killed with it), so it cannot announce an address
    /// this node is giving up.
    async fn stop_announcing(&self, task: Option<tokio::task::JoinHandle<()>>) {
        let Some(task) = task else {
            return;
        };
        if task.is_finished() {
            return;
        }
        task.abort();
        let _ = task.await;
        let mut s = self.status.lock().unwrap_or_else(|e| e.into_inner());
        s.announcements_cut += 1;
        drop(s);
        tracing::info!("vip: an announcement still running was stopped before the next move");
    }

    /// Records a move's outcome for `/status`, the metrics and `on_fault`;
    /// true when the move succeeded.
    fn record(&self, hold: bool, reason: &str, result: Result<Vec<String>, String>) -> bool {
        let mut s = self.status.lock().unwrap_or_else(|e| e.into_inner());
        match result {
            Ok(soft) => {
                s.held = hold;
                s.since_unix_ms = Some(crate::net::auth::unix_ms_now());
                s.reason = Some(reason.to_string());
                s.last_error = None;
                s.announce_failures += soft.len() as u64;
                for e in soft {
                    tracing::warn!(error = %e, "vip: announcement or client kill failed");
                }
                tracing::info!(held = hold, reason, address = %s.address, "vip moved");
                true
            }
            Err(e) => {
                s.failures += 1;
                s.last_error = Some(e.clone());
                let what = format!(
                    "vip {} {} failed: {e}",
                    if hold { "add" } else { "remove" },
                    s.address
                );
                tracing::error!(%what, "vip move failed; retrying");
                if let Ok(mut f) = self.faults.lock() {
                    f.push(what);
                }
                false
            }
        }
    }
}

/// Runs the steps in order. Err on the first required step that fails;
/// Ok with the errors of the optional ones.
async fn run_plan(steps: &[Step]) -> Result<Vec<String>, String> {
    let mut soft = Vec::new();
    for step in steps {
        let mut result = run_step(step).await;
        if result.is_err() {
            if let Some(other) = &step.otherwise {
                result = run_step(other).await;
            }
        }
        match result {
            Ok(()) => {}
            Err(e) if step.required => return Err(e),
            Err(e) => soft.push(e),
        }
    }
    Ok(soft)
}

async fn run_step(step: &Step) -> Result<(), String> {
    run_step_within(step, STEP_TIMEOUT).await
}

async fn run_step_within(step: &Step, within: Duration) -> Result<(), String> {
    let (program, args) = step.argv.split_first().ok_or("empty command")?;
    let output = tokio::time::timeout(
        within,
        Command::new(program).args(args).kill_on_drop(true).output(),
    )
    .await
    .map_err(|_| format!("`{}` timed out", step.argv.join(" ")))?
    .map_err(|e| format!("`{}`: {e}", step.argv.join(" ")))?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    if output.status.success() || step.tolerated.iter().any(|t| stderr.contains(t)) {
        Ok(())
    } else {
        Err(format!(
            "`{}`: {} {}",
            step.argv.join(" "),
            output.status,
            stderr.trim()
        ))
    }
}
