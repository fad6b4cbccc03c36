//! Client load and observation: writers, readers and the topology poller, all recording
//! into one shared history with a monotonic clock. Every loop is bounded in count and
//! in time, and stops when told.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use tokio::task::JoinHandle;

use crate::history::{DataObs, Ms, Outcome, ReadOp, Sample, WriteOp};
use crate::probe::{self, CmdError, DataConn};
use crate::scenario::Workload;
use crate::target::discovery;
use crate::target::Discovery;

/// Addresses of one node as the host reaches them.
#[derive(Clone, Debug)]
pub struct NodeAddrs {
    pub data: String,
    /// The target's control port: the elector's API, a sentinel, or empty.
    pub api: String,
}

/// The shared recorder.
pub struct Recorder {
    start: Instant,
    /// The wall clock at `start`, in ms since the Unix epoch: to place the
    /// containers' timestamped logs on the history's time line.
    pub start_unix_ms: u64,
    pub nodes: BTreeMap<String, NodeAddrs>,
    /// How clients find the primary (the target's way).
    pub discovery: Discovery,
    /// The sentinel clients ask first (Sentinel targets).
    sentinel_cursor: AtomicUsize,
    pub writes: Mutex<Vec<WriteOp>>,
    pub reads: Mutex<Vec<ReadOp>>,
    pub samples: Mutex<Vec<Sample>>,
    /// Latest primary seen by the poller.
    pub primary: Mutex<Option<String>>,
    acked: Mutex<Vec<(String, String)>>,
    stop_writers: AtomicBool,
    stop_poller: AtomicBool,
}

impl Recorder {
    pub fn new(nodes: BTreeMap<String, NodeAddrs>, discovery: Discovery) -> Arc<Recorder> {
        Arc::new(Recorder {
            start: Instant::now(),
            start_unix_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            nodes,
            discovery,
            sentinel_cursor: AtomicUsize::new(0),
            writes: Mutex::new(vec![]),
            reads: Mutex::new(vec![]),
            samples: Mutex::new(vec![]),
            primary: Mutex::new(None),
            acked: Mutex::new(vec![]),
            stop_writers: AtomicBool::new(false),
            stop_poller: AtomicBool::new(false),
        })
    }

    pub fn now_ms(&self) -> Ms {
        self.start.elapsed().as_millis() as Ms
    }

    pub fn current_primary(&self) -> Option<String> {
        self.primary.lock().expect("lock").clone()
    }

    pub fn sentinel_cursor(&self) -> usize {
        self.sentinel_cursor.load(Ordering::SeqCst)
    }

    pub fn set_sentinel_cursor(&self, k: usize) {
        self.sentinel_cursor.store(k, Ordering::SeqCst);
    }

    /// A client gave up on its sentinel's answer: ask the next one first.
    pub fn next_sentinel(&self) {
        let n = self.nodes.len().max(1);
        let k = self.sentinel_cursor();
        self.set_sentinel_cursor((k + 1) % n);
    }

    /// Asks again where the primary is, as the target's clients do after a
    /// failed write: the next sentinel (Sentinel); the poller's next round
    /// does it for the other targets.
    pub async fn rediscover(&self) {
        if let Discovery::Sentinel { master } = &self.discovery {
            self.next_sentinel();
            if let Some(p) = discovery::ask_sentinels(self, master).await {
                *self.primary.lock().expect("lock") = Some(p);
            }
        }
    }

    pub fn stop_writers(&self) {
        self.stop_writers.store(true, Ordering::SeqCst);
    }

    /// The writers were told to stop (the VIP writers watch it too).
    pub fn writers_stopped(&self) -> bool {
        self.stop_writers.load(Ordering::SeqCst)
    }

    /// Records one write of any writer (the suite's or the VIP's); an
    /// acknowledged one is also handed to the readers.
    pub fn record_write(&self, op: WriteOp) {
        if op.outcome == Outcome::Ok {
            self.acked
                .lock()
                .expect("lock")
                .push((op.key.clone(), op.value.clone()));
        }
        self.writes.lock().expect("lock").push(op);
    }

    pub fn stop_poller(&self) {
        self.stop_poller.store(true, Ordering::SeqCst);
    }
}

/// Picks the primary from one round of samples: an elector that says it is the
/// unfenced primary and whose data node (when reachable) is a master; the highest epoch
/// wins when several claim it.
pub fn primary_of(round: &[Sample]) -> Option<String> {
    round
        .iter()
        .filter(|s| {
            s.elector
                .as_ref()
                .is_some_and(|e| e.role == "primary" && !e.fenced)
                && s.data.as_ref().is_none_or(|d| d.role == "master")
        })
        .max_by_key(|s| s.elector.as_ref().map(|e| e.epoch))
        .map(|s| s.node.clone())
}

