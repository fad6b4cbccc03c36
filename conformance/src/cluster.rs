//! Cluster control: N `elector-node` containers on a fresh network, started through
//! testcontainers, driven through bollard (kill signals, exec, inspect), always removed.
//!
//! Each node publishes its data port (6379 + its index) and its target's control port
//! (the elector's API 9300, a sentinel's 26379) on 127.0.0.1 at ports picked by the
//! suite, so the host reaches every node through loopback even after a restart. Peers
//! reach each other by container name on the cluster network.

use std::collections::HashMap;
use std::time::Duration;

use testcontainers::bollard::models::{
    HostConfig, Ipam, IpamConfig, NetworkCreateRequest, PortBinding,
};
use testcontainers::bollard::query_parameters::{KillContainerOptions, ListNetworksOptions};
use testcontainers::bollard::Docker;
use testcontainers::core::{IntoContainerPort, WaitFor};
use testcontainers::runners::AsyncRunner;
use testcontainers::{ContainerAsync, GenericImage, ImageExt};

mod readdress;
pub use readdress::pick_new_address;

use crate::docker::{self, LABEL_RUN, LABEL_SESSION, LABEL_SUITE};
use crate::error::{Error, Result};
use crate::scenario::Timings;
use crate::target::{Member, TargetKind, Topology};

/// The longest a command run inside a node may take ([`Cluster::exec`]). The
/// harness's own scripts bound each call to a data node far below it
/// (`timeout 3 redis-cli`); this is the backstop for everything else.
pub const EXEC_LIMIT: Duration = Duration::from_secs(60);

/// Node k's data node listens on `DATA_PORT_BASE + k` inside its container.
pub const DATA_PORT_BASE: u16 = 6379;

/// Kernel neighbour-cache settings applied in every node's network namespace
/// (the lab's compose files set the same): a killed node's address stops
/// answering ARP within about a second, so connects to it fail rather than
/// hang for their whole timeout.
const NEIGHBOUR_SYSCTLS: [(&str, &str); 3] = [
    ("net.ipv4.neigh.eth0.base_reachable_time_ms", "250"),
    ("net.ipv4.neigh.eth0.delay_first_probe_time", "1"),
    ("net.ipv4.neigh.eth0.retrans_time_ms", "100"),
];

/// What to start.
#[derive(Clone, Debug)]
pub struct ClusterConfig {
    /// Unique per run; names containers and the network and labels them.
    pub run_id: String,
    /// Labels everything one process creates (`io.elector.conformance.session`).
    pub session: String,
    pub nodes: usize,
    /// Ids of the witnesses (no data node, docs/protocol.md §4.5).
    pub witnesses: Vec<String>,
    /// What runs in the containers (our elector with a backend, or a peer).
    pub target: TargetKind,
    pub timings: Timings,
    pub elector_bin: String,
    pub extra_yaml: Option<String>,
    /// Extra entrypoint environment (e.g. `DATA_NODE_RESTART: "1"`).
    pub env: std::collections::BTreeMap<String, String>,
    /// `name:tag` of the node image.
    pub image: String,
    /// Give the nodes a VIP (`<subnet>.100`) with this client port (docs/vip.md).
    pub vip_port: Option<u16>,
}

pub struct Node {
    pub id: String,
    /// A witness: an elector with no data node; nothing listens on its data port.
    pub witness: bool,
    pub container_name: String,
    /// Host port (on 127.0.0.1) of the data node's client port.
    pub data_port: u16,
    /// Host port (on 127.0.0.1) of the target's control port: the elector's HTTP
    /// API, or the node's sentinel.
    pub api_port: u16,
    container: Option<ContainerAsync<GenericImage>>,
}

impl Node {
    pub fn data_addr(&self) -> String {
        format!("127.0.0.1:{}", self.data_port)
    }
    pub fn api_addr(&self) -> String {
        format!("127.0.0.1:{}", self.api_port)
    }
}

pub struct Cluster {
    pub docker: Docker,
    pub network: String,
    pub subnet: String,
    pub run_label: String,
    pub nodes: Vec<Node>,
    /// The VIP the electors move, when the run has one.
    pub vip: Option<String>,
    torn_down: bool,
}

/// Host ports for publishing are taken above the kernel's ephemeral range
/// (`ip_local_port_range`, 32768-60999 by default): a port the OS picked for
/// us from that range could be handed to any outgoing connection before
/// Docker binds it ("port is already allocated", seen with a client running
/// beside the suite). Above it, only another listener can take it.
const PUBLISH_PORTS: std::ops::Range<u16> = 61_000..65_000;

