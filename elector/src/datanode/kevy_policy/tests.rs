//! The kevy policy's rules, one operation at a time: each test scripts
//! kevy's answers and checks the commands (docs/architecture.md §kevy).

use super::*;

fn settings() -> KevySettings {
    KevySettings {
        replication_port_offset: 10_000,
        abort_stale_connects: true,
        nowhere_hold: false,
        ack_nudge: true,
        reconnect_window_ms: 1_000,
        quiesce_fence_limit_ms: 60_000,
        report_before_naming: false,
        believe_a_resync_by_itself: false,
        mark_seed: None,
    }
}

fn at(mono: Millis) -> Clock {
    Clock {
        mono,
        wall: 1_000_000 + mono,
    }
}

fn policy() -> KevyPolicy {
    KevyPolicy::new(settings(), 1_000_000)
}

fn run(
    p: &mut KevyPolicy,
    first: KevyStep,
    answers: Vec<KevyOutcome>,
    t: Millis,
) -> (Vec<KevyCommand>, Result<(), DataNodeError>) {
    let mut commands = Vec::new();
    let mut step = first;
    let mut answers = answers.into_iter();
    loop {
        match step {
            KevyStep::Done(r) => return (commands, r),
            KevyStep::Run(c) => {
                commands.push(c.clone());
                let outcome = answers
                    .next()
                    .unwrap_or_else(|| panic!("no scripted answer to {c:?}"));
                step = p.resume(outcome, at(t));
            }
        }
    }
}

const FOLLOWING_N2: &str = "role:slave\r\nmaster_host:10.0.0.2\r\nmaster_port:16379\r\nmaster_link_status:up\r\nslave_repl_offset:900\r\n";

fn pipeline() -> KevyOutcome {
    pipeline_read(FOLLOWING_N2, [3, 900], Some(FOLLOWING_N2))
}

/// A `REPLICAOF` pipeline's reading: `INFO replication`, the token, and
/// `INFO replication` again (`None`: not read).
fn pipeline_read(replication: &str, token: [i64; 2], after: Option<&str>) -> KevyOutcome {
    KevyOutcome::Replicated(Ok(PipelineRead {
        server: Some("kevy_version:7.0.0\r\nprocess_id:7\r\n".into()),
        replication: Some(replication.into()),
        token: Some(redis::Value::Array(
            token.iter().map(|&n| redis::Value::Int(n)).collect(),
        )),
        replication_after: after.map(Into::into),
        mark_present: None,
        mark_loaded: None,
    }))
}

fn role(text: &str) -> KevyOutcome {
    KevyOutcome::Role(Ok(ReplicationInfo::parse(text).unwrap()))
}

#[test]
fn a_node_that_was_primary_a_moment_ago_is_promoted_only_after_kevys_window() {
    let mut p = policy();
    p.hold.observed(true, 0);
    p.hold.demoted(100);
    let first = p_apply(&mut p, DataNodeTarget::Primary, 500);
    let (commands, r) = run(&mut p, first, vec![], 500);
    assert!(commands.is_empty());
    assert!(
        matches!(r, Err(DataNodeError::PromotionHeld { .. })),
        "{r:?}"
    );
    let step = p.apply(&DataNodeTarget::Primary, at(100 + 1_000 + 250));
    assert!(matches!(
        step,
        KevyStep::Run(KevyCommand::ReplicaOf { to: None, .. })
    ));
}

fn p_apply(p: &mut KevyPolicy, target: DataNodeTarget, t: Millis) -> KevyStep {
    p.apply(&target, at(t))
}

#[test]
fn a_promotion_reads_the_runner_in_its_pipeline_then_lifts_a_quiesce_and_arms_our_frames() {
    let mut p = policy();
    p.hold.observed(false, 0);
    p.quiesce.sent(10);
    let first = p.apply(&DataNodeTarget::Primary, at(5_000));
    let (commands, r) = run(
        &mut p,
        first,
        vec![pipeline(), KevyOutcome::Lifted(Ok(()))],
        5_000,
    );
    assert!(r.is_ok());
    assert_eq!(commands.len(), 2);
    assert!(matches!(commands[1], KevyCommand::LiftQuiesce));
    assert!(p.ours_and_writable());
}

#[test]
fn a_lapsed_lease_quiesces_a_primary_and_demotes_it_once_the_quiesce_is_a_minute_old() {
    // §6.10: the demotion that follows makes the core resign (a new stream).
    let mut p = policy();
    p.hold.observed(true, 0);
    let first = p.apply(&DataNodeTarget::FencedPrimary, at(1_000));
    let (commands, r) = run(&mut p, first, vec![KevyOutcome::Quiesced(Ok(()))], 1_000);
    assert_eq!((commands, r.is_ok()), (vec![KevyCommand::Quiesce], true));
    // Still within the minute: the quiesce holds, no command.
    let first = p_apply(&mut p, DataNodeTarget::FencedPrimary, 30_000);
    let (commands, _) = run(&mut p, first, vec![], 30_000);
    assert!(commands.is_empty());
    let first = p.apply(&DataNodeTarget::FencedPrimary, at(61_000));
    let (commands, r) = run(
        &mut p,
        first,
        vec![pipeline(), KevyOutcome::Lifted(Ok(()))],
        61_000,
    );
    assert!(r.is_ok());
    assert!(
        matches!(&commands[0], KevyCommand::ReplicaOf { to: Some((h, 1)), .. } if h == "127.0.0.1"),
        "demoted to nowhere: {commands:?}"
    );
}

