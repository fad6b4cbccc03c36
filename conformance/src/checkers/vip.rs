//! Checkers of the VIP scenarios (issue 20, docs/vip.md), over what the VIP
//! parts of a run recorded (`vip::VipRecord`) and the run's history.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{CheckResult, Violation};
use crate::history::{History, Ms, Outcome};
use crate::vip::{HolderSample, MonitorKind, VipRecord};

/// The sampling rounds in time order: (time, nodes holding the VIP).
fn rounds(samples: &[HolderSample]) -> Vec<(Ms, Vec<String>)> {
    let mut by_time: BTreeMap<Ms, Vec<String>> = BTreeMap::new();
    for s in samples {
        let held = by_time.entry(s.at_ms).or_default();
        if s.holds == Some(true) {
            held.push(s.node.clone());
        }
    }
    by_time.into_iter().collect()
}

/// Fails when two containers hold the VIP at once for longer than the lease
/// (from the first to the last sampling round that saw both), or when no
/// container ever held it (the checks below would judge nothing).
pub fn vip_single_holder(rec: &VipRecord, lease_ms: Ms) -> CheckResult {
    let rounds = rounds(&rec.holders);
    let mut violations = vec![];
    let mut notes = vec![];
    let mut window: Option<(Ms, Ms, Vec<String>)> = None;
    let mut windows = vec![];
    for (at, held) in &rounds {
        if held.len() >= 2 {
            let w = window.get_or_insert((*at, *at, held.clone()));
            w.1 = *at;
        } else if let Some(w) = window.take() {
            windows.push(w);
        }
    }
    windows.extend(window);
    for (start, end, nodes) in windows {
        let span = end - start;
        let what = format!(
            "{} held {} together for {span} ms (sampling rounds {start}..{end} ms)",
            nodes.join(" and "),
            rec.address
        );
        if span > lease_ms {
            violations.push(Violation::window(
                format!("{what}, longer than the lease {lease_ms} ms"),
                start,
                end,
                nodes,
            ));
        } else {
            notes.push(format!("{what}: within the lease {lease_ms} ms"));
        }
    }
    if !rounds.iter().any(|(_, h)| h.len() == 1) {
        violations.push(Violation::msg(format!(
            "no sampling round saw one holder of {} ({} rounds)",
            rec.address,
            rounds.len()
        )));
    }
    notes.push(format!("holders: {}", holder_changes(&rounds).join(", ")));
    CheckResult::new("vip_single_holder", violations, notes)
}

/// `n1 from 1200 ms` for every change of the single holder.
fn holder_changes(rounds: &[(Ms, Vec<String>)]) -> Vec<String> {
    let mut out = vec![];
    let mut last: Option<&str> = None;
    for (at, held) in rounds {
        let now = match held.as_slice() {
            [] => "none",
            [one] => one.as_str(),
            _ => "several",
        };
        if last != Some(now) {
            out.push(format!("{now} from {at} ms"));
            last = Some(now);
        }
    }
    out
}

/// Times the VIP left a node that held it alone: (time, old holder).
fn departures(rounds: &[(Ms, Vec<String>)]) -> Vec<(Ms, String)> {
    let mut out = vec![];
    let mut holder: Option<String> = None;
    for (at, held) in rounds {
        if let Some(h) = &holder {
            if !held.contains(h) {
                out.push((*at, h.clone()));
                holder = None;
            }
        }
        if let [one] = held.as_slice() {
            holder = Some(one.clone());
        }
    }
    out
}

