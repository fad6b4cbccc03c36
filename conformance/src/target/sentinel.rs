//! Redis Sentinel, as operators run it: every node runs `redis-server` and one
//! `redis-sentinel` (quorum = majority: 2 of 3, 3 of 5); node 1 starts as the
//! primary, the others as its replicas; clients ask a sentinel for the primary
//! (`SENTINEL get-master-addr-by-name`) and ask again when a write fails.
//!
//! The harness writes both configs from a shell script it gives the container
//! instead of the image's entrypoint (no image change: the lead's image serves
//! every target). Files are written only when absent: Sentinel and Redis
//! rewrite them on every reconfiguration (`CONFIG REWRITE`), and a restarted
//! node must come back with what it learned, as it would on a real host.

use super::{
    peer_applies, Applicability, Discovery, Member, NodeSpec, Setting, Target, TargetKind, Topology,
};
use crate::scenario::{Step, Timings};

pub const SENTINEL_PORT: u16 = 26379;
pub const MASTER_NAME: &str = "mymaster";
const CONF_DIR: &str = "/etc/peer";
/// Shell variable the start script sets to the first node's address: Redis and
/// Sentinel get IP addresses only. With host names (`resolve-hostnames yes`)
/// the sentinels could not resolve a killed node's name any more (Docker's DNS
/// forgets stopped containers) and logged it every second.
const PRIMARY_IP: &str = "$PRIMARY_IP";

pub struct Sentinel;

/// Sentinel's `failover-timeout`: how long a started failover may take before
/// another sentinel may retry it. Redis's default (3 min) only matters when a
/// failover stalls; 10 s keeps a stalled one from eating a whole run.
pub fn failover_timeout_ms(t: &Timings) -> u64 {
    (2 * t.down_after_ms).max(10_000)
}

/// `redis.conf` of one node: the same persistence and sync settings the
/// elector's nodes get (docker/entrypoint.sh), plus `replicaof` the first node.
pub fn redis_conf(topo: &Topology, index: usize) -> String {
    let me = &topo.members[index];
    let first = &topo.members[0];
    let mut s = format!(
        "# rendered by the conformance harness (target redis-sentinel)\n\
         bind 0.0.0.0\n\
         port {}\n\
         protected-mode no\n\
         daemonize no\n\
         dir /data/redis\n\
         appendonly yes\n\
         replica-read-only yes\n\
         repl-diskless-sync-delay 0\n",
        me.data_port
    );
    if index != 0 {
        s.push_str(&format!("replicaof {PRIMARY_IP} {}\n", first.data_port));
    }
    s
}

/// `sentinel.conf` of one node. `announce_ip` is written as given (the start
/// script passes `$IP`, the container's address on the cluster network).
pub fn sentinel_conf(topo: &Topology, announce_ip: &str) -> String {
    let first: &Member = &topo.members[0];
    let t = &topo.timings;
    // `$PRIMARY_IP` is expanded by the start script's unquoted here-document.
    format!(
        "# rendered by the conformance harness (target redis-sentinel)\n\
         port {SENTINEL_PORT}\n\
         bind 0.0.0.0\n\
         protected-mode no\n\
         daemonize no\n\
         dir /data/sentinel\n\
         sentinel announce-ip {announce_ip}\n\
         sentinel announce-port {SENTINEL_PORT}\n\
         sentinel monitor {MASTER_NAME} {PRIMARY_IP} {} {}\n\
         sentinel down-after-milliseconds {MASTER_NAME} {}\n\
         sentinel failover-timeout {MASTER_NAME} {}\n\
         sentinel parallel-syncs {MASTER_NAME} 1\n",
        first.data_port,
        topo.quorum(),
        t.down_after_ms,
        failover_timeout_ms(t),
    )
}

/// The container's command: wait until the first node's name resolves
/// (containers start together) and take its address, write both configs if
/// absent, start the sentinel, then run
/// redis-server in the foreground so its death ends the container, as the
/// elector's entrypoint does.
pub fn start_script(topo: &Topology, index: usize) -> String {
    let first = &topo.members[0].host;
    format!(
        "set -e\n\
         mkdir -p {CONF_DIR} /data/redis /data/sentinel\n\
         IP=$(hostname -i | cut -d' ' -f1)\n\
         for _ in $(seq 1 150); do getent hosts {first} >/dev/null && break; sleep 0.2; done\n\
         PRIMARY_IP=$(getent hosts {first} | cut -d' ' -f1)\n\
         [ -f {CONF_DIR}/redis.conf ] || cat > {CONF_DIR}/redis.conf <<EOF_REDIS\n{}EOF_REDIS\n\
         [ -f {CONF_DIR}/sentinel.conf ] || cat > {CONF_DIR}/sentinel.conf <<EOF_SENTINEL\n{}EOF_SENTINEL\n\
         redis-sentinel {CONF_DIR}/sentinel.conf &\n\
         exec redis-server {CONF_DIR}/redis.conf\n",
        redis_conf(topo, index),
        sentinel_conf(topo, "$IP"),
    )
}

