//! The rules of docs/protocol.md §6.4.1 and §6.8, one round at a time:
//! each test scripts the data node's answers and checks the commands.
use super::*;

fn info(role: &str, identity: Option<&str>) -> ReplicationInfo {
    ReplicationInfo {
        role: role.into(),
        offset: 7,
        identity: identity.map(str::to_string),
        ..Default::default()
    }
}

thread_local! {
    /// What the scripted reads say of the tether (neutral unless a test
    /// sets it).
    static TETHER: std::cell::Cell<TetherCheck> = const { std::cell::Cell::new(TetherCheck::Unanswered) };
}

/// Plays one round: `reads` answers each Observe in turn (with whether
/// it satisfies the target), applies succeed unless `apply_fails`.
fn round(
    d: &mut Driver,
    seq: u64,
    target: DataNodeTarget,
    reads: &[Result<(ReplicationInfo, bool), ()>],
    apply_fails: bool,
) -> (Vec<Command>, RoundReport) {
    let mut reads = reads.iter();
    let mut commands = Vec::new();
    let mut step = d.begin(seq, 0, target, 100);
    loop {
        let command = match step {
            Step::Done(report) => return (commands, report),
            Step::Run(c) => c,
        };
        commands.push(command.clone());
        let outcome = match command {
            Command::Apply(_) if apply_fails => {
                Outcome::Applied(Err(DataNodeError::Unreachable("timeout".into())))
            }
            Command::Apply(_) => Outcome::Applied(Ok(())),
            Command::FenceBlind => Outcome::BlindFenced(Ok(())),
            Command::Observe => match reads.next().expect("a scripted read") {
                Ok((info, satisfies)) => Outcome::Observed(Ok(Observed {
                    info: info.clone(),
                    satisfies: *satisfies,
                    tether: TETHER.with(|t| t.get()),
                })),
                Err(()) => Outcome::Unread {
                    error: DataNodeError::Unreachable("timeout".into()),
                    tether: TETHER.with(|t| t.get()),
                },
            },
        };
        step = d.next(outcome, 130);
    }
}

/// A driver that has made process `id` writable with target `seq`.
fn writable_at(seq: u64, id: Option<&str>) -> Driver {
    let mut d = Driver::new("test");
    round(
        &mut d,
        seq,
        DataNodeTarget::Primary,
        &[
            Ok((info("slave", id), false)),
            Ok((info("master", id), true)),
        ],
        false,
    );
    assert_eq!(d.t.applied_seq, seq);
    d
}

#[test]
fn a_new_fence_goes_out_before_anything_is_read_while_the_node_may_be_writable() {
    // §6.4.1: reading first would add a command to the fence's latency.
    let mut d = writable_at(3, Some("a"));
    let (commands, report) = round(
        &mut d,
        4,
        DataNodeTarget::FencedPrimary,
        &[Ok((info("master", Some("a")), true))],
        false,
    );
    assert_eq!(
        commands,
        vec![
            Command::Apply(DataNodeTarget::FencedPrimary),
            Command::Observe
        ]
    );
    assert_eq!(report.obs.applied_seq, 4);
    assert_eq!(report.fence_applied_after_ms, Some(30));
}

#[test]
fn a_node_already_fenced_is_read_before_it_is_fenced_again() {
    let mut d = writable_at(3, Some("a"));
    round(
        &mut d,
        4,
        DataNodeTarget::Isolated,
        &[Ok((info("slave", Some("a")), true))],
        false,
    );
    let (commands, _) = round(
        &mut d,
        5,
        DataNodeTarget::FencedPrimary,
        &[Ok((info("slave", Some("a")), true))],
        false,
    );
    assert_eq!(commands, vec![Command::Observe]);
}

fn follow_n1() -> DataNodeTarget {
    DataNodeTarget::Follow {
        primary: "n1".into(),
        primary_addr: "n1:6379".into(),
    }
}

