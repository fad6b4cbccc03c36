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
//! The HTTP client is `ureq` (blocking): the CLI is a short-lived process
//! and needs no async runtime. An `https://` address is reached over TLS
//! with the CA and client certificate the flags name ([`client`]).

mod accept_data_loss;
pub mod capabilities;
pub(crate) mod client;
mod report;
mod switchover;

use std::collections::BTreeMap;
use std::time::Duration;

use thiserror::Error;

use crate::api::status::StatusSnapshot;

pub use self::accept_data_loss::accept_data_loss_command;
pub use self::client::{config_ca_file, inherit_scheme, ApiClient, ApiTlsArgs};
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
    /// A CA or client certificate file the flags name is unusable.
    #[error(transparent)]
    TlsFile(#[from] crate::tls::files::TlsFileError),
    #[error("{0}")]
    Usage(String),
    #[error("{url}: an https:// address needs --ca-file, the CA the API's certificate chains to (or, with --config, that config's tls.api.ca_file)")]
    HttpsNeedsCa { url: String },
    #[error("{url}: the API's certificate is not trusted by --ca-file {}: {detail}", ca_file.display())]
    Untrusted {
        url: String,
        ca_file: std::path::PathBuf,
        detail: String,
    },
    #[error("{url}: the API requires a client certificate (its tls.api.client_ca_file is set): pass --cert-file and --key-file")]
    ClientCertRequired { url: String },
    #[error("{url}: the API refused the certificate of --cert-file: {detail}")]
    ClientCertRefused { url: String, detail: String },
    #[error("{url}: TLS handshake failed: {detail}")]
    Handshake { url: String, detail: String },
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

/// GET returning the body text.
fn get_text(client: &ApiClient, node: &str, path: &str) -> Result<String, CliError> {
    let url = url(node, path);
    match client.agent(&url, READ_TIMEOUT)?.get(&url).call() {
        Ok(r) => r.into_string().map_err(|e| CliError::Transport {
            url: url.clone(),
            message: e.to_string(),
        }),
        Err(ureq::Error::Status(code, r)) => Err(CliError::Http {
            url,
            code,
            body: r.into_string().unwrap_or_default().trim().to_string(),
        }),
        Err(ureq::Error::Transport(t)) => Err(client.transport_error(&url, &t)),
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
/// (the same rule the watchdog uses to find it), as `https://` when the
/// config serves it with `tls.api`.
pub fn local_api(api_listen: &str, tls: bool) -> String {
    crate::watchdog::local_api_base(api_listen, tls)
}

/// Fetches and parses one node's `/status`, also returning the raw body.
pub fn fetch_status(client: &ApiClient, node: &str) -> Result<(StatusSnapshot, String), CliError> {
    let body = get_text(client, node, "/status")?;
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

/// Queries `node` and every peer API it lists (with `node`'s scheme, see
/// [`inherit_scheme`]).
pub(crate) fn gather(client: &ApiClient, node: &str) -> Result<ClusterReport, CliError> {
    let (origin, _) = fetch_status(client, node)?;
    let mut views = BTreeMap::new();
    for p in &origin.peers {
        if let Some(api) = &p.api {
            views.insert(
                p.id.clone(),
                fetch_status(client, &inherit_scheme(node, api))
                    .map(|(s, _)| s)
                    .map_err(|e| e.to_string()),
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
pub fn status_command(
    client: &ApiClient,
    node: &str,
    json: bool,
    watch: Option<Duration>,
) -> Result<(), CliError> {
    use std::io::IsTerminal as _;
    let stdout = std::io::stdout();
    let terminal = stdout.is_terminal();
    let mut out = stdout.lock();
    let view = StatusView {
        client,
        node,
        json,
        watch,
    };
    status_loop(&mut out, terminal, &view, None)
}

/// What `elector status` was asked to show, and through which client.
pub(crate) struct StatusView<'a> {
    pub(crate) client: &'a ApiClient,
    pub(crate) node: &'a str,
    pub(crate) json: bool,
    pub(crate) watch: Option<Duration>,
}

/// The body of [`status_command`], writing to `out`; `rounds` bounds a
/// `--watch` loop (tests), `None` runs until interrupted.
pub(crate) fn status_loop(
    stdout: &mut dyn std::io::Write,
    terminal: bool,
    view: &StatusView<'_>,
    mut rounds: Option<u32>,
) -> Result<(), CliError> {
    let StatusView {
        client,
        node,
        json,
        watch,
    } = *view;
    loop {
        if json {
            // JSON: the asked node's document as served. Under --watch one
            // compact document per line (NDJSON), to pipe into jq or a file.
            match (fetch_status(client, node), watch) {
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
            let text = match gather(client, node) {
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
