//! A mark that names one kevy process, so that a position held for it can
//! be trusted across our own restart (docs/architecture.md §kevy, "A mark
//! that names the process"; protocol §6.10).
//!
//! kevy 7.0.0 has no run id, and in a container it is process 1 at every
//! start: nothing in `INFO` tells the process our position file was written
//! for from one that took its place (empty, or from older files). An
//! elector restarted while its kevy follows nobody (its own shutdown fenced
//! it; the watchdog detached it) therefore proved nothing, and with every
//! elector restarted at once nobody could stand (issue 34).
//!
//! The mark is a Lua script only we know, loaded with `SCRIPT LOAD`: kevy
//! keeps its script cache in the process's memory, never in a snapshot or
//! the append-only file, and never replicates `SCRIPT LOAD` (a read verb in
//! kevy's table), so `SCRIPT EXISTS <sha>` answers 1 exactly in the process
//! that loaded it, until it ends (or someone runs `SCRIPT FLUSH`, which
//! only costs the proof). Each source carries a random seed drawn by this
//! adapter instance and a counter, so no two processes are ever given the
//! same mark, and a restarted elector never re-creates the old one in a new
//! process.
//!
//! The rule: a held position is written to the shared file with the mark
//! that `SCRIPT EXISTS` confirmed *in the same pipeline* as the position
//! was read (one connection is one process); a `REPLICAOF` that points the
//! node anywhere but nowhere first strips the mark from the file (the node
//! may then take another stream's data). So a file entry whose mark is in
//! the process now, read while the node follows nobody, is a position that
//! very process held and has kept since.
//!
//! This tracker is pure: the seed comes in, the executor sends the
//! commands and hands back the replies.

/// What a `REPLICAOF`'s pipeline does about the mark, on its connection
/// before the reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MarkStep {
    /// `SCRIPT EXISTS <sha>`: our mark, still in this process?
    Check(String),
    /// `SCRIPT LOAD <source>`: we have none; the answer is in this process.
    Load(String),
}

/// What a mark's script returns: nothing anyone reads.
const MARK_PREFIX: &str = "return 'elector process mark ";

/// The marks of one adapter instance (an elector's, or a watchdog's).
#[derive(Debug, Clone)]
pub struct ProcessMarks {
    seed: u128,
    loads: u64,
    /// The sha of the mark we loaded into the process we talk to, until a
    /// reading finds it gone.
    own: Option<String>,
}

impl ProcessMarks {
    /// `seed`: random, drawn once per adapter instance.
    pub fn new(seed: u128) -> ProcessMarks {
        ProcessMarks {
            seed,
            loads: 0,
            own: None,
        }
    }

    /// Our mark, believed to be in the process (confirmed by each pipeline
    /// that asks).
    pub fn own(&self) -> Option<&str> {
        self.own.as_deref()
    }

    /// The shas a poll asks `SCRIPT EXISTS` about: ours, and the one the
    /// shared file was written under (another adapter's, or an earlier
    /// elector's), without repeats.
    pub fn to_check(&self, file_mark: Option<&str>) -> Vec<String> {
        let mut asked: Vec<String> = self.own.iter().cloned().collect();
        if let Some(m) = file_mark.filter(|m| is_sha(m)) {
            if !asked.iter().any(|a| a == m) {
                asked.push(m.to_string());
            }
        }
        asked
    }

    /// `SCRIPT EXISTS`'s answer for `asked` (`None`: not asked, refused,
    /// or of another shape): the shas present in the process. Ours, found
    /// missing, is forgotten (another process answers, or the cache was
    /// flushed), so that a new one is loaded.
    pub fn answered(&mut self, asked: &[String], answer: Option<&[bool]>) -> Vec<String> {
        let present: Vec<String> = match answer {
            Some(flags) if flags.len() == asked.len() => asked
                .iter()
                .zip(flags)
                .filter(|(_, &p)| p)
                .map(|(s, _)| s.clone())
                .collect(),
            _ => return Vec::new(),
        };
        if let Some(own) = &self.own {
            if asked.contains(own) && !present.contains(own) {
                tracing::info!(mark = %own, "kevy: our process mark is gone (another process answers, or SCRIPT FLUSH); loading a new one");
                self.own = None;
            }
        }
        present
    }

