//! A node coming back (unpaused, started again) gets what the run holds for it
//! now, not what it had when it went away.
//!
//! Two things do not follow a node through a pause or a restart on their own:
//!
//! - **The end of a part fault.** `thaw` (SIGCONT, the state directory writable
//!   again) is a `docker exec`, which reaches neither a paused nor a stopped
//!   container. A read-only state directory survives a restart (it is the
//!   container's file system), and the restarted elector refuses it and exits, so
//!   a node whose `thaw` fell while it was away stayed down for the rest of a chaos
//!   run. Now the thaw is kept as due and applied when the node is back; a
//!   restarted node is started again if its elector checked the directory before
//!   the thaw landed.
//! - **The network.** iptables rules and the netem qdisc live in the container's
//!   network namespace, which a restart replaces (and Docker may give the node
//!   another address, which the other nodes' rules name); a paused node misses
//!   every rule change made while it was frozen (`docker exec` again), so it came
//!   back with the rules of an old partition, or none. Now a node that comes back
//!   gets the current partition's rules and netem; when a restart changed its
//!   address, every node's rules are written again.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::control::{step_err, Run};
use super::parts::thaw_script;
use crate::error::Result;
use crate::nemesis;
use crate::probe;
use crate::scenario::NetemSpec;

/// The part faults (a frozen elector, a read-only state directory) the harness
/// holds on each node, and the thaws that fell while their node was away.
#[derive(Debug, Default)]
pub(super) struct PartFaults {
    in_force: BTreeSet<String>,
    due: BTreeSet<String>,
}

/// What to do with a thaw.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Thaw {
    /// The node is reachable: run the thaw now.
    Now,
    /// The node is paused or stopped with a part fault on it: run the thaw when
    /// it is back.
    WhenBack,
    /// The node is away and holds no part fault: nothing to undo.
    Nothing,
}

impl PartFaults {
    /// A freeze or a read-only state directory was put on `node`.
    pub(super) fn applied(&mut self, node: &str) {
        self.in_force.insert(node.to_string());
        self.due.remove(node);
    }

    /// The part faults on `node` end now.
    pub(super) fn end(&mut self, node: &str, reachable: bool) -> Thaw {
        if reachable {
            self.thawed(node);
            Thaw::Now
        } else if self.in_force.contains(node) {
            self.due.insert(node.to_string());
            Thaw::WhenBack
        } else {
            Thaw::Nothing
        }
    }

    /// Every part fault ends (a quiet phase, the end phase).
    pub(super) fn end_all(&mut self) {
        self.due.extend(self.in_force.iter().cloned());
    }

    /// `node` must be thawed as soon as it is back.
    pub(super) fn due(&self, node: &str) -> bool {
        self.due.contains(node)
    }

    /// The thaw ran on `node`.
    pub(super) fn thawed(&mut self, node: &str) {
        self.in_force.remove(node);
        self.due.remove(node);
    }
}

/// Whether a restart must rewrite every node's partition rules: a partition is
/// in force and the restarted node's address is not the one the rules name.
pub(super) fn rules_name_an_old_address(
    partition_ips: &BTreeMap<String, String>,
    node: &str,
    ip_now: &str,
) -> bool {
    partition_ips.get(node).is_some_and(|ip| ip != ip_now)
}

/// The shell that puts one node's network where the run holds it: no rules
/// and no qdisc left from before, then the current partition's rules for it.
pub(super) fn network_script(rules: &str) -> String {
    if rules.is_empty() {
        nemesis::HEAL_SCRIPT.to_string()
    } else {
        format!("{}; {rules}", nemesis::HEAL_SCRIPT)
    }
}

/// How long a restarted node's elector gets to answer `/status` once its state
/// directory is writable again.
const BACK_WITHIN: Duration = Duration::from_secs(8);

