//! Real data nodes as a target of the contract: two redis-server or two
//! kevy 7.0.0 processes on loopback, each behind the adapter the runtime
//! builds from its configuration (`elector::datanode::Adapter`), with no
//! elector: the suite stands for the cores. The replication gate is off
//! (it is the elector's shell, not the adapter, §6.10): replicas dial
//! their upstream's kevy directly, as kevy does by itself.

use super::Target;
use crate::support::{require, try_connect, NodePorts};
use elector::core::DataNodeTarget;
use elector::datanode::{Adapter, ReplicationInfo};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Kevy,
    Redis,
}

struct Node {
    config: elector::config::Config,
    ports: NodePorts,
    dir: PathBuf,
    process: Option<Child>,
    adapter: Adapter,
}

pub struct RealTarget {
    backend: Backend,
    rt: tokio::runtime::Runtime,
    nodes: Vec<Node>,
    next_key: u64,
    _witness: NodePorts,
    _tmp: tempfile::TempDir,
}

impl RealTarget {
    pub fn start(backend: Backend) -> RealTarget {
        require(match backend {
            Backend::Kevy => "kevy",
            Backend::Redis => "redis-server",
        });
        let tmp = tempfile::tempdir().unwrap();
        let ports: Vec<NodePorts> = (0..2).map(|_| NodePorts::reserve()).collect();
        let witness = NodePorts::reserve();
        let peers: String = ports
            .iter()
            .enumerate()
            .map(|(i, p)| {
                format!(
                    "  - {{ id: n{}, election: \"127.0.0.1:{}\", data: \"127.0.0.1:{}\", api: \"127.0.0.1:{}\" }}\n",
                    i + 1,
                    p.election,
                    p.data,
                    p.api
                )
            })
            .chain(std::iter::once(format!(
                "  - {{ id: n3, election: \"127.0.0.1:{}\", api: \"127.0.0.1:{}\", witness: true }}\n",
                witness.election, witness.api
            )))
            .collect();
        let kind = match backend {
            Backend::Kevy => "kevy",
            Backend::Redis => "redis",
        };
        let nodes = ports
            .into_iter()
            .enumerate()
            .map(|(i, ports)| {
                let dir = tmp.path().join(format!("n{}", i + 1));
                std::fs::create_dir_all(dir.join("data")).unwrap();
                std::fs::create_dir_all(dir.join("elector")).unwrap();
                let yaml = format!(
                    "node_id: n{id}\nlisten: {{ election: \"127.0.0.1:{e}\", api: \"127.0.0.1:{a}\" }}\n\
                     data_dir: {dir}/elector\n\
                     data_node: {{ kind: {kind}, address: \"127.0.0.1:{d}\", replication_gate: false, kevy_quiesce_fence_limit_ms: {limit} }}\n\
                     peers:\n{peers}",
                    id = i + 1,
                    e = ports.election,
                    a = ports.api,
                    d = ports.data,
                    dir = dir.display(),
                    limit = super::QUIESCE_FENCE_LIMIT_MS,
                );
                let path = dir.join("elector.yaml");
                let config = elector::config::parse(&yaml, &path)
                    .unwrap_or_else(|e| panic!("contract config: {e}\n{yaml}"))
                    .config;
                let adapter = Adapter::from_config(&config).expect("a data member");
                Node {
                    config,
                    ports,
                    dir,
                    process: None,
                    adapter,
                }
            })
            .collect();
        let mut target = RealTarget {
            backend,
            rt: tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .unwrap(),
            nodes,
            next_key: 0,
            _witness: witness,
            _tmp: tmp,
        };
        for i in 0..2 {
            target.start_data(i);
        }
        target
    }

    /// Every node's adapter as the elector's own task builds it
    /// ([`Adapter::of_the_elector`]).
    pub fn with_electors_adapters(mut self) -> RealTarget {
        for i in 0..self.nodes.len() {
            self.restart_adapter(i);
        }
        self
    }

    /// Node `i`'s elector dies and starts again: a new adapter of the
    /// elector's, its data node left as it is.
    pub fn restart_adapter(&mut self, i: usize) {
        let node = &mut self.nodes[i];
        node.adapter = Adapter::of_the_elector(&node.config).expect("a data member");
    }

    /// An operator's `REPLICAOF host port` on node `i`, behind its adapter.
    pub fn replicaof_by_hand(&mut self, i: usize, host: &str, port: u16) -> Result<(), String> {
        let mut conn = self.connection(i)?;
        redis::cmd("REPLICAOF")
            .arg(host)
            .arg(port)
            .query::<String>(&mut conn)
            .map(|_| ())
            .map_err(|e| format!("REPLICAOF by hand: {e}"))
    }

