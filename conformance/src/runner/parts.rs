//! Steps for parts of a node failing alone (docs/protocol.md §6.4.1, §6.8): the
//! elector frozen or stopped, the data node restarted under it, the state
//! directory unwritable, the fence lifted by hand, and a planned switchover.
//! They are named in the shared fault vocabulary (`faults`), so scenario files
//! say what fails instead of carrying the shell that does it.

use std::collections::BTreeSet;
use std::time::Duration;

use faults::FaultKind;

use super::comeback::Thaw;
use super::control::Run;
use crate::error::Result;
use crate::probe;
use crate::scenario::{PauseSpec, RestartDataSpec, RestartElectorSpec, SwitchoverSpec, Targets};

/// The elector's main process (the shipped binary or the deliberately broken
/// one), and only it: the watchdog is the same binary (`elector watchdog`),
/// so matching the process name (`pkill -x elector`) would take the dead-man
/// switch down with the process it watches.
const ELECTOR_RE: &str = "'^/usr/local/bin/elector(-faulty)? run'";

/// A shell line sending `sig` (`9`, `STOP`, `TERM`, ...) to the elector's
/// main process alone. Every step that signals the elector uses it.
pub(super) fn signal_elector(sig: &str) -> String {
    format!("pkill -{sig} -f {ELECTOR_RE}; true")
}

const STATE_READ_ONLY: &str =
    "chmod 0500 /var/lib/elector && chmod 0400 /var/lib/elector/state.json";
const STATE_WRITABLE: &str =
    "chmod 0700 /var/lib/elector; chmod 0600 /var/lib/elector/state.json 2>/dev/null; true";

/// What `thaw` (and the end phase) runs: SIGCONT and a writable state dir.
/// The two are separate commands: joined by a space, `true chmod 0700 ...`
/// made the directory's chmod an argument of `true`, so no `thaw` ever made a
/// read-only state directory writable again (found while checking that a
/// thaw reaches a node that was away, issue 21).
pub(super) fn thaw_script() -> String {
    format!(
        "{}; {}; {STATE_WRITABLE}",
        signal_elector("CONT"),
        signal_data("CONT")
    )
}

/// An operator lifting the fence by hand. Each call is bounded: against a
/// stopped data node (a `stall_data` still in force) `redis-cli` waits for
/// ever, and chaos seed 5801 hung on it for four minutes. When the node does
/// not answer the first call in 3 s the rest are not sent and the step's
/// output says so; that first command may still run when the node resumes,
/// its effect unknown, as a hand change would be.
const LIFT_FENCE: &str = "p=$(cat /etc/elector/data-port); \
    cli() { timeout -s KILL 3 redis-cli -p $p \"$@\"; }; \
    cli CONFIG SET min-replicas-to-write 0 >/dev/null \
      || { echo 'data node did not answer within 3 s'; exit 0; }; \
    cli CONFIG SET replica-read-only no >/dev/null; \
    cli REPLICAOF NO ONE >/dev/null; \
    cli ROLE | head -1";

/// The gap the entrypoint waits before its next data-node restart, when a
/// step gives one (read once and removed by `docker/entrypoint.sh`).
const GAP_FILE: &str = "/tmp/data-restart-gap-ms";

/// The gap before the entrypoint starts an elector that exited again, its
/// data node left running; without this file an elector that exits takes the
/// node down (read once and removed by `docker/entrypoint.sh`).
const ELECTOR_RESTART_FILE: &str = "/tmp/elector-restart-gap-ms";

/// `restart_elector`: the request first, so the entrypoint sees it when the
/// elector exits, then the signal; both only while an elector runs there. A
/// request written for an elector already gone (in the gap of an earlier
/// restart) would stay behind, and a later, unrelated elector exit would
/// then restart the elector instead of taking the node down.
fn elector_restart_script(r: &RestartElectorSpec) -> String {
    let sig = if r.kill { "9" } else { "TERM" };
    format!(
        "if pgrep -f {ELECTOR_RE} >/dev/null; then echo {} > {ELECTOR_RESTART_FILE}; {}; fi; true",
        r.gap_ms,
        signal_elector(sig)
    )
}

