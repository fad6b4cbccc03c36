//! Probing nodes from the host: the elector's `/status` over HTTP, the data node's
//! `INFO replication` over RESP. Parsers are pure and unit-tested.

use std::time::Duration;

use serde::Deserialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::history::{DataObs, ElectorObs};

/// The part of `/status` the suite reads (see docs/interfaces.md).
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct StatusJson {
    pub node_id: String,
    pub role: String,
    pub epoch: u64,
    /// Absent from electors that predate it.
    #[serde(default)]
    pub durable_epoch: Option<u64>,
    /// Absent from electors that predate it.
    #[serde(default)]
    pub boot_id: Option<u64>,
    #[serde(default)]
    pub primary: Option<String>,
    #[serde(default)]
    pub fenced: bool,
    #[serde(default)]
    pub peers: Vec<PeerJson>,
    /// Absent on a witness and from electors that predate it.
    #[serde(default)]
    pub data_node: Option<DataNodeJson>,
}

/// The part of `/status` `data_node` the suite reads.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct DataNodeJson {
    /// The node may lack what it acknowledged and does not stand until it
    /// holds its floor again or an operator accepts the loss (§6.10).
    #[serde(default)]
    pub below_floor: bool,
}

/// One entry of `/status` `peers`.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct PeerJson {
    pub id: String,
    /// Milliseconds since the last valid message from that peer.
    #[serde(default)]
    pub last_seen_ms: Option<u64>,
}

impl StatusJson {
    pub fn obs(&self) -> ElectorObs {
        ElectorObs {
            role: self.role.clone(),
            epoch: self.epoch,
            durable_epoch: self.durable_epoch,
            boot_id: self.boot_id,
            primary: self.primary.clone(),
            fenced: self.fenced,
        }
    }
}

/// The number of keys a data node holds (`DBSIZE`), if it answers.
pub async fn dbsize(data_addr: &str) -> Option<u64> {
    let mut c = DataConn::new(data_addr, Duration::from_secs(2));
    c.query::<u64>(&redis::cmd("DBSIZE")).await.ok()
}

/// Parses an HTTP/1.x response; returns (status code, body), de-chunking if needed.
pub fn parse_http_response(raw: &[u8]) -> Option<(u16, Vec<u8>)> {
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&raw[..split]).ok()?;
    let body = &raw[split + 4..];
    let code: u16 = head
        .lines()
        .next()?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    let chunked = head.lines().any(|l| {
        let l = l.to_ascii_lowercase();
        l.starts_with("transfer-encoding:") && l.contains("chunked")
    });
    if !chunked {
        return Some((code, body.to_vec()));
    }
    let mut out = Vec::new();
    let mut rest = body;
    loop {
        let nl = rest.windows(2).position(|w| w == b"\r\n")?;
        let size_str = std::str::from_utf8(&rest[..nl]).ok()?;
        let size = usize::from_str_radix(size_str.split(';').next()?.trim(), 16).ok()?;
        rest = &rest[nl + 2..];
        if size == 0 {
            return Some((code, out));
        }
        out.extend_from_slice(rest.get(..size)?);
        rest = rest.get(size + 2..)?;
    }
}

/// `GET path` on `addr` with an overall timeout; returns (code, body).
pub async fn http_get(addr: &str, path: &str, timeout: Duration) -> Option<(u16, Vec<u8>)> {
    http_request(addr, "GET", path, None, timeout).await
}

/// `POST path` with a JSON body (the elector's `POST /switchover`).
pub async fn http_post_json(
    addr: &str,
    path: &str,
    body: &str,
    timeout: Duration,
) -> Option<(u16, Vec<u8>)> {
    http_request(addr, "POST", path, Some(body), timeout).await
}

