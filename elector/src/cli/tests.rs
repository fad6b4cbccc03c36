use super::*;
use crate::api::status::{PeerStatus, Role, SwitchoverPhase, SwitchoverState, TransitionRecord};

const NOW: u64 = 1_760_000_100_000;

fn node(id: &str, role: Role, epoch: u64, primary: Option<&str>) -> StatusSnapshot {
    let mut s = StatusSnapshot::initial(id, "kevy", &format!("{id}:6379"), 3);
    s.role = role;
    s.epoch = epoch;
    s.primary = primary.map(str::to_string);
    s.fenced = role != Role::Primary;
    s.data_node.reachable = true;
    s.data_node.offset = Some(1234);
    s.data_node.lag = Some(0);
    s.transitions.push(TransitionRecord {
        at_unix_ms: NOW - 12_000,
        from: Role::Candidate,
        to: role,
        epoch,
        reason: if role == Role::Primary {
            "won_election"
        } else {
            "lost_election"
        }
        .into(),
        fenced: None,
    });
    s
}

fn peer(id: &str, alive: bool, api: Option<&str>) -> PeerStatus {
    PeerStatus {
        id: id.into(),
        alive,
        role: Some(Role::Replica),
        epoch: Some(3),
        offset: Some(1200),
        last_seen_ms: Some(if alive { 40 } else { 7_500 }),
        eligible: Some(alive),
        api: api.map(str::to_string),
    }
}

fn healthy() -> ClusterReport {
    let mut n1 = node("n1", Role::Primary, 3, Some("n1"));
    n1.peers = vec![peer("n2", true, Some("n2:9300")), peer("n3", true, None)];
    let n2 = node("n2", Role::Replica, 3, Some("n1"));
    ClusterReport {
        asked: "127.0.0.1:9301".into(),
        origin: n1,
        views: [("n2".to_string(), Ok(n2))].into_iter().collect(),
    }
}

#[test]
fn the_table_shows_every_node_with_its_last_transition_and_reason() {
    let text = render_report(&healthy(), NOW);
    let expected = "\
cluster: 3 nodes, quorum 2 | primary n1 | epoch 3 | asked n1 (127.0.0.1:9301)
NODE  ROLE     EPOCH  PRIMARY  FENCED  ALIVE     OFFSET  LAG  LAST TRANSITION
n1    primary  3      n1       no      (asked)   1234    0    candidate -> primary (won_election) 12s ago
n2    replica  3      n1       yes     yes 40ms  1234    0    candidate -> replica (lost_election) 12s ago
n3    replica  3      ?        ?       yes 40ms  1200    -    ?
! n3: no API address known; row shows n1's view
";
    assert_eq!(text, expected, "\n{text}");
}

#[test]
fn two_unfenced_primaries_are_called_out_first() {
    let mut r = healthy();
    let mut rogue = node("n2", Role::Primary, 2, Some("n2"));
    rogue.fenced = false;
    r.views.insert("n2".into(), Ok(rogue));
    let text = render_report(&r, NOW);
    let findings: Vec<&str> = text.lines().filter(|l| l.starts_with("! ")).collect();
    assert_eq!(
        findings[0],
        "! DANGER: more than one unfenced primary: n1, n2"
    );
    assert!(text.contains("! nodes disagree on the primary: n1 says n1, n2 says n2"));
    assert!(text.contains("! n2 is at epoch 2 (cluster has reached 3)"));
}

#[test]
fn a_dead_peer_and_a_lost_quorum_are_explained() {
    let mut r = healthy();
    r.origin.peers = vec![peer("n2", false, Some("n2:9300")), peer("n3", false, None)];
    r.origin.primary = None;
    r.origin.role = Role::Candidate;
    r.views
        .insert("n2".into(), Err("connection refused".into()));
    let text = render_report(&r, NOW);
    assert!(
        text.contains("n2    replica    3      ?        ?       NO 7.5s"),
        "\n{text}"
    );
    assert!(text.contains("! no primary: an election is under way or no quorum can be formed"));
    assert!(text.contains("! n1 hears 1 of 3 nodes (quorum 2): it cannot elect or keep a primary"));
    assert!(text.contains("! n2: API unreachable (connection refused); row shows n1's view"));
}

