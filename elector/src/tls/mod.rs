//! TLS on the elector's own ports (docs/security.md): the PEM files
//! ([`files`], shared with `data_node.tls`), a server's TLS for the HTTP API
//! and the Sentinel-compatible listener ([`server`]), the election
//! transport's mutual TLS ([`peer`]), and their reload ([`Reloader`]),
//! which re-reads `data_node.tls` as well.

pub(crate) mod files;
pub(crate) mod peer;
pub(crate) mod pinned;
pub(crate) mod server;

use files::TlsFileError;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// How often the files are looked at for a change (besides `SIGHUP`).
pub(crate) const WATCH_EVERY: Duration = Duration::from_secs(2);

/// A TLS section whose files can be read again while the process runs.
pub(crate) trait Reloadable: Send + Sync {
    /// Its config key (`tls.api`), for the log.
    fn section(&self) -> &'static str;
    /// The files it reads.
    fn files(&self) -> Vec<PathBuf>;
    /// Reads them again; on an error the current ones stay in use.
    fn reload(&self) -> Result<(), TlsFileError>;
}

/// A file's modification time and length: what changes when it is
/// rewritten or replaced (a `mv` of a renewed certificate over the old).
fn stamp(files: &[PathBuf]) -> Vec<Option<(SystemTime, u64)>> {
    files
        .iter()
        .map(|f| {
            std::fs::metadata(f)
                .ok()
                .and_then(|m| Some((m.modified().ok()?, m.len())))
        })
        .collect()
}

/// Re-reads every TLS section on `SIGHUP`, and each one whose files
/// changed, so renewed certificates are served without a restart. New
/// connections take the new certificates; open ones (the election
/// transport's among them) keep their sessions, so the primary stays.
pub(crate) struct Reloader {
    sections: Vec<Arc<dyn Reloadable>>,
}

impl Reloader {
    pub(crate) fn new(sections: Vec<Arc<dyn Reloadable>>) -> Self {
        Reloader { sections }
    }

    /// Watches `section` as well (`data_node.tls`, loaded with the config
    /// rather than with our ports).
    pub(crate) fn with(mut self, section: Option<Arc<dyn Reloadable>>) -> Self {
        self.sections.extend(section);
        self
    }

    fn reload(section: &dyn Reloadable, why: &str) {
        match section.reload() {
            Ok(()) => tracing::info!(section = section.section(), why, "TLS certificates re-read"),
            Err(e) => tracing::error!(section = section.section(), why, error = %e,
                "TLS certificates not re-read: the ones loaded before stay in use"),
        }
    }

    /// Runs until the process ends. Without sections it returns at once.
    pub(crate) async fn run(self) {
        if self.sections.is_empty() {
            return;
        }
        use tokio::signal::unix::{signal, SignalKind};
        let mut hangup = match signal(SignalKind::hangup()) {
            Ok(s) => Some(s),
            Err(e) => {
                tracing::warn!(error = %e, "no SIGHUP handler: TLS files are re-read only when they change");
                None
            }
        };
        let mut stamps: Vec<_> = self.sections.iter().map(|s| stamp(&s.files())).collect();
        let mut tick = tokio::time::interval(WATCH_EVERY);
        loop {
            let hup = async {
                match hangup.as_mut() {
                    Some(h) => h.recv().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = hup => {
                    for (section, seen) in self.sections.iter().zip(stamps.iter_mut()) {
                        *seen = stamp(&section.files());
                        Self::reload(section.as_ref(), "SIGHUP");
                    }
                }
                _ = tick.tick() => {
                    for (section, seen) in self.sections.iter().zip(stamps.iter_mut()) {
                        let now = stamp(&section.files());
                        if now != *seen {
                            *seen = now;
                            Self::reload(section.as_ref(), "a file changed");
                        }
                    }
                }
            }
        }
    }
}

/// The loaded `tls` section: what each of our ports serves with.
#[derive(Default)]
pub(crate) struct PortsTls {
    pub(crate) api: Option<Arc<server::ServerTls>>,
    pub(crate) sentinel: Option<Arc<server::ServerTls>>,
    pub(crate) election: Option<Arc<peer::PeerTls>>,
}

impl PortsTls {
    /// Reads every file `config.tls` names (checked by `Config::check`
    /// already; a file changed since is refused here).
    pub(crate) fn load(config: &crate::config::Config) -> Result<Self, TlsFileError> {
        let tls = &config.tls;
        Ok(PortsTls {
            api: tls
                .api
                .as_ref()
                .map(|c| server::ServerTls::load(c, server::API_KEYS))
                .transpose()?,
            sentinel: tls
                .sentinel
                .as_ref()
                .map(|c| server::ServerTls::load(c, server::SENTINEL_KEYS))
                .transpose()?,
            election: tls
                .election
                .as_ref()
                .map(|c| peer::PeerTls::load(c, &config.node_id))
                .transpose()?,
        })
    }

    /// A reloader for every section that is on.
    pub(crate) fn reloader(&self) -> Reloader {
        let mut sections: Vec<Arc<dyn Reloadable>> = Vec::new();
        for s in [&self.api, &self.sentinel].into_iter().flatten() {
            sections.push(Arc::clone(s) as Arc<dyn Reloadable>);
        }
        if let Some(e) = &self.election {
            sections.push(Arc::clone(e) as Arc<dyn Reloadable>);
        }
        Reloader::new(sections)
    }
}

#[cfg(test)]
mod tests;
