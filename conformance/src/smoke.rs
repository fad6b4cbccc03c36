//! `conformance smoke`: exercises cluster control alone (start, ports, exec, partition,
//! kill, restart, pause, teardown) so the Docker side can be checked without scenarios.

use std::time::Duration;

use crate::cluster::{Cluster, ClusterConfig};
use crate::error::{Error, Result};
use crate::nemesis;
use crate::probe::{self, DataConn};

async fn ping(addr: &str) -> bool {
    let mut c = DataConn::new(addr, Duration::from_millis(500));
    for _ in 0..40 {
        if c.query::<String>(&redis::cmd("PING")).await.is_ok() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    false
}

/// Runs the smoke sequence; returns one line per check.
pub async fn smoke(cfg: &ClusterConfig) -> Result<Vec<String>> {
    let mut cluster = Cluster::start(cfg).await?;
    let r = smoke_inner(&cluster).await;
    cluster.teardown().await;
    r
}

async fn smoke_inner(c: &Cluster) -> Result<Vec<String>> {
    let mut lines = vec![format!("network {} subnet {}", c.network, c.subnet)];
    let ids = c.ids();
    let mut ips = vec![];
    for n in &c.nodes {
        let ip = c.ip(&n.id).await?;
        let up = ping(&n.data_addr()).await;
        let status = probe::get_status(&n.api_addr(), Duration::from_millis(500)).await;
        lines.push(format!(
            "{} ip {ip} data {} ping {up} api {} status {}",
            n.id,
            n.data_addr(),
            n.api_addr(),
            status
                .map(|s| format!("{}@{}", s.role, s.epoch))
                .unwrap_or("-".into())
        ));
        if !up {
            return Err(Error::Cluster(format!(
                "{} data port does not answer",
                n.id
            )));
        }
        ips.push(ip);
    }
    // Partition n1 from the rest, check with ping inside the containers, heal.
    let blocks = nemesis::split_blocks(&[vec![ids[0].clone()], ids[1..].to_vec()]);
    let ip_of = |n: &str| ids.iter().position(|x| x == n).map(|i| ips[i].clone());
    for id in &ids {
        let s = nemesis::iptables_script(id, &blocks, &ip_of);
        if !s.is_empty() {
            c.sh(id, &s).await?;
        }
    }
    let probe_cmd = format!(
        "timeout 2 bash -c 'echo > /dev/tcp/{}/6380' 2>/dev/null && echo open || echo blocked",
        ips[1]
    );
    let cut = c.sh(&ids[0], &probe_cmd).await?;
    lines.push(format!("partitioned: n1 -> n2:6380 {}", cut.trim()));
    // The host still reaches the isolated node.
    lines.push(format!(
        "host -> isolated n1 ping {}",
        ping(&c.nodes[0].data_addr()).await
    ));
    for id in &ids {
        c.sh(id, nemesis::HEAL_SCRIPT).await?;
    }
    let healed = c.sh(&ids[0], &probe_cmd).await?;
    lines.push(format!("healed: n1 -> n2:6380 {}", healed.trim()));
    if cut.trim() != "blocked" || healed.trim() != "open" {
        return Err(Error::Cluster("partition did not behave".into()));
    }
    match c.sh(&ids[0], &nemesis::netem_script(20, 5, 0.0)).await {
        Ok(_) => lines.push("netem applied".into()),
        Err(e) => lines.push(format!("netem unavailable ({e}); iptables loss fallback")),
    }
    c.sh(&ids[0], &nemesis::iptables_loss_script(2.0)).await?;
    c.sh(&ids[0], nemesis::CLEAR_NETEM_SCRIPT).await?;
    let left = c
        .sh(&ids[0], "iptables -w -S INPUT | grep -c random || true")
        .await?;
    lines.push(format!(
        "loss applied and cleared (rules left: {})",
        left.trim()
    ));
    // Pause / unpause, kill / restart.
    let last = ids.last().cloned().unwrap_or_default();
    for l in &lines {
        tracing::info!("{l}");
    }
    c.pause(&last).await?;
    lines.push(format!("{last} paused: {:?}", c.state(&last).await?));
    c.unpause(&last).await?;
    lines.push(format!("{last} unpaused: {:?}", c.state(&last).await?));
    tracing::info!("{}", lines[lines.len() - 2]);
    tracing::info!("{}", lines[lines.len() - 1]);
    c.kill(&last, "SIGKILL").await?;
    let stopped = c.wait_stopped(&last, Duration::from_secs(10)).await?;
    lines.push(format!("{last} killed, stopped {stopped}"));
    c.start_node(&last).await?;
    let back = ping(&c.node(&last)?.data_addr()).await;
    lines.push(format!("{last} restarted, ping {back}"));
    if !back {
        return Err(Error::Cluster(format!("{last} did not come back")));
    }
    Ok(lines)
}
