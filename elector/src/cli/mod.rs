//! `elector status` and `elector switchover`: the operator's view and lever.
//!
//! `status` asks one elector for `/status`, then asks every peer whose API
//! address it knows for *its own* view, and prints one row per node. Each
//! node describing itself is more truthful than one node describing the rest
//! (a partitioned node still knows its own role), and putting the views side
//! by side is what exposes disagreement: two unfenced primaries, nodes that
//! name different primaries, a node stuck in an old epoch. Those are called
//! out below the table in plain words, along with the last transition and
//! its reason, so "why did the primary move?" is answered on one screen.
//!
//! The HTTP client is `ureq` (blocking, no TLS): the CLI is a short-lived
//! process and needs no async runtime.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::time::Duration;

use thiserror::Error;

use crate::api::request_auth::sign;
use crate::api::status::{Role, StatusSnapshot};
use crate::net::auth::{unix_ms_now, Secret};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
const READ_TIMEOUT: Duration = Duration::from_secs(3);

/// Why a CLI command failed.
#[derive(Debug, Error)]
pub enum CliError {
    #[error("{url}: {message}")]
    Transport { url: String, message: String },
    #[error("{url}: HTTP {code}: {body}")]
    Http {
        url: String,
        code: u16,
        body: String,
    },
    #[error("{url}: not a status document: {source}")]
    Json {
        url: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("switchover to {to} did not happen: {message}")]
    Switchover { to: String, message: String },
    #[error("writing output: {0}")]
    Io(#[from] std::io::Error),
}

/// `HOST:PORT` (or a full `http://` URL) plus a path.
fn url(node: &str, path: &str) -> String {
    let base = node.trim_end_matches('/');
    if base.starts_with("http://") || base.starts_with("https://") {
        format!("{base}{path}")
    } else {
        format!("http://{base}{path}")
    }
}

fn agent(read_timeout: Duration) -> ureq::Agent {
    ureq::AgentBuilder::new()
        .timeout_connect(CONNECT_TIMEOUT)
        .timeout_read(read_timeout)
        .build()
}

/// GET returning the body text.
fn get_text(node: &str, path: &str) -> Result<String, CliError> {
    let url = url(node, path);
    match agent(READ_TIMEOUT).get(&url).call() {
        Ok(r) => r.into_string().map_err(|e| CliError::Transport {
            url: url.clone(),
            message: e.to_string(),
        }),
        Err(ureq::Error::Status(code, r)) => Err(CliError::Http {
            url,
            code,
            body: r.into_string().unwrap_or_default().trim().to_string(),
        }),
        Err(e) => Err(CliError::Transport {
            url,
            message: e.to_string(),
        }),
    }
}

/// Fetches and parses one node's `/status`, also returning the raw body.
pub fn fetch_status(node: &str) -> Result<(StatusSnapshot, String), CliError> {
    let body = get_text(node, "/status")?;
    let snap = serde_json::from_str(&body).map_err(|source| CliError::Json {
        url: url(node, "/status"),
        source,
    })?;
    Ok((snap, body))
}

/// The node asked, and what each peer with a known API said about itself.
#[derive(Debug, Clone)]
pub struct ClusterReport {
    /// Address the operator gave.
    pub asked: String,
    pub origin: StatusSnapshot,
    /// Peer id -> its own snapshot, or why it could not be fetched. Peers
    /// with no API address are absent.
    pub views: BTreeMap<String, Result<StatusSnapshot, String>>,
}

/// Queries `node` and every peer API it lists.
pub fn gather(node: &str) -> Result<ClusterReport, CliError> {
    let (origin, _) = fetch_status(node)?;
    let mut views = BTreeMap::new();
    for p in &origin.peers {
        if let Some(api) = &p.api {
            views.insert(
                p.id.clone(),
                fetch_status(api).map(|(s, _)| s).map_err(|e| e.to_string()),
            );
        }
    }
    Ok(ClusterReport {
        asked: node.to_string(),
        origin,
        views,
    })
}

/// `1.2s`, `45s`, `3m05s`, `2h10m`, `4d03h`.
pub fn format_age(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0 => format!("{ms}ms"),
        1..=9 => format!("{}.{}s", s, (ms % 1000) / 100),
        10..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        3600..=86_399 => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
        _ => format!("{}d{:02}h", s / 86_400, (s % 86_400) / 3600),
    }
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map(|x| x.to_string()).unwrap_or_else(|| "-".into())
}

fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.to_string()
}

fn last_transition(s: &StatusSnapshot, now_unix_ms: u64) -> String {
    match s.transitions.last() {
        None => "-".into(),
        Some(t) => {
            let change = match t.fenced {
                Some(true) => format!("{} fenced", t.to),
                Some(false) => format!("{} writable", t.to),
                None => format!("{} -> {}", t.from, t.to),
            };
            format!(
                "{change} ({}) {} ago",
                t.reason,
                format_age(now_unix_ms.saturating_sub(t.at_unix_ms))
            )
        }
    }
}

fn row_from_self(s: &StatusSnapshot, alive: &str, now_unix_ms: u64) -> Vec<String> {
    vec![
        s.node_id.clone(),
        s.role.to_string(),
        s.epoch.to_string(),
        opt(s.primary.clone()),
        yes_no(s.fenced),
        alive.to_string(),
        opt(s.data_node.offset),
        opt(s.data_node.lag),
        last_transition(s, now_unix_ms),
    ]
}

/// The table and the findings under it. Pure, so tests can pin the layout.
pub fn render_report(r: &ClusterReport, now_unix_ms: u64) -> String {
    let o = &r.origin;
    let mut rows: Vec<Vec<String>> = vec![vec![
        "NODE".into(),
        "ROLE".into(),
        "EPOCH".into(),
        "PRIMARY".into(),
        "FENCED".into(),
        "ALIVE".into(),
        "OFFSET".into(),
        "LAG".into(),
        "LAST TRANSITION".into(),
    ]];
    let mut notes: Vec<String> = Vec::new();
    // Every node's own snapshot we have, for cross-checks.
    let mut selves: Vec<&StatusSnapshot> = vec![o];
    rows.push(row_from_self(o, "(asked)", now_unix_ms));
    for p in &o.peers {
        let alive = if p.alive {
            format!("yes {}", p.last_seen_ms.map(format_age).unwrap_or_default())
                .trim()
                .to_string()
        } else {
            match p.last_seen_ms {
                Some(ms) => format!("NO {}", format_age(ms)),
                None => "NO".into(),
            }
        };
        match r.views.get(&p.id) {
            Some(Ok(own)) => {
                rows.push(row_from_self(own, &alive, now_unix_ms));
                selves.push(own);
            }
            other => {
                let why = match (other, &p.api) {
                    (Some(Err(e)), _) => format!(
                        "{}: API unreachable ({e}); row shows {}'s view",
                        p.id, o.node_id
                    ),
                    _ => format!(
                        "{}: no API address known; row shows {}'s view",
                        p.id, o.node_id
                    ),
                };
                notes.push(why);
                rows.push(vec![
                    p.id.clone(),
                    opt(p.role),
                    opt(p.epoch),
                    "?".into(),
                    "?".into(),
                    alive,
                    opt(p.offset),
                    "-".into(),
                    "?".into(),
                ]);
            }
        }
    }

    let mut out = String::new();
    let primaries: Vec<&str> = selves
        .iter()
        .filter(|s| s.is_writable_primary())
        .map(|s| s.node_id.as_str())
        .collect();
    let _ = writeln!(
        out,
        "cluster: {} nodes, quorum {} | primary {} | epoch {} | asked {} ({})",
        o.cluster_size,
        o.quorum,
        o.primary.as_deref().unwrap_or("none"),
        o.epoch,
        o.node_id,
        r.asked
    );
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|c| {
            rows.iter()
                .map(|row| row[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for row in &rows {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            if c + 1 == row.len() {
                line.push_str(cell);
            } else {
                let _ = write!(line, "{:<w$}  ", cell, w = widths[c]);
            }
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }

    // Findings, most serious first.
    let mut findings: Vec<String> = Vec::new();
    if primaries.len() > 1 {
        findings.push(format!(
            "DANGER: more than one unfenced primary: {}",
            primaries.join(", ")
        ));
    }
    let named: std::collections::BTreeSet<Option<&str>> =
        selves.iter().map(|s| s.primary.as_deref()).collect();
    if named.len() > 1 {
        let views: Vec<String> = selves
            .iter()
            .map(|s| {
                format!(
                    "{} says {}",
                    s.node_id,
                    s.primary.as_deref().unwrap_or("none")
                )
            })
            .collect();
        findings.push(format!(
            "nodes disagree on the primary: {}",
            views.join(", ")
        ));
    }
    let max_epoch = selves.iter().map(|s| s.epoch).max().unwrap_or(0);
    for s in &selves {
        if s.epoch < max_epoch {
            findings.push(format!(
                "{} is at epoch {} (cluster has reached {})",
                s.node_id, s.epoch, max_epoch
            ));
        }
    }
    if o.primary.is_none() {
        findings.push("no primary: an election is under way or no quorum can be formed".into());
    }
    if !o.quorum_ok() {
        findings.push(format!(
            "{} hears {} of {} nodes (quorum {}): it cannot elect or keep a primary",
            o.node_id,
            o.alive_count(),
            o.cluster_size,
            o.quorum
        ));
    }
    for s in &selves {
        if !s.data_node.reachable {
            findings.push(format!(
                "{}: data node {} unreachable",
                s.node_id, s.data_node.address
            ));
        } else if s.data_node.link_up == Some(false) && s.role == Role::Replica {
            findings.push(format!("{}: replication link is down", s.node_id));
        }
        if let Some(sw) = &s.switchover {
            let mut line = format!("{}: switchover to {} {:?}", s.node_id, sw.to, sw.phase)
                .replace("CatchingUp", "catching up")
                .replace("HandingOver", "handing over")
                .replace("Completed", "completed")
                .replace("RolledBack", "rolled back");
            if let Some(p) = sw.write_pause_ms {
                let _ = write!(line, ", writes paused {p} ms");
            }
            if let Some(e) = &sw.error {
                let _ = write!(line, ": {e}");
            }
            findings.push(line);
        }
        let rejected: Vec<String> = s
            .rejected
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(k, n)| format!("{k}={n}"))
            .collect();
        if !rejected.is_empty() {
            findings.push(format!(
                "{}: rejected messages {}",
                s.node_id,
                rejected.join(" ")
            ));
        }
    }
    for f in findings.iter().chain(notes.iter()) {
        let _ = writeln!(out, "! {f}");
    }
    out
}

fn now_unix_ms() -> u64 {
    crate::net::auth::unix_ms_now()
}

/// `elector status --node HOST:PORT [--json] [--watch --interval-ms N]`.
/// With `watch`, redraws every interval until interrupted (Ctrl-C); a node
/// that stops answering is shown as an error line, not a crash, since that is
/// exactly when an operator is watching.
pub fn status_command(node: &str, json: bool, watch: Option<Duration>) -> Result<(), CliError> {
    let mut stdout = std::io::stdout();
    loop {
        if json {
            // JSON: the asked node's document as served. Under --watch one
            // compact document per line (NDJSON), to pipe into jq or a file.
            match (fetch_status(node), watch) {
                (Ok((_, body)), None) => write!(stdout, "{}", body)?,
                (Ok((snap, _)), Some(_)) => {
                    let line = serde_json::to_string(&snap).map_err(|source| CliError::Json {
                        url: url(node, "/status"),
                        source,
                    })?;
                    writeln!(stdout, "{line}")?;
                }
                (Err(e), None) => return Err(e),
                (Err(e), Some(_)) => writeln!(
                    stdout,
                    "{{\"error\":{}}}",
                    serde_json::Value::from(e.to_string())
                )?,
            }
        } else {
            let text = match gather(node) {
                Ok(report) => render_report(&report, now_unix_ms()),
                Err(e) if watch.is_some() => format!("! {e}\n"),
                Err(e) => return Err(e),
            };
            if let Some(every) = watch {
                // Clear the screen and home the cursor, then redraw.
                write!(
                    stdout,
                    "\x1b[2J\x1b[H{text}\n(every {}, Ctrl-C to stop)\n",
                    format_age(every.as_millis() as u64)
                )?;
            } else {
                write!(stdout, "{text}")?;
            }
        }
        stdout.flush()?;
        match watch {
            Some(every) => std::thread::sleep(every),
            None => return Ok(()),
        }
    }
}

/// POSTs a switchover; on 409 `not_primary` with the primary's API known,
/// asks that node instead (once).
pub fn switchover(
    node: &str,
    to: &str,
    timeout: Duration,
    key: Option<&Secret>,
) -> Result<serde_json::Value, CliError> {
    let body = serde_json::json!({"to": to, "timeout_ms": timeout.as_millis() as u64}).to_string();
    let mut target = node.to_string();
    for attempt in 0..2 {
        let url = url(&target, "/switchover");
        let mut req = agent(timeout + Duration::from_secs(10))
            .post(&url)
            .set("content-type", "application/json");
        if let Some(key) = key {
            // A fresh timestamp per attempt: the API refuses a reused one.
            let signed = sign(key, "POST", "/switchover", unix_ms_now(), body.as_bytes());
            req = req.set("authorization", &signed);
        }
        let res = req.send_string(&body);
        let (code, text) = match res {
            Ok(r) => (r.status(), r.into_string().unwrap_or_default()),
            Err(ureq::Error::Status(code, r)) => (code, r.into_string().unwrap_or_default()),
            Err(e) => {
                return Err(CliError::Transport {
                    url,
                    message: e.to_string(),
                })
            }
        };
        let value: serde_json::Value =
            serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text.clone()));
        if code == 200 {
            return Ok(value);
        }
        if code == 409 && value["error"] == "not_primary" && attempt == 0 {
            if let Some(api) = value["primary_api"].as_str() {
                tracing::info!(from = %target, to = api, "not the primary; asking the primary");
                target = api.to_string();
                continue;
            }
        }
        let message = value["message"]
            .as_str()
            .map(|m| format!("HTTP {code}: {m}"))
            .unwrap_or_else(|| format!("HTTP {code}: {text}"));
        return Err(CliError::Switchover {
            to: to.to_string(),
            message,
        });
    }
    Err(CliError::Switchover {
        to: to.to_string(),
        message: "the node named as primary is not the primary either".into(),
    })
}

