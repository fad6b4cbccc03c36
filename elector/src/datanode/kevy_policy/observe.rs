//! What a poll's readings of kevy mean (docs/architecture.md §kevy): the
//! position and stream the elector reports, whether to pad past stale
//! acknowledgements, and the acknowledgement nudger's inputs.

use super::{Clock, KevyPolicy};
use crate::core::Millis;
use crate::datanode::ack_nudge;
use crate::datanode::kevy_pad::{padding, Padding, MAX_GAP};
use crate::datanode::kevy_stream::{parse_reading, FileHeld, Reading};
use crate::datanode::ReplicationInfo;

/// How long after a clamp is counted the watchdog's quiesce may have been
/// sent before it (its command, then its count).
const CLAMP_BEFORE_COUNT_MS: Millis = 1_000;

/// What one poll read.
#[derive(Debug, Clone)]
pub struct KevyReading {
    /// `INFO replication` with `INFO server`'s identity.
    pub info: ReplicationInfo,
    /// `REPL.TOKEN` in the same pipeline (`-LOADING` while a snapshot loads).
    pub token: Option<redis::Value>,
    /// `INFO replication` again after the token, in the same pipeline.
    /// Another client's `REPLICAOF` (an operator's, the watchdog's) can
    /// land between `INFO` and the token: a reading that says `master`
    /// beside a replica's token `[0, 0]` would name a feed generation the
    /// node never served, and the core would read "the data node left the
    /// stream it started" (a rehearsal of 0b44f29). Only a token between
    /// two readings of the same role is read as that role's.
    pub info_after: Option<ReplicationInfo>,
    /// The watchdog's clamp count (`None`: no counter file configured).
    pub watchdog_clamps: Option<u64>,
    /// What the shared position file holds now (raw), read before the
    /// pipeline (whose `SCRIPT EXISTS` asked about its mark).
    pub position_file: Option<String>,
    /// The shas the pipeline's `SCRIPT EXISTS` asked about
    /// ([`KevyPolicy::marks_to_check`]), and its answer (`None`: not
    /// asked, or unreadable).
    pub marks_asked: Vec<String>,
    pub marks_answer: Option<Vec<bool>>,
}

/// What the nudger is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NudgeView {
    /// The node is the writable primary we made, a master now.
    pub armed: bool,
    /// A replica has not acknowledged all the node holds (wake the nudger).
    pub due: bool,
    /// What every replica acknowledged by this `INFO`, once the view has
    /// been ours for long enough to be trusted.
    pub acked_by_all: Option<u64>,
    pub replicas: u64,
}

/// What the executor reports and does after a poll.
#[derive(Debug, Clone)]
pub struct KevyView {
    /// `INFO` with the position, link and stream the elector reports.
    pub info: ReplicationInfo,
    /// Frames to write past acknowledgements kept from an earlier feed
    /// generation (`kevy_pad`), when this is the writable primary we made.
    pub pad_frames: u64,
    pub nudge: NudgeView,
    /// A process mark to `SCRIPT LOAD` (we have none in this process);
    /// hand its sha to [`KevyPolicy::mark_loaded`].
    pub load_mark: Option<String>,
}

impl KevyPolicy {
    /// Reads one poll; returns what to report and do.
    pub fn observed(&mut self, reading: KevyReading, clock: Clock) -> KevyView {
        let KevyReading {
            info,
            token,
            info_after,
            watchdog_clamps,
            position_file,
            marks_asked,
            marks_answer,
        } = reading;
        let present = match &mut self.marks {
            Some(marks) => marks.answered(&marks_asked, marks_answer.as_deref()),
            None => Vec::new(),
        };
        self.stream.marks_confirmed(present.clone());
        let (mut info, token) = settled_role(info, token, info_after);
        // Each mark found is in this process and no other (`kevy_mark`).
        info.process_names = present;
        let clamped = self.note_watchdog_clamps(watchdog_clamps, clock.mono);
        self.note_runner_ended_by_others(&info, clamped);
        info.runners_ended_by_others = self.runners_ended_by_others;
        info.watchdog_clamps = watchdog_clamps;
        self.stream.identify(info.identity.as_deref());
        let reading = token.as_ref().and_then(|t| parse_reading(&info, t));
        if let Some(reading) = &reading {
            let unnamed = self.unnamed.as_mut();
            if unnamed.is_some_and(|u| u.still_unnamed(reading, clock.mono)) {
                if let Reading::Primary { offset, .. } = *reading {
                    info.offset = offset;
                }
                info.link_up = false;
                info.stream = None;
            } else {
                self.unnamed = None;
                self.report_position(&mut info, reading, position_file.as_deref(), clock.wall);
            }
        } else {
            // Without the token nothing names the stream (§6.10).
            info.stream = None;
        }
        // A link to an upstream someone else set is no join of ours: the
        // stream's acknowledged writes may not be there (§6.10, "A
        // replica's tail").
        if let Some((_, host, port)) = &self.following {
            if !info.follows(host, *port) {
                info.link_up = false;
            } else if info.link_up && self.ended_unread {
                // Joined again to an upstream we set: the new runner's full
                // sync holds what the ended one acknowledged (`watch`).
                self.ended_unread = false;
            }
        }
        self.upstream_seen = match (&info.master_host, info.master_port) {
            (Some(host), Some(port)) if !info.is_master() => Some((host.clone(), port)),
            _ => None,
        };
        self.hold.observed(info.is_master(), clock.mono);
        let pad_frames = self.padding_to_write(&info);
        let nudge = self.nudge_view(&info, clock.mono);
        let load_mark = self.marks.as_mut().and_then(|m| m.to_load());
        KevyView {
            info,
            pad_frames,
            nudge,
            load_mark,
        }
    }

