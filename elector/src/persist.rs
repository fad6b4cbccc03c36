//! Durable election state (docs/protocol.md §5.2): epoch, vote and data
//! epoch in `<data_dir>/state.json`, written so that a crash at any point
//! leaves either the old or the new file, never a torn one: write a temp
//! file, fsync it, rename it over the old one, fsync the directory.

use crate::core::PersistedState;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum PersistError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is corrupt ({source}); refusing to start with a forgotten vote")]
    Corrupt {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("{path} is missing but {dir} has been used before (it holds {found}): the votes recorded there are lost, and starting as a fresh node could vote twice in one epoch. Restore the file, or start once with `elector run --reset-state` after making sure no election is in progress (protocol §5.2)")]
    Lost {
        path: PathBuf,
        dir: PathBuf,
        found: String,
    },
}

/// Why `data_dir` cannot hold the election state. Found at start-up
/// (`check-config`, `elector run`) rather than at the first vote, when a
/// failed persist would silence the node in the middle of an election.
#[derive(Debug, Error)]
#[error("data_dir {}: cannot {action} {}: {source}", dir.display(), path.display())]
pub struct DataDirError {
    pub dir: PathBuf,
    /// What failed: `create`, `write`, `fsync`, `remove`.
    pub action: &'static str,
    pub path: PathBuf,
    pub source: std::io::Error,
}

/// Checks that `dir` exists or can be created and takes a durable write:
/// creates it if missing, writes, fsyncs and removes a probe file (named
/// `.probe-…`, which [`StateFile::load`] ignores if a crash leaves it).
pub fn probe_data_dir(dir: &Path) -> Result<(), DataDirError> {
    let fail = |action, path: &Path| {
        let (dir, path) = (dir.to_path_buf(), path.to_path_buf());
        move |source| DataDirError {
            dir,
            action,
            path,
            source,
        }
    };
    fs::create_dir_all(dir).map_err(fail("create", dir))?;
    let probe = dir.join(format!(".probe-elector-{}", std::process::id()));
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&probe)
        .map_err(fail("write", &probe))?;
    f.write_all(b"probe").map_err(fail("write", &probe))?;
    f.sync_all().map_err(fail("fsync", &probe))?;
    drop(f);
    fs::remove_file(&probe).map_err(fail("remove", &probe))?;
    Ok(())
}

/// The state file of one elector.
#[derive(Debug, Clone)]
pub struct StateFile {
    dir: PathBuf,
}

impl StateFile {
    pub fn new(dir: &Path) -> StateFile {
        StateFile {
            dir: dir.to_path_buf(),
        }
    }

    pub fn path(&self) -> PathBuf {
        self.dir.join("state.json")
    }

    /// Reads the state. A corrupt file is an error: starting from zero could
    /// vote twice in an epoch. A missing file is a fresh node only in a data
    /// directory that was never used: next to anything else it has been
    /// lost (a wiped or half-restored directory), and that is an error too
    /// unless `reset` says the operator accepts it.
    pub fn load(&self, reset: bool) -> Result<PersistedState, PersistError> {
        let path = self.path();
        match fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map_err(|source| PersistError::Corrupt { path, source }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => match self.leftovers() {
                Some(found) if !reset => Err(PersistError::Lost {
                    path,
                    dir: self.dir.clone(),
                    found,
                }),
                Some(found) => {
                    tracing::warn!(%found, "state.json missing; starting fresh because of --reset-state");
                    Ok(PersistedState::default())
                }
                None => Ok(PersistedState::default()),
            },
            Err(source) => Err(PersistError::Io { path, source }),
        }
    }

    /// What a used data directory holds besides `state.json` (the previous
    /// write's temp file, the auth boot counter, anything an operator left).
    fn leftovers(&self) -> Option<String> {
        let entries = fs::read_dir(&self.dir).ok()?;
        let mut names: Vec<String> = entries
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n != "lost+found" && !n.starts_with(".probe"))
            .collect();
        names.sort();
        (!names.is_empty()).then(|| names.join(", "))
    }

    /// Writes `state` durably (blocking: run it off the async runtime).
    pub fn store(&self, state: &PersistedState) -> Result<(), PersistError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| PersistError::Io { path, source }
        };
        fs::create_dir_all(&self.dir).map_err(io(&self.dir))?;
        let tmp = self.dir.join("state.json.tmp");
        let bytes = serde_json::to_vec_pretty(state).expect("state serialises");
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)
            .map_err(io(&tmp))?;
        f.write_all(&bytes).map_err(io(&tmp))?;
        f.sync_all().map_err(io(&tmp))?;
        drop(f);
        let path = self.path();
        fs::rename(&tmp, &path).map_err(io(&path))?;
        File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(io(&self.dir))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fresh_directory_loads_as_epoch_zero() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            StateFile::new(dir.path()).load(false).unwrap(),
            PersistedState::default()
        );
    }

    #[test]
    fn a_stored_vote_survives_a_reload() {
        let dir = tempfile::tempdir().unwrap();
        let file = StateFile::new(&dir.path().join("nested"));
        let state = PersistedState {
            epoch: 4,
            voted_epoch: 6,
            voted_for: Some("n2".into()),
            data_epoch: 4,
            data_epoch_seen: 5,
        };
        file.store(&state).unwrap();
        assert_eq!(
            StateFile::new(&dir.path().join("nested"))
                .load(false)
                .unwrap(),
            state
        );
        assert!(!dir.path().join("nested/state.json.tmp").exists());
    }

    #[test]
    fn a_corrupt_file_refuses_to_load_instead_of_forgetting_votes() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("state.json"), b"{\"epoch\": 3, \"voted_ep").unwrap();
        assert!(matches!(
            StateFile::new(dir.path()).load(false),
            Err(PersistError::Corrupt { .. })
        ));
    }

    #[test]
    fn a_lost_state_file_in_a_used_directory_refuses_to_start() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("boot_id"), b"3").unwrap();
        let file = StateFile::new(dir.path());
        match file.load(false) {
            Err(PersistError::Lost { found, .. }) => assert_eq!(found, "boot_id"),
            other => panic!("expected Lost, got {other:?}"),
        }
        assert_eq!(file.load(true).unwrap(), PersistedState::default());
    }

    #[test]
    fn the_data_dir_probe_creates_a_missing_directory_and_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let nested = dir.path().join("a/b");
        probe_data_dir(&nested).unwrap();
        assert_eq!(std::fs::read_dir(&nested).unwrap().count(), 0);
    }

    #[test]
    fn the_data_dir_probe_names_the_path_and_the_os_error() {
        let e = probe_data_dir(Path::new("/proc/nope")).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("/proc/nope"), "{text}");
        assert!(text.contains("os error"), "{text}");
    }

    #[test]
    fn an_unwritable_directory_is_an_error_not_a_panic() {
        let file = StateFile::new(Path::new("/proc/definitely/not/here"));
        assert!(file.store(&PersistedState::default()).is_err());
    }
}