/// §6.8, issue 35: a replica we left following, busy (kevy loading a large
/// snapshot) so that a read times out while the tether shows the same
/// process, is not fenced blind: on kevy that `REPLICAOF` restarts the
/// sync it is loading.
#[test]
fn a_replica_left_fenced_that_misses_a_read_on_its_live_tether_is_not_fenced_blind() {
    TETHER.with(|t| t.set(TetherCheck::Same(1)));
    let mut d = Driver::new("test");
    round(
        &mut d,
        2,
        follow_n1(),
        &[
            Ok((info("master", Some("a")), false)),
            Ok((info("slave", Some("a")), true)),
        ],
        false,
    );
    assert!(!d.t.may_be_writable);
    let (commands, report) = round(&mut d, 2, follow_n1(), &[Err(())], false);
    assert_eq!(commands, vec![Command::Observe], "no blind fence");
    assert!(!report.obs.reachable);
    // A stalled or unknown process still gets one.
    for tether in [
        TetherCheck::Unanswered,
        TetherCheck::Down,
        TetherCheck::Replaced(2),
    ] {
        TETHER.with(|t| t.set(tether));
        let (commands, _) = round(&mut d, 2, follow_n1(), &[Err(())], false);
        assert_eq!(
            commands,
            vec![Command::Observe, Command::FenceBlind],
            "tether {tether:?}"
        );
    }
    TETHER.with(|t| t.set(TetherCheck::Unanswered));
}

/// §6.4.1: a node that may still be writable (a writable target was the
/// last one tried) is fenced blind on a missed read, live tether or not.
#[test]
fn a_node_that_may_be_writable_is_fenced_blind_on_a_missed_read_even_on_a_live_tether() {
    TETHER.with(|t| t.set(TetherCheck::Same(1)));
    let mut d = writable_at(3, Some("a"));
    let (commands, _) = round(&mut d, 4, DataNodeTarget::Isolated, &[Err(())], true);
    assert!(commands.ends_with(&[Command::FenceBlind]), "{commands:?}");
    TETHER.with(|t| t.set(TetherCheck::Unanswered));
}

#[test]
fn a_node_that_cannot_be_read_gets_a_blind_fence_unless_it_should_be_writable() {
    // §6.4.1: a timeout or maxclients must not leave a node writable.
    let mut d = writable_at(3, Some("a"));
    round(
        &mut d,
        4,
        DataNodeTarget::Isolated,
        &[Ok((info("slave", Some("a")), true))],
        false,
    );
    let (commands, report) = round(&mut d, 4, DataNodeTarget::Isolated, &[Err(())], false);
    assert_eq!(commands, vec![Command::Observe, Command::FenceBlind]);
    assert!(!report.obs.reachable);
    let mut d = writable_at(3, Some("a"));
    let (commands, _) = round(&mut d, 3, DataNodeTarget::Primary, &[Err(())], false);
    assert_eq!(commands, vec![Command::Observe]);
}

#[test]
fn a_data_node_that_restarted_is_clamped_and_gets_nothing_more_until_the_core_decides() {
    // §6.8: another process answers: new generation, start-up clamp.
    let mut d = writable_at(3, Some("a"));
    let (commands, report) = round(
        &mut d,
        3,
        DataNodeTarget::Primary,
        &[
            Ok((info("slave", Some("b")), false)),
            Ok((info("slave", Some("b")), false)),
        ],
        false,
    );
    assert_eq!(
        commands,
        vec![
            Command::Observe,
            Command::Apply(DataNodeTarget::Isolated),
            Command::Observe
        ]
    );
    assert_eq!(report.obs.generation, 1);
    // The old target, chosen for generation 0, is never applied.
    let (commands, _) = round(
        &mut d,
        3,
        DataNodeTarget::Primary,
        &[Ok((info("slave", Some("b")), false))],
        false,
    );
    assert_eq!(commands, vec![Command::Observe]);
}

#[test]
fn the_same_process_demoted_by_someone_else_is_not_made_writable_by_the_old_target() {
    // §6.4.1: the watchdog's clamp; only a newer target undoes it.
    let mut d = writable_at(3, Some("a"));
    let (commands, report) = round(
        &mut d,
        3,
        DataNodeTarget::Primary,
        &[Ok((info("slave", Some("a")), false))],
        false,
    );
    assert_eq!(commands, vec![Command::Observe]);
    assert_eq!((report.obs.generation, report.obs.overridden), (0, 1));
    let (commands, _) = round(
        &mut d,
        4,
        DataNodeTarget::Primary,
        &[
            Ok((info("slave", Some("a")), false)),
            Ok((info("master", Some("a")), true)),
        ],
        false,
    );
    assert_eq!(
        commands,
        vec![
            Command::Observe,
            Command::Apply(DataNodeTarget::Primary),
            Command::Observe
        ]
    );
}

fn with_clamps(mut i: ReplicationInfo, clamps: u64) -> ReplicationInfo {
    i.watchdog_clamps = Some(clamps);
    i
}

