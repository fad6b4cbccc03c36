//! Config loading and validation, one fact per test (docs/interfaces.md §Config).
use super::*;

const GOOD: &str = r#"
node_id: n1
listen: { election: "127.0.0.1:7401", api: "127.0.0.1:9301" }
data_node: { kind: kevy, address: "127.0.0.1:6001" }
peers:
  - { id: n1, election: "127.0.0.1:7401", data: "127.0.0.1:6001" }
  - { id: n2, election: "127.0.0.1:7402", data: "127.0.0.1:6002" }
  - { id: n3, election: "127.0.0.1:7403", data: "127.0.0.1:6003" }
"#;

fn problems(yaml: &str) -> Vec<String> {
    match parse(yaml, Path::new("t.yaml")) {
        Ok(_) => vec![],
        Err(ConfigError::Invalid { problems, .. }) => problems,
        Err(e) => vec![e.to_string()],
    }
}

#[test]
fn a_three_node_config_is_valid_and_gets_the_seed_defaults() {
    let loaded = parse(GOOD, Path::new("t.yaml")).unwrap();
    assert!(
        loaded
            .warnings
            .iter()
            .all(|w| w.contains("auth.mode is none")),
        "{:?}",
        loaded.warnings
    );
    let t = loaded.config.timings();
    assert_eq!(
        (t.hb_interval_ms, t.down_after_ms, t.election_timeout_ms),
        (200, 5000, 3000)
    );
    assert_eq!((t.backoff_min_ms, t.backoff_max_ms), (1000, 5000));
    assert_eq!(loaded.config.core_config(1).quorum().size(), 2);
}

#[test]
fn duplicate_ids_and_a_missing_self_are_each_reported() {
    let yaml = GOOD
        .replace("id: n3", "id: n2")
        .replace("node_id: n1", "node_id: n9");
    let p = problems(&yaml);
    assert!(
        p.iter()
            .any(|m| m.contains("\"n2\" appears more than once")),
        "{p:?}"
    );
    assert!(
        p.iter().any(|m| m.contains("\"n9\" is missing from peers")),
        "{p:?}"
    );
}

#[test]
fn a_fence_margin_that_leaves_a_lease_under_three_heartbeats_is_refused() {
    // down_after 2000, hb 200: voter_fresh 1600, lease 1600 − 200 − margin.
    let yaml = format!(
        "{GOOD}timings: {{ hb_interval_ms: 200, down_after_ms: 2000, fence_margin_ms: 900 }}\n"
    );
    let p = problems(&yaml);
    assert!(
        p.iter().any(|m| m.contains("500 ms, under 3 heartbeats")),
        "{p:?}"
    );
    let ok = format!(
        "{GOOD}timings: {{ hb_interval_ms: 200, down_after_ms: 2000, fence_margin_ms: 800 }}\n"
    );
    assert!(problems(&ok).is_empty(), "{:?}", problems(&ok));
}

#[test]
fn the_default_fence_margin_is_a_fifth_of_down_after_within_a_heartbeat_and_a_second() {
    let margin = |hb, down_after| {
        TimingsConfig {
            hb_interval_ms: hb,
            down_after_ms: down_after,
            ..TimingsConfig::default()
        }
        .fence_margin_ms()
    };
    assert_eq!(margin(100, 1500), 300);
    assert_eq!(margin(200, 600), 200);
    assert_eq!(margin(200, 10_000), 1000);
}

#[test]
fn a_fence_budget_under_the_command_timeout_is_warned_about() {
    let yaml = format!("{GOOD}timings: {{ hb_interval_ms: 100, down_after_ms: 1500 }}\n");
    let loaded = parse(&yaml, Path::new("t.yaml")).unwrap();
    assert!(
        loaded
            .warnings
            .iter()
            .any(|w| w.contains("fence_margin_ms 300 covers fences that apply within")),
        "{:?}",
        loaded.warnings
    );
}

#[test]
fn down_after_not_above_the_heartbeat_is_refused() {
    let yaml = format!("{GOOD}timings: {{ hb_interval_ms: 500, down_after_ms: 500 }}\n");
    let p = problems(&yaml);
    assert!(
        p.iter()
            .any(|m| m.contains("must be greater than hb_interval_ms")),
        "{p:?}"
    );
}

#[test]
fn a_bad_address_is_named_precisely() {
    let p = problems(&GOOD.replace("127.0.0.1:6002", "nowhere"));
    assert_eq!(
        p,
        vec!["peer n2: data address \"nowhere\" is not host:port".to_string()]
    );
}

#[test]
fn two_nodes_are_accepted_with_a_no_fault_tolerance_warning() {
    let yaml = GOOD.replace(
        "  - { id: n3, election: \"127.0.0.1:7403\", data: \"127.0.0.1:6003\" }\n",
        "",
    );
    let loaded = parse(&yaml, Path::new("t.yaml")).unwrap();
    assert!(loaded
        .warnings
        .iter()
        .any(|w| w.contains("N=2 has no fault tolerance")));
}