/// Where the next [`free_port`] search starts, as an offset into
/// [`PUBLISH_PORTS`]; `u32::MAX` until the first call picks a random start.
static NEXT_PUBLISH_PORT: std::sync::atomic::AtomicU32 =
    std::sync::atomic::AtomicU32::new(u32::MAX);

/// Picks a free TCP port on loopback outside the ephemeral range. The search
/// starts at a random place (parallel suites rarely try the same port) and
/// then moves on through the range: a cluster's nodes are given ports before
/// any of them is bound, and picking each at random gave two nodes the same
/// one ("port is already allocated", once in a CI run); moving on also leaves
/// a port Docker has just released to rest until the range wraps.
fn free_port() -> Result<u16> {
    use std::sync::atomic::Ordering;
    let span = u32::from(PUBLISH_PORTS.end - PUBLISH_PORTS.start);
    let _ = NEXT_PUBLISH_PORT.compare_exchange(
        u32::MAX,
        rand::random::<u32>() % span,
        Ordering::Relaxed,
        Ordering::Relaxed,
    );
    (0..span)
        .map(|_| {
            PUBLISH_PORTS.start + (NEXT_PUBLISH_PORT.fetch_add(1, Ordering::Relaxed) % span) as u16
        })
        .find(|&p| std::net::TcpListener::bind(("127.0.0.1", p)).is_ok())
        .ok_or_else(|| Error::Cluster(format!("no free port in {PUBLISH_PORTS:?}")))
}

/// The `skip`-th `10.213.K.0/24` no existing Docker network uses.
async fn fresh_subnet(docker: &Docker, skip: usize) -> Result<String> {
    let nets = docker.list_networks(None::<ListNetworksOptions>).await?;
    let used: Vec<String> = nets
        .iter()
        .filter_map(|n| n.ipam.as_ref()?.config.clone())
        .flatten()
        .filter_map(|c| c.subnet)
        .collect();
    (0..=255)
        .map(|k| format!("10.213.{k}.0/24"))
        .filter(|s| !used.contains(s))
        .nth(skip)
        .ok_or_else(|| Error::Cluster("no free 10.213.x.0/24 subnet".into()))
}

/// Attempts at creating the run's network.
const NETWORK_ATTEMPTS: usize = 8;

/// Creates the run's network on a free subnet. Several suite processes share one
/// engine (the lead's runs and a bench, say): two may pick the same free subnet at
/// once, and a network being removed keeps its pool for a moment, so the engine
/// answers "Pool overlaps"; then the next free subnet is tried after a pause.
async fn create_network(
    docker: &Docker,
    name: &str,
    labels: &HashMap<String, String>,
) -> Result<String> {
    let mut last = None;
    for attempt in 0..NETWORK_ATTEMPTS {
        let subnet = fresh_subnet(docker, attempt).await?;
        let gateway = subnet.replace(".0/24", ".1");
        let created = docker
            .create_network(NetworkCreateRequest {
                name: name.to_string(),
                driver: Some("bridge".into()),
                ipam: Some(Ipam {
                    config: Some(vec![IpamConfig {
                        subnet: Some(subnet.clone()),
                        gateway: Some(gateway),
                        ..Default::default()
                    }]),
                    ..Default::default()
                }),
                labels: Some(labels.clone()),
                ..Default::default()
            })
            .await;
        match created {
            Ok(_) => return Ok(subnet),
            Err(e) if e.to_string().contains("overlaps") => {
                tracing::debug!(%subnet, attempt, "subnet taken meanwhile: {e}");
                last = Some(e);
                tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            }
            Err(e) => return Err(e.into()),
        }
    }
    Err(last.map_or_else(|| Error::Cluster("no network created".into()), Error::from))
}

fn split_image(image: &str) -> (String, String) {
    match image.rsplit_once(':') {
        Some((n, t)) if !t.contains('/') => (n.to_string(), t.to_string()),
        _ => (image.to_string(), "latest".to_string()),
    }
}

