//! `conformance` command line: run suites, list scenarios, clean up containers.
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use conformance::bench::detection::{self, DetectionPlan};
use conformance::bench::{self, detection_render, Plan};
use conformance::docker::{self, LABEL_SESSION, LABEL_SUITE};
use conformance::report;
use conformance::runner::RunOptions;
use conformance::scenario::Scenario;
use conformance::suite::{self, Selection};
use conformance::target::{self, TargetKind};

mod machine;

/// Labels this process's containers and networks: unique enough across the
/// processes that share one Docker engine.
fn session_id() -> Result<String> {
    Ok(format!(
        "{:x}",
        std::process::id() as u64
            ^ (std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)?
                .as_secs()
                & 0xfff)
    ))
}

#[derive(Parser)]
#[command(
    name = "conformance",
    about = "Conformance suite for elector (real containers)"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum SuiteArg {
    Quick,
    Full,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum PhaseArg {
    Sweep,
    Failover,
    Writes,
    Render,
    All,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum BackendArg {
    Kevy,
    Redis,
    Both,
}

/// Options every command that runs scenarios takes.
#[derive(clap::Args)]
struct CommonArgs {
    #[arg(long, default_value = "elector-node:latest")]
    image: String,
    /// Scenario directory (default: the crate's scenarios/).
    #[arg(long)]
    scenario_dir: Option<PathBuf>,
    /// Report directory (default: target/conformance; target/bench for bench).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Upper bound on one scenario's steps, in seconds.
    #[arg(long, default_value_t = 300)]
    max_scenario_s: u64,
}

impl CommonArgs {
    /// The scenarios in the directory, and the run options.
    fn open(self, default_out: PathBuf) -> Result<(Vec<Scenario>, RunOptions)> {
        let dir = self
            .scenario_dir
            .unwrap_or_else(suite::default_scenario_dir);
        let all = Scenario::load_dir(&dir)?;
        let opts = RunOptions {
            image: self.image,
            out_dir: self.out.unwrap_or(default_out),
            session: session_id()?,
            max_scenario: Duration::from_secs(self.max_scenario_s),
        };
        Ok((all, opts))
    }
}

#[derive(Subcommand)]
enum Cmd {
    /// Run scenarios against containers and print the summary.
    Run {
        #[arg(long, value_enum, default_value = "quick")]
        suite: SuiteArg,
        /// Run only these scenarios (by name); overrides --suite.
        #[arg(long = "scenario")]
        scenarios: Vec<String>,
        /// Run the scenarios carrying this tag (e.g. `parts`); overrides --suite.
        #[arg(long)]
        tag: Option<String>,
        #[arg(long, default_value_t = 1)]
        seeds: u64,
        /// The first seed (default 1): `--first-seed 2 --seeds 2` runs seeds 2 and 3,
        /// adding to an earlier `--seeds 1` run.
        #[arg(long, default_value_t = 1)]
        first_seed: u64,
        /// Our elector's data node(s); ignored when --target is given.
        #[arg(long, value_enum, default_value = "kevy")]
        backend: BackendArg,
        /// Targets, comma-separated or `all`: elector+kevy, elector+redis,
        /// kevy-builtin, redis-sentinel. Overrides --backend.
        #[arg(long)]
        target: Option<String>,
        /// Run every scenario with this failure-detection time (down_after).
        #[arg(long)]
        down_after_ms: Option<u64>,
        /// Run these scenario files (a chaos schedule, say) instead of a suite.
        #[arg(long = "file")]
        files: Vec<PathBuf>,
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Randomized composed faults (issue 21): a seeded schedule on a 3-node and
    /// then a 5-node cluster per backend, every checker over the whole run.
    Chaos {
        /// Minutes of faults per backend, split evenly between 3 and 5 nodes.
        #[arg(long, env = "CHAOS_MINUTES", default_value_t = 10.0)]
        minutes: f64,
        /// The schedule's seed (default: random, printed).
        #[arg(long, env = "CHAOS_SEED")]
        seed: Option<u64>,
        #[arg(long, env = "CHAOS_BACKEND", value_enum, default_value = "both")]
        backend: BackendArg,
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Failover benchmark: every target, primary-kill and isolate-primary repeated,
    /// the loss soak, runs interleaved; writes docs/benchmarks.md and its chart.
    Bench {
        /// Targets, comma-separated or `all`.
        #[arg(long, default_value = "all")]
        target: String,
        /// Runs of each failover scenario per target.
        #[arg(long, env = "BENCH_RUNS", default_value_t = 10)]
        runs: u64,
        /// Runs of the loss soak per target.
        #[arg(long, env = "BENCH_SOAK_RUNS", default_value_t = 2)]
        soak_runs: u64,
        /// Detection time for every target (kevy's built-in one is fixed at 5000 ms).
        #[arg(long, env = "BENCH_DOWN_AFTER_MS", default_value_t = 5000)]
        down_after_ms: u64,
        #[command(flatten)]
        common: CommonArgs,
        /// Where the page and chart go.
        #[arg(long, default_value = "docs")]
        docs: PathBuf,
        /// The command line quoted in the page.
        #[arg(long, default_value = "just bench-failover")]
        command: String,
        /// Render the page from the runs stored in this directory instead of running.
        #[arg(long)]
        render_from: Option<PathBuf>,
    },
    /// The fastest safe detection per target: the loss soak swept over
    /// detection values, then primary-kill and isolate-primary at each target's
    /// fastest safe value; writes docs/benchmarks-detection.md. Phases share
    /// --out, so a sweep can be taken in chunks (per target, per phase).
    BenchDetection {
        /// Targets, comma-separated or `all`.
        #[arg(long, env = "BENCH_TARGETS", default_value = "all")]
        target: String,
        /// Detection times swept, in ms (kevy's built-in election: 5000 only).
        #[arg(
            long,
            env = "BENCH_DETECTION_VALUES",
            value_delimiter = ',',
            default_value = "500,750,1000,1500,2000,3000"
        )]
        values: Vec<u64>,
        /// Soak runs per target and value.
        #[arg(long, env = "BENCH_SOAK_RUNS", default_value_t = 10)]
        soak_runs: u64,
        /// Length of each soak's loss period, in seconds.
        #[arg(long, env = "BENCH_SOAK_SECS", default_value_t = 120)]
        soak_secs: u64,
        /// Runs of each failover scenario at the fastest safe value.
        #[arg(long, env = "BENCH_RUNS", default_value_t = 10)]
        runs: u64,
        /// Soaks of different targets played at once (failover runs stay serial).
        #[arg(long, env = "BENCH_PARALLEL", default_value_t = 1)]
        parallel: usize,
        /// Seconds of each durable write latency run (1 and 16 clients per target).
        #[arg(long, env = "BENCH_WRITE_SECS", default_value_t = 10)]
        write_secs: u64,
        /// `sweep`, `failover` (at the fastest safe values the runs in --out
        /// show), `writes` (durable write latency per target), `render` (the
        /// page from --out alone) or `all`.
        #[arg(long, env = "BENCH_PHASE", value_enum, default_value = "all")]
        phase: PhaseArg,
        #[command(flatten)]
        common: CommonArgs,
        /// Where the page goes.
        #[arg(long, default_value = "docs")]
        docs: PathBuf,
        /// The command line quoted in the page.
        #[arg(long, default_value = "just bench-detection")]
        command: String,
    },
    /// Durable failover (primary-kill) against the size of the data set, per
    /// target, with the phase breakdown and full syncs per failover; writes
    /// docs/benchmarks-scale.md and its chart.
    BenchScale {
        /// Targets, comma-separated or `all`.
        #[arg(long, env = "BENCH_TARGETS", default_value = "all")]
        target: String,
        /// Data set sizes in MB.
        #[arg(
            long,
            env = "BENCH_SCALE_SIZES",
            value_delimiter = ',',
            default_value = "0,100,1000"
        )]
        sizes: Vec<u64>,
        /// Runs per (size, target).
        #[arg(long, env = "BENCH_RUNS", default_value_t = 5)]
        runs: u64,
        /// Detection time (kevy's built-in election is fixed at 5000 ms).
        #[arg(long, env = "BENCH_DOWN_AFTER_MS", default_value_t = 3000)]
        down_after_ms: u64,
        #[command(flatten)]
        common: CommonArgs,
        /// Where the page and chart go.
        #[arg(long, default_value = "docs")]
        docs: PathBuf,
        /// The command line quoted in the page.
        #[arg(long, default_value = "just bench-scale")]
        command: String,
        /// Render the page from the runs already in --out instead of running.
        #[arg(long)]
        render_only: bool,
    },
    /// List scenarios (name, nodes, tags).
    List {
        #[arg(long)]
        scenario_dir: Option<PathBuf>,
    },
    /// Remove every container and network the suite ever labelled.
    Cleanup,
    /// Check cluster control alone: start, partition, pause, kill, restart, teardown.
    Smoke {
        #[arg(long, default_value = "elector-node:latest")]
        image: String,
        #[arg(long, default_value_t = 3)]
        nodes: usize,
        /// `elector`, `elector-faulty`, or `none` (data nodes only).
        #[arg(long, default_value = "elector")]
        elector_bin: String,
        #[arg(long, default_value = "kevy")]
        backend: String,
    },
}

