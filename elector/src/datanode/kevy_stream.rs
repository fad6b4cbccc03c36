//! Where a kevy's data stands in the feed it last took part in: the offset
//! the elector offers as a candidate and judges offers against as a voter
//! (protocol §4.3, §5.2; docs/architecture.md §kevy "The offset a kevy
//! offers").
//!
//! kevy 7.0.0's `INFO` `slave_repl_offset` is not that number. It is the
//! highest offset any replication runner of the process reported at a
//! heartbeat, over every feed generation the process ever followed
//! (offsets restart at 0 with each promotion), and it moves once a second.
//! So a replica that joined a new generation and was cut off early still
//! reports an older generation's larger offset, and won an election against
//! a holder of acknowledged writes (chaos seed 2126, 5 nodes: it offered
//! 1532, the holder had 1431); and a voter reports less than it has
//! acknowledged (acknowledgements go out every 100 ms, heartbeats once a
//! second).
//!
//! `REPL.TOKEN` on a replica answers the current runner's upstream feed
//! generation (0 until it has heard the upstream's first heartbeat) and its
//! applied offset, the number kevy acknowledges with, and `-LOADING` while a
//! full resync loads. Every `REPLICAOF` replaces the runner and both restart
//! at 0. So:
//! - a replica has *joined* its upstream's feed once the runner has heard
//!   the upstream (generation not 0), its snapshot is swapped in (no
//!   `-LOADING`; kevy ships one on every `REPLICAOF`, the swap is atomic) and
//!   its offset has reached what the upstream held when we pointed it there
//!   ([`UpstreamAt`]; given up after [`FLOOR_GRACE_MS`]); only then is its
//!   offset reported and its link reported up (the core claims the new
//!   stream on a link up, §4.3);
//! - the position is read in the same pipeline as every `REPLICAOF`, just
//!   before it ends the runner, and held while the node follows nobody or
//!   has not joined yet;
//! - the held position is written to a file beside the watchdog's clamp
//!   count, so the watchdog's `REPLICAOF` (another process, while the
//!   elector is frozen) does not lose it.
//!
//! This tracker is pure: the wall clock (shared with the watchdog, another
//! process) comes in with every call, the shared file's contents come in
//! with each observation, and what to write back goes out
//! ([`StreamPosition::take_write`]); the executor (`kevy.rs`) does the I/O.
//!
//! What is left: an acknowledgement the runner sends between the read and
//! the `REPLICAOF` of the same pipeline (microseconds, against a 100 ms
//! acknowledgement cadence) is not counted; and with no position held at all
//! (an elector restarted while its kevy follows nobody) the old `INFO`
//! number is the fallback until the node joins a feed again (protocol
//! §6.2.1, "truthful positions").

use super::info::parse_identity;
use super::kevy_mark::is_sha;
use super::{ReplicationInfo, NOWHERE};
use std::path::PathBuf;

/// What `INFO replication` and `REPL.TOKEN`, read back to back, said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reading {
    /// A primary at this offset of its own feed (of this generation, when
    /// its token named one).
    Primary {
        generation: Option<u64>,
        offset: u64,
    },
    /// A replica: the runner's upstream generation and applied offset,
    /// whether a full resync is loading, and whether it points anywhere
    /// (a replica of [`super::NOWHERE`] follows nobody).
    Replica {
        generation: u64,
        offset: u64,
        syncing: bool,
        follows_someone: bool,
    },
}

/// How long a runner that has heard its upstream, loaded its snapshot and
/// is short only of the floor waits before the floor is dropped: three of
/// kevy's heartbeats, so a real floor is reached first.
const FLOOR_GRACE_MS: u64 = 3_000;

/// A runner that moved to another feed generation by itself: no
/// `REPLICAOF` of ours since it joined the one before (it reconnected on
/// its own to whatever process now holds its upstream's address, and took
/// that feed's snapshot). kevy 7.0.0 then reports the new generation with
/// the old one's applied offset until its next acknowledgement tick: the
/// adapter contract saw `(new, 3)` on real kevy with an empty keyspace for
/// about a second, then `(new, 0)` (docs/protocol.md §6.11). Believed, that
/// offset claims writes the node never received in the new stream, and
/// its drop looks like a restart (§6.8). It is not believed until it
/// changes, is 0, or [`FLOOR_GRACE_MS`] has passed; meanwhile nothing is
/// placed (the node's data is no longer the old generation's either).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ResyncedByItself {
    generation: u64,
    offset: u64,
    since_ms: u64,
}

