//! The runner: plays one scenario against a real cluster and returns its result and
//! history. Whatever happens in the steps, the end phase restores the cluster (unpause,
//! restart, heal), reads every acknowledged write back, and removes the containers.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;

use crate::checkers::check_all;
use crate::cluster::{Cluster, ClusterConfig};
use crate::error::{Error, Result};
use crate::history::{FaultEvent, History, Ms, Outcome, PartitionRecord, Sample};
use crate::metrics;
use crate::nemesis::{self, Block};
use crate::probe::{self, DataConn};
use crate::report::{RunResult, StepLog};
use crate::scenario::{Scenario, Step};
use crate::workload::{self, NodeAddrs, Recorder};

pub const POLL_INTERVAL_MS: u64 = 100;

#[derive(Clone, Debug)]
pub struct RunOptions {
    pub image: String,
    pub out_dir: PathBuf,
    /// Labels everything this process creates (for cleanup on Ctrl-C).
    pub session: String,
    /// Upper bound on one scenario's steps.
    pub max_scenario: Duration,
}

struct Run<'a> {
    scn: &'a Scenario,
    cluster: Cluster,
    rec: Arc<Recorder>,
    seed: u64,
    down: BTreeSet<String>,
    paused: BTreeSet<String>,
    /// `exec` steps' undo scripts, run by the end phase (nodes, script).
    undo_at_end: Vec<(Vec<String>, String)>,
    faults: Vec<FaultEvent>,
    /// Open fault index -> nodes whose recovery ends it.
    open: Vec<(usize, BTreeSet<String>)>,
    partitions: Vec<PartitionRecord>,
    blocks: Vec<Block>,
    netem_on: bool,
    workers: Vec<JoinHandle<()>>,
    initial_primary: Option<String>,
    steps: Vec<StepLog>,
    writers_stopped_ms: Option<Ms>,
}

fn step_err(step: &str, e: impl std::fmt::Display) -> Error {
    Error::Step {
        step: step.to_string(),
        message: e.to_string(),
    }
}

impl<'a> Run<'a> {
    fn now(&self) -> Ms {
        self.rec.now_ms()
    }

    /// Fresh view of the cluster: one poll of every node now.
    async fn poll_all(&self) -> Vec<Sample> {
        let t = Duration::from_millis(400);
        let futs = self.cluster.nodes.iter().map(|n| {
            let rec = self.rec.clone();
            let id = n.id.clone();
            let addr = n.data_addr();
            async move {
                let mut c = DataConn::new(&addr, t);
                workload::poll_node(&rec, &id, &mut c, t).await
            }
        });
        futures::future::join_all(futs).await
    }

    /// What keeps the cluster from being whole, or `None` when it is: every
    /// elector heard every peer within 3 heartbeats, all name one primary,
    /// and every other data node is a replica with its link up.
    async fn mesh_gap(&self) -> Option<String> {
        let fresh_ms = 3 * self.scn.timings.hb_interval_ms.max(100);
        let t = Duration::from_millis(400);
        let mut primaries = BTreeSet::new();
        for n in &self.cluster.nodes {
            let Some(st) = probe::get_status(&n.api_addr(), t).await else {
                return Some(format!("{}: no /status", n.id));
            };
            for p in &st.peers {
                if p.last_seen_ms.is_none_or(|ms| ms > fresh_ms) {
                    return Some(format!(
                        "{} last heard {} {:?} ms ago",
                        n.id, p.id, p.last_seen_ms
                    ));
                }
            }
            primaries.insert(st.primary.clone());
        }
        if primaries.len() != 1 || primaries.iter().next().is_some_and(|p| p.is_none()) {
            return Some(format!("electors name primaries {primaries:?}"));
        }
        let primary = primaries.into_iter().next().flatten()?;
        for sample in self.poll_all().await {
            if sample.node == primary {
                continue;
            }
            let linked = sample
                .data
                .as_ref()
                .is_some_and(|d| d.role == "slave" && d.link_up == Some(true));
            if !linked {
                return Some(format!(
                    "{}: data node not linked to {primary}",
                    sample.node
                ));
            }
        }
        None
    }

    async fn primary_now(&self) -> Option<String> {
        workload::primary_of(&self.poll_all().await)
    }

