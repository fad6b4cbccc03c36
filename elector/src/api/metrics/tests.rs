use super::super::status::{PeerStatus, Role};
use super::*;

fn snapshot() -> StatusSnapshot {
    let mut s = StatusSnapshot::initial("n1", "kevy", "127.0.0.1:6379", 3);
    s.role = Role::Primary;
    s.fenced = false;
    s.epoch = 7;
    s.data_node.offset = Some(1234);
    s.peers = vec![
        PeerStatus {
            id: "n2".into(),
            alive: true,
            role: Some(Role::Replica),
            epoch: Some(7),
            offset: Some(1200),
            last_seen_ms: Some(40),
            eligible: Some(true),
            api: None,
        },
        PeerStatus {
            id: "n\"3".into(),
            alive: false,
            role: None,
            epoch: None,
            offset: None,
            last_seen_ms: None,
            eligible: None,
            api: None,
        },
    ];
    s
}

/// Checks the exposition grammar line by line: comments are HELP/TYPE,
/// every sample belongs to a family declared just before, names and
/// label syntax are valid, values parse.
fn assert_valid_exposition(text: &str) {
    let mut declared: Vec<String> = Vec::new();
    let mut typed: Vec<String> = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let name = rest.split(' ').next().unwrap_or_default();
            assert!(
                !declared.contains(&name.to_string()),
                "family {name} declared twice"
            );
            declared.push(name.to_string());
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut it = rest.split(' ');
            let name = it.next().unwrap_or_default();
            let kind = it.next().unwrap_or_default();
            assert!(matches!(kind, "gauge" | "counter"), "bad type line {line}");
            assert_eq!(
                declared.last().map(String::as_str),
                Some(name),
                "TYPE without HELP: {line}"
            );
            typed.push(name.to_string());
            continue;
        }
        assert!(!line.starts_with('#'), "unexpected comment {line}");
        let name_end = line.find(['{', ' ']).expect("sample has a name");
        let name = &line[..name_end];
        assert!(
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'),
            "bad metric name {name}"
        );
        assert_eq!(
            typed.last().map(String::as_str),
            Some(name),
            "sample outside its family: {line}"
        );
        let value = line.rsplit(' ').next().expect("value");
        value.parse::<f64>().expect("numeric value");
        if line[name_end..].starts_with('{') {
            let close = line.rfind('}').expect("closing brace");
            let labels = &line[name_end + 1..close];
            // key="value" pairs with escaped quotes inside values.
            let mut rest = labels;
            while !rest.is_empty() {
                let eq = rest.find("=\"").expect("label has =\"");
                let key = &rest[..eq];
                assert!(
                    key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
                    "bad label {key}"
                );
                let mut i = eq + 2;
                let bytes = rest.as_bytes();
                while bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                rest = &rest[i + 1..];
                rest = rest.strip_prefix(',').unwrap_or(rest);
            }
        }
    }
    assert!(text.ends_with('\n'));
}

#[test]
fn exposition_is_valid_prometheus_text() {
    let m = Metrics::new();
    m.election_started();
    m.message_in("HB");
    m.message_rejected("bad_tag");
    m.hook_run("promote", HookOutcome::TimedOut);
    let text = m.render(&snapshot());
    assert_valid_exposition(&text);
}

#[test]
fn gauges_reflect_the_snapshot() {
    let text = Metrics::new().render(&snapshot());
    assert!(text.contains("elector_role{node=\"n1\",role=\"primary\"} 1\n"));
    assert!(text.contains("elector_role{node=\"n1\",role=\"replica\"} 0\n"));
    assert!(text.contains("elector_epoch{node=\"n1\"} 7\n"));
    assert!(text.contains("elector_fenced{node=\"n1\"} 0\n"));
    assert!(text.contains("elector_quorum_ok{node=\"n1\"} 1\n"));
    assert!(text.contains("elector_peer_alive{node=\"n1\",peer=\"n2\"} 1\n"));
    assert!(text.contains("elector_data_node_offset{node=\"n1\"} 1234\n"));
}

