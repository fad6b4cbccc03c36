//! The `/status` document (see `docs/interfaces.md`, "HTTP API").
//!
//! These types are the single Rust spelling of the JSON contract: the API
//! serialises them, the CLI and the conformance suite deserialise them. They
//! derive both directions so a round trip is lossless and a test can pin the
//! contract's example byte for byte.
//!
//! Optional fields are serialised as `null` rather than omitted so consumers
//! (HAProxy checks aside, mostly `jq` and the conformance suite) always see
//! the same keys. The two fields added beyond the contract's example
//! (`switchover`, `last_vote`) and the per-peer `api` address default to
//! `null` when absent, so older documents still parse; `durable_epoch` and
//! `boot_id` (which tell an epoch forgotten by a restart from one that went
//! back) default to 0 for the same reason.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The protocol's role type, serialised in the contract's spelling.
pub use crate::protocol::Role;

/// Transition reasons named by the contract. `TransitionRecord::reason` stays a
/// `String` so a newer node's reason still parses in an older CLI; this list is
/// for validation and for pre-seeding metric series.
pub const TRANSITION_REASONS: &[&str] = &[
    "startup",
    "peer_timeout",
    "won_election",
    "lost_election",
    "election_timeout",
    "newer_epoch",
    "quorum_lost",
    "quorum_regained",
    "switchover",
    "switchover_rollback",
    "preemption",
    "data_node_down",
    "data_node_recovered",
];

/// What this node sees of its own data node (kevy or Redis).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataNodeStatus {
    /// `kevy` or `redis`.
    pub kind: String,
    /// Client address the elector talks to.
    pub address: String,
    /// Whether the last poll got an answer.
    pub reachable: bool,
    /// Role the data node reports (`master` / `slave`), if known.
    #[serde(default)]
    pub role: Option<String>,
    /// Replication offset, if known.
    #[serde(default)]
    pub offset: Option<u64>,
    /// Bytes behind the primary (replicas only), if known.
    #[serde(default)]
    pub lag: Option<u64>,
    /// Replication link state (replicas only), if known.
    #[serde(default)]
    pub link_up: Option<bool>,
    /// Whether the reading describes the data node's content (protocol
    /// §6.10): `proven`, `unproven_after_elector_start`,
    /// `unproven_after_data_node_restart`, `unproven_left_its_stream`,
    /// `unproven_after_state_reset` (§5.2).
    /// Absent on a witness and from older nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proof: Option<String>,
    /// The durable floor (§6.10): the highest `[data_epoch, offset]` the data
    /// node held while following, so the most it may have acknowledged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub floor: Option<(u64, u64)>,
    /// What the node must not stand or vote below, the highest of: the
    /// floor, what its data node held as primary, the watchdog's hint of a
    /// stream it was joining, and `[joined epoch, 0]` for a join whose
    /// data-node process is gone (§6.10). Above `floor` when one of the
    /// others is what keeps the node from standing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub must_hold: Option<(u64, u64)>,
    /// The data node may lack what it acknowledged (unproven, or proven
    /// below the floor): this node does not stand and votes with its floor
    /// until it holds the floor again or an operator accepts the loss
    /// (`elector accept-data-loss`).
    #[serde(default)]
    pub below_floor: bool,
}

/// What this node knows about one other node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerStatus {
    pub id: String,
    /// Heard from within `down_after_ms`.
    pub alive: bool,
    #[serde(default)]
    pub role: Option<Role>,
    #[serde(default)]
    pub epoch: Option<u64>,
    #[serde(default)]
    pub offset: Option<u64>,
    /// Milliseconds since the last valid message from that peer.
    #[serde(default)]
    pub last_seen_ms: Option<u64>,
    /// Whether the peer's last heartbeat said it may stand for election
    /// (protocol §6.5): a switchover target must, so a switchover to a peer
    /// showing `false` (a primary that just handed over, until its next
    /// heartbeat; a replica too far behind) is refused with 409.
    #[serde(default)]
    pub eligible: Option<bool>,
    /// The peer's HTTP API address (`host:port`) when configured, so
    /// `elector status` can ask every node for its own view.
    #[serde(default)]
    pub api: Option<String>,
}

