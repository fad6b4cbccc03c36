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
            ca_file: None,
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

/// `parse`'s outcome for `yaml`: its problems, or its warnings.
fn config_outcome(yaml: &str) -> Result<Vec<String>, Vec<String>> {
    match parse(yaml, Path::new("t.yaml")) {
        Ok(loaded) => Ok(loaded.warnings),
        Err(ConfigError::Invalid { problems, .. }) => Err(problems),
        Err(e) => Err(vec![e.to_string()]),
    }
}

#[test]
fn check_config_takes_an_api_ca_file_its_certificate_chains_to_and_warns_on_another() {
    let pki = Pki::new();
    pki.issue("api", &["localhost"], 0o600);
    let d = pki.dir.path().display();
    let api = |ca: &str| {
        format!("  api: {{ cert_file: {d}/api.crt, key_file: {d}/api.key, ca_file: {ca} }}\n")
    };
    let chains = |w: &Vec<String>| {
        w.iter()
            .any(|w| w.contains("does not chain to tls.api.ca_file"))
    };
    let good = config_outcome(&config(
        &pki,
        ["n1", "n2", "n3"],
        &api(&format!("{d}/ca.crt")),
    ))
    .expect("accepted");
    assert!(!chains(&good), "{good:?}");
    // A CA that did not sign the API's certificate: clients trusting it
    // would refuse the API (a warning: the API itself still serves).
    let other = Pki::new();
    let od = other.dir.path().display();
    let wrong = config_outcome(&config(
        &pki,
        ["n1", "n2", "n3"],
        &api(&format!("{od}/ca.crt")),
    ))
    .expect("accepted with a warning");
    assert!(chains(&wrong), "{wrong:?}");
}

#[test]
fn check_config_refuses_an_api_ca_file_that_is_missing_or_holds_no_certificate() {
    let pki = Pki::new();
    pki.issue("api", &["localhost"], 0o600);
    let d = pki.dir.path().display();
    std::fs::write(pki.path("junk.crt"), "not a certificate\n").unwrap();
    for ca in ["absent.crt", "junk.crt"] {
        let tls = format!(
            "  api: {{ cert_file: {d}/api.crt, key_file: {d}/api.key, ca_file: {d}/{ca} }}\n"
        );
        let problems =
            config_outcome(&config(&pki, ["n1", "n2", "n3"], &tls)).expect_err("refused");
        assert!(
            problems.iter().any(|p| p.contains("tls.api.ca_file")),
            "{ca}: {problems:?}"
        );
    }
}

/// `check_cluster` on one config per member, each from `tls_of(id)`.
fn cluster_outcome(pki: &Pki, tls_of: &dyn Fn(&str) -> String) -> (Vec<String>, Vec<String>) {
    let orders = [["n1", "n2", "n3"], ["n2", "n1", "n3"], ["n3", "n1", "n2"]];
    let configs: Vec<_> = orders
        .iter()
        .map(|ids| {
            let path = PathBuf::from(format!("{}.yaml", ids[0]));
            let loaded = parse(&config(pki, *ids, &tls_of(ids[0])), &path).expect("valid alone");
            (path, loaded.config)
        })
        .collect();
    crate::config::check_cluster(&configs)
}

fn election_entry(dir: &Path, ca: &Path, id: &str) -> String {
    let d = dir.display();
    format!(
        "  election: {{ ca_file: {}, cert_file: {d}/{id}.crt, key_file: {d}/{id}.key }}\n",
        ca.display()
    )
}

#[test]
fn check_config_on_a_cluster_refuses_tls_election_on_some_members_only() {
    let pki = Pki::new();
    for id in ["n1", "n2", "n3"] {
        pki.issue(id, &[id], 0o600);
    }
    let ca = pki.path("ca.crt");
    // The control: on every member, nothing to say.
    let (problems, warnings) = cluster_outcome(&pki, &|id| election_entry(pki.dir.path(), &ca, id));
    assert_eq!((problems, warnings), (vec![], vec![]));
    // n3 without: the fingerprints still agree, the handshakes would not.
    let (problems, _) = cluster_outcome(&pki, &|id| match id {
        "n3" => "  {}\n".into(),
        _ => election_entry(pki.dir.path(), &ca, id),
    });
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].starts_with(
            "tls.election is set on n1 (n1.yaml), n2 (n2.yaml) but not on n3 (n3.yaml)"
        ),
        "{problems:?}"
    );
}

#[test]
fn check_config_on_a_cluster_refuses_a_members_certificate_another_members_ca_does_not_accept() {
    let pki = Pki::new();
    let other = Pki::new();
    for id in ["n1", "n2"] {
        pki.issue(id, &[id], 0o600);
    }
    other.issue("n3", &["n3"], 0o600);
    // n3 has a certificate from another CA, and trusts only that one.
    let (problems, _) = cluster_outcome(&pki, &|id| match id {
        "n3" => election_entry(other.dir.path(), &other.path("ca.crt"), id),
        _ => election_entry(pki.dir.path(), &pki.path("ca.crt"), id),
    });
    for (them, us) in [("n3", "n1"), ("n3", "n2"), ("n1", "n3"), ("n2", "n3")] {
        let start = format!("{them}'s tls.election.cert_file");
        let refuse = format!("{us} would refuse {them} at the handshake");
        assert!(
            problems
                .iter()
                .any(|p| p.starts_with(&start) && p.ends_with(&refuse)),
            "{them} by {us}: {problems:?}"
        );
    }
    assert_eq!(
        problems.len(),
        4,
        "n1 and n2 accept each other: {problems:?}"
    );
}

#[test]
fn check_config_on_a_cluster_warns_when_tls_api_is_served_by_some_members_only() {
    let pki = Pki::new();
    pki.issue("api", &["localhost"], 0o600);
    let d = pki.dir.path().display();
    let (problems, warnings) = cluster_outcome(&pki, &|id| match id {
        "n1" => format!("  api: {{ cert_file: {d}/api.crt, key_file: {d}/api.key }}\n"),
        _ => "  {}\n".into(),
    });
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0]
            .starts_with("tls.api is set on n1 (n1.yaml) but not on n2 (n2.yaml), n3 (n3.yaml)"),
        "{warnings:?}"
    );
}
