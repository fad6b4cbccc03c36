//! The operator of docs/protocol.md §6.10, played by the runner in chaos runs.
//!
//! The protocol leaves one state to a human: no primary, and data nodes below
//! their floors (they may lack what they acknowledged, and nothing proves
//! otherwise: a kevy restarted from its own files, a node back from older
//! files). An operator who knows which node's data survived runs `elector
//! accept-data-loss` there. The simulator plays that operator
//! (`tests/sim/faults.rs`, `play_the_operator`); this is the same rule on
//! real containers: only when the cluster is stuck that way for longer than
//! an election could take, and only on a data member that holds every write
//! acknowledged so far, read back from its data node. Each act is recorded
//! (history `operator`, the step's note, the chaos figures), and the
//! liveness checker measures that quiet phase's recovery from it. A stuck
//! cluster where no node holds every acknowledged write gets no help: the
//! liveness check fails and the lost-writes check says why.

use std::time::Duration;

use super::control::Run;
use super::end::read_back;
use crate::error::Result;
use crate::history::OperatorAct;
use crate::probe;

/// How often a waiting operator looks at `/status`.
const LOOK_EVERY: Duration = Duration::from_millis(1000);

/// What one look at the electors found.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Look {
    /// Some elector says it is the primary, or the data nodes show one.
    Led,
    /// Nobody leads and these data members are below their floors.
    Stuck(Vec<String>),
    /// Nobody leads, but nothing is below a floor: the protocol's own
    /// business (an election under way), not the operator's.
    Leaderless,
}

impl Run<'_> {
    /// A quiet phase of `d`: every fault healed, then `d` without faults,
    /// during which the operator may act once (a scenario with `operator`).
    pub(super) async fn quiet(&mut self, d: Duration) -> Result<String> {
        self.quiet_ms.push(self.now());
        let note = self.heal_everything().await?;
        if !self.plays_the_operator() {
            tokio::time::sleep(d).await;
            return Ok(note);
        }
        let end = tokio::time::Instant::now() + d;
        let patience = tokio::time::Instant::now() + self.operator_patience();
        let mut acted = None;
        while tokio::time::Instant::now() < end {
            tokio::time::sleep(LOOK_EVERY.min(end - tokio::time::Instant::now())).await;
            if acted.is_some() || tokio::time::Instant::now() < patience {
                continue;
            }
            if let Look::Stuck(below) = self.look().await {
                acted = Some(self.accept_data_loss_on_a_holder(&below).await);
            }
        }
        Ok(match acted {
            Some(what) => format!("{note}; operator: {what}"),
            None => note,
        })
    }

    /// The end phase found no primary: if the cluster is stuck below its
    /// floors, the operator acts once and the end waits again.
    pub(super) async fn operator_at_the_end(&mut self) -> Option<String> {
        if !self.plays_the_operator() {
            return None;
        }
        match self.look().await {
            Look::Stuck(below) => Some(self.accept_data_loss_on_a_holder(&below).await),
            _ => None,
        }
    }

    fn plays_the_operator(&self) -> bool {
        self.scn.operator && self.target.kind().is_elector()
    }

    /// How long a cluster must stay without a primary, after the heal,
    /// before the operator looks: an old lease running out and an election
    /// (the liveness bound without the restart allowance, which the heal
    /// itself took).
    fn operator_patience(&self) -> Duration {
        Duration::from_millis(self.scn.lease_ms() + self.scn.election_bound_ms())
    }

    async fn look(&self) -> Look {
        if self.primary_now().await.is_some() {
            return Look::Led;
        }
        let t = Duration::from_millis(800);
        let mut below = vec![];
        for n in &self.cluster.nodes {
            let Some(st) = probe::get_status(&n.api_addr(), t).await else {
                continue;
            };
            if st.role == "primary" {
                return Look::Led;
            }
            if !n.witness && st.data_node.is_some_and(|d| d.below_floor) {
                below.push(n.id.clone());
            }
        }
        if below.is_empty() {
            Look::Leaderless
        } else {
            Look::Stuck(below)
        }
    }

    /// Reads every acknowledged write back from each data member and runs
    /// `elector accept-data-loss` on the one that holds them all (the one
    /// with the most keys when several do); returns what it did.
    async fn accept_data_loss_on_a_holder(&mut self, below: &[String]) -> String {
        let acked = self.acknowledged();
        let mut holders = vec![];
        for n in self.cluster.data_nodes() {
            let Ok(got) = read_back(&n.data_addr(), &acked).await else {
                continue;
            };
            let all = acked
                .iter()
                .all(|(k, v)| got.get(k).is_some_and(|g| g.as_deref() == Some(v.as_str())));
            if all {
                let keys = probe::dbsize(&n.data_addr()).await.unwrap_or(0);
                holders.push((keys, n.id.clone()));
            }
        }
        let stuck = format!("no primary, below their floors: {}", below.join(","));
        let Some((_, holder)) = holders.into_iter().max() else {
            tracing::warn!(%stuck, "operator: no data node holds every acknowledged write; nothing to accept");
            return format!(
                "{stuck}; no data node holds all {} acknowledged writes, nothing accepted",
                acked.len()
            );
        };
        let script = "elector accept-data-loss --node 127.0.0.1:9300 --node-id \"$NODE_ID\"";
        match self.cluster.sh(&holder, script).await {
            Ok(_) => {
                tracing::info!(%stuck, node = %holder, acknowledged = acked.len(), "operator: accepted data loss");
                self.operator.push(OperatorAct {
                    at_ms: self.now(),
                    node: holder.clone(),
                    acknowledged: acked.len(),
                });
                format!(
                    "{stuck}; accept-data-loss on {holder}, which holds all {} acknowledged writes",
                    acked.len()
                )
            }
            Err(e) => format!("{stuck}; accept-data-loss on {holder} failed: {e}"),
        }
    }
}