/// One role change, kept so every transition can be explained after the fact.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransitionRecord {
    pub at_unix_ms: u64,
    pub from: Role,
    pub to: Role,
    pub epoch: u64,
    /// Machine-readable cause, one of [`TRANSITION_REASONS`] (snake case).
    pub reason: String,
    /// Set on a primary's fence change (from = to = primary): whether writes
    /// are now refused. Absent on role changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fenced: Option<bool>,
}

/// Phase of a planned handover.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SwitchoverPhase {
    /// Writes fenced on the primary; waiting for the target to catch up.
    CatchingUp,
    /// Target caught up; handing over through the protocol with a new epoch.
    HandingOver,
    /// Finished: the target is primary.
    Completed,
    /// Timed out or failed; the old primary unfenced and resumed.
    RolledBack,
}

/// A switchover in progress (or the last one, until the next starts).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SwitchoverState {
    /// Target node id.
    pub to: String,
    pub phase: SwitchoverPhase,
    pub started_at_unix_ms: u64,
    pub deadline_unix_ms: u64,
    /// Offset the target must reach (the fenced primary's offset).
    #[serde(default)]
    pub primary_offset: Option<u64>,
    /// Target's last reported offset.
    #[serde(default)]
    pub target_offset: Option<u64>,
    /// How long writes were fenced, once known (the write-unavailability window).
    #[serde(default)]
    pub write_pause_ms: Option<u64>,
    /// Why it rolled back, when it did.
    #[serde(default)]
    pub error: Option<String>,
}

/// The vote this node cast most recently (durable; one per epoch).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastVote {
    pub epoch: u64,
    #[serde(rename = "for")]
    pub for_node: String,
}

/// Everything `GET /status` returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusSnapshot {
    pub node_id: String,
    pub role: Role,
    /// The epoch this node works in (in memory). It can run ahead of
    /// `durable_epoch` while a write of the state is pending or failing.
    pub epoch: u64,
    /// The highest epoch this node's state file is known to hold (the last
    /// write that succeeded, or what it loaded at start). A restart comes
    /// back at this epoch, not at `epoch`: an epoch learned but never
    /// written (an unwritable state directory) is forgotten, which is safe
    /// because nothing that depended on it left the node (§5.2). Never
    /// decreases, across restarts included. Absent (0) from older nodes.
    #[serde(default)]
    pub durable_epoch: u64,
    /// This process's auth boot id (protocol §3): larger at every start of
    /// the node, so a change tells a restart apart from a running process.
    /// Absent (0) from older nodes.
    #[serde(default)]
    pub boot_id: u64,
    /// Node id of the primary this node believes in, if any.
    pub primary: Option<String>,
    /// Writes on the local data node are fenced.
    pub fenced: bool,
    pub quorum: usize,
    pub cluster_size: usize,
    pub data_node: DataNodeStatus,
    /// Every other node (this one excluded).
    pub peers: Vec<PeerStatus>,
    /// The last N role changes, oldest first.
    pub transitions: Vec<TransitionRecord>,
    /// Dropped messages by reason (`bad_tag`, `replay`, `stale_epoch`, ...).
    pub rejected: BTreeMap<String, u64>,
    #[serde(default)]
    pub switchover: Option<SwitchoverState>,
    #[serde(default)]
    pub last_vote: Option<LastVote>,
    /// The virtual IP, when configured (docs/vip.md): held here or not,
    /// since when, why, and failed moves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vip: Option<crate::vip::VipStatus>,
    /// The data node's dead-man switch (`elector watchdog`): whether it polls,
    /// and its clamps. Absent on a witness (no data node to fence) and from
    /// older nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watchdog: Option<super::metrics::WatchdogStatus>,
}