#[test]
fn a_fence_on_a_node_that_refuses_the_quiesce_demotes_it() {
    let mut p = policy();
    p.hold.observed(true, 0);
    let first = p.apply(&DataNodeTarget::FencedPrimary, at(1_000));
    let refused = DataNodeError::Refused {
        command: "FAILOVER".into(),
        message: "not a primary".into(),
    };
    let (commands, r) = run(
        &mut p,
        first,
        vec![
            KevyOutcome::Quiesced(Err(refused)),
            pipeline(),
            KevyOutcome::Lifted(Ok(())),
        ],
        1_000,
    );
    assert!(r.is_ok());
    assert!(matches!(
        commands[1],
        KevyCommand::ReplicaOf { to: Some(_), .. }
    ));
}

#[test]
fn a_handover_on_a_replica_is_refused_never_a_demotion() {
    let mut p = policy();
    let first = p.apply(&DataNodeTarget::HandingOver, at(0));
    let (commands, r) = run(
        &mut p,
        first,
        vec![role("role:slave\r\nslave_repl_offset:3\r\n")],
        0,
    );
    assert_eq!(commands, vec![KevyCommand::ReadRole]);
    assert!(matches!(r, Err(DataNodeError::Refused { .. })));
}

#[test]
fn following_waits_for_the_upstreams_promotion_and_counts_its_feed_as_the_join_floor() {
    let mut p = policy();
    let target = DataNodeTarget::Follow {
        primary: "n2".into(),
        primary_addr: "n2:6379".into(),
    };
    let first = p.apply(&target, at(0));
    let floor = UpstreamAt {
        offset: 40,
        generation: Some(8),
    };
    let (commands, r) = run(
        &mut p,
        first,
        vec![
            KevyOutcome::Resolved(Ok(("10.0.0.2".into(), 6379))),
            role(REPLICA_OF_NOWHERE),
            KevyOutcome::Upstream(Some(floor)),
            pipeline(),
            KevyOutcome::Lifted(Ok(())),
        ],
        0,
    );
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(commands[1], KevyCommand::ReadRole);
    assert_eq!(commands[2], await_n2());
    assert!(
        matches!(&commands[3], KevyCommand::ReplicaOf { to: Some((h, 16379)), .. } if h == "10.0.0.2"),
        "{commands:?}"
    );
    let info =
        ReplicationInfo::parse("role:slave\r\nmaster_host:10.0.0.2\r\nmaster_port:16379\r\n")
            .unwrap();
    assert!(p.satisfies(&info, &target, 0));
    // Applied again to the same primary: no wait.
    let first = p.apply(&target, at(10));
    let (commands, _) = run(
        &mut p,
        first,
        vec![
            KevyOutcome::Resolved(Ok(("10.0.0.2".into(), 6379))),
            pipeline(),
        ],
        10,
    );
    assert!(
        matches!(commands[1], KevyCommand::ReplicaOf { .. }),
        "{commands:?}"
    );
}

#[test]
fn an_upstream_that_never_becomes_a_primary_is_not_followed() {
    let mut p = policy();
    let commands = follow_n2_until_the_wait_fails(&mut p, REPLICA_OF_NOWHERE, 0);
    assert_eq!(commands.last(), Some(&await_n2()));
}

/// Applies a follow of n2 whose own-node read answers `own_role` and whose
/// wait for n2's promotion fails; returns the commands sent.
fn follow_n2_until_the_wait_fails(
    p: &mut KevyPolicy,
    own_role: &str,
    t: Millis,
) -> Vec<KevyCommand> {
    let first = p.apply(&follow_n2(), at(t));
    let mut answers = vec![
        KevyOutcome::Resolved(Ok(("10.0.0.2".into(), 6379))),
        role(own_role),
    ];
    if own_role == WRITABLE_PRIMARY && !p.quiesce.is_set() {
        answers.push(pipeline_read(
            REPLICA_OF_NOWHERE,
            [4, 700],
            Some(REPLICA_OF_NOWHERE),
        ));
    }
    answers.push(KevyOutcome::Upstream(None));
    let (commands, r) = run(p, first, answers, t);
    assert!(
        matches!(r, Err(DataNodeError::UpstreamNotPrimary(_))),
        "{r:?}"
    );
    commands
}

const REPLICA_OF_NOWHERE: &str =
    "role:slave\r\nmaster_host:127.0.0.1\r\nmaster_port:1\r\nmaster_link_status:down\r\n";
