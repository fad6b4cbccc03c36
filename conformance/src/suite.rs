//! Suite selection and the loop over scenarios x backends x seeds.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::report::{self, RunResult};
use crate::runner::{run_scenario, RunOptions};
use crate::scenario::Scenario;

/// Which scenarios to run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Selection {
    /// Scenarios tagged `quick` (CI).
    Quick,
    /// Every scenario.
    Full,
    /// Scenarios by name.
    Named(Vec<String>),
    /// Scenarios carrying this tag (`parts`, `partition`, ...).
    Tagged(String),
}

pub fn default_scenario_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios")
}

/// Where reports go: `$CARGO_TARGET_DIR/conformance` or `<workspace>/target/conformance`.
pub fn default_out_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(t) => PathBuf::from(t).join("conformance"),
        None => Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join("target")
            .join("conformance"),
    }
}

pub fn select(all: Vec<Scenario>, sel: &Selection) -> Result<Vec<Scenario>> {
    let chosen: Vec<Scenario> = match sel {
        Selection::Quick => all.into_iter().filter(|s| s.has_tag("quick")).collect(),
        // Scenarios tagged `long` (minutes of one fault) run only when named
        // or selected by tag: three seeds of them would double the full run.
        Selection::Full => all.into_iter().filter(|s| !s.has_tag("long")).collect(),
        Selection::Tagged(tag) => {
            let chosen: Vec<Scenario> = all.into_iter().filter(|s| s.has_tag(tag)).collect();
            if chosen.is_empty() {
                return Err(Error::Scenario {
                    file: tag.clone(),
                    message: "no scenario carries this tag".into(),
                });
            }
            chosen
        }
        Selection::Named(names) => {
            for n in names {
                if !all.iter().any(|s| &s.name == n) {
                    return Err(Error::Scenario {
                        file: n.clone(),
                        message: "no scenario with this name".into(),
                    });
                }
            }
            all.into_iter()
                .filter(|s| names.contains(&s.name))
                .collect()
        }
    };
    Ok(chosen)
}

/// Backends a scenario runs on: its pinned one, else the requested ones.
pub fn backends_for(s: &Scenario, requested: &[String]) -> Vec<String> {
    match &s.backend {
        Some(b) => vec![b.clone()],
        None => requested.to_vec(),
    }
}

/// Runs every selected scenario on every backend for `seeds` seeds; writes the reports
/// after each run (so a crash keeps what was measured). Returns all results.
pub async fn run_suite(
    scenarios: &[Scenario],
    backends: &[String],
    seeds: u64,
    opts: &RunOptions,
) -> Result<Vec<RunResult>> {
    let mut results = vec![];
    let mut run_no = 0;
    for seed in 1..=seeds {
        for s in scenarios {
            for b in backends_for(s, backends) {
                run_no += 1;
                let (r, h) = run_scenario(s, &b, seed, opts, run_no).await;
                report::write_run(&opts.out_dir, &r, &h)?;
                let verdict = if r.passed { "PASS" } else { "FAIL" };
                tracing::info!(
                    "{verdict} {} (failover {:?} ms, {} acked, {} lost, {} violations{})",
                    r.id(),
                    r.metrics.failover_ms,
                    r.metrics.acknowledged,
                    r.metrics.lost_acknowledged,
                    r.metrics.violations,
                    r.error
                        .as_deref()
                        .map(|e| format!(", error: {e}"))
                        .unwrap_or_default()
                );
                results.push(r);
                report::write_summary(&opts.out_dir, &results)?;
            }
        }
    }
    Ok(results)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all() -> Vec<Scenario> {
        Scenario::load_dir(&default_scenario_dir()).unwrap()
    }

    #[test]
    fn the_quick_suite_is_the_quick_tag_and_uses_kevy() {
        let q = select(all(), &Selection::Quick).unwrap();
        assert!(!q.is_empty());
        for s in &q {
            assert!(s.has_tag("quick"));
            assert_eq!(
                backends_for(s, &["kevy".to_string()]),
                vec!["kevy".to_string()]
            );
        }
    }

    #[test]
    fn the_full_suite_leaves_out_long_scenarios_which_run_by_tag() {
        let full = select(all(), &Selection::Full).unwrap();
        assert!(full.iter().all(|s| !s.has_tag("long")));
        let long = select(all(), &Selection::Tagged("long".into())).unwrap();
        assert!(long.iter().any(|s| s.name == "heal-replica-5m"));
        assert_eq!(full.len() + long.len(), all().len());
    }

    #[test]
    fn selecting_an_unknown_name_is_an_error() {
        assert!(select(all(), &Selection::Named(vec!["nope".into()])).is_err());
        let one = select(all(), &Selection::Named(vec!["primary-kill".into()])).unwrap();
        assert_eq!(one.len(), 1);
    }
}