/// The reply to `SENTINEL get-master-addr-by-name`: `[host, port]`, or nil when
/// the sentinel does not know the master.
pub fn parse_master_addr(reply: &redis::Value) -> Option<(String, u16)> {
    let redis::Value::Array(items) = reply else {
        return None;
    };
    let text = |v: &redis::Value| match v {
        redis::Value::BulkString(b) => String::from_utf8(b.clone()).ok(),
        redis::Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    };
    match items.as_slice() {
        [host, port] => Some((text(host)?, text(port)?.parse().ok()?)),
        _ => None,
    }
}

impl Target for Sentinel {
    fn kind(&self) -> TargetKind {
        TargetKind::RedisSentinel
    }

    fn node_spec(&self, topo: &Topology, index: usize) -> NodeSpec {
        NodeSpec {
            script: Some(start_script(topo, index)),
            control_port: Some(SENTINEL_PORT),
        }
    }

    fn discovery(&self) -> Discovery {
        Discovery::Sentinel {
            master: MASTER_NAME.to_string(),
        }
    }

    fn applies(&self, step: &Step) -> Applicability {
        peer_applies(step)
    }

    fn settings(&self, t: &Timings) -> Vec<Setting> {
        vec![
            Setting::new("down-after-milliseconds", t.down_after_ms),
            Setting::new("failover-timeout", failover_timeout_ms(t)),
            Setting::new("parallel-syncs", 1),
            Setting::new("quorum", "majority of the sentinels (one per node)"),
            Setting::new("min-replicas-to-write", "0 (Redis default)"),
            Setting::new(
                "clients",
                "SENTINEL get-master-addr-by-name on one sentinel; the next one after a failed or unacknowledged write",
            ),
        ]
    }

    fn control_processes(&self) -> &'static [&'static str] {
        &["redis-sentinel"]
    }

    fn election_slack_ms(&self) -> u64 {
        // ODOWN agreement (sentinels poll each other every second), the
        // leader vote and the promotion.
        3_000
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::Member;

    pub fn topo(n: usize) -> Topology {
        Topology {
            members: (0..n)
                .map(|k| Member {
                    id: format!("n{}", k + 1),
                    host: format!("cf-x-n{}", k + 1),
                    data_port: 6379 + k as u16,
                })
                .collect(),
            timings: Timings {
                down_after_ms: 5000,
                ..Timings::default()
            },
        }
    }

    #[test]
    fn sentinel_monitors_the_first_node_with_a_majority_quorum_and_the_scenario_detection_time() {
        let c = sentinel_conf(&topo(3), "10.0.0.2");
        assert!(c.contains("sentinel monitor mymaster $PRIMARY_IP 6379 2\n"));
        assert!(c.contains("sentinel down-after-milliseconds mymaster 5000\n"));
        assert!(c.contains("sentinel failover-timeout mymaster 10000\n"));
        assert!(c.contains("sentinel parallel-syncs mymaster 1\n"));
        assert!(c.contains("sentinel announce-ip 10.0.0.2\n"));
        assert!(!c.contains("resolve-hostnames"));
        let five = sentinel_conf(&topo(5), "$IP");
        assert!(five.contains("sentinel monitor mymaster $PRIMARY_IP 6379 3\n"));
    }

    #[test]
    fn a_long_detection_time_stretches_the_failover_timeout() {
        let mut t = topo(3);
        t.timings.down_after_ms = 8000;
        assert!(sentinel_conf(&t, "ip").contains("failover-timeout mymaster 16000\n"));
    }

    #[test]
    fn only_the_nodes_after_the_first_start_as_replicas_of_it() {
        let t = topo(3);
        assert!(!redis_conf(&t, 0).contains("replicaof"));
        let second = redis_conf(&t, 1);
        assert!(second.contains("port 6380\n"));
        assert!(second.contains("replicaof $PRIMARY_IP 6379\n"));
        assert!(second.contains("repl-diskless-sync-delay 0\n"));
    }

    #[test]
    fn the_start_script_keeps_rewritten_configs_and_runs_redis_in_the_foreground() {
        let s = start_script(&topo(3), 2);
        assert!(s.contains("[ -f /etc/peer/sentinel.conf ] || cat"));
        assert!(s.contains("[ -f /etc/peer/redis.conf ] || cat"));
        assert!(s.contains("sentinel announce-ip $IP\n"));
        assert!(s.contains("redis-sentinel /etc/peer/sentinel.conf &\n"));
        assert!(s
            .trim_end()
            .ends_with("exec redis-server /etc/peer/redis.conf"));
        assert!(s.contains("PRIMARY_IP=$(getent hosts cf-x-n1 | cut -d' ' -f1)\n"));
        assert!(s.contains("replicaof $PRIMARY_IP 6379"));
    }

    #[test]
    fn get_master_addr_by_name_replies_parse_and_nil_means_unknown() {
        use redis::Value;
        let ok = Value::Array(vec![
            Value::BulkString(b"10.213.0.3".to_vec()),
            Value::BulkString(b"6380".to_vec()),
        ]);
        assert_eq!(parse_master_addr(&ok), Some(("10.213.0.3".into(), 6380)));
        assert_eq!(parse_master_addr(&Value::Nil), None);
        let bad_port = Value::Array(vec![
            Value::BulkString(b"h".to_vec()),
            Value::BulkString(b"port".to_vec()),
        ]);
        assert_eq!(parse_master_addr(&bad_port), None);
    }
}