const WRITABLE_PRIMARY: &str = "role:master\r\nconnected_slaves:0\r\nmaster_repl_offset:700\r\n";

fn await_n2() -> KevyCommand {
    KevyCommand::AwaitPrimary {
        addr: "n2:6379".into(),
        within: PROMOTION_WAIT_MS,
    }
}

fn follow_n2() -> DataNodeTarget {
    DataNodeTarget::Follow {
        primary: "n2".into(),
        primary_addr: "n2:6379".into(),
    }
}

/// Protocol §6.4 (a fence lifted by hand): simulator seed 1091, where an
/// operator's `REPLICAOF NO ONE` during one wait for the upstream's
/// promotion lasted through the next wait as well.
#[test]
fn a_node_that_reads_as_a_writable_primary_is_demoted_before_any_wait_for_its_new_upstream() {
    let mut p = policy();
    // A first wait fails while someone promotes our node by hand.
    follow_n2_until_the_wait_fails(&mut p, REPLICA_OF_NOWHERE, 0);
    // The next attempt reads our node, finds it writable, and demotes it
    // before it waits again.
    let commands = follow_n2_until_the_wait_fails(&mut p, WRITABLE_PRIMARY, 1_020);
    assert_eq!(commands[1], KevyCommand::ReadRole);
    assert!(
        matches!(&commands[2], KevyCommand::ReplicaOf { to: Some((h, 1)), .. } if h == "127.0.0.1"),
        "demoted to nowhere before the wait: {commands:?}"
    );
    assert_eq!(commands[3], await_n2());
    // Demoted by us: a promotion now waits out kevy's window again.
    let step = p.apply(&DataNodeTarget::Primary, at(1_100));
    assert!(
        matches!(
            step,
            KevyStep::Done(Err(DataNodeError::PromotionHeld { .. }))
        ),
        "{step:?}"
    );
}

/// A handover's old primary (§8) stays quiesced, a primary, while it waits
/// for the node it handed over to: its quiesce is the fence.
#[test]
fn a_primary_fenced_by_our_quiesce_waits_for_its_new_upstream_without_a_demotion() {
    let mut p = policy();
    p.hold.observed(true, 0);
    let first = p.apply(&DataNodeTarget::HandingOver, at(0));
    let (_, r) = run(
        &mut p,
        first,
        vec![role(WRITABLE_PRIMARY), KevyOutcome::Quiesced(Ok(()))],
        0,
    );
    assert!(r.is_ok(), "{r:?}");
    let commands = follow_n2_until_the_wait_fails(&mut p, WRITABLE_PRIMARY, 500);
    assert_eq!(
        commands,
        vec![
            KevyCommand::Resolve {
                addr: "n2:6379".into()
            },
            KevyCommand::ReadRole,
            await_n2(),
        ]
    );
}

#[test]
fn the_watchdog_leaves_a_replica_of_nowhere_as_it_is() {
    let mut p = policy();
    let first = p.watchdog_clamp();
    let (commands, r) = run(
        &mut p,
        first,
        vec![role(
            "role:slave\r\nmaster_host:127.0.0.1\r\nmaster_port:1\r\nslave_repl_offset:3\r\n",
        )],
        0,
    );
    assert_eq!((commands, r.is_ok()), (vec![KevyCommand::ReadRole], true));
}

#[test]
fn the_watchdog_quiesces_a_primary() {
    let mut p = policy();
    let first = p.watchdog_clamp();
    let (commands, r) = run(
        &mut p,
        first,
        vec![
            role("role:master\r\nmaster_repl_offset:3\r\n"),
            KevyOutcome::Quiesced(Ok(())),
        ],
        0,
    );
    assert_eq!(
        (commands, r.is_ok()),
        (vec![KevyCommand::ReadRole, KevyCommand::Quiesce], true)
    );
}

fn replica_of(host: &str, port: u16) -> KevyPolicy {
    let mut p = policy();
    p.upstream_seen = Some((host.to_string(), port));
    p
}

#[test]
fn a_retarget_releases_connects_to_the_upstream_kevy_last_reported() {
    let p = replica_of("10.0.0.2", 16379);
    let expected = Release::HangingConnects {
        host: "10.0.0.2".into(),
        port: 16379,
    };
    assert_eq!(p.leaving(Some(&("10.0.0.3".into(), 16380))), expected);
    assert_eq!(p.leaving(None), expected, "a promotion leaves it too");
    assert_eq!(
        p.leaving(Some(&("10.0.0.2".into(), 16379))),
        Release::Nothing
    );
}