    /// Starts node `i`'s data node as its configuration says (a replica of
    /// nowhere) and waits until it answers `PING`.
    fn start_data(&mut self, i: usize) {
        let node = &mut self.nodes[i];
        let port = node.ports.data;
        let data_dir = node.dir.join("data");
        let log = std::fs::File::create(node.dir.join("data.log")).unwrap();
        let mut cmd = match self.backend {
            Backend::Kevy => kevy_command(&node.dir, &data_dir, port),
            Backend::Redis => redis_command(&data_dir, port),
        };
        let child = cmd
            .stdout(Stdio::from(log.try_clone().unwrap()))
            .stderr(Stdio::from(log))
            .spawn()
            .expect("start the data node");
        node.process = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while try_connect("127.0.0.1", port, Duration::from_secs(1))
            .is_none_or(|mut c| redis::cmd("PING").query::<String>(&mut c).is_err())
        {
            assert!(
                Instant::now() < deadline,
                "the data node on port {port} did not answer within 10 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn stop_data(&mut self, i: usize) {
        if let Some(mut child) = self.nodes[i].process.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// `SET`s a key never written before to its own name.
    fn set_new_key(&mut self, conn: &mut redis::Connection) -> Result<String, String> {
        self.next_key += 1;
        let key = format!("contract:{}", self.next_key);
        redis::cmd("SET")
            .arg(&key)
            .arg(&key)
            .query::<String>(conn)
            .map_err(|e| format!("SET: {e}"))?;
        Ok(key)
    }

    fn connection(&self, i: usize) -> Result<redis::Connection, String> {
        try_connect(
            "127.0.0.1",
            self.nodes[i].ports.data,
            Duration::from_secs(3),
        )
        .ok_or_else(|| format!("cannot connect to n{}", i + 1))
    }
}

fn kevy_command(dir: &Path, data_dir: &Path, port: u16) -> Command {
    let toml = format!(
        "[server]\nbind = \"127.0.0.1\"\nport = {port}\nthreads = 1\ndata_dir = \"{}\"\n\
         [persistence]\naof = true\n[replication]\nrole = \"replica\"\nupstream = \"127.0.0.1:1\"\n\
         reconnect_window_ms = 1000\nlisten_port_base = {}\n\
         [expiry]\nhz = 100\n[advanced]\npark_timeout_ms = 10\n",
        data_dir.display(),
        port + 10_000
    );
    let path = dir.join("kevy.toml");
    std::fs::write(&path, toml).unwrap();
    let mut cmd = Command::new("kevy");
    cmd.arg("--config").arg(path);
    cmd
}

fn redis_command(data_dir: &Path, port: u16) -> Command {
    let mut cmd = Command::new("redis-server");
    cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--dir"])
        .arg(data_dir)
        .args(["--repl-diskless-sync-delay", "0", "--save", ""])
        .args(["--protected-mode", "no", "--appendonly", "yes"])
        .args(["--appendfsync", "always", "--replicaof", "127.0.0.1", "1"]);
    cmd
}

impl Drop for RealTarget {
    fn drop(&mut self) {
        for i in 0..self.nodes.len() {
            self.stop_data(i);
        }
    }
}

impl Target for RealTarget {
    type Write = String;

    fn name(&self) -> String {
        format!("real {:?}", self.backend)
    }

    fn fence_gives_way_to_demotion(&self) -> bool {
        matches!(self.backend, Backend::Kevy)
    }

    fn address(&self, i: usize) -> String {
        format!("127.0.0.1:{}", self.nodes[i].ports.data)
    }

    fn apply(&mut self, i: usize, target: &DataNodeTarget) -> Result<(), String> {
        let node = &mut self.nodes[i];
        self.rt
            .block_on(node.adapter.apply(target))
            .map_err(|e| e.to_string())
    }

    fn observe(&mut self, i: usize) -> Result<ReplicationInfo, String> {
        let node = &mut self.nodes[i];
        self.rt
            .block_on(node.adapter.observe())
            .map_err(|e| e.to_string())
    }

    fn satisfies(&self, i: usize, info: &ReplicationInfo, target: &DataNodeTarget) -> bool {
        self.nodes[i].adapter.satisfies(info, target)
    }

    fn write(&mut self, i: usize) -> Result<String, String> {
        let mut conn = self.connection(i)?;
        self.set_new_key(&mut conn)
    }

    fn write_acknowledged(&mut self, i: usize, replicas: u64) -> Result<String, String> {
        // `WAIT` counts this connection's writes: the same one for both.
        let mut conn = self.connection(i)?;
        let key = self.set_new_key(&mut conn)?;
        let acked: u64 = redis::cmd("WAIT")
            .arg(replicas)
            .arg(2_000)
            .query(&mut conn)
            .map_err(|e| format!("WAIT: {e}"))?;
        if acked < replicas {
            return Err(format!("WAIT {replicas} answered {acked}"));
        }
        Ok(key)
    }

    fn holds(&mut self, i: usize, key: &String) -> Option<bool> {
        let mut conn = self.connection(i).ok()?;
        let value: Option<String> = redis::cmd("GET").arg(key).query(&mut conn).ok()?;
        Some(value.as_deref() == Some(key.as_str()))
    }

    fn pass(&mut self, ms: u64) -> Result<(), String> {
        std::thread::sleep(Duration::from_millis(ms));
        Ok(())
    }

    fn pause(&mut self, i: usize, paused: bool) {
        let pid = self.nodes[i].process.as_ref().expect("running").id();
        let signal = if paused { "-STOP" } else { "-CONT" };
        let status = Command::new("kill")
            .args([signal, &pid.to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill {signal} {pid}: {status}");
    }

    fn restart(&mut self, i: usize, keep_data: bool) {
        self.stop_data(i);
        if !keep_data {
            let data = self.nodes[i].dir.join("data");
            std::fs::remove_dir_all(&data).unwrap();
            std::fs::create_dir_all(&data).unwrap();
        }
        self.start_data(i);
        // What the runtime's tether tells the adapter (§6.8).
        self.nodes[i].adapter.new_incarnation();
    }
}
