//! Property-based fuzzing of the config loader and `render-config` (issue 39
//! §5), through their public API: `elector::config::parse` (the pre-scan,
//! the YAML, the checks) and `RenderArgs` as clap parses them.
//!
//! cargo-fuzz needs a nightly toolchain, which cannot be installed here, so
//! these are proptest properties that run in `cargo test`; `FUZZ_CASES=<n>`
//! raises the case count for `just fuzz`. What must hold: any text gives a
//! config or an error (never a panic, never a hang), and a mutation of an
//! example that still loads is still a config that passes its own checks.

use clap::Parser;
use elector::config::{self, RenderArgs};
use proptest::prelude::*;
use std::path::Path;
use std::time::{Duration, Instant};

fn cases(default: u32) -> ProptestConfig {
    let cases = std::env::var("FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// No single input may take this long (the bound is 100 ms; a debug
/// build on a shared machine gets slack).
const SLOW: Duration = Duration::from_millis(500);

/// Every example config shipped, the seeds mutations start from.
fn examples() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut out = Vec::new();
    for dir in [
        "examples/2-node",
        "examples/2w",
        "examples/3-node",
        "examples/5-node",
    ] {
        let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
            continue;
        };
        let mut files: Vec<_> = entries.flatten().map(|e| e.path()).collect();
        files.sort();
        for f in files
            .into_iter()
            .filter(|f| f.extension().is_some_and(|e| e == "yaml"))
        {
            out.push(std::fs::read_to_string(f).expect("example readable"));
        }
    }
    out.push(
        std::fs::read_to_string(root.join("deploy/debian/elector.yaml.example"))
            .expect("debian example"),
    );
    out
}

fn load(text: &str) {
    let start = Instant::now();
    let verdict = config::parse(text, Path::new("fuzz.yaml"));
    let took = start.elapsed();
    assert!(took < SLOW, "parse took {took:?} on {text:?}");
    if let Ok(loaded) = verdict {
        // What loads is a config the runtime can use: its derived parts
        // must not panic either.
        let c = &loaded.config;
        let _ = c.timings();
        let _ = c.core_config(1);
        let _ = c.fingerprint();
        let _ = c.vip();
        let _ = c.gate_listen();
        let _ = c.gate_forward();
    }
}

/// A line-level or byte-level edit of a YAML text.
#[derive(Debug, Clone)]
enum Edit {
    DropLine(usize),
    DupLine(usize),
    SwapLines(usize, usize),
    Indent(usize, usize),
    ReplaceValue(usize, String),
    Byte(usize, u8),
    Insert(usize, String),
}

fn edit() -> impl Strategy<Value = Edit> {
    let values = prop_oneof![
        Just("0".to_string()),
        Just("-1".to_string()),
        Just("18446744073709551616".to_string()),
        Just("~".to_string()),
        Just("[]".to_string()),
        Just("{}".to_string()),
        Just("&a [*a]".to_string()),
        Just("\"\"".to_string()),
        Just("[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[".to_string()),
        Just("!!binary aGVsbG8=".to_string()),
        Just("::1".to_string()),
        Just("\"[::1]:0\"".to_string()),
        Just("65536".to_string()),
        Just("true".to_string()),
        "[ -~]{0,20}",
    ];
    prop_oneof![
        any::<usize>().prop_map(Edit::DropLine),
        any::<usize>().prop_map(Edit::DupLine),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Edit::SwapLines(a, b)),
        (any::<usize>(), 0usize..6).prop_map(|(a, n)| Edit::Indent(a, n)),
        (any::<usize>(), values).prop_map(|(a, v)| Edit::ReplaceValue(a, v)),
        (any::<usize>(), any::<u8>()).prop_map(|(a, b)| Edit::Byte(a, b)),
        (any::<usize>(), "[-:{}\\[\\],&*!|>'\"%@` \n\t#a-z0-9]{1,12}")
            .prop_map(|(a, s)| Edit::Insert(a, s)),
    ]
}

fn apply(text: &str, edits: &[Edit]) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let mut bytes_edits = Vec::new();
    for e in edits {
        if lines.is_empty() {
            break;
        }
        let n = lines.len();
        match e {
            Edit::DropLine(i) => {
                lines.remove(i % n);
            }
            Edit::DupLine(i) => {
                let l = lines[i % n].clone();
                lines.insert(i % n, l);
            }
            Edit::SwapLines(a, b) => lines.swap(a % n, b % n),
            Edit::Indent(i, k) => lines[i % n].insert_str(0, &" ".repeat(*k)),
            Edit::ReplaceValue(i, v) => {
                let l = &mut lines[i % n];
                if let Some(colon) = l.find(": ") {
                    l.truncate(colon + 2);
                    l.push_str(v);
                }
            }
            Edit::Byte(..) | Edit::Insert(..) => bytes_edits.push(e.clone()),
        }
    }
    let mut out = lines.join("\n");
    for e in bytes_edits {
        let mut b = out.into_bytes();
        match e {
            Edit::Byte(i, x) if !b.is_empty() => {
                let at = i % b.len();
                b[at] ^= x | 1;
            }
            Edit::Insert(i, s) => {
                let at = i % (b.len() + 1);
                b.splice(at..at, s.bytes());
            }
            _ => {}
        }
        out = String::from_utf8_lossy(&b).into_owned();
    }
    out
}