#[test]
fn leaving_nowhere_releases_the_held_connects_unless_switched_off() {
    let mut held = KevyPolicy::new(
        KevySettings {
            nowhere_hold: true,
            ..settings()
        },
        0,
    );
    held.upstream_seen = Some((NOWHERE.0.into(), NOWHERE.1));
    assert_eq!(held.leaving(None), Release::HeldAtNowhere);
    assert_eq!(
        held.leaving(Some(&("10.0.0.3".into(), 16380))),
        Release::HeldAtNowhere
    );
    held.upstream_seen = None;
    assert_eq!(
        held.leaving(None),
        Release::HeldAtNowhere,
        "unknown: may be held"
    );
    let off = KevyPolicy::new(
        KevySettings {
            abort_stale_connects: false,
            nowhere_hold: true,
            ..settings()
        },
        0,
    );
    assert_eq!(off.leaving(None), Release::Nothing);
    let unheld = replica_of(NOWHERE.0, NOWHERE.1);
    assert_eq!(unheld.leaving(None), Release::Nothing);
}

fn primary_info(offset: u64, acked: Option<u64>) -> ReplicationInfo {
    ReplicationInfo {
        role: "master".into(),
        offset,
        slowest_replica_ack: acked,
        online_replicas: u64::from(acked.is_some()),
        connected_replicas: Some(u64::from(acked.is_some())),
        ..ReplicationInfo::default()
    }
}

fn observe(p: &mut KevyPolicy, info: ReplicationInfo, t: Millis) -> KevyView {
    let token = redis::Value::Array(vec![
        redis::Value::Int(5),
        redis::Value::Int(info.offset as i64),
    ]);
    p.observed(
        KevyReading {
            info,
            token: Some(token),
            info_after: None,
            watchdog_clamps: None,
            position_file: None,
            marks_asked: Vec::new(),
            marks_answer: None,
        },
        at(t),
    )
}

fn writable_primary() -> KevyPolicy {
    let mut p = policy();
    p.writable_applied = true;
    p.quiesce.lifted(0);
    p
}

#[test]
fn a_primarys_reading_reports_the_tokens_offset_and_its_feed_generation_as_the_stream() {
    let mut p = writable_primary();
    let view = observe(&mut p, primary_info(20, Some(20)), 0);
    assert_eq!(view.info.offset, 20);
    assert_eq!(view.info.stream.as_deref(), Some("kevy-feed-5"));
    let untokened = p.observed(
        KevyReading {
            info: primary_info(20, None),
            token: None,
            info_after: None,
            watchdog_clamps: None,
            position_file: None,
            marks_asked: Vec::new(),
            marks_answer: None,
        },
        at(1),
    );
    assert_eq!(untokened.info.stream, None, "nothing names the stream");
}

/// A rehearsal of 0b44f29: an operator's `REPLICAOF` landed between the
/// poll's `INFO` (`master`) and its `REPL.TOKEN` (a replica's `[0, 0]`),
/// read as "the data node left the stream it started". With `INFO` read
/// again after the token, the change is seen and nothing names a stream.
#[test]
fn a_role_changed_by_someone_else_between_info_and_the_token_names_no_stream() {
    let demoted = ReplicationInfo::parse(
        "role:slave\r\nmaster_host:127.0.0.1\r\nmaster_port:1\r\nslave_repl_offset:0\r\n",
    )
    .unwrap();
    let replica_token = || {
        Some(redis::Value::Array(vec![
            redis::Value::Int(0),
            redis::Value::Int(0),
        ]))
    };
    let mut info = primary_info(300, Some(300));
    info.identity = Some("process_id:1".into());
    let read = |p: &mut KevyPolicy, after: Option<ReplicationInfo>| {
        p.observed(
            KevyReading {
                info: info.clone(),
                token: replica_token(),
                info_after: after,
                watchdog_clamps: None,
                position_file: None,
                marks_asked: Vec::new(),
                marks_answer: None,
            },
            at(0),
        )
    };
    let once = read(&mut writable_primary(), None);
    assert_eq!(
        once.info.stream.as_deref(),
        Some("kevy-feed-0"),
        "the mistake, read once"
    );
    let view = read(&mut writable_primary(), Some(demoted.clone()));
    assert_eq!(view.info.stream, None, "nothing names the stream");
    assert!(!view.info.is_master(), "the later role is reported");
    assert!(view.info.follows(NOWHERE.0, NOWHERE.1));
    assert_eq!(view.info.identity.as_deref(), Some("process_id:1"));
    let settled = read(&mut writable_primary(), Some(info.clone()));
    assert_eq!(
        settled.info.stream.as_deref(),
        Some("kevy-feed-0"),
        "the same role: the token is read"
    );
}

