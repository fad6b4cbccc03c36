//! Clients that know only `VIP:port`: the writers (the run's durable writes
//! go through the VIP) and one long-lived monitor connection. Neither asks an
//! elector or a sentinel; each learns which node a connection reached from
//! that node's own data port (`INFO server` `tcp_port`), so the history names
//! real nodes and the usual checkers apply unchanged. Every loop is bounded
//! in count and time.

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use tokio::task::JoinHandle;

use super::{MonitorEvent, MonitorKind, VipObs};
use crate::history::{Outcome, WriteOp};
use crate::scenario::Workload;
use crate::target::discovery::node_by_port;
use crate::workload::{wait_outcome, Recorder};

/// The node name used when a write failed before any connection said where it went.
pub const UNKNOWN_NODE: &str = "vip";

/// One connection through the VIP and the node it reached.
struct VipConn {
    url: String,
    ids: Vec<String>,
    timeout: Duration,
    conn: Option<MultiplexedConnection>,
    /// The node the latest connection reached (kept after it broke, to name
    /// where the command that broke it went); `None` while connecting.
    reached: Option<String>,
    /// Connections made so far (the latest one's number).
    made: u32,
}

/// What went wrong with one command.
enum VipError {
    /// No connection could be made (nothing sent).
    Connect(String),
    /// The server answered with an error (the connection stays).
    Reply(String),
    /// The connection broke (closed, reset) after the command was sent.
    Broken(String),
    /// No answer within the timeout.
    Timeout,
}

impl VipConn {
    fn new(address: &str, port: u16, ids: Vec<String>, timeout: Duration) -> Self {
        VipConn {
            url: format!("redis://{address}:{port}/"),
            ids,
            timeout,
            conn: None,
            reached: None,
            made: 0,
        }
    }

    fn node(&self) -> Option<String> {
        self.reached.clone()
    }

    async fn ensure(&mut self) -> Result<(), VipError> {
        if self.conn.is_some() {
            return Ok(());
        }
        self.reached = None;
        let client =
            redis::Client::open(self.url.as_str()).map_err(|e| VipError::Connect(e.to_string()))?;
        // The client's own response timeout is left longer than ours: a
        // timeout must read as `Timeout` (connection kept), never as a close.
        let config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(self.timeout)
            .set_response_timeout(self.timeout * 10);
        let mut c = tokio::time::timeout(
            self.timeout,
            client.get_multiplexed_async_connection_with_config(&config),
        )
        .await
        .map_err(|_| VipError::Connect("connect timeout".into()))?
        .map_err(|e| VipError::Connect(e.to_string()))?;
        let port = server_port(&mut c, self.timeout).await;
        self.reached =
            port.and_then(|p| node_by_port(&self.ids, crate::cluster::DATA_PORT_BASE, p));
        self.made += 1;
        self.conn = Some(c);
        Ok(())
    }

    /// Runs one command; `drop_on_timeout` forgets the connection after a
    /// timeout (writers), otherwise it is kept to see how it ends (monitor).
    async fn query<T: redis::FromRedisValue>(
        &mut self,
        cmd: &redis::Cmd,
        timeout: Duration,
        drop_on_timeout: bool,
    ) -> Result<T, VipError> {
        self.ensure().await?;
        let conn = self.conn.as_mut().expect("ensured");
        match tokio::time::timeout(timeout, cmd.query_async::<T>(conn)).await {
            Err(_) => {
                if drop_on_timeout {
                    self.conn = None;
                }
                Err(VipError::Timeout)
            }
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) if e.code().is_some() => Err(VipError::Reply(e.to_string())),
            Ok(Err(e)) if e.is_timeout() => {
                if drop_on_timeout {
                    self.conn = None;
                }
                Err(VipError::Timeout)
            }
            Ok(Err(e)) => {
                self.conn = None;
                Err(VipError::Broken(e.to_string()))
            }
        }
    }
}

/// The data node's own client port, from `INFO server` (`tcp_port:`).
async fn server_port(c: &mut MultiplexedConnection, timeout: Duration) -> Option<u16> {
    let mut cmd = redis::cmd("INFO");
    cmd.arg("server");
    let text: String = tokio::time::timeout(timeout, cmd.query_async(c))
        .await
        .ok()?
        .ok()?;
    parse_tcp_port(&text)
}

/// `tcp_port:6380` in an `INFO server` text.
pub fn parse_tcp_port(info: &str) -> Option<u16> {
    info.lines()
        .find_map(|l| l.trim().strip_prefix("tcp_port:"))
        .and_then(|p| p.trim().parse().ok())
}