impl Run<'_> {
    /// `node` was unpaused: its due thaw, then its network as the run holds it.
    pub(super) async fn back_from_pause(&mut self, node: &str) -> Result<()> {
        self.thaw_if_due(node, false).await?;
        self.sync_network(&[node.to_string()]).await
    }

    /// Runs `node`'s due thaw, if any, now that it is back (`started`: the
    /// container was just started, not unpaused).
    pub(super) async fn thaw_if_due(&mut self, node: &str, started: bool) -> Result<()> {
        if !self.part_faults.due(node) {
            return Ok(());
        }
        if started {
            self.thaw_started(node).await?;
        } else {
            self.cluster.sh(node, &thaw_script()).await?;
        }
        self.thawed_now(node);
        Ok(())
    }

    /// `node` was started: its due thaw (starting it again if its elector
    /// refused the state directory first), then the current partition and netem.
    pub(super) async fn back_from_start(&mut self, node: &str) -> Result<()> {
        self.stopped_alone.remove(node);
        self.thaw_if_due(node, true).await?;
        if self.blocks.is_empty() && !self.netem.contains_key(node) {
            return Ok(());
        }
        let moved = match self.cluster.ip(node).await {
            Ok(ip) => rules_name_an_old_address(&self.partition_ips, node, &ip),
            Err(_) => false,
        };
        let nodes = if moved {
            tracing::info!(
                node,
                "restarted with a new address: rewriting every node's rules"
            );
            self.cluster.ids()
        } else {
            vec![node.to_string()]
        };
        self.sync_network(&nodes).await
    }

    fn thawed_now(&mut self, node: &str) {
        self.part_faults.thawed(node);
        self.recovered(&[node.to_string()], &super::parts::thawed_kind_names());
    }

    /// Runs the thaw in a container that was just started, as soon as `exec`
    /// reaches it; if the elector had already refused the read-only directory
    /// and the container stopped, starts it again (at most twice).
    async fn thaw_started(&mut self, node: &str) -> Result<()> {
        let script = thaw_script();
        let mut starts = 0;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
        loop {
            if matches!(self.cluster.state(node).await, Ok((true, _))) {
                if let Ok((0, _)) = self.cluster.exec(node, &["sh", "-c", &script]).await {
                    break;
                }
            } else if starts < 2 {
                starts += 1;
                self.cluster.start_node(node).await?;
                continue;
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(step_err(
                    "thaw",
                    format!("{node}: could not reach the started container"),
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let api = self.cluster.node(node)?.api_addr();
        let deadline = tokio::time::Instant::now() + BACK_WITHIN;
        while tokio::time::Instant::now() < deadline {
            if probe::get_status(&api, Duration::from_millis(400))
                .await
                .is_some()
            {
                return Ok(());
            }
            if matches!(self.cluster.state(node).await, Ok((false, _))) && starts < 3 {
                // The elector checked its directory before the thaw: it
                // exited, and the entrypoint with it. Writable now.
                starts += 1;
                tracing::info!(
                    node,
                    "elector refused its state directory before the thaw: starting the node again"
                );
                self.cluster.start_node(node).await?;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        tracing::warn!(node, "elector not answering after the thaw and restart");
        Ok(())
    }

    /// Writes the current partition's rules (and netem) on `nodes` that are
    /// running and not paused, with every node's address as it is now.
    pub(super) async fn sync_network(&mut self, nodes: &[String]) -> Result<()> {
        let mut ips = BTreeMap::new();
        if !self.blocks.is_empty() {
            for id in self.cluster.ids() {
                if !self.down.contains(&id) {
                    if let Ok(ip) = self.cluster.ip(&id).await {
                        ips.insert(id, ip);
                    }
                }
            }
        }
        for n in nodes {
            if self.down.contains(n) || self.paused.contains(n) {
                continue;
            }
            let rules = nemesis::iptables_script(n, &self.blocks, &|m| ips.get(m).cloned());
            let script = network_script(&rules);
            // A container just started may need a moment before exec works;
            // one that stopped again (its elector refused a read-only state
            // directory: the fault is still in force) is marked down instead.
            let mut last = None;
            for _ in 0..20 {
                match self.cluster.sh(n, &script).await {
                    Ok(_) => {
                        last = None;
                        break;
                    }
                    Err(e) => last = Some(e),
                }
                if matches!(self.cluster.state(n).await, Ok((false, _))) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            if matches!(self.cluster.state(n).await, Ok((false, _))) {
                tracing::info!(node = %n, "stopped again on its own while coming back");
                self.stopped_alone.insert(n.clone());
                self.down.insert(n.clone());
                continue;
            }
            if let Some(e) = last {
                return Err(step_err("restore the network", format!("{n}: {e}")));
            }
            if let Some(spec) = self.netem.get(n).cloned() {
                self.apply_netem(n, &spec).await?;
            }
        }
        if !self.blocks.is_empty() {
            self.partition_ips = ips;
        }
        Ok(())
    }

    /// Puts netem on one node; on kernels without `sch_netem`, the loss through
    /// iptables instead. Returns a note when delay and jitter were dropped.
    pub(super) async fn apply_netem(&self, node: &str, n: &NetemSpec) -> Result<String> {
        let script = nemesis::netem_script(n.delay_ms, n.jitter_ms, n.loss_pct);
        if let Err(e) = self.cluster.sh(node, &script).await {
            if !e.to_string().contains("qdisc kind is unknown") {
                return Err(e);
            }
            if n.loss_pct > 0.0 {
                self.cluster
                    .sh(node, &nemesis::iptables_loss_script(n.loss_pct))
                    .await?;
            }
            return Ok(format!(
                "kernel has no netem: {}% loss via iptables, delay/jitter NOT applied",
                n.loss_pct
            ));
        }
        Ok(String::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thaw_that_falls_while_the_node_is_away_waits_for_its_return() {
        let mut p = PartFaults::default();
        p.applied("n2");
        assert_eq!(p.end("n2", false), Thaw::WhenBack);
        assert!(p.due("n2"), "the thaw is kept until n2 is back");
        p.thawed("n2");
        assert!(!p.due("n2"));
    }

    #[test]
    fn a_thaw_on_a_reachable_node_runs_at_once_and_leaves_nothing_due() {
        let mut p = PartFaults::default();
        p.applied("n1");
        assert_eq!(p.end("n1", true), Thaw::Now);
        assert!(!p.due("n1"));
        // A node that holds no part fault has nothing to thaw when away.
        assert_eq!(p.end("n3", false), Thaw::Nothing);
        assert!(!p.due("n3"));
    }

    #[test]
    fn a_quiet_phase_makes_every_part_fault_in_force_due() {
        let mut p = PartFaults::default();
        p.applied("n1");
        p.applied("n3");
        p.end_all();
        assert!(p.due("n1") && p.due("n3") && !p.due("n2"));
        // Applied again before the node came back: in force, not due.
        p.applied("n3");
        assert!(!p.due("n3"));
    }

    #[test]
    fn a_restart_rewrites_every_nodes_rules_only_when_the_address_changed() {
        let ips: BTreeMap<String, String> = [("n1", "10.0.0.2"), ("n2", "10.0.0.3")]
            .into_iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        assert!(!rules_name_an_old_address(&ips, "n1", "10.0.0.2"));
        assert!(rules_name_an_old_address(&ips, "n1", "10.0.0.9"));
        // No partition named the node: nothing names its old address.
        assert!(!rules_name_an_old_address(&ips, "n3", "10.0.0.4"));
    }

    #[test]
    fn a_node_back_loses_stale_rules_and_gets_the_current_partitions() {
        let plain = network_script("");
        assert_eq!(plain, nemesis::HEAL_SCRIPT);
        let ip = |n: &str| Some(format!("10.0.0.{}", &n[1..]));
        let blocks = nemesis::one_way_blocks(&["n1".to_string()], &["n2".to_string()]);
        let s = network_script(&nemesis::iptables_script("n2", &blocks, &ip));
        let flush = s.find("iptables -w -F INPUT").expect("flushes first");
        let rule = s
            .find("-A INPUT -s 10.0.0.1 -m conntrack --ctdir ORIGINAL -j DROP")
            .expect("the one-way cut is back on n2");
        assert!(flush < rule, "{s}");
    }
}