    /// The script to load when we have no mark in the process: a source
    /// nobody else can produce (the seed) and that we never offer twice
    /// (the counter).
    pub fn to_load(&mut self) -> Option<String> {
        if self.own.is_some() {
            return None;
        }
        self.loads += 1;
        Some(format!("{MARK_PREFIX}{:032x}-{}'", self.seed, self.loads))
    }

    /// What a `REPLICAOF`'s pipeline does: check ours, or load one.
    pub fn step(&mut self) -> Option<MarkStep> {
        match &self.own {
            Some(sha) => Some(MarkStep::Check(sha.clone())),
            None => self.to_load().map(MarkStep::Load),
        }
    }

    /// `SCRIPT LOAD` answered `sha`.
    pub fn loaded(&mut self, sha: &str) {
        if is_sha(sha) {
            self.own = Some(sha.to_ascii_lowercase());
        }
    }

    /// Another process answers (the tether): our mark is not in it.
    pub fn forget(&mut self) {
        self.own = None;
    }
}

/// A 40-digit hex sha1, as `SCRIPT LOAD` answers.
pub fn is_sha(s: &str) -> bool {
    s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// `SCRIPT EXISTS`'s reply as flags (`None` for anything else, e.g.
/// `-LOADING` during a full resync).
pub fn exists_flags(reply: &redis::Value) -> Option<Vec<bool>> {
    match reply {
        redis::Value::Array(items) => items
            .iter()
            .map(|v| match v {
                redis::Value::Int(1) => Some(true),
                redis::Value::Int(0) => Some(false),
                _ => None,
            })
            .collect(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "0123456789abcdef0123456789abcdef01234567";
    const B: &str = "89abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn each_load_offers_a_source_never_offered_before_and_none_while_a_mark_is_in_place() {
        let mut m = ProcessMarks::new(7);
        let first = m.to_load().unwrap();
        m.loaded(A);
        assert_eq!(m.to_load(), None);
        m.forget();
        let second = m.to_load().unwrap();
        assert_ne!(first, second);
        let other_instance = ProcessMarks::new(8).to_load().unwrap();
        assert_ne!(first, other_instance);
    }

    #[test]
    fn a_poll_asks_about_our_mark_and_the_files_once_each() {
        let mut m = ProcessMarks::new(1);
        assert!(m.to_check(None).is_empty());
        assert_eq!(m.to_check(Some(B)), vec![B.to_string()]);
        m.loaded(A);
        assert_eq!(m.to_check(Some(B)), vec![A.to_string(), B.to_string()]);
        assert_eq!(m.to_check(Some(A)), vec![A.to_string()]);
        assert_eq!(m.to_check(Some("not a sha")), vec![A.to_string()]);
    }

    #[test]
    fn our_mark_found_missing_is_forgotten_and_an_unreadable_answer_confirms_nothing() {
        let mut m = ProcessMarks::new(1);
        m.loaded(A);
        let asked = m.to_check(Some(B));
        assert_eq!(m.answered(&asked, None), Vec::<String>::new());
        assert_eq!(m.own(), Some(A), "an unreadable answer is not an absence");
        assert_eq!(
            m.answered(&asked, Some(&[true, false])),
            vec![A.to_string()]
        );
        assert_eq!(
            m.answered(&asked, Some(&[false, true])),
            vec![B.to_string()]
        );
        assert_eq!(m.own(), None);
        assert!(m.to_load().is_some());
    }

    #[test]
    fn exists_replies_of_another_shape_are_not_read() {
        use redis::Value;
        assert_eq!(
            exists_flags(&Value::Array(vec![Value::Int(1), Value::Int(0)])),
            Some(vec![true, false])
        );
        assert_eq!(exists_flags(&Value::Array(vec![Value::Int(2)])), None);
        assert_eq!(exists_flags(&Value::Okay), None);
    }
}
