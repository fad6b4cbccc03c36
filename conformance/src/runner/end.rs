//! The end phase of a run: stop the clients, restore the cluster (unpause,
//! restart, heal, wait for one primary and settled replicas), then read every
//! acknowledged write back from every node.

use std::collections::BTreeMap;
use std::time::Duration;

use super::control::{step_err, Run};
use crate::error::Result;
use crate::history::Outcome;
use crate::probe::DataConn;

impl Run<'_> {
    pub(super) async fn stop_workers(&mut self) {
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

    /// Ends every fault: unpauses, starts what is down (also nodes that
    /// went down on their own, e.g. an entrypoint that exited), runs the
    /// undo scripts (SIGCONT, state dir writable), heals the network. The
    /// end phase and each `quiet` step use it.
    pub(super) async fn heal_everything(&mut self) -> Result<String> {
        // Every freeze and read-only directory ends here: a node away gets
        // its thaw as it comes back (`comeback`).
        self.part_faults.end_all();
        let paused: Vec<String> = self.paused.iter().cloned().collect();
        for n in &paused {
            self.cluster
                .unpause(n)
                .await
                .map_err(|e| step_err("unpause", e))?;
            self.paused.remove(n);
            self.thaw_if_due(n, false).await?;
        }
        self.paused.clear();
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
                .map_err(|e| step_err("restart", e))?;
            self.down.remove(n);
            self.thaw_if_due(n, true).await?;
        }
        self.down.clear();
        self.stopped_alone.clear();
        for n in self.cluster.ids() {
            // Reachable nodes whose part faults were still in force (the
            // undo scripts below run again; best effort).
            if let Err(e) = self.thaw_if_due(&n, false).await {
                tracing::warn!(node = %n, error = %e, "thaw failed");
            }
        }
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
                return Err(step_err("heal", format!("cannot heal {id}")));
            }
        }
        for (nodes, script) in std::mem::take(&mut self.undo_at_end) {
            for n in &nodes {
                // Best effort: the undo may have nothing left to undo.
                if let Err(e) = self.cluster.exec(n, &["sh", "-c", &script]).await {
                    tracing::warn!(node = %n, error = %e, "exec undo failed");
                }
            }
        }
        self.end_partition();
        self.netem.clear();
        let kinds: Vec<&str> = faults::FaultKind::ALL
            .iter()
            .map(|k| k.name())
            .chain(["exec"])
            .collect();
        self.recovered(&all, &kinds);
        Ok(format!(
            "unpaused [{}], restarted [{}]",
            paused.join(","),
            down.join(",")
        ))
    }

    /// Restores the cluster: unpause, restart, heal; then waits for a primary and for
    /// replication to settle.
    pub(super) async fn restore(&mut self) -> Result<String> {
        self.stop_workers().await;
        self.heal_everything().await?;
        let primary = match self.wait_primary(Duration::from_secs(60), None).await {
            Ok(p) => p,
            // The state the protocol leaves to an operator (§6.10), if it
            // is that: one act, then the same wait again.
            Err(e) => match self.operator_at_the_end().await {
                Some(what) => {
                    tracing::info!(%what, "operator at the end");
                    self.wait_primary(Duration::from_secs(60), None)
                        .await
                        .map_err(|e| step_err("final wait_primary (after the operator)", e))?
                }
                None => return Err(step_err("final wait_primary", e)),
            },
        };
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

    /// Every acknowledged write so far, `(key, value)`.
    pub(super) fn acknowledged(&self) -> Vec<(String, String)> {
        self.rec
            .writes
            .lock()
            .expect("lock")
            .iter()
            .filter(|w| w.outcome == Outcome::Ok)
            .map(|w| (w.key.clone(), w.value.clone()))
            .collect()
    }

    pub(super) async fn final_reads(
        &self,
    ) -> (
        BTreeMap<String, BTreeMap<String, Option<String>>>,
        BTreeMap<String, String>,
    ) {
        let acked = self.acknowledged();
        let mut reads = BTreeMap::new();
        let mut errors = BTreeMap::new();
        for n in self.cluster.data_nodes() {
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
pub(super) async fn read_back(
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
