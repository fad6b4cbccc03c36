use super::*;
use faults::FaultKind;

const GOOD: &str = r#"
name: primary-kill
tags: [quick]
nodes: 3
timings: { down_after_ms: 1500 }
steps:
  - wait_primary: 30s
  - start_writers
  - sleep: 2s
  - kill: primary
  - pause: replica1 for 1.5s
  - split: [[primary], others]
  - bridge: { left: [primary], middle: replica1, right: [replica2] }
  - one_way: { from: primary, to: replicas }
  - netem: { targets: all, delay_ms: 20, jitter_ms: 10, loss_pct: 2.5 }
  - heal
  - restart: down
  - sleep: 500
expect: { failover: true }
"#;

#[test]
fn a_full_scenario_parses_with_every_step_kind() {
    let s = Scenario::parse("t", GOOD).unwrap();
    assert_eq!(s.name, "primary-kill");
    assert_eq!(s.quorum(), 2);
    assert_eq!(s.steps[0], Step::WaitPrimary(Dur(30_000)));
    assert_eq!(s.steps[1], Step::StartWriters);
    assert_eq!(s.steps[3], Step::Kill(Targets::One("primary".into())));
    assert_eq!(
        s.steps[4],
        Step::Pause(PauseSpec {
            targets: Targets::One("replica1".into()),
            duration: Some(Dur(1500))
        })
    );
    assert!(matches!(&s.steps[5], Step::Split(v) if v.len() == 2));
    assert_eq!(s.steps[9], Step::Heal);
    assert_eq!(s.steps[11], Step::Sleep(Dur(500)));
    assert_eq!(s.expect.failover, Some(true));
    assert_eq!(s.timings.down_after_ms, 1500);
    assert_eq!(s.timings.hb_interval_ms, 100);
}

#[test]
fn every_fault_of_the_shared_vocabulary_is_a_step_of_the_same_name() {
    let samples = [
        "kill: primary",
        "restart: down",
        "kill_elector: primary",
        "freeze_elector: primary for 2s",
        "stop_elector: replica1",
        "kill_data: primary",
        "restart_data: { on: primary, lose_data: true }",
        "stall_data: primary for 61s",
        "pause: primary",
        "isolate: primary",
        "split: [[primary], others]",
        "bridge: { left: [n1], middle: n2, right: [n3] }",
        "one_way: { from: primary, to: replicas }",
        "netem: { targets: all, loss_pct: 2 }",
        "read_only_state: primary",
        "lift_fence: old_primary",
        "switchover: { to: replica1 }",
        "heal",
    ];
    let mut seen = vec![];
    for text in samples {
        let yaml =
            format!("name: x\nnodes: 3\nenv: {{ DATA_NODE_RESTART: \"1\" }}\nsteps:\n  - {text}\n");
        let s = Scenario::parse("f", &yaml).unwrap_or_else(|e| panic!("{text}: {e}"));
        let kind = s.steps[0].fault_kind().expect(text);
        assert!(text.starts_with(kind.name()), "{text} is {kind}");
        seen.push(kind);
    }
    let containers: Vec<FaultKind> = FaultKind::ALL
        .into_iter()
        .filter(|k| k.in_containers())
        .collect();
    assert_eq!(seen, containers);
}

#[test]
fn an_elector_restart_is_recorded_as_the_stop_or_the_kill_it_begins_with() {
    for (text, kind, label) in [
        (
            "restart_elector: { on: all, gap_ms: 1000 }",
            FaultKind::StopElector,
            "restart_elector all (SIGTERM, back after 1000 ms)",
        ),
        (
            "restart_elector: { on: all, kill: true, gap_ms: 5000 }",
            FaultKind::KillElector,
            "restart_elector all (SIGKILL, back after 5000 ms)",
        ),
    ] {
        let yaml = format!("name: x\nnodes: 3\nsteps:\n  - {text}\n");
        let s = Scenario::parse("f", &yaml).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(s.steps[0].fault_kind(), Some(kind), "{text}");
        assert_eq!(s.steps[0].label(), label);
    }
    let typo = "name: x\nnodes: 3\nsteps:\n  - restart_elector: { on: all, gap: 1 }\n";
    assert!(
        Scenario::parse("f", typo).is_err(),
        "unknown fields are refused"
    );
}