/// One poll of one node: data node and elector in parallel (our targets),
/// the data node and, on a master, a probe write (kevy's election).
pub async fn poll_node(
    rec: &Recorder,
    node: &str,
    conn: &mut DataConn,
    timeout: Duration,
) -> Sample {
    let addrs = &rec.nodes[node];
    let at_ms = rec.now_ms();
    let (data, status) = match rec.discovery {
        // A witness has no data node (docs/protocol.md §4.5): its elector only.
        Discovery::ElectorStatus if addrs.data.is_empty() => {
            (None, probe::get_status(&addrs.api, timeout).await)
        }
        Discovery::ElectorStatus => {
            let (mut data, status) = tokio::join!(
                conn.info_replication(),
                probe::get_status(&addrs.api, timeout)
            );
            // A master whose elector does not answer (killed, frozen, stopped)
            // cannot say whether it is fenced, and the fence lives in the data
            // node (min-replicas-to-write, kevy's fence): ask the data node
            // itself, or every master with a dead elector counts as writable.
            if status.is_none() {
                probe_if_master(&mut data, conn, node).await;
            }
            (data, status)
        }
        Discovery::DataRole => {
            let mut data = conn.info_replication().await;
            probe_if_master(&mut data, conn, node).await;
            (data, None)
        }
        Discovery::Sentinel { .. } => (conn.info_replication().await, None),
    };
    Sample {
        at_ms,
        node: node.to_string(),
        data,
        elector: status.map(|s| s.obs()),
    }
}

/// On a master, records whether the data node itself takes a write (a probe
/// `SET` of `discovery::PROBE_KEY`); on anything else leaves the sample as is.
/// A probe without an answer is recorded as such, not as a write taken
/// (`history::WriteProbe::NoAnswer`).
async fn probe_if_master(data: &mut Option<DataObs>, conn: &mut DataConn, node: &str) {
    if let Some(d) = data.as_mut().filter(|d| d.role == "master") {
        d.write_probe = Some(discovery::probe_write(conn, node).await);
    }
}

/// Polls every node every `interval` until stopped or `max` elapsed.
pub fn spawn_poller(rec: Arc<Recorder>, interval: Duration, max: Duration) -> JoinHandle<()> {
    tokio::spawn(async move {
        let timeout = Duration::from_millis(300);
        let mut conns: BTreeMap<String, DataConn> = rec
            .nodes
            .iter()
            .map(|(id, a)| (id.clone(), DataConn::new(&a.data, timeout)))
            .collect();
        let deadline = Instant::now() + max;
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        while !rec.stop_poller.load(Ordering::SeqCst) && Instant::now() < deadline {
            tick.tick().await;
            let round_started = rec.now_ms();
            let futs = conns
                .iter_mut()
                .map(|(id, c)| poll_node(&rec, id, c, timeout));
            let round = futures::future::join_all(futs).await;
            // Each call in a round is bounded by `timeout` (two in a row on a
            // master whose elector is silent); a round far past that means
            // the harness itself stalled, and its history has a hole there.
            warn_if_overran(
                || "poller round".into(),
                rec.now_ms() - round_started,
                3 * timeout,
            );
            let found = match &rec.discovery {
                Discovery::Sentinel { master } => discovery::ask_sentinels(&rec, master).await,
                d => discovery::primary_in(d, &round, rec.current_primary().as_deref()),
            };
            if let Some(p) = found {
                *rec.primary.lock().expect("lock") = Some(p);
            } else if round.iter().all(|s| !s.writable()) {
                *rec.primary.lock().expect("lock") = None;
            }
            rec.samples.lock().expect("lock").extend(round);
        }
    })
}

/// Logs an operation that took far longer than its own timeouts allow. Every
/// call a writer or the poller makes is bounded, so such an operation means
/// the harness's runtime did not run it (chaos seed 5801: three writers'
/// writes each ended `unknown` 63 s after they began, and the run's history
/// had no writes in that minute); the warning dates the hole in the log.
/// `what` is only formatted when it warns: the writers call this on every write.
fn warn_if_overran(what: impl FnOnce() -> String, took_ms: crate::history::Ms, budget: Duration) {
    let limit_ms = 2 * budget.as_millis() as crate::history::Ms + 1_000;
    if took_ms > limit_ms {
        tracing::warn!(
            took_ms,
            budget_ms = budget.as_millis() as u64,
            "{} overran its timeouts: the harness stalled, not the cluster",
            what()
        );
    }
}

/// What a writer's `WAIT need` answer makes of its write: acknowledged only
/// when `need` replicas answered; a failed WAIT leaves it not acknowledged,
/// with the error.
pub fn wait_outcome(
    answer: Result<i64, String>,
    need: i64,
) -> (Outcome, Option<i64>, Option<String>) {
    match answer {
        Ok(r) if r >= need => (Outcome::Ok, Some(r), None),
        Ok(r) => (Outcome::NotAcked, Some(r), None),
        Err(e) => (Outcome::NotAcked, None, Some(e)),
    }
}

