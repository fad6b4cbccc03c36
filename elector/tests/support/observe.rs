//! What a test reads from a running cluster: `/status`, `/metrics`, the
//! writable primary, replication links, and the logs when it fails.

use std::time::Duration;

use serde_json::Value;

use super::{print_log_tail, redis_client, wait_until, Cluster};

impl Cluster {
    /// Node `i`'s `/metrics` text.
    pub fn metrics_text(&self, i: usize) -> String {
        let url = format!("http://127.0.0.1:{}/metrics", self.nodes[i].api_port);
        ureq::get(&url)
            .timeout(Duration::from_millis(1000))
            .call()
            .expect("GET /metrics")
            .into_string()
            .unwrap()
    }

    /// An unlabelled-but-for-the-node counter from node `i`'s `/metrics`.
    pub fn metric(&self, i: usize, name: &str) -> u64 {
        let prefix = format!("{name}{{");
        self.metrics_text(i)
            .lines()
            .filter(|l| l.starts_with(&prefix))
            .find_map(|l| l.rsplit_once(' ').and_then(|(_, v)| v.trim().parse().ok()))
            .unwrap_or(0)
    }

    /// The `elector_connections_closed_total` counter of node `i` for `reason`.
    pub fn connections_closed(&self, i: usize, reason: &str) -> u64 {
        let text = self.metrics_text(i);
        let needle = format!("reason=\"{reason}\"}} ");
        text.lines()
            .filter(|l| l.starts_with("elector_connections_closed_total{"))
            .find_map(|l| {
                l.split_once(&needle)
                    .map(|(_, v)| v.trim().parse().unwrap())
            })
            .unwrap_or(0)
    }

    pub fn status(&self, i: usize) -> Option<Value> {
        let url = format!("http://127.0.0.1:{}/status", self.nodes[i].api_port);
        ureq::get(&url)
            .timeout(Duration::from_millis(500))
            .call()
            .ok()?
            .into_json()
            .ok()
    }

    /// Peer `id` as node `i`'s `/status` lists it.
    pub fn peer_in(&self, i: usize, id: &str) -> Option<Value> {
        let mut status = self.status(i)?;
        let peers = status["peers"].as_array_mut()?;
        let at = peers.iter().position(|p| p["id"] == id)?;
        Some(peers.swap_remove(at))
    }

    /// The index of the node that is an unfenced primary, if exactly one is.
    pub fn writable_primary(&self) -> Option<usize> {
        let found: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| {
                self.status(i)
                    .is_some_and(|s| s["role"] == "primary" && s["fenced"] == false)
            })
            .collect();
        (found.len() == 1).then(|| found[0])
    }

    pub fn wait_primary(&self, within: Duration) -> usize {
        let mut found = None;
        wait_until(
            within,
            || {
                found = self.writable_primary();
                found.is_some()
            },
            "a writable primary",
        );
        found.unwrap()
    }

    /// Waits until every node but `primary` reports its replication link up
    /// and has finished loading what it received: kevy reports the link up
    /// while it still answers `-LOADING` to every command (a full snapshot
    /// follows each promotion), and a test's next command would get that.
    pub fn wait_replica_links(&self, primary: usize) {
        let data_nodes = (0..self.nodes.len()).filter(|&i| !self.nodes[i].witness);
        for i in data_nodes.filter(|&i| i != primary) {
            wait_until(
                Duration::from_secs(10),
                || {
                    self.status(i)
                        .is_some_and(|s| s["data_node"]["link_up"] == true)
                },
                "replica links",
            );
            wait_until(
                Duration::from_secs(10),
                || {
                    let r: redis::RedisResult<Option<String>> = redis::cmd("GET")
                        .arg("wait-replica-links")
                        .query(&mut self.client(i));
                    !r.is_err_and(|e| e.kind() == redis::ErrorKind::BusyLoadingError)
                },
                "replicas to finish loading",
            );
        }
    }

    pub fn client(&self, i: usize) -> redis::Connection {
        redis_client(self.nodes[i].data_port)
    }

    pub fn dump_logs(&self) {
        for n in &self.nodes {
            for f in [
                format!("elector-{}.previous.log", n.id),
                format!("elector-{}.log", n.id),
                format!("watchdog-{}.log", n.id),
                "data.log".to_string(),
            ] {
                print_log_tail(&format!("{} {f}", n.id), &n.dir.join(&f));
            }
            // What a restarted kevy elector proves its position from.
            let position = n.dir.join("elector").join("kevy-position");
            if let Ok(text) = std::fs::read_to_string(&position) {
                println!("---- {} kevy-position: {}", n.id, text.trim());
            }
        }
    }
}
