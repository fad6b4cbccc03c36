//! `conformance` command line: run suites, list scenarios, clean up containers.
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use conformance::docker::{self, LABEL_SESSION, LABEL_SUITE};
use conformance::report;
use conformance::runner::RunOptions;
use conformance::scenario::Scenario;
use conformance::suite::{self, Selection};

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
enum BackendArg {
    Kevy,
    Redis,
    Both,
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
        #[arg(long, value_enum, default_value = "kevy")]
        backend: BackendArg,
        #[arg(long, default_value = "elector-node:latest")]
        image: String,
        /// Scenario directory (default: the crate's scenarios/).
        #[arg(long)]
        scenario_dir: Option<PathBuf>,
        /// Report directory (default: target/conformance).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Upper bound on one scenario's steps, in seconds.
        #[arg(long, default_value_t = 300)]
        max_scenario_s: u64,
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

fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("CONFORMANCE_LOG")
                .unwrap_or_else(|_| "conformance=info".into()),
        )
        .with_target(false)
        .init();
    let cli = Cli::parse();
    if matches!(cli.cmd, Cmd::Run { .. } | Cmd::Smoke { .. }) {
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
                backend,
                timings: Default::default(),
                elector_bin,
                extra_yaml: None,
                env: Default::default(),
                image,
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
        Cmd::Run {
            suite: which,
            scenarios,
            tag,
            seeds,
            backend,
            image,
            scenario_dir,
            out,
            max_scenario_s,
        } => {
            let dir = scenario_dir.unwrap_or_else(suite::default_scenario_dir);
            let all = Scenario::load_dir(&dir)?;
            let sel = if !scenarios.is_empty() {
                Selection::Named(scenarios)
            } else if let Some(tag) = tag {
                Selection::Tagged(tag)
            } else if which == SuiteArg::Full {
                Selection::Full
            } else {
                Selection::Quick
            };
            let chosen = suite::select(all, &sel)?;
            let backends: Vec<String> = match backend {
                BackendArg::Kevy => vec!["kevy".into()],
                BackendArg::Redis => vec!["redis".into()],
                BackendArg::Both => vec!["kevy".into(), "redis".into()],
            };
            let session = format!(
                "{:x}",
                std::process::id() as u64
                    ^ (std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)?
                        .as_secs()
                        & 0xfff)
            );
            let opts = RunOptions {
                image,
                out_dir: out.unwrap_or_else(suite::default_out_dir),
                session: session.clone(),
                max_scenario: Duration::from_secs(max_scenario_s),
            };
            let d = docker::connect()?;
            d.ping().await.context("docker ping")?;
            let label = format!("{LABEL_SESSION}={session}");
            let results = tokio::select! {
                r = suite::run_suite(&chosen, &backends, seeds, &opts) => r?,
                _ = tokio::signal::ctrl_c() => {
                    eprintln!("interrupted: removing this run's containers");
                    docker::cleanup_label(&d, &label).await?;
                    bail!("interrupted");
                }
            };
            let md = report::summary_markdown(&results);
            println!("{md}");
            println!("reports: {}", opts.out_dir.display());
            let failed = results.iter().filter(|r| !r.passed).count();
            if failed > 0 {
                bail!("{failed} of {} runs failed", results.len());
            }
            Ok(())
        }
    }
}