#[test]
fn only_a_scenario_with_the_supervisor_says_its_data_nodes_restart_in_place() {
    // `kill_data` waits for the container to stop only without it: the
    // chaos schedules (which set it) ran 10 s late at every `kill_data`.
    let with =
        "name: x\nnodes: 3\nenv: { DATA_NODE_RESTART: \"1\" }\nsteps:\n  - kill_data: primary\n";
    let without = "name: x\nnodes: 3\nsteps:\n  - kill_data: primary\n";
    assert!(Scenario::parse("f", with).unwrap().data_node_restarts());
    assert!(!Scenario::parse("f", without).unwrap().data_node_restarts());
    let generated = crate::chaos::generate(&crate::chaos::Plan {
        seed: 1,
        nodes: 3,
        duration_ms: 60_000,
        backend: "kevy".into(),
        timings: Default::default(),
        quiet_ms: 20_000,
    });
    assert!(generated.scenario.data_node_restarts());
}

#[test]
fn restart_data_without_a_supervisor_that_restarts_is_rejected() {
    let text = "name: x\nnodes: 3\nsteps:\n  - restart_data: { on: primary }\n";
    let err = Scenario::parse("f", text).unwrap_err().to_string();
    assert!(err.contains("DATA_NODE_RESTART"), "{err}");
}

#[test]
fn durations_accept_units_and_reject_garbage() {
    assert_eq!("500ms".parse::<Dur>().unwrap(), Dur(500));
    assert_eq!("2s".parse::<Dur>().unwrap(), Dur(2000));
    assert_eq!("1.5s".parse::<Dur>().unwrap(), Dur(1500));
    assert_eq!("250".parse::<Dur>().unwrap(), Dur(250));
    assert!("soon".parse::<Dur>().is_err());
    assert!("-1s".parse::<Dur>().is_err());
}

#[test]
fn an_unknown_target_is_rejected_with_the_step_named() {
    let text = "name: x\nnodes: 3\nsteps:\n  - kill: n4\n";
    let err = Scenario::parse("f.yaml", text).unwrap_err().to_string();
    assert!(err.contains("n4"), "{err}");
    let text = "name: x\nnodes: 3\nsteps:\n  - kill: replica3\n";
    assert!(Scenario::parse("f.yaml", text).is_err());
}

#[test]
fn an_unknown_step_or_field_is_rejected() {
    assert!(Scenario::parse("f", "name: x\nnodes: 3\nsteps:\n  - explode: primary\n").is_err());
    assert!(Scenario::parse("f", "name: x\nnodes: 3\nbogus: 1\nsteps:\n  - heal\n").is_err());
}

#[test]
fn a_split_with_one_side_is_rejected() {
    let text = "name: x\nnodes: 3\nsteps:\n  - split: [[n1, n2, n3]]\n";
    assert!(Scenario::parse("f", text).is_err());
}

#[test]
fn the_planned_duration_adds_up_sleeps_pauses_and_wait_bounds() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let s = Scenario::load(&dir.join("heal-replica-5m.yaml")).unwrap();
    // wait_primary 60 s + sleep 3 s + sleep 300 s + mesh 4 s + sleep 2 s.
    assert_eq!(s.planned_ms(), 369_000);
}

#[test]
fn defaults_give_lease_and_election_bound_from_timings() {
    let s = Scenario::parse("f", "name: x\nnodes: 5\nsteps:\n  - heal\n").unwrap();
    assert_eq!(s.quorum(), 3);
    assert_eq!(s.lease_ms(), 1500);
    assert_eq!(s.election_bound_ms(), 1500 + 1000 + 800 + 1000);
}

#[test]
fn every_shipped_scenario_file_parses() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let all = Scenario::load_dir(&dir).unwrap();
    assert!(all.len() >= 15, "only {} scenarios", all.len());
    let quick = all.iter().filter(|s| s.has_tag("quick")).count();
    // Every quick scenario runs on both backends in `just test`: keep CI well under its limit.
    assert!((4..=9).contains(&quick), "quick suite has {quick}");
    assert!(all.iter().any(|s| s.expect.violation));
}