/// Where `copy_data` keeps a node's data directory (`<dir>-kevy`,
/// `<dir>-redis`), outside the data root the wipe clears.
const OLDER_DATA: &str = "/var/tmp/older-data";

/// `copy_data`: each backend's data directory copied aside as it is now.
fn copy_data_script() -> String {
    format!(
        "for b in kevy redis; do if [ -d /data/$b ]; then \
         rm -rf {OLDER_DATA}-$b && cp -a /data/$b {OLDER_DATA}-$b; fi; done; true"
    )
}

fn data_restart_script(r: &RestartDataSpec) -> String {
    let gap = r
        .gap_ms
        .map_or(String::new(), |ms| format!(" echo {ms} > {GAP_FILE};"));
    let files = if r.lose_data {
        " rm -rf /data/kevy/* /data/redis/*;".to_string()
    } else if r.older {
        format!(
            " for b in kevy redis; do if [ -d {OLDER_DATA}-$b ]; then \
             rm -rf /data/$b/* && cp -a {OLDER_DATA}-$b/. /data/$b/; fi; done;"
        )
    } else {
        String::new()
    };
    // The gap and the files first: with a gap of 0 the entrypoint starts
    // the data node again the moment it dies, before anything after the
    // kill would run (it would come back with its files).
    format!("{gap}{files} pkill -9 -x kevy; pkill -9 -x redis-server; true")
}

/// SIGSTOP / SIGCONT of the data node alone.
fn signal_data(sig: &str) -> String {
    format!("pkill -{sig} -x kevy; pkill -{sig} -x redis-server; true")
}

/// The faults `thaw` (and the end phase) undo.
pub(super) const THAWED_KINDS: [FaultKind; 3] = [
    FaultKind::FreezeElector,
    FaultKind::ReadOnlyState,
    FaultKind::StallData,
];

pub(super) fn thawed_kind_names() -> Vec<&'static str> {
    THAWED_KINDS.iter().map(|k| k.name()).collect()
}

