//! A peer named by DNS that comes back at a new address under the same name
//! (what Kubernetes does to a restarted pod, docs/kubernetes.md) is heard
//! again: the electors resolve a peer's name on every redial, they do not
//! keep the address they found first.
//!
//! On loopback, with kevy 7.0.0 and redis-server: the test runs in private
//! network and mount namespaces (root; elsewhere it says so and passes,
//! support/netns.rs), binds its own file over `/etc/hosts`, names one
//! replica `moving.test` at 127.0.0.2, then restarts that replica's elector
//! with the name moved to 127.0.0.3 and the old address dropped by iptables.
//! An elector that kept 127.0.0.2 would never reach it again, and since each
//! elector sends its messages over the connection it dialed itself, the
//! moved node hears the others only once they have dialed 127.0.0.3.
//! (Without the name moving, the same run fails: checked by hand.)

mod support;

use std::path::Path;
use std::time::Duration;
use support::netns::{inside_private_netns, sh};
use support::{wait_until, Backend, Cluster};

const NAME: &str = "moving.test";

/// Every node hears every other node within three heartbeats.
fn mesh_whole(cluster: &Cluster) -> bool {
    (0..cluster.nodes.len()).all(|i| {
        cluster.status(i).is_some_and(|s| {
            s["peers"].as_array().is_some_and(|peers| {
                peers.len() == cluster.nodes.len() - 1
                    && peers.iter().all(|p| {
                        p["alive"] == true && p["last_seen_ms"].as_u64().is_some_and(|ms| ms <= 150)
                    })
            })
        })
    })
}

/// Names node `m`'s election address `NAME` in every config, and lets `m`
/// accept elections on every loopback address.
fn name_the_node(cluster: &Cluster, m: usize) {
    let port = cluster.nodes[m].election_port;
    for (i, node) in cluster.nodes.iter().enumerate() {
        let path = node.dir.join("elector.yaml");
        let mut yaml = std::fs::read_to_string(&path).unwrap();
        if i == m {
            yaml = yaml.replace(
                &format!("listen: {{ election: \"127.0.0.1:{port}\""),
                &format!("listen: {{ election: \"0.0.0.0:{port}\""),
            );
        }
        yaml = yaml.replace(
            &format!("election: \"127.0.0.1:{port}\","),
            &format!("election: \"{NAME}:{port}\","),
        );
        assert!(yaml.contains(&format!("{NAME}:{port}")), "{yaml}");
        std::fs::write(&path, yaml).unwrap();
    }
}

/// Points `NAME` at `ip` in the file bound over /etc/hosts (written in
/// place: the bind mount holds the inode).
fn resolve_name_to(hosts: &Path, ip: &str) {
    std::fs::write(hosts, format!("127.0.0.1 localhost\n{ip} {NAME}\n")).unwrap();
}

fn a_peer_back_at_a_new_address_is_heard_again(backend: Backend) {
    let hosts = std::env::temp_dir().join(format!("elector-hosts-{}", std::process::id()));
    resolve_name_to(&hosts, "127.0.0.2");
    sh(&format!("mount --bind {} /etc/hosts", hosts.display()));

    let mut cluster = Cluster::start(backend, 3);
    let p = cluster.wait_primary(Duration::from_secs(15));
    let m = (0..3).find(|&i| i != p).unwrap();
    name_the_node(&cluster, m);
    for i in 0..3 {
        cluster.signal_elector(i, "KILL");
        cluster.wait_elector_exit(i, Duration::from_secs(5));
        cluster.start_elector(i);
    }
    wait_until(
        Duration::from_secs(15),
        || mesh_whole(&cluster),
        "the mesh with the named node at 127.0.0.2",
    );

    // The node comes back under the same name at a new address; the old
    // address is gone.
    cluster.signal_elector(m, "KILL");
    cluster.wait_elector_exit(m, Duration::from_secs(5));
    resolve_name_to(&hosts, "127.0.0.3");
    sh("iptables -A OUTPUT -d 127.0.0.2 -j DROP");
    cluster.start_elector(m);
    wait_until(
        Duration::from_secs(10),
        || mesh_whole(&cluster),
        "every node to hear the moved node at 127.0.0.3",
    );
    cluster.wait_primary(Duration::from_secs(5));
    let _ = std::fs::remove_file(&hosts);
}

#[test]
fn a_peer_back_at_a_new_address_under_its_name_is_heard_again_on_kevy() {
    support::require("kevy");
    if inside_private_netns("a_peer_back_at_a_new_address_under_its_name_is_heard_again_on_kevy") {
        a_peer_back_at_a_new_address_is_heard_again(Backend::Kevy);
    }
}

#[test]
fn a_peer_back_at_a_new_address_under_its_name_is_heard_again_on_redis() {
    support::require("redis-server");
    if inside_private_netns("a_peer_back_at_a_new_address_under_its_name_is_heard_again_on_redis") {
        a_peer_back_at_a_new_address_is_heard_again(Backend::Redis);
    }
}
