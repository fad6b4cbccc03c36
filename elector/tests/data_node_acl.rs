//! The least-privileged Redis user (issue 38, docs/security.md): every data
//! node lets the elector in only as an ACL user with exactly the rule
//! docs/security.md gives (read from that file, so the two cannot drift),
//! replicas log in as their own replication user, and the test's writes go
//! through a third, application user. A fence, a failover (the primary's
//! elector killed, then its Redis), and a switchover all work with 0 lost
//! acknowledged writes; a rule without `+config|set` is refused by Redis and
//! the elector names the command it needed. The password comes from a
//! `data_node.password_file` (mode 0600). Real redis-server processes on
//! loopback.

mod support;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const PASSWORD: &str = "acl-test: p@ss/w#1";
const APP_PASSWORD: &str = "app-password";
/// `CONFIG GET min-replicas-to-write` of a fenced Redis (redis_node.rs).
const FENCED: &str = "1000";

/// The rule after `>PASSWORD` on the docs/security.md line that starts
/// with `prefix`.
fn rule_from_docs(prefix: &str) -> Vec<String> {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/security.md"))
            .unwrap();
    let line = doc
        .lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no line {prefix:?} in docs/security.md"));
    let rest = line[prefix.len()..].trim();
    let rest = rest
        .strip_prefix(">PASSWORD")
        .expect(">PASSWORD after the user");
    rest.split_whitespace().map(String::from).collect()
}

fn elector_rule() -> Vec<String> {
    rule_from_docs("user elector on ")
}

fn replication_rule() -> Vec<String> {
    rule_from_docs("user elector-replication on ")
}

fn kill(child: &mut Option<Child>) {
    if let Some(mut c) = child.take() {
        let _ = c.kill();
        let _ = c.wait();
    }
}

struct Node {
    id: String,
    ports: support::NodePorts,
    config: std::path::PathBuf,
    redis: Option<Child>,
    elector: Option<Child>,
    watchdog: Option<Child>,
}

impl Drop for Node {
    fn drop(&mut self) {
        kill(&mut self.elector);
        kill(&mut self.watchdog);
        kill(&mut self.redis);
    }
}

struct Trio {
    nodes: Vec<Node>,
    dir: tempfile::TempDir,
}

fn redis_server(port: u16, dir: &Path, rule: &[String]) -> Child {
    let mut cmd = Command::new("redis-server");
    cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--dir"])
        .arg(dir)
        .args(["--save", "", "--appendonly", "no"])
        .args(["--repl-diskless-sync-delay", "0"])
        .args(["--replicaof", "127.0.0.1", "1"])
        .args(["--user", "default", "off"])
        .args(["--user", "elector", "on", &format!(">{PASSWORD}")])
        .args(rule)
        .args([
            "--user",
            "elector-replication",
            "on",
            &format!(">{PASSWORD}"),
        ])
        .args(replication_rule())
        .args([
            "--user",
            "app",
            "on",
            &format!(">{APP_PASSWORD}"),
            "~*",
            "&*",
            "+@all",
        ])
        .args([
            "--masteruser",
            "elector-replication",
            "--masterauth",
            PASSWORD,
        ]);
    cmd.stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start redis-server")
}

/// A connection as the application user.
fn app(port: u16) -> Option<redis::Connection> {
    let info = redis::ConnectionInfo {
        addr: redis::ConnectionAddr::Tcp("127.0.0.1".into(), port),
        redis: redis::RedisConnectionInfo {
            username: Some("app".into()),
            password: Some(APP_PASSWORD.into()),
            ..Default::default()
        },
    };
    let client = redis::Client::open(info).ok()?;
    let conn = client
        .get_connection_with_timeout(Duration::from_millis(300))
        .ok()?;
    conn.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    Some(conn)
}

fn info(port: u16) -> String {
    app(port)
        .and_then(|mut c| redis::cmd("INFO").arg("replication").query(&mut c).ok())
        .unwrap_or_default()
}

fn min_replicas_to_write(port: u16) -> Option<String> {
    let mut c = app(port)?;
    let v: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("min-replicas-to-write")
        .query(&mut c)
        .ok()?;
    v.get(1).cloned()
}

