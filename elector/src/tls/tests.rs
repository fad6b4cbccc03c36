//! TLS on our ports: what `tls.api`/`tls.sentinel`/`tls.election` load and
//! refuse, the identity rule, and a reload. Handshakes between real
//! electors are tested in tests/ports_tls.rs.

use super::peer::{identity_mismatch, valid_id, PeerTls};
use super::server::{ServerTls, API_KEYS};
use super::Reloadable;
use crate::config::{parse, ConfigError, PeerTlsConfig, ServerTlsConfig};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

struct Pki {
    dir: tempfile::TempDir,
    ca: rcgen::Certificate,
    ca_key: rcgen::KeyPair,
}

impl Pki {
    fn new() -> Pki {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let ca = params.self_signed(&ca_key).unwrap();
        let pki = Pki {
            dir: tempfile::tempdir().unwrap(),
            ca,
            ca_key,
        };
        std::fs::write(pki.path("ca.crt"), pki.ca.pem()).unwrap();
        pki
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `name.crt` and `name.key` (mode `key_mode`) for DNS names `sans`.
    fn issue(&self, name: &str, sans: &[&str], key_mode: u32) {
        let key = rcgen::KeyPair::generate().unwrap();
        let sans: Vec<String> = sans.iter().map(|s| s.to_string()).collect();
        let cert = rcgen::CertificateParams::new(sans)
            .unwrap()
            .signed_by(&key, &self.ca, &self.ca_key)
            .unwrap();
        std::fs::write(self.path(&format!("{name}.crt")), cert.pem()).unwrap();
        let k = self.path(&format!("{name}.key"));
        std::fs::write(&k, key.serialize_pem()).unwrap();
        std::fs::set_permissions(&k, std::fs::Permissions::from_mode(key_mode)).unwrap();
    }

    fn server(&self, cert: &str, key: &str) -> ServerTlsConfig {
        ServerTlsConfig {
            cert_file: self.path(cert),
            key_file: self.path(key),
            client_ca_file: Some(self.path("ca.crt")),
        }
    }

    fn peer(&self, name: &str) -> PeerTlsConfig {
        PeerTlsConfig {
            ca_file: self.path("ca.crt"),
            cert_file: self.path(&format!("{name}.crt")),
            key_file: self.path(&format!("{name}.key")),
        }
    }
}

#[test]
fn a_certificate_is_a_members_only_if_it_names_the_members_id() {
    assert_eq!(identity_mismatch("n2", &["n2".into()]), None);
    assert_eq!(identity_mismatch("n2", &["N2".into(), "x".into()]), None);
    let why = identity_mismatch("n3", &["n2".into()]).expect("refused");
    assert!(why.contains("n3") && why.contains("[\"n2\"]"), "{why}");
    assert!(identity_mismatch("n3", &[]).is_some());
    assert!(valid_id("n1") && valid_id("db-1.example.net"));
    assert!(!valid_id("10.0.0.1") && !valid_id("n/1") && !valid_id("a b"));
}

#[test]
fn a_server_certificate_with_its_key_loads_and_a_wrong_key_is_refused_naming_both_keys() {
    let pki = Pki::new();
    pki.issue("api", &["localhost"], 0o600);
    pki.issue("other", &["localhost"], 0o600);
    ServerTls::load(&pki.server("api.crt", "api.key"), API_KEYS).expect("loads");
    let err = ServerTls::load(&pki.server("api.crt", "other.key"), API_KEYS).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("tls.api.key_file") && text.contains("tls.api.cert_file"),
        "{text}"
    );
}

#[test]
fn a_server_key_readable_by_others_is_refused() {
    let pki = Pki::new();
    pki.issue("api", &["localhost"], 0o644);
    let err = ServerTls::load(&pki.server("api.crt", "api.key"), API_KEYS).unwrap_err();
    assert!(err.to_string().contains("tls.api.key_file"), "{err}");
    assert!(err.to_string().contains("0644"), "{err}");
}

#[test]
fn a_members_own_certificate_must_carry_its_own_id() {
    let pki = Pki::new();
    pki.issue("n1", &["n1"], 0o600);
    PeerTls::load(&pki.peer("n1"), "n1").expect("loads");
    let err = PeerTls::load(&pki.peer("n1"), "n2").unwrap_err();
    assert!(err.to_string().contains("tls.election.cert_file"), "{err}");
}

