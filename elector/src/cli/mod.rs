//! `elector status` and `elector switchover`: the operator's view and lever.
//!
//! `status` asks one elector for `/status`, then asks every peer whose API
//! address it knows for *its own* view, and prints one row per node. Each
//! node describing itself is more truthful than one node describing the rest
//! (a partitioned node still knows its own role), and putting the views side
//! by side is what exposes disagreement: two unfenced primaries, nodes that
//! name different primaries, a node stuck in an old epoch. Those are called
//! out below the table in plain words, along with the last transition and
//! its reason, so "why did the primary move?" is answered on one screen.
//!
//! The HTTP client is `ureq` (blocking, no TLS): the CLI is a short-lived
//! process and needs no async runtime.

mod accept_data_loss;
pub mod capabilities;
mod report;
mod switchover;

use std::collections::BTreeMap;
use std::time::Duration;

use thiserror::Error;

use crate::api::status::StatusSnapshot;

pub use self::accept_data_loss::accept_data_loss_command;
pub(crate) use self::report::{format_age, render_report};
pub use self::switchover::{pick_eligible, switchover, switchover_command};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
const READ_TIMEOUT: Duration = Duration::from_secs(3);

/// Why a CLI command failed.
#[derive(Debug, Error)]
pub enum CliError {
    #[error("{url}: {message}")]
    Transport { url: String, message: String },
    #[error("{url}: HTTP {code}: {body}")]
    Http {
        url: String,
        code: u16,
        body: String,
    },
    #[error("{url}: not a status document: {source}")]
    Json {
        url: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("switchover to {to} did not happen: {message}")]
    Switchover { to: String, message: String },
    #[error("writing output: {0}")]
    Io(#[from] std::io::Error),
}

/// `HOST:PORT` (or a full `http://` URL) plus a path.
fn url(node: &str, path: &str) -> String {
    let base = node.trim_end_matches('/');
    if base.starts_with("http://") || base.starts_with("https://") {
        format!("{base}{path}")
    } else {
        format!("http://{base}{path}")
    }
}

fn agent(read_timeout: Duration) -> ureq::Agent {
    ureq::AgentBuilder::new()
        .timeout_connect(CONNECT_TIMEOUT)
        .timeout_read(read_timeout)
        .build()
}

/// GET returning the body text.
fn get_text(node: &str, path: &str) -> Result<String, CliError> {
    let url = url(node, path);
    match agent(READ_TIMEOUT).get(&url).call() {
        Ok(r) => r.into_string().map_err(|e| CliError::Transport {
            url: url.clone(),
            message: e.to_string(),
        }),
        Err(ureq::Error::Status(code, r)) => Err(CliError::Http {
            url,
            code,
            body: r.into_string().unwrap_or_default().trim().to_string(),
        }),
        Err(ureq::Error::Transport(t)) => Err(CliError::Transport {
            url,
            message: transport_message(&t),
        }),
    }
}

/// What went wrong on the wire, without the URL: ureq's own `Display` of a
/// transport error starts with the URL, which [`CliError::Transport`]
/// already names, so printing both said it twice.
fn transport_message(t: &ureq::Transport) -> String {
    match t.message() {
        Some(m) => format!("{}: {m}", t.kind()),
        None => t.kind().to_string(),
    }
}

/// The API address of the elector configured on this host: the config's
/// `listen.api`, reached over loopback when it listens on every address
/// (the same rule the watchdog uses to find it).
pub fn local_api(api_listen: &str) -> String {
    crate::watchdog::health_url(api_listen)
        .trim_end_matches("/healthz")
        .to_string()
}

/// Fetches and parses one node's `/status`, also returning the raw body.
pub fn fetch_status(node: &str) -> Result<(StatusSnapshot, String), CliError> {
    let body = get_text(node, "/status")?;
    let snap = serde_json::from_str(&body).map_err(|source| CliError::Json {
        url: url(node, "/status"),
        source,
    })?;
    Ok((snap, body))
}

/// The node asked, and what each peer with a known API said about itself.
#[derive(Debug, Clone)]
pub(crate) struct ClusterReport {
    /// Address the operator gave.
    pub(crate) asked: String,
    pub(crate) origin: StatusSnapshot,
    /// Peer id -> its own snapshot, or why it could not be fetched. Peers
    /// with no API address are absent.
    pub(crate) views: BTreeMap<String, Result<StatusSnapshot, String>>,
}

/// Queries `node` and every peer API it lists.
pub(crate) fn gather(node: &str) -> Result<ClusterReport, CliError> {
    let (origin, _) = fetch_status(node)?;
    let mut views = BTreeMap::new();
    for p in &origin.peers {
        if let Some(api) = &p.api {
            views.insert(
                p.id.clone(),
                fetch_status(api).map(|(s, _)| s).map_err(|e| e.to_string()),
            );
        }
    }
    Ok(ClusterReport {
        asked: node.to_string(),
        origin,
        views,
    })
}

fn now_unix_ms() -> u64 {
    crate::net::auth::unix_ms_now()
}

/// `elector status --node HOST:PORT [--json] [--watch --interval-ms N]`.
/// With `watch`, redraws every interval until interrupted (Ctrl-C); a node
/// that stops answering is shown as an error line, not a crash, since that is
/// exactly when an operator is watching. Only a terminal gets the
/// clear-screen codes; a pipe or file gets one report after another, each
/// under a `---` line.
pub fn status_command(node: &str, json: bool, watch: Option<Duration>) -> Result<(), CliError> {
    use std::io::IsTerminal as _;
    let stdout = std::io::stdout();
    let terminal = stdout.is_terminal();
    status_loop(&mut stdout.lock(), terminal, node, json, watch, None)
}

/// The body of [`status_command`], writing to `out`; `rounds` bounds a
/// `--watch` loop (tests), `None` runs until interrupted.
pub(crate) fn status_loop(
    stdout: &mut dyn std::io::Write,
    terminal: bool,
    node: &str,
    json: bool,
    watch: Option<Duration>,
    mut rounds: Option<u32>,
) -> Result<(), CliError> {
    loop {
        if json {
            // JSON: the asked node's document as served. Under --watch one
            // compact document per line (NDJSON), to pipe into jq or a file.
            match (fetch_status(node), watch) {
                (Ok((_, body)), None) => write!(stdout, "{}", body)?,
                (Ok((snap, _)), Some(_)) => {
                    let line = serde_json::to_string(&snap).map_err(|source| CliError::Json {
                        url: url(node, "/status"),
                        source,
                    })?;
                    writeln!(stdout, "{line}")?;
                }
                (Err(e), None) => return Err(e),
                (Err(e), Some(_)) => writeln!(
                    stdout,
                    "{{\"error\":{}}}",
                    serde_json::Value::from(e.to_string())
                )?,
            }
        } else {
            let text = match gather(node) {
                Ok(report) => render_report(&report, now_unix_ms()),
                Err(e) if watch.is_some() => format!("! {e}\n"),
                Err(e) => return Err(e),
            };
            if let Some(every) = watch {
                if terminal {
                    // Clear the screen and home the cursor, then redraw.
                    write!(
                        stdout,
                        "\x1b[2J\x1b[H{text}\n(every {}, Ctrl-C to stop)\n",
                        format_age(every.as_millis() as u64)
                    )?;
                } else {
                    write!(stdout, "--- unix ms {}\n{text}", now_unix_ms())?;
                }
            } else {
                write!(stdout, "{text}")?;
            }
        }
        stdout.flush()?;
        if let Some(left) = rounds.as_mut() {
            *left = left.saturating_sub(1);
            if *left == 0 {
                return Ok(());
            }
        }
        match watch {
            Some(every) => std::thread::sleep(every),
            None => return Ok(()),
        }
    }
}

#[cfg(test)]
mod tests;