#[test]
fn a_switchover_and_rejected_messages_are_reported() {
    let mut r = healthy();
    r.origin.switchover = Some(SwitchoverState {
        to: "n2".into(),
        phase: SwitchoverPhase::CatchingUp,
        started_at_unix_ms: NOW - 100,
        deadline_unix_ms: NOW + 9_900,
        primary_offset: Some(1234),
        target_offset: Some(1200),
        write_pause_ms: None,
        error: None,
    });
    r.origin.rejected.insert("bad_tag".into(), 3);
    r.origin.rejected.insert("replay".into(), 0);
    let text = render_report(&r, NOW);
    assert!(
        text.contains("! n1: switchover to n2 catching up\n"),
        "\n{text}"
    );
    assert!(
        text.contains("! n1: rejected messages bad_tag=3\n"),
        "\n{text}"
    );
}

#[test]
fn ages_are_short_and_readable() {
    assert_eq!(format_age(40), "40ms");
    assert_eq!(format_age(7_500), "7.5s");
    assert_eq!(format_age(45_000), "45s");
    assert_eq!(format_age(185_000), "3m05s");
    assert_eq!(format_age(7_800_000), "2h10m");
    assert_eq!(format_age(3 * 86_400_000 + 3_600_000), "3d01h");
}

#[test]
fn node_addresses_become_urls() {
    assert_eq!(
        url("127.0.0.1:9300", "/status"),
        "http://127.0.0.1:9300/status"
    );
    assert_eq!(url("[::1]:9300", "/status"), "http://[::1]:9300/status");
    assert_eq!(url("http://h:1/", "/status"), "http://h:1/status");
}

/// End to end against the real API server: the CLI gathers the asked
/// node's view and a peer's own view, and switchover follows the
/// `not_primary` pointer to the primary.
#[tokio::test]
async fn the_cli_reads_real_apis_and_switchover_is_redirected_to_the_primary() {
    use crate::api::metrics::Metrics;
    use crate::api::{serve, ApiState};
    use std::sync::Arc;
    use tokio::sync::{mpsc, oneshot, watch};

    let l1 = crate::api::listen::bind_tcp("127.0.0.1:0").expect("bind");
    let l2 = crate::api::listen::bind_tcp("127.0.0.1:0").expect("bind");
    let a1 = l1.local_addr().expect("addr").to_string();
    let a2 = l2.local_addr().expect("addr").to_string();

    let mut n1 = node("n1", Role::Primary, 3, Some("n1"));
    n1.peers = vec![peer("n2", true, Some(&a2))];
    let mut n2 = node("n2", Role::Replica, 3, Some("n1"));
    n2.peers = vec![peer("n1", true, Some(&a1))];

    let (_s1, r1) = watch::channel(n1);
    let (_s2, r2) = watch::channel(n2);
    let (tx1, mut rx1) = mpsc::channel(1);
    let (tx2, _rx2) = mpsc::channel(1);
    let (_stop, stopped) = oneshot::channel::<()>();
    let (_stop2, stopped2) = oneshot::channel::<()>();
    let metrics = Arc::new(Metrics::new());
    tokio::spawn(serve(
        l1,
        ApiState {
            status: r1,
            metrics: Arc::clone(&metrics),
            accept_data_loss: tokio::sync::mpsc::channel(1).0,
            switchover: tx1,
            request_auth: None,
            loop_beat: Arc::new(crate::api::LoopBeat::new(Duration::from_secs(60))),
        },
        async {
            let _ = stopped.await;
        },
    ));
    tokio::spawn(serve(
        l2,
        ApiState {
            status: r2,
            metrics,
            accept_data_loss: tokio::sync::mpsc::channel(1).0,
            switchover: tx2,
            request_auth: None,
            loop_beat: Arc::new(crate::api::LoopBeat::new(Duration::from_secs(60))),
        },
        async {
            let _ = stopped2.await;
        },
    ));
    tokio::spawn(async move {
        while let Some(req) = rx1.recv().await {
            let _ = req
                .reply
                .send(Ok(serde_json::json!({"new_primary": req.to, "epoch": 4})));
        }
    });

    let asked = a2.clone();
    let (report, outcome) = tokio::task::spawn_blocking(move || {
        (
            gather(&ApiClient::plain(), &asked).expect("gather"),
            switchover(
                &ApiClient::plain(),
                &asked,
                "n2",
                Duration::from_secs(1),
                None,
            )
            .expect("switchover via n1"),
        )
    })
    .await
    .expect("join");
    assert_eq!(report.origin.node_id, "n2");
    assert!(matches!(report.views.get("n1"), Some(Ok(s)) if s.role == Role::Primary));
    let text = render_report(&report, NOW);
    assert!(text.contains("n1    primary"), "\n{text}");
    assert_eq!(outcome["new_primary"], "n2");
    assert_eq!(outcome["epoch"], 4);
}