#[test]
fn unknown_keys_are_refused_rather_than_ignored() {
    let p = problems(&format!("{GOOD}priorty: 3\n"));
    assert!(p[0].contains("unknown field `priorty`"), "{p:?}");
}

#[test]
fn test_faults_are_refused_by_a_normal_build() {
    let p = problems(&format!(
        "{GOOD}unsafe_test_faults: [promote_without_quorum]\n"
    ));
    if cfg!(feature = "test-faults") {
        assert!(p.is_empty());
    } else {
        assert!(p[0].contains("only honoured by elector-faulty"), "{p:?}");
    }
}

#[test]
fn addresses_accept_names_and_bracketed_ipv6() {
    assert!(valid_address("n1:7400"));
    assert!(valid_address("[::1]:7400"));
    assert!(!valid_address("::1:7400"));
    assert!(!valid_address("n1:0"));
    assert!(!valid_address("n1"));
}

#[test]
fn hostile_nesting_is_refused_before_the_yaml_parser_runs() {
    let text = format!("node_id: {}", "[".repeat(100_000));
    let started = std::time::Instant::now();
    let err = parse(&text, Path::new("t.yaml")).unwrap_err();
    assert!(started.elapsed() < std::time::Duration::from_millis(200));
    assert!(
        err.to_string()
            .starts_with("t.yaml: refused before parsing: line 1: brackets"),
        "{err}"
    );
}

#[test]
fn a_file_above_the_size_limit_is_refused_without_reading_it_all() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.yaml");
    std::fs::write(&path, vec![b'#'; MAX_BYTES as usize * 3]).unwrap();
    let err = load(&path).unwrap_err();
    assert!(
        err.to_string().contains("larger than 1048576 bytes"),
        "{err}"
    );
}

#[test]
fn a_redis_acl_user_and_a_password_with_url_characters_are_accepted() {
    let yaml = GOOD.replace(
        "data_node: { kind: kevy, address: \"127.0.0.1:6001\" }",
        "data_node: { kind: redis, address: \"127.0.0.1:6001\", username: elector, password: 'p@ss:w/rd#1' }",
    );
    let loaded = parse(&yaml, Path::new("t.yaml")).unwrap();
    let dn = loaded.config.data_node.unwrap();
    assert_eq!(dn.username.as_deref(), Some("elector"));
    assert_eq!(dn.password.as_deref(), Some("p@ss:w/rd#1"));
}

#[test]
fn credentials_for_kevy_are_refused_because_kevy_has_no_auth() {
    let yaml = GOOD.replace(
        "data_node: { kind: kevy, address: \"127.0.0.1:6001\" }",
        "data_node: { kind: kevy, address: \"127.0.0.1:6001\", password: x }",
    );
    let p = problems(&yaml);
    assert!(
        p.iter().any(|m| m.contains("kevy 7.0.0 has no AUTH")),
        "{p:?}"
    );
}

#[test]
fn a_username_without_a_password_is_refused() {
    let yaml = GOOD.replace(
        "data_node: { kind: kevy, address: \"127.0.0.1:6001\" }",
        "data_node: { kind: redis, address: \"127.0.0.1:6001\", username: elector }",
    );
    let p = problems(&yaml);
    assert!(
        p.iter().any(|m| m.contains("username is set without")),
        "{p:?}"
    );
}

#[test]
fn a_vip_and_preemption_are_read_and_a_bad_vip_is_a_problem() {
    // docs/vip.md, protocol §8.1.
    let yaml = format!(
        "{GOOD}vip: {{ address: \"10.77.0.100/24\", interface: eth0, port: 6379 }}\n\
         preempt: {{ enabled: true, delay_ms: 3000 }}\n"
    );
    let c = parse(&yaml, Path::new("t.yaml")).unwrap().config;
    let vip = c.vip().unwrap().expect("a vip");
    assert_eq!(vip.port_map, Some((6379, 6001)));
    let core = c.core_config(0);
    assert!(core.preempt.enabled && core.preempt.delay_ms == 3000);
    let plain = parse(GOOD, Path::new("t.yaml")).unwrap().config;
    assert!(!plain.core_config(0).preempt.enabled);
    let bad = format!("{GOOD}vip: {{ address: \"10.77.0.100\", interface: eth0 }}\n");
    assert!(problems(&bad).iter().any(|p| p.contains("vip.address")));
}

/// `GOOD` with a Redis data node whose password is `source` (YAML flow map
/// entries).
fn redis_with(source: &str) -> String {
    GOOD.replace(
        "data_node: { kind: kevy, address: \"127.0.0.1:6001\" }",
        &format!("data_node: {{ kind: redis, address: \"127.0.0.1:6001\", username: elector, {source} }}"),
    )
}

fn secret_file(dir: &Path, text: &str, mode: u32) -> PathBuf {
    use std::os::unix::fs::PermissionsExt as _;
    let path = dir.join("redis.password");
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    path
}

