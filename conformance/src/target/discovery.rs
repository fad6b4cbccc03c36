//! Finding the primary the way each target's clients do, from the host.
//!
//! - our elector: the electors' `/status` (the unfenced primary, highest epoch);
//! - Redis Sentinel: `SENTINEL get-master-addr-by-name` on one sentinel; after a
//!   failed or unacknowledged write the client moves on to the next sentinel
//!   (a sentinel cut off with the old primary keeps naming it);
//! - kevy's election: every node's `INFO replication`; the master that accepts
//!   a probe write.
//!
//! Node addresses in replies are mapped to node ids by data port: every node
//! has its own (6379 + position), and Sentinel may answer with a host name or
//! an IP address.

use std::time::Duration;

use crate::history::{Sample, WriteProbe};
use crate::probe::DataConn;
use crate::target::sentinel::parse_master_addr;
use crate::target::Discovery;
use crate::workload::{self, Recorder};

/// The key probe writes go to (never read back, never acknowledged).
pub const PROBE_KEY: &str = "cf:probe";

/// Node id whose container data port is `port`, given the nodes in order.
pub fn node_by_port(ids: &[String], base: u16, port: u16) -> Option<String> {
    let k = port.checked_sub(base)? as usize;
    ids.get(k).cloned()
}

/// Writable masters of one poll round, by data node role (peers).
pub fn writable_masters(round: &[Sample]) -> Vec<String> {
    round
        .iter()
        .filter(|s| s.writable())
        .map(|s| s.node.clone())
        .collect()
}

/// The primaries one round shows: our electors' choice, or every writable master.
pub fn primaries(discovery: &Discovery, round: &[Sample]) -> Vec<String> {
    match discovery {
        Discovery::ElectorStatus => workload::primary_of(round).into_iter().collect(),
        _ => writable_masters(round),
    }
}

/// One primary from a round: our electors' choice; for peers the only writable
/// master, or, when several claim it, the one clients already use.
pub fn primary_in(
    discovery: &Discovery,
    round: &[Sample],
    current: Option<&str>,
) -> Option<String> {
    let all = primaries(discovery, round);
    match all.as_slice() {
        [] => None,
        [one] => Some(one.clone()),
        many => current
            .and_then(|c| many.iter().find(|m| m.as_str() == c).cloned())
            .or_else(|| many.first().cloned()),
    }
}

/// Asks sentinels, starting with the recorder's current one, until one names
/// a known node. Returns that node.
pub async fn ask_sentinels(rec: &Recorder, master: &str) -> Option<String> {
    let ids: Vec<String> = rec.nodes.keys().cloned().collect();
    let n = ids.len();
    let start = rec.sentinel_cursor();
    for i in 0..n {
        let id = &ids[(start + i) % n];
        let addr = &rec.nodes[id].api;
        let mut conn = DataConn::new(addr, Duration::from_millis(300));
        let mut cmd = redis::cmd("SENTINEL");
        cmd.arg("get-master-addr-by-name").arg(master);
        let Ok(reply) = conn.query::<redis::Value>(&cmd).await else {
            continue;
        };
        if let Some((_, port)) = parse_master_addr(&reply) {
            if let Some(node) = node_by_port(&ids, crate::cluster::DATA_PORT_BASE, port) {
                if i > 0 {
                    rec.set_sentinel_cursor((start + i) % n);
                }
                return Some(node);
            }
        }
    }
    None
}

/// A `SENTINEL MASTER <name>` reply (a flat field, value list) as pairs.
pub fn parse_fields(reply: &redis::Value) -> Vec<(String, String)> {
    let redis::Value::Array(items) = reply else {
        return vec![];
    };
    let text = |v: &redis::Value| match v {
        redis::Value::BulkString(b) => String::from_utf8(b.clone()).ok(),
        redis::Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    };
    items
        .chunks(2)
        .filter_map(|kv| match kv {
            [k, v] => Some((text(k)?, text(v)?)),
            _ => None,
        })
        .collect()
}

/// What keeps one sentinel from being ready to fail over a cluster of `nodes`:
/// it must know every replica and every other sentinel (it learns replicas from
/// the primary's INFO every 10 s, and can only promote one it knows).
pub fn sentinel_gap(fields: &[(String, String)], nodes: usize) -> Option<String> {
    let get = |k: &str| {
        fields
            .iter()
            .find(|(f, _)| f == k)
            .and_then(|(_, v)| v.parse::<usize>().ok())
    };
    let want = nodes.saturating_sub(1);
    match (get("num-slaves"), get("num-other-sentinels")) {
        (Some(r), Some(o)) if r >= want && o >= want => None,
        (r, o) => Some(format!(
            "knows {r:?} replicas and {o:?} other sentinels of {want} each"
        )),
    }
}

/// `None` once every sentinel is ready to fail over (see [`sentinel_gap`]),
/// else what is missing where.
pub async fn sentinels_unsettled(rec: &Recorder, master: &str) -> Option<String> {
    let n = rec.nodes.len();
    for (id, addrs) in &rec.nodes {
        let mut conn = DataConn::new(&addrs.api, Duration::from_millis(300));
        let mut cmd = redis::cmd("SENTINEL");
        cmd.arg("master").arg(master);
        let gap = match conn.query::<redis::Value>(&cmd).await {
            Ok(v) => sentinel_gap(&parse_fields(&v), n),
            Err(e) => Some(e.to_string()),
        };
        if let Some(g) = gap {
            return Some(format!("sentinel on {id}: {g}"));
        }
    }
    None
}