/// Right after a failover: n2 won epoch 4, n1 (primary of epoch 3) is dead
/// and its API does not answer, so its row is n2's memory of it.
fn after_failover() -> ClusterReport {
    let mut n2 = node("n2", Role::Primary, 4, Some("n2"));
    let mut dead = peer("n1", false, Some("n1:9300"));
    dead.role = Some(Role::Primary);
    dead.epoch = Some(3);
    let mut n3 = peer("n3", true, Some("n3:9300"));
    n3.epoch = Some(4);
    n2.peers = vec![dead, n3];
    let mut n3_own = node("n3", Role::Replica, 4, Some("n2"));
    n3_own.peers = vec![];
    ClusterReport {
        asked: "n2:9300".into(),
        origin: n2,
        views: [
            (
                "n1".to_string(),
                Err("n1:9300/status: connection refused".into()),
            ),
            ("n3".to_string(), Ok(n3_own)),
        ]
        .into_iter()
        .collect(),
    }
}

fn role_column(text: &str) -> Vec<(String, String)> {
    text.lines()
        .skip(2)
        .take_while(|l| !l.starts_with("! ") && !l.starts_with("- "))
        .map(|l| {
            let mut cells = l.split_whitespace();
            (
                cells.next().unwrap().to_string(),
                cells.next().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn after_a_failover_the_dead_old_primary_is_not_shown_as_a_second_primary() {
    let text = render_report(&after_failover(), NOW);
    let roles = role_column(&text);
    let primaries: Vec<&String> = roles
        .iter()
        .filter(|(_, r)| r == "primary")
        .map(|(n, _)| n)
        .collect();
    assert_eq!(primaries, vec!["n2"], "\n{text}");
    assert!(roles.contains(&("n1".into(), "unknown".into())), "\n{text}");
    assert!(
        text.contains(
            "! n1: last heard as primary at epoch 3 by n2; the cluster has reached epoch 4"
        ),
        "\n{text}"
    );
}

#[test]
fn a_nodes_own_view_from_an_older_epoch_says_stale_not_primary() {
    let mut r = after_failover();
    let mut old = node("n1", Role::Primary, 3, Some("n1"));
    old.fenced = true;
    r.views.insert("n1".into(), Ok(old));
    let text = render_report(&r, NOW);
    let roles = role_column(&text);
    assert!(roles.contains(&("n1".into(), "stale".into())), "\n{text}");
    assert_eq!(
        roles.iter().filter(|(_, r)| r == "primary").count(),
        1,
        "\n{text}"
    );
    assert!(
        text.contains("! n1 is at epoch 3 (cluster has reached 4)"),
        "\n{text}"
    );
}

#[test]
fn a_node_without_a_live_watchdog_is_a_problem_and_its_clamps_a_note() {
    use crate::api::metrics::WatchdogStatus;
    let mut r = healthy();
    r.origin.watchdog = Some(WatchdogStatus {
        live: false,
        last_probe_ms_ago: Some(45_500),
        clamps: 2,
    });
    let text = render_report(&r, NOW);
    assert!(
        text.contains(
            "! n1: no watchdog: its last /healthz poll was 45 s ago (the data node has no dead-man switch)\n"
        ),
        "\n{text}"
    );
    assert!(
        text.contains("- n1: the watchdog fenced the data node 2 time(s)"),
        "\n{text}"
    );
    r.origin.watchdog = Some(WatchdogStatus {
        live: true,
        last_probe_ms_ago: Some(100),
        clamps: 0,
    });
    let text = render_report(&r, NOW);
    assert!(
        !text.contains("watchdog"),
        "a live watchdog is not news\n{text}"
    );
}

#[test]
fn a_finished_switchover_is_a_note_after_the_problems_not_a_problem() {
    let mut r = healthy();
    r.origin.switchover = Some(SwitchoverState {
        to: "n2".into(),
        phase: SwitchoverPhase::Completed,
        started_at_unix_ms: NOW - 60_000,
        deadline_unix_ms: NOW - 50_000,
        primary_offset: Some(1234),
        target_offset: Some(1234),
        write_pause_ms: Some(42),
        error: None,
    });
    let text = render_report(&r, NOW);
    assert!(!text.contains("! n1: switchover"), "\n{text}");
    let last = text.lines().last().unwrap();
    assert!(
        last.starts_with("- n1: switchover to n2 completed")
            && last.contains("writes paused 42 ms"),
        "\n{text}"
    );
}

#[test]
fn watching_into_a_pipe_writes_no_terminal_codes_and_names_the_url_once() {
    // Port 1 on loopback: nothing listens, the connect is refused at once.
    let mut out: Vec<u8> = Vec::new();
    let client = ApiClient::plain();
    let view = StatusView {
        client: &client,
        node: "127.0.0.1:1",
        json: false,
        watch: Some(Duration::from_millis(10)),
    };
    status_loop(&mut out, false, &view, Some(2))
        .expect("a refused node is shown, not an error, under --watch");
    let text = String::from_utf8(out).unwrap();
    assert!(!text.contains('\x1b'), "{text:?}");
    assert_eq!(text.matches("--- unix ms ").count(), 2, "{text}");
    for line in text.lines().filter(|l| l.starts_with("! ")) {
        assert_eq!(line.matches("127.0.0.1:1").count(), 1, "{line}");
    }
    let mut tty: Vec<u8> = Vec::new();
    status_loop(&mut tty, true, &view, Some(1)).expect("watch");
    assert!(String::from_utf8(tty).unwrap().starts_with("\x1b[2J\x1b[H"));
}

#[test]
fn the_local_api_is_reached_over_loopback_when_it_listens_everywhere() {
    assert_eq!(local_api("0.0.0.0:9300", false), "http://127.0.0.1:9300");
    assert_eq!(local_api("[::]:9301", false), "http://127.0.0.1:9301");
    assert_eq!(local_api("10.0.0.5:9302", false), "http://10.0.0.5:9302");
}

#[test]
fn the_local_api_is_reached_over_https_when_the_config_serves_it_with_tls() {
    assert_eq!(local_api("0.0.0.0:9300", true), "https://127.0.0.1:9300");
    assert_eq!(local_api("10.0.0.5:9302", true), "https://10.0.0.5:9302");
}

#[test]
fn a_bare_address_stays_plain_http_and_an_https_url_is_kept() {
    assert_eq!(url("h:1", "/status"), "http://h:1/status");
    assert_eq!(url("https://h:1/", "/status"), "https://h:1/status");
}

#[test]
fn a_peer_address_takes_the_scheme_of_the_asked_node_unless_it_has_its_own() {
    assert_eq!(inherit_scheme("https://a:1", "b:2"), "https://b:2");
    assert_eq!(inherit_scheme("a:1", "b:2"), "b:2");
    assert_eq!(inherit_scheme("http://a:1", "b:2"), "b:2");
    assert_eq!(inherit_scheme("https://a:1", "http://b:2"), "http://b:2");
    assert_eq!(inherit_scheme("a:1", "https://b:2"), "https://b:2");
}

/// The TLS flags as clap parses them, on a one-command parser.
fn tls_flags(args: &[&str]) -> Result<ApiTlsArgs, clap::Error> {
    use clap::Parser;
    #[derive(Parser)]
    struct Flags {
        #[command(flatten)]
        tls: ApiTlsArgs,
    }
    Flags::try_parse_from(std::iter::once("elector").chain(args.iter().copied())).map(|f| f.tls)
}

#[test]
fn the_tls_flags_parse_and_a_client_certificate_needs_its_key() {
    let all = tls_flags(&[
        "--ca-file",
        "/ca.crt",
        "--cert-file",
        "/c.crt",
        "--key-file",
        "/c.key",
    ])
    .expect("parses");
    assert_eq!(
        all.ca_file.as_deref(),
        Some(std::path::Path::new("/ca.crt"))
    );
    assert_eq!(
        all.cert_file.as_deref(),
        Some(std::path::Path::new("/c.crt"))
    );
    assert_eq!(
        all.key_file.as_deref(),
        Some(std::path::Path::new("/c.key"))
    );
    assert_eq!(tls_flags(&[]).expect("none"), ApiTlsArgs::default());
    assert!(tls_flags(&["--cert-file", "/c.crt"]).is_err(), "no key");
    assert!(tls_flags(&["--key-file", "/c.key"]).is_err(), "no cert");
}

#[test]
fn an_https_address_without_a_ca_file_is_refused_before_connecting() {
    let e = get_text(&ApiClient::plain(), "https://127.0.0.1:1", "/status").unwrap_err();
    assert!(matches!(e, CliError::HttpsNeedsCa { .. }), "{e}");
    assert!(e.to_string().contains("needs --ca-file"), "{e}");
}

#[test]
fn an_unreadable_or_empty_ca_file_is_refused_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let missing = ApiTlsArgs {
        ca_file: Some(dir.path().join("absent.crt")),
        ..ApiTlsArgs::default()
    };
    let e = ApiClient::new(&missing).unwrap_err();
    assert!(e.to_string().starts_with("--ca-file "), "{e}");
    let empty = dir.path().join("empty.crt");
    std::fs::write(&empty, "not a certificate\n").unwrap();
    let e = ApiClient::new(&ApiTlsArgs {
        ca_file: Some(empty),
        ..ApiTlsArgs::default()
    })
    .unwrap_err();
    assert!(e.to_string().contains("no PEM certificate"), "{e}");
}

#[test]
fn a_client_certificate_without_a_ca_file_is_a_usage_error() {
    let e = ApiClient::new(&ApiTlsArgs {
        cert_file: Some("/c.crt".into()),
        key_file: Some("/c.key".into()),
        ..ApiTlsArgs::default()
    })
    .unwrap_err();
    assert!(matches!(e, CliError::Usage(_)), "{e}");
}

#[test]
fn the_eligible_peer_picked_for_a_switchover_is_alive_eligible_and_furthest_ahead() {
    let mut s = node("n1", Role::Primary, 3, Some("n1"));
    let mut behind = peer("n2", true, None);
    behind.offset = Some(100);
    let mut ahead = peer("n3", true, None);
    ahead.offset = Some(200);
    let mut dead = peer("n4", false, None);
    dead.offset = Some(900);
    let mut ineligible = peer("n5", true, None);
    ineligible.offset = Some(950);
    ineligible.eligible = Some(false);
    s.peers = vec![behind, ahead, dead, ineligible];
    assert_eq!(pick_eligible(&s).as_deref(), Some("n3"));
    s.peers.retain(|p| p.id != "n2" && p.id != "n3");
    assert_eq!(
        pick_eligible(&s),
        None,
        "only dead or ineligible peers left"
    );
}