#[test]
fn a_password_file_only_the_elector_reads_is_loaded_into_the_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let path = secret_file(dir.path(), "p@ss:w/rd#1\n", 0o600);
    let loaded = parse(
        &redis_with(&format!("password_file: {}", path.display())),
        Path::new("t.yaml"),
    )
    .unwrap();
    assert!(
        !loaded.warnings.iter().any(|w| w.contains("password")),
        "{:?}",
        loaded.warnings
    );
    let dn = loaded.config.data_node.unwrap();
    let c = dn.credentials();
    assert_eq!(c.username.as_deref(), Some("elector"));
    assert_eq!(c.password.as_deref(), Some("p@ss:w/rd#1"));
    assert!(!format!("{dn:?}").contains("p@ss"), "{dn:?}");
}

#[test]
fn a_password_file_its_group_or_others_can_read_is_refused_naming_the_key_and_the_mode() {
    let dir = tempfile::tempdir().unwrap();
    for mode in [0o640, 0o644, 0o604] {
        let path = secret_file(dir.path(), "s3cret", mode);
        let p = problems(&redis_with(&format!("password_file: {}", path.display())));
        assert!(
            p.iter().any(|p| p.contains("data_node.password_file")
                && p.contains(&format!("{mode:04o}"))
                && !p.contains("s3cret")),
            "{p:?}"
        );
    }
}

#[test]
fn a_missing_password_file_is_refused_naming_the_key_and_the_path() {
    let p = problems(&redis_with("password_file: /nonexistent/redis.password"));
    assert!(
        p.iter()
            .any(|p| p.contains("data_node.password_file /nonexistent/redis.password")),
        "{p:?}"
    );
}

#[test]
fn password_and_password_file_together_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = secret_file(dir.path(), "s3cret", 0o600);
    let p = problems(&redis_with(&format!(
        "password: x, password_file: {}",
        path.display()
    )));
    assert!(p.iter().any(|p| p.contains("both set")), "{p:?}");
}

#[test]
fn an_inline_password_still_works_and_warns_that_it_is_for_labs() {
    let loaded = parse(&redis_with("password: 'p@ss'"), Path::new("t.yaml")).unwrap();
    assert!(
        loaded
            .warnings
            .iter()
            .any(|w| w.contains("data_node.password is inline") && w.contains("password_file")),
        "{:?}",
        loaded.warnings
    );
    let c = loaded.config.data_node.unwrap().credentials();
    assert_eq!(c.password.as_deref(), Some("p@ss"));
}

#[test]
fn a_kevy_password_file_is_refused_because_kevy_has_no_auth() {
    let yaml = GOOD.replace(
        "data_node: { kind: kevy, address: \"127.0.0.1:6001\" }",
        "data_node: { kind: kevy, address: \"127.0.0.1:6001\", password_file: /etc/x }",
    );
    assert!(
        problems(&yaml)
            .iter()
            .any(|p| p.contains("kevy 7.0.0 has no AUTH")),
        "{:?}",
        problems(&yaml)
    );
}

#[test]
fn an_auth_key_file_others_can_read_and_a_short_inline_key_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = secret_file(dir.path(), "a-long-enough-shared-key", 0o644);
    let open = format!(
        "{GOOD}auth: {{ mode: shared_key, key_file: {} }}\n",
        path.display()
    );
    assert!(
        problems(&open)
            .iter()
            .any(|p| p.contains("auth.key_file") && p.contains("0644")),
        "{:?}",
        problems(&open)
    );
    let short = format!("{GOOD}auth: {{ mode: shared_key, key: short }}\n");
    assert!(
        problems(&short)
            .iter()
            .any(|p| p.contains("auth key is 5 bytes: at least 16")),
        "{:?}",
        problems(&short)
    );
    let inline = format!("{GOOD}auth: {{ mode: shared_key, key: a-long-enough-shared-key }}\n");
    let loaded = parse(&inline, Path::new("t.yaml")).unwrap();
    assert!(
        loaded
            .warnings
            .iter()
            .any(|w| w.contains("auth.key is inline")),
        "{:?}",
        loaded.warnings
    );
}

#[test]
fn a_kevy_quiesce_fence_limit_defaults_to_a_minute_and_outside_one_to_120_seconds_is_refused() {
    let loaded = parse(GOOD, Path::new("t.yaml")).unwrap();
    let dn = loaded.config.data_node.unwrap();
    assert_eq!(dn.kevy_quiesce_fence_limit_ms, 60_000);
    let with = |ms: u64| {
        GOOD.replace(
            "data_node: { kind: kevy, address: \"127.0.0.1:6001\" }",
            &format!(
                "data_node: {{ kind: kevy, address: \"127.0.0.1:6001\", kevy_quiesce_fence_limit_ms: {ms} }}"
            ),
        )
    };
    assert!(problems(&with(2_000)).is_empty());
    for ms in [999, 120_001] {
        let p = problems(&with(ms));
        assert!(
            p.iter()
                .any(|m| m.contains("data_node.kevy_quiesce_fence_limit_ms")
                    && m.contains("1000..=120000")),
            "{ms}: {p:?}"
        );
    }
}