impl BackendArg {
    /// Our elector on the chosen backend(s).
    fn targets(self) -> Vec<TargetKind> {
        match self {
            BackendArg::Kevy => vec![TargetKind::ElectorKevy],
            BackendArg::Redis => vec![TargetKind::ElectorRedis],
            BackendArg::Both => vec![TargetKind::ElectorKevy, TargetKind::ElectorRedis],
        }
    }

    /// The spelling `--backend` and `CHAOS_BACKEND` take.
    fn name(self) -> &'static str {
        match self {
            BackendArg::Kevy => "kevy",
            BackendArg::Redis => "redis",
            BackendArg::Both => "both",
        }
    }
}

fn selection(which: SuiteArg, scenarios: Vec<String>, tag: Option<String>) -> Selection {
    if !scenarios.is_empty() {
        Selection::Named(scenarios)
    } else if let Some(tag) = tag {
        Selection::Tagged(tag)
    } else if which == SuiteArg::Full {
        Selection::Full
    } else {
        Selection::Quick
    }
}

/// Runs `work`; on Ctrl-C removes this session's containers instead.
async fn or_cleanup<T>(
    session: &str,
    work: impl std::future::Future<Output = Result<T>>,
) -> Result<T> {
    let d = docker::connect()?;
    d.ping().await.context("docker ping")?;
    let label = format!("{LABEL_SESSION}={session}");
    tokio::select! {
        r = work => r,
        _ = tokio::signal::ctrl_c() => {
            eprintln!("interrupted: removing this run's containers");
            docker::cleanup_label(&d, &label).await?;
            bail!("interrupted");
        }
    }
}

fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("CONFORMANCE_LOG")
                .unwrap_or_else(|_| "conformance=info".into()),
        )
        .with_target(false)
        .init();
    let cli = Cli::parse();
    if matches!(
        cli.cmd,
        Cmd::Run { .. }
            | Cmd::Smoke { .. }
            | Cmd::Bench { .. }
            | Cmd::BenchDetection { .. }
            | Cmd::BenchScale { .. }
            | Cmd::Chaos { .. }
    ) {
        // Before any runtime thread exists: testcontainers' client needs it on old engines.
        docker::install_api_proxy().context("talking to the Docker engine")?;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async_main(cli))
}

async fn async_main(cli: Cli) -> Result<()> {
    match cli.cmd {
        Cmd::List { scenario_dir } => {
            let dir = scenario_dir.unwrap_or_else(suite::default_scenario_dir);
            for s in Scenario::load_dir(&dir)? {
                println!(
                    "{:<36} N={} {:<8} [{}]",
                    s.name,
                    s.nodes,
                    s.backend.as_deref().unwrap_or("*"),
                    s.tags.join(",")
                );
            }
            Ok(())
        }
        Cmd::Smoke {
            image,
            nodes,
            elector_bin,
            backend,
        } => {
            let session = format!("smoke{:x}", std::process::id());
            let cfg = conformance::cluster::ClusterConfig {
                run_id: session.clone(),
                session,
                nodes,
                witnesses: Vec::new(),
                target: TargetKind::for_backend(&backend)
                    .with_context(|| format!("backend {backend}: kevy or redis"))?,
                timings: Default::default(),
                elector_bin,
                extra_yaml: None,
                env: Default::default(),
                image,
                vip_port: None,
            };
            for line in conformance::smoke::smoke(&cfg).await? {
                println!("{line}");
            }
            println!("smoke ok");
            Ok(())
        }
        Cmd::Cleanup => {
            let d = docker::connect()?;
            let (c, n) = docker::cleanup_label(&d, LABEL_SUITE).await?;
            println!("removed {c} containers and {n} networks");
            Ok(())
        }
        Cmd::Bench {
            target,
            runs,
            soak_runs,
            down_after_ms,
            common,
            docs,
            command,
            render_from,
        } => {
            let plan = Plan {
                targets: target::parse_list(&target)?,
                runs,
                soak_runs,
                down_after_ms,
            };
            let (all, mut opts) = common.open(suite::default_out_dir().with_file_name("bench"))?;
            let runs = match render_from {
                Some(dir) => bench::load_runs(&dir)?,
                None => {
                    // One directory per invocation, so a page renders one bench's runs.
                    opts.out_dir = opts.out_dir.join(&opts.session);
                    or_cleanup(&opts.session, async {
                        Ok(bench::run(&all, &plan, &opts).await?)
                    })
                    .await?
                }
            };
            let page = bench::render::page(&runs, &plan, &machine::describe(), &command);
            let unelected = bench::unelected(&bench::stats(&runs), &plan);
            if !unelected.is_empty() {
                // Kept for inspection, but docs/ is not given a page with blank rows.
                std::fs::create_dir_all(&opts.out_dir)?;
                std::fs::write(opts.out_dir.join("benchmarks.md"), &page.markdown)?;
                bail!(
                    "targets without a single failover figure (docs/benchmarks.md left as it was; this run's page in {}):\n  {}",
                    opts.out_dir.display(),
                    unelected.join("\n  ")
                );
            }
            std::fs::create_dir_all(&docs)?;
            std::fs::write(docs.join("benchmarks.md"), &page.markdown)?;
            for (file, content) in &page.files {
                let path = docs.join(file);
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent)?;
                }
                std::fs::write(path, content)?;
            }
            println!("{}", page.markdown);
            println!(
                "wrote {}/benchmarks.md; per-run reports in {}",
                docs.display(),
                opts.out_dir.display()
            );
            Ok(())
        }
        Cmd::BenchScale {
            target,
            sizes,
            runs,
            down_after_ms,
            common,
            docs,
            command,
            render_only,
        } => {
            let plan = bench::scale::ScalePlan {
                targets: target::parse_list(&target)?,
                sizes_mb: sizes,
                runs,
                down_after_ms,
            };
            let (all, mut opts) =
                common.open(suite::default_out_dir().with_file_name("bench-scale"))?;
            let mut wall_s = None;
            if !render_only {
                // One directory per invocation, so a page renders one bench's runs.
                opts.out_dir = opts.out_dir.join(&opts.session);
                let t0 = std::time::Instant::now();
                or_cleanup(&opts.session, async {
                    Ok(bench::scale::run(&all, &plan, &opts).await?)
                })
                .await?;
                wall_s = Some(t0.elapsed().as_secs());
            }
            let runs = bench::scale::load_all(&opts.out_dir, &plan)?;
            let page =
                bench::scale_render::page(&runs, &plan, &machine::describe(), &command, wall_s);
            let empty = bench::scale::empty_cells(&runs, &plan);
            if !empty.is_empty() {
                std::fs::create_dir_all(&opts.out_dir)?;
                std::fs::write(opts.out_dir.join("benchmarks-scale.md"), &page)?;
                bail!(
                    "cells without a single failover figure (docs/ left as it was; this run's page in {}):\n  {}",
                    opts.out_dir.display(),
                    empty.join("\n  ")
                );
            }
            std::fs::create_dir_all(&docs)?;
            std::fs::write(docs.join("benchmarks-scale.md"), &page)?;
            std::fs::write(
                docs.join(bench::scale_render::CHART_FILE),
                bench::scale_render::svg(&runs, &plan),
            )?;
            println!("{page}");
            println!(
                "wrote {}/benchmarks-scale.md; per-run reports in {}",
                docs.display(),
                opts.out_dir.display()
            );
            Ok(())
        }
        Cmd::BenchDetection {
            target,
            values,
            soak_runs,
            soak_secs,
            runs,
            parallel,
            write_secs,
            phase,
            common,
            docs,
            command,
        } => {
            let plan = DetectionPlan {
                targets: target::parse_list(&target)?,
                values_ms: values,
                soak_runs,
                soak_secs,
                runs,
                parallel,
            };
            let (all, opts) =
                common.open(suite::default_out_dir().with_file_name("bench-detection"))?;
            if phase != PhaseArg::Render {
                let d = docker::connect()?;
                d.ping().await.context("docker ping")?;
                let label = format!("{LABEL_SESSION}={}", opts.session);
                let work = async {
                    if matches!(phase, PhaseArg::Sweep | PhaseArg::All) {
                        detection::sweep(&all, &plan, &opts).await?;
                    }
                    if matches!(phase, PhaseArg::Failover | PhaseArg::All) {
                        let stored = detection::load_all(&opts.out_dir)?;
                        let fastest = detection::fastest_safe(
                            &detection::soak_verdicts(&stored),
                            plan.required(),
                        );
                        drop(stored);
                        detection::failover(&all, &plan, &fastest, &opts).await?;
                    }
                    if matches!(phase, PhaseArg::Writes | PhaseArg::All) {
                        let mut o = opts.clone();
                        o.out_dir = opts.out_dir.join("writes");
                        bench::writes::measure(&all, &plan.targets, write_secs, &o).await?;
                    }
                    anyhow::Ok(())
                };
                tokio::select! {
                    r = work => r?,
                    _ = tokio::signal::ctrl_c() => {
                        eprintln!("interrupted: removing this run's containers");
                        docker::cleanup_label(&d, &label).await?;
                        bail!("interrupted");
                    }
                }
            }
            let stored = detection::load_all(&opts.out_dir)?;
            let phases = bench::breakdown::load(&opts.out_dir.join("failover"), &stored);
            let page =
                detection_render::page(&stored, &phases, &plan, &machine::describe(), &command);
            std::fs::create_dir_all(&docs)?;
            std::fs::write(docs.join("benchmarks-detection.md"), &page)?;
            println!("{page}");
            println!(
                "wrote {}/benchmarks-detection.md; per-run reports in {}",
                docs.display(),
                opts.out_dir.display()
            );
            Ok(())
        }
        Cmd::Run {
            suite: which,
            scenarios,
            tag,
            seeds,
            first_seed,
            backend,
            target: target_arg,
            down_after_ms,
            files,
            common,
        } => {
            let (all, opts) = common.open(suite::default_out_dir())?;
            let mut chosen = if !files.is_empty() {
                files
                    .iter()
                    .map(|f| Scenario::load(f))
                    .collect::<std::result::Result<Vec<_>, _>>()?
            } else {
                suite::select(all, &selection(which, scenarios, tag))?
            };
            if let Some(ms) = down_after_ms {
                for s in &mut chosen {
                    s.timings.down_after_ms = ms;
                }
            }
            let targets: Vec<TargetKind> = match target_arg {
                Some(t) => target::parse_list(&t)?,
                None => backend.targets(),
            };
            let seeds = first_seed..first_seed.saturating_add(seeds);
            let results = or_cleanup(&opts.session, async {
                Ok(suite::run_suite(&chosen, &targets, seeds, &opts).await?)
            })
            .await?;
            let md = report::summary_markdown(&results);
            println!("{md}");
            println!("reports: {}", opts.out_dir.display());
            let failed = results.iter().filter(|r| !r.passed).count();
            if failed > 0 {
                bail!("{failed} of {} runs failed", results.len());
            }
            Ok(())
        }
        Cmd::Chaos {
            minutes,
            seed,
            backend,
            common,
        } => {
            let seed = seed.unwrap_or_else(rand::random::<u64>);
            println!("chaos seed {seed} (replay the schedules with CHAOS_SEED={seed})");
            let (_, opts) = common.open(suite::default_out_dir())?;
            let timings = Default::default();
            let figures = or_cleanup(&opts.session, async {
                Ok(
                    conformance::chaos::run(&backend.targets(), seed, minutes, &timings, &opts)
                        .await?,
                )
            })
            .await?;
            println!("\n# chaos summary (seed {seed}, {minutes} min per backend)\n");
            for f in &figures {
                println!("{}", f.describe(&opts.image));
            }
            let failed = figures.iter().filter(|f| !f.passed).count();
            if failed > 0 {
                // Each failed run printed its own `run --file` replay above.
                bail!(
                    "{failed} of {} chaos runs failed (seed {seed}); the whole run again: \
                     CHAOS_SEED={seed} CHAOS_MINUTES={minutes} CHAOS_BACKEND={} cargo run -p conformance --release -- chaos",
                    figures.len(),
                    backend.name()
                );
            }
            Ok(())
        }
    }
}
