//! `data_node.tls` files: what loads, what is refused and why, and the
//! expiry warning. The dial itself is tested against a real TLS-only
//! redis-server in tests/data_node_tls.rs.

use super::*;
use crate::config::expiry_warnings;
use std::os::unix::fs::PermissionsExt as _;
use std::path::PathBuf;

/// A CA, and a client certificate + key it signed, written to `dir`.
struct Files {
    dir: tempfile::TempDir,
}

impl Files {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn write(&self, name: &str, text: &str, mode: u32) -> PathBuf {
        let p = self.path(name);
        std::fs::write(&p, text).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        p
    }
}

fn ca() -> (rcgen::Certificate, rcgen::KeyPair) {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "unit test CA");
    let key = rcgen::KeyPair::generate().unwrap();
    (params.self_signed(&key).unwrap(), key)
}

/// `ca.crt`, `client.crt` and `client.key` (0600), and a second key
/// `other.key` (0600) that belongs to no certificate.
fn files() -> Files {
    let f = Files {
        dir: tempfile::tempdir().unwrap(),
    };
    let (ca, ca_key) = ca();
    let leaf_key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec!["elector".to_string()])
        .unwrap()
        .signed_by(&leaf_key, &ca, &ca_key)
        .unwrap();
    f.write("ca.crt", &ca.pem(), 0o644);
    f.write("client.crt", &leaf.pem(), 0o644);
    f.write("client.key", &leaf_key.serialize_pem(), 0o600);
    let other = rcgen::KeyPair::generate().unwrap();
    f.write("other.key", &other.serialize_pem(), 0o600);
    f
}

fn cfg(f: &Files, cert: Option<&str>, key: Option<&str>) -> DataNodeTlsConfig {
    DataNodeTlsConfig {
        ca_file: f.path("ca.crt"),
        cert_file: cert.map(|c| f.path(c)),
        key_file: key.map(|k| f.path(k)),
        server_name: None,
    }
}

#[test]
fn a_ca_alone_and_a_ca_with_its_client_certificate_both_load() {
    let f = files();
    load(&cfg(&f, None, None)).expect("CA only");
    load(&cfg(&f, Some("client.crt"), Some("client.key"))).expect("mutual TLS");
}

#[test]
fn a_key_that_is_not_the_certificates_is_refused_naming_both_files() {
    let f = files();
    let err = load(&cfg(&f, Some("client.crt"), Some("other.key"))).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, TlsFileError::KeyMismatch { .. }), "{text}");
    assert!(
        text.contains("other.key") && text.contains("client.crt"),
        "{text}"
    );
}

#[test]
fn a_key_file_others_may_read_is_refused_like_any_secret() {
    let f = files();
    std::fs::set_permissions(f.path("client.key"), std::fs::Permissions::from_mode(0o644)).unwrap();
    let err = load(&cfg(&f, Some("client.crt"), Some("client.key"))).unwrap_err();
    assert!(err.to_string().contains("chmod 600"), "{err}");
}

#[test]
fn a_ca_file_without_a_certificate_is_refused() {
    let f = files();
    f.write("ca.crt", "not a certificate\n", 0o644);
    let err = load(&cfg(&f, None, None)).unwrap_err();
    assert!(matches!(err, TlsFileError::NoCertificate { .. }), "{err}");
    assert!(err.to_string().contains("data_node.tls.ca_file"), "{err}");
}

#[test]
fn a_missing_ca_file_is_refused_with_its_path() {
    let f = files();
    std::fs::remove_file(f.path("ca.crt")).unwrap();
    let err = load(&cfg(&f, None, None)).unwrap_err();
    assert!(matches!(err, TlsFileError::Read { .. }), "{err}");
    assert!(err.to_string().contains("ca.crt"), "{err}");
}

#[test]
fn a_server_name_that_is_no_name_is_refused() {
    let f = files();
    let mut c = cfg(&f, None, None);
    c.server_name = Some("not a name".into());
    assert!(matches!(load(&c), Err(TlsFileError::ServerName(_))));
}

/// Unix seconds of 2030-01-01T00:00:00Z, the certificate's `notAfter` below.
const NOT_AFTER_2030: i64 = 1_893_456_000;

fn expiring_2030(f: &Files) -> PathBuf {
    let mut params = rcgen::CertificateParams::new(vec!["redis".to_string()]).unwrap();
    params.not_after = rcgen::date_time_ymd(2030, 1, 1);
    let key = rcgen::KeyPair::generate().unwrap();
    f.write("soon.crt", &params.self_signed(&key).unwrap().pem(), 0o644)
}

