//! The shipped alert rules keep their promises to the operator
//! (`deploy/prometheus/elector-rules.yml`, issue 36): every alert says what
//! happened (`summary`, `description`), links a runbook that exists in
//! `docs/runbooks/`, carries a severity, and has a promtool test that expects
//! it to fire. promtool itself (`just rules-test`) proves the expressions;
//! this test proves nothing was added without the rest.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn yaml(path: &Path) -> serde_yaml::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every alerting rule of the shipped file.
fn alerts() -> Vec<serde_yaml::Value> {
    let rules = yaml(&repo().join("deploy/prometheus/elector-rules.yml"));
    rules["groups"]
        .as_sequence()
        .expect("groups")
        .iter()
        .flat_map(|g| g["rules"].as_sequence().expect("rules").clone())
        .filter(|r| r.get("alert").is_some())
        .collect()
}

/// Alert names some promtool test expects to fire (a non-empty `exp_alerts`).
fn alerts_tested_firing() -> BTreeSet<String> {
    let dir = repo().join("deploy/prometheus/tests");
    let mut fired = BTreeSet::new();
    for entry in std::fs::read_dir(&dir).expect("tests dir") {
        let path = entry.expect("entry").path();
        if !path.to_string_lossy().ends_with(".test.yml") {
            continue;
        }
        for test in yaml(&path)["tests"].as_sequence().expect("tests") {
            for case in test["alert_rule_test"].as_sequence().into_iter().flatten() {
                let fires = case["exp_alerts"]
                    .as_sequence()
                    .is_some_and(|a| !a.is_empty());
                if fires {
                    fired.insert(case["alertname"].as_str().expect("alertname").to_string());
                }
            }
        }
    }
    fired
}

#[test]
fn every_alert_has_a_summary_a_description_a_severity_and_a_runbook_that_exists() {
    let alerts = alerts();
    assert!(alerts.len() >= 15, "only {} alerts", alerts.len());
    for alert in &alerts {
        let name = alert["alert"].as_str().expect("alert name");
        let ann = &alert["annotations"];
        for key in ["summary", "description", "runbook_url"] {
            let v = ann[key].as_str().unwrap_or_default();
            assert!(!v.trim().is_empty(), "{name} has no {key}");
        }
        let severity = alert["labels"]["severity"].as_str().unwrap_or_default();
        assert!(
            severity == "critical" || severity == "warning",
            "{name}: severity {severity:?}"
        );
        let url = ann["runbook_url"].as_str().expect("runbook_url");
        let page = format!("docs/runbooks/{name}.md");
        assert!(
            url.ends_with(&page),
            "{name}: runbook_url {url} is not {page}"
        );
        let text = std::fs::read_to_string(repo().join(&page))
            .unwrap_or_else(|e| panic!("{name}: {page}: {e}"));
        assert!(
            text.starts_with(&format!("# {name} ({severity})")),
            "{page} heads another alert or severity"
        );
        let index =
            std::fs::read_to_string(repo().join("docs/runbooks/README.md")).expect("runbook index");
        assert!(
            index.contains(&format!("[{name}.md]({name}.md)")),
            "docs/runbooks/README.md lacks {name}"
        );
    }
}

#[test]
fn every_alert_has_a_promtool_test_that_expects_it_to_fire() {
    let fired = alerts_tested_firing();
    let missing: Vec<String> = alerts()
        .iter()
        .map(|a| a["alert"].as_str().expect("name").to_string())
        .filter(|name| !fired.contains(name))
        .collect();
    assert!(missing.is_empty(), "no promtool test fires {missing:?}");
}

#[test]
fn cluster_wide_rules_aggregate_by_the_cluster_label_and_not_by_job() {
    let text =
        std::fs::read_to_string(repo().join("deploy/prometheus/elector-rules.yml")).expect("rules");
    let exprs: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        !exprs.contains("by (job)"),
        "a rule still aggregates by job"
    );
    assert!(exprs.contains("sum by (cluster)"));
}
