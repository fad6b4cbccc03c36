#![allow(dead_code)] // shared by several test crates; each uses a subset
//! Real processes on loopback for integration tests: kevy or redis-server
//! data nodes plus one `elector` binary each. Everything started here is
//! killed when the [`Cluster`] drops, also when a test panics.

mod clients;
pub mod netns;
mod observe;
mod operator;
#[allow(unused_imports)] // not every test binary asks for a switchover
pub use operator::post_switchover;
pub mod pki;
mod ports;
mod restarts;
#[allow(unused_imports)] // used by tests/data_safety.rs only
pub use restarts::DataRestart;
pub mod sentinel_peer;
mod sidecars;
mod versions;
mod writes;
#[allow(unused_imports)] // used by the data_node_* tests only
pub use sidecars::{sidecar_log, start_elector_and_watchdog, Procs};
#[allow(unused_imports)] // used by tests/mixed_versions.rs only
pub use versions::{old_elector, ElectorBuilds, WireForm};
#[allow(unused_imports)] // used by tests/data_safety.rs only
pub use writes::acked_value_by;

pub use clients::*;
use ports::{companion_port, data_port, release_data_port, PortTaken};

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A data port and its companions, reserved against this process's other
/// tests and parallel test binaries for as long as it lives: for tests that
/// lay out their own nodes instead of a [`Cluster`]. Taking each port from
/// `127.0.0.1:0` and dropping it can hand two listeners the same port (CI saw
/// two electors given one election address).
pub struct NodePorts {
    pub data: u16,
    pub api: u16,
    pub election: u16,
}

impl NodePorts {
    pub fn reserve() -> NodePorts {
        let data = data_port();
        NodePorts {
            data,
            api: companion_port(data, 1),
            election: companion_port(data, 2),
        }
    }
}