async fn http_request(
    addr: &str,
    method: &str,
    path: &str,
    body: Option<&str>,
    timeout: Duration,
) -> Option<(u16, Vec<u8>)> {
    let fut = async {
        let mut s = TcpStream::connect(addr).await.ok()?;
        let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
        if let Some(b) = body {
            req.push_str(&format!(
                "Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{b}",
                b.len()
            ));
        } else {
            req.push_str("\r\n");
        }
        s.write_all(req.as_bytes()).await.ok()?;
        let mut buf = Vec::with_capacity(4096);
        s.read_to_end(&mut buf).await.ok()?;
        parse_http_response(&buf)
    };
    tokio::time::timeout(timeout, fut).await.ok().flatten()
}

pub async fn get_status(api_addr: &str, timeout: Duration) -> Option<StatusJson> {
    let (code, body) = http_get(api_addr, "/status", timeout).await?;
    if code != 200 {
        return None;
    }
    serde_json::from_slice(&body).ok()
}

/// Parses `INFO replication` (Redis and kevy).
pub fn parse_info_replication(info: &str) -> Option<DataObs> {
    let mut role = None;
    let mut obs = DataObs {
        role: String::new(),
        offset: None,
        master_host: None,
        link_up: None,
        write_probe: None,
    };
    let mut master_offset = None;
    let mut slave_offset = None;
    for line in info.lines() {
        let Some((k, v)) = line.trim().split_once(':') else {
            continue;
        };
        match k {
            "role" => role = Some(v.to_string()),
            "master_host" => obs.master_host = Some(v.to_string()),
            "master_link_status" => obs.link_up = Some(v == "up"),
            "master_repl_offset" => master_offset = v.parse().ok(),
            "slave_repl_offset" => slave_offset = v.parse().ok(),
            _ => {}
        }
    }
    obs.role = role?;
    obs.offset = if obs.role == "master" {
        master_offset
    } else {
        slave_offset.or(master_offset)
    };
    Some(obs)
}

/// A lazily (re)connected RESP connection to one data node.
pub struct DataConn {
    url: String,
    conn: Option<redis::aio::MultiplexedConnection>,
    timeout: Duration,
}

impl DataConn {
    pub fn new(addr: &str, timeout: Duration) -> Self {
        DataConn {
            url: format!("redis://{addr}/"),
            conn: None,
            timeout,
        }
    }

    async fn get(&mut self) -> redis::RedisResult<&mut redis::aio::MultiplexedConnection> {
        if self.conn.is_none() {
            let client = redis::Client::open(self.url.as_str())?;
            let config = redis::AsyncConnectionConfig::new()
                .set_connection_timeout(self.timeout)
                .set_response_timeout(self.timeout);
            let c = client
                .get_multiplexed_async_connection_with_config(&config)
                .await?;
            self.conn = Some(c);
        }
        Ok(self.conn.as_mut().expect("just set"))
    }

    /// Runs one command with the connection's timeout; drops the connection on any
    /// error that is not a plain server error reply.
    pub async fn query<T: redis::FromRedisValue>(
        &mut self,
        cmd: &redis::Cmd,
    ) -> Result<T, CmdError> {
        self.query_with_timeout(cmd, self.timeout).await
    }

    pub async fn query_with_timeout<T: redis::FromRedisValue>(
        &mut self,
        cmd: &redis::Cmd,
        timeout: Duration,
    ) -> Result<T, CmdError> {
        let conn = match tokio::time::timeout(timeout, self.get()).await {
            Err(_) => {
                self.conn = None;
                return Err(CmdError::NotSent("connect timeout".into()));
            }
            Ok(Err(e)) => {
                self.conn = None;
                return Err(CmdError::NotSent(e.to_string()));
            }
            Ok(Ok(c)) => c,
        };
        match tokio::time::timeout(timeout, cmd.query_async::<T>(conn)).await {
            Err(_) => {
                self.conn = None;
                Err(CmdError::Unknown("timeout".into()))
            }
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => {
                if e.code().is_some() {
                    Err(CmdError::Reply(e.to_string()))
                } else {
                    self.conn = None;
                    if e.is_connection_refusal() {
                        Err(CmdError::NotSent(e.to_string()))
                    } else {
                        Err(CmdError::Unknown(e.to_string()))
                    }
                }
            }
        }
    }

