//! Cluster control during a run: the run's state, polling the nodes, finding the
//! primary the target's way, resolving symbolic step targets, recording faults,
//! partitions and kills, and the end phase that restores the cluster.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;

use super::comeback::PartFaults;
use super::POLL_INTERVAL_MS;
use crate::cluster::Cluster;
use crate::error::{Error, Result};
use crate::history::{FaultEvent, Ms, PartitionRecord, Sample};
use crate::nemesis::{self, Block};
use crate::probe::{self, DataConn};
use crate::report::StepLog;
use crate::scenario::{NetemSpec, Scenario};
use crate::target::{discovery, Target};
use crate::workload::{self, Recorder};

pub(super) struct Run<'a> {
    pub(super) scn: &'a Scenario,
    pub(super) target: &'a dyn Target,
    pub(super) cluster: Cluster,
    pub(super) rec: Arc<Recorder>,
    pub(super) seed: u64,
    pub(super) down: BTreeSet<String>,
    pub(super) paused: BTreeSet<String>,
    /// `exec` steps' undo scripts, run by the end phase (nodes, script).
    pub(super) undo_at_end: Vec<(Vec<String>, String)>,
    pub(super) faults: Vec<FaultEvent>,
    /// Open fault index -> nodes whose recovery ends it.
    pub(super) open: Vec<(usize, BTreeSet<String>)>,
    pub(super) partitions: Vec<PartitionRecord>,
    pub(super) blocks: Vec<Block>,
    /// Each node's address when the current partition's rules were written.
    pub(super) partition_ips: BTreeMap<String, String>,
    /// The netem in force per node (put back on a node that comes back).
    pub(super) netem: BTreeMap<String, NetemSpec>,
    /// Freezes and read-only state directories, and thaws not yet delivered.
    pub(super) part_faults: PartFaults,
    /// Nodes whose container stopped on its own (no kill by the harness).
    pub(super) stopped_alone: BTreeSet<String>,
    pub(super) workers: Vec<JoinHandle<()>>,
    pub(super) initial_primary: Option<String>,
    pub(super) steps: Vec<StepLog>,
    pub(super) writers_stopped_ms: Option<Ms>,
    /// When each `quiet` step began.
    pub(super) quiet_ms: Vec<Ms>,
    /// What the runner did as the operator (`operator.rs`).
    pub(super) operator: Vec<crate::history::OperatorAct>,
    /// The VIP recorder of a `vip` scenario (docs/vip.md).
    pub(super) vip: Option<Arc<crate::vip::VipObs>>,
}

pub(super) fn step_err(step: &str, e: impl std::fmt::Display) -> Error {
    Error::Step {
        step: step.to_string(),
        message: e.to_string(),
    }
}

impl<'a> Run<'a> {
    pub(super) fn now(&self) -> Ms {
        self.rec.now_ms()
    }