impl Run<'_> {
    /// Targets that are running and not frozen: a process there can be
    /// signalled. A container that stopped on its own (an entrypoint that
    /// exited) is marked down here, so composed faults skip it instead of
    /// failing the run on a dead container.
    pub(super) async fn live_targets(&mut self, t: &Targets) -> Result<Vec<String>> {
        let all = self.resolve(&t.tokens(), &BTreeSet::new()).await?;
        let mut live = vec![];
        for n in all {
            if self.down.contains(&n) || self.paused.contains(&n) {
                continue;
            }
            if let Ok((false, _)) = self.cluster.state(&n).await {
                self.stopped_alone.insert(n.clone());
                self.down.insert(n);
                continue;
            }
            live.push(n);
        }
        Ok(live)
    }

    /// Marks down every container that stopped on its own, so that steps
    /// touching every node (a partition, `heal`, netem on `all`) skip it
    /// instead of failing the run, and `restart: down` brings it back. Found
    /// by chaos seed 2126 (kevy, 3 nodes): `read_only_state n2`, then
    /// `kill_elector` on n2; the restarted elector refused its unwritable
    /// state directory and the container exited, and the next `isolate`
    /// failed on it ("container is not running"), ending the run.
    pub(super) async fn mark_stopped_down(&mut self) {
        for n in self.cluster.ids() {
            if !self.down.contains(&n) && matches!(self.cluster.state(&n).await, Ok((false, _))) {
                self.stopped_alone.insert(n.clone());
                self.down.insert(n);
            }
        }
    }

    /// Runs `script` on each target, records a fault of `kind`, and returns
    /// the fault's index and the targets.
    async fn script_fault(
        &mut self,
        kind: FaultKind,
        label: String,
        targets: &Targets,
        script: &str,
        removes_if_primary: bool,
    ) -> Result<(usize, Vec<String>, String)> {
        let targets = self.live_targets(targets).await?;
        let primary_before = self.primary_now().await;
        let at = self.now();
        let mut outs = vec![];
        if targets.is_empty() {
            // Said in the report: a scenario whose fault hit nothing did not
            // test what it says (chaos schedules aim at nodes that are down).
            outs.push("no live target: nothing done".to_string());
        }
        for n in &targets {
            let (code, out) = self.cluster.exec(n, &["sh", "-c", script]).await?;
            outs.push(format!("{n}: rc={code} {}", out.trim()));
        }
        let removes =
            removes_if_primary && primary_before.as_ref().is_some_and(|p| targets.contains(p));
        let idx = self.record_fault(
            at,
            kind.name(),
            label,
            targets.clone(),
            primary_before,
            removes,
        );
        Ok((idx, targets, outs.join("; ")))
    }

    /// Closes a fault that ends as it happens (the process came back, the
    /// request was made).
    fn close_now(&mut self, idx: usize) {
        self.close_at(idx, self.now());
    }

    /// Closes a fault as of `at` (which may lie ahead: a restart the
    /// supervisor's timer will make).
    fn close_at(&mut self, idx: usize, at: crate::history::Ms) {
        self.faults[idx].end_ms = Some(at);
        self.open.retain(|(i, _)| *i != idx);
    }

    /// `freeze_elector` and `read_only_state`: on, then (with a duration)
    /// off again; the end phase undoes them whatever happened.
    pub(super) async fn timed_part_fault(
        &mut self,
        kind: FaultKind,
        label: String,
        p: &PauseSpec,
    ) -> Result<String> {
        let (on, off) = match kind {
            FaultKind::FreezeElector => (signal_elector("STOP"), signal_elector("CONT")),
            FaultKind::StallData => (signal_data("STOP"), signal_data("CONT")),
            _ => (STATE_READ_ONLY.to_string(), STATE_WRITABLE.to_string()),
        };
        let (_, targets, out) = self
            .script_fault(
                kind,
                label,
                &p.targets,
                &on,
                matches!(kind, FaultKind::FreezeElector | FaultKind::StallData),
            )
            .await?;
        self.undo_at_end.push((targets.clone(), off.clone()));
        for n in &targets {
            self.part_faults.applied(n);
        }
        if let Some(d) = p.duration {
            tokio::time::sleep(d.as_duration()).await;
            let mut reached = vec![];
            for n in &targets {
                let reachable = !self.down.contains(n) && !self.paused.contains(n);
                if self.part_faults.end(n, reachable) == Thaw::Now {
                    self.cluster.exec(n, &["sh", "-c", &off]).await?;
                    reached.push(n.clone());
                }
            }
            self.recovered(&reached, &[kind.name()]);
        }
        Ok(out)
    }

    pub(super) async fn stop_elector(&mut self, t: &Targets) -> Result<String> {
        let targets = self.live_targets(t).await?;
        let notes = self
            .kill_process(
                &format!("stop elector {}", targets.join(",")),
                FaultKind::StopElector.name(),
                targets.clone(),
                &signal_elector("TERM"),
            )
            .await?;
        Ok(format!("{} {notes}", targets.join(",")))
    }

    /// Returns once every target's elector has gone (a clean stop fences
    /// first), so that later steps play while they are down (a data node
    /// emptied meanwhile); the supervisor starts each one `gap_ms` after it
    /// exited, which is when the fault ends. Whether they came back and
    /// elected is for the next `wait_primary` to show.
    pub(super) async fn restart_elector(
        &mut self,
        r: &RestartElectorSpec,
        label: String,
    ) -> Result<String> {
        let kind = if r.kill {
            FaultKind::KillElector
        } else {
            FaultKind::StopElector
        };
        let (idx, targets, out) = self
            .script_fault(kind, label, &r.on, &elector_restart_script(r), true)
            .await?;
        let gone_by = tokio::time::Instant::now() + Duration::from_secs(15);
        let mut still_up = vec![];
        for n in &targets {
            while self.elector_answers(n).await {
                if tokio::time::Instant::now() >= gone_by {
                    still_up.push(n.clone());
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        self.close_at(idx, self.now() + r.gap_ms);
        if still_up.is_empty() {
            Ok(format!(
                "{out}; every elector gone, back in {} ms",
                r.gap_ms
            ))
        } else {
            Ok(format!("{out}; still answering after 15 s: {still_up:?}"))
        }
    }

    async fn elector_answers(&self, n: &str) -> bool {
        let Ok(node) = self.cluster.node(n) else {
            return false;
        };
        probe::get_status(&node.api_addr(), Duration::from_millis(500))
            .await
            .is_some()
    }

    pub(super) async fn restart_data(
        &mut self,
        r: &RestartDataSpec,
        label: String,
    ) -> Result<String> {
        let (idx, _, out) = self
            .script_fault(
                FaultKind::RestartData,
                label,
                &r.on,
                &data_restart_script(r),
                r.lose_data || r.older,
            )
            .await?;
        self.close_now(idx);
        Ok(out)
    }

    /// `copy_data`: the targets' data directories copied aside (not a fault).
    pub(super) async fn copy_data(&mut self, t: &Targets) -> Result<String> {
        let targets = self.live_targets(t).await?;
        let script = copy_data_script();
        for n in &targets {
            self.cluster.exec(n, &["sh", "-c", &script]).await?;
        }
        Ok(targets.join(","))
    }

    pub(super) async fn lift_fence(&mut self, t: &Targets, label: String) -> Result<String> {
        let (idx, _, out) = self
            .script_fault(FaultKind::LiftFence, label, t, LIFT_FENCE, false)
            .await?;
        self.close_now(idx);
        Ok(out)
    }

    /// `POST /switchover` to the current primary's elector. A refusal (no
    /// primary, a switchover already running, a target that cannot take over)
    /// is noted, not an error: under composed faults it is a fair answer.
    pub(super) async fn switchover(&mut self, s: &SwitchoverSpec, label: String) -> Result<String> {
        let Some(primary) = self.primary_now().await else {
            return Ok("no primary: nothing to hand over".into());
        };
        let to = self
            .resolve(std::slice::from_ref(&s.to), &BTreeSet::new())
            .await?;
        let Some(to) = to.into_iter().find(|n| *n != primary) else {
            return Ok(format!("{} is the primary already", s.to));
        };
        let Some(api) = self
            .cluster
            .nodes
            .iter()
            .find(|n| n.id == primary)
            .map(|n| n.api_addr())
        else {
            return Ok(format!("{primary}: unknown node"));
        };
        let at = self.now();
        let body = match s.timeout_ms {
            Some(ms) => format!(r#"{{"to":"{to}","timeout_ms":{ms}}}"#),
            None => format!(r#"{{"to":"{to}"}}"#),
        };
        let answer =
            probe::http_post_json(&api, "/switchover", &body, Duration::from_secs(15)).await;
        let idx = self.record_fault(
            at,
            FaultKind::Switchover.name(),
            label,
            vec![primary.clone(), to.clone()],
            Some(primary.clone()),
            false,
        );
        self.close_now(idx);
        Ok(match answer {
            Some((code, body)) => format!(
                "{primary} -> {to}: HTTP {code} {}",
                String::from_utf8_lossy(&body).trim()
            ),
            None => format!("{primary} -> {to}: no answer"),
        })
    }

    /// Ends freezes and read-only state directories. A node that is paused or
    /// stopped gets its thaw when it is back (`comeback`); one that stopped on
    /// its own (its restarted elector refused the read-only directory) is
    /// started again now, as systemd's `Restart=` would once the disk is fixed.
    pub(super) async fn thaw(&mut self, t: &Targets) -> Result<String> {
        let all = self.resolve(&t.tokens(), &BTreeSet::new()).await?;
        let live = self.live_targets(t).await?;
        let script = thaw_script();
        let mut notes = vec![];
        for n in &all {
            match self.part_faults.end(n, live.contains(n)) {
                Thaw::Now => {
                    self.cluster.exec(n, &["sh", "-c", &script]).await?;
                    notes.push(n.clone());
                }
                Thaw::WhenBack if self.stopped_alone.contains(n) => {
                    self.cluster.start_node(n).await?;
                    self.down.remove(n);
                    self.back_from_start(n).await?;
                    notes.push(format!("{n} (had stopped: started again)"));
                }
                Thaw::WhenBack => notes.push(format!("{n} (when back)")),
                Thaw::Nothing => {}
            }
        }
        self.recovered(&live, &thawed_kind_names());
        Ok(notes.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Starts `sleep` under a forged command line (what `pgrep -f` matches).
    fn decoy(cmdline: &str) -> std::process::Child {
        std::process::Command::new("bash")
            .arg("-c")
            .arg(format!("exec -a '{cmdline}' sleep 30"))
            .spawn()
            .expect("bash")
    }

    #[test]
    fn the_elector_signal_reaches_the_elector_run_and_never_its_watchdog() {
        // The defect: `pkill -x elector` also killed `elector watchdog`.
        let mut run = decoy("/usr/local/bin/elector run --config /etc/elector/elector.yaml");
        let mut faulty =
            decoy("/usr/local/bin/elector-faulty run --config /etc/elector/elector.yaml");
        let mut watchdog =
            decoy("/usr/local/bin/elector watchdog --config /etc/elector/elector.yaml");
        std::thread::sleep(Duration::from_millis(200));
        let script = signal_elector("9").replace("pkill -9", "pgrep");
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(&script)
            .output()
            .expect("pgrep");
        let found: BTreeSet<u32> = String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect();
        for c in [&mut run, &mut faulty, &mut watchdog] {
            let _ = c.kill();
            let _ = c.wait();
        }
        assert!(found.contains(&run.id()), "{script}: {found:?}");
        assert!(found.contains(&faulty.id()), "{script}: {found:?}");
        assert!(!found.contains(&watchdog.id()), "{script}: {found:?}");
    }

    /// `script` run by `sh` with its paths moved under `root` and its
    /// signals printed instead of sent (a kevy of another test may run here).
    fn run_in(root: &std::path::Path, script: &str) {
        run_in_with(root, script, true)
    }

    /// As [`run_in`], `pgrep` answering as if an elector runs or not.
    fn run_in_with(root: &std::path::Path, script: &str, elector_running: bool) {
        let r = root.display();
        let pgrep = if elector_running { "true" } else { "false" };
        let script = script
            .replace("pgrep", &format!("{pgrep} pgrep"))
            .replace(OLDER_DATA, &format!("{r}/older"))
            .replace(GAP_FILE, &format!("{r}/gap"))
            .replace(ELECTOR_RESTART_FILE, &format!("{r}/elector-restart"))
            .replace("/data/", &format!("{r}/data/"))
            .replace("/data ", &format!("{r}/data "))
            .replace("pkill", "echo pkill");
        let out = std::process::Command::new("sh")
            .args(["-c", &script])
            .output()
            .unwrap();
        assert!(out.status.success(), "{script}: {out:?}");
    }

    /// A scratch directory removed at the end.
    struct Scratch(std::path::PathBuf);
    impl Scratch {
        fn path(&self) -> &std::path::Path {
            &self.0
        }
    }
    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn lifting_the_fence_of_a_data_node_that_never_answers_gives_up_within_seconds() {
        // A listener that accepts and never reads: what a SIGSTOPped kevy is
        // to a client (the kernel completes the handshake).
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let dir = std::env::temp_dir().join(format!("lift-fence-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let root = Scratch(dir);
        std::fs::create_dir_all(root.path()).unwrap();
        let port_file = root.path().join("data-port");
        std::fs::write(&port_file, port.to_string()).unwrap();
        let script = LIFT_FENCE.replace("/etc/elector/data-port", &port_file.display().to_string());
        let started = std::time::Instant::now();
        let out = std::process::Command::new("sh")
            .args(["-c", &script])
            .output()
            .unwrap();
        let took = started.elapsed();
        drop(listener);
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(said.contains("did not answer"), "{out:?}");
        assert!(took < Duration::from_secs(10), "took {took:?}");
    }

    fn spec(lose_data: bool, older: bool, gap_ms: Option<u64>) -> RestartDataSpec {
        RestartDataSpec {
            on: Targets::One("primary".into()),
            lose_data,
            older,
            gap_ms,
        }
    }

    #[test]
    fn a_data_node_restart_comes_back_with_its_files_empty_or_from_the_older_copy() {
        let dir = std::env::temp_dir().join(format!("restart-data-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let root = Scratch(dir);
        let aof = root.path().join("data/kevy/appendonly.aof");
        let read = || std::fs::read_to_string(&aof).ok();
        std::fs::create_dir_all(aof.parent().unwrap()).unwrap();
        std::fs::write(&aof, "acknowledged before the copy\n").unwrap();
        run_in(root.path(), &copy_data_script());
        std::fs::write(&aof, "acknowledged after the copy\n").unwrap();

        run_in(root.path(), &data_restart_script(&spec(false, false, None)));
        assert_eq!(read().as_deref(), Some("acknowledged after the copy\n"));
        assert!(
            !root.path().join("gap").exists(),
            "no gap given: the container's"
        );

        run_in(
            root.path(),
            &data_restart_script(&spec(false, true, Some(30))),
        );
        assert_eq!(read().as_deref(), Some("acknowledged before the copy\n"));
        let gap = std::fs::read_to_string(root.path().join("gap")).unwrap();
        assert_eq!(gap.trim(), "30");

        run_in(
            root.path(),
            &data_restart_script(&spec(true, false, Some(0))),
        );
        assert_eq!(read(), None, "wiped");
        assert!(
            root.path().join("data/kevy").is_dir(),
            "the directory stays"
        );
    }

    #[test]
    fn an_elector_restart_asks_the_entrypoint_for_it_before_it_signals_the_elector() {
        let dir = std::env::temp_dir().join(format!("restart-elector-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let root = Scratch(dir);
        let file = root.path().join("elector-restart");
        for (kill, sig) in [(false, "TERM"), (true, "9")] {
            let r = RestartElectorSpec {
                on: Targets::One("all".into()),
                kill,
                gap_ms: 5000,
            };
            let script = elector_restart_script(&r);
            let request = script.find(ELECTOR_RESTART_FILE).expect("request");
            let signal = script.find(&signal_elector(sig)).expect("signal");
            assert!(request < signal, "{script}");
            run_in(root.path(), &script);
            assert_eq!(std::fs::read_to_string(&file).unwrap().trim(), "5000");
            std::fs::remove_file(&file).unwrap();
            run_in_with(root.path(), &script, false);
            assert!(
                !file.exists(),
                "no request is left behind for an elector already gone: {script}"
            );
        }
    }

    #[test]
    fn thaw_undoes_freeze_stall_and_read_only_state() {
        let t = thaw_script();
        let commands: Vec<&str> = t.split(';').map(str::trim).collect();
        assert!(
            commands.iter().any(|c| c.starts_with("pkill -CONT -f")),
            "{t}"
        );
        assert!(commands.contains(&"pkill -CONT -x kevy"), "{t}");
        assert!(commands.contains(&"pkill -CONT -x redis-server"), "{t}");
        // Each a command of its own, not an argument of the one before.
        assert!(commands.contains(&"chmod 0700 /var/lib/elector"), "{t}");
    }

    #[test]
    fn the_thaw_script_makes_a_read_only_directory_writable_when_run() {
        // The script as the container runs it, on a scratch directory.
        let dir = std::env::temp_dir().join(format!("thaw-{}", std::process::id()));
        let state = dir.join("state.json");
        std::fs::create_dir_all(&dir).expect("dir");
        std::fs::write(&state, "{}").expect("file");
        // Without the SIGCONT: on this host it would reach the electors of
        // running containers.
        let script = thaw_script()
            .replace(&signal_elector("CONT"), "true")
            .replace(&signal_data("CONT"), "true")
            .replace("/var/lib/elector", &dir.display().to_string());
        let on = STATE_READ_ONLY.replace("/var/lib/elector", &dir.display().to_string());
        let run = |s: &str| {
            std::process::Command::new("sh")
                .arg("-c")
                .arg(s)
                .status()
                .expect("sh")
        };
        assert!(run(&on).success());
        assert!(run(&script).success());
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&dir).expect("meta").permissions().mode() & 0o777;
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(mode, 0o700, "{script}");
    }
}