/// Where a primary's feed was when we pointed a replica at it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UpstreamAt {
    pub offset: u64,
    /// Its feed generation, when read from its `REPL.TOKEN`.
    pub generation: Option<u64>,
}

impl UpstreamAt {
    /// No floor: a replica re-pointed at the primary it already follows.
    pub const NONE: UpstreamAt = UpstreamAt {
        offset: 0,
        generation: None,
    };

    /// A primary's position from its `INFO` (`info.is_master()`) and its
    /// `REPL.TOKEN` (`[generation, next offset]`, live). For one tick after
    /// a promotion both may still describe the previous feed: the token
    /// then names the old generation, so the floor binds no runner of the
    /// new one. Without a token, `INFO`'s offset, generation unknown.
    pub(crate) fn of_primary(info: &ReplicationInfo, token: Option<&redis::Value>) -> UpstreamAt {
        let pair = match token {
            Some(redis::Value::Array(pair)) if pair.len() == 2 => {
                token_int(&pair[0]).zip(token_int(&pair[1]))
            }
            _ => None,
        };
        match pair {
            // The lower of the two: `INFO`'s may lag a tick, or describe
            // the previous feed (higher); the token has been seen one above
            // what the feed then reached.
            Some((generation, offset)) => UpstreamAt {
                offset: offset.min(info.offset),
                generation: Some(generation),
            },
            None => UpstreamAt {
                offset: info.offset,
                generation: None,
            },
        }
    }
}

/// The live offset of a primary's feed from its `REPL.TOKEN`
/// (`[generation, next offset]`; the acknowledgement nudger brackets its
/// frames with it).
pub(crate) fn primary_feed_offset(token: &redis::Value) -> Option<u64> {
    match token {
        redis::Value::Array(pair) if pair.len() == 2 => token_int(&pair[1]),
        _ => None,
    }
}

/// The generation of a primary's feed from its `REPL.TOKEN` (the
/// acknowledgement nudger's memory of the feed holds for one generation).
pub(crate) fn primary_feed_generation(token: &redis::Value) -> Option<u64> {
    match token {
        redis::Value::Array(pair) if pair.len() == 2 => token_int(&pair[0]),
        _ => None,
    }
}

/// One number of a `REPL.TOKEN` reply.
fn token_int(v: &redis::Value) -> Option<u64> {
    match v {
        redis::Value::Int(i) => u64::try_from(*i).ok(),
        _ => None,
    }
}

/// A position and when it was taken (milliseconds since the epoch; the
/// elector and the watchdog share the host's clock), with the feed
/// generation it is in when known (the stream, protocol §6.10).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Held {
    pub(crate) generation: Option<u64>,
    pub(crate) offset: u64,
    pub(crate) at_ms: u64,
}

/// The shared file's contents (`process_id offset unix_ms [generation|-
/// [mark]]`): whose kevy process, the position, and the process mark
/// confirmed in the pipeline that read it ([`super::kevy_mark`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileHeld {
    pub(crate) identity: String,
    pub(crate) held: Held,
    pub(crate) mark: Option<String>,
}

impl FileHeld {
    pub(crate) fn parse(text: &str) -> Option<FileHeld> {
        let mut parts = text.split_whitespace();
        let (identity, offset, at_ms) = (parts.next()?, parts.next()?, parts.next()?);
        let generation = parts.next().and_then(|g| g.parse().ok());
        let mark = parts.next().filter(|m| is_sha(m)).map(str::to_string);
        Some(FileHeld {
            identity: identity.to_string(),
            held: Held {
                generation,
                offset: offset.parse().ok()?,
                at_ms: at_ms.parse().ok()?,
            },
            mark,
        })
    }

