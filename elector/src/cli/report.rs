//! The `elector status` table and the findings printed under it.
//!
//! Each row is a node's own view when its API answered, else the asked
//! node's memory of it. Views taken at different epochs are not comparable:
//! right after a failover the survivors still remember the dead node as the
//! primary of the epoch before. So a row whose view is older than the newest
//! epoch any node reports never says `primary`: it says `stale` (a node's
//! own, outdated view) or `unknown` (what another node last heard), and a
//! note says what it was. Problems (`! `) come first; what is merely worth
//! knowing, such as a switchover that already finished, follows as `- `.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::ClusterReport;
use crate::api::status::{Role, StatusSnapshot, SwitchoverPhase};

/// The table and the findings under it. Pure, so tests can pin the layout.
pub(crate) fn render_report(r: &ClusterReport, now_unix_ms: u64) -> String {
    let o = &r.origin;
    let (rows, selves, mut notes) = table(r, now_unix_ms);
    let mut out = String::new();
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
    write_columns(&mut out, &rows);
    let mut findings = cluster_findings(o, &selves);
    let mut info = Vec::new();
    for s in &selves {
        let (problems, notes_of) = node_findings(s);
        findings.extend(problems);
        info.extend(notes_of);
    }
    findings.append(&mut notes);
    for f in &findings {
        let _ = writeln!(out, "! {f}");
    }
    for i in &info {
        let _ = writeln!(out, "- {i}");
    }
    out
}

/// The newest epoch any view in the report carries: a node's own, or what
/// the asked node heard from a peer.
fn newest_epoch(r: &ClusterReport) -> u64 {
    let own = std::iter::once(r.origin.epoch).chain(
        r.views
            .values()
            .filter_map(|v| v.as_ref().ok().map(|s| s.epoch)),
    );
    let heard = r.origin.peers.iter().filter_map(|p| p.epoch);
    own.chain(heard).max().unwrap_or(0)
}

/// One row per node: the asked node's, then each peer's own view where its
/// API answered, else the asked node's view of it (with a note saying so).
/// Also returns every snapshot a node gave of itself, for the findings.
fn table(
    r: &ClusterReport,
    now_unix_ms: u64,
) -> (Vec<Vec<String>>, Vec<&StatusSnapshot>, Vec<String>) {
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
    let mut selves: Vec<&StatusSnapshot> = vec![o];
    let newest = newest_epoch(r);
    rows.push(row_from_self(o, "(asked)", newest, now_unix_ms));
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
                rows.push(row_from_self(own, &alive, newest, now_unix_ms));
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
                // What another node last heard is only as current as its
                // epoch, and says nothing once the peer is silent.
                let outdated = p.epoch.is_some_and(|e| e < newest) || !p.alive;
                let role = match p.role {
                    Some(Role::Primary) if outdated => {
                        notes.push(format!(
                            "{}: last heard as primary at epoch {} by {}; the cluster has reached epoch {newest}",
                            p.id,
                            opt(p.epoch),
                            o.node_id
                        ));
                        "unknown".to_string()
                    }
                    role => opt(role),
                };
                rows.push(vec![
                    p.id.clone(),
                    role,
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
    (rows, selves, notes)
}

/// Left-aligned columns two spaces apart; the last column is not padded.
fn write_columns(out: &mut String, rows: &[Vec<String>]) {
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|c| {
            rows.iter()
                .map(|row| row[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for row in rows {
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
}

/// What the views say about the cluster as a whole, most serious first.
fn cluster_findings(o: &StatusSnapshot, selves: &[&StatusSnapshot]) -> Vec<String> {
    let mut findings: Vec<String> = Vec::new();
    let primaries: Vec<&str> = selves
        .iter()
        .filter(|s| s.is_writable_primary())
        .map(|s| s.node_id.as_str())
        .collect();
    if primaries.len() > 1 {
        findings.push(format!(
            "DANGER: more than one unfenced primary: {}",
            primaries.join(", ")
        ));
    }
    let named: BTreeSet<Option<&str>> = selves.iter().map(|s| s.primary.as_deref()).collect();
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
    for s in selves {
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
    findings
}

/// What one node says about itself: its data node, a switchover, rejections.
/// Returns (problems now, notes): a VIP held without trouble or a
/// switchover that already finished is a note, not a problem.
fn node_findings(s: &StatusSnapshot) -> (Vec<String>, Vec<String>) {
    let mut findings: Vec<String> = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    if !s.data_node.reachable {
        findings.push(format!(
            "{}: data node {} unreachable",
            s.node_id, s.data_node.address
        ));
    } else if s.data_node.link_up == Some(false) && s.role == Role::Replica {
        findings.push(format!("{}: replication link is down", s.node_id));
    }
    if let Some(w) = &s.watchdog {
        if !w.live {
            findings.push(match w.last_probe_ms_ago {
                Some(ago) => format!(
                    "{}: no watchdog: its last /healthz poll was {} s ago (the data node has no dead-man switch)",
                    s.node_id,
                    ago / 1000
                ),
                None => format!(
                    "{}: no watchdog has polled since this elector started (the data node has no dead-man switch)",
                    s.node_id
                ),
            });
        }
        if w.clamps > 0 {
            notes.push(format!(
                "{}: the watchdog fenced the data node {} time(s) (the elector was silent past its lease)",
                s.node_id, w.clamps
            ));
        }
    }
    if let Some(vip) = s.vip.as_ref().filter(|v| v.held || v.last_error.is_some()) {
        let mut line = format!(
            "{}: holds vip {}",
            s.node_id,
            if vip.held { &vip.address } else { "(no)" }
        );
        if let (Some(since), Some(why)) = (vip.since_unix_ms, &vip.reason) {
            let _ = write!(line, " since unix ms {since} ({why})");
        }
        if let Some(e) = &vip.last_error {
            let _ = write!(line, "; last move failed ({} failures): {e}", vip.failures);
            findings.push(line);
        } else {
            notes.push(line);
        }
    }
    if let Some(sw) = &s.switchover {
        let (phase, running) = match sw.phase {
            SwitchoverPhase::CatchingUp => ("catching up", true),
            SwitchoverPhase::HandingOver => ("handing over", true),
            SwitchoverPhase::Completed => ("completed", false),
            SwitchoverPhase::RolledBack => ("rolled back", false),
        };
        let mut line = format!("{}: switchover to {} {phase}", s.node_id, sw.to);
        if !running {
            let _ = write!(line, " (started unix ms {})", sw.started_at_unix_ms);
        }
        if let Some(p) = sw.write_pause_ms {
            let _ = write!(line, ", writes paused {p} ms");
        }
        if let Some(e) = &sw.error {
            let _ = write!(line, ": {e}");
        }
        if running {
            findings.push(line);
        } else {
            notes.push(line);
        }
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
    (findings, notes)
}

/// `1.2s`, `45s`, `3m05s`, `2h10m`, `4d03h`.
pub(crate) fn format_age(ms: u64) -> String {
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

/// A node's own view. One taken at an epoch older than `newest` does not
/// get to say `primary`: another node has been elected since.
fn row_from_self(s: &StatusSnapshot, alive: &str, newest: u64, now_unix_ms: u64) -> Vec<String> {
    let role = if s.role == Role::Primary && s.epoch < newest {
        "stale".to_string()
    } else {
        s.role.to_string()
    };
    vec![
        s.node_id.clone(),
        role,
        s.epoch.to_string(),
        opt(s.primary.clone()),
        yes_no(s.fenced),
        alive.to_string(),
        opt(s.data_node.offset),
        opt(s.data_node.lag),
        last_transition(s, now_unix_ms),
    ]
}
