//! The watchdog's floor hints (docs/protocol.md §6.10): what the data node
//! held when the watchdog detached it while the elector was silent.
//!
//! A replica whose elector is dead or frozen keeps acknowledging its
//! primary's writes until the watchdog detaches it; the elector's floor
//! cannot record those. So the watchdog reads the node's stream and offset
//! right after each clamp (no acknowledgement can follow it) and records
//! them here, durably; the elector reads the file with every observation,
//! and the core raises its floor from the entry of the stream its record
//! names. A stale entry only ever raises a floor to what was once held.
//!
//! Each entry also says which epoch the elector was joining when it was
//! written (its durable `joining`, read from `state.json`): a reading in a
//! stream no record names counts as a position in that epoch, but only for
//! the same unclaimed join (an older entry says nothing about a later one).
//!
//! One entry per stream, the highest offset seen in it. An entry is never
//! replaced by another stream's: a data node that restarts while its elector
//! is down comes back in a new stream (empty, or kevy's new feed
//! generation), and a file that kept only the latest reading would lose
//! what the node held in the stream the elector's record names (the
//! simulator found it, seed 3911). At most [`MAX_ENTRIES`] are kept; the
//! lowest offsets go first (a restarted node's fresh streams are near 0).
//!
//! Format: one `<stream> <offset> <joining>` line per entry (a line without
//! `<joining>`, from before it, reads as 0: no join).

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// How many streams the file remembers.
pub const MAX_ENTRIES: usize = 8;

/// One entry of the file.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Hint {
    pub stream: String,
    /// The highest offset the data node held in `stream`.
    pub offset: u64,
    /// The elector's durable `joining` epoch when the entry was last raised.
    pub joining: u64,
}

/// Where the hints live, beside `state.json`.
pub fn path(data_dir: &Path) -> PathBuf {
    data_dir.join("floor-hint")
}

/// The well-formed entries of the file (none if it is missing); a
/// malformed line is skipped.
pub fn read(path: &Path) -> Vec<Hint> {
    fs::read_to_string(path)
        .map(|text| parse(&text))
        .unwrap_or_default()
}

fn parse(text: &str) -> Vec<Hint> {
    let mut hints = Vec::new();
    for line in text.lines() {
        let parts: Vec<&str> = line.split_whitespace().collect();
        let (stream, offset, joining) = match parts.as_slice() {
            [s, o] => (*s, o.parse(), Ok(0)),
            [s, o, j] => (*s, o.parse(), j.parse()),
            _ => continue,
        };
        if let (Ok(offset), Ok(joining)) = (offset, joining) {
            merge(&mut hints, stream, offset, joining);
        }
    }
    hints
}

/// Adds `stream` at `offset` (written while joining `joining`) to `hints`:
/// the highest offset per stream, tagged with the join it was last raised
/// under; at most [`MAX_ENTRIES`] entries (the lowest offsets go first).
pub fn merge(hints: &mut Vec<Hint>, stream: &str, offset: u64, joining: u64) {
    match hints.iter_mut().find(|h| h.stream == stream) {
        Some(entry) if offset > entry.offset || joining > entry.joining => {
            entry.offset = entry.offset.max(offset);
            entry.joining = entry.joining.max(joining);
        }
        Some(_) => {}
        None => hints.push(Hint {
            stream: stream.to_string(),
            offset,
            joining,
        }),
    }
    while hints.len() > MAX_ENTRIES {
        let lowest = hints
            .iter()
            .enumerate()
            .min_by_key(|(_, h)| h.offset)
            .map(|(i, _)| i)
            .unwrap_or(0);
        hints.remove(lowest);
    }
}

/// Records `stream` at `offset` with what the file already holds, durably
/// (temp file, fsync, rename, fsync of the dir). Returns the entries now
/// on disk.
pub fn record(path: &Path, stream: &str, offset: u64, joining: u64) -> std::io::Result<Vec<Hint>> {
    let mut hints = read(path);
    let before = hints.clone();
    merge(&mut hints, stream, offset, joining);
    if hints == before && path.exists() {
        return Ok(hints);
    }
    let text: String = hints
        .iter()
        .map(|h| format!("{} {} {}\n", h.stream, h.offset, h.joining))
        .collect();
    let tmp = path.with_extension("tmp");
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()?;
    drop(f);
    fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        File::open(dir)?.sync_all()?;
    }
    Ok(hints)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hint(stream: &str, offset: u64, joining: u64) -> Hint {
        Hint {
            stream: stream.into(),
            offset,
            joining,
        }
    }

    #[test]
    fn hints_round_trip_and_malformed_lines_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let p = path(dir.path());
        assert!(read(&p).is_empty());
        record(&p, "kevy-feed-7", 1_200, 3).unwrap();
        assert_eq!(read(&p), vec![hint("kevy-feed-7", 1_200, 3)]);
        assert_eq!(
            parse("x\nx y\nx 1 2 3\n\ns 5\nt 6 2\n"),
            vec![hint("s", 5, 0), hint("t", 6, 2)]
        );
    }

    #[test]
    fn a_later_stream_never_replaces_what_the_node_held_in_an_earlier_one() {
        // The data node restarted into a fresh stream while the elector was
        // down: the entry its record names must survive (§6.10).
        let dir = tempfile::tempdir().unwrap();
        let p = path(dir.path());
        record(&p, "s1", 267, 0).unwrap();
        record(&p, "s4", 0, 0).unwrap();
        record(&p, "s1", 100, 0).unwrap();
        assert_eq!(read(&p), vec![hint("s1", 267, 0), hint("s4", 0, 0)]);
    }

    #[test]
    fn the_file_keeps_the_highest_offsets_when_full() {
        let mut hints = vec![hint("keep", 1_000, 0)];
        for i in 0..20 {
            merge(&mut hints, &format!("fresh-{i}"), i, 0);
        }
        assert_eq!(hints.len(), MAX_ENTRIES);
        assert!(hints.contains(&hint("keep", 1_000, 0)));
        assert!(!hints.iter().any(|h| h.stream == "fresh-0"));
    }
}
