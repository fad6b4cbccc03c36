//! Resident memory and CPU of the processes doing a target's failover work
//! (the elector and its watchdog, redis-sentinel), read from /proc inside each
//! container at the end of a run. kevy's election is a thread of the data node
//! and has nothing separate to read.

use serde::{Deserialize, Serialize};

/// One control process as /proc showed it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProcUsage {
    pub node: String,
    pub process: String,
    pub pid: u32,
    /// VmRSS.
    pub rss_kib: u64,
    /// utime + stime since the process started.
    pub cpu_s: f64,
    /// Wall time since the process started.
    pub wall_s: f64,
}

impl ProcUsage {
    /// Average share of one core over the process's life, in percent.
    pub fn cpu_pct(&self) -> f64 {
        if self.wall_s <= 0.0 {
            0.0
        } else {
            100.0 * self.cpu_s / self.wall_s
        }
    }
}

/// Shell script printing one line per process named in `names`:
/// `name pid rss_kib utime stime starttime uptime_s clk_tck`.
pub fn script(names: &[&str]) -> String {
    format!(
        "clk=$(getconf CLK_TCK); up=$(cut -d' ' -f1 /proc/uptime); \
         for n in {}; do for p in $(pgrep -x $n); do \
         rss=$(awk '/^VmRSS:/{{print $2}}' /proc/$p/status); \
         st=$(cut -d' ' -f14,15,22 /proc/$p/stat); \
         echo \"$n $p $rss $st $up $clk\"; done; done; true",
        names.join(" ")
    )
}

/// Parses the script's output for one node; malformed lines are skipped.
pub fn parse(node: &str, out: &str) -> Vec<ProcUsage> {
    out.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let [name, pid, rss, utime, stime, start, up, clk] = f.as_slice() else {
                return None;
            };
            let clk: f64 = clk.parse().ok().filter(|c: &f64| *c > 0.0)?;
            let ticks = |s: &str| s.parse::<f64>().ok().map(|t| t / clk);
            let up: f64 = up.parse().ok()?;
            Some(ProcUsage {
                node: node.to_string(),
                process: name.to_string(),
                pid: pid.parse().ok()?,
                rss_kib: rss.parse().ok()?,
                cpu_s: ticks(utime)? + ticks(stime)?,
                wall_s: (up - ticks(start)?).max(0.0),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_lines_turn_into_memory_and_cpu_share() {
        let out =
            "elector 41 5120 150 50 1000 40.00 100\nredis-sentinel 7 9000 10 10 3000 40.00 100\n";
        let u = parse("n1", out);
        assert_eq!(u.len(), 2);
        assert_eq!(
            (u[0].process.as_str(), u[0].pid, u[0].rss_kib),
            ("elector", 41, 5120)
        );
        assert!((u[0].cpu_s - 2.0).abs() < 1e-9);
        assert!((u[0].wall_s - 30.0).abs() < 1e-9);
        assert!((u[0].cpu_pct() - 100.0 * 2.0 / 30.0).abs() < 1e-9);
        assert!((u[1].wall_s - 10.0).abs() < 1e-9);
    }

    #[test]
    fn a_process_that_vanished_between_pgrep_and_proc_is_skipped() {
        assert!(parse("n1", "elector 41  150 50 1000 40.0 100\n").is_empty());
        assert!(parse("n1", "").is_empty());
    }

    #[test]
    fn the_script_asks_pgrep_for_exact_names() {
        let s = script(&["elector", "redis-sentinel"]);
        assert!(s.contains("for n in elector redis-sentinel;"));
        assert!(s.contains("pgrep -x $n"));
    }
}