/// docs/protocol.md §9: someone promotes the replica by hand
/// (`REPLICAOF NO ONE`) in the instant before our own `REPLICAOF`, between
/// the pipeline's `INFO` and its token. Read once, the new primary's feed
/// `[5, 1200]` is held as the runner's position in the joined feed; read
/// between two `INFO`s that disagree, nothing is held.
#[test]
fn a_role_changed_by_someone_else_just_before_our_replicaof_holds_no_position() {
    let promoted = "role:master\r\nmaster_repl_offset:1200\r\n";
    let leave = |after: Option<&str>| {
        let mut p = replica_of("10.0.0.2", 16379);
        let first = p.apply(&DataNodeTarget::Isolated, at(0));
        let (commands, r) = run(
            &mut p,
            first,
            vec![
                pipeline_read(FOLLOWING_N2, [5, 1200], after),
                KevyOutcome::Lifted(Ok(())),
            ],
            0,
        );
        assert!(r.is_ok(), "{r:?}");
        assert!(
            matches!(commands.first(), Some(KevyCommand::ReplicaOf { .. })),
            "{commands:?}"
        );
        p.take_position_write()
    };
    let once = leave(None);
    assert!(
        once.as_deref().is_some_and(|w| w.contains(" 1200 ")),
        "the mistake, read once: {once:?}"
    );
    assert_eq!(leave(Some(promoted)), None, "nothing is held");
    let settled = leave(Some(FOLLOWING_N2));
    assert!(
        settled.as_deref().is_some_and(|w| w.contains(" 1200 ")),
        "the same role: the token is read: {settled:?}"
    );
}

#[test]
fn a_writable_primary_wakes_the_nudger_while_a_replica_lags_and_not_otherwise() {
    let mut p = writable_primary();
    assert!(observe(&mut p, primary_info(20, Some(18)), 0).nudge.due);
    assert!(!observe(&mut p, primary_info(20, Some(20)), 1).nudge.due);
    let mut syncing = primary_info(20, None);
    syncing.connected_replicas = Some(1);
    assert!(
        observe(&mut p, syncing.clone(), 2).nudge.due,
        "not online yet"
    );
    syncing.offset = 0;
    assert!(
        !observe(&mut p, syncing, 3).nudge.due,
        "a new feed with nothing in it"
    );
    let mut fenced = policy();
    assert!(
        !observe(&mut fenced, primary_info(20, Some(18)), 0)
            .nudge
            .armed
    );
    let mut draining = writable_primary();
    draining.quiesce.sent(5);
    assert!(
        !observe(&mut draining, primary_info(20, Some(18)), 6)
            .nudge
            .armed,
        "handing over"
    );
}

#[test]
fn stale_acknowledgements_are_padded_past_only_on_the_writable_primary_we_made() {
    let mut p = writable_primary();
    let mut info = primary_info(10, Some(10));
    info.highest_replica_ack = Some(50);
    assert_eq!(observe(&mut p, info.clone(), 0).pad_frames, 41);
    let mut fenced = policy();
    assert_eq!(observe(&mut fenced, info, 0).pad_frames, 0);
}

#[test]
fn a_clamp_counted_by_the_watchdog_leaves_the_quiesce_unknown() {
    let mut p = writable_primary();
    let read = |p: &mut KevyPolicy, count, t| {
        p.observed(
            KevyReading {
                info: primary_info(20, Some(20)),
                token: None,
                info_after: None,
                watchdog_clamps: Some(count),
                position_file: None,
                marks_asked: Vec::new(),
                marks_answer: None,
            },
            at(t),
        )
    };
    read(&mut p, 0, 0);
    assert!(p.ours_and_writable());
    read(&mut p, 1, 100);
    assert!(
        !p.ours_and_writable(),
        "a quiesce we did not set may be in force"
    );
}

fn observe_generation(p: &mut KevyPolicy, generation: i64, t: Millis) -> KevyView {
    let info = ReplicationInfo {
        link_up: true,
        ..primary_info(0, None)
    };
    let token = redis::Value::Array(vec![redis::Value::Int(generation), redis::Value::Int(0)]);
    p.observed(
        KevyReading {
            info,
            token: Some(token),
            info_after: None,
            watchdog_clamps: None,
            position_file: None,
            marks_asked: Vec::new(),
            marks_answer: None,
        },
        at(t),
    )
}

/// A policy whose promotion of a replica was answered at 5000 ms.
fn promoted_at_5000() -> KevyPolicy {
    let mut p = policy();
    p.hold.observed(false, 0);
    let first = p.apply(&DataNodeTarget::Primary, at(5_000));
    let (_, r) = run(
        &mut p,
        first,
        vec![pipeline(), KevyOutcome::Lifted(Ok(()))],
        5_000,
    );
    assert!(r.is_ok());
    p
}

/// The CI failure at ecdbef4 (`tests/kevy_repromotion.rs`): the first
/// reading after our promotion named the process's startup generation,
/// the core took it as the epoch's stream, and the next reading (the new
/// generation) resigned the new primary.
#[test]
fn a_promoted_node_names_no_stream_until_kevy_has_bumped_its_generation() {
    let mut p = promoted_at_5000();
    let stale = observe_generation(&mut p, 788, 5_001);
    assert_eq!(stale.info.stream, None, "the old generation is not claimed");
    assert!(!stale.info.link_up, "nothing joined yet");
    let same = observe_generation(&mut p, 788, 5_050);
    assert_eq!(same.info.stream, None);
    let bumped = observe_generation(&mut p, 797, 5_100);
    assert_eq!(bumped.info.stream.as_deref(), Some("kevy-feed-797"));
    assert!(bumped.info.link_up);
}

