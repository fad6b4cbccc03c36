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
                    tracing::warn!(%found, "state.json missing; starting fresh because of --reset-state: this node neither stands nor votes until its data node follows a primary (protocol §5.2)");
                    Ok(PersistedState::after_state_loss())
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
        let bytes = serde_json::to_vec_pretty(state).expect("state serialises");
        write_atomically(&self.dir, "state.json", &bytes)
    }

    /// The auth `boot_id` for this process (protocol §3, auth): larger than
    /// any this node used before, whatever the wall clock says. Receivers
    /// refuse frames from an older boot as replays, so a restart after the
    /// clock stepped back must not reuse a smaller id: the id is
    /// `max(previous + 1, now_ms)`, stored durably before it is used. Using
    /// the wall clock when it is ahead keeps ids comparable with electors
    /// that never stored one.
    pub fn next_boot_id(&self, now_ms: u64) -> Result<u64, PersistError> {
        let path = self.dir.join(BOOT_ID_FILE);
        let previous = match fs::read_to_string(&path) {
            Ok(text) => text.trim().parse::<u64>().map_err(|_| PersistError::Io {
                path: path.clone(),
                source: std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("boot id {:?} is not a number", text.trim()),
                ),
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(source) => return Err(PersistError::Io { path, source }),
        };
        let next = previous.saturating_add(1).max(now_ms);
        write_atomically(&self.dir, BOOT_ID_FILE, next.to_string().as_bytes())?;
        Ok(next)
    }
}

/// Where the auth boot counter lives, next to `state.json`.
const BOOT_ID_FILE: &str = "boot_id";

/// Temp file, fsync, rename over `name`, fsync the directory: a crash leaves
/// the old or the new file, never a torn one.
fn write_atomically(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), PersistError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| PersistError::Io { path, source }
    };
    fs::create_dir_all(dir).map_err(io(dir))?;
    let tmp = dir.join(format!("{name}.tmp"));
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)
        .map_err(io(&tmp))?;
    f.write_all(bytes).map_err(io(&tmp))?;
    f.sync_all().map_err(io(&tmp))?;
    drop(f);
    let path = dir.join(name);
    fs::rename(&tmp, &path).map_err(io(&path))?;
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io(dir))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boot_ids_grow_across_restarts_even_when_the_clock_steps_back() {
        let dir = tempfile::tempdir().unwrap();
        let file = StateFile::new(dir.path());
        let first = file.next_boot_id(1_700_000_000_000).unwrap();
        assert_eq!(first, 1_700_000_000_000);
        // The wall clock stepped back an hour before the restart.
        let second = file.next_boot_id(1_700_000_000_000 - 3_600_000).unwrap();
        assert!(second > first, "{second} <= {first}");
        // And forward again: the clock wins when it is ahead.
        let third = file.next_boot_id(1_800_000_000_000).unwrap();
        assert_eq!(third, 1_800_000_000_000);
    }

    #[test]
    fn a_garbled_boot_id_file_is_an_error_not_a_reset() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("boot_id"), b"twelve").unwrap();
        assert!(StateFile::new(dir.path()).next_boot_id(5).is_err());
    }

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
            stream: Some(crate::core::StreamRecord {
                data_epoch: 4,
                id: crate::core::StreamId("kevy-feed-9".into()),
            }),
            floor: Some(crate::core::Floor::new(4, 1_200)),
            held: None,
            joining: 5,
            joining_primary: Some("n3".into()),
            joining_process: Some("run_id:5f1c".into()),
            led: Some(3),
            floor_unknown: true,
            tail_unread: Some(4),
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
    fn a_lost_state_reset_by_the_operator_starts_with_its_floor_and_led_unknown() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("boot_id"), b"1700000000000").unwrap();
        let reset = StateFile::new(dir.path()).load(true).unwrap();
        assert!(reset.floor_unknown, "{reset:?}");
        assert_eq!(reset.led, None, "it may have led any epoch");
        assert_eq!((reset.epoch, reset.voted_epoch, reset.floor), (0, 0, None));
        // A directory never used is a fresh node: nothing to have lost.
        let fresh = tempfile::tempdir().unwrap();
        assert!(
            !StateFile::new(fresh.path())
                .load(true)
                .unwrap()
                .floor_unknown
        );
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
        assert_eq!(file.load(true).unwrap(), PersistedState::after_state_loss());
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
