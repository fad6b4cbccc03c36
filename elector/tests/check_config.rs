//! `elector check-config` probes `data_dir` (docs/interfaces.md): the
//! binary itself, on the example config with `data_dir` replaced.

use std::path::Path;
use std::process::Command;

/// Runs `elector check-config` on examples/3-node/n1.yaml with `data_dir`
/// set to `dir`; returns (success, stderr).
fn check_with_data_dir(dir: &Path, scratch: &Path) -> (bool, String) {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/3-node/n1.yaml");
    let yaml: String = std::fs::read_to_string(example)
        .unwrap()
        .lines()
        .map(|l| match l.starts_with("data_dir:") {
            true => format!("data_dir: {}\n", dir.display()),
            false => format!("{l}\n"),
        })
        .collect();
    let file = scratch.join("n1.yaml");
    std::fs::write(&file, yaml).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_elector"))
        .arg("check-config")
        .arg(&file)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn check_config_fails_on_a_data_dir_that_cannot_be_created_naming_the_path_and_the_os_error() {
    let scratch = tempfile::tempdir().unwrap();
    let (ok, stderr) = check_with_data_dir(Path::new("/proc/nope"), scratch.path());
    assert!(!ok, "check-config accepted data_dir /proc/nope");
    assert!(
        stderr.contains("data_dir /proc/nope") && stderr.contains("os error"),
        "{stderr}"
    );
}

#[test]
fn check_config_does_not_create_a_missing_data_dir_and_says_run_will() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("new/state");
    let (ok, stderr) = check_with_data_dir(&dir, scratch.path());
    assert!(ok, "{stderr}");
    assert!(!dir.exists(), "check-config created {}", dir.display());
    assert!(
        !scratch.path().join("new").exists(),
        "check-config created a parent"
    );
    let left: Vec<_> = std::fs::read_dir(scratch.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        left,
        vec![std::ffi::OsString::from("n1.yaml")],
        "probe left behind"
    );
}

#[test]
fn check_config_probes_an_existing_data_dir_and_leaves_it_empty() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("state");
    std::fs::create_dir(&dir).unwrap();
    let (ok, stderr) = check_with_data_dir(&dir, scratch.path());
    assert!(ok, "{stderr}");
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
}

/// `elector check-config` on `yaml` (written to a scratch file); returns
/// (success, stdout + stderr).
fn check(yaml: &str) -> (bool, String) {
    let scratch = tempfile::tempdir().unwrap();
    let yaml = yaml.replace(
        "/tmp/elector-example/2w/",
        &format!("{}/", scratch.path().display()),
    );
    let file = scratch.path().join("node.yaml");
    std::fs::write(&file, yaml).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_elector"))
        .arg("check-config")
        .arg(&file)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

fn example(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples")
        .join(name);
    std::fs::read_to_string(path).unwrap()
}

#[test]
fn a_two_data_node_cluster_with_a_witness_is_accepted_and_says_what_wait_acknowledges() {
    // protocol §4.5: 2 + 1, quorum 2, the data promise WAIT 1.
    for node in ["2w/n1.yaml", "2w/n3.yaml"] {
        let (ok, out) = check(&example(node));
        assert!(ok, "{node}: {out}");
        assert!(
            out.contains("2 data nodes + 1 witness(es), quorum 2, acknowledge writes with WAIT 1"),
            "{node}: {out}"
        );
    }
}

#[test]
fn a_witness_cluster_with_one_data_node_is_refused() {
    // §4.5: nobody to fail over to.
    let yaml = example("2w/n1.yaml").replace(
        r#"  - { id: n2, election: "127.0.0.1:7402", data: "127.0.0.1:6020", api: "127.0.0.1:9302" }"#,
        r#"  - { id: n2, election: "127.0.0.1:7402", api: "127.0.0.1:9302", witness: true }"#,
    );
    let (ok, out) = check(&yaml);
    assert!(
        !ok && out.contains("needs at least two data nodes"),
        "{out}"
    );
}

#[test]
fn a_witness_with_a_data_node_or_a_data_member_without_one_is_refused() {
    let with_data = example("2w/n3.yaml").replace(
        "peers:",
        "data_node: { kind: kevy, address: \"127.0.0.1:6030\" }\npeers:",
    );
    let (ok, out) = check(&with_data);
    assert!(!ok && out.contains("this node is a witness"), "{out}");
    let missing = example("2w/n1.yaml").replace(r#", data: "127.0.0.1:6020""#, "");
    let (ok, out) = check(&missing);
    assert!(!ok && out.contains("peer n2: data is missing"), "{out}");
}

/// A 2w/n1 config on Redis whose password and shared key come from
/// `password_line` and `auth_lines` (YAML, two-space indented).
fn redis_secrets(password_line: &str, auth_lines: &str) -> String {
    example("2w/n1.yaml")
        .replace(
            "  kind: kevy                  # kevy | redis\n",
            &format!("  kind: redis\n  username: elector\n  {password_line}\n"),
        )
        .replace(
            "  mode: none                  # shared_key + key/key_file authenticates every message\n",
            auth_lines,
        )
}

fn secret(dir: &Path, name: &str, text: &str, mode: u32) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt as _;
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    path
}

#[test]
fn check_config_accepts_secrets_in_files_only_the_elector_reads_without_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let pw = secret(dir.path(), "redis.password", "p@ss:w/rd#1\n", 0o600);
    let key = secret(dir.path(), "auth.key", "0123456789abcdef0123\n", 0o400);
    let (ok, out) = check(&redis_secrets(
        &format!("password_file: {}", pw.display()),
        &format!("  mode: shared_key\n  key_file: {}\n", key.display()),
    ));
    assert!(ok, "{out}");
    assert!(!out.contains("inline"), "{out}");
    assert!(
        !out.contains("p@ss") && !out.contains("0123456789abcdef"),
        "{out}"
    );
}

