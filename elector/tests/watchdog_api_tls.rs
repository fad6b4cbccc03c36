//! The watchdog reaches its elector's API served over TLS (`tls.api`,
//! docs/security.md "The watchdog over TLS"): real electors, real watchdogs
//! and real redis-server data nodes on loopback, certificates generated
//! here (rcgen).
//!
//! The API certificate names `localhost` only, not the loopback address
//! the watchdog dials: the watchdog trusts exactly the certificate in
//! `tls.api.cert_file`, whatever its names. Before, it asked over plain
//! HTTP, got no answer, took the elector for silent and fenced the data
//! node every lease; `/status` then shows the watchdog not live and its
//! clamps counting.

mod support;

use std::time::Duration;
use support::pki::Pki;
use support::{Backend, Cluster, SHORT_TIMINGS};

/// Node `i`'s `/status` over TLS, as `elector status` fetches it with
/// `flags` (the test's own client checks the name: the certificate names
/// `localhost`).
fn status(cluster: &Cluster, i: usize, flags: &[String]) -> Option<serde_json::Value> {
    let out = std::process::Command::new(support::elector_bin())
        .args(["status", "--json"])
        .args(flags)
        .arg("--node")
        .arg(format!("https://localhost:{}", cluster.nodes[i].api_port))
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).ok())
        .flatten()
}

fn watchdogs_stay_live_and_never_clamp(client_certificates: bool) {
    support::require("redis-server");
    let pki_dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(pki_dir.path());
    pki.issue("server", &["localhost"], "api");
    let client_ca = if client_certificates {
        format!(", client_ca_file: {}", pki.file("ca.crt"))
    } else {
        String::new()
    };
    let mut cluster = Cluster::start_with_node_extra(Backend::Redis, 2, SHORT_TIMINGS, &|_| {
        format!(
            "tls:\n  api: {{ cert_file: {}, key_file: {}{client_ca} }}\n",
            pki.file("server.crt"),
            pki.file("server.key"),
        )
    });
    for i in 0..2 {
        cluster.start_watchdog(i);
    }
    let mut flags = vec!["--ca-file".to_string(), pki.file("ca.crt")];
    if client_certificates {
        flags.extend([
            "--cert-file".to_string(),
            pki.file("server.crt"),
            "--key-file".into(),
            pki.file("server.key"),
        ]);
    }
    let status_of = |i: usize| status(&cluster, i, &flags);
    support::wait_until(
        Duration::from_secs(20),
        || (0..2).all(|i| status_of(i).is_some_and(|s| s["watchdog"]["live"] == true)),
        "both watchdogs polling their elector over TLS",
    );
    // Several leases of steady state: a watchdog that could not reach its
    // elector would have fenced by now.
    std::thread::sleep(Duration::from_secs(3));
    for i in 0..2 {
        let s = status_of(i).expect("status over TLS");
        assert_eq!(s["watchdog"]["live"], true, "n{}: {s}", i + 1);
        assert_eq!(s["watchdog"]["clamps"], 0, "n{}: {s}", i + 1);
        let ago = s["watchdog"]["last_probe_ms_ago"]
            .as_u64()
            .unwrap_or(u64::MAX);
        assert!(ago < 1_000, "n{}: last probe {ago} ms ago: {s}", i + 1);
    }
}

#[test]
fn a_watchdog_polls_its_elector_over_tls_whatever_names_the_api_certificate_carries() {
    watchdogs_stay_live_and_never_clamp(false);
}

#[test]
fn a_watchdog_shows_the_api_its_own_certificate_when_the_api_requires_client_certificates() {
    watchdogs_stay_live_and_never_clamp(true);
}