#[test]
fn a_promoted_node_whose_first_reading_already_named_the_new_generation_claims_it_after_the_window()
{
    let mut p = promoted_at_5000();
    assert_eq!(observe_generation(&mut p, 797, 5_001).info.stream, None);
    let late = observe_generation(&mut p, 797, 5_000 + super::new_generation::NAMING_WINDOW_MS);
    assert_eq!(late.info.stream.as_deref(), Some("kevy-feed-797"));
}

const SHA: &str = "993f1b1a7dfe6879f2d8c4b393e4ae3a61d344fa";

/// A pipeline's reading with the mark's part answered.
fn marked_pipeline(loaded: Option<&str>, present: Option<bool>) -> KevyOutcome {
    match pipeline() {
        KevyOutcome::Replicated(Ok(read)) => KevyOutcome::Replicated(Ok(PipelineRead {
            mark_loaded: loaded.map(Into::into),
            mark_present: present,
            ..read
        })),
        other => other,
    }
}

#[test]
fn a_replicaof_pipeline_loads_a_process_mark_and_the_held_position_is_written_under_it() {
    let mut p = KevyPolicy::new(
        KevySettings {
            mark_seed: Some(42),
            ..settings()
        },
        1_000_000,
    );
    let first = p.apply(&DataNodeTarget::Isolated, at(1_000));
    let (commands, r) = run(
        &mut p,
        first,
        vec![
            marked_pipeline(Some(SHA), None),
            KevyOutcome::Lifted(Ok(())),
        ],
        1_000,
    );
    assert!(r.is_ok());
    assert!(
        matches!(&commands[0], KevyCommand::ReplicaOf { mark: Some(MarkStep::Load(src)), unvouch_first: false, .. } if src.contains("elector process mark")),
        "{commands:?}"
    );
    let written = p
        .take_position_write()
        .expect("the joined runner's position");
    assert!(written.trim_end().ends_with(SHA), "{written}");
    // Next time the mark is checked, not loaded; found gone, the position
    // read is written without it.
    let first = p.apply(&DataNodeTarget::Isolated, at(2_000));
    let (commands, _) = run(
        &mut p,
        first,
        vec![
            marked_pipeline(None, Some(false)),
            KevyOutcome::Lifted(Ok(())),
        ],
        2_000,
    );
    assert!(
        matches!(&commands[0], KevyCommand::ReplicaOf { mark: Some(MarkStep::Check(sha)), .. } if sha == SHA),
        "{commands:?}"
    );
    let written = p
        .take_position_write()
        .expect("the joined runner's position");
    assert!(!written.contains(SHA), "{written}");
}

#[test]
fn a_replicaof_towards_anyone_but_nowhere_strips_the_files_mark_first() {
    let mut p = policy();
    p.hold.observed(true, 0);
    let first = p.apply(&DataNodeTarget::Primary, at(10_000));
    assert!(matches!(
        first,
        KevyStep::Run(KevyCommand::ReplicaOf {
            to: None,
            unvouch_first: true,
            ..
        })
    ));
    let mut p = policy();
    let first = p.apply(&DataNodeTarget::Isolated, at(1_000));
    assert!(matches!(
        first,
        KevyStep::Run(KevyCommand::ReplicaOf {
            unvouch_first: false,
            ..
        })
    ));
}

#[test]
fn a_poll_asks_about_the_files_mark_and_a_mark_it_finds_lets_the_files_position_count() {
    let mut p = KevyPolicy::new(
        KevySettings {
            mark_seed: Some(42),
            ..settings()
        },
        5_000_000,
    );
    let file = format!("process_id:7 800 1000000 3 {SHA}\n");
    let asked = p.marks_to_check(Some(&file));
    assert_eq!(asked, vec![SHA.to_string()]);
    let nowhere = "role:slave\r\nmaster_host:127.0.0.1\r\nmaster_port:1\r\nmaster_link_status:down\r\nslave_repl_offset:1532\r\n";
    let reading = |answer: bool| KevyReading {
        info: {
            let mut i = ReplicationInfo::parse(nowhere).unwrap();
            i.identity = Some("process_id:7".into());
            i
        },
        token: Some(redis::Value::Array(vec![
            redis::Value::Int(0),
            redis::Value::Int(0),
        ])),
        info_after: Some(ReplicationInfo::parse(nowhere).unwrap()),
        watchdog_clamps: None,
        position_file: Some(file.clone()),
        marks_asked: asked.clone(),
        marks_answer: Some(vec![answer]),
    };
    let view = p.observed(reading(false), at(10));
    assert_eq!((view.info.offset, view.info.stream), (1532, None));
    assert!(
        view.load_mark.is_some(),
        "with no mark of its own it loads one"
    );
    let view = p.observed(reading(true), at(20));
    assert_eq!(
        (view.info.offset, view.info.stream.as_deref()),
        (800, Some("kevy-feed-3"))
    );
}

