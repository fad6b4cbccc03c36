//! SVG timeline: which node was primary over time, faults shaded, write outcomes.

use std::fmt::Write;

use super::RunResult;
use crate::history::{History, Ms, Outcome, Sample};

const W: f64 = 1100.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;
const LANE: f64 = 24.0;
const GAP: f64 = 6.0;
const TOP: f64 = 70.0;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Primary,
    FencedPrimary,
    Replica,
    Candidate,
    Unreachable,
}

fn state(s: &Sample) -> State {
    if s.writable() {
        return State::Primary;
    }
    match (&s.data, &s.elector) {
        (None, None) => State::Unreachable,
        (Some(d), _) if d.role == "master" => State::FencedPrimary,
        (_, Some(e)) if e.role == "candidate" => State::Candidate,
        _ => State::Replica,
    }
}

fn color(s: State) -> &'static str {
    match s {
        State::Primary => "#2e9d4f",
        State::FencedPrimary => "#a6d9b3",
        State::Replica => "#9ecae1",
        State::Candidate => "#f4a742",
        State::Unreachable => "#d0d0d0",
    }
}

/// Renders the timeline of one run.
pub fn timeline_svg(r: &RunResult, h: &History) -> String {
    let span = h.end_ms.max(1) as f64;
    let pw = W - LEFT - RIGHT;
    let x = |t: Ms| LEFT + (t as f64 / span) * pw;
    let n = h.nodes.len() as f64;
    let writes_y = TOP + n * (LANE + GAP);
    let axis_y = writes_y + LANE + 16.0;
    let height = axis_y + 50.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{height}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let verdict = if r.passed { "PASS" } else { "FAIL" };
    let _ = writeln!(
        s,
        r#"<text x="{LEFT}" y="18" font-size="14" font-weight="bold">{} — {verdict}{}</text>"#,
        esc(&r.id()),
        r.metrics
            .failover_ms
            .map(|f| format!(" — failover {f} ms"))
            .unwrap_or_default()
    );
    // Faults, shaded over every lane, labels staggered on two rows.
    for (i, f) in h.faults.iter().enumerate() {
        let x0 = x(f.at_ms);
        let x1 = x(f.end_ms.unwrap_or(f.at_ms)).max(x0 + 2.0);
        let _ = writeln!(
            s,
            r##"<rect x="{x0:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="#e04040" fill-opacity="0.15"><title>{}</title></rect>"##,
            TOP - 4.0,
            x1 - x0,
            writes_y - TOP + LANE + 8.0,
            esc(&f.label)
        );
        let _ = writeln!(
            s,
            r##"<line x1="{x0:.1}" x2="{x0:.1}" y1="{:.1}" y2="{:.1}" stroke="#e04040"/>"##,
            TOP - 30.0 + (i % 2) as f64 * 12.0,
            writes_y + LANE
        );
        let _ = writeln!(
            s,
            r##"<text x="{:.1}" y="{:.1}" fill="#a02020">{}</text>"##,
            x0 + 2.0,
            TOP - 32.0 + (i % 2) as f64 * 12.0,
            esc(&f.label)
        );
    }
    // Node lanes.
    let by_node = h.samples_by_node();
    let validity = h.sample_validity_ms();
    for (i, node) in h.nodes.iter().enumerate() {
        let y = TOP + i as f64 * (LANE + GAP);
        let _ = writeln!(
            s,
            r#"<text x="8" y="{:.1}" font-weight="bold">{}</text>"#,
            y + LANE * 0.65,
            esc(node)
        );
        let _ = writeln!(
            s,
            r##"<rect x="{LEFT}" y="{y:.1}" width="{pw:.1}" height="{LANE}" fill="none" stroke="#eee"/>"##
        );
        let Some(samples) = by_node.get(node.as_str()) else {
            continue;
        };
        // Merge consecutive samples with the same state into one bar.
        let mut run: Option<(State, Ms, Ms)> = None;
        let mut bars: Vec<(State, Ms, Ms)> = vec![];
        for (k, smp) in samples.iter().enumerate() {
            let st = state(smp);
            let cap = smp.at_ms + validity;
            let end = samples.get(k + 1).map_or(cap, |nx| nx.at_ms.min(cap));
            match &mut run {
                Some((rs, _, re)) if *rs == st && *re >= smp.at_ms => *re = end,
                _ => {
                    if let Some(b) = run.take() {
                        bars.push(b);
                    }
                    run = Some((st, smp.at_ms, end));
                }
            }
        }
        bars.extend(run);
        for (st, a, b) in bars {
            let _ = writeln!(
                s,
                r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{}"/>"#,
                x(a),
                y + 2.0,
                (x(b) - x(a)).max(0.5),
                LANE - 4.0,
                color(st)
            );
        }
    }
    // Write outcomes, one column per pixel.
    let _ = writeln!(
        s,
        r#"<text x="8" y="{:.1}">writes</text>"#,
        writes_y + LANE * 0.65
    );
    let cols = pw as usize + 1;
    let mut ok = vec![false; cols];
    let mut bad = vec![false; cols];
    let mut unacked = vec![false; cols];
    for w in &h.writes {
        let c = ((x(w.complete_ms) - LEFT) as usize).min(cols - 1);
        match w.outcome {
            Outcome::Ok => ok[c] = true,
            Outcome::NotAcked => unacked[c] = true,
            Outcome::Fail | Outcome::Unknown => bad[c] = true,
        }
    }
    for c in 0..cols {
        let cx = LEFT + c as f64;
        if ok[c] {
            let _ = writeln!(
                s,
                r##"<line x1="{cx}" x2="{cx}" y1="{:.1}" y2="{:.1}" stroke="#2e9d4f"/>"##,
                writes_y + 1.0,
                writes_y + LANE / 2.0 - 1.0
            );
        }
        if bad[c] || unacked[c] {
            let colr = if bad[c] { "#d62728" } else { "#f4a742" };
            let _ = writeln!(
                s,
                r#"<line x1="{cx}" x2="{cx}" y1="{:.1}" y2="{:.1}" stroke="{colr}"/>"#,
                writes_y + LANE / 2.0 + 1.0,
                writes_y + LANE - 1.0
            );
        }
    }
    // Time axis.
    let step = [500u64, 1000, 2000, 5000, 10_000, 30_000, 60_000]
        .into_iter()
        .find(|st| h.end_ms / st <= 20)
        .unwrap_or(120_000);
    let _ = writeln!(
        s,
        r##"<line x1="{LEFT}" x2="{:.1}" y1="{axis_y:.1}" y2="{axis_y:.1}" stroke="#333"/>"##,
        LEFT + pw
    );
    let mut t = 0;
    while t <= h.end_ms {
        let tx = x(t);
        let _ = writeln!(
            s,
            r##"<line x1="{tx:.1}" x2="{tx:.1}" y1="{axis_y:.1}" y2="{:.1}" stroke="#333"/><text x="{tx:.1}" y="{:.1}" text-anchor="middle">{}s</text>"##,
            axis_y + 4.0,
            axis_y + 15.0,
            t as f64 / 1000.0
        );
        t += step;
    }
    // Legend.
    let ly = axis_y + 32.0;
    let legend = [
        ("writable primary", color(State::Primary)),
        ("fenced master", color(State::FencedPrimary)),
        ("replica", color(State::Replica)),
        ("candidate", color(State::Candidate)),
        ("unreachable", color(State::Unreachable)),
        ("fault", "#f3c0c0"),
        ("ack (top) / fail (bottom)", "#d62728"),
    ];
    let mut lx = LEFT;
    for (name, c) in legend {
        let _ = writeln!(
            s,
            r#"<rect x="{lx:.1}" y="{:.1}" width="12" height="10" fill="{c}"/><text x="{:.1}" y="{ly:.1}">{name}</text>"#,
            ly - 9.0,
            lx + 16.0
        );
        lx += 30.0 + name.len() as f64 * 6.2;
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::sample_run;

    #[test]
    fn the_timeline_has_a_lane_per_node_escaped_fault_labels_and_write_marks() {
        let (r, h) = sample_run();
        let svg = timeline_svg(&r, &h);
        assert!(svg.starts_with("<svg"));
        assert!(svg.trim_end().ends_with("</svg>"));
        for n in ["n1", "n2", "n3"] {
            assert!(svg.contains(&format!(">{n}</text>")), "lane {n}");
        }
        assert!(svg.contains("kill primary &lt;n1&gt; &amp; &lt;tag&gt;"));
        assert!(!svg.contains("<n1>"));
        assert!(svg.contains("#2e9d4f"), "primary bars and ack marks");
        assert!(svg.contains("#d62728"), "failed write marks");
    }
}