/// `elector switchover --node HOST:PORT --to ID [--timeout-ms N]`: prints the
/// outcome document (new epoch, measured write pause, ...).
pub fn switchover_command(
    node: &str,
    to: &str,
    timeout: Duration,
    key: Option<&Secret>,
) -> Result<(), CliError> {
    let outcome = switchover(node, to, timeout, key)?;
    let pretty = serde_json::to_string_pretty(&outcome).unwrap_or_else(|_| outcome.to_string());
    let mut stdout = std::io::stdout();
    writeln!(stdout, "switchover to {to} completed:\n{pretty}")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::status::{PeerStatus, SwitchoverPhase, SwitchoverState, TransitionRecord};

    const NOW: u64 = 1_760_000_100_000;

    fn node(id: &str, role: Role, epoch: u64, primary: Option<&str>) -> StatusSnapshot {
        let mut s = StatusSnapshot::initial(id, "kevy", &format!("{id}:6379"), 3);
        s.role = role;
        s.epoch = epoch;
        s.primary = primary.map(str::to_string);
        s.fenced = role != Role::Primary;
        s.data_node.reachable = true;
        s.data_node.offset = Some(1234);
        s.data_node.lag = Some(0);
        s.transitions.push(TransitionRecord {
            at_unix_ms: NOW - 12_000,
            from: Role::Candidate,
            to: role,
            epoch,
            reason: if role == Role::Primary {
                "won_election"
            } else {
                "lost_election"
            }
            .into(),
            fenced: None,
        });
        s
    }

    fn peer(id: &str, alive: bool, api: Option<&str>) -> PeerStatus {
        PeerStatus {
            id: id.into(),
            alive,
            role: Some(Role::Replica),
            epoch: Some(3),
            offset: Some(1200),
            last_seen_ms: Some(if alive { 40 } else { 7_500 }),
            api: api.map(str::to_string),
        }
    }

    fn healthy() -> ClusterReport {
        let mut n1 = node("n1", Role::Primary, 3, Some("n1"));
        n1.peers = vec![peer("n2", true, Some("n2:9300")), peer("n3", true, None)];
        let n2 = node("n2", Role::Replica, 3, Some("n1"));
        ClusterReport {
            asked: "127.0.0.1:9301".into(),
            origin: n1,
            views: [("n2".to_string(), Ok(n2))].into_iter().collect(),
        }
    }

    #[test]
    fn the_table_shows_every_node_with_its_last_transition_and_reason() {
        let text = render_report(&healthy(), NOW);
        let expected = "\
cluster: 3 nodes, quorum 2 | primary n1 | epoch 3 | asked n1 (127.0.0.1:9301)
NODE  ROLE     EPOCH  PRIMARY  FENCED  ALIVE     OFFSET  LAG  LAST TRANSITION
n1    primary  3      n1       no      (asked)   1234    0    candidate -> primary (won_election) 12s ago
n2    replica  3      n1       yes     yes 40ms  1234    0    candidate -> replica (lost_election) 12s ago
n3    replica  3      ?        ?       yes 40ms  1200    -    ?
! n3: no API address known; row shows n1's view
";
        assert_eq!(text, expected, "\n{text}");
    }

    #[test]
    fn two_unfenced_primaries_are_called_out_first() {
        let mut r = healthy();
        let mut rogue = node("n2", Role::Primary, 2, Some("n2"));
        rogue.fenced = false;
        r.views.insert("n2".into(), Ok(rogue));
        let text = render_report(&r, NOW);
        let findings: Vec<&str> = text.lines().filter(|l| l.starts_with("! ")).collect();
        assert_eq!(
            findings[0],
            "! DANGER: more than one unfenced primary: n1, n2"
        );
        assert!(text.contains("! nodes disagree on the primary: n1 says n1, n2 says n2"));
        assert!(text.contains("! n2 is at epoch 2 (cluster has reached 3)"));
    }

    #[test]
    fn a_dead_peer_and_a_lost_quorum_are_explained() {
        let mut r = healthy();
        r.origin.peers = vec![peer("n2", false, Some("n2:9300")), peer("n3", false, None)];
        r.origin.primary = None;
        r.origin.role = Role::Candidate;
        r.views
            .insert("n2".into(), Err("connection refused".into()));
        let text = render_report(&r, NOW);
        assert!(
            text.contains("n2    replica    3      ?        ?       NO 7.5s"),
            "\n{text}"
        );
        assert!(text.contains("! no primary: an election is under way or no quorum can be formed"));
        assert!(
            text.contains("! n1 hears 1 of 3 nodes (quorum 2): it cannot elect or keep a primary")
        );
        assert!(text.contains("! n2: API unreachable (connection refused); row shows n1's view"));
    }

    #[test]
    fn a_switchover_and_rejected_messages_are_reported() {
        let mut r = healthy();
        r.origin.switchover = Some(SwitchoverState {
            to: "n2".into(),
            phase: SwitchoverPhase::CatchingUp,
            started_at_unix_ms: NOW - 100,
            deadline_unix_ms: NOW + 9_900,
            primary_offset: Some(1234),
            target_offset: Some(1200),
            write_pause_ms: None,
            error: None,
        });
        r.origin.rejected.insert("bad_tag".into(), 3);
        r.origin.rejected.insert("replay".into(), 0);
        let text = render_report(&r, NOW);
        assert!(
            text.contains("! n1: switchover to n2 catching up\n"),
            "\n{text}"
        );
        assert!(
            text.contains("! n1: rejected messages bad_tag=3\n"),
            "\n{text}"
        );
    }

    #[test]
    fn ages_are_short_and_readable() {
        assert_eq!(format_age(40), "40ms");
        assert_eq!(format_age(7_500), "7.5s");
        assert_eq!(format_age(45_000), "45s");
        assert_eq!(format_age(185_000), "3m05s");
        assert_eq!(format_age(7_800_000), "2h10m");
        assert_eq!(format_age(3 * 86_400_000 + 3_600_000), "3d01h");
    }

    #[test]
    fn node_addresses_become_urls() {
        assert_eq!(
            url("127.0.0.1:9300", "/status"),
            "http://127.0.0.1:9300/status"
        );
        assert_eq!(url("[::1]:9300", "/status"), "http://[::1]:9300/status");
        assert_eq!(url("http://h:1/", "/status"), "http://h:1/status");
    }

    /// End to end against the real API server: the CLI gathers the asked
    /// node's view and a peer's own view, and switchover follows the
    /// `not_primary` pointer to the primary.
    #[tokio::test]
    async fn the_cli_reads_real_apis_and_switchover_is_redirected_to_the_primary() {
        use crate::api::metrics::Metrics;
        use crate::api::{serve, ApiState};
        use std::sync::Arc;
        use tokio::sync::{mpsc, oneshot, watch};

        let l1 = crate::api::listen::bind_tcp("127.0.0.1:0").expect("bind");
        let l2 = crate::api::listen::bind_tcp("127.0.0.1:0").expect("bind");
        let a1 = l1.local_addr().expect("addr").to_string();
        let a2 = l2.local_addr().expect("addr").to_string();

        let mut n1 = node("n1", Role::Primary, 3, Some("n1"));
        n1.peers = vec![peer("n2", true, Some(&a2))];
        let mut n2 = node("n2", Role::Replica, 3, Some("n1"));
        n2.peers = vec![peer("n1", true, Some(&a1))];

        let (_s1, r1) = watch::channel(n1);
        let (_s2, r2) = watch::channel(n2);
        let (tx1, mut rx1) = mpsc::channel(1);
        let (tx2, _rx2) = mpsc::channel(1);
        let (_stop, stopped) = oneshot::channel::<()>();
        let (_stop2, stopped2) = oneshot::channel::<()>();
        let metrics = Arc::new(Metrics::new());
        tokio::spawn(serve(
            l1,
            ApiState {
                status: r1,
                metrics: Arc::clone(&metrics),
                switchover: tx1,
                request_auth: None,
                loop_beat: Arc::new(crate::api::LoopBeat::new(Duration::from_secs(60))),
            },
            async {
                let _ = stopped.await;
            },
        ));
        tokio::spawn(serve(
            l2,
            ApiState {
                status: r2,
                metrics,
                switchover: tx2,
                request_auth: None,
                loop_beat: Arc::new(crate::api::LoopBeat::new(Duration::from_secs(60))),
            },
            async {
                let _ = stopped2.await;
            },
        ));
        tokio::spawn(async move {
            while let Some(req) = rx1.recv().await {
                let _ = req
                    .reply
                    .send(Ok(serde_json::json!({"new_primary": req.to, "epoch": 4})));
            }
        });

        let asked = a2.clone();
        let (report, outcome) = tokio::task::spawn_blocking(move || {
            (
                gather(&asked).expect("gather"),
                switchover(&asked, "n2", Duration::from_secs(1), None).expect("switchover via n1"),
            )
        })
        .await
        .expect("join");
        assert_eq!(report.origin.node_id, "n2");
        assert!(matches!(report.views.get("n1"), Some(Ok(s)) if s.role == Role::Primary));
        let text = render_report(&report, NOW);
        assert!(text.contains("n1    primary"), "\n{text}");
        assert_eq!(outcome["new_primary"], "n2");
        assert_eq!(outcome["epoch"], 4);
    }
}
