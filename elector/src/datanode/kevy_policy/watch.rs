//! The runner we watch, kept across an elector restart (docs/protocol.md
//! §6.10, "A replica's tail", "Across an elector restart").
//!
//! The policy counts a runner we set that someone else ended (an operator's
//! `REPLICAOF`, a promotion by hand): how far that runner got, the most the
//! replica acknowledged, was read a poll ago at best, so the core votes as
//! if the node held the whole stream until it joins it again. The count
//! needs the upstream we set and a reading that saw the node follow it;
//! both lived in the adapter's memory, so an elector restarted inside the
//! window (killed before or after the operator's command, started again
//! before its next poll) saw a node following someone else and counted
//! nothing: it voted with its durable floor, a poll behind what its
//! replica acknowledged (simulator seed 1 of
//! `a_kevy_replica_redirected_by_hand_across_its_electors_restart_loses_no_acknowledged_write`).
//!
//! So the elector keeps the watch in `<data_dir>/kevy-upstream`: the
//! upstream a reading saw the node follow as we set it, and the watchdog's
//! clamp count then. A restarted adapter resumes it and checks the first
//! reading of the node against it (a poll, or the reading in the pipeline
//! of its first `REPLICAOF`): the node elsewhere is a runner ended by
//! someone else, unless the watchdog's count rose meanwhile (its clamp
//! reads the runner's position as it detaches it: the floor hint).
//!
//! The file is written when the watch changes: taken when a reading first
//! sees the node follow the upstream we set, dropped when our own command
//! moves it (its pipeline reads the position of the runner it ends). A
//! crash between our `REPLICAOF` and the write leaves a watch of a runner
//! we ended ourselves: the restarted elector counts it, which costs
//! availability (it votes as if it held the whole stream until the node
//! joins), never a write.
//!
//! A count outlives the elector too (`unread`): the core keeps its note
//! of the unread tail durably, but an elector killed within the write's
//! latency of the count would lose both (simulator seed 41). The flag
//! stays until a reading shows the node joined again to an upstream we
//! set (a new runner's full sync holds what the old one acknowledged); a
//! restarted adapter that finds it counts once more.

/// The file's contents: the runner watched, and whether a runner we set
/// was ended by someone else and has not been joined again since.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct WatchFile {
    pub(crate) watched: Option<Watched>,
    pub(crate) unread: bool,
}

impl WatchFile {
    /// One line per part: `follows <host> <port> clamps <n|->`, and
    /// `unread`; `None` when there is nothing to keep.
    pub(crate) fn render(&self) -> Option<String> {
        let mut text = self
            .watched
            .as_ref()
            .map(Watched::render)
            .unwrap_or_default();
        if self.unread {
            text.push_str("unread\n");
        }
        (!text.is_empty()).then_some(text)
    }

    /// Reads [`WatchFile::render`]'s text; an unreadable line is ignored
    /// (a torn file reads as less, and an `unread` line stands alone).
    pub(crate) fn parse(text: &str) -> WatchFile {
        let mut file = WatchFile::default();
        for line in text.lines() {
            if line.trim() == "unread" {
                file.unread = true;
            } else if let Some(watched) = Watched::parse(line) {
                file.watched = Some(watched);
            }
        }
        file
    }
}

/// One watched runner: the replication address the node followed as we
/// set it, and the watchdog's clamp count when we last saw it do so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Watched {
    pub(crate) host: String,
    pub(crate) port: u16,
    /// `None`: no clamp file (no watchdog configured).
    pub(crate) clamps: Option<u64>,
}

impl Watched {
    /// The file's text: `follows <host> <port> clamps <n|->`.
    pub(crate) fn render(&self) -> String {
        let clamps = self
            .clamps
            .map_or_else(|| "-".to_string(), |c| c.to_string());
        format!("follows {} {} clamps {clamps}\n", self.host, self.port)
    }

    /// Reads [`Watched::render`]'s text; anything else (an empty file, a
    /// torn or foreign one) is no watch.
    pub(crate) fn parse(text: &str) -> Option<Watched> {
        let words: Vec<&str> = text.split_whitespace().collect();
        let [verb, host, port, clamps_word, clamps] = words.as_slice() else {
            return None;
        };
        if *verb != "follows" || *clamps_word != "clamps" || host.is_empty() {
            return None;
        }
        let clamps = match *clamps {
            "-" => None,
            n => Some(n.parse().ok()?),
        };
        Some(Watched {
            host: (*host).to_string(),
            port: port.parse().ok()?,
            clamps,
        })
    }

    /// Whether the watchdog clamped the node since the watch was taken:
    /// its count rose (or a clamp file appeared where there was none).
    pub(crate) fn clamped_since(&self, clamps_now: Option<u64>) -> bool {
        match (self.clamps, clamps_now) {
            (Some(then), Some(now)) => now > then,
            (None, Some(now)) => now > 0,
            (_, None) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watch_rendered_is_parsed_back_with_or_without_a_clamp_count() {
        for clamps in [Some(3), None] {
            let w = Watched {
                host: "10.0.0.2".into(),
                port: 16379,
                clamps,
            };
            assert_eq!(Watched::parse(&w.render()), Some(w));
        }
    }

    #[test]
    fn an_empty_torn_or_foreign_file_is_no_watch() {
        for text in [
            "",
            "follows 10.0.0.2",
            "follows 10.0.0.2 99999 clamps 1",
            "follows 10.0.0.2 6379 clamps x",
            "1 2 3",
            "upstream a 1 clamps 1",
        ] {
            assert_eq!(Watched::parse(text), None, "{text:?}");
        }
    }

    #[test]
    fn a_watch_file_keeps_the_watch_and_the_unread_flag_apart() {
        let watched = Watched {
            host: "h".into(),
            port: 7,
            clamps: Some(0),
        };
        for file in [
            WatchFile::default(),
            WatchFile {
                watched: Some(watched.clone()),
                unread: false,
            },
            WatchFile {
                watched: None,
                unread: true,
            },
            WatchFile {
                watched: Some(watched),
                unread: true,
            },
        ] {
            let text = file.render();
            assert_eq!(text.is_none(), file == WatchFile::default());
            assert_eq!(WatchFile::parse(text.as_deref().unwrap_or("")), file);
        }
        assert!(WatchFile::parse("garbage\nunread\n").unread);
    }

    #[test]
    fn a_clamp_count_that_rose_says_the_watchdog_clamped_since() {
        let w = |clamps| Watched {
            host: "h".into(),
            port: 1,
            clamps,
        };
        assert!(w(Some(2)).clamped_since(Some(3)));
        assert!(!w(Some(2)).clamped_since(Some(2)));
        assert!(w(None).clamped_since(Some(1)));
        assert!(!w(None).clamped_since(Some(0)));
        assert!(!w(Some(2)).clamped_since(None));
    }
}