    /// Fresh view of the cluster: one poll of every node now.
    pub(super) async fn poll_all(&self) -> Vec<Sample> {
        let t = Duration::from_millis(400);
        let futs = self.cluster.data_nodes().map(|n| {
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
    pub(super) async fn mesh_gap(&self) -> Option<String> {
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

    /// The primary now, as the target decides it (see [`discovery::primary_in`]).
    pub(super) async fn primary_now(&self) -> Option<String> {
        let current = self.rec.current_primary();
        discovery::primary_in(
            &self.rec.discovery,
            &self.poll_all().await,
            current.as_deref(),
        )
    }

    pub(super) async fn wait_primary(
        &self,
        timeout: Duration,
        not: Option<&str>,
    ) -> Result<String> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let round = self.poll_all().await;
            let current = self.rec.current_primary();
            let found = match not {
                // Any primary but the old one (two may claim it for a while on peers).
                Some(old) => discovery::primaries(&self.rec.discovery, &round)
                    .into_iter()
                    .find(|p| p != old),
                None => discovery::primary_in(&self.rec.discovery, &round, current.as_deref()),
            };
            if let Some(p) = found {
                return Ok(p);
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

    /// The data nodes other than `primary` (witnesses are no replicas).
    pub(super) fn replicas_of(&self, primary: Option<&str>) -> Vec<String> {
        let mut r: Vec<String> = self
            .cluster
            .data_nodes()
            .map(|n| n.id.clone())
            .filter(|n| Some(n.as_str()) != primary)
            .collect();
        if !r.is_empty() {
            let k = (self.seed as usize) % r.len();
            r.rotate_left(k);
        }
        r
    }

    /// Resolves symbolic tokens (see the scenario module) to node ids.
    pub(super) async fn resolve(
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
        // Replicas are named relative to the primary; with none visible (it
        // was just killed), relative to the one the last fault took away, so
        // `replica1` stays the node it was (a `copy_data: replica1` before a
        // kill and a `restart_data: replica1` after it hit one node).
        let reference = primary.clone().or_else(|| {
            self.faults
                .iter()
                .rev()
                .find_map(|f| f.primary_before.clone())
        });
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
                "replicas" => self.replicas_of(reference.as_deref()),
                "all" => self.cluster.ids(),
                "witness" => self.scn.witness_ids(),
                "down" => self.down.iter().cloned().collect(),
                "others" => self
                    .cluster
                    .ids()
                    .into_iter()
                    .filter(|n| !named_elsewhere.contains(n))
                    .collect(),
                r if r.starts_with("replica") => {
                    let k: usize = r["replica".len()..].parse().unwrap_or(1);
                    let reps = self.replicas_of(reference.as_deref());
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

    pub(super) fn minority_now(&self) -> Vec<String> {
        nemesis::minority(&self.cluster.ids(), &self.blocks, self.scn.quorum())
    }

    pub(super) fn healthy_majority(&self) -> Vec<String> {
        let minority = self.minority_now();
        self.cluster
            .ids()
            .into_iter()
            .filter(|n| !self.down.contains(n) && !self.paused.contains(n) && !minority.contains(n))
            .collect()
    }

    pub(super) fn record_fault(
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
    pub(super) fn recovered(&mut self, nodes: &[String], kinds: &[&str]) {
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

    pub(super) fn end_partition(&mut self) {
        let now = self.now();
        self.end_partition_at(now);
    }

    /// Ends the open partition as of `at`: a heal removes the nodes' rules
    /// one after another, and the partition stops holding at the first, so
    /// a heal is timed from its start (a floor run, Redis 2+1 seed 5: the
    /// isolated primary was re-elected 260 ms into a 290 ms heal and counted
    /// as writable on the minority side).
    pub(super) fn end_partition_at(&mut self, at: Ms) {
        if let Some(p) = self.partitions.last_mut() {
            if p.end_ms.is_none() {
                p.end_ms = Some(at);
            }
        }
        let all = self.cluster.ids();
        self.recovered(&all, &["partition"]);
        self.blocks.clear();
        self.partition_ips.clear();
    }

    pub(super) async fn apply_partition(
        &mut self,
        label: String,
        blocks: Vec<Block>,
    ) -> Result<()> {
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
        self.partition_ips = ips;
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

    pub(super) async fn heal_node(&self, id: &str) -> Result<()> {
        self.cluster.sh(id, nemesis::HEAL_SCRIPT).await.map(|_| ())
    }

    /// Signals a process in each target and records the fault, without
    /// waiting for anything: for a process whose supervisor restarts it
    /// inside the running container.
    pub(super) async fn kill_process_in_place(
        &mut self,
        label: &str,
        kind: &str,
        targets: Vec<String>,
        script: &str,
    ) -> Result<()> {
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
            targets,
            primary_before,
            removes,
        );
        Ok(())
    }

    /// Signals a process in each target, records the fault, and waits up to
    /// 10 s for each container to stop (the entrypoint exits when the
    /// elector or, without a supervisor, the data node dies).
    pub(super) async fn kill_process(
        &mut self,
        label: &str,
        kind: &str,
        targets: Vec<String>,
        script: &str,
    ) -> Result<String> {
        self.kill_process_in_place(label, kind, targets.clone(), script)
            .await?;
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

    /// Waits until the target is ready to fail over, as a deployment that has run
    /// for a while is: every sentinel knows every replica and every other sentinel
    /// (Sentinel learns replicas from the primary's INFO every 10 s; killing the
    /// primary before that leaves it nobody to promote). Our electors and kevy's
    /// are ready once they have elected.
    pub(super) async fn wait_settled(&self, deadline: tokio::time::Instant) -> Result<()> {
        let crate::target::Discovery::Sentinel { master } = &self.rec.discovery else {
            return Ok(());
        };
        loop {
            let Some(gap) = discovery::sentinels_unsettled(&self.rec, master).await else {
                return Ok(());
            };
            if tokio::time::Instant::now() >= deadline {
                return Err(Error::Cluster(format!("sentinels not settled: {gap}")));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Memory and CPU of the target's control processes on every running node.
    pub(super) async fn control_usage(&self) -> Vec<crate::usage::ProcUsage> {
        let names = self.target.control_processes();
        if names.is_empty() {
            return vec![];
        }
        let script = crate::usage::script(names);
        let mut out = vec![];
        for id in self.cluster.ids() {
            match self.cluster.exec(&id, &["sh", "-c", &script]).await {
                Ok((_, text)) => out.extend(crate::usage::parse(&id, &text)),
                Err(e) => tracing::warn!(node = %id, error = %e, "reading /proc failed"),
            }
        }
        out
    }
}
