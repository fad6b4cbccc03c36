//! TLS on the elector's own ports (issue 38 item 2, docs/security.md "TLS
//! on our ports"): real electors and real redis-server data nodes on
//! loopback, certificates generated here (rcgen), real clients (`curl`,
//! `redis-cli --tls`, `openssl s_client`) where one exists.
//!
//! - the election transport with mutual TLS elects and fails over;
//! - the HTTP API over TLS with client certificates: `curl` with one gets
//!   `/status`, without one it is refused;
//! - the Sentinel-compatible listener over TLS answers
//!   `SENTINEL get-master-addr-by-name`;
//! - a renewed certificate is served after `SIGHUP`, the primary staying;
//! - a member presenting a certificate for another id is refused, counted
//!   and in `/status`; a plain-text member cannot join a TLS cluster.

mod support;

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;
use support::pki::{election_tls, Pki};
use support::{Backend, Cluster, SHORT_TIMINGS};

/// `curl` over TLS to node `port`'s API: the body, or `None` when refused.
fn curl_status(pki: &Pki, port: u16, client_cert: bool) -> Option<String> {
    let mut cmd = Command::new("curl");
    cmd.args([
        "-sS",
        "--fail",
        "--max-time",
        "5",
        "--cacert",
        &pki.file("ca.crt"),
    ]);
    if client_cert {
        cmd.args([
            "--cert",
            &pki.file("client.crt"),
            "--key",
            &pki.file("client.key"),
        ]);
    }
    let out = cmd
        .arg(format!("https://localhost:{port}/status"))
        .stdin(Stdio::null())
        .output()
        .expect("run curl");
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `redis-cli --tls` to a Sentinel-compatible listener.
fn sentinel_tls(pki: &Pki, port: u16, args: &[&str]) -> Option<String> {
    let out = Command::new("redis-cli")
        .args(["--tls", "--cacert", &pki.file("ca.crt"), "-h", "localhost"])
        .args(["-p", &port.to_string()])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run redis-cli");
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The subject of the certificate `port` serves (`openssl s_client`).
fn served_subject(port: u16) -> String {
    let out = Command::new("openssl")
        .args(["s_client", "-connect", &format!("127.0.0.1:{port}")])
        .args(["-servername", "localhost"])
        .stdin(Stdio::null())
        .output()
        .expect("run openssl");
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find(|l| l.starts_with("subject="))
        .unwrap_or("")
        .to_string()
}

/// A 3-node Redis cluster with mutual TLS on the election transport and TLS
/// on every Sentinel listener; n3 also serves its API over TLS with client
/// certificates, and has priority 0 (its `/status` is not plain HTTP, so the
/// harness does not look for a primary there).
#[test]
fn a_tls_cluster_elects_fails_over_serves_tls_clients_and_takes_renewed_certificates() {
    support::require("redis-cli");
    let pki_dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(pki_dir.path());
    for id in ["n1", "n2", "n3"] {
        pki.issue(id, &[id], id);
    }
    pki.issue("server", &["localhost", "127.0.0.1"], "first");
    pki.issue("client", &["operator"], "operator");
    let mut cluster = Cluster::start_with_node_extra(Backend::Redis, 3, SHORT_TIMINGS, &|id| {
        let api = if id == "n3" {
            format!(
                "  api: {{ cert_file: {}, key_file: {}, client_ca_file: {} }}\n",
                pki.file("server.crt"),
                pki.file("server.key"),
                pki.file("ca.crt")
            )
        } else {
            String::new()
        };
        format!(
            "tls:\n{}  sentinel: {{ cert_file: {}, key_file: {} }}\n{api}{}",
            election_tls(&pki, id),
            pki.file("server.crt"),
            pki.file("server.key"),
            if id == "n3" { "priority: 0\n" } else { "" }
        )
    });
    let old = cluster.wait_primary(Duration::from_secs(20));
    let old_port = cluster.nodes[old].data_port;

    // The API over TLS: with a client certificate, /status; without, refused.
    let n3_api = cluster.nodes[2].api_port;
    let status = curl_status(&pki, n3_api, true).expect("curl with a client certificate");
    let parsed: serde_json::Value = serde_json::from_str(&status).expect("JSON");
    assert_eq!(parsed["node_id"], "n3", "{status}");
    assert!(
        curl_status(&pki, n3_api, false).is_none(),
        "a client without a certificate must be refused"
    );

    // The Sentinel listener over TLS names the primary.
    let sentinel = cluster.nodes[2].sentinel_port;
    let addr = sentinel_tls(
        &pki,
        sentinel,
        &["SENTINEL", "get-master-addr-by-name", "mymaster"],
    )
    .expect("redis-cli --tls to the Sentinel listener");
    assert!(addr.contains(&old_port.to_string()), "{addr}");

    // A renewed certificate is served after SIGHUP; the primary stays.
    let epoch = cluster.status(old).unwrap()["epoch"].clone();
    assert!(served_subject(sentinel).contains("first"));
    pki.issue("server", &["localhost", "127.0.0.1"], "renewed");
    for id in ["n1", "n2", "n3"] {
        pki.issue(id, &[id], id);
    }
    for i in 0..3 {
        cluster.signal_elector(i, "HUP");
    }
    support::wait_until(
        Duration::from_secs(10),
        || served_subject(sentinel).contains("renewed"),
        "the renewed certificate to be served",
    );
    assert!(curl_status(&pki, n3_api, true).is_some());
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(cluster.writable_primary(), Some(old), "the primary stays");
    assert_eq!(cluster.status(old).unwrap()["epoch"], epoch);

    // The transport still works after the reload: a failover.
    cluster.kill_node(old);
    let new = cluster.wait_primary(Duration::from_secs(20));
    assert_ne!(new, old);
    let addr = sentinel_tls(
        &pki,
        sentinel,
        &["SENTINEL", "get-master-addr-by-name", "mymaster"],
    );
    support::wait_until(
        Duration::from_secs(10),
        || {
            sentinel_tls(
                &pki,
                sentinel,
                &["SENTINEL", "get-master-addr-by-name", "mymaster"],
            )
            .is_some_and(|a| a.contains(&cluster.nodes[new].data_port.to_string()))
        },
        &format!("the Sentinel listener to name the new primary (was {addr:?})"),
    );
}

/// Sends a `HELLO` claiming `claimed` to `port` over TLS, presenting
/// `cert`/`key`; true when the elector closed the connection.
fn impostor_hello(pki: &Pki, port: u16, cert: &str, claimed: &str) -> bool {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_file(pki.file("ca.crt")).unwrap())
        .unwrap();
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_client_auth_cert(
            vec![CertificateDer::from_pem_file(pki.file(&format!("{cert}.crt"))).unwrap()],
            PrivateKeyDer::from_pem_file(pki.file(&format!("{cert}.key"))).unwrap(),
        )
        .unwrap();
    let name = ServerName::try_from("n1").unwrap();
    let conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let tcp = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    let hello = format!("*2\r\n$5\r\nHELLO\r\n${}\r\n{claimed}\r\n", claimed.len());
    tls.write_all(hello.as_bytes()).unwrap();
    let mut buf = [0u8; 16];
    matches!(tls.read(&mut buf), Ok(0) | Err(_))
}

/// n1 and n2 with mutual TLS, n3 without: n3 cannot join (n1 and n2 still
/// elect, a majority of 3), and a client presenting n2's certificate while
/// claiming to be n3 is refused, counted and shown in `/status`.
#[test]
fn a_member_with_another_ids_certificate_or_without_tls_is_refused() {
    let pki_dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(pki_dir.path());
    for id in ["n1", "n2", "n3"] {
        pki.issue(id, &[id], id);
    }
    let cluster =
        Cluster::start_with_node_extra(Backend::Redis, 3, SHORT_TIMINGS, &|id| match id {
            "n3" => "priority: 0\n".to_string(),
            _ => format!("tls:\n{}", election_tls(&pki, id)),
        });
    let primary = cluster.wait_primary(Duration::from_secs(20));
    assert!(primary < 2, "n3 has priority 0");

    // n3 speaks plain text: refused by both TLS members, never joins.
    support::wait_until(
        Duration::from_secs(10),
        || {
            cluster
                .status(0)
                .is_some_and(|s| s["rejected"]["tls_handshake"].as_u64() > Some(0))
        },
        "n1 to count n3's plain-text connections",
    );
    for (i, other) in [(0, "n3"), (2, "n1")] {
        let peer = cluster.peer_in(i, other).expect("listed");
        assert_eq!(peer["alive"], false, "{peer}");
    }
    // Both sides say why: n1 its failed handshake, n3 (plain) that its
    // peer speaks TLS.
    let log = |dir: &std::path::Path, id: &str| {
        std::fs::read_to_string(dir.join(format!("elector-{id}.log"))).unwrap()
    };
    let n1 = log(&cluster.nodes[0].dir, "n1");
    assert!(n1.contains("failed (tls.election)"), "n1's log names TLS");
    support::wait_until(
        Duration::from_secs(10),
        || {
            log(&cluster.nodes[2].dir, "n3")
                .contains("the peer speaks TLS (tls.election is set there and not here)")
        },
        "n3 to name its TLS peers' ClientHello",
    );

    // A certificate for n2 with a HELLO that claims n3.
    let port = cluster.nodes[0].election_port;
    assert!(
        impostor_hello(&pki, port, "n2", "n3"),
        "the impostor is dropped"
    );
    let status = cluster.status(0).unwrap();
    assert!(
        status["rejected"]["tls_identity"].as_u64() >= Some(1),
        "{status}"
    );
    let log = std::fs::read_to_string(cluster.nodes[0].dir.join("elector-n1.log")).unwrap();
    assert!(
        log.contains(
            "HELLO claims n3: the peer is member n3 but its certificate names [\\\"n2\\\"]"
        ) || log
            .contains("HELLO claims n3: the peer is member n3 but its certificate names [\"n2\"]"),
        "the log names both ids"
    );
    // The real n2, with its own certificate, is still a member.
    assert!(cluster.peer_in(0, "n2").is_some());
}
