//! The watchdog's floor hint (docs/protocol.md §6.10): what the data node
//! held when the watchdog detached it while the elector was silent.
//!
//! A replica whose elector is dead or frozen keeps acknowledging its
//! primary's writes until the watchdog detaches it; the elector's floor
//! cannot record those. So the watchdog reads the node's stream and offset
//! right after its clamp (no acknowledgement can follow it) and writes them
//! here, durably; the elector reads the file with every observation, and the
//! core raises its floor from it when the stream is the one its record
//! names. A stale file only ever raises a floor to what was once held.
//!
//! Format: one line, `<stream> <offset>`.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Where the hint lives, beside `state.json`.
pub fn path(data_dir: &Path) -> PathBuf {
    data_dir.join("floor-hint")
}

/// The hint, if the file holds a well-formed one.
pub fn read(path: &Path) -> Option<(String, u64)> {
    parse(&fs::read_to_string(path).ok()?)
}

fn parse(text: &str) -> Option<(String, u64)> {
    let mut parts = text.split_whitespace();
    let (stream, offset) = (parts.next()?, parts.next()?);
    parts
        .next()
        .is_none()
        .then(|| Some((stream.to_string(), offset.parse().ok()?)))
        .flatten()
}

/// Writes the hint durably (temp file, fsync, rename, fsync of the dir).
pub fn write(path: &Path, stream: &str, offset: u64) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)?;
    f.write_all(format!("{stream} {offset}\n").as_bytes())?;
    f.sync_all()?;
    drop(f);
    fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        File::open(dir)?.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hint_round_trips_and_a_malformed_one_is_none() {
        let dir = tempfile::tempdir().unwrap();
        let p = path(dir.path());
        assert_eq!(read(&p), None);
        write(&p, "kevy-feed-7", 1_200).unwrap();
        assert_eq!(read(&p), Some(("kevy-feed-7".into(), 1_200)));
        for bad in ["", "x", "x y", "x 1 2"] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
    }
}