    pub(crate) fn render(&self) -> String {
        let generation = self
            .held
            .generation
            .map_or_else(|| "-".to_string(), |g| g.to_string());
        let mark = self
            .mark
            .as_deref()
            .map(|m| format!(" {m}"))
            .unwrap_or_default();
        format!(
            "{} {} {} {generation}{mark}\n",
            self.identity, self.held.offset, self.held.at_ms
        )
    }

    /// The mark the entry was written under, if any.
    pub(crate) fn mark(&self) -> Option<&str> {
        self.mark.as_deref()
    }
}

/// The shared file's text without its mark (`None`: it has none, nothing
/// to write): what a `REPLICAOF` that points the node anywhere but nowhere
/// leaves behind first, since the node may then take another stream's data
/// under the same process mark ([`super::kevy_mark`]).
pub fn unvouched(text: &str) -> Option<String> {
    let mut file = FileHeld::parse(text)?;
    file.mark.take()?;
    Some(file.render())
}

/// The adapter's memory of the node's position.
#[derive(Debug, Default)]
pub(crate) struct StreamPosition {
    held: Option<Held>,
    /// While following an upstream we pointed the node at: the offset that
    /// upstream had then, which a joined runner has reached. It applies to
    /// the first feed generation the runner hears (`floor_generation`) and
    /// until it has joined: an upstream promoted again restarts at 0.
    join_floor: u64,
    floor_generation: Option<u64>,
    /// Since when the runner has had everything but the floor.
    short_of_floor_since_ms: Option<u64>,
    /// The kevy process the held position belongs to (`process_id`).
    identity: Option<String>,
    /// The `INFO` fallback was used and said so (once per process).
    fallback_logged: bool,
    /// When this process started keeping the position (wall clock): the
    /// shared file is trusted only if written since (see [`Self::trusted`]).
    since_ms: u64,
    /// A held position to write to the shared file (`<data_dir>/kevy-position`).
    to_write: Option<FileHeld>,
    /// The process marks the reading at hand found in the process (ours
    /// first, when it is there).
    marks_present: Vec<String>,
    /// The generation the runner last joined, since our last `REPLICAOF`.
    joined_generation: Option<u64>,
    /// A move to another generation by itself, its offset not believed yet.
    resynced: Option<ResyncedByItself>,
    /// A test-only switch: believe such a runner's offset at once, as the
    /// adapter did before the contract found it (`false` everywhere else).
    believe_a_resync_by_itself: bool,
}

/// The offset to report and whether the node's link to its upstream counts
/// as up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Reported {
    pub(crate) offset: u64,
    pub(crate) link_joined: bool,
    /// The feed generation `offset` is in; `None` when not known (the
    /// `INFO` fallback, or a position held from before generations were
    /// read).
    pub(crate) generation: Option<u64>,
}

impl StreamPosition {
    /// A tracker that trusts the shared file only for positions written
    /// since `since_ms` (wall clock): this process's own start.
    pub(crate) fn since(since_ms: u64) -> StreamPosition {
        StreamPosition {
            since_ms,
            ..StreamPosition::default()
        }
    }

    /// With the test-only switch of `KevySettings` set as given.
    pub(crate) fn believing_a_resync_by_itself(self, believe: bool) -> StreamPosition {
        StreamPosition {
            believe_a_resync_by_itself: believe,
            ..self
        }
    }

    /// Another process answers now (the tether, §6.8): nothing held or
    /// read of the old one counts, and the shared file is trusted again only
    /// for what is written from `now_wall` on (a kevy in a container is
    /// process 1 at every start, so its id cannot tell the file's owner).
    pub(crate) fn new_incarnation(&mut self, now_wall: u64) {
        *self = StreamPosition {
            believe_a_resync_by_itself: self.believe_a_resync_by_itself,
            ..StreamPosition::since(now_wall)
        };
    }

    /// The process marks the next reading (a poll, or a `REPLICAOF`'s
    /// pipeline) found in the process, ours first ([`super::kevy_mark`]).
    pub(crate) fn marks_confirmed(&mut self, present: Vec<String>) {
        self.marks_present = present;
    }

    /// The position to write to the shared file, once.
    pub(crate) fn take_write(&mut self) -> Option<FileHeld> {
        self.to_write.take()
    }

