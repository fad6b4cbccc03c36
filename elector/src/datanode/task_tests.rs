//! The data node task's stop (protocol §6.4.1): a clean stop fences the
//! node on a connection of its own, so the task must have run its last
//! command before; one it sent after the fence would undo it (seen: a
//! replica's retarget after the stop fence stripped the process mark its
//! position was written with, and the restarted cluster could not elect;
//! `tests/restart_every_elector.rs`).

use super::*;
use crate::core::DataNodeTarget;
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

/// Records each call and whether the stop was already signalled when it
/// began; `apply` takes a while, and says when it has begun.
struct Recorder {
    calls: Arc<Mutex<Vec<(&'static str, bool)>>>,
    stop: watch::Receiver<bool>,
    applying: Arc<Notify>,
}

impl Recorder {
    fn begin(&self, call: &'static str) {
        let stopped = *self.stop.borrow();
        self.calls.lock().unwrap().push((call, stopped));
    }
}

impl DataNodeAdapter for Recorder {
    fn kind(&self) -> &'static str {
        "recorder"
    }
    async fn observe(&mut self) -> Result<ReplicationInfo, DataNodeError> {
        self.begin("observe");
        Ok(ReplicationInfo::default())
    }
    async fn apply(&mut self, _: &DataNodeTarget) -> Result<(), DataNodeError> {
        self.begin("apply");
        self.applying.notify_one();
        tokio::time::sleep(Duration::from_millis(150)).await;
        self.calls
            .lock()
            .unwrap()
            .push(("apply done", *self.stop.borrow()));
        Ok(())
    }
    async fn fence_blind(&mut self) -> Result<(), DataNodeError> {
        self.begin("fence_blind");
        Ok(())
    }
    /// Never satisfied: every round would apply again.
    fn satisfies(&self, _: &ReplicationInfo, _: &DataNodeTarget) -> bool {
        false
    }
}

#[tokio::test]
async fn a_stopped_task_finishes_the_command_it_runs_and_starts_no_other() {
    let (target_tx, targets) = watch::channel((1u64, 0u64, DataNodeTarget::Primary));
    let (reports, mut report_rx) = mpsc::channel(16);
    let (stop_tx, stop) = watch::channel(false);
    let calls = Arc::new(Mutex::new(Vec::new()));
    let applying = Arc::new(Notify::new());
    let adapter = Recorder {
        calls: Arc::clone(&calls),
        stop: stop.clone(),
        applying: Arc::clone(&applying),
    };
    // Port 1 on loopback: the tether finds nobody, as with a node down.
    let tether = Arc::new(Tether::new("127.0.0.1:1", &Credentials::default()));
    let task = tokio::spawn(run(
        adapter,
        Channels {
            targets,
            reports,
            stop,
        },
        Duration::from_millis(10),
        tether,
        None,
        None,
    ));
    tokio::spawn(async move { while report_rx.recv().await.is_some() {} });
    if tokio::time::timeout(Duration::from_secs(2), applying.notified())
        .await
        .is_err()
    {
        panic!("no apply began: {:?}", calls.lock().unwrap());
    }
    stop_tx.send(true).unwrap();
    tokio::time::timeout(Duration::from_secs(2), task)
        .await
        .expect("the task ends once told to stop")
        .unwrap();
    drop(target_tx);
    let calls = calls.lock().unwrap().clone();
    assert!(
        calls.contains(&("apply done", true)),
        "the command under way is finished, not cut: {calls:?}"
    );
    let after: Vec<_> = calls
        .iter()
        .filter(|(call, stopped)| *stopped && *call != "apply done")
        .collect();
    assert!(
        after.is_empty(),
        "commands begun after the stop: {after:?} in {calls:?}"
    );
}
