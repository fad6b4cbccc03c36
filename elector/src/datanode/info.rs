//! `INFO replication` parsing, shared by both backends.

use super::DataNodeError;

/// The replication facts we use.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct ReplicationInfo {
    /// `master` or `slave` as the server says.
    pub role: String,
    /// Primary: `master_repl_offset`; replica: `slave_repl_offset`.
    pub offset: u64,
    pub master_host: Option<String>,
    pub master_port: Option<u16>,
    /// Replica: `master_link_status:up`.
    pub link_up: bool,
    pub connected_replicas: Option<u64>,
    /// Primary: the lowest offset an online replica has acknowledged
    /// (`slaveN:...,state=online,offset=N`), `None` without one.
    pub slowest_replica_ack: Option<u64>,
    /// Primary: how many replica lines say `state=online` (kevy: the replica
    /// has acknowledged on every stream; beside `connected_replicas`, whether
    /// `slowest_replica_ack` speaks for every replica).
    pub online_replicas: u64,
    /// Primary: the highest offset any replica line reports acknowledged,
    /// online or not. Above `offset` it is an acknowledgement kevy kept from
    /// before its last promotion (see `kevy_hold`).
    pub highest_replica_ack: Option<u64>,
    /// How many times this host's watchdog has clamped the data node, read
    /// from its counter file with the observation (kevy only; `None`: no
    /// file). An increase on a node we made writable is a demotion by
    /// someone else even when `INFO` cannot show it (kevy's quiesce).
    pub watchdog_clamps: Option<u64>,
    /// Which process answered (Redis `run_id`, kevy `process_id`): a change
    /// means the data node restarted (protocol §6.8).
    pub identity: Option<String>,
    /// Redis: the fence-related settings as read back from the server on
    /// this very poll, never as last written (protocol §6.4.1).
    pub redis_settings: Option<RedisSettings>,
    /// The replication stream `offset` belongs to (protocol §6.10): Redis
    /// `master_replid`; kevy's feed generation (set by the kevy adapter from
    /// `REPL.TOKEN`, its `master_replid` is always zeros). `None` unknown.
    pub stream: Option<String>,
    /// Redis `master_replid2`: the stream this one continues (offsets carry
    /// on across a Redis promotion). kevy never continues a stream.
    pub stream_prev: Option<String>,
    /// The watchdog's floor hint file (`<data_dir>/floor-hint`): per
    /// stream, the highest offset the data node held when the watchdog
    /// detached it (protocol §6.10). Read with the observation.
    pub floor_hint: Vec<super::floor_hint::Hint>,
    /// Names of the process that answered, each unique to one process for
    /// good (protocol §6.10, "A join outlives its elector"): Redis its
    /// `run_id`; kevy the process marks this reading confirmed in it
    /// (`kevy_mark`), ours first. Empty: the backend named none.
    pub process_names: Vec<String>,
    /// How many times the adapter found the upstream it had set on this
    /// replica replaced by someone else (an operator's `REPLICAOF`, a
    /// promotion by hand), the watchdog's clamp aside. kevy only: its
    /// runner's token then names no feed, so how far the ended runner got,
    /// and what it acknowledged, was last read a poll before (protocol
    /// §6.10, "A replica's tail"). Redis keeps its offset through a
    /// `REPLICAOF` and reports 0.
    pub runners_ended_by_others: u64,
}

/// A replication id that names a stream: Redis and kevy write 40 zeros for
/// "none".
fn replid(value: &str) -> Option<String> {
    (!value.is_empty() && !value.bytes().all(|b| b == b'0')).then(|| value.to_string())
}

/// The Redis settings the fence relies on, read with `CONFIG GET`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct RedisSettings {
    pub(crate) min_replicas_to_write: u64,
    pub(crate) min_replicas_max_lag: u64,
    pub(crate) replica_read_only: bool,
}

impl RedisSettings {
    /// Parses the flat `CONFIG GET` reply (name, value, name, value …).
    pub(crate) fn parse(pairs: &[String]) -> Option<RedisSettings> {
        let get = |name: &str| {
            pairs
                .chunks(2)
                .find(|kv| kv.len() == 2 && kv[0] == name)
                .map(|kv| kv[1].as_str())
        };
        Some(RedisSettings {
            min_replicas_to_write: get("min-replicas-to-write")?.parse().ok()?,
            min_replicas_max_lag: get("min-replicas-max-lag")?.parse().ok()?,
            replica_read_only: get("replica-read-only")? == "yes",
        })
    }
}

