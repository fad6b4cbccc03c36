//! kevy's own election (`kevy-elect`, switched on by `[cluster] node_id` and
//! `peers` in kevy's TOML): kevy 7.0.0 nodes and nothing else. Node 1 starts
//! with `role = "primary"` (kevy holds it read-only until it wins the first
//! election), the others as its replicas. The election's timings are
//! compiled in (`kevy_elect::ElectConfig::default()`: heartbeat 200 ms, down
//! after 5000 ms, election timeout 3000 ms, backoff 1000 ms + up to 4000 ms
//! jitter), so the elector runs at 5000 ms too when paired with it.
//!
//! `ROLE` and `INFO replication` report the elected role, so kevy's clients
//! find the primary by asking each node for its role: the harness does the
//! same. A primary that lost its quorum still says `role:master` and answers
//! writes with `-NOREPLICAS`, so the poller also tries a write (see
//! [`crate::target::discovery`]).

use super::{
    peer_applies, Applicability, Discovery, NodeSpec, Setting, Target, TargetKind, Topology,
};
use crate::scenario::{Step, Timings};

/// kevy-elect's compiled-in detection time.
pub const KEVY_DOWN_AFTER_MS: u64 = 5_000;
/// Election listener port inside every container (the elector's port, unused here).
pub const ELECT_PORT: u16 = 7400;
/// kevy's replication port = client port + this.
pub const REPL_OFFSET: u16 = 10_000;
const CONF_DIR: &str = "/etc/peer";

pub struct KevyBuiltin;

/// `peers = "n1@host:elect_port:client_port,..."` (kevy's extended form: the
/// client port is what a follower adds 10000 to for replication).
pub fn peers_value(topo: &Topology) -> String {
    topo.members
        .iter()
        .map(|m| format!("{}@{}:{ELECT_PORT}:{}", m.id, m.host, m.data_port))
        .collect::<Vec<_>>()
        .join(",")
}

/// kevy's TOML for node `index`: same server settings as the elector's kevy
/// nodes (one shard, AOF on), plus the `[cluster]` election.
pub fn kevy_toml(topo: &Topology, index: usize) -> String {
    let me = &topo.members[index];
    let first = &topo.members[0];
    let replication = if index == 0 {
        "role = \"primary\"\n".to_string()
    } else {
        format!(
            "role = \"replica\"\nupstream = \"{}:{}\"\n",
            first.host,
            first.data_port + REPL_OFFSET
        )
    };
    format!(
        "# rendered by the conformance harness (target kevy-builtin)\n\
         [server]\n\
         bind = \"0.0.0.0\"\n\
         port = {}\n\
         threads = 1\n\
         data_dir = \"/data/kevy\"\n\n\
         [persistence]\n\
         aof = true\n\n\
         [replication]\n\
         {replication}\n\
         [cluster]\n\
         node_id = \"{}\"\n\
         elect_port_base = {ELECT_PORT}\n\
         peers = \"{}\"\n",
        me.data_port,
        me.id,
        peers_value(topo),
    )
}

/// The container's command: write the TOML if absent (a restarted node keeps
/// its data dir and its persisted vote), wait until the peers' names resolve,
/// run kevy in the foreground.
pub fn start_script(topo: &Topology, index: usize) -> String {
    let hosts: Vec<&str> = topo.members.iter().map(|m| m.host.as_str()).collect();
    format!(
        "set -e\n\
         mkdir -p {CONF_DIR} /data/kevy\n\
         [ -f {CONF_DIR}/kevy.toml ] || cat > {CONF_DIR}/kevy.toml <<'EOF_KEVY'\n{}EOF_KEVY\n\
         for h in {}; do for _ in $(seq 1 50); do getent hosts $h >/dev/null && break; sleep 0.2; done; done\n\
         exec /usr/local/bin/kevy --config {CONF_DIR}/kevy.toml\n",
        kevy_toml(topo, index),
        hosts.join(" "),
    )
}

impl Target for KevyBuiltin {
    fn kind(&self) -> TargetKind {
        TargetKind::KevyBuiltin
    }

    fn node_spec(&self, topo: &Topology, index: usize) -> NodeSpec {
        NodeSpec {
            script: Some(start_script(topo, index)),
            control_port: None,
        }
    }

    fn discovery(&self) -> Discovery {
        Discovery::DataRole
    }