/// The old holder's clients are cut, not left on `READONLY`: the monitor's
/// connection to a node the VIP left must end closed (reset by the old holder
/// or, for a dead one, by the new holder), and no connection may answer error
/// replies for longer than the lease without being closed.
pub fn vip_clients_disconnected(rec: &VipRecord, lease_ms: Ms) -> CheckResult {
    let mut violations = vec![];
    let mut notes = vec![];
    let mut conns: BTreeMap<u32, Vec<&crate::vip::MonitorEvent>> = BTreeMap::new();
    for e in rec
        .monitor
        .iter()
        .filter(|e| e.kind != MonitorKind::ConnectFailed)
    {
        conns.entry(e.conn).or_default().push(e);
    }
    for (no, events) in &conns {
        let node = events
            .iter()
            .find_map(|e| e.node.clone())
            .unwrap_or_else(|| "?".into());
        let errors: Vec<Ms> = events
            .iter()
            .filter(|e| e.kind == MonitorKind::ErrorReply)
            .map(|e| e.at_ms)
            .collect();
        if let (Some(first), Some(last)) = (errors.first(), errors.last()) {
            let span = last - first;
            let sample = events
                .iter()
                .find(|e| e.kind == MonitorKind::ErrorReply)
                .map_or("", |e| e.detail.as_str());
            let what = format!(
                "connection {no} to {node}: {} error replies over {span} ms ({sample})",
                errors.len()
            );
            if span > lease_ms {
                violations.push(Violation::window(
                    format!("{what}, longer than the lease {lease_ms} ms without being closed"),
                    *first,
                    *last,
                    vec![node.clone()],
                ));
            } else {
                notes.push(what);
            }
        }
    }
    let rounds = rounds(&rec.holders);
    let mut judged = 0;
    for (left_at, old) in departures(&rounds) {
        // The monitor's connection to the old holder open when the VIP left.
        let Some((no, events)) = conns.iter().find(|(_, ev)| {
            ev.first().is_some_and(|e| e.at_ms <= left_at)
                && ev.iter().any(|e| e.node.as_deref() == Some(old.as_str()))
                && ev
                    .last()
                    .is_some_and(|e| e.at_ms >= left_at.saturating_sub(1000))
        }) else {
            notes.push(format!(
                "the VIP left {old} at {left_at} ms with no monitor connection open to it"
            ));
            continue;
        };
        judged += 1;
        match events.iter().find(|e| e.kind == MonitorKind::Closed) {
            Some(closed) => notes.push(format!(
                "connection {no} to {old} closed at {} ms ({} ms after the VIP left it at {left_at} ms): {}",
                closed.at_ms,
                closed.at_ms as i64 - left_at as i64,
                closed.detail
            )),
            None => violations.push(Violation::window(
                format!(
                    "connection {no} to {old} was never closed after the VIP left it at {left_at} ms \
                     (last seen: {:?})",
                    events.last().map(|e| e.kind)
                ),
                left_at,
                events.last().map_or(left_at, |e| e.at_ms),
                vec![old.clone()],
            )),
        }
    }
    if judged == 0 {
        notes.push("no VIP move with a monitor connection on the old holder".into());
    }
    CheckResult::new("vip_clients_disconnected", violations, notes)
}

/// The preferred node holds the VIP at the end (preemption's hand-back).
pub fn vip_final_holder(rec: &VipRecord, expected: Option<&str>) -> CheckResult {
    let Some(expected) = expected else {
        return CheckResult::skipped("vip_final_holder", "no final_holder in the scenario");
    };
    let rounds = rounds(&rec.holders);
    let last = rounds.iter().rev().find(|(_, h)| !h.is_empty());
    let violations = match last {
        Some((_, h)) if h.as_slice() == [expected.to_string()] => vec![],
        Some((at, h)) => vec![Violation::msg(format!(
            "the last holder seen (at {at} ms) was {}, not {expected}",
            h.join(" and ")
        ))],
        None => vec![Violation::msg("the VIP was never held")],
    };
    CheckResult::new("vip_final_holder", violations, vec![])
}

/// Fault to first write through the VIP on the new primary.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VipFigures {
    pub fault: String,
    pub fault_ms: Ms,
    /// The first `SET` answered OK through the VIP by another node than the
    /// primary before the fault (WAIT not yet met).
    pub first_set_ms: Option<Ms>,
    /// The first durable write (SET and `WAIT quorum-1` met) there.
    pub first_durable_ms: Option<Ms>,
}

/// The figures of the first fault that had a primary before it.
pub fn vip_figures(h: &History) -> Option<VipFigures> {
    let f = h
        .faults
        .iter()
        .find(|f| f.primary_before.is_some() && f.kind != "restart")?;
    let old = f.primary_before.as_deref()?;
    let after = |ok: &dyn Fn(Outcome) -> bool| {
        h.writes
            .iter()
            .filter(|w| w.node != old && w.invoke_ms >= f.at_ms && ok(w.outcome))
            .map(|w| w.complete_ms - f.at_ms)
            .min()
    };
    Some(VipFigures {
        fault: f.label.clone(),
        fault_ms: f.at_ms,
        first_set_ms: after(&|o| matches!(o, Outcome::Ok | Outcome::NotAcked)),
        first_durable_ms: after(&|o| o == Outcome::Ok),
    })
}

