//! The CLI against APIs served over TLS (`tls.api`, docs/security.md "The
//! CLI over TLS"): the real `elector` binary as the operator runs it,
//! against real electors and real redis-server data nodes on loopback,
//! with certificates generated here (rcgen).
//!
//! n1 and n2 serve their API over TLS; n3 (priority 0) over TLS with client
//! certificates required. The CLI must
//! - print the status of an https:// API given the CA, and refuse clearly
//!   without the CA, with a CA that did not sign the server's certificate,
//!   and without a client certificate (or with a stranger's) where one is
//!   required;
//! - derive https and the CA from a node's config (`status --config`);
//! - carry a switchover asked of a replica over TLS to the primary it names.

mod support;

use std::process::{Command, Output, Stdio};
use std::time::Duration;
use support::pki::Pki;
use support::{Backend, Cluster, SHORT_TIMINGS};

/// `elector ARGS`: its output, with stdin closed.
fn elector(args: &[&str]) -> Output {
    Command::new(support::elector_bin())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run elector")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Asserts that `elector status --node URL ARGS` fails saying `says`.
fn status_refused(url: &str, args: &[&str], says: &str) {
    let out = elector(&[&["status", "--json", "--node", url][..], args].concat());
    let err = stderr(&out);
    assert!(!out.status.success(), "{}", stdout(&out));
    assert!(err.contains(says), "expected {says:?} in: {err}");
}

/// Node `url`'s `/status` as the CLI prints it with `--json`.
fn status_json(url: &str, extra: &[&str]) -> Option<serde_json::Value> {
    let out = elector(&[&["status", "--json", "--node", url], extra].concat());
    out.status
        .success()
        .then(|| serde_json::from_str(&stdout(&out)).expect("JSON"))
}

/// The index among n1 and n2 that the CLI sees as the unfenced primary.
fn tls_primary(cluster: &Cluster, ca: &str) -> Option<usize> {
    let found: Vec<usize> = (0..2)
        .filter(|&i| {
            let url = format!("https://127.0.0.1:{}", cluster.nodes[i].api_port);
            status_json(&url, &["--ca-file", ca])
                .is_some_and(|s| s["role"] == "primary" && s["fenced"] == false)
        })
        .collect();
    (found.len() == 1).then(|| found[0])
}

#[test]
fn the_cli_reads_status_and_switches_over_through_apis_served_over_tls() {
    support::require("redis-server");
    let pki_dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(pki_dir.path());
    pki.issue("server", &["localhost", "127.0.0.1"], "api");
    pki.issue("client", &["operator"], "operator");
    let other_dir = tempfile::tempdir().unwrap();
    let other = Pki::new(other_dir.path());
    other.issue("client", &["stranger"], "stranger");
    let cluster = Cluster::start_with_node_extra(Backend::Redis, 3, SHORT_TIMINGS, &|id| {
        let client_ca = match id {
            "n3" => format!(
                ", client_ca_file: {ca}, ca_file: {ca}",
                ca = pki.file("ca.crt")
            ),
            _ => String::new(),
        };
        format!(
            "tls:\n  api: {{ cert_file: {}, key_file: {}{client_ca} }}\n{}",
            pki.file("server.crt"),
            pki.file("server.key"),
            if id == "n3" { "priority: 0\n" } else { "" }
        )
    });
    let ca = pki.file("ca.crt");
    let api = |i: usize| format!("https://127.0.0.1:{}", cluster.nodes[i].api_port);

    let mut primary = None;
    support::wait_until(
        Duration::from_secs(20),
        || {
            primary = tls_primary(&cluster, &ca);
            primary.is_some()
        },
        "a primary, as the CLI sees it over TLS",
    );
    let primary = primary.unwrap();

    // With the CA: the table, every node's own view fetched over TLS.
    let out = elector(&["status", "--node", &api(0), "--ca-file", &ca]);
    assert!(out.status.success(), "{}", stderr(&out));
    let table = stdout(&out);
    for id in ["n1", "n2"] {
        assert!(table.contains(id), "{table}");
    }
    assert!(table.contains("primary"), "{table}");

    // Without a CA: refused before anything is sent, naming the flag.
    status_refused(&api(0), &[], "an https:// address needs --ca-file");

    // A CA that did not sign the server's certificate: not trusted.
    status_refused(
        &api(0),
        &["--ca-file", &other.file("ca.crt")],
        "the API's certificate is not trusted by --ca-file",
    );

    // A bare HOST:PORT still means plain HTTP: a TLS API does not answer it.
    let bare = format!("127.0.0.1:{}", cluster.nodes[0].api_port);
    assert!(!elector(&["status", "--json", "--node", &bare])
        .status
        .success());

    // n3 requires a client certificate: without one, said so; with one, served.
    status_refused(
        &api(2),
        &["--ca-file", &ca],
        "the API requires a client certificate",
    );
    let client = [
        "--cert-file",
        &pki.file("client.crt"),
        "--key-file",
        &pki.file("client.key"),
    ];
    let n3 = status_json(
        &api(2),
        &[&["--ca-file", ca.as_str()][..], &client[..]].concat(),
    )
    .expect("n3 with a client certificate");
    assert_eq!(n3["node_id"], "n3");
    // A client certificate from another CA: refused, and said so.
    status_refused(
        &api(2),
        &[
            "--ca-file",
            &ca,
            "--cert-file",
            &other.file("client.crt"),
            "--key-file",
            &other.file("client.key"),
        ],
        "the API refused the certificate of --cert-file",
    );

    // From n3's config alone: https and its tls.api.ca_file as the CA.
    let config = cluster.nodes[2].dir.join("elector.yaml");
    let config = config.display().to_string();
    let out = elector(&[&["status", "--json", "--config", &config][..], &client[..]].concat());
    assert!(out.status.success(), "{}", stderr(&out));
    let derived: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    assert_eq!(derived["node_id"], "n3");
    // n1's config names no tls.api.ca_file: no CA is guessed for it.
    let n1_config = cluster.nodes[0].dir.join("elector.yaml");
    let out = elector(&[
        "status",
        "--json",
        "--config",
        &n1_config.display().to_string(),
    ]);
    assert!(!out.status.success(), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("that config's tls.api.ca_file"),
        "{}",
        stderr(&out)
    );

    // A switchover asked of the replica, to itself: it names the primary,
    // which the CLI asks next, over TLS as well.
    let replica = 1 - primary;
    let to = cluster.nodes[replica].id.clone();
    let out = elector(&[
        "switchover",
        "--node",
        &api(replica),
        "--to",
        &to,
        "--ca-file",
        &ca,
    ]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    assert!(
        stdout(&out).contains(&format!("switchover to {to} completed")),
        "{}",
        stdout(&out)
    );
    support::wait_until(
        Duration::from_secs(10),
        || tls_primary(&cluster, &ca) == Some(replica),
        "the switchover's target to be the primary",
    );
}
