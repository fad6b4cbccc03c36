//! For tests that lay out their own data nodes: each node's `elector run`
//! and `elector watchdog` on one config file, logging to files beside it,
//! and the processes killed when the holder drops (also on a panic).

use std::path::Path;
use std::process::{Child, Command, Stdio};

/// Kills what it holds when dropped, also when a test panics.
pub struct Procs(pub Vec<Child>);

impl Drop for Procs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Starts `elector run` and `elector watchdog` on `config` for node `i`,
/// logging to `dir/run-n{i}.log` and `dir/watchdog-n{i}.log`.
pub fn start_elector_and_watchdog(dir: &Path, i: usize, config: &Path, procs: &mut Procs) {
    for what in ["run", "watchdog"] {
        let log = std::fs::File::create(dir.join(format!("{what}-n{i}.log"))).unwrap();
        procs.0.push(
            Command::new(env!("CARGO_BIN_EXE_elector"))
                .args([what, "--config"])
                .arg(config)
                .env("ELECTOR_LOG", "info")
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .expect("start elector"),
        );
    }
}

/// What node `i`'s `what` (`run` or `watchdog`) logged so far.
pub fn sidecar_log(dir: &Path, what: &str, i: usize) -> String {
    std::fs::read_to_string(dir.join(format!("{what}-n{i}.log"))).unwrap_or_default()
}