/// The identity field of `INFO server`: `run_id` (Redis) or `process_id`
/// (kevy, which has no run id).
pub(crate) fn parse_identity(server_info: &str) -> Option<String> {
    let mut pid = None;
    for line in server_info.lines() {
        match line.trim().split_once(':') {
            Some(("run_id", v)) => return Some(format!("run_id:{v}")),
            Some(("process_id", v)) => pid = Some(format!("process_id:{v}")),
            _ => {}
        }
    }
    pid
}

/// `slave0`, `slave1`, ... (not `slave_repl_offset` and friends).
fn is_replica_line(key: &str) -> bool {
    key.strip_prefix("slave")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// One field of a replica line's value (`ip=...,state=online,offset=13,...`).
fn replica_field<'a>(value: &'a str, name: &str) -> Option<&'a str> {
    value
        .split(',')
        .find_map(|kv| kv.split_once('=').filter(|(k, _)| *k == name))
        .map(|(_, v)| v)
}

/// The acknowledged offset in a replica line's value, if it is online.
fn online_replica_ack(value: &str) -> Option<u64> {
    (replica_field(value, "state")? == "online")
        .then(|| replica_field(value, "offset")?.parse().ok())
        .flatten()
}

impl ReplicationInfo {
    pub fn is_master(&self) -> bool {
        self.role == "master"
    }

    pub(crate) fn parse(text: &str) -> Result<ReplicationInfo, DataNodeError> {
        let mut info = ReplicationInfo::default();
        let (mut master_offset, mut slave_offset) = (None, None);
        for line in text.lines() {
            let Some((key, value)) = line.trim().split_once(':') else {
                continue;
            };
            match key {
                "role" => info.role = value.to_string(),
                "master_repl_offset" => master_offset = value.parse().ok(),
                "slave_repl_offset" => slave_offset = value.parse().ok(),
                "master_host" => info.master_host = Some(value.to_string()),
                "master_port" => info.master_port = value.parse().ok(),
                "master_link_status" => info.link_up = value == "up",
                "connected_slaves" => info.connected_replicas = value.parse().ok(),
                "master_replid" => info.stream = replid(value),
                "master_replid2" => info.stream_prev = replid(value),
                k if is_replica_line(k) => {
                    if let Some(acked) = replica_field(value, "offset").and_then(|v| v.parse().ok())
                    {
                        info.highest_replica_ack = Some(
                            info.highest_replica_ack
                                .map_or(acked, |h: u64| h.max(acked)),
                        );
                    }
                    if let Some(acked) = online_replica_ack(value) {
                        info.online_replicas += 1;
                        info.slowest_replica_ack =
                            Some(info.slowest_replica_ack.map_or(acked, |s| s.min(acked)));
                    }
                }
                _ => {}
            }
        }
        info.offset = match info.role.as_str() {
            "master" => master_offset.unwrap_or(0),
            "slave" => slave_offset.or(master_offset).unwrap_or(0),
            other => return Err(DataNodeError::BadInfo(format!("role {other:?}"))),
        };
        Ok(info)
    }

    /// Whether this replica points at `host:port`.
    pub(crate) fn follows(&self, host: &str, port: u16) -> bool {
        self.role == "slave"
            && self.master_host.as_deref() == Some(host)
            && self.master_port == Some(port)
    }

    /// Both readings show the same role and, for a replica, the same
    /// upstream: nothing changed the node's role between them. A reply
    /// read between two such readings in one pipeline was read in that
    /// role too (kevy, protocol §6.10: the token between two `INFO`s).
    pub(crate) fn same_role_as(&self, other: &ReplicationInfo) -> bool {
        self.role == other.role
            && (self.is_master()
                || (self.master_host == other.master_host && self.master_port == other.master_port))
    }
}

/// The primary a replica was last pointed at: its configured address and
/// the resolved address given to `REPLICAOF` (both backends keep one).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub(crate) struct Upstream(Option<(String, String, u16)>);

impl Upstream {
    pub(crate) fn set(&mut self, configured: &str, host: String, port: u16) {
        self.0 = Some((configured.to_string(), host, port));
    }

    pub(crate) fn clear(&mut self) {
        self.0 = None;
    }

