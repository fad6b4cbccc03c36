//! Reads every container's addresses (`docker exec ip -o addr show`) through
//! the run, so the double-holder checker judges what the kernel had, not what
//! the electors said. Bounded in time; stops when told.

use std::sync::Arc;
use std::time::{Duration, Instant};

use testcontainers::bollard::Docker;
use tokio::task::JoinHandle;

use super::{HolderSample, VipObs};
use crate::workload::Recorder;

/// Whether `ip -o addr show` output lists `address` (as `inet ADDRESS/...`
/// or `inet6 ADDRESS/...`).
pub fn lists_address(ip_output: &str, address: &str) -> bool {
    ip_output.lines().any(|l| {
        let mut words = l.split_whitespace();
        while let Some(w) = words.next() {
            if w == "inet" || w == "inet6" {
                return words
                    .next()
                    .and_then(|a| a.split('/').next())
                    .is_some_and(|a| a == address);
            }
        }
        false
    })
}

/// One round's answer for one container: `Some(holds)`, or `None` when the
/// container could not be asked (paused). A container that is not running
/// holds nothing on the network.
async fn holds(docker: &Docker, container: &str, address: &str) -> Option<bool> {
    let ask = crate::docker::exec(docker, container, &["ip", "-o", "addr", "show"]);
    match tokio::time::timeout(Duration::from_secs(3), ask).await {
        Ok(Ok((0, out))) => Some(lists_address(&out, address)),
        Ok(Ok(_)) | Err(_) => None,
        Ok(Err(e)) => {
            let e = e.to_string();
            if e.contains("is not running") || e.contains("No such container") {
                Some(false)
            } else {
                None
            }
        }
    }
}

/// Samples `(node id, container name)` every `every` until stopped or `max`.
pub fn spawn(
    rec: Arc<Recorder>,
    obs: Arc<VipObs>,
    docker: Docker,
    containers: Vec<(String, String)>,
    every: Duration,
    max: Duration,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let deadline = Instant::now() + max;
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        while !obs.stopped() && Instant::now() < deadline {
            tick.tick().await;
            let at_ms = rec.now_ms();
            let asks = containers
                .iter()
                .map(|(_, c)| holds(&docker, c, &obs.address));
            let answers = futures::future::join_all(asks).await;
            let round = containers
                .iter()
                .zip(answers)
                .map(|((node, _), holds)| HolderSample {
                    at_ms,
                    node: node.clone(),
                    holds,
                });
            obs.holders.lock().expect("lock").extend(round);
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_is_found_only_as_a_whole_inet_address() {
        let out = "1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever\n\
                   2: eth0    inet 10.213.4.2/24 brd 10.213.4.255 scope global eth0\n\
                   2: eth0    inet 10.213.4.100/32 scope global eth0\n";
        assert!(lists_address(out, "10.213.4.100"));
        assert!(!lists_address(out, "10.213.4.10"));
        assert!(!lists_address(out, "10.213.4.255"));
        assert!(!lists_address("", "10.213.4.100"));
    }
}
