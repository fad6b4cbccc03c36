//! The machine a benchmark ran on, read at the binary's edge (commands and /proc).

use conformance::bench::Machine;

fn cmd(program: &str, args: &[&str]) -> String {
    std::process::Command::new(program)
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into())
}

/// MemTotal from /proc/meminfo, in GiB.
fn memory() -> String {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            let kib: f64 = m
                .lines()
                .find(|l| l.starts_with("MemTotal:"))?
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()?;
            Some(format!("{:.1} GiB", kib / 1024.0 / 1024.0))
        })
        .unwrap_or_else(|| "unknown".into())
}

pub fn describe() -> Machine {
    Machine {
        nproc: cmd("nproc", &[]),
        memory: memory(),
        kernel: cmd("uname", &["-r"]),
        docker: cmd("docker", &["version", "--format", "{{.Server.Version}}"]),
        commit: cmd("git", &["rev-parse", "--short", "HEAD"]),
    }
}
