//! `elector --version` names the version and the commit it was built from
//! (docs/interfaces.md, "Binary and CLI"; elector/build.rs).

use std::process::Command;

#[test]
fn version_names_the_crate_version_and_the_git_commit() {
    let out = Command::new(env!("CARGO_BIN_EXE_elector"))
        .arg("--version")
        .output()
        .expect("run elector --version");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let expected_start = format!("elector {} (commit ", env!("CARGO_PKG_VERSION"));
    assert!(text.starts_with(&expected_start), "{text}");
    let commit = text
        .trim()
        .strip_prefix(&expected_start)
        .and_then(|rest| rest.strip_suffix(')'))
        .expect("a commit in parentheses");
    // Built from this checkout: git knows the commit. Outside git (or with
    // SOURCE_GIT_COMMIT unset and no git) it says `unknown`, never nothing.
    let head = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    match (std::env::var("SOURCE_GIT_COMMIT").ok(), head) {
        (Some(forced), _) if !forced.trim().is_empty() => assert_eq!(commit, forced.trim()),
        (_, Some(head)) => assert_eq!(commit, head, "the binary is stale or git moved"),
        _ => assert_eq!(commit, "unknown"),
    }
}
