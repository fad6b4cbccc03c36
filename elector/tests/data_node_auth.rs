//! The elector and its watchdog log in to a Redis data node with a password
//! that is not URL-safe, as the `default` user and as an ACL user, and say
//! why when the credentials are wrong (issue 23 item 6, docs/interfaces.md
//! §Config `data_node.username`/`password`). Real redis-server processes on
//! loopback. kevy 7.0.0 has no AUTH (`check-config` refuses credentials for
//! it), so these tests are Redis only.

mod support;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A generated secret with every character a URL userinfo chokes on.
const PASSWORD: &str = "p@ss:w/rd#1";

/// Who the data nodes let in, and who the electors claim to be.
#[derive(Clone, Copy)]
enum Login {
    /// `requirepass`; the electors send `AUTH password`.
    DefaultUser,
    /// An ACL user `elector`, the `default` user switched off; the
    /// electors send `AUTH elector password`.
    AclUser,
}

fn redis_server(port: u16, dir: &Path, login: Login) -> Child {
    let mut cmd = Command::new("redis-server");
    cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--dir"])
        .arg(dir)
        .args(["--save", "", "--repl-diskless-sync-delay", "0"])
        .args(["--replicaof", "127.0.0.1", "1"]);
    match login {
        Login::DefaultUser => cmd.args(["--requirepass", PASSWORD, "--masterauth", PASSWORD]),
        Login::AclUser => cmd.args([
            "--user",
            "default",
            "off",
            "--user",
            "elector",
            "on",
            &format!(">{PASSWORD}"),
            "~*",
            "&*",
            "+@all",
            "--masteruser",
            "elector",
            "--masterauth",
            PASSWORD,
        ]),
    };
    cmd.stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start redis-server")
}

/// `INFO replication` of the data node on `port`, logged in as `login`.
fn replication(port: u16, login: Login) -> Option<String> {
    let info = redis::ConnectionInfo {
        addr: redis::ConnectionAddr::Tcp("127.0.0.1".into(), port),
        redis: redis::RedisConnectionInfo {
            username: matches!(login, Login::AclUser).then(|| "elector".to_string()),
            password: Some(PASSWORD.into()),
            ..Default::default()
        },
    };
    let client = redis::Client::open(info).ok()?;
    let mut conn = client
        .get_connection_with_timeout(Duration::from_millis(300))
        .ok()?;
    redis::cmd("INFO").arg("replication").query(&mut conn).ok()
}

/// Two Redis data nodes and two electors (N=2: both must be up to elect,
/// so a primary appears only if both electors read their data nodes).
struct Pair {
    ports: [u16; 2],
    dir: tempfile::TempDir,
    procs: support::Procs,
    /// Declared after `procs`, so the processes die before the ports are
    /// given back.
    _reserved: [support::NodePorts; 2],
}

/// YAML of `password` for a single-quoted scalar.
fn quoted(password: &str) -> String {
    format!("'{}'", password.replace('\'', "''"))
}

fn start_pair(login: Login, elector_password: &str) -> Pair {
    support::require("redis-server");
    let dir = tempfile::tempdir().unwrap();
    let reserved = [support::NodePorts::reserve(), support::NodePorts::reserve()];
    let ports = reserved.each_ref().map(|r| r.data);
    let (elections, apis) = (
        reserved.each_ref().map(|r| r.election),
        reserved.each_ref().map(|r| r.api),
    );
    let mut procs = support::Procs(Vec::new());
    for (i, port) in ports.iter().enumerate() {
        let data = dir.path().join(format!("data{i}"));
        std::fs::create_dir_all(&data).unwrap();
        procs.0.push(redis_server(*port, &data, login));
    }
    // The electors and watchdogs start once the data nodes answer (with
    // the right login), as the lab's entrypoint waits for PING.
    for port in ports {
        support::wait_until(
            Duration::from_secs(10),
            || replication(port, login).is_some(),
            "redis-server to answer",
        );
    }
    let username = match login {
        Login::DefaultUser => String::new(),
        Login::AclUser => "username: elector, ".into(),
    };
    let peers: String = (0..2)
        .map(|i| {
            format!(
                "  - {{ id: n{i}, election: \"127.0.0.1:{}\", data: \"127.0.0.1:{}\" }}\n",
                elections[i], ports[i]
            )
        })
        .collect();
    for i in 0..2 {
        let yaml = format!(
            "node_id: n{i}\nlisten: {{ election: \"127.0.0.1:{e}\", api: \"127.0.0.1:{a}\" }}\n\
             data_dir: {dir}/state{i}\n\
             data_node: {{ kind: redis, address: \"127.0.0.1:{d}\", {username}password: {pw} }}\n\
             peers:\n{peers}{t}",
            e = elections[i],
            a = apis[i],
            d = ports[i],
            dir = dir.path().display(),
            pw = quoted(elector_password),
            t = "timings: { hb_interval_ms: 50, down_after_ms: 600, election_timeout_ms: 400, backoff_min_ms: 100, backoff_max_ms: 300, data_poll_ms: 50 }\n",
        );
        let file = dir.path().join(format!("n{i}.yaml"));
        std::fs::write(&file, yaml).unwrap();
        support::start_elector_and_watchdog(dir.path(), i, &file, &mut procs);
    }
    Pair {
        ports,
        dir,
        procs,
        _reserved: reserved,
    }
}

impl Pair {
    fn log(&self, what: &str, i: usize) -> String {
        support::sidecar_log(self.dir.path(), what, i)
    }

    /// Waits until one data node is a master and the other its replica with
    /// the link up: both electors logged in and drove their data nodes.
    fn wait_for_primary_and_replica(&self, login: Login) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let infos: Vec<String> = self
                .ports
                .iter()
                .map(|p| replication(*p, login).unwrap_or_default())
                .collect();
            let masters = infos.iter().filter(|i| i.contains("role:master")).count();
            let linked = infos
                .iter()
                .filter(|i| i.contains("master_link_status:up"))
                .count();
            if masters == 1 && linked == 1 {
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
fn a_password_with_url_characters_logs_in_as_the_default_user() {
    let pair = start_pair(Login::DefaultUser, PASSWORD);
    pair.wait_for_primary_and_replica(Login::DefaultUser);
    for i in 0..2 {
        assert!(
            pair.log("watchdog", i)
                .contains("watchdog: data node reachable"),
            "{}",
            pair.log("watchdog", i)
        );
    }
    drop(pair.procs);
}

#[test]
fn an_acl_user_logs_in_with_its_username_and_password() {
    let pair = start_pair(Login::AclUser, PASSWORD);
    pair.wait_for_primary_and_replica(Login::AclUser);
    assert!(pair
        .log("watchdog", 0)
        .contains("watchdog: data node reachable"));
}

#[test]
fn a_wrong_password_is_logged_with_its_cause_and_not_on_every_poll() {
    let pair = start_pair(Login::AclUser, "not-the-password");
    // 3 s at a 50 ms poll: 60 failed rounds, one line (the cause repeats
    // only every 30 s).
    std::thread::sleep(Duration::from_secs(3));
    for i in 0..2 {
        let log = pair.log("run", i);
        let lines = log
            .lines()
            .filter(|l| l.contains("data node unusable") && l.contains("authentication failed"))
            .count();
        assert_eq!(lines, 1, "{log}");
        assert!(
            pair.log("watchdog", i).contains("authentication failed"),
            "{}",
            pair.log("watchdog", i)
        );
    }
    for port in pair.ports {
        let info = replication(port, Login::AclUser).expect("the right login works");
        assert!(info.contains("role:slave"), "{info}");
    }
}
