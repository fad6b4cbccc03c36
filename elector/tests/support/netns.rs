//! Tests that drop packets with iptables run in a private network namespace
//! (`unshare -n`, which needs root), so they never touch the host's own
//! rules; and in a private mount namespace (`-m`), so a test may bind its own
//! file over `/etc/hosts`. Where that is not allowed they say so and pass.

/// Set in the re-run child: the test is inside its namespace.
const INSIDE: &str = "ELECTOR_TEST_IN_NETNS";

/// Whether the calling test `name` should go on here: `true` inside its
/// private namespace; `false` after it ran there (asserting that it passed)
/// or when no namespace with iptables is available (printed as skipped).
pub fn inside_private_netns(name: &str) -> bool {
    if std::env::var_os(INSIDE).is_some() {
        return true;
    }
    let allowed = std::process::Command::new("unshare")
        .args([
            "-n",
            "-m",
            "sh",
            "-c",
            "ip link set lo up && iptables -L INPUT -n",
        ])
        .output()
        .is_ok_and(|o| o.status.success());
    if !allowed {
        eprintln!("skipped: no private network namespace with iptables (needs root)");
        return false;
    }
    let exe = std::env::current_exe().unwrap();
    let status = std::process::Command::new("unshare")
        .args([
            "-n",
            "-m",
            "sh",
            "-c",
            "ip link set lo up && exec \"$0\" \"$@\"",
        ])
        .arg(exe)
        .args(["--exact", name, "--nocapture"])
        .env(INSIDE, "1")
        .status()
        .expect("unshare");
    assert!(status.success(), "the test failed in its network namespace");
    false
}

/// Runs a shell command that must succeed.
pub fn sh(script: &str) {
    let out = std::process::Command::new("sh")
        .args(["-c", script])
        .output()
        .expect("sh");
    assert!(
        out.status.success(),
        "{script}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
