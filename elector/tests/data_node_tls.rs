//! The elector and its watchdog reach a Redis that serves TLS only
//! (`--port 0 --tls-port`), with and without a client certificate, and a
//! wrong CA is refused with a clear reason (issue 38 item 1,
//! docs/security.md "TLS to the data node"). Real redis-server processes
//! on loopback, certificates generated here (rcgen). The replicas replicate
//! over TLS too (`tls-replication yes`), through the replication gate,
//! which forwards the TLS bytes as it forwards any (protocol §6.10).
//! kevy 7.0.0 has no TLS: `check-config` refuses `data_node.tls` for it.
//! A client certificate replaced on disk is taken without a restart.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A throw-away PKI in a directory: `ca.crt`, `server.crt`/`server.key`
/// (for `localhost` and `127.0.0.1`), `client.crt`/`client.key` (mode
/// 0600), `wrong-ca.crt`, a CA that signed none of them, and
/// `stranger.crt`/`stranger.key`, a client certificate that CA signed.
struct Pki {
    dir: PathBuf,
}

fn new_ca(name: &str) -> (rcgen::Certificate, rcgen::KeyPair) {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    let key = rcgen::KeyPair::generate().unwrap();
    (params.self_signed(&key).unwrap(), key)
}

impl Pki {
    fn create(dir: &Path) -> Pki {
        use std::os::unix::fs::PermissionsExt as _;
        let (ca, ca_key) = new_ca("data node test CA");
        let write = |name: &str, text: String, mode: u32| {
            let p = dir.join(name);
            std::fs::write(&p, text).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        for (name, sans) in [
            (
                "server",
                vec!["localhost".to_string(), "127.0.0.1".to_string()],
            ),
            ("client", vec!["elector".to_string()]),
        ] {
            let key = rcgen::KeyPair::generate().unwrap();
            let cert = rcgen::CertificateParams::new(sans)
                .unwrap()
                .signed_by(&key, &ca, &ca_key)
                .unwrap();
            write(&format!("{name}.crt"), cert.pem(), 0o644);
            write(&format!("{name}.key"), key.serialize_pem(), 0o600);
        }
        write("ca.crt", ca.pem(), 0o644);
        let (wrong_ca, wrong_key) = new_ca("another CA");
        let key = rcgen::KeyPair::generate().unwrap();
        let stranger = rcgen::CertificateParams::new(vec!["elector".to_string()])
            .unwrap()
            .signed_by(&key, &wrong_ca, &wrong_key)
            .unwrap();
        write("stranger.crt", stranger.pem(), 0o644);
        write("stranger.key", key.serialize_pem(), 0o600);
        write("wrong-ca.crt", wrong_ca.pem(), 0o644);
        Pki {
            dir: dir.to_path_buf(),
        }
    }

    fn file(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }

    /// Copies `name.crt`/`name.key` to `live.crt`/`live.key`, written aside
    /// and renamed over, as a renewal tool replaces a certificate.
    fn install_live(&self, name: &str) {
        use std::os::unix::fs::PermissionsExt as _;
        for ext in ["key", "crt"] {
            let aside = self.dir.join(format!("live.{ext}.new"));
            std::fs::copy(self.dir.join(format!("{name}.{ext}")), &aside).unwrap();
            std::fs::set_permissions(&aside, std::fs::Permissions::from_mode(0o600)).unwrap();
            std::fs::rename(&aside, self.dir.join(format!("live.{ext}"))).unwrap();
        }
    }
}

/// Whether the data nodes demand a client certificate, and what the
/// electors are given.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Setup {
    /// `tls-auth-clients no`; the electors trust the right CA.
    ServerOnly,
    /// `tls-auth-clients yes`; the electors present `client.crt`.
    Mutual,
    /// `tls-auth-clients no`; the electors trust another CA.
    WrongCa,
    /// `tls-auth-clients yes`; the electors have no client certificate.
    NoClientCert,
    /// `tls-auth-clients yes`; the electors present `live.crt`, at first
    /// a copy of `stranger.crt` (from a CA the data nodes do not trust).
    Renewed,
}

