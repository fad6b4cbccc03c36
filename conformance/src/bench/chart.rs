//! The benchmark chart: one row per (scenario, target), a min–max bar, a p95
//! tick and the median as a dot, on one shared millisecond axis.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::{Plan, Stats, FAILOVER_SCENARIOS};
use crate::target::TargetKind;

const W: f64 = 900.0;
const LEFT: f64 = 250.0;
const RIGHT: f64 = 40.0;
const ROW: f64 = 26.0;
const TOP: f64 = 60.0;

fn color(t: TargetKind) -> &'static str {
    match t {
        TargetKind::ElectorKevy => "#2e9d4f",
        TargetKind::ElectorRedis => "#1f6fb4",
        TargetKind::KevyBuiltin => "#e08a1e",
        TargetKind::RedisSentinel => "#c0392b",
    }
}

/// (median, p95, min, max) in ms.
type Summary = (u64, u64, u64, u64);

/// A round axis end above `max` (ms).
pub fn axis_end(max: u64) -> u64 {
    let step = 1000;
    (max / step + 1) * step
}

/// Renders the chart.
pub fn failover_svg(st: &BTreeMap<(String, TargetKind), Stats>, plan: &Plan) -> String {
    let rows: Vec<(&str, TargetKind, Option<Summary>)> = FAILOVER_SCENARIOS
        .iter()
        .flat_map(|scn| {
            plan.targets.iter().map(move |&t| {
                let sum = st.get(&(scn.to_string(), t)).and_then(|x| x.summary());
                (*scn, t, sum)
            })
        })
        .collect();
    let max = rows
        .iter()
        .filter_map(|r| r.2.map(|v| v.3))
        .max()
        .unwrap_or(1000);
    let end = axis_end(max) as f64;
    let pw = W - LEFT - RIGHT;
    let x = |v: u64| LEFT + v as f64 / end * pw;
    let h = TOP + rows.len() as f64 * ROW + 50.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{W}" height="{h}" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="10" y="22" font-size="15">Durable failover: fault to first write acknowledged by a replica ({} ms detection, {} runs each)</text>"#,
        plan.down_after_ms, plan.runs
    );
    let _ = writeln!(
        s,
        r##"<text x="10" y="42" fill="#555">bar: min–max, tick: p95, dot: median; a row without a bar had no acknowledged write after the fault</text>"##
    );
    let axis_y = TOP + rows.len() as f64 * ROW + 8.0;
    let mut tick = 0;
    while tick as f64 <= end {
        let tx = x(tick);
        let _ = writeln!(
            s,
            r##"<line x1="{tx:.1}" y1="{TOP}" x2="{tx:.1}" y2="{axis_y}" stroke="#e6e6e6"/><text x="{tx:.1}" y="{:.1}" text-anchor="middle" fill="#555">{}s</text>"##,
            axis_y + 16.0,
            tick / 1000
        );
        tick += 1000;
    }
    for (i, (scn, t, sum)) in rows.iter().enumerate() {
        let y = TOP + i as f64 * ROW + ROW / 2.0;
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{scn} · {}</text>"#,
            LEFT - 8.0,
            y + 4.0,
            t.name()
        );
        let Some((med, p95, min, max)) = *sum else {
            let _ = writeln!(
                s,
                r##"<text x="{LEFT}" y="{:.1}" fill="#999">no data</text>"##,
                y + 4.0
            );
            continue;
        };
        let c = color(*t);
        let _ = writeln!(
            s,
            r#"<line x1="{:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="{c}" stroke-width="6" stroke-opacity="0.35"/>"#,
            x(min),
            x(max)
        );
        let _ = writeln!(
            s,
            r#"<line x1="{0:.1}" y1="{1:.1}" x2="{0:.1}" y2="{2:.1}" stroke="{c}" stroke-width="2"/>"#,
            x(p95),
            y - 8.0,
            y + 8.0
        );
        let _ = writeln!(
            s,
            r#"<circle cx="{:.1}" cy="{y:.1}" r="5" fill="{c}"/><text x="{:.1}" y="{:.1}" fill="{c}">{med} ms</text>"#,
            x(med),
            x(max) + 8.0,
            y + 4.0
        );
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_axis_ends_on_the_next_whole_second_above_the_slowest_run() {
        assert_eq!(axis_end(4999), 5000);
        assert_eq!(axis_end(5000), 6000);
    }

    #[test]
    fn every_target_gets_a_row_and_missing_figures_say_so() {
        let plan = Plan {
            targets: vec![TargetKind::ElectorRedis, TargetKind::RedisSentinel],
            runs: 3,
            soak_runs: 0,
            down_after_ms: 5000,
        };
        let mut st = BTreeMap::new();
        st.insert(
            ("primary-kill".to_string(), TargetKind::ElectorRedis),
            Stats {
                runs: 3,
                failover: vec![5100, 5200, 5300],
                ..Default::default()
            },
        );
        let svg = failover_svg(&st, &plan);
        assert!(svg.contains("primary-kill · elector+redis"));
        assert!(svg.contains("5200 ms"));
        assert!(svg.contains("isolate-primary · redis-sentinel"));
        assert_eq!(svg.matches("no data").count(), 3);
    }
}