fn start(n: usize, rule: &[String]) -> Trio {
    support::require("redis-server");
    let dir = tempfile::tempdir().unwrap();
    let password_file = dir.path().join("redis.password");
    std::fs::write(&password_file, format!("{PASSWORD}\n")).unwrap();
    std::fs::set_permissions(
        &password_file,
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    let ports: Vec<support::NodePorts> = (0..n).map(|_| support::NodePorts::reserve()).collect();
    let peers: String = ports
        .iter()
        .enumerate()
        .map(|(i, p)| {
            format!(
                "  - {{ id: n{i}, election: \"127.0.0.1:{}\", data: \"127.0.0.1:{}\", api: \"127.0.0.1:{}\" }}\n",
                p.election, p.data, p.api
            )
        })
        .collect();
    let mut nodes = Vec::new();
    for (i, p) in ports.into_iter().enumerate() {
        let data = dir.path().join(format!("data{i}"));
        std::fs::create_dir_all(&data).unwrap();
        let yaml = format!(
            "node_id: n{i}\nlisten: {{ election: \"127.0.0.1:{e}\", api: \"127.0.0.1:{a}\" }}\n\
             data_dir: {dir}/state{i}\n\
             data_node: {{ kind: redis, address: \"127.0.0.1:{d}\", username: elector, password_file: {pf} }}\n\
             peers:\n{peers}timings: {t}\n",
            e = p.election,
            a = p.api,
            d = p.data,
            dir = dir.path().display(),
            pf = password_file.display(),
            t = support::SHORT_TIMINGS.0,
        );
        let config = dir.path().join(format!("n{i}.yaml"));
        std::fs::write(&config, yaml).unwrap();
        let redis = Some(redis_server(p.data, &data, rule));
        nodes.push(Node {
            id: format!("n{i}"),
            ports: p,
            config,
            redis,
            elector: None,
            watchdog: None,
        });
    }
    let mut trio = Trio { nodes, dir };
    for i in 0..n {
        let port = trio.nodes[i].ports.data;
        support::wait_until(
            Duration::from_secs(10),
            || !info(port).is_empty(),
            "redis-server to answer the app user",
        );
    }
    for i in 0..n {
        trio.spawn(i, "run");
        trio.spawn(i, "watchdog");
    }
    trio
}

impl Trio {
    fn spawn(&mut self, i: usize, what: &str) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join(format!("{what}-n{i}.log")))
            .unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_elector"))
            .args([what, "--config"])
            .arg(&self.nodes[i].config)
            .env("ELECTOR_LOG", "info")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start elector");
        match what {
            "run" => self.nodes[i].elector = Some(child),
            _ => self.nodes[i].watchdog = Some(child),
        }
    }

    fn log(&self, what: &str, i: usize) -> String {
        std::fs::read_to_string(self.dir.path().join(format!("{what}-n{i}.log")))
            .unwrap_or_default()
    }

    fn logs(&self) -> String {
        (0..self.nodes.len())
            .map(|i| {
                format!(
                    "--- run n{i}\n{}\n--- watchdog n{i}\n{}",
                    self.log("run", i),
                    self.log("watchdog", i)
                )
            })
            .collect()
    }

    /// The one master among `candidates` whose `replicas` other nodes are
    /// linked to it, within `within`.
    fn wait_primary(&self, candidates: &[usize], replicas: usize, within: Duration) -> usize {
        let deadline = Instant::now() + within;
        loop {
            let masters: Vec<usize> = candidates
                .iter()
                .copied()
                .filter(|&i| {
                    let text = info(self.nodes[i].ports.data);
                    // Online, not merely connected: a replica still in its
                    // first sync acknowledges nothing, and the first
                    // `WAIT 1 1000` then went unanswered on a loaded host.
                    text.contains("role:master")
                        && text.contains(&format!("connected_slaves:{replicas}"))
                        && text.matches("state=online").count() == replicas
                        && min_replicas_to_write(self.nodes[i].ports.data).as_deref()
                            != Some(FENCED)
                })
                .collect();
            if let [one] = masters[..] {
                return one;
            }
            assert!(
                Instant::now() < deadline,
                "no single unfenced primary with {replicas} replicas among {candidates:?} within {within:?}\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `count` writes on node `i`, each acknowledged by a replica (`WAIT 1`).
    fn acked_writes(&self, i: usize, prefix: &str, count: usize) -> Vec<String> {
        let mut conn = app(self.nodes[i].ports.data).expect("app connection");
        (0..count)
            .map(|n| {
                let key = format!("{prefix}:{n}");
                assert!(
                    support::acked_write(&mut conn, &key),
                    "write {key} not acknowledged on n{i}\n{}",
                    self.logs()
                );
                key
            })
            .collect()
    }

    fn assert_all_present(&self, i: usize, keys: &[String]) {
        let mut conn = app(self.nodes[i].ports.data).expect("app connection");
        let lost: Vec<&String> = keys
            .iter()
            .filter(|k| {
                redis::cmd("EXISTS")
                    .arg(k.as_str())
                    .query::<i64>(&mut conn)
                    .unwrap()
                    == 0
            })
            .collect();
        assert!(
            lost.is_empty(),
            "{} of {} acknowledged writes lost on n{i}: {:?}",
            lost.len(),
            keys.len(),
            &lost[..lost.len().min(5)]
        );
    }
}

#[test]
fn with_only_the_documented_acl_a_fence_a_failover_and_a_switchover_lose_no_acknowledged_write() {
    let mut t = start(3, &elector_rule());
    let all = [0, 1, 2];
    let first = t.wait_primary(&all, 2, Duration::from_secs(20));
    let mut acked = t.acked_writes(first, "a", 30);

    // Fence and failover: the primary's elector dies; its watchdog fences
    // its Redis (CONFIG SET as the elector user), the others elect.
    kill(&mut t.nodes[first].elector);
    let others: Vec<usize> = all.iter().copied().filter(|&i| i != first).collect();
    support::wait_until(
        Duration::from_secs(10),
        || min_replicas_to_write(t.nodes[first].ports.data).as_deref() == Some(FENCED),
        "the watchdog to fence the old primary's Redis",
    );
    let second = t.wait_primary(&others, 1, Duration::from_secs(15));
    t.assert_all_present(second, &acked);
    acked.extend(t.acked_writes(second, "b", 30));

    // The old node's elector comes back and follows.
    t.spawn(first, "run");
    let again = t.wait_primary(&all, 2, Duration::from_secs(15));
    assert_eq!(again, second, "the primary moved when n{first} came back");

    // A planned switchover to the node that was first.
    // The target is refused (409) until the primary hears it caught up.
    let url = format!("http://127.0.0.1:{}/switchover", t.nodes[second].ports.api);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match ureq::post(&url)
            .send_json(serde_json::json!({"to": t.nodes[first].id, "timeout_ms": 10_000}))
        {
            Ok(_) => break,
            Err(ureq::Error::Status(409, r)) if Instant::now() < deadline => {
                eprintln!(
                    "switchover not yet: {}",
                    r.into_string().unwrap_or_default()
                );
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(e) => panic!("switchover refused: {e:?}\n{}", t.logs()),
        }
    }
    let third = t.wait_primary(&all, 2, Duration::from_secs(15));
    assert_eq!(third, first, "the switchover target is not the primary");
    t.assert_all_present(third, &acked);
    acked.extend(t.acked_writes(third, "c", 30));

    // A failover with the primary's Redis killed.
    kill(&mut t.nodes[third].redis);
    let rest: Vec<usize> = all.iter().copied().filter(|&i| i != third).collect();
    let fourth = t.wait_primary(&rest, 1, Duration::from_secs(15));
    t.assert_all_present(fourth, &acked);
    eprintln!(
        "primaries n{first} -> n{second} -> n{third} -> n{fourth}; {} acknowledged writes, 0 lost",
        acked.len()
    );
    let refused: usize = (0..3)
        .map(|i| {
            t.log("run", i).matches("NOPERM").count()
                + t.log("watchdog", i).matches("NOPERM").count()
        })
        .sum();
    assert_eq!(
        refused,
        0,
        "a command outside the rule was sent\n{}",
        t.logs()
    );
    // Redis's own record: no user was denied anything (the replication
    // user included).
    for i in rest {
        let mut c = app(t.nodes[i].ports.data).expect("app connection");
        let denied: Vec<redis::Value> = redis::cmd("ACL").arg("LOG").query(&mut c).unwrap();
        assert!(denied.is_empty(), "n{i}'s ACL LOG: {denied:?}");
    }
}

#[test]
fn a_rule_without_config_set_is_refused_and_the_elector_names_the_command() {
    let rule: Vec<String> = elector_rule()
        .into_iter()
        .filter(|r| r != "+config|set")
        .collect();
    let t = start(2, &rule);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let log = t.log("run", 0) + &t.log("run", 1);
        if log.contains("NOPERM")
            && log.contains("'config|set'")
            && log.contains("CONFIG SET min-replicas-to-write")
            && log.contains("docs/security.md")
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no NOPERM naming CONFIG SET within 10 s\n{}",
            t.logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    if let Some(line) = (t.log("run", 0) + &t.log("run", 1))
        .lines()
        .find(|l| l.contains("NOPERM"))
    {
        eprintln!("{line}");
    }
    for i in 0..2 {
        assert!(
            info(t.nodes[i].ports.data).contains("role:slave"),
            "n{i} was made writable without its fence"
        );
    }
}