/// One writer through the VIP: unique keys `w:<writer>:<n>`, SET then
/// `WAIT k <timeout>`, acknowledged only when WAIT reached `k` (as the
/// suite's own writers, `workload::spawn_writer`).
pub fn spawn_writer(
    rec: Arc<Recorder>,
    obs: Arc<VipObs>,
    writer: u32,
    wait_replicas: usize,
    w: Workload,
    run_tag: String,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let ids: Vec<String> = rec.nodes.keys().cloned().collect();
        let op_timeout = Duration::from_millis(w.op_timeout_ms);
        let wait_budget = Duration::from_millis(w.wait_timeout_ms + w.op_timeout_ms);
        let mut conn = VipConn::new(&obs.address, obs.port, ids, op_timeout);
        let deadline = Instant::now() + Duration::from_secs(w.max_duration_s);
        let need = wait_replicas as i64;
        let mut n: u64 = 0;
        while n < w.max_ops_per_writer && Instant::now() < deadline && !rec.writers_stopped() {
            let key = format!("w:{writer}:{n}");
            let value = format!("{run_tag}:{writer}:{n}");
            n += 1;
            let invoke_ms = rec.now_ms();
            let mut set = redis::cmd("SET");
            set.arg(&key).arg(&value);
            let sent = conn.query::<redis::Value>(&set, op_timeout, true).await;
            // The node as the connection knew it when the SET went out.
            let node = conn.node();
            let mut set_ok_ms = None;
            let (outcome, replicas, error) = match sent {
                Err(VipError::Connect(e)) | Err(VipError::Reply(e)) => {
                    (Outcome::Fail, None, Some(e))
                }
                Err(VipError::Broken(e)) => (Outcome::Unknown, None, Some(e)),
                Err(VipError::Timeout) => (Outcome::Unknown, None, Some("timeout".into())),
                Ok(_) => {
                    set_ok_ms = Some(rec.now_ms());
                    let mut wait = redis::cmd("WAIT");
                    wait.arg(need).arg(w.wait_timeout_ms);
                    let answer = conn.query::<i64>(&wait, wait_budget, true).await;
                    wait_outcome(answer.map_err(|_| "WAIT failed".to_string()), need)
                }
            };
            let complete_ms = rec.now_ms();
            let failed = !matches!(outcome, Outcome::Ok | Outcome::NotAcked);
            rec.record_write(WriteOp {
                writer,
                key,
                value,
                node: node.unwrap_or_else(|| UNKNOWN_NODE.to_string()),
                invoke_ms,
                complete_ms,
                set_ok_ms,
                outcome,
                replicas,
                error,
            });
            let pause = if failed { 50 } else { w.think_ms };
            tokio::time::sleep(Duration::from_millis(pause)).await;
        }
    })
}

/// The long-lived client: one connection through the VIP, a `SET` every
/// `every`, reconnecting only when the connection is closed under it. What it
/// sees tells whether the old holder's clients were cut (`Closed`) or left on
/// `READONLY` (`ErrorReply` on and on).
pub fn spawn_monitor(rec: Arc<Recorder>, obs: Arc<VipObs>, max: Duration) -> JoinHandle<()> {
    tokio::spawn(async move {
        let ids: Vec<String> = rec.nodes.keys().cloned().collect();
        let timeout = Duration::from_millis(500);
        let every = Duration::from_millis(100);
        let mut conn = VipConn::new(&obs.address, obs.port, ids, timeout);
        let deadline = Instant::now() + max;
        let mut n: u64 = 0;
        while n < 100_000 && Instant::now() < deadline && !obs.stopped() && !rec.writers_stopped() {
            n += 1;
            let mut set = redis::cmd("SET");
            set.arg("vip:monitor").arg(n);
            let result = conn.query::<redis::Value>(&set, timeout, false).await;
            // The connection this command went on (also when it broke).
            let (no, node) = (conn.made, conn.node());
            let (kind, detail) = match result {
                Ok(_) => (MonitorKind::Ok, String::new()),
                Err(VipError::Reply(e)) => (MonitorKind::ErrorReply, e),
                Err(VipError::Broken(e)) => (MonitorKind::Closed, e),
                Err(VipError::Timeout) => (MonitorKind::Timeout, String::new()),
                Err(VipError::Connect(e)) => (MonitorKind::ConnectFailed, e),
            };
            obs.monitor.lock().expect("lock").push(MonitorEvent {
                at_ms: rec.now_ms(),
                conn: no,
                node,
                kind,
                detail,
            });
            tokio::time::sleep(every).await;
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_data_port_is_read_from_info_server() {
        let info = "# Server\r\nredis_version:7.0.15\r\ntcp_port:6380\r\nuptime_in_seconds:3\r\n";
        assert_eq!(parse_tcp_port(info), Some(6380));
        assert_eq!(parse_tcp_port("# Server\r\nredis_version:7\r\n"), None);
        assert_eq!(parse_tcp_port("tcp_port:x"), None);
    }
}
