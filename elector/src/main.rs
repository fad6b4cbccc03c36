//! The `elector` binary: run the sidecar, check a config, watch the cluster,
//! ask for a switchover. Errors are reported here (anyhow) and nowhere else.
#![forbid(unsafe_code)]

use anyhow::Context;
use clap::{CommandFactory, Parser, Subcommand};
use elector::cli;
use elector::config;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// `elector --version`: the crate version and the git commit it was built
/// from (`unknown` outside git; see `build.rs`).
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("BUILD_GIT_COMMIT"),
    ")"
);

#[derive(Parser)]
#[command(
    name = "elector",
    version = VERSION,
    about = "Quorum-based primary failover for Redis-compatible stores"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the sidecar (config: --config, $ELECTOR_CONFIG, /etc/elector/elector.yaml).
    Run {
        /// The config file (default: $ELECTOR_CONFIG, then /etc/elector/elector.yaml).
        #[arg(long)]
        config: Option<PathBuf>,
        /// The log's line format; default: the config's `log_format` (text).
        #[arg(long, value_enum)]
        log_format: Option<config::LogFormat>,
        /// Start although `state.json` is missing from a data directory that
        /// has been used before (protocol §5.2): the node may then vote a
        /// second time in an epoch it already voted in. Only after making
        /// sure no election is in progress.
        #[arg(long)]
        reset_state: bool,
    },
    /// The data node's dead-man switch: fence it when the elector on this
    /// host stops answering for longer than the lease (protocol §6.4.1).
    Watchdog {
        /// The elector's config file (default: $ELECTOR_CONFIG, then
        /// /etc/elector/elector.yaml): its `listen.api`, data node and lease.
        #[arg(long)]
        config: Option<PathBuf>,
        /// The log's line format; default: the config's `log_format` (text).
        #[arg(long, value_enum)]
        log_format: Option<config::LogFormat>,
    },
    /// Validate config files: exit 1 with one line per problem. Given the
    /// files of a whole cluster, also checks that they agree (fingerprint).
    CheckConfig {
        /// Config files: one node's, or every node's of a cluster.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Write a node's config from a compact cluster description (the lab
    /// entrypoint and the Ansible role render through this).
    RenderConfig(Box<config::RenderArgs>),
    /// Show the cluster as the elector at NODE (HOST:PORT of its API) sees it,
    /// with each reachable peer's own view beside it.
    Status {
        /// HOST:PORT (plain HTTP), http://HOST:PORT or https://HOST:PORT (TLS,
        /// see --ca-file) of an elector's API; default: the `listen.api` of
        /// this host's config (--config, $ELECTOR_CONFIG, or
        /// /etc/elector/elector.yaml), over loopback if it listens everywhere,
        /// and over https when that config sets `tls.api`.
        #[arg(long)]
        node: Option<String>,
        /// The config whose `listen.api` to ask when --node is not given; with
        /// `tls.api` set there, its CA stands in for a missing --ca-file.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Print the asked node's /status document as JSON (one line per
        /// round under --watch).
        #[arg(long)]
        json: bool,
        /// Redraw every --interval-ms until interrupted; into a pipe, one
        /// report after another under a `---` line, without terminal codes.
        #[arg(long)]
        watch: bool,
        /// Milliseconds between rounds of --watch (at least 100).
        #[arg(long, default_value_t = 1000)]
        interval_ms: u64,
        #[command(flatten)]
        tls: cli::ApiTlsArgs,
    },
    /// Planned, zero-loss handover of the primary role to node TO.
    Switchover {
        /// HOST:PORT (plain HTTP) or https://HOST:PORT (TLS, see --ca-file) of
        /// any elector's API; a replica names the primary, asked next.
        #[arg(long)]
        node: String,
        /// The node id that is to become the primary.
        #[arg(
            long,
            required_unless_present = "to_eligible",
            conflicts_with = "to_eligible"
        )]
        to: Option<String>,
        /// Instead of --to: the peer NODE hears alive and judges eligible,
        /// furthest ahead (what a Kubernetes preStop wants). With none, says
        /// so and exits 0 without a switchover.
        #[arg(long)]
        to_eligible: bool,
        /// How long the target may take to catch up before everything rolls
        /// back (writes stay paused meanwhile; at most 120000).
        #[arg(long, default_value_t = 10_000)]
        timeout_ms: u64,
        /// The node's config file: with `auth.mode: shared_key` its key signs
        /// the request (the API refuses unsigned switchovers then); with
        /// `tls.api` set, its CA stands in for a missing --ca-file.
        #[arg(long)]
        config: Option<PathBuf>,
        #[command(flatten)]
        tls: cli::ApiTlsArgs,
    },
    /// Make the node at NODE stand for election although its data node may lack
    /// writes it acknowledged (protocol §6.10). Use it only when no primary can
    /// be elected because every candidate is below its floor (`elector status`
    /// shows `below_floor`), and only on the node whose data you trust most:
    /// whatever it lacks is lost. Logged and counted on every node that votes.
    AcceptDataLoss {
        /// HOST:PORT (plain HTTP) or https://HOST:PORT (TLS, see --ca-file) of
        /// the API of the node that is to stand.
        #[arg(long)]
        node: String,
        /// That node's id, typed out as the confirmation.
        #[arg(long = "node-id")]
        node_id: String,
        /// The node's config file: with `auth.mode: shared_key` its key signs
        /// the request; with `tls.api` set, its CA stands in for a missing
        /// --ca-file.
        #[arg(long)]
        config: Option<PathBuf>,
        #[command(flatten)]
        tls: cli::ApiTlsArgs,
    },
    /// Write the man pages (elector.1, elector-run.1, ...) into DIR. Generated
    /// from this very parser (clap_mangen), so they cannot drift from `--help`;
    /// `just package` ships them in the Debian package.
    #[command(hide = true)]
    Man {
        /// Directory to write the pages into (created if missing).
        #[arg(long)]
        dir: PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Man { dir } => match write_man_pages(&dir) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("elector man: {e:#}");
                ExitCode::FAILURE
            }
        },
        Command::Watchdog { config, log_format } => match watchdog(config, log_format) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("elector watchdog: {e:#}");
                ExitCode::FAILURE
            }
        },
        Command::Run {
            config,
            log_format,
            reset_state,
        } => match run(config, log_format, reset_state) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("elector: {e:#}");
                ExitCode::FAILURE
            }
        },
        Command::CheckConfig { files } => {
            let mut loaded = Vec::new();
            for file in &files {
                match check_config(file) {
                    Some(config) => loaded.push((file.clone(), config)),
                    None => return ExitCode::FAILURE,
                }
            }
            let (problems, warnings) = config::check_cluster(&loaded);
            for w in &warnings {
                eprintln!("warning: {w}");
            }
            for p in &problems {
                eprintln!("{p}");
            }
            match (problems.is_empty(), loaded.len()) {
                (false, _) => ExitCode::FAILURE,
                (true, 1) => ExitCode::SUCCESS,
                (true, n) => {
                    println!(
                        "cluster: ok ({n} files agree on fingerprint {})",
                        loaded[0].1.fingerprint()
                    );
                    ExitCode::SUCCESS
                }
            }
        }
        Command::RenderConfig(args) => match render_config(&args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("elector render-config: {e:#}");
                ExitCode::FAILURE
            }
        },
        Command::Status {
            node,
            config,
            json,
            watch,
            interval_ms,
            tls,
        } => {
            // The config is read when it names the node or was given: a
            // bare --node on an operator's machine needs none.
            let loaded = match (&node, &config) {
                (Some(_), None) => None,
                _ => match local_config(config.as_deref()) {
                    Ok(c) => Some(c),
                    Err(e) if node.is_none() => {
                        eprintln!("elector status: no --node, and {e:#}");
                        return ExitCode::from(2);
                    }
                    Err(e) => {
                        eprintln!("elector status: {e:#}");
                        return ExitCode::from(2);
                    }
                },
            };
            let node = match (node, &loaded) {
                (Some(node), _) => node,
                (None, Some(c)) => cli::local_api(&c.listen.api, c.tls.api.is_some()),
                (None, None) => unreachable!("the config is read when --node is missing"),
            };
            let client = match cli::ApiClient::for_config(&tls, loaded.as_ref()) {
                Ok(client) => client,
                Err(e) => {
                    eprintln!("elector status: {e}");
                    return ExitCode::from(2);
                }
            };
            let every = watch.then(|| Duration::from_millis(interval_ms.max(100)));
            report(cli::status_command(&client, &node, json, every))
        }
        Command::Switchover {
            node,
            to,
            to_eligible,
            timeout_ms,
            config,
            tls,
        } => {
            let (client, key) = match api_client_and_key(&tls, config.as_deref()) {
                Ok(both) => both,
                Err(e) => {
                    eprintln!("error: {e:#}");
                    return ExitCode::from(2);
                }
            };
            let to = match (to, to_eligible) {
                (Some(to), _) => to,
                (None, _) => {
                    match cli::fetch_status(&client, &node).map(|(s, _)| cli::pick_eligible(&s)) {
                        Ok(Some(to)) => to,
                        Ok(None) => {
                            println!("no eligible peer is alive: no switchover");
                            return ExitCode::SUCCESS;
                        }
                        Err(e) => {
                            eprintln!("elector: {e}");
                            return ExitCode::FAILURE;
                        }
                    }
                }
            };
            report(cli::switchover_command(
                &client,
                &node,
                &to,
                Duration::from_millis(timeout_ms),
                key.as_ref(),
            ))
        }
        Command::AcceptDataLoss {
            node,
            node_id,
            config,
            tls,
        } => {
            let (client, key) = match api_client_and_key(&tls, config.as_deref()) {
                Ok(both) => both,
                Err(e) => {
                    eprintln!("error: {e:#}");
                    return ExitCode::from(2);
                }
            };
            report(cli::accept_data_loss_command(
                &client,
                &node,
                &node_id,
                key.as_ref(),
            ))
        }
    }
}