    async fn wait_primary(&self, timeout: Duration, not: Option<&str>) -> Result<String> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(p) = self.primary_now().await {
                if Some(p.as_str()) != not {
                    return Ok(p);
                }
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(Error::Cluster(format!(
                    "no primary{} within {} ms",
                    not.map(|n| format!(" other than {n}")).unwrap_or_default(),
                    timeout.as_millis()
                )));
            }
            tokio::time::sleep(Duration::from_millis(POLL_INTERVAL_MS)).await;
        }
    }

    fn replicas_of(&self, primary: Option<&str>) -> Vec<String> {
        let mut r: Vec<String> = self
            .cluster
            .ids()
            .into_iter()
            .filter(|n| Some(n.as_str()) != primary)
            .collect();
        if !r.is_empty() {
            let k = (self.seed as usize) % r.len();
            r.rotate_left(k);
        }
        r
    }

    /// Resolves symbolic tokens (see the scenario module) to node ids.
    async fn resolve(
        &self,
        tokens: &[String],
        named_elsewhere: &BTreeSet<String>,
    ) -> Result<Vec<String>> {
        let needs_primary = tokens
            .iter()
            .any(|t| t.starts_with("primary") || t.starts_with("replica"));
        let primary = if needs_primary {
            self.primary_now()
                .await
                .or_else(|| self.rec.current_primary())
        } else {
            None
        };
        let mut out: Vec<String> = vec![];
        for t in tokens {
            let add: Vec<String> = match t.as_str() {
                "primary" => vec![primary
                    .clone()
                    .ok_or_else(|| Error::Target("primary (none visible)".into()))?],
                "old_primary" => vec![self
                    .faults
                    .iter()
                    .find_map(|f| f.primary_before.clone())
                    .or_else(|| self.initial_primary.clone())
                    .ok_or_else(|| Error::Target("old_primary (unknown)".into()))?],
                "replicas" => self.replicas_of(primary.as_deref()),
                "all" => self.cluster.ids(),
                "down" => self.down.iter().cloned().collect(),
                "others" => self
                    .cluster
                    .ids()
                    .into_iter()
                    .filter(|n| !named_elsewhere.contains(n))
                    .collect(),
                r if r.starts_with("replica") => {
                    let k: usize = r["replica".len()..].parse().unwrap_or(1);
                    let reps = self.replicas_of(primary.as_deref());
                    vec![reps
                        .get(k.saturating_sub(1))
                        .cloned()
                        .ok_or_else(|| Error::Target(r.to_string()))?]
                }
                id => vec![self.cluster.node(id)?.id.clone()],
            };
            for a in add {
                if !out.contains(&a) {
                    out.push(a);
                }
            }
        }
        Ok(out)
    }

    fn minority_now(&self) -> Vec<String> {
        nemesis::minority(&self.cluster.ids(), &self.blocks, self.scn.quorum())
    }

    fn healthy_majority(&self) -> Vec<String> {
        let minority = self.minority_now();
        self.cluster
            .ids()
            .into_iter()
            .filter(|n| !self.down.contains(n) && !self.paused.contains(n) && !minority.contains(n))
            .collect()
    }

    fn record_fault(
        &mut self,
        at_ms: Ms,
        kind: &str,
        label: String,
        nodes: Vec<String>,
        primary_before: Option<String>,
        removes_primary: bool,
    ) -> usize {
        let majority = self.healthy_majority();
        self.faults.push(FaultEvent {
            at_ms,
            end_ms: None,
            kind: kind.to_string(),
            label,
            nodes: nodes.clone(),
            primary_before,
            removes_primary,
            majority,
        });
        let idx = self.faults.len() - 1;
        self.open.push((idx, nodes.into_iter().collect()));
        idx
    }

    /// Marks nodes recovered from faults of the given kinds; closes faults all of whose
    /// nodes recovered.
    fn recovered(&mut self, nodes: &[String], kinds: &[&str]) {
        let now = self.now();
        let faults = &mut self.faults;
        self.open.retain_mut(|(idx, pending)| {
            if !kinds.contains(&faults[*idx].kind.as_str()) {
                return true;
            }
            for n in nodes {
                pending.remove(n);
            }
            if pending.is_empty() {
                faults[*idx].end_ms = Some(now);
                false
            } else {
                true
            }
        });
    }

    fn end_partition(&mut self) {
        let now = self.now();
        if let Some(p) = self.partitions.last_mut() {
            if p.end_ms.is_none() {
                p.end_ms = Some(now);
            }
        }
        let all = self.cluster.ids();
        self.recovered(&all, &["partition"]);
        self.blocks.clear();
    }

    async fn apply_partition(&mut self, label: String, blocks: Vec<Block>) -> Result<()> {
        self.end_partition();
        let primary_before = self.primary_now().await;
        let mut ips = BTreeMap::new();
        for id in self.cluster.ids() {
            if !self.down.contains(&id) {
                if let Ok(ip) = self.cluster.ip(&id).await {
                    ips.insert(id, ip);
                }
            }
        }
        // Every node's rules at once: applied one after another they took
        // ~150 ms per node, and the partition only exists once all are in.
        // The fault is timed from that moment, so checkers that count from
        // it (the minority's lease, the majority's election bound) do not
        // charge the nodes for the time the harness took.
        let scripts: Vec<(String, String)> = self
            .cluster
            .ids()
            .into_iter()
            .filter(|id| !self.down.contains(id) && !self.paused.contains(id))
            .map(|id| {
                let script = nemesis::iptables_script(&id, &blocks, &|n| ips.get(n).cloned());
                let full = format!(
                    "iptables -w -F INPUT && iptables -w -F OUTPUT{}{}",
                    if script.is_empty() { "" } else { " && " },
                    script
                );
                (id, full)
            })
            .collect();
        let cluster = &self.cluster;
        futures::future::try_join_all(scripts.iter().map(|(id, full)| cluster.sh(id, full)))
            .await?;
        let at = self.now();
        self.blocks = blocks;
        let minority = self.minority_now();
        let removes = primary_before
            .as_ref()
            .is_some_and(|p| minority.contains(p));
        let involved: Vec<String> = self
            .blocks
            .iter()
            .flat_map(|b| [b.from.clone(), b.to.clone()])
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        self.partitions.push(PartitionRecord {
            start_ms: at,
            end_ms: None,
            label: label.clone(),
            minority,
        });
        self.record_fault(at, "partition", label, involved, primary_before, removes);
        Ok(())
    }

    async fn heal_node(&self, id: &str) -> Result<()> {
        self.cluster.sh(id, nemesis::HEAL_SCRIPT).await.map(|_| ())
    }

    async fn kill_process(
        &mut self,
        label: &str,
        kind: &str,
        targets: Vec<String>,
        script: &str,
    ) -> Result<String> {
        let primary_before = self.primary_now().await;
        let at = self.now();
        for t in &targets {
            let (code, out) = self.cluster.exec(t, &["sh", "-c", script]).await?;
            tracing::debug!(node = %t, code, out = %out.trim(), "{kind}");
        }
        let removes = primary_before.as_ref().is_some_and(|p| targets.contains(p));
        self.record_fault(
            at,
            kind,
            label.to_string(),
            targets.clone(),
            primary_before,
            removes,
        );
        let mut notes = vec![];
        for t in &targets {
            if self
                .cluster
                .wait_stopped(t, Duration::from_secs(10))
                .await?
            {
                self.down.insert(t.clone());
            } else {
                notes.push(format!("{t} kept running"));
            }
        }
        Ok(notes.join("; "))
    }

    async fn play(&mut self, step: &Step) -> Result<String> {
        let label = step.label();
        let none = BTreeSet::new();
        match step {
            Step::WaitPrimary(d) => {
                let p = self.wait_primary(d.as_duration(), None).await?;
                if self.initial_primary.is_none() {
                    self.initial_primary = Some(p.clone());
                }
                Ok(format!("primary {p}"))
            }
            Step::WaitNewPrimary(d) => {
                // The primary the last primary-removing fault took away: a
                // later fault on a replica (say, an elector crash during the
                // election) must not make the freshly elected primary "old".
                let old = self
                    .faults
                    .iter()
                    .rev()
                    .find(|f| f.removes_primary)
                    .or_else(|| self.faults.last())
                    .and_then(|f| f.primary_before.clone());
                let p = self.wait_primary(d.as_duration(), old.as_deref()).await?;
                Ok(format!("new primary {p}"))
            }
            Step::StartWriters => {
                let w = self.scn.workload.clone();
                let tag = format!("{}-{}", self.scn.name, self.seed);
                for i in 0..w.writers {
                    self.workers.push(workload::spawn_writer(
                        self.rec.clone(),
                        i,
                        self.scn.quorum(),
                        w.clone(),
                        tag.clone(),
                    ));
                }
                for i in 0..w.readers {
                    self.workers.push(workload::spawn_reader(
                        self.rec.clone(),
                        self.seed.wrapping_mul(31).wrapping_add(i as u64),
                        w.clone(),
                    ));
                }
                Ok(format!("{} writers, {} readers", w.writers, w.readers))
            }
            Step::StopWriters => {
                self.stop_workers().await;
                Ok(String::new())
            }
            Step::Sleep(d) => {
                tokio::time::sleep(d.as_duration()).await;
                Ok(String::new())
            }
            Step::Kill(t) => {
                let targets = self.resolve(&t.tokens(), &none).await?;
                let primary_before = self.primary_now().await;
                let at = self.now();
                for n in &targets {
                    if self.down.insert(n.clone()) {
                        self.cluster.kill(n, "SIGKILL").await?;
                    }
                }
                let removes = primary_before.as_ref().is_some_and(|p| targets.contains(p));
                self.record_fault(
                    at,
                    "kill",
                    format!("kill {}", targets.join(",")),
                    targets.clone(),
                    primary_before,
                    removes,
                );
                Ok(targets.join(","))
            }
            Step::KillElector(t) => {
                let targets = self.resolve(&t.tokens(), &none).await?;
                let notes = self
                    .kill_process(
                        &format!("kill elector {}", targets.join(",")),
                        "kill_elector",
                        targets.clone(),
                        "pkill -9 -x elector; pkill -9 -x elector-faulty; true",
                    )
                    .await?;
                Ok(format!("{} {notes}", targets.join(",")))
            }
            Step::Exec(e) => {
                let targets = self.resolve(&e.on.tokens(), &none).await?;
                let primary_before = self.primary_now().await;
                let at = self.now();
                let mut outs = vec![];
                for n in &targets {
                    let (code, out) = self.cluster.exec(n, &["sh", "-c", &e.run]).await?;
                    if e.check && code != 0 {
                        return Err(step_err(
                            &label,
                            format!("check failed on {n} (rc={code}): {}", out.trim()),
                        ));
                    }
                    outs.push(format!("{n}: rc={code} {}", out.trim()));
                }
                if e.check {
                    return Ok(outs.join("; "));
                }
                if let Some(undo) = &e.undo {
                    self.undo_at_end.push((targets.clone(), undo.clone()));
                }
                if e.ends_fault {
                    self.recovered(&targets, &["exec"]);
                } else {
                    let removes = e.removes_primary
                        && primary_before.as_ref().is_some_and(|p| targets.contains(p));
                    self.record_fault(
                        at,
                        "exec",
                        label.clone(),
                        targets.clone(),
                        primary_before,
                        removes,
                    );
                }
                Ok(outs.join("; "))
            }
            Step::KillData(t) => {
                let targets = self.resolve(&t.tokens(), &none).await?;
                let notes = self
                    .kill_process(
                        &format!("kill data {}", targets.join(",")),
                        "kill_data",
                        targets.clone(),
                        "pkill -9 -x kevy; pkill -9 -x redis-server; true",
                    )
                    .await?;
                Ok(format!("{} {notes}", targets.join(",")))
            }
            Step::Restart(t) => {
                let targets = self.resolve(&t.tokens(), &none).await?;
                let mut restarted_running = vec![];
                let primary_before = self.primary_now().await;
                let at = self.now();
                for n in &targets {
                    if self.paused.remove(n) {
                        self.cluster.unpause(n).await?;
                    }
                    if !self.down.contains(n) {
                        self.cluster.stop_node(n, 5).await?;
                        restarted_running.push(n.clone());
                    }
                    self.cluster.start_node(n).await?;
                    self.down.remove(n);
                }
                if !restarted_running.is_empty() {
                    let removes = primary_before
                        .as_ref()
                        .is_some_and(|p| restarted_running.contains(p));
                    let idx = self.record_fault(
                        at,
                        "restart",
                        format!("restart {}", restarted_running.join(",")),
                        restarted_running.clone(),
                        primary_before,
                        removes,
                    );
                    self.faults[idx].end_ms = Some(self.now());
                    self.open.retain(|(i, _)| *i != idx);
                }
                self.recovered(&targets, &["kill", "kill_elector", "kill_data", "pause"]);
                Ok(targets.join(","))
            }
            Step::Pause(p) => {
                let targets = self.resolve(&p.targets.tokens(), &none).await?;
                let targets: Vec<String> = targets
                    .into_iter()
                    .filter(|n| !self.down.contains(n))
                    .collect();
                let primary_before = self.primary_now().await;
                let at = self.now();
                for n in &targets {
                    if self.paused.insert(n.clone()) {
                        self.cluster.pause(n).await?;
                    }
                }
                let removes = primary_before.as_ref().is_some_and(|p| targets.contains(p));
                self.record_fault(
                    at,
                    "pause",
                    label.clone(),
                    targets.clone(),
                    primary_before,
                    removes,
                );
                if let Some(d) = p.duration {
                    tokio::time::sleep(d.as_duration()).await;
                    for n in &targets {
                        if self.paused.remove(n) {
                            self.cluster.unpause(n).await?;
                        }
                    }
                    self.recovered(&targets, &["pause"]);
                }
                Ok(targets.join(","))
            }
            Step::Unpause(t) => {
                let targets = self.resolve(&t.tokens(), &none).await?;
                for n in &targets {
                    if self.paused.remove(n) {
                        self.cluster.unpause(n).await?;
                    }
                }
                self.recovered(&targets, &["pause"]);
                Ok(targets.join(","))
            }
            Step::Isolate(t) => {
                let isolated = self.resolve(&t.tokens(), &none).await?;
                let rest: Vec<String> = self
                    .cluster
                    .ids()
                    .into_iter()
                    .filter(|n| !isolated.contains(n))
                    .collect();
                let mut sides: Vec<Vec<String>> =
                    isolated.iter().map(|n| vec![n.clone()]).collect();
                sides.push(rest);
                let blocks = nemesis::split_blocks(&sides);
                self.apply_partition(format!("isolate {}", isolated.join(",")), blocks)
                    .await?;
                Ok(isolated.join(","))
            }
            Step::Split(side_specs) => {
                let mut named = BTreeSet::new();
                let mut sides: Vec<Option<Vec<String>>> = vec![];
                for s in side_specs {
                    let toks = s.tokens();
                    if toks.iter().any(|t| t == "others") {
                        sides.push(None);
                    } else {
                        let r = self.resolve(&toks, &none).await?;
                        named.extend(r.iter().cloned());
                        sides.push(Some(r));
                    }
                }
                let mut resolved = vec![];
                for (spec, side) in side_specs.iter().zip(sides) {
                    match side {
                        Some(v) => resolved.push(v),
                        None => resolved.push(self.resolve(&spec.tokens(), &named).await?),
                    }
                }
                let text = resolved
                    .iter()
                    .map(|s| format!("[{}]", s.join(",")))
                    .collect::<Vec<_>>()
                    .join(" | ");
                self.apply_partition(format!("split {text}"), nemesis::split_blocks(&resolved))
                    .await?;
                Ok(text)
            }
            Step::Bridge(b) => {
                let left = self.resolve(&b.left.tokens(), &none).await?;
                let middle = self.resolve(std::slice::from_ref(&b.middle), &none).await?;
                let mut named: BTreeSet<String> = left.iter().cloned().collect();
                named.extend(middle.iter().cloned());
                let right = self.resolve(&b.right.tokens(), &named).await?;
                let text = format!(
                    "[{}] <{}> [{}]",
                    left.join(","),
                    middle.join(","),
                    right.join(",")
                );
                self.apply_partition(
                    format!("bridge {text}"),
                    nemesis::split_blocks(&[left, right]),
                )
                .await?;
                Ok(text)
            }
            Step::OneWay(o) => {
                let from = self.resolve(&o.from.tokens(), &none).await?;
                let named: BTreeSet<String> = from.iter().cloned().collect();
                let to = self.resolve(&o.to.tokens(), &named).await?;
                let text = format!("{} -x-> {}", from.join(","), to.join(","));
                self.apply_partition(
                    format!("one-way {text}"),
                    nemesis::one_way_blocks(&from, &to),
                )
                .await?;
                Ok(text)
            }
            Step::Heal => {
                for id in self.cluster.ids() {
                    if !self.down.contains(&id) && !self.paused.contains(&id) {
                        self.heal_node(&id).await?;
                    }
                }
                self.end_partition();
                let all = self.cluster.ids();
                self.recovered(&all, &["netem"]);
                self.netem_on = false;
                Ok(String::new())
            }
            Step::MeshRestoredWithin(bound) => {
                let bound = bound.as_duration();
                let start = tokio::time::Instant::now();
                let mut last = String::new();
                while start.elapsed() <= bound {
                    match self.mesh_gap().await {
                        None => {
                            return Ok(format!(
                                "mesh whole {} ms after the step began",
                                start.elapsed().as_millis()
                            ))
                        }
                        Some(gap) => last = gap,
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(step_err(
                    &label,
                    format!("not whole within {} ms: {last}", bound.as_millis()),
                ))
            }
            Step::Netem(n) => {
                let targets = self.resolve(&n.targets.tokens(), &none).await?;
                let script = nemesis::netem_script(n.delay_ms, n.jitter_ms, n.loss_pct);
                let at = self.now();
                let mut note = String::new();
                for t in &targets {
                    if self.down.contains(t) || self.paused.contains(t) {
                        continue;
                    }
                    if let Err(e) = self.cluster.sh(t, &script).await {
                        if !e.to_string().contains("qdisc kind is unknown") {
                            return Err(e);
                        }
                        // No sch_netem in this kernel: loss through iptables, no delay.
                        if n.loss_pct > 0.0 {
                            self.cluster
                                .sh(t, &nemesis::iptables_loss_script(n.loss_pct))
                                .await?;
                        }
                        note = format!(
                            "kernel has no netem: {}% loss via iptables, delay/jitter NOT applied",
                            n.loss_pct
                        );
                    }
                }
                self.netem_on = true;
                let label = if note.is_empty() {
                    label.clone()
                } else {
                    format!("{label} ({note})")
                };
                self.record_fault(at, "netem", label, targets.clone(), None, false);
                Ok(format!("{} {note}", targets.join(",")))
            }
            Step::ClearNetem => {
                for id in self.cluster.ids() {
                    if !self.down.contains(&id) && !self.paused.contains(&id) {
                        self.cluster.sh(&id, nemesis::CLEAR_NETEM_SCRIPT).await?;
                    }
                }
                let all = self.cluster.ids();
                self.recovered(&all, &["netem"]);
                self.netem_on = false;
                Ok(String::new())
            }
        }
    }

    async fn stop_workers(&mut self) {
        self.rec.stop_writers();
        for h in self.workers.drain(..) {
            if tokio::time::timeout(Duration::from_secs(15), h)
                .await
                .is_err()
            {
                tracing::warn!("a worker did not stop in time");
            }
        }
        if self.writers_stopped_ms.is_none() {
            self.writers_stopped_ms = Some(self.rec.now_ms());
        }
    }

    /// Restores the cluster: unpause, restart, heal; then waits for a primary and for
    /// replication to settle.
    async fn restore(&mut self) -> Result<String> {
        self.stop_workers().await;
        let paused: Vec<String> = self.paused.iter().cloned().collect();
        for n in &paused {
            self.cluster
                .unpause(n)
                .await
                .map_err(|e| step_err("final unpause", e))?;
        }
        self.paused.clear();
        for (nodes, script) in std::mem::take(&mut self.undo_at_end) {
            for n in &nodes {
                // Best effort: a node that is down has nothing to undo.
                if let Err(e) = self.cluster.exec(n, &["sh", "-c", &script]).await {
                    tracing::warn!(node = %n, error = %e, "end phase: exec undo failed");
                }
            }
        }
        // Also nodes that went down on their own (e.g. an entrypoint that exited).
        for id in self.cluster.ids() {
            if let Ok((false, _)) = self.cluster.state(&id).await {
                self.down.insert(id);
            }
        }
        let down: Vec<String> = self.down.iter().cloned().collect();
        for n in &down {
            self.cluster
                .start_node(n)
                .await
                .map_err(|e| step_err("final restart", e))?;
        }
        self.down.clear();
        let all = self.cluster.ids();
        for id in &all {
            // Fresh containers may need a moment before exec works.
            let mut ok = false;
            for _ in 0..20 {
                if self.heal_node(id).await.is_ok() {
                    ok = true;
                    break;
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            if !ok {
                return Err(step_err("final heal", format!("cannot heal {id}")));
            }
        }
        self.end_partition();
        self.recovered(
            &all,
            &[
                "kill",
                "kill_elector",
                "kill_data",
                "pause",
                "netem",
                "exec",
            ],
        );
        let primary = self
            .wait_primary(Duration::from_secs(60), None)
            .await
            .map_err(|e| step_err("final wait_primary", e))?;
        // Let replicas catch up: every other data node a linked slave at the primary's offset.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        let mut settled = false;
        while tokio::time::Instant::now() < deadline {
            let round = self.poll_all().await;
            let p_off = round
                .iter()
                .find(|s| s.node == primary)
                .and_then(|s| s.data.as_ref()?.offset);
            settled = round.iter().filter(|s| s.node != primary).all(|s| {
                s.data.as_ref().is_some_and(|d| {
                    d.role == "slave"
                        && d.link_up != Some(false)
                        && (p_off.is_none() || d.offset >= p_off)
                })
            });
            if settled {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        // A few more polls so the history shows the settled state.
        tokio::time::sleep(Duration::from_millis(1000)).await;
        Ok(format!(
            "final primary {primary}{}",
            if settled {
                ""
            } else {
                " (replicas did not settle in 20 s)"
            }
        ))
    }

    async fn final_reads(
        &self,
    ) -> (
        BTreeMap<String, BTreeMap<String, Option<String>>>,
        BTreeMap<String, String>,
    ) {
        let acked: Vec<(String, String)> = self
            .rec
            .writes
            .lock()
            .expect("lock")
            .iter()
            .filter(|w| w.outcome == Outcome::Ok)
            .map(|w| (w.key.clone(), w.value.clone()))
            .collect();
        let mut reads = BTreeMap::new();
        let mut errors = BTreeMap::new();
        for n in &self.cluster.nodes {
            let mut attempt = 0;
            loop {
                attempt += 1;
                match read_back(&n.data_addr(), &acked).await {
                    Ok(got) => {
                        reads.insert(n.id.clone(), got);
                        break;
                    }
                    Err(e) if attempt >= 3 => {
                        errors.insert(n.id.clone(), e);
                        break;
                    }
                    Err(_) => tokio::time::sleep(Duration::from_secs(2)).await,
                }
            }
        }
        (reads, errors)
    }
}

/// Reads every acknowledged key from one data node (MGET in chunks, GET if no MGET).
async fn read_back(
    addr: &str,
    acked: &[(String, String)],
) -> std::result::Result<BTreeMap<String, Option<String>>, String> {
    {
        {
            let mut conn = DataConn::new(addr, Duration::from_secs(5));
            let mut got = BTreeMap::new();
            let mut failed = None;
            for chunk in acked.chunks(200) {
                let mut cmd = redis::cmd("MGET");
                for (k, _) in chunk {
                    cmd.arg(k);
                }
                match conn.query::<Vec<Option<String>>>(&cmd).await {
                    Ok(vals) if vals.len() == chunk.len() => {
                        for ((k, _), v) in chunk.iter().zip(vals) {
                            got.insert(k.clone(), v);
                        }
                    }
                    Ok(vals) => {
                        failed = Some(format!(
                            "MGET returned {} values for {}",
                            vals.len(),
                            chunk.len()
                        ));
                        break;
                    }
                    Err(_) => {
                        // MGET refused or stuck (seen on a freshly promoted kevy): one GET
                        // per key on a fresh connection.
                        conn = DataConn::new(addr, Duration::from_secs(5));
                        for (k, _) in chunk {
                            let mut get = redis::cmd("GET");
                            get.arg(k);
                            match conn.query::<Option<String>>(&get).await {
                                Ok(v) => {
                                    got.insert(k.clone(), v);
                                }
                                Err(e) => {
                                    failed = Some(e.to_string());
                                    break;
                                }
                            }
                        }
                        if failed.is_some() {
                            break;
                        }
                    }
                }
            }
            match failed {
                Some(e) => Err(e),
                None => Ok(got),
            }
        }
    }
}

/// Time a backend adds to every election after a node dies, whatever the
/// elector does. kevy 7.0.0: `REPLICAOF` blocks the whole server until its
/// replication thread's current connect attempt ends, and that connect has a
/// fixed 5 s timeout (`kevy_replicate::replica::ConnectOptions` default, used
/// by kevy's replica runner). After a host dies without a RST, the survivors'
/// detach and promotion wait for it; the containers' neighbour-cache sysctls
/// cut it to about 3.3 s (README, Known limits).
pub fn backend_election_floor_ms(backend: &str) -> u64 {
    match backend {
        "kevy" => 3_500,
        _ => 0,
    }
}

fn empty_history(scn: &Scenario, backend: &str) -> History {
    History {
        nodes: scn.node_ids(),
        quorum: scn.quorum(),
        timings: scn.timings.clone(),
        lease_ms: scn.lease_ms(),
        election_bound_ms: scn.election_bound_ms() + backend_election_floor_ms(backend),
        poll_interval_ms: POLL_INTERVAL_MS,
        ..Default::default()
    }
}

/// Plays one scenario on one backend with one seed.
pub async fn run_scenario(
    scn: &Scenario,
    backend: &str,
    seed: u64,
    opts: &RunOptions,
    run_no: usize,
) -> (RunResult, History) {
    let started = std::time::Instant::now();
    let max_steps = opts
        .max_scenario
        .max(Duration::from_millis(scn.planned_ms()) + Duration::from_secs(120));
    let elector_bin = scn.elector_bin.clone().unwrap_or_else(|| "elector".into());
    let mut result = RunResult {
        scenario: scn.name.clone(),
        backend: backend.to_string(),
        seed,
        nodes: scn.nodes,
        elector_bin: elector_bin.clone(),
        expect_violation: scn.expect.violation,
        expect_failover: scn.expect.failover == Some(true),
        checks_passed: false,
        passed: false,
        error: None,
        duration_ms: 0,
        metrics: Default::default(),
        checks: vec![],
        steps: vec![],
        faults: vec![],
    };
    let cfg = ClusterConfig {
        run_id: format!("{}-{run_no:02}", opts.session),
        session: opts.session.clone(),
        nodes: scn.nodes,
        backend: backend.to_string(),
        timings: scn.timings.clone(),
        elector_bin,
        extra_yaml: scn.extra_yaml.clone(),
        env: scn.env.clone(),
        image: opts.image.clone(),
    };
    tracing::info!(scenario = %scn.name, backend, seed, "starting cluster");
    let cluster = match Cluster::start(&cfg).await {
        Ok(c) => c,
        Err(e) => {
            result.error = Some(format!("cluster start: {e}"));
            result.duration_ms = started.elapsed().as_millis() as Ms;
            return (result, empty_history(scn, backend));
        }
    };
    let addrs: BTreeMap<String, NodeAddrs> = cluster
        .nodes
        .iter()
        .map(|n| {
            (
                n.id.clone(),
                NodeAddrs {
                    data: n.data_addr(),
                    api: n.api_addr(),
                },
            )
        })
        .collect();
    let rec = Recorder::new(addrs);
    let poller = workload::spawn_poller(
        rec.clone(),
        Duration::from_millis(POLL_INTERVAL_MS),
        max_steps + Duration::from_secs(180),
    );
    let mut run = Run {
        scn,
        cluster,
        rec: rec.clone(),
        seed,
        down: BTreeSet::new(),
        paused: BTreeSet::new(),
        undo_at_end: Vec::new(),
        faults: vec![],
        open: vec![],
        partitions: vec![],
        blocks: vec![],
        netem_on: false,
        workers: vec![],
        initial_primary: None,
        steps: vec![],
        writers_stopped_ms: None,
    };
    let mut error: Option<String> = None;
    let steps_fut = async {
        for step in &scn.steps {
            let at = run.now();
            let label = step.label();
            tracing::info!(scenario = %scn.name, at_ms = at, "step {label}");
            match run.play(step).await {
                Ok(note) => run.steps.push(StepLog {
                    at_ms: at,
                    label,
                    ok: true,
                    note,
                }),
                Err(e) => {
                    run.steps.push(StepLog {
                        at_ms: at,
                        label: label.clone(),
                        ok: false,
                        note: e.to_string(),
                    });
                    return Err(step_err(&label, e));
                }
            }
        }
        Ok(())
    };
    match tokio::time::timeout(max_steps, steps_fut).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => error = Some(e.to_string()),
        Err(_) => {
            error = Some(format!(
                "steps did not finish within {} s",
                max_steps.as_secs()
            ))
        }
    }
    let at = run.now();
    let final_primary = match run.restore().await {
        Ok(note) => {
            run.steps.push(StepLog {
                at_ms: at,
                label: "restore".into(),
                ok: true,
                note,
            });
            run.primary_now().await
        }
        Err(e) => {
            run.steps.push(StepLog {
                at_ms: at,
                label: "restore".into(),
                ok: false,
                note: e.to_string(),
            });
            error.get_or_insert(e.to_string());
            None
        }
    };
    let (final_reads, final_read_errors) = run.final_reads().await;
    rec.stop_poller();
    let _ = tokio::time::timeout(Duration::from_secs(5), poller).await;
    if std::fs::create_dir_all(&opts.out_dir).is_ok() {
        run.cluster.save_logs(&opts.out_dir, &result.id()).await;
    }
    run.cluster.teardown().await;
    let end_ms = rec.now_ms();
    let mut samples = std::mem::take(&mut *rec.samples.lock().expect("lock"));
    samples.sort_by_key(|s| s.at_ms);
    let history = History {
        writes: std::mem::take(&mut *rec.writes.lock().expect("lock")),
        reads: std::mem::take(&mut *rec.reads.lock().expect("lock")),
        samples,
        faults: run.faults.clone(),
        partitions: run.partitions.clone(),
        initial_primary: run.initial_primary.clone(),
        final_primary,
        final_reads,
        final_read_errors,
        writers_stopped_ms: run.writers_stopped_ms,
        end_ms,
        ..empty_history(scn, backend)
    };
    let checks = check_all(&history, &scn.expect);
    let (checks_passed, passed) =
        RunResult::verdict(&checks, scn.expect.violation, error.as_deref());
    result.metrics = metrics::compute(&history, &checks);
    result.checks = checks;
    result.checks_passed = checks_passed;
    result.passed = passed;
    result.error = error;
    result.steps = run.steps;
    result.faults = history.faults.clone();
    result.duration_ms = started.elapsed().as_millis() as Ms;
    (result, history)
}
