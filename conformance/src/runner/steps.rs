//! Step execution: plays one scenario step against the cluster, or records it
//! as not applicable when the target cannot express it.

use std::collections::BTreeSet;
use std::time::Duration;

use super::control::{step_err, Run};
use crate::error::{Error, Result};
use crate::nemesis;
use crate::report::StepLog;
use crate::scenario::Step;
use crate::target::Applicability;
use crate::vip;
use crate::workload;
use faults::FaultKind;

impl Run<'_> {
    /// Plays a step the target can express; records any other as not applicable.
    pub(super) async fn play_or_skip(&mut self, step: &Step) -> Result<StepLog> {
        let at = self.now();
        let label = step.label();
        if let Applicability::NotApplicable(why) = self.target.applies(step) {
            tracing::info!(
                "step {label}: not applicable for {}: {why}",
                self.target.kind()
            );
            return Ok(StepLog {
                at_ms: at,
                label,
                ok: true,
                note: why,
                not_applicable: true,
            });
        }
        if self.scn.has_tag("chaos") {
            self.mark_stopped_down().await;
        }
        let note = match self.play(step).await {
            // A generated schedule aims faults at "primary" without knowing
            // whether one will be visible then (an election may be running):
            // such a fault is skipped and logged, not a failed run.
            Err(Error::Target(why)) if self.scn.has_tag("chaos") => {
                tracing::info!("step {label}: skipped: no such target now: {why}");
                return Ok(StepLog {
                    at_ms: at,
                    label,
                    ok: true,
                    note: format!("skipped: no such target now: {why}"),
                    not_applicable: true,
                });
            }
            r => r?,
        };
        Ok(StepLog::done(at, &label, note))
    }

    pub(super) async fn play(&mut self, step: &Step) -> Result<String> {
        let label = step.label();
        let none = BTreeSet::new();
        match step {
            Step::WaitPrimary(d) => {
                let deadline = tokio::time::Instant::now() + d.as_duration();
                let p = self.wait_primary(d.as_duration(), None).await?;
                self.wait_settled(deadline).await?;
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
                    let (rec, need) = (self.rec.clone(), self.scn.wait_replicas());
                    self.workers.push(match &self.vip {
                        // A `vip` scenario's writers know only the VIP.
                        Some(obs) => vip::clients::spawn_writer(
                            rec,
                            obs.clone(),
                            i,
                            need,
                            w.clone(),
                            tag.clone(),
                        ),
                        None => workload::spawn_writer(rec, i, need, w.clone(), tag.clone()),
                    });
                }
                if let Some(obs) = &self.vip {
                    let max = Duration::from_secs(w.max_duration_s);
                    self.workers.push(vip::clients::spawn_monitor(
                        self.rec.clone(),
                        obs.clone(),
                        max,
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
                    // A frozen host can crash too (Docker refuses to kill a
                    // paused container: thaw it first).
                    if !self.down.contains(n) && self.paused.remove(n) {
                        self.cluster.unpause(n).await?;
                    }
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
                let targets = self.live_targets(t).await?;
                let notes = self
                    .kill_process(
                        &format!("kill elector {}", targets.join(",")),
                        "kill_elector",
                        targets.clone(),
                        &super::parts::signal_elector("9"),
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
                let targets = self.live_targets(t).await?;
                let label = format!("kill data {}", targets.join(","));
                let script = "pkill -9 -x kevy; pkill -9 -x redis-server; true";
                let notes = if self.scn.data_node_restarts() {
                    // The entrypoint brings the data node back and the
                    // container stays up: waiting for it to stop held every
                    // chaos schedule 10 s behind its plan at each `kill_data`.
                    self.kill_process_in_place(&label, "kill_data", targets.clone(), script)
                        .await?;
                    "restarted by its supervisor".to_string()
                } else {
                    self.kill_process(&label, "kill_data", targets.clone(), script)
                        .await?
                };
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
                    self.back_from_start(n).await?;
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
                self.recovered(
                    &targets,
                    &["kill", "kill_elector", "kill_data", "stop_elector", "pause"],
                );
                Ok(targets.join(","))
            }
            Step::Pause(p) => {
                let targets = self.live_targets(&p.targets).await?;
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
                            self.back_from_pause(n).await?;
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
                        self.back_from_pause(n).await?;
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
                let healing_from = self.now();
                for id in self.cluster.ids() {
                    if !self.down.contains(&id) && !self.paused.contains(&id) {
                        self.heal_node(&id).await?;
                    }
                }
                self.end_partition_at(healing_from);
                let all = self.cluster.ids();
                self.recovered(&all, &["netem"]);
                self.netem.clear();
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
            Step::NoPrimaryFor(window) => {
                let window = window.as_duration();
                let start = tokio::time::Instant::now();
                while start.elapsed() <= window {
                    if let Some(p) = self.primary_now().await {
                        return Err(step_err(
                            &label,
                            format!(
                                "{p} became a writable primary {} ms into the window",
                                start.elapsed().as_millis()
                            ),
                        ));
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Ok(format!("no primary for {} ms", window.as_millis()))
            }
            Step::Netem(n) => {
                let targets = self.resolve(&n.targets.tokens(), &none).await?;
                let at = self.now();
                let mut note = String::new();
                for t in &targets {
                    // A node away now gets it when it is back (`comeback`).
                    self.netem.insert(t.clone(), n.clone());
                    if self.down.contains(t) || self.paused.contains(t) {
                        continue;
                    }
                    let dropped = self.apply_netem(t, n).await?;
                    if !dropped.is_empty() {
                        note = dropped;
                    }
                }
                let label = if note.is_empty() {
                    label.clone()
                } else {
                    format!("{label} ({note})")
                };
                self.record_fault(at, "netem", label, targets.clone(), None, false);
                Ok(format!("{} {note}", targets.join(",")))
            }
            Step::FreezeElector(p) => {
                self.timed_part_fault(FaultKind::FreezeElector, label, p)
                    .await
            }
            Step::ReadOnlyState(p) => {
                self.timed_part_fault(FaultKind::ReadOnlyState, label, p)
                    .await
            }
            Step::StallData(p) => self.timed_part_fault(FaultKind::StallData, label, p).await,
            Step::CopyData(t) => self.copy_data(t).await,
            Step::StopElector(t) => self.stop_elector(t).await,
            Step::RestartElector(r) => self.restart_elector(r, label).await,
            Step::Readdress(p) => self.readdress(p).await,
            Step::RestartData(r) => self.restart_data(r, label).await,
            Step::LiftFence(t) => self.lift_fence(t, label).await,
            Step::Switchover(s) => self.switchover(s, label).await,
            Step::Thaw(t) => self.thaw(t).await,
            Step::Quiet(d) => self.quiet(d.as_duration()).await,
            Step::LoadData(spec) => {
                let p = self
                    .primary_now()
                    .await
                    .ok_or_else(|| step_err(&label, "no primary to load"))?;
                let addr = self.cluster.node(&p)?.data_addr();
                // Every replica holds the set before the fault, not only a quorum's.
                let replicas = self.scn.nodes - self.scn.witnesses - 1;
                let l = crate::load::load(&addr, spec, replicas, spec.budget()).await?;
                Ok(format!(
                    "{} keys into {p} in {} ms, acknowledged by {replicas} replicas {} ms later",
                    l.keys, l.load_ms, l.ack_ms
                ))
            }
            Step::ClearNetem => {
                for id in self.cluster.ids() {
                    if !self.down.contains(&id) && !self.paused.contains(&id) {
                        self.cluster.sh(&id, nemesis::CLEAR_NETEM_SCRIPT).await?;
                    }
                }
                let all = self.cluster.ids();
                self.recovered(&all, &["netem"]);
                self.netem.clear();
                Ok(String::new())
            }
        }
    }
}
