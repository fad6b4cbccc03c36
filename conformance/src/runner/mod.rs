//! The runner: plays one scenario against a real cluster of one target and returns
//! its result and history. Whatever happens in the steps, the end phase restores the
//! cluster (unpause, restart, heal), reads every acknowledged write back, and removes
//! the containers.
//!
//! Split by concern: `control` holds the run's state and everything that drives or
//! observes the cluster, `steps` plays one scenario step, `end` restores the cluster
//! and reads the acknowledged writes back, [`assemble`] turns what was recorded into
//! a [`History`] and a [`RunResult`].

pub mod assemble;
mod comeback;
mod control;
mod end;
mod operator;
mod parts;
mod readdress;
mod steps;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::cluster::{Cluster, ClusterConfig};
use crate::history::{History, Ms};
use crate::report::{RunResult, StepLog};
use crate::scenario::Scenario;
use crate::target::TargetKind;
use crate::vip::{VipObs, VipSpec};
use crate::workload::{self, NodeAddrs, Recorder};

use control::{step_err, Run};

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

/// Plays one scenario on one target with one seed.
pub async fn run_scenario(
    scn: &Scenario,
    target_kind: TargetKind,
    seed: u64,
    opts: &RunOptions,
    run_no: usize,
) -> (RunResult, History) {
    let started = std::time::Instant::now();
    // At least the scenario's own planned duration: a long scenario is not
    // cut off by a default meant for short ones.
    let max_steps = opts
        .max_scenario
        .max(Duration::from_millis(scn.planned_ms()) + Duration::from_secs(120));
    let target = target_kind.target();
    let mut result = assemble::blank_result(scn, target.as_ref(), seed);
    // The VIP is the elector's (docs/vip.md); peers run the scenario without it.
    let vip_spec = VipSpec::of(scn).filter(|_| target_kind.is_elector());
    let cfg = ClusterConfig {
        run_id: format!("{}-{run_no:02}", opts.session),
        session: opts.session.clone(),
        nodes: scn.nodes,
        witnesses: scn.witness_ids(),
        target: target_kind,
        timings: scn.timings.clone(),
        elector_bin: result.elector_bin.clone(),
        extra_yaml: scn.extra_yaml.clone(),
        env: scn.env.clone(),
        image: opts.image.clone(),
        vip_port: vip_spec.as_ref().map(|v| v.port),
    };
    tracing::info!(scenario = %scn.name, target = %target_kind, seed, "starting cluster");
    let cluster = match Cluster::start(&cfg).await {
        Ok(c) => c,
        Err(e) => {
            result.error = Some(format!("cluster start: {e}"));
            result.duration_ms = started.elapsed().as_millis() as Ms;
            return (result, assemble::empty_history(scn, target.as_ref()));
        }
    };
    let addrs: BTreeMap<String, NodeAddrs> = cluster
        .nodes
        .iter()
        .map(|n| {
            // A witness has no data node: nothing to poll or read there.
            let addrs = NodeAddrs {
                data: if n.witness {
                    String::new()
                } else {
                    n.data_addr()
                },
                api: n.api_addr(),
            };
            (n.id.clone(), addrs)
        })
        .collect();
    let rec = Recorder::new(addrs, target.discovery());
    let poller = workload::spawn_poller(
        rec.clone(),
        Duration::from_millis(POLL_INTERVAL_MS),
        max_steps + Duration::from_secs(180),
    );
    let mut vip = vip_spec.as_ref().and_then(|spec| {
        let address = cluster.vip.clone()?;
        let obs = Arc::new(VipObs::new(address, spec.port));
        let containers = cluster
            .nodes
            .iter()
            .map(|n| (n.id.clone(), n.container_name.clone()))
            .collect();
        let sampler = crate::vip::sampler::spawn(
            rec.clone(),
            obs.clone(),
            cluster.docker.clone(),
            containers,
            Duration::from_millis(spec.sample_ms),
            max_steps + Duration::from_secs(180),
        );
        Some((obs, sampler))
    });
    let mut run = Run {
        scn,
        target: target.as_ref(),
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
        partition_ips: BTreeMap::new(),
        netem: BTreeMap::new(),
        part_faults: Default::default(),
        stopped_alone: BTreeSet::new(),
        workers: vec![],
        initial_primary: None,
        steps: vec![],
        writers_stopped_ms: None,
        quiet_ms: vec![],
        operator: vec![],
        vip: vip.as_ref().map(|(obs, _)| obs.clone()),
    };
    let mut error: Option<String> = None;
    let steps_fut = async {
        for step in &scn.steps {
            let at = run.now();
            let label = step.label();
            tracing::info!(scenario = %scn.name, at_ms = at, "step {label}");
            match run.play_or_skip(step).await {
                Ok(log) => run.steps.push(log),
                Err(e) => {
                    run.steps.push(StepLog {
                        at_ms: at,
                        label: label.clone(),
                        ok: false,
                        note: e.to_string(),
                        not_applicable: false,
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
            run.steps.push(StepLog::done(at, "restore", note));
            run.primary_now().await
        }
        Err(e) => {
            run.steps.push(StepLog {
                at_ms: at,
                label: "restore".into(),
                ok: false,
                note: e.to_string(),
                not_applicable: false,
            });
            error.get_or_insert(e.to_string());
            None
        }
    };
    let (final_reads, final_read_errors) = run.final_reads().await;
    result.usage = run.control_usage().await;
    rec.stop_poller();
    let _ = tokio::time::timeout(Duration::from_secs(5), poller).await;
    if let Some((obs, sampler)) = vip.as_mut() {
        obs.stop();
        let _ = tokio::time::timeout(Duration::from_secs(5), sampler).await;
    }
    if std::fs::create_dir_all(&opts.out_dir).is_ok() {
        run.cluster.save_logs(&opts.out_dir, &result.id()).await;
    }
    run.cluster.teardown().await;
    let recorded = assemble::Recorded {
        faults: run.faults.clone(),
        partitions: run.partitions.clone(),
        initial_primary: run.initial_primary.clone(),
        final_primary,
        final_reads,
        final_read_errors,
        writers_stopped_ms: run.writers_stopped_ms,
        quiet_ms: run.quiet_ms.clone(),
        operator: run.operator.clone(),
        steps: std::mem::take(&mut run.steps),
    };
    let history = assemble::history(scn, target.as_ref(), &rec, recorded.clone());
    assemble::finish(&mut result, scn, &history, recorded.steps, error);
    if let (Some(spec), Some((obs, _))) = (&vip_spec, &vip) {
        crate::vip::judge(
            &mut result,
            scn,
            spec,
            &history,
            obs.record(),
            &opts.out_dir,
        );
    }
    result.duration_ms = started.elapsed().as_millis() as Ms;
    (result, history)
}