    /// The data node answered as `identity`: a different process holds
    /// nothing we knew.
    pub(crate) fn identify(&mut self, identity: Option<&str>) {
        let Some(identity) = identity else { return };
        if self.identity.as_deref() != Some(identity) {
            if self.identity.is_some() {
                self.held = None;
                self.joined_generation = None;
                self.resynced = None;
            }
            self.identity = Some(identity.to_string());
        }
    }

    fn joined(&self, reading: &Reading) -> Option<(Option<u64>, u64)> {
        match *reading {
            Reading::Primary { generation, offset } => Some((generation, offset)),
            Reading::Replica {
                generation,
                offset,
                syncing,
                follows_someone,
            } => {
                let floor = match self.floor_generation {
                    Some(g) if g != generation => 0,
                    _ => self.join_floor,
                };
                (follows_someone && generation != 0 && !syncing && offset >= floor)
                    .then_some((Some(generation), offset))
            }
        }
    }

    /// A poll's reading at `now` (wall clock, the clock [`FLOOR_GRACE_MS`]
    /// and the shared file are counted on): what to report instead of
    /// `INFO`'s offset (`info_offset`, used only when nothing is held);
    /// `file` is what the shared file holds now; the process marks the same
    /// reading found are [`Self::marks_confirmed`]'s.
    pub(crate) fn observe_at(
        &mut self,
        reading: &Reading,
        info_offset: u64,
        file: Option<&FileHeld>,
        now: u64,
    ) -> Reported {
        if let Reading::Replica { generation, .. } = *reading {
            if generation != 0 && self.floor_generation.is_none() {
                self.floor_generation = Some(generation);
            }
        }
        self.give_up_a_floor_never_reached(reading, now);
        if !self.believed(reading, now) {
            return Reported {
                offset: info_offset,
                link_joined: false,
                generation: None,
            };
        }
        if let Some((generation, offset)) = self.joined(reading) {
            self.joined_generation = match reading {
                Reading::Replica { .. } => generation,
                Reading::Primary { .. } => None,
            };
            self.join_floor = 0;
            self.short_of_floor_since_ms = None;
            self.held = Some(Held {
                generation,
                offset,
                at_ms: now,
            });
            return Reported {
                offset,
                link_joined: true,
                generation,
            };
        }
        let (generation, offset) = match self.newest_held(file, reading) {
            Some(held) => (held.generation, held.offset),
            None => {
                if !self.fallback_logged {
                    self.fallback_logged = true;
                    tracing::warn!(
                        info_offset,
                        "kevy: no position held for a node that has not joined a feed; reporting INFO's slave_repl_offset, which may be another feed generation's (docs/architecture.md §kevy)"
                    );
                }
                (None, info_offset)
            }
        };
        Reported {
            offset,
            link_joined: false,
            generation,
        }
    }

    /// Whether the runner's offset may be taken as its position in the
    /// generation it names ([`ResyncedByItself`]): `false` while it is the
    /// offset a move by itself brought over from the generation before.
    fn believed(&mut self, reading: &Reading, now: u64) -> bool {
        let Reading::Replica {
            generation,
            offset,
            syncing: false,
            follows_someone: true,
        } = *reading
        else {
            return true;
        };
        if generation == 0 || offset == 0 || self.believe_a_resync_by_itself {
            return true;
        }
        let moved_from = match self.resynced {
            Some(r) if r.generation == generation => {
                if offset != r.offset || now.saturating_sub(r.since_ms) >= FLOOR_GRACE_MS {
                    self.resynced = None;
                    return true;
                }
                return false;
            }
            // Moved again before its offset was believed.
            Some(r) => r.generation,
            None => match self.joined_generation {
                Some(joined) if joined != generation => joined,
                _ => return true,
            },
        };
        tracing::warn!(
            from = moved_from,
            to = generation,
            offset,
            "kevy: the replica moved to another feed generation by itself; its offset is the old one's until kevy's next acknowledgement tick and is not believed until it changes"
        );
        // What it held of the old generation was replaced by the new feed's
        // snapshot: nothing held or written of it before now counts.
        self.held = None;
        self.joined_generation = None;
        self.since_ms = self.since_ms.max(now);
        self.resynced = Some(ResyncedByItself {
            generation,
            offset,
            since_ms: now,
        });
        false
    }

