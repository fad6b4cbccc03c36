//! `elector run` writes JSON lines when asked (`--log-format json` or the
//! config's `log_format: json`), with values as values: numbers as numbers,
//! an absent vote as `"none"`, never Rust's `Some(..)` or a struct dump.
//! The binary itself, as a witness on loopback (no data node, ports chosen
//! by the kernel), stopped after its first lines.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// examples/2w/n3.yaml (the witness) with kernel-chosen ports, its
/// `data_dir` in `scratch`, and `extra` appended.
fn witness_config(scratch: &Path, extra: &str) -> std::path::PathBuf {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/2w/n3.yaml");
    let mut yaml: String = std::fs::read_to_string(example)
        .unwrap()
        .lines()
        .map(|l| {
            if l.starts_with("  election:") {
                "  election: \"127.0.0.1:0\"".to_string()
            } else if l.starts_with("  api:") {
                "  api: \"127.0.0.1:0\"".to_string()
            } else if l.starts_with("data_dir:") {
                format!("data_dir: {}", scratch.join("state").display())
            } else {
                l.to_string()
            }
        })
        .map(|l| l + "\n")
        .collect();
    yaml.push_str(extra);
    let file = scratch.join("n3.yaml");
    std::fs::write(&file, yaml).unwrap();
    file
}

/// The first stdout lines of `elector run` with `args`, up to the API's
/// "listening" line (or 10 s).
fn first_lines(args: &[&str]) -> Vec<String> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_elector"))
        .args(args)
        .env_remove("JOURNAL_STREAM")
        .env_remove("ELECTOR_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut lines = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        let done = line.contains("HTTP API listening");
        lines.push(line);
        if done || Instant::now() > deadline {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    lines
}

fn assert_json_lines_with_values(lines: &[String]) {
    assert!(lines.len() >= 2, "{lines:?}");
    let mut starting = None;
    for line in lines {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        assert!(
            v["level"].is_string() && v["fields"]["message"].is_string(),
            "{line}"
        );
        assert!(
            !line.contains("Some(") && !line.contains("PersistedState"),
            "a Debug rendering: {line}"
        );
        if v["fields"]["message"] == "starting" {
            starting = Some(v);
        }
    }
    let s = starting.expect("a starting line");
    assert_eq!(s["fields"]["epoch"], serde_json::json!(0), "{s}");
    assert_eq!(s["fields"]["voted_epoch"], serde_json::json!(0), "{s}");
    assert_eq!(s["fields"]["voted_for"], "none", "{s}");
}

#[test]
fn run_with_log_format_json_writes_one_json_object_per_line_with_plain_values() {
    let scratch = tempfile::tempdir().unwrap();
    let config = witness_config(scratch.path(), "");
    let lines = first_lines(&[
        "run",
        "--log-format",
        "json",
        "--config",
        config.to_str().unwrap(),
    ]);
    assert_json_lines_with_values(&lines);
}

#[test]
fn the_config_key_log_format_json_does_the_same_and_the_flag_overrides_it() {
    let scratch = tempfile::tempdir().unwrap();
    let config = witness_config(scratch.path(), "log_format: json\n");
    let path = config.to_str().unwrap();
    assert_json_lines_with_values(&first_lines(&["run", "--config", path]));
    let text = first_lines(&["run", "--log-format", "text", "--config", path]);
    assert!(
        text.iter().all(|l| !l.starts_with('{')),
        "--log-format text lost to the config: {text:?}"
    );
}