impl Drop for NodePorts {
    fn drop(&mut self) {
        release_data_port(self.data);
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Kevy,
    Redis,
}

/// Test timings: down_after 600 ms.
pub const SHORT_TIMINGS: (&str, u64) = (
    "{ hb_interval_ms: 50, down_after_ms: 600, election_timeout_ms: 400, backoff_min_ms: 100, backoff_max_ms: 300, data_poll_ms: 50 }",
    600,
);
/// The seed's defaults: down_after 5000 ms.
pub const DEFAULT_TIMINGS: (&str, u64) = ("{}", 5000);

/// Where each test kevy's own replication listener is, from its client
/// port: behind the elector's replication gate, which takes +10000
/// (protocol §6.10; `data_node.local_replication_port_offset`).
pub const KEVY_LOCAL_REPLICATION_OFFSET: u16 = 10_005;

pub struct NodeProcs {
    pub id: String,
    /// A witness: an elector with no data node (protocol §4.5).
    pub witness: bool,
    pub data_port: u16,
    pub api_port: u16,
    pub election_port: u16,
    /// The elector's Sentinel-compatible RESP listener.
    pub sentinel_port: u16,
    pub data: Option<Child>,
    pub elector: Option<Child>,
    /// The data node's dead-man switch, when a test starts one.
    pub watchdog: Option<Child>,
    pub dir: PathBuf,
    /// The binary node `i`'s elector (and watchdog) runs: [`elector_bin`],
    /// unless a test runs an older build beside this one (a rolling binary
    /// upgrade, tests/mixed_versions.rs).
    pub elector_bin: PathBuf,
    /// Start the data node in a PID namespace of its own (`unshare --pid`):
    /// it is process 1 at every start, as in a container its runtime
    /// restarts (protocol §6.8).
    pub own_pid_namespace: bool,
}

pub struct Cluster {
    pub backend: Backend,
    pub nodes: Vec<NodeProcs>,
    pub down_after_ms: u64,
    /// `ulimit -n` for the electors, when a test sets one.
    pub elector_nofile: Option<u32>,
    /// The configs leave the replication gate (protocol §6.10) out and kevy
    /// listens where replicas dial it: `ELECTOR_TEST_LEGACY`, or a cluster
    /// started from electors older than the gate (tests/mixed_versions.rs).
    pub without_gate: bool,
    _tmp: tempfile::TempDir,
}

/// SIGKILLs a child we started (if still ours) and reaps it.
fn stop_child(child: &mut Option<Child>) {
    if let Some(mut c) = child.take() {
        let _ = c.kill();
        let _ = c.wait();
    }
}

/// The electors' log filter: `info`, or `ELECTOR_TEST_LOG` (e.g.
/// `info,elector::datanode::ack_nudge=trace` to see why a nudge went out).
fn elector_log_filter() -> String {
    std::env::var("ELECTOR_TEST_LOG").unwrap_or_else(|_| "info".to_string())
}

/// Prints the last 25 lines of a log file (for a failing test's report).
/// The last lines of a log, 25 unless `ELECTOR_TEST_LOG_LINES` says how many
/// (a failure whose cause is earlier than its last 25 lines).
fn print_log_tail(label: &str, path: &std::path::Path) {
    let lines = std::env::var("ELECTOR_TEST_LOG_LINES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(25);
    if let Ok(text) = std::fs::read_to_string(path) {
        let tail: Vec<&str> = text.lines().rev().take(lines).collect();
        eprintln!(
            "---- {label}\n{}",
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
}

/// `redis-server` on loopback as the lab runs it (no diskless-sync delay, no
/// RDB snapshots); callers add persistence and replication flags.
/// `cmd` as it is, or run as process 1 of a new PID namespace (root only;
/// `--kill-child`: the data node dies with the `unshare` the test holds).
fn in_pid_namespace(cmd: Command, own: bool) -> Command {
    if !own {
        return cmd;
    }
    let mut wrapped = Command::new("unshare");
    wrapped
        .args(["--pid", "--fork", "--kill-child"])
        .arg(cmd.get_program())
        .args(cmd.get_args());
    wrapped
}

/// The elector binary the tests run: this build's, or the one named by
/// `ELECTOR_TEST_BIN` (an older build, to show a test fails there).
pub fn elector_bin() -> PathBuf {
    std::env::var_os("ELECTOR_TEST_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_elector")))
}

/// With `ELECTOR_TEST_BIN` set to a build from before the replication gate
/// (protocol §6.10), the configs leave it out and kevy listens where
/// replicas dial it.
pub fn legacy_elector() -> bool {
    std::env::var_os("ELECTOR_TEST_LEGACY").is_some()
}

fn redis_server_command(port: u16, dir: &std::path::Path) -> Command {
    let mut cmd = Command::new("redis-server");
    cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--dir"])
        .arg(dir)
        .args([
            "--repl-diskless-sync-delay",
            "0",
            "--save",
            "",
            "--protected-mode",
            "no",
        ]);
    cmd
}

/// Starts a cluster, again on fresh ports (3 tries) when a data node finds
/// its port taken: the ports are checked free when chosen, but a process
/// outside this test can still bind one before the node does.
fn retry_on_taken_port(start: impl Fn() -> Result<Cluster, PortTaken>) -> Cluster {
    let mut tries = 0;
    loop {
        tries += 1;
        match start() {
            Ok(cluster) => return cluster,
            Err(PortTaken(port)) if tries < 3 => {
                eprintln!("data port {port} was taken before the node bound it; starting again on fresh ports");
            }
            Err(PortTaken(port)) => panic!("data port {port} taken on {tries} tries"),
        }
    }
}

pub fn require(binary: &str) {
    let found = Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {binary}"))
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "{binary} is not installed: run scripts/install-deps.sh (the repo installs it)"
    );
}

impl Cluster {
    /// Starts `n` data nodes (read-only, no upstream) and their electors.
    pub fn start(backend: Backend, n: usize) -> Cluster {
        Cluster::start_with(backend, n, SHORT_TIMINGS)
    }

    /// Like [`Cluster::start`] with a YAML `timings` map and its down_after.
    pub fn start_with(backend: Backend, n: usize, timings: (&str, u64)) -> Cluster {
        Cluster::start_limited(backend, n, timings, None)
    }