fn redis_server(port: u16, dir: &Path, pki: &Pki, setup: Setup) -> Child {
    let auth_clients = match setup {
        Setup::Mutual | Setup::NoClientCert | Setup::Renewed => "yes",
        Setup::ServerOnly | Setup::WrongCa => "no",
    };
    Command::new("redis-server")
        .args(["--port", "0", "--tls-port", &port.to_string()])
        .args(["--bind", "127.0.0.1", "--dir"])
        .arg(dir)
        .args(["--tls-cert-file", &pki.file("server.crt")])
        .args(["--tls-key-file", &pki.file("server.key")])
        .args(["--tls-ca-cert-file", &pki.file("ca.crt")])
        .args(["--tls-auth-clients", auth_clients])
        .args(["--tls-replication", "yes"])
        .args(["--save", "", "--repl-diskless-sync-delay", "0"])
        .args(["--replicaof", "127.0.0.1", "1"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start redis-server")
}

/// `INFO replication` over TLS with the right CA and the client
/// certificate (what the test itself sees, whatever the electors do).
fn replication(port: u16, pki: &Pki) -> Option<String> {
    let out = Command::new("redis-cli")
        .args(["--tls", "--cacert", &pki.file("ca.crt")])
        .args([
            "--cert",
            &pki.file("client.crt"),
            "--key",
            &pki.file("client.key"),
        ])
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "INFO",
            "replication",
        ])
        .stdin(Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    (out.status.success() && text.contains("role:")).then_some(text)
}

struct Pair {
    ports: [u16; 2],
    dir: tempfile::TempDir,
    pki: Pki,
    _procs: support::Procs,
    /// After `procs`: the processes die before the ports are given back.
    _reserved: [support::NodePorts; 2],
}

fn tls_section(pki: &Pki, setup: Setup) -> String {
    match setup {
        Setup::ServerOnly | Setup::NoClientCert => {
            format!("{{ ca_file: {} }}", pki.file("ca.crt"))
        }
        Setup::Mutual => format!(
            "{{ ca_file: {}, cert_file: {}, key_file: {}, server_name: localhost }}",
            pki.file("ca.crt"),
            pki.file("client.crt"),
            pki.file("client.key")
        ),
        Setup::WrongCa => format!("{{ ca_file: {} }}", pki.file("wrong-ca.crt")),
        Setup::Renewed => {
            pki.install_live("stranger");
            format!(
                "{{ ca_file: {}, cert_file: {}, key_file: {}, server_name: localhost }}",
                pki.file("ca.crt"),
                pki.file("live.crt"),
                pki.file("live.key")
            )
        }
    }
}

fn start_pair(setup: Setup) -> Pair {
    support::require("redis-server");
    support::require("redis-cli");
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::create(dir.path());
    let reserved = [support::NodePorts::reserve(), support::NodePorts::reserve()];
    let ports = reserved.each_ref().map(|r| r.data);
    let mut procs = support::Procs(Vec::new());
    for (i, port) in ports.iter().enumerate() {
        let data = dir.path().join(format!("data{i}"));
        std::fs::create_dir_all(&data).unwrap();
        procs.0.push(redis_server(*port, &data, &pki, setup));
    }
    for port in ports {
        support::wait_until(
            Duration::from_secs(30),
            || replication(port, &pki).is_some(),
            "redis-server to answer over TLS",
        );
    }
    let peers: String = (0..2)
        .map(|i| {
            format!(
                "  - {{ id: n{i}, election: \"127.0.0.1:{}\", data: \"127.0.0.1:{}\" }}\n",
                reserved[i].election, ports[i]
            )
        })
        .collect();
    for i in 0..2 {
        let yaml = format!(
            "node_id: n{i}\nlisten: {{ election: \"127.0.0.1:{e}\", api: \"127.0.0.1:{a}\" }}\n\
             data_dir: {dir}/state{i}\n\
             data_node: {{ kind: redis, address: \"127.0.0.1:{d}\", tls: {tls} }}\n\
             peers:\n{peers}\
             timings: {{ hb_interval_ms: 50, down_after_ms: 600, election_timeout_ms: 400, backoff_min_ms: 100, backoff_max_ms: 300, data_poll_ms: 50 }}\n",
            e = reserved[i].election,
            a = reserved[i].api,
            d = ports[i],
            dir = dir.path().display(),
            tls = tls_section(&pki, setup),
        );
        let file = dir.path().join(format!("n{i}.yaml"));
        std::fs::write(&file, yaml).unwrap();
        support::start_elector_and_watchdog(dir.path(), i, &file, &mut procs);
    }
    Pair {
        ports,
        dir,
        pki,
        _procs: procs,
        _reserved: reserved,
    }
}

impl Pair {
    fn log(&self, what: &str, i: usize) -> String {
        support::sidecar_log(self.dir.path(), what, i)
    }

    /// Waits until both electors logged their data node unusable; the
    /// first one's log.
    fn wait_until_both_refused(&self) -> String {
        support::wait_until(
            Duration::from_secs(30),
            || (0..2).all(|i| self.log("run", i).contains("data node unusable")),
            "both electors to log the refused connection",
        );
        self.log("run", 0)
    }

    /// Waits until one data node is a master and the other its replica
    /// with the link up, replicating from the primary's replication gate
    /// (its data port + 10000): both electors read their data nodes and
    /// applied a promotion and a demotion over TLS, and the replica's TLS
    /// session went through the gate.
    fn wait_for_primary_and_replica_through_the_gate(&self) {
        let deadline = Instant::now() + Duration::from_secs(45);
        loop {
            let infos: Vec<String> = self
                .ports
                .iter()
                .map(|p| replication(*p, &self.pki).unwrap_or_default())
                .collect();
            let primary = infos.iter().position(|i| i.contains("role:master"));
            let linked = infos
                .iter()
                .position(|i| i.contains("master_link_status:up"));
            if let (Some(p), Some(r)) = (primary, linked) {
                let gate = self.ports[p] + 10_000;
                assert!(
                    infos[r].contains(&format!("master_port:{gate}")),
                    "the replica does not replicate through the gate: {}",
                    infos[r]
                );
                return;
            }
            assert!(
                Instant::now() < deadline,
                "no primary with a linked replica within 20 s: {infos:?}\n{}\n{}",
                self.log("run", 0),
                self.log("run", 1)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

#[test]
fn a_tls_only_redis_pair_elects_a_primary_and_replicates_through_the_gate() {
    let pair = start_pair(Setup::ServerOnly);
    pair.wait_for_primary_and_replica_through_the_gate();
    for i in 0..2 {
        let log = pair.log("watchdog", i);
        assert!(log.contains("watchdog: data node reachable"), "{log}");
    }
}

#[test]
fn mutual_tls_with_a_client_certificate_elects_a_primary() {
    let pair = start_pair(Setup::Mutual);
    pair.wait_for_primary_and_replica_through_the_gate();
    let log = pair.log("watchdog", 0);
    assert!(log.contains("watchdog: data node reachable"), "{log}");
}

#[test]
fn a_wrong_ca_is_refused_and_the_log_names_the_ca_file() {
    let pair = start_pair(Setup::WrongCa);
    support::wait_until(
        Duration::from_secs(30),
        || (0..2).all(|i| pair.log("run", i).contains("data_node.tls.ca_file")),
        "both electors to log the refused certificate",
    );
    for i in 0..2 {
        let log = pair.log("run", i);
        assert!(
            log.contains("not signed by a CA in data_node.tls.ca_file"),
            "{log}"
        );
        assert!(
            pair.log("watchdog", i).contains("data_node.tls.ca_file"),
            "{}",
            pair.log("watchdog", i)
        );
    }
    // Nothing was promoted: the electors never reached their data nodes.
    for port in pair.ports {
        let info = replication(port, &pair.pki).expect("the right CA works");
        assert!(info.contains("role:slave"), "{info}");
    }
}

#[test]
fn a_redis_that_requires_a_client_certificate_is_named_as_the_cause() {
    let pair = start_pair(Setup::NoClientCert);
    let log = pair.wait_until_both_refused();
    assert!(log.contains("requires a client certificate"), "{log}");
}

/// The client certificate is replaced on disk while the electors and
/// their watchdogs run: they take it for their next connections (the file
/// watch, as for our own ports' TLS), and the pair elects a primary with
/// no restart. The control is the first half: with the certificate from
/// the untrusted CA both are refused and nothing is promoted.
#[test]
fn a_data_node_client_certificate_replaced_on_disk_is_used_without_a_restart() {
    let pair = start_pair(Setup::Renewed);
    let log = pair.wait_until_both_refused();
    assert!(
        log.contains("refused our client certificate (data_node.tls.cert_file)"),
        "{log}"
    );
    for port in pair.ports {
        let info = replication(port, &pair.pki).expect("the right certificate works");
        assert!(info.contains("role:slave"), "nothing promoted yet: {info}");
    }

    pair.pki.install_live("client");
    pair.wait_for_primary_and_replica_through_the_gate();
    for i in 0..2 {
        let log = pair.log("run", i);
        assert!(
            log.contains("TLS certificates re-read") && log.contains("data_node.tls"),
            "{log}"
        );
        // The watchdog, which dials the data node to fence it, re-reads
        // the files as well (it logs its reach only at start).
        support::wait_until(
            Duration::from_secs(10),
            || {
                let log = pair.log("watchdog", i);
                log.contains("TLS certificates re-read") && log.contains("data_node.tls")
            },
            "the watchdog to re-read data_node.tls",
        );
    }
}

/// `elector check-config` on `yaml` (written beside `dir`'s PKI): its exit
/// status and everything it printed.
fn check_config(dir: &Path, yaml: &str) -> (bool, String) {
    let file = dir.join("check.yaml");
    std::fs::write(&file, yaml).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_elector"))
        .args(["check-config"])
        .arg(&file)
        .output()
        .expect("run check-config");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

fn one_node(dir: &Path, kind: &str, tls: &str) -> String {
    format!(
        "node_id: n1\nlisten: {{ election: \"127.0.0.1:7400\" }}\ndata_dir: {}/state\n\
         data_node: {{ kind: {kind}, address: \"127.0.0.1:6379\", tls: {tls} }}\n\
         peers:\n  - {{ id: n1, election: \"127.0.0.1:7400\", data: \"127.0.0.1:6379\" }}\n",
        dir.display()
    )
}

#[test]
fn check_config_accepts_good_files_and_refuses_a_key_of_another_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::create(dir.path());
    let good = format!(
        "{{ ca_file: {}, cert_file: {}, key_file: {} }}",
        pki.file("ca.crt"),
        pki.file("client.crt"),
        pki.file("client.key")
    );
    let (ok, text) = check_config(dir.path(), &one_node(dir.path(), "redis", &good));
    assert!(ok, "{text}");
    let mismatched = format!(
        "{{ ca_file: {}, cert_file: {}, key_file: {} }}",
        pki.file("ca.crt"),
        pki.file("client.crt"),
        pki.file("server.key")
    );
    let (ok, text) = check_config(dir.path(), &one_node(dir.path(), "redis", &mismatched));
    assert!(!ok, "{text}");
    assert!(
        text.contains("does not belong to data_node.tls.cert_file"),
        "{text}"
    );
}

#[test]
fn check_config_refuses_tls_for_kevy_because_kevy_has_no_tls() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::create(dir.path());
    let tls = format!("{{ ca_file: {} }}", pki.file("ca.crt"));
    let (ok, text) = check_config(dir.path(), &one_node(dir.path(), "kevy", &tls));
    assert!(!ok, "{text}");
    assert!(text.contains("kevy 7.0.0 has no TLS"), "{text}");
}