#[test]
fn a_certificate_expiring_within_thirty_days_is_warned_about_and_one_further_off_is_not() {
    let f = files();
    let path = expiring_2030(&f);
    let day = 86_400;
    let soon = expiry_warnings("data_node.tls.cert_file", &path, NOT_AFTER_2030 - 10 * day);
    assert_eq!(soon.len(), 1, "{soon:?}");
    assert!(soon[0].contains("in 10 day(s)"), "{soon:?}");
    let later = expiry_warnings("data_node.tls.cert_file", &path, NOT_AFTER_2030 - 31 * day);
    assert!(later.is_empty(), "{later:?}");
    let past = expiry_warnings("data_node.tls.cert_file", &path, NOT_AFTER_2030 + day);
    assert!(past[0].contains("expired"), "{past:?}");
}

#[test]
fn a_handshake_refused_for_an_unknown_issuer_names_the_ca_file() {
    let text = explain("127.0.0.1:6379", &"invalid peer certificate: UnknownIssuer");
    assert!(text.contains("data_node.tls.ca_file"), "{text}");
    let text = explain(
        "127.0.0.1:6379",
        &"received fatal alert: CertificateRequired",
    );
    assert!(text.contains("cert_file"), "{text}");
}

/// Kills the redis-server when dropped, also when the test panics.
struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A free loopback port (the test is `#[ignore]`d and runs alone).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The data-node poll (`INFO server` + `INFO replication`, what the
/// adapter sends every `data_poll_ms`) on loopback, plain and over TLS to
/// the same redis-server; medians of `RUNS` runs of `POLLS` polls each.
/// A figure, not a check: `cargo test -p elector --lib -- --ignored
/// poll_round_trip --nocapture` (docs/security.md "TLS to the data node").
#[tokio::test(flavor = "current_thread")]
#[ignore = "a measurement; needs redis-server"]
async fn poll_round_trip_cost_with_and_without_tls() {
    const RUNS: usize = 7;
    const POLLS: usize = 500;
    let f = files();
    let (ca, ca_key) = ca();
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()])
        .unwrap()
        .signed_by(&key, &ca, &ca_key)
        .unwrap();
    f.write("ca.crt", &ca.pem(), 0o644);
    let crt = f.write("server.crt", &cert.pem(), 0o644);
    let k = f.write("server.key", &key.serialize_pem(), 0o600);
    let (plain, tls) = (free_port(), free_port());
    let _server = Server(
        std::process::Command::new("redis-server")
            .args(["--port", &plain.to_string(), "--tls-port", &tls.to_string()])
            .args([
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--tls-auth-clients",
                "no",
            ])
            .arg("--tls-cert-file")
            .arg(&crt)
            .arg("--tls-key-file")
            .arg(&k)
            .arg("--tls-ca-cert-file")
            .arg(f.path("ca.crt"))
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("redis-server"),
    );
    let with_tls = super::super::Credentials {
        tls: Some(load(&cfg(&f, None, None)).unwrap()),
        ..Default::default()
    };
    let mut clients = [
        (
            "plain",
            super::super::client::RespClient::new(
                &format!("127.0.0.1:{plain}"),
                &Default::default(),
            ),
        ),
        (
            "tls",
            super::super::client::RespClient::new(&format!("127.0.0.1:{tls}"), &with_tls),
        ),
    ];
    for (_, c) in clients.iter_mut() {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while c.replication_info().await.is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "redis-server did not answer"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
    let mut medians: Vec<(&str, Vec<f64>)> =
        clients.iter().map(|(n, _)| (*n, Vec::new())).collect();
    for _ in 0..RUNS {
        // Interleaved, so both see the same machine load.
        for (i, (_, c)) in clients.iter_mut().enumerate() {
            let mut us = Vec::with_capacity(POLLS);
            for _ in 0..POLLS {
                let t = std::time::Instant::now();
                let info = c.replication_info().await.expect("poll");
                assert!(info.is_master(), "a fresh redis-server is a master");
                us.push(t.elapsed().as_secs_f64() * 1e6);
            }
            us.sort_by(f64::total_cmp);
            medians[i].1.push(us[POLLS / 2]);
        }
    }
    for (name, mut m) in medians {
        m.sort_by(f64::total_cmp);
        println!(
            "poll round trip {name}: median of {RUNS} run medians {:.1} us (runs {:.1}..{:.1} us, {POLLS} polls each)",
            m[RUNS / 2],
            m[0],
            m[RUNS - 1]
        );
    }
}