/// Writes through the VIP resume on the new primary after the fault; the
/// note gives the times.
pub fn vip_writes_resume(figures: Option<&VipFigures>) -> CheckResult {
    let Some(f) = figures else {
        return CheckResult::skipped("vip_writes_resume", "no fault with a primary before it");
    };
    let ms = |v: Option<Ms>| v.map_or("never".to_string(), |v| format!("{v} ms"));
    let note = format!(
        "{} at {} ms: first SET through the VIP on the new primary after {}, first durable write \
         (SET + WAIT quorum-1) after {}",
        f.fault,
        f.fault_ms,
        ms(f.first_set_ms),
        ms(f.first_durable_ms)
    );
    let violations = if f.first_durable_ms.is_none() {
        vec![Violation::msg(format!(
            "no durable write through the VIP on a new primary after {}",
            f.fault
        ))]
    } else {
        vec![]
    };
    CheckResult::new("vip_writes_resume", violations, vec![note])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vip::MonitorEvent;

    fn samples(rounds: &[(Ms, &[&str])]) -> Vec<HolderSample> {
        let mut out = vec![];
        for (at, held) in rounds {
            for n in ["n1", "n2", "n3"] {
                out.push(HolderSample {
                    at_ms: *at,
                    node: n.into(),
                    holds: Some(held.contains(&n)),
                });
            }
        }
        out
    }

    fn record(rounds: &[(Ms, &[&str])], monitor: Vec<MonitorEvent>) -> VipRecord {
        VipRecord {
            address: "10.213.1.100".into(),
            port: 6379,
            holders: samples(rounds),
            monitor,
            figures: None,
        }
    }

    fn ev(at_ms: Ms, conn: u32, node: &str, kind: MonitorKind) -> MonitorEvent {
        MonitorEvent {
            at_ms,
            conn,
            node: Some(node.into()),
            kind,
            detail: String::new(),
        }
    }

    #[test]
    fn two_holders_longer_than_the_lease_fail_and_a_short_overlap_passes() {
        let long = record(
            &[
                (0, &["n1"]),
                (1000, &["n1", "n2"]),
                (2500, &["n1", "n2"]),
                (3000, &["n2"]),
            ],
            vec![],
        );
        assert!(!vip_single_holder(&long, 1000).passed);
        let short = record(
            &[(0, &["n1"]), (1000, &["n1", "n2"]), (1250, &["n2"])],
            vec![],
        );
        assert!(vip_single_holder(&short, 1000).passed);
    }

    #[test]
    fn a_vip_nobody_ever_held_fails() {
        assert!(!vip_single_holder(&record(&[(0, &[]), (250, &[])], vec![]), 1000).passed);
    }

    #[test]
    fn a_client_left_on_readonly_fails_and_a_closed_one_passes() {
        let rounds: &[(Ms, &[&str])] = &[(0, &["n1"]), (1000, &["n1"]), (2000, &["n2"])];
        let stuck = record(
            rounds,
            vec![
                ev(500, 1, "n1", MonitorKind::Ok),
                ev(2100, 1, "n1", MonitorKind::ErrorReply),
                ev(4000, 1, "n1", MonitorKind::ErrorReply),
            ],
        );
        let c = vip_clients_disconnected(&stuck, 1000);
        assert!(!c.passed);
        assert_eq!(c.violations.len(), 2, "{:?}", c.violations);
        let cut = record(
            rounds,
            vec![
                ev(500, 1, "n1", MonitorKind::Ok),
                ev(1900, 1, "n1", MonitorKind::Closed),
                ev(2200, 2, "n2", MonitorKind::Ok),
            ],
        );
        assert!(vip_clients_disconnected(&cut, 1000).passed);
    }

    #[test]
    fn the_final_holder_is_the_last_one_seen() {
        let r = record(&[(0, &["n2"]), (1000, &["n1"]), (2000, &[])], vec![]);
        assert!(vip_final_holder(&r, Some("n1")).passed);
        assert!(!vip_final_holder(&r, Some("n2")).passed);
        assert!(vip_final_holder(&r, None).skipped);
    }
}
