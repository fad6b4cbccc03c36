//! The `readdress` step: nodes crash (SIGKILL), stay down for a while, and
//! come back under their name with another IP address
//! (`Cluster::readdress_stopped`); the step checks that Docker really gave
//! them the new one. The peers know them by name only, so this is what
//! proves they resolve names again when they redial.

use super::control::Run;
use crate::error::{Error, Result};
use crate::scenario::PauseSpec;

impl Run<'_> {
    pub(super) async fn readdress(&mut self, p: &PauseSpec) -> Result<String> {
        let targets = self.live_targets(&p.targets).await?;
        if targets.is_empty() {
            return Err(Error::Target(format!(
                "readdress {}: no running node",
                p.targets.tokens().join(",")
            )));
        }
        // Every address a node has now: none of them may be handed out again.
        let mut taken = vec![];
        for id in self.cluster.ids() {
            if let Ok(ip) = self.cluster.ip(&id).await {
                taken.push(ip);
            }
        }
        let mut old = vec![];
        for n in &targets {
            old.push(self.cluster.ip(n).await?);
        }
        let primary_before = self.primary_now().await;
        let at = self.now();
        for n in &targets {
            self.down.insert(n.clone());
            self.cluster.kill(n, "SIGKILL").await?;
        }
        let removes = primary_before.as_ref().is_some_and(|p| targets.contains(p));
        let idx = self.record_fault(
            at,
            "kill",
            format!("readdress {} (kill, new address)", targets.join(",")),
            targets.clone(),
            primary_before,
            removes,
        );
        if let Some(d) = p.duration {
            tokio::time::sleep(d.as_duration()).await;
        }
        let mut notes = vec![];
        for (n, old) in targets.iter().zip(&old) {
            // The container must be stopped before it leaves the network.
            if !self
                .cluster
                .wait_stopped(n, std::time::Duration::from_secs(10))
                .await?
            {
                return Err(Error::Cluster(format!("{n} did not stop after SIGKILL")));
            }
            let new = self.cluster.readdress_stopped(n, &taken).await?;
            taken.push(new.clone());
            self.cluster.start_node(n).await?;
            let now = self.cluster.ip(n).await?;
            if now != new || now == *old {
                return Err(Error::Cluster(format!(
                    "{n} came back at {now}, expected the new address {new} (was {old})"
                )));
            }
            self.down.remove(n);
            notes.push(format!("{n} {old} -> {new}"));
        }
        self.faults[idx].end_ms = Some(self.now());
        self.open.retain(|(i, _)| *i != idx);
        self.recovered(&targets, &["kill"]);
        Ok(notes.join(", "))
    }
}