    /// Like [`Cluster::start_with`], each elector under `ulimit -n nofile`.
    pub fn start_limited(
        backend: Backend,
        n: usize,
        timings: (&str, u64),
        nofile: Option<u32>,
    ) -> Cluster {
        Cluster::start_full(backend, n, timings, nofile, "", &|_| String::new())
    }

    /// Like [`Cluster::start_with`] with more `data_node` settings
    /// (`data_node_extra`: YAML map entries, e.g. `abort_stale_connects: false`).
    pub fn start_configured(
        backend: Backend,
        n: usize,
        timings: (&str, u64),
        data_node_extra: &str,
    ) -> Cluster {
        Cluster::start_full(backend, n, timings, None, data_node_extra, &|_| {
            String::new()
        })
    }

    /// Like [`Cluster::start_with`] with more top-level YAML for each node
    /// (`node_extra(id)`: whole lines, e.g. a `tls:` section).
    pub fn start_with_node_extra(
        backend: Backend,
        n: usize,
        timings: (&str, u64),
        node_extra: &dyn Fn(&str) -> String,
    ) -> Cluster {
        Cluster::start_full(backend, n, timings, None, "", node_extra)
    }

    /// `data` data nodes and electors, then `witnesses` electors with no
    /// data node (protocol §4.5), with the short timings.
    pub fn start_with_witnesses(backend: Backend, data: usize, witnesses: usize) -> Cluster {
        retry_on_taken_port(|| {
            Cluster::try_start(
                backend,
                (data, witnesses),
                SHORT_TIMINGS,
                None,
                "",
                &|_| String::new(),
                &ElectorBuilds::current(),
            )
        })
    }

    /// Starts the cluster ([`retry_on_taken_port`]).
    fn start_full(
        backend: Backend,
        n: usize,
        timings: (&str, u64),
        nofile: Option<u32>,
        data_node_extra: &str,
        node_extra: &dyn Fn(&str) -> String,
    ) -> Cluster {
        retry_on_taken_port(|| {
            Cluster::try_start(
                backend,
                (n, 0),
                timings,
                nofile,
                data_node_extra,
                node_extra,
                &ElectorBuilds::current(),
            )
        })
    }

    /// `builds`: each node's elector binary and the config it reads.
    fn try_start(
        backend: Backend,
        (data, witnesses): (usize, usize),
        timings: (&str, u64),
        nofile: Option<u32>,
        data_node_extra: &str,
        node_extra: &dyn Fn(&str) -> String,
        builds: &ElectorBuilds,
    ) -> Result<Cluster, PortTaken> {
        let n = data + witnesses;
        let without_gate = legacy_elector() || builds.before_replication_gate;
        require(match backend {
            Backend::Kevy => "kevy",
            Backend::Redis => "redis-server",
        });
        let tmp = tempfile::tempdir().unwrap();
        let mut nodes: Vec<NodeProcs> = (1..=n)
            .map(|i| (i, data_port()))
            .map(|(i, data_port)| NodeProcs {
                id: format!("n{i}"),
                witness: i > data,
                data_port,
                api_port: companion_port(data_port, 1),
                election_port: companion_port(data_port, 2),
                sentinel_port: companion_port(data_port, 3),
                data: None,
                elector: None,
                watchdog: None,
                dir: tmp.path().join(format!("n{i}")),
                elector_bin: (builds.bin_of)(i - 1),
                own_pid_namespace: false,
            })
            .collect();
        let peers: String = nodes
            .iter()
            .map(|p| match p.witness {
                false => format!(
                    "  - {{ id: {}, election: \"127.0.0.1:{}\", data: \"127.0.0.1:{}\", api: \"127.0.0.1:{}\" }}\n",
                    p.id, p.election_port, p.data_port, p.api_port
                ),
                true => format!(
                    "  - {{ id: {}, election: \"127.0.0.1:{}\", api: \"127.0.0.1:{}\", witness: true }}\n",
                    p.id, p.election_port, p.api_port
                ),
            })
            .collect();
        for node in &mut nodes {
            std::fs::create_dir_all(node.dir.join("data")).unwrap();
            let data_node = match node.witness {
                true => String::new(),
                false => format!(
                    "data_node: {{ kind: {kind}, address: \"127.0.0.1:{d}\"{gate}{extra} }}\n",
                    gate = if without_gate {
                        String::new()
                    } else {
                        format!(", local_replication_port_offset: {KEVY_LOCAL_REPLICATION_OFFSET}")
                    },
                    kind = if backend == Backend::Kevy {
                        "kevy"
                    } else {
                        "redis"
                    },
                    d = node.data_port,
                    extra = if data_node_extra.is_empty() {
                        String::new()
                    } else {
                        format!(", {data_node_extra}")
                    },
                ),
            };
            let yaml = format!(
                "node_id: {id}\nlisten: {{ election: \"127.0.0.1:{e}\", api: \"127.0.0.1:{a}\", sentinel: \"127.0.0.1:{s}\" }}\n\
                 data_dir: {dir}/elector\n{data_node}peers:\n{peers}timings: {t}\n{extra}",
                extra = node_extra(&node.id),
                t = timings.0,
                id = node.id,
                e = node.election_port,
                a = node.api_port,
                s = node.sentinel_port,
                dir = node.dir.display(),
            );
            std::fs::write(node.dir.join("elector.yaml"), yaml).unwrap();
        }
        let mut cluster = Cluster {
            backend,
            nodes,
            down_after_ms: timings.1,
            elector_nofile: nofile,
            without_gate,
            _tmp: tmp,
        };
        for i in 0..n {
            cluster.try_start_node(i)?;
        }
        Ok(cluster)
    }