    /// The runner's own position and its feed generation as the stream
    /// (`kevy_stream`), from a reading that names its generation.
    fn report_position(
        &mut self,
        info: &mut ReplicationInfo,
        reading: &Reading,
        position_file: Option<&str>,
        wall: u64,
    ) {
        let file = position_file.and_then(FileHeld::parse);
        let reported = self
            .stream
            .observe_at(reading, info.offset, file.as_ref(), wall);
        info.offset = reported.offset;
        info.link_up &= reported.link_joined;
        info.stream = reported.generation.map(|g| format!("kevy-feed-{g}"));
    }

    /// Counts a runner we set that someone else ended (an operator's
    /// `REPLICAOF` elsewhere, a promotion by hand): the node was read
    /// following the upstream we set, and now is not (§6.10, "A replica's
    /// tail"). Its token names no feed from then on, so how far the ended
    /// runner got, the most it acknowledged, was read a poll ago at best.
    /// The watchdog's clamp (`clamped`: its count rose in this reading)
    /// is not counted: it reads the runner's position as it detaches it
    /// (the floor hint).
    fn note_runner_ended_by_others(&mut self, info: &ReplicationInfo, clamped: bool) {
        let Some((_, host, port)) = &self.following else {
            self.following_seen = false;
            self.check_resumed(info, clamped);
            return;
        };
        if info.follows(host, *port) {
            self.following_seen = true;
            return;
        }
        if std::mem::take(&mut self.following_seen) && !clamped {
            self.count_runner_ended_by_others();
            tracing::warn!(
                role = %info.role, upstream = ?info.master_host, port = ?info.master_port,
                "kevy: someone else moved this replica off the upstream the elector set; how far its runner got was last read a poll ago, so the elector votes as if it held the whole stream until it joins it again"
            );
        }
    }

    /// Checks a reading against the watch an earlier elector kept
    /// (`watch`): the node no longer following that upstream, and the
    /// watchdog not the one that moved it, is a runner someone else ended
    /// while no elector of ours was looking, counted as in
    /// [`Self::note_runner_ended_by_others`].
    pub(super) fn check_resumed(&mut self, info: &ReplicationInfo, clamped: bool) {
        let Some(watched) = &self.resumed else {
            return;
        };
        if info.follows(&watched.host, watched.port) {
            return;
        }
        let watched = self.resumed.take().expect("checked above");
        if clamped {
            return;
        }
        self.count_runner_ended_by_others();
        tracing::warn!(
            role = %info.role, upstream = ?info.master_host, port = ?info.master_port,
            watched = %watched.host, watched_port = watched.port,
            "kevy: this replica left the upstream an earlier elector set while no elector watched it; how far its runner got is unknown, so the elector votes as if it held the whole stream until it joins it again"
        );
    }

    /// The first command of ours since an earlier elector's watch was
    /// resumed moves the node: its pipeline's reading before the move is
    /// checked against the watch, which then ends (the pipeline reads the
    /// position of the runner our command ends). An unreadable reading
    /// counts as a move by someone else: what the runner got is unknown.
    pub(super) fn check_resumed_before_our_move(&mut self, replication: Option<&str>) {
        if self.resumed.is_none() {
            return;
        }
        let info = replication
            .and_then(|text| ReplicationInfo::parse(text).ok())
            .unwrap_or_default();
        self.check_resumed(&info, false);
        self.resumed = None;
    }

    /// One more runner someone else ended, kept in the watch file until
    /// the node joins an upstream we set again (`watch`).
    pub(super) fn count_runner_ended_by_others(&mut self) {
        self.runners_ended_by_others += 1;
        self.ended_unread = true;
    }