    fn applies(&self, step: &Step) -> Applicability {
        match step {
            Step::KillData(_) => Applicability::NotApplicable(
                "the election runs inside the data node: killing it is the kill step".into(),
            ),
            _ => peer_applies(step),
        }
    }

    fn settings(&self, _t: &Timings) -> Vec<Setting> {
        vec![
            Setting::new("down_after (compiled in)", KEVY_DOWN_AFTER_MS),
            Setting::new("hb_interval (compiled in)", 200),
            Setting::new("election_timeout (compiled in)", 3000),
            Setting::new("backoff (compiled in)", "1000 + up to 4000 jitter"),
            Setting::new("threads", 1),
            Setting::new(
                "clients",
                "INFO replication on every node; the master that accepts writes",
            ),
        ]
    }

    fn control_processes(&self) -> &'static [&'static str] {
        // The election is a thread of the data node: nothing separate to measure.
        &[]
    }

    fn election_slack_ms(&self) -> u64 {
        // kevy's REPLICAOF stall after a host death (README, Known limits)
        // plus its own election timeout and largest backoff.
        3_500 + 3_000 + 5_000
    }

    fn detection_ms(&self, _timings: &Timings) -> u64 {
        KEVY_DOWN_AFTER_MS
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::Member;

    fn topo() -> Topology {
        Topology {
            members: (0..3)
                .map(|k| Member {
                    id: format!("n{}", k + 1),
                    host: format!("cf-x-n{}", k + 1),
                    data_port: 6379 + k as u16,
                })
                .collect(),
            timings: Timings::default(),
        }
    }

    #[test]
    fn the_cluster_section_lists_every_node_with_its_election_and_client_port() {
        let toml = kevy_toml(&topo(), 1);
        assert!(toml.contains("[cluster]\nnode_id = \"n2\"\nelect_port_base = 7400\n"));
        assert!(toml.contains(
            "peers = \"n1@cf-x-n1:7400:6379,n2@cf-x-n2:7400:6380,n3@cf-x-n3:7400:6381\"\n"
        ));
        assert!(toml.contains("port = 6380\n"));
    }

    #[test]
    fn replicas_follow_the_first_node_on_its_replication_port() {
        let t = topo();
        assert!(kevy_toml(&t, 0).contains("role = \"primary\"\n"));
        assert!(!kevy_toml(&t, 0).contains("upstream"));
        assert!(kevy_toml(&t, 2).contains("role = \"replica\"\nupstream = \"cf-x-n1:16379\"\n"));
    }

    #[test]
    fn kevy_runs_at_its_compiled_in_detection_time_whatever_the_scenario_says() {
        let t = Timings {
            down_after_ms: 1500,
            ..Timings::default()
        };
        assert_eq!(KevyBuiltin.detection_ms(&t), 5000);
        assert!(KevyBuiltin.control_processes().is_empty());
    }

    #[test]
    fn the_start_script_keeps_an_existing_config_and_execs_kevy() {
        let s = start_script(&topo(), 0);
        assert!(s.contains("[ -f /etc/peer/kevy.toml ] || cat"));
        assert!(s.contains("for h in cf-x-n1 cf-x-n2 cf-x-n3;"));
        assert!(s
            .trim_end()
            .ends_with("exec /usr/local/bin/kevy --config /etc/peer/kevy.toml"));
    }

    #[test]
    fn kevys_elected_role_is_read_from_info_replication() {
        // As kevy 7.0.0 with [cluster] answered on loopback: the winner of the
        // election, then a follower (replication port = client port + 10000).
        let primary = "# Replication\r\nrole:master\r\nconnected_slaves:2\r\n\
            slave0:ip=127.0.0.1,port=7500,state=online,offset=0,sent=0,lag=0\r\n\
            slave1:ip=127.0.0.1,port=7480,state=online,offset=0,sent=0,lag=0\r\n\
            master_replid:0000000000000000000000000000000000000000\r\n";
        let d = crate::probe::parse_info_replication(primary).unwrap();
        assert_eq!(d.role, "master");
        let replica = "# Replication\r\nrole:slave\r\nmaster_host:127.0.0.1\r\n\
            master_port:17460\r\nmaster_link_status:up\r\nmaster_last_io_seconds_ago:0\r\n";
        let d = crate::probe::parse_info_replication(replica).unwrap();
        assert_eq!((d.role.as_str(), d.link_up), ("slave", Some(true)));
        assert_eq!(d.master_host.as_deref(), Some("127.0.0.1"));
    }
}