impl StatusSnapshot {
    /// The snapshot a node publishes before its first observation: a fenced
    /// replica at epoch 0 with no primary. Starting fenced mirrors what the
    /// runtime does to the data node, so a load balancer never routes writes
    /// to a node that has not yet been through an election.
    pub fn initial(
        node_id: &str,
        data_kind: &str,
        data_address: &str,
        cluster_size: usize,
    ) -> Self {
        StatusSnapshot {
            node_id: node_id.to_string(),
            role: Role::Replica,
            epoch: 0,
            durable_epoch: 0,
            boot_id: 0,
            primary: None,
            fenced: true,
            quorum: cluster_size / 2 + 1,
            cluster_size,
            data_node: DataNodeStatus {
                kind: data_kind.to_string(),
                address: data_address.to_string(),
                reachable: false,
                role: None,
                offset: None,
                lag: None,
                link_up: None,
                proof: None,
                floor: None,
                must_hold: None,
                below_floor: false,
            },
            peers: Vec::new(),
            transitions: Vec::new(),
            rejected: BTreeMap::new(),
            switchover: None,
            last_vote: None,
            vip: None,
            watchdog: None,
        }
    }

    /// This node may take writes: `GET /primary` answers 200.
    pub fn is_writable_primary(&self) -> bool {
        self.role == Role::Primary && !self.fenced
    }

    /// This node can serve reads as a replica: `GET /replica` answers 200.
    /// An unknown link state counts as healthy (Redis reports it, kevy may not
    /// have yet); an explicitly down link does not.
    pub fn is_healthy_replica(&self) -> bool {
        self.role == Role::Replica
            && self.data_node.reachable
            && self.data_node.link_up != Some(false)
    }

    /// Nodes this one can hear, itself included.
    pub fn alive_count(&self) -> usize {
        1 + self.peers.iter().filter(|p| p.alive).count()
    }

    /// This node hears a quorum (itself included).
    pub fn quorum_ok(&self) -> bool {
        self.alive_count() >= self.quorum
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example from `docs/interfaces.md`, verbatim.
    const CONTRACT_EXAMPLE: &str = r#"{
  "node_id": "n1", "role": "primary", "epoch": 3, "durable_epoch": 3,
  "boot_id": 1760000000000, "primary": "n1", "fenced": false,
  "quorum": 2, "cluster_size": 3,
  "data_node": {"kind": "kevy", "address": "127.0.0.1:6379", "reachable": true,
                "role": "master", "offset": 1234, "lag": 0, "link_up": true},
  "peers": [{"id": "n2", "alive": true, "role": "replica", "epoch": 3,
             "offset": 1234, "last_seen_ms": 40, "eligible": true}],
  "transitions": [{"at_unix_ms": 1760000000000, "from": "replica", "to": "primary",
                   "epoch": 3, "reason": "won_election"}],
  "rejected": {"bad_tag": 0, "replay": 0, "stale_epoch": 0}
}"#;

    /// Every key/value of `expected` appears in `actual` (objects compared
    /// recursively, arrays element by element).
    fn contains(actual: &serde_json::Value, expected: &serde_json::Value) -> bool {
        use serde_json::Value;
        match (actual, expected) {
            (Value::Object(a), Value::Object(e)) => e
                .iter()
                .all(|(k, ev)| a.get(k).is_some_and(|av| contains(av, ev))),
            (Value::Array(a), Value::Array(e)) => {
                a.len() == e.len() && a.iter().zip(e).all(|(av, ev)| contains(av, ev))
            }
            _ => actual == expected,
        }
    }