/// The config of the elector on this host (--config, $ELECTOR_CONFIG,
/// /etc/elector/elector.yaml), for `status`: its API address and CA.
fn local_config(config_path: Option<&std::path::Path>) -> anyhow::Result<config::Config> {
    let path = config::locate(config_path)?;
    Ok(config::load(&path)?.config)
}

/// `check-config`'s look at `data_dir`, without side effects that outlive
/// it: an existing directory must take a durable write (a probe file,
/// written, fsynced and removed, as `elector run` does at start); a missing
/// one is *not* created (a check that leaves a root-owned directory behind
/// breaks the service that runs as `elector`), only its nearest existing
/// parent is checked to take a new entry.
fn check_data_dir(dir: &std::path::Path) -> anyhow::Result<()> {
    if dir.exists() {
        return Ok(elector::persist::probe_data_dir(dir)?);
    }
    let parent = dir
        .ancestors()
        .skip(1)
        .find(|a| a.exists())
        .unwrap_or(std::path::Path::new("/"));
    let probe = parent.join(format!(".elector-check-{}", std::process::id()));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
        .and_then(|_| std::fs::remove_file(&probe))
        .with_context(|| {
            format!(
                "data_dir {} does not exist and {} takes no new entry",
                dir.display(),
                parent.display()
            )
        })?;
    println!(
        "note: data_dir {} does not exist; `elector run` creates it (check-config does not)",
        dir.display()
    );
    Ok(())
}