#[test]
fn label_values_with_quotes_are_escaped() {
    let text = Metrics::new().render(&snapshot());
    assert!(text.contains("elector_peer_alive{node=\"n1\",peer=\"n\\\"3\"} 0\n"));
}

#[test]
fn counters_count_by_label_and_known_reasons_start_at_zero() {
    let m = Metrics::new();
    m.message_rejected("replay");
    m.message_rejected("replay");
    m.message_out("OFFER");
    m.transition("won_election");
    m.hook_run("fence", HookOutcome::Failed);
    m.connection_closed("handshake_timeout");
    let text = m.render(&snapshot());
    assert!(text.contains(
        "elector_connections_closed_total{node=\"n1\",reason=\"handshake_timeout\"} 1\n"
    ));
    assert!(text.contains("elector_connections_closed_total{node=\"n1\",reason=\"idle\"} 0\n"));
    assert!(text.contains("elector_messages_rejected_total{node=\"n1\",reason=\"replay\"} 2\n"));
    assert!(text.contains("elector_messages_rejected_total{node=\"n1\",reason=\"bad_tag\"} 0\n"));
    assert!(text.contains("elector_messages_out_total{node=\"n1\",type=\"OFFER\"} 1\n"));
    assert!(text.contains("elector_transitions_total{node=\"n1\",reason=\"won_election\"} 1\n"));
    assert!(text.contains("elector_transitions_total{node=\"n1\",reason=\"peer_timeout\"} 0\n"));
    assert!(text
        .contains("elector_hooks_run_total{node=\"n1\",event=\"fence\",outcome=\"failed\"} 1\n"));
    assert_eq!(m.rejected_counts().get("replay"), Some(&2));
    assert_eq!(m.hook_count("fence", HookOutcome::Failed), 1);
}

