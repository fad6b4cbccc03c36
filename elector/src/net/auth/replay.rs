//! Anti-replay: per sender, the highest `(boot_id, seq)` accepted and a
//! bitmap of the sequence numbers just below it (RFC 4303 §3.4.3).

use super::AuthError;

/// Sequence numbers a sender may deliver out of order and still be heard.
pub(super) const REPLAY_WINDOW: u64 = 64;

/// Highest `(boot_id, seq)` accepted from one sender and which of the
/// [`REPLAY_WINDOW`] sequence numbers below it were seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ReplayWindow {
    boot_id: u64,
    top: u64,
    /// Bit `i` set: `top - i` was accepted (bit 0 is `top` itself).
    seen: u64,
}

impl ReplayWindow {
    pub(super) fn new(boot_id: u64, seq: u64) -> Self {
        ReplayWindow {
            boot_id,
            top: seq,
            seen: 1,
        }
    }

    /// Records `(boot_id, seq)`, or says why it is a replay. Only called for
    /// authentic frames.
    pub(super) fn accept(&mut self, boot_id: u64, seq: u64) -> Result<(), AuthError> {
        if boot_id < self.boot_id {
            return Err(AuthError::Replay);
        }
        if boot_id > self.boot_id {
            *self = ReplayWindow::new(boot_id, seq);
            return Ok(());
        }
        if seq > self.top {
            let shift = seq - self.top;
            self.seen = if shift >= REPLAY_WINDOW {
                0
            } else {
                self.seen << shift
            };
            self.seen |= 1;
            self.top = seq;
            return Ok(());
        }
        let behind = self.top - seq;
        if behind >= REPLAY_WINDOW || self.seen & (1 << behind) != 0 {
            return Err(AuthError::Replay);
        }
        self.seen |= 1 << behind;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_replay_window_accepts_each_sequence_number_exactly_once() {
        let mut w = ReplayWindow::new(1, 100);
        assert_eq!(w.accept(1, 100), Err(AuthError::Replay));
        for seq in [103, 101, 102, 200, 150, 137] {
            assert_eq!(w.accept(1, seq), Ok(()), "seq {seq}");
            assert_eq!(w.accept(1, seq), Err(AuthError::Replay), "seq {seq} twice");
        }
        assert_eq!(w.accept(1, 136), Err(AuthError::Replay), "below the window");
        assert_eq!(w.accept(0, 500), Err(AuthError::Replay), "older boot");
        assert_eq!(w.accept(2, 1), Ok(()), "newer boot restarts the window");
        assert_eq!(
            w.accept(1, 201),
            Err(AuthError::Replay),
            "old boot after the restart"
        );
    }
}