/// Protocol §6.10, "A join outlives its elector": the core's durable
/// `joining_process` is asked about in every poll, and the marks a poll
/// finds are the reading's process names.
#[test]
fn a_poll_asks_about_the_process_a_join_was_set_out_from_and_names_the_marks_it_finds() {
    let mut p = KevyPolicy::new(
        KevySettings {
            mark_seed: Some(42),
            ..settings()
        },
        5_000_000,
    );
    let pinned = "ab".repeat(20);
    p.ask_about_joining_process(Some(pinned.clone()));
    let asked = p.marks_to_check(None);
    assert_eq!(asked, vec![pinned.clone()]);
    let nowhere = "role:slave\r\nmaster_host:127.0.0.1\r\nmaster_port:1\r\nmaster_link_status:down\r\nslave_repl_offset:0\r\n";
    let reading = |answer: bool| KevyReading {
        info: ReplicationInfo::parse(nowhere).unwrap(),
        token: Some(redis::Value::Array(vec![
            redis::Value::Int(0),
            redis::Value::Int(0),
        ])),
        info_after: Some(ReplicationInfo::parse(nowhere).unwrap()),
        watchdog_clamps: None,
        position_file: None,
        marks_asked: asked.clone(),
        marks_answer: Some(vec![answer]),
    };
    let view = p.observed(reading(false), at(10));
    assert!(view.info.process_names.is_empty(), "another process");
    let view = p.observed(reading(true), at(20));
    assert_eq!(view.info.process_names, vec![pinned]);
    // Anything but a mark's sha is never asked about.
    let mut p = KevyPolicy::new(
        KevySettings {
            mark_seed: Some(42),
            ..settings()
        },
        5_000_000,
    );
    p.ask_about_joining_process(Some("run_id:5f1c".into()));
    assert!(p.marks_to_check(None).is_empty());
}

/// A policy that followed n2 (`10.0.0.2`, replication port 16379).
fn following_n2() -> KevyPolicy {
    let mut p = policy();
    let target = DataNodeTarget::Follow {
        primary: "n2".into(),
        primary_addr: "n2:6379".into(),
    };
    let first = p.apply(&target, at(0));
    let (_, r) = run(
        &mut p,
        first,
        vec![
            KevyOutcome::Resolved(Ok(("10.0.0.2".into(), 6379))),
            role(REPLICA_OF_NOWHERE),
            KevyOutcome::Upstream(Some(UpstreamAt {
                offset: 40,
                generation: Some(8),
            })),
            pipeline(),
            KevyOutcome::Lifted(Ok(())),
        ],
        0,
    );
    assert!(r.is_ok(), "{r:?}");
    p
}

fn replica_reading(
    p: &mut KevyPolicy,
    replication: &str,
    clamps: u64,
    t: Millis,
) -> ReplicationInfo {
    let token = redis::Value::Array(vec![redis::Value::Int(3), redis::Value::Int(900)]);
    p.observed(
        KevyReading {
            info: ReplicationInfo::parse(replication).unwrap(),
            token: Some(token),
            info_after: None,
            watchdog_clamps: Some(clamps),
            position_file: None,
            marks_asked: Vec::new(),
            marks_answer: None,
        },
        at(t),
    )
    .info
}

const FOLLOWING_ELSEWHERE: &str = "role:slave\r\nmaster_host:10.0.0.9\r\nmaster_port:16379\r\nmaster_link_status:up\r\nslave_repl_offset:40\r\n";

/// §6.10, "A replica's tail": an operator's `REPLICAOF` ended the runner
/// we set; its position was last read a poll ago, and the link it now
/// reports is to an upstream we did not set.
#[test]
fn a_replica_moved_off_our_upstream_by_someone_else_is_counted_once_and_reads_unlinked() {
    let mut p = following_n2();
    let info = replica_reading(&mut p, FOLLOWING_N2, 0, 100);
    assert_eq!(info.runners_ended_by_others, 0);
    assert!(info.link_up, "joined to the upstream we set");
    let info = replica_reading(&mut p, FOLLOWING_ELSEWHERE, 0, 200);
    assert_eq!(info.runners_ended_by_others, 1);
    assert!(
        !info.link_up,
        "a link to someone else's upstream is no join of ours"
    );
    let info = replica_reading(&mut p, FOLLOWING_ELSEWHERE, 0, 300);
    assert_eq!(
        info.runners_ended_by_others, 1,
        "the same end, counted once"
    );
    assert!(!info.link_up);
}

/// The watchdog's clamp detaches the replica too, but reads the runner's
/// position as it does (the floor hint): no end by someone else.
#[test]
fn the_watchdogs_clamp_is_not_counted_as_a_runner_ended_by_someone_else() {
    let mut p = following_n2();
    replica_reading(&mut p, FOLLOWING_N2, 0, 100);
    let info = replica_reading(&mut p, REPLICA_OF_NOWHERE, 1, 200);
    assert_eq!(info.runners_ended_by_others, 0);
}

