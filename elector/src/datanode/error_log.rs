//! Why the data node cannot be used, told without flooding the log.
//!
//! The adapter polls every `data_poll_ms` (100 ms by default); a data node
//! that refuses our credentials fails every poll. The cause is logged at
//! once when it appears or changes, repeated at most every [`REPEAT`] while
//! it lasts, and followed by one line when the node answers again. Without
//! this, an unreachable data node showed only as "unreachable" in `/status`
//! with no cause anywhere (issue 23 item 6).

use std::time::{Duration, Instant};

/// How often a persisting cause is said again.
pub(crate) const REPEAT: Duration = Duration::from_secs(30);

/// What to log after a round, if anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ErrorLine {
    /// The round failed: `repeat` when this cause was already logged.
    Failing { cause: String, repeat: bool },
    /// The round worked after failures that were logged.
    Recovered,
}

#[derive(Debug, Default)]
pub(crate) struct ErrorLog {
    /// The cause last logged and when.
    logged: Option<(String, Instant)>,
}

impl ErrorLog {
    /// Notes a round's outcome (`error`: its failure, if any).
    pub(crate) fn note(&mut self, error: Option<&str>, now: Instant) -> Option<ErrorLine> {
        match (error, &self.logged) {
            (None, None) => None,
            (None, Some(_)) => {
                self.logged = None;
                Some(ErrorLine::Recovered)
            }
            (Some(cause), Some((last, at))) if cause == last && now < *at + REPEAT => None,
            (Some(cause), last) => {
                let repeat = last.as_ref().is_some_and(|(l, _)| l == cause);
                self.logged = Some((cause.to_string(), now));
                Some(ErrorLine::Failing {
                    cause: cause.to_string(),
                    repeat,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failing(cause: &str, repeat: bool) -> Option<ErrorLine> {
        Some(ErrorLine::Failing {
            cause: cause.into(),
            repeat,
        })
    }

    #[test]
    fn a_cause_is_logged_at_once_then_at_most_every_repeat_interval() {
        let t0 = Instant::now();
        let mut log = ErrorLog::default();
        assert_eq!(log.note(Some("auth"), t0), failing("auth", false));
        assert_eq!(
            log.note(Some("auth"), t0 + Duration::from_millis(100)),
            None
        );
        assert_eq!(
            log.note(Some("auth"), t0 + REPEAT - Duration::from_millis(1)),
            None
        );
        assert_eq!(log.note(Some("auth"), t0 + REPEAT), failing("auth", true));
    }

    #[test]
    fn a_new_cause_is_logged_at_once() {
        let t0 = Instant::now();
        let mut log = ErrorLog::default();
        log.note(Some("auth"), t0);
        assert_eq!(
            log.note(Some("refused"), t0 + Duration::from_millis(100)),
            failing("refused", false)
        );
    }

    #[test]
    fn recovery_is_logged_once_and_only_after_a_logged_failure() {
        let t0 = Instant::now();
        let mut log = ErrorLog::default();
        assert_eq!(log.note(None, t0), None);
        log.note(Some("timeout"), t0);
        assert_eq!(log.note(None, t0), Some(ErrorLine::Recovered));
        assert_eq!(log.note(None, t0), None);
    }
}