/// The packaged unit lets the elector write only to /var/lib/elector
/// (`ProtectSystem=strict`, `StateDirectory=elector`): a `data_dir`
/// elsewhere passes every other check and then fails at start with
/// "Permission denied". Said when the packaged unit is installed.
fn sandbox_warning(dir: &std::path::Path) -> Option<String> {
    const UNITS: [&str; 2] = [
        "/lib/systemd/system/elector.service",
        "/usr/lib/systemd/system/elector.service",
    ];
    let packaged = UNITS.iter().any(|u| std::path::Path::new(u).exists());
    (packaged && !dir.starts_with("/var/lib/elector")).then(|| {
        format!(
            "data_dir {} is outside /var/lib/elector, the only place the packaged elector.service may write; \
             add `ReadWritePaths={}` in a drop-in (systemctl edit elector) or move it",
            dir.display(),
            dir.display()
        )
    })
}

/// A VIP with a unit that cannot move it: an error in a systemd unit
/// (`INVOCATION_ID` set: the unit's own `ExecStartPre`, whose bounding set
/// is the service's), so the unit does not start with a VIP it cannot move
/// or remove; a warning anywhere else (by hand the set is not the unit's).
fn check_vip_capabilities(config: &config::Config) -> anyhow::Result<()> {
    if !matches!(config.vip(), Ok(Some(_))) {
        return Ok(());
    }
    let Some(missing) = cli::capabilities::missing_for_vip_here() else {
        return Ok(());
    };
    if missing.is_empty() {
        return Ok(());
    }
    let msg = format!(
        "a vip is configured but this process may not hold {}; {}",
        missing.join(" "),
        cli::capabilities::VIP_DROP_IN_HINT
    );
    if std::env::var_os("INVOCATION_ID").is_some() {
        anyhow::bail!(msg);
    }
    eprintln!("warning: {msg}");
    Ok(())
}