    /// Starts node `i`'s data node and waits until it answers `PING`; a node
    /// that exits because its port is in use is reported, not waited for.
    fn start_data(&mut self, i: usize) -> Result<(), PortTaken> {
        let node = &mut self.nodes[i];
        let data_dir = node.dir.join("data");
        let log = std::fs::File::create(node.dir.join("data.log")).unwrap();
        let child = match self.backend {
            Backend::Kevy => {
                let toml = format!(
                    "[server]\nbind = \"127.0.0.1\"\nport = {}\nthreads = 1\ndata_dir = \"{}\"\n\
                     [persistence]\naof = true\n[replication]\nrole = \"replica\"\nupstream = \"127.0.0.1:1\"\n\
                     reconnect_window_ms = 1000\nlisten_port_base = {}\n\
                     [expiry]\nhz = 100\n[advanced]\npark_timeout_ms = 10\n",
                    node.data_port,
                    data_dir.display(),
                    node.data_port
                        + if self.without_gate {
                            10_000
                        } else {
                            KEVY_LOCAL_REPLICATION_OFFSET
                        }
                );
                let path = node.dir.join("kevy.toml");
                std::fs::write(&path, toml).unwrap();
                let mut cmd = Command::new("kevy");
                cmd.arg("--config").arg(&path);
                in_pid_namespace(cmd, node.own_pid_namespace)
                    .stdout(log.try_clone().unwrap())
                    .stderr(log)
                    .spawn()
            }
            Backend::Redis => {
                let mut cmd = redis_server_command(node.data_port, &data_dir);
                cmd.args(["--appendonly", "yes", "--replicaof", "127.0.0.1", "1"]);
                in_pid_namespace(cmd, node.own_pid_namespace)
                    .stdout(log.try_clone().unwrap())
                    .stderr(log)
                    .spawn()
            }
        };
        // Held by the node from here on, so a failed wait still kills it.
        let child = node.data.insert(child.expect("start data node"));
        let port = node.data_port;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                let log = std::fs::read_to_string(node.dir.join("data.log")).unwrap_or_default();
                if log.contains("Address already in use") {
                    return Err(PortTaken(port));
                }
                panic!("data node on port {port} exited ({status}) before answering:\n{log}");
            }
            if try_connect("127.0.0.1", port, Duration::from_secs(1))
                .is_some_and(|mut c| c.ping().is_ok())
            {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "timed out after 10 s waiting for the data node on port {port} to accept connections"
            );
            std::thread::sleep(Duration::from_millis(25));
        }
        Ok(())
    }

    /// Starts (or restarts) node `i`: its data node, then its elector.
    pub fn start_node(&mut self, i: usize) {
        let port = self.nodes[i].data_port;
        self.try_start_node(i)
            .unwrap_or_else(|_| panic!("node {i}'s data port {port} is taken by another process"));
    }

    fn try_start_node(&mut self, i: usize) -> Result<(), PortTaken> {
        if !self.nodes[i].witness {
            self.start_data(i)?;
        }
        self.start_elector(i);
        Ok(())
    }

    /// Starts node `i`'s elector alone (its data node untouched), from the
    /// `elector.yaml` in its directory as it is now; its log starts afresh.
    pub fn start_elector(&mut self, i: usize) {
        self.start_elector_with(i, &[]);
    }

    /// [`Cluster::start_elector`] with more arguments to `elector run`
    /// (`--reset-state`).
    pub fn start_elector_with(&mut self, i: usize, args: &[&str]) {
        let node = &mut self.nodes[i];
        let log = std::fs::File::create(node.dir.join(format!("elector-{}.log", node.id))).unwrap();
        let bin = node.elector_bin.clone();
        let mut cmd = match self.elector_nofile {
            // `exec` keeps the pid, so signals reach the elector itself.
            Some(n) => {
                let mut c = Command::new("sh");
                c.arg("-c")
                    .arg(format!("ulimit -n {n} && exec \"$0\" \"$@\""))
                    .arg(bin);
                c
            }
            None => Command::new(bin),
        };
        let child = cmd
            .arg("run")
            .arg("--config")
            .arg(node.dir.join("elector.yaml"))
            .args(args)
            .env("ELECTOR_LOG", elector_log_filter())
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start elector");
        node.elector = Some(child);
    }

    /// SIGKILL of elector and data node, as the node supervisor does.
    pub fn kill_node(&mut self, i: usize) {
        stop_child(&mut self.nodes[i].watchdog);
        stop_child(&mut self.nodes[i].elector);
        stop_child(&mut self.nodes[i].data);
    }

    /// SIGKILL of the data node alone; its elector keeps running.
    pub fn kill_data(&mut self, i: usize) {
        stop_child(&mut self.nodes[i].data);
    }

    /// Starts the data node again under a running elector, with its data
    /// (AOF) or with an emptied data directory.
    pub fn restart_data(&mut self, i: usize, keep_data: bool) {
        let dir = self.nodes[i].dir.join("data");
        if !keep_data {
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
        }
        self.start_data(i).unwrap_or_else(|PortTaken(port)| {
            panic!("node {i}'s data port {port} was taken while it was down")
        });
    }

    /// Sends `signal` (`STOP`, `CONT`, `TERM`) to node `i`'s elector.
    pub fn signal_elector(&self, i: usize, signal: &str) {
        let pid = self.nodes[i].elector.as_ref().expect("elector runs").id();
        let ok = Command::new("kill")
            .args([format!("-{signal}"), pid.to_string()])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "kill -{signal} {pid}");
    }

    /// Waits for node `i`'s elector to exit (after a SIGTERM).
    pub fn wait_elector_exit(&mut self, i: usize, within: Duration) {
        let child = self.nodes[i].elector.as_mut().expect("elector runs");
        let deadline = Instant::now() + within;
        while child.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "elector did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
        self.nodes[i].elector = None;
    }

    /// Starts `elector watchdog` beside node `i` (protocol §6.4.1).
    pub fn start_watchdog(&mut self, i: usize) {
        let node = &mut self.nodes[i];
        let log =
            std::fs::File::create(node.dir.join(format!("watchdog-{}.log", node.id))).unwrap();
        let child = Command::new(&node.elector_bin)
            .arg("watchdog")
            .arg("--config")
            .arg(node.dir.join("elector.yaml"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start watchdog");
        node.watchdog = Some(child);
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.dump_logs();
        }
        for i in 0..self.nodes.len() {
            self.kill_node(i);
            release_data_port(self.nodes[i].data_port);
        }
    }
}