/// Every family `/metrics` exposes: sample name, type, label names in order,
/// and HELP text. Captured from the hand-written exposition this module
/// replaced; dashboards and alerts are written against these, so a change
/// here is a change of the operator interface (docs/interfaces.md).
#[rustfmt::skip]
const EXPOSED_FAMILIES: &[(&str, &str, &[&str], &str)] = &[
    ("elector_build_info", "gauge", &["node", "version", "commit"], "Always 1; the labels name the version and git commit this elector was built from."),
    ("elector_role", "gauge", &["node", "role"], "1 for the role this node currently holds, 0 for the others."),
    ("elector_epoch", "gauge", &["node"], "Current election epoch."),
    ("elector_fenced", "gauge", &["node"], "1 while writes on the local data node are fenced."),
    ("elector_quorum_ok", "gauge", &["node"], "1 while this node hears a quorum of nodes, itself included."),
    ("elector_quorum", "gauge", &["node"], "Votes needed to win an election."),
    ("elector_cluster_size", "gauge", &["node"], "Configured number of nodes."),
    ("elector_data_node_reachable", "gauge", &["node"], "1 while the local data node answers."),
    ("elector_data_below_floor", "gauge", &["node"], "1 while the local data node may lack what it acknowledged (protocol 6.10): the node does not stand."),
    ("elector_data_node_offset", "gauge", &["node"], "Replication offset of the local data node."),
    ("elector_data_node_lag_bytes", "gauge", &["node"], "Bytes the local data node is behind its primary."),
    ("elector_switchover_in_progress", "gauge", &["node"], "1 while a planned switchover is running."),
    ("elector_vip_held", "gauge", &["node"], "1 while the virtual IP is on this node (docs/vip.md)."),
    ("elector_peer_alive", "gauge", &["node", "peer"], "1 while the peer is heard within down_after."),
    ("elector_peer_last_seen_milliseconds", "gauge", &["node", "peer"], "Milliseconds since the last valid message from the peer."),
    ("elector_elections_started_total", "counter", &["node"], "Elections this node started as candidate."),
    ("elector_elections_won_total", "counter", &["node"], "Elections this node won."),
    ("elector_elections_lost_total", "counter", &["node"], "Elections this node lost or abandoned."),
    ("elector_replication_gate_forwarded_total", "counter", &["node"], "Replica connections the replication gate forwarded to the validated data node (protocol 6.10)."),
    ("elector_replication_gate_refused_total", "counter", &["node"], "Replica connections the replication gate closed: the data node was not a validated serving primary (protocol 6.10)."),
    ("elector_data_loss_accepted_total", "counter", &["node"], "Operator-accepted data losses (protocol 6.10): forced candidacies this node stood in or voted for."),
    ("elector_data_node_errors_total", "counter", &["node"], "Failed commands or polls against the local data node."),
    ("elector_stale_connects_aborted_total", "counter", &["node"], "kevy: the data node's hanging connects to a primary it left, aborted so REPLICAOF need not wait for them."),
    ("elector_stale_connect_abort_failures_total", "counter", &["node"], "kevy: retargets whose hanging connects could not be aborted (no ss, no CAP_NET_ADMIN); see the log."),
    ("elector_nowhere_connects_released_total", "counter", &["node"], "kevy: the data node's replication connects held at nowhere (127.0.0.1:1), released so REPLICAOF need not wait out kevy's reconnect backoff."),
    ("elector_ack_nudges_total", "counter", &["node"], "kevy: no-op frames the primary's elector sent so lagging replicas acknowledge (data_node.ack_nudge)."),
    ("elector_stale_ack_pad_frames_total", "counter", &["node"], "kevy: no-op frames the primary's elector wrote to take its offset past replica acknowledgements kept from an earlier feed generation (WAIT would count them); see the log."),
    ("elector_vip_move_failures_total", "counter", &["node"], "Virtual IP adds or removes that failed (each ran on_fault); see the log."),
    ("elector_fence_applies_total", "counter", &["node"], "Fences applied on the data node (protocol 6.2.1)."),
    ("elector_fence_apply_seconds_total", "counter", &["node"], "Time from each decision to fence to the data node's OK, summed."),
    ("elector_fence_apply_max_seconds", "gauge", &["node"], "Slowest fence apply since start: keep it below timings.fence_margin_ms."),
    ("elector_fence_failures_total", "counter", &["node"], "Fences the data node refused or did not answer: it may still take writes (see the log)."),
    ("elector_messages_in_total", "counter", &["node", "type"], "Valid election messages received, by type."),
    ("elector_messages_out_total", "counter", &["node", "type"], "Election messages sent, by type."),
    ("elector_messages_rejected_total", "counter", &["node", "reason"], "Election messages dropped, by reason."),
    ("elector_connections_closed_total", "counter", &["node", "reason"], "Election connections closed, by reason (protocol 3.2)."),
    ("elector_transitions_total", "counter", &["node", "reason"], "Role transitions, by reason."),
    ("elector_hooks_run_total", "counter", &["node", "event", "outcome"], "Hook scripts run, by event and outcome."),
    ("elector_fence_budget_seconds", "gauge", &["node"], "timings.fence_margin_ms: a fence apply slower than this eats the lease's margin."),
    ("elector_max_lag_bytes", "gauge", &["node"], "max_lag_bytes: a replica further behind is not electable (commands on kevy)."),
    ("elector_watchdog_clamps_total", "counter", &["node"], "Times the watchdog fenced the data node because the elector was silent past its lease."),
    ("elector_watchdog_last_probe_timestamp_seconds", "gauge", &["node"], "When the watchdog last polled /healthz, in Unix seconds (0: not since this elector started)."),
];

/// A state in which every family has at least one sample.
fn busy_metrics_and_snapshot() -> (Metrics, StatusSnapshot) {
    let m = Metrics::new();
    m.election_started();
    m.election_won();
    m.data_node_error();
    m.stale_connects(2, 1, true);
    m.ack_nudges(3);
    m.stale_ack_pads(1_274);
    m.fence_applied(std::time::Duration::from_micros(1500));
    m.fence_failed();
    m.set_limits(Limits {
        fence_budget: std::time::Duration::from_millis(300),
        max_lag: 1 << 20,
        watchdog_clamps: Some(std::path::PathBuf::from("/nonexistent/watchdog-clamps")),
    });
    m.message_in("HB");
    m.message_out("OFFER");
    m.message_rejected("replay");
    m.connection_closed("idle");
    m.transition("won_election");
    m.hook_run("promote", HookOutcome::Ok);
    let mut s = snapshot();
    s.data_node.reachable = true;
    s.data_node.lag = Some(12);
    s.vip = Some(crate::vip::VipStatus {
        held: true,
        ..Default::default()
    });
    s.switchover = Some(super::super::status::SwitchoverState {
        to: "n2".into(),
        phase: super::super::status::SwitchoverPhase::CatchingUp,
        started_at_unix_ms: 1,
        deadline_unix_ms: 2,
        primary_offset: None,
        target_offset: None,
        write_pause_ms: None,
        error: None,
    });
    (m, s)
}