/// One file of `check-config`: its verdict printed, the config if usable.
fn check_config(file: &std::path::Path) -> Option<config::Config> {
    let loaded = match config::load(file) {
        Ok(loaded) => loaded,
        Err(e) => {
            eprintln!("{e}");
            return None;
        }
    };
    if let Err(e) = check_data_dir(&loaded.config.data_dir) {
        eprintln!("{}: {e:#}", file.display());
        return None;
    }
    if let Some(w) = sandbox_warning(&loaded.config.data_dir) {
        eprintln!("warning: {w}");
    }
    if let Err(e) = check_vip_capabilities(&loaded.config) {
        eprintln!("{}: {e}", file.display());
        return None;
    }
    for w in &loaded.warnings {
        eprintln!("warning: {w}");
    }
    let core = loaded.config.core_config(0);
    let members = match core.witnesses() {
        0 => format!("{} nodes", core.members.len()),
        w => format!("{} data nodes + {w} witness(es)", core.data_members()),
    };
    println!(
        "{}: ok ({members}, quorum {}, acknowledge writes with WAIT {})",
        file.display(),
        core.quorum().size(),
        core.data_promise(),
    );
    Some(loaded.config)
}

/// Renders, prints the warnings, and writes stdout or `--output` (through
/// a temporary file, so a reader never sees half a config).
fn render_config(args: &config::RenderArgs) -> anyhow::Result<()> {
    let (yaml, warnings) = args.render()?;
    for w in &warnings {
        eprintln!("warning: {w}");
    }
    match &args.output {
        None => print!("{yaml}"),
        Some(path) => {
            let tmp = path.with_extension("tmp");
            std::fs::write(&tmp, &yaml).with_context(|| format!("writing {}", tmp.display()))?;
            std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))?;
        }
    }
    Ok(())
}

fn report<E: std::fmt::Display>(r: Result<(), E>) -> ExitCode {
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("elector: {e}");
            ExitCode::FAILURE
        }
    }
}

/// One page per visible subcommand plus `elector.1`; the hidden `man`
/// subcommand itself gets no page. And `elector.yaml.5`, the config
/// reference.
fn write_man_pages(dir: &std::path::Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let cmd = Cli::command().version(VERSION);
    clap_mangen::generate_to(cmd, dir)
        .with_context(|| format!("writing man pages to {}", dir.display()))?;
    // The config file's keys, generated from the config types.
    let page = dir.join("elector.yaml.5");
    std::fs::write(
        &page,
        config::reference::man_page(env!("CARGO_PKG_VERSION")),
    )
    .with_context(|| format!("writing {}", page.display()))?;
    Ok(())
}

