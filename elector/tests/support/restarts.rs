//! Data nodes restarted by something other than their elector (docs/protocol.md
//! §6.8, §6.10): at a chosen gap, empty, with their files, or from older
//! files, in their own PID namespace or not; and the operator's
//! `accept-data-loss`.

use super::{Backend, Cluster, PortTaken};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// What the data node comes back with.
#[derive(Clone, Debug)]
pub enum DataRestart {
    /// Its files as they were (AOF).
    Kept,
    /// An emptied data directory.
    Emptied,
    /// A copy of its data directory taken earlier ([`Cluster::copy_data`]):
    /// older than what it acknowledged since.
    From(PathBuf),
}

/// Copies a data directory while its data node runs. A file can vanish
/// under `cp` (Redis renames and removes its AOF rewrite's temporary files
/// in the background: a CI run failed on `temp-rewriteaof-bg-*.aof`), so a
/// failed copy is thrown away and taken again, as a backup tool would.
fn copy_dir(from: &Path, to: &Path) {
    const ATTEMPTS: u32 = 20;
    for attempt in 1..=ATTEMPTS {
        let ok = Command::new("cp")
            .arg("-a")
            .arg(from)
            .arg(to)
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            return;
        }
        let _ = std::fs::remove_dir_all(to);
        eprintln!(
            "cp -a {} {}: attempt {attempt} of {ATTEMPTS} failed (a file vanished under it?), again",
            from.display(),
            to.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!(
        "cp -a {} {} failed {ATTEMPTS} times",
        from.display(),
        to.display()
    );
}

impl Cluster {
    /// A copy of node `i`'s data directory as it is now (taken while the
    /// data node runs: as a backup or an AOF synced a moment ago would be).
    pub fn copy_data(&self, i: usize, label: &str) -> PathBuf {
        let node = &self.nodes[i];
        let to = node.dir.join(format!("data-copy-{label}"));
        let _ = std::fs::remove_dir_all(&to);
        copy_dir(&node.dir.join("data"), &to);
        to
    }

    /// SIGKILLs node `i`'s data node, waits `gap`, and starts it again under
    /// its running elector with `what` in its data directory, in a PID
    /// namespace of its own when `own_pid_namespace` (process 1 before and
    /// after). Gap 0 starts it as soon as its port is free again.
    pub fn restart_data_after(
        &mut self,
        i: usize,
        what: DataRestart,
        gap: Duration,
        own_pid_namespace: bool,
    ) {
        super::stop_child(&mut self.nodes[i].data);
        let dir = self.nodes[i].dir.join("data");
        match &what {
            DataRestart::Kept => {}
            DataRestart::Emptied => {
                let _ = std::fs::remove_dir_all(&dir);
                std::fs::create_dir_all(&dir).unwrap();
            }
            DataRestart::From(copy) => {
                let _ = std::fs::remove_dir_all(&dir);
                copy_dir(copy, &dir);
            }
        }
        std::thread::sleep(gap);
        self.nodes[i].own_pid_namespace = own_pid_namespace;
        // The killed process (or the namespace's) may hold the port a few
        // milliseconds more: start again until it binds.
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match self.start_data(i) {
                Ok(()) => return,
                Err(PortTaken(port)) if Instant::now() < deadline => {
                    super::stop_child(&mut self.nodes[i].data);
                    std::thread::sleep(Duration::from_millis(5));
                    let _ = port;
                }
                Err(PortTaken(port)) => panic!("node {i}'s data port {port} stayed taken"),
            }
        }
    }

    /// Sends `signal` (`STOP`, `CONT`) to node `i`'s data node.
    pub fn signal_data(&self, i: usize, signal: &str) {
        let pid = self.nodes[i].data.as_ref().expect("data node runs").id();
        // In its own PID namespace the child is `unshare`; its only child
        // is the data node.
        let target = if self.nodes[i].own_pid_namespace {
            let out = Command::new("pgrep")
                .args(["-P", &pid.to_string()])
                .output()
                .expect("pgrep");
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        } else {
            pid.to_string()
        };
        let ok = Command::new("kill")
            .args([format!("-{signal}"), target.clone()])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "kill -{signal} {target}");
    }

    /// `POST /accept-data-loss` on node `i` (protocol §6.10): its answer.
    pub fn accept_data_loss(&self, i: usize) -> serde_json::Value {
        let url = format!(
            "http://127.0.0.1:{}/accept-data-loss",
            self.nodes[i].api_port
        );
        let body = serde_json::json!({ "node": self.nodes[i].id }).to_string();
        match ureq::post(&url)
            .timeout(Duration::from_secs(5))
            .set("content-type", "application/json")
            .send_string(&body)
        {
            Ok(r) => r.into_json().unwrap_or_default(),
            Err(ureq::Error::Status(code, r)) => {
                panic!(
                    "accept-data-loss on {}: HTTP {code}: {}",
                    self.nodes[i].id,
                    r.into_string().unwrap_or_default()
                )
            }
            Err(e) => panic!("accept-data-loss on {}: {e}", self.nodes[i].id),
        }
    }

    /// Whether a write is acknowledged by `replicas` replicas (`WAIT`).
    pub fn backend_name(&self) -> &'static str {
        match self.backend {
            Backend::Kevy => "kevy",
            Backend::Redis => "redis",
        }
    }
}
