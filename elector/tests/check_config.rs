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
fn check_config_creates_a_missing_data_dir_and_leaves_it_empty() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("new/state");
    let (ok, stderr) = check_with_data_dir(&dir, scratch.path());
    assert!(ok, "{stderr}");
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
}
