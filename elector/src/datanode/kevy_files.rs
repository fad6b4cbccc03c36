//! The files a kevy adapter shares with its watchdog (another process) in
//! `<data_dir>`: the watchdog's clamp count, which the adapter only reads,
//! and the held position (`kevy_stream`), which both write; and the
//! elector's own, the runner it watches (`kevy_policy::watch`), which only
//! the elector's adapters keep (the watchdog never sets an upstream).
//!
//! Writes are best effort and atomic (a temporary file renamed over the old
//! one): a reader sees the old contents or the new, never half of either. A
//! failed write is logged and leaves the file older than the policy's
//! memory, which the policy prefers anyway.

use super::kevy_stream::unvouched;
use std::path::{Path, PathBuf};

/// Where this kevy's shared files are (`<data_dir>`): the watchdog's clamp
/// count and the held position.
#[derive(Debug, Clone, Default)]
pub(crate) struct SharedFiles {
    pub(crate) watchdog_clamps: Option<PathBuf>,
    pub(crate) position: Option<PathBuf>,
    /// `<data_dir>/kevy-upstream`: the elector's adapters only.
    pub(crate) upstream: Option<PathBuf>,
}

impl SharedFiles {
    /// The held position file's text, if there is one to read.
    pub(crate) fn read_position(&self) -> Option<String> {
        std::fs::read_to_string(self.position.as_ref()?).ok()
    }

    /// How often the watchdog has clamped the node (a missing file is a
    /// watchdog that never clamped: 0); `None` without a clamp file.
    pub(crate) fn watchdog_clamps(&self) -> Option<u64> {
        self.watchdog_clamps
            .as_deref()
            .map(crate::api::metrics::limits::read_count)
    }

    /// Writes the held position the policy asked for, for the watchdog (or
    /// the elector, when the watchdog wrote it).
    pub(crate) fn write_position(&self, text: &str) {
        if let Some(path) = &self.position {
            replace(path, text, "writing the held position");
        }
    }

    /// The watch file's text; `None` without one (or without the file).
    pub(crate) fn read_watch(&self) -> Option<String> {
        std::fs::read_to_string(self.upstream.as_ref()?).ok()
    }

    /// Writes the watch the policy asked for (`None`: removes the file).
    pub(crate) fn write_watch(&self, text: Option<&str>) {
        let Some(path) = &self.upstream else {
            return;
        };
        match text {
            Some(text) => replace(path, text, "writing the watched upstream"),
            None => match std::fs::remove_file(path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "kevy: removing the watched upstream failed");
                }
            },
        }
    }

    /// Strips the process mark from the held position before a `REPLICAOF`
    /// towards anyone (`kevy_mark`): from then on the node may take another
    /// stream's data, and the entry must not vouch for it across a restart.
    /// A failed write is said: the entry then still vouches, so it is
    /// retried by the next such command.
    pub(crate) fn unvouch_position(&self) {
        let Some(path) = &self.position else {
            return;
        };
        let Some(text) = self.read_position().and_then(|t| unvouched(&t)) else {
            return;
        };
        replace(
            path,
            &text,
            "stripping the process mark from the held position",
        );
    }
}

/// Writes `text` over `path` by a rename; says what failed as `doing`.
fn replace(path: &Path, text: &str, doing: &str) {
    let tmp = path.with_extension("tmp");
    let result = std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = result {
        tracing::warn!(path = %path.display(), error = %e, "kevy: {doing} failed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_position_written_is_read_back_and_a_missing_file_reads_as_none() {
        let dir = tempfile::tempdir().expect("tempdir");
        let files = SharedFiles {
            watchdog_clamps: Some(dir.path().join("clamps")),
            position: Some(dir.path().join("position")),
            upstream: Some(dir.path().join("upstream")),
        };
        assert_eq!(files.read_position(), None);
        assert_eq!(files.watchdog_clamps(), Some(0), "no clamp yet");
        files.write_position("1 2 3\n");
        assert_eq!(files.read_position().as_deref(), Some("1 2 3\n"));
        assert!(
            !dir.path().join("position.tmp").exists(),
            "renamed into place"
        );
        let nowhere = SharedFiles::default();
        nowhere.write_position("ignored");
        assert_eq!(nowhere.read_position(), None);
        assert_eq!(nowhere.watchdog_clamps(), None);
    }

    #[test]
    fn a_watch_written_is_read_back_and_removing_it_twice_is_quiet() {
        let dir = tempfile::tempdir().expect("tempdir");
        let files = SharedFiles {
            upstream: Some(dir.path().join("upstream")),
            ..SharedFiles::default()
        };
        assert_eq!(files.read_watch(), None);
        files.write_watch(Some("follows h 1 clamps -\n"));
        assert_eq!(
            files.read_watch().as_deref(),
            Some("follows h 1 clamps -\n")
        );
        files.write_watch(None);
        files.write_watch(None);
        assert_eq!(files.read_watch(), None);
    }
}