    #[test]
    fn contract_example_round_trips_without_losing_a_field() {
        let parsed: StatusSnapshot =
            serde_json::from_str(CONTRACT_EXAMPLE).expect("contract example parses");
        assert_eq!(parsed.role, Role::Primary);
        assert_eq!(parsed.primary.as_deref(), Some("n1"));
        assert_eq!(parsed.peers[0].role, Some(Role::Replica));
        assert_eq!(parsed.transitions[0].reason, "won_election");
        assert_eq!(parsed.rejected.get("replay"), Some(&0));

        let out = serde_json::to_value(&parsed).expect("serialises");
        let example: serde_json::Value =
            serde_json::from_str(CONTRACT_EXAMPLE).expect("valid json");
        assert!(
            contains(&out, &example),
            "output {out} lost part of the contract example"
        );

        let again: StatusSnapshot = serde_json::from_value(out).expect("output parses back");
        assert_eq!(again, parsed);
    }

    #[test]
    fn optional_fields_are_serialised_as_null_not_omitted() {
        let snap = StatusSnapshot::initial("n1", "redis", "127.0.0.1:6379", 3);
        let v = serde_json::to_value(&snap).expect("serialises");
        assert!(v["primary"].is_null());
        assert!(v["switchover"].is_null());
        assert!(v["last_vote"].is_null());
        assert!(v["data_node"]["offset"].is_null());
        assert_eq!(v["role"], "replica");
        assert_eq!(v["fenced"], true);
        assert_eq!(v["quorum"], 2);
    }

    #[test]
    fn a_document_from_a_node_without_durable_epoch_or_boot_id_still_parses_as_zero() {
        let old = CONTRACT_EXAMPLE
            .replace(r#""durable_epoch": 3,"#, "")
            .replace(r#""boot_id": 1760000000000,"#, "");
        assert!(!old.contains("durable_epoch") && !old.contains("boot_id"));
        let parsed: StatusSnapshot = serde_json::from_str(&old).expect("older document parses");
        assert_eq!(
            (parsed.epoch, parsed.durable_epoch, parsed.boot_id),
            (3, 0, 0)
        );
    }

    #[test]
    fn last_vote_uses_the_key_for() {
        let vote = LastVote {
            epoch: 4,
            for_node: "n2".into(),
        };
        assert_eq!(
            serde_json::to_string(&vote).expect("serialises"),
            r#"{"epoch":4,"for":"n2"}"#
        );
    }

    #[test]
    fn role_names_are_lowercase_and_unknown_roles_are_rejected() {
        assert_eq!(
            serde_json::to_string(&Role::Candidate).expect("ok"),
            "\"candidate\""
        );
        assert!(serde_json::from_str::<Role>("\"Primary\"").is_err());
        assert!(serde_json::from_str::<Role>("\"leader\"").is_err());
    }

    #[test]
    fn health_predicates_follow_the_contract() {
        let mut snap = StatusSnapshot::initial("n1", "kevy", "127.0.0.1:6379", 3);
        assert!(!snap.is_writable_primary(), "a fresh node is fenced");
        snap.role = Role::Primary;
        snap.fenced = false;
        assert!(snap.is_writable_primary());
        snap.fenced = true;
        assert!(
            !snap.is_writable_primary(),
            "a fenced primary is not writable"
        );

        snap.role = Role::Replica;
        assert!(!snap.is_healthy_replica(), "unreachable data node");
        snap.data_node.reachable = true;
        assert!(snap.is_healthy_replica(), "unknown link state counts as up");
        snap.data_node.link_up = Some(false);
        assert!(!snap.is_healthy_replica());
    }

    #[test]
    fn quorum_counts_this_node_and_alive_peers() {
        let mut snap = StatusSnapshot::initial("n1", "kevy", "a:1", 3);
        assert!(!snap.quorum_ok());
        snap.peers.push(PeerStatus {
            id: "n2".into(),
            alive: true,
            role: None,
            epoch: None,
            offset: None,
            last_seen_ms: None,
            eligible: None,
            api: None,
        });
        assert!(snap.quorum_ok());
    }
}