fn watchdog(
    config_path: Option<PathBuf>,
    log_format: Option<config::LogFormat>,
) -> anyhow::Result<()> {
    let path = config::locate(config_path.as_deref())?;
    let loaded = config::load(&path)?;
    init_logs(log_format.unwrap_or(loaded.config.log_format));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    // The watchdog dials the data node too: a renewed data_node.tls
    // certificate is taken here as in the elector, without a restart.
    runtime.spawn(loaded.config.data_node_tls_reloader());
    runtime.block_on(elector::watchdog::run(loaded.config));
    Ok(())
}

/// The log: `text` or `json` lines on stdout, filtered by `$ELECTOR_LOG`
/// (default `info`). Under systemd (`$JOURNAL_STREAM` set) text lines carry
/// no timestamp of their own: the journal stamps every line, and two
/// timestamps per line was what an operator saw before.
fn init_logs(format: config::LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("ELECTOR_LOG")
        .unwrap_or_else(|_| "info".into());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false);
    let journald = std::env::var_os("JOURNAL_STREAM").is_some();
    match format {
        config::LogFormat::Json => builder.json().init(),
        config::LogFormat::Text if journald => builder.with_ansi(false).without_time().init(),
        // Plain text when logs go to a file or a container log.
        config::LogFormat::Text => builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
            .init(),
    }
}

fn run(
    config_path: Option<PathBuf>,
    log_format: Option<config::LogFormat>,
    reset_state: bool,
) -> anyhow::Result<()> {
    let path = config::locate(config_path.as_deref())?;
    let loaded = config::load(&path)?;
    init_logs(log_format.unwrap_or(loaded.config.log_format));
    for w in &loaded.warnings {
        tracing::warn!(warning = %w, "config");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    runtime.block_on(async move {
        let shutdown = async {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                    .expect("SIGTERM handler");
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        };
        elector::runtime::run(loaded.config, reset_state, shutdown).await
    })?;
    Ok(())
}

/// The API client for the TLS flags, and the shared key that signs a
/// switchover or accept-data-loss request, from the node's config file when
/// one is given (read once: its `tls.api` also stands in for --ca-file).
fn api_client_and_key(
    tls: &cli::ApiTlsArgs,
    path: Option<&std::path::Path>,
) -> anyhow::Result<(cli::ApiClient, Option<elector::net::auth::Secret>)> {
    let Some(path) = path else {
        return Ok((cli::ApiClient::new(tls)?, None));
    };
    let loaded = config::load(path).with_context(|| format!("reading {}", path.display()))?;
    let client = cli::ApiClient::for_config(tls, Some(&loaded.config))?;
    Ok((client, loaded.config.auth.load_key()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every option and positional argument of every subcommand (the
    /// hidden `man` included), without help text.
    fn undocumented(cmd: &clap::Command, path: &str, out: &mut Vec<String>) {
        for arg in cmd.get_arguments() {
            let id = arg.get_id().as_str();
            if id == "help" || id == "version" {
                continue;
            }
            if arg.get_help().is_none() && arg.get_long_help().is_none() {
                out.push(format!("{path} {id}"));
            }
        }
        for sub in cmd.get_subcommands() {
            if sub.get_about().is_none() && sub.get_long_about().is_none() {
                out.push(format!("{path} {} (the subcommand)", sub.get_name()));
            }
            undocumented(sub, &format!("{path} {}", sub.get_name()), out);
        }
    }

    #[test]
    fn every_cli_option_and_subcommand_has_help_text() {
        let mut missing = Vec::new();
        undocumented(&Cli::command(), "elector", &mut missing);
        assert!(missing.is_empty(), "no help text: {missing:#?}");
    }
}