#[test]
fn a_watchdog_clamp_that_leaves_the_node_a_master_still_counts_as_a_demotion_by_someone_else() {
    // kevy: the watchdog quiesces a primary (INFO still says master); only
    // its clamp count moves. The old target must not re-open the node.
    let mut d = Driver::new("test");
    round(
        &mut d,
        3,
        DataNodeTarget::Primary,
        &[
            Ok((with_clamps(info("slave", Some("a")), 2), false)),
            Ok((with_clamps(info("master", Some("a")), 2), true)),
        ],
        false,
    );
    let (_, report) = round(
        &mut d,
        3,
        DataNodeTarget::Primary,
        &[Ok((with_clamps(info("master", Some("a")), 2), true))],
        false,
    );
    assert_eq!(report.obs.overridden, 0, "an unchanged count is nothing");
    let (commands, report) = round(
        &mut d,
        3,
        DataNodeTarget::Primary,
        &[Ok((with_clamps(info("master", Some("a")), 3), false))],
        false,
    );
    assert_eq!(commands, vec![Command::Observe]);
    assert_eq!((report.obs.generation, report.obs.overridden), (0, 1));
}

#[test]
fn a_demotion_we_cannot_attribute_to_the_same_process_counts_as_a_restart() {
    let mut d = writable_at(3, None);
    let (_, report) = round(
        &mut d,
        3,
        DataNodeTarget::Primary,
        &[
            Ok((info("slave", None), false)),
            Ok((info("slave", None), false)),
        ],
        false,
    );
    assert_eq!(report.obs.generation, 1);
}

#[test]
fn a_replica_by_our_own_newer_target_is_no_demotion() {
    let mut d = writable_at(3, Some("a"));
    let (_, report) = round(
        &mut d,
        4,
        DataNodeTarget::Isolated,
        &[Ok((info("slave", Some("a")), true))],
        false,
    );
    assert_eq!((report.obs.generation, report.obs.overridden), (0, 0));
}

#[test]
fn a_target_the_node_already_satisfies_costs_no_command() {
    let mut d = Driver::new("test");
    round(
        &mut d,
        1,
        DataNodeTarget::Isolated,
        &[Ok((info("slave", Some("a")), true))],
        false,
    );
    let (commands, report) = round(
        &mut d,
        2,
        DataNodeTarget::FencedPrimary,
        &[Ok((info("slave", Some("a")), true))],
        false,
    );
    assert_eq!(commands, vec![Command::Observe]);
    assert_eq!(report.obs.applied_seq, 2);
}

#[test]
fn a_failed_apply_is_reported_and_not_counted_as_applied() {
    let mut d = Driver::new("test");
    round(
        &mut d,
        1,
        DataNodeTarget::Isolated,
        &[Ok((info("slave", Some("a")), true))],
        false,
    );
    let (_, report) = round(
        &mut d,
        2,
        DataNodeTarget::Primary,
        &[
            Ok((info("slave", Some("a")), false)),
            Ok((info("slave", Some("a")), false)),
        ],
        true,
    );
    assert_eq!(report.obs.applied_seq, 1);
    assert!(report.error.is_some());
}

#[test]
fn a_replaced_tether_is_a_restart_even_when_the_process_id_is_the_same() {
    // §6.8, issue 34 (a): kevy in its own PID namespace is process 1 before
    // and after a restart; only the dead tether tells.
    let mut d = writable_at(3, Some("process_id:1"));
    TETHER.with(|t| t.set(TetherCheck::Replaced(2)));
    let (commands, report) = round(
        &mut d,
        3,
        DataNodeTarget::Primary,
        &[
            Ok((info("master", Some("process_id:1")), true)),
            Ok((info("slave", Some("process_id:1")), false)),
        ],
        false,
    );
    TETHER.with(|t| t.set(TetherCheck::Unanswered));
    assert_eq!(report.obs.generation, 1, "{commands:?}");
    assert!(
        commands.contains(&Command::Apply(DataNodeTarget::Isolated)),
        "clamped at once: {commands:?}"
    );
    assert!(!commands.contains(&Command::Apply(DataNodeTarget::Primary)));
}

#[test]
fn a_live_tether_is_the_same_process_when_the_identity_cannot_tell() {
    // A demotion seen on a node whose identity is unknown used to count as
    // a restart; the tether proves the same process holds the same data.
    let mut d = writable_at(3, None);
    TETHER.with(|t| t.set(TetherCheck::Same(1)));
    let (_, report) = round(
        &mut d,
        3,
        DataNodeTarget::Primary,
        &[
            Ok((info("slave", None), false)),
            Ok((info("slave", None), false)),
        ],
        false,
    );
    TETHER.with(|t| t.set(TetherCheck::Unanswered));
    assert_eq!((report.obs.generation, report.obs.overridden), (0, 1));
}