impl Cluster {
    /// Creates the network and starts every node; on any failure removes what exists.
    pub async fn start(cfg: &ClusterConfig) -> Result<Cluster> {
        let docker = docker::connect()?;
        let run_label = format!("{LABEL_RUN}={}", cfg.run_id);
        let network = format!("cf-{}", cfg.run_id);
        let labels = HashMap::from([
            (LABEL_SUITE.to_string(), "1".to_string()),
            (LABEL_RUN.to_string(), cfg.run_id.clone()),
            (LABEL_SESSION.to_string(), cfg.session.clone()),
        ]);
        let subnet = create_network(&docker, &network, &labels).await?;
        let mut cluster = Cluster {
            docker,
            network,
            subnet,
            run_label,
            nodes: vec![],
            vip: None,
            torn_down: false,
        };
        match cluster.start_nodes(cfg, &labels).await {
            Ok(()) => Ok(cluster),
            Err(e) => {
                cluster.teardown().await;
                Err(e)
            }
        }
    }

    async fn start_nodes(
        &mut self,
        cfg: &ClusterConfig,
        labels: &HashMap<String, String>,
    ) -> Result<()> {
        let ids: Vec<String> = (1..=cfg.nodes).map(|i| format!("n{i}")).collect();
        let names: Vec<String> = ids
            .iter()
            .map(|id| format!("cf-{}-{id}", cfg.run_id))
            .collect();
        let peers = ids
            .iter()
            .zip(&names)
            .map(|(id, name)| format!("{id}={name}"))
            .collect::<Vec<_>>()
            .join(",");
        let (image_name, tag) = split_image(&cfg.image);
        let target = cfg.target.target();
        let topo = Topology {
            members: ids
                .iter()
                .zip(&names)
                .enumerate()
                .map(|(k, (id, name))| Member {
                    id: id.clone(),
                    host: name.clone(),
                    data_port: DATA_PORT_BASE + k as u16,
                })
                .collect(),
            timings: cfg.timings.clone(),
        };
        let mut starts = vec![];
        for (k, (id, name)) in ids.iter().zip(&names).enumerate() {
            // The entrypoint gives node k the data port 6379 + k (PEERS order):
            // kevy 7 tells replicas apart by client port only, so `WAIT 2`
            // needs every node on its own port. Peer targets use the same ports.
            let inner_data_port = topo.members[k].data_port;
            let spec = target.node_spec(&topo, k);
            let control_port = spec
                .control_port
                .unwrap_or(crate::target::elector::API_PORT);
            let data_port = free_port()?;
            let api_port = free_port()?;
            let t = &cfg.timings;
            let mut image = GenericImage::new(image_name.clone(), tag.clone());
            if spec.script.is_some() {
                image = image.with_entrypoint("/bin/sh");
            }
            let mut req = image
                .with_wait_for(WaitFor::Nothing)
                .with_container_name(name.clone())
                .with_hostname(name.clone())
                .with_network(self.network.clone())
                .with_cap_add("NET_ADMIN")
                .with_labels(labels.clone())
                .with_mapped_port(data_port, inner_data_port.tcp())
                .with_mapped_port(api_port, control_port.tcp())
                .with_env_var("NODE_ID", id.clone())
                .with_env_var("PEERS", peers.clone())
                .with_env_var("BACKEND", cfg.target.backend())
                .with_env_var("ELECTOR_BIN", cfg.elector_bin.clone())
                .with_env_var("HB_INTERVAL_MS", t.hb_interval_ms.to_string())
                .with_env_var("DOWN_AFTER_MS", t.down_after_ms.to_string())
                .with_env_var("ELECTION_TIMEOUT_MS", t.election_timeout_ms.to_string())
                .with_env_var("BACKOFF_MIN_MS", t.backoff_min_ms.to_string())
                .with_env_var("BACKOFF_MAX_MS", t.backoff_max_ms.to_string())
                .with_env_var("RUST_LOG", "info")
                .with_env_var("WITNESSES", cfg.witnesses.join(","))
                .with_startup_timeout(Duration::from_secs(60))
                .with_host_config_modifier(|hc: &mut HostConfig| {
                    // As the lab does (scripts/gen-compose.sh): forget a dead
                    // node's MAC quickly, so connects to it fail instead of
                    // hanging (kevy's REPLICAOF waits for them).
                    hc.sysctls = Some(
                        NEIGHBOUR_SYSCTLS
                            .iter()
                            .map(|(k, v)| (k.to_string(), v.to_string()))
                            .collect(),
                    );
                    // Publish on loopback only.
                    if let Some(b) = hc.port_bindings.as_mut() {
                        for list in b.values_mut().flatten() {
                            for pb in list.iter_mut() {
                                *pb = PortBinding {
                                    host_ip: Some("127.0.0.1".into()),
                                    host_port: pb.host_port.clone(),
                                };
                            }
                        }
                    }
                });
            if let (Some(port), Some(vip)) = (cfg.vip_port, crate::vip::vip_address(&self.subnet)) {
                // NET_RAW for the gratuitous ARP (arping); NET_ADMIN is there.
                req = req
                    .with_cap_add("NET_RAW")
                    .with_env_var("VIP", vip.clone())
                    .with_env_var("VIP_PORT", port.to_string());
                self.vip = Some(vip);
            }
            if let Some(margin) = t.fence_margin_ms {
                req = req.with_env_var("FENCE_MARGIN_MS", margin.to_string());
            }
            if let Some(extra) = &cfg.extra_yaml {
                req = req.with_env_var("ELECTOR_EXTRA_YAML", extra.clone());
            }
            for (key, value) in &cfg.env {
                req = req.with_env_var(key.clone(), value.clone());
            }
            if let Some(script) = spec.script {
                req = req.with_cmd(["-c".to_string(), script]);
            }
            let node_id = id.clone();
            let name = name.clone();
            let witnesses = cfg.witnesses.clone();
            starts.push(async move {
                let c = req
                    .start()
                    .await
                    .map_err(|e| Error::Cluster(format!("starting {name}: {e}")))?;
                Ok::<_, Error>(Node {
                    witness: witnesses.contains(&node_id),
                    id: node_id,
                    container_name: name,
                    data_port,
                    api_port,
                    container: Some(c),
                })
            });
        }
        for r in futures::future::join_all(starts).await {
            match r {
                Ok(n) => self.nodes.push(n),
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    pub fn ids(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.id.clone()).collect()
    }

    /// The nodes that have a data node (all but the witnesses).
    pub fn data_nodes(&self) -> impl Iterator<Item = &Node> {
        self.nodes.iter().filter(|n| !n.witness)
    }

    pub fn node(&self, id: &str) -> Result<&Node> {
        self.nodes
            .iter()
            .find(|n| n.id == id)
            .ok_or_else(|| Error::Cluster(format!("no node {id}")))
    }

    /// The node's IP on the cluster network (it may change across restarts).
    pub async fn ip(&self, id: &str) -> Result<String> {
        let n = self.node(id)?;
        let info = self
            .docker
            .inspect_container(&n.container_name, None)
            .await?;
        info.network_settings
            .and_then(|s| s.networks)
            .and_then(|mut m| m.remove(&self.network))
            .and_then(|e| e.ip_address)
            .filter(|ip| !ip.is_empty())
            .ok_or_else(|| Error::Cluster(format!("{id} has no IP on {}", self.network)))
    }

    /// (running, paused) as Docker sees it.
    pub async fn state(&self, id: &str) -> Result<(bool, bool)> {
        let n = self.node(id)?;
        let info = self
            .docker
            .inspect_container(&n.container_name, None)
            .await?;
        let st = info.state.unwrap_or_default();
        Ok((st.running.unwrap_or(false), st.paused.unwrap_or(false)))
    }

    /// Runs `cmd` in the node, for at most [`EXEC_LIMIT`]. Unbounded, one
    /// command that waits on a stopped process (a `redis-cli` against a
    /// SIGSTOPped kevy) held a whole chaos schedule for four minutes; past the
    /// limit the step fails with what it ran, and the run ends (its end phase
    /// still thaws every node) instead of hanging.
    pub async fn exec(&self, id: &str, cmd: &[&str]) -> Result<(i64, String)> {
        let n = self.node(id)?;
        tokio::time::timeout(
            EXEC_LIMIT,
            docker::exec(&self.docker, &n.container_name, cmd),
        )
        .await
        .map_err(|_| {
            Error::Cluster(format!(
                "{id}: {cmd:?} did not finish within {} s",
                EXEC_LIMIT.as_secs()
            ))
        })?
    }

    /// Runs a shell snippet in the node; fails on a non-zero exit.
    pub async fn sh(&self, id: &str, script: &str) -> Result<String> {
        let (code, out) = self.exec(id, &["sh", "-c", script]).await?;
        if code != 0 {
            return Err(Error::Cluster(format!(
                "{id}: `{script}` exited {code}: {out}"
            )));
        }
        Ok(out)
    }

    /// Sends a signal to the container's init; a container that is already stopped
    /// counts as killed.
    pub async fn kill(&self, id: &str, signal: &str) -> Result<()> {
        let n = self.node(id)?;
        match self
            .docker
            .kill_container(
                &n.container_name,
                Some(KillContainerOptions {
                    signal: signal.to_string(),
                }),
            )
            .await
        {
            Ok(()) => Ok(()),
            Err(e) if e.to_string().contains("is not running") => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    fn container(&self, id: &str) -> Result<&ContainerAsync<GenericImage>> {
        self.node(id)?
            .container
            .as_ref()
            .ok_or_else(|| Error::Cluster(format!("{id} has no container")))
    }

    pub async fn start_node(&self, id: &str) -> Result<()> {
        self.container(id)?.start().await?;
        Ok(())
    }

    pub async fn stop_node(&self, id: &str, timeout_s: i32) -> Result<()> {
        self.container(id)?
            .stop_with_timeout(Some(timeout_s))
            .await?;
        Ok(())
    }

    pub async fn pause(&self, id: &str) -> Result<()> {
        self.container(id)?.pause().await?;
        Ok(())
    }

    pub async fn unpause(&self, id: &str) -> Result<()> {
        self.container(id)?.unpause().await?;
        Ok(())
    }

    /// Waits until Docker reports the node stopped (after an in-container crash).
    pub async fn wait_stopped(&self, id: &str, timeout: Duration) -> Result<bool> {
        let deadline = tokio::time::Instant::now() + timeout;
        while tokio::time::Instant::now() < deadline {
            if !self.state(id).await?.0 {
                return Ok(true);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(false)
    }

    /// Writes every node's container log to `dir/<prefix>.<node>.log`; a
    /// log that cannot be read is noted in the log, never fails the run.
    pub async fn save_logs(&self, dir: &std::path::Path, prefix: &str) {
        for n in &self.nodes {
            let path = dir.join(format!("{prefix}.{}.log", n.id));
            match docker::logs(&self.docker, &n.container_name).await {
                Ok(text) => {
                    if let Err(e) = std::fs::write(&path, text) {
                        tracing::warn!("writing {}: {e}", path.display());
                    }
                }
                Err(e) => tracing::warn!("logs of {}: {e}", n.container_name),
            }
        }
    }

    /// Removes every container and the network.
    pub async fn teardown(&mut self) {
        if self.torn_down {
            return;
        }
        for n in &mut self.nodes {
            if let Some(c) = n.container.take() {
                // A paused container cannot be removed gracefully everywhere: unpause first.
                let _ = c.unpause().await;
                if let Err(e) = c.rm().await {
                    tracing::warn!("removing {}: {e}", n.container_name);
                }
            }
        }
        // Whatever is left with our label (also after a failed start).
        if let Err(e) = docker::cleanup_label(&self.docker, &self.run_label).await {
            tracing::warn!("cleanup of {}: {e}", self.run_label);
        }
        self.torn_down = true;
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if !self.torn_down {
            // Panics and early returns: containers and the network still go away.
            for n in &mut self.nodes {
                // Let the label-based cleanup remove them instead of testcontainers' async drop.
                if let Some(c) = n.container.take() {
                    std::mem::forget(c);
                }
            }
            docker::cleanup_label_blocking(self.run_label.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_picked_before_any_is_bound_are_all_different() {
        let picked: std::collections::BTreeSet<u16> =
            (0..12).map(|_| free_port().unwrap()).collect();
        assert_eq!(picked.len(), 12, "{picked:?}");
    }

    #[test]
    fn published_ports_are_free_and_above_the_ephemeral_range() {
        let ephemeral_end = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
            .ok()
            .and_then(|r| r.split_whitespace().nth(1)?.parse::<u16>().ok())
            .unwrap_or(60_999);
        for _ in 0..20 {
            let p = free_port().unwrap();
            assert!(p > ephemeral_end && PUBLISH_PORTS.contains(&p), "{p}");
            assert!(std::net::TcpListener::bind(("127.0.0.1", p)).is_ok());
        }
    }

    #[test]
    fn image_names_split_into_name_and_tag() {
        assert_eq!(
            split_image("elector-node:latest"),
            ("elector-node".into(), "latest".into())
        );
        assert_eq!(
            split_image("elector-node"),
            ("elector-node".into(), "latest".into())
        );
        assert_eq!(
            split_image("localhost:5000/x"),
            ("localhost:5000/x".into(), "latest".into())
        );
    }
}
