//! Suite selection and the loop over seeds x scenarios x targets (targets
//! innermost, so targets interleave: A seed 1, B seed 1, ..., A seed 2).

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::report::{self, RunResult};
use crate::runner::{run_scenario, RunOptions};
use crate::scenario::Scenario;
use crate::target::TargetKind;

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

/// Targets a scenario runs on: the requested ones, or, when the scenario pins a
/// backend, the requested ones on that backend (our elector on it if none is).
pub fn targets_for(s: &Scenario, requested: &[TargetKind]) -> Vec<TargetKind> {
    match &s.backend {
        Some(b) => {
            let on: Vec<TargetKind> = requested
                .iter()
                .copied()
                .filter(|t| t.backend() == b)
                .collect();
            if on.is_empty() {
                TargetKind::for_backend(b).into_iter().collect()
            } else {
                on
            }
        }
        None => requested.to_vec(),
    }
}

/// How many times a void run (the harness overran a timed fault) is repeated
/// before its void result is reported as it is.
const MAX_VOID_REPEATS: usize = 2;

/// Runs every selected scenario on every backend for each of `seeds`; a void
/// run is repeated (at most [`MAX_VOID_REPEATS`] times); writes the
/// reports after each run (so a crash keeps what was measured). Returns all results.
pub async fn run_suite(
    scenarios: &[Scenario],
    targets: &[TargetKind],
    seeds: std::ops::Range<u64>,
    opts: &RunOptions,
) -> Result<Vec<RunResult>> {
    let mut results = vec![];
    let mut run_no = 0;
    for seed in seeds {
        for s in scenarios {
            for t in targets_for(s, targets) {
                let mut earlier_void_runs = vec![];
                let (mut r, h) = loop {
                    run_no += 1;
                    let (r, h) = run_scenario(s, t, seed, opts, run_no).await;
                    if !r.void || earlier_void_runs.len() >= MAX_VOID_REPEATS {
                        break (r, h);
                    }
                    report::log_run(&r);
                    earlier_void_runs.push(r.error.clone().unwrap_or_default());
                };
                r.earlier_void_runs = earlier_void_runs;
                report::write_run(&opts.out_dir, &r, &h)?;
                report::log_run(&r);
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
                targets_for(s, &[TargetKind::ElectorKevy]),
                vec![TargetKind::ElectorKevy]
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
    fn a_scenario_pinned_to_redis_runs_on_the_requested_redis_targets_only() {
        let mut s = all().into_iter().next().unwrap();
        s.backend = Some("redis".into());
        assert_eq!(
            targets_for(&s, &TargetKind::ALL),
            vec![TargetKind::ElectorRedis, TargetKind::RedisSentinel]
        );
        assert_eq!(
            targets_for(&s, &[TargetKind::KevyBuiltin]),
            vec![TargetKind::ElectorRedis]
        );
    }

    #[test]
    fn selecting_an_unknown_name_is_an_error() {
        assert!(select(all(), &Selection::Named(vec!["nope".into()])).is_err());
        let one = select(all(), &Selection::Named(vec!["primary-kill".into()])).unwrap();
        assert_eq!(one.len(), 1);
    }
}