/// A replica never read following the upstream we set has no runner of
/// ours to end: a stale link elsewhere before our join is not counted.
#[test]
fn a_replica_never_read_on_our_upstream_counts_no_ended_runner() {
    let mut p = following_n2();
    let info = replica_reading(&mut p, FOLLOWING_ELSEWHERE, 0, 100);
    assert_eq!(info.runners_ended_by_others, 0);
    assert!(!info.link_up);
}

/// The watch file the policy wrote, and a new policy (a restarted elector)
/// that resumes it with the watchdog's count `clamps_now`.
fn restarted_from(p: &mut KevyPolicy, clamps_now: u64) -> KevyPolicy {
    p.resume_watch(None, Some(0));
    let written = p.take_watch_write().expect("a watch to write");
    let mut restarted = policy();
    restarted.resume_watch(written.as_deref(), Some(clamps_now));
    restarted
}

/// §6.10, "A replica's tail", across an elector restart: the upstream a
/// reading saw the node follow is kept (`watch`), and a restarted elector
/// that finds the node elsewhere counts the runner as ended by others.
#[test]
fn a_restarted_elector_counts_a_runner_someone_else_ended_while_it_was_down() {
    let mut p = following_n2();
    replica_reading(&mut p, FOLLOWING_N2, 0, 100);
    let mut restarted = restarted_from(&mut p, 0);
    let info = replica_reading(&mut restarted, FOLLOWING_ELSEWHERE, 0, 0);
    assert_eq!(info.runners_ended_by_others, 1);
    let info = replica_reading(&mut restarted, FOLLOWING_ELSEWHERE, 0, 100);
    assert_eq!(info.runners_ended_by_others, 1, "counted once");
}

#[test]
fn a_restarted_elector_finding_the_node_on_the_watched_upstream_counts_nothing() {
    let mut p = following_n2();
    replica_reading(&mut p, FOLLOWING_N2, 0, 100);
    let mut restarted = restarted_from(&mut p, 0);
    let info = replica_reading(&mut restarted, FOLLOWING_N2, 0, 0);
    assert_eq!(info.runners_ended_by_others, 0);
    assert_eq!(
        restarted.take_watch_write(),
        None,
        "the watch stands as written"
    );
}

/// The watchdog's clamp while no elector ran read the runner's position as
/// it detached it (the floor hint): the watch is void.
#[test]
fn a_watch_taken_before_a_watchdog_clamp_is_void_after_the_restart() {
    let mut p = following_n2();
    replica_reading(&mut p, FOLLOWING_N2, 0, 100);
    let mut restarted = restarted_from(&mut p, 1);
    let info = replica_reading(&mut restarted, REPLICA_OF_NOWHERE, 1, 0);
    assert_eq!(info.runners_ended_by_others, 0);
}

/// Our own first `REPLICAOF` after the restart reads the node in its
/// pipeline before moving it: a node already elsewhere is counted there.
#[test]
fn a_restarted_elector_checks_the_watch_in_the_pipeline_of_its_first_replicaof() {
    let mut p = following_n2();
    replica_reading(&mut p, FOLLOWING_N2, 0, 100);
    let mut restarted = restarted_from(&mut p, 0);
    let first = restarted.apply(&DataNodeTarget::Isolated, at(0));
    let (_, r) = run(
        &mut restarted,
        first,
        vec![
            pipeline_read(FOLLOWING_ELSEWHERE, [3, 900], None),
            KevyOutcome::Lifted(Ok(())),
        ],
        0,
    );
    assert!(r.is_ok(), "{r:?}");
    let info = replica_reading(&mut restarted, REPLICA_OF_NOWHERE, 0, 100);
    assert_eq!(info.runners_ended_by_others, 1);
}

/// A count outlives an elector killed before its core wrote it down: the
/// file's `unread` flag counts again at the restart, and clears once the
/// node reads joined to an upstream we set.
#[test]
fn a_count_outlives_the_elector_until_the_node_joins_an_upstream_we_set_again() {
    let mut p = following_n2();
    replica_reading(&mut p, FOLLOWING_N2, 0, 100);
    replica_reading(&mut p, FOLLOWING_ELSEWHERE, 0, 200);
    let mut restarted = restarted_from(&mut p, 0);
    let info = replica_reading(&mut restarted, FOLLOWING_ELSEWHERE, 0, 0);
    assert_eq!(info.runners_ended_by_others, 1, "the earlier count, again");
    let mut rejoined = following_n2();
    rejoined.resume_watch(Some("unread\n"), Some(0));
    replica_reading(&mut rejoined, FOLLOWING_N2, 0, 100);
    assert_eq!(
        rejoined.take_watch_write().flatten().as_deref(),
        Some("follows 10.0.0.2 16379 clamps 0\n"),
        "the flag cleared by the join; the new runner watched"
    );
}