    /// An increase of the watchdog's count on a node we read: a quiesce we
    /// did not set may be in force, its thread younger than our last read
    /// (less the moment between its command and its count).
    /// Returns whether the count rose in this reading (the watchdog clamped
    /// the node since our last read).
    fn note_watchdog_clamps(&mut self, count: Option<u64>, now: Millis) -> bool {
        let Some(count) = count else { return false };
        let rose = self.watchdog_clamps_seen.is_some_and(|seen| count > seen);
        if rose {
            let read_at = self.watchdog_clamps_read_at.unwrap_or(now);
            self.quiesce
                .set_elsewhere(read_at.saturating_sub(CLAMP_BEFORE_COUNT_MS));
        }
        self.watchdog_clamps_seen = Some(count);
        self.watchdog_clamps_read_at = Some(now);
        rose
    }

    /// Logs a replica acknowledgement kept from an earlier feed generation
    /// once per occurrence, and says how many frames to pad past it while
    /// this is the writable primary we made (`kevy_pad`).
    fn padding_to_write(&mut self, info: &ReplicationInfo) -> u64 {
        let padding = padding(info);
        let stale = padding != Padding::NotNeeded;
        if stale && !self.stale_logged {
            tracing::error!(
                offset = info.offset,
                replica_acked = info.highest_replica_ack,
                window_ms = self.hold.window(),
                "kevy counts a replica acknowledgement from before its last promotion: WAIT may \
                 acknowledge writes no replica has until the offset passes it (the elector pads \
                 the feed past it while the node is its writable primary); was it demoted by hand, \
                 or is kevy's [replication] reconnect_window_ms above data_node.kevy_reconnect_window_ms?"
            );
        }
        self.stale_logged = stale;
        self.stale_far_logged &= stale;
        if !self.ours_and_writable() {
            return 0;
        }
        match padding {
            Padding::NotNeeded => 0,
            Padding::Frames(frames) => frames,
            Padding::TooFar { gap } => {
                if !self.stale_far_logged {
                    self.stale_far_logged = true;
                    tracing::error!(
                        gap,
                        max_gap = MAX_GAP,
                        "a replica acknowledgement kevy kept from an earlier feed generation is too far \
                         ahead to pad past: WAIT over-counts until the offset passes it; restarting this \
                         kevy (its records live in memory) ends it"
                    );
                }
                0
            }
        }
    }

    /// The nudger's inputs: armed on the writable primary we made; due when
    /// a replica has not acknowledged all the node holds (an online one
    /// behind the feed, or a connected one not online yet while the feed
    /// holds anything: kevy lists a freshly synced replica as `syncing`
    /// until its first acknowledgement); the `INFO` view of what all
    /// replicas acknowledged, once it has been ours for
    /// [`ack_nudge::VIEW_TRUSTED_AFTER`] (a tick after a promotion it can
    /// describe the node's previous role).
    fn nudge_view(&mut self, info: &ReplicationInfo, now: Millis) -> NudgeView {
        let armed = self.settings.ack_nudge && self.ours_and_writable() && info.is_master();
        let online_behind = info
            .slowest_replica_ack
            .is_some_and(|acked| acked < info.offset);
        let not_online_yet = info
            .connected_replicas
            .is_some_and(|connected| connected > info.online_replicas);
        let due = armed && (online_behind || (not_online_yet && info.offset > 0));
        self.nudge_armed_since = armed.then(|| self.nudge_armed_since.unwrap_or(now));
        let trusted = self.nudge_armed_since.is_some_and(|since| {
            now.saturating_sub(since) >= ack_nudge::VIEW_TRUSTED_AFTER.as_millis() as Millis
        });
        NudgeView {
            armed,
            due,
            acked_by_all: ack_nudge::acked_by_all(info).filter(|_| trusted),
            replicas: info.connected_replicas.unwrap_or(0),
        }
    }
}

/// The reading to go by when `INFO replication` was read again after the
/// token: if the role changed in between (someone else's `REPLICAOF`), the
/// later role without the token, which may be either role's; nothing then
/// names the stream for this poll (the next one reads it settled).
fn settled_role(
    info: ReplicationInfo,
    token: Option<redis::Value>,
    after: Option<ReplicationInfo>,
) -> (ReplicationInfo, Option<redis::Value>) {
    match after {
        Some(after) if !after.same_role_as(&info) => {
            tracing::info!(
                before = %info.role, after = %after.role, upstream = ?after.master_host,
                "kevy: the role changed while the position was read; this poll names no stream"
            );
            let identity = info.identity;
            (ReplicationInfo { identity, ..after }, None)
        }
        _ => (info, token),
    }
}