/// How many generated argument sets rendered (printed with `--nocapture`).
static RENDERED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

#[derive(Parser)]
struct RenderCli {
    #[command(flatten)]
    args: RenderArgs,
}

proptest! {
    #![proptest_config(cases(192))]

    /// Arbitrary text, YAML-looking or not, gives a config or an error.
    #[test]
    fn arbitrary_text_loads_or_is_refused_without_panicking(
        text in prop_oneof![
            ".{0,200}",
            "([a-z_]{1,12}: ([-0-9a-z:.\\[\\]{}\"]{0,16})\n){0,12}",
            "(( {0,8})(- )?[a-z_]{1,12}:( [-0-9a-z:.\\[\\]{},&*]{0,16})?\n){0,16}",
        ],
    ) {
        load(&text);
    }

    /// Mutations of every shipped example: no panic, no hang.
    #[test]
    fn mutated_example_configs_load_or_are_refused_without_panicking(
        pick in any::<usize>(),
        edits in proptest::collection::vec(edit(), 1..5),
    ) {
        let examples = examples();
        prop_assert!(!examples.is_empty());
        let text = apply(&examples[pick % examples.len()], &edits);
        load(&text);
    }

    /// `render-config`'s arguments: any flags give a config that loads
    /// (render re-reads its own output) or a clear error, never a panic.
    #[test]
    fn arbitrary_render_config_arguments_render_or_are_refused(
        node in "[a-z0-9=:,\\[\\] ]{0,8}",
        peers in proptest::collection::vec(prop_oneof![
            3 => "n[1-9]=h[1-9]",
            1 => "[a-z0-9]{0,4}(=[a-z0-9.:\\[\\]]{0,12})?",
        ], 1..7),
        witnesses in proptest::collection::vec("[a-z0-9]{0,4}", 0..3),
        ports in proptest::collection::vec(prop_oneof![3 => 1000u16..9000, 1 => any::<u16>()], 4),
        step in 0u16..3,
        timings in proptest::collection::vec(proptest::option::of(prop_oneof![
            3 => Just(None),
            1 => (0u64..100_000).prop_map(Some),
        ]).prop_map(Option::flatten), 4),
        cluster in "[ -~]{0,12}",
        own in proptest::option::of(any::<proptest::sample::Index>()),
    ) {
        // Mostly one of the members (else nearly every case is refused for
        // a missing --node-id and the render path is never reached).
        let node = match own {
            Some(k) => peers[k.index(peers.len())].split('=').next().unwrap_or("").to_string(),
            None => node,
        };
        let mut argv: Vec<String> = vec![
            "render-config".into(),
            "--node-id".into(), node,
            "--peers".into(), peers.join(","),
            "--cluster-name".into(), cluster,
            "--election-port".into(), ports[0].to_string(),
            "--api-port".into(), ports[1].to_string(),
            "--sentinel-port".into(), ports[2].to_string(),
            "--data-port-base".into(), ports[3].to_string(),
            "--data-port-step".into(), step.to_string(),
        ];
        if !witnesses.is_empty() {
            argv.push("--witnesses".into());
            argv.push(witnesses.join(","));
        }
        for (flag, v) in ["--hb-interval-ms", "--down-after-ms", "--election-timeout-ms", "--fence-margin-ms"]
            .iter()
            .zip(&timings)
        {
            if let Some(v) = v {
                argv.push(flag.to_string());
                argv.push(v.to_string());
            }
        }
        let Ok(cli) = RenderCli::try_parse_from(&argv) else {
            return Ok(());
        };
        let start = Instant::now();
        if let Ok((yaml, _)) = cli.args.render() {
            RENDERED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let again = config::parse(&yaml, Path::new("rendered"));
            prop_assert!(again.is_ok(), "rendered config does not load: {:?}\n{}", again.err(), yaml);
        }
        prop_assert!(start.elapsed() < SLOW);
    }
}

#[test]
fn generated_render_config_arguments_reach_the_render_path() {
    // The property above is not vacuous: some generated argument sets
    // render (the rest are refused with a reason).
    arbitrary_render_config_arguments_render_or_are_refused();
    let rendered = RENDERED.load(std::sync::atomic::Ordering::Relaxed);
    eprintln!("render-config: {rendered} generated argument sets rendered");
    assert!(rendered > 0, "no generated argument set rendered");
}

#[test]
fn every_shipped_example_config_loads_unmutated() {
    // The mutation properties start from valid configs; if an example
    // stopped loading, they would only ever test the error path.
    for text in examples() {
        config::parse(&text, Path::new("example.yaml")).expect("example loads");
    }
}