/// (sample name, type, label names, HELP) of every family in `text`, in order.
fn families_of(text: &str) -> Vec<(String, String, Vec<String>, String)> {
    let mut out: Vec<(String, String, Vec<String>, String)> = Vec::new();
    let mut help = String::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            help = rest
                .split_once(' ')
                .map(|(_, h)| h.to_string())
                .unwrap_or_default();
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("TYPE name kind");
            out.push((name.to_string(), kind.to_string(), Vec::new(), help.clone()));
        } else if !line.starts_with('#') && !line.is_empty() {
            let family = out.last_mut().expect("a sample follows its TYPE");
            let labels: Vec<String> = line
                .split_once('{')
                .map(|(_, rest)| {
                    let mut keys = Vec::new();
                    let mut rest = rest;
                    while let Some((key, after)) = rest.split_once("=\"") {
                        keys.push(key.trim_start_matches(',').to_string());
                        let bytes = after.as_bytes();
                        let mut i = 0;
                        while bytes[i] != b'"' {
                            i += if bytes[i] == b'\\' { 2 } else { 1 };
                        }
                        rest = &after[i + 1..];
                    }
                    keys
                })
                .unwrap_or_default();
            if family.2.is_empty() {
                family.2 = labels;
            } else {
                assert_eq!(family.2, labels, "one label set per family: {line}");
            }
        }
    }
    out
}

#[test]
fn every_family_keeps_its_name_type_labels_and_help() {
    let (m, s) = busy_metrics_and_snapshot();
    let text = m.render(&s);
    let got = families_of(&text);
    let want: Vec<(String, String, Vec<String>, String)> = EXPOSED_FAMILIES
        .iter()
        .map(|(name, kind, labels, help)| {
            (
                name.to_string(),
                kind.to_string(),
                labels.iter().map(|l| l.to_string()).collect(),
                help.to_string(),
            )
        })
        .collect();
    assert_eq!(got, want, "exposition:\n{text}");
}
#[test]
fn the_slowest_fence_apply_is_kept_and_the_total_sums_them_all() {
    let m = Metrics::new();
    m.fence_applied(std::time::Duration::from_millis(3));
    m.fence_applied(std::time::Duration::from_millis(1));
    let text = m.render(&snapshot());
    assert!(text.contains("elector_fence_applies_total{node=\"n1\"} 2\n"));
    assert!(text.contains("elector_fence_apply_seconds_total{node=\"n1\"} 0.004\n"));
    assert!(text.contains("elector_fence_apply_max_seconds{node=\"n1\"} 0.003\n"));
}

#[test]
fn reasons_outside_the_known_list_are_listed_for_status_too() {
    let m = Metrics::new();
    m.message_rejected("api_unauthorized");
    let counts = m.rejected_counts();
    assert_eq!(counts.get("api_unauthorized"), Some(&1));
    assert_eq!(counts.len(), KNOWN_REJECT_REASONS.len() + 1);
}

#[test]
fn the_build_info_gauge_names_this_binarys_version_and_commit_at_one() {
    let text = Metrics::new().render(&snapshot());
    let line = format!(
        "elector_build_info{{node=\"n1\",version=\"{}\",commit=\"{}\"}} 1\n",
        env!("CARGO_PKG_VERSION"),
        env!("BUILD_GIT_COMMIT")
    );
    assert!(text.contains(&line), "no {line:?} in:\n{text}");
}