/// Tries a write on a master: accepted, refused (an error reply), or no
/// answer (not sent, or no reply within the connection's timeout).
pub async fn probe_write(conn: &mut DataConn, node: &str) -> WriteProbe {
    let mut cmd = redis::cmd("SET");
    cmd.arg(PROBE_KEY).arg(node);
    match conn.query::<redis::Value>(&cmd).await {
        Ok(_) => WriteProbe::Accepted,
        Err(crate::probe::CmdError::Reply(_)) => WriteProbe::Refused,
        Err(_) => WriteProbe::NoAnswer,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::fixtures::sample;
    use crate::workload::NodeAddrs;
    use std::collections::BTreeMap;
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

    /// A stand-in sentinel: answers `SENTINEL get-master-addr-by-name` with
    /// `ip port`, anything else (the client's CLIENT SETINFO) with +OK.
    async fn fake_sentinel(port_of_master: u16) -> String {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            while let Ok((sock, _)) = l.accept().await {
                tokio::spawn(async move {
                    let (r, mut w) = sock.into_split();
                    let mut r = BufReader::new(r);
                    loop {
                        let mut line = String::new();
                        if r.read_line(&mut line).await.unwrap_or(0) == 0 {
                            return;
                        }
                        let n: usize = line.trim_start_matches('*').trim().parse().unwrap_or(0);
                        let mut args = vec![];
                        for _ in 0..n {
                            let mut len = String::new();
                            r.read_line(&mut len).await.unwrap();
                            let len: usize = len.trim_start_matches('$').trim().parse().unwrap();
                            let mut buf = vec![0; len + 2];
                            r.read_exact(&mut buf).await.unwrap();
                            args.push(String::from_utf8_lossy(&buf[..len]).to_uppercase());
                        }
                        let reply = if args.first().map(String::as_str) == Some("SENTINEL") {
                            let p = port_of_master.to_string();
                            format!("*2\r\n$8\r\n10.0.0.9\r\n${}\r\n{p}\r\n", p.len())
                        } else {
                            "+OK\r\n".to_string()
                        };
                        w.write_all(reply.as_bytes()).await.unwrap();
                    }
                });
            }
        });
        addr
    }

    #[test]
    fn a_sentinel_is_ready_once_it_knows_every_replica_and_every_other_sentinel() {
        use redis::Value;
        let reply = |slaves: &str, others: &str| {
            Value::Array(
                [
                    "name",
                    "mymaster",
                    "num-slaves",
                    slaves,
                    "num-other-sentinels",
                    others,
                    "quorum",
                    "2",
                ]
                .iter()
                .map(|s| Value::BulkString(s.as_bytes().to_vec()))
                .collect(),
            )
        };
        assert_eq!(sentinel_gap(&parse_fields(&reply("2", "2")), 3), None);
        let gap = sentinel_gap(&parse_fields(&reply("1", "2")), 3).unwrap();
        assert!(gap.contains("Some(1) replicas"), "{gap}");
        assert!(sentinel_gap(&parse_fields(&reply("4", "3")), 5)
            .unwrap()
            .contains("other sentinels"));
        assert!(sentinel_gap(&parse_fields(&Value::Nil), 3).is_some());
    }

    #[tokio::test]
    async fn clients_skip_an_unreachable_sentinel_and_stay_with_the_one_that_answered() {
        // n1's sentinel is gone (nothing listens), n2's and n3's name n3 (port 6381).
        let dead = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().to_string()
        };
        let mut nodes = BTreeMap::new();
        nodes.insert(
            "n1".to_string(),
            NodeAddrs {
                data: String::new(),
                api: dead,
            },
        );
        for id in ["n2", "n3"] {
            let api = fake_sentinel(6381).await;
            nodes.insert(
                id.to_string(),
                NodeAddrs {
                    data: String::new(),
                    api,
                },
            );
        }
        let rec = Recorder::new(
            nodes,
            Discovery::Sentinel {
                master: "mymaster".into(),
            },
        );
        assert_eq!(rec.sentinel_cursor(), 0);
        assert_eq!(ask_sentinels(&rec, "mymaster").await, Some("n3".into()));
        assert_eq!(
            rec.sentinel_cursor(),
            1,
            "n2's sentinel answered: asked first next time"
        );
        rec.rediscover().await;
        assert_eq!(rec.current_primary(), Some("n3".into()));
        assert_eq!(
            rec.sentinel_cursor(),
            2,
            "after a failed write the next sentinel is asked"
        );
    }

    #[test]
    fn a_sentinel_reply_maps_to_the_node_by_its_data_port() {
        let ids: Vec<String> = ["n1", "n2", "n3"].map(String::from).to_vec();
        assert_eq!(node_by_port(&ids, 6379, 6380), Some("n2".into()));
        assert_eq!(node_by_port(&ids, 6379, 6382), None);
        assert_eq!(node_by_port(&ids, 6379, 6000), None);
    }

    #[test]
    fn peers_take_the_only_writable_master_and_keep_theirs_when_two_claim_it() {
        let d = Discovery::DataRole;
        let mut a = sample(0, "n1", "primary", 0, false);
        a.elector = None;
        let mut b = sample(0, "n2", "primary", 0, false);
        b.elector = None;
        let mut c = sample(0, "n3", "replica", 0, false);
        c.elector = None;
        assert_eq!(
            primary_in(&d, &[a.clone(), c.clone()], None),
            Some("n1".into())
        );
        assert_eq!(
            primary_in(&d, &[a.clone(), b.clone(), c.clone()], Some("n2")),
            Some("n2".into())
        );
        // A master that refuses the probe write (kevy's quorum fence) is no primary.
        a.data.as_mut().unwrap().write_probe = Some(WriteProbe::Refused);
        assert_eq!(primary_in(&d, &[a, c], None), None);
    }
}