    pub async fn info_replication(&mut self) -> Option<DataObs> {
        let mut cmd = redis::cmd("INFO");
        cmd.arg("replication");
        let text: String = self.query(&cmd).await.ok()?;
        parse_info_replication(&text)
    }
}

/// How a command failed, as far as the client can tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CmdError {
    /// Never reached the server (connect failed or refused).
    NotSent(String),
    /// The server answered with an error reply.
    Reply(String),
    /// Sent, but no answer (timeout, connection lost): effect unknown.
    Unknown(String),
}

impl std::fmt::Display for CmdError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CmdError::NotSent(e) => write!(f, "not sent: {e}"),
            CmdError::Reply(e) => write!(f, "reply: {e}"),
            CmdError::Unknown(e) => write!(f, "unknown: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_and_chunked_http_responses_parse() {
        let raw = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
        assert_eq!(parse_http_response(raw), Some((200, b"ok".to_vec())));
        let raw = b"HTTP/1.1 503 Service Unavailable\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
        assert_eq!(parse_http_response(raw), Some((503, b"abcde".to_vec())));
        assert_eq!(parse_http_response(b"garbage"), None);
    }

    #[test]
    fn the_status_document_of_the_contract_parses() {
        let doc = r#"{"node_id":"n1","role":"primary","epoch":3,"primary":"n1","fenced":false,
          "quorum":2,"cluster_size":3,
          "data_node":{"kind":"kevy","address":"127.0.0.1:6379","reachable":true,"role":"master","offset":1234,"lag":0,"link_up":true},
          "peers":[{"id":"n2","alive":true,"role":"replica","epoch":3,"offset":1234,"last_seen_ms":40}],
          "transitions":[],"rejected":{"bad_tag":0,"replay":0,"stale_epoch":0}}"#;
        let s: StatusJson = serde_json::from_str(doc).unwrap();
        assert_eq!(s.obs().epoch, 3);
        assert_eq!(s.primary.as_deref(), Some("n1"));
        let s: StatusJson = serde_json::from_str(
            r#"{"node_id":"n2","role":"candidate","epoch":4,"primary":null,"fenced":true}"#,
        )
        .unwrap();
        assert!(s.fenced && s.primary.is_none());
        assert_eq!((s.durable_epoch, s.boot_id), (None, None));
    }

    #[test]
    fn the_durable_epoch_and_boot_id_reach_the_history_when_the_elector_reports_them() {
        let s: StatusJson = serde_json::from_str(
            r#"{"node_id":"n2","role":"replica","epoch":21,"durable_epoch":20,
                "boot_id":1760000000123,"primary":"n1","fenced":true}"#,
        )
        .unwrap();
        let o = s.obs();
        assert_eq!(
            (o.epoch, o.durable_epoch, o.boot_id),
            (21, Some(20), Some(1_760_000_000_123))
        );
    }

    #[test]
    fn info_replication_of_a_replica_and_a_master_parse() {
        let replica = "# Replication\r\nrole:slave\r\nmaster_host:cf-n1\r\nmaster_port:16379\r\nmaster_link_status:up\r\nslave_repl_offset:77\r\nslave_lag_frames:0\r\n";
        let d = parse_info_replication(replica).unwrap();
        assert_eq!(d.role, "slave");
        assert_eq!(d.offset, Some(77));
        assert_eq!(d.link_up, Some(true));
        assert_eq!(d.master_host.as_deref(), Some("cf-n1"));
        let master = "role:master\nconnected_slaves:2\nmaster_repl_offset:1234\n";
        let d = parse_info_replication(master).unwrap();
        assert_eq!((d.role.as_str(), d.offset), ("master", Some(1234)));
        assert!(parse_info_replication("nothing here").is_none());
    }
}