/// One writer: unique keys `w:<writer>:<n>`, SET then `WAIT k <timeout>` with
/// `k` the scenario's [`crate::scenario::Scenario::wait_replicas`].
pub fn spawn_writer(
    rec: Arc<Recorder>,
    writer: u32,
    wait_replicas: usize,
    w: Workload,
    run_tag: String,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let op_timeout = Duration::from_millis(w.op_timeout_ms);
        let wait_budget = Duration::from_millis(w.wait_timeout_ms + w.op_timeout_ms);
        let mut conns: BTreeMap<String, DataConn> = BTreeMap::new();
        let deadline = Instant::now() + Duration::from_secs(w.max_duration_s);
        let need = wait_replicas as i64;
        let mut n: u64 = 0;
        let mut idle_loops: u64 = 0;
        while n < w.max_ops_per_writer
            && idle_loops < 1_000_000
            && Instant::now() < deadline
            && !rec.writers_stopped()
        {
            let Some(node) = rec.current_primary() else {
                idle_loops += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            };
            let key = format!("w:{writer}:{n}");
            let value = format!("{run_tag}:{writer}:{n}");
            n += 1;
            let conn = conns
                .entry(node.clone())
                .or_insert_with(|| DataConn::new(&rec.nodes[&node].data, op_timeout));
            let invoke_ms = rec.now_ms();
            let mut set = redis::cmd("SET");
            set.arg(&key).arg(&value);
            let mut set_ok_ms = None;
            let (outcome, replicas, error) = match conn.query::<redis::Value>(&set).await {
                Err(CmdError::NotSent(e)) | Err(CmdError::Reply(e)) => {
                    (Outcome::Fail, None, Some(e))
                }
                Err(CmdError::Unknown(e)) => (Outcome::Unknown, None, Some(e)),
                Ok(_) => {
                    set_ok_ms = Some(rec.now_ms());
                    let mut wait = redis::cmd("WAIT");
                    wait.arg(need).arg(w.wait_timeout_ms);
                    let answer = conn.query_with_timeout::<i64>(&wait, wait_budget).await;
                    wait_outcome(answer.map_err(|e| format!("WAIT {e}")), need)
                }
            };
            let complete_ms = rec.now_ms();
            warn_if_overran(
                || format!("writer {writer}: write {key} on {node}"),
                complete_ms - invoke_ms,
                op_timeout + wait_budget,
            );
            let failed = !matches!(outcome, Outcome::Ok | Outcome::NotAcked);
            rec.record_write(WriteOp {
                writer,
                key,
                value,
                node,
                invoke_ms,
                complete_ms,
                set_ok_ms,
                outcome,
                replicas,
                error,
            });
            if outcome != Outcome::Ok {
                rec.rediscover().await;
            }
            let pause = if failed { 50 } else { w.think_ms };
            tokio::time::sleep(Duration::from_millis(pause)).await;
        }
    })
}

/// One reader: GETs a random acknowledged key from the current primary.
pub fn spawn_reader(rec: Arc<Recorder>, seed: u64, w: Workload) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let timeout = Duration::from_millis(w.op_timeout_ms);
        let mut conns: BTreeMap<String, DataConn> = BTreeMap::new();
        let deadline = Instant::now() + Duration::from_secs(w.max_duration_s);
        let mut n = 0u64;
        while n < w.max_ops_per_writer && Instant::now() < deadline && !rec.writers_stopped() {
            n += 1;
            tokio::time::sleep(Duration::from_millis(50)).await;
            let pick = {
                let acked = rec.acked.lock().expect("lock");
                if acked.is_empty() {
                    None
                } else {
                    Some(acked[rng.gen_range(0..acked.len())].clone())
                }
            };
            let (Some((key, value)), Some(node)) = (pick, rec.current_primary()) else {
                continue;
            };
            let conn = conns
                .entry(node.clone())
                .or_insert_with(|| DataConn::new(&rec.nodes[&node].data, timeout));
            let invoke_ms = rec.now_ms();
            let mut get = redis::cmd("GET");
            get.arg(&key);
            let found = match conn.query::<Option<String>>(&get).await {
                Ok(v) => Some(v.as_deref() == Some(value.as_str())),
                Err(_) => None,
            };
            let complete_ms = rec.now_ms();
            rec.reads.lock().expect("lock").push(ReadOp {
                node,
                key,
                invoke_ms,
                complete_ms,
                found,
            });
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::fixtures::sample;

    #[test]
    fn the_primary_of_a_round_is_the_unfenced_claimant_with_the_highest_epoch() {
        let a = sample(0, "n1", "primary", 1, false);
        let b = sample(0, "n2", "replica", 2, false);
        let c = sample(0, "n3", "primary", 3, false);
        let fenced = sample(0, "n3", "primary", 3, true);
        assert_eq!(primary_of(&[a.clone(), b.clone()]), Some("n1".into()));
        assert_eq!(primary_of(&[a.clone(), b.clone(), c]), Some("n3".into()));
        assert_eq!(primary_of(&[b.clone(), fenced]), None);
        let mut slave_data = a;
        slave_data.data.as_mut().unwrap().role = "slave".into();
        assert_eq!(primary_of(&[slave_data, b]), None);
    }
}