    /// A runner that has everything but the floor for [`FLOOR_GRACE_MS`]
    /// is taken as joined: kevy's reading of a just-promoted primary can
    /// name an offset its feed then does not reach (seen: 1, then 0 a few
    /// milliseconds later, same generation, no write), and a floor never
    /// reached would keep the link down until the next write.
    fn give_up_a_floor_never_reached(&mut self, reading: &Reading, now: u64) {
        let Reading::Replica {
            generation,
            offset,
            syncing,
            follows_someone,
        } = *reading
        else {
            return;
        };
        let binding = self.floor_generation == Some(generation) && self.join_floor > offset;
        if !(follows_someone && generation != 0 && !syncing && binding) {
            self.short_of_floor_since_ms = None;
            return;
        }
        let since = *self.short_of_floor_since_ms.get_or_insert(now);
        if now.saturating_sub(since) >= FLOOR_GRACE_MS {
            tracing::warn!(
                floor = self.join_floor,
                offset,
                generation,
                "kevy: replica never reached the offset its primary reported when it was pointed there; counting it as joined"
            );
            self.join_floor = 0;
        }
    }

    /// What the pipeline read just before a `REPLICAOF` ended the runner:
    /// held (and written for the watchdog or a restarted elector) if the
    /// node had joined a feed; the runner that follows starts over. Written
    /// with `mark`, the process mark that same pipeline confirmed in the
    /// process, if any: the entry then counts across our restart
    /// ([`super::kevy_mark`]). The caller hands it over rather than this
    /// taking whatever mark a reading left behind, so an entry can only
    /// carry the mark of the pipeline that read its position.
    pub(crate) fn leaving_at(&mut self, reading: Option<&Reading>, mark: Option<&str>, now: u64) {
        if let Some((generation, offset)) = reading.and_then(|r| self.joined(r)) {
            let held = Held {
                generation,
                offset,
                at_ms: now,
            };
            self.held = Some(held);
            if let Some(identity) = &self.identity {
                self.to_write = Some(FileHeld {
                    identity: identity.clone(),
                    held,
                    mark: mark.map(str::to_string),
                });
            }
        }
        self.join_floor = 0;
        self.floor_generation = None;
        self.short_of_floor_since_ms = None;
        self.joined_generation = None;
        self.resynced = None;
    }

    /// What the pipeline of a `REPLICAOF` read first (`INFO server`,
    /// `INFO replication`, `REPL.TOKEN`, `INFO replication` again, back to
    /// back; the executor runs it): whose kevy process this is, and the
    /// runner's position just before the `REPLICAOF` replaced it (held by
    /// [`Self::leaving_at`]). A role or upstream changed by someone else
    /// between the two `INFO`s pairs the token with a role of another
    /// moment (a replica's `[0, 0]` read as a primary's feed, or a hand
    /// promotion's new feed read as the runner's): nothing is read then,
    /// as in a poll (docs/protocol.md §9). A reading of an unexpected shape
    /// is said in a warning and changes nothing.
    pub(crate) fn read_in_pipeline(
        &mut self,
        server: Option<&str>,
        replication: Option<&str>,
        token: Option<&redis::Value>,
        replication_after: Option<&str>,
        mark: Option<&str>,
        now: u64,
    ) -> Option<Reading> {
        if let Some(server) = server {
            self.identify(parse_identity(server).as_deref());
        }
        let info = replication.and_then(|t| ReplicationInfo::parse(t).ok());
        let after = replication_after.and_then(|t| ReplicationInfo::parse(t).ok());
        let straddled = info
            .as_ref()
            .zip(after.as_ref())
            .is_some_and(|(before, after)| !after.same_role_as(before));
        let reading = if straddled {
            tracing::info!(
                ?replication, ?replication_after,
                "kevy: the role changed just before our REPLICAOF; the position it ended is not read"
            );
            None
        } else {
            let reading = info
                .as_ref()
                .zip(token)
                .and_then(|(info, token)| parse_reading(info, token));
            if reading.is_none() {
                tracing::warn!(
                    ?server,
                    ?replication,
                    ?token,
                    "kevy: unexpected INFO/REPL.TOKEN reply; position not read"
                );
            }
            reading
        };
        self.leaving_at(reading.as_ref(), mark, now);
        reading
    }

