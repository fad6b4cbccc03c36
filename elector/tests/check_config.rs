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
