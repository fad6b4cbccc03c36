//! Durable writes and what happens when one fails (docs/protocol.md §5.2).

use super::types::{Notice, Reason};
use super::Core;

impl Core {
    pub(super) fn on_persisted(&mut self, seq: u64) {
        // The shell releases what waited for this write (its `Gate`).
        self.outbox.persisted(seq);
        if self.led_unconfirmed.is_some_and(|(at, _)| at <= seq) {
            self.led_unconfirmed = None;
        }
    }

    pub(super) fn on_persist_failed(&mut self, seq: u64, error: String) {
        if self.outbox.take_background(seq) {
            // Only a risen floor waited for it (§6.10): nothing is dropped
            // and the node stays as it is; the floor is written again at
            // the next chance, and the failure is reported.
            tracing::warn!(seq, %error, "writing the floor failed; retrying");
            self.data.floor_dirty = true;
            self.data.floor_written_at = Some(self.now);
            self.notify(Notice::Fault {
                what: format!("writing the floor failed: {error}"),
            });
            return;
        }
        // Whatever waited for this write must not happen: the shell drops
        // it. The in-memory state stays as it is (conservative: it only ever
        // records *more* votes than the disk). Until a retry succeeds every
        // action waits, so the node is silent and its data node keeps the
        // fence applied here; peers see it as down, which it is.
        tracing::error!(seq, %error, "persisting the election state failed");
        // A dropped data-node target must be issued again (with a new seq):
        // `sync_data_target` only emits on change, and a target that never
        // reaches the adapter never settles, so the node could never vote or
        // stand again (found by the simulator, seed 145 with switchovers).
        if self.outbox.grant_waiting.take().is_some() {
            self.target.reissue = true;
        }
        if let Some((_, before)) = self.led_unconfirmed.take() {
            // The promotion waited for this write and is dropped with it:
            // the data node was never told, so `led` says so again (§6.10).
            self.state.led = before;
        }
        self.outbox.retry_at = Some(self.now + self.cfg.timings.hb_interval_ms);
        if self.role.role() != crate::protocol::Role::Replica {
            self.become_replica(Reason::PersistFailed);
        }
        if self.primary.is(&self.cfg.node_id) {
            self.primary.resigned = Some(None);
        }
        self.backoff_until = self.now + self.cfg.timings.backoff_min_ms;
        self.notify(Notice::Fault {
            what: format!("persist failed: {error}"),
        });
    }

    /// After a failed write, writes the state again once a heartbeat passed.
    pub(super) fn retry_persist_when_due(&mut self) {
        if self.outbox.retry_at.is_some_and(|at| self.now >= at) {
            self.outbox.retry_at = None;
            self.outbox.persist();
        }
    }
}