    /// The node was pointed at an upstream whose feed was at `upstream`:
    /// the offset counts as a floor in that feed generation only. Without
    /// one (an `INFO` reading), in the first generation the runner hears.
    pub(crate) fn following(&mut self, upstream: UpstreamAt) {
        self.join_floor = upstream.offset;
        self.floor_generation = upstream.generation;
        self.short_of_floor_since_ms = None;
    }

    /// The newer of ours and the file's (written by whoever ran the last
    /// `REPLICAOF` with a joined runner: us, the watchdog while we were
    /// silent, or the elector before our restart), for this kevy process
    /// only.
    fn newest_held(&self, file: Option<&FileHeld>, reading: &Reading) -> Option<Held> {
        let from_file = file
            .filter(|f| self.trusted(f) || vouched(f, reading, &self.marks_present))
            .map(|f| f.held);
        match (self.held, from_file) {
            (Some(a), Some(b)) => Some(if b.at_ms > a.at_ms { b } else { a }),
            (a, b) => a.or(b),
        }
    }

    /// The file's position counts if written since we started, for the kevy
    /// process we have seen. Across our own restart only by its mark
    /// ([`vouched`]): kevy has no run id, and a kevy restarted with its
    /// container has a new process with the same process id (and perhaps
    /// none of the data).
    fn trusted(&self, file: &FileHeld) -> bool {
        Some(file.identity.as_str()) == self.identity.as_deref() && file.held.at_ms >= self.since_ms
    }
}

/// An entry from before our start counts when the pipeline that read it
/// confirmed a process mark that this reading finds in the process now
/// (the very process held that position), and the node follows nobody:
/// every `REPLICAOF` towards anyone strips the mark first, so it has taken
/// no other stream's data since ([`super::kevy_mark`]).
fn vouched(file: &FileHeld, reading: &Reading, marks_present: &[String]) -> bool {
    let follows_nobody = matches!(
        reading,
        Reading::Replica {
            follows_someone: false,
            syncing: false,
            ..
        }
    );
    follows_nobody
        && file
            .mark
            .as_ref()
            .is_some_and(|m| marks_present.contains(m))
}

/// The file, in `data_dir`, where the elector and the watchdog keep the
/// position of their kevy (`process_id offset unix_ms`).
pub(crate) fn position_path(data_dir: &std::path::Path) -> PathBuf {
    data_dir.join("kevy-position")
}

/// Reads `INFO replication` and then `REPL.TOKEN` as kevy 7.0.0 answers
/// them: a replica's token is `[generation, offset]`, or `-LOADING` while a
/// full resync loads; a primary's (one shard) `[generation, next offset]`. (`ROLE` will not do: after `REPLICAOF NO ONE` it
/// still names the upstream of kevy's configuration file.)
pub(crate) fn parse_reading(info: &ReplicationInfo, token: &redis::Value) -> Option<Reading> {
    use redis::Value;
    let int = token_int;
    if info.is_master() {
        // The token's offset is the feed's, live; `INFO`'s is refreshed
        // once per tick (100 ms), so a switchover's drained primary read
        // there can look caught up with a target that lacks its last
        // writes (`tests/loopback_cluster.rs`, the kevy switchover).
        let generation = match token {
            Value::Array(pair) if pair.len() == 2 => token_int(&pair[0]),
            _ => None,
        };
        return Some(Reading::Primary {
            generation,
            offset: primary_feed_offset(token).unwrap_or(info.offset),
        });
    }
    let follows_someone = !info.follows(NOWHERE.0, NOWHERE.1);
    match token {
        Value::Array(pair) => Some(Reading::Replica {
            generation: int(pair.first()?)?,
            offset: int(pair.get(1)?)?,
            syncing: false,
            follows_someone,
        }),
        Value::ServerError(e) if e.code() == "LOADING" => Some(Reading::Replica {
            generation: 0,
            offset: 0,
            syncing: true,
            follows_someone,
        }),
        _ => None,
    }
}

#[cfg(test)]
#[path = "kevy_stream_tests.rs"]
mod tests;