    /// Whether `info` shows the replica following the primary configured as `addr`.
    pub(crate) fn satisfies(&self, addr: &str, info: &ReplicationInfo) -> bool {
        self.0
            .as_ref()
            .is_some_and(|(a, h, p)| a == addr && info.follows(h, *p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kevy_replica_info_is_parsed() {
        let text = "# Replication\r\nrole:slave\r\nmaster_host:127.0.0.1\r\nmaster_port:17110\r\nmaster_link_status:up\r\nslave_repl_offset:40\r\nslave_lag_frames:0\r\n";
        let info = ReplicationInfo::parse(text).unwrap();
        assert_eq!(info.offset, 40);
        assert!(info.link_up && info.follows("127.0.0.1", 17110) && !info.is_master());
    }

    #[test]
    fn a_primary_knows_the_slowest_online_replica_acknowledgement() {
        // As kevy 7.0.0 answers: `offset` is what the replica acknowledged,
        // `sent` what was shipped to it.
        let text = "role:master\r\nconnected_slaves:3\r\n\
            slave0:ip=10.0.0.2,port=6380,state=online,offset=13,sent=13,lag=0\r\n\
            slave1:ip=10.0.0.3,port=6381,state=online,offset=9,sent=13,lag=0\r\n\
            slave2:ip=10.0.0.4,port=6382,state=wait_bgsave,offset=0,sent=0,lag=0\r\n\
            slave_read_only:1\r\nmaster_repl_offset:13\r\n";
        let info = ReplicationInfo::parse(text).unwrap();
        assert_eq!(
            info.slowest_replica_ack,
            Some(9),
            "the loading replica is not counted"
        );
        let none = "role:master\r\nconnected_slaves:0\r\nmaster_repl_offset:13\r\n";
        assert_eq!(
            ReplicationInfo::parse(none).unwrap().slowest_replica_ack,
            None
        );
    }

    #[test]
    fn a_primary_reports_the_highest_acknowledgement_of_any_replica_line() {
        // kevy 7.0.0 right after a re-promotion: the new generation is at 0,
        // the replica's record from the old one at 302 (kevy_hold).
        let text = "role:master\r\nconnected_slaves:1\r\n\
            slave0:ip=127.0.0.1,port=22997,state=online,offset=302,sent=0,lag=0\r\n\
            master_repl_offset:0\r\n";
        let info = ReplicationInfo::parse(text).unwrap();
        assert_eq!((info.highest_replica_ack, info.offset), (Some(302), 0));
    }

    #[test]
    fn a_master_info_reports_its_own_offset() {
        let text = "role:master\r\nconnected_slaves:2\r\nslave0:ip=127.0.0.1,port=1,state=online,offset=13\r\nmaster_repl_offset:13\r\n";
        let info = ReplicationInfo::parse(text).unwrap();
        assert_eq!((info.offset, info.connected_replicas), (13, Some(2)));
        assert!(info.is_master());
    }

    #[test]
    fn the_identity_is_the_run_id_or_else_the_process_id() {
        assert_eq!(
            parse_identity("redis_version:7.0.15\r\nprocess_id:12\r\nrun_id:abc\r\n").as_deref(),
            Some("run_id:abc")
        );
        assert_eq!(
            parse_identity("kevy_version:7.0.0\r\nprocess_id:7713\r\n").as_deref(),
            Some("process_id:7713")
        );
        assert_eq!(parse_identity("redis_version:7.0.15\r\n"), None);
    }

    #[test]
    fn redis_fence_settings_are_read_from_a_config_get_reply() {
        let reply: Vec<String> = [
            "min-replicas-to-write",
            "1",
            "replica-read-only",
            "no",
            "min-replicas-max-lag",
            "0",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            RedisSettings::parse(&reply),
            Some(RedisSettings {
                min_replicas_to_write: 1,
                min_replicas_max_lag: 0,
                replica_read_only: false
            })
        );
        assert_eq!(RedisSettings::parse(&reply[..2]), None);
    }

    #[test]
    fn a_redis_replication_id_names_the_stream_and_zeros_name_none() {
        let text = "role:master\r\nmaster_replid:8f2c\r\nmaster_replid2:0000000000000000000000000000000000000000\r\nmaster_repl_offset:5\r\n";
        let info = ReplicationInfo::parse(text).unwrap();
        assert_eq!(
            (info.stream.as_deref(), info.stream_prev),
            (Some("8f2c"), None)
        );
        let kevy = "role:master\r\nmaster_replid:0000000000000000000000000000000000000000\r\nmaster_repl_offset:5\r\n";
        assert_eq!(ReplicationInfo::parse(kevy).unwrap().stream, None);
    }

    #[test]
    fn an_unknown_role_is_an_error() {
        assert!(ReplicationInfo::parse("role:sentinel\r\n").is_err());
    }
}