#[test]
fn check_config_refuses_a_password_file_or_key_file_its_group_or_others_can_read() {
    let dir = tempfile::tempdir().unwrap();
    let good_pw = secret(dir.path(), "good.password", "pw\n", 0o600);
    let good_key = secret(dir.path(), "good.key", "0123456789abcdef0123\n", 0o600);
    let open_pw = secret(dir.path(), "open.password", "pw\n", 0o644);
    let open_key = secret(dir.path(), "open.key", "0123456789abcdef0123\n", 0o640);
    let (ok, out) = check(&redis_secrets(
        &format!("password_file: {}", open_pw.display()),
        &format!("  mode: shared_key\n  key_file: {}\n", good_key.display()),
    ));
    assert!(!ok, "{out}");
    assert!(
        out.contains(&format!(
            "data_node.password_file {} has mode 0644",
            open_pw.display()
        )),
        "{out}"
    );
    let (ok, out) = check(&redis_secrets(
        &format!("password_file: {}", good_pw.display()),
        &format!("  mode: shared_key\n  key_file: {}\n", open_key.display()),
    ));
    assert!(!ok, "{out}");
    assert!(
        out.contains(&format!(
            "auth.key_file {} has mode 0640",
            open_key.display()
        )),
        "{out}"
    );
    let (ok, out) = check(&redis_secrets(
        &format!("password_file: {}", dir.path().join("missing").display()),
        "  mode: none\n",
    ));
    assert!(
        !ok && out.contains("data_node.password_file") && out.contains("cannot read it"),
        "{out}"
    );
}

#[test]
fn check_config_warns_on_inline_secrets_and_refuses_a_short_key() {
    let (ok, out) = check(&redis_secrets(
        "password: 'p@ss'",
        "  mode: shared_key\n  key: 0123456789abcdef0123\n",
    ));
    assert!(ok, "{out}");
    assert!(
        out.contains("warning: data_node.password is inline")
            && out.contains("warning: auth.key is inline"),
        "{out}"
    );
    let (ok, out) = check(&redis_secrets(
        "password: 'p@ss'",
        "  mode: shared_key\n  key: too-short\n",
    ));
    assert!(
        !ok && out.contains("auth key is 9 bytes: at least 16"),
        "{out}"
    );
}
