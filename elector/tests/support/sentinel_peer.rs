//! A real Redis Sentinel deployment on loopback, the reference the elector is
//! measured against: 3 `redis-server` processes (one primary, two
//! `--replicaof` it) and 3 `redis-sentinel` processes monitoring `mymaster`
//! with quorum 2. Everything started here is killed when the
//! [`SentinelPeer`] drops, also when a test panics.

use super::{
    companion_port, data_port, print_log_tail, redis_client, redis_server_command,
    release_data_port, require, stop_child, try_connect, wait_until, Ping,
};
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub const MASTER_NAME: &str = "mymaster";

pub struct SentinelPeer {
    /// Client ports of the redis-servers; index 0 starts as the primary.
    pub redis_ports: Vec<u16>,
    /// Ports of the redis-sentinel processes.
    pub sentinel_ports: Vec<u16>,
    pub down_after_ms: u64,
    redis: Vec<Option<Child>>,
    sentinels: Vec<Option<Child>>,
    dir: PathBuf,
    _tmp: tempfile::TempDir,
}

fn spawn_logged(cmd: &mut Command, log: PathBuf) -> Child {
    let log = std::fs::File::create(log).unwrap();
    cmd.stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("start process")
}

/// `SENTINEL master <name>` as a field map; `None` when not answered.
pub fn sentinel_master_info(port: u16) -> Option<HashMap<String, String>> {
    let mut conn = try_connect("127.0.0.1", port, Duration::from_millis(500))?;
    let flat: Vec<String> = redis::cmd("SENTINEL")
        .arg("master")
        .arg(MASTER_NAME)
        .query(&mut conn)
        .ok()?;
    Some(
        flat.chunks_exact(2)
            .map(|kv| (kv[0].clone(), kv[1].clone()))
            .collect(),
    )
}

fn info_replication(port: u16) -> String {
    redis::cmd("INFO")
        .arg("replication")
        .query(&mut redis_client(port))
        .unwrap_or_default()
}

impl SentinelPeer {
    /// Starts the deployment and returns once every sentinel monitors the
    /// primary and knows both replicas and both other sentinels.
    pub fn start(down_after_ms: u64) -> SentinelPeer {
        require("redis-server");
        require("redis-sentinel");
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        let redis_ports: Vec<u16> = (0..3).map(|_| data_port()).collect();
        let sentinel_ports: Vec<u16> = redis_ports.iter().map(|&p| companion_port(p, 1)).collect();
        let mut peer = SentinelPeer {
            redis_ports: redis_ports.clone(),
            sentinel_ports: sentinel_ports.clone(),
            down_after_ms,
            redis: Vec::new(),
            sentinels: Vec::new(),
            dir: dir.clone(),
            _tmp: tmp,
        };

        let primary = redis_ports[0];
        for (i, &port) in redis_ports.iter().enumerate() {
            let data = dir.join(format!("r{i}"));
            std::fs::create_dir_all(&data).unwrap();
            let mut cmd = redis_server_command(port, &data);
            cmd.args(["--appendonly", "no"]);
            if i > 0 {
                cmd.args(["--replicaof", "127.0.0.1", &primary.to_string()]);
            }
            let child = spawn_logged(&mut cmd, dir.join(format!("redis-{i}.log")));
            peer.redis.push(Some(child));
            wait_until(
                Duration::from_secs(10),
                || redis_client(port).ping().is_ok(),
                "redis-server to accept connections",
            );
        }
        // Replicas in sync before the sentinels look: they learn the
        // replicas from the primary's INFO, which they refresh only every
        // 10 s while nothing is wrong.
        wait_until(
            Duration::from_secs(15),
            || info_replication(primary).contains("connected_slaves:2"),
            "both replicas connected to the primary",
        );
        for &port in &redis_ports[1..] {
            wait_until(
                Duration::from_secs(15),
                || info_replication(port).contains("master_link_status:up"),
                "replica link up",
            );
        }

        for (i, &port) in sentinel_ports.iter().enumerate() {
            let sdir = dir.join(format!("s{i}"));
            std::fs::create_dir_all(&sdir).unwrap();
            // Sentinel rewrites this file (myid, known replicas and peers).
            let conf = sdir.join("sentinel.conf");
            std::fs::write(
                &conf,
                format!(
                    "port {port}\nbind 127.0.0.1\nprotected-mode no\ndaemonize no\n\
                     dir {d}\n\
                     sentinel monitor {MASTER_NAME} 127.0.0.1 {primary} 2\n\
                     sentinel down-after-milliseconds {MASTER_NAME} {down_after_ms}\n\
                     sentinel failover-timeout {MASTER_NAME} 10000\n\
                     sentinel parallel-syncs {MASTER_NAME} 1\n",
                    d = sdir.display(),
                ),
            )
            .unwrap();
            let child = spawn_logged(
                Command::new("redis-sentinel").arg(&conf),
                dir.join(format!("sentinel-{i}.log")),
            );
            peer.sentinels.push(Some(child));
        }
        for &port in &sentinel_ports {
            wait_until(
                Duration::from_secs(30),
                || {
                    sentinel_master_info(port).is_some_and(|m| {
                        m.get("port").map(String::as_str) == Some(&primary.to_string())
                            && m.get("num-slaves").map(String::as_str) == Some("2")
                            && m.get("num-other-sentinels").map(String::as_str) == Some("2")
                    })
                },
                "every sentinel to know the primary, 2 replicas and 2 other sentinels",
            );
        }
        peer
    }

    /// SIGKILL of redis-server `i`.
    pub fn kill_redis(&mut self, i: usize) {
        stop_child(&mut self.redis[i]);
    }

    pub fn dump_logs(&self) {
        let names = (0..self.redis.len())
            .map(|i| format!("redis-{i}.log"))
            .chain((0..self.sentinels.len()).map(|i| format!("sentinel-{i}.log")));
        for f in names {
            print_log_tail(&f, &self.dir.join(&f));
        }
    }
}

impl Drop for SentinelPeer {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.dump_logs();
        }
        for child in self.sentinels.iter_mut().chain(self.redis.iter_mut()) {
            stop_child(child);
        }
        for &port in &self.redis_ports {
            release_data_port(port);
        }
    }
}