#[test]
fn a_reload_takes_the_new_files_and_a_broken_one_keeps_the_old() {
    let pki = Pki::new();
    pki.issue("api", &["localhost"], 0o600);
    let tls = ServerTls::load(&pki.server("api.crt", "api.key"), API_KEYS).unwrap();
    pki.issue("api", &["localhost"], 0o600);
    tls.reload().expect("a renewed pair loads");
    std::fs::write(pki.path("api.crt"), "not a certificate").unwrap();
    assert!(tls.reload().is_err());
    assert!(tls.files().contains(&pki.path("ca.crt")));
}

fn config_problems(yaml: &str) -> Vec<String> {
    match parse(yaml, Path::new("t.yaml")) {
        Ok(_) => vec![],
        Err(ConfigError::Invalid { problems, .. }) => problems,
        Err(e) => vec![e.to_string()],
    }
}

fn config(pki: &Pki, ids: [&str; 3], tls: &str) -> String {
    let _ = pki;
    format!(
        "node_id: {a}\nlisten: {{ election: \"127.0.0.1:7401\", api: \"127.0.0.1:9301\" }}\n\
         data_node: {{ kind: kevy, address: \"127.0.0.1:6001\" }}\npeers:\n\
         - {{ id: {a}, election: \"127.0.0.1:7401\", data: \"127.0.0.1:6001\" }}\n\
         - {{ id: {b}, election: \"127.0.0.1:7402\", data: \"127.0.0.1:6002\" }}\n\
         - {{ id: {c}, election: \"127.0.0.1:7403\", data: \"127.0.0.1:6003\" }}\ntls:\n{tls}",
        a = ids[0],
        b = ids[1],
        c = ids[2],
    )
}

#[test]
fn check_config_takes_tls_on_our_ports_with_a_kevy_data_node() {
    let pki = Pki::new();
    pki.issue("n1", &["n1"], 0o600);
    let d = pki.dir.path().display();
    let tls = format!(
        "  election: {{ ca_file: {d}/ca.crt, cert_file: {d}/n1.crt, key_file: {d}/n1.key }}\n\
         \x20 api: {{ cert_file: {d}/n1.crt, key_file: {d}/n1.key }}\n"
    );
    assert_eq!(
        config_problems(&config(&pki, ["n1", "n2", "n3"], &tls)),
        Vec::<String>::new()
    );
}

#[test]
fn check_config_refuses_member_ids_no_certificate_can_carry() {
    let pki = Pki::new();
    pki.issue("n1", &["n1"], 0o600);
    let d = pki.dir.path().display();
    let tls = format!(
        "  election: {{ ca_file: {d}/ca.crt, cert_file: {d}/n1.crt, key_file: {d}/n1.key }}\n"
    );
    let problems = config_problems(&config(&pki, ["n1", "n/2", "n3"], &tls));
    assert!(
        problems
            .iter()
            .any(|p| p.contains("\"n/2\" is not a DNS name")),
        "{problems:?}"
    );
}

#[test]
fn check_config_refuses_sentinel_tls_without_a_sentinel_listener() {
    let pki = Pki::new();
    pki.issue("s", &["localhost"], 0o600);
    let d = pki.dir.path().display();
    let tls = format!("  sentinel: {{ cert_file: {d}/s.crt, key_file: {d}/s.key }}\n");
    let problems = config_problems(&config(&pki, ["n1", "n2", "n3"], &tls));
    assert!(
        problems
            .iter()
            .any(|p| p.contains("tls.sentinel: there is no listen.sentinel")),
        "{problems:?}"
    );
}

#[test]
fn an_incomplete_server_tls_section_is_refused_naming_the_missing_field() {
    let pki = Pki::new();
    let d = pki.dir.path().display();
    let tls = format!("  api: {{ cert_file: {d}/s.crt }}\n");
    let problems = config_problems(&config(&pki, ["n1", "n2", "n3"], &tls));
    assert!(
        problems
            .iter()
            .any(|p| p.contains("missing field `key_file`")),
        "{problems:?}"
    );
}

#[test]
fn the_watchdog_is_refused_only_when_the_apis_own_certificate_is_no_client_the_api_accepts() {
    // docs/security.md "The watchdog over TLS": it presents the API's own
    // certificate; check-config warns when that cannot pass.
    let pki = Pki::new();
    pki.issue("api", &["localhost"], 0o600);
    let mut api = pki.server("api.crt", "api.key");
    assert_eq!(super::pinned::watchdog_refusal(&api), None);
    let other = Pki::new();
    api.client_ca_file = Some(other.path("ca.crt"));
    assert!(super::pinned::watchdog_refusal(&api).is_some());
    api.client_ca_file = None;
    assert_eq!(super::pinned::watchdog_refusal(&api), None);
}
